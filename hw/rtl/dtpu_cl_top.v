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
 * (dtpu_cl_seq: END, LOAD, REGS, RUN, POST; VEC with VEC_EN: the vector unit dtpu_vec on the
 * same read port as the load / post units and on the store unit's write master).
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
    parameter [31:0] TIMEOUT_RESET = 32'd1000000,
    // log2 of the credit buffers in front of the load unit's and the store unit's reads
    parameter LOG_RD_BUF = 7,
    // 1: the POST unit borrows lane 0 of the idle core's post unit instead of a lane of its own
    // (~1.5 k LUT less; docs/synthesis.md)
    parameter SHARE_POST_LANE = 1,
    // 1: the MXU's 8-bit rows as PE pairs on one multiplier each (dtpu_core; docs/architecture.md)
    parameter PE_PAIR = 0,
    // 1: contract 2.1's vector unit (dtpu_vec: VEC descriptors); 0: VEC answers BAD_OPCODE
    parameter VEC_EN = 0,
    // the vector unit's requantizing lanes of ADD / SUB / MUL (8, 4, 2 or 1: a word in
    // 8 / VEC_RQ_LANES cycles); the golden model's HwConfig VEC_RQ_LANES must match
    // (contract.json's default is this default: tests/test_hw_contract.py)
    parameter VEC_RQ_LANES = 8,
    // 1 (the board build): the rotated depthwise layout (dtpu_core; docs/architecture.md
    // "Depthwise crossbars linear in COLS"), 0 the banked one; the golden model's HwConfig
    // DW_ROTATE must match (contract.json's default is this default: tests/test_hw_contract.py)
    parameter DW_ROTATE = 1,
    // the requantization variants built into the post lanes (bit v: RQ_VARIANT code v; 31 all
    // five, the contract's default; 25 DOUBLE, DOUBLE_UP and FP32, what an int8 board needs:
    // docs/architecture.md, issue 26's budget); the golden model's HwConfig RQ_EN must match
    parameter RQ_EN = 31
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

    /* AXI4 master, write channels (64-bit; the store unit) */
    output wire [ID_W-1:0]             m_axi_awid,
    output wire [ADDR_W-1:0]           m_axi_awaddr,
    output wire [7:0]                  m_axi_awlen,
    output wire [2:0]                  m_axi_awsize,
    output wire [1:0]                  m_axi_awburst,
    output wire [3:0]                  m_axi_awcache,
    output wire [2:0]                  m_axi_awprot,
    output wire                        m_axi_awvalid,
    input  wire                        m_axi_awready,
    output wire [63:0]                 m_axi_wdata,
    output wire [7:0]                  m_axi_wstrb,
    output wire                        m_axi_wlast,
    output wire                        m_axi_wvalid,
    input  wire                        m_axi_wready,
    /* verilator lint_off UNUSEDSIGNAL */
    input  wire [ID_W-1:0]             m_axi_bid,
    /* verilator lint_on UNUSEDSIGNAL */
    input  wire [1:0]                  m_axi_bresp,
    input  wire                        m_axi_bvalid,
    output wire                        m_axi_bready,

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
// HWCFG1.RQ_OFF: the variants left out (0 with all five built)
localparam [7:0] RQ_ALL = 8'h1F;
localparam [7:0] RQ_OFF = RQ_ALL & ~RQ_EN[7:0];
localparam [31:0] HWCFG1 = {RQ_OFF, LOG_ACT_WORDS[7:0], LOG_PARAM_ENTRIES[7:0], LOG_WEIGHT_WORDS[7:0]};
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
reg  [31:0] cl_base, cl_err, cl_pc, cl_tag, cl_timeout, cl_descs, rd_beats, wr_beats;
reg  [63:0] cl_cycles, cl_idle;
reg         cl_done, irq_en, irq_pend;
reg         irq_en12;                       // CTRL.IRQ_EN as the host last wrote it

wire        seq_busy, seq_done;
wire        seq_loading;                  // the core runs a LOAD descriptor's job (idle for IDLE)
wire [31:0] seq_err, seq_pc, seq_tag, seq_descs;
reg         doorbell;
wire        core_busy;
wire        vec_active;                   // the vector unit's stall-free cycles (not IDLE)

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
        ra(DTPU_REG_WR_BEATS):     rdata_cl = wr_beats;
        ra(DTPU_REG_DESCS):        rdata_cl = cl_descs;
        default:                   rdata_cl = 32'd0;   // DOORBELL
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
        wr_beats  <= 32'd0;
    end
    po_busy_q <= po_busy;
    if (seq_busy) begin
        cl_cycles <= cl_cycles + 64'd1;
        // the contract's IDLE: list cycles - the jobs' stall-free cycles (a LOAD's 1.2 job,
        // and a RUN's cycles held by the global stall, e.g. waiting for the first word)
        // ... nor a POST's: from its start (S_PGO) to the sequencer's S_PRUN's last cycle, those
        // in which the post unit is not waiting for a sum
        // ... nor the vector unit's stall-free cycles (dtpu_vec `active`)
        if ((!core_busy || seq_loading || stall)
            && !((po_start || po_busy || po_busy_q) && !po_starved) && !vec_active) begin
            cl_idle <= cl_idle + 64'd1;
        end
        if (m_axi_rvalid && m_axi_rready) begin
            rd_beats <= rd_beats + 32'd1;
        end
        if (m_axi_wvalid && m_axi_wready) begin
            wr_beats <= wr_beats + 32'd1;
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
        wr_beats   <= 32'd0;
        cl_cycles  <= 64'd0;
        cl_idle    <= 64'd0;
        po_busy_q  <= 1'b0;
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

// the core's activation / result streams: the load / store units while a list runs
wire [63:0]      c_act_tdata, c_res_tdata;
wire             c_act_tvalid, c_act_tready, c_act_tlast;
wire             c_res_tvalid, c_res_tready, c_res_tlast;
wire [63:0]      la_m_data;
wire             la_m_valid, la_m_ready, la_m_last;
wire             la_drain;
wire             st_s_ready;
wire             po_busy, po_p_rd_en;
wire             po_starved;
reg              po_busy_q;     // the cycle after the post unit's last busy one (S_PRUN's last)
// the POST unit's lane: lane 0 of the core's dtpu_post (SHARE_POST_LANE)
wire             po_lane_sel, po_lane_in_valid, po_lane_valid, po_lane_ovf, po_lane_wrap;
wire [3:0]       po_lane_prec;
wire [2:0]       po_lane_variant;
wire [31:0]      po_lane_min, po_lane_max;
wire [63:0]      po_lane_in_acc, po_lane_in_bias, po_lane_in_rq, po_lane_value;
wire [LOG_PARAM_ENTRIES-1:0] po_p_rd_entry;
wire [63:0]      po_p_bias, po_p_rq;

assign c_act_tdata       = seq_busy ? la_m_data : s_axis_act_tdata;
assign c_act_tvalid      = seq_busy ? (la_m_valid && !la_drain) : s_axis_act_tvalid;
assign c_act_tlast       = seq_busy ? la_m_last : s_axis_act_tlast;
assign s_axis_act_tready = !seq_busy && c_act_tready;
assign la_m_ready        = la_drain || (seq_busy && c_act_tready);

assign m_axis_res_tdata  = c_res_tdata;
assign m_axis_res_tvalid = !seq_busy && c_res_tvalid;
assign m_axis_res_tlast  = c_res_tlast;
assign c_res_tready      = seq_busy ? (st_s_ready && !x_post) : m_axis_res_tready;

dtpu_regfile #(
    .AXIL_ADDR_WIDTH(AXIL_ADDR_WIDTH),
    .HWCFG0(HWCFG0),
    .HWCFG1(HWCFG1),
    .CONTRACT2(1)
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
    .act_beat(c_act_tvalid && c_act_tready),
    .res_beat(c_res_tvalid && c_res_tready),
    .irq(irq12)
);

