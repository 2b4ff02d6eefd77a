/*

Copyright (c) 2026 DTPU authors. Apache-2.0.

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * IEEE-754 binary32 multiply, round to nearest even, subnormal operands and results.
 * NaN results are the canonical quiet NaN 0x7FC00000 (inf * 0 included).
 * Combinational (the SMAC registers around it).
 */
module dtpu_fp_mul
(
    input  wire [31:0] a,
    input  wire [31:0] b,
    output wire [31:0] y
);

wire        sa = a[31], sb = b[31];
wire [7:0]  ea = a[30:23], eb = b[30:23];
wire [22:0] fa = a[22:0], fb = b[22:0];
wire        sign = sa ^ sb;

wire a_nan = ea == 8'hFF && fa != 0;
wire b_nan = eb == 8'hFF && fb != 0;
wire a_inf = ea == 8'hFF && fa == 0;
wire b_inf = eb == 8'hFF && fb == 0;
wire a_zero = ea == 8'h00 && fa == 0;
wire b_zero = eb == 8'h00 && fb == 0;

wire [23:0] ma = {ea != 8'h00, fa};
wire [23:0] mb = {eb != 8'h00, fb};
wire [47:0] p = ma * mb;

// leading zeros of the product
reg [5:0] lz;
integer i;
always @* begin
    lz = 6'd48;
    for (i = 0; i < 48; i = i + 1) begin
        if (p[i]) lz = 6'd47 - i[5:0];
    end
end

wire signed [11:0] ea_eff = ea == 8'h00 ? 12'sd1 : {4'd0, ea};
wire signed [11:0] eb_eff = eb == 8'h00 ? 12'sd1 : {4'd0, eb};
wire signed [11:0] e = ea_eff + eb_eff - 12'sd126 - {6'd0, lz};
wire [47:0] m = p << lz;
wire [31:0] rounded;

dtpu_fp_round
round_inst (
    .sign(sign),
    .e(e),
    .m(m),
    .sticky(1'b0),
    .y(rounded)
);

assign y = (a_nan || b_nan || (a_inf && b_zero) || (b_inf && a_zero)) ? 32'h7FC00000
         : (a_inf || b_inf) ? {sign, 8'hFF, 23'd0}
         : (a_zero || b_zero) ? {sign, 31'd0}
         : rounded;

endmodule

`resetall
