/*

Copyright (c) 2026 DTPU authors. Apache-2.0.

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Vector unit (contract 2.1): TFLite's requantizer RDBPOT(SRDHM(x, M), -SH) as a pipeline of
 * one carry chain a stage, for the element-wise lanes (dtpu_vec_add_lane, dtpu_vec_mul_lane)
 * and MEAN's tail (dtpu_vec_mean):
 *   SRDHM(x, M)   gemmlowp's SaturatingRoundingDoublingHighMul: floor((x*M + 2^30) / 2^31),
 *                 x and M int32, INT32_MIN * INT32_MIN saturated to INT32_MAX as TFLite's
 *                 kernels do (the only product whose doubled high half overflows)
 *   RDBPOT(v, e)  RoundingDivideByPOT: v / 2^e rounded half away from zero, e = -SH for
 *                 TFLite's shift SH <= 0; SH > 0 is taken as 0 (a left shift is the caller's:
 *                 MUL and MEAN apply it before, ADD's Prepare never makes one), SH < -31 as -31
 * (until they were pipelined these were the Verilog functions vec_srdhm and vec_rdbpot of
 * dtpu_vec_requant.vh, one combinational path). As one combinational path these were the vector unit's critical paths
 * on the ECP5 proxy (add lane 35.8 MHz, mul lane 39.7, MEAN 25.8: docs/synthesis.md "Timing
 * evidence"); staged as dtpu_post_lane's requantizer is (products as registered partial
 * products, summed in the next stage):
 *   1  x * M as four partial products of x's and M's 16-bit halves, one multiplier each (the
 *      saturating case INT32_MIN * INT32_MIN flagged)
 *   2  their sum P = x*M (one carry-save level, one adder), q = floor(P / 2^30)
 *   3  SRDHM's + 2^30 and RDBPOT's rounding sum (+ 2^(e-1), less one when negative; e = -SH,
 *      0..31) in one adder, halved
 *   4  the arithmetic right shift by e                                  (y: LAT = 4)
 * With FINAL = 1 two more, the output's:
 *   5  + OUT_OFF (int32, wrapping as the golden model's does)
 *   6  the clamp to ACT_MIN..ACT_MAX, its low byte                     (y8: LAT = 6)
 * A fixed-latency pipe, one value a cycle, no stall: out_valid LAT cycles after in_valid. The
 * callers hold no result back (their callers count the words in flight: dtpu_vec's room).
 * M, SH, OUT_OFF, ACT_MIN, ACT_MAX are the descriptor's, constant while its values pass.
 */
module dtpu_vec_rq #
(
    // 1: + OUT_OFF and the clamp (y8); 0: the requantized int32 (y)
    parameter FINAL = 0
)
(
    input  wire               clk,
    input  wire               rst,

    input  wire signed [31:0] m,
    input  wire signed [7:0]  sh,
    input  wire signed [15:0] out_off,
    input  wire signed [15:0] act_min,
    input  wire signed [15:0] act_max,

    input  wire               in_valid,
    input  wire signed [31:0] x,

    output wire               out_valid,
    output wire signed [31:0] y,
    output wire        [7:0]  y8
);

localparam integer LAT = FINAL ? 6 : 4;

// ---- stage 1: partial products ------------------------------------------------------------
// x and M split at bit 16 (the low halves unsigned, the high ones signed): four products of at
// most 17 x 17 bits, each one 18 x 18 multiplier (MULT18X18D, DSP48E1) registered as it leaves
// it. (x * M[15:0] and x * M[31:16] took two multipliers and an adder each: in dtpu_vec_ew, 104
// multipliers spread over the device, the routes to and from them and that adder were its
// critical path on the ECP5 proxy, docs/synthesis.md)