dtpu_core #(
    .ROWS(ROWS),
    .COLS(COLS),
    .LOG_COLS(LOG_COLS),
    .LOG_WEIGHT_WORDS(LOG_WEIGHT_WORDS),
    .LOG_PARAM_ENTRIES(LOG_PARAM_ENTRIES),
    .LOG_ACT_WORDS(LOG_ACT_WORDS),
    .PREC_EN(PREC_EN),
    .EXT_POST_LANE(SHARE_POST_LANE),
    .PE_PAIR(PE_PAIR),
    .DW_ROTATE(DW_ROTATE),
    .RQ_EN(RQ_EN)
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
    .s_axis_act_tdata(c_act_tdata),
    .s_axis_act_tvalid(c_act_tvalid),
    .s_axis_act_tready(c_act_tready),
    .s_axis_act_tlast(c_act_tlast),
    .m_axis_res_tdata(c_res_tdata),
    .m_axis_res_tvalid(c_res_tvalid),
    .m_axis_res_tready(c_res_tready),
    .m_axis_res_tlast(c_res_tlast),
    .ext_prm_sel(po_busy),
    .ext_prm_rd_en(po_p_rd_en),
    .ext_prm_rd_entry(po_p_rd_entry),
    .ext_prm_bias(po_p_bias),
    .ext_prm_rq(po_p_rq),
    .ext_lane_sel(po_lane_sel),
    .ext_lane_prec(po_lane_prec),
    .ext_lane_variant(po_lane_variant),
    .ext_lane_min(po_lane_min),
    .ext_lane_max(po_lane_max),
    .ext_lane_in_valid(po_lane_in_valid),
    .ext_lane_in_acc(po_lane_in_acc),
    .ext_lane_in_bias(po_lane_in_bias),
    .ext_lane_in_rq(po_lane_in_rq),
    .ext_lane_value(po_lane_value),
    .ext_lane_valid(po_lane_valid),
    .ext_lane_ovf(po_lane_ovf),
    .ext_lane_wrap(po_lane_wrap)
);

