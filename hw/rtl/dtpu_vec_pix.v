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
reg  [15:0]  pos;                       // the current pixel's bytes already sent

wire [15:0]  left = c - pos;            // the current pixel's bytes still to send
wire [3:0]   need = (left < 16'd8) ? left[3:0] : 4'd8;
assign out_valid = ({1'b0, cnt} >= {2'b00, need}) && !clear;
assign out_data  = buf_q[63:0];
assign out_last  = (left <= 16'd8);
assign in_ready  = (cnt <= 5'd16) && !clear;

wire         take = out_valid && out_ready;
wire         put  = in_valid && in_ready;
wire [3:0]   drop = take ? need : 4'd0;
wire [4:0]   kept = cnt - {1'b0, drop};
wire [191:0] shifted = buf_q >> {drop, 3'b000};
// the new word at byte `kept` (<= 16), bytes above it cleared
wire [191:0] placed = {128'd0, in_data} << {kept, 3'b000};
wire [191:0] keep_mask = ~({192{1'b1}} << {kept, 3'b000});

always @(posedge clk) begin
    buf_q <= put ? ((shifted & keep_mask) | placed) : shifted;
    cnt   <= kept + (put ? 5'd8 : 5'd0);
    if (take) begin
        pos <= out_last ? 16'd0 : pos + 16'd8;
    end
    if (rst || clear) begin
        cnt <= 5'd0;
        pos <= 16'd0;
    end
end

endmodule

`resetall
