/*

Copyright (c) 2026 DTPU authors. Apache-2.0.

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Store unit of contract 2.0 (docs/contract2.md "Result scatter"; golden model:
 * dtpu.hw.cmdlist.Executor._scatter): the result words of one RUN (the core's m_axis_res
 * stream) written to DDR as its RES0..RES2 fields say.
 *
 *   ITEMS  lane j of item (o, p, i) -> byte DST + (p*DSTC + CH0 + (o*INNER + i)*GW + j)*ESIZE;
 *          lanes past GW and channels >= CH1 dropped.
 *   ACC    the same elements with ESIZE 8: lane (8/LANES bytes, a RAW sum) sign-extended and
 *          added to the int64 there; `cfg_first` (HEADER.FLAGS.FIRST): written, not added.
 *
 * Why it is built so:
 * - A word-level walk (dtpu_cl_store_walk), not dtpu_res_agu's lane per cycle: an item's kept
 *   lanes are always a prefix of each of its words and consecutive bytes in DDR, so a word is one
 *   chunk (address, byte count) and ITEMS keeps up with the core's one result word per cycle at
 *   any LANES (a lane per cycle would stall an int8 job 8 cycles a word).
 * - dtpu_cl_store_pack realigns the chunks to DDR words with byte strobes (items rarely start
 *   on 8 bytes), merging items that share a word; dtpu_cl_store_wq collects runs of consecutive
 *   words into requests of up to MAX_RUN words for dtpu_axi_wr (which keeps MAX_OUTSTANDING
 *   bursts in flight), bridging gaps of up to MAX_GAP words with strobe-less words so that short
 *   scattered items share bursts. Every byte is written at most once per RUN, in stream order,
 *   so writes of one word never overtake each other (one AXI ID: in order).
 * - ACC reads the sums on the read port (the shape of dtpu_axi_rd's request / word ports, so it
 *   can sit behind dtpu_cl_rd_arb): a second walk runs ahead of the data and issues one request
 *   per item, items at consecutive addresses merged up to RD_MERGE words, so the read latency
 *   is hidden after the first read; the data path adds one lane per cycle. Ordering: inside one
 *   RUN no two lanes go to the same element (the contract's field check: channels CH0..CH1
 *   within DSTC) and ACC addresses are 8-byte aligned, so a read never needs a write of the same
 *   RUN; the reads of a RUN wait until every write of the earlier RUNs has its response (the
 *   previous K chunk's sums).
 *
 * Throughput: ITEMS one result word per cycle for items that follow each other in DDR; scattered
 * items as fast as the W channel writes them (2 beats for an item that starts in another word
 * and spills, a beat per gap word); one cycle per RUN to close. ACC one lane per cycle (one R and
 * one W beat per sum: LANES 2 is a word every 2 cycles), after the first read's latency.
 *
 * Fields are checked on `start` (MODE ITEMS/ACC, LANES 1/2/4/8, ITEMS LANES*ESIZE = 8, ACC ESIZE
 * 8 and DST 8-byte aligned, PIX/OUTER/INNER/GW not 0): otherwise err_field and nothing runs. The
 * CH1/DSTC range check of the golden model (a multiplication) is the sequencer's. A RUN whose
 * stream ends (s_last) before the walk, or runs on after it, sets err_len: the rest of the walk
 * is dropped, the extra words are drained up to s_last.
 *
 * Errors: the masters' flags (wr_err_*, rd_err_*, sticky there) put the unit in drain mode: no
 * more requests, result words and read words are consumed and dropped, the words the write
 * master is owed are still delivered; the unit never hangs and reaches `idle`. err_field and
 * err_len are sticky here; `clear` resets them (and is meant for the masters' `clear` too).
 * `start` is taken when !busy (the previous RUN's words all taken; its writes may still drain).
 * `idle`: no RUN, every write request responded (wr_idle), every read word back.
 */
