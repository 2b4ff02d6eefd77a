/*

Copyright (c) 2026 DTPU authors. Apache-2.0.

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Result address generator of the contract 2.0 store unit (docs/contract2.md, "Result scatter";
 * golden model: dtpu.hw.cmdlist.Executor._scatter), modes ITEMS and ACC (the same addresses).
 *
 * The job's result words are items in the order (o < OUTER, p < PIX, i < INNER) of
 * ceil(GW/L) words each; one request per result lane, in stream order (o, p, i, lane j of the
 * item): lane j < GW of item (o, p, i) is channel ch = CH0 + (o*INNER + i)*GW + j of pixel p,
 * element index p*DSTC + ch (byte address DST + index*ESIZE); lanes j >= GW (the item's last
 * word padded to whole lanes) and channels ch >= CH1 are dropped (m_drop, m_index then
 * meaningless). m_last marks the final lane.
 *
 * Nested counters and adders only; no setup: the first request is valid the cycle after start
 * and a stream of E lanes without backpressure ends E edges after the start edge. RES LANES must
 * be 1, 2, 4 or 8 (the contract's). A start with another MODE, or a zero PIX, OUTER, INNER, GW or
 * LANES, streams nothing and sets `empty` until the next start.
 *
 * Range: element indexes and channels must fit IDX_W bits.
 */
module dtpu_res_agu #
(
    // field widths of contract.json contract2.desc_fields (RES0..RES2)
    parameter MODE_W = 4,           // RES0.MODE
    parameter LANES_W = 4,          // RES0.LANES
    parameter PIX_W = 32,           // RES1.PIX
    parameter DIM_W = 16,           // RES1.OUTER/INNER, RES2.GW/CH0/CH1/DSTC
    // element index width (DST is a 32-bit byte address)
    parameter IDX_W = 32,
    // contract.json contract2.res_modes
    parameter MODE_ITEMS = 1,
    parameter MODE_ACC = 2
)
(
    input  wire                 clk,
    input  wire                 rst_n,

    /* Control */
    input  wire                 start,
    output wire                 busy,
    output wire                 empty,

    /* RES descriptor fields, sampled on start */
    input  wire [MODE_W-1:0]    cfg_mode,
    input  wire [LANES_W-1:0]   cfg_lanes,
    input  wire [PIX_W-1:0]     cfg_pix,
    input  wire [DIM_W-1:0]     cfg_outer,
    input  wire [DIM_W-1:0]     cfg_inner,
    input  wire [DIM_W-1:0]     cfg_gw,
    input  wire [DIM_W-1:0]     cfg_ch0,
    input  wire [DIM_W-1:0]     cfg_ch1,
    input  wire [DIM_W-1:0]     cfg_dstc,

    /* Lane requests */
    output wire                 m_valid,
    input  wire                 m_ready,
    output wire [IDX_W-1:0]     m_index,
    output wire                 m_drop,
    output wire                 m_last
);

localparam J_W = DIM_W + 1;                   // lane of an item: < GW rounded up to whole lanes

initial begin
    if (IDX_W < DIM_W + 1 || LANES_W < 4 || J_W < LANES_W) begin
        $error("Error: unsupported widths (instance %m)");
        $finish;
    end
end

reg run_reg;
reg empty_reg;

reg [PIX_W-1:0] pix_m1_r, p_r;
reg [DIM_W-1:0] outer_m1_r, inner_m1_r, o_r, i_r;
reg [J_W-1:0] j_m1_r, j_r;
reg [DIM_W-1:0] gw_r, ch1_r, dstc_r;
reg [IDX_W-1:0] ob_r, ib_r, pb_r, ch_r, elem_r;

// lanes per item: GW rounded up to whole lanes (L a power of two)
wire [J_W-1:0] lmask = {{(J_W-LANES_W){1'b0}}, cfg_lanes - 1'b1};
wire [J_W-1:0] gwp = ({1'b0, cfg_gw} + lmask) & ~lmask;

wire [IDX_W-1:0] gw_x = {{(IDX_W-DIM_W){1'b0}}, gw_r};
wire [IDX_W-1:0] dstc_x = {{(IDX_W-DIM_W){1'b0}}, dstc_r};
wire [IDX_W-1:0] ch0_x = {{(IDX_W-DIM_W){1'b0}}, cfg_ch0};

wire fire = run_reg && m_ready;
wire j_last = j_r == j_m1_r;
wire i_last = i_r == inner_m1_r;
wire p_last = p_r == pix_m1_r;
wire o_last = o_r == outer_m1_r;

always @(posedge clk) begin
    if (!run_reg) begin
        if (start) begin
            gw_r <= cfg_gw; ch1_r <= cfg_ch1; dstc_r <= cfg_dstc;
            pix_m1_r <= cfg_pix - 1'b1;
            outer_m1_r <= cfg_outer - 1'b1;
            inner_m1_r <= cfg_inner - 1'b1;
            j_m1_r <= gwp - 1'b1;
            o_r <= {DIM_W{1'b0}}; p_r <= {PIX_W{1'b0}}; i_r <= {DIM_W{1'b0}}; j_r <= {J_W{1'b0}};
            ob_r <= ch0_x; ib_r <= ch0_x; ch_r <= ch0_x; elem_r <= ch0_x;
            pb_r <= {IDX_W{1'b0}};
            if ((cfg_mode == MODE_ITEMS[MODE_W-1:0] || cfg_mode == MODE_ACC[MODE_W-1:0])
                    && cfg_pix != 0 && cfg_outer != 0 && cfg_inner != 0 && cfg_gw != 0
                    && cfg_lanes != 0) begin
                run_reg <= 1'b1;
                empty_reg <= 1'b0;
            end else begin
                empty_reg <= 1'b1;
            end
        end
    end else if (fire) begin
        if (!j_last) begin
            j_r <= j_r + 1'b1;
            ch_r <= ch_r + 1'b1;
            elem_r <= elem_r + 1'b1;
        end else begin
            j_r <= {J_W{1'b0}};
            if (!i_last) begin
                i_r <= i_r + 1'b1;
                ib_r <= ib_r + gw_x;
                ch_r <= ib_r + gw_x;
                elem_r <= pb_r + ib_r + gw_x;
            end else if (!p_last) begin
                i_r <= {DIM_W{1'b0}};
                p_r <= p_r + 1'b1;
                pb_r <= pb_r + dstc_x;
                ib_r <= ob_r;
                ch_r <= ob_r;
                elem_r <= pb_r + dstc_x + ob_r;
            end else if (!o_last) begin
                // the next outer item's first channel follows this one's last item
                i_r <= {DIM_W{1'b0}};
                p_r <= {PIX_W{1'b0}};
                o_r <= o_r + 1'b1;
                pb_r <= {IDX_W{1'b0}};
                ob_r <= ib_r + gw_x;
                ib_r <= ib_r + gw_x;
                ch_r <= ib_r + gw_x;
                elem_r <= ib_r + gw_x;
            end else begin
                run_reg <= 1'b0;
            end
        end
    end
    if (!rst_n) begin
        run_reg <= 1'b0;
        empty_reg <= 1'b0;
    end
end

assign busy = run_reg;
assign empty = empty_reg;
assign m_valid = run_reg;
assign m_index = elem_r;
assign m_drop = j_r >= {1'b0, gw_r} || ch_r >= {{(IDX_W-DIM_W){1'b0}}, ch1_r};
assign m_last = j_last && i_last && p_last && o_last;

endmodule

`resetall