/* ---------------------------------------------------------------- 2.0 units */
// job registers on the bus in offset order from JOB (dtpu_regfile)
localparam integer JI_JOB   = 0;
localparam integer JI_LADDR = ({24'd0, DTPU_REG_LOAD_ADDR} - {24'd0, DTPU_REG_JOB}) / 4;
localparam integer JI_LCNT  = ({24'd0, DTPU_REG_LOAD_COUNT} - {24'd0, DTPU_REG_JOB}) / 4;
localparam integer JI_PFCNT = ({24'd0, DTPU_REG_PF_COUNT} - {24'd0, DTPU_REG_JOB}) / 4;
localparam integer JI_PBASE = ({24'd0, DTPU_REG_PARAM_BASE} - {24'd0, DTPU_REG_JOB}) / 4;
localparam integer JI_AMIN  = ({24'd0, DTPU_REG_ACT_MIN} - {24'd0, DTPU_REG_JOB}) / 4;
localparam integer JI_AMAX  = ({24'd0, DTPU_REG_ACT_MAX} - {24'd0, DTPU_REG_JOB}) / 4;

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
    .b_req_valid(u_req_valid),
    .b_req_ready(u_req_ready),
    .b_req_addr(u_req_addr),
    .b_req_words(u_req_words),
    .b_valid(u_valid),
    .b_ready(u_ready),
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

/* ---- the units' reads: port B of arb_inst is shared by
 *   X: the sequencer's LOADs, the load unit (through a credit buffer) and the post unit, which
 *      never read at the same time (the sequencer runs one of them at a time and each takes
 *      every word it asked for before it is idle), and
 *   S: the store unit's ACC read-back (through a credit buffer),
 * under a second dtpu_cl_rd_arb. The credit buffers keep the in-order word stream moving
 * whatever the core does: the load unit's words wait in its buffer when the core stalls, the
 * store unit's read-ahead words in its own (see dtpu_cl_rd_buf). */
wire              u_req_valid, u_req_ready, u_valid, u_ready;
wire [ADDR_W-1:0] u_req_addr;
wire [31:0]       u_req_words;

wire              x_req_valid, x_req_ready, x_valid, x_ready;
wire [ADDR_W-1:0] x_req_addr;
wire [31:0]       x_req_words;
wire              s_req_valid_b, s_req_ready_b, s_valid_b, s_ready_b;
wire [ADDR_W-1:0] s_req_addr_b;
wire [31:0]       s_req_words_b;
/* verilator lint_off UNUSEDSIGNAL */
wire              arb2_idle;
/* verilator lint_on UNUSEDSIGNAL */

