/*

Copyright (c) 2026 DTPU authors. Apache-2.0.

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Depthwise sequencer: the line-buffer LOADER and the COMPUTER sharing a ring of LB_ROWS row
 * slots in the activation buffer (docs/architecture.md, "DWCONV").
 *
 * LOADER: input rows r (chunk-major) are written one word per cycle into slot r mod LB_ROWS
 * (RSC = ceil(IW*GC/COLS) bank rows per slot); row r starts when row r-1 is in and row r-LB_ROWS
 * has been released (its last user output row has finished, or no output row uses it).
 * COMPUTER: output rows in order; a row starts when the previous one has ended and its last
 * needed input row is in; it runs ceil(OW*GC/COLS) steps of period P = max(S, COLS*Wi), each
 * issuing the KH*KW taps (TAP_CYCLES cycles per tap, one column group per cycle). Column j of a
 * step is item q = step*COLS + j = (ox, g); taps outside the image are issued with a zero
 * activation operand. Per column the activation word comes from bank (x*GC + g) mod COLS of
 * the tap's slot, the weight word from entry tap*GP + chunk*GC + g.
 * Two columns of one cycle group on the same activation bank set ERR.BANK_CONFLICT (checked as
 * the step issues; the golden model checks it in CONFIG, see docs/rtl.md).
 * With PE_PAIR, two valid columns of one pair (j, j + COLS/2) in a cycle set it too.
 * Requires GC <= COLS (what the lowering produces); larger GC sets ERR.BAD_DIMS.
 *
 * DW_ROTATE = 1: the rotated layout (docs/architecture.md, "Depthwise crossbars linear in
 * COLS"). The loader writes word (x, g) of a row at slot offset ((x mod SX)*W1 + x div SX)*GC + g,
 * W1 = ceil(IW/SX) (the slot takes (IW + SX - 1)*GC words, SX*W1*GC or more: no divider in
 * the CONFIG0 checks); a tap then reads one rotation of the banks: with D = (ep*W1 + eq)*GC
 * (kx*DX - PL = eq*SX + ep) = Q*COLS + R, bank b at slot row step + Q + (b < R) serves column
 * (b - R) mod COLS (bank_arow, act_rot). Weights: row (tap*NCHUNK + chunk)*P + step mod P of all
 * banks (wgt_row_rot), P the odd part of GC; column j reads bank j. No bank conflicts (only
 * PE_PAIR's); the per-column address outputs are zero.
 */
module dtpu_dw_seq #
(
    parameter COLS = 8,
    parameter LOG_COLS = 3,
    parameter LOG_WEIGHT_WORDS = 15,
    parameter LOG_PARAM_ENTRIES = 12,
    parameter LOG_ACT_WORDS = 12,
    // the MXU's 8-bit rows are PE pairs (columns j and j + COLS/2 share a multiplier)
    parameter PE_PAIR = 0,
    // 1: the rotated depthwise layout (header)
    parameter DW_ROTATE = 0
)
(
    input  wire                         clk,
    input  wire                         rst_n,
    input  wire                         adv,

    /* Registers */
    input  wire [31:0]                  reg_dw_in,
    input  wire [31:0]                  reg_dw_out,
    input  wire [31:0]                  reg_dw_kernel,
    input  wire [31:0]                  reg_dw_stride,
    input  wire [31:0]                  reg_dw_groups,
    /* verilator lint_off UNUSEDSIGNAL */
    input  wire [31:0]                  reg_dw_ring,
    /* verilator lint_on UNUSEDSIGNAL */
    input  wire [31:0]                  reg_wgt_base,
    input  wire [31:0]                  reg_param_base,
    input  wire [1:0]                   log_l,
    input  wire [1:0]                   log_lo,
    input  wire                         check_param,

    /* Control */
    output wire [31:0]                  cfg_err,
    input  wire                         latch,
    input  wire                         run,
    output wire [63:0]                  in_total,
    output wire [63:0]                  res_total,
    output wire                         need_act,
    input  wire                         act_fire,
    output wire                         conflict,

    /* Loader: activation buffer writes */
    output wire [LOG_ACT_WORDS-1:0]     abuf_waddr,

    /* Issue, per column */
    output wire [COLS-1:0]              col_valid,
    output wire [COLS-1:0]              col_zero,
    output wire                         col_first,
    output wire                         col_last,
    output wire [COLS*(LOG_ACT_WORDS-LOG_COLS)-1:0]    col_arow,
    output wire [COLS*LOG_COLS-1:0]     col_abank,
    output wire [COLS*(LOG_WEIGHT_WORDS-LOG_COLS)-1:0] col_wrow,
    output wire [COLS*LOG_COLS-1:0]     col_wbank,

    /* Issue, rotated layout (DW_ROTATE) */
    output wire [COLS*(LOG_ACT_WORDS-LOG_COLS)-1:0]    bank_arow,
    output wire [LOG_COLS-1:0]          act_rot,
    output wire [LOG_WEIGHT_WORDS-LOG_COLS-1:0]        wgt_row_rot,

    /* Step tag (valid on the step's last issue cycle) */
    output wire                         tag_valid,
    output wire                         tag_job_last,
    output wire [15:0]                  tag_words,
    output wire [15:0]                  tag_nvals,
    output wire [LOG_PARAM_ENTRIES-1:0] tag_ch,
    output wire [LOG_PARAM_ENTRIES-1:0] tag_wrap_ch,
    output wire [15:0]                  tag_g
);

