/*

Copyright (c) 2026 DTPU authors. Apache-2.0.

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Burst splitter of the contract 2.0 AXI4 masters (dtpu_axi_rd, dtpu_axi_wr).
 *
 * A request (address, 64-bit word count) comes on a ready/valid interface; it is split into
 * burst commands (address, beats, last-of-request) on a ready/valid interface, in address
 * order. A burst has at most MAX_BURST beats and never crosses a 4 KiB boundary. The low 3
 * address bits are ignored; a request of 0 words is accepted and produces nothing. req_ready is
 * high when no request is being split.
 *
 * Outstanding bursts: a command handshake reserves one of MAX_OUTSTANDING slots, `done` frees
 * one (the master pulses it when a burst has completed on the bus); cmd_valid stays low while
 * every slot is taken. `none` is high when no slot is taken. `flush` drops the rest of the
 * request being split and frees every slot (it wins over a request and a command in the same
 * cycle).
 */
module dtpu_axi_burst #
(
    parameter ADDR_W = 32,
    // width of a request's word count
    parameter CNT_W = 32,
    // longest burst in beats (at most 128)
    parameter MAX_BURST = 16,
    // bursts reserved at once
    parameter MAX_OUTSTANDING = 8
)
(
    input  wire                              clk,
    input  wire                              rst_n,

    /* requests */
    input  wire                              req_valid,
    output wire                              req_ready,
    /* verilator lint_off UNUSEDSIGNAL */
    input  wire [ADDR_W-1:0]                 req_addr,    // [2:0] ignored: 8-byte aligned
    /* verilator lint_on UNUSEDSIGNAL */
    input  wire [CNT_W-1:0]                  req_words,

    /* burst commands */
    output wire                              cmd_valid,
    input  wire                              cmd_ready,
    output wire [ADDR_W-1:0]                 cmd_addr,
    output wire [$clog2(MAX_BURST + 1)-1:0]  cmd_beats,   // 1..MAX_BURST
    output wire                              cmd_last,    // last burst of its request

    /* outstanding bursts */
    input  wire                              done,
    input  wire                              flush,
    output wire                              none
);

localparam BW = $clog2(MAX_BURST + 1);          // beats of one burst
localparam OW = $clog2(MAX_OUTSTANDING + 1);    // bursts reserved
localparam [9:0]    MAXB10 = MAX_BURST[9:0];
localparam [BW-1:0]  MAXBW = MAX_BURST[BW-1:0];
localparam [OW-1:0] MAXO = MAX_OUTSTANDING[OW-1:0];

initial begin
    if (MAX_BURST < 1 || MAX_BURST > 128 || MAX_OUTSTANDING < 1 || CNT_W < 10 || ADDR_W < 12) begin
        $error("Error: MAX_BURST 1..128, MAX_OUTSTANDING >= 1, CNT_W >= 10, ADDR_W >= 12 (instance %m)");
        $finish;
    end
end

/* the request being split */
reg               gen_busy;
reg  [ADDR_W-1:0] gen_addr;
reg  [CNT_W-1:0]  gen_left;
reg  [OW-1:0]     resv;             // bursts reserved

// beats to the 4 KiB boundary: 1..512
wire [9:0]        bnd = 10'd512 - {1'b0, gen_addr[11:3]};
// this burst's limit, 1..MAX_BURST: BW bits wide, so that the compares with gen_left below are
// BW-bit compares beside a wide zero test, not CNT_W-bit carry chains in series with the address
// add (the splitter's critical path on the ECP5 proxy, docs/synthesis.md)
wire [BW-1:0]     lim = (bnd < MAXB10) ? bnd[BW-1:0] : MAXBW;
wire              left_hi = |gen_left[CNT_W-1:BW];
wire [BW-1:0]     left_lo = gen_left[BW-1:0];
wire [BW-1:0]     beats = (!left_hi && left_lo < lim) ? left_lo : lim;

wire              cmd_hs = cmd_valid && cmd_ready;

assign req_ready = !gen_busy;
assign cmd_valid = gen_busy && (resv < MAXO);
assign cmd_addr  = gen_addr;
assign cmd_beats = beats;
// gen_left == beats, i.e. gen_left <= lim
assign cmd_last  = !left_hi && (left_lo <= lim);
assign none      = (resv == {OW{1'b0}});

always @(posedge clk) begin
    if (!rst_n) begin
        gen_busy <= 1'b0;
        gen_addr <= {ADDR_W{1'b0}};
        gen_left <= {CNT_W{1'b0}};
        resv     <= {OW{1'b0}};
    end else begin
        if (req_valid && req_ready) begin
            gen_busy <= (req_words != {CNT_W{1'b0}});
            gen_addr <= {req_addr[ADDR_W-1:3], 3'b000};
            gen_left <= req_words;
        end
        if (cmd_hs) begin
            gen_addr <= gen_addr + {{(ADDR_W-BW-3){1'b0}}, beats, 3'b000};
            gen_left <= gen_left - {{(CNT_W-BW){1'b0}}, beats};
            gen_busy <= !cmd_last;
        end
        resv <= resv + {{(OW-1){1'b0}}, cmd_hs} - {{(OW-1){1'b0}}, done};
        if (flush) begin
            gen_busy <= 1'b0;
            resv     <= {OW{1'b0}};
        end
    end
end

endmodule

`resetall
