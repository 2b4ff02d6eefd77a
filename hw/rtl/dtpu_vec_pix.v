/*

Copyright (c) 2026 DTPU authors. Apache-2.0.

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Vector unit (contract 2.1): a contiguous 8-bit NHWC tensor's words turned into pixel words,
 * the lanes of the reducing kinds (MEAN; golden model dtpu.hw.units.vector.cost: H*W*ceil(C/8)
 * operations a batch). Pixel p's channels are the stream's bytes p*C .. p*C + C - 1; they come
 * out as ceil(C/8) words, word j holding channels 8j .. 8j + 7 in lanes 0..7 (the last word's
 * lanes past C are don't-care), `out_last` on a pixel's last word.
 *
 * A byte funnel of three words: a stream word is taken while at most two words' bytes wait
 * (in_ready), a pixel word leaves once its bytes are there (out_valid) and drops them. The
 * words go out one a cycle from the cycle after the first stream word is taken, never waiting
 * for stream bytes while the stream comes one word a cycle: pixel word k needs bytes up to
 * 8(k+1), which came with stream word k. `clear` empties it for the next tensor (C may change
 * with it).
 */
module dtpu_vec_pix
(
    input  wire        clk,
    input  wire        rst,

    input  wire        clear,
    input  wire [15:0] c,               // channels (bytes) a pixel, >= 1

    /* the tensor's words */
    input  wire        in_valid,
    output wire        in_ready,
    input  wire [63:0] in_data,

    /* pixel words */
    output wire        out_valid,
    input  wire        out_ready,
    output wire [63:0] out_data,
    output wire        out_last
);

reg  [191:0] buf_q;                     // waiting bytes from byte 0
reg  [4:0]   cnt;                       // how many (0 .. 24)
// the current pixel's bytes still to send (C less those sent) and the next word's bytes
// (min(left, 8)) as registers rather than C - sent: that subtract and its compares before the
// funnel's shifts were its critical path (79.5 MHz on the ECP5 proxy; 91.9 with `left` alone
// a register). `left` follows C until the pixel's first word leaves (C is set before the
// tensor's first word can: a word leaves a cycle after its bytes came at the earliest).
reg  [15:0]  left;
reg  [3:0]   need;                      // min(left, 8)
reg          last_q;                    // left <= 8: the pixel's last word
reg          fresh;                     // no word of the current pixel sent yet

assign out_valid = ({1'b0, cnt} >= {2'b00, need}) && !clear;
assign out_data  = buf_q[63:0];
assign out_last  = last_q;
assign in_ready  = (cnt <= 5'd16) && !clear;

wire         take = out_valid && out_ready;
wire         put  = in_valid && in_ready;
// the next bytes both ways, taken or not, so that `take` only selects (the count and shifts do
// not wait for it): taken, `need` bytes dropped and the new word at byte cnt - need; else at cnt
wire [4:0]   kept_t = cnt - {1'b0, need};
wire [191:0] shifted_t = buf_q >> {need, 3'b000};
wire [191:0] placed_t = {128'd0, in_data} << {kept_t, 3'b000};
wire [191:0] mask_t = ~({192{1'b1}} << {kept_t, 3'b000});
wire [191:0] placed_n = {128'd0, in_data} << {cnt, 3'b000};
wire [191:0] mask_n = ~({192{1'b1}} << {cnt, 3'b000});
wire [191:0] next_t = put ? ((shifted_t & mask_t) | placed_t) : shifted_t;
wire [191:0] next_n = put ? ((buf_q & mask_n) | placed_n) : buf_q;

// the next `left`: C again after a pixel's last word (and while none of its words left yet)
wire [15:0]  left_nx = (rst || clear || (take ? out_last : fresh)) ? c
                     : take ? left - 16'd8 : left;

always @(posedge clk) begin
    buf_q  <= take ? next_t : next_n;
    cnt    <= (take ? kept_t : cnt) + (put ? 5'd8 : 5'd0);
    left   <= left_nx;
    need   <= (left_nx[15:3] == 13'd0) ? left_nx[3:0] : 4'd8;
    last_q <= (left_nx[15:4] == 12'd0) && (!left_nx[3] || left_nx[2:0] == 3'd0);
    if (take) begin
        fresh <= out_last;
    end
    if (rst || clear) begin
        cnt   <= 5'd0;
        fresh <= 1'b1;
    end
end

endmodule

`resetall
