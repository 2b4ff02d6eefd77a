/*

Copyright (c) 2026 DTPU authors. Apache-2.0.

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Test top of sim/test_cl_load.py: the load unit's activation stream (dtpu_cl_load) on one
 * AXI4 read master (dtpu_axi_rd), the AXI4 read channels out to the cocotbext-axi memory.
 */
module tb_cl_load_top #
(
    parameter MAX_BURST = 16,
    parameter MAX_OUTSTANDING = 8,
    parameter EF_LOG2 = 8
)
(
    input  wire        clk,
    input  wire        rst_n,
    input  wire [31:0] timeout,
    input  wire        clear,

    input  wire        start,
    output wire        start_ready,
    output wire        busy,
    output wire        done,
    output wire        word_mode,
    output wire        err_slverr,
    output wire        err_decerr,
    output wire        err_timeout,
    output wire        err_field,
    output wire        rd_idle,

    input  wire [31:0] cfg_src,
    input  wire [3:0]  cfg_mode,
    input  wire [3:0]  cfg_lanes,
    input  wire [3:0]  cfg_esize,
    input  wire [15:0] cfg_pad,
    input  wire [15:0] cfg_n,
    input  wire [15:0] cfg_h,
    input  wire [15:0] cfg_w,
    input  wire [15:0] cfg_c,
    input  wire [3:0]  cfg_kh,
    input  wire [3:0]  cfg_kw,
    input  wire [3:0]  cfg_sy,
    input  wire [3:0]  cfg_sx,
    input  wire [3:0]  cfg_dy,
    input  wire [3:0]  cfg_dx,
    input  wire [3:0]  cfg_pt,
    input  wire [3:0]  cfg_pl,
    input  wire [15:0] cfg_oh,
    input  wire [15:0] cfg_ow,
    input  wire [15:0] cfg_kp,
    input  wire [15:0] cfg_k0,
    input  wire [15:0] cfg_k1,
    input  wire [15:0] cfg_nchunk,
    input  wire [15:0] cfg_cv,

    output wire        m_valid,
    input  wire        m_ready,
    output wire [63:0] m_data,
    output wire        m_last,

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
/* verilator lint_off UNUSEDSIGNAL */
wire        e_slv, e_dec, e_tmo;      // the unit reports the faults per word
/* verilator lint_on UNUSEDSIGNAL */

dtpu_cl_load #(.MAX_BURST(MAX_BURST), .EF_LOG2(EF_LOG2)) load (
    .clk(clk), .rst_n(rst_n),
    .start(start), .start_ready(start_ready), .busy(busy), .done(done), .word_mode(word_mode),
    .err_slverr(err_slverr), .err_decerr(err_decerr), .err_timeout(err_timeout),
    .err_field(err_field),
    .cfg_src(cfg_src), .cfg_mode(cfg_mode), .cfg_lanes(cfg_lanes), .cfg_esize(cfg_esize),
    .cfg_pad(cfg_pad), .cfg_n(cfg_n), .cfg_h(cfg_h), .cfg_w(cfg_w), .cfg_c(cfg_c),
    .cfg_kh(cfg_kh), .cfg_kw(cfg_kw), .cfg_sy(cfg_sy), .cfg_sx(cfg_sx), .cfg_dy(cfg_dy),
    .cfg_dx(cfg_dx), .cfg_pt(cfg_pt), .cfg_pl(cfg_pl), .cfg_oh(cfg_oh), .cfg_ow(cfg_ow),
    .cfg_kp(cfg_kp), .cfg_k0(cfg_k0), .cfg_k1(cfg_k1), .cfg_nchunk(cfg_nchunk), .cfg_cv(cfg_cv),
    .req_valid(req_valid), .req_ready(req_ready), .req_addr(req_addr), .req_words(req_words),
    .rd_valid(rd_valid), .rd_ready(rd_ready), .rd_data(rd_data), .rd_resp(rd_resp),
    .rd_timeout(rd_timeout), .rd_last(rd_last),
    .m_valid(m_valid), .m_ready(m_ready), .m_data(m_data), .m_last(m_last)
);

dtpu_axi_rd #(.MAX_BURST(MAX_BURST), .MAX_OUTSTANDING(MAX_OUTSTANDING)) rd (
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