module dtpu_cl_store #
(
    parameter ADDR_W = 32,
    parameter CNT_W = 32,           // request word count (dtpu_axi_rd/wr)
    parameter PIX_W = 32,
    parameter DIM_W = 16,
    parameter IDX_W = 32,
    parameter MODE_W = 4,
    parameter LANES_W = 4,
    parameter ESIZE_W = 4,
    parameter MODE_ITEMS = 1,       // contract.json contract2.res_modes
    parameter MODE_ACC = 2,
    parameter MAX_RUN = 16,         // words per write request
    parameter LOG_WQ = 5,           // log2 of the write queue's depth in words
    parameter RD_MERGE = 16,        // ACC: items merged into a read request up to this many words
    parameter MAX_GAP = 4           // words without strobes written to join two runs (dtpu_cl_store_wq)
)
(
    input  wire                 clk,
    input  wire                 rst_n,
    input  wire                 clear,
    input  wire                 flush,          // no more result words will come: end the RUN

    /* RUN: RES descriptor fields and HEADER.FLAGS.FIRST, sampled on start */
    input  wire                 start,
    input  wire [MODE_W-1:0]    cfg_mode,
    input  wire [LANES_W-1:0]   cfg_lanes,
    input  wire [ESIZE_W-1:0]   cfg_esize,
    input  wire [ADDR_W-1:0]    cfg_dst,
    input  wire [PIX_W-1:0]     cfg_pix,
    input  wire [DIM_W-1:0]     cfg_outer,
    input  wire [DIM_W-1:0]     cfg_inner,
    input  wire [DIM_W-1:0]     cfg_gw,
    input  wire [DIM_W-1:0]     cfg_ch0,
    input  wire [DIM_W-1:0]     cfg_ch1,
    input  wire [DIM_W-1:0]     cfg_dstc,
    input  wire                 cfg_first,
    output wire                 busy,
    output wire                 idle,

    /* result words (the core's m_axis_res) */
    input  wire                 s_valid,
    output wire                 s_ready,
    input  wire [63:0]          s_data,
    input  wire                 s_last,

    /* write port (dtpu_axi_wr) */
    output wire                 wr_req_valid,
    input  wire                 wr_req_ready,
    output wire [ADDR_W-1:0]    wr_req_addr,
    output wire [CNT_W-1:0]     wr_req_words,
    output wire                 wr_valid,
    input  wire                 wr_ready,
    output wire [63:0]          wr_data,
    output wire [7:0]           wr_strb,
    input  wire                 wr_idle,
    input  wire                 wr_err_slverr,
    input  wire                 wr_err_decerr,
    input  wire                 wr_err_timeout,

    /* read port (dtpu_axi_rd, ACC) */
    output wire                 rd_req_valid,
    input  wire                 rd_req_ready,
    output wire [ADDR_W-1:0]    rd_req_addr,
    output wire [CNT_W-1:0]     rd_req_words,
    input  wire                 rd_valid,
    output wire                 rd_ready,
    input  wire [63:0]          rd_data,
    input  wire                 rd_err_slverr,
    input  wire                 rd_err_decerr,
    input  wire                 rd_err_timeout,

    /* errors */
    output wire                 err_slverr,
    output wire                 err_decerr,
    output wire                 err_timeout,
    output reg                  err_field,
    output reg                  err_len
);

initial begin
    if (CNT_W < DIM_W + 1 || ADDR_W < IDX_W || RD_MERGE >= (1 << DIM_W)) begin
        $error("Error: CNT_W > DIM_W, ADDR_W >= IDX_W, RD_MERGE < 2^DIM_W (instance %m)");
        $finish;
    end
end

assign err_slverr = wr_err_slverr || rd_err_slverr;
assign err_decerr = wr_err_decerr || rd_err_decerr;
assign err_timeout = wr_err_timeout || rd_err_timeout;
wire bus_err = err_slverr || err_decerr || err_timeout;
// any error stops the unit's writes and reads (drain mode); the list stops anyway
wire stop;

/* ---- fields ---- */
reg  [1:0] lg;
always @(*) begin
    case (cfg_lanes)
        4'd2: lg = 2'd1;
        4'd4: lg = 2'd2;
        4'd8: lg = 2'd3;
        default: lg = 2'd0;
    endcase
