/*

Copyright (c) 2026 DTPU authors. Apache-2.0.

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Contract 2.0 post unit (the POST descriptor; golden model dtpu.hw.cmdlist.Executor._post):
 * finishes the int64 partial sums of a split K. For pixel p < PIX, channel c < CH:
 * sum = int64 at SRC + (p*DSTC + CH0 + c)*8, + bias, requantize (JOB.PREC, JOB.RQ_VARIANT),
 * zero point, clamp (ACT_MIN/ACT_MAX) with parameter entry PARAM_BASE + c, result lane of
 * pixel p, channel CH0 + c.
 *
 * Why it is built this way:
 * - It does not write DDR. Its results leave as a stream of result words packed as the store
 *   unit's RES ITEMS mode takes them (per pixel one item of GW = CH channels, ceil(CH/LANES)
 *   words, lanes past CH zero) together with the RES fields that put them at DST (res_*: OUTER 1,
 *   PIX, INNER 1, GW CH, CH0, CH1 = CH0 + CH, DSTC, ESIZE, LANES, SIGNED). The store unit that
 *   writes RUN results writes these too: one strided-store datapath, and POST and RUN share the
 *   write channel the same way.
 * - Reads: per pixel one request of CH words at SRC + (p*DSTC + CH0)*8 on a request port of
 *   dtpu_axi_rd's shape, issued as fast as the master takes them (it keeps several bursts in
 *   flight), so that after the first latency the sums arrive at one per cycle, the rate of the
 *   read channel. The words come back in order (data, RRESP, timeout) on a ready/valid port.
 * - Parameters: one entry per sum, read when the sum is accepted: the narrowest port that keeps
 *   one sum per cycle is one entry per cycle (p_rd_en, p_rd_entry -> p_rd_bias, p_rd_rq one
 *   cycle later, held while p_rd_en is low). That is lane 0 of dtpu_ls_param's read port with
 *   rd_base = the entry, so the core's parameter memory serves it through a mux on rd_base.
 * - Arithmetic: one dtpu_post_lane (the 1.2 post unit's lane, unchanged), AW = 64, out_mode
 *   fixed to REQUANT (its float path is not built); with EXT_LANE = 1 not its own but lane 0 of
 *   the idle core's dtpu_post through the lane_* port (same 8-register timing, ce forced to 1
 *   while lane_sel = busy), which saves a lane (~1.5 k LUT) in dtpu_cl_top. ACT_MIN/ACT_MAX
 *   reach it saturated to the lane type, as dtpu_post passes them.
 * - Flow control without a combinational path from the result port back to the word port: an
 *   output FIFO of 2^FIFO_LOG words, and a sum that completes a result word is accepted only
 *   while fewer than 2^FIFO_LOG words are reserved (in the pipeline or the FIFO). The pipeline
 *   itself never stalls (the lane's ce is 1).
 *
 * Checks at start (BAD_FIELD: `bad_field` with `done` the cycle after start, no read): JOB.PREC
 * an enabled integer precision (INT8, UINT8, INT16, INT32, INT64), OUT_MODE REQUANT, CH >= 1,
 * CH0 + CH <= DSTC, PARAM_BASE + CH <= 2^PADDR_W (the model's checks), and two the model does not
 * make: RQ_VARIANT one of the five variants, SRC 8-byte aligned. RQ_VARIANT must also be built
 * (RQ_EN, the post lanes' variants; the model checks that too).
 *
 * Errors: a read word with SLVERR/DECERR or a timeout word sets err_slverr/err_decerr/
 * err_timeout; a lane with ERR.OVERFLOW (INT64 variant, |total| >= 2^47) sets err_ovf (the JOB
 * error). Either aborts: a request not yet taken is withdrawn (after a timeout dtpu_axi_rd takes
 * none until cleared; this port is not AXI), the words still owed are taken and dropped (the read
 * master delivers every owed word, also after a timeout), nothing more enters the result FIFO
 * (an overflow: the result word holding it and every later one are not produced; a read fault
 * also drops the complete words still in the pipeline); the FIFO's
 * words still leave (valid never drops), then done. warn_wrap (ERR.WARN_WRAP32 of an int32
 * variant whose total did not fit) is reported, not fatal.
 *
 * Timing (no stall): start at cycle 0, the first request at cycle 1; a sum accepted at cycle t
 * gives its result word's FIFO entry at t + 9 (parameter read / lane input, 8 lane registers),
 * out_valid from t + 10 on.
 */
