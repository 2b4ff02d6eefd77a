/*

Copyright (c) 2026 DTPU authors. Apache-2.0.

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Control unit: the job FSM and the LOAD and GEMM sequencers.
 *
 * IDLE -START-> CONFIG0 -> CONFIG1 (CFG_CYCLES = 2: derive counts, check -> ERR) -> LOAD, GEMM
 * or DW (dtpu_dw_seq) -> DONE (one cycle, STATUS.DONE rises) -> IDLE. A failed check or a NOP
 * ends after CONFIG1. Cycle 0 is the first CONFIG0 cycle; the job's cycle count is the number
 * of busy cycles, the cycle DONE rises.
 *
 * Global stall: every sequencer and pipeline register advances only on `adv`, which is low in
 * a busy cycle when the schedule needs an input word that is not there or the result register
 * holds a word the sink does not take. The schedule is therefore the stall-free one, shifted
 * by exactly the stall cycles: CYCLES - STALL equals the golden model's cycle count.
 *
 * GEMM: steps (pixel, tile), pixel-major; a step issues its KW words in KW consecutive cycles
 * and the next step starts P = max(KW, W) cycles later. Tile 0 takes the pixel's words from
 * s_axis_act and writes them into the activation buffer, tiles 1..NT-1 read them back.
 * Weight bank row of word w of tile t: WGT_BASE/COLS + t*KW + w.
 *
 * Prefetch (PF_COUNT > 0, GEMM and DW): a second loader on s_axis_wgt, outside the global stall.
 * From the first cycle after CONFIG it accepts a word whenever one is valid and writes it to
 * weight memory word PF_ADDR + i through the LOAD write port (LOAD and compute jobs never
 * overlap), then waits LOAD_LATENCY cycles. The job ends when the compute path and the prefetch
 * are both finished: stall-free, max(compute cycles, CFG_CYCLES + PF_COUNT + LOAD_LATENCY).
 * The activation and result streams never wait for it (it is not part of `adv`); a cycle in
 * which the compute path has finished and the prefetch waits for a word counts as a stall.
 * CONFIG refuses a range that leaves the memory or overlaps the job's own weight words
 * (ERR.WGT_RANGE), so the compute path's reads never see a word being written.
 *
 * Depthwise bank conflicts (ERR.BANK_CONFLICT, the last CONFIG check, as the golden model's
 * dw_bank_conflict): item q = (ox, g) of an output row reads activation bank
 * (ox*SX*GC + g) mod COLS; columns are served in TAP_CYCLES groups of COLS/TAP_CYCLES. A step
 * reads the banks of a window of COLS consecutive items of 0 .. 2*COLS-2, moved by a constant
 * (below), so every pair of those items is compared once and counts if a step that occurs holds
 * both, valid (q < OW*GC), in one group. The per-item banks depend on GC (<= COLS values) and
 * SX mod COLS only: small tables (docs/rtl.md has the cost).
 * With PE_PAIR, ERR.BANK_CONFLICT also when the two columns of a pair (j, j + COLS/2) would
 * issue in one cycle (the golden model's dw_pair_conflict): TAP_CYCLES 1 and OW*GC > COLS/2
 * (the first step of a row holds min(OW*GC, COLS) items; TAP_CYCLES >= 2 never serves both
 * columns of a pair in one cycle). dtpu_dw_seq's issue-time check stays as a guard.
 */
