/*

Copyright (c) 2026 DTPU authors. Apache-2.0.

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Descriptor fetcher of contract 2.0 (docs/contract2.md "The command list").
 *
 * On `start` it reads the command list at `base` through a read master (dtpu_axi_rd's request
 * and word ports) in blocks of DESC_FIFO_WORDS words, the next requested once the previous one
 * has arrived and the FIFO has room for it (the golden model's Timeline: "each requested when
 * the one before arrived"), and hands the descriptors to a consumer on a ready/valid stream: d_first on the
 * header, d_last on the descriptor's last word (LEN words in all), d_pc its byte offset in the
 * list. A descriptor is handed over only once all of its words are in the FIFO without a fault,
 * so the consumer never sees part of a failing descriptor. The FIFO holds 2^LEN_WIDTH words (any
 * LEN fits). The fetcher stops after handing over END, or at the first error, then waits for the
 * block reads still in flight (their words are dropped) and drops `busy`.
 *
 * Checks, in the golden model's order (dtpu.hw.cmdlist.Executor.run), each stopping the list
 * with its CL_ERR bit in `err`:
 *   - 2^LOG_MAX_DESCS descriptors handed over without END: BAD_LENGTH;
 *   - the header word read with an error response or timed out: SLVERR / DECERR / TIMEOUT;
 *   - OP not one of the opcodes: BAD_OPCODE; LEN not the opcode's layout: BAD_LENGTH;
 *   - a later word of the descriptor read with an error: SLVERR / DECERR / TIMEOUT.
 * `pc` / `tag` (CL_ERR_PC / CL_ERR_TAG) are those of the last header read without a fault: the
 * failing descriptor for a bad opcode, length or body word; the one before it when the header
 * word itself faults or the descriptor limit is hit (as the golden model reports them).
 * Words read ahead past END (or past the end of memory) never raise an error.
 *
 * Read-ahead stops at END: a scanner follows the headers as the words arrive (each header's
 * LEN tells where the next one is) and no block is requested once an END header has arrived,
 * so a list costs exactly the blocks up to the one holding END (RD_BEATS as the golden
 * model's Timeline counts them; before, up to three blocks past END were read and dropped).
 */
module dtpu_cl_fetch #
(
    parameter ADDR_W = 32,
    // the contract's limit (BAD_LENGTH: "no END within 2^16 descriptors")
    parameter LOG_MAX_DESCS = 16
)
(
    input  wire              clk,
    input  wire              rst_n,

    /* control */
    input  wire              start,          // ignored while busy
    input  wire [ADDR_W-1:0] base,           // 8-byte aligned
    output wire              busy,
    output reg               ended,          // the last list reached END
    output reg  [31:0]       err,            // CL_ERR bits
    output reg  [31:0]       pc,             // CL_ERR_PC: byte offset in the list
    output reg  [31:0]       tag,            // CL_ERR_TAG
    output reg  [LOG_MAX_DESCS:0] descs,     // descriptors handed over

    /* read master requests (dropped, unaccepted, when the fetcher stops) */
    output reg               rd_req_valid,
    input  wire              rd_req_ready,
    output wire [ADDR_W-1:0] rd_req_addr,
    output wire [31:0]       rd_req_words,

    /* read master words */
    input  wire              rd_valid,
    output wire              rd_ready,
    input  wire [63:0]       rd_data,
    input  wire [1:0]        rd_resp,
    input  wire              rd_timeout,

    /* descriptors */
    output wire              d_valid,
    input  wire              d_ready,
    output wire [63:0]       d_data,
    output wire              d_first,
    output wire              d_last,
    output wire [31:0]       d_pc
);

