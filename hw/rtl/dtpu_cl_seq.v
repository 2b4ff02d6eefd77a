/*

Copyright (c) 2026 DTPU authors. Apache-2.0.

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Command-list sequencer of contract 2.0 (docs/contract2.md): END, LOAD, REGS, RUN, POST.
 *
 * On `start` it starts the descriptor fetcher (dtpu_cl_fetch) and executes the descriptors it
 * hands over (d_*), one at a time, in list order, as dtpu.hw.cmdlist.Executor.run does:
 *
 *   END   waits until the fetcher, the read port and the core are idle, then `done`.
 *   LOAD  checks SRC (8-byte aligned), MEM (0 weights, 1 parameters) and the range against
 *         the on-chip memory (BAD_FIELD), requests COUNT words at SRC on the read port (ld_*),
 *         writes LOAD_ADDR, LOAD_COUNT, JOB (OPCODE LOAD_WGT / LOAD_PARAM) and CTRL.START into
 *         the 1.2 register file (rw_*, the 1.2 host's own LOAD job) and streams the words to the
 *         core's s_axis_wgt (wgt_*, tlast on the last), so that the core's LOADER writes the
 *         memory; waits for the core's DONE, then writes LOAD_ADDR, LOAD_COUNT and JOB back to
 *         the values they had (a LOAD does not change the job registers, as in the model).
 *         A word with SLVERR / DECERR / timeout is not passed on: the rest of the request is
 *         drained, the core's job aborted with CTRL.SOFT_RESET, and the list fails with the
 *         model's bit for the whole read (DECERR before SLVERR before TIMEOUT). AFTER larger
 *         than the RUNs so far: BAD_FIELD once the words are written (the model's order).
 *         COUNT 0 loads nothing.
 *   REGS  writes each (OFFSET, VALUE) into the 1.2 register file; an offset outside the job
 *         registers (JOB .. PF_COUNT of dtpu_regs.vh, word aligned) fails with BAD_FIELD.
 *   RUN   (9 words) hands ACT0..ACT4 / RES0..RES2 to the units on x_words; waits until the
 *         core, the load / post units are idle and the store unit has taken the earlier RUN's
 *         words, and until every earlier write the RUN depends on is answered (RANGES,
 *         below); PF_COUNT != 0 gives BAD_FIELD; then CTRL.START and, in the cycle
 *         after the write lands, la_start / st_start; the units' field checks (la_bad,
 *         st_bad, flags after their start) end the RUN with BAD_FIELD as a fault does. The core
 *         takes the load unit's words on s_axis_act and gives its results to the store unit.
 *         At the core's DONE: TLAST_EARLY / TLAST_MISSING (the ACT fields give another word
 *         count than the job's registers) -> BAD_FIELD, another fatal ERR -> JOB, either way
 *         the load unit's remaining words dropped (la_drain), CTRL.SOFT_RESET, the store unit
 *         flushed; a fault on an activation read likewise with its bus bit. Warnings (ERR bits
 *         >= 16) are cleared (w1c), as the model clears ERR after every RUN. The next
 *         descriptor starts while the store unit still writes.
 *   POST  (4 words) waits as a RUN does, po_bad -> BAD_FIELD, then po_start / st_start (the
 *         post unit's words go to the store unit, x_post); a fault or the unit's JOB error
 *         ends the list as for a RUN. RUN and POST both count for LOAD's AFTER.
 *   VEC   (9 words, VEC_EN only; else BAD_OPCODE as on a core without the vector unit) hands
 *         VEC0..VEC7 to the vector unit (dtpu_vec) on x_words, vec_start with the header (the
 *         unit takes the words as they come); vec_go once the core and every other unit are
 *         idle and every earlier write answered; the unit's
 *         `bad` -> BAD_FIELD, a fault on its reads -> that bus bit, once it is done; the next
 *         header is taken after the unit's `done`, while its writes drain. VEC does not
 *         count for LOAD's AFTER (the model counts RUNs and POSTs).
 *   A store unit fault (BRESP, or an ACC read) is reported at the next descriptor boundary or
 *   at END with the PC / TAG / DESCS of the last RUN / POST (the model reports it on that RUN
 *   too, but runs no descriptor after it).
 *
 * RANGES: the byte ranges [DST, DST + PIX*DSTC*ESIZE) of up to RANGES RUNs whose writes may
 * still be in flight (entered as each RUN ends, all dropped once the store unit is seen idle
 * at a RUN's or POST's start). A RUN waits for every write to be answered only if its input
 * [SRC, SRC + N*H*W*C*ESIZE) overlaps one of them, if it reads partial sums back (RES ACC
 * without FIRST), or if the table overflowed or a POST wrote since; otherwise it starts while
 * the earlier results drain (the golden model's rule: dtpu.hw.cmdlist.Timeline.run). The two
 * products are pipelined while the descriptor's words arrive (registers, no extra cycle).
 *
 * Timing (docs/rtl.md "cycle counts against the Timeline"): one descriptor at a time; the
 * golden model's Timeline carries the measured costs (contract.json memory_model SEQ_*: a REGS
 * pair every 2 cycles, a LOAD's AR 5 cycles after its header, the next header 11 cycles
 * after its last word; a RUN's CTRL.START 11 cycles after its header, the next header 1 cycle
 * after the core's DONE). `loading` marks a LOAD's 1.2 job so that the top counts it as IDLE.
 *
 * Register writes wait until the core is idle (no BUSY_WRITE). A fetcher error (err != 0,
 * nothing more handed over) is reported once every earlier descriptor has run, with the
 * fetcher's PC / TAG; an error of the sequencer's own stops the fetcher with `f_abort` (a
 * one-cycle reset pulse the top applies to it; the words its reads still owe are dropped on
 * the way, f_drop, until none is owed: the fetcher counts every word it is handed). Either way `done` comes once no read word is
 * owed (rd_idle) and the core is idle; err / pc / tag / descs hold the list's CL_ERR, CL_ERR_PC,
 * CL_ERR_TAG and DESCS (pc / tag of END when the list succeeds, as the model reports them).
 */