module dtpu_control #
(
    // MXU columns
    parameter COLS = 8,
    // log2 COLS
    parameter LOG_COLS = 3,
    // memory sizes (log2 words / entries)
    parameter LOG_WEIGHT_WORDS = 15,
    parameter LOG_PARAM_ENTRIES = 12,
    parameter LOG_ACT_WORDS = 12,
    // enabled precisions
    parameter [15:0] PREC_EN = 16'h007F,
    // 1: the MXU's 8-bit rows are PE pairs (columns j, j + COLS/2 on one multiplier): a DWCONV
    // job whose pairs would issue together is refused in CONFIG (header)
    parameter PE_PAIR = 0,
    // 1: the rotated depthwise layout (dtpu_dw_seq): no bank conflicts, NCHUNK*P weight rows a tap
    parameter DW_ROTATE = 0,
    // built requantization variants (bit v: RQ_VARIANT code v; contract RQ_EN): a REQUANT job
    // naming another is ERR.BAD_MODE
    parameter RQ_EN = 31
)
(
    input  wire                         clk,
    input  wire                         rst_n,

    /* Registers */
    input  wire                         start,
    /* verilator lint_off UNUSEDSIGNAL */
    input  wire [31:0]                  reg_job,
    /* verilator lint_on UNUSEDSIGNAL */
    input  wire [31:0]                  reg_load_addr,
    input  wire [31:0]                  reg_load_count,
    input  wire [31:0]                  reg_wgt_base,
    input  wire [31:0]                  reg_param_base,
    input  wire [31:0]                  reg_gemm_m,
    input  wire [31:0]                  reg_gemm_kw,
    input  wire [31:0]                  reg_gemm_nt,
    /* verilator lint_off UNUSEDSIGNAL */
    input  wire [31:0]                  reg_dw_kernel,
    input  wire [31:0]                  reg_dw_groups,
    input  wire [31:0]                  reg_dw_out,
    input  wire [31:0]                  reg_dw_stride,
    input  wire [31:0]                  reg_dw_ring,
    /* verilator lint_on UNUSEDSIGNAL */
    input  wire [31:0]                  reg_pf_addr,
    input  wire [31:0]                  reg_pf_count,

    /* Status */
    output wire                         busy,
    output wire                         done,
    output wire [3:0]                   state,
    output wire [31:0]                  err_set,
    output wire                         adv,
    output wire                         stall,
    output wire                         job_abort,

    /* Streams (handshake only; data goes straight to the datapath) */
    input  wire                         wgt_tvalid,
    input  wire                         wgt_tlast,
    output wire                         wgt_tready,
    input  wire                         act_tvalid,
    input  wire                         act_tlast,
    output wire                         act_tready,
    input  wire                         res_tvalid,
    input  wire                         res_tready,

    /* Job configuration to the datapath */
    output wire [3:0]                   cfg_prec,
    output wire [1:0]                   cfg_out_mode,
    output wire [2:0]                   cfg_variant,
    output wire [1:0]                   cfg_log_lanes,
    output wire [2:0]                   cfg_wi,
    output wire                         cfg_dw,

    /* Loader: memory writes */
    output wire                         wmem_we,
    output wire [LOG_WEIGHT_WORDS-1:0]  wmem_waddr,
    output wire                         pmem_we,
    output wire [LOG_PARAM_ENTRIES-1:0] pmem_wentry,
    output wire                         pmem_whalf,

    /* GEMM issue (cycle t; the datapath delays by the memory read) */
    output wire                         abuf_we,
    output wire [LOG_ACT_WORDS-1:0]     abuf_waddr,
    output wire [LOG_ACT_WORDS-1:0]     abuf_raddr,
    output wire                         act_from_stream,
    output wire [LOG_WEIGHT_WORDS-LOG_COLS-1:0] wgt_row,
    output wire                         iss_valid,
    output wire                         iss_first,
    output wire                         iss_last,
    output wire [LOG_PARAM_ENTRIES-1:0] iss_ch,
    output wire                         iss_job_last,
    output wire [15:0]                  iss_words,
    output wire [15:0]                  iss_nvals,

    /* Depthwise sequencer */
    input  wire [31:0]                  dw_err,
    output wire                         dw_latch,
    output wire                         dw_run,
    input  wire [63:0]                  dw_in_total,
    input  wire [63:0]                  dw_res_total,
    input  wire                         dw_need_act,
    input  wire                         dw_conflict,

    /* Error flags from the datapath */
    input  wire                         dp_ovf,
    input  wire                         dp_wrap
);

