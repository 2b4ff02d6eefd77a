/*

Copyright (c) 2026 DTPU authors. Apache-2.0.

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Vector unit (contract 2.1), one lane of MUL: TFLite's 8-bit MUL on one element pair
 * (docs/architecture.md "The vector unit"; the golden model is dtpu.reference.vector.mul):
 *   p = (a + IN1_OFF) * (b + IN2_OFF)                       (int32)
 *   y = clamp(MBQM(p, MO, SHO) + OUT_OFF, ACT_MIN, ACT_MAX)
 * MBQM is TFLite's MultiplyByQuantizedMultiplier: a positive shift is an int32 left shift of p
 * (wrapping, as the C++ does), then SRDHM(x, MO) = floor((x*MO + 2^30) / 2^31) (saturating
 * INT32_MIN * INT32_MIN), then a rounding right shift by -SHO (ties away from zero) when SHO is
 * negative (vec_srdhm and vec_rdbpot of dtpu_vec_requant.vh, the requantizer the unit's lanes
 * share). MUL's scale s1*s2/s_out may exceed 1, so unlike ADD both shift directions occur.
 *
 * One element per cycle, two register stages like dtpu_vec_add_lane (out_valid two cycles
 * after in_valid), so that the two lanes share the vector unit's pipeline.
 */
module dtpu_vec_mul_lane
(
    input  wire               clk,
    input  wire               rst,

    /* 1: int8 lanes, 0: uint8 (VEC0.SIGNED) */
    input  wire               sgn,

    /* Parameters (VEC0, VEC6, VEC7 fields, two's complement) */
    input  wire signed [15:0] in1_off,
    input  wire signed [15:0] in2_off,
    input  wire signed [31:0] mo,
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

`include "dtpu_vec_requant.vh"

function signed [9:0] elem;         // an 8-bit lane as a signed value
    input [7:0] v;
    begin
        elem = sgn ? {{2{v[7]}}, v} : {2'b00, v};
    end
endfunction

// ---- stage 1: the product of the offset inputs, the left shift -------------------------------

wire signed [9:0]  ea = elem(a);
wire signed [9:0]  eb = elem(b);
wire signed [31:0] xa = {{22{ea[9]}}, ea} + {{16{in1_off[15]}}, in1_off};
wire signed [31:0] xb = {{22{eb[9]}}, eb} + {{16{in2_off[15]}}, in2_off};
/* verilator lint_off UNUSEDSIGNAL */
wire signed [63:0] prod = xa * xb;              // int32 product: its low 32 bits
/* verilator lint_on UNUSEDSIGNAL */
wire        [4:0]  left = (sho > 8'sd0) ? ((sho > 8'sd31) ? 5'd31 : sho[4:0]) : 5'd0;
wire signed [31:0] xs = prod[31:0] << left;

reg signed [31:0] x_reg;
reg               v1_reg;

initial begin
    x_reg = 32'sd0;
    v1_reg = 1'b0;
end

always @(posedge clk) begin
    x_reg  <= xs;
    v1_reg <= in_valid;
    if (rst) begin
        v1_reg <= 1'b0;
    end
end

// ---- stage 2: the output multiplier, rounding shift, offset, clamp ---------------------------

wire signed [31:0] r = vec_rdbpot(vec_srdhm(x_reg, mo), sho) + {{16{out_off[15]}}, out_off};
wire signed [31:0] lo = {{16{act_min[15]}}, act_min};
wire signed [31:0] hi = {{16{act_max[15]}}, act_max};
/* verilator lint_off UNUSEDSIGNAL */
wire signed [31:0] c = (r < lo) ? lo : (r > hi) ? hi : r;
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