end
wire lanes_ok = cfg_lanes == 4'd1 || cfg_lanes == 4'd2 || cfg_lanes == 4'd4 || cfg_lanes == 4'd8;
wire is_items = cfg_mode == MODE_ITEMS[MODE_W-1:0];
wire is_acc = cfg_mode == MODE_ACC[MODE_W-1:0];
/* verilator lint_off WIDTHEXPAND */
wire es_ok = is_acc ? (cfg_esize == 8 && cfg_dst[2:0] == 3'd0) : ((cfg_esize << lg) == 8);
/* verilator lint_on WIDTHEXPAND */
wire dims_ok = cfg_pix != 0 && cfg_outer != 0 && cfg_inner != 0 && cfg_gw != 0;
wire cfg_ok = (is_items || is_acc) && lanes_ok && es_ok && dims_ok;

reg               acc_r, first_r;
reg  [1:0]        lg_r, esh_r;
reg  [ADDR_W-1:0] dst_r;
reg  [PIX_W-1:0]  pix_r;
reg  [DIM_W-1:0]  outer_r, inner_r, gw_r, ch0_r, ch1_r, dstc_r;
reg               go;               // start the data walk (the cycle after start)
reg               rd_wait;          // ACC adding: reads wait for the earlier RUNs' writes
reg               drain;            // err_len: drop result words up to s_last
reg               flushed;          // flush: the rest of the RUN is dropped (until start/clear)

/* ---- data walk ----
 * The walk's requests reach the word stage through a skid register (dk_*): the walk's ready is
 * !dk_v, a register, so that the word stage's readiness (the ACC lane count, the packer's
 * ready, whose tests run through the address) is not on the path into every counter's enable
 * of the walk. No cycle changes: the walk runs ahead of the data (from `go` it always has the
 * next request), the word stage sees dw_valid as before (the request is in dk_* or at the
 * walk's output) and takes one request per cycle either way. */
wire              wk_valid, wk_last;
wire [ADDR_W-1:0] wk_addr;
wire [3:0]        wk_kept;
/* verilator lint_off UNUSEDSIGNAL */
wire [DIM_W-1:0]  dw_in;
wire              wk_busy;
/* verilator lint_on UNUSEDSIGNAL */
reg               dw_halt;
reg               dk_v;             // a request taken from the walk and not yet by the word stage
reg  [ADDR_W-1:0] dk_addr;
reg  [3:0]        dk_kept;
reg               dk_last;
wire              dw_ready;
wire              dw_valid = dk_v || wk_valid;
wire [ADDR_W-1:0] dw_addr = dk_v ? dk_addr : wk_addr;
wire [3:0]        dw_kept = dk_v ? dk_kept : wk_kept;
wire              dw_last = dk_v ? dk_last : wk_last;
wire              dw_busy = dw_valid;

dtpu_cl_store_walk #(.PIX_W(PIX_W), .DIM_W(DIM_W), .IDX_W(IDX_W), .ADDR_W(ADDR_W)) data_walk (
    .clk(clk), .rst_n(rst_n), .load(go), .start(go), .halt(dw_halt), .busy(wk_busy),
    .cfg_lg(lg_r), .cfg_esh(esh_r), .cfg_dst(dst_r), .cfg_pix(pix_r), .cfg_outer(outer_r),
    .cfg_inner(inner_r), .cfg_gw(gw_r), .cfg_ch0(ch0_r), .cfg_ch1(ch1_r), .cfg_dstc(dstc_r),
    .m_valid(wk_valid), .m_ready(!dk_v), .m_addr(wk_addr), .m_kept(wk_kept),
    .m_ifirst(dw_ifirst), .m_in(dw_in), .m_last(wk_last)
);

always @(posedge clk) begin
    if (dk_v && dw_ready) begin
        dk_v <= 1'b0;
    end else if (!dk_v && wk_valid && !dw_ready) begin
        dk_v <= 1'b1;
        dk_addr <= wk_addr;
        dk_kept <= wk_kept;
        dk_last <= wk_last;
    end
    if (!rst_n || dw_halt) begin
        dk_v <= 1'b0;
    end
end

/* ---- read-ahead walk (ACC without FIRST): the sums of each item with kept lanes, items at
 * consecutive addresses (the INNER items of a pixel) merged into one request until it has
 * RD_MERGE words (the data path takes the words in order whatever the request boundaries) ---- */
wire              rwk_busy, rwk_valid, rwk_ifirst;
/* verilator lint_off UNUSEDSIGNAL */
wire              rw_last, dw_ifirst;
/* verilator lint_on UNUSEDSIGNAL */
wire [ADDR_W-1:0] rwk_addr;
/* verilator lint_off UNUSEDSIGNAL */
wire [3:0]        rw_kept;
/* verilator lint_on UNUSEDSIGNAL */
wire [DIM_W-1:0]  rwk_in;
reg               rw_halt;

