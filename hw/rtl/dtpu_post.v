/*

Copyright (c) 2026 DTPU authors. Apache-2.0.

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Post unit: the step's accumulators -> result words on m_axis_res.
 *
 * A step's NV values are captured as groups of 8 (GEMM: the COLS column sums, group g holding
 * columns 8g..8g+7; DWCONV: the PE accumulators as the MXU lays them out, group j = column j =
 * item j, its L lanes in rows 0..L-1) and leave as cap_words words of 2^log_lanes values each,
 * one word per cycle. The words take the values in order: a GEMM group's 8 values, then the next
 * group; a depthwise item's L = 2^log_l lanes, then the next item (the rows past L of a column
 * are skipped). So value index k*lanes + r of that order is lane r of word k; only the head
 * group (a pointer over the captured groups) is read, lane r taking head value off + r: no
 * reordering crossbar on the capture side and no shifting of the captured values. Lane r's parameters are entry ch + r, where ch starts
 * at cap_ch and advances by `lanes` per word (depthwise: back to cap_wrap_ch after the last word
 * of group GC-1 of an output pixel).
 * Timing from the capture cycle A: word k is on m_axis_res in cycle A + 11 + k (LAT_POST = 11):
 * serializer register, parameter read, eight lane stages, result register. Float steps are
 * captured two cycles later (fp trees) and pass six lane stages: same result cycle.
 * Everything advances on ce (the core's global stall); a word offered while ce is low but
 * taken by the sink is not offered again.
 *
 * Lane 0 for contract 2.0's post unit (EXT_LANE0 = 1; dtpu_cl_post with EXT_LANE = 1): a POST
 * runs only while the core is idle, so instead of a lane of its own (about 1.5 k LUT on the
 * xc7z020) dtpu_cl_post borrows this one. While ext_sel, lane 0 takes the ext_* inputs (REQUANT,
 * ce forced to 1) and its results leave only on ext_out_* (not into the result word, the flags
 * or busy); ext_sel must stay high until the last ext value has left (8 cycles) and may only
 * rise while this unit is idle. Lane 0 is then at least 64 bits wide (the POST sums are int64).
 * With EXT_LANE0 = 0 the ext_* inputs are ignored and ext_out_* are 0.
 */
module dtpu_post #
(
    // values per capture (ROWS*COLS, ROWS = 8)
    parameter NV = 64,
    // GEMM values per capture (COLS)
    parameter NG = 8,
    // accumulator width
    parameter AW = 84,
    // enabled precisions (bit p: PREC code p)
    parameter [15:0] PREC_EN = 16'h007F,
    // log2 of the parameter entries
    parameter PADDR_W = 12,
    // 1: lane 0 also serves the ext_* port (dtpu_cl_post's POST descriptors)
    parameter EXT_LANE0 = 0,
    // built requantization variants (bit v: RQ_VARIANT code v; contract RQ_EN; CONFIG refuses
    // the others): the lanes leave the rest out
    parameter RQ_EN = 31
)
(
    input  wire                 clk,
    input  wire                 rst_n,
    input  wire                 ce,

    /* Job configuration */
    input  wire [3:0]           prec,
    input  wire [1:0]           out_mode,
    input  wire [2:0]           variant,
    input  wire [31:0]          act_min,
    input  wire [31:0]          act_max,
    input  wire [1:0]           log_lanes,
    input  wire [1:0]           log_l,
    input  wire                 dw,
    input  wire [15:0]          gc,
    input  wire [2:0]           wi,
    input  wire                 fp,

    /* Capture */
    input  wire                 cap_valid,
    input  wire [NV*AW-1:0]     cap_dw_values,
    input  wire [NG*AW-1:0]     cap_gemm_values,
    input  wire [15:0]          cap_words,
    input  wire [15:0]          cap_nvals,
    input  wire [PADDR_W-1:0]   cap_ch,
    input  wire [PADDR_W-1:0]   cap_wrap_ch,
    input  wire [15:0]          cap_g,
    input  wire                 cap_last,

    /* Parameter memory read port */
    output wire                 prm_rd_en,
    output wire [PADDR_W-1:0]   prm_rd_base,
    input  wire [8*64-1:0]      prm_bias,
    input  wire [8*64-1:0]      prm_rq,

    /* Result stream */
    output wire [63:0]          m_axis_tdata,
    output wire                 m_axis_tvalid,
    input  wire                 m_axis_tready,
    output wire                 m_axis_tlast,

    /* Status */
    output wire                 busy,
    output wire                 flag_ovf,
    output wire                 flag_wrap,

    /* Lane 0 for dtpu_cl_post (EXT_LANE0; its lane port: same timing as its own lane) */
    /* verilator lint_off UNUSEDSIGNAL */
    input  wire                 ext_sel,
    input  wire [3:0]           ext_prec,
    input  wire [2:0]           ext_variant,
    input  wire [31:0]          ext_min,
    input  wire [31:0]          ext_max,
    input  wire                 ext_valid,
    input  wire [63:0]          ext_acc,
    input  wire [63:0]          ext_bias,
    input  wire [63:0]          ext_rq,
    /* verilator lint_on UNUSEDSIGNAL */
    output wire [63:0]          ext_value,
    output wire                 ext_out_valid,
    output wire                 ext_ovf,
    output wire                 ext_wrap
);