module dtpu_cl_post #
(
    // DDR byte address width (POST1.SRC, DST)
    parameter ADDR_W = 32,
    // POST2.PIX width
    parameter PIX_W = 32,
    // POST2.CH0, CH and POST3.DSTC width (also the request word count)
    parameter CH_W = 16,
    // log2 of the parameter entries
    parameter PADDR_W = 12,
    // enabled precisions (bit p: PREC code p)
    parameter [15:0] PREC_EN = 16'h007F,
    // log2 of the result FIFO depth (>= 3 for one sum per cycle)
    parameter FIFO_LOG = 3,
    // RES0.MODE code of ITEMS
    parameter MODE_ITEMS = 1,
    // 1: no lane of its own; the lane_* port drives lane 0 of the core's dtpu_post (EXT_LANE0),
    // idle while a POST runs (saves one dtpu_post_lane, ~1.5 k LUT). 0: its own lane (the port
    // is unused: lane_* outputs still show the lane's inputs, lane_* inputs are ignored)
    parameter EXT_LANE = 0,
    // built requantization variants (bit v: RQ_VARIANT code v; contract RQ_EN): the lane's, and
    // a POST naming another is BAD_FIELD
    parameter RQ_EN = 31
)
(
    input  wire               clk,
    input  wire               rst_n,

    /* POST fields and job registers, sampled with start (when not busy) */
    input  wire               start,
    input  wire [ADDR_W-1:0]  src,
    input  wire [ADDR_W-1:0]  dst,
    input  wire [PIX_W-1:0]   pix,
    input  wire [CH_W-1:0]    ch0,
    input  wire [CH_W-1:0]    ch,
    input  wire [CH_W-1:0]    dstc,
    input  wire [3:0]         job_prec,
    input  wire [1:0]         job_out_mode,
    input  wire [2:0]         job_variant,
    input  wire [31:0]        param_base,
    input  wire [31:0]        act_min,
    input  wire [31:0]        act_max,

    /* status: flags valid from done until the next start */
    output wire               busy,
    output wire               starved,        // busy, a sum still owed and none offered
    output reg                done,
    output reg                bad_field,
    output reg                err_slverr,
    output reg                err_decerr,
    output reg                err_timeout,
    output reg                err_ovf,
    output reg                warn_wrap,

    /* read requests (dtpu_axi_rd's request port) */
    output wire               req_valid,
    input  wire               req_ready,
    output wire [ADDR_W-1:0]  req_addr,
    output wire [CH_W-1:0]    req_words,

    /* read words, in request order */
    input  wire               w_valid,
    output wire               w_ready,
    input  wire [63:0]        w_data,
    input  wire [1:0]         w_resp,
    input  wire               w_timeout,

    /* parameter memory: one entry, data one cycle after p_rd_en (held while it is low) */
    output wire               p_rd_en,
    output wire [PADDR_W-1:0] p_rd_entry,
    input  wire [63:0]        p_rd_bias,
    input  wire [63:0]        p_rd_rq,

    /* the post lane's inputs and outputs (EXT_LANE: dtpu_post's ext_* port; lane_sel = busy) */
    output wire               lane_sel,
    output wire [3:0]         lane_prec,
    output wire [2:0]         lane_variant,
    output wire [31:0]        lane_min,
    output wire [31:0]        lane_max,
    output wire               lane_in_valid,
    output wire [63:0]        lane_in_acc,
    output wire [63:0]        lane_in_bias,
    output wire [63:0]        lane_in_rq,
    /* verilator lint_off UNUSEDSIGNAL */
    input  wire [63:0]        lane_out_value,
    input  wire               lane_out_valid,
    input  wire               lane_out_ovf,
    input  wire               lane_out_wrap,
    /* verilator lint_on UNUSEDSIGNAL */

    /* result words for the store unit (RES ITEMS) */
    output wire               out_valid,
    input  wire               out_ready,
    output wire [63:0]        out_data,
    output wire               out_last,

    /* the RES fields of the stream (valid while busy) */
    output wire [3:0]         res_mode,
    output wire [3:0]         res_lanes,
    output wire [3:0]         res_esize,
    output wire               res_signed,
    output wire [ADDR_W-1:0]  res_dst,
    output wire [PIX_W-1:0]   res_pix,
    output wire [CH_W-1:0]    res_outer,
    output wire [CH_W-1:0]    res_inner,
    output wire [CH_W-1:0]    res_gw,
    output wire [CH_W-1:0]    res_ch0,
    output wire [CH_W-1:0]    res_ch1,
    output wire [CH_W-1:0]    res_dstc
);

