/*

Copyright (c) 2026 DTPU authors. Apache-2.0.

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Vector unit (contract 2.1): result words of 1..8 bytes each (a pixel's or a batch's last word
 * holds C mod 8) packed into the contiguous words of the 8-bit output tensor, as DDR holds it.
 * A word in (in_bytes of it, from byte 0) is appended to the bytes waiting (fewer than 8); a
 * full word goes out registered (out_valid a cycle later); after `in_end` (the tensor's last
 * word) the rest goes out too, a cycle after the full word when both are due. One word in a
 * cycle at most; nothing waits on the output (the caller keeps room for it). `clear` empties
 * it.
 */
module dtpu_vec_pack
(
    input  wire        clk,
    input  wire        rst,

    input  wire        clear,

    input  wire        in_valid,
    input  wire [63:0] in_data,
    input  wire [3:0]  in_bytes,        // 1 .. 8
    input  wire        in_end,

    output reg         out_valid,
    output reg  [63:0] out_data
);

reg  [63:0]  buf_q;                     // waiting bytes from byte 0
reg  [2:0]   cnt;                       // how many (0 .. 7)
reg          flush;                     // the rest goes out next cycle

wire [63:0]  in_mask = (in_bytes >= 4'd8) ? {64{1'b1}} : ~({64{1'b1}} << {in_bytes[2:0], 3'b000});
/* verilator lint_off UNUSEDSIGNAL */
wire [127:0] comb = {64'd0, buf_q} | ({64'd0, in_data & in_mask} << {cnt, 3'b000});
/* verilator lint_on UNUSEDSIGNAL */
wire [4:0]   tot  = {2'b00, cnt} + {1'b0, in_bytes};

initial begin
    out_valid = 1'b0;
    out_data = 64'd0;
end

always @(posedge clk) begin
    out_valid <= 1'b0;
    flush <= 1'b0;
    if (flush) begin
        out_valid <= 1'b1;
        out_data  <= buf_q;
        buf_q     <= 64'd0;
        cnt       <= 3'd0;
    end
    if (in_valid) begin
        if (tot >= 5'd8) begin
            out_valid <= 1'b1;
            out_data  <= comb[63:0];
            buf_q     <= comb[127:64];
            cnt       <= tot[2:0];
            flush     <= in_end && (tot != 5'd8);
        end else if (in_end) begin
            out_valid <= 1'b1;
            out_data  <= comb[63:0];
            buf_q     <= 64'd0;
            cnt       <= 3'd0;
        end else begin
            buf_q <= comb[63:0];
            cnt   <= tot[2:0];
        end
    end
    if (rst || clear) begin
        out_valid <= 1'b0;
        flush <= 1'b0;
        buf_q <= 64'd0;
        cnt   <= 3'd0;
    end
end

endmodule

`resetall