/* verilator lint_off UNUSEDPARAM */
`include "dtpu_cl_regs.vh"
/* verilator lint_on UNUSEDPARAM */

localparam LW = DTPU_CL_HEADER_LEN_WIDTH;
localparam DEPTH = 1 << LW;                  // any LEN fits
localparam CW = LW + 1;                      // 0..DEPTH
localparam integer BLOCK_I = DTPU_CL_DESC_FIFO_WORDS;
localparam [CW-1:0] BLOCK = BLOCK_I[CW-1:0];
localparam [CW-1:0] DEPTH_C = DEPTH;

localparam [2:0] S_IDLE = 3'd0, S_HEAD = 3'd1, S_BODY = 3'd2, S_OUT = 3'd3, S_DRAIN = 3'd4;

initial begin
    if (DTPU_CL_DESC_FIFO_WORDS > DEPTH || ADDR_W > 32) begin
        $error("Error: DESC_FIFO_WORDS must fit the FIFO, ADDR_W <= 32 (instance %m)");
        $finish;
    end
end

reg  [2:0]        state;

/* ---- FIFO of words; only the first faulty word's kind is kept (nothing past it is used) ---- */
reg  [63:0]       f_data [0:DEPTH-1];
reg  [LW-1:0]     f_wr, f_rd;
reg  [CW-1:0]     count;                     // words in the FIFO
reg  [CW-1:0]     clean;                     // words at the head before the first faulty one
reg  [2:0]        bad;                       // the first faulty word's {timeout, resp}
reg  [CW-1:0]     inflight;                  // words requested and not yet received
reg  [31:0]       fetch_off;                 // byte offset of the next block
reg  [ADDR_W-1:0] base_reg;

/* ---- END scan: the headers followed as the words arrive (LEN by LEN), so that no block is
   requested past the one holding END (the golden model's RD_BEATS: the list's blocks only) ---- */
reg  [LW-1:0]     scan_left;                 // words of the current descriptor still to come
reg               scan_end;                  // an END header has arrived

/* ---- the descriptor being decoded ---- */
reg  [31:0]       next_pc;
reg  [LW-1:0]     cur_len;
reg  [LW-1:0]     left;                      // words still to hand over
reg               cur_end;

wire [63:0]       head = f_data[f_rd];
wire [DTPU_CL_HEADER_OP_WIDTH-1:0] h_op = head[DTPU_CL_HEADER_OP_LSB +: DTPU_CL_HEADER_OP_WIDTH];
wire [LW-1:0]     h_len = head[DTPU_CL_HEADER_LEN_LSB +: LW];
wire [31:0]       h_tag = head[DTPU_CL_HEADER_TAG_LSB +: DTPU_CL_HEADER_TAG_WIDTH];

wire              push = rd_valid && (state != S_DRAIN) && (state != S_IDLE);
wire [DTPU_CL_HEADER_OP_WIDTH-1:0] s_op = rd_data[DTPU_CL_HEADER_OP_LSB +: DTPU_CL_HEADER_OP_WIDTH];
wire [LW-1:0]     s_len = rd_data[DTPU_CL_HEADER_LEN_LSB +: LW];
wire              w_fault = rd_resp[1] || rd_timeout;
wire              has_bad = (count != clean);
wire              d_hs = d_valid && d_ready;
wire              pop = d_hs;
wire              max_hit = descs[LOG_MAX_DESCS];
wire [CW-1:0]     room = DEPTH_C - count - inflight;
wire              running = (state == S_HEAD) || (state == S_BODY) || (state == S_OUT);

/* CL_ERR bits of a faulty word */
function [31:0] fault_bits(input [2:0] f);
    begin
        fault_bits = 32'd0;
        if (f[2]) begin
            fault_bits[DTPU_CL_ERR_TIMEOUT] = 1'b1;
        end else if (f[1:0] == 2'b11) begin
            fault_bits[DTPU_CL_ERR_DECERR] = 1'b1;
        end else begin
            fault_bits[DTPU_CL_ERR_SLVERR] = 1'b1;
        end
    end
endfunction

function [31:0] err_bit(input integer b);
    begin
        err_bit = 32'd1 << b;
    end
endfunction

always @(posedge clk) begin
    if (push) begin
        f_data[f_wr] <= rd_data;
    end
end

always @(posedge clk) begin
    if (!rst_n) begin
        state        <= S_IDLE;
        ended        <= 1'b0;
        err          <= 32'd0;
        pc           <= 32'd0;
        tag          <= 32'd0;
        descs        <= {(LOG_MAX_DESCS+1){1'b0}};
        rd_req_valid <= 1'b0;
        f_wr         <= {LW{1'b0}};
        f_rd         <= {LW{1'b0}};
        count        <= {CW{1'b0}};
        clean        <= {CW{1'b0}};
        bad          <= 3'd0;
        inflight     <= {CW{1'b0}};
        fetch_off    <= 32'd0;
        base_reg     <= {ADDR_W{1'b0}};
        next_pc      <= 32'd0;
        cur_len      <= {LW{1'b0}};
        left         <= {LW{1'b0}};
        cur_end      <= 1'b0;
        scan_left    <= {LW{1'b0}};
        scan_end     <= 1'b0;
    end else begin
        /* END scan (a LEN 0 header counts as 1 word; the decoder fails it anyway) */
        if (push && !scan_end) begin
            if (scan_left == {LW{1'b0}}) begin
                scan_end  <= (s_op == DTPU_CL_OP_END);
                scan_left <= (s_len == {LW{1'b0}}) ? {LW{1'b0}} : s_len - 1'b1;
            end else begin
                scan_left <= scan_left - 1'b1;
            end
        end

        /* FIFO bookkeeping */
        if (push) begin
            f_wr <= f_wr + 1'b1;
            if (!has_bad && w_fault) begin
                bad <= {rd_timeout, rd_resp};
            end
        end
        if (pop) begin
            f_rd <= f_rd + 1'b1;
        end
        count <= count + {{LW{1'b0}}, push} - {{LW{1'b0}}, pop};
        clean <= clean + {{LW{1'b0}}, push && !has_bad && !w_fault} - {{LW{1'b0}}, pop};
        inflight <= inflight + ((rd_req_valid && rd_req_ready) ? BLOCK : {CW{1'b0}})
                             - {{LW{1'b0}}, rd_valid && rd_ready};

        /* block requests */
        if (rd_req_valid && rd_req_ready) begin
            rd_req_valid <= 1'b0;
            fetch_off <= fetch_off + {{(32-CW-3){1'b0}}, BLOCK, 3'b000};
        end else if (!running) begin
            rd_req_valid <= 1'b0;
        end else if (!rd_req_valid && inflight == {CW{1'b0}} && room >= BLOCK && !scan_end) begin
            rd_req_valid <= 1'b1;
        end

        case (state)
        S_IDLE: begin
            if (start) begin
                state     <= S_HEAD;
                ended     <= 1'b0;
                err       <= 32'd0;
                pc        <= 32'd0;
                tag       <= 32'd0;
                descs     <= {(LOG_MAX_DESCS+1){1'b0}};
                base_reg  <= base;
                fetch_off <= 32'd0;
                next_pc   <= 32'd0;
                f_wr      <= {LW{1'b0}};
                f_rd      <= {LW{1'b0}};
                count     <= {CW{1'b0}};
                clean     <= {CW{1'b0}};
                scan_left <= {LW{1'b0}};
                scan_end  <= 1'b0;
            end
        end
        S_HEAD: begin
            if (max_hit) begin
                err   <= err_bit(DTPU_CL_ERR_BAD_LENGTH);
                state <= S_DRAIN;
            end else if (count != {CW{1'b0}}) begin
                if (clean == {CW{1'b0}}) begin
                    err   <= fault_bits(bad);
                    state <= S_DRAIN;
                end else begin
                    pc      <= next_pc;
                    tag     <= h_tag;
                    cur_len <= h_len;
                    cur_end <= (h_op == DTPU_CL_OP_END);
                    if (!dtpu_cl_op_known(h_op)) begin
                        err   <= err_bit(DTPU_CL_ERR_BAD_OPCODE);
                        state <= S_DRAIN;
                    end else if (!dtpu_cl_len_ok(h_op, h_len)) begin
                        err   <= err_bit(DTPU_CL_ERR_BAD_LENGTH);
                        state <= S_DRAIN;
                    end else begin
                        state <= S_BODY;
                    end
                end
            end
        end
        S_BODY: begin
            if (clean >= {1'b0, cur_len}) begin
                left  <= cur_len;
                state <= S_OUT;
            end else if (has_bad) begin
                err   <= fault_bits(bad);
                state <= S_DRAIN;
            end
        end
        S_OUT: begin
            if (d_hs) begin
                left <= left - 1'b1;
                if (left == cur_len) begin
                    descs <= descs + 1'b1;
                end
                if (left == {{(LW-1){1'b0}}, 1'b1}) begin
                    next_pc <= next_pc + {{(32-LW-3){1'b0}}, cur_len, 3'b000};
                    if (cur_end) begin
                        ended <= 1'b1;
                        state <= S_DRAIN;
                    end else begin
                        state <= S_HEAD;
                    end
                end
            end
        end
        default: begin   // S_DRAIN: the blocks in flight come back and are dropped
            if (inflight == {CW{1'b0}} && !rd_req_valid) begin
                state <= S_IDLE;
            end
        end
        endcase
    end
end

assign busy = (state != S_IDLE);

assign rd_req_addr  = base_reg + fetch_off[ADDR_W-1:0];
assign rd_req_words = {{(32-CW){1'b0}}, BLOCK};
assign rd_ready     = 1'b1;   // room was reserved by the request

assign d_valid = (state == S_OUT);
assign d_data  = head;
assign d_first = (state == S_OUT) && (left == cur_len);
assign d_last  = (state == S_OUT) && (left == {{(LW-1){1'b0}}, 1'b1});
assign d_pc    = pc;

endmodule

`resetall
