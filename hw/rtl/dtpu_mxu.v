/*

Copyright (c) 2026 DTPU authors. Apache-2.0.

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * MXU: ROWS x COLS SMAC processing elements with a Filter&Select per column for the activation
 * word and the weight word.
 *
 * Column j multiplies the lanes of act_words[j] with the lanes of wgt_words[j] row by row (GEMM
 * feeds the same activation word to every column, DWCONV a word per column) and accumulates
 * per PE. Rows are built only as wide as the precisions that reach them (PREC_EN): row 0 takes
 * int64 lanes (65-bit operands), row 1 int32, rows 2-3 int16, the rest int8 (9-bit operands),
 * because a word of wider lanes has fewer of them.
 * Accumulators leave sign-extended to AW bits: acc[(j*ROWS+i)*AW +: AW] is PE (row i, col j).
 *
 * PE_PAIR = 1 builds the 9-bit integer rows (no float path) as PE pairs on one multiplier
 * (dtpu_smac_pair): PE (i, j) and PE (i, j + COLS/2), j < COLS/2, multiply by column j's
 * activation operand when column j is valid, else by column j + COLS/2's. Exact when the two
 * columns never issue in one cycle with different activation operands: GEMM (one activation
 * word for all columns) and DWCONV with TAP_CYCLES >= 2 (the columns of a pair are in different
 * column groups). Same results and cycles as PE_PAIR = 0 under that condition.
 */
module dtpu_mxu #
(
    // rows: lanes of an int8 word
    parameter ROWS = 8,
    // columns
    parameter COLS = 8,
    // enabled precisions (bit p: PREC code p)
    parameter [15:0] PREC_EN = 16'h007F,
    // width of the accumulator outputs
    parameter AW = 84,
    // 9-bit integer rows as PE pairs sharing one multiplier (see above)
    parameter PE_PAIR = 0
)
(
    input  wire                     clk,
    input  wire                     rst_n,
    input  wire                     ce,

    /* Job configuration (constant during a job) */
    input  wire [3:0]               prec,
    input  wire [31:0]              in_offset,
    input  wire [31:0]              wgt_offset,

    /* Operands: one activation and one weight word per column */
    input  wire [COLS*64-1:0]       act_words,
    input  wire [COLS*64-1:0]       wgt_words,
    input  wire [COLS-1:0]          col_valid,
    input  wire [COLS-1:0]          col_zero,
    input  wire [COLS-1:0]          col_first,
    input  wire [COLS-1:0]          col_last,

    /* Accumulators */
    output wire [ROWS*COLS*AW-1:0]  acc,
    output wire [COLS-1:0]          acc_valid,
    output wire                     prod_ovf,

    /* Float sums (fp32 jobs): fp_sum[(j*ROWS+i)*32 +: 32] */
    output wire [ROWS*COLS*32-1:0]  fp_sum,
    output wire [COLS-1:0]          fp_valid
);

