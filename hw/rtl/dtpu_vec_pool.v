/*

Copyright (c) 2026 DTPU authors. Apache-2.0.

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Vector unit (contract 2.1): AVG_POOL and MAX_POOL (KIND 3, 4; golden model
 * dtpu.reference.vector.average_pool / max_pool, cycles dtpu.hw.units.vector.pool_schedule)
 * of any window, stride and padding whose windows each hold an in-image tap.
 *
 * Input-major. Pixel words (dtpu_vec_pix) come in raster order; word j of pixel (y, x) costs
 * one operation for each window holding the pixel, output rows oy (the open ones, at most
 * ceil(FH/SH)) then columns ox, or one that skips it when no window does (VALID pools that
 * drop a last row or column, strides past the window). An operation reads, combines and writes
 * accumulator word slot(oy) * OW * ceil(C/8) + ox * ceil(C/8) + j (LANES 32-bit lanes; the
 * window's first in-image tap writes the word, the others add (AVG_POOL) or keep the larger
 * (MAX_POOL)); slot(oy) = oy mod ceil(FH/SH), a ring of output rows. A window's result is made
 * by its last in-image tap's operation: MAX_POOL clamps, AVG_POOL divides by the taps inside
 * the image, rounding half away from zero as TFLite's (sum +- count/2) / count with truncating
 * division, and clamps. The division is a multiply by the count's reciprocal, exact for the
 * windows of up to MAX_AREA <= 256 taps AVG_POOL takes (contract VEC_AVG_AREA; a larger FH x FW
 * is `geom_bad`): a shared table of 24-bit constants and one 16 x 24 multiply (a DSP48E1) a
 * lane (below, with the proof; eight 32-bit dividers kept Yosys in techmap for 50 minutes).
 * Where windows clipped at the right or bottom edge end at the same pixel as an earlier one
 * (SAME padding of at least the stride), only the earliest is made there: the others are
 * made after the row (the right-edge ones of the row's first open output row, then, after the
 * image's last row, the other open output rows' windows, all of their columns) from the
 * accumulators, one operation a word with no pixel word taken. So results leave in output
 * order, one contiguous stream, OUT_X + 1 = 6 cycles after their operation (the result pipe,
 * below; out_bytes: 8, or C mod 8 for a pixel's last word; out_end on the tensor's last).
 *
 * The accumulators are one block RAM (2^LOG_ROW words: min(ceil(FH/SH), OH) * OW * ceil(C/8)
 * <= 2^LOG_ROW, else `geom_bad`), read two operations ahead (the walk runs ahead, below), the
 * words written since forwarded. The fields may arrive
 * after `clear`. Their quotients (ceil(FH/SH), PT/SH, PL/SW, MAX_AREA/FH) come from four small
 * restoring dividers, 9 cycles after the window fields change, the sizes three registers later
 * (three after any other field's change), the walk loaded from them and stepped to its first
 * operation three cycles after that: `ready` then, and `geom_bad` valid with it. The unit takes
 * no pixel word before `ready` (dtpu_vec offers none before: its first beat comes
 * >= MEM_READ_LATENCY after its request, long after).
 */
module dtpu_vec_pool #
(
    parameter LANES = 8,
    // log2 of the accumulator words (rows of windows open at once x OW * ceil(C/8))
    parameter LOG_ROW = 10,
    // the largest FH x FW of an AVG_POOL (contract VEC_AVG_AREA; <= 256: the reciprocals' bound)
    parameter MAX_AREA = 256
)
(
    input  wire               clk,
    input  wire               rst,

    input  wire               clear,
    input  wire               sgn,
    input  wire               avg,            // 1: AVG_POOL, 0: MAX_POOL
    input  wire [15:0]        n,
    input  wire [15:0]        h,
    input  wire [15:0]        w,
    input  wire [15:0]        c,
    input  wire [7:0]         fh,
    input  wire [7:0]         fw,
    input  wire [7:0]         sh,
    input  wire [7:0]         sw,
    input  wire [7:0]         pt,
    input  wire [7:0]         pl,
    input  wire [15:0]        oh,
    input  wire [15:0]        ow,
    input  wire signed [15:0] act_min,
    input  wire signed [15:0] act_max,
    output wire               geom_bad,       // a window without an in-image tap, or too wide
    output wire               ready,          // the sizes are made from the fields as they are

    /* pixel words */
    input  wire               in_valid,
    output wire               in_ready,
    input  wire [8*LANES-1:0] in_data,
    /* verilator lint_off UNUSEDSIGNAL */
    input  wire               in_last,        // (the walk counts C itself: the same words)
    /* verilator lint_on UNUSEDSIGNAL */

    /* results */
    input  wire               room,           // the output has room for a result
    output reg                out_valid,
    output reg  [8*LANES-1:0] out_data,
    output reg  [3:0]         out_bytes,
    output reg                out_end,
    output wire               op,
    output wire               last_op
);

initial begin
    if (MAX_AREA < 1 || MAX_AREA > 256) begin
        $error("Error: MAX_AREA must be 1..256, the reciprocals' exact range (instance %m)");
        $finish;
    end
