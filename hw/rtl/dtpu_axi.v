/*

Copyright (c) 2026 DTPU authors. Apache-2.0.

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * DTPU top level: AXI4-Lite register file (s_axil), weight/parameter stream (s_axis_wgt),
 * activation stream (s_axis_act), result stream (m_axis_res), all 64-bit AXI4-Stream with
 * tlast, one clock, synchronous active-low reset (aresetn), level interrupt.
 */
module dtpu_axi #
(
    // MXU rows (fixed by the contract: int8 lanes of a 64-bit word)
    parameter ROWS = 8,
    // MXU columns, a power of two >= 2
    parameter COLS = 8,
    // log2 of the weight memory words
    parameter LOG_WEIGHT_WORDS = 15,
    // log2 of the parameter memory entries
    parameter LOG_PARAM_ENTRIES = 12,
    // log2 of the activation buffer words
    parameter LOG_ACT_WORDS = 12,
    // enabled precisions (bit p: PREC code p)
    parameter [15:0] PREC_EN = 16'h007F,
    // AXI4-Lite byte address width
    parameter AXIL_ADDR_WIDTH = 8,
    // 1: the MXU's 8-bit rows as PE pairs on one multiplier each (dtpu_core; docs/architecture.md)
    parameter PE_PAIR = 0,
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

    /* AXI4-Lite slave: registers */
    input  wire [AXIL_ADDR_WIDTH-1:0]  s_axil_awaddr,
    input  wire [2:0]                  s_axil_awprot,
    input  wire                        s_axil_awvalid,
    output wire                        s_axil_awready,
    input  wire [31:0]                 s_axil_wdata,
    input  wire [3:0]                  s_axil_wstrb,
    input  wire                        s_axil_wvalid,
    output wire                        s_axil_wready,
    output wire [1:0]                  s_axil_bresp,
    output wire                        s_axil_bvalid,
    input  wire                        s_axil_bready,
    input  wire [AXIL_ADDR_WIDTH-1:0]  s_axil_araddr,
    input  wire [2:0]                  s_axil_arprot,
    input  wire                        s_axil_arvalid,
    output wire                        s_axil_arready,
    output wire [31:0]                 s_axil_rdata,
    output wire [1:0]                  s_axil_rresp,
    output wire                        s_axil_rvalid,
    input  wire                        s_axil_rready,

    /* AXI4-Stream input: weights and parameters */
    input  wire [63:0]                 s_axis_wgt_tdata,
    input  wire                        s_axis_wgt_tvalid,
    output wire                        s_axis_wgt_tready,
    input  wire                        s_axis_wgt_tlast,

    /* AXI4-Stream input: activations */
    input  wire [63:0]                 s_axis_act_tdata,
    input  wire                        s_axis_act_tvalid,
    output wire                        s_axis_act_tready,
    input  wire                        s_axis_act_tlast,

    /* AXI4-Stream output: results */
    output wire [63:0]                 m_axis_res_tdata,
    output wire                        m_axis_res_tvalid,
    input  wire                        m_axis_res_tready,
    output wire                        m_axis_res_tlast,

    /* Interrupt: STATUS.DONE while CTRL.IRQ_EN */
    output wire                        irq
);

/* verilator lint_off UNUSEDPARAM */
`include "dtpu_regs.vh"
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

initial begin
    if (ROWS != 8) begin
        $error("Error: ROWS must be 8 (instance %m)");
        $finish;
    end
    if (COLS < 2 || (1 << LOG_COLS) != COLS) begin
        $error("Error: COLS must be a power of two >= 2 (instance %m)");
        $finish;
    end
end

wire             start, soft_reset;
wire [32*20-1:0] job_regs;
wire             busy, done, stall;
wire [3:0]       state;
wire [31:0]      err_set;

dtpu_regfile #(
    .AXIL_ADDR_WIDTH(AXIL_ADDR_WIDTH),
    .HWCFG0(HWCFG0),
    .HWCFG1(HWCFG1)
)
regfile_inst (
    .clk(clk),
    .rst_n(aresetn),
    .s_axil_awaddr(s_axil_awaddr),
    .s_axil_awprot(s_axil_awprot),
    .s_axil_awvalid(s_axil_awvalid),
    .s_axil_awready(s_axil_awready),
    .s_axil_wdata(s_axil_wdata),
    .s_axil_wstrb(s_axil_wstrb),
    .s_axil_wvalid(s_axil_wvalid),
    .s_axil_wready(s_axil_wready),
    .s_axil_bresp(s_axil_bresp),
    .s_axil_bvalid(s_axil_bvalid),
    .s_axil_bready(s_axil_bready),
    .s_axil_araddr(s_axil_araddr),
    .s_axil_arprot(s_axil_arprot),
    .s_axil_arvalid(s_axil_arvalid),
    .s_axil_arready(s_axil_arready),
    .s_axil_rdata(s_axil_rdata),
    .s_axil_rresp(s_axil_rresp),
    .s_axil_rvalid(s_axil_rvalid),
    .s_axil_rready(s_axil_rready),
    .start(start),
    .soft_reset(soft_reset),
    .job_regs(job_regs),
    .core_busy(busy),
    .core_done(done),
    .core_state(state),
    .core_err(err_set),
    .core_stall(stall),
    .wgt_beat(s_axis_wgt_tvalid && s_axis_wgt_tready),
    .act_beat(s_axis_act_tvalid && s_axis_act_tready),
    .res_beat(m_axis_res_tvalid && m_axis_res_tready),
    .irq(irq)
);

dtpu_core #(
    .ROWS(ROWS),
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
core_inst (
    .clk(clk),
    .rst_n(aresetn),
    .start(start),
    .soft_reset(soft_reset),
    .job_regs(job_regs),
    .busy(busy),
    .done(done),
    .state(state),
    .err_set(err_set),
    .stall(stall),
    .s_axis_wgt_tdata(s_axis_wgt_tdata),
    .s_axis_wgt_tvalid(s_axis_wgt_tvalid),
    .s_axis_wgt_tready(s_axis_wgt_tready),
    .s_axis_wgt_tlast(s_axis_wgt_tlast),
    .s_axis_act_tdata(s_axis_act_tdata),
    .s_axis_act_tvalid(s_axis_act_tvalid),
    .s_axis_act_tready(s_axis_act_tready),
    .s_axis_act_tlast(s_axis_act_tlast),
    .m_axis_res_tdata(m_axis_res_tdata),
    .m_axis_res_tvalid(m_axis_res_tvalid),
    .m_axis_res_tready(m_axis_res_tready),
    .m_axis_res_tlast(m_axis_res_tlast),
    .ext_prm_sel(1'b0),
    .ext_prm_rd_en(1'b0),
    .ext_prm_rd_entry({LOG_PARAM_ENTRIES{1'b0}}),
    /* verilator lint_off PINCONNECTEMPTY */
    .ext_prm_bias(),
    .ext_prm_rq(),
    .ext_lane_sel(1'b0),
    .ext_lane_prec(4'd0),
    .ext_lane_variant(3'd0),
    .ext_lane_min(32'd0),
    .ext_lane_max(32'd0),
    .ext_lane_in_valid(1'b0),
    .ext_lane_in_acc(64'd0),
    .ext_lane_in_bias(64'd0),
    .ext_lane_in_rq(64'd0),
    .ext_lane_value(),
    .ext_lane_valid(),
    .ext_lane_ovf(),
    .ext_lane_wrap()
    /* verilator lint_on PINCONNECTEMPTY */
);

endmodule

`resetall