wire        [15:0] xl = x[15:0];
wire signed [15:0] xh = x[31:16];
wire        [15:0] ml = m[15:0];
wire signed [15:0] mh = m[31:16];
/* verilator lint_off UNUSEDSIGNAL */
wire signed [33:0] pll = $signed({1'b0, xl}) * $signed({1'b0, ml});    // < 2^32: 32 bits
/* verilator lint_on UNUSEDSIGNAL */
wire signed [32:0] plh = $signed({1'b0, xl}) * mh;
wire signed [32:0] phl = xh * $signed({1'b0, ml});
wire signed [31:0] phh = xh * mh;                                       // |.| <= 2^30
reg         [31:16] pll_q;              // its low 16 bits are P's, carry-free: not needed
reg  signed [32:0] plh_q, phl_q;
reg  signed [31:0] phh_q;
reg                sat_q;

always @(posedge clk) begin
    pll_q <= pll[31:16];
    plh_q <= plh;
    phl_q <= phl;
    phh_q <= phh;
    sat_q <= (x == 32'sh80000000) && (m == 32'sh80000000);
end

// ---- stage 2: P = x*M (one carry-save level, one adder), q = floor(P / 2^30) ----------------
// P = xh*mh 2^32 + (xl*mh + xh*ml) 2^16 + xl*ml; the first and the last do not overlap, and
// below bit 16 only xl*ml has bits (no carry out of them): the sum is P's bits 16..63. The
// middle products are 33-bit signed: each is its bits with the sign bit inverted, less 2^48
// (no sign extension through the carry-save level: -2^49, bits 49..63 set, rides in pp_b's
// empty top). SRDHM's + 2^30 is not added here (it took a second carry-save level, about 20
// LUT6 a requantizer on the xc7) but in stage 3's sum: SRDHM = floor((q + 1) / 2). The one
// saturating product (INT32_MIN * INT32_MIN = 2^62) gives q = 2^32 - 2 (SRDHM INT32_MAX).

wire [47:0] pp_a = {phh_q, pll_q};
wire [47:0] pp_b = {{15{1'b1}}, ~plh_q[32], plh_q[31:0]};
wire [47:0] pp_c = {15'd0, ~phl_q[32], phl_q[31:0]};
wire [47:0] pp_s = pp_a ^ pp_b ^ pp_c;
wire [46:0] pp_k = (pp_a[46:0] & pp_b[46:0]) | (pp_a[46:0] & pp_c[46:0]) | (pp_b[46:0] & pp_c[46:0]);
/* verilator lint_off UNUSEDSIGNAL */
wire [47:0] p2 = pp_s + {pp_k, 1'b0};        // P[63:16]
/* verilator lint_on UNUSEDSIGNAL */
reg  signed [33:0] q_q;                       // P[63:30]: |P| <= 2^62

always @(posedge clk) begin
    q_q <= sat_q ? 34'sh0fffffffe : p2[47:14];
end

// ---- stage 3: SRDHM's and RDBPOT's rounding in one sum ---------------------------------------
// RDBPOT(h, e) = floor((h + 2^(e-1) - [h < 0]) / 2^e) (e > 0; h itself for e = 0) with
// h = floor((q + 1) / 2) is floor((q + 1 + 2 rnd) / 2^(e+1)), rnd = 2^(e-1) - [h < 0] (0 for
// e = 0): t_q = floor((q + 1 + 2 rnd) / 2) = q[33:1] + rnd + q[0] (one adder, q[0] its carry
// in), y = t_q >> e. [h < 0] is read as q's sign: they differ only for q = -1 (h = 0), which
// gives 0 either way (t_q = 2^(e-1) or 2^(e-1) - 1, both below 2^e). rnd is a decode of e and
// the sign, 2^(e-1) or 2^(e-1) - 1 (no subtractor).

/* verilator lint_off UNUSEDSIGNAL */
wire signed [7:0] nsh = -sh;                // only its low 5 bits are read (1..31)
/* verilator lint_on UNUSEDSIGNAL */
wire        [4:0] e = (sh >= 8'sd0) ? 5'd0 : (sh < -8'sd31) ? 5'd31 : nsh[4:0];
wire        [4:0] e1 = e - 5'd1;            // read only for e > 0
wire       [32:0] rnd = (e == 5'd0) ? 33'd0
                      : q_q[33] ? ~({33{1'b1}} << e1)     // 2^(e-1) - 1
                      : (33'd1 << e1);                    // 2^(e-1)
reg  signed [32:0] t_q;                     // |.| < 2^32
reg         [4:0]  e_q;

always @(posedge clk) begin
    t_q <= q_q[33:1] + rnd + {32'd0, q_q[0]};
    e_q <= e;
end

// ---- stage 4: the shift ----------------------------------------------------------------------

/* verilator lint_off UNUSEDSIGNAL */
wire signed [32:0] ts = t_q >>> e_q;
/* verilator lint_on UNUSEDSIGNAL */
reg  signed [31:0] y_q;

always @(posedge clk) begin
    y_q <= ts[31:0];
end

assign y = y_q;

// ---- stages 5, 6 (FINAL): + OUT_OFF, the clamp -----------------------------------------------

generate
    if (FINAL != 0) begin : fin
        reg  signed [31:0] r_q;
        reg         [7:0]  c_q;
        wire signed [31:0] lo = {{16{act_min[15]}}, act_min};
        wire signed [31:0] hi = {{16{act_max[15]}}, act_max};
        always @(posedge clk) begin
            r_q <= y_q + {{16{out_off[15]}}, out_off};
            c_q <= (r_q < lo) ? lo[7:0] : (r_q > hi) ? hi[7:0] : r_q[7:0];
        end
        assign y8 = c_q;
    end else begin : nofin
        assign y8 = 8'd0;
        /* verilator lint_off UNUSEDSIGNAL */
        wire unused = ^{out_off, act_min, act_max};
        /* verilator lint_on UNUSEDSIGNAL */
    end
endgenerate

// ---- valid ------------------------------------------------------------------------------------

reg [LAT-1:0] v_q;

initial begin
    v_q = {LAT{1'b0}};
end

always @(posedge clk) begin
    v_q <= {v_q[LAT-2:0], in_valid};
    if (rst) begin
        v_q <= {LAT{1'b0}};
    end
end

assign out_valid = v_q[LAT-1];

endmodule

`resetall
