/*

Copyright (c) 2026 DTPU authors. Apache-2.0.

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Contract 2.0 test top (not the board top yet): the 1.2 core (dtpu_regfile + dtpu_core, as
 * dtpu_axi wires them, unchanged), the descriptor fetcher, one AXI4 read master (m_axi_*,
 * 64-bit) shared by the fetcher and the loads (dtpu_cl_rd_arb), and the list sequencer
 * (dtpu_cl_seq: END, LOAD, REGS).
 *
 * s_axil: the 2.0 registers of dtpu_cl_regs.vh (CL_BASE, DOORBELL, CL_STATUS, CL_ERR, IRQ,
 * CL_ERR_PC, CL_ERR_TAG, TIMEOUT, CL_CYCLES, IDLE, RD_BEATS, WR_BEATS, DESCS) are served here;
 * every other offset goes to the 1.2 register file. The 1.2 protocol (with s_axis_wgt,
 * s_axis_act, m_axis_res) works as on dtpu_axi while no list runs; while one runs, the
 * sequencer owns the register file's write port and the core's weight stream, and host writes
 * to 1.2 registers wait until the list is done (reads are served at once).
 * irq = IRQ.PENDING & IRQ.DONE_EN (the 1.2 interrupt, CTRL.IRQ_EN, is not routed out here).
 */
module dtpu_cl_top #
(
    parameter ROWS = 8,
    parameter COLS = 8,
    parameter LOG_WEIGHT_WORDS = 15,
    parameter LOG_PARAM_ENTRIES = 12,
    parameter LOG_ACT_WORDS = 12,
    parameter [15:0] PREC_EN = 16'h007F,
    parameter AXIL_ADDR_WIDTH = 8,
    // AXI4 master
    parameter ADDR_W = 32,
    parameter ID_W = 1,
    parameter MAX_BURST = 16,
    parameter MAX_OUTSTANDING = 8,
    // TIMEOUT's reset value (contract.json contract2.registers TIMEOUT.reset; tb_cl_seq reads it back)
    parameter [31:0] TIMEOUT_RESET = 32'd1000000
)
(
    input  wire                        clk,
    input  wire                        aresetn,

    /* AXI4-Lite slave: 1.2 and 2.0 registers */
    /* verilator lint_off UNUSEDSIGNAL */
    input  wire [AXIL_ADDR_WIDTH-1:0]  s_axil_awaddr,     // [1:0] ignored: 32-bit registers
    input  wire [2:0]                  s_axil_awprot,
    input  wire [3:0]                  s_axil_wstrb,
    input  wire [2:0]                  s_axil_arprot,
    /* verilator lint_on UNUSEDSIGNAL */
    input  wire                        s_axil_awvalid,
    output wire                        s_axil_awready,
    input  wire [31:0]                 s_axil_wdata,
    input  wire                        s_axil_wvalid,
    output wire                        s_axil_wready,
    output wire [1:0]                  s_axil_bresp,
    output wire                        s_axil_bvalid,
    input  wire                        s_axil_bready,
    /* verilator lint_off UNUSEDSIGNAL */
    input  wire [AXIL_ADDR_WIDTH-1:0]  s_axil_araddr,
    /* verilator lint_on UNUSEDSIGNAL */
    input  wire                        s_axil_arvalid,
    output wire                        s_axil_arready,
    output wire [31:0]                 s_axil_rdata,
    output wire [1:0]                  s_axil_rresp,
    output wire                        s_axil_rvalid,
    input  wire                        s_axil_rready,

    /* 1.2 streams (used while no list runs) */
    input  wire [63:0]                 s_axis_wgt_tdata,
    input  wire                        s_axis_wgt_tvalid,
    output wire                        s_axis_wgt_tready,
    input  wire                        s_axis_wgt_tlast,
    input  wire [63:0]                 s_axis_act_tdata,
    input  wire                        s_axis_act_tvalid,
    output wire                        s_axis_act_tready,
    input  wire                        s_axis_act_tlast,
    output wire [63:0]                 m_axis_res_tdata,
    output wire                        m_axis_res_tvalid,
    input  wire                        m_axis_res_tready,
    output wire                        m_axis_res_tlast,

    /* AXI4 master, read channels (64-bit) */
    output wire [ID_W-1:0]             m_axi_arid,
    output wire [ADDR_W-1:0]           m_axi_araddr,
    output wire [7:0]                  m_axi_arlen,
    output wire [2:0]                  m_axi_arsize,
    output wire [1:0]                  m_axi_arburst,
    output wire [3:0]                  m_axi_arcache,
    output wire [2:0]                  m_axi_arprot,
    output wire                        m_axi_arvalid,
    input  wire                        m_axi_arready,
    input  wire [ID_W-1:0]             m_axi_rid,
    input  wire [63:0]                 m_axi_rdata,
    input  wire [1:0]                  m_axi_rresp,
    input  wire                        m_axi_rlast,
    input  wire                        m_axi_rvalid,
    output wire                        m_axi_rready,

    /* IRQ.PENDING & IRQ.DONE_EN */
    output wire                        irq
);