end

localparam integer ROW = 1 << LOG_ROW;
localparam [LOG_ROW:0] ROW_W = {1'b1, {LOG_ROW{1'b0}}};
// An accumulator lane's width: an AVG_POOL window holds at most MAX_AREA <= 256 taps of
// 0..255 (uint8) or -128..127 (int8), so its sum is within [-2^15, 255 * 256 = 65 280]: 18
// bits signed; a MAX_POOL lane holds one input value (9 bits). 32-bit lanes took 29 BRAM36 at
// LOG_ROW 12 and 32-bit adders, comparators and clamps; 18 bits take 16 BRAM36 (the results
// are the same: no lane value ever needed more; 17 bits would hold it too, 18 are two 9-bit
// block RAM columns, the same 16 BRAM36).
localparam integer ACC_W = 18;
// The walk's window starts (and the sums made from them) are signed PW-bit values. A pool that
// runs (`okw`) has (OH-1)*SH < H + PT and (OW-1)*SW < W + PL, so every start is within
// [-PT, OW*SW - PL] and every sum the walk compares (start + FH - 1, start + SH, r_hi) within
// [-255, 2^16 + 3 * 255] (H, W, OH, OW 16 bits; FH, SH, PT 8): 18 bits signed hold it (they
// were 32, twice the adders, comparators and registers).
localparam integer PW = 18;

reg  [ACC_W*LANES-1:0] acc [0:ROW-1];

/* ---- sizes from the window fields
 * The four quotients the window fields need (ceil(FH/SH) = (FH+SH-1)/SH, PT/SH, PL/SW and
 * MAX_AREA/FH for AVG_POOL's window limit) come from four restoring dividers, a quotient bit a
 * cycle: the fields are 8 bits, so 9 cycles from the fields they divide (`dkey`, latched; a
 * field changing restarts them). The sizes made from the quotients are three registers further
 * (`settle`): `ready` once they are all made from the fields as they are; geom_bad is valid
 * then. (Combinational dividers were most of Yosys's run time; these are four 9-bit
 * subtractors. The vector unit's first pixel word comes >= MEM_READ_LATENCY after its request,
 * long after: dtpu_vec waits for `ready` all the same, so the cycles do not change.) */
