/*

Copyright (c) 2026 DTPU authors. Apache-2.0.

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * AXI4 write master of contract 2.0 (64-bit data, INCR bursts of 8-byte beats; each word
 * carries its byte strobes, s_strb -> WSTRB, so a word may be written in part: the store
 * unit's items that do not start or end on an 8-byte boundary).
 *
 * Requests (address, 64-bit word count) come on a ready/valid interface, the words on a
 * ready/valid stream (s_*) in request order. A request is split into bursts of at most
 * MAX_BURST beats that never cross a 4 KiB boundary (dtpu_axi_burst, shared with dtpu_axi_rd,
 * splits them and counts the outstanding ones); each burst's address goes out before its
 * data (WLAST on its last beat); up to MAX_OUTSTANDING bursts are between AWVALID and their
 * write response. `idle` is high when every accepted word has been written and every response
 * received. The low 3 address bits are ignored; a request of 0 words does nothing.
 *
 * BRESP SLVERR / DECERR set the sticky flags err_slverr / err_decerr (cleared by `clear`); the
 * data is still consumed and the request completes.
 *
 * Timeout: when `timeout` != 0 and the master waits on the slave (AWVALID or WVALID without
 * READY, or a burst fully written without its BVALID) for `timeout` consecutive cycles,
 * err_timeout is set and the master turns *dead*: it issues nothing more, WVALID drops, the
 * words still owed on s_* are accepted and dropped (so the producer finishes), BREADY stays
 * high, and `idle` rises once the words are consumed; new requests wait for `clear` (taken
 * when idle). After a timeout the bus is in an unknown state: the system resets it.
 */
module dtpu_axi_wr #
(
    parameter ADDR_W = 32,
    // width of a request's word count
    parameter CNT_W = 32,
    // longest burst in beats (16: AXI3 HP port; at most 128)
    parameter MAX_BURST = 16,
    // bursts between AWVALID and BRESP
    parameter MAX_OUTSTANDING = 8,
    parameter TIMEOUT_W = 32,
    // AXI ID width (every burst uses ID 0)
    parameter ID_W = 1
)
(
    input  wire                 clk,
    input  wire                 rst_n,

    input  wire                 clear,
    input  wire [TIMEOUT_W-1:0] timeout,

    /* requests */
    input  wire                 req_valid,
    output wire                 req_ready,
    /* verilator lint_off UNUSEDSIGNAL */
    input  wire [ADDR_W-1:0]    req_addr,        // [2:0] ignored: 8-byte aligned
    /* verilator lint_on UNUSEDSIGNAL */
    input  wire [CNT_W-1:0]     req_words,

    /* words, in request order */
    input  wire                 s_valid,
    output wire                 s_ready,
    input  wire [63:0]          s_data,
    input  wire [7:0]           s_strb,          // WSTRB of the word (8'hFF: every byte)

    /* status */
    output wire                 idle,
    output reg                  err_slverr,
    output reg                  err_decerr,
    output reg                  err_timeout,

    /* AXI4 write channels */
    output wire [ID_W-1:0]      m_axi_awid,
    output wire [ADDR_W-1:0]    m_axi_awaddr,
    output wire [7:0]           m_axi_awlen,
    output wire [2:0]           m_axi_awsize,
    output wire [1:0]           m_axi_awburst,
    output wire [3:0]           m_axi_awcache,
    output wire [2:0]           m_axi_awprot,
    output wire                 m_axi_awvalid,
    input  wire                 m_axi_awready,
    output wire [63:0]          m_axi_wdata,
    output wire [7:0]           m_axi_wstrb,
    output wire                 m_axi_wlast,
    output wire                 m_axi_wvalid,
    input  wire                 m_axi_wready,
    /* verilator lint_off UNUSEDSIGNAL */
    input  wire [ID_W-1:0]      m_axi_bid,
    /* verilator lint_on UNUSEDSIGNAL */
    input  wire [1:0]           m_axi_bresp,
    input  wire                 m_axi_bvalid,
    output wire                 m_axi_bready
);