/* verilator lint_off UNUSEDPARAM */
`include "dtpu_regs.vh"
/* verilator lint_on UNUSEDPARAM */

localparam AR = LOG_ACT_WORDS - LOG_COLS;
localparam WR = LOG_WEIGHT_WORDS - LOG_COLS;
localparam [33:0] WEIGHT_WORDS = 34'd1 << LOG_WEIGHT_WORDS;
localparam [33:0] PARAM_ENTRIES = 34'd1 << LOG_PARAM_ENTRIES;
localparam [33:0] ACT_WORDS = 34'd1 << LOG_ACT_WORDS;

// ---- widths of the setup's, the walk's and the computer's quantities ----
// The setup runs after every CONFIG0, but its results are read only by a job that passed the
// CONFIG checks (dtpu_control enters ST_DW only then), so each width below is what such a job
// needs; the checks themselves (cfg_err) stay at the registers' full widths, and a refused
// job's setup values may wrap unseen. The bounds, from the register fields' widths
// (dtpu_regs.vh, contract.json) and the memories:
// - GC <= COLS (else BAD_DIMS): a group index g < GC takes LOG_COLS + 1 bits;
// - the slot, (IW + SX - 1)*GC or IW*GC words, fits the activation buffer (ACT_CAPACITY:
//   LB_ROWS*RSC*COLS <= 2^LOG_ACT_WORDS with LB_ROWS >= 1), so IW <= 2^LOG_ACT_WORDS and the
//   row's words IW*GC <= 2^LOG_ACT_WORDS;
// - (OW-1)*SX - PL <= IW - 1 and (OH-1)*SY - PT <= IH - 1 (BAD_DIMS), PL and PT 8-bit fields;
// - quantities read only modulo 2^n (the ring rows of the activation buffer, LOG_ACT_WORDS
//   bits of a slot offset; the parameter and weight addresses) are kept modulo 2^n: exact for
//   every job, whatever the bounds.
localparam FW = DTPU_DW_IN_W_WIDTH;                               // the 16-bit fields
localparam GW = LOG_COLS + 1;                                     // g < GC <= COLS
localparam GRW = DTPU_DW_GROUPS_NCHUNK_WIDTH + LOG_COLS;          // GC*NCHUNK
localparam TPW = DTPU_DW_KERNEL_KH_WIDTH + DTPU_DW_KERNEL_KW_WIDTH; // KH*KW
localparam ITW = DTPU_DW_OUT_W_WIDTH + LOG_COLS;                  // OW*GC items, steps, q
localparam RWW = LOG_ACT_WORDS + 1;                               // IW*GC <= 2^LOG_ACT_WORDS
localparam OYW = DTPU_DW_IN_H_WIDTH + 1;                          // (OH-1)*SY <= IH-1+PT < 2^17
// PT, SY, DY fields of 8 bits; the window's span (KH-1)*DY + 1 < 2^(KH+DY widths)
localparam KYW = DTPU_DW_KERNEL_KH_WIDTH + DTPU_DW_STRIDE_DY_WIDTH;
localparam KXW = DTPU_DW_KERNEL_KW_WIDTH + DTPU_DW_STRIDE_DX_WIDTH; // kx*DX <= (KW-1)*DX
// (OY-1)*SY - PT + span - 1 in (-2^8, 2^OYW + 2^KYW): signed
localparam LEW = (OYW > KYW ? OYW : KYW) + 2;
// an input row y = oy*SY - PT + ky*DY in [-PT, IH - 1 + span - 1]: signed
localparam YW = (DTPU_DW_IN_H_WIDTH > KYW ? DTPU_DW_IN_H_WIDTH : KYW) + 2;
// an input column x = ox*SX - PL + kx*DX of a step's column: ox <= OW - 1 + COLS (the last
// step's columns past the items), so x < IW + (COLS+1)*2^8 + 2^KXW < 2^(XM+2) (COLS < 2^9),
// x >= -PL: signed
localparam XM = LOG_ACT_WORDS > KXW ? LOG_ACT_WORDS : KXW;
localparam XW = XM + 3;
// channel index c*GC + g, read modulo the parameter and weight memories
localparam CGW = LOG_PARAM_ENTRIES > LOG_WEIGHT_WORDS ? LOG_PARAM_ENTRIES : LOG_WEIGHT_WORDS;
localparam LAW = LOG_ACT_WORDS;                                   // slot offsets, mod 2^LAW
localparam OAW = GRW + FW;                                        // GC*NCHUNK*IH, *OH
localparam PW = OAW + FW;                                         // the setup's products

// ---- register fields ----
wire [15:0] ih = reg_dw_in[DTPU_DW_IN_H_LSB +: 16];
wire [15:0] iw = reg_dw_in[DTPU_DW_IN_W_LSB +: 16];
wire [15:0] oh = reg_dw_out[DTPU_DW_OUT_H_LSB +: 16];
wire [15:0] ow = reg_dw_out[DTPU_DW_OUT_W_LSB +: 16];
wire [7:0]  kh = reg_dw_kernel[DTPU_DW_KERNEL_KH_LSB +: 8];
wire [7:0]  kw = reg_dw_kernel[DTPU_DW_KERNEL_KW_LSB +: 8];
wire [7:0]  pt = reg_dw_kernel[DTPU_DW_KERNEL_PT_LSB +: 8];
wire [7:0]  pl = reg_dw_kernel[DTPU_DW_KERNEL_PL_LSB +: 8];
wire [7:0]  sy = reg_dw_stride[DTPU_DW_STRIDE_SY_LSB +: 8];
wire [7:0]  sx = reg_dw_stride[DTPU_DW_STRIDE_SX_LSB +: 8];
wire [7:0]  dy = reg_dw_stride[DTPU_DW_STRIDE_DY_LSB +: 8];
wire [7:0]  dx = reg_dw_stride[DTPU_DW_STRIDE_DX_LSB +: 8];
wire [15:0] gc = reg_dw_groups[DTPU_DW_GROUPS_GC_LSB +: 16];
wire [15:0] nchunk = reg_dw_groups[DTPU_DW_GROUPS_NCHUNK_LSB +: 16];
wire [15:0] lb = reg_dw_ring[DTPU_DW_RING_LB_ROWS_LSB +: 16];
wire [3:0]  tc = reg_dw_ring[DTPU_DW_RING_TAP_CYCLES_LSB +: 4];

// ---- the CONFIG0 checks' quantities (combinational from the registers: the checks decide in
// CONFIG0, see dtpu_control) ----
wire [15:0] span_h = ({8'd0, kh} - 16'd1) * {8'd0, dy} + 16'd1;
wire [15:0] span_w = ({8'd0, kw} - 16'd1) * {8'd0, dx} + 16'd1;
wire [31:0] row_words = {16'd0, iw} * {16'd0, gc};
// rotated layout: a slot holds SX phases of W1 = ceil(IW/SX) pixels; its size is (IW + SX - 1)*GC
// words (SX*W1 <= IW + SX - 1: no divider in CONFIG0; W1 comes from the setup)
wire [16:0] iw_up = {1'b0, iw} + {9'd0, sx} - 17'd1;
/* verilator lint_off UNUSEDSIGNAL */
wire [32:0] slot_words = DW_ROTATE != 0 ? {16'd0, iw_up} * {17'd0, gc} : {1'b0, row_words};
wire [33:0] rsc_full = ({1'b0, slot_words} + COLS - 1) >> LOG_COLS;
/* verilator lint_on UNUSEDSIGNAL */
wire [31:0] rsc = rsc_full[31:0];                               // bank rows per slot
wire [47:0] ring_rows = {32'd0, lb} * {16'd0, rsc};           // bank rows of the ring
wire [31:0] groups = {16'd0, gc} * {16'd0, nchunk};
// odd part of GC (rotated layout: weight rows per chunk and tap), of its low LOG_COLS+1 bits:
// exact where it matters (GC <= COLS, else BAD_DIMS decides first); the lowest set bit, then
// a shift
function [LOG_COLS:0] odd_part(input [LOG_COLS:0] v);
    integer t;
    reg found;
    begin
        odd_part = v;
        found = 1'b0;
        for (t = 0; t <= LOG_COLS; t = t + 1) begin
            if (!found && v[t]) begin
                odd_part = v >> t;
                found = 1'b1;
            end
        end
    end
endfunction
wire [LOG_COLS:0] pph = odd_part(gc[LOG_COLS:0]);
wire [31:0] gpc = DW_ROTATE != 0 ? {16'd0, nchunk} * {{(31-LOG_COLS){1'b0}}, pph}  // bank rows per tap
                                 : (groups + COLS - 1) >> LOG_COLS;
wire [15:0] taps = {8'd0, kh} * {8'd0, kw};
wire [47:0] wgt_end = {16'd0, reg_wgt_base} + {16'd0, taps} * {16'd0, gpc} * COLS;
wire [3:0]  lanes = 4'd1 << log_l;
wire [47:0] prm_end = {16'd0, reg_param_base} + {16'd0, groups} * lanes;
wire [2:0]  wi = 3'd1 << (log_l - log_lo);
wire tc_ok = tc != 4'd0 && tc <= COLS && (tc & (tc - 4'd1)) == 4'd0;
wire [31:0] oy_last = ({16'd0, oh} - 32'd1) * {24'd0, sy};
wire [31:0] ox_last = ({16'd0, ow} - 32'd1) * {24'd0, sx};

reg [31:0] err;
always @* begin
    err = 32'd0;
    if (ih == 0 || iw == 0 || oh == 0 || ow == 0 || kh == 0 || kw == 0 || sy == 0 || sx == 0
        || dy == 0 || dx == 0 || gc == 0 || nchunk == 0)
        err[DTPU_ERR_BAD_DIMS] = 1'b1;
    else if ({8'd0, pt} > span_h - 16'd1
             || $signed({2'b0, oy_last}) - $signed({26'd0, pt}) > $signed({18'd0, ih}) - 34'sd1
             || {8'd0, pl} > span_w - 16'd1
             || $signed({2'b0, ox_last}) - $signed({26'd0, pl}) > $signed({18'd0, iw}) - 34'sd1)
        err[DTPU_ERR_BAD_DIMS] = 1'b1;
    else if (!tc_ok || gc > COLS)
        err[DTPU_ERR_BAD_DIMS] = 1'b1;
    else if (lb < span_h || ring_rows * COLS > {14'd0, ACT_WORDS})
        err[DTPU_ERR_ACT_CAPACITY] = 1'b1;
    else if (reg_wgt_base[LOG_COLS-1:0] != 0 || wgt_end > {14'd0, WEIGHT_WORDS})
        err[DTPU_ERR_WGT_RANGE] = 1'b1;
    else if (check_param && (reg_param_base[LOG_COLS-1:0] != 0 || prm_end > {14'd0, PARAM_ENTRIES}))
        err[DTPU_ERR_PARAM_RANGE] = 1'b1;
end
assign cfg_err = err;

// a + d modulo the ring (both already below it)
function [AR-1:0] ring_add(input [AR-1:0] x, input [AR-1:0] d, input [AR-1:0] m);
    reg [AR:0] t;
    begin
        t = {1'b0, x} + {1'b0, d};
        ring_add = t >= {1'b0, m} ? t[AR-1:0] - m : t[AR-1:0];
    end
endfunction

// latched configuration
reg [15:0] ih_r, oh_r, iw_r, gc_r, nchunk_r, lb_r;
reg [7:0]  kh_r, kw_r, sy_r, dy_r, dx_r, pt_r;
reg [15:0] span_r;
reg [AR-1:0] rsc_r, ring_r;
reg [AR-1:0] syr_r, dyr_r, chr_r, r0_r;           // ring-row deltas (mod ring)
reg [WR-1:0] gpc_r, wbase_r;
reg [ITW-1:0] items_r, steps_r;
reg [RWW-1:0] row_words_r;
reg [19:0] s_r, p_r;
reg [3:0]  log_tc_r;
reg [2:0]  wi_r;
reg [1:0]  log_l_r, log_lo_r;
reg [15:0] q0_r, rem0_r;                           // PT / SY, PT % SY
reg signed [LEW-1:0] last_end_r;                   // (OH-1)*SY - PT + span - 1
reg [15:0] spt_r;                                  // span - PT (>= 1 when the job runs)
reg [LOG_PARAM_ENTRIES-1:0] pbase_r;
reg [LAW-1:0] dxgc_r;                              // (banked layout: the xg values mod 2^LAW)
reg signed [XW-1:0] xd0_r, xd1_r;                  // per-step column deltas
reg [LAW-1:0] xgd0_r, xgd1_r;
reg [GW-1:0] dg_r;
reg signed [XW-1:0] xp0_r [0:COLS-1];
reg [LAW-1:0]     xg0_r [0:COLS-1];
reg [GW-1:0]      g0_r [0:COLS-1];
reg [63:0] in_total_r, res_total_r;
reg [31:0] rows_total, out_rows_total;            // NCHUNK*IH, NCHUNK*OH
// GC for the datapath: GC <= COLS in a job that runs (BAD_DIMS otherwise)
wire [GW-1:0] gcn = gc_r[GW-1:0];

// steps of a row's items: ceil(items / COLS)
function [ITW-1:0] steps_of(input [ITW-1:0] v);
    /* verilator lint_off UNUSEDSIGNAL */
    reg [ITW:0] t;
    /* verilator lint_on UNUSEDSIGNAL */
    begin
        t = ({1'b0, v} + COLS - 1) >> LOG_COLS;
        steps_of = t[ITW-1:0];
    end
endfunction

// (the slot's words are at most 2^LAW in a job that runs)
function [AR-1:0] rsc_lo(input [RWW-1:0] v);
    /* verilator lint_off UNUSEDSIGNAL */
    reg [RWW:0] t;
    /* verilator lint_on UNUSEDSIGNAL */
    begin
        t = ({1'b0, v} + COLS - 1) >> LOG_COLS;
        rsc_lo = t[AR-1:0];
    end
endfunction

function [WR-1:0] gpc_of(input [31:0] v);
    /* verilator lint_off UNUSEDSIGNAL */
    reg [31:0] t;
    /* verilator lint_on UNUSEDSIGNAL */
    begin
        t = (v + COLS - 1) >> LOG_COLS;
        gpc_of = t[WR-1:0];
    end
endfunction

// ---- setup: the derived quantities, computed after CONFIG0 ----
// The products, quotients and remainders of the fields (slot sizes, totals, the ring-row
// deltas, which take remainders modulo LB_ROWS, the per-column start values) come from one
// shared multiplier and one restoring divider, one product and one quotient bit per cycle, in
// a fixed order: the loader and the computer start DW_SETUP cycles after CONFIG (contract.json
// timing.DW_SETUP, model.dw_schedule). Computed in one CONFIG cycle they were the unit's (and
// the board build's) longest paths: four 17-bit remainders and the products after them, the
// column start values' 32-bit products (docs/synthesis.md).
// The multiplier: operands selected at step s into op_a_r/op_b_r, the product registered at
// s + 1 (prod_r), written to its register at s + 2 (readable from s + 3; a step two after a
// product may select prod_r itself).
localparam SU_W = 6;
localparam [SU_W-1:0]
    P_TAPS = 6'd0, P_GROUPS = 6'd1, P_RW = 6'd2, P_ITEMS = 6'd3, P_OYL = 6'd4, P_SPAN = 6'd5,
    P_DXGC = 6'd6, P_SXGC = 6'd7, P_PLGC = 6'd8, P_RT = 6'd9, P_ORT = 6'd10, P_SISSUE = 6'd11,
    P_GI = 6'd12, P_GO = 6'd13, P_RING = 6'd14, P_INT = 6'd15, P_REST = 6'd16, P_SYR = 6'd17,
    P_DYR = 6'd19, P_R0 = 6'd28, P_CHR = 6'd55,
    // the rotated layout's products (DW_ROTATE; the banked build leaves these steps idle):
    // the row's words IW*GC (P_RW then takes the slot's, (IW+SX-1)*GC), NCHUNK*P, W1*GC,
    // (SX-1)*W1*GC, SX*W1*GC, ep0*W1, D0, dxm*W1, INC0 (and INC1 from it)
    P_ROWW = 6'd20, P_GPC = 6'd21, P_W1GC = 6'd22, P_WRAP = 6'd25, P_SLOTW = 6'd26,
    P_EPW = 6'd29, P_D0 = 6'd32, P_DXW = 6'd37, P_INC0 = 6'd40,
    // its divider by SX: loads W1 = ceil(IW/SX) (17 quotient bits), PL / SX, DX / SX (8 each),
    // each result taken at the next load (R_END after the last)
    R_W1 = 6'd0, R_PL = 6'd18, R_DX = 6'd27, R_END = 6'd36,
    // the divider: loads at these steps, its result is taken at the next load (8 quotient
    // bits for the 8-bit dividends, 17 for the chunk step)
    D_SY = 6'd0, D_DY = 6'd9, D_PT = 6'd18, D_Q0 = 6'd27, D_CH = 6'd36, D_END = 6'd54,
    // the per-column walk (needs SX*GC and PL*GC), the last end, the init of the walk
    W_START = 6'd12, E_LAST = 6'd20, S_INIT = 6'd58;

initial begin
    if ({{(32-SU_W){1'b0}}, S_INIT} != DTPU_DW_SETUP
            || {{(32-SU_W){1'b0}}, W_START} + COLS + 1 > {{(32-SU_W){1'b0}}, S_INIT}) begin
        $error("Error: the setup's schedule does not match contract.json's DW_SETUP (instance %m)");
        $finish;
    end
end

reg su_run, ready_reg;
reg [SU_W-1:0] su_st, su_d1, su_d2;
reg su_v1, su_v2;
wire su_init = su_run && su_st == S_INIT;

// latched fields
reg [15:0] ow_r;
reg [7:0]  sx_r, pl_r;
reg [3:0]  tc_r;
reg [TPW-1:0] taps_r;
reg [GRW-1:0] groups_r;
reg [OYW-1:0] oy_last_r;
reg [OAW-1:0] gi_r, go_r;
reg [15:0] syl_r, dyl_r, r0l_r, chl_r;             // SY, DY, -PT, the chunk step mod LB_ROWS
reg [LAW-1:0] sxgc_r, plgc_r;

// the multiplier
// Operand A takes OAW = GRW + 16 bits (its widest, GC*NCHUNK*IH), the product PW = OAW + 16:
// every product of a job that runs is exact in it (the totals GC*NCHUNK*IH*IW and *OH*OW too).
reg [OAW-1:0] op_a_r, sel_a;
reg [15:0] op_b_r, sel_b;
/* verilator lint_off UNUSEDSIGNAL */
reg [PW-1:0] prod_r;
/* verilator lint_on UNUSEDSIGNAL */
// (the slot-offset operands below are kept modulo 2^LAW: only a product's low LAW bits are read)
wire [LAW-1:0] d0_a = epw_r - {{(LAW-8){1'b0}}, pld_r};
wire [LAW-1:0] inc0_a = dxw_r + {{(LAW-8){1'b0}}, dxd_r};
always @* begin
    sel_a = {OAW{1'b0}};
    sel_b = 16'd0;
    case (su_st)
        P_TAPS:   begin sel_a = {{(OAW-8){1'b0}}, kh_r}; sel_b = {8'd0, kw_r}; end
        P_GROUPS: begin sel_a = {{(OAW-16){1'b0}}, gc_r}; sel_b = nchunk_r; end
        P_RW:     begin
            sel_a = DW_ROTATE != 0 ? {{(OAW-17){1'b0}}, {1'b0, iw_r} + {9'd0, sx_r} - 17'd1}
                                   : {{(OAW-16){1'b0}}, iw_r};
            sel_b = gc_r;
        end
        P_ITEMS:  begin sel_a = {{(OAW-16){1'b0}}, ow_r}; sel_b = gc_r; end
        // OH >= 1 in a job that runs
        P_OYL:    begin sel_a = {{(OAW-16){1'b0}}, oh_r - 16'd1}; sel_b = {8'd0, sy_r}; end
        P_SPAN:   begin sel_a = {{(OAW-16){1'b0}}, {8'd0, kh_r} - 16'd1}; sel_b = {8'd0, dy_r}; end
        P_DXGC:   begin sel_a = {{(OAW-8){1'b0}}, dx_r}; sel_b = gc_r; end
        P_SXGC:   begin sel_a = {{(OAW-8){1'b0}}, sx_r}; sel_b = gc_r; end
        P_PLGC:   begin sel_a = {{(OAW-8){1'b0}}, pl_r}; sel_b = gc_r; end
        P_RT:     begin sel_a = {{(OAW-16){1'b0}}, nchunk_r}; sel_b = ih_r; end
        P_ORT:    begin sel_a = {{(OAW-16){1'b0}}, nchunk_r}; sel_b = oh_r; end
        P_SISSUE: begin sel_a = {{(OAW-TPW){1'b0}}, taps_r}; sel_b = {12'd0, tc_r}; end
        P_GI:     begin sel_a = {{(OAW-GRW){1'b0}}, groups_r}; sel_b = ih_r; end
        P_GO:     begin sel_a = {{(OAW-GRW){1'b0}}, groups_r}; sel_b = oh_r; end
        // the ring's bank rows modulo 2^AR (ring_r's width): the low AR bits of RSC suffice
        P_RING:   begin sel_a = {{(OAW-AR){1'b0}}, rsc_r}; sel_b = lb_r; end
        P_INT:    begin sel_a = gi_r; sel_b = iw_r; end
        P_REST:   begin sel_a = go_r; sel_b = ow_r; end
        P_SYR:    begin sel_a = {{(OAW-AR){1'b0}}, rsc_r}; sel_b = syl_r; end
        P_DYR:    begin sel_a = {{(OAW-AR){1'b0}}, rsc_r}; sel_b = dyl_r; end
        P_R0:     begin sel_a = {{(OAW-AR){1'b0}}, rsc_r}; sel_b = r0l_r; end
        P_CHR:    begin sel_a = {{(OAW-AR){1'b0}}, rsc_r}; sel_b = chl_r; end
        default: ;
    endcase
    if (DW_ROTATE != 0) begin
        case (su_st)
            P_ROWW:  begin sel_a = {{(OAW-16){1'b0}}, iw_r}; sel_b = gc_r; end
            P_GPC:   begin sel_a = {{(OAW-16){1'b0}}, nchunk_r}; sel_b = {{(15-LOG_COLS){1'b0}}, pph_r[LOG_COLS:0]}; end
            P_W1GC:  begin sel_a = {{(OAW-16){1'b0}}, w1_r}; sel_b = gc_r; end
            P_WRAP:  begin sel_a = {{(OAW-LAW){1'b0}}, w1gc_r}; sel_b = {8'd0, sx_r - 8'd1}; end
            P_SLOTW: begin sel_a = {{(OAW-LAW){1'b0}}, w1gc_r}; sel_b = {8'd0, sx_r}; end
            P_EPW:   begin sel_a = {{(OAW-8){1'b0}}, ep0_r}; sel_b = w1_r; end
            // (ep0*W1 - ceil(PL/SX))*GC: the low LAW bits of the product are the signed value's
            P_D0:    begin sel_a = {{(OAW-LAW){1'b0}}, d0_a}; sel_b = gc_r; end
            P_DXW:   begin sel_a = {{(OAW-8){1'b0}}, dxm_r}; sel_b = w1_r; end
            P_INC0:  begin sel_a = {{(OAW-LAW){1'b0}}, inc0_a}; sel_b = gc_r; end
            default: ;
        endcase
    end
end
wire [PW-1:0] mul_p = {{(PW-OAW){1'b0}}, op_a_r} * {{(PW-16){1'b0}}, op_b_r};

// the divider: restoring, one quotient bit a cycle; the dividend is shifted in MSB first
reg [16:0] dv_n;
reg [7:0]  dv_q;                                   // the quotient's low bits (PT / SY)
reg [15:0] dv_r, dv_d;
reg dv_neg;                                        // a remainder of a negative dividend
wire [16:0] dv_rs = {dv_r, dv_n[16]};
wire dv_ge = dv_rs >= {1'b0, dv_d};
wire [15:0] dv_rn = dv_ge ? dv_rs[15:0] - dv_d : dv_rs[15:0];   // below dv_d
// x mod d in [0, d) (0 for d = 0), from |x| mod d
wire [15:0] dv_mod = dv_d == 16'd0 ? 16'd0 : dv_neg && dv_r != 16'd0 ? dv_d - dv_r : dv_r;
// the chunk step IH - (OH-1)*SY, in [-254, 65535] when the job runs: its 18-bit value's magnitude
wire [OYW:0] chd = {2'd0, ih_r} - {1'b0, oy_last_r};
wire [OYW-1:0] chd_mag = chd[OYW] ? {OYW{1'b0}} - chd[OYW-1:0] : chd[OYW-1:0];

// the per-column walk: column j < COLS takes item j = (j / GC, j % GC); at j = COLS, the
// per-step deltas
reg w_run;
reg [5:0] w_j;
reg [GW-1:0] w_r;
reg signed [XW-1:0] w_xp;
reg [LAW-1:0] w_xg;
wire gc_ok = gc_r != 16'd0 && gc_r <= COLS;

// ---- the rotated layout's quantities (DW_ROTATE; docs/architecture.md): W1 = ceil(IW/SX),
// -PL = eq0*SX + ep0 (eq0 = -ceil(PL/SX)), DX = dxd*SX + dxm; D0 = (ep0*W1 + eq0)*GC, per kx
// step D += (dxm*W1 + dxd)*GC (INC0), minus SX*W1*GC - GC when the phase wraps (INC1); the
// loader's W1*GC and (SX-1)*W1*GC - GC; P, the odd part of GC, and NCHUNK*P weight rows a tap
reg [7:0]  ep0_r, dxm_r, dxd_r, pld_r;            // ep0, DX mod SX, DX div SX, ceil(PL/SX)
reg [15:0] w1_r;
// (slot offsets: modulo 2^LAW, the activation buffer's address width)
reg [LAW-1:0] w1gc_r, ld_wrap_r, slotw_r, epw_r, dxw_r; // W1*GC, (SX-1)*W1*GC - GC, SX*W1*GC, ..
reg [LAW-1:0] d0_r, inc0_r, inc1_r;
reg [WR-1:0] pph_r;                                // weight rows per chunk and tap (P)
// the divider by SX: restoring, one quotient bit a cycle, the dividend shifted in MSB first
reg [16:0] rv_n;
reg [15:0] rv_q;                                   // (W1 < 2^16: its 17th bit is 0)
reg [7:0]  rv_r;
wire [8:0] rv_rs = {rv_r, rv_n[16]};
wire rv_ge = rv_rs >= {1'b0, sx_r};
/* verilator lint_off UNUSEDSIGNAL */
wire [8:0] rv_sub = rv_rs - {1'b0, sx_r};
/* verilator lint_on UNUSEDSIGNAL */
wire [7:0] rv_rn = rv_ge ? rv_sub[7:0] : rv_rs[7:0];   // below SX
wire w_wrap = {1'b0, w_r} + 1'b1 == {1'b0, gcn};

integer j;

always @(posedge clk) begin
    // the multiplier's pipeline
    op_a_r <= sel_a;
    op_b_r <= sel_b;
    prod_r <= mul_p;
    su_d1 <= su_st;
    su_d2 <= su_d1;
    su_v1 <= su_run;
    su_v2 <= su_v1;
    if (su_v2) begin
        case (su_d2)
            P_TAPS:   taps_r <= prod_r[TPW-1:0];
            P_GROUPS: begin
                groups_r <= prod_r[GRW-1:0];
                if (DW_ROTATE == 0) gpc_r <= gpc_of(prod_r[31:0]);
            end
            P_RW:     begin
                if (DW_ROTATE == 0) row_words_r <= prod_r[RWW-1:0];
                rsc_r <= rsc_lo(prod_r[RWW-1:0]);
            end
            P_ITEMS:  begin
                items_r <= prod_r[ITW-1:0];
                steps_r <= steps_of(prod_r[ITW-1:0]);
            end
            P_OYL:    oy_last_r <= prod_r[OYW-1:0];
            P_SPAN:   span_r <= prod_r[15:0] + 16'd1;
            P_DXGC:   dxgc_r <= prod_r[LAW-1:0];
            P_SXGC:   sxgc_r <= prod_r[LAW-1:0];
            P_PLGC:   plgc_r <= prod_r[LAW-1:0];
            P_RT:     rows_total <= prod_r[31:0];
            P_ORT:    out_rows_total <= prod_r[31:0];
            P_SISSUE: begin
                s_r <= prod_r[19:0];
                p_r <= prod_r[19:0] > COLS * {17'd0, wi_r} ? prod_r[19:0] : COLS * {17'd0, wi_r};
            end
            P_GI:     gi_r <= prod_r[OAW-1:0];
            P_GO:     go_r <= prod_r[OAW-1:0];
            P_RING:   ring_r <= prod_r[AR-1:0];
            P_INT:    in_total_r <= {{(64-PW){1'b0}}, prod_r};
            P_REST:   res_total_r <= wi_r == 3'd0 ? 64'd0 : {{(64-PW){1'b0}}, prod_r} << (log_l_r - log_lo_r);
            P_SYR:    syr_r <= prod_r[AR-1:0];
            P_DYR:    dyr_r <= prod_r[AR-1:0];
            P_R0:     r0_r <= prod_r[AR-1:0];
            P_CHR:    chr_r <= prod_r[AR-1:0];
            default: ;
        endcase
        if (DW_ROTATE != 0) begin
            case (su_d2)
                P_ROWW:  row_words_r <= prod_r[RWW-1:0];
                P_GPC:   gpc_r <= prod_r[WR-1:0];
                P_W1GC:  w1gc_r <= prod_r[LAW-1:0];
                P_WRAP:  ld_wrap_r <= prod_r[LAW-1:0] - {{(LAW-GW){1'b0}}, gcn};
                P_SLOTW: slotw_r <= prod_r[LAW-1:0];
                P_EPW:   epw_r <= prod_r[LAW-1:0];
                P_D0:    d0_r <= prod_r[LAW-1:0];
                P_DXW:   dxw_r <= prod_r[LAW-1:0];
                P_INC0:  begin
                    inc0_r <= prod_r[LAW-1:0];
                    inc1_r <= prod_r[LAW-1:0] - slotw_r + {{(LAW-GW){1'b0}}, gcn};
                end
                default: ;
            endcase
        end
    end

    // the rotated layout's divider by SX
    rv_n <= {rv_n[15:0], 1'b0};
    rv_r <= rv_rn;
    rv_q <= {rv_q[14:0], rv_ge};
    if (su_run && DW_ROTATE != 0) begin
        pph_r <= {{(WR-LOG_COLS-1){1'b0}}, odd_part(gc_r[LOG_COLS:0])};
        case (su_st)
            R_PL:  w1_r <= rv_q[15:0];
            R_DX:  begin
                pld_r <= rv_q[7:0] + {7'd0, rv_r != 8'd0};
                ep0_r <= rv_r == 8'd0 ? 8'd0 : sx_r - rv_r;
            end
            R_END: begin
                dxd_r <= rv_q[7:0];
                dxm_r <= rv_r;
            end
            default: ;
        endcase
        case (su_st)
            R_W1: begin rv_n <= {1'b0, iw_r} + {9'd0, sx_r} - 17'd1; rv_r <= 8'd0; rv_q <= 16'd0; end
            R_PL: begin rv_n <= {pl_r, 9'd0}; rv_r <= 8'd0; rv_q <= 16'd0; end
            R_DX: begin rv_n <= {dx_r, 9'd0}; rv_r <= 8'd0; rv_q <= 16'd0; end
            default: ;
        endcase
    end

    // the divider: an iteration every cycle, a load at its steps
    dv_n <= {dv_n[15:0], 1'b0};
    dv_r <= dv_rn;
    dv_q <= {dv_q[6:0], dv_ge};
    if (su_run) begin
        case (su_st)
            D_DY:  syl_r <= dv_mod;
            D_PT:  dyl_r <= dv_mod;
            D_Q0:  r0l_r <= dv_mod;
            D_CH:  begin
                q0_r <= dv_d == 16'd0 ? 16'd0 : {8'd0, dv_q};
                rem0_r <= dv_d == 16'd0 ? 16'd0 : dv_r;
            end
            D_END: chl_r <= dv_mod;
            default: ;
        endcase
        dv_r <= 16'd0;
        dv_q <= 8'd0;
        case (su_st)
            D_SY: begin dv_n <= {sy_r, 9'd0}; dv_d <= lb_r; dv_neg <= 1'b0; end
            D_DY: begin dv_n <= {dy_r, 9'd0}; dv_d <= lb_r; dv_neg <= 1'b0; end
            D_PT: begin dv_n <= {pt_r, 9'd0}; dv_d <= lb_r; dv_neg <= pt_r != 8'd0; end
            D_Q0: begin dv_n <= {pt_r, 9'd0}; dv_d <= {8'd0, sy_r}; dv_neg <= 1'b0; end
            D_CH: begin dv_n <= chd_mag; dv_d <= lb_r; dv_neg <= chd[17]; end
            default: begin dv_r <= dv_rn; dv_q <= {dv_q[6:0], dv_ge}; end
        endcase
    end

    // the per-column walk
    if (su_run && su_st == W_START) begin
        w_run <= gc_ok;
        w_j <= 6'd0;
        w_r <= {GW{1'b0}};
        w_xp <= {XW{1'b0}} - {{(XW-8){1'b0}}, pl_r};
        w_xg <= {LAW{1'b0}} - plgc_r;
    end else if (w_run) begin
        for (j = 0; j < COLS; j = j + 1) begin
            if (w_j == j[5:0]) begin
                g0_r[j] <= w_r;
                xp0_r[j] <= w_xp;
                xg0_r[j] <= w_xg;
            end
        end
        if (w_j == COLS) begin
            w_run <= 1'b0;
            dg_r <= w_r;
            xd0_r <= w_xp + {{(XW-8){1'b0}}, pl_r};
            xd1_r <= w_xp + {{(XW-8){1'b0}}, pl_r} + {{(XW-8){1'b0}}, sx_r};
            xgd0_r <= w_xg + plgc_r;
            xgd1_r <= w_xg + plgc_r + sxgc_r - {{(LAW-GW){1'b0}}, gcn};
        end
        w_j <= w_j + 6'd1;
        if (w_wrap) begin
            w_r <= {GW{1'b0}};
            w_xp <= w_xp + {{(XW-8){1'b0}}, sx_r};
            w_xg <= w_xg + sxgc_r - {{(LAW-GW){1'b0}}, gcn} + 1'b1;
        end else begin
            w_r <= w_r + 1'b1;
            w_xg <= w_xg + 1'b1;
        end
    end

    if (su_run && su_st == E_LAST) begin
        last_end_r <= $signed({{(LEW-OYW){1'b0}}, oy_last_r}) - $signed({{(LEW-8){1'b0}}, pt_r})
                      + $signed({{(LEW-16){1'b0}}, span_r}) - 1;
        spt_r <= span_r - {8'd0, pt_r};
    end

    if (su_run) begin
        su_st <= su_st + 1'b1;
    end
    if (su_init) begin
        su_run <= 1'b0;
        ready_reg <= 1'b1;
    end

    if (latch) begin
        ih_r <= ih; oh_r <= oh; iw_r <= iw; ow_r <= ow; gc_r <= gc; nchunk_r <= nchunk; lb_r <= lb;
        kh_r <= kh; kw_r <= kw; sy_r <= sy; dy_r <= dy; dx_r <= dx; pt_r <= pt;
        sx_r <= sx; pl_r <= pl; tc_r <= tc;
        wbase_r <= reg_wgt_base[LOG_WEIGHT_WORDS-1:LOG_COLS];
        log_tc_r <= tc[3] ? 4'd3 : tc[2] ? 4'd2 : tc[1] ? 4'd1 : 4'd0;
        wi_r <= wi;
        log_l_r <= log_l;
        log_lo_r <= log_lo;
        pbase_r <= reg_param_base[LOG_PARAM_ENTRIES-1:0];
        su_run <= 1'b1;
        su_st <= {SU_W{1'b0}};
        ready_reg <= 1'b0;
        w_run <= 1'b0;
    end
    if (!rst_n) begin
        su_run <= 1'b0;
        su_v1 <= 1'b0;
        su_v2 <= 1'b0;
        ready_reg <= 1'b0;
        w_run <= 1'b0;
    end
end

// the totals: all ones until the setup is done, so that the control unit's word counts
// cannot finish a job before it has started. Shown from the setup's last cycle (su_init, the
// values are there since step P_REST + 3), one before the loader may take a word: dtpu_control
// registers them, and its count of a one-word job's only word (tlast, ERR.TLAST_EARLY unless
// it is the last) must compare against the job's total in the loader's first cycle
assign in_total = ready_reg || su_init ? in_total_r : {64{1'b1}};
assign res_total = ready_reg || su_init ? res_total_r : {64{1'b1}};

// ================================ LOADER ================================
reg [31:0] ld_row_reg;        // rows completely loaded
reg [RWW-1:0] ld_word_reg;    // word within the row in progress (< IW*GC <= 2^LAW)
reg [AR-1:0] ld_base_reg;     // ring row base of the row in progress
reg        ld_active_reg;     // row in progress (its slot was free)

wire ld_more = ld_row_reg < rows_total;

// release tracker: row x = (next row) - LB: chunk cx (times OH), iy, q = (iy+PT)/SY, rem
reg [31:0] tr_cxoh_reg;
reg [15:0] tr_iy_reg, tr_q_reg, tr_rem_reg;
reg [31:0] rows_done_reg;     // output rows finished by the computer
wire tr_used_q = tr_q_reg < oh_r && tr_rem_reg < span_r;
wire tr_used_last = tr_q_reg >= oh_r && $signed({{(LEW-FW){1'b0}}, tr_iy_reg}) <= last_end_r;
wire [15:0] tr_olast = tr_q_reg >= oh_r ? oh_r - 16'd1 : tr_q_reg;
wire tr_released = !(tr_used_q || tr_used_last) || rows_done_reg > tr_cxoh_reg + {16'd0, tr_olast};
wire slot_free = ld_row_reg < {16'd0, lb_r} || tr_released;
wire ld_can = run && ready_reg && ld_more && (ld_active_reg || slot_free);
assign need_act = ld_can;

// rotated layout: the word's slot offset, (p*W1 + x div SX)*GC (ld_ax) + g
// (modulo 2^LAW: the address takes the offset's low LAW bits)
reg [LAW-1:0] ld_ax_reg;
reg [GW-1:0] ld_g_reg;
reg [7:0]  ld_p_reg;
/* verilator lint_off UNUSEDSIGNAL */
wire [RWW-1:0] ld_word_p1 = ld_word_reg + 1'b1;
wire [LAW-1:0] ld_off = DW_ROTATE != 0 ? ld_ax_reg + {{(LAW-GW){1'b0}}, ld_g_reg} : ld_word_reg[LAW-1:0];
/* verilator lint_on UNUSEDSIGNAL */
wire [AR-1:0] ld_addr_row = ld_base_reg + ld_off[LAW-1:LOG_COLS];
assign abuf_waddr = {ld_addr_row, ld_off[LOG_COLS-1:0]};

wire ld_row_end = ld_word_p1 == row_words_r;

always @(posedge clk) begin
    if (latch) begin
        ld_row_reg <= 32'd0;
        ld_word_reg <= {RWW{1'b0}};
        ld_base_reg <= {AR{1'b0}};
        ld_active_reg <= 1'b0;
        ld_ax_reg <= {LAW{1'b0}};
        ld_g_reg <= {GW{1'b0}};
        ld_p_reg <= 8'd0;
        tr_cxoh_reg <= 32'd0;
        tr_iy_reg <= 16'd0;
    end else if (su_init) begin
        // q0/rem0 are there when the setup ends
        tr_q_reg <= q0_r;
        tr_rem_reg <= rem0_r;
    end else if (adv && act_fire) begin
        if (!ld_active_reg && ld_row_reg >= {16'd0, lb_r}) begin
            // the row starts: the tracker moves on to the next candidate
            if (tr_iy_reg + 16'd1 == ih_r) begin
                tr_iy_reg <= 16'd0;
                tr_cxoh_reg <= tr_cxoh_reg + {16'd0, oh_r};
                tr_q_reg <= q0_r;
                tr_rem_reg <= rem0_r;
            end else begin
                tr_iy_reg <= tr_iy_reg + 16'd1;
                if (tr_rem_reg + 16'd1 == {8'd0, sy_r}) begin
                    tr_rem_reg <= 16'd0;
                    tr_q_reg <= tr_q_reg + 16'd1;
                end else begin
                    tr_rem_reg <= tr_rem_reg + 16'd1;
                end
            end
        end
        if (ld_row_end) begin
            ld_active_reg <= 1'b0;
            ld_word_reg <= {RWW{1'b0}};
            ld_row_reg <= ld_row_reg + 32'd1;
            ld_base_reg <= ring_add(ld_base_reg, rsc_r, ring_r);
            ld_ax_reg <= {LAW{1'b0}};
            ld_g_reg <= {GW{1'b0}};
            ld_p_reg <= 8'd0;
        end else begin
            ld_active_reg <= 1'b1;
            ld_word_reg <= ld_word_p1;
            if ({1'b0, ld_g_reg} + 1'b1 == {1'b0, gcn}) begin
                // next pixel: the next phase, or the first phase one pixel on
                ld_g_reg <= {GW{1'b0}};
                if (ld_p_reg + 8'd1 == sx_r) begin
                    ld_p_reg <= 8'd0;
                    ld_ax_reg <= ld_ax_reg - ld_wrap_r;
                end else begin
                    ld_p_reg <= ld_p_reg + 8'd1;
                    ld_ax_reg <= ld_ax_reg + w1gc_r;
                end
            end else begin
                ld_g_reg <= ld_g_reg + 1'b1;
            end
        end
    end
    if (!rst_n) begin
        ld_active_reg <= 1'b0;
    end
end

// =============================== COMPUTER ===============================
reg [15:0] c_reg;                      // chunk
reg [15:0] oy_reg;
reg signed [YW-1:0] first_reg;         // oy*SY - PT
// the rows the current output row needs loaded, min(A, B): its window's end A = c*IH + first +
// span and its chunk's end B = (c+1)*IH, each kept by one addition as the rows advance
reg [31:0] need_a_reg, need_b_reg;
reg [CGW-1:0] cgc_reg;                 // c*GC (modulo the parameter and weight memories)
reg [AR-1:0] rbase_reg;                // ring row base of input row (c*IH + first)
reg [ITW-1:0] step_reg;
reg [ITW-1:0] q_reg;                   // first item of the step
reg [19:0] cyc_reg;                    // cycle within the step period
reg [3:0]  u_reg;                      // column group within the tap
reg [7:0]  kx_reg, ky_reg;
reg signed [YW-1:0] y_reg;             // first + ky*DY
reg [AR-1:0] rb_reg;                   // ring row base of the tap's input row
reg [KXW-1:0] kxo_reg;                 // kx*DX
reg [LAW-1:0] kxg_reg;                 // kx*DX*GC (banked layout; modulo 2^LAW)
reg [WR-1:0] wrow_reg;                 // weight bank row of the tap
reg [GW-1:0] g_reg [0:COLS-1];
reg signed [XW-1:0] xp_reg [0:COLS-1];
reg [LAW-1:0] xg_reg [0:COLS-1];
reg        c_run_reg;                  // output rows remain
reg [LAW-1:0] rd_reg;                  // rotated: the tap's slot offset D (item q reads q + D), mod 2^LAW
reg [8:0]  rep_reg;                    // rotated: its phase ep = (kx*DX - PL) mod SX
reg [WR-1:0] rcp_reg, rh_reg;          // rotated: chunk*P, step phase (step mod P)
reg        started_reg;                // the current row has started


// ld_row >= min(A, B) as two compares side by side (the readiness test was the unit's longest
// path as cih + min(first + span - 1, IH - 1) + 1 >= ..., four carry chains in series)
wire row_ready = started_reg || ld_row_reg >= need_a_reg || ld_row_reg >= need_b_reg;
wire issuing = run && ready_reg && c_run_reg && row_ready && cyc_reg < s_r;
// cyc_reg + 1 >= p_r, set with cyc_reg (look-ahead) like last_step below
reg step_end_reg;
wire step_end = step_end_reg;
// step_reg + 1 == steps_r as a register set with step_reg (look-ahead): the test's adder and
// compare were on the path into the row-end registers' enables (step_reg -> need_a_reg)
reg last_step_reg;
wire last_step = last_step_reg;
wire last_row = rows_done_reg + 32'd1 == out_rows_total;
wire tap_last_cycle = u_reg + 4'd1 == (4'd1 << log_tc_r);
wire kx_last = kx_reg + 8'd1 == kw_r;
wire ky_last = ky_reg + 8'd1 == kh_r;
wire [ITW-1:0] items_left = items_r - q_reg;
wire [15:0] items_step = items_left > COLS ? COLS : items_left[15:0];
// -PT, the first row of a chunk's first output row
wire signed [YW-1:0] neg_pt = -$signed({{(YW-8){1'b0}}, pt_r});

integer k;

always @(posedge clk) begin
    if (su_init) begin
        c_reg <= 16'd0;
        oy_reg <= 16'd0;
        first_reg <= neg_pt;
        need_a_reg <= {16'd0, spt_r};
        need_b_reg <= {16'd0, ih_r};
        cgc_reg <= {CGW{1'b0}};
        rbase_reg <= r0_r;
        rb_reg <= r0_r;
        y_reg <= neg_pt;
        step_reg <= {ITW{1'b0}};
        last_step_reg <= steps_r == {{(ITW-1){1'b0}}, 1'b1};
        q_reg <= {ITW{1'b0}};
        cyc_reg <= 20'd0;
        step_end_reg <= p_r <= 20'd1;
        u_reg <= 4'd0;
        kx_reg <= 8'd0;
        ky_reg <= 8'd0;
        kxo_reg <= {KXW{1'b0}};
        kxg_reg <= {LAW{1'b0}};
        wrow_reg <= wbase_r;
        rows_done_reg <= 32'd0;
        c_run_reg <= 1'b1;
        started_reg <= 1'b0;
        rd_reg <= d0_r;
        rep_reg <= {1'b0, ep0_r};
        rcp_reg <= {WR{1'b0}};
        rh_reg <= {WR{1'b0}};
        for (k = 0; k < COLS; k = k + 1) begin
            g_reg[k] <= g0_r[k];
            xp_reg[k] <= xp0_r[k];
            xg_reg[k] <= xg0_r[k];
        end
    end else if (adv && run && ready_reg && c_run_reg && row_ready) begin
        started_reg <= 1'b1;
        // taps within the step
        if (cyc_reg < s_r) begin
            if (tap_last_cycle) begin
                u_reg <= 4'd0;
                if (kx_last) begin
                    kx_reg <= 8'd0;
                    kxo_reg <= {KXW{1'b0}};
                    kxg_reg <= {LAW{1'b0}};
                    rd_reg <= d0_r;
                    rep_reg <= {1'b0, ep0_r};
                    if (!ky_last) begin
                        ky_reg <= ky_reg + 8'd1;
                        y_reg <= y_reg + $signed({{(YW-8){1'b0}}, dy_r});
                        rb_reg <= ring_add(rb_reg, dyr_r, ring_r);
                    end
                end else begin
                    kx_reg <= kx_reg + 8'd1;
                    kxo_reg <= kxo_reg + {{(KXW-8){1'b0}}, dx_r};
                    kxg_reg <= kxg_reg + dxgc_r;
                    if (rep_reg + {1'b0, dxm_r} >= {1'b0, sx_r}) begin
                        rep_reg <= rep_reg + {1'b0, dxm_r} - {1'b0, sx_r};
                        rd_reg <= rd_reg + inc1_r;
                    end else begin
                        rep_reg <= rep_reg + {1'b0, dxm_r};
                        rd_reg <= rd_reg + inc0_r;
                    end
                end
                wrow_reg <= wrow_reg + gpc_r;
            end else begin
                u_reg <= u_reg + 4'd1;
            end
        end
        if (step_end) begin
            cyc_reg <= 20'd0;
            step_end_reg <= p_r <= 20'd1;
            u_reg <= 4'd0;
            kx_reg <= 8'd0;
            ky_reg <= 8'd0;
            kxo_reg <= {KXW{1'b0}};
            kxg_reg <= {LAW{1'b0}};
            wrow_reg <= wbase_r;
            rd_reg <= d0_r;
            rep_reg <= {1'b0, ep0_r};
            rh_reg <= rh_reg + 1'b1 == pph_r ? {WR{1'b0}} : rh_reg + 1'b1;
            if (last_step) begin
                // output row finished
                step_reg <= {ITW{1'b0}};
                last_step_reg <= steps_r == {{(ITW-1){1'b0}}, 1'b1};
                q_reg <= {ITW{1'b0}};
                rh_reg <= {WR{1'b0}};
                started_reg <= 1'b0;
                rows_done_reg <= rows_done_reg + 32'd1;
                if (last_row) begin
                    c_run_reg <= 1'b0;
                end
                for (k = 0; k < COLS; k = k + 1) begin
                    g_reg[k] <= g0_r[k];
                    xp_reg[k] <= xp0_r[k];
                    xg_reg[k] <= xg0_r[k];
                end
                if (oy_reg + 16'd1 == oh_r) begin
                    oy_reg <= 16'd0;
                    c_reg <= c_reg + 16'd1;
                    rcp_reg <= rcp_reg + pph_r;
                    need_a_reg <= need_b_reg + {16'd0, spt_r};
                    need_b_reg <= need_b_reg + {16'd0, ih_r};
                    cgc_reg <= cgc_reg + {{(CGW-GW){1'b0}}, gcn};
                    first_reg <= neg_pt;
                    y_reg <= neg_pt;
                    rbase_reg <= ring_add(rbase_reg, chr_r, ring_r);
                    rb_reg <= ring_add(rbase_reg, chr_r, ring_r);
                end else begin
                    oy_reg <= oy_reg + 16'd1;
                    first_reg <= first_reg + $signed({{(YW-8){1'b0}}, sy_r});
                    need_a_reg <= need_a_reg + {24'd0, sy_r};
                    y_reg <= first_reg + $signed({{(YW-8){1'b0}}, sy_r});
                    rbase_reg <= ring_add(rbase_reg, syr_r, ring_r);
                    rb_reg <= ring_add(rbase_reg, syr_r, ring_r);
                end
            end else begin
                step_reg <= step_reg + 1'b1;
                last_step_reg <= step_reg + {{(ITW-2){1'b0}}, 2'd2} == steps_r;
                q_reg <= q_reg + COLS[ITW-1:0];
                y_reg <= first_reg;
                rb_reg <= rbase_reg;
                for (k = 0; k < COLS; k = k + 1) begin
                    if ({1'b0, g_reg[k]} + {1'b0, dg_r} >= {1'b0, gcn}) begin
                        g_reg[k] <= g_reg[k] + dg_r - gcn;
                        xp_reg[k] <= xp_reg[k] + xd1_r;
                        xg_reg[k] <= xg_reg[k] + xgd1_r;
                    end else begin
                        g_reg[k] <= g_reg[k] + dg_r;
                        xp_reg[k] <= xp_reg[k] + xd0_r;
                        xg_reg[k] <= xg_reg[k] + xgd0_r;
                    end
                end
            end
        end else begin
            cyc_reg <= cyc_reg + 20'd1;
            step_end_reg <= {1'b0, cyc_reg} + 21'd2 >= {1'b0, p_r};
        end
    end
    if (!rst_n) begin
        c_run_reg <= 1'b0;
    end
end

// ---- per-column issue signals ----
wire y_in = y_reg >= 0 && y_reg < $signed({{(YW-FW){1'b0}}, ih_r});
wire [3:0] log_gs = LOG_COLS[3:0] - log_tc_r;     // log2 of columns per group

genvar jj;
generate
for (jj = 0; jj < COLS; jj = jj + 1) begin : col
    wire item_ok = jj < items_left;
    wire grp_ok = (jj >> log_gs) == u_reg;
    wire signed [XW-1:0] x = xp_reg[jj] + $signed({{(XW-KXW){1'b0}}, kxo_reg});
    wire [LAW-1:0] xg = xg_reg[jj] + kxg_reg;
    /* verilator lint_off UNUSEDSIGNAL */
    wire [CGW-1:0] gg = cgc_reg + {{(CGW-GW){1'b0}}, g_reg[jj]};
    /* verilator lint_on UNUSEDSIGNAL */
    // (modulo the memories: the row addresses take the low bits of the offsets)
    wire [AR-1:0] arow = rb_reg + xg[LAW-1:LOG_COLS];
    wire [WR-1:0] wrow = wrow_reg + gg[LOG_WEIGHT_WORDS-1:LOG_COLS];
    assign col_valid[jj] = issuing && item_ok && grp_ok;
    assign col_zero[jj] = !(y_in && x >= 0 && x < $signed({{(XW-FW){1'b0}}, iw_r}));
    assign col_arow[jj*AR +: AR] = DW_ROTATE != 0 ? {AR{1'b0}} : arow;
    assign col_abank[jj*LOG_COLS +: LOG_COLS] = DW_ROTATE != 0 ? {LOG_COLS{1'b0}} : xg[LOG_COLS-1:0];
    assign col_wrow[jj*WR +: WR] = DW_ROTATE != 0 ? {WR{1'b0}} : wrow;
    assign col_wbank[jj*LOG_COLS +: LOG_COLS] = DW_ROTATE != 0 ? {LOG_COLS{1'b0}} : gg[LOG_COLS-1:0];
    // rotated layout: bank jj serves column (jj - R) mod COLS from slot row step + Q + (jj < R)
    /* verilator lint_off CMPCONST */
    wire below_r = jj < rd_reg[LOG_COLS-1:0];    // (constant 0 for the last bank)
    /* verilator lint_on CMPCONST */
    assign bank_arow[jj*AR +: AR] = DW_ROTATE == 0 ? {AR{1'b0}}
        : rb_reg + step_reg[AR-1:0] + rd_reg[LOG_COLS +: AR] + {{(AR-1){1'b0}}, below_r};
end
endgenerate
assign act_rot = DW_ROTATE != 0 ? rd_reg[LOG_COLS-1:0] : {LOG_COLS{1'b0}};
/* verilator lint_off UNUSEDSIGNAL */
wire [WR:0] wrow_rot = {1'b0, wrow_reg} + {1'b0, rcp_reg} + {1'b0, rh_reg};
/* verilator lint_on UNUSEDSIGNAL */
assign wgt_row_rot = DW_ROTATE != 0 ? wrow_rot[WR-1:0] : {WR{1'b0}};

// bank conflict: two valid columns of one group on the same activation bank
integer a, b;
reg conf;
always @* begin
    conf = 1'b0;
    for (a = 0; a < (DW_ROTATE != 0 ? 0 : COLS); a = a + 1) begin
        for (b = a + 1; b < COLS; b = b + 1) begin
            if (col_valid[a] && col_valid[b]
                && col_abank[a*LOG_COLS +: LOG_COLS] == col_abank[b*LOG_COLS +: LOG_COLS])
                conf = 1'b1;
        end
    end
end
// with PE pairs, the two columns of a pair issuing in one cycle (TAP_CYCLES 1 with more than
// COLS/2 items) is a conflict too: their products would share one activation operand
integer c;
reg pair_conf;
always @* begin
    pair_conf = 1'b0;
    if (PE_PAIR != 0) begin
        for (c = 0; c < COLS / 2; c = c + 1) begin
            if (col_valid[c] && col_valid[c + COLS / 2])
                pair_conf = 1'b1;
        end
    end
end
assign conflict = conf | pair_conf;

assign col_first = kx_reg == 8'd0 && ky_reg == 8'd0;
assign col_last = kx_last && ky_last;

// ---- step tag ----
/* verilator lint_off UNUSEDSIGNAL */
wire [CGW-1:0] g_first = cgc_reg + {{(CGW-GW){1'b0}}, g_reg[0]};
/* verilator lint_on UNUSEDSIGNAL */
// (modulo the parameter memory, as its address)
wire [LOG_PARAM_ENTRIES-1:0] ch = pbase_r + (g_first[LOG_PARAM_ENTRIES-1:0] << log_l_r);
wire [LOG_PARAM_ENTRIES-1:0] wrap_ch = pbase_r + (cgc_reg[LOG_PARAM_ENTRIES-1:0] << log_l_r);

wire [15:0] words = items_step * {13'd0, wi_r};
assign tag_valid = issuing && cyc_reg + 20'd1 == s_r;
assign tag_job_last = last_step && last_row;
assign tag_words = words;
assign tag_nvals = words << log_lo_r;
assign tag_ch = ch;
assign tag_wrap_ch = wrap_ch;
assign tag_g = {{(16-GW){1'b0}}, g_reg[0]};

endmodule

`resetall
