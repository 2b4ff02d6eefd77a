/*

Copyright (c) 2026 DTPU authors. Apache-2.0.

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Register file behind an AXI4-Lite slave (32-bit data), offsets and fields from
 * dtpu_regs.vh (generated from pylib/dtpu/hw/contract.json).
 *
 * Job registers written while the core is busy are ignored and set ERR.BUSY_WRITE, as is START.
 * CTRL.SOFT_RESET resets the job registers, STATUS, ERR and the counters (IRQ_EN is kept) and
 * pulses soft_reset to the core. Reading CYCLES_LO / STALL_LO latches the high word.
 * One write and one read in flight at a time; no wait states beyond the handshake.
 */
module dtpu_regfile #
(
    // AXI4-Lite byte address width
    parameter AXIL_ADDR_WIDTH = 8,
    // build description (HWCFG0, HWCFG1)
    parameter [31:0] HWCFG0 = 32'h007F0808,
    parameter [31:0] HWCFG1 = 32'h000C0C0F,
    // 1: VERSION reads contract 2.0 (dtpu_cl_regs.vh), as the command-list top dtpu_cl_top
    // sets it: the driver picks its path (lists or jobs) from VERSION. 0: contract 1.2.
    parameter CONTRACT2 = 0
)
(
    input  wire                        clk,
    input  wire                        rst_n,

    /* AXI4-Lite slave (prot and strobes are ignored: 32-bit registers only) */
    /* verilator lint_off UNUSEDSIGNAL */
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
    /* verilator lint_on UNUSEDSIGNAL */

    /* Core */
    output wire                        start,
    output wire                        soft_reset,
    output wire [32*20-1:0]            job_regs,
    input  wire                        core_busy,
    input  wire                        core_done,
    input  wire [3:0]                  core_state,
    input  wire [31:0]                 core_err,
    input  wire                        core_stall,
    input  wire                        wgt_beat,
    input  wire                        act_beat,
    input  wire                        res_beat,
    output wire                        irq
);

/* verilator lint_off UNUSEDPARAM */
`include "dtpu_regs.vh"
`include "dtpu_cl_regs.vh"

localparam [31:0] VERSION_WORD = (CONTRACT2 != 0)
    ? ((DTPU_CL_VERSION_MAJOR << 16) | DTPU_CL_VERSION_MINOR) : DTPU_VERSION;
/* verilator lint_on UNUSEDPARAM */

// job registers in offset order 0x1C .. 0x68 (JOB, LOAD_ADDR, ..., DW_RING, PF_ADDR, PF_COUNT)
localparam NJ = 20;

reg [31:0] jr_reg [0:NJ-1];
reg        irq_en_reg;
reg        done_reg;
reg [31:0] err_reg;
reg [63:0] cycles_reg, stall_reg;
reg [31:0] words_wgt_reg, words_act_reg, words_res_reg, job_cycles_reg;
reg [31:0] cycles_hi_latch_reg, stall_hi_latch_reg;
reg        start_reg;

reg        bvalid_reg;
reg        rvalid_reg;
reg [31:0] rdata_reg;