dtpu_cl_rd_arb #(
    .ADDR_W(ADDR_W),
    .CNT_W(32)
)
arb2_inst (
    .clk(clk),
    .rst_n(aresetn),
    .a_req_valid(x_req_valid),
    .a_req_ready(x_req_ready),
    .a_req_addr(x_req_addr),
    .a_req_words(x_req_words),
    .a_valid(x_valid),
    .a_ready(x_ready),
    .a_drop(1'b0),
    .b_req_valid(s_req_valid_b),
    .b_req_ready(s_req_ready_b),
    .b_req_addr(s_req_addr_b),
    .b_req_words(s_req_words_b),
    .b_valid(s_valid_b),
    .b_ready(s_ready_b),
    .m_req_valid(u_req_valid),
    .m_req_ready(u_req_ready),
    .m_req_addr(u_req_addr),
    .m_req_words(u_req_words),
    .m_valid(u_valid),
    .m_ready(u_ready),
    .m_last(m_last),
    .idle(arb2_idle)
);

// X: who owns the words (one of them at a time, see above)
wire              la_busy, lb_idle;
wire              lb_req_valid, lb_req_ready, lb_valid, lb_ready;
wire [ADDR_W-1:0] lb_req_addr;
wire [31:0]       lb_req_words;
wire              po_req_valid;
wire [ADDR_W-1:0] po_req_addr;
wire [15:0]       po_req_words;
wire              po_w_ready;
wire              own_la = la_busy || !lb_idle;
wire              own_po = po_busy && !own_la;
// the vector unit: while it reads nothing else does (it reads once every unit is idle: vec_go);
// port X is free again once its last word came (vec_rd_owns), so a LOAD after it reads while
// its results drain to the write master (the contract's SEQ_LOAD_REQ after the LOAD's header)
wire              vec_busy, vec_owns, vec_rd_owns;
wire              own_v  = vec_rd_owns && !own_la && !own_po;
wire              v_req_valid, v_rd_ready;
wire [ADDR_W-1:0] v_req_addr;
wire [31:0]       v_req_words;

assign x_req_valid  = own_la ? lb_req_valid : own_po ? po_req_valid : own_v ? v_req_valid
                    : l_req_valid;
assign x_req_addr   = own_la ? lb_req_addr : own_po ? po_req_addr : own_v ? v_req_addr
                    : l_req_addr;
assign x_req_words  = own_la ? lb_req_words : own_po ? {16'd0, po_req_words}
                    : own_v ? v_req_words : l_req_words;
assign lb_req_ready = own_la && x_req_ready;
wire   po_req_ready = own_po && x_req_ready;
wire   v_req_ready  = own_v && x_req_ready;
assign l_req_ready  = !own_la && !own_po && !own_v && x_req_ready;
assign lb_valid     = own_la && x_valid;
wire   po_w_valid   = own_po && x_valid;
wire   v_rd_valid   = own_v && x_valid;
assign l_valid      = !own_la && !own_po && !own_v && x_valid;
assign x_ready      = own_la ? lb_ready : own_po ? po_w_ready : own_v ? v_rd_ready : l_ready;

/* ---------------------------------------------------------------- load unit */
/* descriptor words as the units see them (fields they do not use: RES0.SIGNED, the reserved
   bits) */
/* verilator lint_off UNUSEDSIGNAL */
wire [63:0] xw_act0 = x_words[0 +: 64];
wire [63:0] xw_act1 = x_words[64 +: 64];
wire [63:0] xw_act2 = x_words[128 +: 64];
wire [63:0] xw_act3 = x_words[192 +: 64];
wire [63:0] xw_act4 = x_words[256 +: 64];
wire [63:0] xw_res0 = x_words[320 +: 64];
wire [63:0] xw_res1 = x_words[384 +: 64];
wire [63:0] xw_res2 = x_words[448 +: 64];
/* verilator lint_on UNUSEDSIGNAL */

wire              la_req_valid, la_req_ready, la_rd_valid, la_rd_ready, la_rd_timeout, la_rd_last;
wire [ADDR_W-1:0] la_req_addr;
wire [31:0]       la_req_words;
wire [63:0]       la_rd_data;
wire [1:0]        la_rd_resp;
wire              la_err_slv, la_err_dec, la_err_tmo, la_err_field;
/* verilator lint_off UNUSEDSIGNAL */
wire              la_start_ready, la_done, la_word_mode;
/* verilator lint_on UNUSEDSIGNAL */

dtpu_cl_load #(
    .ADDR_W(ADDR_W),
    .MAX_BURST(MAX_BURST)
)
load_inst (
    .clk(clk),
    .rst_n(aresetn),
    .start(la_start),
    .start_ready(la_start_ready),
    .busy(la_busy),
    .done(la_done),
    .word_mode(la_word_mode),
    .err_slverr(la_err_slv),
    .err_decerr(la_err_dec),
    .err_timeout(la_err_tmo),
    .err_field(la_err_field),
    .cfg_src(xw_act0[DTPU_CL_ACT0_SRC_LSB +: ADDR_W]),
    .cfg_mode(xw_act0[DTPU_CL_ACT0_MODE_LSB +: DTPU_CL_ACT0_MODE_WIDTH]),
    .cfg_lanes(xw_act0[DTPU_CL_ACT0_LANES_LSB +: DTPU_CL_ACT0_LANES_WIDTH]),
    .cfg_esize(xw_act0[DTPU_CL_ACT0_ESIZE_LSB +: DTPU_CL_ACT0_ESIZE_WIDTH]),
    .cfg_pad(xw_act0[DTPU_CL_ACT0_PAD_LSB +: DTPU_CL_ACT0_PAD_WIDTH]),
    .cfg_n(xw_act1[DTPU_CL_ACT1_N_LSB +: DTPU_CL_ACT1_N_WIDTH]),
    .cfg_h(xw_act1[DTPU_CL_ACT1_H_LSB +: DTPU_CL_ACT1_H_WIDTH]),
    .cfg_w(xw_act1[DTPU_CL_ACT1_W_LSB +: DTPU_CL_ACT1_W_WIDTH]),
    .cfg_c(xw_act1[DTPU_CL_ACT1_C_LSB +: DTPU_CL_ACT1_C_WIDTH]),
    .cfg_kh(xw_act2[DTPU_CL_ACT2_KH_LSB +: DTPU_CL_ACT2_KH_WIDTH]),
    .cfg_kw(xw_act2[DTPU_CL_ACT2_KW_LSB +: DTPU_CL_ACT2_KW_WIDTH]),
    .cfg_sy(xw_act2[DTPU_CL_ACT2_SY_LSB +: DTPU_CL_ACT2_SY_WIDTH]),
    .cfg_sx(xw_act2[DTPU_CL_ACT2_SX_LSB +: DTPU_CL_ACT2_SX_WIDTH]),
    .cfg_dy(xw_act2[DTPU_CL_ACT2_DY_LSB +: DTPU_CL_ACT2_DY_WIDTH]),
    .cfg_dx(xw_act2[DTPU_CL_ACT2_DX_LSB +: DTPU_CL_ACT2_DX_WIDTH]),
    .cfg_pt(xw_act2[DTPU_CL_ACT2_PT_LSB +: DTPU_CL_ACT2_PT_WIDTH]),
    .cfg_pl(xw_act2[DTPU_CL_ACT2_PL_LSB +: DTPU_CL_ACT2_PL_WIDTH]),
    .cfg_oh(xw_act2[DTPU_CL_ACT2_OH_LSB +: DTPU_CL_ACT2_OH_WIDTH]),
    .cfg_ow(xw_act2[DTPU_CL_ACT2_OW_LSB +: DTPU_CL_ACT2_OW_WIDTH]),
    .cfg_kp(xw_act3[DTPU_CL_ACT3_KP_LSB +: DTPU_CL_ACT3_KP_WIDTH]),
    .cfg_k0(xw_act3[DTPU_CL_ACT3_K0_LSB +: DTPU_CL_ACT3_K0_WIDTH]),
    .cfg_k1(xw_act3[DTPU_CL_ACT3_K1_LSB +: DTPU_CL_ACT3_K1_WIDTH]),
    .cfg_nchunk(xw_act3[DTPU_CL_ACT3_NCHUNK_LSB +: DTPU_CL_ACT3_NCHUNK_WIDTH]),
    .cfg_cv(xw_act4[DTPU_CL_ACT4_CV_LSB +: DTPU_CL_ACT4_CV_WIDTH]),
    .req_valid(la_req_valid),
    .req_ready(la_req_ready),
    .req_addr(la_req_addr),
    .req_words(la_req_words),
    .rd_valid(la_rd_valid),
    .rd_ready(la_rd_ready),
    .rd_data(la_rd_data),
    .rd_resp(la_rd_resp),
    .rd_timeout(la_rd_timeout),
    .rd_last(la_rd_last),
    .m_valid(la_m_valid),
    .m_ready(la_m_ready),
    .m_data(la_m_data),
    .m_last(la_m_last)
);

dtpu_cl_rd_buf #(
    .ADDR_W(ADDR_W),
    .CNT_W(32),
    .LOG_DEPTH(LOG_RD_BUF)
)
la_buf_inst (
    .clk(clk),
    .rst_n(aresetn),
    .s_req_valid(la_req_valid),
    .s_req_ready(la_req_ready),
    .s_req_addr(la_req_addr),
    .s_req_words(la_req_words),
    .s_valid(la_rd_valid),
    .s_ready(la_rd_ready),
    .s_data(la_rd_data),
    .s_resp(la_rd_resp),
    .s_timeout(la_rd_timeout),
    .s_last(la_rd_last),
    .m_req_valid(lb_req_valid),
    .m_req_ready(lb_req_ready),
    .m_req_addr(lb_req_addr),
    .m_req_words(lb_req_words),
    .m_valid(lb_valid),
    .m_ready(lb_ready),
    .m_data(m_data),
    .m_resp(m_resp),
    .m_timeout(m_timeout),
    .m_last(m_last),
    .idle(lb_idle)
);

