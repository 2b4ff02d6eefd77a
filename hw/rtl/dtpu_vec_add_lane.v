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
 * SRDHM(x, m) = floor((x*m + 2^30) / 2^31) (gemmlowp's nudge and truncation, in one floor);
 * RDBPOT(x, e) = floor((x + 2^(e-1) - [x < 0]) / 2^e), e = -shift >= 0 (ties away from zero).
 * The shifts are TFLite's QuantizeMultiplierSmallerThanOneExp exponents (<= 0); a positive one
 * (which TFLite's Prepare refuses) is taken as 0. |x1|, |x2| < 2^29, so no SRDHM saturates.
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

function signed [31:0] srdhm;       // floor((x*m + 2^30) / 2^31), x and m int32
    input signed [31:0] x;
    input signed [31:0] m;
    reg signed [63:0] p;
    begin
        p = x * m;
        p = p + 64'sd1073741824;
        srdhm = p[62:31];
    end
endfunction

function signed [31:0] rdbpot;      // x / 2^e rounded half away from zero, e = -shift
    input signed [31:0] x;
    input signed [7:0]  shift;
    reg        [5:0]  e;
    /* verilator lint_off UNUSEDSIGNAL */
    reg signed [7:0]  ns;           // -shift: only its low 6 bits are read (1..31)
    /* verilator lint_on UNUSEDSIGNAL */
    reg signed [32:0] t;
    begin
        ns = -shift;
        e = (shift >= 0) ? 6'd0 : (shift < -8'sd31) ? 6'd31 : ns[5:0];
        if (e == 6'd0) begin
            rdbpot = x;
        end else begin
            t = {x[31], x} + (33'sd1 <<< (e - 6'd1)) - {32'd0, x[31]};
            t = t >>> e;
            rdbpot = t[31:0];
        end
    end
endfunction

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
    s1_reg <= rdbpot(srdhm(x1, m1), sh1);
    s2_reg <= rdbpot(srdhm(x2, m2), sh2);
    v1_reg <= in_valid;
    if (rst) begin
        v1_reg <= 1'b0;
    end
end

// ---- stage 2: the sum scaled to the output, offset, clamp ------------------------------------

wire signed [31:0] sum = s1_reg + s2_reg;             // wraps as TFLite's int32 does
wire signed [31:0] r = rdbpot(srdhm(sum, mo), sho) + {{16{out_off[15]}}, out_off};
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
