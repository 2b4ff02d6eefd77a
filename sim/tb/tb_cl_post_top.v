// Test harness (not synthesized): dtpu_cl_post reading its sums through a dtpu_axi_rd (the AXI4
// read channels as ports for cocotb's AxiRam) and its parameters from a dtpu_ls_param (lane 0 of
// its 8-entry read port, rd_base = the entry: the one-entry port as the core's parameter memory
// would serve it), written by cocotb one word per cycle as LOAD_PARAM writes it
// (sim/tb/tb_cl_post.py).

`resetall
`timescale 1ns / 1ps
`default_nettype none

module tb_cl_post_top #
(
    parameter PADDR_W = 12,
    parameter [15:0] PREC_EN = 16'h007F,
    parameter FIFO_LOG = 3,
    parameter MAX_BURST = 16,
    parameter MAX_OUTSTANDING = 8,
    parameter RQ_EN = 31
)
(
    input  wire        clk,
    input  wire        rst_n,
    input  wire        start,
    input  wire [31:0] src,
    input  wire [31:0] dst,
    input  wire [31:0] pix,
    input  wire [15:0] ch0,
    input  wire [15:0] ch,
    input  wire [15:0] dstc,
    input  wire [3:0]  job_prec,
    input  wire [1:0]  job_out_mode,
    input  wire [2:0]  job_variant,
    input  wire [31:0] param_base,
    input  wire [31:0] act_min,
    input  wire [31:0] act_max,
    output wire        busy,
    output wire        done,
    output wire        bad_field,
    output wire        err_slverr,
    output wire        err_decerr,
    output wire        err_timeout,
    output wire        err_ovf,
    output wire        warn_wrap,
    output wire        out_valid,
    input  wire        out_ready,
    output wire [63:0] out_data,
    output wire        out_last,
    output wire [3:0]  res_mode,
    output wire [3:0]  res_lanes,
    output wire [3:0]  res_esize,
    output wire        res_signed,
    output wire [31:0] res_dst,
    output wire [31:0] res_pix,
    output wire [15:0] res_outer,
    output wire [15:0] res_inner,
    output wire [15:0] res_gw,
    output wire [15:0] res_ch0,
    output wire [15:0] res_ch1,
    output wire [15:0] res_dstc,
    // parameter memory writes (LOAD_PARAM: word `half` of entry wr_entry)
    input  wire        pw_en,
    input  wire [PADDR_W-1:0] pw_entry,
    input  wire        pw_half,
    input  wire [63:0] pw_data,
    // the read master
    input  wire [31:0] timeout,
    input  wire        clear,
    output wire        rd_idle,
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

wire        req_valid, req_ready, w_valid, w_ready, w_timeout, w_last;
wire [31:0] req_addr;
wire [15:0] req_words;
wire [63:0] w_data;
wire [1:0]  w_resp;
wire        e_slv, e_dec, e_tmo;
wire        p_rd_en;
wire [PADDR_W-1:0] p_rd_entry;
wire [8*64-1:0] rd_bias, rd_rq;

dtpu_cl_post #(.PADDR_W(PADDR_W), .PREC_EN(PREC_EN), .FIFO_LOG(FIFO_LOG), .RQ_EN(RQ_EN)) post (
    .clk(clk), .rst_n(rst_n), .start(start), .src(src), .dst(dst), .pix(pix), .ch0(ch0),
    .ch(ch), .dstc(dstc), .job_prec(job_prec), .job_out_mode(job_out_mode),
    .job_variant(job_variant), .param_base(param_base), .act_min(act_min), .act_max(act_max),
    .busy(busy), .done(done), .bad_field(bad_field), .err_slverr(err_slverr),
    .err_decerr(err_decerr), .err_timeout(err_timeout), .err_ovf(err_ovf), .warn_wrap(warn_wrap),
    .req_valid(req_valid), .req_ready(req_ready), .req_addr(req_addr), .req_words(req_words),
    .w_valid(w_valid), .w_ready(w_ready), .w_data(w_data), .w_resp(w_resp),
    .w_timeout(w_timeout),
    .p_rd_en(p_rd_en), .p_rd_entry(p_rd_entry), .p_rd_bias(rd_bias[63:0]),
    .p_rd_rq(rd_rq[63:0]),
    .out_valid(out_valid), .out_ready(out_ready), .out_data(out_data), .out_last(out_last),
    .res_mode(res_mode), .res_lanes(res_lanes), .res_esize(res_esize), .res_signed(res_signed),
    .res_dst(res_dst), .res_pix(res_pix), .res_outer(res_outer), .res_inner(res_inner),
    .res_gw(res_gw), .res_ch0(res_ch0), .res_ch1(res_ch1), .res_dstc(res_dstc)
);

dtpu_ls_param #(.ADDR_W(PADDR_W)) pmem (
    .clk(clk), .wr_en(pw_en), .wr_entry(pw_entry), .wr_half(pw_half), .wr_data(pw_data),
    .rd_en(p_rd_en), .rd_base(p_rd_entry), .rd_bias(rd_bias), .rd_rq(rd_rq)
);

dtpu_axi_rd #(.CNT_W(16), .MAX_BURST(MAX_BURST), .MAX_OUTSTANDING(MAX_OUTSTANDING)) rd (
    .clk(clk), .rst_n(rst_n), .clear(clear), .timeout(timeout),
    .req_valid(req_valid), .req_ready(req_ready), .req_addr(req_addr), .req_words(req_words),
    .m_valid(w_valid), .m_ready(w_ready), .m_data(w_data), .m_resp(w_resp),
    .m_timeout(w_timeout), .m_last(w_last),
    .idle(rd_idle), .err_slverr(e_slv), .err_decerr(e_dec), .err_timeout(e_tmo),
    .m_axi_arid(m_axi_arid), .m_axi_araddr(m_axi_araddr), .m_axi_arlen(m_axi_arlen),
    .m_axi_arsize(m_axi_arsize), .m_axi_arburst(m_axi_arburst), .m_axi_arcache(m_axi_arcache),
    .m_axi_arprot(m_axi_arprot), .m_axi_arvalid(m_axi_arvalid), .m_axi_arready(m_axi_arready),
    .m_axi_rid(m_axi_rid), .m_axi_rdata(m_axi_rdata), .m_axi_rresp(m_axi_rresp),
    .m_axi_rlast(m_axi_rlast), .m_axi_rvalid(m_axi_rvalid), .m_axi_rready(m_axi_rready)
);

endmodule

`resetall
