/*

Copyright (c) 2026 DTPU authors. Apache-2.0.

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Shares one read master (dtpu_axi_rd's request and word ports) between two requesters of
 * contract 2.0: port A (the descriptor fetcher, priority) and port B (the load unit).
 *
 * Requests are granted one at a time (A first when both are valid; a requester may drop an
 * unaccepted request, the grant is combinational). The owner of every accepted request with at
 * least one word goes into an order FIFO; the master returns words in request order, so the
 * word stream is routed to the owner at the head of that FIFO, which is popped on the word
 * marked m_last. Data, response, timeout and last are broadcast; only valid/ready are routed.
 * `idle`: no word is owed to either port (every accepted request delivered in full).
 * `a_drop`: words owed to port A are taken and dropped instead of handed over (a requester that
 * was reset with requests in flight; hold it until `idle`).
 * At most 2^LOG_DEPTH requests may owe words (requests wait while the FIFO is full).
 */
module dtpu_cl_rd_arb #
(
    parameter ADDR_W = 32,
    parameter CNT_W = 32,
    // log2 of the order FIFO depth (requests owing words)
    parameter LOG_DEPTH = 4
)
(
    input  wire              clk,
    input  wire              rst_n,

    /* port A requests and words */
    input  wire              a_req_valid,
    output wire              a_req_ready,
    input  wire [ADDR_W-1:0] a_req_addr,
    input  wire [CNT_W-1:0]  a_req_words,
    output wire              a_valid,
    input  wire              a_ready,
    input  wire              a_drop,

    /* port B requests and words */
    input  wire              b_req_valid,
    output wire              b_req_ready,
    input  wire [ADDR_W-1:0] b_req_addr,
    input  wire [CNT_W-1:0]  b_req_words,
    output wire              b_valid,
    input  wire              b_ready,

    /* the read master */
    output wire              m_req_valid,
    input  wire              m_req_ready,
    output wire [ADDR_W-1:0] m_req_addr,
    output wire [CNT_W-1:0]  m_req_words,
    input  wire              m_valid,
    output wire              m_ready,
    input  wire              m_last,

    output wire              idle
);

localparam DEPTH = 1 << LOG_DEPTH;

reg                 own [0:DEPTH-1];         // 0: port A, 1: port B
reg [LOG_DEPTH-1:0] wr_ptr, rd_ptr;
reg [LOG_DEPTH:0]   count;

wire full  = count[LOG_DEPTH];
wire empty = (count == {(LOG_DEPTH+1){1'b0}});
wire head  = own[rd_ptr];

wire grant_b = !a_req_valid;
assign m_req_valid = (a_req_valid || b_req_valid) && !full;
assign m_req_addr  = grant_b ? b_req_addr : a_req_addr;
assign m_req_words = grant_b ? b_req_words : a_req_words;
assign a_req_ready = m_req_ready && !full;
assign b_req_ready = m_req_ready && !full && grant_b;

wire push = m_req_valid && m_req_ready && (m_req_words != {CNT_W{1'b0}});
wire pop  = m_valid && m_ready && m_last && !empty;

assign a_valid = m_valid && !empty && !head && !a_drop;
assign b_valid = m_valid && !empty && head;
assign m_ready = !empty && (head ? b_ready : (a_ready || a_drop));
assign idle    = empty;

always @(posedge clk) begin
    if (push) begin
        own[wr_ptr] <= grant_b;
    end
end

always @(posedge clk) begin
    if (!rst_n) begin
        wr_ptr <= {LOG_DEPTH{1'b0}};
        rd_ptr <= {LOG_DEPTH{1'b0}};
        count  <= {(LOG_DEPTH+1){1'b0}};
    end else begin
        if (push) begin
            wr_ptr <= wr_ptr + 1'b1;
        end
        if (pop) begin
            rd_ptr <= rd_ptr + 1'b1;
        end
        count <= count + {{LOG_DEPTH{1'b0}}, push} - {{LOG_DEPTH{1'b0}}, pop};
    end
end

endmodule

`resetall