module dtpu_cl_seq #
(
    parameter ADDR_W = 32,
    parameter AXIL_ADDR_WIDTH = 8,
    parameter LOG_WEIGHT_WORDS = 15,
    parameter LOG_PARAM_ENTRIES = 12,
    // RUNs whose result ranges are tracked while their writes drain (RANGES below)
    parameter RANGES = 4,
    // 1: the core has the vector unit (VEC descriptors); 0: VEC is BAD_OPCODE
    parameter VEC_EN = 0
)
(
    input  wire                       clk,
    input  wire                       rst_n,

    /* control */
    input  wire                       start,          // ignored while busy
    output wire                       busy,
    output reg                        done,           // one cycle at the end of a list
    output reg  [31:0]                err,            // CL_ERR bits of the last list
    output reg  [31:0]                pc,             // CL_ERR_PC
    output reg  [31:0]                tag,            // CL_ERR_TAG
    output reg  [31:0]                descs,          // descriptors executed (DESCS)

    /* descriptor fetcher */
    output reg                        f_start,
    output reg                        f_abort,
    output reg                        f_drop,         // drop read words owed to the fetcher
    input  wire                       f_busy,
    input  wire [31:0]                f_err,
    input  wire [31:0]                f_pc,
    input  wire [31:0]                f_tag,
    input  wire                       d_valid,
    output wire                       d_ready,
    input  wire [63:0]                d_data,
    /* verilator lint_off UNUSEDSIGNAL */
    input  wire                       d_first,        // implied by the state
    /* verilator lint_on UNUSEDSIGNAL */
    input  wire                       d_last,
    input  wire [31:0]                d_pc,

    /* read port for LOAD words */
    output reg                        ld_req_valid,
    input  wire                       ld_req_ready,
    output wire [ADDR_W-1:0]          ld_req_addr,
    output wire [31:0]                ld_req_words,
    input  wire                       ld_valid,
    output wire                       ld_ready,
    input  wire [63:0]                ld_data,
    input  wire [1:0]                 ld_resp,
    input  wire                       ld_timeout,
    input  wire                       ld_last,
    input  wire                       rd_idle,        // no read word owed to anyone

    /* 1.2 register file write port */
    output wire                       rw_valid,
    input  wire                       rw_ready,
    output wire [AXIL_ADDR_WIDTH-1:0] rw_addr,
    output wire [31:0]                rw_data,
    input  wire [31:0]                jr_job,         // current JOB, LOAD_ADDR, LOAD_COUNT
    input  wire [31:0]                jr_load_addr,
    input  wire [31:0]                jr_load_count,
    input  wire                       irq_en,         // CTRL.IRQ_EN to keep in CTRL writes

    /* 1.2 core */
    input  wire                       core_busy,
    output wire                       loading,        // a LOAD's job owns the core (IDLE counts it)
    input  wire                       core_done,
    input  wire [31:0]                core_err,
    output wire [63:0]                wgt_tdata,
    output wire                       wgt_tvalid,
    input  wire                       wgt_tready,
    output wire                       wgt_tlast,

    /* RUN / POST: the descriptor's words for the units (ACT0..ACT4, RES0..RES2 of a RUN;
       POST1..POST3 of a POST in words 0..2) */
    output reg  [8*64-1:0]            x_words,
    output reg                        x_first,        // the RUN's HEADER.FLAGS.FIRST
    output reg                        x_post,         // x_words hold a POST
    input  wire [31:0]                jr_pf_count,    // PF_COUNT: a RUN needs 0

    /* load unit (activation stream of a RUN) */
    output reg                        la_start,
    output wire                       la_drain,       // take and drop the unit's words
    input  wire                       la_busy,
    input  wire                       la_bad,         // the ACT fields (flag after start)
    input  wire [2:0]                 la_fault,       // {TIMEOUT, DECERR, SLVERR} of its reads

    /* store unit (a RUN's or a POST's result words into DDR) */
    output reg                        st_start,
    output reg                        st_flush,       // no more words will come: stop waiting
    input  wire                       st_idle,        // every write answered
    input  wire                       st_busy,        // still taking a RUN's result words
    input  wire                       st_bad,         // the RES fields / word count (after start)
    input  wire [2:0]                 st_fault,

    /* post unit */
    output reg                        po_start,
    output wire                       po_drain,
    input  wire                       po_busy,
    input  wire                       po_bad,
    input  wire                       po_job_err,
    input  wire [2:0]                 po_fault,

    /* vector unit (VEC_EN) */
    output reg                        vec_start,      // a VEC header taken
    output wire                       vec_go,         // it may read
    input  wire                       vec_busy,
    input  wire                       vec_done,
    input  wire                       vec_bad,
    input  wire [2:0]                 vec_fault
);

