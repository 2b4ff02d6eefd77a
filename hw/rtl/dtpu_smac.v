/*

Copyright (c) 2026 DTPU authors. Apache-2.0.

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * SMAC: one processing element of the MXU (sub-unit multiply and accumulate).
 *
 * Operands come from Filter&Select already offset-corrected (x + IN_OFFSET, w + WGT_OFFSET) as
 * signed OPW-bit integers. Pipeline (all stages advance on ce, the core's global stall):
 *   stage 1: operand registers
 *   stage 2: product register (exact, 2*OPW bits)
 *   stage 3: accumulator: acc = first ? p : acc + p; acc_valid pulses when the step's last
 *            product has been added (LAT_MXU = 4 cycles after its issue cycle, counting the
 *            memory read before stage 1).
 * Integer accumulation is exact in ACC_W bits (the parent sizes ACC_W for its precisions).
 * prod_ovf flags an INT64 product whose magnitude exceeds INT64_MAX (ERR.OVERFLOW).
 */
module dtpu_smac #
(
    // operand width: 9 (8-bit lanes), 17 (16-bit), 33 (32-bit) or 65 (64-bit)
    parameter OPW = 9,
    // accumulator width
    parameter ACC_W = 36,
    // fp32/bf16 path (FP_PARTIALS interleaved partials and their pairwise tree)
    parameter FP_ENABLE = 0
)
(
    input  wire                   clk,
    input  wire                   rst_n,
    input  wire                   ce,

    /* Operands */
    input  wire                   in_valid,
    input  wire                   in_first,
    input  wire                   in_last,
    input  wire                   in_int64,
    input  wire signed [OPW-1:0]  in_a,
    input  wire signed [OPW-1:0]  in_b,
    /* verilator lint_off UNUSEDSIGNAL */
    input  wire                   in_float,
    input  wire [31:0]            in_fa,
    input  wire [31:0]            in_fb,
    /* verilator lint_on UNUSEDSIGNAL */

    /* Accumulator */
    output wire signed [ACC_W-1:0] acc,
    output wire                   acc_valid,
    output wire                   prod_ovf,

    /* Float result: ((p0+p1)+(p2+p3)) of the step's partials, two cycles after acc_valid */
    output wire [31:0]            fp_sum,
    output wire                   fp_valid
);

localparam PW = 2*OPW;

reg               v1_reg, f1_reg, l1_reg, i1_reg;
reg signed [OPW-1:0] a_reg, b_reg;
reg               v2_reg, f2_reg, l2_reg, ovf2_reg;
/* verilator lint_off UNUSEDSIGNAL */
reg signed [PW-1:0] p_reg;
/* verilator lint_on UNUSEDSIGNAL */
reg signed [ACC_W-1:0] acc_reg;
reg               acc_valid_reg, ovf3_reg;

wire signed [PW-1:0] prod = a_reg * b_reg;

