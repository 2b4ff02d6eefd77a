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
 * SRDHM and RDBPOT are the unit's shared requantizer functions (dtpu_vec_requant.vh: the
 * saturating SRDHM, ties away from zero in RDBPOT). The shifts are TFLite's
 * QuantizeMultiplierSmallerThanOneExp exponents (<= 0); a positive one (which TFLite's Prepare
 * refuses) is taken as 0. |x1|, |x2| < 2^29, so only the output product can saturate (a
 * wrapped sum INT32_MIN times MO = INT32_MIN, which only a hand-made descriptor carries).
 *
 * One element per cycle, two register stages: the two input products and roundings, then the
 * output product, rounding and clamp (out_valid two cycles after in_valid).
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
    output reg                out_valid,
    output reg  [7:0]         y
);

// ---- helpers --------------------------------------------------------------------------------

`include "dtpu_vec_requant.vh"

function signed [9:0] elem;         // an 8-bit lane as a signed value
    input [7:0] v;
    begin
        elem = sgn ? {{2{v[7]}}, v} : {2'b00, v};
    end
endfunction

// ---- stage 1: the inputs scaled to the common scale ------------------------------------------

// (sign extensions written out: the file is Verilog 2001, which has no size casts)
wire signed [9:0]  ea = elem(a);
wire signed [9:0]  eb = elem(b);
wire signed [31:0] x1 = ({{22{ea[9]}}, ea} + {{16{in1_off[15]}}, in1_off}) << 20;
wire signed [31:0] x2 = ({{22{eb[9]}}, eb} + {{16{in2_off[15]}}, in2_off}) << 20;

reg signed [31:0] s1_reg;
reg signed [31:0] s2_reg;
reg               v1_reg;

initial begin
    s1_reg = 32'sd0;
    s2_reg = 32'sd0;
    v1_reg = 1'b0;
end

always @(posedge clk) begin
    s1_reg <= vec_rdbpot(vec_srdhm(x1, m1), sh1);
    s2_reg <= vec_rdbpot(vec_srdhm(x2, m2), sh2);
    v1_reg <= in_valid;
    if (rst) begin
        v1_reg <= 1'b0;
    end
end

// ---- stage 2: the sum scaled to the output, offset, clamp ------------------------------------

wire signed [31:0] sum = s1_reg + s2_reg;             // wraps as TFLite's int32 does
wire signed [31:0] r = vec_rdbpot(vec_srdhm(sum, mo), sho) + {{16{out_off[15]}}, out_off};
wire signed [31:0] lo = {{16{act_min[15]}}, act_min};
wire signed [31:0] hi = {{16{act_max[15]}}, act_max};
/* verilator lint_off UNUSEDSIGNAL */
wire signed [31:0] c = (r < lo) ? lo : (r > hi) ? hi : r;    // within ACT_MIN..ACT_MAX: 8 bits
/* verilator lint_on UNUSEDSIGNAL */

initial begin
    out_valid = 1'b0;
    y = 8'd0;
end

always @(posedge clk) begin
    y <= c[7:0];
    out_valid <= v1_reg;
    if (rst) begin
        out_valid <= 1'b0;
    end
end

endmodule

`resetall
