/*

Copyright (c) 2026 DTPU authors. Apache-2.0.

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Simple dual-port block RAM: one write port, one registered read port with read enable
 * (the read register holds while rd_en is low, which is how the core's global stall freezes a
 * read in flight). Read-during-write to the same address returns the old word.
 */
module dtpu_bram #
(
    // word width
    parameter WIDTH = 64,
    // log2 of the depth in words
    parameter ADDR_W = 10
)
(
    input  wire              clk,

    input  wire              wr_en,
    input  wire [ADDR_W-1:0] wr_addr,
    input  wire [WIDTH-1:0]  wr_data,

    input  wire              rd_en,
    input  wire [ADDR_W-1:0] rd_addr,
    output wire [WIDTH-1:0]  rd_data
);

reg [WIDTH-1:0] mem [0:(1<<ADDR_W)-1];
reg [WIDTH-1:0] rd_data_reg;

always @(posedge clk) begin
    if (wr_en) begin
        mem[wr_addr] <= wr_data;
    end
    if (rd_en) begin
        rd_data_reg <= mem[rd_addr];
    end
end

assign rd_data = rd_data_reg;

endmodule

`resetall
