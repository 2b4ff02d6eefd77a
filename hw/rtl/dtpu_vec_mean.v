/*

Copyright (c) 2026 DTPU authors. Apache-2.0.

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Vector unit (contract 2.1): MEAN over H and W (KIND 5; golden model
 * dtpu.reference.vector.mean_hw with the descriptor's integers, TFLite's QuantizedMeanOrSum):
 *   y[n, c] = clamp(MBQM(wrap32(sum_hw x[n, h, w, c] + IN1_OFF * H*W), MO, SHO) + OUT_OFF,
 *                   ACT_MIN, ACT_MAX)
 * with MBQM as in dtpu_vec_mul_lane (a positive SHO an int32 left shift first; the shared
 * requantizer dtpu_vec_rq). The sums are 32-bit and wrap, as the int32 sum does.
 *
 * Pixel words (dtpu_vec_pix) come one a cycle: word j of each pixel is added into accumulator
 * word j (LANES 32-bit lanes; the batch's first pixel writes it), one operation a word. The
 * accumulators are one block RAM (2^LOG_ROW words of 32 * LANES bits, a registered read). After
 * a batch's last pixel its ceil(C/8) accumulator words are requantized one a cycle (the
 * tail; in_ready low meanwhile, and a tail word waits for `room`) through a pipe of
 * TAIL_LAT = 9 stages (below), each result registered: out_valid TAIL_LAT + 1 = 10 cycles after
 * its operation, out_bytes its channels (8, or C mod 8 for the last). With RQ_LANES < LANES
 * requantizers (the contract's VEC_RQ_LANES) a tail word takes LANES / RQ_LANES operations, a
 * group of RQ_LANES lanes each from the low ones up (the word waits for `room` before its first
 * only), and comes 10 cycles after its last; `room` must hold for every word in the pipe
 * (dtpu_vec counts them);
 * out_end on the tensor's last. `op` marks each operation (accumulate or tail), `last_op` the
 * tensor's last; after it no word is taken (the bytes of the stream's last word past the
 * tensor). C <= LANES * 2^LOG_ROW (the caller checks); `clear` restarts at batch 0. *
 * SHARE_RQ = 1: no requantizers of its own (about 0.45 k LUT and 4 DSP48E1 each on the
 * xc7z020): stages 3..9 are a MUL lane's (dtpu_vec_mul_lane through dtpu_vec_ew, lane q for
 * group lane q), which MEAN borrows: rq_sel marks a group at stage 2, rq_x its offset sums (the
 * lane shifts them by SHO's left part and requantizes with the same descriptor fields), rq_y8
 * the bytes seven cycles later, at the pipe's end. Same cycles and bytes as SHARE_RQ = 0.
 */
module dtpu_vec_mean #
(
    parameter LANES = 8,
    // requantizers of the tail (contract VEC_RQ_LANES): a divisor of LANES
    parameter RQ_LANES = 8,
    // log2 of the accumulator words (C <= LANES * 2^LOG_ROW)
    parameter LOG_ROW = 8,
    // 1: stages 3..9 are the MUL lanes' (rq_*; above)
    parameter SHARE_RQ = 0
)
(
    input  wire               clk,
    input  wire               rst,

    input  wire               clear,
    input  wire               sgn,
    input  wire [15:0]        c,
    input  wire [31:0]        hw,             // H*W (>= 1)
    input  wire [15:0]        n,              // batches (>= 1)
    input  wire signed [15:0] in_off,
    input  wire signed [31:0] mo,
    input  wire signed [7:0]  sho,
    input  wire signed [15:0] out_off,
    input  wire signed [15:0] act_min,
    input  wire signed [15:0] act_max,

    /* pixel words */
    input  wire               in_valid,
    output wire               in_ready,
    input  wire [8*LANES-1:0] in_data,
    input  wire               in_last,

    /* results */
    input  wire               room,
    output reg                out_valid,
    output reg  [8*LANES-1:0] out_data,
    output reg  [3:0]         out_bytes,
    output reg                out_end,
    output wire               op,
    output wire               last_op,

    /* SHARE_RQ: the MUL lanes' requantizers (above) */
    output wire                   rq_sel,
    output wire [32*RQ_LANES-1:0] rq_x,
    /* verilator lint_off UNUSEDSIGNAL */
    input  wire [8*RQ_LANES-1:0]  rq_y8
    /* verilator lint_on UNUSEDSIGNAL */
);

localparam integer ROW = 1 << LOG_ROW;
localparam integer STEPS = LANES / RQ_LANES;
localparam integer SW = (STEPS > 1) ? $clog2(STEPS) : 1;
localparam [31:0]   STEPS_M1 = STEPS - 1;
localparam [SW-1:0] S_LAST = STEPS_M1[SW-1:0];

