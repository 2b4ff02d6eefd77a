/*

Copyright (c) 2026 DTPU authors. Apache-2.0.

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * DTPU core: control unit, L/S arrays (weight memory, activation buffer, parameter memory),
 * MXU, column adder tree and post unit, between the job registers and the three streams.
 *
 * GEMM datapath timing from an issue cycle t: memory read / stream register (t+1),
 * Filter&Select into the PE operand registers, product, accumulator final at t+4 (LAT_MXU),
 * column sums at t+7 (LAT_REDUCE), first result word at t+18 (LAT_POST), DONE one cycle after
 * the last word has been taken (docs/rtl.md).
 */
module dtpu_core #
(
    parameter ROWS = 8,
    parameter COLS = 8,
    parameter LOG_COLS = 3,
    parameter LOG_WEIGHT_WORDS = 15,
    parameter LOG_PARAM_ENTRIES = 12,
    parameter LOG_ACT_WORDS = 12,
    parameter [15:0] PREC_EN = 16'h007F,
    // 1: the post unit's lane 0 also serves contract 2.0's post unit (ext_lane_*, dtpu_post)
    parameter EXT_POST_LANE = 0,
    // 1: the MXU's 8-bit rows as PE pairs on one multiplier each (dtpu_mxu, dtpu_smac_pair);
    // DWCONV jobs then need TAP_CYCLES >= 2 when a step has more than COLS/2 items
    parameter PE_PAIR = 0,
    // 1: the rotated depthwise layout (dtpu_dw_seq; docs/architecture.md "Depthwise crossbars
    // linear in COLS"): column j reads weight bank j, and the activation banks rotated
    parameter DW_ROTATE = 0,
    // built requantization variants (bit v: RQ_VARIANT code v; contract RQ_EN): the post
    // lanes', and CONFIG refuses a REQUANT job naming another (ERR.BAD_MODE)
    parameter RQ_EN = 31
)
(
    input  wire                clk,
    input  wire                rst_n,

    /* Registers */
    input  wire                start,
    input  wire                soft_reset,
    input  wire [32*20-1:0]    job_regs,
    output wire                busy,
    output wire                done,
    output wire [3:0]          state,
    output wire [31:0]         err_set,
    output wire                stall,

    /* Weight / parameter stream */
    input  wire [63:0]         s_axis_wgt_tdata,
    input  wire                s_axis_wgt_tvalid,
    output wire                s_axis_wgt_tready,
    input  wire                s_axis_wgt_tlast,

    /* Activation stream */
    input  wire [63:0]         s_axis_act_tdata,
    input  wire                s_axis_act_tvalid,
    output wire                s_axis_act_tready,
    input  wire                s_axis_act_tlast,

    /* Result stream */
    output wire [63:0]         m_axis_res_tdata,
    output wire                m_axis_res_tvalid,
    input  wire                m_axis_res_tready,
    output wire                m_axis_res_tlast,

    /* parameter memory read port for contract 2.0's post unit (ext_prm_sel: the core is idle) */
    input  wire                ext_prm_sel,
    input  wire                ext_prm_rd_en,
    input  wire [LOG_PARAM_ENTRIES-1:0] ext_prm_rd_entry,
    output wire [63:0]         ext_prm_bias,
    output wire [63:0]         ext_prm_rq,

    /* post lane 0 for contract 2.0's post unit (EXT_POST_LANE; dtpu_post's ext_* port) */
    input  wire                ext_lane_sel,
    input  wire [3:0]          ext_lane_prec,
    input  wire [2:0]          ext_lane_variant,
    input  wire [31:0]         ext_lane_min,
    input  wire [31:0]         ext_lane_max,
    input  wire                ext_lane_in_valid,
    input  wire [63:0]         ext_lane_in_acc,
    input  wire [63:0]         ext_lane_in_bias,
    input  wire [63:0]         ext_lane_in_rq,
    output wire [63:0]         ext_lane_value,
    output wire                ext_lane_valid,
    output wire                ext_lane_ovf,
    output wire                ext_lane_wrap
);