localparam BW = $clog2(MAX_BURST + 1);
localparam PW = $clog2(MAX_OUTSTANDING);
localparam DEPTH = 1 << PW;
localparam OW = $clog2(MAX_OUTSTANDING + 1);

initial begin
    if (MAX_BURST < 1 || MAX_BURST > 128 || MAX_OUTSTANDING < 2 || CNT_W < 10 || ADDR_W < 12) begin
        $error("Error: MAX_BURST 1..128, MAX_OUTSTANDING >= 2, CNT_W >= 10, ADDR_W >= 12 (instance %m)");
        $finish;
    end
end

/* ---- burst generator (and the bursts from AWVALID to BRESP) ---- */
reg               dead;
wire              gen_idle;         // no request being split
wire              gen_valid;        // a burst to issue, a reservation free
wire [ADDR_W-1:0] gen_addr;
wire [BW-1:0]     beats;
/* verilator lint_off UNUSEDSIGNAL */
wire              gen_lastb;
/* verilator lint_on UNUSEDSIGNAL */
wire              gen_none;         // no burst between AWVALID and BRESP

reg               awvalid_reg;
reg  [ADDR_W-1:0] awaddr_reg;
reg  [BW-1:0]     awbeats_reg;

/* ---- bursts whose address went out and whose data has not (FIFO of beats) ---- */
reg  [BW-1:0]     f_beats [0:DEPTH-1];
reg  [PW-1:0]     f_wr, f_rd;
reg  [OW-1:0]     f_cnt;
reg  [OW-1:0]     bwait;            // bursts fully written, response pending
reg  [BW-1:0]     wb;               // beats written of the head burst
reg  [CNT_W:0]    owed;             // words accepted in requests and not yet taken from s_*

