/*

Copyright (c) 2026 DTPU authors. Apache-2.0.

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Word-level walk of the contract 2.0 store unit (dtpu_cl_store; golden model:
 * dtpu.hw.cmdlist.Executor._scatter, modes ITEMS and ACC).
 *
 * The job's result words are items in the order (o < OUTER, p < PIX, i < INNER) of
 * ceil(GW/L) words each (L = 1 << cfg_lg lanes per word). Lane j < GW of item (o, p, i) is
 * channel CH0 + (o*INNER + i)*GW + j of pixel p, element p*DSTC + channel, byte address
 * DST + element*ESIZE (ESIZE = 1 << cfg_esh); lanes j >= GW and channels >= CH1 are dropped.
 * Inside one word the kept lanes are always a prefix (both limits are upper bounds on the lane),
 * and the kept lanes of one item are consecutive elements: so one request per *word* says all
 * there is to say about it: the byte address of its lane 0 (m_addr) and how many of its lanes
 * are kept (m_kept, 0..L). m_ifirst marks an item's first word and m_in is then the item's kept
 * lane count (the ACC read-back of its sums is one run of m_in words from m_addr).
 *
 * This is dtpu_res_agu's walk one word (L lanes) per step instead of one lane: the store unit
 * moves whole words (the realignment to DDR bytes is dtpu_cl_store_pack's), so it keeps up with
 * a result word per cycle whatever L is.
 *
 * The first request is valid the cycle after start, then one per cycle without backpressure.
 * PIX, OUTER, INNER and GW must not be 0 (dtpu_cl_store checks the fields); `halt` stops.
 * The fields are sampled on `load` (the walk not running), the walk runs from `start`: `load`
 * in the same cycle as `start` or earlier, the fields' sampled values kept until then. Why two
 * inputs: the walk's field registers (some 400 flip-flops) hang on `load`; the store unit's
 * read-ahead walk starts on a late test (its `rd_go`: the write queue and the write master
 * idle), which fanned out to all of them was the store unit's critical path on the ECP5 proxy
 * (wq.owed -> read_walk.p_r, docs/synthesis.md). It loads that walk when the RUN begins, and
 * `rd_go` only sets the run flag.
 * Range: element indexes must fit IDX_W bits, addresses wrap at ADDR_W.
 */
module dtpu_cl_store_walk #
(
    parameter PIX_W = 32,           // RES1.PIX
    parameter DIM_W = 16,           // RES1.OUTER/INNER, RES2.GW/CH0/CH1/DSTC
    parameter IDX_W = 32,           // element index
    parameter ADDR_W = 32           // byte address
)
(
    input  wire                 clk,
    input  wire                 rst_n,

    input  wire                 load,         // sample the fields (not running)
    input  wire                 start,        // run (on or after load)
    input  wire                 halt,
    output wire                 busy,

    /* fields, sampled on load */
    input  wire [1:0]           cfg_lg,       // log2 lanes per word
    input  wire [1:0]           cfg_esh,      // log2 bytes per element in DDR
    input  wire [ADDR_W-1:0]    cfg_dst,
    input  wire [PIX_W-1:0]     cfg_pix,
    input  wire [DIM_W-1:0]     cfg_outer,
    input  wire [DIM_W-1:0]     cfg_inner,
    input  wire [DIM_W-1:0]     cfg_gw,
    input  wire [DIM_W-1:0]     cfg_ch0,
    input  wire [DIM_W-1:0]     cfg_ch1,
    input  wire [DIM_W-1:0]     cfg_dstc,

    /* one request per result word */
    output wire                 m_valid,
    input  wire                 m_ready,
    output wire [ADDR_W-1:0]    m_addr,
    output wire [3:0]           m_kept,
    output wire                 m_ifirst,
    output wire [DIM_W-1:0]     m_in,
    output wire                 m_last
);

localparam J_W = DIM_W + 3;                   // lane offset of a word in its item: < GW + 7

initial begin
    if (IDX_W < DIM_W + 2 || ADDR_W < IDX_W) begin
        $error("Error: IDX_W >= DIM_W + 2, ADDR_W >= IDX_W (instance %m)");
        $finish;
    end
end

reg               run_reg;
reg  [1:0]        lg_r;
reg  [PIX_W-1:0]  p_r;
reg  [DIM_W-1:0]  o_r, i_r;
reg  [DIM_W-1:0]  w_r;                        // word of the item
reg  [DIM_W-1:0]  gw_r;

// words per item: ceil(GW / L)
wire [DIM_W:0]    gw_up = {1'b0, cfg_gw} + ((17'd1 << cfg_lg) - 17'd1);
/* verilator lint_off UNUSEDSIGNAL */
wire [DIM_W:0]    wpi = gw_up >> cfg_lg;      // < 2^DIM_W
/* verilator lint_on UNUSEDSIGNAL */

