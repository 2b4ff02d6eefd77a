/*

Copyright (c) 2026 DTPU authors. Apache-2.0.

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Vector unit (contract 2.1), one lane of ADD / SUB: TFLite's 8-bit ADD on one element pair
 * (docs/architecture.md "The vector unit"; the golden model is dtpu.reference.vector.add):
 *   x1 = (a + IN1_OFF) << 20;  s1 = RDBPOT(SRDHM(x1, M1), -SH1)
 *   x2 = (b + IN2_OFF) << 20;  s2 = RDBPOT(SRDHM(x2, M2), -SH2)      (SUB: M2 negated)
 *   y  = clamp(RDBPOT(SRDHM(wrap32(s1 + s2), MO), -SHO) + OUT_OFF, ACT_MIN, ACT_MAX)
 * SRDHM and RDBPOT are the unit's shared requantizer (dtpu_vec_rq: the saturating SRDHM, ties
 * away from zero in RDBPOT). The
 * shifts are TFLite's QuantizeMultiplierSmallerThanOneExp exponents (<= 0); a positive one
 * (which TFLite's Prepare refuses) is taken as 0. |x1|, |x2| < 2^29, so only the output product can saturate (a
 * wrapped sum INT32_MIN times MO = INT32_MIN, which only a hand-made descriptor carries).
 *
 * One element per cycle, a fixed-latency pipe of LAT = 12 stages (out_valid 12 cycles after
 * in_valid), one carry chain a stage (the requantizers were one combinational path, 35.8 MHz on
 * the ECP5 proxy): (1) the offset inputs << 20; (2..5) their requantizers (dtpu_vec_rq);
 * (6) their sum; (7..12) the output requantizer with OUT_OFF and the clamp (dtpu_vec_rq FINAL).
 * dtpu_vec_mul_lane has the same latency, so that the two lanes share dtpu_vec_ew's pipeline.
 */
module dtpu_vec_add_lane
(
    input  wire               clk,
    input  wire               rst,

    /* 1: int8 lanes, 0: uint8 (VEC0.SIGNED) */
    input  wire               sgn,

    /* Parameters (VEC0, VEC5..VEC7 fields, two's complement) */
    input  wire signed [15:0] in1_off,
    input  wire signed [15:0] in2_off,
    input  wire signed [31:0] m1,
    input  wire signed [31:0] m2,
    input  wire signed [31:0] mo,
    input  wire signed [7:0]  sh1,
    input  wire signed [7:0]  sh2,
    input  wire signed [7:0]  sho,
    input  wire signed [15:0] out_off,
    input  wire signed [15:0] act_min,
    input  wire signed [15:0] act_max,

    /* Operands */
    input  wire               in_valid,
    input  wire [7:0]         a,
    input  wire [7:0]         b,

    /* Result */
    output wire               out_valid,
    output wire [7:0]         y
);

// ---- helpers --------------------------------------------------------------------------------

function signed [9:0] elem;         // an 8-bit lane as a signed value
    input [7:0] v;
    begin
        elem = sgn ? {{2{v[7]}}, v} : {2'b00, v};
    end
endfunction

// ---- stage 1: the offset inputs << 20 ---------------------------------------------------------

// (sign extensions written out: the file is Verilog 2001, which has no size casts)
wire signed [9:0]  ea = elem(a);
wire signed [9:0]  eb = elem(b);
reg  signed [31:0] x1_q, x2_q;
reg                v1_q;

initial begin
    v1_q = 1'b0;
end

always @(posedge clk) begin
    x1_q <= ({{22{ea[9]}}, ea} + {{16{in1_off[15]}}, in1_off}) << 20;
    x2_q <= ({{22{eb[9]}}, eb} + {{16{in2_off[15]}}, in2_off}) << 20;
    v1_q <= in_valid;
    if (rst) begin
        v1_q <= 1'b0;
    end
end

// ---- stages 2..5: the inputs scaled to the common scale ----------------------------------------

wire signed [31:0] s1, s2;
wire               v5;
/* verilator lint_off UNUSEDSIGNAL */
wire               v5b;
wire [7:0]         n1, n2;
/* verilator lint_on UNUSEDSIGNAL */

dtpu_vec_rq #(.FINAL(0)) rq1_inst (
    .clk(clk), .rst(rst), .m(m1), .sh(sh1), .out_off(16'sd0), .act_min(16'sd0), .act_max(16'sd0),
    .in_valid(v1_q), .x(x1_q), .out_valid(v5), .y(s1), .y8(n1)
);

dtpu_vec_rq #(.FINAL(0)) rq2_inst (
    .clk(clk), .rst(rst), .m(m2), .sh(sh2), .out_off(16'sd0), .act_min(16'sd0), .act_max(16'sd0),
    .in_valid(v1_q), .x(x2_q), .out_valid(v5b), .y(s2), .y8(n2)
);

// ---- stage 6: their sum ------------------------------------------------------------------------

reg signed [31:0] sum_q;                 // wraps as TFLite's int32 does
reg               v6_q;

initial begin
    v6_q = 1'b0;
end

always @(posedge clk) begin
    sum_q <= s1 + s2;
    v6_q  <= v5;
    if (rst) begin
        v6_q <= 1'b0;
    end
end

// ---- stages 7..12: the sum scaled to the output, offset, clamp ---------------------------------

/* verilator lint_off UNUSEDSIGNAL */
wire signed [31:0] yo;
/* verilator lint_on UNUSEDSIGNAL */

dtpu_vec_rq #(.FINAL(1)) rqo_inst (
    .clk(clk), .rst(rst), .m(mo), .sh(sho), .out_off(out_off), .act_min(act_min),
    .act_max(act_max), .in_valid(v6_q), .x(sum_q), .out_valid(out_valid), .y(yo), .y8(y)
);

endmodule

`resetall
