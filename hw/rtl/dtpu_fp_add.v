/*

Copyright (c) 2026 DTPU authors. Apache-2.0.

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * IEEE-754 binary32 add, round to nearest even, subnormal operands and results.
 * x + (-x) = +0; -0 + -0 = -0. NaN results are the canonical quiet NaN 0x7FC00000
 * (inf - inf included). Combinational.
 */
module dtpu_fp_add
(
    input  wire [31:0] a,
    input  wire [31:0] b,
    output wire [31:0] y
);

wire [7:0]  ea = a[30:23], eb = b[30:23];
wire [22:0] fa = a[22:0], fb = b[22:0];
wire a_nan = ea == 8'hFF && fa != 0;
wire b_nan = eb == 8'hFF && fb != 0;
wire a_inf = ea == 8'hFF && fa == 0;
wire b_inf = eb == 8'hFF && fb == 0;

// order by magnitude: x is the larger
wire swap = b[30:0] > a[30:0];
wire [31:0] x = swap ? b : a;
wire [31:0] z = swap ? a : b;
wire [7:0]  ex = x[30:23] == 8'h00 ? 8'd1 : x[30:23];
wire [7:0]  ez = z[30:23] == 8'h00 ? 8'd1 : z[30:23];
wire [26:0] mx = {x[30:23] != 8'h00, x[22:0], 3'b000};
wire [26:0] mz0 = {z[30:23] != 8'h00, z[22:0], 3'b000};
wire [7:0]  d = ex - ez;

// align the smaller operand; bits shifted out fold into bit 0 (sticky)
reg [26:0] mz;
reg        lost;
integer i;
always @* begin
    lost = 1'b0;
    if (d >= 8'd27) begin
        lost = |mz0;
        mz = 27'd0;
    end else begin
        for (i = 0; i < 27; i = i + 1) begin
            if (i < d && mz0[i]) lost = 1'b1;
        end
        mz = mz0 >> d;
    end
    mz[0] = mz[0] | lost;
end

wire        same = x[31] == z[31];
wire [27:0] sum = same ? {1'b0, mx} + {1'b0, mz} : {1'b0, mx} - {1'b0, mz};

reg [5:0] lz;
always @* begin
    lz = 6'd28;
    for (i = 0; i < 28; i = i + 1) begin
        if (sum[i]) lz = 6'd27 - i[5:0];
    end
end

// value = sum * 2^(ex - 127 - 26) -> m = sum << (20 + lz), e = ex + 1 - lz
wire [47:0] m = {20'd0, sum} << (6'd20 + lz);
wire signed [11:0] e = {4'd0, ex} + 12'sd1 - {6'd0, lz};
wire [31:0] rounded;

dtpu_fp_round
round_inst (
    .sign(x[31]),
    .e(e),
    .m(m),
    .sticky(1'b0),
    .y(rounded)
);

assign y = (a_nan || b_nan || (a_inf && b_inf && a[31] != b[31])) ? 32'h7FC00000
         : a_inf ? a
         : b_inf ? b
         : sum == 28'd0 ? {same ? x[31] : 1'b0, 31'd0}
         : rounded;

endmodule

`resetall
