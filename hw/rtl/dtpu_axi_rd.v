/*

Copyright (c) 2026 DTPU authors. Apache-2.0.

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * AXI4 read master of contract 2.0 (64-bit data, INCR bursts of 8-byte beats).
 *
 * Requests (address, 64-bit word count) come on a ready/valid interface; the words come out on
 * a ready/valid stream in request order, m_last on the last word of each request. A request is
 * split into bursts of at most MAX_BURST beats that never cross a 4 KiB boundary (MAX_BURST 16
 * keeps ARLEN within AXI3's 4 bits for the Zynq HP ports; the splitting and the burst count are
 * dtpu_axi_burst, shared with dtpu_axi_wr); up to MAX_OUTSTANDING bursts are in
 * flight (ARVALID counted from the cycle it rises). The low 3 address bits are ignored (the
 * contract's addresses are 8-byte aligned). A request of 0 words is accepted and produces
 * nothing.
 *
 * Every word carries the RRESP of its beat (m_resp); SLVERR and DECERR also set the sticky flags
 * err_slverr / err_decerr (cleared by `clear`). The request still completes: the error words are
 * delivered like the others, so nothing waits forever on a failed read.
 *
 * Timeout: when `timeout` != 0 and the master waits on the slave (ARVALID without ARREADY, or a
 * burst in flight without RVALID) for `timeout` consecutive cycles, err_timeout is set and the
 * master turns *dead*: the words still owed for every accepted request are produced at once with
 * m_timeout = 1 (data 0), so the consumer finishes; late R beats are accepted and dropped
 * (RREADY high), a pending ARVALID stays up until accepted (AXI forbids withdrawing it), and new
 * requests are refused until `clear` (which takes effect when the master is idle). After a
 * timeout the bus is in an unknown state: the system resets it (contract 2.0: the list fails).
 */
module dtpu_axi_rd #
(
    parameter ADDR_W = 32,
    // width of a request's word count
    parameter CNT_W = 32,
    // longest burst in beats (16: AXI3 HP port; at most 128)
    parameter MAX_BURST = 16,
    // bursts in flight
    parameter MAX_OUTSTANDING = 8,
    parameter TIMEOUT_W = 32,
    // AXI ID width (every burst uses ID 0: in-order responses)
    parameter ID_W = 1
)
(
    input  wire                 clk,
    input  wire                 rst_n,

    /* clears the error flags (and the dead state once idle) */
    input  wire                 clear,
    /* cycles without progress from the slave before err_timeout (0: never) */
    input  wire [TIMEOUT_W-1:0] timeout,

    /* requests */
    input  wire                 req_valid,
    output wire                 req_ready,
    /* verilator lint_off UNUSEDSIGNAL */
    input  wire [ADDR_W-1:0]    req_addr,        // [2:0] ignored: 8-byte aligned
    /* verilator lint_on UNUSEDSIGNAL */
    input  wire [CNT_W-1:0]     req_words,

    /* words, in request order */
    output wire                 m_valid,
    input  wire                 m_ready,
    output wire [63:0]          m_data,
    output wire [1:0]           m_resp,
    output wire                 m_timeout,
    output wire                 m_last,

    /* status */
    output wire                 idle,
    output reg                  err_slverr,
    output reg                  err_decerr,
    output reg                  err_timeout,

    /* AXI4 read channels */
    output wire [ID_W-1:0]      m_axi_arid,
    output wire [ADDR_W-1:0]    m_axi_araddr,
    output wire [7:0]           m_axi_arlen,
    output wire [2:0]           m_axi_arsize,
    output wire [1:0]           m_axi_arburst,
    output wire [3:0]           m_axi_arcache,
    output wire [2:0]           m_axi_arprot,
    output wire                 m_axi_arvalid,
    input  wire                 m_axi_arready,
    /* verilator lint_off UNUSEDSIGNAL */
    input  wire [ID_W-1:0]      m_axi_rid,
    /* verilator lint_on UNUSEDSIGNAL */
    input  wire [63:0]          m_axi_rdata,
    input  wire [1:0]           m_axi_rresp,
    /* verilator lint_off UNUSEDSIGNAL */
    input  wire                 m_axi_rlast,     // bursts are counted by their ARLEN
    /* verilator lint_on UNUSEDSIGNAL */
    input  wire                 m_axi_rvalid,
    output wire                 m_axi_rready
);

localparam BW = $clog2(MAX_BURST + 1);          // beats of one burst
localparam PW = $clog2(MAX_OUTSTANDING);        // burst FIFO pointer
localparam DEPTH = 1 << PW;
localparam OW = $clog2(MAX_OUTSTANDING + 1);    // FIFO entries

initial begin
    if (MAX_BURST < 1 || MAX_BURST > 128 || MAX_OUTSTANDING < 2 || CNT_W < 10 || ADDR_W < 12) begin
        $error("Error: MAX_BURST 1..128, MAX_OUTSTANDING >= 2, CNT_W >= 10, ADDR_W >= 12 (instance %m)");
        $finish;
    end
end

/* ---- burst generator: the request being split, the bursts reserved ---- */
reg               dead;
wire              gen_idle;         // no request being split
wire              gen_valid;        // a burst to issue, a reservation free
wire              gen_ready;
wire [ADDR_W-1:0] gen_addr;
wire [BW-1:0]     beats;
wire              gen_lastb;
/* verilator lint_off UNUSEDSIGNAL */
wire              gen_none;
/* verilator lint_on UNUSEDSIGNAL */