/* ---------------------------------------------------------------- post unit */
/* verilator lint_off UNUSEDSIGNAL */
wire [63:0] xw_post1 = x_words[0 +: 64];
wire [63:0] xw_post2 = x_words[64 +: 64];
wire [63:0] xw_post3 = x_words[128 +: 64];
wire [31:0] jr_job_v = job_regs[JI_JOB*32 +: 32];
/* verilator lint_on UNUSEDSIGNAL */

wire        po_bad, po_slv, po_dec, po_tmo, po_ovf;
wire        po_out_valid, po_out_last;
wire [63:0] po_out_data;
wire [3:0]  po_res_mode, po_res_lanes, po_res_esize;
wire [ADDR_W-1:0] po_res_dst;
wire [31:0] po_res_pix;
wire [15:0] po_res_outer, po_res_inner, po_res_gw, po_res_ch0, po_res_ch1, po_res_dstc;
/* verilator lint_off UNUSEDSIGNAL */
wire        po_done, po_wrap, po_res_signed;
/* verilator lint_on UNUSEDSIGNAL */
wire        po_drain;

dtpu_cl_post #(
    .ADDR_W(ADDR_W),
    .PADDR_W(LOG_PARAM_ENTRIES),
    .PREC_EN(PREC_EN),
    .EXT_LANE(SHARE_POST_LANE),
    .RQ_EN(RQ_EN)
)
post_inst (
    .clk(clk),
    .rst_n(aresetn),
    .start(po_start),
    .src(xw_post1[DTPU_CL_POST1_SRC_LSB +: ADDR_W]),
    .dst(xw_post1[DTPU_CL_POST1_DST_LSB +: ADDR_W]),
    .pix(xw_post2[DTPU_CL_POST2_PIX_LSB +: DTPU_CL_POST2_PIX_WIDTH]),
    .ch0(xw_post2[DTPU_CL_POST2_CH0_LSB +: DTPU_CL_POST2_CH0_WIDTH]),
    .ch(xw_post2[DTPU_CL_POST2_CH_LSB +: DTPU_CL_POST2_CH_WIDTH]),
    .dstc(xw_post3[DTPU_CL_POST3_DSTC_LSB +: DTPU_CL_POST3_DSTC_WIDTH]),
    .job_prec(jr_job_v[DTPU_JOB_PREC_LSB +: 4]),
    .job_out_mode(jr_job_v[DTPU_JOB_OUT_MODE_LSB +: 2]),
    .job_variant(jr_job_v[DTPU_JOB_RQ_VARIANT_LSB +: 3]),
    .param_base(job_regs[JI_PBASE*32 +: 32]),
    .act_min(job_regs[JI_AMIN*32 +: 32]),
    .act_max(job_regs[JI_AMAX*32 +: 32]),
    .busy(po_busy),
    .starved(po_starved),
    .done(po_done),
    .bad_field(po_bad),
    .err_slverr(po_slv),
    .err_decerr(po_dec),
    .err_timeout(po_tmo),
    .err_ovf(po_ovf),
    .warn_wrap(po_wrap),
    .req_valid(po_req_valid),
    .req_ready(po_req_ready),
    .req_addr(po_req_addr),
    .req_words(po_req_words),
    .w_valid(po_w_valid),
    .w_ready(po_w_ready),
    .w_data(m_data),
    .w_resp(m_resp),
    .w_timeout(m_timeout),
    .p_rd_en(po_p_rd_en),
    .p_rd_entry(po_p_rd_entry),
    .p_rd_bias(po_p_bias),
    .p_rd_rq(po_p_rq),
    .lane_sel(po_lane_sel),
    .lane_prec(po_lane_prec),
    .lane_variant(po_lane_variant),
    .lane_min(po_lane_min),
    .lane_max(po_lane_max),
    .lane_in_valid(po_lane_in_valid),
    .lane_in_acc(po_lane_in_acc),
    .lane_in_bias(po_lane_in_bias),
    .lane_in_rq(po_lane_in_rq),
    .lane_out_value(po_lane_value),
    .lane_out_valid(po_lane_valid),
    .lane_out_ovf(po_lane_ovf),
    .lane_out_wrap(po_lane_wrap),
    .out_valid(po_out_valid),
    .out_ready(po_drain || (x_post && st_s_ready)),
    .out_data(po_out_data),
    .out_last(po_out_last),
    .res_mode(po_res_mode),
    .res_lanes(po_res_lanes),
    .res_esize(po_res_esize),
    .res_signed(po_res_signed),
    .res_dst(po_res_dst),
    .res_pix(po_res_pix),
    .res_outer(po_res_outer),
    .res_inner(po_res_inner),
    .res_gw(po_res_gw),
    .res_ch0(po_res_ch0),
    .res_ch1(po_res_ch1),
    .res_dstc(po_res_dstc)
);