/* verilator lint_off UNUSEDSIGNAL */
reg  [15:0] wpx;                        // words a pixel, ceil(C/8)
reg  [8:0]  qy;                         // ceil(FH/SH)
reg  [8:0]  py, px;                     // PT/SH, PL/SW
reg  [8:0]  qa;                         // MAX_AREA/FH: AVG_POOL takes FW <= qa
reg  [31:0] lasty, lastx;               // (OH-1)*SH, (OW-1)*SW
reg  [15:0] ry;                         // rows of the ring: min(ceil(FH/SH), OH)
reg  [15:0] n0y, n0x;                   // windows open at row (column) 0
reg  [31:0] roww;                       // a row's words, OW * ceil(C/8)
reg         okw;
reg  [47:0] ring;                       // the ring's words
reg  signed [PW-1:0] sn0y, sn0x;        // the start of the first window not open at 0
reg  [15:0] nm1, hm1, wm1, ohm1, owm1;  // N-1, H-1, W-1, OH-1, OW-1
reg  signed [PW-1:0] fhm1, fwm1;        // FH-1, FW-1
/* verilator lint_on UNUSEDSIGNAL */
/* verilator lint_off UNUSEDSIGNAL */
wire [23:0] sn0y_p = n0y * {8'd0, sh};  // <= (PT/SH + 1) * SH <= PT + SH: PW bits
wire [23:0] sn0x_p = n0x * {8'd0, sw};
/* verilator lint_on UNUSEDSIGNAL */
wire [47:0] key = {fh, fw, sh, sw, pt, pl};
reg  [47:0] dkey;                       // the fields the quotients are (being) made from
// the other fields the sizes and the walk's first operations are made from: a change makes
// them again (`settle`), and the walk is loaded again from them (`pr`, below)
wire [95:0] fld = {n, h, w, c, oh, ow};
reg  [95:0] dfld;
reg  [3:0]  dcnt;                       // quotient bits still to make
reg  [1:0]  settle;                     // registers of sizes made since the quotients
// the dividers: remainder (below the divisor: 8 bits) and the dividend shifting into the
// quotient, per division
reg  [7:0]  r0, r1, r2, r3, d0, d1, d2, d3;
reg  [8:0]  n0, n1, n2, n3;
wire [8:0]  t0 = {r0, n0[8]}, t1 = {r1, n1[8]}, t2 = {r2, n2[8]}, t3 = {r3, n3[8]};
wire        g0 = t0 >= {1'b0, d0}, g1 = t1 >= {1'b0, d1}, g2 = t2 >= {1'b0, d2},
            g3 = t3 >= {1'b0, d3};
// (the new remainder is below the divisor: 8 bits)
wire [7:0]  u0 = g0 ? t0[7:0] - d0 : t0[7:0], u1 = g1 ? t1[7:0] - d1 : t1[7:0],
            u2 = g2 ? t2[7:0] - d2 : t2[7:0], u3 = g3 ? t3[7:0] - d3 : t3[7:0];
// the sizes are made from the fields as they are (`ready` once the walk is loaded from them)
wire        sized = (dkey == key) && (dfld == fld) && (dcnt == 4'd0) && (settle == 2'd3);
always @(posedge clk) begin
    if (dkey != key) begin
        dkey <= key;
        dcnt <= 4'd9;
        settle <= 2'd0;
        {r0, r1, r2, r3} <= 32'd0;
        n0 <= {1'b0, fh} + {1'b0, sh} - 9'd1;
        n1 <= {1'b0, pt};
        n2 <= {1'b0, pl};
        n3 <= MAX_AREA[8:0];
        {d0, d1, d2, d3} <= {sh, sh, sw, fh};
    end else if (dcnt != 4'd0) begin
        dcnt <= dcnt - 4'd1;
        {r0, n0} <= {u0, n0[7:0], g0};
        {r1, n1} <= {u1, n1[7:0], g1};
        {r2, n2} <= {u2, n2[7:0], g2};
        {r3, n3} <= {u3, n3[7:0], g3};
    end else if (settle != 2'd3) begin
        settle <= settle + 2'd1;
    end
    if (dfld != fld) begin
        dfld   <= fld;
        settle <= 2'd0;
    end
    if (rst) begin
        dkey <= ~key;
    end
end
always @(posedge clk) begin
    wpx   <= {3'd0, c[15:3]} + {15'd0, c[2:0] != 3'd0};
    qy    <= n0;
    py    <= n1;
    px    <= n2;
    qa    <= n3;
    lasty <= {16'd0, oh - 16'd1} * {24'd0, sh};
    lastx <= {16'd0, ow - 16'd1} * {24'd0, sw};
    ry    <= ({7'd0, qy} < oh) ? {7'd0, qy} : oh;
    n0y   <= ({7'd0, py} + 16'd1 < oh) ? {7'd0, py} + 16'd1 : oh;
    n0x   <= ({7'd0, px} + 16'd1 < ow) ? {7'd0, px} + 16'd1 : ow;
    roww  <= {16'd0, ow} * {16'd0, wpx};
    okw   <= (fh != 8'd0) && (fw != 8'd0) && (sh != 8'd0) && (sw != 8'd0)
             && (oh != 16'd0) && (ow != 16'd0) && (pt < fh) && (pl < fw)
             && (lasty < {16'd0, h} + {24'd0, pt}) && (lastx < {16'd0, w} + {24'd0, pl})
             && (!avg || {1'b0, fw} <= qa);
    ring  <= {32'd0, ry} * {16'd0, roww};
    sn0y  <= $signed(sn0y_p[PW-1:0]) - $signed({{(PW-8){1'b0}}, pt});
    sn0x  <= $signed(sn0x_p[PW-1:0]) - $signed({{(PW-8){1'b0}}, pl});
    // the walk's bounds less one (its comparisons then add nothing)
    nm1   <= n - 16'd1;
    hm1   <= h - 16'd1;
    wm1   <= w - 16'd1;
    ohm1  <= oh - 16'd1;
    owm1  <= ow - 16'd1;
    fhm1  <= $signed({{(PW-8){1'b0}}, fh}) - 1;
    fwm1  <= $signed({{(PW-8){1'b0}}, fw}) - 1;
end
assign geom_bad = !okw || (ring > {{(47-LOG_ROW){1'b0}}, ROW_W});

wire [LOG_ROW-1:0] wpx_a  = wpx[LOG_ROW-1:0];
wire [LOG_ROW:0]   roww_a = roww[LOG_ROW:0];
wire [LOG_ROW:0]   ring_a = ring[LOG_ROW:0];
wire signed [PW-1:0] npt = -$signed({{(PW-8){1'b0}}, pt});
wire signed [PW-1:0] npl = -$signed({{(PW-8){1'b0}}, pl});
wire signed [PW-1:0] fh_s = $signed({{(PW-8){1'b0}}, fh});
wire signed [PW-1:0] fw_s = $signed({{(PW-8){1'b0}}, fw});
wire signed [PW-1:0] sh_s = $signed({{(PW-8){1'b0}}, sh});
wire signed [PW-1:0] sw_s = $signed({{(PW-8){1'b0}}, sw});

// the ring's next slot
function [LOG_ROW-1:0] next_slot(input [LOG_ROW-1:0] base, input [LOG_ROW:0] step,
                                 input [LOG_ROW:0] size);
    reg [LOG_ROW:0] s;
    begin
        s = {1'b0, base} + step;
        next_slot = (s >= size) ? s[LOG_ROW-1:0] - size[LOG_ROW-1:0] : s[LOG_ROW-1:0];
    end
endfunction

/* ---- the walk, two operations ahead
 * The registers below (the walk's state) are the operation's after the next, the next and
 * the current ones' few facts (`f_*`, `o_*`: the word's address, whether it writes, is a
 * first tap, makes a window's word, ends its pixel word, is the last) registered from them a
 * step before and two steps before. So the accumulator block RAM's read address is the walk's
 * own registers' sum, read as the walk's operation becomes the next, and its word registered
 * (`acc_q`) as it becomes current; and the step has a whole cycle from registers to
 * registers. (On the ECP5 proxy the walk's `word_done` -> next state -> address was 18.0 ns in
 * the cycle of the operation; then, one operation ahead, the block RAM's read -> the combine
 * 12.6 ns.) The step takes a pixel word's end from its channels (`cj`: the funnel's `in_last`
 * is the same word, dtpu_vec_pix counts C the same way), since that operation's word has not
 * come yet. The walk is loaded from the sizes (`pr` 0) once they are made and steps twice
 * more to have its first operation current (`pr` 1, 2): `ready` three cycles after the sizes,
 * and again after `clear` or a field's change (the vector unit's first pixel word comes
 * MEM_READ_LATENCY after its request, long after: no cycle changes). */
// the pixel: batch, row, column; the open output rows ylo .. ynx-1 (ny of them; the first's
// start and slot, the next one's start), the open output columns xlo .. xnx-1 (nx; same, the
// first's word). (ny, nx <= ceil(FH/SH), ceil(FW/SW) <= 255: 9 bits)
reg  [15:0]        b, y, x;
reg  [15:0]        ylo, ynx, xlo, xnx;
reg  [8:0]         ny, nx;
reg  signed [PW-1:0] sylo, synx, sxlo, sxnx;
reg  [LOG_ROW-1:0] ybase, xbase;
// the operation: its window (row iy past ylo; column ix past xlo, or dox when draining), the
// window's start row / column, slot and column word, the word j in the pixel, channels from j on
reg                drain;
reg  [8:0]         iy, ix;
reg  [15:0]        dox;
reg  signed [PW-1:0] sy, sx;
reg  [LOG_ROW-1:0] rb, xa, j;
reg  [15:0]        cj;
reg                fin;
reg  [1:0]         pr;                  // 0: the walk loaded from the sizes, 1: stepped once, 2: ready

wire signed [PW-1:0] ys = $signed({{(PW-16){1'b0}}, y});
wire signed [PW-1:0] xs = $signed({{(PW-16){1'b0}}, x});
wire signed [PW-1:0] one_s = 1;
wire skip      = !drain && (ny == 9'd0 || nx == 9'd0);
wire y_last    = (y == hm1);
wire x_last    = (x == wm1);
wire first_tap = ((sy == ys) || (y == 16'd0 && sy < one_s))
              && ((sx == xs) || (x == 16'd0 && sx < one_s));
wire row_end   = (sy + fhm1 == ys) || y_last;
wire col_end   = (sx + fwm1 == xs) || x_last;
// this operation makes its window's word: its last tap and the first window ending here, or
// a drain's
wire emit      = drain || (!skip && iy == 9'd0 && ix == 9'd0 && row_end && col_end);
wire ix_end    = (ix + 9'd1 == nx);
wire word_done = skip || ((iy + 9'd1 == ny) && ix_end);
wire last_word = (cj <= LANES);
// the row's first open output row ends here (its windows' right-edge ties are made after the
// row), and the bottom's other open rows (after the image's last row)
wire lo_ends   = (ny != 9'd0) && ((sylo + fhm1 == ys) || y_last);
wire need_rd   = lo_ends && (nx > 9'd1);
wire need_bd   = y_last && (ny > 9'd1);
wire drain_row_done = (dox == owm1);
wire drain_end = last_word && drain_row_done && !(y_last && iy + 9'd1 < ny);

wire px_done  = !drain && word_done && last_word;       // the pixel's last operation
wire to_drain = px_done && x_last && (need_rd || need_bd);
wire advance  = (px_done && !to_drain) || (drain && drain_end);
// the window range's changes at the next pixel (column; row, at a row's last pixel)
wire xlo_up   = (nx != 9'd0) && (sxlo + fwm1 == xs);
wire xnx_up   = (xnx != ow) && (sxnx == xs + one_s);
wire ylo_up   = (ny != 9'd0) && (sylo + fhm1 == ys);
wire ynx_up   = (ynx != oh) && (synx == ys + one_s);
// the tensor's last result word: the last window's last word of the last batch
wire [15:0] ox_op = drain ? dox : xlo + {7'd0, ix};
wire last_res = (b == nm1) && (ylo + {7'd0, iy} == ohm1) && (ox_op == owm1) && last_word;

// the step to the operation after this one (taken when it goes)
reg  [15:0]        b_n, y_n, x_n, ylo_n, ynx_n, xlo_n, xnx_n, dox_n, cj_n;
reg  [8:0]         ny_n, nx_n, iy_n, ix_n;
reg  signed [PW-1:0] sylo_n, synx_n, sxlo_n, sxnx_n, sy_n, sx_n;
reg  [LOG_ROW-1:0] ybase_n, xbase_n, rb_n, xa_n, j_n;
reg                drain_n;
always @* begin
    {b_n, y_n, x_n, ylo_n, ynx_n, xlo_n, xnx_n} = {b, y, x, ylo, ynx, xlo, xnx};
    {ny_n, nx_n} = {ny, nx};
    {sylo_n, synx_n, sxlo_n, sxnx_n, sy_n, sx_n} = {sylo, synx, sxlo, sxnx, sy, sx};
    {iy_n, ix_n, dox_n, cj_n} = {iy, ix, dox, cj};
    {ybase_n, xbase_n, rb_n, xa_n, j_n} = {ybase, xbase, rb, xa, j};
    drain_n = drain;
    if (!drain && !word_done) begin                     // the pixel word's next window
        if (!ix_end) begin
            ix_n = ix + 9'd1;
            sx_n = sx + sw_s;
            xa_n = xa + wpx_a;
        end else begin
            ix_n = 9'd0;
            sx_n = sxlo;
            xa_n = xbase;
            iy_n = iy + 9'd1;
            sy_n = sy + sh_s;
            rb_n = next_slot(rb, roww_a, ring_a);
        end
    end else if (!drain && !last_word) begin            // the pixel's next word
        {iy_n, ix_n} = 18'd0;
        {sy_n, sx_n, rb_n, xa_n} = {sylo, sxlo, ybase, xbase};
        j_n  = j + 1'b1;
        cj_n = cj - LANES;
    end else if (to_drain) begin                        // the row's ties, then the bottom's
        drain_n = 1'b1;
        j_n  = {LOG_ROW{1'b0}};
        cj_n = c;
        if (need_rd) begin
            {iy_n, dox_n} = {9'd0, xlo + 16'd1};
            {sy_n, sx_n, rb_n, xa_n} = {sylo, sxlo + sw_s, ybase, xbase + wpx_a};
        end else begin
            {iy_n, dox_n} = {9'd1, 16'd0};
            {sy_n, sx_n, xa_n} = {sylo + sh_s, npl, {LOG_ROW{1'b0}}};
            rb_n = next_slot(ybase, roww_a, ring_a);
        end
    end else if (drain && !last_word) begin             // a drained window's next word
        j_n  = j + 1'b1;
        cj_n = cj - LANES;
    end else if (drain && !drain_end) begin             // the next drained window
        j_n  = {LOG_ROW{1'b0}};
        cj_n = c;
        if (!drain_row_done) begin
            dox_n = dox + 16'd1;
            sx_n  = sx + sw_s;
            xa_n  = xa + wpx_a;
        end else begin
            {iy_n, dox_n} = {iy + 9'd1, 16'd0};
            {sy_n, sx_n, xa_n} = {sy + sh_s, npl, {LOG_ROW{1'b0}}};
            rb_n = next_slot(rb, roww_a, ring_a);
        end
    end
    if (advance) begin                                  // the next pixel
        drain_n = 1'b0;
        {iy_n, ix_n} = 18'd0;
        j_n  = {LOG_ROW{1'b0}};
        cj_n = c;
        if (!x_last) begin
            x_n = x + 16'd1;
            if (xlo_up) begin
                xlo_n   = xlo + 16'd1;
                sxlo_n  = sxlo + sw_s;
                xbase_n = xbase + wpx_a;
            end
            if (xnx_up) begin
                xnx_n  = xnx + 16'd1;
                sxnx_n = sxnx + sw_s;
            end
            nx_n = (xnx_up && !xlo_up) ? nx + 9'd1 : (xlo_up && !xnx_up) ? nx - 9'd1 : nx;
        end else begin
            x_n = 16'd0;
            {xlo_n, xnx_n, nx_n, sxlo_n, sxnx_n, xbase_n} = {16'd0, n0x, n0x[8:0], npl, sn0x,
                                                             {LOG_ROW{1'b0}}};
            if (!y_last) begin
                y_n = y + 16'd1;
                if (ylo_up) begin
                    ylo_n   = ylo + 16'd1;
                    sylo_n  = sylo + sh_s;
                    ybase_n = next_slot(ybase, roww_a, ring_a);
                end
                if (ynx_up) begin
                    ynx_n  = ynx + 16'd1;
                    synx_n = synx + sh_s;
                end
                ny_n = (ynx_up && !ylo_up) ? ny + 9'd1 : (ylo_up && !ynx_up) ? ny - 9'd1 : ny;
            end else begin
                y_n = 16'd0;
                b_n = b + 16'd1;
                {ylo_n, ynx_n, ny_n, sylo_n, synx_n, ybase_n} = {16'd0, n0y, n0y[8:0], npt,
                                                                 sn0y, {LOG_ROW{1'b0}}};
            end
        end
        {sy_n, sx_n, rb_n, xa_n} = {sylo_n, sxlo_n, ybase_n, xbase_n};
    end
end

// the next operation (f_*, registered from the walk as it became the next, its word being
// read) and the current one (o_*, from f_* as it became current, its word in acc_q)
reg                f_drain, f_skip, f_first, f_emit, f_end, f_wd, f_last;
reg  [3:0]         f_bytes;
reg  [LOG_ROW-1:0] f_addr;
reg  [8:0]         f_rows, f_cols;
reg                o_drain, o_skip, o_first, o_emit, o_end, o_wd, o_last;
reg  [3:0]         o_bytes;
reg  [LOG_ROW-1:0] o_addr;
reg  [8:0]         o_rows, o_cols;
// the walk loaded from the sizes (pr 0), stepped to its first operation (pr 1, 2), stepping
wire load    = clear || (pr == 2'd0);
wire primed  = (pr == 2'd3);
wire go      = primed && room && !fin && !clear && (o_drain || in_valid);
wire stepped = go || (pr != 2'd0 && !primed && !clear);
assign ready    = sized && primed;
assign in_ready = primed && !o_drain && o_wd && room && !fin && !clear;
assign op       = go;
assign last_op  = go && o_last;

wire [LOG_ROW-1:0] addr_w = rb + xa + j;                // the walk's operation's word
wire               wr     = go && !o_drain && !o_skip;

// the block RAM's read (acc_rd; the word written in the same cycle forwarded: byp), then
// registered as its operation becomes current (acc_q; the current one's written word
// forwarded), so the combine starts from a register (the block RAM's output came 4.3 ns into
// the cycle on the ECP5 proxy: its read -> the combine -> s1_v was 12.6 ns)
reg  [ACC_W*LANES-1:0] acc_rd, byp_d, acc_q;
reg                    byp;

// the taps inside the window: its in-image rows times its in-image columns
wire signed [PW-1:0] h_s = $signed({{(PW-16){1'b0}}, h});
wire signed [PW-1:0] w_s = $signed({{(PW-16){1'b0}}, w});
wire signed [PW-1:0] zero_s = 0;
wire signed [PW-1:0] r_hi = (sy + fh_s < h_s) ? sy + fh_s : h_s;
wire signed [PW-1:0] r_lo = (sy > zero_s) ? sy : zero_s;
wire signed [PW-1:0] c_hi = (sx + fw_s < w_s) ? sx + fw_s : w_s;
wire signed [PW-1:0] c_lo = (sx > zero_s) ? sx : zero_s;
/* verilator lint_off UNUSEDSIGNAL */
wire signed [PW-1:0] rows_in = r_hi - r_lo;
wire signed [PW-1:0] cols_in = c_hi - c_lo;
/* verilator lint_on UNUSEDSIGNAL */
// (the result pipe's stages below: the count registered with the operation's word, from its
// rows and columns registered as it became current; the reciprocal a stage later, registered
// again a stage after that)
reg  [8:0]  s1_cnt, s2_cnt;
/* verilator lint_off UNUSEDSIGNAL */
wire [17:0] count = {9'd0, o_rows} * {9'd0, o_cols};
/* verilator lint_on UNUSEDSIGNAL */
wire [8:0]  cnt  = s2_cnt;              // an AVG_POOL's count: <= FH*FW <= MAX_AREA <= 256
wire [7:0]  half = cnt[8:1];
wire signed [31:0] lo = {{16{act_min[15]}}, act_min};
wire signed [31:0] hi = {{16{act_max[15]}}, act_max};

/* AVG_POOL's division by the count d (1 <= d <= MAX_AREA <= 256, the window limit checked
 * above) as a multiply by its reciprocal R(d) = ceil(2^24 / d), exact for every sum:
 *   TFLite rounds (sum + d/2) / d (sum - d/2 for a negative sum) truncating toward zero, so
 *   |result| = floor(N / d) with N = |sum| + floor(d/2). |sum| <= 255 d (d taps of 0..255 or
 *   -128..127), so N < 256 d. With R d = 2^24 + e, 0 <= e < d, and N = q d + r (0 <= r < d):
 *   N R / 2^24 = q + (r + N e / 2^24) / d, and N e < 256 d (d - 1) <= 256 * 256 * 255 < 2^24,
 *   so r + N e / 2^24 < r + 1 <= d: floor(N R / 2^24) = q. (tests/test_vector_unit.py checks
 *   every d and N.) R(1) = 2^24 needs 25 bits: d = 1 passes N (= |sum|) through instead, and
 *   R(d >= 2) <= 2^23 fits 24 bits: N (16 bits) x R (24 bits) is one DSP48E1 (25 x 18) a lane.
 *   The reciprocals are one table of constants (LUTs) the lanes share. */
localparam integer RECIP_W = 24;
// ceil(2^RECIP_W / d), a constant
/* verilator lint_off UNUSEDSIGNAL */
function [RECIP_W-1:0] recip_of(input [31:0] d);
    reg [63:0] t;
    begin
        t = ((64'd1 << RECIP_W) + {32'd0, d} - 64'd1) / {32'd0, d};
        recip_of = t[RECIP_W-1:0];
    end
endfunction
/* verilator lint_on UNUSEDSIGNAL */
wire [RECIP_W*256-1:0] recips;
genvar gi;
generate
    for (gi = 0; gi < 256; gi = gi + 1) begin : g_recip
        // entry d - 1 (entry 0, d = 1, unused)
        assign recips[RECIP_W*gi +: RECIP_W] = (gi == 0) ? {RECIP_W{1'b0}} : recip_of(gi + 1);
    end
endgenerate
wire [7:0]         ridx  = s1_cnt[7:0] - 8'd1;
wire [RECIP_W-1:0] recip = recips[RECIP_W*ridx +: RECIP_W];
wire               cnt1  = (cnt == 9'd1);

/* The result's pipe (the ECP5 proxy's 100 MHz: the window start -> in-image rows -> tap count
 * -> reciprocal -> product -> sign -> clamp took 37.4 ns in one cycle): OUT_X = 5 registers
 * after the operation, out_data the sixth (it was the first). (1) the combined word v and the
 * window's tap count (its in-image rows and columns registered as the operation became
 * current); (2) |v|, the sign and the count's reciprocal (the table's read: a block RAM on the
 * ECP5 proxy); (3) |v| + count/2 and the reciprocal again (the block RAM's output into the
 * multiplier was 11.5 ns); (4) the product as two 16 x 12 partial products; (5) their sum, the
 * quotient; then the sign and the clamp into out_data. dtpu_vec waits PIPE_X less OUT_X for the
 * pools' results and counts OUT_X more in flight (RES_P), so its words, write requests and
 * `done` keep their cycles (units.vector.pool_schedule unchanged). */
reg  [ACC_W*LANES-1:0] acc_d;
integer l;
reg signed [ACC_W-1:0] e, a, v;
always @* begin
    for (l = 0; l < LANES; l = l + 1) begin
        e = sgn ? {{(ACC_W-8){in_data[8*l+7]}}, in_data[8*l +: 8]}
                : {{(ACC_W-8){1'b0}}, in_data[8*l +: 8]};
        a = acc_q[ACC_W*l +: ACC_W];
        v = o_drain ? a : o_first ? e : avg ? a + e : (e > a) ? e : a;
        acc_d[ACC_W*l +: ACC_W] = v;
    end
end

localparam integer OUT_X = 5;
// the stages' valid, end and bytes (stage k: index k - 1)
reg  [OUT_X-1:0]       p_vld, p_end;
reg  [4*OUT_X-1:0]     p_bytes;
// (1) the combined words, the count (s1_cnt, above)
reg  [ACC_W*LANES-1:0] s1_v;
// (2) the count (s2_cnt, above) and its reciprocal, |v| (16 bits: an AVG_POOL sum is within
// [-2^15, 65 280]), v > 0, v
reg  [RECIP_W-1:0]     s2_recip;
reg  [16*LANES-1:0]    s2_abs;
reg  [LANES-1:0]       s2_pos;
reg  [ACC_W*LANES-1:0] s2_v;
// (3) N = |v| + count/2 and the reciprocal
reg  [16*LANES-1:0]    s3_nm;
reg  [RECIP_W-1:0]     s3_recip;
reg                    s3_cnt1;
reg  [LANES-1:0]       s3_pos;
reg  [ACC_W*LANES-1:0] s3_v;
// (4) N x R's partial products (R's low and high 12 bits), N itself for a count of 1
reg  [28*LANES-1:0]    s4_pl, s4_ph;
reg  [16*LANES-1:0]    s4_nm;
reg                    s4_cnt1;
reg  [LANES-1:0]       s4_pos;
reg  [ACC_W*LANES-1:0] s4_v;
// (5) the quotient floor(N R / 2^24)
reg  [16*LANES-1:0]    s5_q;
reg  [LANES-1:0]       s5_pos;
reg  [ACC_W*LANES-1:0] s5_v;

/* verilator lint_off UNUSEDSIGNAL */
reg        [39:0] prod;                 // (the fraction's bits unused)
/* verilator lint_on UNUSEDSIGNAL */
reg signed [ACC_W-1:0] v2, v5;
reg  [16*LANES-1:0] abs1, q4;
reg  [LANES-1:0]    pos1;
reg signed [31:0] r;
reg  [8*LANES-1:0] res;
always @* begin
    for (l = 0; l < LANES; l = l + 1) begin
        // (into 2) |v| and v > 0
        v2 = s1_v[ACC_W*l +: ACC_W];
        abs1[16*l +: 16] = v2[ACC_W-1] ? 16'd0 - v2[15:0] : v2[15:0];
        pos1[l] = (v2 > 0);
        // (into 5) the quotient
        prod = {12'd0, s4_pl[28*l +: 28]} + {s4_ph[28*l +: 28], 12'd0};
        q4[16*l +: 16] = s4_cnt1 ? s4_nm[16*l +: 16] : prod[RECIP_W +: 16];
        // (into out_data) the sign and the clamp
        v5 = s5_v[ACC_W*l +: ACC_W];
        r = avg ? (s5_pos[l] ? {16'd0, s5_q[16*l +: 16]} : -{16'd0, s5_q[16*l +: 16]})
                : {{(32-ACC_W){v5[ACC_W-1]}}, v5};
        r = (r < lo) ? lo : (r > hi) ? hi : r;
        res[8*l +: 8] = r[7:0];
    end
end

always @(posedge clk) begin
    p_vld   <= {p_vld[OUT_X-2:0], go && o_emit};
    p_end   <= {p_end[OUT_X-2:0], go && o_end};
    p_bytes <= {p_bytes[4*(OUT_X-1)-1:0], o_bytes};
    // (1)
    s1_v    <= acc_d;
    s1_cnt  <= count[8:0];
    // (2)
    s2_cnt  <= s1_cnt;
    s2_recip <= recip;
    s2_v    <= s1_v;
    s2_abs  <= abs1;
    s2_pos  <= pos1;
    // (3)
    for (l = 0; l < LANES; l = l + 1) begin
        s3_nm[16*l +: 16] <= s2_abs[16*l +: 16] + {8'd0, half};
    end
    s3_recip <= s2_recip;
    s3_cnt1  <= cnt1;
    s3_pos   <= s2_pos;
    s3_v     <= s2_v;
    // (4)
    for (l = 0; l < LANES; l = l + 1) begin
        s4_pl[28*l +: 28] <= {12'd0, s3_nm[16*l +: 16]} * {16'd0, s3_recip[11:0]};
        s4_ph[28*l +: 28] <= {12'd0, s3_nm[16*l +: 16]} * {16'd0, s3_recip[23:12]};
    end
    s4_nm   <= s3_nm;
    s4_cnt1 <= s3_cnt1;
    s4_pos  <= s3_pos;
    s4_v    <= s3_v;
    // (5)
    s5_q   <= q4;
    s5_pos <= s4_pos;
    s5_v   <= s4_v;
    // the result
    out_valid <= p_vld[OUT_X-1];
    out_end   <= p_end[OUT_X-1];
    if (p_vld[OUT_X-1]) begin
        out_data  <= res;
        out_bytes <= p_bytes[4*(OUT_X-1) +: 4];
    end
    if (rst || clear) begin
        p_vld     <= {OUT_X{1'b0}};
        p_end     <= {OUT_X{1'b0}};
        out_valid <= 1'b0;
        out_end   <= 1'b0;
    end
end

always @(posedge clk) begin
    if (load) begin                                     // the first operation's state
        {b, y, x, ylo, ynx, xlo, xnx} <= {64'd0, n0y, 16'd0, n0x};
        {ny, nx} <= {n0y[8:0], n0x[8:0]};
        {sylo, synx, sxlo, sxnx, sy, sx} <= {npt, sn0y, npl, sn0x, npt, npl};
        {iy, ix, dox, cj} <= {18'd0, 16'd0, c};
        {ybase, xbase, rb, xa, j} <= {(5*LOG_ROW){1'b0}};
        drain <= 1'b0;
    end else if (stepped) begin
        {b, y, x, ylo, ynx, xlo, xnx} <= {b_n, y_n, x_n, ylo_n, ynx_n, xlo_n, xnx_n};
        {ny, nx} <= {ny_n, nx_n};
        {sylo, synx, sxlo, sxnx, sy, sx} <= {sylo_n, synx_n, sxlo_n, sxnx_n, sy_n, sx_n};
        {iy, ix, dox, cj} <= {iy_n, ix_n, dox_n, cj_n};
        {ybase, xbase, rb, xa, j} <= {ybase_n, xbase_n, rb_n, xa_n, j_n};
        drain <= drain_n;
    end
    // the walk's operation becoming the next, its word read (the word written now forwarded
    // when it is that one), the next becoming current, its word (the word written now
    // forwarded); held while the current one waits
    if (stepped) begin
        f_drain <= drain;
        f_skip  <= skip;
        f_first <= first_tap;
        f_emit  <= emit;
        f_end   <= emit && last_res;
        f_wd    <= word_done;
        f_last  <= advance && x_last && y_last && (b == nm1);
        f_bytes <= last_word ? cj[3:0] : 4'd8;
        f_addr  <= addr_w;
        f_rows  <= rows_in[8:0];
        f_cols  <= cols_in[8:0];
        acc_rd  <= acc[addr_w];
        byp     <= wr && (addr_w == o_addr);
        byp_d   <= acc_d;
        {o_drain, o_skip, o_first, o_emit, o_end, o_wd, o_last}
                <= {f_drain, f_skip, f_first, f_emit, f_end, f_wd, f_last};
        o_bytes <= f_bytes;
        o_addr  <= f_addr;
        o_rows  <= f_rows;
        o_cols  <= f_cols;
        acc_q   <= (wr && f_addr == o_addr) ? acc_d : byp ? byp_d : acc_rd;
    end
    if (wr) begin
        acc[o_addr] <= acc_d;
    end
    if (rst || clear || !sized) begin
        pr <= 2'd0;
    end else if (!primed) begin
        pr <= pr + 2'd1;
    end
    if (last_op) begin
        fin <= 1'b1;
    end
    if (rst || clear) begin
        fin <= 1'b0;
    end
end

endmodule

`resetall