// |prod| > 2^63 - 1: the bits above 63 are not a sign extension of bit 63, or prod = -2^63
wire prod_big;
generate
if (PW > 64) begin : wide
    assign prod_big = (prod[PW-1:63] != {(PW-63){1'b0}} && prod[PW-1:63] != {(PW-63){1'b1}})
                      || (prod[PW-1:63] == {(PW-63){1'b1}} && prod[62:0] == 63'd0);
end else begin : narrow
    assign prod_big = 1'b0;
end
endgenerate

// the product sign-extended or truncated to the accumulator width
wire signed [ACC_W-1:0] p_ext;
generate
if (ACC_W >= PW) begin : ext
    assign p_ext = {{(ACC_W-PW+1){p_reg[PW-1]}}, p_reg[PW-2:0]};
end else begin : trunc
    assign p_ext = p_reg[ACC_W-1:0];
end
endgenerate

always @(posedge clk) begin
    if (ce) begin
        v1_reg <= in_valid;
        f1_reg <= in_first;
        l1_reg <= in_last & in_valid;
        i1_reg <= in_int64;
        // (no zeroing of idle operands: the product only counts under v2_reg)
        a_reg <= in_a;
        b_reg <= in_b;

        v2_reg <= v1_reg;
        f2_reg <= f1_reg;
        l2_reg <= l1_reg;
        p_reg <= prod;
        ovf2_reg <= v1_reg & i1_reg & prod_big;

        if (v2_reg) begin
            // (the step's first product adds to 0: the gate folds into the adder's LUTs)
            acc_reg <= (f2_reg ? {ACC_W{1'b0}} : acc_reg) + p_ext;
        end
        acc_valid_reg <= l2_reg;
        ovf3_reg <= ovf2_reg;
    end

    if (!rst_n) begin
        v1_reg <= 1'b0;
        l1_reg <= 1'b0;
        v2_reg <= 1'b0;
        l2_reg <= 1'b0;
        ovf2_reg <= 1'b0;
        acc_valid_reg <= 1'b0;
        ovf3_reg <= 1'b0;
    end
end

generate
if (FP_ENABLE != 0) begin : fp
    reg  [31:0] fa_reg, fb_reg;
    reg  [31:0] fp_reg;
    reg  [1:0]  cnt_reg, pidx1_reg, pidx2_reg;
    reg  [31:0] part_reg [0:3];
    reg  [3:0]  touched_reg;
    reg         last3_reg;
    reg  [31:0] s01_reg, s23_reg, sum_reg;
    reg         t1_reg, t2_reg;
    wire [31:0] prod_f;
    wire [31:0] base = touched_reg[pidx2_reg] && !f2_reg ? part_reg[pidx2_reg] : 32'd0;
    wire [31:0] added;
    wire [31:0] p0 = touched_reg[0] ? part_reg[0] : 32'd0;
    wire [31:0] p1 = touched_reg[1] ? part_reg[1] : 32'd0;
    wire [31:0] p2 = touched_reg[2] ? part_reg[2] : 32'd0;
    wire [31:0] p3 = touched_reg[3] ? part_reg[3] : 32'd0;
    wire [31:0] s01, s23, s0123;

    dtpu_fp_mul mul_inst (.a(fa_reg), .b(fb_reg), .y(prod_f));
    dtpu_fp_add acc_inst (.a(base), .b(fp_reg), .y(added));
    dtpu_fp_add t01_inst (.a(p0), .b(p1), .y(s01));
    dtpu_fp_add t23_inst (.a(p2), .b(p3), .y(s23));
    dtpu_fp_add t_inst (.a(s01_reg), .b(s23_reg), .y(s0123));

    always @(posedge clk) begin
        if (ce) begin
            fa_reg <= in_valid ? in_fa : 32'd0;
            fb_reg <= in_valid ? in_fb : 32'd0;
            // issue w of a step adds into partial w mod 4
            if (in_valid) begin
                cnt_reg <= (in_first ? 2'd0 : cnt_reg) + 2'd1;
            end
            pidx1_reg <= in_first ? 2'd0 : cnt_reg;

            fp_reg <= prod_f;
            pidx2_reg <= pidx1_reg;

            if (v2_reg && in_float) begin
                part_reg[pidx2_reg] <= added;
                touched_reg <= (f2_reg ? 4'd0 : touched_reg) | (4'd1 << pidx2_reg);
            end
            last3_reg <= l2_reg && in_float;

            s01_reg <= s01;
            s23_reg <= s23;
            t1_reg <= last3_reg;
            sum_reg <= s0123;
            t2_reg <= t1_reg;
        end
        if (!rst_n) begin
            last3_reg <= 1'b0;
            t1_reg <= 1'b0;
            t2_reg <= 1'b0;
            touched_reg <= 4'd0;
        end
    end

    assign fp_sum = sum_reg;
    assign fp_valid = t2_reg;
end else begin : no_fp
    assign fp_sum = 32'd0;
    assign fp_valid = 1'b0;
end
endgenerate

assign acc = acc_reg;
assign acc_valid = acc_valid_reg;
assign prod_ovf = ovf3_reg;

endmodule

`resetall
