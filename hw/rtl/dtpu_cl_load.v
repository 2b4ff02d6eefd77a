/*

Copyright (c) 2026 DTPU authors. Apache-2.0.

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Activation stream of the contract 2.0 load unit (docs/contract2.md "Activation gather";
 * golden model: dtpu.hw.cmdlist.Executor._gather). On `start` it takes a RUN descriptor's
 * ACT0..ACT4 fields, reads the NHWC tensor at SRC through a read master's request / in-order
 * word ports (those of dtpu_axi_rd) and streams the 64-bit activation words on m_* (m_last on
 * the final word), word for word the golden model's sequence (modes WINDOWS and CHANNELS; NONE
 * streams nothing).
 *
 * Why it is built this way: the memory model of contract 2.0 has the stream deliver one word
 * per cycle after the first beat's latency (85 cycles), so the unit keeps up to 2^EF_LOG2
 * elements in flight and asks for whole runs of consecutive words, several requests at once.
 *
 *  1. Element indexes come from dtpu_act_agu (one element per cycle). In *word mode* every
 *     word of the stream is one aligned DDR word or a whole PAD word: WINDOWS with C % LANES == 0
 *     (then K = KH*KW*C and KP are whole words and the LANES lanes of a word are LANES
 *     consecutive channels of one tap), CHANNELS with REP == 1, C, CH0 and CHANNELS multiples of
 *     LANES; SRC 8-byte aligned. The AGU then runs on the fields rescaled to 64-bit elements
 *     (LANES 1, C/LANES, KP/LANES; K0/K1 count words already; CHANNELS: CH0, CHANNELS, CV
 *     divided by LANES) and gives one WORD index per cycle. In *lane mode* (anything else) it
 *     gives one lane per cycle and the lanes are packed into words (1/LANES word per cycle).
 *  2. Address stage: word address SRC/8 + index (word mode) or (SRC + index*ESIZE)/8 and the
 *     byte offset (lane mode).
 *  3. Run builder: consecutive word addresses are merged into a run (one request of up to
 *     MAX_BURST words); an element on the same word as the beat before shares that beat (lanes
 *     of one DDR word in lane mode); PAD elements need no beat. A run is requested when it is
 *     MAX_BURST long, when the next address does not continue it, or on any cycle no element
 *     joins it (a stall, the end of the stream): so a full element FIFO never waits for a beat
 *     that was not asked for (no deadlock), and a stream's last run goes out at once. Requests
 *     wait in a 2^RQ_LOG2 FIFO for the master (which keeps its own MAX_OUTSTANDING bursts).
 *  4. Element FIFO (2^EF_LOG2 entries of {new beat, PAD, byte offset, last}) in step with the
 *     returned words, and the packer: a `new` element takes the next returned word, the others
 *     reuse the word before; word mode outputs the word (or the PAD word), lane mode shifts
 *     the element's ESIZE bytes into the word being packed.
 *
 * Errors: a returned word with RRESP SLVERR/DECERR or m_timeout sets err_slverr / err_decerr
 * / err_timeout (sticky until the next start); the unit then stops every stream in flight (the
 * word being offered and everything after it are dropped), resets the AGU, drops the requests not yet
 * taken by the master, takes and drops every word still owed for the requests it took, and
 * ends with `done`. A start with an unknown MODE, LANES*ESIZE != 8, SRC not a multiple of ESIZE
 * or (WINDOWS) KP not a multiple of LANES sets err_field and ends at once; the other BAD_FIELD checks of the
 * golden model are not made here.
 *
 * Control: start is taken when start_ready: when idle, and (look-ahead) while a stream runs
 * once the AGU has walked it and at most one stream is in flight, so that the next stream's AGU
 * setup (22 cycles WINDOWS, 37 CHANNELS) and first run overlap the tail of the one before. The
 * two streams' own settings (SRC, word mode, ESIZE, PAD) sit in two banks picked by the stream's
 * parity, which every element carries to the packer. `done` pulses once per stream in start
 * order, one cycle after its last word was taken; a stream without words (MODE NONE, bad fields,
 * an empty AGU stream) once every stream before it has ended; after a fault one pulse ends
 * every stream in flight. `busy` while any stream is in flight.
 */
