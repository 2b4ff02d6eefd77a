/*

Copyright (c) 2026 DTPU authors. Apache-2.0.

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * L/S array: BANKS block RAMs of 64-bit words, bank = address mod BANKS (the thesis' L/S units
 * in front of the MXU columns). One word is written per cycle at a linear address; every bank
 * is read at its own row address in the same cycle (one word per column), registered.
 * Used for the weight memory (L/S weight units) and the activation buffer (L/S activation
 * units).
 */
module dtpu_ls_banks #
(
    // log2 of the number of banks (MXU columns)
    parameter LOG_BANKS = 3,
    // log2 of the total size in words
    parameter ADDR_W = 12,
    // word width
    parameter WIDTH = 64,
    // banks (derived)
    parameter BANKS = 1 << LOG_BANKS,
    // row address width per bank (derived)
    parameter RW = ADDR_W - LOG_BANKS
)
(
    input  wire                          clk,

    /* Write: one word per cycle at a linear address */
    input  wire                          wr_en,
    input  wire [ADDR_W-1:0]             wr_addr,
    input  wire [WIDTH-1:0]              wr_data,

    /* Read: one row address per bank, data one cycle later */
    input  wire                          rd_en,
    input  wire [BANKS*RW-1:0]           rd_row,
    output wire [BANKS*WIDTH-1:0]        rd_data
);

localparam LB = LOG_BANKS;

initial begin
    if (BANKS != (1 << LB) || RW != ADDR_W - LB || ADDR_W <= LB) begin
        $error("Error: BANKS and RW are derived parameters, keep their defaults (instance %m)");
        $finish;
    end
end

genvar b;
generate
for (b = 0; b < BANKS; b = b + 1) begin : bank
    dtpu_bram #(
        .WIDTH(WIDTH),
        .ADDR_W(RW)
    )
    ram_inst (
        .clk(clk),
        .wr_en(wr_en && wr_addr[LB-1:0] == b),
        .wr_addr(wr_addr[ADDR_W-1:LB]),
        .wr_data(wr_data),
        .rd_en(rd_en),
        .rd_addr(rd_row[b*RW +: RW]),
        .rd_data(rd_data[b*WIDTH +: WIDTH])
    );
end
endgenerate

endmodule

`resetall