// value width of accumulators, column sums and the post unit: the widest PE accumulator
// (84 bits with int32/int64 lanes, 52 with int16, 36 with 8-bit lanes only) plus the
// log2(ROWS) carry bits of the column tree, so every sum stays exact
localparam AW = (PREC_EN[3] || PREC_EN[4]) ? 84 : PREC_EN[2] ? 52 + $clog2(ROWS) : 36 + $clog2(ROWS);
localparam FLOAT_EN = (PREC_EN[5] || PREC_EN[6]) ? 1 : 0;
localparam WRW = LOG_WEIGHT_WORDS - LOG_COLS;
// issue -> column sums: memory read 1 + MXU 3 + tree log2(ROWS)
localparam TAG_LAT = 4 + $clog2(ROWS) + 2;
localparam TAG_W = LOG_PARAM_ENTRIES + 1 + 16 + 16;

initial begin
    if (COLS != (1 << LOG_COLS) || COLS < 2) begin
        $error("Error: COLS must be 2^LOG_COLS >= 2 (instance %m)");
        $finish;
    end
end

// job registers (offset order from JOB)
wire [31:0] r_job        = job_regs[0*32 +: 32];
wire [31:0] r_load_addr  = job_regs[1*32 +: 32];
wire [31:0] r_load_count = job_regs[2*32 +: 32];
wire [31:0] r_wgt_base   = job_regs[3*32 +: 32];
wire [31:0] r_param_base = job_regs[4*32 +: 32];
wire [31:0] r_in_offset  = job_regs[5*32 +: 32];
wire [31:0] r_wgt_offset = job_regs[6*32 +: 32];
wire [31:0] r_act_min    = job_regs[7*32 +: 32];
wire [31:0] r_act_max    = job_regs[8*32 +: 32];
wire [31:0] r_gemm_m     = job_regs[9*32 +: 32];
wire [31:0] r_gemm_kw    = job_regs[10*32 +: 32];
wire [31:0] r_gemm_nt    = job_regs[11*32 +: 32];
wire [31:0] r_dw_in     = job_regs[12*32 +: 32];
wire [31:0] r_dw_out    = job_regs[13*32 +: 32];
wire [31:0] r_dw_kernel = job_regs[14*32 +: 32];
wire [31:0] r_dw_stride = job_regs[15*32 +: 32];
wire [31:0] r_dw_groups = job_regs[16*32 +: 32];
wire [31:0] r_dw_ring   = job_regs[17*32 +: 32];
wire [31:0] r_pf_addr   = job_regs[18*32 +: 32];
wire [31:0] r_pf_count  = job_regs[19*32 +: 32];
localparam ARW = LOG_ACT_WORDS - LOG_COLS;

wire ctl_rst_n = rst_n && !soft_reset;
wire adv;
wire job_abort;
// the datapath's control state also clears on an aborted job (job_abort: in this cycle)
wire dp_rst_n = ctl_rst_n && !job_abort;

wire [3:0] cfg_prec;
wire [1:0] cfg_out_mode, cfg_log_lanes;
wire [2:0] cfg_variant;
wire [2:0] cfg_wi;
wire       cfg_dw;

wire                         wmem_we;
wire [LOG_WEIGHT_WORDS-1:0]  wmem_waddr;
wire                         pmem_we;
wire [LOG_PARAM_ENTRIES-1:0] pmem_wentry;
wire                         pmem_whalf;
wire                         abuf_we;
wire [LOG_ACT_WORDS-1:0]     abuf_waddr, abuf_raddr;
wire                         act_from_stream;
wire [WRW-1:0]               wgt_row;
wire                         iss_valid, iss_first, iss_last, iss_job_last;
wire [LOG_PARAM_ENTRIES-1:0] iss_ch;
wire [15:0]                  iss_words, iss_nvals;
wire                         dp_ovf, dp_wrap;
wire [31:0]                  dw_err;
wire                         dw_latch, dw_run, dw_need_act, dw_conflict;
wire [63:0]                  dw_in_total, dw_res_total;
wire [LOG_ACT_WORDS-1:0]     dw_abuf_waddr;
wire [COLS-1:0]              dw_col_valid, dw_col_zero;
wire                         dw_first, dw_last;
wire [COLS*ARW-1:0]          dw_arow;
wire [COLS*LOG_COLS-1:0]     dw_abank, dw_wbank;
wire [COLS*WRW-1:0]          dw_wrow;
wire                         dw_tag_valid, dw_tag_job_last;
wire [15:0]                  dw_tag_words, dw_tag_nvals, dw_tag_g;
wire [LOG_PARAM_ENTRIES-1:0] dw_tag_ch, dw_tag_wrap_ch;
wire [COLS*ARW-1:0]          dw_bank_arow;
wire [LOG_COLS-1:0]          dw_act_rot;
wire [WRW-1:0]               dw_wgt_row_rot;