module dtpu_cl_load #
(
    // field widths of contract.json contract2.desc_fields (ACT0..ACT4)
    parameter MODE_W = 4,
    parameter LANES_W = 4,
    parameter ESIZE_W = 4,
    parameter PAD_W = 16,
    parameter ADDR_W = 32,          // ACT0.SRC (byte address) and the element index
    parameter DIM_W = 16,
    parameter KER_W = 4,
    parameter KP_W = 16,
    parameter MODE_NONE = 0,
    parameter MODE_WINDOWS = 1,
    parameter MODE_CHANNELS = 2,
    // read master: width of a request's word count, longest run requested
    parameter CNT_W = 32,
    parameter MAX_BURST = 16,
    // element FIFO (elements in flight) and request FIFO depths, log2
    parameter EF_LOG2 = 8,
    parameter RQ_LOG2 = 2
)
(
    input  wire                 clk,
    input  wire                 rst_n,

    /* control */
    input  wire                 start,
    output wire                 start_ready,
    output wire                 busy,
    output reg                  done,
    output reg                  word_mode,      // the stream runs in word mode
    output reg                  err_slverr,
    output reg                  err_decerr,
    output reg                  err_timeout,
    output reg                  err_field,

    /* ACT fields, sampled on start */
    input  wire [ADDR_W-1:0]    cfg_src,
    input  wire [MODE_W-1:0]    cfg_mode,
    input  wire [LANES_W-1:0]   cfg_lanes,
    input  wire [ESIZE_W-1:0]   cfg_esize,
    input  wire [PAD_W-1:0]     cfg_pad,
    input  wire [DIM_W-1:0]     cfg_n,
    input  wire [DIM_W-1:0]     cfg_h,
    input  wire [DIM_W-1:0]     cfg_w,
    input  wire [DIM_W-1:0]     cfg_c,
    input  wire [KER_W-1:0]     cfg_kh,
    input  wire [KER_W-1:0]     cfg_kw,
    input  wire [KER_W-1:0]     cfg_sy,
    input  wire [KER_W-1:0]     cfg_sx,
    input  wire [KER_W-1:0]     cfg_dy,
    input  wire [KER_W-1:0]     cfg_dx,
    input  wire [KER_W-1:0]     cfg_pt,
    input  wire [KER_W-1:0]     cfg_pl,
    input  wire [DIM_W-1:0]     cfg_oh,
    input  wire [DIM_W-1:0]     cfg_ow,
    input  wire [KP_W-1:0]      cfg_kp,
    input  wire [KP_W-1:0]      cfg_k0,
    input  wire [KP_W-1:0]      cfg_k1,
    input  wire [KP_W-1:0]      cfg_nchunk,
    input  wire [KP_W-1:0]      cfg_cv,

    /* read requests (to a dtpu_axi_rd or an arbiter in front of one) */
    output wire                 req_valid,
    input  wire                 req_ready,
    output wire [ADDR_W-1:0]    req_addr,
    output wire [CNT_W-1:0]     req_words,

    /* returned words, in request order */
    input  wire                 rd_valid,
    output wire                 rd_ready,
    input  wire [63:0]          rd_data,
    input  wire [1:0]           rd_resp,
    input  wire                 rd_timeout,
    /* verilator lint_off UNUSEDSIGNAL */
    input  wire                 rd_last,        // runs are counted by the element FIFO
    /* verilator lint_on UNUSEDSIGNAL */

    /* activation words */
    output wire                 m_valid,
    input  wire                 m_ready,
    output wire [63:0]          m_data,
    output wire                 m_last
);

localparam WA_W = ADDR_W - 3;                   // word address
localparam RL_W = $clog2(MAX_BURST + 1);        // run length
localparam EF_D = 1 << EF_LOG2;
localparam RQ_D = 1 << RQ_LOG2;
localparam OW_W = CNT_W + 1;                    // words owed by the master

