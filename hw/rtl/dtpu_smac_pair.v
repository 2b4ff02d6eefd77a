/*

Copyright (c) 2026 DTPU authors. Apache-2.0.

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Two 8-bit-lane processing elements on one multiplier (one DSP48E1 instead of two).
 *
 * Why: the board's DSP48E1s, not its LUTs, bound the MXU at 1 DSP per PE; two PEs that multiply
 * by the same operand s in a cycle can share one 25x18 multiply, s * (wh*2^16 + wl). That holds
 * for a PE pair of one row in GEMM (the activation lane is broadcast along the row). In DWCONV
 * the two columns of a pair must not issue in the same cycle (TAP_CYCLES >= 2 with the pair's
 * columns in different column groups): then s is the valid column's activation and the other
 * half of the product is ignored. When both issue, s is column L's operand (in_al), and the
 * caller guarantees in_ah == in_al.
 *
 * The two 18-bit products overlap by two bits at a 16-bit spacing (25-bit port), and the packed
 * operand wh*2^16 + wl needs 26 bits when wh = -256 and wl < 0. Both are corrected exactly with
 * the DSP's post-adder (C port), from flags of the operands alone:
 *   x = wl*s lies in [-65280, 65536], so x >>> 16 is -1 (x < 0), +1 (x = 65536: wl = s = -256)
 *   or 0, and P = s*pk - (x>>>16)*2^16 leaves wh*s in P[33:16] and x mod 2^16 in P[15:0];
 *   pk is taken modulo 2^25, which adds s*2^25 when it wrapped; C removes that too.
 * x itself is P[15:0] with bits 17:16 from the same flags. Both accumulators are in fabric
 * (ACC_W bits, exact like dtpu_smac's).
 *
 * Pipeline and ports per PE as dtpu_smac (stage 1 operands, stage 2 product, stage 3
 * accumulator; LAT_MXU unchanged), integer 9-bit operands only (no float, no int64).
 */
module dtpu_smac_pair #
(
    // accumulator width of each PE
    parameter ACC_W = 36
)
(
    input  wire                   clk,
    input  wire                   rst_n,
    input  wire                   ce,

    /* Column L (low half of the packed operand) */
    input  wire                   in_valid_l,
    input  wire                   in_first_l,
    input  wire                   in_last_l,
    input  wire signed [8:0]      in_al,
    input  wire signed [8:0]      in_bl,

    /* Column H (high half) */
    input  wire                   in_valid_h,
    input  wire                   in_first_h,
    input  wire                   in_last_h,
    input  wire signed [8:0]      in_ah,
    input  wire signed [8:0]      in_bh,

    /* Accumulators */
    output wire signed [ACC_W-1:0] acc_l,
    output wire                   acc_valid_l,
    output wire signed [ACC_W-1:0] acc_h,
    output wire                   acc_valid_h
);

reg               v1l_reg, f1l_reg, l1l_reg, v1h_reg, f1h_reg, l1h_reg;
reg signed [8:0]  s_reg;
reg signed [24:0] pk_reg;
reg signed [18:0] c_reg;
reg               neg1_reg, big1_reg;
reg               v2l_reg, f2l_reg, l2l_reg, v2h_reg, f2h_reg, l2h_reg;
reg               neg2_reg, big2_reg;
/* verilator lint_off UNUSEDSIGNAL */
reg signed [42:0] p_reg;
/* verilator lint_on UNUSEDSIGNAL */
reg signed [ACC_W-1:0] accl_reg, acch_reg;
reg               accvl_reg, accvh_reg;

// (operands, flags and the correction are formed before the stage-1 registers, so that those
// map into the DSP48E1's A, B and C registers)
wire signed [8:0] s = in_valid_l ? in_al : in_ah;

// packed operand modulo 2^25: {wh - (wl < 0), wl sign-extended to 16 bits}
wire [8:0] pk_hi = in_bh - {8'd0, in_bl[8]};
wire [24:0] pk = {pk_hi, {7{in_bl[8]}}, in_bl};
// pk wrapped (its true value is below -2^24): wh = -256 and wl < 0
wire wrap = in_bh == 9'h100 && in_bl[8];

// x = wl*s is negative, or exactly 2^16
wire neg = in_bl != 9'd0 && s != 9'd0 && (in_bl[8] ^ s[8]);
wire big = in_bl == 9'h100 && s == 9'h100;

// C / 2^16 = -(x >>> 16) - wrap*s*2^9: the multiple of 2^16 the product must lose
wire [18:0] c_hi = {18'd0, neg} - {18'd0, big} - (wrap ? {s[8], s, 9'd0} : 19'd0);

wire signed [42:0] c_term = {{8{c_reg[18]}}, c_reg, 16'd0};
wire signed [42:0] prod = s_reg * pk_reg + c_term;

// the two products: P[33:16] is wh*s; x is P[15:0] with its two top bits from the flags
wire signed [17:0] p_h = p_reg[33:16];
wire signed [17:0] p_l = {neg2_reg, neg2_reg | big2_reg, p_reg[15:0]};

always @(posedge clk) begin
    if (ce) begin
        v1l_reg <= in_valid_l;
        f1l_reg <= in_first_l;
        l1l_reg <= in_last_l & in_valid_l;
        v1h_reg <= in_valid_h;
        f1h_reg <= in_first_h;
        l1h_reg <= in_last_h & in_valid_h;
        s_reg <= s;
        pk_reg <= pk;
        c_reg <= c_hi;
        neg1_reg <= neg;
        big1_reg <= big;

        v2l_reg <= v1l_reg;
        f2l_reg <= f1l_reg;
        l2l_reg <= l1l_reg;
        v2h_reg <= v1h_reg;
        f2h_reg <= f1h_reg;
        l2h_reg <= l1h_reg;
        p_reg <= prod;
        neg2_reg <= neg1_reg;
        big2_reg <= big1_reg;

        if (v2l_reg) begin
            accl_reg <= (f2l_reg ? {ACC_W{1'b0}} : accl_reg) + {{(ACC_W-18){p_l[17]}}, p_l};
        end
        if (v2h_reg) begin
            acch_reg <= (f2h_reg ? {ACC_W{1'b0}} : acch_reg) + {{(ACC_W-18){p_h[17]}}, p_h};
        end
        accvl_reg <= l2l_reg;
        accvh_reg <= l2h_reg;
    end

    if (!rst_n) begin
        v1l_reg <= 1'b0;
        l1l_reg <= 1'b0;
        v1h_reg <= 1'b0;
        l1h_reg <= 1'b0;
        v2l_reg <= 1'b0;
        l2l_reg <= 1'b0;
        v2h_reg <= 1'b0;
        l2h_reg <= 1'b0;
        accvl_reg <= 1'b0;
        accvh_reg <= 1'b0;
    end
end

assign acc_l = accl_reg;
assign acc_valid_l = accvl_reg;
assign acc_h = acch_reg;
assign acc_valid_h = accvh_reg;

endmodule

`resetall
