/*

Copyright (c) 2026 DTPU authors. Apache-2.0.

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Vector unit (contract 2.1): AVG_POOL and MAX_POOL (KIND 3, 4; golden model
 * dtpu.reference.vector.average_pool / max_pool) for windows that tile the image: every
 * in-image row lies in exactly one window row (OH = 1 with the window over all H rows, or
 * FH = SH with the windows covering H), and every column in exactly one window column (the
 * caller checks: `dtpu_vec` answers other geometries BAD_FIELD). Global pools and 2x2 stride-2
 * pools are such.
 *
 * Pixel words (dtpu_vec_pix) come in raster order, one operation each: word j of the pixel in
 * window column ox goes into accumulator word ox * ceil(C/8) + j (LANES 32-bit lanes; the
 * window's first in-image tap writes it), a sum (AVG_POOL) or a maximum (MAX_POOL). At the
 * window's last in-image tap the result is made from the new value: MAX_POOL clamps it,
 * AVG_POOL divides by the taps inside the image, rounding half away from zero as TFLite's
 * (sum +- count/2) / count with truncating division, and clamps. Windows complete in output
 * order (tiling), so the results go out registered, a cycle after their operation, as
 * MEAN's do (out_bytes: 8, or C mod 8 for a pixel's last word; out_end on the tensor's last).
 * The accumulators are one block RAM (2^LOG_ROW words: OW * ceil(C/8) <= 2^LOG_ROW), read a
 * cycle ahead at the next operation's word, the word being written forwarded.
 */
module dtpu_vec_pool #
(
    parameter LANES = 8,
    // log2 of the accumulator words (OW * ceil(C/8) <= 2^LOG_ROW)
    parameter LOG_ROW = 10
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
    input  wire [15:0]        fh,
    input  wire [15:0]        fw,
    input  wire [15:0]        sh,
    input  wire [15:0]        sw,
    input  wire [15:0]        pt,
    input  wire [15:0]        pl,
    input  wire signed [15:0] act_min,
    input  wire signed [15:0] act_max,

    /* pixel words */
    input  wire               in_valid,
    output wire               in_ready,
    input  wire [8*LANES-1:0] in_data,
    input  wire               in_last,

    /* results */
    input  wire               room,           // the output has room for a result
    output reg                out_valid,
    output reg  [8*LANES-1:0] out_data,
    output reg  [3:0]         out_bytes,
    output reg                out_end,
    output wire               op,
    output wire               last_op
);

localparam integer ROW = 1 << LOG_ROW;

reg  [32*LANES-1:0] acc [0:ROW-1];

/* ---- the walk: batch, row (its window's rows left / seen), column (same), word */
reg  [15:0]        b, y, x;
reg  [15:0]        rleft, rseen;        // the window row's in-image rows left (incl. this) / before
reg  [15:0]        cleft, cseen;        // the window column's in-image columns left / before
reg  [LOG_ROW-1:0] j, abase;            // word in pixel, the window column's first word
reg  [15:0]        cj;                  // channels from word j on
reg                fin;
reg                fresh;               // no pixel taken yet: the window fields (VEC4) may still be
                                        // arriving at `clear`, so the first rows / columns are
                                        // read from them at the first pixel

// a window's first in-image rows: window 0 from row 0 (its top padded), the others from their
// start; its in-image rows: min(FH - PT, H) for window 0, min(SH, H - y) for the next (FH = SH)
wire [15:0] r_first = (fh - pt < h) ? fh - pt : h;
wire [15:0] c_first = (fw - pl < w) ? fw - pl : w;

assign in_ready = !fin && !clear && room;
wire take = in_valid && in_ready;
assign op = take;

