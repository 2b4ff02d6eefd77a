/*

Copyright (c) 2026 DTPU authors. Apache-2.0.

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Post unit: the step's accumulators -> result words on m_axis_res.
 *
 * A step's NV values are captured (GEMM: the COLS column sums; DWCONV: item-major PE
 * accumulators, item j's L lanes at j*L..j*L+L-1) and leave as cap_words words of 2^log_lanes
 * values each, one word per cycle: value index k*lanes + r is lane r of word k. Lane r's
 * parameters are entry ch + r, where ch starts at cap_ch and advances by `lanes` per word
 * (depthwise: back to cap_wrap_ch after the last word of group GC-1 of an output pixel).
 * Timing from the capture cycle A: word k is on m_axis_res in cycle A + 6 + k (LAT_POST = 6):
 * serializer register, parameter read, three lane stages, result register. Float steps are
 * captured two cycles later (fp trees) and pass one lane stage: same result cycle.
 * Everything advances on ce (the core's global stall); a word offered while ce is low but
 * taken by the sink is not offered again.
 */
module dtpu_post #
(
    // values per capture (ROWS*COLS)
    parameter NV = 64,
    // accumulator width
    parameter AW = 84,
    // log2 of the parameter entries
    parameter PADDR_W = 12
)
(
    input  wire                 clk,
    input  wire                 rst_n,
    input  wire                 ce,

    /* Job configuration */
    input  wire [3:0]           prec,
    input  wire [1:0]           out_mode,
    input  wire [2:0]           variant,
    input  wire [31:0]          act_min,
    input  wire [31:0]          act_max,
    input  wire [1:0]           log_lanes,
    input  wire                 dw,
    input  wire [15:0]          gc,
    input  wire [2:0]           wi,
    input  wire                 fp,

    /* Capture */
    input  wire                 cap_valid,
    input  wire [NV*AW-1:0]     cap_values,
    input  wire [15:0]          cap_words,
    input  wire [15:0]          cap_nvals,
    input  wire [PADDR_W-1:0]   cap_ch,
    input  wire [PADDR_W-1:0]   cap_wrap_ch,
    input  wire [15:0]          cap_g,
    input  wire                 cap_last,

    /* Parameter memory read port */
    output wire                 prm_rd_en,
    output wire [PADDR_W-1:0]   prm_rd_base,
    input  wire [8*64-1:0]      prm_bias,
    input  wire [8*64-1:0]      prm_rq,

    /* Result stream */
    output wire [63:0]          m_axis_tdata,
    output wire                 m_axis_tvalid,
    input  wire                 m_axis_tready,
    output wire                 m_axis_tlast,

    /* Status */
    output wire                 busy,
    output wire                 flag_ovf,
    output wire                 flag_wrap
);

// ---- serializer ----
reg  [NV*AW-1:0]   v_reg;
reg  [15:0]        words_reg;
reg  [15:0]        nvals_reg;
reg  [PADDR_W-1:0] ch_reg, wrap_ch_reg;
reg  [15:0]        g_reg;
reg  [2:0]         sub_reg;
reg                last_reg;

wire [3:0]  lanes = 4'd1 << log_lanes;
wire        ser_valid = words_reg != 16'd0;
wire        ser_last_word = words_reg == 16'd1;