dtpu_control #(
    .COLS(COLS),
    .LOG_COLS(LOG_COLS),
    .LOG_WEIGHT_WORDS(LOG_WEIGHT_WORDS),
    .LOG_PARAM_ENTRIES(LOG_PARAM_ENTRIES),
    .LOG_ACT_WORDS(LOG_ACT_WORDS),
    .PREC_EN(PREC_EN),
    .PE_PAIR(PE_PAIR),
    .DW_ROTATE(DW_ROTATE),
    .RQ_EN(RQ_EN)
)
control_inst (
    .clk(clk),
    .rst_n(ctl_rst_n),
    .start(start),
    .reg_job(r_job),
    .reg_load_addr(r_load_addr),
    .reg_load_count(r_load_count),
    .reg_wgt_base(r_wgt_base),
    .reg_param_base(r_param_base),
    .reg_gemm_m(r_gemm_m),
    .reg_gemm_kw(r_gemm_kw),
    .reg_gemm_nt(r_gemm_nt),
    .reg_dw_kernel(r_dw_kernel),
    .reg_dw_groups(r_dw_groups),
    .reg_dw_out(r_dw_out),
    .reg_dw_stride(r_dw_stride),
    .reg_dw_ring(r_dw_ring),
    .reg_pf_addr(r_pf_addr),
    .reg_pf_count(r_pf_count),
    .busy(busy),
    .done(done),
    .state(state),
    .err_set(err_set),
    .adv(adv),
    .stall(stall),
    .job_abort(job_abort),
    .wgt_tvalid(s_axis_wgt_tvalid),
    .wgt_tlast(s_axis_wgt_tlast),
    .wgt_tready(s_axis_wgt_tready),
    .act_tvalid(s_axis_act_tvalid),
    .act_tlast(s_axis_act_tlast),
    .act_tready(s_axis_act_tready),
    .res_tvalid(m_axis_res_tvalid),
    .res_tready(m_axis_res_tready),
    .cfg_prec(cfg_prec),
    .cfg_out_mode(cfg_out_mode),
    .cfg_variant(cfg_variant),
    .cfg_log_lanes(cfg_log_lanes),
    .cfg_wi(cfg_wi),
    .cfg_dw(cfg_dw),
    .wmem_we(wmem_we),
    .wmem_waddr(wmem_waddr),
    .pmem_we(pmem_we),
    .pmem_wentry(pmem_wentry),
    .pmem_whalf(pmem_whalf),
    .abuf_we(abuf_we),
    .abuf_waddr(abuf_waddr),
    .abuf_raddr(abuf_raddr),
    .act_from_stream(act_from_stream),
    .wgt_row(wgt_row),
    .iss_valid(iss_valid),
    .iss_first(iss_first),
    .iss_last(iss_last),
    .iss_ch(iss_ch),
    .iss_job_last(iss_job_last),
    .iss_words(iss_words),
    .iss_nvals(iss_nvals),
    .dw_err(dw_err),
    .dw_latch(dw_latch),
    .dw_run(dw_run),
    .dw_in_total(dw_in_total),
    .dw_res_total(dw_res_total),
    .dw_need_act(dw_need_act),
    .dw_conflict(dw_conflict),
    .dp_ovf(dp_ovf),
    .dp_wrap(dp_wrap)
);

