/*

Copyright (c) 2026 DTPU authors. Apache-2.0.

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Filter&Select: unpack one 64-bit word into the operands of the MXU rows.
 *
 * Row i gets lane i of the word in the job's precision (rows past the lane count get 0, so they
 * add nothing to a column sum). Integer lanes are sign- (zero- for UINT8) extended, OFFSET is
 * added and the sum is kept in lane_bits+1 bits (9 for 8-bit lanes, 17, 33, 65), sign-extended
 * to 65 bits. Float lanes pass as fp32 bit patterns in bits 31:0 (bf16 widened by 16 zero bits,
 * exact); OFFSET does not apply to them. Precisions left out of PREC_EN give 0 (CONFIG rejects
 * their jobs).
 */
module dtpu_filter_select #
(
    // MXU rows (lanes of an int8 word)
    parameter ROWS = 8,
    // enabled precisions (bit p: PREC code p): lanes of the others are not built
    parameter [15:0] PREC_EN = 16'h007F,
    // rows past the job's lanes give 0 (1); 0: don't-care there in the narrow build (the MXU's
    // activation side: the weight side's zero makes those products 0)
    parameter ZERO_ROWS = 1
)
(
    input  wire [63:0]          word,
    input  wire [3:0]           prec,
    input  wire [31:0]          offset,
    output wire [ROWS*65-1:0]   operands
);

/* verilator lint_off UNUSEDPARAM */
`include "dtpu_regs.vh"
/* verilator lint_on UNUSEDPARAM */

// every row's operand is 65 bits: an int64 lane plus a 32-bit offset
localparam OPW = 65;

/* verilator lint_off UNUSEDSIGNAL */
wire signed [64:0] off_ext = {{33{offset[31]}}, offset};
/* verilator lint_on UNUSEDSIGNAL */

// Only 8- and 16-bit integer lanes (the board build): one adder per row, 17 or 9 bits, and
// rows 0-3 sign-extend either the 16-bit or the 8-bit (9-bit sum) result. A precision that is
// not built never runs (CONFIG rejects it), so its operands are don't-cares.
// Otherwise: one adder per precision and row (cheaper than a shared 65-bit one).
localparam NARROW = (PREC_EN[DTPU_PREC_INT32] || PREC_EN[DTPU_PREC_INT64]
                     || PREC_EN[DTPU_PREC_FP32] || PREC_EN[DTPU_PREC_BF16]) ? 0 : 1;

genvar i;
generate
if (NARROW != 0) begin : narrow
for (i = 0; i < ROWS; i = i + 1) begin : row
    localparam SW = (i < 4 && PREC_EN[DTPU_PREC_INT16]) ? 17 : 9;
    wire en16 = SW == 17 && prec == DTPU_PREC_INT16;
    // int16 jobs leave rows 4-7 empty
    wire zero_row = ZERO_ROWS != 0 && i >= 4 && PREC_EN[DTPU_PREC_INT16] && prec == DTPU_PREC_INT16;
    wire sgn8 = prec != DTPU_PREC_UINT8 && word[8*i+7];
    wire [SW-1:0] lane;
    if (SW == 17) begin : l16
        assign lane = en16 ? {word[16*(i%4)+15], word[16*(i%4) +: 16]} : {{9{sgn8}}, word[8*i +: 8]};
    end else begin : l8
        assign lane = {sgn8, word[8*i +: 8]};
    end
    wire [SW-1:0] sum = lane + offset[SW-1:0];
    wire [64:0] op = zero_row ? 65'd0
                   : en16 ? {{(65-SW){sum[SW-1]}}, sum} : {{56{sum[8]}}, sum[8:0]};
    assign operands[i*OPW +: OPW] = op;
end
end else begin : wide
for (i = 0; i < ROWS; i = i + 1) begin : wrow
    reg signed [64:0] op;
    always @* begin
        op = 65'd0;
        case (prec)
            DTPU_PREC_INT8: if (PREC_EN[DTPU_PREC_INT8] && i < 8) begin
                op = {{57{word[8*i+7]}}, word[8*i +: 8]} + off_ext;
                op = {{56{op[8]}}, op[8:0]};
            end
            DTPU_PREC_UINT8: if (PREC_EN[DTPU_PREC_UINT8] && i < 8) begin
                op = {57'd0, word[8*i +: 8]} + off_ext;
                op = {{56{op[8]}}, op[8:0]};
            end
            DTPU_PREC_INT16: if (PREC_EN[DTPU_PREC_INT16] && i < 4) begin
                op = {{49{word[16*(i%4)+15]}}, word[16*(i%4) +: 16]} + off_ext;
                op = {{48{op[16]}}, op[16:0]};
            end
            DTPU_PREC_INT32: if (PREC_EN[DTPU_PREC_INT32] && i < 2) begin
                op = {{33{word[32*(i%2)+31]}}, word[32*(i%2) +: 32]} + off_ext;
                op = {{32{op[32]}}, op[32:0]};
            end
            DTPU_PREC_INT64: if (PREC_EN[DTPU_PREC_INT64] && i < 1) begin
                op = {word[63], word} + off_ext;
            end
            DTPU_PREC_FP32: if (PREC_EN[DTPU_PREC_FP32] && i < 2) begin
                op = {33'd0, word[32*(i%2) +: 32]};
            end
            DTPU_PREC_BF16: if (PREC_EN[DTPU_PREC_BF16] && i < 4) begin
                op = {33'd0, word[16*(i%4) +: 16], 16'd0};
            end
            default: op = 65'd0;
        endcase
    end
    assign operands[i*OPW +: OPW] = op;
end
end
endgenerate

endmodule

`resetall
