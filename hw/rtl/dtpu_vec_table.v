/*

Copyright (c) 2026 DTPU authors. Apache-2.0.

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Vector unit (contract 2.1): the TABLE kind's lookup, y[l] = T[a[l]] for each of LANES 8-bit
 * lanes (golden model: dtpu.hw.units.vector.compute, KIND TABLE). The 256-byte table T comes
 * first, as 32 words on w_valid (word k holds T[8k .. 8k+7], written in order from word 0 after
 * `clear`); each lane keeps its own copy as 32 words of 64 bits (distributed RAM: one write port
 * shared by all copies, one read port each), reads word a[l] >> 3 and picks byte a[l] & 7.
 * The index is the raw byte: int8 and uint8 tables alike are indexed by the element's bits.
 *
 * One word a cycle, out_valid two cycles after in_valid like dtpu_vec_ew (the read and byte
 * pick, then a register), so that both share the unit's output path and its room count.
 */
module dtpu_vec_table #
(
    // 8-bit lanes of one word
    parameter LANES = 8
)
(
    input  wire               clk,
    input  wire               rst,

    /* the table's words */
    input  wire               clear,          // the next w_valid is word 0
    input  wire               w_valid,
    input  wire [63:0]        w_data,

    /* operands and results */
    input  wire               in_valid,
    input  wire [8*LANES-1:0] a,
    output reg                out_valid,
    output reg  [8*LANES-1:0] y
);

reg [4:0] wa;                          // the next table word
wire [8*LANES-1:0] y1;                        // the lanes' picks, registered in each lane
reg                v1;

initial begin
    wa = 5'd0;
    v1 = 1'b0;
    out_valid = 1'b0;
    y = {8*LANES{1'b0}};
end

genvar l;
generate
    for (l = 0; l < LANES; l = l + 1) begin : lane
        reg  [63:0] mem [0:31];
        wire [7:0]  idx = a[8*l +: 8];
        wire [63:0] word = mem[idx[7:3]];
        reg  [7:0]  q;

        always @(posedge clk) begin
            if (w_valid) begin
                mem[wa] <= w_data;
            end
            q <= word[8*idx[2:0] +: 8];
        end
        assign y1[8*l +: 8] = q;
    end
endgenerate

always @(posedge clk) begin
    if (clear) begin
        wa <= 5'd0;
    end else if (w_valid) begin
        wa <= wa + 5'd1;
    end
    v1 <= in_valid;
    out_valid <= v1;
    y <= y1;
    if (rst) begin
        wa <= 5'd0;
        v1 <= 1'b0;
        out_valid <= 1'b0;
    end
end

endmodule

`resetall