/* verilator lint_off UNUSEDPARAM */
`include "dtpu_regs.vh"
/* verilator lint_on UNUSEDPARAM */

// STATUS.STATE codes: the contract's enum STATE
localparam [3:0]
    ST_IDLE = DTPU_STATE_IDLE,
    ST_CONFIG0 = DTPU_STATE_CONFIG0,
    ST_CONFIG1 = DTPU_STATE_CONFIG1,
    ST_LOAD = DTPU_STATE_LOAD,
    ST_GEMM = DTPU_STATE_GEMM,
    ST_DW = DTPU_STATE_DW,
    ST_LOAD_LAT = DTPU_STATE_LOAD_LAT,
    ST_DONE = DTPU_STATE_DONE;
// the prefetch's last LOAD_LATENCY cycle (cycles counted from 0 after its last word)
localparam integer PF_LAT_END_I = DTPU_LOAD_LATENCY - 1;
localparam [1:0] PF_LAT_END = PF_LAT_END_I[1:0];

localparam [33:0] WEIGHT_WORDS = 34'd1 << LOG_WEIGHT_WORDS;
localparam [33:0] PARAM_ENTRIES = 34'd1 << LOG_PARAM_ENTRIES;
localparam [33:0] ACT_WORDS = 34'd1 << LOG_ACT_WORDS;

reg [3:0] state_reg;

// ---- job fields ----
wire [3:0] opcode = reg_job[DTPU_JOB_OPCODE_LSB +: DTPU_JOB_OPCODE_WIDTH];
wire [3:0] prec = reg_job[DTPU_JOB_PREC_LSB +: DTPU_JOB_PREC_WIDTH];
wire [1:0] out_mode = reg_job[DTPU_JOB_OUT_MODE_LSB +: DTPU_JOB_OUT_MODE_WIDTH];
wire [2:0] variant = reg_job[DTPU_JOB_RQ_VARIANT_LSB +: DTPU_JOB_RQ_VARIANT_WIDTH];

wire is_float = prec == DTPU_PREC_FP32 || prec == DTPU_PREC_BF16;
wire is8 = prec == DTPU_PREC_INT8 || prec == DTPU_PREC_UINT8;
wire prec_ok = prec <= DTPU_PREC_BF16 && PREC_EN[prec];
// RQ_VARIANT codes 0..4 are variants (DOUBLE, SINGLE, INT64, DOUBLE_UP, FP32), those of RQ_EN built
localparam [7:0] RQ_MASK = RQ_EN[7:0];
wire variant_ok = variant <= DTPU_RQ_VARIANT_FP32[2:0] && RQ_MASK[variant];
wire mode_ok = (out_mode == DTPU_OUT_MODE_REQUANT[1:0] && (is8 || prec == DTPU_PREC_INT16) && variant_ok)
            || (out_mode == DTPU_OUT_MODE_RAW[1:0] && !is_float)
            || (out_mode == DTPU_OUT_MODE_FLOAT[1:0] && is_float);

// lanes per input word (log2) and per result word
reg [1:0] log_l;
always @* begin
    case (prec)
        DTPU_PREC_INT8, DTPU_PREC_UINT8: log_l = 2'd3;
        DTPU_PREC_INT16, DTPU_PREC_BF16: log_l = 2'd2;
        DTPU_PREC_INT32, DTPU_PREC_FP32: log_l = 2'd1;
        default: log_l = 2'd0;
    endcase
end
wire [1:0] log_lo = out_mode == DTPU_OUT_MODE_REQUANT[1:0] ? log_l
                  : out_mode == DTPU_OUT_MODE_FLOAT[1:0] ? 2'd1
                  : is8 ? 2'd1 : 2'd0;
// GEMM result words per step: ceil(COLS / lanes_out)
wire [15:0] gemm_w = (COLS >> log_lo) == 0 ? 16'd1 : 16'd0 + (COLS >> log_lo);
// depthwise words per item: L / lanes_out
wire [2:0] dw_wi = 3'd1 << (log_l - log_lo);

// ---- configuration registers, latched in CONFIG0 ----
reg [3:0]  prec_reg;
reg [1:0]  out_mode_reg, log_lo_reg;
reg [2:0]  variant_reg;
reg [2:0]  wi_reg;
reg        dw_reg;
reg [3:0]  op_reg;
reg [31:0] err_cfg_reg;
reg [63:0] prod_nk_reg;   // GEMM: NT*KW; DW: taps * bank rows per tap (own weights / COLS)
reg [63:0] prod_mn_reg;   // M*NT
reg [15:0] w_reg;         // GEMM words per step
reg [4:0]  log_w_reg;     // log2 of it
reg [15:0] p_reg;         // GEMM step period
reg        conflict_reg;  // depthwise bank conflict

// depthwise: taps and weight bank rows per tap (GP / COLS), for the prefetch overlap check
wire [15:0] dw_taps = {8'd0, reg_dw_kernel[DTPU_DW_KERNEL_KH_LSB +: 8]}
                    * {8'd0, reg_dw_kernel[DTPU_DW_KERNEL_KW_LSB +: 8]};
wire [31:0] dw_groups = {16'd0, reg_dw_groups[DTPU_DW_GROUPS_GC_LSB +: 16]}
                      * {16'd0, reg_dw_groups[DTPU_DW_GROUPS_NCHUNK_LSB +: 16]};
// the odd part of GC (rotated layout: weight rows per chunk and tap)
function [15:0] odd_part(input [15:0] v);
    integer t;
    reg [15:0] r;
    begin
        r = v;
        for (t = 0; t < 16; t = t + 1)
            if (r != 16'd0 && !r[0]) r = r >> 1;
        odd_part = r;
    end
endfunction
/* verilator lint_off UNUSEDSIGNAL */
wire [32:0] dw_gpc = DW_ROTATE != 0
    ? {17'd0, reg_dw_groups[DTPU_DW_GROUPS_NCHUNK_LSB +: 16]} * {17'd0, odd_part(reg_dw_groups[DTPU_DW_GROUPS_GC_LSB +: 16])}
    : ({1'b0, dw_groups} + COLS - 1) >> LOG_COLS;
/* verilator lint_on UNUSEDSIGNAL */

// depthwise bank conflict (see the header), decided in CONFIG0. GC is in 1..COLS here (else
// BAD_DIMS). Step s reads the banks of items v .. v+COLS-1, v = s*COLS mod GC, plus a constant
// (s*COLS = u*GC + v moves every item by u ox): so the banks of items 0 .. 2*COLS-2 and, per
// window start v, the first step s with that v (the one with the most valid items) decide.
// Per item, ox*GC mod COLS and g are constants selected by GC; the bank needs SX mod COLS.
localparam NI = 2 * COLS - 1;
localparam TW = 3 * LOG_COLS + 4;     // signed width of a window's valid-item threshold

// the first step s < d with s*COLS mod d == v (d: GC), or COLS if there is none
function integer first_step(input integer v, input integer d);
    integer k, r;
    begin
        r = COLS;
        for (k = d - 1; k >= 0; k = k - 1)
            if ((k * COLS) % d == v) r = k;
        first_step = r;
    end
endfunction

/* verilator lint_off UNUSEDSIGNAL */
wire [15:0] bc_ow = reg_dw_out[DTPU_DW_OUT_W_LSB +: 16];
wire [15:0] bc_gc = reg_dw_groups[DTPU_DW_GROUPS_GC_LSB +: 16];
/* verilator lint_on UNUSEDSIGNAL */
wire [LOG_COLS:0] bc_gcs = bc_gc[LOG_COLS:0];
wire [LOG_COLS-1:0] bc_sx = reg_dw_stride[DTPU_DW_STRIDE_SX_LSB +: LOG_COLS];
wire [3:0] bc_tc = reg_dw_ring[DTPU_DW_RING_TAP_CYCLES_LSB +: 4];
// items of a row, OW saturated at COLS*COLS (the compared items are below COLS*COLS)
wire [2*LOG_COLS:0] bc_ow_sat = bc_ow >= COLS * COLS ? COLS * COLS : bc_ow[2*LOG_COLS:0];
wire [3*LOG_COLS+1:0] bc_items = {{(LOG_COLS+1){1'b0}}, bc_ow_sat} * {{(2*LOG_COLS){1'b0}}, bc_gcs};
reg [NI*LOG_COLS-1:0] bc_bank;        // bank of item i (up to a constant)
reg [COLS-1:0] bc_reach;              // window start v occurs
reg [COLS*TW-1:0] bc_thr;            // window v's valid items: j < thr (signed)
reg [LOG_COLS-1:0] bc_base, bc_g;
reg bc_active;
reg bank_conflict;
integer bi, bd, bv, bj, bk;
/* verilator lint_off UNUSEDSIGNAL */
reg [31:0] bc_t0, bc_t1, bc_t2, bc_jv;
/* verilator lint_on UNUSEDSIGNAL */
always @* begin
    for (bi = 0; bi < NI; bi = bi + 1) begin
        bc_t0 = 32'd0;
        bc_t1 = 32'd0;
        for (bd = 1; bd <= COLS; bd = bd + 1) begin
            if ({{(31-LOG_COLS){1'b0}}, bc_gcs} == bd) begin
                bc_t0 = ((bi / bd) * bd) % COLS;
                bc_t1 = bi % bd;
            end
        end
        bc_base = bc_t0[LOG_COLS-1:0];
        bc_g = bc_t1[LOG_COLS-1:0];
        bc_bank[bi*LOG_COLS +: LOG_COLS] = bc_base * bc_sx + bc_g;
    end
    for (bv = 0; bv < COLS; bv = bv + 1) begin
        bc_t2 = COLS;
        for (bd = 1; bd <= COLS; bd = bd + 1) begin
            if ({{(31-LOG_COLS){1'b0}}, bc_gcs} == bd)
                bc_t2 = first_step(bv, bd);
        end
        bc_reach[bv] = bc_t2 != COLS;
        bc_t0 = {{(30-3*LOG_COLS){1'b0}}, bc_items} - bc_t2 * COLS;
        bc_thr[bv*TW +: TW] = bc_t0[TW-1:0];
    end
    bank_conflict = 1'b0;
    for (bj = 0; bj < NI; bj = bj + 1) begin
        for (bk = bj + 1; bk < NI && bk < bj + COLS; bk = bk + 1) begin
            bc_active = 1'b0;
            for (bv = 0; bv < COLS; bv = bv + 1) begin
                bc_jv = bk - bv;
                if (bv <= bj && bk < bv + COLS && bc_reach[bv] && $signed(bc_thr[bv*TW +: TW]) > $signed(bc_jv[TW-1:0])
                    && ((bj - bv) ^ (bk - bv)) * {28'd0, bc_tc} < COLS)
                    bc_active = 1'b1;
            end
            if (bc_active && bc_bank[bj*LOG_COLS +: LOG_COLS] == bc_bank[bk*LOG_COLS +: LOG_COLS])
                bank_conflict = 1'b1;
        end
    end
end

// PE pairs: a pair's two columns in one cycle (see the header); OW*GC is saturated above
// COLS*COLS, which leaves the comparison with COLS/2 unchanged
wire pair_conflict = bc_tc == 4'd1 && bc_items > COLS / 2;

// CONFIG0 checks that need no products
reg [31:0] err0;
always @* begin
    err0 = 32'd0;
    case (opcode)
        DTPU_OPCODE_NOP: ;
        DTPU_OPCODE_LOAD_WGT: begin
            if (reg_load_count == 0)
                err0[DTPU_ERR_BAD_DIMS] = 1'b1;
            else if ({2'b0, reg_load_addr} + {2'b0, reg_load_count} > WEIGHT_WORDS)
                err0[DTPU_ERR_WGT_RANGE] = 1'b1;
        end
        DTPU_OPCODE_LOAD_PARAM: begin
            if (reg_load_count == 0)
                err0[DTPU_ERR_BAD_DIMS] = 1'b1;
            else if (reg_load_count[0] || {2'b0, reg_load_addr} + {3'b0, reg_load_count[31:1]} > PARAM_ENTRIES)
                err0[DTPU_ERR_PARAM_RANGE] = 1'b1;
        end
        DTPU_OPCODE_GEMM, DTPU_OPCODE_DWCONV: begin
            if (!prec_ok)
                err0[DTPU_ERR_BAD_PRECISION] = 1'b1;
            else if (!mode_ok)
                err0[DTPU_ERR_BAD_MODE] = 1'b1;
            else if (opcode == DTPU_OPCODE_GEMM) begin
                if (reg_gemm_m == 0 || reg_gemm_kw == 0 || reg_gemm_nt == 0)
                    err0[DTPU_ERR_BAD_DIMS] = 1'b1;
                else if ({2'b0, reg_gemm_kw} > ACT_WORDS)
                    err0[DTPU_ERR_ACT_CAPACITY] = 1'b1;
            end else begin
                err0 = dw_err;
            end
        end
        default: err0[DTPU_ERR_BAD_OPCODE] = 1'b1;
    endcase
end

// CONFIG1 checks on the products
reg [31:0] err1;
// end of the job's own weight words (GEMM: WGT_BASE + NT*KW*COLS, DW: WGT_BASE + taps*GP),
// compared with WEIGHT_WORDS = 2^LOG_WEIGHT_WORDS. The compares need only its low
// LOG_WEIGHT_WORDS+1 bits and a flag for "2^(LOG_WEIGHT_WORDS+1) or more" (a high bit of the
// base or of NT*KW set): a 17-bit add and compare beside two zero tests instead of 64-bit carry
// chains in series, the unit's critical path into CONFIG1 on the ECP5 proxy (docs/synthesis.md).
// prod_nk_reg is below 2^48 here (KW <= ACT_WORDS, else err0; DW: 16-bit taps), so its bits that
// a 64-bit shift would drop are zero.
localparam LW = LOG_WEIGHT_WORDS;
localparam LP = LOG_PARAM_ENTRIES;
wire wgt_big = (|prod_nk_reg[63:LW-LOG_COLS+1]) || (|reg_wgt_base[31:LW+1]);
wire [LW+1:0] wgt_end_lo = {1'b0, reg_wgt_base[LW:0]} + {1'b0, prod_nk_reg[LW-LOG_COLS:0], {LOG_COLS{1'b0}}};
wire wgt_over = wgt_big || wgt_end_lo > WEIGHT_WORDS[LW+1:0];
wire prm_big = (|reg_gemm_nt[31:LP-LOG_COLS+1]) || (|reg_param_base[31:LP+1]);
wire [LP+1:0] prm_end_lo = {1'b0, reg_param_base[LP:0]} + {1'b0, reg_gemm_nt[LP-LOG_COLS:0], {LOG_COLS{1'b0}}};
wire prm_over = prm_big || prm_end_lo > PARAM_ENTRIES[LP+1:0];
wire [32:0] pf_end = {1'b0, reg_pf_addr} + {1'b0, reg_pf_count};
// prefetch range outside the memory or overlapping [WGT_BASE, wgt_end). PF_ADDR < wgt_end is
// compared on the low bits only: a PF_ADDR of 2^(LOG_WEIGHT_WORDS+1) or more has pf_end beyond
// the memory, which decides pf_bad by itself
wire pf_lt_wgt_end = wgt_big || {1'b0, reg_pf_addr[LW:0]} < wgt_end_lo;
wire pf_bad = reg_pf_count != 32'd0
              && (pf_end > WEIGHT_WORDS[32:0]
                  || (pf_lt_wgt_end && {1'b0, reg_wgt_base} < pf_end));
// the depthwise checks that come after WGT_RANGE (the prefetch check stands in its place)
localparam [31:0] AFTER_WGT = 32'd1 << DTPU_ERR_PARAM_RANGE;
always @* begin
    err1 = err_cfg_reg;
    if (err_cfg_reg == 32'd0 && op_reg == DTPU_OPCODE_GEMM) begin
        if (reg_wgt_base[LOG_COLS-1:0] != 0 || wgt_over || pf_bad)
            err1[DTPU_ERR_WGT_RANGE] = 1'b1;
        else if (out_mode_reg != DTPU_OUT_MODE_RAW[1:0]
                 && (reg_param_base[LOG_COLS-1:0] != 0 || prm_over))
            err1[DTPU_ERR_PARAM_RANGE] = 1'b1;
    end
    if ((err_cfg_reg & ~AFTER_WGT) == 32'd0 && op_reg == DTPU_OPCODE_DWCONV && pf_bad) begin
        err1 = 32'd0;
        err1[DTPU_ERR_WGT_RANGE] = 1'b1;
    end
    if (err1 == 32'd0 && op_reg == DTPU_OPCODE_DWCONV && conflict_reg)
        err1[DTPU_ERR_BANK_CONFLICT] = 1'b1;
end

// ---- counters ----
reg [1:0]  lat_cnt_reg;
reg [63:0] in_cnt_reg;           // input words accepted
reg [63:0] in_total_reg;
reg [63:0] res_cnt_reg;          // result words sent
reg [63:0] res_total_reg;
reg [31:0] pix_reg;              // GEMM pixel
reg [31:0] tile_reg;             // GEMM tile
reg [15:0] cyc_reg;              // cycle within the step period
// look-ahead flags, set with cyc_reg and tile_reg: their compares feed `adv` (the global stall)
// and through it every register's enable, so they are taken off that path (timing, no cycle)
reg        cyc_lt_kw_reg;        // {16'd0, cyc_reg} < reg_gemm_kw
reg        tile_zero_reg;        // tile_reg == 0
reg        issuing_reg;
reg [LOG_WEIGHT_WORDS-LOG_COLS-1:0] tile_row_reg;
reg [31:0] err_run_reg;
reg        done_reg;
reg [31:0] pf_left_reg;          // prefetch words still to take
reg [LOG_WEIGHT_WORDS-1:0] pf_waddr_reg;  // weight word the next one goes to
reg [1:0]  pf_lat_reg;           // cycles since the prefetch's last word (saturates)

wire s_load = state_reg == ST_LOAD;
wire s_gemm = state_reg == ST_GEMM;
wire s_dw = state_reg == ST_DW;

// the job registers do not change while the core is busy (the register file refuses the write),
// so a flag computed with the counter's next value equals the compare of the next cycle
wire [15:0] cyc_inc = cyc_reg + 16'd1;
wire [31:0] tile_inc = tile_reg + 32'd1;
wire gemm_issue = s_gemm && issuing_reg && cyc_lt_kw_reg;
wire gemm_need_act = gemm_issue && tile_zero_reg;
wire need_act = gemm_need_act || (s_dw && dw_need_act);
wire load_need = s_load;
// the prefetch takes a word whenever one is there (no part of the global stall)
wire pf_need = (s_gemm || s_dw) && pf_left_reg != 32'd0;

wire out_block = res_tvalid && !res_tready;
assign adv = !(need_act && !act_tvalid) && !(load_need && !wgt_tvalid) && !out_block;

assign wgt_tready = (load_need && adv) || pf_need;
assign act_tready = need_act && adv;

wire ld_fire = wgt_tvalid && load_need && adv;
wire pf_fire = wgt_tvalid && pf_need;
wire act_fire = act_tvalid && act_tready;
wire res_fire = res_tvalid && res_tready;

wire last_in = in_cnt_reg + 64'd1 == in_total_reg;
wire in_tlast = s_load ? wgt_tlast : act_tlast;
wire in_fire = ld_fire || act_fire;
wire early = in_fire && in_tlast && !last_in;
wire missing = in_fire && !in_tlast && last_in;
wire pf_last = pf_left_reg == 32'd1;
wire pf_early = pf_fire && wgt_tlast && !pf_last;
wire pf_missing = pf_fire && !wgt_tlast && pf_last;

wire last_step = pix_reg + 32'd1 == reg_gemm_m && tile_inc == reg_gemm_nt;
wire step_end = {16'd0, cyc_reg} + 32'd1 >= {16'd0, p_reg};

// aborts take effect in this cycle (the datapath's control state clears with the FSM)
assign job_abort = (adv && (early || (s_dw && dw_conflict))) || pf_early;
// the compute path is finished once every result word has been taken and every input word
// accepted; the prefetch once its words are in and LOAD_LATENCY cycles have passed
wire compute_fin = res_cnt_reg == res_total_reg
                   && (in_cnt_reg == in_total_reg || (adv && act_fire && last_in));
wire pf_fin = pf_left_reg == 32'd0 && pf_lat_reg == PF_LAT_END;
wire finish = (s_gemm || s_dw) && compute_fin && pf_fin;
assign stall = busy && (!adv || ((s_gemm || s_dw) && compute_fin && pf_need && !wgt_tvalid));

always @(posedge clk) begin
    done_reg <= 1'b0;

    case (state_reg)
        ST_IDLE: begin
            if (start) begin
                state_reg <= ST_CONFIG0;
                err_run_reg <= 32'd0;
            end
        end
        ST_CONFIG0: begin
            op_reg <= opcode;
            prec_reg <= prec;
            out_mode_reg <= out_mode;
            variant_reg <= variant;
            log_lo_reg <= log_lo;
            wi_reg <= dw_wi;
            dw_reg <= opcode == DTPU_OPCODE_DWCONV;
            err_cfg_reg <= err0;
            conflict_reg <= (DW_ROTATE == 0 && bank_conflict) || (PE_PAIR != 0 && pair_conflict);
            prod_nk_reg <= {32'd0, opcode == DTPU_OPCODE_DWCONV ? {16'd0, dw_taps} : reg_gemm_nt}
                         * {32'd0, opcode == DTPU_OPCODE_DWCONV ? dw_gpc[31:0] : reg_gemm_kw};
            prod_mn_reg <= reg_gemm_m * reg_gemm_nt;
            w_reg <= gemm_w;
            log_w_reg <= LOG_COLS > log_lo ? LOG_COLS[4:0] - {3'd0, log_lo} : 5'd0;
            p_reg <= reg_gemm_kw > {16'd0, gemm_w} ? reg_gemm_kw[15:0] : gemm_w;
            state_reg <= ST_CONFIG1;
        end
        ST_CONFIG1: begin
            in_cnt_reg <= 64'd0;
            res_cnt_reg <= 64'd0;
            pix_reg <= 32'd0;
            tile_reg <= 32'd0;
            tile_zero_reg <= 1'b1;
            cyc_reg <= 16'd0;
            cyc_lt_kw_reg <= reg_gemm_kw != 32'd0;
            issuing_reg <= 1'b1;
            tile_row_reg <= reg_wgt_base[LOG_WEIGHT_WORDS-1:LOG_COLS];
            pf_left_reg <= reg_pf_count;
            pf_waddr_reg <= reg_pf_addr[LOG_WEIGHT_WORDS-1:0];
            pf_lat_reg <= reg_pf_count == 32'd0 ? PF_LAT_END : 2'd0;
            if (err1 != 32'd0 || op_reg == DTPU_OPCODE_NOP) begin
                err_run_reg <= err1;
                state_reg <= ST_DONE;
            end else if (op_reg == DTPU_OPCODE_LOAD_WGT || op_reg == DTPU_OPCODE_LOAD_PARAM) begin
                in_total_reg <= {32'd0, reg_load_count};
                state_reg <= ST_LOAD;
            end else if (op_reg == DTPU_OPCODE_DWCONV) begin
                in_total_reg <= dw_in_total;
                res_total_reg <= dw_res_total;
                state_reg <= ST_DW;
            end else begin
                in_total_reg <= reg_gemm_m * reg_gemm_kw;
                res_total_reg <= prod_mn_reg << log_w_reg;
                state_reg <= ST_GEMM;
            end
        end
        ST_LOAD: begin
            if (ld_fire) begin
                in_cnt_reg <= in_cnt_reg + 64'd1;
                if (last_in) begin
                    lat_cnt_reg <= 2'd0;
                    state_reg <= ST_LOAD_LAT;
                end
            end
        end
        ST_LOAD_LAT: begin
            lat_cnt_reg <= lat_cnt_reg + 2'd1;
            if (lat_cnt_reg + 2'd1 == DTPU_LOAD_LATENCY[1:0]) begin
                state_reg <= ST_DONE;
            end
        end
        ST_GEMM: begin
            if (adv) begin
                if (act_fire) begin
                    in_cnt_reg <= in_cnt_reg + 64'd1;
                end
                if (issuing_reg) begin
                    if (step_end) begin
                        cyc_reg <= 16'd0;
                        cyc_lt_kw_reg <= reg_gemm_kw != 32'd0;
                        if (last_step) begin
                            issuing_reg <= 1'b0;
                        end else if (tile_inc == reg_gemm_nt) begin
                            tile_reg <= 32'd0;
                            tile_zero_reg <= 1'b1;
                            pix_reg <= pix_reg + 32'd1;
                            tile_row_reg <= reg_wgt_base[LOG_WEIGHT_WORDS-1:LOG_COLS];
                        end else begin
                            tile_reg <= tile_inc;
                            tile_zero_reg <= tile_inc == 32'd0;
                            tile_row_reg <= tile_row_reg + reg_gemm_kw[LOG_WEIGHT_WORDS-LOG_COLS-1:0];
                        end
                    end else begin
                        cyc_reg <= cyc_inc;
                        cyc_lt_kw_reg <= {16'd0, cyc_inc} < reg_gemm_kw;
                    end
                end
            end
        end
        ST_DW: begin
            if (adv && act_fire) begin
                in_cnt_reg <= in_cnt_reg + 64'd1;
            end
            // the depthwise sequencer's totals come at the end of its setup (DW_SETUP cycles
            // after CONFIG; all ones until then, so the job cannot finish before it starts)
            in_total_reg <= dw_in_total;
            res_total_reg <= dw_res_total;
        end
        ST_DONE: begin
            state_reg <= ST_IDLE;
        end
        default: state_reg <= ST_IDLE;
    endcase

    if (state_reg == ST_CONFIG1 && (err1 != 32'd0 || op_reg == DTPU_OPCODE_NOP)) begin
        done_reg <= 1'b1;
    end
    if (state_reg == ST_LOAD_LAT && lat_cnt_reg + 2'd1 == DTPU_LOAD_LATENCY[1:0]) begin
        done_reg <= 1'b1;
    end
    if ((s_gemm || s_dw) && res_fire) begin
        res_cnt_reg <= res_cnt_reg + 64'd1;
    end
    // prefetch: words, then the write pipeline
    if (pf_fire) begin
        pf_left_reg <= pf_left_reg - 32'd1;
        pf_waddr_reg <= pf_waddr_reg + {{(LOG_WEIGHT_WORDS-1){1'b0}}, 1'b1};
        pf_lat_reg <= 2'd0;
    end else if ((s_gemm || s_dw) && pf_left_reg == 32'd0 && pf_lat_reg != PF_LAT_END) begin
        pf_lat_reg <= pf_lat_reg + 2'd1;
    end
    if (finish) begin
        state_reg <= ST_DONE;
        done_reg <= 1'b1;
    end
    if (busy && adv && s_dw && dw_conflict) begin
        err_run_reg[DTPU_ERR_BANK_CONFLICT] <= 1'b1;
        state_reg <= ST_DONE;
        done_reg <= 1'b1;
    end

    // runtime flags
    if (busy && adv && early) begin
        err_run_reg[DTPU_ERR_TLAST_EARLY] <= 1'b1;
        state_reg <= ST_DONE;
        done_reg <= 1'b1;
    end
    if (busy && adv && missing) begin
        err_run_reg[DTPU_ERR_TLAST_MISSING] <= 1'b1;
    end
    // the prefetch's tlast, exactly as a LOAD's: early aborts the job, missing is flagged
    if (pf_early) begin
        err_run_reg[DTPU_ERR_TLAST_EARLY] <= 1'b1;
        state_reg <= ST_DONE;
        done_reg <= 1'b1;
    end
    if (pf_missing) begin
        err_run_reg[DTPU_ERR_TLAST_MISSING] <= 1'b1;
    end
    if (busy && dp_ovf) begin
        err_run_reg[DTPU_ERR_OVERFLOW] <= 1'b1;
    end
    if (busy && dp_wrap) begin
        err_run_reg[DTPU_ERR_WARN_WRAP32] <= 1'b1;
    end

    if (!rst_n) begin
        state_reg <= ST_IDLE;
        done_reg <= 1'b0;
        err_run_reg <= 32'd0;
        issuing_reg <= 1'b0;
        pf_left_reg <= 32'd0;
    end
end

assign busy = state_reg != ST_IDLE && state_reg != ST_DONE;
assign done = done_reg;
assign state = state_reg;
assign err_set = done_reg ? err_run_reg : 32'd0;

assign cfg_prec = prec_reg;
assign cfg_out_mode = out_mode_reg;
assign cfg_variant = variant_reg;
assign cfg_log_lanes = log_lo_reg;
assign cfg_wi = wi_reg;
assign cfg_dw = dw_reg;
assign dw_latch = state_reg == ST_CONFIG0;
assign dw_run = s_dw;

// loader
/* verilator lint_off UNUSEDSIGNAL */
wire [31:0] ld_addr = reg_load_addr + in_cnt_reg[31:0];
wire [31:0] ld_entry = reg_load_addr + in_cnt_reg[32:1];
/* verilator lint_on UNUSEDSIGNAL */
assign wmem_we = (ld_fire && op_reg == DTPU_OPCODE_LOAD_WGT) || pf_fire;
assign wmem_waddr = s_load ? ld_addr[LOG_WEIGHT_WORDS-1:0] : pf_waddr_reg;
assign pmem_we = ld_fire && op_reg == DTPU_OPCODE_LOAD_PARAM;
assign pmem_wentry = ld_entry[LOG_PARAM_ENTRIES-1:0];
assign pmem_whalf = in_cnt_reg[0];

// GEMM issue
assign abuf_we = act_fire;
assign abuf_waddr = cyc_reg[LOG_ACT_WORDS-1:0];
assign abuf_raddr = cyc_reg[LOG_ACT_WORDS-1:0];
assign act_from_stream = tile_zero_reg;
assign wgt_row = tile_row_reg + cyc_reg[LOG_WEIGHT_WORDS-LOG_COLS-1:0];
assign iss_valid = gemm_issue;
assign iss_first = cyc_reg == 16'd0;
assign iss_last = {16'd0, cyc_reg} + 32'd1 == reg_gemm_kw;
/* verilator lint_off UNUSEDSIGNAL */
wire [31:0] ch = reg_param_base + (tile_reg << LOG_COLS);
/* verilator lint_on UNUSEDSIGNAL */
assign iss_ch = ch[LOG_PARAM_ENTRIES-1:0];
assign iss_job_last = last_step;
assign iss_words = w_reg;
assign iss_nvals = COLS;

endmodule

`resetall
