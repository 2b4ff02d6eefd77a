/*

Copyright (c) 2026 DTPU authors. Apache-2.0.

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Parameter memory: per output channel entry two 64-bit words (bias; multiplier | shift << 32 |
 * zero point << 48), 2^ADDR_W entries in 8 banks (bank = entry mod 8), so the up to 8 lanes of
 * one result word read 8 consecutive entries in one cycle. LOAD_PARAM writes one word per cycle.
 * Reads: lanes r = 0..7 get entry base + r, one cycle later (the reserved bits 47:40 of the
 * second word as 0: no lane uses them).
 *
 * Alignment (LOG_ALIGN, LOG_MIN_LANES): lane 0 gets entry base for any base (dtpu_cl_post's
 * POST reads one entry at a time, any entry); lane r >= 1 is only guaranteed entry base + r
 * when base is a multiple of S(r) = min(max(P(r), 2^LOG_MIN_LANES), 2^LOG_ALIGN), P(r) the
 * smallest power of two above r (2, 4, 4, 8, 8, 8, 8). The post unit (dtpu_post) reads words
 * of `lanes` values whose first entry ch is a multiple of min(lanes, COLS) (PARAM_BASE is a
 * multiple of COLS, CONFIG's PARAM_RANGE check; a GEMM step adds tile * COLS, a depthwise item
 * g * L with L >= lanes, each word `lanes`), uses lane r only when r < lanes, i.e. P(r) <=
 * lanes, and uses parameters only in words of 2^LOG_MIN_LANES lanes or more (REQUANT: 8-bit 8,
 * int16 4; FLOAT 2; RAW reads none: CONFIG refuses the other modes): so with LOG_ALIGN =
 * min(3, log2 COLS) and LOG_MIN_LANES from the built precisions (dtpu_core) every lane it uses
 * gets its entry, and the lanes it does not use (their inputs masked, their outputs 0, no
 * flags) may get another. dtpu_post checks both in simulation. That turns the 8:1 rotation of
 * 120 bits a lane into 8:1 for lane 0 and 4:1 for lane 1, 2:1 for lanes 2, 3 (LOG_MIN_LANES 0)
 * or, in an 8-bit-only build (LOG_MIN_LANES 3), wires for lanes 1..7: `pe_area.py
 * dtpu_ls_param ADDR_W=12`, 2 419 LUT; LOG_ALIGN=3: 618 LUT, and 378 with LOG_MIN_LANES=3.
 * LOG_ALIGN = 0 keeps the full rotation (any base, every lane).
 */
module dtpu_ls_param #
(
    // log2 of the number of entries
    parameter ADDR_W = 12,
    // log2 of the alignment the reads' bases keep (0..3; above)
    parameter LOG_ALIGN = 0,
    // log2 of the fewest lanes a read that lanes 1..7 matter to has (0..3; above)
    parameter LOG_MIN_LANES = 0
)
(
    input  wire              clk,

    /* Write: word `half` of entry wr_entry */
    input  wire              wr_en,
    input  wire [ADDR_W-1:0] wr_entry,
    input  wire              wr_half,
    input  wire [63:0]       wr_data,

    /* Read: 8 consecutive entries from rd_base */
    input  wire              rd_en,
    input  wire [ADDR_W-1:0] rd_base,
    output wire [8*64-1:0]   rd_bias,
    output wire [8*64-1:0]   rd_rq
);

localparam RW = ADDR_W - 3;

initial begin
    if (ADDR_W < 4) begin
        $error("Error: ADDR_W must be at least 4 (instance %m)");
        $finish;
    end
    if (LOG_ALIGN < 0 || LOG_ALIGN > 3 || LOG_MIN_LANES < 0 || LOG_MIN_LANES > 3) begin
        $error("Error: LOG_ALIGN and LOG_MIN_LANES must be 0..3 (instance %m)");
        $finish;
    end
end

wire [8*64-1:0] bank_bias;
/* verilator lint_off UNUSEDSIGNAL */
wire [8*64-1:0] bank_rq;         // (bits 47:40 of each bank reserved, never read)
/* verilator lint_on UNUSEDSIGNAL */
reg  [2:0]      rot_reg;

always @(posedge clk) begin
    if (rd_en) begin
        rot_reg <= rd_base[2:0];
    end
end

genvar b, k;
generate
for (b = 0; b < 8; b = b + 1) begin : bank
    // the lane this bank serves: r = (b - base) mod 8; its entry is base + r
    wire [2:0]        r = b[2:0] - rd_base[2:0];
    /* verilator lint_off UNUSEDSIGNAL */
    wire [ADDR_W-1:0] entry = rd_base + {{(ADDR_W-3){1'b0}}, r};
    /* verilator lint_on UNUSEDSIGNAL */

    dtpu_bram #(
        .WIDTH(64),
        .ADDR_W(RW)
    )
    bias_inst (
        .clk(clk),
        .wr_en(wr_en && !wr_half && wr_entry[2:0] == b),
        .wr_addr(wr_entry[ADDR_W-1:3]),
        .wr_data(wr_data),
        .rd_en(rd_en),
        .rd_addr(entry[ADDR_W-1:3]),
        .rd_data(bank_bias[b*64 +: 64])
    );

    dtpu_bram #(
        .WIDTH(64),
        .ADDR_W(RW)
    )
    rq_inst (
        .clk(clk),
        .wr_en(wr_en && wr_half && wr_entry[2:0] == b),
        .wr_addr(wr_entry[ADDR_W-1:3]),
        .wr_data(wr_data),
        .rd_en(rd_en),
        .rd_addr(entry[ADDR_W-1:3]),
        .rd_data(bank_rq[b*64 +: 64])
    );

    // lane b reads bank (rot + b) mod 8, rot's low bits taken as 0 where the alignment
    // guarantees them (ALB = log2 S(b), lane 0: 0): a 2^(3-ALB):1 multiplexer
    localparam integer PB = b == 1 ? 1 : b < 4 ? 2 : 3;
    localparam integer PM = PB > LOG_MIN_LANES ? PB : LOG_MIN_LANES;
    localparam integer ALB = b == 0 ? 0 : PM < LOG_ALIGN ? PM : LOG_ALIGN;
    // (written out as the 2^(3-ALB) candidate banks indexed by rot's high bits: as one
    // variable part-select at (rot & mask) + b Yosys kept more of the 8:1 tree)
    localparam integer NC = 1 << (3 - ALB);
    wire [119:0] cand [0:NC-1];
    for (k = 0; k < NC; k = k + 1) begin : c
        localparam [2:0] SRC = (k << ALB) + b;
        // (bits 47:40 of the second word are reserved: not routed, read as 0)
        assign cand[k] = {bank_rq[SRC*64 + 48 +: 16], bank_rq[SRC*64 +: 40], bank_bias[SRC*64 +: 64]};
    end
    wire [119:0] lane_w;
    if (ALB == 3) begin : fixed
        assign lane_w = cand[0];
    end else begin : rotated
        /* verilator lint_off UNUSEDSIGNAL */
        wire [2:0] sel = rot_reg >> ALB;
        /* verilator lint_on UNUSEDSIGNAL */
        assign lane_w = cand[sel[2-ALB:0]];
    end
    assign rd_bias[b*64 +: 64] = lane_w[63:0];
    assign rd_rq[b*64 +: 64] = {lane_w[119:104], 8'd0, lane_w[103:64]};
end
endgenerate

endmodule

`resetall
