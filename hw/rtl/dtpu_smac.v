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
    parameter ACC_W = 36
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

    /* Accumulator */
    output wire signed [ACC_W-1:0] acc,
    output wire                   acc_valid,
    output wire                   prod_ovf
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
        a_reg <= in_valid ? in_a : {OPW{1'b0}};
        b_reg <= in_valid ? in_b : {OPW{1'b0}};

        v2_reg <= v1_reg;
        f2_reg <= f1_reg;
        l2_reg <= l1_reg;
        p_reg <= prod;
        ovf2_reg <= v1_reg & i1_reg & prod_big;

        if (v2_reg) begin
            acc_reg <= f2_reg ? p_ext : acc_reg + p_ext;
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

assign acc = acc_reg;
assign acc_valid = acc_valid_reg;
assign prod_ovf = ovf3_reg;

endmodule

`resetall
