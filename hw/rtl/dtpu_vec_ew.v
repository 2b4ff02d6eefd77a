/*

Copyright (c) 2026 DTPU authors. Apache-2.0.

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Vector unit (contract 2.1): the element-wise datapath, LANES 8-bit lanes of one 64-bit word.
 * RQ_LANES lanes (the contract's VEC_RQ_LANES: 8, 4, 2 or 1) each have an ADD / SUB requantizer
 * (dtpu_vec_add_lane) and a MUL one (dtpu_vec_mul_lane); `mul` picks the result. A word is
 * worked in STEPS = LANES / RQ_LANES cycles, RQ_LANES bytes a cycle from the low ones up: the
 * first group from `a` / `b` in the cycle in_valid is taken, the others from a copy of the word
 * (shifted down a group a cycle). The lanes' own pipelines are unchanged by the knob (12
 * stages, one carry chain a stage: dtpu_vec_add_lane, dtpu_vec_rq): a group's bytes come 12
 * cycles after it was fed, and the word, assembled from its groups, comes with its last
 * (out_valid 12 cycles after the last group: STEPS + 11 cycles after in_valid). in_ready is low
 * while a word's later groups are fed (`busy`): the caller offers a word only with in_ready
 * high, and only when it has room for the result (no backpressure on the result: a
 * fixed-latency pipe, dtpu_vec counts the words in it against its output FIFO). With RQ_LANES = LANES (the default) every word is taken, as before the knob.
 * Parameters are the VEC descriptor's fields as the unit holds them for the whole descriptor.
 * The MUL lanes' requantizers also serve MEAN's tail (alt_*, rq_y8: dtpu_vec_mul_lane).
 */
module dtpu_vec_ew #
(
    parameter LANES = 8,
    // requantizing lanes (contract VEC_RQ_LANES): a divisor of LANES
    parameter RQ_LANES = 8
)
(
    input  wire               clk,
    input  wire               rst,

    input  wire               sgn,
    input  wire               mul,            // 1: MUL, 0: ADD (SUB: M2 negated)
    input  wire signed [15:0] in1_off,
    input  wire signed [15:0] in2_off,
    input  wire signed [31:0] m1,
    input  wire signed [31:0] m2,
    input  wire signed [31:0] mo,
    input  wire signed [7:0]  sh1,
    input  wire signed [7:0]  sh2,
    input  wire signed [7:0]  sho,
    input  wire signed [15:0] out_off,
    input  wire signed [15:0] act_min,
    input  wire signed [15:0] act_max,

    input  wire               in_valid,       // only with in_ready
    output wire               in_ready,       // the lanes take a word this cycle
    output wire               busy,           // a word's later groups are being fed
    input  wire [8*LANES-1:0] a,
    input  wire [8*LANES-1:0] b,

    output wire               out_valid,
    output wire [8*LANES-1:0] y,

    /* The MUL lanes' requantizers lent to MEAN's tail (dtpu_vec_mul_lane): lane i takes
       alt_x's 32-bit value i with alt_sel, rq_y8's byte i its result */
    input  wire                   alt_sel,
    input  wire [32*RQ_LANES-1:0] alt_x,
    output wire [8*RQ_LANES-1:0]  rq_y8
);

localparam integer STEPS = LANES / RQ_LANES;
localparam integer G = 8 * RQ_LANES;          // bits of a lane group
localparam integer SW = (STEPS > 1) ? $clog2(STEPS) : 1;
localparam [31:0]   STEPS_M1 = STEPS - 1;
localparam [SW-1:0] S_ONE  = 1;
localparam [SW-1:0] S_LAST = STEPS_M1[SW-1:0];

initial begin
    if (RQ_LANES < 1 || RQ_LANES > LANES || (LANES % RQ_LANES) != 0) begin
        $error("Error: RQ_LANES=%0d must divide LANES=%0d (instance %m)", RQ_LANES, LANES);
        $finish;
    end
end

reg mul_q1, mul_q2;                 // the kind, registered (constant for the descriptor)

