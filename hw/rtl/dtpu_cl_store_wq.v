/*

Copyright (c) 2026 DTPU authors. Apache-2.0.

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Write queue of the contract 2.0 store unit (dtpu_cl_store): aligned words (word address,
 * data, strobes) in, write requests (address, words) and their words out to dtpu_axi_wr.
 *
 * A write master takes a request's word count before its words, so words wait here until
 * their run is known: consecutive word addresses form one run, a run ends at MAX_RUN words, at
 * an address that does not follow, or at a close marker (s_close, no strobes: the RUN's end).
 * A closed run becomes a request; its words are already in the word FIFO, so the master never
 * waits on this queue for data it asked for. A word at most MAX_GAP words past the run's end
 * continues the run if it fits: the gap is filled with words without strobes (one a cycle), so
 * short scattered items (a few bytes a pixel) share bursts: the write master keeps only
 * MAX_OUTSTANDING bursts in flight, one item a burst would be 8 items per write latency. DEPTH >= 2*MAX_RUN words keeps a run filling while
 * the previous one drains.
 *
 * The queue keeps no run end address: each word with strobes comes with its distance from the
 * word after the previous word with strobes (dtpu_cl_store_pack: s_near when it is at most
 * MAX_GAP, s_gap its value), which is the run's end while a run is open; the gap left is that
 * distance less the words filled for it so far. So its ready depends on no address compare
 * (s_waddr - run_end was the store unit's critical path on the ECP5 proxy, docs/synthesis.md).
 *
 * Errors (`err`, any bus error of the store unit): no request is issued any more; the words of
 * requests the master already took are still given to it (it consumes them, dead or not), every
 * other word, queued or arriving, is dropped. So the producer never waits and `idle` comes.
 */
module dtpu_cl_store_wq #
(
    parameter ADDR_W = 32,
    parameter CNT_W = 32,
    // longest request (the AXI3 burst: 16)
    parameter MAX_RUN = 16,
    // log2 of the word FIFO (and request FIFO) depth
    parameter LOG_DEPTH = 5,
    // longest gap (words) filled with strobe-less words to continue a run (0: none)
    parameter MAX_GAP = 4,
    // width of s_gap (holds 0..MAX_GAP)
    parameter GAP_W = $clog2(MAX_GAP + 2)
)
(
    input  wire                 clk,
    input  wire                 rst_n,
    input  wire                 err,

    input  wire                 s_valid,
    output wire                 s_ready,
    input  wire [ADDR_W-4:0]    s_waddr,
    input  wire [63:0]          s_data,
    input  wire [7:0]           s_strb,
    input  wire                 s_close,
    input  wire                 s_near,
    input  wire [GAP_W-1:0]     s_gap,

    output wire                 req_valid,
    input  wire                 req_ready,
    output wire [ADDR_W-1:0]    req_addr,
    output wire [CNT_W-1:0]     req_words,

    output wire                 m_valid,
    input  wire                 m_ready,
    output wire [63:0]          m_data,
    output wire [7:0]           m_strb,

    output wire                 idle
);

localparam WA_W = ADDR_W - 3;
localparam DEPTH = 1 << LOG_DEPTH;
localparam RW = $clog2(MAX_RUN + 1);

initial begin
    if (MAX_RUN < 2 || DEPTH < 2 * MAX_RUN || CNT_W < RW + 1) begin
        $error("Error: MAX_RUN >= 2, 2^LOG_DEPTH >= 2*MAX_RUN (instance %m)");
        $finish;
    end
end

/* word FIFO */
reg  [63:0]         wf_d [0:DEPTH-1];
reg  [7:0]          wf_m [0:DEPTH-1];
reg  [LOG_DEPTH:0]  wf_wr, wf_rd;
/* request FIFO */
reg  [WA_W-1:0]     rf_a [0:DEPTH-1];
reg  [RW-1:0]       rf_n [0:DEPTH-1];
reg  [LOG_DEPTH:0]  rf_wr, rf_rd;
/* the run being collected */
reg                 run_v;
reg  [WA_W-1:0]     run_a;
reg  [RW-1:0]       run_n;
// words without strobes filled for the input word so far (cleared when a word is taken)
reg  [GAP_W-1:0]    filled;
/* words of requests the master took and has not had */
reg  [CNT_W:0]      owed;

wire wf_full = (wf_wr[LOG_DEPTH] != wf_rd[LOG_DEPTH]) && (wf_wr[LOG_DEPTH-1:0] == wf_rd[LOG_DEPTH-1:0]);
wire wf_empty = (wf_wr == wf_rd);
wire rf_full = (rf_wr[LOG_DEPTH] != rf_rd[LOG_DEPTH]) && (rf_wr[LOG_DEPTH-1:0] == rf_rd[LOG_DEPTH-1:0]);
wire rf_empty = (rf_wr == rf_rd);