/* verilator lint_off UNUSEDPARAM */
`include "dtpu_regs.vh"
`include "dtpu_cl_regs.vh"
/* verilator lint_on UNUSEDPARAM */

localparam [4:0] S_IDLE    = 5'd0,
                 S_START   = 5'd1,
                 S_HEAD    = 5'd2,
                 S_LOAD1   = 5'd3,
                 S_LOAD2   = 5'd4,
                 S_LCHK    = 5'd5,
                 S_LWR     = 5'd6,
                 S_LSTREAM = 5'd7,
                 S_LDRAIN  = 5'd8,
                 S_LSOFT   = 5'd9,
                 S_LREST   = 5'd10,
                 S_LAFTER  = 5'd11,
                 S_REG     = 5'd12,
                 S_ABORT   = 5'd13,
                 S_ABORTW  = 5'd14,
                 S_FINISH  = 5'd15,
                 S_XWORDS  = 5'd16,
                 S_RWAIT   = 5'd17,
                 S_RSTART  = 5'd18,
                 S_RRUN    = 5'd19,
                 S_RCLR    = 5'd20,
                 S_RDRAIN  = 5'd21,
                 S_RSOFT   = 5'd22,
                 S_PWAIT   = 5'd23,
                 S_PRUN    = 5'd24,
                 S_PDRAIN  = 5'd25,
                 S_PGO     = 5'd26,
                 S_RGO     = 5'd27,
                 S_VRUN    = 5'd28,
                 S_VDRAIN  = 5'd29;