wire              aw_hs = awvalid_reg && m_axi_awready;
wire              f_empty = (f_cnt == {OW{1'b0}});
wire              h_end = (wb == f_beats[f_rd] - 1'b1);
wire              wvalid = !dead && !f_empty && s_valid;
wire              w_hs = wvalid && m_axi_wready;
wire              w_done = w_hs && h_end;
wire              b_hs = m_axi_bvalid;              // BREADY is always high

/* ---- timeout ---- */
reg  [TIMEOUT_W-1:0] tcnt;
wire              waiting = !dead && ((awvalid_reg && !m_axi_awready) || (wvalid && !m_axi_wready)
                                      || (bwait != {OW{1'b0}} && !m_axi_bvalid));
wire              progress = aw_hs || w_hs || b_hs;
wire              fire = waiting && !progress && (timeout != {TIMEOUT_W{1'b0}})
                         && (tcnt >= timeout - 1'b1);

wire              gen_ready = !awvalid_reg && !dead && !fire;
wire              issue = gen_valid && gen_ready;
wire              s_rdy = dead ? (owed != {(CNT_W+1){1'b0}}) : (!f_empty && m_axi_wready);
// turning dead drops the rest of the request; `clear` on a dead idle unit starts from nothing
wire              restart = clear && dead && idle;

assign req_ready = gen_idle && !dead && !err_timeout;

dtpu_axi_burst #(
    .ADDR_W(ADDR_W),
    .CNT_W(CNT_W),
    .MAX_BURST(MAX_BURST),
    .MAX_OUTSTANDING(MAX_OUTSTANDING)
) burst_inst (
    .clk(clk),
    .rst_n(rst_n),
    .req_valid(req_valid && !dead && !err_timeout),
    .req_ready(gen_idle),
    .req_addr(req_addr),
    .req_words(req_words),
    .cmd_valid(gen_valid),
    .cmd_ready(gen_ready),
    .cmd_addr(gen_addr),
    .cmd_beats(beats),
    .cmd_last(gen_lastb),
    .done(b_hs && !gen_none),
    .flush(fire || restart),
    .none(gen_none)
);

always @(posedge clk) begin
    if (!rst_n) begin
        awvalid_reg <= 1'b0;
        awaddr_reg  <= {ADDR_W{1'b0}};
        awbeats_reg <= {BW{1'b0}};
        f_wr        <= {PW{1'b0}};
        f_rd        <= {PW{1'b0}};
        f_cnt       <= {OW{1'b0}};
        bwait       <= {OW{1'b0}};
        wb          <= {BW{1'b0}};
        owed        <= {(CNT_W+1){1'b0}};
        dead        <= 1'b0;
        tcnt        <= {TIMEOUT_W{1'b0}};
        err_slverr  <= 1'b0;
        err_decerr  <= 1'b0;
        err_timeout <= 1'b0;
    end else begin
        owed <= owed + ((req_valid && req_ready) ? {1'b0, req_words} : {(CNT_W+1){1'b0}})
                     - {{CNT_W{1'b0}}, s_valid && s_rdy};
        if (issue) begin
            awvalid_reg <= 1'b1;
            awaddr_reg  <= gen_addr;
            awbeats_reg <= beats;
        end else if (aw_hs) begin
            awvalid_reg <= 1'b0;
        end
        if (aw_hs && !dead) begin
            f_beats[f_wr] <= awbeats_reg;
            f_wr <= f_wr + 1'b1;
        end
        if (w_done) begin
            f_rd <= f_rd + 1'b1;
        end
        f_cnt <= f_cnt + {{(OW-1){1'b0}}, aw_hs && !dead} - {{(OW-1){1'b0}}, w_done};
        if (w_hs) begin
            wb <= h_end ? {BW{1'b0}} : wb + 1'b1;
        end
        bwait <= bwait + {{(OW-1){1'b0}}, w_done}
                       - {{(OW-1){1'b0}}, b_hs && bwait != {OW{1'b0}}};
        if (!waiting || progress) begin
            tcnt <= {TIMEOUT_W{1'b0}};
        end else begin
            tcnt <= tcnt + 1'b1;
        end
        if (fire) begin
            dead <= 1'b1;
            err_timeout <= 1'b1;
        end
        if (b_hs && !dead && m_axi_bresp == 2'b10) begin
            err_slverr <= 1'b1;
        end
        if (b_hs && !dead && m_axi_bresp == 2'b11) begin
            err_decerr <= 1'b1;
        end
        if (clear) begin
            err_slverr <= 1'b0;
            err_decerr <= 1'b0;
            if (restart) begin
                // the bus is reset by the system after a timeout: start from nothing
                err_timeout <= 1'b0;
                dead        <= 1'b0;
                awvalid_reg <= 1'b0;
                f_rd        <= f_wr;
                f_cnt       <= {OW{1'b0}};
                bwait       <= {OW{1'b0}};
                wb          <= {BW{1'b0}};
            end
        end
    end
end

assign idle = dead ? (owed == {(CNT_W+1){1'b0}})
                   : (gen_idle && !awvalid_reg && gen_none && owed == {(CNT_W+1){1'b0}});

assign s_ready = s_rdy;

assign m_axi_awid    = {ID_W{1'b0}};
assign m_axi_awaddr  = awaddr_reg;
/* verilator lint_off UNUSEDSIGNAL */
wire [8:0]        awlen9 = {{(9-BW){1'b0}}, awbeats_reg} - 9'd1;
/* verilator lint_on UNUSEDSIGNAL */
assign m_axi_awlen   = awlen9[7:0];
assign m_axi_awsize  = 3'd3;
assign m_axi_awburst = 2'b01;
assign m_axi_awcache = 4'b0011;
assign m_axi_awprot  = 3'b000;
assign m_axi_awvalid = awvalid_reg;
assign m_axi_wdata   = s_data;
assign m_axi_wstrb   = s_strb;
assign m_axi_wlast   = h_end;
assign m_axi_wvalid  = wvalid;
assign m_axi_bready  = 1'b1;

endmodule

`resetall