initial begin
    if (MAX_BURST < 2 || CNT_W < RL_W || EF_LOG2 < 2 || RQ_LOG2 < 1 || ADDR_W < 8
            || LANES_W < 4 || ESIZE_W < 4 || PAD_W > 64) begin
        $error("Error: unsupported parameters (instance %m)");
        $finish;
    end
end

localparam [1:0] S_IDLE = 2'd0, S_CFG = 2'd1, S_RUN = 2'd2, S_ABORT = 2'd3;
reg [1:0] state;

/* ---- the descriptor fields, registered at start ---- */
reg [ADDR_W-1:0]  src_r;
reg [MODE_W-1:0]  mode_r;
reg [LANES_W-1:0] lanes_r;
reg [ESIZE_W-1:0] esize_r;
reg [PAD_W-1:0]   pad_r;
reg [DIM_W-1:0]   n_r, h_r, w_r, c_r, oh_r, ow_r;
reg [KER_W-1:0]   kh_r, kw_r, sy_r, sx_r, dy_r, dx_r, pt_r, pl_r;
reg [KP_W-1:0]    kp_r, k0_r, k1_r, nchunk_r, cv_r;

// log2 of ESIZE and of LANES; `shape_ok`: one 64-bit word of lanes
reg [1:0] es_lg;
reg       shape_ok;
always @* begin
    es_lg = 2'd0;
    shape_ok = 1'b1;
    case (esize_r)
    4'd1: es_lg = 2'd0;
    4'd2: es_lg = 2'd1;
    4'd4: es_lg = 2'd2;
    4'd8: es_lg = 2'd3;
    default: shape_ok = 1'b0;
    endcase
    if ({{(8 - LANES_W){1'b0}}, lanes_r} != (8'd8 >> es_lg))
        shape_ok = 1'b0;
end
wire [1:0] ln_lg = 2'd3 - es_lg;                // log2 LANES
wire [7:0] lmask = (8'd1 << ln_lg) - 8'd1;      // LANES - 1

wire is_win = mode_r == MODE_WINDOWS;
wire is_chn = mode_r == MODE_CHANNELS;
wire src_es_ok = (src_r[2:0] & ((3'd1 << es_lg) - 3'd1)) == 3'd0;
wire kp_ok = !is_win || ({{(KP_W - 8){1'b0}}, lmask} & kp_r) == {KP_W{1'b0}};
wire is_none = mode_r == MODE_NONE;
wire field_bad = !is_none && !((is_win || is_chn) && shape_ok && src_es_ok && kp_ok);

function lane_aligned;                          // v % LANES == 0
    input [KP_W-1:0] v;
    begin
        lane_aligned = ({{(KP_W - 8){1'b0}}, lmask} & v) == {KP_W{1'b0}};
    end
endfunction

wire [KP_W-1:0] c_kp = {{(KP_W - DIM_W){1'b0}}, c_r};
wire wm_cond = src_r[2:0] == 3'd0 && lane_aligned(c_kp) &&
    (is_win || (kp_r == {{(KP_W - 1){1'b0}}, 1'b1} && lane_aligned(k0_r) && lane_aligned(k1_r)));

/* ---- the activation AGU: fields as they are (lane mode) or in 64-bit elements (word mode) ---- */
reg              agu_start;
reg              agu_go;        // the AGU was started (its busy is valid)
reg              agu_clr;       // synchronous reset of the AGU (abort)
wire             agu_busy, agu_start_ready, agu_empty;
wire             agu_valid, agu_pad, agu_last;
wire             agu_ready;
wire [ADDR_W-1:0] agu_index;

wire [LANES_W-1:0] a_lanes = wm_cond ? {{(LANES_W - 1){1'b0}}, 1'b1} : lanes_r;
wire [DIM_W-1:0]   a_c     = wm_cond ? c_r >> ln_lg : c_r;
wire [KP_W-1:0]    a_kp    = (wm_cond && is_win) ? kp_r >> ln_lg : kp_r;
wire [KP_W-1:0]    a_k0    = (wm_cond && is_chn) ? k0_r >> ln_lg : k0_r;
wire [KP_W-1:0]    a_k1    = (wm_cond && is_chn) ? k1_r >> ln_lg : k1_r;
wire [KP_W-1:0]    a_cv    = (wm_cond && is_chn) ? cv_r >> ln_lg : cv_r;

/* ---- per-stream settings of the two streams that may be in flight (by stream parity) ---- */
reg              par_new;       // parity of the latest stream started (the one the AGU walks)
reg [ADDR_W-1:0] bk_src [0:1];
reg [1:0]        bk_wm;
reg [1:0]        bk_es [0:1];
reg [PAD_W-1:0]  bk_pad [0:1];
reg [1:0]        in_flight;     // streams started, their last word not yet taken
reg              walk_done;     // the AGU has walked the latest stream
reg              empty_pend;    // the latest stream has no element (AGU `empty`), not yet ended
wire act = state == S_RUN || state == S_CFG;

dtpu_act_agu #(
    .MODE_W(MODE_W), .LANES_W(LANES_W), .DIM_W(DIM_W), .KER_W(KER_W), .KP_W(KP_W),
    .IDX_W(ADDR_W), .MODE_WINDOWS(MODE_WINDOWS), .MODE_CHANNELS(MODE_CHANNELS)
) agu (
    .clk(clk), .rst_n(rst_n && !agu_clr),
    .start(agu_start), .busy(agu_busy), .start_ready(agu_start_ready), .empty(agu_empty),
    .cfg_mode(mode_r), .cfg_lanes(a_lanes), .cfg_n(n_r), .cfg_h(h_r), .cfg_w(w_r), .cfg_c(a_c),
    .cfg_kh(kh_r), .cfg_kw(kw_r), .cfg_sy(sy_r), .cfg_sx(sx_r), .cfg_dy(dy_r), .cfg_dx(dx_r),
    .cfg_pt(pt_r), .cfg_pl(pl_r), .cfg_oh(oh_r), .cfg_ow(ow_r),
    .cfg_kp(a_kp), .cfg_k0(a_k0), .cfg_k1(a_k1), .cfg_nchunk(nchunk_r), .cfg_cv(a_cv),
    .m_valid(agu_valid), .m_ready(agu_ready), .m_index(agu_index), .m_pad(agu_pad),
    .m_last(agu_last)
);

/* ---- stage 1: addresses ---- */
reg            s1_valid, s1_pad, s1_last, s1_par;
reg [WA_W-1:0] s1_wa;
reg [WA_W-1:0] s1_wa1;                           // s1_wa + 1
// s1_wa == prev_wa and s1_wa == prev_wa + 1, for the prev_wa stage 2 holds while s1 waits:
// formed when s1 is loaded, so stage 2's run tests (same beat, extend) are flags and s1_take,
// the AGU's ready, depends on no address compare (s1_wa -> prev_wa's compare, s1_take and the
// AGU's walk was the load unit's critical path on the ECP5 proxy, docs/synthesis.md)
reg            s1_eq0, s1_eq1;
reg [2:0]      s1_off;
wire           s1_take;                          // stage 2 takes s1 this cycle
wire           s1_ready = !s1_valid || s1_take;

// skid register between the AGU and stage 1: the AGU's ready is a register (the skid is
// empty), not stage 2's take (the run tests, the FIFOs' room) fanned out to every register of
// the AGU's walk, the load unit's critical path on the ECP5 proxy (s1_pad -> agu_index,
// docs/synthesis.md). The AGU walks without a bubble, so stage 1 sees the same elements in the
// same cycles with or without the skid (an element waits in it only while stage 1 is full);
// the walk counts as done once the skid is empty, so the next start is taken when it was
reg              sk_valid, sk_pad, sk_last;
reg [ADDR_W-1:0] sk_index;
wire             e_valid = sk_valid || agu_valid;
wire             e_pad = sk_valid ? sk_pad : agu_pad;
wire             e_last = sk_valid ? sk_last : agu_last;
wire [ADDR_W-1:0] e_index = sk_valid ? sk_index : agu_index;
wire             s1_load = act && s1_ready && e_valid;
assign agu_ready = act && !sk_valid;

wire [1:0]        sh = bk_wm[par_new] ? 2'd3 : bk_es[par_new];
wire [ADDR_W-1:0] baddr = bk_src[par_new] + (e_index << sh);

/* ---- stage 2: runs and the element FIFO ---- */
reg              run_open;
reg [WA_W-1:0]   run_wa;        // first word of the open run
reg [RL_W-1:0]   run_len;
reg              prev_ok;       // a beat was assigned in this stream (cleared at its last element)
reg [WA_W-1:0]   prev_wa;       // the word of the last beat assigned
reg [WA_W-1:0]   prev_wa1;      // prev_wa + 1

// request FIFO
reg [WA_W-1:0]  rq_wa  [0:RQ_D-1];
reg [RL_W-1:0]  rq_len [0:RQ_D-1];
reg [RQ_LOG2:0] rq_wr, rq_rd;
wire rq_empty = rq_wr == rq_rd;
wire rq_full = (rq_wr ^ rq_rd) == {1'b1, {RQ_LOG2{1'b0}}};

// element FIFO: {stream parity, new, pad, off[2:0], last}. Its head (a register, below) drives
// the packer's tests and the element pop in the same cycle, so the entry after it is read
// without a register: distributed RAM (LUTs), whose read is about half a block RAM's
// unregistered clock-to-output (4.3 ns on the ECP5 proxy)
(* ram_style = "distributed" *)
reg [6:0]       ef_mem [0:EF_D-1];
reg [EF_LOG2:0] ef_wr, ef_rd;
reg [EF_LOG2:0] ef_rd1;         // ef_rd + 1
wire ef_empty = ef_wr == ef_rd;
wire ef_full = (ef_wr ^ ef_rd) == {1'b1, {EF_LOG2{1'b0}}};

wire same_beat = !s1_pad && prev_ok && s1_eq0;
wire extend = !s1_pad && !same_beat && prev_ok && run_open && s1_eq1;
wire new_run = !s1_pad && !same_beat && !extend;
// the next s1's flags: against s1_wa when stage 2 takes s1 as a new beat this cycle (it becomes
// prev_wa), else against prev_wa
wire [WA_W-1:0] b_wa = baddr[ADDR_W-1:3];
wire prev_to_s1 = s1_take && !s1_pad && !same_beat;
wire eq0_next = prev_to_s1 ? b_wa == s1_wa : b_wa == prev_wa;
wire eq1_next = prev_to_s1 ? b_wa == s1_wa1 : b_wa == prev_wa1;
wire [31:0] run_len32 = {{(32 - RL_W){1'b0}}, run_len};
wire ext_full = extend && run_len32 == MAX_BURST - 1;   // reaches MAX_BURST
// an element that closes the open run needs room for the request
wire need_push = run_open && (new_run || ext_full);
assign s1_take = act && s1_valid && !ef_full && (!need_push || !rq_full);
// no element joins the open run this cycle: request it now (a stall, or the stream's end)
wire idle_push = run_open && !s1_take && !rq_full;
wire rq_push = act && ((s1_take && need_push) || idle_push);
wire rq_pop = req_valid && req_ready;
wire ef_push = s1_take;

/* ---- stage 3: the packer ---- */
// the head element as a register (its entry read one cycle ahead, at ef_rd + 1 or the entry
// pushed into an empty FIFO): the packer's tests start at a register, not at a read through
// the 2^EF_LOG2-entry distributed RAM's multiplexers (ef_rd -> m_data was the load unit's
// critical path on the ECP5 proxy once the AGU had its skid, docs/synthesis.md)
reg  [6:0] ef_head;
wire [6:0] ef_in = {s1_par, !s1_pad && !same_beat, s1_pad, s1_off, s1_last};
wire [6:0] ef_next = ef_mem[ef_rd1[EF_LOG2-1:0]];
wire h_par = ef_head[6], h_new = ef_head[5], h_pad = ef_head[4], h_last = ef_head[0];
wire [2:0] h_off = ef_head[3:1];
wire h_need = h_new && !h_pad;

reg  [63:0] beat_r;             // the last word taken
reg  [63:8] acc_r;              // lanes packed so far (lane mode; the low byte is never kept)
reg  [2:0]  lane_r;             // lanes packed so far
reg         out_valid, out_last;
reg  [63:0] out_data;

// the settings of the head element's stream
wire        p_wm = bk_wm[h_par];
wire [1:0]  p_es = bk_es[h_par];
wire [2:0]  p_lmask = 3'd7 >> p_es;             // LANES - 1
wire [63:0] pad64 = {{(64 - PAD_W){1'b0}}, bk_pad[h_par]};

wire out_free = !out_valid || m_ready;
wire h_word = p_wm || lane_r == p_lmask || h_last;      // completes a word
wire ef_pop = act && !ef_empty && (!h_need || rd_valid) && (!h_word || out_free);
wire take_beat = ef_pop && h_need;
wire beat_bad = rd_resp[1] || rd_timeout;       // SLVERR (2) / DECERR (3) / no answer

reg  [OW_W-1:0] owed;           // words of the requests the master took, not yet returned
assign rd_ready = state == S_ABORT ? owed != {OW_W{1'b0}} : take_beat;
wire rd_hs = rd_valid && rd_ready;

wire [63:0] beat = h_need ? rd_data : beat_r;
// the PAD lane (the field's low ESIZE bytes, zero-extended) in every lane
reg  [63:0] pad_word;
always @* begin
    case (p_es)
    2'd0: pad_word = {8{pad64[7:0]}};
    2'd1: pad_word = {4{pad64[15:0]}};
    2'd2: pad_word = {2{pad64[31:0]}};
    default: pad_word = pad64;
    endcase
end
wire [63:0] lane_val = h_pad ? pad_word : beat >> {h_off, 3'b000};
reg  [63:0] acc_next;
always @* begin
    case (p_es)
    2'd0: acc_next = {lane_val[7:0], acc_r[63:8]};
    2'd1: acc_next = {lane_val[15:0], acc_r[63:16]};
    2'd2: acc_next = {lane_val[31:0], acc_r[63:32]};
    default: acc_next = lane_val;
    endcase
end
wire [63:0] word_val = p_wm ? (h_pad ? pad_word : beat) : acc_next;

wire fault = take_beat && rd_valid && beat_bad;
wire out_hs = m_valid && m_ready;
wire end_word = out_hs && out_last;             // a stream's last word taken
// the latest stream without elements ends once every stream before it has
wire end_empty = state == S_RUN && empty_pend && in_flight == 2'd1;
wire [1:0] in_flight_dec = in_flight - ((end_word || end_empty) ? 2'd1 : 2'd0);

// look-ahead: the next stream may start once the AGU has walked the latest one and at most one
// stream is in flight (its settings bank stays; the other is free). A fault refuses the start;
// inside, the fault's own branch wins over the start anyway (it is taken only in S_RUN, where
// it aborts), so the start's registers use `start_free`: the fault's path (the element FIFO's
// head, the packer's word test, the beat's response) stays off their enables
wire start_free = state == S_IDLE ||
    (state == S_RUN && walk_done && !empty_pend && in_flight_dec != 2'd2);
assign start_ready = start_free && !fault;
assign busy = state != S_IDLE;
assign req_valid = act && !rq_empty;
assign req_addr = {rq_wa[rq_rd[RQ_LOG2-1:0]], 3'b000};
assign req_words = {{(CNT_W - RL_W){1'b0}}, rq_len[rq_rd[RQ_LOG2-1:0]]};
assign m_valid = out_valid && state != S_ABORT;
assign m_data = out_data;
assign m_last = out_last;

always @(posedge clk) begin
    done <= end_word || end_empty;
    agu_start <= 1'b0;
    agu_clr <= 1'b0;
    in_flight <= in_flight_dec;
    if (end_empty)
        empty_pend <= 1'b0;

    // words owed by the master
    owed <= owed + (rq_pop ? {{(OW_W - CNT_W){1'b0}}, req_words} : {OW_W{1'b0}})
                 - (rd_hs ? {{(OW_W - 1){1'b0}}, 1'b1} : {OW_W{1'b0}});

    // the skid (an element of the latest stream: par_new does not change while it waits)
    if (agu_valid && agu_ready && !s1_ready) begin
        sk_valid <= 1'b1;
        sk_pad <= agu_pad;
        sk_last <= agu_last;
        sk_index <= agu_index;
    end else if (sk_valid && s1_load) begin
        sk_valid <= 1'b0;
    end

    // stage 1
    if (s1_load) begin
        s1_valid <= 1'b1;
        s1_pad <= e_pad;
        s1_last <= e_last;
        s1_par <= par_new;
        s1_wa <= b_wa;
        s1_wa1 <= b_wa + 1'b1;
        s1_eq0 <= eq0_next;
        s1_eq1 <= eq1_next;
        s1_off <= baddr[2:0];
    end else if (s1_take) begin
        s1_valid <= 1'b0;
    end

    // stage 2: runs
    if (s1_take && !s1_pad) begin
        if (!same_beat) begin
            prev_ok <= 1'b1;
            prev_wa <= s1_wa;
            prev_wa1 <= s1_wa1;
        end
        if (extend) begin
            run_len <= run_len + 1'b1;
            if (ext_full)
                run_open <= 1'b0;
        end else if (new_run) begin
            run_wa <= s1_wa;
            run_len <= {{(RL_W - 1){1'b0}}, 1'b1};
            run_open <= 1'b1;
        end
    end else if (idle_push && act) begin
        run_open <= 1'b0;
    end
    if (s1_take && s1_last)         // a stream never shares the beat of the one before
        prev_ok <= 1'b0;
    if (rq_push) begin
        rq_wa[rq_wr[RQ_LOG2-1:0]] <= run_wa;
        rq_len[rq_wr[RQ_LOG2-1:0]] <= (s1_take && extend) ? run_len + 1'b1 : run_len;
        rq_wr <= rq_wr + 1'b1;
    end
    if (rq_pop)
        rq_rd <= rq_rd + 1'b1;
    if (ef_push) begin
        ef_mem[ef_wr[EF_LOG2-1:0]] <= ef_in;
        ef_wr <= ef_wr + 1'b1;
    end

    // the element FIFO's head: the next entry after a pop (the one pushed now if the FIFO
    // would be empty), the entry pushed into an empty FIFO; a fault's pop aborts the unit
    if (ef_pop) begin
        if (ef_rd1 == ef_wr)
            ef_head <= ef_in;
        else
            ef_head <= ef_next;
    end else if (ef_empty) begin
        ef_head <= ef_in;
    end

    // stage 3: the packer
    if (out_hs)
        out_valid <= 1'b0;
    if (ef_pop && !fault) begin
        ef_rd <= ef_rd1;
        ef_rd1 <= ef_rd1 + 1'b1;
        if (h_need)
            beat_r <= rd_data;
        acc_r <= acc_next[63:8];
        lane_r <= h_word ? 3'd0 : lane_r + 3'd1;
        if (h_word) begin
            out_valid <= 1'b1;
            out_data <= word_val;
            out_last <= h_last;
        end
    end

    // the descriptor's fields: loaded on a start whether or not a fault aborts the unit in this
    // cycle (then the start is not taken, start_ready is low, and the fields are read again when
    // it is; in S_ABORT nothing reads them: the AGU is cleared, S_CFG comes after a start), so
    // the fault's path (the element FIFO's head, the packer's word test, the beat's response)
    // is off these registers' enable (it was the load unit's critical path on the ECP5 proxy,
    // ef_rd -> dx_r, docs/synthesis.md)
    if ((state == S_IDLE || state == S_RUN) && start && start_free) begin
        src_r <= cfg_src; mode_r <= cfg_mode; lanes_r <= cfg_lanes; esize_r <= cfg_esize;
        pad_r <= cfg_pad;
        n_r <= cfg_n; h_r <= cfg_h; w_r <= cfg_w; c_r <= cfg_c;
        kh_r <= cfg_kh; kw_r <= cfg_kw; sy_r <= cfg_sy; sx_r <= cfg_sx;
        dy_r <= cfg_dy; dx_r <= cfg_dx; pt_r <= cfg_pt; pl_r <= cfg_pl;
        oh_r <= cfg_oh; ow_r <= cfg_ow;
        kp_r <= cfg_kp; k0_r <= cfg_k0; k1_r <= cfg_k1; nchunk_r <= cfg_nchunk; cv_r <= cfg_cv;
    end
    if (act && fault) begin
        err_slverr <= rd_resp == 2'b10;
        err_decerr <= rd_resp == 2'b11;
        err_timeout <= rd_timeout;
        agu_clr <= 1'b1;
        in_flight <= 2'd0;
        empty_pend <= 1'b0;
        walk_done <= 1'b0;
        state <= S_ABORT;
    end else case (state)
    S_IDLE, S_RUN: begin
        if (state == S_RUN) begin
            agu_go <= 1'b1;
            if (agu_go && !agu_busy && !sk_valid && !walk_done) begin
                walk_done <= 1'b1;
                empty_pend <= agu_empty;
            end
            if (in_flight_dec == 2'd0)
                state <= S_IDLE;
        end
        if (start && start_free) begin
            err_slverr <= 1'b0; err_decerr <= 1'b0; err_timeout <= 1'b0; err_field <= 1'b0;
            state <= S_CFG;
        end
    end
    S_CFG: begin
        if (field_bad || is_none) begin
            // no stream: ends in order, after every stream before it has (a pulse of its own)
            if (in_flight == 2'd0) begin
                err_field <= field_bad;
                done <= 1'b1;
                state <= S_IDLE;
            end
        end else begin
            word_mode <= wm_cond;
            bk_src[!par_new] <= src_r;
            bk_wm[!par_new] <= wm_cond;
            bk_es[!par_new] <= es_lg;
            bk_pad[!par_new] <= pad_r;
            par_new <= !par_new;
            in_flight <= in_flight_dec + 2'd1;
            agu_start <= 1'b1;
            agu_go <= 1'b0;
            walk_done <= 1'b0;
            state <= S_RUN;
        end
    end
    default: begin      // S_ABORT: drop the streams, take what is owed
        agu_clr <= 1'b1;
        sk_valid <= 1'b0;
        s1_valid <= 1'b0;
        run_open <= 1'b0;
        prev_ok <= 1'b0;
        lane_r <= 3'd0;
        rq_rd <= rq_wr;
        ef_rd <= ef_wr;
        ef_rd1 <= ef_wr + 1'b1;
        out_valid <= 1'b0;
        if (owed == {OW_W{1'b0}} || (owed == {{(OW_W - 1){1'b0}}, 1'b1} && rd_hs)) begin
            done <= 1'b1;
            state <= S_IDLE;
        end
    end
    endcase

    if (!rst_n) begin
        state <= S_IDLE;
        done <= 1'b0;
        agu_start <= 1'b0;
        agu_go <= 1'b0;
        agu_clr <= 1'b0;
        word_mode <= 1'b0;
        par_new <= 1'b0;
        in_flight <= 2'd0;
        walk_done <= 1'b0;
        empty_pend <= 1'b0;
        err_slverr <= 1'b0;
        err_decerr <= 1'b0;
        err_timeout <= 1'b0;
        err_field <= 1'b0;
        owed <= {OW_W{1'b0}};
        sk_valid <= 1'b0;
        s1_valid <= 1'b0;
        run_open <= 1'b0;
        prev_ok <= 1'b0;
        rq_wr <= {(RQ_LOG2 + 1){1'b0}};
        rq_rd <= {(RQ_LOG2 + 1){1'b0}};
        ef_wr <= {(EF_LOG2 + 1){1'b0}};
        ef_rd <= {(EF_LOG2 + 1){1'b0}};
        ef_rd1 <= {{EF_LOG2{1'b0}}, 1'b1};
        out_valid <= 1'b0;
        lane_r <= 3'd0;
    end
end

// unused AGU status: `empty` is seen as busy low with nothing streamed
/* verilator lint_off UNUSEDSIGNAL */
wire unused_agu = agu_start_ready ^ agu_empty;
/* verilator lint_on UNUSEDSIGNAL */

endmodule

`resetall