/* ---------------------------------------------------------------- store unit */
wire [3:0]  r_mode  = xw_res0[DTPU_CL_RES0_MODE_LSB +: DTPU_CL_RES0_MODE_WIDTH];
wire [15:0] r_outer = xw_res1[DTPU_CL_RES1_OUTER_LSB +: DTPU_CL_RES1_OUTER_WIDTH];
wire [15:0] r_inner = xw_res1[DTPU_CL_RES1_INNER_LSB +: DTPU_CL_RES1_INNER_WIDTH];
wire [15:0] r_gw    = xw_res2[DTPU_CL_RES2_GW_LSB +: DTPU_CL_RES2_GW_WIDTH];
wire [15:0] r_ch0   = xw_res2[DTPU_CL_RES2_CH0_LSB +: DTPU_CL_RES2_CH0_WIDTH];
wire [15:0] r_ch1   = xw_res2[DTPU_CL_RES2_CH1_LSB +: DTPU_CL_RES2_CH1_WIDTH];
wire [15:0] r_dstc  = xw_res2[DTPU_CL_RES2_DSTC_LSB +: DTPU_CL_RES2_DSTC_WIDTH];
// the golden model's channel range check (Executor._scatter): hi = min(CH1, CH0 + OUTER*INNER*GW)
// must satisfy CH0 < hi <= DSTC; the store unit checks the rest
wire [47:0] r_span  = {32'd0, r_outer} * {32'd0, r_inner} * {32'd0, r_gw};
wire [47:0] r_top   = {32'd0, r_ch0} + r_span;
wire [47:0] r_hi    = ({32'd0, r_ch1} < r_top) ? {32'd0, r_ch1} : r_top;
wire        r_range_bad = (r_mode != 4'd0) && ((r_hi > {32'd0, r_dstc}) || ({32'd0, r_ch0} >= r_hi));

wire        st_busy, st_idle;
wire        st_slv, st_dec, st_tmo, st_err_field, st_err_len;
wire        st_wr_req_valid, st_wr_req_ready, st_wr_valid, st_wr_ready;
wire [ADDR_W-1:0] st_wr_req_addr;
wire [31:0] st_wr_req_words;
wire [63:0] st_wr_data;
wire [7:0]  st_wr_strb;
wire        wr_idle, wr_slv, wr_dec, wr_tmo;
wire        st_rd_req_valid, st_rd_req_ready, st_rd_valid, st_rd_ready;
wire [ADDR_W-1:0] st_rd_req_addr;
wire [31:0] st_rd_req_words;
wire [63:0] st_rd_data;
wire [1:0]  st_rd_resp;
wire        st_rd_timeout;
/* verilator lint_off UNUSEDSIGNAL */
wire        st_rd_last, sb_idle;
/* verilator lint_on UNUSEDSIGNAL */
reg         st_rd_slv, st_rd_dec, st_rd_tmo;   // the ACC read-back's faults, sticky per list

always @(posedge clk) begin
    if (st_rd_valid && st_rd_ready) begin
        if (st_rd_resp == 2'b10) st_rd_slv <= 1'b1;
        if (st_rd_resp == 2'b11) st_rd_dec <= 1'b1;
        if (st_rd_timeout)       st_rd_tmo <= 1'b1;
    end
    if (!aresetn || !seq_busy) begin
        st_rd_slv <= 1'b0;
        st_rd_dec <= 1'b0;
        st_rd_tmo <= 1'b0;
    end
end

dtpu_cl_store #(
    .ADDR_W(ADDR_W),
    .MAX_RUN(MAX_BURST)
)
store_inst (
    .clk(clk),
    .rst_n(aresetn),
    .clear(!seq_busy),
    .flush(st_flush),
    .start(st_start),
    .cfg_mode(x_post ? po_res_mode : r_mode),
    .cfg_lanes(x_post ? po_res_lanes : xw_res0[DTPU_CL_RES0_LANES_LSB +: DTPU_CL_RES0_LANES_WIDTH]),
    .cfg_esize(x_post ? po_res_esize : xw_res0[DTPU_CL_RES0_ESIZE_LSB +: DTPU_CL_RES0_ESIZE_WIDTH]),
    .cfg_dst(x_post ? po_res_dst : xw_res0[DTPU_CL_RES0_DST_LSB +: ADDR_W]),
    .cfg_pix(x_post ? po_res_pix : xw_res1[DTPU_CL_RES1_PIX_LSB +: DTPU_CL_RES1_PIX_WIDTH]),
    .cfg_outer(x_post ? po_res_outer : r_outer),
    .cfg_inner(x_post ? po_res_inner : r_inner),
    .cfg_gw(x_post ? po_res_gw : r_gw),
    .cfg_ch0(x_post ? po_res_ch0 : r_ch0),
    .cfg_ch1(x_post ? po_res_ch1 : r_ch1),
    .cfg_dstc(x_post ? po_res_dstc : r_dstc),
    .cfg_first(x_first),
    .busy(st_busy),
    .idle(st_idle),
    .s_valid(x_post ? (po_out_valid && !po_drain) : (seq_busy && c_res_tvalid)),
    .s_ready(st_s_ready),
    .s_data(x_post ? po_out_data : c_res_tdata),
    .s_last(x_post ? po_out_last : c_res_tlast),
    .wr_req_valid(st_wr_req_valid),
    .wr_req_ready(st_wr_req_ready),
    .wr_req_addr(st_wr_req_addr),
    .wr_req_words(st_wr_req_words),
    .wr_valid(st_wr_valid),
    .wr_ready(st_wr_ready),
    .wr_data(st_wr_data),
    .wr_strb(st_wr_strb),
    .wr_idle(wr_idle),
    .wr_err_slverr(wr_slv),
    .wr_err_decerr(wr_dec),
    .wr_err_timeout(wr_tmo),
    .rd_req_valid(st_rd_req_valid),
    .rd_req_ready(st_rd_req_ready),
    .rd_req_addr(st_rd_req_addr),
    .rd_req_words(st_rd_req_words),
    .rd_valid(st_rd_valid),
    .rd_ready(st_rd_ready),
    .rd_data(st_rd_data),
    .rd_err_slverr(st_rd_slv),
    .rd_err_decerr(st_rd_dec),
    .rd_err_timeout(st_rd_tmo),
    .err_slverr(st_slv),
    .err_decerr(st_dec),
    .err_timeout(st_tmo),
    .err_field(st_err_field),
    .err_len(st_err_len)
);

dtpu_cl_rd_buf #(
    .ADDR_W(ADDR_W),
    .CNT_W(32),
    .LOG_DEPTH(LOG_RD_BUF)
)
st_buf_inst (
    .clk(clk),
    .rst_n(aresetn),
    .s_req_valid(st_rd_req_valid),
    .s_req_ready(st_rd_req_ready),
    .s_req_addr(st_rd_req_addr),
    .s_req_words(st_rd_req_words),
    .s_valid(st_rd_valid),
    .s_ready(st_rd_ready),
    .s_data(st_rd_data),
    .s_resp(st_rd_resp),
    .s_timeout(st_rd_timeout),
    .s_last(st_rd_last),
    .m_req_valid(s_req_valid_b),
    .m_req_ready(s_req_ready_b),
    .m_req_addr(s_req_addr_b),
    .m_req_words(s_req_words_b),
    .m_valid(s_valid_b),
    .m_ready(s_ready_b),
    .m_data(m_data),
    .m_resp(m_resp),
    .m_timeout(m_timeout),
    .m_last(m_last),
    .idle(sb_idle)
);

// the write master: the store unit's, lent to the vector unit while it runs (the store unit is
// idle then: the unit reads and writes once every earlier write is answered, vec_go)
wire              wr_req_ready, wr_s_ready;
wire              v_wr_req_valid, v_w_valid;
wire [ADDR_W-1:0] v_wr_req_addr;
wire [31:0]       v_wr_req_words;
wire [63:0]       v_w_data;
wire [7:0]        v_w_strb;
assign st_wr_req_ready = !vec_owns && wr_req_ready;
assign st_wr_ready     = !vec_owns && wr_s_ready;

dtpu_axi_wr #(
    .ADDR_W(ADDR_W),
    .CNT_W(32),
    .MAX_BURST(MAX_BURST),
    .MAX_OUTSTANDING(MAX_OUTSTANDING),
    .TIMEOUT_W(32),
    .ID_W(ID_W)
)
wr_inst (
    .clk(clk),
    .rst_n(aresetn),
    .clear(!seq_busy),
    .timeout(cl_timeout),
    .req_valid(vec_owns ? v_wr_req_valid : st_wr_req_valid),
    .req_ready(wr_req_ready),
    .req_addr(vec_owns ? v_wr_req_addr : st_wr_req_addr),
    .req_words(vec_owns ? v_wr_req_words : st_wr_req_words),
    .s_valid(vec_owns ? v_w_valid : st_wr_valid),
    .s_ready(wr_s_ready),
    .s_data(vec_owns ? v_w_data : st_wr_data),
    .s_strb(vec_owns ? v_w_strb : st_wr_strb),
    .idle(wr_idle),
    .err_slverr(wr_slv),
    .err_decerr(wr_dec),
    .err_timeout(wr_tmo),
    .m_axi_awid(m_axi_awid),
    .m_axi_awaddr(m_axi_awaddr),
    .m_axi_awlen(m_axi_awlen),
    .m_axi_awsize(m_axi_awsize),
    .m_axi_awburst(m_axi_awburst),
    .m_axi_awcache(m_axi_awcache),
    .m_axi_awprot(m_axi_awprot),
    .m_axi_awvalid(m_axi_awvalid),
    .m_axi_awready(m_axi_awready),
    .m_axi_wdata(m_axi_wdata),
    .m_axi_wstrb(m_axi_wstrb),
    .m_axi_wlast(m_axi_wlast),
    .m_axi_wvalid(m_axi_wvalid),
    .m_axi_wready(m_axi_wready),
    .m_axi_bid(m_axi_bid),
    .m_axi_bresp(m_axi_bresp),
    .m_axi_bvalid(m_axi_bvalid),
    .m_axi_bready(m_axi_bready)
);

dtpu_cl_seq #(
    .ADDR_W(ADDR_W),
    .AXIL_ADDR_WIDTH(AXIL_ADDR_WIDTH),
    .LOG_WEIGHT_WORDS(LOG_WEIGHT_WORDS),
    .LOG_PARAM_ENTRIES(LOG_PARAM_ENTRIES),
    .VEC_EN(VEC_EN)
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
    .loading(seq_loading),
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
    .la_busy(la_busy),
    .la_bad(la_err_field),
    .la_fault({la_err_tmo, la_err_dec, la_err_slv}),
    .st_start(st_start),
    .st_flush(st_flush),
    .st_idle(st_idle && !st_busy),
    .st_busy(st_busy),
    .st_bad(st_err_field || st_err_len || (!x_post && r_range_bad)),
    .st_fault({st_tmo, st_dec, st_slv}),
    .po_start(po_start),
    .po_drain(po_drain),
    .po_busy(po_busy),
    .po_bad(po_bad),
    .po_job_err(po_ovf),
    .po_fault({po_tmo, po_dec, po_slv}),
    .vec_start(vec_start),
    .vec_go(vec_go),
    .vec_busy(vec_busy),
    .vec_done(vec_done),
    .vec_bad(vec_bad),
    .vec_fault({vec_tmo, vec_dec, vec_slv})
);

/* ---------------------------------------------------------------- vector unit (VEC_EN) */
wire vec_start, vec_go, vec_done, vec_bad, vec_slv, vec_dec, vec_tmo;

generate
    if (VEC_EN != 0) begin : vec
        dtpu_vec #(
            .ADDR_W(ADDR_W),
            .RQ_LANES(VEC_RQ_LANES),
            .MAX_BURST(MAX_BURST)
        )
        vec_inst (
            .clk(clk),
            .rst_n(aresetn),
            .start(vec_start),
            .go(vec_go),
            .words(x_words),
            .busy(vec_busy),
            .owns(vec_owns),
            .rd_owns(vec_rd_owns),
            .done(vec_done),
            .active(vec_active),
            .bad(vec_bad),
            .err_slverr(vec_slv),
            .err_decerr(vec_dec),
            .err_timeout(vec_tmo),
            .req_valid(v_req_valid),
            .req_ready(v_req_ready),
            .req_addr(v_req_addr),
            .req_words(v_req_words),
            .rd_valid(v_rd_valid),
            .rd_ready(v_rd_ready),
            .rd_data(m_data),
            .rd_resp(m_resp),
            .rd_timeout(m_timeout),
            .wr_req_valid(v_wr_req_valid),
            .wr_req_ready(wr_req_ready),
            .wr_req_addr(v_wr_req_addr),
            .wr_req_words(v_wr_req_words),
            .w_valid(v_w_valid),
            .w_ready(wr_s_ready),
            .w_data(v_w_data),
            .w_strb(v_w_strb)
        );
    end else begin : no_vec
        assign vec_busy       = 1'b0;
        assign vec_owns       = 1'b0;
        assign vec_rd_owns    = 1'b0;
        assign vec_done       = 1'b0;
        assign vec_active     = 1'b0;
        assign vec_bad        = 1'b0;
        assign vec_slv        = 1'b0;
        assign vec_dec        = 1'b0;
        assign vec_tmo        = 1'b0;
        assign v_req_valid    = 1'b0;
        assign v_req_addr     = {ADDR_W{1'b0}};
        assign v_req_words    = 32'd0;
        assign v_rd_ready     = 1'b0;
        assign v_wr_req_valid = 1'b0;
        assign v_wr_req_addr  = {ADDR_W{1'b0}};
        assign v_wr_req_words = 32'd0;
        assign v_w_valid      = 1'b0;
        assign v_w_data       = 64'd0;
        assign v_w_strb       = 8'd0;
        /* verilator lint_off UNUSEDSIGNAL */
        wire unused_vec = vec_start ^ vec_go ^ v_req_ready ^ v_rd_valid;
        /* verilator lint_on UNUSEDSIGNAL */
    end
endgenerate

wire [8*64-1:0] x_words;
wire            x_first, x_post, la_start, st_start, st_flush, po_start;

endmodule

`resetall