// a skid register between the read-ahead walk and the merge: the walk's ready is a register
// (the skid empty), not the merge test (the address compare, the request handshake) fanned out
// to every register of the walk, the store unit's critical path on the ECP5 proxy (pr_end ->
// read_walk.a_pix_r, docs/synthesis.md). The walk gives an element every cycle while it runs,
// so the merge sees the same elements in the same cycles (one waits in the skid only while
// the merge holds it), and the walk counts as busy while the skid holds its last element
reg               sk_valid, sk_ifirst;
reg  [ADDR_W-1:0] sk_addr;
reg  [DIM_W-1:0]  sk_in;
wire              rw_valid = sk_valid || rwk_valid;
wire              rw_ifirst = sk_valid ? sk_ifirst : rwk_ifirst;
wire [ADDR_W-1:0] rw_addr = sk_valid ? sk_addr : rwk_addr;
wire [DIM_W-1:0]  rw_in = sk_valid ? sk_in : rwk_in;
wire              rw_busy = rwk_busy || sk_valid;

reg               pr_v;             // the request being merged
reg  [ADDR_W-1:0] pr_addr;
reg  [CNT_W-1:0]  pr_n;
// pr_n >= RD_MERGE and the request's end pr_addr + 8*pr_n, set with pr_n (look-ahead): the
// merge test feeds the walk's ready and through it every walk counter's enable. A merge adds
// at most 2^DIM_W - 1 words to pr_n < RD_MERGE < 2^DIM_W, so pr_n never wraps (CNT_W > DIM_W)
// and the end advances by the words added
reg               pr_full;
reg  [ADDR_W-1:0] pr_end;
wire              rw_item = rw_valid && rw_ifirst && rw_in != {DIM_W{1'b0}};
wire [CNT_W-1:0]  rw_in_x = {{(CNT_W-DIM_W){1'b0}}, rw_in};
/* verilator lint_off UNUSEDSIGNAL */
wire [ADDR_W+CNT_W-1:0] rw_bytes = {{ADDR_W{1'b0}}, rw_in_x} << 3;
/* verilator lint_on UNUSEDSIGNAL */
wire [CNT_W-1:0]  pr_n_sum = pr_n + rw_in_x;
wire              contig = pr_v && !pr_full && rw_addr == pr_end;
assign rd_req_valid = pr_v && !stop && (pr_full || !rw_busy || (rw_item && !contig));
wire              rq_hs = rd_req_valid && rd_req_ready;
wire              absorb = rw_item && (!pr_v || contig || rq_hs);
wire              rw_ready = stop || !rw_item || absorb;

wire              pk_empty, wq_idle;
// the reads start once every write of the earlier RUNs has its response. The read-ahead walk
// takes the RUN's fields on `go` (its `load`; rd_go excludes go, so always before rd_go, and
// the fields registers hold still while rd_wait keeps the unit busy): this late test (the
// write queue's idle, the master's wr_idle) only sets the walk's run flag instead of fanning
// out to its field registers, the store unit's critical path on the ECP5 proxy (wq.owed ->
// read_walk.p_r, 92.0 MHz, docs/synthesis.md). No cycle changes
wire              rd_go = rd_wait && !go && pk_empty && wq_idle && wr_idle;

dtpu_cl_store_walk #(.PIX_W(PIX_W), .DIM_W(DIM_W), .IDX_W(IDX_W), .ADDR_W(ADDR_W)) read_walk (
    .clk(clk), .rst_n(rst_n), .load(go), .start(rd_go), .halt(rw_halt), .busy(rwk_busy),
    .cfg_lg(lg_r), .cfg_esh(esh_r), .cfg_dst(dst_r), .cfg_pix(pix_r), .cfg_outer(outer_r),
    .cfg_inner(inner_r), .cfg_gw(gw_r), .cfg_ch0(ch0_r), .cfg_ch1(ch1_r), .cfg_dstc(dstc_r),
    .m_valid(rwk_valid), .m_ready(!sk_valid), .m_addr(rwk_addr), .m_kept(rw_kept),
    .m_ifirst(rwk_ifirst), .m_in(rwk_in), .m_last(rw_last)
);

always @(posedge clk) begin
    if (rwk_valid && !sk_valid && !rw_ready) begin
        sk_valid <= 1'b1;
        sk_ifirst <= rwk_ifirst;
        sk_addr <= rwk_addr;
        sk_in <= rwk_in;
    end else if (sk_valid && rw_ready) begin
        sk_valid <= 1'b0;
    end
    if (rw_halt || !rst_n) begin
        sk_valid <= 1'b0;
    end
end

assign rd_req_addr = pr_addr;
assign rd_req_words = pr_n;

always @(posedge clk) begin
    if (rq_hs) begin
        pr_v <= 1'b0;
    end
    if (absorb && !stop) begin
        if (contig && !rq_hs) begin
            pr_n <= pr_n_sum;
            pr_full <= pr_n_sum >= RD_MERGE[CNT_W-1:0];
            pr_end <= pr_end + rw_bytes[ADDR_W-1:0];
        end else begin
            pr_v <= 1'b1;
            pr_addr <= rw_addr;
            pr_n <= rw_in_x;
            pr_full <= rw_in_x >= RD_MERGE[CNT_W-1:0];
            pr_end <= rw_addr + rw_bytes[ADDR_W-1:0];
        end
    end
    if (stop || !rst_n) begin
        pr_v <= 1'b0;
    end
end

/* ---- the word stage: one result word and its walk request ---- */
reg               st_v;
reg  [63:0]       st_data;          // ACC: shifted down a lane as each lane is added
reg  [3:0]        st_kept;
reg               st_last;
reg  [2:0]        st_q;             // ACC: the lane being added
// registers set with st_q (look-ahead), so that the word stage's done test and the packer's
// inputs start at registers: q_end (the lane is the word's last kept one: ITEMS, no kept lanes,
// st_q == st_kept - 1), pk_addr (the word's address + 8*st_q), st_data (the word >> st_q lanes)
reg               q_end;
reg  [ADDR_W-1:0] pk_addr;

wire              pk_ready;
wire              need_rd = acc_r && !first_r && st_kept != 4'd0;
wire              pk_valid = st_v && (!need_rd || rd_valid || stop);
wire              pk_hs = pk_valid && pk_ready;
wire              st_done = pk_hs && q_end;
wire              st_free = !st_v || st_done;

assign dw_ready = s_valid && st_free && !drain;
assign s_ready = drain || (dw_valid && st_free);
wire              load = s_valid && dw_valid && st_free && !drain;

// ACC lane q: 64/L bits, sign-extended, plus the old sum
wire [63:0]       lane_raw = st_data;
reg  [63:0]       lane;
always @(*) begin
    case (lg_r)
        2'd1: lane = {{32{lane_raw[31]}}, lane_raw[31:0]};
        2'd2: lane = {{48{lane_raw[15]}}, lane_raw[15:0]};
        2'd3: lane = {{56{lane_raw[7]}}, lane_raw[7:0]};
        default: lane = lane_raw;
    endcase
end
wire [63:0]       sum = lane + (first_r ? 64'd0 : rd_data);

wire [63:0]       pk_data = acc_r ? sum : st_data;
/* verilator lint_off WIDTHEXPAND */
wire [3:0]        pk_n = acc_r ? ((st_kept == 4'd0) ? 4'd0 : 4'd8) : (st_kept << (2'd3 - lg_r));
/* verilator lint_on WIDTHEXPAND */
wire              pk_last = st_last && q_end;

// read words: one per added lane; in drain mode every word is taken
assign rd_ready = stop || (pk_hs && need_rd);

/* ---- realign, queue ---- */
wire              pm_valid, pm_ready, pm_close;
wire [ADDR_W-4:0] pm_waddr;
wire [63:0]       pm_data;
wire [7:0]        pm_strb;
wire              pm_near;
wire [$clog2(MAX_GAP+2)-1:0] pm_gap;

dtpu_cl_store_pack #(.ADDR_W(ADDR_W), .MAX_GAP(MAX_GAP)) pack (
    .clk(clk), .rst_n(rst_n),
    .s_valid(pk_valid), .s_ready(pk_ready), .s_addr(pk_addr), .s_data(pk_data), .s_n(pk_n),
    .s_last(pk_last),
    .m_valid(pm_valid), .m_ready(pm_ready), .m_waddr(pm_waddr), .m_data(pm_data),
    .m_strb(pm_strb), .m_close(pm_close), .m_near(pm_near), .m_gap(pm_gap), .empty(pk_empty)
);

dtpu_cl_store_wq #(.ADDR_W(ADDR_W), .CNT_W(CNT_W), .MAX_RUN(MAX_RUN), .LOG_DEPTH(LOG_WQ),
    .MAX_GAP(MAX_GAP)) wq (
    .clk(clk), .rst_n(rst_n), .err(stop),
    .s_valid(pm_valid), .s_ready(pm_ready), .s_waddr(pm_waddr), .s_data(pm_data),
    .s_strb(pm_strb), .s_close(pm_close), .s_near(pm_near), .s_gap(pm_gap),
    .req_valid(wr_req_valid), .req_ready(wr_req_ready), .req_addr(wr_req_addr),
    .req_words(wr_req_words),
    .m_valid(wr_valid), .m_ready(wr_ready), .m_data(wr_data), .m_strb(wr_strb),
    .idle(wq_idle)
);

/* ---- read words owed (idle) ---- */
reg  [CNT_W:0]    rd_owed;

always @(posedge clk) begin
    go <= 1'b0;
    dw_halt <= 1'b0;
    rw_halt <= 1'b0;
    if (start && !busy) begin
        if (cfg_ok) begin
            go <= 1'b1;
            rd_wait <= is_acc && !cfg_first;
        end else begin
            err_field <= 1'b1;
        end
        acc_r <= is_acc;
        first_r <= cfg_first;
        lg_r <= lg;
        esh_r <= is_acc ? 2'd3 : 2'd3 - lg;
        dst_r <= cfg_dst;
        pix_r <= cfg_pix;
        outer_r <= cfg_outer;
        inner_r <= cfg_inner;
        gw_r <= cfg_gw;
        ch0_r <= cfg_ch0;
        ch1_r <= cfg_ch1;
        dstc_r <= cfg_dstc;
    end
    if (rd_go) begin
        rd_wait <= 1'b0;
    end
    if (load) begin
        st_v <= 1'b1;
        st_data <= s_data;
        st_kept <= dw_kept;
        st_last <= dw_last || s_last;
        st_q <= 3'd0;
        q_end <= !acc_r || dw_kept == 4'd0 || dw_kept == 4'd1;
        pk_addr <= dw_addr;
        if (s_last && !dw_last) begin
            // the stream ended early: the rest of the walk is dropped
            err_len <= 1'b1;
            dw_halt <= 1'b1;
            rw_halt <= 1'b1;
            rd_wait <= 1'b0;
        end
        if (dw_last && !s_last) begin
            // the stream runs on: drain it up to its s_last
            err_len <= 1'b1;
            drain <= 1'b1;
        end
    end else if (st_done) begin
        st_v <= 1'b0;
    end else if (pk_hs) begin
        st_q <= st_q + 1'b1;
        q_end <= {1'b0, st_q} + 4'd2 == st_kept;
        pk_addr <= pk_addr + {{(ADDR_W-4){1'b0}}, 4'd8};
        case (lg_r)
            2'd1: st_data <= st_data >> 32;
            2'd2: st_data <= st_data >> 16;
            2'd3: st_data <= st_data >> 8;
            default: st_data <= st_data;
        endcase
    end
    if (drain && s_valid && s_last) begin
        drain <= 1'b0;
    end
    if (flush) begin
        // the sequencer aborted the RUN (the core was reset): the walks end, the word being
        // added and the queued writes are dropped (stop), the writes the master was promised
        // are still delivered (dtpu_cl_store_wq), read words still owed are taken and dropped
        flushed <= 1'b1;
        dw_halt <= 1'b1;
        rw_halt <= 1'b1;
        rd_wait <= 1'b0;
        drain <= 1'b0;
    end
    rd_owed <= rd_owed + (rq_hs ? {1'b0, pr_n} : {(CNT_W+1){1'b0}})
                       - {{CNT_W{1'b0}}, rd_valid && rd_ready};
    if (clear || (start && !busy)) begin
        flushed <= 1'b0;
    end
    if (clear) begin
        err_field <= 1'b0;
        err_len <= 1'b0;
    end
    if (!rst_n) begin
        go <= 1'b0;
        rd_wait <= 1'b0;
        drain <= 1'b0;
        st_v <= 1'b0;
        rd_owed <= {(CNT_W+1){1'b0}};
        err_field <= 1'b0;
        err_len <= 1'b0;
        dw_halt <= 1'b0;
        rw_halt <= 1'b0;
        flushed <= 1'b0;
    end
end

assign stop = bus_err || err_len || err_field || flushed;
assign busy = go || dw_busy || st_v || drain || rd_wait || rw_busy || pr_v;
assign idle = !busy && pk_empty && wq_idle && wr_idle && rd_owed == {(CNT_W+1){1'b0}};

endmodule

`resetall