always @(posedge clk) begin
    mul_q1 <= mul;
    mul_q2 <= mul_q1;
end

wire           lane_valid;          // a group into the lanes
wire [G-1:0]   ga, gb;              // its bytes
wire [RQ_LANES-1:0] add_v, mul_v;
wire [G-1:0]   add_y, mul_y;
wire [G-1:0]   grp_y = mul_q2 ? mul_y : add_y;

genvar i;
generate
    if (STEPS == 1) begin : full
        assign in_ready   = 1'b1;
        assign busy       = 1'b0;
        assign lane_valid = in_valid;
        assign ga         = a;
        assign gb         = b;
        assign out_valid  = add_v[0];
        assign y          = grp_y;
    end else begin : part
        reg  [SW-1:0]      step;            // the group fed this cycle after the first (0: none)
        reg  [SW-1:0]      ocnt;            // groups of the word out so far
        reg  [8*LANES-1:0] a_q, b_q;        // the word's later groups, the next one lowest
        /* verilator lint_off UNUSEDSIGNAL */
        reg  [8*LANES-1:0] y_q;             // its groups out so far, the latest highest (the
                                            // lowest group is the word's next, never read)
        /* verilator lint_on UNUSEDSIGNAL */
        assign in_ready   = (step == {SW{1'b0}});
        assign busy       = !in_ready;
        assign lane_valid = in_valid || busy;
        assign ga         = busy ? a_q[G-1:0] : a[G-1:0];
        assign gb         = busy ? b_q[G-1:0] : b[G-1:0];
        assign out_valid  = add_v[0] && (ocnt == S_LAST);
        assign y          = {grp_y, y_q[8*LANES-1:G]};
        always @(posedge clk) begin
            if (busy) begin
                a_q  <= a_q >> G;
                b_q  <= b_q >> G;
                step <= (step == S_LAST) ? {SW{1'b0}} : step + 1'b1;
            end else if (in_valid) begin
                a_q  <= a >> G;
                b_q  <= b >> G;
                step <= S_ONE;
            end
            if (add_v[0]) begin
                y_q  <= {grp_y, y_q[8*LANES-1:G]};
                ocnt <= (ocnt == S_LAST) ? {SW{1'b0}} : ocnt + 1'b1;
            end
            if (rst) begin
                step <= {SW{1'b0}};
                ocnt <= {SW{1'b0}};
            end
        end
    end
endgenerate

generate
    for (i = 0; i < RQ_LANES; i = i + 1) begin : lane
        dtpu_vec_add_lane add_inst (
            .clk(clk),
            .rst(rst),
            .sgn(sgn),
            .in1_off(in1_off),
            .in2_off(in2_off),
            .m1(m1),
            .m2(m2),
            .mo(mo),
            .sh1(sh1),
            .sh2(sh2),
            .sho(sho),
            .out_off(out_off),
            .act_min(act_min),
            .act_max(act_max),
            .in_valid(lane_valid),
            .a(ga[8*i +: 8]),
            .b(gb[8*i +: 8]),
            .out_valid(add_v[i]),
            .y(add_y[8*i +: 8])
        );
        dtpu_vec_mul_lane mul_inst (
            .clk(clk),
            .rst(rst),
            .sgn(sgn),
            .in1_off(in1_off),
            .in2_off(in2_off),
            .mo(mo),
            .sho(sho),
            .out_off(out_off),
            .act_min(act_min),
            .act_max(act_max),
            .in_valid(lane_valid),
            .a(ga[8*i +: 8]),
            .b(gb[8*i +: 8]),
            .out_valid(mul_v[i]),
            .y(mul_y[8*i +: 8]),
            .alt_sel(alt_sel),
            .alt_x(alt_x[32*i +: 32]),
            .rq_y8(rq_y8[8*i +: 8])
        );
    end
endgenerate

/* verilator lint_off UNUSEDSIGNAL */
wire unused = (^add_v[RQ_LANES-1:0]) ^ (^mul_v);
/* verilator lint_on UNUSEDSIGNAL */

endmodule

`resetall
