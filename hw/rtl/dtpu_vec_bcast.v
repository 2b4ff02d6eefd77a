/*

Copyright (c) 2026 DTPU authors. Apache-2.0.

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Vector unit (contract 2.1): the operand-B buffer of BMODE 1, the 1x1xC vector B met by every
 * pixel of A. A's contiguous bytes e pair with B[e mod C], so A's word i needs the eight bytes
 * of the periodic sequence B B B ... at s = 8i mod C, which for C not a multiple of 8 start
 * anywhere in a word and may wrap past B's end.
 *
 * B's words (ceil(C/8), C <= 8 * 2^LOG_WORDS) are written in order (w_valid) into two banks of
 * even and odd words, so that the words s/8 and s/8 + 1 are read in one cycle; the window is
 * those sixteen bytes shifted by s mod 8, its bytes past B's end taken from B's first word (a
 * register), which holds them since s + 8 - C < 8. A vector shorter than 8 is stored as
 * ceil(8/C) copies (C' = C * ceil(8/C), 8..14 bytes, two words) so that the same holds.
 * `b` is the window of the current s, a registered read; `take` moves s on by 8 (mod C') and
 * the window of the next s is there in the next cycle (words 0 and 1 are also held in
 * registers, the banks are plain block RAM). `clear` restarts at s = 0 and word 0.
 */
module dtpu_vec_bcast #
(
    // log2 of the words of B (the contract's VEC_BCAST_WORDS)
    parameter LOG_WORDS = 8
)
(
    input  wire                 clk,
    input  wire                 rst,

    input  wire                 clear,
    input  wire [15:0]          c,              // C (1 .. 8 * 2^LOG_WORDS)

    input  wire                 w_valid,        // B's next word
    input  wire [63:0]          w_data,

    input  wire                 take,           // the current window was used
    output wire [63:0]          b
);

localparam SW = LOG_WORDS + 4;                  // byte offsets 0 .. 2 * 8 * 2^LOG_WORDS

// C' (the period stored) and the word being written
wire        short_c = (c < 16'd8);
reg  [SW-1:0] cp;
always @* begin
    case (c[2:0])
        3'd1, 3'd2, 3'd4: cp = 8;
        3'd3:             cp = 9;
        3'd5:             cp = 10;
        3'd6:             cp = 12;
        3'd7:             cp = 14;
        default:          cp = 8;
    endcase
    if (!short_c) begin
        cp = c[SW-1:0];
    end
end

// a short vector repeated: byte k of the two words is B[k mod C]
reg [127:0] rep;
integer     cs;                                 // C when short (else unused: 1)
integer k;
always @* begin
    cs = (c[2:0] == 3'd0) ? 1 : {29'd0, c[2:0]};
    for (k = 0; k < 16; k = k + 1) begin
        rep[8*k +: 8] = w_data[8 * (k % cs) +: 8];
    end
end

reg  [LOG_WORDS-1:0] wa;                        // the next word of B
reg  [63:0] ev [0:(1 << LOG_WORDS) - 1];        // words 0, 2, 4 ...
reg  [63:0] od [0:(1 << LOG_WORDS) - 1];        // words 1, 3, 5 ...
reg  [63:0] first, second;                      // words 0 and 1, also in registers

wire        we_e = w_valid && (short_c || !wa[0]);
wire        we_o = w_valid && (short_c || wa[0]);
/* verilator lint_off WIDTHEXPAND */
wire [LOG_WORDS-1:0] wi_e = short_c ? {LOG_WORDS{1'b0}} : (wa >> 1);
/* verilator lint_on WIDTHEXPAND */
wire [LOG_WORDS-1:0] wi_o = wi_e;
wire [63:0] wd_e = short_c ? rep[63:0] : w_data;
wire [63:0] wd_o = short_c ? rep[127:64] : w_data;

// the read side: s, its next value, the banks' addresses for it
reg  [SW-1:0] s, s_q;
wire [SW-1:0] s8     = s + 8;
wire [SW-1:0] s_next = (s8 >= cp) ? s8 - cp : s8;
wire [SW-1:0] s_rd   = clear ? {SW{1'b0}} : take ? s_next : s;
wire [SW-4:0] w_rd   = s_rd[SW-1:3];
/* verilator lint_off WIDTHTRUNC */
wire [LOG_WORDS-1:0] ra_o = w_rd >> 1;
wire [LOG_WORDS-1:0] ra_e = (w_rd + 1'b1) >> 1;
/* verilator lint_on WIDTHTRUNC */
reg  [63:0] eq, oq;

always @(posedge clk) begin
    if (we_e) ev[wi_e] <= wd_e;
    if (we_o) od[wi_o] <= wd_o;
    eq <= ev[ra_e];
    oq <= od[ra_o];
    if (w_valid && (short_c || wa == {LOG_WORDS{1'b0}})) begin
        first <= wd_e;
    end
    if (w_valid && (short_c || wa == {{(LOG_WORDS-1){1'b0}}, 1'b1})) begin
        second <= wd_o;
    end
    if (w_valid) begin
        wa <= wa + 1'b1;
    end
    s   <= s_rd;
    s_q <= s_rd;
    if (clear) begin
        wa <= {LOG_WORDS{1'b0}};
    end
    if (rst) begin
        wa <= {LOG_WORDS{1'b0}};
        s  <= {SW{1'b0}};
    end
end

// the window at s_q: words s_q/8 (lo) and s_q/8 + 1 (hi), shifted; past C' from `first`.
// Words 0 and 1 come from their registers: they may be written in the cycle the first
// window's read goes out (a B of one or two words), which the banks (read-first, block RAM)
// would miss.
wire [SW-4:0] w_q = s_q[SW-1:3];
wire [63:0]  lo  = (w_q == {(SW-3){1'b0}}) ? first
                 : (w_q == {{(SW-4){1'b0}}, 1'b1}) ? second
                 : s_q[3] ? oq : eq;
wire [63:0]  hi  = (w_q == {(SW-3){1'b0}}) ? second : s_q[3] ? eq : oq;
/* verilator lint_off UNUSEDSIGNAL */
wire [127:0] x   = {hi, lo} >> {s_q[2:0], 3'b000};
/* verilator lint_on UNUSEDSIGNAL */
wire [SW-1:0] rem = cp - s_q;                  // bytes of B left at s_q (>= 1)
wire         wrap = (rem < 8);
wire [63:0]  y   = first << {rem[2:0], 3'b000};
reg  [63:0]  win;
integer j;
always @* begin
    for (j = 0; j < 8; j = j + 1) begin
        win[8*j +: 8] = (wrap && j >= rem[2:0]) ? y[8*j +: 8] : x[8*j +: 8];
    end
end
assign b = win;

endmodule

`resetall
