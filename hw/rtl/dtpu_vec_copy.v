/*

Copyright (c) 2026 DTPU authors. Apache-2.0.

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Vector unit (contract 2.1): the write side of COPY (KIND 7; golden model
 * dtpu.hw.units.vector.copy_chunks and _copy_step). The pixel words of a contiguous 8-bit NHWC
 * tensor (dtpu_vec_pix: ceil(C/8) a pixel, word j holding channels 8j .. 8j + 7) are written
 * pixel p at byte DST + p*OW, any byte alignment: a channel slice of a wider tensor
 * (CONCATENATION), a pixel or a row repeated (RESIZE_NEAREST_NEIGHBOR).
 *
 * Why it is built so: a slice's pixels are short and scattered, so the writes are what costs,
 * and the store unit already writes such items as well as the write master allows. Each pixel
 * word becomes one of its chunks (byte address DST + p*OW + 8j, its min(8, C - 8j) bytes) and
 * goes the store unit's way: a word stage (a register: the chunk's address and byte count at
 * registers), the byte realigner dtpu_cl_store_pack (strobes, chunks sharing a word merged)
 * and the write queue dtpu_cl_store_wq (runs of consecutive words up to MAX_RUN, gaps of up to
 * MAX_GAP words filled with strobe-less words, each run one request). So the golden model's
 * cycles are the store unit's simulation (units.store.store_sim) of these chunks, offered one a
 * cycle as MEAN's operations are (the funnel keeps up with the stream); a chunk the stage
 * cannot take holds the funnel, and the stream behind it.
 *
 * `clear` (the VEC's first request) loads DST, the pixel count and the counters; `op` is one
 * cycle per pixel word taken (the unit's operation), `last_op` with the tensor's last one (the
 * pack then closes the last run); `idle` once every word was handed to the write master.
 */
module dtpu_vec_copy #
(
    parameter ADDR_W = 32,
    // longest write request (the AXI3 burst: 16; contract MEM_BURST_BEATS)
    parameter MAX_RUN = 16,
    // log2 of the write queue's words (contract STORE_WQ_WORDS)
    parameter LOG_WQ = 5,
    // longest gap filled with strobe-less words (contract SEQ_STORE_GAP)
    parameter MAX_GAP = 4
)
(
    input  wire                 clk,
    input  wire                 rst,

    input  wire                 clear,
    input  wire [ADDR_W-1:0]    dst,            // pixel 0's first byte
    input  wire [15:0]          ow,             // bytes from one pixel to the next (>= C)
    input  wire [3:0]           c_low,          // bytes a pixel (C >= 1), mod 16
    input  wire [31:0]          pixels,         // N*H*W (>= 1)

    /* pixel words (dtpu_vec_pix) */
    input  wire                 s_valid,
    output wire                 s_ready,
    input  wire [63:0]          s_data,
    input  wire                 s_last,         // the pixel's last word

    output wire                 op,
    output wire                 last_op,

    /* write requests and words (dtpu_axi_wr) */
    output wire                 wr_req_valid,
    input  wire                 wr_req_ready,
    output wire [ADDR_W-1:0]    wr_req_addr,
    output wire [31:0]          wr_req_words,
    output wire                 w_valid,
    input  wire                 w_ready,
    output wire [63:0]          w_data,
    output wire [7:0]           w_strb,

    output wire                 idle
);

/* the next pixel word's place */
reg  [ADDR_W-1:0] px_addr;          // the current pixel's first byte
reg  [15:0]       wo;               // bytes of it already taken (8 a word)
reg  [31:0]       px_left;          // pixels still to take, the current one included

/* the word stage (dtpu_cl_store's): one chunk, its address and byte count at registers */
reg               st_v;
reg  [ADDR_W-1:0] st_addr;
reg  [63:0]       st_data;
reg  [3:0]        st_n;
reg               st_last;

wire              pk_ready;
wire              pk_hs = st_v && pk_ready;
wire              st_free = !st_v || pk_hs;
assign s_ready = st_free && !clear && px_left != 32'd0;
wire              take = s_valid && s_ready;
wire              last_word = s_last && px_left == 32'd1;
// the pixel's bytes from this word on, 1..8 on its last word: (C - wo) mod 16 from the low bits
wire [3:0]        rest = c_low - wo[3:0];

assign op      = take;
assign last_op = take && last_word;

always @(posedge clk) begin
    if (pk_hs) begin
        st_v <= 1'b0;
    end
    if (take) begin
        st_v    <= 1'b1;
        st_addr <= px_addr + {{(ADDR_W-16){1'b0}}, wo};
        st_data <= s_data;
        st_n    <= s_last ? rest : 4'd8;
        st_last <= last_word;
        if (s_last) begin
            px_addr <= px_addr + {{(ADDR_W-16){1'b0}}, ow};
            wo      <= 16'd0;
            px_left <= px_left - 32'd1;
        end else begin
            wo <= wo + 16'd8;
        end
    end
    if (clear) begin
        px_addr <= dst;
        wo      <= 16'd0;
        px_left <= pixels;
        st_v    <= 1'b0;
    end
    if (rst) begin
        st_v    <= 1'b0;
        px_left <= 32'd0;
    end
end

/* ---- realign, queue (the store unit's) */
wire              pm_valid, pm_ready, pm_close, pk_empty, wq_idle;
wire [ADDR_W-4:0] pm_waddr;
wire [63:0]       pm_data;
wire [7:0]        pm_strb;
wire              pm_near;
wire [$clog2(MAX_GAP+2)-1:0] pm_gap;

dtpu_cl_store_pack #(.ADDR_W(ADDR_W), .MAX_GAP(MAX_GAP)) pack_inst (
    .clk(clk), .rst_n(!rst),
    .s_valid(st_v), .s_ready(pk_ready), .s_addr(st_addr), .s_data(st_data), .s_n(st_n),
    .s_last(st_last),
    .m_valid(pm_valid), .m_ready(pm_ready), .m_waddr(pm_waddr), .m_data(pm_data),
    .m_strb(pm_strb), .m_close(pm_close), .m_near(pm_near), .m_gap(pm_gap), .empty(pk_empty)
);

dtpu_cl_store_wq #(.ADDR_W(ADDR_W), .CNT_W(32), .MAX_RUN(MAX_RUN), .LOG_DEPTH(LOG_WQ),
    .MAX_GAP(MAX_GAP)) wq_inst (
    .clk(clk), .rst_n(!rst), .err(1'b0),
    .s_valid(pm_valid), .s_ready(pm_ready), .s_waddr(pm_waddr), .s_data(pm_data),
    .s_strb(pm_strb), .s_close(pm_close), .s_near(pm_near), .s_gap(pm_gap),
    .req_valid(wr_req_valid), .req_ready(wr_req_ready), .req_addr(wr_req_addr),
    .req_words(wr_req_words),
    .m_valid(w_valid), .m_ready(w_ready), .m_data(w_data), .m_strb(w_strb),
    .idle(wq_idle)
);

assign idle = !st_v && pk_empty && wq_idle;

endmodule

`resetall