wire [IDX_W-1:0]  ch0_x = {{(IDX_W-DIM_W){1'b0}}, cfg_ch0};

// Kept lanes of the item: lim = min(GW, CH1 - channel base), 0 past CH1; of its word w:
// min(lim - w*L, L), 0 when not positive. Kept in registers set one step ahead (the compares
// of the channel base with CH1 and GW and of the lane offset with lim were four carry chains in
// series into the store unit's word stage, docs/synthesis.md): rem_r = CH1 - channel base of
// the item (signed), rem_ob_r the same at the outer block's base channel, lim_r / lim_ob_r
// their clamps to 0..GW, left_r = lim - w*L (signed). A step to the next item (base + GW)
// clamps rem - GW from rem alone: 0 if rem <= GW, GW if rem >= 2*GW, else rem - GW.
localparam REM_W = IDX_W + 1;
localparam LEFT_W = J_W + 1;
reg  signed [REM_W-1:0]  rem_r, rem_ob_r;
reg         [DIM_W-1:0]  lim_r, lim_ob_r;
reg  signed [LEFT_W-1:0] left_r;
wire signed [REM_W-1:0]  gw_s = $signed({{(REM_W-DIM_W){1'b0}}, gw_r});
wire signed [REM_W-1:0]  gw2_s = $signed({{(REM_W-DIM_W-1){1'b0}}, gw_r, 1'b0});
wire signed [REM_W-1:0]  rem_gw = rem_r - gw_s;
wire [DIM_W-1:0]  lim_gw = rem_r <= gw_s ? {DIM_W{1'b0}} : rem_r >= gw2_s ? gw_r : rem_gw[DIM_W-1:0];
wire signed [REM_W-1:0]  rem0 = $signed({{(REM_W-DIM_W){1'b0}}, cfg_ch1}) - $signed({1'b0, ch0_x});
wire [DIM_W-1:0]  lim0 = rem0 <= 0 ? {DIM_W{1'b0}}
                       : rem0 < $signed({{(REM_W-DIM_W){1'b0}}, cfg_gw}) ? rem0[DIM_W-1:0] : cfg_gw;
wire [J_W-1:0]    lanes = {{(J_W-4){1'b0}}, 4'd1 << lg_r};
wire              left_pos = !left_r[LEFT_W-1] && left_r != {LEFT_W{1'b0}};
wire              left_lt = (left_r[LEFT_W-1:0] >> lg_r) == {LEFT_W{1'b0}};     // < L, for left >= 0
wire [3:0]        kept = !left_pos ? 4'd0 : left_lt ? left_r[3:0] : lanes[3:0];
function signed [LEFT_W-1:0] left_of(input [DIM_W-1:0] v);
    left_of = $signed({{(LEFT_W-DIM_W){1'b0}}, v});
endfunction

wire fire = run_reg && m_ready;
// the counters' last tests as registers set with their counters (look-ahead: a counter's step
// to v + 1 tests v against last - 1, a reset to 0 takes the flag "last is 0" kept from start):
// a counter's compare, the step's priority and the next counter's enable in series were the
// store unit's critical path on the ECP5 proxy (data_walk.p_r -> data_walk.o_r,
// docs/synthesis.md)
reg  w_last, i_last, p_last, o_last;
reg  w_first;                                 // w_r == 0 (m_ifirst: the read-ahead walk's
                                              // taker merges on it, its ready into the walk)
reg  w_one_r, i_one_r, p_one_r;               // the last value is 0 (one word, item, pixel)
reg  [DIM_W-1:0] w_m2_r, inner_m2_r, outer_m2_r;  // last - 1 (words of an item - 2, ...)
reg  [PIX_W-1:0] pix_m2_r;
wire [DIM_W-1:0] wpi_m1 = wpi[DIM_W-1:0] - 1'b1;

// m_addr is a register (addr_r) set one step ahead: the taker's ready may depend on the
// address (the read-ahead walk's request merging), so no adder may lie between the counters
// and it. The walk keeps byte addresses, DST + element*ESIZE, of the element (addr_r), of the
// item's lane 0 (a_item_r: p*DSTC + channel base), of the outer block's base at this pixel
// (a_pix_r: p*DSTC + ob), of the item's channel base at pixel 0 (a_och_r) and of the outer
// block's base at pixel 0 (a_ob_r); each step's candidates are one addition each of a register
// and a per-RUN step (a word L*ESIZE, an item GW*ESIZE, a pixel DSTC*ESIZE) and the last tests
// only select among them (an element index, its shift and DST in series were the walk's
// critical path on the ECP5 proxy, docs/synthesis.md). Equal to DST + (element << ESH) modulo
// 2^ADDR_W for element indexes within IDX_W bits (Range above).
reg  [ADDR_W-1:0] addr_r, a_item_r, a_pix_r, a_och_r, a_ob_r;
reg  [ADDR_W-1:0] wstep_r, gwb_r, dstcb_r;    // L, GW, DSTC elements in bytes
wire [ADDR_W-1:0] a_word_n = addr_r + wstep_r;     // the item's next word
wire [ADDR_W-1:0] a_item_n = a_item_r + gwb_r;     // the next item
wire [ADDR_W-1:0] a_pix_n = a_pix_r + dstcb_r;     // the next pixel's first item
wire [ADDR_W-1:0] a_och_n = a_och_r + gwb_r;       // the next outer block's first item
wire [ADDR_W-1:0] a_start = cfg_dst + ({{(ADDR_W-IDX_W){1'b0}}, ch0_x} << cfg_esh);

always @(posedge clk) begin
    if (!run_reg) begin
        if (load) begin
            lg_r <= cfg_lg;
            gw_r <= cfg_gw;
            w_m2_r <= wpi[DIM_W-1:0] - {{(DIM_W-2){1'b0}}, 2'd2};
            inner_m2_r <= cfg_inner - {{(DIM_W-2){1'b0}}, 2'd2};
            outer_m2_r <= cfg_outer - {{(DIM_W-2){1'b0}}, 2'd2};
            pix_m2_r <= cfg_pix - {{(PIX_W-2){1'b0}}, 2'd2};
            w_one_r <= wpi_m1 == {DIM_W{1'b0}};
            i_one_r <= cfg_inner == {{(DIM_W-1){1'b0}}, 1'b1};
            p_one_r <= cfg_pix == {{(PIX_W-1){1'b0}}, 1'b1};
            w_last <= wpi_m1 == {DIM_W{1'b0}};
            w_first <= 1'b1;
            i_last <= cfg_inner == {{(DIM_W-1){1'b0}}, 1'b1};
            p_last <= cfg_pix == {{(PIX_W-1){1'b0}}, 1'b1};
            o_last <= cfg_outer == {{(DIM_W-1){1'b0}}, 1'b1};
            o_r <= {DIM_W{1'b0}}; p_r <= {PIX_W{1'b0}}; i_r <= {DIM_W{1'b0}}; w_r <= {DIM_W{1'b0}};
            rem_r <= rem0; rem_ob_r <= rem0;
            lim_r <= lim0; lim_ob_r <= lim0; left_r <= left_of(lim0);
            addr_r <= a_start; a_item_r <= a_start; a_pix_r <= a_start;
            a_och_r <= a_start; a_ob_r <= a_start;
            wstep_r <= {{(ADDR_W-1){1'b0}}, 1'b1} << ({1'b0, cfg_lg} + {1'b0, cfg_esh});
            gwb_r <= {{(ADDR_W-DIM_W){1'b0}}, cfg_gw} << cfg_esh;
            dstcb_r <= {{(ADDR_W-DIM_W){1'b0}}, cfg_dstc} << cfg_esh;
        end
        if (start) begin
            run_reg <= 1'b1;
        end
    end else if (fire) begin
        if (!w_last) begin
            w_r <= w_r + 1'b1;
            w_last <= w_r == w_m2_r;
            w_first <= 1'b0;
            addr_r <= a_word_n;
            left_r <= left_r - $signed({1'b0, lanes});
        end else begin
            w_r <= {DIM_W{1'b0}};
            w_last <= w_one_r;
            w_first <= 1'b1;
            if (!i_last) begin
                i_r <= i_r + 1'b1;
                i_last <= i_r == inner_m2_r;
                rem_r <= rem_gw; lim_r <= lim_gw; left_r <= left_of(lim_gw);
                addr_r <= a_item_n; a_item_r <= a_item_n; a_och_r <= a_och_n;
            end else if (!p_last) begin
                i_r <= {DIM_W{1'b0}};
                i_last <= i_one_r;
                p_r <= p_r + 1'b1;
                p_last <= p_r == pix_m2_r;
                rem_r <= rem_ob_r; lim_r <= lim_ob_r; left_r <= left_of(lim_ob_r);
                addr_r <= a_pix_n; a_item_r <= a_pix_n; a_pix_r <= a_pix_n;
                a_och_r <= a_ob_r;
            end else if (!o_last) begin
                // the next outer block's first channel follows this one's last item
                i_r <= {DIM_W{1'b0}};
                i_last <= i_one_r;
                p_r <= {PIX_W{1'b0}};
                p_last <= p_one_r;
                o_r <= o_r + 1'b1;
                o_last <= o_r == outer_m2_r;
                rem_r <= rem_gw; lim_r <= lim_gw; left_r <= left_of(lim_gw);
                rem_ob_r <= rem_gw; lim_ob_r <= lim_gw;
                addr_r <= a_och_n; a_item_r <= a_och_n; a_pix_r <= a_och_n;
                a_och_r <= a_och_n; a_ob_r <= a_och_n;
            end else begin
                run_reg <= 1'b0;
            end
        end
    end
    if (!rst_n || halt) begin
        run_reg <= 1'b0;
    end
end

assign busy = run_reg;
assign m_valid = run_reg;
assign m_addr = addr_r;
assign m_kept = kept;
assign m_ifirst = w_first;
assign m_in = lim_r;
assign m_last = w_last && i_last && p_last && o_last;

endmodule

`resetall