/* verilator lint_off UNUSEDPARAM */
`include "dtpu_regs.vh"
/* verilator lint_on UNUSEDPARAM */

localparam DEPTH = 1 << FIFO_LOG;

initial begin
    if (FIFO_LOG < 3 || PADDR_W < 4 || PADDR_W > 31 || CH_W < 2 || ADDR_W < CH_W + 4) begin
        $error("Error: FIFO_LOG >= 3, PADDR_W 4..31, CH_W >= 2, ADDR_W >= CH_W + 4 (instance %m)");
        $finish;
    end
end

/* ---- start: the BAD_FIELD checks ---- */
wire prec_int = job_prec == DTPU_PREC_INT8 || job_prec == DTPU_PREC_UINT8
             || job_prec == DTPU_PREC_INT16 || job_prec == DTPU_PREC_INT32
             || job_prec == DTPU_PREC_INT64;
localparam [7:0] RQ_MASK = RQ_EN[7:0];
wire variant_ok = ({1'b0, job_variant} == DTPU_RQ_VARIANT_DOUBLE || {1'b0, job_variant} == DTPU_RQ_VARIANT_SINGLE
               || {1'b0, job_variant} == DTPU_RQ_VARIANT_INT64 || {1'b0, job_variant} == DTPU_RQ_VARIANT_DOUBLE_UP
               || {1'b0, job_variant} == DTPU_RQ_VARIANT_FP32) && RQ_MASK[job_variant];
wire [CH_W:0] ch_end = {1'b0, ch0} + {1'b0, ch};
wire [32:0]   pb_end = {1'b0, param_base} + {{(33-CH_W){1'b0}}, ch};
wire bad = !PREC_EN[job_prec] || !prec_int || job_out_mode != DTPU_OUT_MODE_REQUANT[1:0]
        || !variant_ok || ch == {CH_W{1'b0}} || ch_end > {1'b0, dstc}
        || pb_end > (33'd1 << PADDR_W) || src[2:0] != 3'd0;
wire go = start && !busy;

/* ---- the job, latched ---- */
reg               run_reg;          // busy with a job
reg               abort_reg;        // a fault or an overflow: drain
reg  [3:0]        prec_reg;
reg  [2:0]        variant_reg;
reg  [31:0]       lane_min_reg, lane_max_reg;
reg  [PADDR_W-1:0] pb_reg;
reg  [ADDR_W-1:0] dst_reg;
reg  [PIX_W-1:0]  pix_reg;
reg  [CH_W-1:0]   ch0_reg, ch_reg, dstc_reg;
reg  [2:0]        log_es_reg;       // log2 bytes per result lane
reg  [2:0]        lmax_reg;         // lanes per word - 1

// lane type of each precision: bytes, and the clamp bounds saturated to it
reg  [2:0]        log_es;
reg  signed [31:0] tmin, tmax;
always @* begin
    case (job_prec)
        DTPU_PREC_INT8:  begin log_es = 3'd0; tmin = -32'sd128;   tmax = 32'sd127;   end
        DTPU_PREC_UINT8: begin log_es = 3'd0; tmin = 32'sd0;      tmax = 32'sd255;   end
        DTPU_PREC_INT16: begin log_es = 3'd1; tmin = -32'sd32768; tmax = 32'sd32767; end
        DTPU_PREC_INT32: begin log_es = 3'd2; tmin = 32'sh80000000; tmax = 32'sh7FFFFFFF; end
        default:         begin log_es = 3'd3; tmin = 32'sh80000000; tmax = 32'sh7FFFFFFF; end
    endcase
end
wire signed [31:0] amin = act_min, amax = act_max;
wire [31:0] sat_min = amin < tmin ? tmin : amin > tmax ? tmax : amin;
wire [31:0] sat_max = amax < tmin ? tmin : amax > tmax ? tmax : amax;

/* ---- requests: one per pixel ---- */
reg               rq_valid_reg;
reg  [ADDR_W-1:0] rq_addr_reg;
reg  [PIX_W-1:0]  rq_done_reg;      // pixels requested
reg  [CH_W+2:0]   stride_reg;       // DSTC * 8
wire              rq_hs = rq_valid_reg && req_ready;

/* ---- words: counters of the stream ---- */
reg  [CH_W-1:0]   c_reg;            // channel of the next word
reg  [2:0]        l_reg;            // its lane in the result word
reg  [PIX_W-1:0]  p_reg;            // pixels whose words all arrived
reg  [PADDR_W-1:0] pe_reg;          // PARAM_BASE + c
reg  [FIFO_LOG:0] resv_reg;         // result words reserved (pipeline + FIFO)
wire              c_end = c_reg == ch_reg - 1'b1;
wire              wend = c_end || l_reg == lmax_reg;       // the word completes a result word
wire              w_fault = w_resp[1] || w_timeout;
wire              full = resv_reg[FIFO_LOG];
assign w_ready = run_reg && (abort_reg || !wend || !full);
wire              w_hs = w_valid && w_ready;
wire              feed = w_hs && !abort_reg && !w_fault;     // a sum into the pipeline
wire              w_pix_end = w_hs && c_end;

assign p_rd_en = feed;
assign p_rd_entry = pe_reg;

/* ---- pipeline: stage A (parameter read), eight lane registers ---- */
reg               a_valid_reg;
reg  [63:0]       a_sum_reg;
reg  [2:0]        lane_a_reg, lane1_reg, lane2_reg, lane3_reg, lane4_reg, lane5_reg, lane6_reg,
                  lane7_reg, lane8_reg;
reg  [8:0]        v_pipe_reg;       // valid of stage A, lane 1 .. 8
reg  [1:0]        e_a_reg, e1_reg, e2_reg, e3_reg, e4_reg, e5_reg, e6_reg, e7_reg,
                  e8_reg;           // {last, wend}

wire [63:0]       lane_value;
wire              lane_valid, lane_ovf, lane_wrap;

assign lane_sel = busy;
assign lane_prec = prec_reg;
assign lane_variant = variant_reg;
assign lane_min = lane_min_reg;
assign lane_max = lane_max_reg;
assign lane_in_valid = a_valid_reg;
assign lane_in_acc = a_sum_reg;
assign lane_in_bias = p_rd_bias;
assign lane_in_rq = p_rd_rq;

generate
if (EXT_LANE != 0) begin : ext_lane
    assign lane_value = lane_out_value;
    assign lane_valid = lane_out_valid;
    assign lane_ovf = lane_out_ovf;
    assign lane_wrap = lane_out_wrap;
end else begin : own_lane
    dtpu_post_lane #(
        .AW(64),
        .PREC_EN(PREC_EN & 16'h001F),   // REQUANT only: no float path
        .RQ_EN(RQ_EN)
    ) lane_inst (
        .clk(clk),
        .rst_n(rst_n),
        .ce(1'b1),
        .prec(prec_reg),
        .out_mode(DTPU_OUT_MODE_REQUANT[1:0]),
        .variant(variant_reg),
        .act_min(lane_min_reg),
        .act_max(lane_max_reg),
        .in_valid(a_valid_reg),
        .in_acc(a_sum_reg),
        .in_bias(p_rd_bias),
        .in_rq(p_rd_rq),
        .out_value(lane_value),
        .out_valid(lane_valid),
        .out_ovf(lane_ovf),
        .out_wrap(lane_wrap)
    );
end
endgenerate

/* ---- packing and the result FIFO ---- */
reg  [63:0]       pack_reg;
reg  [63:0]       f_data [0:DEPTH-1];
reg               f_last [0:DEPTH-1];
reg  [FIFO_LOG-1:0] f_wr, f_rd;
reg  [FIFO_LOG:0] f_cnt;
wire              ovf_now = lane_valid && lane_ovf;
wire              stop = abort_reg || ovf_now;
// the lane's bytes in place: value << (lane * 8 * bytes)
wire [63:0]       lmask = log_es_reg == 3'd0 ? 64'hFF : log_es_reg == 3'd1 ? 64'hFFFF
                        : log_es_reg == 3'd2 ? 64'hFFFF_FFFF : {64{1'b1}};
wire [5:0]        lsh = {lane8_reg, 3'd0} << log_es_reg[1:0];
wire [63:0]       placed = (lane_value & lmask) << lsh;
wire [63:0]       word = (lane8_reg == 3'd0 ? 64'd0 : pack_reg) | placed;
wire              push = lane_valid && e8_reg[0] && !stop;
wire              out_hs = out_valid && out_ready;

assign out_valid = f_cnt != {(FIFO_LOG+1){1'b0}};
assign out_data = f_data[f_rd];
assign out_last = f_last[f_rd];

// finished: every requested pixel's words taken, nothing in the pipeline or the FIFO
wire              drained = !rq_valid_reg && p_reg == rq_done_reg && v_pipe_reg == 9'd0
                         && !out_valid;
assign busy = run_reg;
// waiting for a partial sum (the read latency, a slow memory): the POST's stall, which the
// contract counts as IDLE (dtpu_cl_top; the other busy cycles are the POST's stall-free ones)
assign starved = run_reg && p_reg != pix_reg && !w_valid;

always @(posedge clk) begin
    done <= 1'b0;
    if (go) begin
        prec_reg     <= job_prec;
        variant_reg  <= job_variant;
        lane_min_reg <= sat_min;
        lane_max_reg <= sat_max;
        pb_reg       <= param_base[PADDR_W-1:0];
        pe_reg       <= param_base[PADDR_W-1:0];
        dst_reg      <= dst;
        pix_reg      <= pix;
        ch0_reg      <= ch0;
        ch_reg       <= ch;
        dstc_reg     <= dstc;
        log_es_reg   <= log_es;
        lmax_reg     <= 3'd7 >> log_es;
        stride_reg   <= {dstc, 3'd0};
        rq_addr_reg  <= src + {{(ADDR_W-CH_W-3){1'b0}}, ch0, 3'd0};
        rq_done_reg  <= {PIX_W{1'b0}};
        rq_valid_reg <= !bad && pix != {PIX_W{1'b0}};
        run_reg      <= 1'b1;
        abort_reg    <= 1'b0;
        bad_field    <= bad;
        err_slverr   <= 1'b0;
        err_decerr   <= 1'b0;
        err_timeout  <= 1'b0;
        err_ovf      <= 1'b0;
        warn_wrap    <= 1'b0;
        c_reg        <= {CH_W{1'b0}};
        l_reg        <= 3'd0;
        p_reg        <= {PIX_W{1'b0}};
    end else if (run_reg) begin
        if (rq_hs) begin
            rq_addr_reg  <= rq_addr_reg + {{(ADDR_W-CH_W-3){1'b0}}, stride_reg};
            rq_done_reg  <= rq_done_reg + 1'b1;
            rq_valid_reg <= rq_done_reg + 1'b1 != pix_reg;
        end
        // an error withdraws a request not yet taken (after a timeout the read master takes
        // none until it is cleared)
        if (abort_reg || (w_hs && w_fault) || ovf_now) begin
            rq_valid_reg <= 1'b0;
        end
        if (w_hs) begin
            c_reg  <= c_end ? {CH_W{1'b0}} : c_reg + 1'b1;
            pe_reg <= c_end ? pb_reg : pe_reg + 1'b1;
            l_reg  <= wend ? 3'd0 : l_reg + 1'b1;
        end
        if (w_pix_end) begin
            p_reg <= p_reg + 1'b1;
        end
        if (w_hs && w_fault && !abort_reg) begin
            abort_reg   <= 1'b1;
            err_slverr  <= w_resp == 2'b10 && !w_timeout;
            err_decerr  <= w_resp == 2'b11 && !w_timeout;
            err_timeout <= w_timeout;
        end
        if (ovf_now && !abort_reg) begin
            abort_reg <= 1'b1;
            err_ovf   <= 1'b1;
        end
        if (lane_valid && lane_wrap && !stop) begin
            warn_wrap <= 1'b1;
        end
        if (drained) begin
            run_reg <= 1'b0;
            done    <= 1'b1;
        end
    end
    // the datapath
    a_valid_reg <= feed;
    if (feed) begin
        a_sum_reg <= w_data;
    end
    lane_a_reg <= l_reg;
    e_a_reg    <= {c_end && p_reg == pix_reg - 1'b1, wend};
    lane1_reg  <= lane_a_reg;
    e1_reg     <= e_a_reg;
    lane2_reg  <= lane1_reg;
    e2_reg     <= e1_reg;
    lane3_reg  <= lane2_reg;
    e3_reg     <= e2_reg;
    lane4_reg  <= lane3_reg;
    e4_reg     <= e3_reg;
    lane5_reg  <= lane4_reg;
    e5_reg     <= e4_reg;
    lane6_reg  <= lane5_reg;
    e6_reg     <= e5_reg;
    lane7_reg  <= lane6_reg;
    e7_reg     <= e6_reg;
    lane8_reg  <= lane7_reg;
    e8_reg     <= e7_reg;
    v_pipe_reg <= {v_pipe_reg[7:0], feed};
    if (lane_valid) begin
        pack_reg <= word;
    end
    if (push) begin
        f_data[f_wr] <= word;
        f_last[f_wr] <= e8_reg[1];
        f_wr <= f_wr + 1'b1;
    end
    if (out_hs) begin
        f_rd <= f_rd + 1'b1;
    end
    f_cnt <= f_cnt + {{FIFO_LOG{1'b0}}, push} - {{FIFO_LOG{1'b0}}, out_hs};
    // a word that completes a result word reserves its FIFO entry; a result word leaving frees
    // it, and so does one that an abort keeps out of the FIFO (stage A to the lane's output)
    resv_reg <= resv_reg + {{FIFO_LOG{1'b0}}, feed && wend}
                         - {{FIFO_LOG{1'b0}}, out_hs}
                         - {{FIFO_LOG{1'b0}}, lane_valid && e8_reg[0] && stop};
    if (!rst_n) begin
        done         <= 1'b0;
        run_reg      <= 1'b0;
        abort_reg    <= 1'b0;
        rq_valid_reg <= 1'b0;
        bad_field    <= 1'b0;
        err_slverr   <= 1'b0;
        err_decerr   <= 1'b0;
        err_timeout  <= 1'b0;
        err_ovf      <= 1'b0;
        warn_wrap    <= 1'b0;
        a_valid_reg  <= 1'b0;
        v_pipe_reg   <= 9'd0;
        f_wr         <= {FIFO_LOG{1'b0}};
        f_rd         <= {FIFO_LOG{1'b0}};
        f_cnt        <= {(FIFO_LOG+1){1'b0}};
        resv_reg     <= {(FIFO_LOG+1){1'b0}};
    end
end

assign req_valid = rq_valid_reg;
assign req_addr  = rq_addr_reg;
assign req_words = ch_reg;

assign res_mode   = MODE_ITEMS[3:0];
assign res_lanes  = {1'b0, lmax_reg} + 4'd1;
assign res_esize  = 4'd1 << log_es_reg;
assign res_signed = prec_reg != DTPU_PREC_UINT8;
assign res_dst    = dst_reg;
assign res_pix    = pix_reg;
assign res_outer  = {{(CH_W-1){1'b0}}, 1'b1};
assign res_inner  = {{(CH_W-1){1'b0}}, 1'b1};
assign res_gw     = ch_reg;
assign res_ch0    = ch0_reg;
assign res_ch1    = ch0_reg + ch_reg;
assign res_dstc   = dstc_reg;

endmodule

`resetall
