/*

Copyright (c) 2026 DTPU authors. Apache-2.0.

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Vector unit of contract 2.1 (docs/architecture.md "The vector unit"; golden model
 * dtpu.hw.units.vector): one VEC descriptor at a time, its words VEC0..VEC7 on `words`
 * (arriving after `start`; a start while the unit still writes the last one's results waits).
 *
 * Element-wise ADD / SUB / MUL (KIND 1, 2) over contiguous 8-bit tensors, LANES lanes (one
 * 64-bit word) a cycle through dtpu_vec_ew:
 *   BMODE 0  A and B of the same shape are read as alternating requests of up to MAX_BURST
 *            words (A's chunk, then B's), so that the read channel carries one stream; A's
 *            chunk waits in a MAX_BURST-word FIFO and each B word meets its A word.
 *   BMODE 1  the 1x1xC vector B (C <= LANES * 2^LOG_BCAST) is read first into the
 *            operand-B buffer (dtpu_vec_bcast), then A in one request; A's byte e meets B's
 *            byte e mod C.
 * TABLE (KIND 6): the 256-byte table at SRC_B is read first (32 words, as BMODE 1's vector)
 * into dtpu_vec_table, then A in one request; each byte of A is replaced by the table's byte
 * at its index, with the element-wise lanes' latency (the same output path and cycles).
 * Result words go through an output FIFO to the write master (w_*), one write request per
 * MAX_BURST words from DST (the last one partial; the tensor's last word carries the strobes
 * of its bytes only), each requested as its words are queued.
 * MEAN (KIND 5) and the pools (KIND 3, 4; any window, dtpu_vec_pool) read A
 * in one request into the pixel-word funnel (dtpu_vec_pix); their results go through the
 * packer (dtpu_vec_pack).
 * COPY (KIND 7) reads A in one request into the funnel too; its pixel words go the store
 * unit's way (dtpu_vec_copy: a word stage, dtpu_cl_store_pack, dtpu_cl_store_wq), pixel p to
 * DST + p*OW at any byte, one operation a pixel word; OW < C is BAD_FIELD once VEC7 is in
 * (as a pool's window: the funnel holds the words till then, nothing written).
 * A pool with a window holding no in-image tap or more open windows than its accumulators
 * hold, an AVG_POOL window of more than VEC_AVG_AREA taps (FH x FW), BMODE 1 with a kind other
 * than ADD / MUL, a broadcast vector longer than the buffer, a shape with a zero dimension, an
 * unaligned address (a COPY's DST may be any byte) or more than 2^32 words: `bad`
 * (BAD_FIELD), nothing written.
 *
 * Cycles (docs/architecture.md, the golden model's units.vector.timeline_step): `start` comes
 * with the header, the words after it; the first read request goes out START_WAIT + 3 cycles
 * after `start` (the sizes from VEC2 / VEC3), or once `go` rises; `done` pulses DONE_DELAY cycles after
 * the last read beat (the sequencer then takes the next header); a full burst is requested
 * WR_DELAY cycles after its last word enters the output FIFO, the last partial one a cycle
 * later. `busy` and `owns` stay high until every result word went to the write master,
 * `rd_owns` only until the last read word came; faults on the
 * reads (rd_resp, rd_timeout) are sticky in err_* until the next start and do not stop the
 * stream (the destination of a failing VEC is undefined).
 */
module dtpu_vec #
(
    parameter ADDR_W = 32,
    parameter LANES = 8,
    // requantizing lanes of ADD / SUB / MUL and of MEAN's tail (contract VEC_RQ_LANES: 8, 4,
    // 2 or 1): a word through dtpu_vec_ew, a tail word of dtpu_vec_mean in LANES / RQ_LANES
    // cycles
    parameter RQ_LANES = 8,
    parameter MAX_BURST = 16,
    // log2 of the operand-B buffer's words (contract VEC_BCAST_WORDS)
    parameter LOG_BCAST = 8,
    // log2 of the output FIFO's words (64: the element-wise lanes' 12-stage pipes and the
    // write requests WR_DELAY after a word is in keep up to ~35 words in flight at one a cycle)
    parameter LOG_OUT = 6,
    // log2 of MEAN's accumulator words (contract VEC_ROW_WORDS: C <= LANES * 2^LOG_ROW)
    parameter LOG_ROW = 10,
    // log2 of the pools' accumulator words (contract VEC_POOL_WORDS: the open output rows)
    parameter LOG_POOL = 12,
    // cycles from `start` to the first read request at the earliest (the descriptor's words
    // VEC0..VEC3 come one a cycle after it, then two cycles of sizes)
    parameter START_WAIT = 3,
    // the last operation to `done`: the contract's LAT_VEC (below)
    parameter DONE_DELAY = 16,
    parameter WR_DELAY = 4,
    // the contract's LAT_VEC: cycles after the last operation that still count as the unit's
    // (6 before the requantizers were pipelined, + PIPE_X)
    parameter LAT = 16,
    // COPY's write queue: log2 of its words (contract STORE_WQ_WORDS) and the longest gap it
    // fills with strobe-less words (SEQ_STORE_GAP), as the store unit's
    parameter LOG_WQ = 5,
    parameter MAX_GAP = 4
)
(
    input  wire                clk,
    input  wire                rst_n,

    input  wire                start,          // a VEC header was taken (its words follow)
    input  wire                go,             // the unit may read (the sequencer's wait done)
    input  wire [8*64-1:0]     words,          // VEC0..VEC7, as they arrive
    output reg                 busy,
    output wire                owns,           // reading / writing: the bus masters are its
    output wire                rd_owns,        // words still to come: the read port is its
    output reg                 done,           // one cycle: the sequencer may go on
    output wire                active,         // a stall-free cycle of the unit (not IDLE)
    output reg                 bad,            // BAD_FIELD (a cycle or two after start)
    output reg                 err_slverr,
    output reg                 err_decerr,
    output reg                 err_timeout,

    /* read requests and words (in request order) */
    output reg                 req_valid,
    input  wire                req_ready,
    output reg  [ADDR_W-1:0]   req_addr,
    output reg  [31:0]         req_words,
    input  wire                rd_valid,
    output wire                rd_ready,
    input  wire [63:0]         rd_data,
    input  wire [1:0]          rd_resp,
    input  wire                rd_timeout,

    /* write requests and words */
    output wire                wr_req_valid,
    input  wire                wr_req_ready,
    output wire [ADDR_W-1:0]   wr_req_addr,
    output wire [31:0]         wr_req_words,
    output wire                w_valid,
    input  wire                w_ready,
    output wire [63:0]         w_data,
    output wire [7:0]          w_strb
);

