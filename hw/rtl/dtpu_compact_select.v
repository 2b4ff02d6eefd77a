/*

Copyright (c) 2026 DTPU authors. Apache-2.0.

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Compact&Select: pack up to 8 result lane values into one 64-bit word, lane r in bits
 * r*LB .. r*LB+LB-1 (little-endian, as dtpu.pack), LB = 64 / lanes. Values are truncated to
 * the lane width (they are already saturated to it); unused lanes are 0.
 */
module dtpu_compact_select
(
    input  wire [8*64-1:0]  values,
    // lanes per word: 8, 4, 2 or 1 (encoded as log2: 3, 2, 1, 0)
    input  wire [1:0]       log_lanes,
    output reg  [63:0]      word
);

integer r;

always @* begin
    word = 64'd0;
    // assigned on every path: the loop variable is otherwise held in the default branch, which
    // Yosys' synth_ecp5 rejects as a latch
    r = 0;
    case (log_lanes)
        2'd3: for (r = 0; r < 8; r = r + 1) word[r*8 +: 8] = values[r*64 +: 8];
        2'd2: for (r = 0; r < 4; r = r + 1) word[r*16 +: 16] = values[r*64 +: 16];
        2'd1: for (r = 0; r < 2; r = r + 1) word[r*32 +: 32] = values[r*64 +: 32];
        default: word = values[63:0];
    endcase
end

endmodule

`resetall
