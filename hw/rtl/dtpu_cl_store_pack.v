/*

Copyright (c) 2026 DTPU authors. Apache-2.0.

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Byte realigner of the contract 2.0 store unit (dtpu_cl_store).
 *
 * In: chunks (byte address, 64-bit data, n = 0..8): bytes 0..n-1 of the data go to
 * addr..addr+n-1 (an item's kept lanes, or one ACC sum). Out: aligned 64-bit words (word
 * address = byte address >> 3, data, byte strobes), each DDR word once per run of chunks that
 * fill it, with the strobes of exactly the bytes the chunks wrote.
 *
 * A chunk spans at most two words. One word is kept open (o_*: address, data, strobes); a chunk
 * whose first byte is in the open word is merged into it; its spill into the next word becomes
 * the new open word and the merged one goes out. A full open word goes out at once. A chunk
 * elsewhere sends the open word out and opens its own; if it would also send a word (it spills
 * or fills its first one) it waits a cycle. So a stream of chunks at consecutive addresses (an
 * item, consecutive items of a pixel) gives one word per cycle whatever its byte alignment, small
 * scattered items (GW*ESIZE < 8) one per cycle, unaligned scattered ones a cycle more per item;
 * two items that share a DDR word become one word with both items' strobes.
 *
 * s_last (the RUN's last chunk) closes: the open word goes out, then a word with m_close = 1 and
 * no strobes (dtpu_cl_store_wq ends its write request there). Chunks with n = 0 only carry
 * s_last. Words leave in chunk order, so writes of one byte keep their order.
 *
 * Each word with strobes carries its distance from the word after the previous word with
 * strobes (m_waddr - (prev + 1)): m_near when it is at most MAX_GAP, m_gap its value then. It is
 * the queue's gap to its open run (whose end is prev + 1), formed here when the word is loaded,
 * so the queue's ready (this unit's `can`) tests registers, not a subtract of the address.
 */
module dtpu_cl_store_pack #
(
    parameter ADDR_W = 32,
    // the queue's longest gap (dtpu_cl_store_wq MAX_GAP): m_near, m_gap
    parameter MAX_GAP = 4
)
(
    input  wire                 clk,
    input  wire                 rst_n,

    input  wire                 s_valid,
    output wire                 s_ready,
    input  wire [ADDR_W-1:0]    s_addr,
    input  wire [63:0]          s_data,
    input  wire [3:0]           s_n,
    input  wire                 s_last,

    output wire                 m_valid,
    input  wire                 m_ready,
    output wire [ADDR_W-4:0]    m_waddr,
    output wire [63:0]          m_data,
    output wire [7:0]           m_strb,
    output wire                 m_close,
    output wire                 m_near,
    output wire [$clog2(MAX_GAP+2)-1:0] m_gap,

    output wire                 empty
);

localparam WA_W = ADDR_W - 3;
localparam GAP_W = $clog2(MAX_GAP + 2);

/* the open word */
reg  [WA_W-1:0]   b_w;
reg  [63:0]       b_d;
reg  [7:0]        b_m;
reg               fl;               // closing: send the open word, then the close marker

/* the output slot */
reg               o_v;
reg  [WA_W-1:0]   o_w;
reg  [63:0]       o_d;
reg  [7:0]        o_m;
reg               o_c;
reg               o_near;
reg  [GAP_W-1:0]  o_gap;
// the word after the last word sent with strobes
reg  [WA_W-1:0]   p_w1;

wire              can = !o_v || m_ready;

// n low bits set, as a table: (1 << n) - 1 put a carry chain on the path from the chunk's size
// through the strobes and the ready into the open word (the store unit's critical path on the
// ECP5 proxy, docs/synthesis.md); a table leaves it to the LUTs
function [15:0] ones(input [3:0] n);
    case (n)
        4'd0: ones = 16'h0000;
        4'd1: ones = 16'h0001;
        4'd2: ones = 16'h0003;
        4'd3: ones = 16'h0007;
        4'd4: ones = 16'h000F;
        4'd5: ones = 16'h001F;
        4'd6: ones = 16'h003F;
        4'd7: ones = 16'h007F;
        4'd8: ones = 16'h00FF;
        4'd9: ones = 16'h01FF;
        4'd10: ones = 16'h03FF;
        4'd11: ones = 16'h07FF;
        4'd12: ones = 16'h0FFF;
        4'd13: ones = 16'h1FFF;
        4'd14: ones = 16'h3FFF;
        4'd15: ones = 16'h7FFF;
        default: ones = 16'h0000;
    endcase
endfunction

// the chunk sends a word of its own: it spills into the next word (n + off > 8) or fills its
// first from byte 0 (off = 0, n >= 8), as a table of n (0..15) and off
function fills(input [3:0] n, input [2:0] off);
    case (n)
        4'd0, 4'd1: fills = 1'b0;
        4'd2: fills = off == 3'd7;
        4'd3: fills = off >= 3'd6;
        4'd4: fills = off >= 3'd5;
        4'd5: fills = off >= 3'd4;
        4'd6: fills = off >= 3'd3;
        4'd7: fills = off >= 3'd2;
        default: fills = 1'b1;
    endcase