/* verilator lint_off UNUSEDPARAM */
`include "dtpu_cl_regs.vh"
/* verilator lint_on UNUSEDPARAM */

initial begin
    if (LANES != 8) begin
        $error("Error: LANES must be 8, one 64-bit word (instance %m)");
        $finish;
    end
    if (RQ_LANES != 8 && RQ_LANES != 4 && RQ_LANES != 2 && RQ_LANES != 1) begin
        $error("Error: RQ_LANES=%0d; accepted: 8, 4, 2 or 1 (instance %m)", RQ_LANES);
        $finish;
    end
    if (LOG_BCAST < 5) begin
        $error("Error: LOG_BCAST must be >= 5: a TABLE's 32 words are counted as B's (instance %m)");
        $finish;
    end
end

localparam [31:0] BURST = MAX_BURST;
localparam [31:0] TABLE_WORDS = 32;     // a TABLE's 256 bytes
localparam integer OUT_DEPTH = 1 << LOG_OUT;
// the requantizers' pipelines (one carry chain a stage, for the ECP5 proxy's 100 MHz): the
// element-wise lanes take 12 cycles instead of 2 (dtpu_vec_add_lane, dtpu_vec_mul_lane; TABLE
// keeps 2), MEAN's tail results come 10 cycles after their operation instead of 1
// (dtpu_vec_mean); LAT and DONE_DELAY are PIPE_X longer than before for every kind
localparam integer PIPE_X = 10;
localparam integer MN_X = 9;
// the pools' results come PL_X cycles later than their operation's next (dtpu_vec_pool's result
// pipe, OUT_X): they wait PIPE_X less PL_X for their write requests, as MEAN's MN_X
localparam integer PL_X = 5;

/* ---------------------------------------------------------------- fields */
// the descriptor's words as the sequencer holds them: they do not change until it takes the
// next header, after `done`; what the unit uses after that (the write side) is registered
/* verilator lint_off UNUSEDSIGNAL */
wire [63:0] v0 = words[0 +: 64];
wire [63:0] v1 = words[64 +: 64];
wire [63:0] v2 = words[128 +: 64];
wire [63:0] v3 = words[192 +: 64];
wire [63:0] v4 = words[256 +: 64];
wire [63:0] v5 = words[320 +: 64];
wire [63:0] v6 = words[384 +: 64];
wire [63:0] v7 = words[448 +: 64];      // (reserved bits; VEC7's pool fields)
/* verilator lint_on UNUSEDSIGNAL */
wire [3:0]  f_kind  = v0[DTPU_CL_VEC0_KIND_LSB +: DTPU_CL_VEC0_KIND_WIDTH];
wire        f_sgn   = v0[DTPU_CL_VEC0_SIGNED_LSB];
wire [1:0]  f_bmode = v0[DTPU_CL_VEC0_BMODE_LSB +: DTPU_CL_VEC0_BMODE_WIDTH];
wire [15:0] f_min   = v0[DTPU_CL_VEC0_ACT_MIN_LSB +: 16];
wire [15:0] f_max   = v0[DTPU_CL_VEC0_ACT_MAX_LSB +: 16];
wire [15:0] f_zo    = v0[DTPU_CL_VEC0_OUT_OFF_LSB +: 16];
wire [31:0] f_src_a = v1[DTPU_CL_VEC1_SRC_A_LSB +: 32];
wire [31:0] f_src_b = v1[DTPU_CL_VEC1_SRC_B_LSB +: 32];
wire [31:0] f_dst   = v2[DTPU_CL_VEC2_DST_LSB +: 32];
wire [15:0] f_n     = v2[DTPU_CL_VEC2_N_LSB +: 16];
wire [15:0] f_h     = v3[DTPU_CL_VEC3_H_LSB +: 16];
wire [15:0] f_w     = v3[DTPU_CL_VEC3_W_LSB +: 16];
wire [15:0] f_c     = v3[DTPU_CL_VEC3_C_LSB +: 16];
wire [31:0] f_m1    = v5[DTPU_CL_VEC5_M1_LSB +: 32];
wire [31:0] f_m2    = v5[DTPU_CL_VEC5_M2_LSB +: 32];
wire [31:0] f_mo    = v6[DTPU_CL_VEC6_MO_LSB +: 32];
wire [7:0]  f_sh1   = v6[DTPU_CL_VEC6_SH1_LSB +: 8];
wire [7:0]  f_sh2   = v6[DTPU_CL_VEC6_SH2_LSB +: 8];
wire [7:0]  f_sho   = v6[DTPU_CL_VEC6_SHO_LSB +: 8];
wire [15:0] f_o1    = v7[DTPU_CL_VEC7_IN1_OFF_LSB +: 16];
wire [15:0] f_o2    = v7[DTPU_CL_VEC7_IN2_OFF_LSB +: 16];
wire [7:0]  f_fh    = v4[DTPU_CL_VEC4_FH_LSB +: 8];
wire [7:0]  f_fw    = v4[DTPU_CL_VEC4_FW_LSB +: 8];
wire [7:0]  f_sh    = v4[DTPU_CL_VEC4_SH_LSB +: 8];
wire [7:0]  f_sw    = v4[DTPU_CL_VEC4_SW_LSB +: 8];
wire [7:0]  f_pt    = v4[DTPU_CL_VEC4_PT_LSB +: 8];
wire [7:0]  f_pl    = v4[DTPU_CL_VEC4_PL_LSB +: 8];
wire [15:0] f_oh    = v7[DTPU_CL_VEC7_OH_LSB +: 16];
wire [15:0] f_ow    = v7[DTPU_CL_VEC7_OW_LSB +: 16];


/* ---------------------------------------------------------------- sizes */
reg  [31:0] nh, wc;
reg  [31:0] hw;                     // H*W (MEAN's count)
reg  [31:0] nhw;                    // N*H*W (COPY's pixels; A < 4 GiB)
reg  [31:0] nc;                     // N*C (MEAN's result bytes)
reg  [31:0] noh, owc;               // N*OH, OW*C (a pool's result bytes: their product)
reg  [63:0] pbytes;
reg  [63:0] nhwc;                   // A's bytes
reg  [2:0]  tail_bytes;             // bytes of the last word (0: all 8)
// BMODE 1: ceil(C / LANES) words of B
wire [LOG_BCAST:0] b_words_c = f_c[LOG_BCAST+3:3] + {{LOG_BCAST{1'b0}}, f_c[2:0] != 3'd0};
// the words read before A: B's vector, or a TABLE's 256 bytes
wire [LOG_BCAST:0] b_first_words = kind_tab ? TABLE_WORDS[LOG_BCAST:0] : b_words_c;

localparam [2:0] S_IDLE = 3'd0, S_SZ1 = 3'd1, S_SZ2 = 3'd2, S_CHK = 3'd3, S_RUN = 3'd4,
                 S_WORDS = 3'd5;
reg  [2:0]  state;
reg         pend;                   // a start taken while the unit still wrote
reg  [3:0]  wcnt;
reg  [3:0]  age;                    // cycles since start (saturating): the descriptor is all in
reg         pdrain;                 // a pool's window found bad: its requested words dropped
reg         pchk;                   // a pool's window found good: its result size is set
// VEC4..VEC7 are in (the sequencer hands the eight words one a cycle from start: VEC7 seven
// cycles after it; the pool's sizes from VEC7 two cycles later)
wire        words_in = (age >= 4'd12);
wire [31:0] a_words_c = nhwc[34:3] + {31'd0, nhwc[2:0] != 3'd0};

localparam [3:0] K_ADD = 4'd1, K_MUL = 4'd2, K_AVG = 4'd3, K_MAX = 4'd4, K_MEAN = 4'd5,
                 K_TABLE = 4'd6, K_COPY = 4'd7;
// the running descriptor's KIND, latched as it starts: while it still writes, `words` may be
// the next descriptor's (`pend`), and its write side (COPY's ports or the result FIFO's) and
// its end (a COPY's, a pool's) must stay its own
reg  [3:0]  r_kind;
wire [3:0]  kind = (state == S_RUN) ? r_kind : f_kind;
wire kind_ew   = (kind == K_ADD) || (kind == K_MUL);
wire kind_tab  = (kind == K_TABLE);
wire kind_mean = (kind == K_MEAN);
wire kind_pool = (kind == K_AVG) || (kind == K_MAX);
wire kind_copy = (kind == K_COPY);
// the reducing kinds: A in one request through the pixel-word funnel
wire kind_red  = kind_mean || kind_pool;
// the kinds whose A goes through the funnel (COPY: to dtpu_vec_copy), one operation a word
wire kind_fun  = kind_red || kind_copy;
// the kinds whose VEC7 is checked once it is in (a pool's window, COPY's OW >= C)
wire kind_late = kind_pool || kind_copy;
// a pool's result words: ceil(N*OH*OW*C / 8)
wire [31:0] p_words = pbytes[34:3] + {31'd0, pbytes[2:0] != 3'd0};
// A and B of one shape in alternating chunks (BMODE 0 of ADD / MUL)
wire ab_chunks = kind_ew && (f_bmode == 2'd0);
// MEAN's result words: ceil(N*C / 8)
wire [31:0] nc_words = {3'd0, nc[31:3]} + {31'd0, nc[2:0] != 3'd0};
// B is read first, then A in one request: a broadcast vector (BMODE 1) or a TABLE's 32 words
wire b_first  = (f_bmode == 2'd1) || kind_tab;
// (a pool's window, VEC4 and VEC7, comes after the first request: checked late, below)
// (dtpu_vec_pool's geom_bad: a window without an in-image tap, or more accumulator words than
// it has)
wire pl_geom_bad;
wire pl_ready;                      // dtpu_vec_pool's sizes (and geom_bad) are made
wire pool_bad = pl_geom_bad || pbytes[63:35] != 29'd0;
// the pool takes pixel words once its window is known good (the funnel holds them till then)
wire pool_go = pchk;
wire copy_bad = (f_ow < f_c);
wire f_bad = !(kind_ew || kind_tab || kind_mean || kind_pool || kind_copy)
          || (kind_mean && {16'd0, f_c} > (32'd8 << LOG_ROW))
          || (f_bmode > 2'd1) || (f_bmode == 2'd1 && !kind_ew)
          || (f_n == 16'd0) || (f_h == 16'd0) || (f_w == 16'd0) || (f_c == 16'd0)
          || (f_src_a[2:0] != 3'd0) || (f_src_b[2:0] != 3'd0)
          || (f_dst[2:0] != 3'd0 && !kind_copy)
          || (nhwc[63:35] != 29'd0) || (kind_copy && nhwc[63:32] != 32'd0)
          || (f_bmode == 2'd1 && {16'd0, f_c} > (32'd8 << LOG_BCAST));

/* ---------------------------------------------------------------- read requests */
reg  [31:0] rq_left;                // A words still to request
reg  [ADDR_W-1:0] rq_a, rq_b;       // next addresses
reg         rq_b_next;              // BMODE 0: the B chunk of the A chunk just requested
reg  [31:0] rq_chunk;               // its words
reg         first_go;               // the first request goes out (the counters start)
wire [31:0] chunk = (rq_left < BURST) ? rq_left : BURST;

/* ---------------------------------------------------------------- receive side */
reg  [31:0] rx_left;                // A words still to come (= results still to admit)
reg  [31:0] rx_cnt;                 // BMODE 0: words left in the current chunk
reg  [31:0] rx_chunk;               // BMODE 0: the current chunk's words
reg         rx_b;                   // BMODE 0: the current chunk is B's
reg  [LOG_BCAST:0] rx_bvec;         // BMODE 1: B vector words still to come

// A chunk FIFO (BMODE 0)
localparam integer LA = $clog2(MAX_BURST);
reg  [63:0] afifo [0:MAX_BURST-1];
reg  [LA:0] af_wr, af_rd;
wire        af_empty = (af_wr == af_rd);
wire        af_full  = (af_wr[LA-1:0] == af_rd[LA-1:0]) && (af_wr[LA] != af_rd[LA]);

// operand-B buffer (BMODE 1): the window of B for the next A word
wire [63:0] b_q;

// output FIFO and its room (words queued + in the lanes)
reg  [63:0] ofifo [0:OUT_DEPTH-1];
reg  [LOG_OUT:0] of_wr, of_rd;
reg  [LOG_OUT+1:0] room_used;
wire        room = (room_used < OUT_DEPTH[LOG_OUT+1:0]);
// MEAN and the pools count their words as they are queued: up to three are still in their
// pipelines, and MEAN's requantizers hold MN_X more (dtpu_vec_mean's tail pipe), the pools'
// result pipe PL_X more (dtpu_vec_pool's)
localparam [31:0]        RES_M32 = 3 + MN_X;
localparam [31:0]        RES_P32 = 3 + PL_X;
localparam [LOG_OUT+1:0] RES_P = RES_P32[LOG_OUT+1:0];
localparam [LOG_OUT+1:0] RES_M = RES_M32[LOG_OUT+1:0];
wire        room_m = (room_used + (kind_mean ? RES_M : RES_P) < OUT_DEPTH[LOG_OUT+1:0]);

wire        running = (state == S_RUN);
assign owns = running;
// every read word counts in rx_left (A's, and B's through the A words they are admitted with,
// or a BMODE 1 vector read before A): none left, none owed, the read port is free for a LOAD
// while the results drain to the write master
assign rd_owns = running && rx_left != 32'd0;
wire        in_a0   = running && ab_chunks && !rx_b && rx_left != 32'd0;
wire        in_b0   = running && ab_chunks && rx_b;
wire        in_m    = running && kind_fun && rx_left != 32'd0 && !pdrain; // MEAN, pools, COPY: the funnel
wire        in_d    = running && pdrain && rx_left != 32'd0;      // a bad pool: A dropped
wire        in_bv   = running && b_first && rx_bvec != {(LOG_BCAST+1){1'b0}};
wire        in_a1   = running && b_first && rx_bvec == {(LOG_BCAST+1){1'b0}}
                   && rx_left != 32'd0;
// ADD / SUB / MUL: every operand beat waits for the element-wise lanes (a word pair keeps them
// LANES / RQ_LANES cycles: contract VEC_RQ_LANES), so the unit's cycles are its beats plus the
// lanes' extra cycles of each word, one after the other (the golden model's formula)
wire        ew_ready;
wire        ew_free = !kind_ew || ew_ready;
assign rd_ready = ew_free && ((in_a0 && !af_full) || (in_b0 && !af_empty && room) || in_bv || (in_a1 && room)
               || (in_m && pix_in_ready) || in_d);
wire        beat    = rd_valid && rd_ready;
wire        admit   = beat && (in_b0 || in_a1);          // a word pair into the lanes
wire [63:0] op_a    = in_b0 ? afifo[af_rd[LA-1:0]] : rd_data;
wire [63:0] op_b    = in_b0 ? rd_data : b_q;
wire        last_beat = admit && rx_left == 32'd1;

wire        ew_valid;
wire        ew_busy;
wire [63:0] ew_y;
// MEAN's tail requantizes in the MUL lanes' requantizers (dtpu_vec_mul_lane: MEAN and MUL
// never share a descriptor, and a descriptor ends only once its last result is written)
wire                   mn_rq_sel;
wire [32*RQ_LANES-1:0] mn_rq_x;
wire [8*RQ_LANES-1:0]  mn_rq_y8;

dtpu_vec_ew #(
    .LANES(LANES),
    .RQ_LANES(RQ_LANES)
)
ew_inst (
    .clk(clk),
    .rst(!rst_n),
    .sgn(f_sgn),
    .mul(kind == 4'd2),
    .in1_off(f_o1),
    .in2_off(f_o2),
    .m1(f_m1),
    .m2(f_m2),
    .mo(f_mo),
    .sh1(f_sh1),
    .sh2(f_sh2),
    .sho(f_sho),
    .out_off(f_zo),
    .act_min(f_min),
    .act_max(f_max),
    .in_valid(admit && !kind_tab),
    .in_ready(ew_ready),
    .busy(ew_busy),
    .a(op_a),
    .b(op_b),
    .out_valid(ew_valid),
    .y(ew_y),
    .alt_sel(mn_rq_sel),
    .alt_x(mn_rq_x),
    .rq_y8(mn_rq_y8)
);

wire        tab_valid;
wire [63:0] tab_y;

dtpu_vec_table #(
    .LANES(LANES)
)
table_inst (
    .clk(clk),
    .rst(!rst_n),
    .clear(first_go),
    .w_valid(beat && in_bv && kind_tab),
    .w_data(rd_data),
    .in_valid(admit && kind_tab),
    .a(op_a),
    .out_valid(tab_valid),
    .y(tab_y)
);

// COPY's side (dtpu_vec_copy, below): it takes a pixel word, its operations, all written
wire        cp_ready, cp_op, cp_last_op, cp_idle;

/* ---- MEAN: the stream as pixel words, the sums, their requantization, the packed bytes */
wire        pix_in_ready, pix_valid, pix_ready, pix_last, mean_ready, pool_ready;
wire [63:0] pix_data;
wire        mn_valid, mn_end, mn_op, mn_last_op;
wire [63:0] mn_data;
wire [3:0]  mn_bytes;
wire        pk_valid;
wire [63:0] pk_data;

dtpu_vec_pix pix_inst (
    .clk(clk),
    .rst(!rst_n),
    .clear(first_go),
    .c(f_c),
    .in_valid(rd_valid && in_m),
    .in_ready(pix_in_ready),
    .in_data(rd_data),
    .out_valid(pix_valid),
    .out_ready(pix_ready),
    .out_data(pix_data),
    .out_last(pix_last)
);

dtpu_vec_mean #(
    .LANES(LANES),
    .RQ_LANES(RQ_LANES),
    .LOG_ROW(LOG_ROW),
    .SHARE_RQ(1)
)
mean_inst (
    .clk(clk),
    .rst(!rst_n),
    .clear(first_go),
    .sgn(f_sgn),
    .c(f_c),
    .hw(hw),
    .n(f_n),
    .in_off(f_o1),
    .mo(f_mo),
    .sho(f_sho),
    .out_off(f_zo),
    .act_min(f_min),
    .act_max(f_max),
    .in_valid(pix_valid && running && kind_mean),
    .in_ready(mean_ready),
    .in_data(pix_data),
    .in_last(pix_last),
    .room(room_m),
    .out_valid(mn_valid),
    .out_data(mn_data),
    .out_bytes(mn_bytes),
    .out_end(mn_end),
    .op(mn_op),
    .last_op(mn_last_op),
    .rq_sel(mn_rq_sel),
    .rq_x(mn_rq_x),
    .rq_y8(mn_rq_y8)
);

wire        pl_valid, pl_end, pl_op, pl_last_op;
wire [63:0] pl_data;
wire [3:0]  pl_bytes;

dtpu_vec_pool #(
    .LANES(LANES),
    .LOG_ROW(LOG_POOL),
    .MAX_AREA(DTPU_CL_VEC_AVG_AREA)
)
pool_inst (
    .clk(clk),
    .rst(!rst_n),
    .clear(first_go),
    .sgn(f_sgn),
    .avg(kind == K_AVG),
    .n(f_n),
    .h(f_h),
    .w(f_w),
    .c(f_c),
    .fh(f_fh),
    .fw(f_fw),
    .sh(f_sh),
    .sw(f_sw),
    .pt(f_pt),
    .pl(f_pl),
    .oh(f_oh),
    .ow(f_ow),
    .act_min(f_min),
    .act_max(f_max),
    .geom_bad(pl_geom_bad),
    .ready(pl_ready),
    .in_valid(pix_valid && running && kind_pool && pool_go),
    .in_ready(pool_ready),
    .in_data(pix_data),
    .in_last(pix_last),
    .room(room_m),
    .out_valid(pl_valid),
    .out_data(pl_data),
    .out_bytes(pl_bytes),
    .out_end(pl_end),
    .op(pl_op),
    .last_op(pl_last_op)
);

// the reducing kind's results, operations and last operation (one kind a descriptor)
assign pix_ready = kind_pool ? pool_ready && pool_go : kind_copy ? cp_ready && pool_go : mean_ready;
wire        m_valid   = mn_valid || pl_valid;
wire [63:0] m_data    = pl_valid ? pl_data : mn_data;
wire [3:0]  m_bytes   = pl_valid ? pl_bytes : mn_bytes;
wire        m_end     = mn_end || pl_end;
wire        m_op      = mn_op || pl_op || cp_op;
wire        m_last_op = mn_last_op || pl_last_op || cp_last_op;

dtpu_vec_pack pack_inst (
    .clk(clk),
    .rst(!rst_n),
    .clear(first_go),
    .in_valid(m_valid),
    .in_data(m_data),
    .in_bytes(m_bytes),
    .in_end(m_end),
    .out_valid(pk_valid),
    .out_data(pk_data)
);

// a result word: the element-wise lanes', the table's (same latency, one kind a descriptor)
// or MEAN's packed bytes
wire        res_valid = ew_valid || tab_valid || pk_valid;
wire [63:0] res_y     = tab_valid ? tab_y : pk_valid ? pk_data : ew_y;

/* ---- COPY: the pixel words to DST + p*OW through the store unit's realigner and queue */
wire        cp_wr_req_valid, cp_w_valid;
wire [ADDR_W-1:0] cp_wr_req_addr;
wire [31:0] cp_wr_req_words;
wire [63:0] cp_w_data;
wire [7:0]  cp_w_strb;
reg         cp_fin;                 // its last pixel word taken
reg         pl_ofin, pl_wfin;       // a pool's last operation done / every result word written

dtpu_vec_copy #(
    .ADDR_W(ADDR_W),
    .MAX_RUN(MAX_BURST),
    .LOG_WQ(LOG_WQ),
    .MAX_GAP(MAX_GAP)
)
copy_inst (
    .clk(clk),
    .rst(!rst_n),
    .clear(first_go),
    .dst(f_dst[ADDR_W-1:0]),
    .ow(f_ow),
    .c_low(f_c[3:0]),
    .pixels(nhw),
    .s_valid(pix_valid && running && kind_copy && pool_go),
    .s_ready(cp_ready),
    .s_data(pix_data),
    .s_last(pix_last),
    .op(cp_op),
    .last_op(cp_last_op),
    .wr_req_valid(cp_wr_req_valid),
    .wr_req_ready(wr_req_ready),
    .wr_req_addr(cp_wr_req_addr),
    .wr_req_words(cp_wr_req_words),
    .w_valid(cp_w_valid),
    .w_ready(w_ready),
    .w_data(cp_w_data),
    .w_strb(cp_w_strb),
    .idle(cp_idle)
);

/* ---------------------------------------------------------------- write side */
reg  [31:0] wq_total;               // result words
reg  [31:0] wq_in;                  // words queued (delayed by WR_DELAY)
reg  [31:0] wq_req;                 // words requested
reg  [ADDR_W-1:0] wq_addr;
// (a result's write counted WR_DELAY cycles after it is in, as the contract's cycles have it
// from the last operation: the kinds whose results come sooner than the element-wise lanes'
// 12-stage pipes wait PIPE_X more, MEAN PIPE_X less its tail pipe's MN_X, the pools PIPE_X
// less their result pipe's PL_X)
reg  [WR_DELAY+PIPE_X:0] push_dly;
reg         part_go;                // the last partial burst: a cycle after its words
wire [31:0] wq_open = wq_in - wq_req;
wire [31:0] wq_rest = wq_total - wq_req;
wire        w_last_word = (of_rd_cnt == wq_total - 32'd1);
reg  [31:0] of_rd_cnt;              // words handed to the write master
wire        of_empty = (of_wr == of_rd);
wire        e_w_valid = !of_empty;
wire        w_hs = e_w_valid && w_ready && !kind_copy;
reg         e_wr_req_valid;
reg  [ADDR_W-1:0] e_wr_req_addr;
reg  [31:0] e_wr_req_words;
// the write ports: the result FIFO's requests and words, or COPY's (dtpu_vec_copy)
assign wr_req_valid = kind_copy ? cp_wr_req_valid : e_wr_req_valid;
assign wr_req_addr  = kind_copy ? cp_wr_req_addr : e_wr_req_addr;
assign wr_req_words = kind_copy ? cp_wr_req_words : e_wr_req_words;
assign w_valid = kind_copy ? cp_w_valid : e_w_valid;
assign w_data  = kind_copy ? cp_w_data : ofifo[of_rd[LOG_OUT-1:0]];
assign w_strb  = kind_copy ? cp_w_strb
               : (w_last_word && tail_bytes != 3'd0) ? (8'hFF >> (4'd8 - {1'b0, tail_bytes}))
                                                     : 8'hFF;

reg  [DONE_DELAY:0] done_dly;
reg  [LAT-1:0]      lat_dly;
// the contract's stall-free cycles: one an operand beat, and LAT_VEC after the last one
// MEAN and the pools: one an operation (accumulate or requantize) instead of one a beat
// ADD / SUB / MUL with fewer requantizing lanes: also the cycles the lanes work a word's later
// groups (no beat is taken then)
assign active = (kind_fun ? m_op : beat) || (kind_ew && ew_busy) || (lat_dly != {LAT{1'b0}});
// the event LAT_VEC counts from: the last operand beat, MEAN's (a pool's) last operation. Their
// operations start the cycle after the first beat (the funnel's register), a cycle later than
// the element-wise lanes' admits, so its `done` and write requests take taps a cycle shorter
// (ADD / SUB / MUL: the cycle the lanes take the last word's last group, LANES / RQ_LANES - 1
// cycles after its beat)
localparam integer STEPS = LANES / RQ_LANES;
wire        ew_last;
generate
    if (STEPS == 1) begin : ew_last_full
        assign ew_last = last_beat;
    end else begin : ew_last_part
        /* verilator lint_off UNUSEDSIGNAL */
        reg [STEPS-1:0] lb_dly;             // (its top bit unused: a delay of STEPS - 1)
        /* verilator lint_on UNUSEDSIGNAL */
        always @(posedge clk) begin
            lb_dly <= {lb_dly[STEPS-2:0], last_beat && !kind_tab};
            if (!rst_n) begin
                lb_dly <= {STEPS{1'b0}};
            end
        end
        assign ew_last = kind_tab ? last_beat : lb_dly[STEPS-2];
    end
endgenerate
wire        last_evt = kind_fun ? m_last_op : ew_last;

always @(posedge clk) begin
    done <= 1'b0;
    first_go <= 1'b0;
    if (start) begin
        pend <= 1'b1;
    end
    if (start) begin
        age <= 4'd0;
    end else if (age != 4'hF) begin
        age <= age + 4'd1;
    end
    // a pool's window and result size: VEC4 / VEC7 arrive after the first request (VEC7 seven
    // cycles after start), so its sizes are made from the words as they are, every cycle, and
    // taken once they are all in and dtpu_vec_pool's are made (`ready`: its dividers, ~13
    // cycles after VEC4, long before A's first beat); its result words (wq_total, the last
    // word's strobes) are set then, before its first result. A pool dtpu_vec_pool cannot take
    // (geom_bad): BAD_FIELD, the words already requested are dropped, nothing is written.
    // (`pend`: the words are the next descriptor's while this one still writes.)
    noh    <= {16'd0, f_n} * {16'd0, f_oh};
    owc    <= {16'd0, f_ow} * {16'd0, f_c};
    pbytes <= {32'd0, noh} * {32'd0, owc};
    if (running && kind_late && !pend && !pchk && !pdrain && words_in
            && (pl_ready || !kind_pool)) begin
        if (kind_pool ? pool_bad : copy_bad) begin
            bad    <= 1'b1;
            pdrain <= 1'b1;
        end else begin
            pchk       <= 1'b1;
            if (kind_pool) begin
                wq_total   <= p_words;
                tail_bytes <= pbytes[2:0];
            end
        end
    end
    if (running && pdrain && rx_left == 32'd0 && !req_valid) begin
        pdrain <= 1'b0;
        busy   <= 1'b0;
        state  <= S_IDLE;
    end
    done_dly <= {done_dly[DONE_DELAY-1:0], last_evt};
    lat_dly  <= {lat_dly[LAT-2:0], last_evt};
    push_dly <= {push_dly[WR_DELAY+PIPE_X-1:0], res_valid};
    if (kind_fun ? done_dly[DONE_DELAY - 2] : done_dly[DONE_DELAY - 1]) begin
        done <= 1'b1;
    end

    case (state)
    S_IDLE: begin
        if (start || pend) begin
            pend <= 1'b0;
            bad <= 1'b0;
            err_slverr <= 1'b0;
            err_decerr <= 1'b0;
            err_timeout <= 1'b0;
            busy <= 1'b1;
            wcnt <= 4'd0;
            state <= S_WORDS;
        end
    end
    S_WORDS: begin                  // VEC2, VEC3 arrive
        wcnt <= wcnt + 4'd1;
        if (wcnt + 4'd1 >= START_WAIT[3:0]) begin
            state <= S_SZ1;
        end
    end
    S_SZ1: begin
        nh <= {16'd0, f_n} * {16'd0, f_h};
        hw <= {16'd0, f_h} * {16'd0, f_w};
        nc <= {16'd0, f_n} * {16'd0, f_c};
        wc <= {16'd0, f_w} * {16'd0, f_c};
        state <= S_SZ2;
    end
    S_SZ2: begin
        nhwc <= {32'd0, nh} * {32'd0, wc};
        nhw  <= nh * {16'd0, f_w};
        state <= S_CHK;
    end
    default: ;
    endcase

    if (state == S_CHK) begin
        tail_bytes <= kind_mean ? nc[2:0] : nhwc[2:0];     // (a pool's: set late, above)
        if (f_bad) begin
            bad   <= 1'b1;
            busy  <= 1'b0;
            state <= S_IDLE;
        end else if (go) begin
            first_go <= 1'b1;
            r_kind <= f_kind;
            state <= S_RUN;
        end
    end

    /* ---- requests */
    if (req_valid && req_ready) begin
        req_valid <= 1'b0;
    end
    if (state == S_CHK && !f_bad && go) begin
        // the first request; the counters start
        rq_left   <= a_words_c;
        rq_a      <= f_src_a[ADDR_W-1:0];
        rq_b      <= f_src_b[ADDR_W-1:0];
        rq_b_next <= 1'b0;
        rx_left   <= a_words_c;
        rx_b      <= 1'b0;
        rx_cnt    <= (a_words_c < BURST) ? a_words_c : BURST;
        rx_chunk  <= (a_words_c < BURST) ? a_words_c : BURST;
        rx_bvec   <= b_first ? b_first_words : {(LOG_BCAST+1){1'b0}};
        wq_total  <= kind_mean ? nc_words : kind_late ? 32'd0 : a_words_c;  // (pool: late)
        pchk      <= 1'b0;
        pl_ofin   <= 1'b0;
        pl_wfin   <= 1'b0;
        wq_in     <= 32'd0;
        wq_req    <= 32'd0;
        wq_addr   <= f_dst[ADDR_W-1:0];
        of_rd_cnt <= 32'd0;
        part_go   <= 1'b0;
        req_valid <= 1'b1;
        if (kind_fun) begin             // A in one request
            req_addr  <= f_src_a[ADDR_W-1:0];
            req_words <= a_words_c;
            rq_left   <= 32'd0;
        end else if (b_first) begin
            req_addr  <= f_src_b[ADDR_W-1:0];
            req_words <= {{(31-LOG_BCAST){1'b0}}, b_first_words};
        end else begin
            req_addr  <= f_src_a[ADDR_W-1:0];
            req_words <= (a_words_c < BURST) ? a_words_c : BURST;
            rq_left   <= a_words_c - ((a_words_c < BURST) ? a_words_c : BURST);
            rq_a      <= f_src_a[ADDR_W-1:0] + {((a_words_c < BURST) ? a_words_c[ADDR_W-4:0]
                                                  : BURST[ADDR_W-4:0]), 3'b000};
            rq_chunk  <= (a_words_c < BURST) ? a_words_c : BURST;
            rq_b_next <= 1'b1;
        end
    end else if (running && (!req_valid || req_ready)) begin
        if (b_first) begin
            if (rq_left != 32'd0) begin          // A in one request after B's words
                req_valid <= 1'b1;
                req_addr  <= rq_a;
                req_words <= rq_left;
                rq_left   <= 32'd0;
            end
        end else if (rq_b_next) begin
            req_valid <= 1'b1;
            req_addr  <= rq_b;
            req_words <= rq_chunk;
            rq_b      <= rq_b + {rq_chunk[ADDR_W-4:0], 3'b000};
            rq_b_next <= 1'b0;
        end else if (rq_left != 32'd0) begin
            req_valid <= 1'b1;
            req_addr  <= rq_a;
            req_words <= chunk;
            rq_a      <= rq_a + {chunk[ADDR_W-4:0], 3'b000};
            rq_left   <= rq_left - chunk;
            rq_chunk  <= chunk;
            rq_b_next <= 1'b1;
        end
    end

    /* ---- receive */
    if (beat) begin
        if (rd_resp == 2'b10) err_slverr <= 1'b1;
        if (rd_resp == 2'b11) err_decerr <= 1'b1;
        if (rd_timeout)       err_timeout <= 1'b1;
    end
    if (beat && in_a0) begin
        afifo[af_wr[LA-1:0]] <= rd_data;
        af_wr <= af_wr + 1'b1;
        if (rx_cnt == 32'd1) begin
            rx_b   <= 1'b1;
            rx_cnt <= rx_chunk;            // the chunk's words again, for B
        end else begin
            rx_cnt <= rx_cnt - 32'd1;
        end
    end
    if (beat && in_b0) begin
        af_rd <= af_rd + 1'b1;
        if (rx_cnt == 32'd1) begin
            rx_b     <= 1'b0;
            rx_cnt   <= ((rx_left - 32'd1) < BURST) ? (rx_left - 32'd1) : BURST;
            rx_chunk <= ((rx_left - 32'd1) < BURST) ? (rx_left - 32'd1) : BURST;
        end else begin
            rx_cnt <= rx_cnt - 32'd1;
        end
    end
    if (beat && in_bv) begin
        rx_bvec <= rx_bvec - 1'b1;
    end
    if (admit || (beat && (in_m || in_d))) begin
        rx_left <= rx_left - 32'd1;
    end

    /* ---- the lanes' results, the write requests */
    if (res_valid) begin
        ofifo[of_wr[LOG_OUT-1:0]] <= res_y;
        of_wr <= of_wr + 1'b1;
    end
    if (kind_mean ? push_dly[WR_DELAY - 2 + PIPE_X - MN_X]
        : kind_pool ? push_dly[WR_DELAY - 2 + PIPE_X - PL_X]
        : kind_tab ? push_dly[WR_DELAY - 1 + PIPE_X] : push_dly[WR_DELAY - 1]) begin
        wq_in <= wq_in + 32'd1;
    end
    if (e_wr_req_valid && wr_req_ready) begin
        e_wr_req_valid <= 1'b0;
    end
    part_go <= running && wq_in == wq_total && wq_rest != 32'd0 && wq_rest < BURST;
    if (running && !kind_copy && (!e_wr_req_valid || wr_req_ready)) begin
        if (wq_open >= BURST || (part_go && wq_in == wq_total && wq_rest != 32'd0)) begin
            e_wr_req_valid <= 1'b1;
            e_wr_req_addr  <= wq_addr;
            e_wr_req_words <= (wq_open >= BURST) ? BURST : wq_open;
            wq_addr      <= wq_addr + {((wq_open >= BURST) ? BURST[ADDR_W-4:0]
                                         : wq_open[ADDR_W-4:0]), 3'b000};
            wq_req       <= wq_req + ((wq_open >= BURST) ? BURST : wq_open);
            part_go      <= 1'b0;
        end
    end
    if (w_hs) begin
        of_rd <= of_rd + 1'b1;
        of_rd_cnt <= of_rd_cnt + 32'd1;
    end
    room_used <= room_used + {{(LOG_OUT+1){1'b0}}, kind_red ? res_valid : admit}
                           - {{(LOG_OUT+1){1'b0}}, w_hs};
    if (running && w_hs && of_rd_cnt == wq_total - 32'd1) begin
        if (!kind_pool || pl_ofin || pl_last_op) begin
            busy  <= 1'b0;
            state <= S_IDLE;
        end else begin
            pl_wfin <= 1'b1;
        end
    end
    // a pool whose last result comes before its last operations (pixel words no window reads
    // after it): every word written, the unit is done with its last operation
    if (pl_last_op) begin
        pl_ofin <= 1'b1;
    end
    if (running && kind_pool && pl_wfin && (pl_ofin || pl_last_op)) begin
        pl_wfin <= 1'b0;
        busy    <= 1'b0;
        state   <= S_IDLE;
    end
    // COPY: its last pixel word taken, every word handed to the write master
    if (cp_last_op) begin
        cp_fin <= 1'b1;
    end
    if (running && kind_copy && cp_fin && cp_idle) begin
        cp_fin <= 1'b0;
        busy   <= 1'b0;
        state  <= S_IDLE;
    end

    if (!rst_n) begin
        state        <= S_IDLE;
        busy         <= 1'b0;
        done         <= 1'b0;
        bad          <= 1'b0;
        err_slverr   <= 1'b0;
        err_decerr   <= 1'b0;
        err_timeout  <= 1'b0;
        req_valid    <= 1'b0;
        e_wr_req_valid <= 1'b0;
        cp_fin       <= 1'b0;
        pl_ofin      <= 1'b0;
        pl_wfin      <= 1'b0;
        first_go     <= 1'b0;
        pend         <= 1'b0;
        pdrain       <= 1'b0;
        pchk         <= 1'b0;
        age          <= 4'hF;
        done_dly     <= {(DONE_DELAY+1){1'b0}};
        lat_dly      <= {LAT{1'b0}};
        push_dly     <= {(WR_DELAY+PIPE_X+1){1'b0}};
        af_wr        <= {(LA+1){1'b0}};
        af_rd        <= {(LA+1){1'b0}};
        of_wr        <= {(LOG_OUT+1){1'b0}};
        of_rd        <= {(LOG_OUT+1){1'b0}};
        room_used    <= {(LOG_OUT+2){1'b0}};
        rq_left      <= 32'd0;
        rq_b_next    <= 1'b0;
        rx_left      <= 32'd0;
        rx_b         <= 1'b0;
        rx_bvec      <= {(LOG_BCAST+1){1'b0}};
        wq_total     <= 32'd0;
        wq_in        <= 32'd0;
        wq_req       <= 32'd0;
        part_go      <= 1'b0;
    end
end

dtpu_vec_bcast #(
    .LOG_WORDS(LOG_BCAST)
)
bcast_inst (
    .clk(clk),
    .rst(!rst_n),
    .clear(first_go),
    .c(f_c),
    .w_valid(beat && in_bv && !kind_tab),
    .w_data(rd_data),
    .take(admit && in_a1 && !kind_tab),
    .b(b_q)
);

endmodule

`resetall
