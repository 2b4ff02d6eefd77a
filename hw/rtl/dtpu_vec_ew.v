/*

Copyright (c) 2026 DTPU authors. Apache-2.0.

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Vector unit (contract 2.1): the element-wise datapath, LANES 8-bit lanes of one 64-bit word
 * a cycle. Each lane has an ADD / SUB requantizer (dtpu_vec_add_lane) and a MUL one
 * (dtpu_vec_mul_lane); `mul` picks the result. Both take the operands every cycle, so the
 * word's result comes two cycles after in_valid whatever the kind (out_valid), with no
 * backpressure: the caller admits a word only when it has room for the result.
 * Parameters are the VEC descriptor's fields as the unit holds them for the whole descriptor.
 */
module dtpu_vec_ew #
(
    parameter LANES = 8
)
(
    input  wire               clk,
    input  wire               rst,

    input  wire               sgn,
    input  wire               mul,            // 1: MUL, 0: ADD (SUB: M2 negated)
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

    input  wire               in_valid,
    input  wire [8*LANES-1:0] a,
    input  wire [8*LANES-1:0] b,

    output wire               out_valid,
    output wire [8*LANES-1:0] y
);

reg mul_q1, mul_q2;                 // the kind travels with the word (it is constant anyway)

always @(posedge clk) begin
    mul_q1 <= mul;
    mul_q2 <= mul_q1;
end

wire [LANES-1:0] add_v, mul_v;
wire [8*LANES-1:0] add_y, mul_y;

genvar i;
generate
    for (i = 0; i < LANES; i = i + 1) begin : lane
        dtpu_vec_add_lane add_inst (
            .clk(clk),
            .rst(rst),
            .sgn(sgn),
            .in1_off(in1_off),
            .in2_off(in2_off),
            .m1(m1),
            .m2(m2),
            .mo(mo),
            .sh1(sh1),
            .sh2(sh2),
            .sho(sho),
            .out_off(out_off),
            .act_min(act_min),
            .act_max(act_max),
            .in_valid(in_valid),
            .a(a[8*i +: 8]),
            .b(b[8*i +: 8]),
            .out_valid(add_v[i]),
            .y(add_y[8*i +: 8])
        );
        dtpu_vec_mul_lane mul_inst (
            .clk(clk),
            .rst(rst),
            .sgn(sgn),
            .in1_off(in1_off),
            .in2_off(in2_off),
            .mo(mo),
            .sho(sho),
            .out_off(out_off),
            .act_min(act_min),
            .act_max(act_max),
            .in_valid(in_valid),
            .a(a[8*i +: 8]),
            .b(b[8*i +: 8]),
            .out_valid(mul_v[i]),
            .y(mul_y[8*i +: 8])
        );
    end
endgenerate

assign out_valid = add_v[0];
assign y = mul_q2 ? mul_y : add_y;

/* verilator lint_off UNUSEDSIGNAL */
wire unused = (^add_v[LANES-1:0]) ^ (^mul_v);
/* verilator lint_on UNUSEDSIGNAL */

endmodule

`resetall
