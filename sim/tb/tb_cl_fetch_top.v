// Test harness (not synthesized): dtpu_cl_fetch on a dtpu_axi_rd, the AXI4 read channels and
// the descriptor stream as ports for cocotb (sim/tb/tb_cl_fetch.py).

`resetall
`timescale 1ns / 1ps
`default_nettype none

module tb_cl_fetch_top #
(
    parameter LOG_MAX_DESCS = 16
)
(
    input  wire        clk,
    input  wire        rst_n,
    input  wire        start,
    input  wire [31:0] base,
    input  wire [31:0] timeout,
    input  wire        clear,
    output wire        busy,
    output wire        ended,
    output wire [31:0] err,
    output wire [31:0] pc,
    output wire [31:0] tag,
    output wire [LOG_MAX_DESCS:0] descs,
    output wire        rd_idle,
    output wire        d_valid,
    input  wire        d_ready,
    output wire [63:0] d_data,
    output wire        d_first,
    output wire        d_last,
    output wire [31:0] d_pc,
    output wire [0:0]  m_axi_arid,
    output wire [31:0] m_axi_araddr,
    output wire [7:0]  m_axi_arlen,
    output wire [2:0]  m_axi_arsize,
    output wire [1:0]  m_axi_arburst,
    output wire [3:0]  m_axi_arcache,
    output wire [2:0]  m_axi_arprot,
    output wire        m_axi_arvalid,
    input  wire        m_axi_arready,
    input  wire [0:0]  m_axi_rid,
    input  wire [63:0] m_axi_rdata,
    input  wire [1:0]  m_axi_rresp,
    input  wire        m_axi_rlast,
    input  wire        m_axi_rvalid,
    output wire        m_axi_rready
);

wire        req_valid, req_ready, rd_valid, rd_ready, rd_timeout, rd_last;
wire [31:0] req_addr, req_words;
wire [63:0] rd_data;
wire [1:0]  rd_resp;
wire        e_slv, e_dec, e_tmo;

dtpu_cl_fetch #(.LOG_MAX_DESCS(LOG_MAX_DESCS)) fetch (
    .clk(clk), .rst_n(rst_n), .start(start), .base(base), .busy(busy), .ended(ended), .err(err),
    .pc(pc), .tag(tag), .descs(descs),
    .rd_req_valid(req_valid), .rd_req_ready(req_ready), .rd_req_addr(req_addr),
    .rd_req_words(req_words), .rd_valid(rd_valid), .rd_ready(rd_ready), .rd_data(rd_data),
    .rd_resp(rd_resp), .rd_timeout(rd_timeout),
    .d_valid(d_valid), .d_ready(d_ready), .d_data(d_data), .d_first(d_first), .d_last(d_last),
    .d_pc(d_pc)
);

dtpu_axi_rd rd (
    .clk(clk), .rst_n(rst_n), .clear(clear), .timeout(timeout),
    .req_valid(req_valid), .req_ready(req_ready), .req_addr(req_addr), .req_words(req_words),
    .m_valid(rd_valid), .m_ready(rd_ready), .m_data(rd_data), .m_resp(rd_resp),
    .m_timeout(rd_timeout), .m_last(rd_last),
    .idle(rd_idle), .err_slverr(e_slv), .err_decerr(e_dec), .err_timeout(e_tmo),
    .m_axi_arid(m_axi_arid), .m_axi_araddr(m_axi_araddr), .m_axi_arlen(m_axi_arlen),
    .m_axi_arsize(m_axi_arsize), .m_axi_arburst(m_axi_arburst), .m_axi_arcache(m_axi_arcache),
    .m_axi_arprot(m_axi_arprot), .m_axi_arvalid(m_axi_arvalid), .m_axi_arready(m_axi_arready),
    .m_axi_rid(m_axi_rid), .m_axi_rdata(m_axi_rdata), .m_axi_rresp(m_axi_rresp),
    .m_axi_rlast(m_axi_rlast), .m_axi_rvalid(m_axi_rvalid), .m_axi_rready(m_axi_rready)
);

endmodule

`resetall