/* ---- AR register ---- */
reg               arvalid_reg;
reg  [ADDR_W-1:0] araddr_reg;
reg  [BW-1:0]     arbeats_reg;
reg               arlastb_reg;

/* ---- bursts in flight (FIFO of beats, last-of-request) ---- */
reg  [BW-1:0]     f_beats [0:DEPTH-1];
reg               f_lastb [0:DEPTH-1];
reg  [PW-1:0]     f_wr, f_rd;
reg  [OW-1:0]     f_cnt;            // entries in the FIFO
reg  [BW-1:0]     rb;               // beats done of the head burst

wire              ar_hs = arvalid_reg && m_axi_arready;
wire              f_empty = (f_cnt == {OW{1'b0}});
wire [BW-1:0]     h_beats = f_beats[f_rd];
wire              h_end = (rb == h_beats - 1'b1);

wire              beat = dead ? (!f_empty && m_ready) : (m_axi_rvalid && m_ready);
wire              pop = beat && h_end;

/* ---- timeout ---- */
reg  [TIMEOUT_W-1:0] tcnt;
wire              waiting = !dead && ((arvalid_reg && !m_axi_arready) || (!f_empty && !m_axi_rvalid));
wire              fire = waiting && !ar_hs && !(m_axi_rvalid && m_axi_rready) && (timeout != {TIMEOUT_W{1'b0}}) && (tcnt >= timeout - 1'b1);

// the generator reserves a burst per AR (and per dead burst); a FIFO pop frees it
assign gen_ready = dead || (!arvalid_reg && !fire);
wire              issue = gen_valid && !arvalid_reg && !dead && !fire;   // a real AR
wire              vpush = gen_valid && dead;                             // a dead burst
wire              pushp = fire && arvalid_reg;    // the pending AR's burst, owed when turning dead
wire              push = (ar_hs && !dead && !fire) || vpush || pushp;
wire [BW-1:0]     push_beats = vpush ? beats : arbeats_reg;
wire              push_lastb = vpush ? gen_lastb : arlastb_reg;

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
    .done(pop),
    .flush(1'b0),
    .none(gen_none)
);

always @(posedge clk) begin
    if (!rst_n) begin
        arvalid_reg <= 1'b0;
        araddr_reg  <= {ADDR_W{1'b0}};
        arbeats_reg <= {BW{1'b0}};
        arlastb_reg <= 1'b0;
        f_wr        <= {PW{1'b0}};
        f_rd        <= {PW{1'b0}};
        f_cnt       <= {OW{1'b0}};
        rb          <= {BW{1'b0}};
        dead        <= 1'b0;
        tcnt        <= {TIMEOUT_W{1'b0}};
        err_slverr  <= 1'b0;
        err_decerr  <= 1'b0;
        err_timeout <= 1'b0;
    end else begin
        if (issue) begin
            arvalid_reg <= 1'b1;
            araddr_reg  <= gen_addr;
            arbeats_reg <= beats;
            arlastb_reg <= gen_lastb;
        end else if (ar_hs) begin
            arvalid_reg <= 1'b0;
        end
        if (push) begin
            f_beats[f_wr] <= push_beats;
            f_lastb[f_wr] <= push_lastb;
            f_wr <= f_wr + 1'b1;
        end
        if (pop) begin
            f_rd <= f_rd + 1'b1;
        end
        f_cnt <= f_cnt + {{(OW-1){1'b0}}, push} - {{(OW-1){1'b0}}, pop};
        if (beat) begin
            rb <= h_end ? {BW{1'b0}} : rb + 1'b1;
        end
        // timeout
        if (!waiting || ar_hs || (m_axi_rvalid && m_axi_rready)) begin
            tcnt <= {TIMEOUT_W{1'b0}};
        end else begin
            tcnt <= tcnt + 1'b1;
        end
        if (fire) begin
            dead <= 1'b1;
            err_timeout <= 1'b1;
        end
        // errors
        if (!dead && m_axi_rvalid && m_axi_rready && m_axi_rresp == 2'b10) begin
            err_slverr <= 1'b1;
        end
        if (!dead && m_axi_rvalid && m_axi_rready && m_axi_rresp == 2'b11) begin
            err_decerr <= 1'b1;
        end
        if (clear) begin
            err_slverr <= 1'b0;
            err_decerr <= 1'b0;
            if (idle) begin
                err_timeout <= 1'b0;
                dead <= 1'b0;
            end
        end
    end
end

assign idle = gen_idle && !arvalid_reg && f_empty;

assign m_valid   = dead ? !f_empty : m_axi_rvalid;
assign m_data    = dead ? 64'd0 : m_axi_rdata;
assign m_resp    = dead ? 2'b00 : m_axi_rresp;
assign m_timeout = dead;
assign m_last    = h_end && f_lastb[f_rd];

assign m_axi_arid    = {ID_W{1'b0}};
assign m_axi_araddr  = araddr_reg;
/* verilator lint_off UNUSEDSIGNAL */
wire [8:0]        arlen9 = {{(9-BW){1'b0}}, arbeats_reg} - 9'd1;
/* verilator lint_on UNUSEDSIGNAL */
assign m_axi_arlen   = arlen9[7:0];
assign m_axi_arsize  = 3'd3;
assign m_axi_arburst = 2'b01;
assign m_axi_arcache = 4'b0011;
assign m_axi_arprot  = 3'b000;
assign m_axi_arvalid = arvalid_reg;
assign m_axi_rready  = dead ? 1'b1 : m_ready;

endmodule

`resetall
