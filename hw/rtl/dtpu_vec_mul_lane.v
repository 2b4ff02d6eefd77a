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
 * negative (dtpu_vec_rq, the
 * requantizer the unit's lanes share). MUL's scale s1*s2/s_out may exceed 1, so unlike ADD both shift directions occur.
 *
 * One element per cycle, a fixed-latency pipe of 12 stages like dtpu_vec_add_lane (out_valid
 * 12 cycles after in_valid; they share dtpu_vec_ew's pipeline), one carry chain a stage (the
 * product and the requantizer were 39.7 MHz on the ECP5 proxy): (1) the offset inputs;
 * (2) their product; (3) the left shift; (4..9) the requantizer with OUT_OFF and the clamp
 * (dtpu_vec_rq FINAL); (10..12) the result delayed to the add lane's latency.
 *
 * The requantizer is MEAN's too (dtpu_vec_mean with SHARE_RQ = 1, dtpu_vec): MEAN and MUL never
 * run in the same descriptor, and a descriptor ends only when its last result is written (so a
 * MUL word has left stage 3 long before a MEAN's tail comes), and both take the descriptor's
 * MO, SHO, OUT_OFF, ACT_MIN, ACT_MAX. With alt_sel stage 3 takes alt_x (MEAN's offset sum) in
 * place of the product, shifted by the same SHO; rq_y8 is the requantizer's byte at stage 9,
 * MEAN's result six cycles later (its own tags say when). alt_sel = 0: the lane alone.
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
    output wire               out_valid,
    output wire [7:0]         y,

    /* The requantizer lent to MEAN's tail (above) */
    input  wire               alt_sel,
    input  wire signed [31:0] alt_x,
    output wire [7:0]         rq_y8
);

function signed [9:0] elem;         // an 8-bit lane as a signed value
    input [7:0] v;
    begin
        elem = sgn ? {{2{v[7]}}, v} : {2'b00, v};
    end
endfunction

// ---- stage 1: the offset inputs (|.| < 2^16: 17 bits) ------------------------------------------

wire signed [9:0]  ea = elem(a);
wire signed [9:0]  eb = elem(b);
reg  signed [16:0] xa_q, xb_q;
reg                v1_q;

initial begin
    v1_q = 1'b0;
end

always @(posedge clk) begin
    xa_q <= {{7{ea[9]}}, ea} + {in1_off[15], in1_off};
    xb_q <= {{7{eb[9]}}, eb} + {in2_off[15], in2_off};
    v1_q <= in_valid;
    if (rst) begin
        v1_q <= 1'b0;
    end
end

// ---- stage 2: their product (int32: its low 32 bits) -------------------------------------------

/* verilator lint_off UNUSEDSIGNAL */
wire signed [33:0] prod = xa_q * xb_q;
/* verilator lint_on UNUSEDSIGNAL */
reg  signed [31:0] p_q;
reg                v2_q;

initial begin
    v2_q = 1'b0;
end

always @(posedge clk) begin
    p_q  <= prod[31:0];
    v2_q <= v1_q;
    if (rst) begin
        v2_q <= 1'b0;
    end
end

// ---- stage 3: the left shift (a positive SHO, wrapping; of MEAN's sum with alt_sel) ------------

wire        [4:0]  left = (sho > 8'sd0) ? ((sho > 8'sd31) ? 5'd31 : sho[4:0]) : 5'd0;
reg  signed [31:0] xs_q;
reg                v3_q;

initial begin
    v3_q = 1'b0;
end

always @(posedge clk) begin
    xs_q <= (alt_sel ? alt_x : p_q) << left;
    v3_q <= v2_q;
    if (rst) begin
        v3_q <= 1'b0;
    end
end

// ---- stages 4..9: the output multiplier, rounding shift, offset, clamp -------------------------

wire               v9;
wire        [7:0]  y9;
/* verilator lint_off UNUSEDSIGNAL */
wire signed [31:0] yo;
/* verilator lint_on UNUSEDSIGNAL */

dtpu_vec_rq #(.FINAL(1)) rqo_inst (
    .clk(clk), .rst(rst), .m(mo), .sh(sho), .out_off(out_off), .act_min(act_min),
    .act_max(act_max), .in_valid(v3_q), .x(xs_q), .out_valid(v9), .y(yo), .y8(y9)
);

// ---- stages 10..12: delayed to the add lane's latency --------------------------------------------

reg [7:0] y10_q, y11_q, y12_q;
reg [2:0] vd_q;

initial begin
    vd_q = 3'd0;
end

always @(posedge clk) begin
    y10_q <= y9;
    y11_q <= y10_q;
    y12_q <= y11_q;
    vd_q  <= {vd_q[1:0], v9};
    if (rst) begin
        vd_q <= 3'd0;
    end
end

assign out_valid = vd_q[2];
assign y = y12_q;
assign rq_y8 = y9;

endmodule

`resetall