/* verilator lint_off UNUSEDPARAM */
`include "dtpu_regs.vh"
`include "dtpu_cl_regs.vh"
/* verilator lint_on UNUSEDPARAM */

function integer clog2(input integer v);
    integer r;
    begin
        r = 0;
        while ((1 << r) < v) r = r + 1;
        clog2 = r;
    end
endfunction

localparam LOG_COLS = clog2(COLS);
localparam [31:0] HWCFG0 = {PREC_EN, COLS[7:0], ROWS[7:0]};
localparam [31:0] HWCFG1 = {8'd0, LOG_ACT_WORDS[7:0], LOG_PARAM_ENTRIES[7:0], LOG_WEIGHT_WORDS[7:0]};
localparam AW = AXIL_ADDR_WIDTH;

function [AW-1:0] ra(input [7:0] off);
    begin
        ra = {{(AW-8){1'b0}}, off};
    end
endfunction

// 1 for the offsets of the 2.0 registers (served here, not by dtpu_regfile)
function is_cl(input [AW-1:0] a);
    begin
        is_cl = (a == ra(DTPU_REG_CL_BASE)) || (a == ra(DTPU_REG_DOORBELL))
             || (a == ra(DTPU_REG_CL_STATUS)) || (a == ra(DTPU_REG_CL_ERR))
             || (a == ra(DTPU_REG_IRQ)) || (a == ra(DTPU_REG_CL_ERR_PC))
             || (a == ra(DTPU_REG_CL_ERR_TAG)) || (a == ra(DTPU_REG_TIMEOUT))
             || (a == ra(DTPU_REG_CL_CYCLES_LO)) || (a == ra(DTPU_REG_CL_CYCLES_HI))
             || (a == ra(DTPU_REG_IDLE_LO)) || (a == ra(DTPU_REG_IDLE_HI))
             || (a == ra(DTPU_REG_RD_BEATS)) || (a == ra(DTPU_REG_WR_BEATS))
             || (a == ra(DTPU_REG_DESCS));
    end
endfunction

initial begin
    if (AW < 8) begin
        $error("Error: AXIL_ADDR_WIDTH must be at least 8 (instance %m)");
        $finish;
    end
end

/* ---------------------------------------------------------------- 2.0 registers */
reg  [31:0] cl_base, cl_err, cl_pc, cl_tag, cl_timeout, cl_descs, rd_beats;
reg  [63:0] cl_cycles, cl_idle;
reg         cl_done, irq_en, irq_pend;
reg         irq_en12;                       // CTRL.IRQ_EN as the host last wrote it

wire        seq_busy, seq_done;
wire [31:0] seq_err, seq_pc, seq_tag, seq_descs;
reg         doorbell;
wire        core_busy;

/* ---------------------------------------------------------------- AXI4-Lite front end */
wire [AW-1:0] waddr = {s_axil_awaddr[AW-1:2], 2'b00};
wire [AW-1:0] raddr = {s_axil_araddr[AW-1:2], 2'b00};

reg          bvalid_reg;
reg          hw_pend;                       // a host write waiting for the register file
reg [AW-1:0] hw_addr;
reg [31:0]   hw_data;
wire         w_fire = s_axil_awvalid && s_axil_wvalid && !bvalid_reg && !hw_pend;

// register file write port: the sequencer while a list runs, else the host
wire          rf_awready, rf_wready, rf_bvalid;
wire [1:0]    rf_bresp;
wire          seq_rw_valid;
wire [AW-1:0] seq_rw_addr;
wire [31:0]   seq_rw_data;
wire          rf_wv   = seq_busy ? seq_rw_valid : hw_pend;
wire [AW-1:0] rf_wa   = seq_busy ? seq_rw_addr : hw_addr;
wire [31:0]   rf_wd   = seq_busy ? seq_rw_data : hw_data;

reg  [1:0]    rstate;                       // 0 idle, 1 register file read, 2 data out
reg  [AW-1:0] rf_raddr;
reg  [31:0]   rdata_cl;
wire          rf_arready, rf_rvalid;
wire [31:0]   rf_rdata;
wire [1:0]    rf_rresp;
wire          r_fire = s_axil_arvalid && rstate == 2'd0;

/* verilator lint_off UNUSEDSIGNAL */
wire          unused_axil = rf_wready ^ rf_bvalid ^ (^rf_bresp) ^ (^rf_rresp) ^ rf_arready;
/* verilator lint_on UNUSEDSIGNAL */

always @* begin
    rdata_cl = 32'd0;
    case (raddr)
        ra(DTPU_REG_CL_BASE):      rdata_cl = cl_base;
        ra(DTPU_REG_CL_STATUS): begin
            rdata_cl[DTPU_CL_STATUS_RUNNING_LSB] = seq_busy;
            rdata_cl[DTPU_CL_STATUS_DONE_LSB]    = cl_done;
            rdata_cl[DTPU_CL_STATUS_ERROR_LSB]   = (cl_err != 32'd0);
        end
        ra(DTPU_REG_CL_ERR):       rdata_cl = cl_err;
        ra(DTPU_REG_IRQ): begin
            rdata_cl[DTPU_IRQ_DONE_EN_LSB] = irq_en;
            rdata_cl[DTPU_IRQ_PENDING_LSB] = irq_pend;
        end
        ra(DTPU_REG_CL_ERR_PC):    rdata_cl = cl_pc;
        ra(DTPU_REG_CL_ERR_TAG):   rdata_cl = cl_tag;
        ra(DTPU_REG_TIMEOUT):      rdata_cl = cl_timeout;
        ra(DTPU_REG_CL_CYCLES_LO): rdata_cl = cl_cycles[31:0];
        ra(DTPU_REG_CL_CYCLES_HI): rdata_cl = cl_cycles[63:32];
        ra(DTPU_REG_IDLE_LO):      rdata_cl = cl_idle[31:0];
        ra(DTPU_REG_IDLE_HI):      rdata_cl = cl_idle[63:32];
        ra(DTPU_REG_RD_BEATS):     rdata_cl = rd_beats;
        ra(DTPU_REG_DESCS):        rdata_cl = cl_descs;
        default:                   rdata_cl = 32'd0;   // DOORBELL, WR_BEATS (no writes yet)
    endcase
end

reg  [31:0] rdata_out;
reg         rvalid_out;

always @(posedge clk) begin
    doorbell <= 1'b0;

    // ---- writes
    if (w_fire) begin
        if (is_cl(waddr)) begin
            bvalid_reg <= 1'b1;
            if (waddr == ra(DTPU_REG_CL_BASE)) begin
                cl_base <= s_axil_wdata;
            end
            if (waddr == ra(DTPU_REG_DOORBELL) && s_axil_wdata[0]) begin
                if (seq_busy) begin
                    cl_err[DTPU_CL_ERR_BUSY] <= 1'b1;
                end else begin
                    doorbell <= 1'b1;
                end
            end
            if (waddr == ra(DTPU_REG_CL_ERR)) begin
                cl_err <= cl_err & ~s_axil_wdata;
            end
            if (waddr == ra(DTPU_REG_IRQ)) begin
                irq_en <= s_axil_wdata[DTPU_IRQ_DONE_EN_LSB];
                if (s_axil_wdata[DTPU_IRQ_PENDING_LSB]) begin
                    irq_pend <= 1'b0;
                end
            end
            if (waddr == ra(DTPU_REG_TIMEOUT)) begin
                cl_timeout <= s_axil_wdata;
            end
        end else begin
            hw_pend <= 1'b1;
            hw_addr <= waddr;
            hw_data <= s_axil_wdata;
        end
    end
    if (!seq_busy && hw_pend && rf_awready) begin
        hw_pend    <= 1'b0;
        bvalid_reg <= 1'b1;
        if (hw_addr == ra(DTPU_REG_CTRL) && !hw_data[DTPU_CTRL_SOFT_RESET_LSB]) begin
            irq_en12 <= hw_data[DTPU_CTRL_IRQ_EN_LSB];
        end
    end
    if (bvalid_reg && s_axil_bready) begin
        bvalid_reg <= 1'b0;
    end

    // ---- reads
    case (rstate)
        2'd0: begin
            if (r_fire) begin
                if (is_cl(raddr)) begin
                    rdata_out  <= rdata_cl;
                    rvalid_out <= 1'b1;
                    rstate     <= 2'd2;
                end else begin
                    rf_raddr <= raddr;
                    rstate   <= 2'd1;
                end
            end
        end
        2'd1: begin
            if (rf_rvalid) begin
                rdata_out  <= rf_rdata;
                rvalid_out <= 1'b1;
                rstate     <= 2'd2;
            end
        end
        default: begin
            if (s_axil_rready) begin
                rvalid_out <= 1'b0;
                rstate     <= 2'd0;
            end
        end
    endcase

    // ---- list start / end, counters
    if (doorbell) begin
        cl_done   <= 1'b0;
        cl_cycles <= 64'd0;
        cl_idle   <= 64'd0;
        rd_beats  <= 32'd0;
    end
    if (seq_busy) begin
        cl_cycles <= cl_cycles + 64'd1;
        if (!core_busy) begin
            cl_idle <= cl_idle + 64'd1;
        end
        if (m_axi_rvalid && m_axi_rready) begin
            rd_beats <= rd_beats + 32'd1;
        end
    end
    if (seq_done) begin
        cl_done  <= 1'b1;
        cl_err   <= cl_err | seq_err;
        cl_pc    <= seq_pc;
        cl_tag   <= seq_tag;
        cl_descs <= seq_descs;
        if (irq_en) begin
            irq_pend <= 1'b1;
        end
    end

    if (!aresetn) begin
        cl_base    <= 32'd0;
        cl_err     <= 32'd0;
        cl_pc      <= 32'd0;
        cl_tag     <= 32'd0;
        cl_timeout <= TIMEOUT_RESET;
        cl_descs   <= 32'd0;
        rd_beats   <= 32'd0;
        cl_cycles  <= 64'd0;
        cl_idle    <= 64'd0;
        cl_done    <= 1'b0;
        irq_en     <= 1'b0;
        irq_pend   <= 1'b0;
        irq_en12   <= 1'b0;
        doorbell   <= 1'b0;
        bvalid_reg <= 1'b0;
        hw_pend    <= 1'b0;
        hw_addr    <= {AW{1'b0}};
        hw_data    <= 32'd0;
        rstate     <= 2'd0;
        rf_raddr   <= {AW{1'b0}};
        rdata_out  <= 32'd0;
        rvalid_out <= 1'b0;
    end
end

assign s_axil_awready = w_fire;
assign s_axil_wready  = w_fire;
assign s_axil_bresp   = 2'b00;
assign s_axil_bvalid  = bvalid_reg;
assign s_axil_arready = r_fire;
assign s_axil_rdata   = rdata_out;
assign s_axil_rresp   = 2'b00;
assign s_axil_rvalid  = rvalid_out;
assign irq            = irq_pend && irq_en;

/* ---------------------------------------------------------------- 1.2 core */
wire             start, soft_reset;
wire [32*20-1:0] job_regs;
wire             core_done, stall;
wire [3:0]       state;
wire [31:0]      err_set;
/* verilator lint_off UNUSEDSIGNAL */
wire             irq12;
/* verilator lint_on UNUSEDSIGNAL */

wire [63:0]      c_wgt_tdata;
wire             c_wgt_tvalid, c_wgt_tready, c_wgt_tlast;
wire [63:0]      seq_wgt_tdata;
wire             seq_wgt_tvalid, seq_wgt_tlast;

assign c_wgt_tdata       = seq_busy ? seq_wgt_tdata : s_axis_wgt_tdata;
assign c_wgt_tvalid      = seq_busy ? seq_wgt_tvalid : s_axis_wgt_tvalid;
assign c_wgt_tlast       = seq_busy ? seq_wgt_tlast : s_axis_wgt_tlast;
assign s_axis_wgt_tready = !seq_busy && c_wgt_tready;

dtpu_regfile #(
    .AXIL_ADDR_WIDTH(AXIL_ADDR_WIDTH),
    .HWCFG0(HWCFG0),
    .HWCFG1(HWCFG1)
)
regfile_inst (
    .clk(clk),
    .rst_n(aresetn),
    .s_axil_awaddr(rf_wa),
    .s_axil_awprot(3'b000),
    .s_axil_awvalid(rf_wv),
    .s_axil_awready(rf_awready),
    .s_axil_wdata(rf_wd),
    .s_axil_wstrb(4'hF),
    .s_axil_wvalid(rf_wv),
    .s_axil_wready(rf_wready),
    .s_axil_bresp(rf_bresp),
    .s_axil_bvalid(rf_bvalid),
    .s_axil_bready(1'b1),
    .s_axil_araddr(rf_raddr),
    .s_axil_arprot(3'b000),
    .s_axil_arvalid(rstate == 2'd1),
    .s_axil_arready(rf_arready),
    .s_axil_rdata(rf_rdata),
    .s_axil_rresp(rf_rresp),
    .s_axil_rvalid(rf_rvalid),
    .s_axil_rready(1'b1),
    .start(start),
    .soft_reset(soft_reset),
    .job_regs(job_regs),
    .core_busy(core_busy),
    .core_done(core_done),
    .core_state(state),
    .core_err(err_set),
    .core_stall(stall),
    .wgt_beat(c_wgt_tvalid && c_wgt_tready),
    .act_beat(s_axis_act_tvalid && s_axis_act_tready),
    .res_beat(m_axis_res_tvalid && m_axis_res_tready),
    .irq(irq12)
);

dtpu_core #(
    .ROWS(ROWS),
    .COLS(COLS),
    .LOG_COLS(LOG_COLS),
    .LOG_WEIGHT_WORDS(LOG_WEIGHT_WORDS),
    .LOG_PARAM_ENTRIES(LOG_PARAM_ENTRIES),
    .LOG_ACT_WORDS(LOG_ACT_WORDS),
    .PREC_EN(PREC_EN)
)
core_inst (
    .clk(clk),
    .rst_n(aresetn),
    .start(start),
    .soft_reset(soft_reset),
    .job_regs(job_regs),
    .busy(core_busy),
    .done(core_done),
    .state(state),
    .err_set(err_set),
    .stall(stall),
    .s_axis_wgt_tdata(c_wgt_tdata),
    .s_axis_wgt_tvalid(c_wgt_tvalid),
    .s_axis_wgt_tready(c_wgt_tready),
    .s_axis_wgt_tlast(c_wgt_tlast),
    .s_axis_act_tdata(s_axis_act_tdata),
    .s_axis_act_tvalid(s_axis_act_tvalid),
    .s_axis_act_tready(s_axis_act_tready),
    .s_axis_act_tlast(s_axis_act_tlast),
    .m_axis_res_tdata(m_axis_res_tdata),
    .m_axis_res_tvalid(m_axis_res_tvalid),
    .m_axis_res_tready(m_axis_res_tready),
    .m_axis_res_tlast(m_axis_res_tlast)
);

/* ---------------------------------------------------------------- 2.0 units */
// job registers on the bus in offset order from JOB (dtpu_regfile)
localparam integer JI_JOB   = 0;
localparam integer JI_LADDR = ({24'd0, DTPU_REG_LOAD_ADDR} - {24'd0, DTPU_REG_JOB}) / 4;
localparam integer JI_LCNT  = ({24'd0, DTPU_REG_LOAD_COUNT} - {24'd0, DTPU_REG_JOB}) / 4;
localparam integer JI_PFCNT = ({24'd0, DTPU_REG_PF_COUNT} - {24'd0, DTPU_REG_JOB}) / 4;

wire              f_start, f_abort, f_drop, f_busy, f_ended;
wire [31:0]       f_err, f_pc, f_tag;
/* verilator lint_off UNUSEDSIGNAL */
wire [16:0]       f_descs;
wire              unused_fetch = f_ended;
/* verilator lint_on UNUSEDSIGNAL */
wire              f_req_valid, f_req_ready, f_valid, f_ready;
wire [ADDR_W-1:0] f_req_addr;
wire [31:0]       f_req_words;
wire              d_valid, d_ready, d_first, d_last;
wire [63:0]       d_data;
wire [31:0]       d_pc;

wire              l_req_valid, l_req_ready, l_valid, l_ready;
wire [ADDR_W-1:0] l_req_addr;
wire [31:0]       l_req_words;

wire              m_req_valid, m_req_ready, m_valid, m_ready, m_timeout, m_last;
wire [ADDR_W-1:0] m_req_addr;
wire [31:0]       m_req_words;
wire [63:0]       m_data;
wire [1:0]        m_resp;
wire              rd_idle;
/* verilator lint_off UNUSEDSIGNAL */
wire              rd_master_idle, e_slv, e_dec, e_tmo;
/* verilator lint_on UNUSEDSIGNAL */

dtpu_cl_fetch #(
    .ADDR_W(ADDR_W)
)
fetch_inst (
    .clk(clk),
    .rst_n(aresetn && !f_abort),
    .start(f_start),
    .base(cl_base[ADDR_W-1:0]),
    .busy(f_busy),
    .ended(f_ended),
    .err(f_err),
    .pc(f_pc),
    .tag(f_tag),
    .descs(f_descs),
    .rd_req_valid(f_req_valid),
    .rd_req_ready(f_req_ready),
    .rd_req_addr(f_req_addr),
    .rd_req_words(f_req_words),
    .rd_valid(f_valid),
    .rd_ready(f_ready),
    .rd_data(m_data),
    .rd_resp(m_resp),
    .rd_timeout(m_timeout),
    .d_valid(d_valid),
    .d_ready(d_ready),
    .d_data(d_data),
    .d_first(d_first),
    .d_last(d_last),
    .d_pc(d_pc)
);

dtpu_cl_rd_arb #(
    .ADDR_W(ADDR_W),
    .CNT_W(32)
)
arb_inst (
    .clk(clk),
    .rst_n(aresetn),
    .a_req_valid(f_req_valid),
    .a_req_ready(f_req_ready),
    .a_req_addr(f_req_addr),
    .a_req_words(f_req_words),
    .a_valid(f_valid),
    .a_ready(f_ready),
    .a_drop(f_drop),
    .b_req_valid(l_req_valid),
    .b_req_ready(l_req_ready),
    .b_req_addr(l_req_addr),
    .b_req_words(l_req_words),
    .b_valid(l_valid),
    .b_ready(l_ready),
    .m_req_valid(m_req_valid),
    .m_req_ready(m_req_ready),
    .m_req_addr(m_req_addr),
    .m_req_words(m_req_words),
    .m_valid(m_valid),
    .m_ready(m_ready),
    .m_last(m_last),
    .idle(rd_idle)
);

dtpu_axi_rd #(
    .ADDR_W(ADDR_W),
    .CNT_W(32),
    .MAX_BURST(MAX_BURST),
    .MAX_OUTSTANDING(MAX_OUTSTANDING),
    .TIMEOUT_W(32),
    .ID_W(ID_W)
)
rd_inst (
    .clk(clk),
    .rst_n(aresetn),
    .clear(!seq_busy),
    .timeout(cl_timeout),
    .req_valid(m_req_valid),
    .req_ready(m_req_ready),
    .req_addr(m_req_addr),
    .req_words(m_req_words),
    .m_valid(m_valid),
    .m_ready(m_ready),
    .m_data(m_data),
    .m_resp(m_resp),
    .m_timeout(m_timeout),
    .m_last(m_last),
    .idle(rd_master_idle),
    .err_slverr(e_slv),
    .err_decerr(e_dec),
    .err_timeout(e_tmo),
    .m_axi_arid(m_axi_arid),
    .m_axi_araddr(m_axi_araddr),
    .m_axi_arlen(m_axi_arlen),
    .m_axi_arsize(m_axi_arsize),
    .m_axi_arburst(m_axi_arburst),
    .m_axi_arcache(m_axi_arcache),
    .m_axi_arprot(m_axi_arprot),
    .m_axi_arvalid(m_axi_arvalid),
    .m_axi_arready(m_axi_arready),
    .m_axi_rid(m_axi_rid),
    .m_axi_rdata(m_axi_rdata),
    .m_axi_rresp(m_axi_rresp),
    .m_axi_rlast(m_axi_rlast),
    .m_axi_rvalid(m_axi_rvalid),
    .m_axi_rready(m_axi_rready)
);

dtpu_cl_seq #(
    .ADDR_W(ADDR_W),
    .AXIL_ADDR_WIDTH(AXIL_ADDR_WIDTH),
    .LOG_WEIGHT_WORDS(LOG_WEIGHT_WORDS),
    .LOG_PARAM_ENTRIES(LOG_PARAM_ENTRIES)
)
seq_inst (
    .clk(clk),
    .rst_n(aresetn),
    .start(doorbell),
    .busy(seq_busy),
    .done(seq_done),
    .err(seq_err),
    .pc(seq_pc),
    .tag(seq_tag),
    .descs(seq_descs),
    .f_start(f_start),
    .f_abort(f_abort),
    .f_drop(f_drop),
    .f_busy(f_busy),
    .f_err(f_err),
    .f_pc(f_pc),
    .f_tag(f_tag),
    .d_valid(d_valid),
    .d_ready(d_ready),
    .d_data(d_data),
    .d_first(d_first),
    .d_last(d_last),
    .d_pc(d_pc),
    .ld_req_valid(l_req_valid),
    .ld_req_ready(l_req_ready),
    .ld_req_addr(l_req_addr),
    .ld_req_words(l_req_words),
    .ld_valid(l_valid),
    .ld_ready(l_ready),
    .ld_data(m_data),
    .ld_resp(m_resp),
    .ld_timeout(m_timeout),
    .ld_last(m_last),
    .rd_idle(rd_idle),
    .rw_valid(seq_rw_valid),
    .rw_ready(rf_awready),
    .rw_addr(seq_rw_addr),
    .rw_data(seq_rw_data),
    .jr_job(job_regs[JI_JOB*32 +: 32]),
    .jr_load_addr(job_regs[JI_LADDR*32 +: 32]),
    .jr_load_count(job_regs[JI_LCNT*32 +: 32]),
    .irq_en(irq_en12),
    .core_busy(core_busy),
    .core_done(core_done),
    .core_err(err_set),
    .wgt_tdata(seq_wgt_tdata),
    .wgt_tvalid(seq_wgt_tvalid),
    .wgt_tready(c_wgt_tready),
    .wgt_tlast(seq_wgt_tlast),
    .x_words(x_words),
    .x_first(x_first),
    .x_post(x_post),
    .jr_pf_count(job_regs[JI_PFCNT*32 +: 32]),
    .la_start(la_start),
    .la_drain(la_drain),
    .la_busy(1'b0),
    .la_bad(1'b1),          // no load unit in this top yet: a RUN stops with BAD_FIELD
    .la_fault(3'd0),
    .st_start(st_start),
    .st_flush(st_flush),
    .st_idle(1'b1),
    .st_bad(1'b1),
    .st_fault(3'd0),
    .po_start(po_start),
    .po_drain(po_drain),
    .po_busy(1'b0),
    .po_bad(1'b1),          // nor a post unit: a POST stops with BAD_FIELD
    .po_job_err(1'b0),
    .po_fault(3'd0)
);

/* verilator lint_off UNUSEDSIGNAL */
wire [8*64-1:0] x_words;
wire            x_first, x_post, la_start, la_drain, st_start, st_flush, po_start, po_drain;
/* verilator lint_on UNUSEDSIGNAL */

endmodule

`resetall