wire has_word = (s_strb != 8'd0);
// the word's distance from the run's end now: s_gap - filled (filled <= s_gap while the word
// waits: it counts fill words, which are made only while this is >= 1)
wire [GAP_W:0] gap = {1'b0, s_gap} - {1'b0, filled};
/* verilator lint_off WIDTHEXPAND */
wire follows = run_v && s_near && (gap == {(GAP_W+1){1'b0}}) && (run_n != MAX_RUN[RW-1:0]);
/* verilator lint_on WIDTHEXPAND */

// gap filling: a word a few words past the run's end (a short item of the next pixel) is
// reached with words without strobes (AXI writes nothing there), one a cycle, if the run stays
// within MAX_RUN: one burst for several short items instead of one each
// run_n + gap < MAX_RUN on RW + 2 bits (gap <= MAX_GAP < 2^GAP_W)
/* verilator lint_off WIDTHEXPAND */
wire [RW+GAP_W:0] n_gap = run_n + gap;
wire fill_want = has_word && run_v && s_near && !gap[GAP_W] && gap != {(GAP_W+1){1'b0}}
                 && n_gap < MAX_RUN;
/* verilator lint_on WIDTHEXPAND */
wire fill = s_valid && fill_want && !wf_full && !rf_full && !err;

assign s_ready = err || (!wf_full && !rf_full && !fill_want);
wire in_hs = s_valid && s_ready && !err;

// a request is pushed when the open run ends: a word that does not follow it, a close marker
// (never with strobes: dtpu_cl_store_pack), or the run reaching MAX_RUN words (MAX_RUN >= 2, so a
// word that starts a run never ends it at once: one push per cycle)
wire grow = in_hs && has_word;
// grow || fill, written without fill_want (a word with strobes is taken into the word FIFO
// either way: as itself or as its gap's next fill word)
wire wf_we = s_valid && has_word && !wf_full && !rf_full && !err;
wire [RW-1:0] n_after = follows ? run_n + 1'b1 : {{(RW-1){1'b0}}, 1'b1};
wire push_brk = in_hs && run_v && (s_close || (has_word && !follows));
wire push_full = grow && follows && (n_after == MAX_RUN[RW-1:0]);
wire push_req = push_brk || push_full;
wire [WA_W-1:0] push_a = run_a;
wire [RW-1:0]   push_n = push_full ? n_after : run_n;

assign req_valid = !rf_empty && !err;
wire req_hs = req_valid && req_ready;
wire rf_pop = !rf_empty && (err || req_ready);

wire owing = (owed != {(CNT_W+1){1'b0}});
assign m_valid = !wf_empty && (!err || owing);
wire wf_pop = !wf_empty && (err ? (!owing || m_ready) : m_ready);
wire m_hs = m_valid && m_ready;

always @(posedge clk) begin
    if (wf_we) begin
        wf_d[wf_wr[LOG_DEPTH-1:0]] <= s_data;
        wf_m[wf_wr[LOG_DEPTH-1:0]] <= fill ? 8'd0 : s_strb;
        wf_wr <= wf_wr + 1'b1;
    end
    if (fill) begin
        run_n <= run_n + 1'b1;
        filled <= filled + 1'b1;
    end
    if (s_valid && s_ready) begin
        filled <= {GAP_W{1'b0}};
    end
    if (wf_pop) begin
        wf_rd <= wf_rd + 1'b1;
    end
    if (push_req) begin
        rf_a[rf_wr[LOG_DEPTH-1:0]] <= push_a;
        rf_n[rf_wr[LOG_DEPTH-1:0]] <= push_n;
        rf_wr <= rf_wr + 1'b1;
    end
    if (rf_pop) begin
        rf_rd <= rf_rd + 1'b1;
    end
    if (in_hs) begin
        if (s_close || push_full) begin
            run_v <= 1'b0;
        end else if (has_word) begin
            run_v <= 1'b1;
            run_n <= n_after;
            if (!follows) begin
                run_a <= s_waddr;
            end
        end
    end
    owed <= owed + (req_hs ? {{(CNT_W+1-RW){1'b0}}, rf_n[rf_rd[LOG_DEPTH-1:0]]} : {(CNT_W+1){1'b0}})
                 - {{CNT_W{1'b0}}, m_hs};
    if (err) begin
        run_v <= 1'b0;
    end
    if (!rst_n) begin
        wf_wr <= {(LOG_DEPTH+1){1'b0}};
        wf_rd <= {(LOG_DEPTH+1){1'b0}};
        rf_wr <= {(LOG_DEPTH+1){1'b0}};
        rf_rd <= {(LOG_DEPTH+1){1'b0}};
        run_v <= 1'b0;
        run_n <= {RW{1'b0}};
        run_a <= {WA_W{1'b0}};
        filled <= {GAP_W{1'b0}};
        owed <= {(CNT_W+1){1'b0}};
    end
end

assign req_addr = {rf_a[rf_rd[LOG_DEPTH-1:0]], 3'b000};
assign req_words = {{(CNT_W-RW){1'b0}}, rf_n[rf_rd[LOG_DEPTH-1:0]]};
assign m_data = wf_d[wf_rd[LOG_DEPTH-1:0]];
assign m_strb = wf_m[wf_rd[LOG_DEPTH-1:0]];
assign idle = wf_empty && rf_empty && !run_v && !owing;

endmodule

`resetall
