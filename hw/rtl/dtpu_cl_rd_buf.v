/*

Copyright (c) 2026 DTPU authors. Apache-2.0.

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Credit buffer between a requester and a shared, in-order read port (dtpu_cl_rd_arb, dtpu_axi_rd).
 *
 * Why: the read master returns words in request order to every requester. If the word at the
 * head belongs to a requester that cannot take it (the load unit, whose consumer is the core,
 * which waits for the store unit, which waits for its ACC read-back words queued behind the
 * load unit's), the port deadlocks. With this buffer a request goes out only when the FIFO has
 * room for all of its words (space reserved at the request), so the requester's words are
 * always taken from the port at once, whatever its consumer does.
 *
 * A request of more than 2^LOG_DEPTH words never passes: requesters in front of it split
 * their requests (the load unit's runs are at most MAX_BURST words). Words are delivered in
 * order with their response, timeout and last flags; the FIFO is read at a registered pointer
 * (block or distributed RAM) with a one-entry output register, so a word taken from the port
 * is offered to the requester two cycles later and the buffer streams one word per cycle.
 * `idle`: nothing reserved, nothing buffered (every word of every passed request delivered).
 */
module dtpu_cl_rd_buf #
(
    parameter ADDR_W = 32,
    parameter CNT_W = 32,
    parameter LOG_DEPTH = 7
)
(
    input  wire              clk,
    input  wire              rst_n,

    /* requester side */
    input  wire              s_req_valid,
    output wire              s_req_ready,
    input  wire [ADDR_W-1:0] s_req_addr,
    input  wire [CNT_W-1:0]  s_req_words,
    output wire              s_valid,
    input  wire              s_ready,
    output wire [63:0]       s_data,
    output wire [1:0]        s_resp,
    output wire              s_timeout,
    output wire              s_last,

    /* port side */
    output wire              m_req_valid,
    input  wire              m_req_ready,
    output wire [ADDR_W-1:0] m_req_addr,
    output wire [CNT_W-1:0]  m_req_words,
    input  wire              m_valid,
    output wire              m_ready,
    input  wire [63:0]       m_data,
    input  wire [1:0]        m_resp,
    input  wire              m_timeout,
    input  wire              m_last,

    output wire              idle
);

localparam DEPTH = 1 << LOG_DEPTH;
localparam W = 64 + 2 + 1 + 1;

reg  [W-1:0]         mem [0:DEPTH-1];
reg  [LOG_DEPTH:0]   wr_ptr, rd_ptr;
reg  [LOG_DEPTH+1:0] owed;            // words reserved (requested, not yet delivered)
reg  [W-1:0]         out_reg;
reg                  out_valid;

wire [LOG_DEPTH+1:0] room = DEPTH[LOG_DEPTH+1:0] - owed;
wire                 fits = s_req_words <= {{(CNT_W - LOG_DEPTH - 2){1'b0}}, room};

initial begin
    if (CNT_W < LOG_DEPTH + 3) begin
        $error("Error: CNT_W must exceed LOG_DEPTH + 2 (instance %m)");
        $finish;
    end
end

assign m_req_valid = s_req_valid && fits;
assign s_req_ready = m_req_ready && fits;
assign m_req_addr  = s_req_addr;
assign m_req_words = s_req_words;
assign m_ready     = 1'b1;            // room was reserved

wire push = m_valid;
wire fifo_empty = (wr_ptr == rd_ptr);
wire pop_out = s_valid && s_ready;
wire load = !fifo_empty && (!out_valid || pop_out);

assign s_valid   = out_valid;
assign s_data    = out_reg[63:0];
assign s_resp    = out_reg[65:64];
assign s_timeout = out_reg[66];
assign s_last    = out_reg[67];
assign idle      = (owed == {(LOG_DEPTH+2){1'b0}});

wire req_hs = s_req_valid && s_req_ready;

always @(posedge clk) begin
    if (push) begin
        mem[wr_ptr[LOG_DEPTH-1:0]] <= {m_last, m_timeout, m_resp, m_data};
        wr_ptr <= wr_ptr + 1'b1;
    end
    if (load) begin
        out_reg <= mem[rd_ptr[LOG_DEPTH-1:0]];
        rd_ptr  <= rd_ptr + 1'b1;
        out_valid <= 1'b1;
    end else if (pop_out) begin
        out_valid <= 1'b0;
    end
    owed <= owed + (req_hs ? s_req_words[LOG_DEPTH+1:0] : {(LOG_DEPTH+2){1'b0}})
                 - {{(LOG_DEPTH+1){1'b0}}, pop_out};

    if (!rst_n) begin
        wr_ptr    <= {(LOG_DEPTH+1){1'b0}};
        rd_ptr    <= {(LOG_DEPTH+1){1'b0}};
        owed      <= {(LOG_DEPTH+2){1'b0}};
        out_valid <= 1'b0;
    end
end

endmodule

`resetall