wire [15:0] rleft_c = fresh ? r_first : rleft;
wire [15:0] cleft_c = fresh ? c_first : cleft;
wire row_last  = (rleft_c == 16'd1);
wire col_last  = (cleft_c == 16'd1);
wire first_tap = (rseen == 16'd0) && (cseen == 16'd0);
wire last_tap  = row_last && col_last;
wire last_word = (cj <= LANES);
wire px_end    = in_last;
wire row_end   = px_end && (x == w - 16'd1);
wire img_end   = row_end && (y == h - 16'd1);
assign last_op = take && img_end && (b == n - 16'd1);

// next state of the walk (registered below; the accumulator read follows it)
reg  [15:0]        b_n, y_n, x_n, rleft_n, rseen_n, cleft_n, cseen_n, cj_n;
reg  [LOG_ROW-1:0] j_n, abase_n;
/* verilator lint_off UNUSEDSIGNAL */
wire [15:0] wpx = {3'd0, c[15:3]} + {15'd0, c[2:0] != 3'd0};   // words a pixel (< 2^LOG_ROW)
/* verilator lint_on UNUSEDSIGNAL */
always @* begin
    {b_n, y_n, x_n, rleft_n, rseen_n, cleft_n, cseen_n, cj_n} =
        {b, y, x, rleft_c, rseen, cleft_c, cseen, cj};
    j_n = j;
    abase_n = abase;
    if (take) begin
        if (!px_end) begin
            j_n  = j + 1'b1;
            cj_n = cj - LANES;
        end else begin
            j_n  = {LOG_ROW{1'b0}};
            cj_n = c;
            x_n  = x + 16'd1;
            if (col_last) begin                 // the next window column
                cleft_n = (sw < w - x - 16'd1) ? sw : w - x - 16'd1;
                cseen_n = 16'd0;
                abase_n = abase + wpx[LOG_ROW-1:0];
            end else begin
                cleft_n = cleft_c - 16'd1;
                cseen_n = cseen + 16'd1;
            end
            if (row_end) begin                  // the next row: window column 0
                x_n     = 16'd0;
                cleft_n = c_first;
                cseen_n = 16'd0;
                abase_n = {LOG_ROW{1'b0}};
                y_n     = y + 16'd1;
                if (row_last) begin
                    rleft_n = (sh < h - y - 16'd1) ? sh : h - y - 16'd1;
                    rseen_n = 16'd0;
                end else begin
                    rleft_n = rleft_c - 16'd1;
                    rseen_n = rseen + 16'd1;
                end
                if (img_end) begin              // the next batch
                    y_n     = 16'd0;
                    rleft_n = r_first;
                    rseen_n = 16'd0;
                    b_n     = b + 16'd1;
                end
            end
        end
    end
    if (clear) begin
        {b_n, y_n, x_n, rseen_n, cseen_n} = 80'd0;
        rleft_n = r_first;
        cleft_n = c_first;
        cj_n    = c;
        j_n     = {LOG_ROW{1'b0}};
        abase_n = {LOG_ROW{1'b0}};
    end
end

wire [LOG_ROW-1:0] addr    = abase + j;
wire [LOG_ROW-1:0] addr_nx = abase_n + j_n;

reg  [32*LANES-1:0] acc_rd, byp_d;
reg                 byp;
wire [32*LANES-1:0] acc_q = byp ? byp_d : acc_rd;

// the taps inside the window: rows seen + this one, times columns seen + this one
/* verilator lint_off UNUSEDSIGNAL */
wire [31:0] count = ({16'd0, rseen} + 32'd1) * ({16'd0, cseen} + 32'd1);
/* verilator lint_on UNUSEDSIGNAL */
wire signed [31:0] cnt_s = $signed({1'b0, count[30:0]});
wire signed [31:0] half  = $signed({2'b00, count[30:1]});
wire signed [31:0] lo = {{16{act_min[15]}}, act_min};
wire signed [31:0] hi = {{16{act_max[15]}}, act_max};

reg  [32*LANES-1:0] acc_d;
reg  [8*LANES-1:0]  res;
integer l;
reg signed [31:0] e, a, v, num, r;
always @* begin
    for (l = 0; l < LANES; l = l + 1) begin
        e = sgn ? {{24{in_data[8*l+7]}}, in_data[8*l +: 8]} : {24'd0, in_data[8*l +: 8]};
        a = acc_q[32*l +: 32];
        v = first_tap ? e : avg ? a + e : (e > a) ? e : a;
        acc_d[32*l +: 32] = v;
        num = (v > 0) ? v + half : v - half;
        r = avg ? num / cnt_s : v;
        r = (r < lo) ? lo : (r > hi) ? hi : r;
        res[8*l +: 8] = r[7:0];
    end
end

always @(posedge clk) begin
    {b, y, x, rleft, rseen, cleft, cseen, cj} <= {b_n, y_n, x_n, rleft_n, rseen_n, cleft_n,
                                                  cseen_n, cj_n};
    j <= j_n;
    abase <= abase_n;
    acc_rd <= acc[addr_nx];
    byp    <= take && (addr_nx == addr);
    byp_d  <= acc_d;
    if (take) begin
        acc[addr] <= acc_d;
    end
    out_valid <= take && last_tap;
    out_end <= last_op;
    if (take && last_tap) begin
        out_data  <= res;
        out_bytes <= last_word ? cj[3:0] : 4'd8;
    end
    if (last_op) begin
        fin <= 1'b1;
    end
    if (take) begin
        fresh <= 1'b0;
    end
    if (rst || clear) begin
        fresh <= 1'b1;
        fin <= 1'b0;
        out_valid <= 1'b0;
        out_end <= 1'b0;
    end
end

endmodule

`resetall