// shift by 1, 2, 4 or 8 values
reg  [NV*AW-1:0] v_next;
integer n;
always @* begin
    for (n = 0; n < NV; n = n + 1) begin
        v_next[n*AW +: AW] = {AW{1'b0}};
        case (log_lanes)
            2'd3: if (n + 8 < NV) v_next[n*AW +: AW] = v_reg[(n+8)*AW +: AW];
            2'd2: if (n + 4 < NV) v_next[n*AW +: AW] = v_reg[(n+4)*AW +: AW];
            2'd1: if (n + 2 < NV) v_next[n*AW +: AW] = v_reg[(n+2)*AW +: AW];
            default: if (n + 1 < NV) v_next[n*AW +: AW] = v_reg[(n+1)*AW +: AW];
        endcase
    end
end

// lane mask of the current word
wire [7:0] lane_mask;
genvar r;
generate
for (r = 0; r < 8; r = r + 1) begin : mask
    assign lane_mask[r] = ser_valid && r < lanes && r < nvals_reg;
end
endgenerate

wire item_end = sub_reg == wi - 3'd1;
wire grp_end = item_end && g_reg == gc - 16'd1;

always @(posedge clk) begin
    if (ce) begin
        if (cap_valid) begin
            v_reg <= cap_values;
            words_reg <= cap_words;
            nvals_reg <= cap_nvals;
            ch_reg <= cap_ch;
            wrap_ch_reg <= cap_wrap_ch;
            g_reg <= cap_g;
            sub_reg <= 3'd0;
            last_reg <= cap_last;
        end else if (ser_valid) begin
            v_reg <= v_next;
            words_reg <= words_reg - 16'd1;
            nvals_reg <= nvals_reg - {12'd0, lanes};
            ch_reg <= (dw && grp_end) ? wrap_ch_reg : ch_reg + {{(PADDR_W-4){1'b0}}, lanes};
            if (item_end) begin
                sub_reg <= 3'd0;
                g_reg <= (g_reg == gc - 16'd1) ? 16'd0 : g_reg + 16'd1;
            end else begin
                sub_reg <= sub_reg + 3'd1;
            end
        end
    end
    if (!rst_n) begin
        words_reg <= 16'd0;
        nvals_reg <= 16'd0;
    end
end

assign prm_rd_en = ce;
assign prm_rd_base = ch_reg;

// ---- stage 0: the word's values, parameters arrive from memory ----
reg  [8*AW-1:0] s0_vals_reg;
reg  [7:0]      s0_mask_reg;
reg             s0_last_reg;

always @(posedge clk) begin
    if (ce) begin
        s0_vals_reg <= v_reg[8*AW-1:0];
        s0_mask_reg <= lane_mask;
        s0_last_reg <= ser_valid && ser_last_word && last_reg;
    end
    if (!rst_n) begin
        s0_mask_reg <= 8'd0;
        s0_last_reg <= 1'b0;
    end
end

// ---- lanes ----
wire [8*64-1:0] lane_value;
wire [7:0]      lane_valid, lane_ovf, lane_wrap;

generate
for (r = 0; r < 8; r = r + 1) begin : lane
    dtpu_post_lane #(
        .AW(AW)
    )
    lane_inst (
        .clk(clk),
        .rst_n(rst_n),
        .ce(ce),
        .prec(prec),
        .out_mode(out_mode),
        .variant(variant),
        .act_min(act_min),
        .act_max(act_max),
        .in_valid(s0_mask_reg[r]),
        .in_acc(s0_vals_reg[r*AW +: AW]),
        .in_bias(prm_bias[r*64 +: 64]),
        .in_rq(prm_rq[r*64 +: 64]),
        .out_value(lane_value[r*64 +: 64]),
        .out_valid(lane_valid[r]),
        .out_ovf(lane_ovf[r]),
        .out_wrap(lane_wrap[r])
    );
end
endgenerate

reg [2:0] last_pipe_reg;

always @(posedge clk) begin
    if (ce) begin
        last_pipe_reg <= {last_pipe_reg[1:0], s0_last_reg};
    end
    if (!rst_n) begin
        last_pipe_reg <= 3'd0;
    end
end

// ---- Compact&Select and the result register ----
wire [63:0] packed_word;

dtpu_compact_select
cs_inst (
    .values(lane_value),
    .log_lanes(log_lanes),
    .word(packed_word)
);

reg [63:0] out_data_reg;
reg        out_valid_reg;
reg        out_last_reg;

always @(posedge clk) begin
    if (ce) begin
        out_valid_reg <= lane_valid[0];
        out_data_reg <= packed_word;
        out_last_reg <= fp ? last_pipe_reg[0] : last_pipe_reg[2];
    end else if (m_axis_tready) begin
        out_valid_reg <= 1'b0;  // taken while the core is stalled elsewhere
    end
    if (!rst_n) begin
        out_valid_reg <= 1'b0;
    end
end

assign m_axis_tdata = out_data_reg;
assign m_axis_tvalid = out_valid_reg;
assign m_axis_tlast = out_last_reg;

assign busy = ser_valid || (|s0_mask_reg) || (|lane_valid) || out_valid_reg;
// (float words leave after one lane register: see dtpu_post_lane)
assign flag_ovf = |(lane_ovf & lane_valid);
assign flag_wrap = |(lane_wrap & lane_valid);

endmodule

`resetall