/* verilator lint_off UNUSEDPARAM */
`include "dtpu_regs.vh"
/* verilator lint_on UNUSEDPARAM */

// ---- serializer ----
localparam NGRP = NV / 8;
reg  [NV*AW-1:0]   v_reg;
reg  [15:0]        words_reg;
reg  [15:0]        nvals_reg;
reg  [PADDR_W-1:0] ch_reg, wrap_ch_reg;
reg  [15:0]        g_reg;
reg  [2:0]         sub_reg;
reg  [2:0]         off_reg;
reg                last_reg;

wire [3:0]  lanes = 4'd1 << log_lanes;
wire        ser_valid = words_reg != 16'd0;
wire        ser_last_word = words_reg == 16'd1;
// values taken from the head group before the next one moves up: 8 (GEMM) or the item's L
wire [3:0]  grp_n = dw ? (4'd1 << log_l) : 4'd8;
wire [3:0]  off_next = {1'b0, off_reg} + lanes;
wire        grp_done = off_next == grp_n;

// capture: GEMM values fill the first groups; groups past them are never read by a GEMM
// step, so they take the depthwise values unconditionally (no multiplexer)
localparam NGG = (NG + 7) / 8;
wire [NV*AW-1:0] cap_values;
wire [NGG*8*AW-1:0] gemm_pad;
generate
if (NGG*8 > NG) begin : gemm_padded
    assign gemm_pad = {{((NGG*8-NG)*AW){1'b0}}, cap_gemm_values};
end else begin : gemm_full
    assign gemm_pad = cap_gemm_values;
end
if (NV > NGG*8) begin : cap_rest
    assign cap_values = {cap_dw_values[NV*AW-1:NGG*8*AW],
                         dw ? cap_dw_values[NGG*8*AW-1:0] : gemm_pad};
end else begin : cap_all
    assign cap_values = dw ? cap_dw_values : gemm_pad;
end
endgenerate

// the head group: a pointer moves over the captured groups (no shifting)
localparam PW = NGRP > 1 ? $clog2(NGRP) : 1;
reg  [PW-1:0]    ptr_reg;
wire [8*AW-1:0]  grp [0:(1<<PW)-1];
genvar gi;
generate
for (gi = 0; gi < (1 << PW); gi = gi + 1) begin : grps
    if (gi < NGRP) begin : used
        assign grp[gi] = v_reg[gi*8*AW +: 8*AW];
    end else begin : unused
        assign grp[gi] = {(8*AW){1'b0}};
    end
end
endgenerate
wire [8*AW-1:0]  head = grp[ptr_reg];

// lane mask of the current word
wire [7:0] lane_mask;
genvar r;
generate
for (r = 0; r < 8; r = r + 1) begin : mask
    assign lane_mask[r] = ser_valid && r < lanes && r < nvals_reg;
end
endgenerate

wire item_end = sub_reg == wi - 3'd1;
wire grp_end = item_end && g_reg == gc - 16'd1;

always @(posedge clk) begin
    if (ce) begin
        if (cap_valid) begin
            v_reg <= cap_values;
            words_reg <= cap_words;
            nvals_reg <= cap_nvals;
            ch_reg <= cap_ch;
            wrap_ch_reg <= cap_wrap_ch;
            g_reg <= cap_g;
            sub_reg <= 3'd0;
            off_reg <= 3'd0;
            ptr_reg <= {PW{1'b0}};
            last_reg <= cap_last;
        end else if (ser_valid) begin
            if (grp_done) begin
                ptr_reg <= ptr_reg + {{(PW-1){1'b0}}, 1'b1};
            end
            off_reg <= grp_done ? 3'd0 : off_next[2:0];
            words_reg <= words_reg - 16'd1;
            nvals_reg <= nvals_reg - {12'd0, lanes};
            ch_reg <= (dw && grp_end) ? wrap_ch_reg : ch_reg + {{(PADDR_W-4){1'b0}}, lanes};
            if (item_end) begin
                sub_reg <= 3'd0;
                g_reg <= (g_reg == gc - 16'd1) ? 16'd0 : g_reg + 16'd1;
            end else begin
                sub_reg <= sub_reg + 3'd1;
            end
        end
    end
    if (!rst_n) begin
        words_reg <= 16'd0;
        nvals_reg <= 16'd0;
    end
end

assign prm_rd_en = ce;
assign prm_rd_base = ch_reg;

`ifndef SYNTHESIS
// dtpu_ls_param's promise (LOG_ALIGN = min(3, log2 NG), LOG_MIN_LANES from PREC_EN in
// dtpu_core): a word whose parameters are used reads from a multiple of min(lanes, NG, 8) and
// has 8 (8-bit-only builds), 4 (no float) or 2 lanes or more. Simulation only: the
// regressions fail here if a sequencer or CONFIG ever breaks it.
localparam integer LOG_NG = NG >= 8 ? 3 : NG >= 4 ? 2 : NG >= 2 ? 1 : 0;
localparam integer LOG_ML = (PREC_EN[5] || PREC_EN[6]) ? 1 : PREC_EN[2] ? 2 : 3;
wire [1:0] log_al = log_lanes < LOG_NG[1:0] ? log_lanes : LOG_NG[1:0];
wire [2:0] al_mask = ~(3'b111 << log_al);
always @(posedge clk) begin
    if (rst_n && ce && ser_valid && out_mode != DTPU_OUT_MODE_RAW[1:0]
        && ((ch_reg[2:0] & al_mask) != 3'd0 || log_lanes < LOG_ML[1:0])) begin
        $error("dtpu_post: parameter base %0d with %0d lanes: not a multiple of min(lanes, %0d), or fewer than %0d lanes (instance %m)",
               ch_reg, lanes, 1 << LOG_NG, 1 << LOG_ML);
    end
end
`endif

// the word's values: lane r takes head value off + r (off is a multiple of lanes, so only
// the lanes r < lanes matter: r >= 4 only with 8 lanes, r >= 2 with 4 or 8, r = 1 with 2..8)
wire [8*AW-1:0] word_vals;
generate
for (r = 0; r < 8; r = r + 1) begin : sel
    localparam [2:0] R = r;
    if (r >= 4) begin : fixed
        assign word_vals[r*AW +: AW] = head[r*AW +: AW];
    end else if (r >= 2) begin : by4
        assign word_vals[r*AW +: AW] = head[{off_reg[2], R[1:0]}*AW +: AW];
    end else if (r == 1) begin : by2
        assign word_vals[r*AW +: AW] = head[{off_reg[2:1], 1'b1}*AW +: AW];
    end else begin : any
        assign word_vals[r*AW +: AW] = head[off_reg*AW +: AW];
    end
end
endgenerate

// ---- stage 0: the word's values, parameters arrive from memory ----
reg  [8*AW-1:0] s0_vals_reg;
reg  [7:0]      s0_mask_reg;
reg             s0_last_reg;

always @(posedge clk) begin
    if (ce) begin
        s0_vals_reg <= word_vals;
        s0_mask_reg <= lane_mask;
        s0_last_reg <= ser_valid && ser_last_word && last_reg;
    end
    if (!rst_n) begin
        s0_mask_reg <= 8'd0;
        s0_last_reg <= 1'b0;
    end
end

// ---- lanes ----
// REQUANT: the clamp bounds saturated to the lane type once here, so each lane clamps once
// (dtpu_post_lane); FLOAT: the fp32 bounds as they are
reg signed [31:0] tmin, tmax;
always @* begin
    case (prec)
        DTPU_PREC_INT8:  begin tmin = -32'sd128;   tmax = 32'sd127;   end
        DTPU_PREC_UINT8: begin tmin = 32'sd0;      tmax = 32'sd255;   end
        default:         begin tmin = -32'sd32768; tmax = 32'sd32767; end
    endcase
end
wire signed [31:0] amin = act_min, amax = act_max;
wire        req_mode = out_mode == DTPU_OUT_MODE_REQUANT[1:0];
// registered: the bounds are the job's (CONFIG is ten cycles or more before a result leaves),
// and the lanes' clamp compares them with their last register, so their saturation's compares
// stay off the lanes' output path
reg  [31:0] lane_min, lane_max;
always @(posedge clk) begin
    lane_min <= !req_mode ? act_min : amin < tmin ? tmin : amin > tmax ? tmax : amin;
    lane_max <= !req_mode ? act_max : amax < tmin ? tmin : amax > tmax ? tmax : amax;
end

wire [8*64-1:0] lane_value;
wire [7:0]      lane_valid, lane_ovf, lane_wrap;

generate
for (r = 1; r < 8; r = r + 1) begin : lane
    dtpu_post_lane #(
        .AW(AW),
        .PREC_EN(PREC_EN),
        .RQ_EN(RQ_EN)
    )
    lane_inst (
        .clk(clk),
        .rst_n(rst_n),
        .ce(ce),
        .prec(prec),
        .out_mode(out_mode),
        .variant(variant),
        .act_min(lane_min),
        .act_max(lane_max),
        .in_valid(s0_mask_reg[r]),
        .in_acc(s0_vals_reg[r*AW +: AW]),
        .in_bias(prm_bias[r*64 +: 64]),
        .in_rq(prm_rq[r*64 +: 64]),
        .out_value(lane_value[r*64 +: 64]),
        .out_valid(lane_valid[r]),
        .out_ovf(lane_ovf[r]),
        .out_wrap(lane_wrap[r])
    );
end
if (EXT_LANE0 != 0) begin : lane0_shared
    // lane 0: this unit's, or dtpu_cl_post's while ext_sel
    localparam AW0 = AW > 64 ? AW : 64;
    wire signed [AW0-1:0] acc_core, acc_ext;   // sign-extended to AW0
    if (AW0 > AW) begin : xcore
        assign acc_core = {{(AW0-AW){s0_vals_reg[AW-1]}}, s0_vals_reg[0 +: AW]};
    end else begin : ncore
        assign acc_core = s0_vals_reg[0 +: AW];
    end
    if (AW0 > 64) begin : xext
        assign acc_ext = {{(AW0-64){ext_acc[63]}}, ext_acc};
    end else begin : next
        assign acc_ext = ext_acc;
    end
    wire [63:0] l0_value;
    wire        l0_valid, l0_ovf, l0_wrap;
    dtpu_post_lane #(
        .AW(AW0),
        .PREC_EN(PREC_EN),
        .RQ_EN(RQ_EN)
    )
    lane_inst (
        .clk(clk),
        .rst_n(rst_n),
        .ce(ce || ext_sel),
        .prec(ext_sel ? ext_prec : prec),
        .out_mode(ext_sel ? DTPU_OUT_MODE_REQUANT[1:0] : out_mode),
        .variant(ext_sel ? ext_variant : variant),
        .act_min(ext_sel ? ext_min : lane_min),
        .act_max(ext_sel ? ext_max : lane_max),
        .in_valid(ext_sel ? ext_valid : s0_mask_reg[0]),
        .in_acc(ext_sel ? acc_ext : acc_core),
        .in_bias(ext_sel ? ext_bias : prm_bias[0 +: 64]),
        .in_rq(ext_sel ? ext_rq : prm_rq[0 +: 64]),
        .out_value(l0_value),
        .out_valid(l0_valid),
        .out_ovf(l0_ovf),
        .out_wrap(l0_wrap)
    );
    assign lane_value[0 +: 64] = l0_value;
    assign lane_valid[0] = l0_valid && !ext_sel;
    assign lane_ovf[0] = l0_ovf;
    assign lane_wrap[0] = l0_wrap;
    assign ext_value = l0_value;
    assign ext_out_valid = l0_valid && ext_sel;
    assign ext_ovf = l0_ovf;
    assign ext_wrap = l0_wrap;
end else begin : lane0_own
    dtpu_post_lane #(
        .AW(AW),
        .PREC_EN(PREC_EN),
        .RQ_EN(RQ_EN)
    )
    lane_inst (
        .clk(clk),
        .rst_n(rst_n),
        .ce(ce),
        .prec(prec),
        .out_mode(out_mode),
        .variant(variant),
        .act_min(lane_min),
        .act_max(lane_max),
        .in_valid(s0_mask_reg[0]),
        .in_acc(s0_vals_reg[0 +: AW]),
        .in_bias(prm_bias[0 +: 64]),
        .in_rq(prm_rq[0 +: 64]),
        .out_value(lane_value[0 +: 64]),
        .out_valid(lane_valid[0]),
        .out_ovf(lane_ovf[0]),
        .out_wrap(lane_wrap[0])
    );
    assign ext_value = 64'd0;
    assign ext_out_valid = 1'b0;
    assign ext_ovf = 1'b0;
    assign ext_wrap = 1'b0;
end
endgenerate

// tlast beside the lane stages (eight; float words: six)
reg [7:0] last_pipe_reg;

always @(posedge clk) begin
    if (ce) begin
        last_pipe_reg <= {last_pipe_reg[6:0], s0_last_reg};
    end
    if (!rst_n) begin
        last_pipe_reg <= 8'd0;
    end
end

// ---- Compact&Select and the result register ----
wire [63:0] packed_word;

dtpu_compact_select
cs_inst (
    .values(lane_value),
    .log_lanes(log_lanes),
    .word(packed_word)
);

reg [63:0] out_data_reg;
reg        out_valid_reg;
reg        out_last_reg;

always @(posedge clk) begin
    if (ce) begin
        out_valid_reg <= lane_valid[0];
        out_data_reg <= packed_word;
        out_last_reg <= fp ? last_pipe_reg[5] : last_pipe_reg[7];
    end else if (m_axis_tready) begin
        out_valid_reg <= 1'b0;  // taken while the core is stalled elsewhere
    end
    if (!rst_n) begin
        out_valid_reg <= 1'b0;
    end
end

assign m_axis_tdata = out_data_reg;
assign m_axis_tvalid = out_valid_reg;
assign m_axis_tlast = out_last_reg;

assign busy = ser_valid || (|s0_mask_reg) || (|lane_valid) || out_valid_reg;
// (float words leave after six lane registers: see dtpu_post_lane)
assign flag_ovf = |(lane_ovf & lane_valid);
assign flag_wrap = |(lane_wrap & lane_valid);

endmodule

`resetall