// log2 lanes of the job's precision (for the depthwise sequencer, before CONFIG latches it)
wire [3:0] job_prec = r_job[7:4];
wire [1:0] job_mode = r_job[9:8];
reg  [1:0] job_log_l;
always @* begin
    case (job_prec)
        4'd0, 4'd1: job_log_l = 2'd3;
        4'd2, 4'd6: job_log_l = 2'd2;
        4'd3, 4'd5: job_log_l = 2'd1;
        default: job_log_l = 2'd0;
    endcase
end
wire [1:0] job_log_lo = job_mode == 2'd0 ? job_log_l : job_mode == 2'd2 ? 2'd1
                      : (job_prec == 4'd0 || job_prec == 4'd1) ? 2'd1 : 2'd0;

dtpu_dw_seq #(
    .COLS(COLS),
    .LOG_COLS(LOG_COLS),
    .LOG_WEIGHT_WORDS(LOG_WEIGHT_WORDS),
    .LOG_PARAM_ENTRIES(LOG_PARAM_ENTRIES),
    .LOG_ACT_WORDS(LOG_ACT_WORDS),
    .PE_PAIR(PE_PAIR),
    .DW_ROTATE(DW_ROTATE)
)
dw_inst (
    .clk(clk),
    .rst_n(dp_rst_n),
    .adv(adv),
    .reg_dw_in(r_dw_in),
    .reg_dw_out(r_dw_out),
    .reg_dw_kernel(r_dw_kernel),
    .reg_dw_stride(r_dw_stride),
    .reg_dw_groups(r_dw_groups),
    .reg_dw_ring(r_dw_ring),
    .reg_wgt_base(r_wgt_base),
    .reg_param_base(r_param_base),
    .log_l(job_log_l),
    .log_lo(job_log_lo),
    .check_param(job_mode != 2'd1),
    .cfg_err(dw_err),
    .latch(dw_latch),
    .run(dw_run),
    .in_total(dw_in_total),
    .res_total(dw_res_total),
    .need_act(dw_need_act),
    .act_fire(s_axis_act_tvalid && s_axis_act_tready),
    .conflict(dw_conflict),
    .abuf_waddr(dw_abuf_waddr),
    .col_valid(dw_col_valid),
    .col_zero(dw_col_zero),
    .col_first(dw_first),
    .col_last(dw_last),
    .col_arow(dw_arow),
    .col_abank(dw_abank),
    .col_wrow(dw_wrow),
    .col_wbank(dw_wbank),
    .bank_arow(dw_bank_arow),
    .act_rot(dw_act_rot),
    .wgt_row_rot(dw_wgt_row_rot),
    .tag_valid(dw_tag_valid),
    .tag_job_last(dw_tag_job_last),
    .tag_words(dw_tag_words),
    .tag_nvals(dw_tag_nvals),
    .tag_ch(dw_tag_ch),
    .tag_wrap_ch(dw_tag_wrap_ch),
    .tag_g(dw_tag_g)
);

// ---- read crossbars: each bank serves the column that asks for it ----
// Depthwise: valid columns on one activation bank are a BANK_CONFLICT (the job aborts in that
// cycle), and valid columns on one weight bank read the same word (GC <= COLS consecutive
// groups), so an AND-OR over the columns suffices; a bank no column asks for is not read.
// With DW_ROTATE the rows come per bank from the sequencer (one weight row for all banks) and
// the AND-ORs are not built.
reg [COLS*WRW-1:0] wmem_rows;
reg [COLS*ARW-1:0] abuf_rows;
reg [WRW-1:0] wsel;
reg [ARW-1:0] asel;
integer bb, cc;
always @* begin
    for (bb = 0; bb < COLS; bb = bb + 1) begin
        wsel = DW_ROTATE != 0 ? dw_wgt_row_rot : {WRW{1'b0}};
        asel = DW_ROTATE != 0 ? dw_bank_arow[bb*ARW +: ARW] : {ARW{1'b0}};
        for (cc = 0; cc < (DW_ROTATE != 0 ? 0 : COLS); cc = cc + 1) begin
            if (dw_col_valid[cc] && {{(32-LOG_COLS){1'b0}}, dw_wbank[cc*LOG_COLS +: LOG_COLS]} == bb)
                wsel = wsel | dw_wrow[cc*WRW +: WRW];
            if (dw_col_valid[cc] && {{(32-LOG_COLS){1'b0}}, dw_abank[cc*LOG_COLS +: LOG_COLS]} == bb)
                asel = asel | dw_arow[cc*ARW +: ARW];
        end
        wmem_rows[bb*WRW +: WRW] = cfg_dw ? wsel : wgt_row;
        abuf_rows[bb*ARW +: ARW] = cfg_dw ? asel : abuf_raddr[LOG_ACT_WORDS-1:LOG_COLS];
    end
end

// ---- L/S weight units: weight memory ----
wire [COLS*64-1:0] wgt_bank_words;

dtpu_ls_banks #(
    .LOG_BANKS(LOG_COLS),
    .ADDR_W(LOG_WEIGHT_WORDS),
    .WIDTH(64)
)
wmem_inst (
    .clk(clk),
    .wr_en(wmem_we),
    .wr_addr(wmem_waddr),
    .wr_data(s_axis_wgt_tdata),
    .rd_en(adv),
    .rd_row(wmem_rows),
    .rd_data(wgt_bank_words)
);

// ---- L/S activation units: activation buffer ----
wire [COLS*64-1:0] abuf_words;

dtpu_ls_banks #(
    .LOG_BANKS(LOG_COLS),
    .ADDR_W(LOG_ACT_WORDS),
    .WIDTH(64)
)
abuf_inst (
    .clk(clk),
    .wr_en(abuf_we),
    .wr_addr(cfg_dw ? dw_abuf_waddr : abuf_waddr),
    .wr_data(s_axis_act_tdata),
    .rd_en(adv),
    .rd_row(abuf_rows),
    .rd_data(abuf_words)
);

// ---- stage t+1: operand selection ----
reg [63:0]         act_stream_reg;
reg                from_stream_reg;
reg [LOG_COLS-1:0] abank_reg;
reg                v1_reg, f1_reg, l1_reg;

always @(posedge clk) begin
    if (adv) begin
        act_stream_reg <= s_axis_act_tdata;
        from_stream_reg <= act_from_stream;
        abank_reg <= abuf_raddr[LOG_COLS-1:0];
        v1_reg <= iss_valid;
        f1_reg <= iss_first;
        l1_reg <= iss_last;
    end
    if (!dp_rst_n) begin
        v1_reg <= 1'b0;
        l1_reg <= 1'b0;
    end
end

wire [63:0] act_word = from_stream_reg ? act_stream_reg : abuf_words[abank_reg*64 +: 64];

// depthwise: per-column bank selections (rotated layout: the rotation), one cycle after the read
reg [COLS*LOG_COLS-1:0] dw_abank_reg, dw_wbank_reg;
reg [LOG_COLS-1:0]      dw_rot_reg;
reg [COLS-1:0]          dw_valid_reg, dw_zero_reg;
reg                     dw_first_reg, dw_last_reg;

always @(posedge clk) begin
    if (adv) begin
        dw_abank_reg <= dw_abank;
        dw_wbank_reg <= dw_wbank;
        dw_rot_reg <= dw_act_rot;
        dw_valid_reg <= dw_col_valid;
        dw_zero_reg <= dw_col_zero;
        dw_first_reg <= dw_first;
        dw_last_reg <= dw_last;
    end
    if (!dp_rst_n) begin
        dw_valid_reg <= {COLS{1'b0}};
    end
end

// rotated layout: column j takes activation bank (j + R) mod COLS, a barrel rotator of log2(COLS)
// levels (level k moves the words by 2^k banks when bit k of R is set)
reg [COLS*64-1:0] rot_words;
integer rl;
always @* begin
    rot_words = abuf_words;
    for (rl = 0; rl < LOG_COLS; rl = rl + 1) begin
        if (DW_ROTATE != 0 && dw_rot_reg[rl])
            rot_words = (rot_words >> (64 * (1 << rl))) | (rot_words << (64 * (COLS - (1 << rl))));
    end
end

reg [COLS*64-1:0] mxu_act, mxu_wgt;
reg [LOG_COLS-1:0] wb;
integer mj;
always @* begin
    for (mj = 0; mj < COLS; mj = mj + 1) begin
        // (GEMM and the rotated layout: column j reads weight bank j; the banked layout's
        // depthwise uses the same multiplexer)
        wb = (cfg_dw && DW_ROTATE == 0) ? dw_wbank_reg[mj*LOG_COLS +: LOG_COLS] : mj[LOG_COLS-1:0];
        mxu_wgt[mj*64 +: 64] = wgt_bank_words[wb*64 +: 64];
        if (cfg_dw && DW_ROTATE != 0) begin
            mxu_act[mj*64 +: 64] = rot_words[mj*64 +: 64];
        end else if (cfg_dw) begin
            mxu_act[mj*64 +: 64] = abuf_words[dw_abank_reg[mj*LOG_COLS +: LOG_COLS]*64 +: 64];
        end else begin
            mxu_act[mj*64 +: 64] = act_word;
        end
    end
end

// ---- MXU ----
wire [ROWS*COLS*AW-1:0] pe_acc;
/* verilator lint_off UNUSEDSIGNAL */
wire [COLS-1:0]         pe_valid;
wire [COLS-1:0]         pe_fp_valid;
/* verilator lint_on UNUSEDSIGNAL */
wire                    pe_ovf;
wire [ROWS*COLS*32-1:0] pe_fp;
wire                    cfg_float = FLOAT_EN != 0 && cfg_out_mode == 2'd2;

// the MXU's results as AW-bit values: accumulators, or fp32 sums in the low bits
reg [ROWS*COLS*AW-1:0]  pe_val;
integer pv;
always @* begin
    for (pv = 0; pv < ROWS*COLS; pv = pv + 1) begin
        pe_val[pv*AW +: AW] = (FLOAT_EN != 0 && cfg_float) ? {{(AW-32){1'b0}}, pe_fp[pv*32 +: 32]}
                                                            : pe_acc[pv*AW +: AW];
    end
end

dtpu_mxu #(
    .ROWS(ROWS),
    .COLS(COLS),
    .PREC_EN(PREC_EN),
    .AW(AW),
    .PE_PAIR(PE_PAIR)
)
mxu_inst (
    .clk(clk),
    .rst_n(dp_rst_n),
    .ce(adv),
    .prec(cfg_prec),
    .in_offset(r_in_offset),
    .wgt_offset(r_wgt_offset),
    .act_words(mxu_act),
    .wgt_words(mxu_wgt),
    .col_valid(cfg_dw ? dw_valid_reg : {COLS{v1_reg}}),
    .col_zero(cfg_dw ? dw_zero_reg : {COLS{1'b0}}),
    .col_first(cfg_dw ? {COLS{dw_first_reg}} : {COLS{f1_reg}}),
    .col_last(cfg_dw ? {COLS{dw_last_reg}} : {COLS{l1_reg}}),
    .acc(pe_acc),
    .acc_valid(pe_valid),
    .prod_ovf(pe_ovf),
    .fp_sum(pe_fp),
    .fp_valid(pe_fp_valid)
);

// ---- column adder tree ----
wire [COLS*AW-1:0] col_sum;
wire               col_valid;

dtpu_col_reduce #(
    .ROWS(ROWS),
    .COLS(COLS),
    .AW(AW),
    .FP_ENABLE((PREC_EN[5] || PREC_EN[6]) ? 1 : 0),
    // accumulator widths of rows 0-3 and 4-7 (dtpu_mxu)
    .W_HI((PREC_EN[3] || PREC_EN[4]) ? 84 : PREC_EN[2] ? 52 : 36),
    .W_LO(36)
)
reduce_inst (
    .clk(clk),
    .rst_n(dp_rst_n),
    .ce(adv),
    .in_acc(pe_val),
    .in_valid(cfg_float ? pe_fp_valid[0] : pe_valid[0]),
    .fp(cfg_float),
    .log_l(job_log_l),
    .out_sum(col_sum),
    .out_valid(col_valid)
);

// ---- step tags, delayed like the data ----
// stage q (0-based) in bits q*TAG_W +: TAG_W
reg [TAG_LAT*TAG_W-1:0] tag_pipe_reg;

always @(posedge clk) begin
    if (adv) begin
        tag_pipe_reg <= {tag_pipe_reg[(TAG_LAT-1)*TAG_W-1:0], iss_ch, iss_job_last, iss_words, iss_nvals};
    end
end

// integer steps are captured after the column tree, float steps two cycles later
wire [TAG_W-1:0] tag = cfg_float ? tag_pipe_reg[(TAG_LAT-1)*TAG_W +: TAG_W]
                                 : tag_pipe_reg[(TAG_LAT-3)*TAG_W +: TAG_W];
wire [LOG_PARAM_ENTRIES-1:0] tag_ch = tag[TAG_W-1 -: LOG_PARAM_ENTRIES];
wire tag_last = tag[32];
wire [15:0] tag_words = tag[31:16];
wire [15:0] tag_nvals = tag[15:0];

// ---- post unit and parameter memory ----
wire                         prm_rd_en;
wire [LOG_PARAM_ENTRIES-1:0] prm_rd_base;
wire [8*64-1:0]              prm_bias, prm_rq;

// the post unit's reads keep their base a multiple of min(lanes, COLS), and only words of 8
// (8-bit REQUANT), 4 (int16 REQUANT) or 2 (FLOAT) lanes read parameters (dtpu_ls_param's
// alignment): an 8-bit-only build with COLS >= 8 rotates lane 0 alone. Builds with int16 or
// float lanes take LOG_MIN_LANES 0, not 2 or 1: Yosys maps lanes 1..3's 2:1 multiplexers
// worse beside lane 0's 8:1 than their 4:1 / 2:1 ones (pe_area.py dtpu_ls_param ADDR_W=12
// LOG_ALIGN=3: LOG_MIN_LANES 0 618 LUT, 2 978 LUT, 3 378 LUT)
localparam integer LOG_MIN_LANES = (FLOAT_EN == 0 && !PREC_EN[2]) ? 3 : 0;
dtpu_ls_param #(
    .ADDR_W(LOG_PARAM_ENTRIES),
    .LOG_ALIGN(LOG_COLS < 3 ? LOG_COLS : 3),
    .LOG_MIN_LANES(LOG_MIN_LANES)
)
pmem_inst (
    .clk(clk),
    .wr_en(pmem_we),
    .wr_entry(pmem_wentry),
    .wr_half(pmem_whalf),
    .wr_data(s_axis_wgt_tdata),
    .rd_en(ext_prm_sel ? ext_prm_rd_en : prm_rd_en),
    .rd_base(ext_prm_sel ? ext_prm_rd_entry : prm_rd_base),
    .rd_bias(prm_bias),
    .rd_rq(prm_rq)
);

// contract 2.0's post unit reads one entry at a time (lane 0) while the core is idle
assign ext_prm_bias = prm_bias[63:0];
assign ext_prm_rq   = prm_rq[63:0];

// depthwise step tags: issue -> accumulators final (memory read + 3 PE stages)
localparam DW_TAG_W = 1 + 1 + 16 + 16 + 2*LOG_PARAM_ENTRIES + 16;
reg [6*DW_TAG_W-1:0] dw_tag_pipe_reg;
integer qq;
always @(posedge clk) begin
    if (adv) begin
        dw_tag_pipe_reg <= {dw_tag_pipe_reg[5*DW_TAG_W-1:0], dw_tag_valid, dw_tag_job_last,
                            dw_tag_words, dw_tag_nvals, dw_tag_ch, dw_tag_wrap_ch, dw_tag_g};
    end
    if (!dp_rst_n) begin
        for (qq = 0; qq < 6; qq = qq + 1) begin
            dw_tag_pipe_reg[qq*DW_TAG_W + DW_TAG_W-1] <= 1'b0;
        end
    end
end
wire [DW_TAG_W-1:0] dwt = cfg_float ? dw_tag_pipe_reg[5*DW_TAG_W +: DW_TAG_W]
                                    : dw_tag_pipe_reg[3*DW_TAG_W +: DW_TAG_W];
wire dwt_valid = dwt[DW_TAG_W-1];
wire dwt_last = dwt[DW_TAG_W-2];
wire [15:0] dwt_words = dwt[DW_TAG_W-3 -: 16];
wire [15:0] dwt_nvals = dwt[DW_TAG_W-19 -: 16];
wire [LOG_PARAM_ENTRIES-1:0] dwt_ch = dwt[16 + LOG_PARAM_ENTRIES +: LOG_PARAM_ENTRIES];
wire [LOG_PARAM_ENTRIES-1:0] dwt_wrap_ch = dwt[16 +: LOG_PARAM_ENTRIES];
wire [15:0] dwt_g = dwt[15:0];

/* verilator lint_off UNUSEDSIGNAL */
wire post_busy;
/* verilator lint_on UNUSEDSIGNAL */

dtpu_post #(
    .NV(ROWS*COLS),
    .NG(COLS),
    .AW(AW),
    .PREC_EN(PREC_EN),
    .PADDR_W(LOG_PARAM_ENTRIES),
    .EXT_LANE0(EXT_POST_LANE),
    .RQ_EN(RQ_EN)
)
post_inst (
    .clk(clk),
    .rst_n(dp_rst_n),
    .ce(adv),
    .prec(cfg_prec),
    .out_mode(cfg_out_mode),
    .variant(cfg_variant),
    .act_min(r_act_min),
    .act_max(r_act_max),
    .log_lanes(cfg_log_lanes),
    .log_l(job_log_l),
    .dw(cfg_dw),
    .gc(r_dw_groups[15:0]),
    .wi(cfg_wi),
    .fp(cfg_float),
    .cap_valid(cfg_dw ? dwt_valid : col_valid),
    .cap_dw_values(pe_val),
    .cap_gemm_values(col_sum),
    .cap_words(cfg_dw ? dwt_words : tag_words),
    .cap_nvals(cfg_dw ? dwt_nvals : tag_nvals),
    .cap_ch(cfg_dw ? dwt_ch : tag_ch),
    .cap_wrap_ch(cfg_dw ? dwt_wrap_ch : tag_ch),
    .cap_g(cfg_dw ? dwt_g : 16'd0),
    .cap_last(cfg_dw ? dwt_last : tag_last),
    .prm_rd_en(prm_rd_en),
    .prm_rd_base(prm_rd_base),
    .prm_bias(prm_bias),
    .prm_rq(prm_rq),
    .m_axis_tdata(m_axis_res_tdata),
    .m_axis_tvalid(m_axis_res_tvalid),
    .m_axis_tready(m_axis_res_tready),
    .m_axis_tlast(m_axis_res_tlast),
    .busy(post_busy),
    .flag_ovf(dp_ovf_post),
    .flag_wrap(dp_wrap),
    .ext_sel(ext_lane_sel),
    .ext_prec(ext_lane_prec),
    .ext_variant(ext_lane_variant),
    .ext_min(ext_lane_min),
    .ext_max(ext_lane_max),
    .ext_valid(ext_lane_in_valid),
    .ext_acc(ext_lane_in_acc),
    .ext_bias(ext_lane_in_bias),
    .ext_rq(ext_lane_in_rq),
    .ext_value(ext_lane_value),
    .ext_out_valid(ext_lane_valid),
    .ext_ovf(ext_lane_ovf),
    .ext_wrap(ext_lane_wrap)
);

wire dp_ovf_post;
assign dp_ovf = dp_ovf_post || pe_ovf;

endmodule

`resetall