endfunction

wire [2:0]        off = s_addr[2:0];
wire [WA_W-1:0]   w0 = s_addr[ADDR_W-1:3];
/* verilator lint_off WIDTHEXPAND */
wire [127:0]      sh_d = {64'd0, s_data} << {off, 3'b000};
wire [15:0]       sh_m = ones(s_n) << off;
/* verilator lint_on WIDTHEXPAND */
wire [7:0]        lo_m = sh_m[7:0];
wire [7:0]        hi_m = sh_m[15:8];
wire [63:0]       lo_bits = {{8{lo_m[7]}}, {8{lo_m[6]}}, {8{lo_m[5]}}, {8{lo_m[4]}},
                             {8{lo_m[3]}}, {8{lo_m[2]}}, {8{lo_m[1]}}, {8{lo_m[0]}}};
wire [63:0]       mg_d = (b_d & ~lo_bits) | (sh_d[63:0] & lo_bits);
wire [7:0]        mg_m = b_m | lo_m;

wire              open_w = (b_m != 8'd0);
wire              nonzero = (s_n != 4'd0);
wire              other = open_w && (b_w != w0);
// the chunk sends a word out itself (it spills into the next word or fills its first)
wire              sends = (hi_m != 8'd0) || (mg_m == 8'hFF);
// a chunk elsewhere that would send a word of its own too waits a cycle (one word out a cycle)
// (hi_m != 0 || lo_m == 8'hFF) from n and off directly: derived from the
// strobes it put the mask's shift and its two reductions, five LUT levels, on the path from the
// chunk's address through the ready into the parent's word stage (dtpu_vec_copy's critical path
// on the ECP5 proxy, docs/synthesis.md); a table of n and off is one or two
wire              sends_own = fills(s_n, off);
// the distance of a word about to be sent (the open word or the chunk's first word) from p_w1
wire [WA_W-1:0]   gap_b = b_w - p_w1;
wire [WA_W-1:0]   gap_0 = w0 - p_w1;
/* verilator lint_off WIDTHEXPAND */
wire              near_b = gap_b <= MAX_GAP;
wire              near_0 = gap_0 <= MAX_GAP;
/* verilator lint_on WIDTHEXPAND */

// every register below changes only when the slot is free (`can`): their next values are
// decided from the input and the open word alone (`take_c`: the take given a free slot), and
// `can` (the queue's ready, which tests the slot's word address: the store unit's critical
// path on the ECP5 proxy, docs/synthesis.md) is their enable only
wire              ready_c = !fl && !(nonzero && other && sends_own);
assign s_ready = can && ready_c;
wire              take_c = s_valid && ready_c;

always @(posedge clk) begin
    if (can) begin
        o_v <= 1'b0;
        if (fl) begin
            o_v <= 1'b1;
            o_w <= b_w;
            o_d <= b_d;
            o_m <= b_m;
            o_c <= !open_w;
            o_near <= near_b;
            o_gap <= gap_b[GAP_W-1:0];
            if (open_w) begin
                p_w1 <= b_w + 1'b1;
            end
            b_m <= 8'd0;
            if (!open_w) begin
                fl <= 1'b0;
            end
        end else if (s_valid && nonzero && other) begin
            // the open word goes out; a chunk that stays within its first word opens it
            o_v <= 1'b1;
            o_w <= b_w;
            o_d <= b_d;
            o_m <= b_m;
            o_c <= 1'b0;
            o_near <= near_b;
            o_gap <= gap_b[GAP_W-1:0];
            p_w1 <= b_w + 1'b1;
            b_m <= 8'd0;
            if (take_c) begin
                b_w <= w0;
                b_d <= sh_d[63:0];
                b_m <= lo_m;
                if (s_last) begin
                    fl <= 1'b1;
                end
            end
        end else if (take_c) begin
            if (nonzero) begin
                if (sends) begin
                    o_v <= 1'b1;
                    o_w <= w0;
                    o_d <= mg_d;
                    o_m <= mg_m;
                    o_c <= 1'b0;
                    o_near <= near_0;
                    o_gap <= gap_0[GAP_W-1:0];
                    p_w1 <= w0 + 1'b1;
                    b_w <= w0 + 1'b1;
                    b_d <= sh_d[127:64];
                    b_m <= hi_m;
                end else begin
                    b_w <= w0;
                    b_d <= mg_d;
                    b_m <= mg_m;
                end
            end
            if (s_last) begin
                fl <= 1'b1;
            end
        end
    end
    if (!rst_n) begin
        o_v <= 1'b0;
        b_m <= 8'd0;
        fl <= 1'b0;
    end
end

assign m_valid = o_v;
assign m_waddr = o_w;
assign m_data = o_d;
assign m_strb = o_m;
assign m_close = o_c;
assign m_near = o_near;
assign m_gap = o_gap;
assign empty = !o_v && !open_w && !fl;

endmodule

`resetall
