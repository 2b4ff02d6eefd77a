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
    parameter [15:0] PREC_EN = 16'h007F
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

wire signed [64:0] off_ext = {{33{offset[31]}}, offset};

// Integer lanes share one adder per row: lane (sign- or zero-extended to the row's widest
// enabled integer lane + 1 bits) + OFFSET; an 8-bit lane keeps the sum's low 9 bits (the
// contract's lane_bits + 1), so it takes bit 8 as the sign of the wider result.
genvar i;
generate
for (i = 0; i < ROWS; i = i + 1) begin : row
    wire en8  = (PREC_EN[DTPU_PREC_INT8] && prec == DTPU_PREC_INT8)
             || (PREC_EN[DTPU_PREC_UINT8] && prec == DTPU_PREC_UINT8);
    wire en16 = PREC_EN[DTPU_PREC_INT16] && prec == DTPU_PREC_INT16 && i < 4;
    wire en32 = PREC_EN[DTPU_PREC_INT32] && prec == DTPU_PREC_INT32 && i < 2;
    wire en64 = PREC_EN[DTPU_PREC_INT64] && prec == DTPU_PREC_INT64 && i < 1;
    wire sgn8 = prec != DTPU_PREC_UINT8 && word[8*i+7];
    reg signed [64:0] lane;
    reg signed [64:0] op;
    /* verilator lint_off UNUSEDSIGNAL */
    reg signed [64:0] sum;
    /* verilator lint_on UNUSEDSIGNAL */
    always @* begin
        if (en64)
            lane = {word[63], word};
        else if (en32)
            lane = {{33{word[32*(i%2)+31]}}, word[32*(i%2) +: 32]};
        else if (en16)
            lane = {{49{word[16*(i%4)+15]}}, word[16*(i%4) +: 16]};
        else
            lane = {{57{sgn8}}, word[8*i +: 8]};
        sum = lane + off_ext;
        op = 65'd0;
        if (en64)
            op = sum;
        else if (en32)
            op = {{32{sum[32]}}, sum[32:0]};
        else if (en16)
            op = {{48{sum[16]}}, sum[16:0]};
        else if (en8)
            op = {{56{sum[8]}}, sum[8:0]};
        else if (PREC_EN[DTPU_PREC_FP32] && prec == DTPU_PREC_FP32 && i < 2)
            op = {33'd0, word[32*(i%2) +: 32]};
        else if (PREC_EN[DTPU_PREC_BF16] && prec == DTPU_PREC_BF16 && i < 4)
            op = {33'd0, word[16*(i%4) +: 16], 16'd0};
    end
    assign operands[i*OPW +: OPW] = op;
end
endgenerate

endmodule

`resetall