initial begin
    if (RQ_LANES < 1 || RQ_LANES > LANES || (LANES % RQ_LANES) != 0) begin
        $error("Error: RQ_LANES=%0d must divide LANES=%0d (instance %m)", RQ_LANES, LANES);
        $finish;
    end
end

reg  [32*LANES-1:0] acc [0:ROW-1];

reg                 tail;               // requantizing the batch's sums
reg  [LOG_ROW-1:0]  j;                  // accumulator word (the pixel word's index)
reg  [31:0]         px;                 // pixel of the batch
reg  [15:0]         b;                  // batch
reg  [15:0]         cj;                 // channels from word j on (C - 8j)
reg  signed [31:0]  off_hw;             // IN1_OFF * H*W, wrapped
reg                 fin;                // the tensor's last batch is done: the stream's
                                        // padding bytes past it are no pixel words
wire [SW-1:0]       gs;                 // the tail word's lane group (0 with RQ_LANES = LANES)

assign in_ready = !tail && !fin && !clear;
wire take = in_valid && in_ready;
// a tail operation (a group of a word: the word's first waits for room), the word's last
wire emit = tail && (room || gs != {SW{1'b0}}) && !clear;
wire wdone = emit && (gs == S_LAST);
wire last_word = (cj <= LANES);         // word j is the pixel's / the batch's last
assign op = take || emit;
assign last_op = wdone && last_word && (b == n - 16'd1);

/* verilator lint_off UNUSEDSIGNAL */
wire [47:0] off_full = in_off * $signed({1'b0, hw[30:0]});
/* verilator lint_on UNUSEDSIGNAL */

// the accumulators as block RAM: a registered read of the word the next operation takes (j
// after this cycle's step), and the word written in the same cycle forwarded when it is that
// one (ceil(C/8) = 1: every operation's)
wire [LOG_ROW-1:0]  j_nx = clear ? {LOG_ROW{1'b0}}
                         : (take && in_last) || (wdone && last_word) ? {LOG_ROW{1'b0}}
                         : (take || wdone) ? j + 1'b1 : j;
reg  [32*LANES-1:0] acc_rd;
reg  [32*LANES-1:0] byp_d;
reg                 byp;
wire [32*LANES-1:0] acc_q = byp ? byp_d : acc_rd;
wire [4:0] left = (sho > 8'sd0) ? ((sho > 8'sd31) ? 5'd31 : sho[4:0]) : 5'd0;

reg  [32*LANES-1:0] acc_d;              // the accumulate's new word
// the group's accumulator lanes (gs: a multiplexer when RQ_LANES < LANES; its low group read)
/* verilator lint_off UNUSEDSIGNAL */
wire [32*LANES-1:0] acc_g = acc_q >> (32 * RQ_LANES * gs);
/* verilator lint_on UNUSEDSIGNAL */
integer l;
reg signed [31:0] e;
always @* begin
    for (l = 0; l < LANES; l = l + 1) begin
        e = sgn ? {{24{in_data[8*l+7]}}, in_data[8*l +: 8]} : {24'd0, in_data[8*l +: 8]};
        acc_d[32*l +: 32] = (px == 32'd0) ? e : acc_q[32*l +: 32] + e;
    end
end

// ---- the tail's requantization: a fixed-latency pipe of TAIL_LAT stages from a tail operation,
// one carry chain a stage (one combinational path from the accumulators to out_data was 25.8 MHz
// on the ECP5 proxy): (1) the group's sums; (2) + IN1_OFF * H*W; (3) the left shift (a positive
// SHO, wrapping); (4..9) the requantizer with OUT_OFF and the clamp (dtpu_vec_rq FINAL). Each
// operation's tags (its word done, the word's bytes, the tensor's end) travel beside it; the word
// is assembled from its groups at the pipe's end and registered (out_valid TAIL_LAT + 1 cycles
// after the word's last operation). No stall: the caller's `room` counts the words in flight.
localparam integer TAIL_LAT = 9;

reg  [32*RQ_LANES-1:0] ag_q;            // stage 1: the group's sums
reg  [32*RQ_LANES-1:0] as_q;            // stage 2: + IN1_OFF * H*W
always @(posedge clk) begin
    ag_q <= acc_g[32*RQ_LANES-1:0];
    for (l = 0; l < RQ_LANES; l = l + 1) begin
        as_q[32*l +: 32] <= ag_q[32*l +: 32] + off_hw;
    end
end
assign rq_x = as_q;

// the tags: valid, the word's last group, its bytes, the tensor's last word
reg  [TAIL_LAT-1:0] tg_v, tg_w, tg_e;
reg  [4*TAIL_LAT-1:0] tg_b;
always @(posedge clk) begin
    tg_v <= {tg_v[TAIL_LAT-2:0], emit};
    tg_w <= {tg_w[TAIL_LAT-2:0], wdone};
    tg_e <= {tg_e[TAIL_LAT-2:0], last_op};
    tg_b <= {tg_b[4*TAIL_LAT-5:0], (last_word ? cj[3:0] : 4'd8)};
    if (rst || clear) begin
        tg_v <= {TAIL_LAT{1'b0}};
        tg_w <= {TAIL_LAT{1'b0}};
        tg_e <= {TAIL_LAT{1'b0}};
    end
end
/* verilator lint_off UNUSEDSIGNAL */
wire       g_v = tg_v[TAIL_LAT-1];      // a requantized group at the pipe's end (read with
                                        // RQ_LANES < LANES: the word's groups assembled)
/* verilator lint_on UNUSEDSIGNAL */
wire       g_w = tg_v[TAIL_LAT-1] && tg_w[TAIL_LAT-1];
wire       g_e = tg_e[TAIL_LAT-1];
wire [3:0] g_b = tg_b[4*TAIL_LAT-1 -: 4];

wire [8*RQ_LANES-1:0] grp;              // the requantized group
assign rq_sel = tg_v[1];
genvar q;
generate
    if (SHARE_RQ != 0) begin : shared
        assign grp = rq_y8;
        /* verilator lint_off UNUSEDSIGNAL */
        wire unused_rq = ^{mo, out_off, act_min, act_max, left};
        /* verilator lint_on UNUSEDSIGNAL */
    end else begin : own
        reg [32*RQ_LANES-1:0] ax_q;     // stage 3: << left
        always @(posedge clk) begin
            for (l = 0; l < RQ_LANES; l = l + 1) begin
                ax_q[32*l +: 32] <= as_q[32*l +: 32] << left;
            end
        end
        for (q = 0; q < RQ_LANES; q = q + 1) begin : rq
            /* verilator lint_off UNUSEDSIGNAL */
            wire        rq_v;
            wire [31:0] rq_y;
            /* verilator lint_on UNUSEDSIGNAL */
            dtpu_vec_rq #(.FINAL(1)) rq_inst (
                .clk(clk), .rst(rst), .m(mo), .sh(sho), .out_off(out_off), .act_min(act_min),
                .act_max(act_max), .in_valid(tg_v[2]), .x(ax_q[32*q +: 32]), .out_valid(rq_v),
                .y(rq_y), .y8(grp[8*q +: 8])
            );
        end
    end
endgenerate

wire [8*LANES-1:0]  res;                // the tail's word, its last group in
generate
    if (STEPS == 1) begin : full
        assign gs  = {SW{1'b0}};
        assign res = grp;
    end else begin : part
        reg [SW-1:0] gs_q;
        assign gs = gs_q;
        always @(posedge clk) begin
            if (emit) begin
                gs_q <= (gs_q == S_LAST) ? {SW{1'b0}} : gs_q + 1'b1;
            end
            if (rst || clear) begin
                gs_q <= {SW{1'b0}};
            end
        end
        /* verilator lint_off UNUSEDSIGNAL */
        reg [8*LANES-1:0] res_q;        // the word's groups so far, the latest highest (the
                                        // lowest group is the next word's, never read)
        /* verilator lint_on UNUSEDSIGNAL */
        assign res = {grp, res_q[8*LANES-1:8*RQ_LANES]};
        always @(posedge clk) begin
            if (g_v) begin
                res_q <= res;
            end
        end
    end
endgenerate

always @(posedge clk) begin
    off_hw <= off_full[31:0];
    out_valid <= g_w;
    out_end <= g_w && g_e;
    if (g_w) begin
        out_data  <= res;
        out_bytes <= g_b;
    end
    acc_rd <= acc[j_nx];
    byp    <= take && (j_nx == j);
    byp_d  <= acc_d;
    if (take) begin
        acc[j] <= acc_d;
        if (in_last) begin
            j  <= {LOG_ROW{1'b0}};
            cj <= c;
            if (px == hw - 32'd1) begin
                tail <= 1'b1;
            end else begin
                px <= px + 32'd1;
            end
        end else begin
            j  <= j + 1'b1;
            cj <= cj - LANES;
        end
    end
    if (last_op) begin
        fin <= 1'b1;
    end
    if (wdone) begin
        if (last_word) begin
            tail <= 1'b0;
            j    <= {LOG_ROW{1'b0}};
            cj   <= c;
            px   <= 32'd0;
            b    <= b + 16'd1;
        end else begin
            j  <= j + 1'b1;
            cj <= cj - LANES;
        end
    end
    if (rst || clear) begin
        tail <= 1'b0;
        j    <= {LOG_ROW{1'b0}};
        cj   <= c;
        px   <= 32'd0;
        b    <= 16'd0;
        fin  <= 1'b0;
        out_valid <= 1'b0;
        out_end <= 1'b0;
    end
end

endmodule

`resetall