/* verilator lint_off UNUSEDPARAM */
`include "dtpu_regs.vh"
/* verilator lint_on UNUSEDPARAM */

function integer row_opw(input integer i);
    begin
        if (i < 1 && PREC_EN[DTPU_PREC_INT64])
            row_opw = 65;
        else if (i < 2 && PREC_EN[DTPU_PREC_INT32])
            row_opw = 33;
        else if (i < 4 && PREC_EN[DTPU_PREC_INT16])
            row_opw = 17;
        else
            row_opw = 9;
    end
endfunction

function integer row_fp(input integer i);
    begin
        row_fp = ((i < 2 && PREC_EN[DTPU_PREC_FP32]) || (i < 4 && PREC_EN[DTPU_PREC_BF16])) ? 1 : 0;
    end
endfunction

function integer row_accw(input integer opw);
    begin
        if (opw > 17)
            row_accw = 84;
        else if (opw > 9)
            row_accw = 52;
        else
            row_accw = 36;
    end
endfunction

// row i is built as PE pairs
function integer row_pair(input integer i);
    begin
        row_pair = (PE_PAIR != 0 && COLS >= 2 && row_opw(i) == 9 && row_fp(i) == 0) ? 1 : 0;
    end
endfunction

localparam HALF = COLS / 2;

initial begin
    if (PE_PAIR != 0 && (COLS < 2 || COLS % 2 != 0)) begin
        $error("Error: PE_PAIR needs an even COLS (instance %m)");
        $finish;
    end
    if (AW < row_accw(row_opw(0))) begin
        $error("Error: AW must be at least the widest accumulator (instance %m)");
        $finish;
    end
end

/* verilator lint_off UNUSEDSIGNAL */
// (both unused when every row is paired)
wire int64 = prec == DTPU_PREC_INT64;
wire is_float = prec == DTPU_PREC_FP32 || prec == DTPU_PREC_BF16;
/* verilator lint_on UNUSEDSIGNAL */
wire [ROWS*COLS-1:0] pe_fp_valid;
wire [ROWS*COLS-1:0] ovf;
wire [ROWS*COLS-1:0] pe_valid;

genvar i, j;
generate
for (j = 0; j < COLS; j = j + 1) begin : col
    /* verilator lint_off UNUSEDSIGNAL */
    wire [ROWS*65-1:0] a_ops;
    wire [ROWS*65-1:0] w_ops;
    /* verilator lint_on UNUSEDSIGNAL */

    dtpu_filter_select #(
        .ROWS(ROWS),
        .PREC_EN(PREC_EN),
        .ZERO_ROWS(0)
    )
    fs_act_inst (
        .word(act_words[j*64 +: 64]),
        .prec(prec),
        .offset(in_offset),
        .operands(a_ops)
    );

    dtpu_filter_select #(
        .ROWS(ROWS),
        .PREC_EN(PREC_EN)
    )
    fs_wgt_inst (
        .word(wgt_words[j*64 +: 64]),
        .prec(prec),
        .offset(wgt_offset),
        .operands(w_ops)
    );

    for (i = 0; i < ROWS; i = i + 1) begin : row
        localparam OPW = row_opw(i);
        localparam ACCW = row_accw(OPW);
        wire signed [ACCW-1:0] pe_acc;

        if (row_pair(i) == 0) begin : single
            dtpu_smac #(
                .OPW(OPW),
                .ACC_W(ACCW),
                .FP_ENABLE(row_fp(i))
            )
            smac_inst (
                .clk(clk),
                .rst_n(rst_n),
                .ce(ce),
                .in_valid(col_valid[j]),
                .in_first(col_first[j]),
                .in_last(col_last[j]),
                .in_int64(int64),
                .in_a(col_zero[j] ? {OPW{1'b0}} : a_ops[i*65 +: OPW]),
                .in_b(w_ops[i*65 +: OPW]),
                .in_float(is_float),
                // (rows without a float path get constants: no gates for an unused port)
                .in_fa((row_fp(i) == 0 || col_zero[j]) ? 32'd0 : a_ops[i*65 +: 32]),
                .in_fb(row_fp(i) == 0 ? 32'd0 : w_ops[i*65 +: 32]),
                .acc(pe_acc),
                .acc_valid(pe_valid[j*ROWS+i]),
                .prod_ovf(ovf[j*ROWS+i]),
                .fp_sum(fp_sum[(j*ROWS+i)*32 +: 32]),
                .fp_valid(pe_fp_valid[j*ROWS+i])
            );
        end else if (j < HALF) begin : pair
            // the pair's PE in column j + HALF takes its accumulator from here
            wire signed [ACCW-1:0] acc_h;

            dtpu_smac_pair #(
                .ACC_W(ACCW)
            )
            pair_inst (
                .clk(clk),
                .rst_n(rst_n),
                .ce(ce),
                .in_valid_l(col_valid[j]),
                .in_first_l(col_first[j]),
                .in_last_l(col_last[j]),
                .in_al(col_zero[j] ? 9'd0 : col[j].a_ops[i*65 +: 9]),
                .in_bl(col[j].w_ops[i*65 +: 9]),
                .in_valid_h(col_valid[j+HALF]),
                .in_first_h(col_first[j+HALF]),
                .in_last_h(col_last[j+HALF]),
                .in_ah(col_zero[j+HALF] ? 9'd0 : col[j+HALF].a_ops[i*65 +: 9]),
                .in_bh(col[j+HALF].w_ops[i*65 +: 9]),
                .acc_l(pe_acc),
                .acc_valid_l(pe_valid[j*ROWS+i]),
                .acc_h(acc_h),
                .acc_valid_h(pe_valid[(j+HALF)*ROWS+i])
            );
            assign ovf[j*ROWS+i] = 1'b0;
            assign ovf[(j+HALF)*ROWS+i] = 1'b0;
            assign fp_sum[(j*ROWS+i)*32 +: 32] = 32'd0;
            assign fp_sum[((j+HALF)*ROWS+i)*32 +: 32] = 32'd0;
            assign pe_fp_valid[j*ROWS+i] = 1'b0;
            assign pe_fp_valid[(j+HALF)*ROWS+i] = 1'b0;
        end else begin : pair_h
            assign pe_acc = col[j-HALF].row[i].pair.acc_h;
        end

        assign acc[(j*ROWS+i)*AW +: AW] = {{(AW-ACCW){pe_acc[ACCW-1]}}, pe_acc};
    end

    assign acc_valid[j] = pe_valid[j*ROWS];
    assign fp_valid[j] = pe_fp_valid[j*ROWS];
end
endgenerate

assign prod_ovf = |ovf;

endmodule

`resetall