wire wr_fire = s_axil_awvalid && s_axil_wvalid && !bvalid_reg;
wire rd_fire = s_axil_arvalid && !rvalid_reg;
wire [AXIL_ADDR_WIDTH-1:0] waddr = {s_axil_awaddr[AXIL_ADDR_WIDTH-1:2], 2'b00};
wire [AXIL_ADDR_WIDTH-1:0] raddr = {s_axil_araddr[AXIL_ADDR_WIDTH-1:2], 2'b00};
wire [31:0] wdata = s_axil_wdata;

wire job_reg_hit = waddr >= DTPU_REG_JOB[AXIL_ADDR_WIDTH-1:0]
                && waddr <= DTPU_REG_PF_COUNT[AXIL_ADDR_WIDTH-1:0];
/* verilator lint_off UNUSEDSIGNAL */
wire [AXIL_ADDR_WIDTH-1:0] jidx_full = (waddr - DTPU_REG_JOB[AXIL_ADDR_WIDTH-1:0]) >> 2;
wire [4:0] jidx = jidx_full[4:0];
wire [AXIL_ADDR_WIDTH-1:0] ridx_full = (raddr - DTPU_REG_JOB[AXIL_ADDR_WIDTH-1:0]) >> 2;
wire [4:0] ridx = ridx_full[4:0];
/* verilator lint_on UNUSEDSIGNAL */

wire ctrl_wr = wr_fire && waddr == DTPU_REG_CTRL[AXIL_ADDR_WIDTH-1:0];
wire wr_start = ctrl_wr && wdata[DTPU_CTRL_START_LSB];
wire wr_soft = ctrl_wr && wdata[DTPU_CTRL_SOFT_RESET_LSB];
wire wr_clear = ctrl_wr && wdata[DTPU_CTRL_CLEAR_COUNTERS_LSB];

integer k;

always @(posedge clk) begin
    start_reg <= 1'b0;

    // counters
    if (core_busy) begin
        cycles_reg <= cycles_reg + 64'd1;
        if (job_cycles_reg != 32'hFFFFFFFF) begin
            job_cycles_reg <= job_cycles_reg + 32'd1;
        end
    end
    if (core_stall) begin
        stall_reg <= stall_reg + 64'd1;
    end
    if (wgt_beat) words_wgt_reg <= words_wgt_reg + 32'd1;
    if (act_beat) words_act_reg <= words_act_reg + 32'd1;
    if (res_beat) words_res_reg <= words_res_reg + 32'd1;

    if (core_done) begin
        done_reg <= 1'b1;
    end
    err_reg <= err_reg | core_err;

    // write
    if (wr_fire) begin
        bvalid_reg <= 1'b1;
        if (ctrl_wr) begin
            if (!wr_soft) begin
                irq_en_reg <= wdata[DTPU_CTRL_IRQ_EN_LSB];
            end
            if (wr_clear) begin
                cycles_reg <= 64'd0;
                stall_reg <= 64'd0;
                words_wgt_reg <= 32'd0;
                words_act_reg <= 32'd0;
                words_res_reg <= 32'd0;
            end
            if (wr_start) begin
                if (core_busy) begin
                    err_reg[DTPU_ERR_BUSY_WRITE] <= 1'b1;
                end else begin
                    start_reg <= 1'b1;
                    done_reg <= 1'b0;
                    job_cycles_reg <= 32'd0;
                end
            end
        end else if (waddr == DTPU_REG_ERR[AXIL_ADDR_WIDTH-1:0]) begin
            err_reg <= (err_reg & ~wdata) | core_err;
        end else if (job_reg_hit) begin
            if (core_busy) begin
                err_reg[DTPU_ERR_BUSY_WRITE] <= 1'b1;
            end else begin
                jr_reg[jidx] <= wdata;
            end
        end
    end
    if (s_axil_bready && bvalid_reg) begin
        bvalid_reg <= 1'b0;
    end

    // read
    if (rd_fire) begin
        rvalid_reg <= 1'b1;
        rdata_reg <= 32'd0;
        case (raddr)
            DTPU_REG_ID[AXIL_ADDR_WIDTH-1:0]: rdata_reg <= DTPU_ID;
            DTPU_REG_VERSION[AXIL_ADDR_WIDTH-1:0]: rdata_reg <= VERSION_WORD;
            DTPU_REG_HWCFG0[AXIL_ADDR_WIDTH-1:0]: rdata_reg <= HWCFG0;
            DTPU_REG_HWCFG1[AXIL_ADDR_WIDTH-1:0]: rdata_reg <= HWCFG1;
            DTPU_REG_CTRL[AXIL_ADDR_WIDTH-1:0]: rdata_reg <= {23'd0, irq_en_reg, 8'd0};
            DTPU_REG_STATUS[AXIL_ADDR_WIDTH-1:0]:
                rdata_reg <= {24'd0, core_state, 1'b0, |(err_reg & DTPU_ERR_FATAL_MASK),
                              done_reg, core_busy};
            DTPU_REG_ERR[AXIL_ADDR_WIDTH-1:0]: rdata_reg <= err_reg;
            DTPU_REG_CYCLES_LO[AXIL_ADDR_WIDTH-1:0]: begin
                rdata_reg <= cycles_reg[31:0];
                cycles_hi_latch_reg <= cycles_reg[63:32];
            end
            DTPU_REG_CYCLES_HI[AXIL_ADDR_WIDTH-1:0]: rdata_reg <= cycles_hi_latch_reg;
            DTPU_REG_STALL_LO[AXIL_ADDR_WIDTH-1:0]: begin
                rdata_reg <= stall_reg[31:0];
                stall_hi_latch_reg <= stall_reg[63:32];
            end
            DTPU_REG_STALL_HI[AXIL_ADDR_WIDTH-1:0]: rdata_reg <= stall_hi_latch_reg;
            DTPU_REG_WORDS_WGT[AXIL_ADDR_WIDTH-1:0]: rdata_reg <= words_wgt_reg;
            DTPU_REG_WORDS_ACT[AXIL_ADDR_WIDTH-1:0]: rdata_reg <= words_act_reg;
            DTPU_REG_WORDS_RES[AXIL_ADDR_WIDTH-1:0]: rdata_reg <= words_res_reg;
            DTPU_REG_JOB_CYCLES[AXIL_ADDR_WIDTH-1:0]: rdata_reg <= job_cycles_reg;
            default: begin
                if (raddr >= DTPU_REG_JOB[AXIL_ADDR_WIDTH-1:0]
                    && raddr <= DTPU_REG_PF_COUNT[AXIL_ADDR_WIDTH-1:0]) begin
                    rdata_reg <= jr_reg[ridx];
                end
            end
        endcase
    end
    if (s_axil_rready && rvalid_reg) begin
        rvalid_reg <= 1'b0;
    end

    if (!rst_n || wr_soft) begin
        for (k = 0; k < NJ; k = k + 1) begin
            jr_reg[k] <= 32'd0;
        end
        done_reg <= 1'b0;
        err_reg <= 32'd0;
        cycles_reg <= 64'd0;
        stall_reg <= 64'd0;
        words_wgt_reg <= 32'd0;
        words_act_reg <= 32'd0;
        words_res_reg <= 32'd0;
        job_cycles_reg <= 32'd0;
        cycles_hi_latch_reg <= 32'd0;
        stall_hi_latch_reg <= 32'd0;
        start_reg <= 1'b0;
    end
    if (!rst_n) begin
        irq_en_reg <= 1'b0;
        bvalid_reg <= 1'b0;
        rvalid_reg <= 1'b0;
    end
end

genvar g;
generate
for (g = 0; g < NJ; g = g + 1) begin : jout
    assign job_regs[g*32 +: 32] = jr_reg[g];
end
endgenerate

assign s_axil_awready = wr_fire;
assign s_axil_wready = wr_fire;
assign s_axil_bresp = 2'b00;
assign s_axil_bvalid = bvalid_reg;
assign s_axil_arready = rd_fire;
assign s_axil_rdata = rdata_reg;
assign s_axil_rresp = 2'b00;
assign s_axil_rvalid = rvalid_reg;

assign start = start_reg;
// the core resets at the same edge as the registers and counters
assign soft_reset = wr_soft;
assign irq = irq_en_reg && done_reg;

endmodule

`resetall