localparam [34:0]  WLIMIT = 35'd1 << LOG_WEIGHT_WORDS;       // weight words
localparam [34:0]  PLIMIT = 35'd2 << LOG_PARAM_ENTRIES;      // parameter words (2 per entry)
localparam [15:0]  JOB_LO = {8'd0, DTPU_REG_JOB};
localparam [15:0]  JOB_HI = {8'd0, DTPU_REG_PF_COUNT};
localparam [AXIL_ADDR_WIDTH-1:0] A_JOB   = DTPU_REG_JOB[AXIL_ADDR_WIDTH-1:0];
localparam [AXIL_ADDR_WIDTH-1:0] A_LADDR = DTPU_REG_LOAD_ADDR[AXIL_ADDR_WIDTH-1:0];
localparam [AXIL_ADDR_WIDTH-1:0] A_LCNT  = DTPU_REG_LOAD_COUNT[AXIL_ADDR_WIDTH-1:0];
localparam [AXIL_ADDR_WIDTH-1:0] A_CTRL  = DTPU_REG_CTRL[AXIL_ADDR_WIDTH-1:0];

initial begin
    if (AXIL_ADDR_WIDTH < 8 || ADDR_W > 32) begin
        $error("Error: AXIL_ADDR_WIDTH >= 8, ADDR_W <= 32 (instance %m)");
        $finish;
    end
end

function [31:0] err_bit(input integer b);
    begin
        err_bit = 32'd1 << b;
    end
endfunction

reg  [4:0]  state;
reg  [1:0]  wi;                 // register write index within a LOAD's write sequence
reg  [31:0] l_src, l_count, l_after;
reg  [23:0] l_addr;
reg  [1:0]  l_mem;
reg  [31:0] sv_job, sv_addr, sv_count;   // job registers before the LOAD
reg         got_last;           // the LOAD's last word went to the core
reg         c_done;             // the core's DONE of the LOAD job
reg         c_fail;             // ... with a fatal ERR bit
reg         f_slv, f_dec;       // faults seen on the LOAD's words (else: timeout)
reg  [31:0] runs;               // RUN / POST descriptors done (LOAD AFTER counts them)
reg  [2:0]  xi;                 // word index within a RUN / POST descriptor
reg  [31:0] jerr;               // the RUN job's ERR bits
reg  [31:0] x_err;              // the CL_ERR bit a drained RUN / POST ends with
reg         st_fail;            // a store fault already reported
reg  [31:0] r_pc, r_tag;        // the last RUN / POST (a store fault is reported on it)
reg  [31:0] r_descs;            // DESCS up to and including that RUN / POST

/* a unit's fault kinds to the model's bit for the whole read: DECERR, SLVERR, TIMEOUT (f[2],
   the only bit left when neither of the others is set) */
/* verilator lint_off UNUSEDSIGNAL */
function [31:0] fault_bit(input [2:0] f);
    begin
        if (f[1]) begin
            fault_bit = 32'd1 << DTPU_CL_ERR_DECERR;
        end else if (f[0]) begin
            fault_bit = 32'd1 << DTPU_CL_ERR_SLVERR;
        end else begin
            fault_bit = 32'd1 << DTPU_CL_ERR_TIMEOUT;
        end
    end
endfunction
/* verilator lint_on UNUSEDSIGNAL */

localparam [31:0] TLAST_BITS = (32'd1 << DTPU_ERR_TLAST_EARLY) | (32'd1 << DTPU_ERR_TLAST_MISSING);
localparam [AXIL_ADDR_WIDTH-1:0] A_ERR = DTPU_REG_ERR[AXIL_ADDR_WIDTH-1:0];

/* header fields */
wire [7:0]  h_op  = d_data[DTPU_CL_HEADER_OP_LSB +: DTPU_CL_HEADER_OP_WIDTH];
wire [31:0] h_tag = d_data[DTPU_CL_HEADER_TAG_LSB +: DTPU_CL_HEADER_TAG_WIDTH];

/* REG word */
wire [15:0] r_off = d_data[DTPU_CL_REG_OFFSET_LSB +: DTPU_CL_REG_OFFSET_WIDTH];
wire [31:0] r_val = d_data[DTPU_CL_REG_VALUE_LSB +: DTPU_CL_REG_VALUE_WIDTH];
// the job registers: JOB .. PF_COUNT of the 1.2 map, as dtpu_regfile holds them
wire        r_ok  = (r_off >= JOB_LO) && (r_off <= JOB_HI) && (r_off[1:0] == 2'b00);

/* LOAD checks (dtpu.hw.cmdlist.Executor._load) */
wire [34:0] l_end_w = {11'd0, l_addr} + {3'd0, l_count};
wire [34:0] l_end_p = {10'd0, l_addr, 1'b0} + {3'd0, l_count};
wire        l_bad = (l_src[2:0] != 3'd0)
                 || (l_mem > 2'd1)
                 || (l_mem == 2'd0 && l_end_w > WLIMIT)
                 || (l_mem == 2'd1 && (l_end_p > PLIMIT || l_count[0]));

wire        w_fault = ld_resp[1] || ld_timeout;
wire        streaming = (state == S_LSTREAM) && !got_last && !c_done;

/* register writes */
reg  [AXIL_ADDR_WIDTH-1:0] wa;
reg  [31:0]                wd;
reg                        wv;
always @* begin
    wa = A_JOB;
    wd = 32'd0;
    wv = 1'b0;
    case (state)
        S_REG: begin
            wa = r_off[AXIL_ADDR_WIDTH-1:0];
            wd = r_val;
            wv = d_valid && r_ok && !core_busy;
        end
        S_LWR: begin
            wv = !core_busy;
            case (wi)
                2'd0: begin wa = A_LADDR; wd = {8'd0, l_addr}; end
                2'd1: begin wa = A_LCNT;  wd = l_count; end
                2'd2: begin
                    wa = A_JOB;
                    wd = 32'd0;
                    wd[DTPU_JOB_OPCODE_LSB +: DTPU_JOB_OPCODE_WIDTH] =
                        (l_mem == 2'd0) ? DTPU_OPCODE_LOAD_WGT : DTPU_OPCODE_LOAD_PARAM;
                end
                default: begin
                    wa = A_CTRL;
                    wd = 32'd0;
                    wd[DTPU_CTRL_START_LSB] = 1'b1;
                    wd[DTPU_CTRL_IRQ_EN_LSB] = irq_en;
                end
            endcase
        end
        S_LREST: begin
            wv = !core_busy;
            case (wi)
                2'd0: begin wa = A_LADDR; wd = sv_addr; end
                2'd1: begin wa = A_LCNT;  wd = sv_count; end
                default: begin wa = A_JOB; wd = sv_job; end
            endcase
        end
        S_RSTART: begin
            wa = A_CTRL;
            wd = 32'd0;
            wd[DTPU_CTRL_START_LSB] = 1'b1;
            wd[DTPU_CTRL_IRQ_EN_LSB] = irq_en;
            wv = !core_busy;
        end
        S_RCLR: begin              // the job's warnings, w1c (the model clears ERR per RUN)
            wa = A_ERR;
            wd = jerr;
            wv = 1'b1;
        end
        S_LSOFT, S_RSOFT: begin
            wa = A_CTRL;
            wd = 32'd0;
            wd[DTPU_CTRL_SOFT_RESET_LSB] = 1'b1;
            wv = 1'b1;
        end
        default: ;
    endcase
end

assign rw_valid = wv;
assign rw_addr  = wa;
assign rw_data  = wd;
wire   rw_hs    = wv && rw_ready;

assign d_ready = (state == S_HEAD) || (state == S_LOAD1) || (state == S_LOAD2)
              || (state == S_XWORDS) || ((state == S_REG) && rw_hs);
assign la_drain = (state == S_RDRAIN);
assign po_drain = (state == S_PDRAIN);

wire units_idle = !la_busy && !po_busy && st_idle && !vec_busy;
// a VEC reads once the core and the other units are idle and every earlier write was answered
// (the contract's SEQ_VEC_WAIT: from the last write response to the unit's first AR)
reg         x_vec;              // x_words hold a VEC
assign vec_go = x_vec && !core_busy && !la_busy && !po_busy && st_idle;

/* in-flight result ranges (RANGES) and the RUN's input range; byte ends carry 40 bits, an
   element or word count past 32 bits counts as overlapping everything ("big") */
wire [31:0] xa_src  = x_words[0 * 64 + DTPU_CL_ACT0_SRC_LSB +: 32];
wire [3:0]  xa_es   = x_words[0 * 64 + DTPU_CL_ACT0_ESIZE_LSB +: 4];
wire [15:0] xa_n    = x_words[1 * 64 + DTPU_CL_ACT1_N_LSB +: 16];
wire [15:0] xa_h    = x_words[1 * 64 + DTPU_CL_ACT1_H_LSB +: 16];
wire [15:0] xa_w    = x_words[1 * 64 + DTPU_CL_ACT1_W_LSB +: 16];
wire [15:0] xa_c    = x_words[1 * 64 + DTPU_CL_ACT1_C_LSB +: 16];
wire [3:0]  xr_mode = x_words[5 * 64 + DTPU_CL_RES0_MODE_LSB +: 4];
wire [3:0]  xr_es   = x_words[5 * 64 + DTPU_CL_RES0_ESIZE_LSB +: 4];
wire [31:0] xr_dst  = x_words[5 * 64 + DTPU_CL_RES0_DST_LSB +: 32];
wire [31:0] xr_pix  = x_words[6 * 64 + DTPU_CL_RES1_PIX_LSB +: 32];
wire [15:0] xr_dstc = x_words[7 * 64 + DTPU_CL_RES2_DSTC_LSB +: 16];
reg  [31:0] rq_nh, rq_wc, rq_pd;        // N*H, W*C, PIX*DSTC (low 32 bits) ...
reg         rq_pd_hi;                   // ... PIX*DSTC >= 2^32
reg  [63:0] rq_nhwc;
reg  [39:0] src_lo, src_hi, dst_lo, dst_hi;
reg         src_big, dst_big;
reg  [RANGES-1:0] rg_v;
reg  [39:0] rg_lo [0:RANGES-1];
reg  [39:0] rg_hi [0:RANGES-1];
reg         rg_ovf;                     // more RUNs than entries, or a POST, since idle
wire [47:0] pd_full   = {16'd0, xr_pix} * {32'd0, xr_dstc};
// bytes = count * ESIZE, ESIZE 1, 2, 4 or 8 (any other fails the RUN: BAD_FIELD) as a shift
function [35:0] times_es(input [31:0] n, input [3:0] es);
    begin
        case (es)
            4'd2:    times_es = {3'd0, n, 1'b0};
            4'd4:    times_es = {2'd0, n, 2'd0};
            4'd8:    times_es = {1'd0, n, 3'd0};
            default: times_es = {4'd0, n};
        endcase
    end
endfunction
wire [35:0] src_bytes = times_es(rq_nhwc[31:0], xa_es);
wire [35:0] dst_bytes = times_es(rq_pd, xr_es);
always @(posedge clk) begin
    rq_nh    <= {16'd0, xa_n} * {16'd0, xa_h};
    rq_wc    <= {16'd0, xa_w} * {16'd0, xa_c};
    rq_nhwc  <= {32'd0, rq_nh} * {32'd0, rq_wc};
    src_big  <= (rq_nhwc[63:32] != 32'd0);
    src_lo   <= {8'd0, xa_src};
    src_hi   <= {8'd0, xa_src} + {4'd0, src_bytes};
    rq_pd    <= pd_full[31:0];
    rq_pd_hi <= (pd_full[47:32] != 16'd0);
    dst_big  <= rq_pd_hi;
    dst_lo   <= {8'd0, xr_dst};
    dst_hi   <= {8'd0, xr_dst} + {4'd0, dst_bytes};
end

reg         rg_hit;
integer     ri;
always @* begin
    rg_hit = src_big;
    for (ri = 0; ri < RANGES; ri = ri + 1) begin
        if (rg_v[ri] && src_lo < rg_hi[ri] && rg_lo[ri] < src_hi) begin
            rg_hit = 1'b1;
        end
    end
end
wire        acc_read = (xr_mode == DTPU_CL_RES_ACC) && !x_first;
// a RUN may start: the units free, and its inputs written
wire        run_free = !la_busy && !po_busy && !st_busy && !vec_busy
                    && (st_idle || !(rg_hit || rg_ovf || acc_read));
wire [31:0] jerr_now = jerr | core_err;

assign ld_req_addr  = l_src[ADDR_W-1:0];
assign ld_req_words = l_count;
assign ld_ready     = (state == S_LDRAIN) || (streaming && !w_fault && wgt_tready);
assign wgt_tvalid   = streaming && ld_valid && !w_fault;
assign wgt_tdata    = ld_data;
assign wgt_tlast    = ld_last;

assign busy = (state != S_IDLE);
// the contract's IDLE (list cycles - the RUN / POST jobs' cycles) counts a LOAD's 1.2 job
assign loading = (state >= S_LOAD1) && (state <= S_LAFTER);

/* the first free entry for the RUN's result range (none free: overflow) */
localparam RI_W = (RANGES > 1) ? $clog2(RANGES) : 1;
reg  [RI_W-1:0] rg_free;
reg             rg_full;
integer         fi;
always @* begin
    rg_free = {RI_W{1'b0}};
    rg_full = 1'b1;
    for (fi = RANGES - 1; fi >= 0; fi = fi - 1) begin
        if (!rg_v[fi]) begin
            rg_free = fi[RI_W-1:0];
            rg_full = 1'b0;
        end
    end
end

always @(posedge clk) begin
    done     <= 1'b0;
    f_start  <= 1'b0;
    f_abort  <= 1'b0;
    la_start <= 1'b0;
    st_start <= 1'b0;
    st_flush <= 1'b0;
    po_start <= 1'b0;
    vec_start <= 1'b0;
    if (ld_req_valid && ld_req_ready) begin
        ld_req_valid <= 1'b0;
    end
    if (core_done && (state == S_LSTREAM || state == S_LDRAIN)) begin
        c_done <= 1'b1;
        if ((core_err & DTPU_ERR_FATAL_MASK) != 32'd0) begin
            c_fail <= 1'b1;
        end
    end

    case (state)
    S_IDLE: begin
        if (start) begin
            f_start <= 1'b1;
            err     <= 32'd0;
            pc      <= 32'd0;
            tag     <= 32'd0;
            descs   <= 32'd0;
            runs    <= 32'd0;
            st_fail <= 1'b0;
            rg_v    <= {RANGES{1'b0}};     // the model's Timeline starts each list afresh
            rg_ovf  <= 1'b0;
            state   <= S_START;
        end
    end
    S_START: begin                 // the fetcher takes `start` in this cycle
        state <= S_HEAD;
    end
    S_HEAD: begin
        if (st_fault != 3'd0 && !st_fail) begin
            // a store unit write of an earlier RUN / POST failed: the list ends there
            st_fail <= 1'b1;
            err     <= fault_bit(st_fault);
            pc      <= r_pc;
            tag     <= r_tag;
            descs   <= r_descs;    // the model stops at that RUN / POST
            state   <= S_ABORT;
        end else if (d_valid) begin
            pc    <= d_pc;
            tag   <= h_tag;
            descs <= descs + 32'd1;
            case (h_op)
                DTPU_CL_OP_END:  state <= S_FINISH;
                DTPU_CL_OP_LOAD: state <= S_LOAD1;
                DTPU_CL_OP_REGS: state <= S_REG;
                DTPU_CL_OP_RUN, DTPU_CL_OP_POST: begin
                    xi      <= 3'd0;
                    x_vec   <= 1'b0;
                    x_post  <= (h_op == DTPU_CL_OP_POST);
                    x_first <= d_data[DTPU_CL_HEADER_FLAGS_LSB + 1];
                    state   <= S_XWORDS;
                end
                DTPU_CL_OP_VEC: begin
                    if (VEC_EN != 0) begin
                        xi        <= 3'd0;
                        x_vec     <= 1'b1;
                        x_post    <= 1'b0;
                        vec_start <= 1'b1;     // the unit starts on the words as they come
                        rg_ovf    <= 1'b1;     // the VEC's writes are not tracked
                        state     <= S_XWORDS;
                    end else begin     // a core without the vector unit
                        err   <= err_bit(DTPU_CL_ERR_BAD_OPCODE);
                        state <= S_ABORT;
                    end
                end
                default: begin     // the fetcher passes known opcodes only
                    err   <= err_bit(DTPU_CL_ERR_BAD_OPCODE);
                    state <= S_ABORT;
                end
            endcase
        end else if (f_err != 32'd0) begin
            err   <= f_err;
            pc    <= f_pc;
            tag   <= f_tag;
            state <= S_FINISH;     // the fetcher drains and stops by itself
        end
    end
    S_LOAD1: begin
        if (d_valid) begin
            l_src   <= d_data[DTPU_CL_LOAD1_SRC_LSB +: DTPU_CL_LOAD1_SRC_WIDTH];
            l_count <= d_data[DTPU_CL_LOAD1_COUNT_LSB +: DTPU_CL_LOAD1_COUNT_WIDTH];
            state   <= S_LOAD2;
        end
    end
    S_LOAD2: begin
        if (d_valid) begin
            l_mem   <= d_data[DTPU_CL_LOAD2_MEM_LSB +: DTPU_CL_LOAD2_MEM_WIDTH];
            l_addr  <= d_data[DTPU_CL_LOAD2_ADDR_LSB +: DTPU_CL_LOAD2_ADDR_WIDTH];
            l_after <= d_data[DTPU_CL_LOAD2_AFTER_LSB +: DTPU_CL_LOAD2_AFTER_WIDTH];
            state   <= S_LCHK;
        end
    end
    S_LCHK: begin
        sv_job   <= jr_job;
        sv_addr  <= jr_load_addr;
        sv_count <= jr_load_count;
        wi       <= 2'd0;
        got_last <= 1'b0;
        c_done   <= 1'b0;
        c_fail   <= 1'b0;
        f_slv    <= 1'b0;
        f_dec    <= 1'b0;
        if (l_bad) begin
            err   <= err_bit(DTPU_CL_ERR_BAD_FIELD);
            state <= S_ABORT;
        end else if (l_count == 32'd0) begin
            state <= S_LAFTER;
        end else begin
            ld_req_valid <= 1'b1;  // the read goes out while the job registers are written
            state <= S_LWR;
        end
    end
    S_LWR: begin
        if (rw_hs) begin
            wi <= wi + 2'd1;
            if (wi == 2'd3) begin
                state <= S_LSTREAM;
            end
        end
    end
    S_LSTREAM: begin
        if (ld_valid && ld_ready && ld_last) begin
            got_last <= 1'b1;
        end
        if (streaming && ld_valid && w_fault) begin
            state <= S_LDRAIN;     // the faulty word and the rest are dropped
        end else if (c_done || (core_done && state == S_LSTREAM)) begin
            if (!(got_last || (ld_valid && ld_ready && ld_last))) begin
                state <= S_LDRAIN; // the job ended early: the rest of the words are dropped
            end else if (c_fail || (core_err & DTPU_ERR_FATAL_MASK) != 32'd0) begin
                err   <= err_bit(DTPU_CL_ERR_JOB);
                state <= S_ABORT;
            end else begin
                wi    <= 2'd0;
                state <= S_LREST;
            end
        end
    end
    S_LDRAIN: begin
        if (ld_valid) begin
            if (ld_resp == 2'b11) f_dec <= 1'b1;
            if (ld_resp == 2'b10) f_slv <= 1'b1;
        end
        if (ld_valid && ld_last) begin
            if (!c_done && !(core_done)) begin
                state <= S_LSOFT;
            end else begin
                err   <= err_bit(DTPU_CL_ERR_JOB);
                state <= S_ABORT;
            end
        end
    end
    S_LSOFT: begin                 // abort the core's LOAD job (its stream failed)
        if (rw_hs) begin
            if (f_dec) begin
                err <= err_bit(DTPU_CL_ERR_DECERR);
            end else if (f_slv) begin
                err <= err_bit(DTPU_CL_ERR_SLVERR);
            end else begin
                err <= err_bit(DTPU_CL_ERR_TIMEOUT);
            end
            state <= S_ABORT;
        end
    end
    S_LREST: begin
        if (rw_hs) begin
            wi <= wi + 2'd1;
            if (wi == 2'd2) begin
                state <= S_LAFTER;
            end
        end
    end
    S_LAFTER: begin
        if (l_after > runs) begin
            err   <= err_bit(DTPU_CL_ERR_BAD_FIELD);
            state <= S_ABORT;
        end else begin
            state <= S_HEAD;
        end
    end
    S_REG: begin
        if (d_valid && !r_ok) begin
            err   <= err_bit(DTPU_CL_ERR_BAD_FIELD);
            state <= S_ABORT;
        end else if (rw_hs && d_last) begin
            state <= S_HEAD;
        end
    end
    S_XWORDS: begin
        if (d_valid) begin
            x_words[xi * 64 +: 64] <= d_data;
            xi <= xi + 3'd1;
            if (d_last) begin
                state <= x_vec ? S_VRUN : x_post ? S_PWAIT : S_RWAIT;
                if (x_vec) begin
                    r_pc    <= pc;
                    r_descs <= descs;
                    r_tag   <= tag;
                end
            end
        end
    end
    S_RWAIT: begin                 // the core free, the results it reads written (see header)
        jerr <= 32'd0;
        if (!core_busy && run_free) begin
            if (st_idle) begin     // every write answered: no range in flight
                rg_v   <= {RANGES{1'b0}};
                rg_ovf <= 1'b0;
            end
            if (jr_pf_count != 32'd0) begin
                err   <= err_bit(DTPU_CL_ERR_BAD_FIELD);
                state <= S_ABORT;
            end else begin
                state <= S_RSTART;
            end
        end
    end
    S_RSTART: begin
        if (rw_hs) begin
            la_start <= 1'b1;
            st_start <= 1'b1;
            r_pc     <= pc;
            r_descs  <= descs;
            r_tag    <= tag;
            state    <= S_RGO;
        end
    end
    S_RGO: begin                   // the units take `start` in this cycle (their flags clear)
        jerr   <= jerr_now;
        c_done <= core_done;       // (a job failing in CONFIG is not done this early; kept safe)
        state  <= S_RRUN;
    end
    S_RRUN: begin
        jerr <= jerr_now;
        if (la_bad || st_bad) begin
            x_err <= err_bit(DTPU_CL_ERR_BAD_FIELD);
            state <= S_RDRAIN;
        end else if (la_fault != 3'd0) begin
            x_err <= fault_bit(la_fault);
            state <= S_RDRAIN;
        end else if (core_done || c_done) begin
            if ((jerr_now & TLAST_BITS) != 32'd0) begin
                x_err <= err_bit(DTPU_CL_ERR_BAD_FIELD);   // the ACT fields' word count
                state <= S_RDRAIN;
            end else if ((jerr_now & DTPU_ERR_FATAL_MASK) != 32'd0) begin
                x_err <= err_bit(DTPU_CL_ERR_JOB);
                state <= S_RDRAIN;
            end else begin
                runs  <= runs + 32'd1;
                state <= (jerr_now != 32'd0) ? S_RCLR : S_HEAD;
                if (rg_full) begin
                    rg_ovf <= 1'b1;
                end else begin
                    rg_v[rg_free]  <= 1'b1;
                    rg_lo[rg_free] <= dst_lo;
                    rg_hi[rg_free] <= dst_big ? {40{1'b1}} : dst_hi;
                end
            end
        end
    end
    S_RCLR: begin
        if (rw_hs) begin
            state <= S_HEAD;
        end
    end
    S_RDRAIN: begin                // the load unit's words left are dropped
        if (!la_busy) begin
            state <= S_RSOFT;
        end
    end
    S_RSOFT: begin                 // the job aborted (CTRL.SOFT_RESET), the store unit flushed
        if (rw_hs) begin
            st_flush <= 1'b1;
            err      <= x_err;
            state    <= S_ABORT;
        end
    end
    S_PWAIT: begin
        if (!core_busy && units_idle) begin
            if (po_bad) begin
                err   <= err_bit(DTPU_CL_ERR_BAD_FIELD);
                state <= S_ABORT;
            end else begin
                rg_v     <= {RANGES{1'b0}};   // every write answered (units_idle) ...
                rg_ovf   <= 1'b1;             // ... and the POST's own are not tracked
                po_start <= 1'b1;
                r_pc     <= pc;
                r_descs  <= descs;
                r_tag    <= tag;
                state    <= S_PGO;
            end
        end
    end
    S_PGO: begin                   // the post unit takes `start`; its RES fields next cycle
        st_start <= 1'b1;
        state    <= S_PRUN;
    end
    S_PRUN: begin
        if (po_fault != 3'd0) begin
            x_err <= fault_bit(po_fault);
            state <= S_PDRAIN;
        end else if (!po_busy) begin
            if (po_job_err) begin
                x_err <= err_bit(DTPU_CL_ERR_JOB);
                state <= S_PDRAIN;
            end else begin
                runs  <= runs + 32'd1;
                state <= S_HEAD;
            end
        end
    end
    S_PDRAIN: begin
        if (!po_busy) begin
            st_flush <= 1'b1;
            err      <= x_err;
            state    <= S_ABORT;
        end
    end
    S_VRUN: begin
        if (vec_bad) begin
            x_err <= err_bit(DTPU_CL_ERR_BAD_FIELD);
            state <= S_VDRAIN;
        end else if (vec_done) begin
            if (vec_fault != 3'd0) begin
                x_err <= fault_bit(vec_fault);
                state <= S_VDRAIN;
            end else begin
                state <= S_HEAD;
            end
        end
    end
    S_VDRAIN: begin                // the unit's reads and words finish
        if (!vec_busy) begin
            err   <= x_err;
            state <= S_ABORT;
        end
    end
    S_ABORT: begin                 // stop the fetcher where it is
        f_abort <= 1'b1;
        f_drop  <= 1'b1;
        state   <= S_ABORTW;
    end
    S_ABORTW: begin                // the fetcher is in reset in this cycle
        state <= S_FINISH;
    end
    default: begin                 // S_FINISH: every unit idle, nothing owed
        if (!f_busy && rd_idle && !core_busy && !ld_req_valid && !f_abort && units_idle
                && !st_flush) begin
            if (err == 32'd0 && st_fault != 3'd0) begin
                err   <= fault_bit(st_fault);  // a store unit write failed after the last RUN
                pc    <= r_pc;
                tag   <= r_tag;
                descs <= r_descs;              // (END or others may have been taken since)
            end
            done   <= 1'b1;
            f_drop <= 1'b0;
            state  <= S_IDLE;
        end
    end
    endcase

    if (!rst_n) begin
        state        <= S_IDLE;
        done         <= 1'b0;
        err          <= 32'd0;
        pc           <= 32'd0;
        tag          <= 32'd0;
        descs        <= 32'd0;
        f_start      <= 1'b0;
        f_abort      <= 1'b0;
        f_drop       <= 1'b0;
        ld_req_valid <= 1'b0;
        wi           <= 2'd0;
        got_last     <= 1'b0;
        c_done       <= 1'b0;
        c_fail       <= 1'b0;
        f_slv        <= 1'b0;
        f_dec        <= 1'b0;
        runs         <= 32'd0;
        la_start     <= 1'b0;
        st_start     <= 1'b0;
        st_flush     <= 1'b0;
        po_start     <= 1'b0;
        st_fail      <= 1'b0;
        x_post       <= 1'b0;
        x_vec        <= 1'b0;
        vec_start    <= 1'b0;
        rg_v         <= {RANGES{1'b0}};
        rg_ovf       <= 1'b0;
    end
end

endmodule

`resetall
