/*

Copyright (c) 2026 DTPU authors. Apache-2.0.

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * IEEE-754 binary32 rounding and packing (round to nearest, ties to even, gradual underflow).
 *
 * Input: the value (-1)^sign * m * 2^(e - 127 - 47) with m normalized (m[47] = 1) or zero,
 * plus a sticky bit for anything below m[0]. Results below the normal range become
 * subnormals (or zero), results above it infinity.
 */
module dtpu_fp_round
(
    input  wire              sign,
    input  wire signed [11:0] e,
    input  wire [47:0]       m,
    input  wire              sticky,
    output reg  [31:0]       y
);

reg [47:0] ms;
reg        st;
reg [11:0] sh;
reg [24:0] mant;
reg        g, s;
reg signed [11:0] ee;
integer i;

always @* begin
    ms = m;
    st = sticky;
    ee = e;
    if (e < 12'sd1) begin
        // subnormal: shift right by 1 - e, keeping what falls off as sticky
        sh = 12'd1 - e;
        if (sh > 12'd48) begin
            st = st | (|m);
            ms = 48'd0;
        end else begin
            for (i = 0; i < 48; i = i + 1) begin
                if (i < sh && m[i]) st = 1'b1;
            end
            ms = m >> sh;
        end
        ee = 12'sd0;
    end else begin
        sh = 12'd0;
    end
    g = ms[23];
    s = (|ms[22:0]) | st;
    mant = {1'b0, ms[47:24]};
    if (g && (s || mant[0])) begin
        mant = mant + 25'd1;
    end
    if (mant[24]) begin
        // rounding carried out of the significand
        mant = mant >> 1;
        ee = ee + 12'sd1;
    end else if (ee == 12'sd0 && mant[23]) begin
        // a subnormal rounded up to the smallest normal
        ee = 12'sd1;
    end
    if (m == 48'd0 && !sticky) begin
        y = {sign, 31'd0};
    end else if (ee >= 12'sd255) begin
        y = {sign, 8'hFF, 23'd0};
    end else begin
        y = {sign, ee[7:0], mant[22:0]};
    end
end

endmodule

`resetall
