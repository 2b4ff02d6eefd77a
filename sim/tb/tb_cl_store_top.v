// Test harness (not synthesized): dtpu_cl_store on a dtpu_axi_wr (its write port) and a
// dtpu_axi_rd (its read port, ACC), both masters' AXI4 channels as one m_axi_* port (one memory)
// for cocotb (sim/tb/tb_cl_store.py).

`resetall
`timescale 1ns / 1ps
`default_nettype none

module tb_cl_store_top #
(
    parameter MAX_BURST = 16,
    parameter MAX_OUTSTANDING = 8,
    parameter MAX_RUN = 16,
    parameter LOG_WQ = 5,
    parameter MAX_GAP = 4
)
(
    input  wire        clk,
    input  wire        rst_n,
    input  wire        clear,
    input  wire [31:0] timeout,
    input  wire        start,
    input  wire [3:0]  cfg_mode,
    input  wire [3:0]  cfg_lanes,
    input  wire [3:0]  cfg_esize,
    input  wire [31:0] cfg_dst,
    input  wire [31:0] cfg_pix,
    input  wire [15:0] cfg_outer,
    input  wire [15:0] cfg_inner,
    input  wire [15:0] cfg_gw,
    input  wire [15:0] cfg_ch0,
    input  wire [15:0] cfg_ch1,
    input  wire [15:0] cfg_dstc,
    input  wire        cfg_first,
    output wire        busy,
    output wire        idle,
    input  wire        s_valid,
    output wire        s_ready,
    input  wire [63:0] s_data,
    input  wire        s_last,
    output wire        err_slverr,
    output wire        err_decerr,
    output wire        err_timeout,
    output wire        err_field,
    output wire        err_len,
    output wire [0:0]  m_axi_awid,
    output wire [31:0] m_axi_awaddr,
    output wire [7:0]  m_axi_awlen,
    output wire [2:0]  m_axi_awsize,
    output wire [1:0]  m_axi_awburst,
    output wire [3:0]  m_axi_awcache,
    output wire [2:0]  m_axi_awprot,
    output wire        m_axi_awvalid,
    input  wire        m_axi_awready,
    output wire [63:0] m_axi_wdata,
    output wire [7:0]  m_axi_wstrb,
    output wire        m_axi_wlast,
    output wire        m_axi_wvalid,
    input  wire        m_axi_wready,
    input  wire [0:0]  m_axi_bid,
    input  wire [1:0]  m_axi_bresp,
    input  wire        m_axi_bvalid,
    output wire        m_axi_bready,
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

wire        wq_valid, wq_ready, w_valid, w_ready, w_idle, w_slv, w_dec, w_tmo;
wire [31:0] wq_addr, wq_words;
wire [63:0] w_data;
wire [7:0]  w_strb;
wire        rq_valid, rq_ready, r_valid, r_ready, r_idle, r_slv, r_dec, r_tmo, r_timeout, r_last;
wire [31:0] rq_addr, rq_words;
wire [63:0] r_data;
wire [1:0]  r_resp;

dtpu_cl_store #(.MAX_RUN(MAX_RUN), .LOG_WQ(LOG_WQ), .MAX_GAP(MAX_GAP)) store (
    .clk(clk), .rst_n(rst_n), .clear(clear), .flush(1'b0),
    .start(start), .cfg_mode(cfg_mode), .cfg_lanes(cfg_lanes), .cfg_esize(cfg_esize),
    .cfg_dst(cfg_dst), .cfg_pix(cfg_pix), .cfg_outer(cfg_outer), .cfg_inner(cfg_inner),
    .cfg_gw(cfg_gw), .cfg_ch0(cfg_ch0), .cfg_ch1(cfg_ch1), .cfg_dstc(cfg_dstc),
    .cfg_first(cfg_first), .busy(busy), .idle(idle),
    .s_valid(s_valid), .s_ready(s_ready), .s_data(s_data), .s_last(s_last),
    .wr_req_valid(wq_valid), .wr_req_ready(wq_ready), .wr_req_addr(wq_addr),
    .wr_req_words(wq_words), .wr_valid(w_valid), .wr_ready(w_ready), .wr_data(w_data),
    .wr_strb(w_strb), .wr_idle(w_idle), .wr_err_slverr(w_slv), .wr_err_decerr(w_dec),
    .wr_err_timeout(w_tmo),
    .rd_req_valid(rq_valid), .rd_req_ready(rq_ready), .rd_req_addr(rq_addr),
    .rd_req_words(rq_words), .rd_valid(r_valid), .rd_ready(r_ready), .rd_data(r_data),
    .rd_err_slverr(r_slv), .rd_err_decerr(r_dec), .rd_err_timeout(r_tmo),
    .err_slverr(err_slverr), .err_decerr(err_decerr), .err_timeout(err_timeout),
    .err_field(err_field), .err_len(err_len)
);

dtpu_axi_wr #(.MAX_BURST(MAX_BURST), .MAX_OUTSTANDING(MAX_OUTSTANDING)) wr (
    .clk(clk), .rst_n(rst_n), .clear(clear), .timeout(timeout),
    .req_valid(wq_valid), .req_ready(wq_ready), .req_addr(wq_addr), .req_words(wq_words),
    .s_valid(w_valid), .s_ready(w_ready), .s_data(w_data), .s_strb(w_strb),
    .idle(w_idle), .err_slverr(w_slv), .err_decerr(w_dec), .err_timeout(w_tmo),
    .m_axi_awid(m_axi_awid), .m_axi_awaddr(m_axi_awaddr), .m_axi_awlen(m_axi_awlen),
    .m_axi_awsize(m_axi_awsize), .m_axi_awburst(m_axi_awburst), .m_axi_awcache(m_axi_awcache),
    .m_axi_awprot(m_axi_awprot), .m_axi_awvalid(m_axi_awvalid), .m_axi_awready(m_axi_awready),
    .m_axi_wdata(m_axi_wdata), .m_axi_wstrb(m_axi_wstrb), .m_axi_wlast(m_axi_wlast),
    .m_axi_wvalid(m_axi_wvalid), .m_axi_wready(m_axi_wready), .m_axi_bid(m_axi_bid),
    .m_axi_bresp(m_axi_bresp), .m_axi_bvalid(m_axi_bvalid), .m_axi_bready(m_axi_bready)
);

dtpu_axi_rd #(.MAX_BURST(MAX_BURST), .MAX_OUTSTANDING(MAX_OUTSTANDING)) rd (
    .clk(clk), .rst_n(rst_n), .clear(clear), .timeout(timeout),
    .req_valid(rq_valid), .req_ready(rq_ready), .req_addr(rq_addr), .req_words(rq_words),
    .m_valid(r_valid), .m_ready(r_ready), .m_data(r_data), .m_resp(r_resp),
    .m_timeout(r_timeout), .m_last(r_last),
    .idle(r_idle), .err_slverr(r_slv), .err_decerr(r_dec), .err_timeout(r_tmo),
    .m_axi_arid(m_axi_arid), .m_axi_araddr(m_axi_araddr), .m_axi_arlen(m_axi_arlen),
    .m_axi_arsize(m_axi_arsize), .m_axi_arburst(m_axi_arburst), .m_axi_arcache(m_axi_arcache),
    .m_axi_arprot(m_axi_arprot), .m_axi_arvalid(m_axi_arvalid), .m_axi_arready(m_axi_arready),
    .m_axi_rid(m_axi_rid), .m_axi_rdata(m_axi_rdata), .m_axi_rresp(m_axi_rresp),
    .m_axi_rlast(m_axi_rlast), .m_axi_rvalid(m_axi_rvalid), .m_axi_rready(m_axi_rready)
);

endmodule

`resetall
