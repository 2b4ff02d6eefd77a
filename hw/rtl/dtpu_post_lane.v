/*

Copyright (c) 2026 DTPU authors. Apache-2.0.

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Post unit, one lane: accumulator -> result lane value.
 *
 * RAW:     the accumulator (int32 lanes for 8-bit precisions, else int64); ovf if it does not fit.
 * REQUANT: total = acc + bias, then by RQ_VARIANT (docs/architecture.md "Arithmetic"):
 *   SINGLE  t = wrap32(total); r = wrap32((t*m + 2^(30-s)) >> (31-s))
 *   DOUBLE  t = wrap32(total); a = wrap32(t << max(s,0)); h = SRDHM(a, m); r = RDBPOT(h, max(-s,0))
 *   INT64   |total| < 2^47 else ovf; m16 = m < 0x7FFF0000 ? (m + 2^15) >> 16 : 0x7FFF;
 *           r = wrap32((total*m16 + 2^(14-s)) >> (15-s))
 *   FP32    (XNNPACK) t = wrap32(total); f = fp32(t) (RNE); p = f * scale in fp32 (RNE, the
 *           results of dtpu_fp_mul), scale = the entry's low 32 bits; r = p rounded to an
 *           integer, ties to even, saturated to +-2^24 (a NaN product gives 0). Built from a
 *           24x24 mantissa product and two fixed roundings, not general fp32 units (below).
 *   y = clamp(wrap32(r + zp), ACT_MIN, ACT_MAX), saturated to the lane type (the parent
 *   passes ACT_MIN/ACT_MAX saturated to the type, which gives the same y).
 *   wrap flags an int32 variant whose total did not fit int32 (ERR.WARN_WRAP32).
 * FLOAT:   y = min(max(acc_fp + bias_fp, ACT_MIN), ACT_MAX) in fp32 (see dtpu_fp_add).
 * SINGLE, DOUBLE, DOUBLE_UP and INT64 share one 64-bit product (|product| <= 2^62 for every
 * input without ERR.OVERFLOW), one rounding adder and one shifter.
 * Right shifts beyond 63 (a shift field far outside TFLite's [-31, 31]) are clamped: the exact
 * result is then 0 or -1 alike.
 *
 * Pipeline, eight registers: inputs (stage 0) -> total and |t32| (a) -> operands, |t32|
 * normalized (b) -> FP32's rounded mantissa as its operand (1) -> partial products (m) ->
 * product (2) -> x = h or p (3) -> rounding sum (4) -> shifted r plus the zero point (5);
 * FP32: fp32(t) (b, 1) and the scale -> mantissa partial products (m) and product (2) ->
 * product rounded to 24 bits (3) -> integer quotient and increment (4) -> signed integer plus
 * the zero point (5). Stages m-2 were one stage and stages 3-5 another (45 MHz on the ECP5
 * proxy, docs/synthesis.md "Timing evidence"), and stages 0-1 another (the post unit at 54 MHz:
 * its lanes' inputs are registers there, ports here). The clamped value is combinational from
 * the last register (the parent registers it into the result word).
 * FLOAT has six registers (acc + bias, then five delays) and the clamp after them: its
 * accumulators arrive two cycles later (fp partial and lane trees), so its words leave at the
 * same cycle.
 * Float clamp: y = min(max(s, ACT_MIN), ACT_MAX) with numpy's rules (max(a, b) = a if a >= b or
 * a is NaN, else b; min likewise); NaN is the canonical quiet NaN.
 */
module dtpu_post_lane #
(
    // accumulator width (>= 32; values arrive sign-extended to AW bits)
    parameter AW = 84,
    // enabled precisions (bit p: PREC code p); without FP32/BF16 the FLOAT path is not built
    parameter [15:0] PREC_EN = 16'h007F,
    // built requantization variants (bit v: RQ_VARIANT code v; contract RQ_EN). A variant not
    // built is refused in CONFIG (ERR.BAD_MODE), so its logic is left out here: its selects are
    // constant 0 and Yosys removes what only it used (docs/architecture.md, issue 26's budget)
    parameter RQ_EN = 31
)
(
    input  wire                 clk,
    input  wire                 rst_n,
    input  wire                 ce,

    /* Job configuration (REQUANT: act_min/act_max already saturated to the lane type) */
    input  wire [3:0]           prec,
    input  wire [1:0]           out_mode,
    input  wire [2:0]           variant,
    input  wire [31:0]          act_min,
    input  wire [31:0]          act_max,

    /* Stage 0 */
    input  wire                 in_valid,
    input  wire signed [AW-1:0] in_acc,
    input  wire [63:0]          in_bias,
    /* verilator lint_off UNUSEDSIGNAL */
    input  wire [63:0]          in_rq,
    /* verilator lint_on UNUSEDSIGNAL */

    /* Result (after 8 registers) */
    output reg  [63:0]          out_value,
    output wire                 out_valid,
    output wire                 out_ovf,
    output wire                 out_wrap
);

/* verilator lint_off UNUSEDPARAM */
`include "dtpu_regs.vh"
/* verilator lint_on UNUSEDPARAM */

// a build with only 8-bit precisions (PREC_EN INT8 and UINT8, the int8 board's) has only int32
// RAW values: CONFIG refuses every other precision, so `prec` is one of the two and the RAW
// path's upper 32 bits (8 registers of them) and the int64 range check are left out
localparam [15:0] PREC8_MASK = (16'd1 << DTPU_PREC_INT8) | (16'd1 << DTPU_PREC_UINT8);
localparam ONLY8 = (PREC_EN & ~PREC8_MASK) == 16'd0;
wire is8 = ONLY8 || prec == DTPU_PREC_INT8 || prec == DTPU_PREC_UINT8;
localparam FLOAT_EN = (PREC_EN[DTPU_PREC_FP32] || PREC_EN[DTPU_PREC_BF16]) ? 1 : 0;
// a FLOAT job needs a float precision: CONFIG rejects it when none is built
wire fl = FLOAT_EN != 0 && out_mode == DTPU_OUT_MODE_FLOAT[1:0];

/* verilator lint_off UNUSEDSIGNAL */
function is_nan(input [31:0] v);
    is_nan = v[30:23] == 8'hFF && v[22:0] != 23'd0;
endfunction
/* verilator lint_on UNUSEDSIGNAL */

// a >= b in IEEE order (false with a NaN; +0 == -0)
function f_ge(input [31:0] a, input [31:0] b);
    reg both_zero;
    begin
        both_zero = a[30:0] == 31'd0 && b[30:0] == 31'd0;
        if (is_nan(a) || is_nan(b))
            f_ge = 1'b0;
        else if (both_zero)
            f_ge = 1'b1;
        else if (a[31] != b[31])
            f_ge = !a[31];
        else if (!a[31])
            f_ge = a[30:0] >= b[30:0];
        else
            f_ge = a[30:0] <= b[30:0];
    end
endfunction

// ---- float: acc + bias (stage 1), clamp (combinational) ----
wire [31:0] fmin;

generate
if (FLOAT_EN != 0) begin : flt
    wire [31:0] fsum;
    reg  [31:0] fsum_reg, fsum2_reg, fsum3_reg, fsum4_reg, fsum5_reg, fsum6_reg;
    dtpu_fp_add bias_inst (.a(in_acc[31:0]), .b(in_bias[31:0]), .y(fsum));

    // five more registers after the sum: the REQUANT stages' count less the two cycles the
    // float accumulators arrive later, so both leave in the same cycle
    always @(posedge clk) begin
        if (ce) begin
            fsum_reg <= fsum;
            fsum2_reg <= fsum_reg;
            fsum3_reg <= fsum2_reg;
            fsum4_reg <= fsum3_reg;
            fsum5_reg <= fsum4_reg;
            fsum6_reg <= fsum5_reg;
        end
    end

    wire [31:0] fmax = (f_ge(fsum6_reg, act_min) || is_nan(fsum6_reg)) ? fsum6_reg : act_min;
    assign fmin = (f_ge(act_max, fmax) || is_nan(fmax)) ? fmax : act_max;
end else begin : no_flt
    assign fmin = 32'd0;
end
endgenerate

// the variants built (RQ_EN bit = RQ_VARIANT code); every variant select below is ANDed with
// its enable, so a variant left out costs no logic
localparam [7:0] RQ_MASK = RQ_EN[7:0];
localparam SINGLE_EN = RQ_MASK[DTPU_RQ_VARIANT_SINGLE[2:0]];
localparam INT64_EN = RQ_MASK[DTPU_RQ_VARIANT_INT64[2:0]];
localparam FP32_EN = RQ_MASK[DTPU_RQ_VARIANT_FP32[2:0]];
localparam DOUBLE_EN = RQ_MASK[DTPU_RQ_VARIANT_DOUBLE[2:0]];
localparam DOUBLE_UP_EN = RQ_MASK[DTPU_RQ_VARIANT_DOUBLE_UP[2:0]];
localparam INT_EN = SINGLE_EN || INT64_EN || DOUBLE_EN || DOUBLE_UP_EN;
localparam DBL_EN = DOUBLE_EN || DOUBLE_UP_EN;

wire raw = out_mode == DTPU_OUT_MODE_RAW[1:0];
wire req = out_mode == DTPU_OUT_MODE_REQUANT[1:0];

// ---- stage 0 -> a: total, its low word's magnitude, the parameter entry's operands ----
// total = acc + bias exactly (TW bits); the int64 bias needs 65 bits even for narrow AW.
// A register of its own after the sum: the sum's carry chain, |t32|'s and then the FP32
// conversion below in one stage were the post unit's critical path on the ECP5 proxy (54 MHz,
// docs/synthesis.md "Timing evidence"; the lane alone did not show it, its inputs being ports).
localparam TW = (AW > 64 ? AW : 64) + 1;
wire signed [31:0] m_in = in_rq[31:0];
wire signed [7:0]  s_in = in_rq[39:32];
wire signed [TW-1:0] total_in = {{(TW-AW){in_acc[AW-1]}}, in_acc} + {{(TW-64){in_bias[63]}}, in_bias};
/* verilator lint_off UNUSEDSIGNAL */
wire [TW-1:0] acc_ext = {{(TW-AW){in_acc[AW-1]}}, in_acc};
wire [32:0] tmag_in = total_in[31] ? -{total_in[31], total_in[31:0]} : {1'b0, total_in[31:0]};
wire signed [32:0] m_plus = {m_in[31], m_in} + 33'sd32768;
/* verilator lint_on UNUSEDSIGNAL */
wire fits32_acc = acc_ext[TW-1:31] == {(TW-31){1'b0}} || acc_ext[TW-1:31] == {(TW-31){1'b1}};
wire fits64_acc = acc_ext[TW-1:63] == {(TW-63){1'b0}} || acc_ext[TW-1:63] == {(TW-63){1'b1}};
// right-shift amounts of SINGLE (31-s) and INT64 (15-s)
wire signed [9:0] rs_single = 10'sd31 - {{2{s_in[7]}}, s_in};
wire signed [9:0] rs_int64  = 10'sd15 - {{2{s_in[7]}}, s_in};
wire [7:0]  right_in = s_in[7] ? -s_in : 8'd0;

reg               va_reg;
reg  [2:0]        vara_reg;
reg               rawa_reg, reqa_reg;
reg  signed [TW-1:0] total_reg;
reg  [31:0]       tmag_reg;
reg  [31:0]       rq_lo_reg;        // m (SINGLE, DOUBLE), the FP32 scale
reg  [7:0]        left_reg;         // max(s, 0)
reg  signed [15:0] zpa_reg;
reg  signed [16:0] m16_reg;
reg  [6:0]        shs_reg, shi_reg, shd_reg;   // SINGLE, INT64, DOUBLE right shifts, clamped
reg  [63:0]       rawva_reg;
reg               ovfa_reg;         // RAW: the accumulator does not fit the lane

always @(posedge clk) begin
    if (ce) begin
        va_reg <= in_valid;
        vara_reg <= variant;
        rawa_reg <= raw;
        reqa_reg <= req;
        total_reg <= total_in;
        tmag_reg <= tmag_in[31:0];
        rq_lo_reg <= in_rq[31:0];
        left_reg <= s_in[7] ? 8'd0 : s_in;
        zpa_reg <= in_rq[63:48];
        m16_reg <= (m_in < 32'sh7FFF0000) ? m_plus[32:16] : 17'sd32767;
        shs_reg <= rs_single < 0 ? 7'd0 : rs_single > 10'sd64 ? 7'd64 : rs_single[6:0];
        shi_reg <= rs_int64 < 0 ? 7'd0 : rs_int64 > 10'sd66 ? 7'd66 : rs_int64[6:0];
        shd_reg <= right_in > 8'd63 ? 7'd63 : right_in[6:0];
        rawva_reg <= is8 ? {32'd0, acc_ext[31:0]} : acc_ext[63:0];
        ovfa_reg <= in_valid && raw && !(is8 ? fits32_acc : fits64_acc);
    end
    if (!rst_n) begin
        va_reg <= 1'b0;
        ovfa_reg <= 1'b0;
    end
end

// ---- stage a -> b: variant operands, range checks, fp32(t)'s normalization ----
wire signed [31:0] m     = rq_lo_reg;
wire signed [TW-1:0] total = total_reg;
wire fits32_tot = total[TW-1:31] == {(TW-31){1'b0}} || total[TW-1:31] == {(TW-31){1'b1}};
// |total| < 2^47 <=> -2^47 < total < 2^47
wire fits47_tot = (total[TW-1:47] == {(TW-47){1'b0}})
               || (total[TW-1:47] == {(TW-47){1'b1}} && total[46:0] != 47'd0);

wire signed [31:0] t32 = total[31:0];
wire [7:0]  left  = left_reg;
wire [31:0] a32_a = t32 << {left[4:3], 3'd0};
wire [31:0] a32_b = a32_a << {left[2:1], 1'b0};
wire signed [31:0] a32 = left >= 8'd32 ? 32'sd0 : (a32_b << left[0]);

// FP32 (XNNPACK's float requantization), computed without general fp32 units but with the
// same two roundings: f = fp32(t32) (RNE; |t32| <= 2^31 is normal or zero), the product
// f * scale rounded to 24 significant bits (RNE) exactly as an fp32 multiply, then that
// product rounded to an integer. Everything that makes the fp32 product special ends in 0 or
// the saturation anyway: a zero or subnormal scale gives |p| < 2^-94 (integer 0), a product in
// the fp32 subnormal range is < 0.5 (0), an overflow to infinity is >= 2^24 (saturated), NaN
// (NaN scale, 0 * inf) gives 0, an infinite scale with f != 0 saturates.
// f = fp32(t32): |t32| (stage a) normalized here (leading one at bit 31), rounded at bit 8 in
// stage b -> 1 (the leading-zero count, the shift, the rounding increment and the exponent in
// one stage placed at 88.6 MHz on the ECP5 proxy).
wire [31:0] tmag = tmag_reg;
reg  [4:0]  tlz;
integer     bi;
always @* begin
    tlz = 5'd0;
    for (bi = 0; bi < 32; bi = bi + 1)
        if (tmag[bi])
            tlz = 5'd31 - bi[4:0];
end
// (left shift by tlz as 4:1 stages: 8s, 2s, 1s)
wire [31:0] tn_a = tmag[31:0] << {tlz[4:3], 3'd0};
wire [31:0] tn_b = tn_a << {tlz[2:1], 1'b0};
wire [31:0] tn = tn_b << tlz[0];

// DOUBLE's operands (DOUBLE, DOUBLE_UP, and the codes no variant has), zeros without DOUBLE
wire [47:0] xd = DBL_EN != 0 ? {{16{a32[31]}}, a32} : 48'd0;
wire [31:0] yd = DBL_EN != 0 ? m : 32'd0;
wire [6:0]  sd = DBL_EN != 0 ? shd_reg : 7'd0;

// stage a's variant, as selects of built variants only
wire a_int64 = INT64_EN != 0 && vara_reg == DTPU_RQ_VARIANT_INT64[2:0];

// Products: SINGLE t32*m, DOUBLE/DOUBLE_UP a32*m, INT64 total*m16 with |total| < 2^47 (larger
// totals are ERR.OVERFLOW, results undefined): |x*y| <= 2^62, exact in 64 bits. FP32's
// operand, the rounded mantissa, joins in stage b -> 1.
reg               vb_reg;
reg  [2:0]        varb_reg;
reg  [31:0]       tnb_reg;          // |t32| normalized
reg  [4:0]        tlzb_reg;
reg               fsb_reg, fzb_reg;
reg  [31:0]       scb_reg;
reg               rawb_reg, reqb_reg;
reg  signed [47:0] xb_reg;
reg  signed [31:0] yb_reg;
reg  [6:0]        shb_reg;
reg               satb_reg;
reg  signed [15:0] zpb_reg;
reg  [63:0]       rawvb_reg;
reg               ovfb_reg, wrapb_reg;

always @(posedge clk) begin
    if (ce) begin
        vb_reg <= va_reg;
        varb_reg <= vara_reg;
        tnb_reg <= tn;
        tlzb_reg <= tlz;
        fsb_reg <= t32[31];
        fzb_reg <= tmag == 32'd0;
        scb_reg <= rq_lo_reg;
        rawb_reg <= rawa_reg;
        reqb_reg <= reqa_reg;
        zpb_reg <= zpa_reg;
        rawvb_reg <= rawva_reg;
        ovfb_reg <= ovfa_reg || (va_reg && reqa_reg && a_int64 && !fits47_tot);
        wrapb_reg <= va_reg && reqa_reg && !a_int64 && !fits32_tot;
        satb_reg <= DBL_EN != 0 && a32 == 32'sh80000000 && m == 32'sh80000000;
        // (a variant not built never reaches a lane, CONFIG refuses it: DOUBLE's operands or
        // zeros then; with every variant built this is the mux it always was)
        case (vara_reg)
            DTPU_RQ_VARIANT_SINGLE[2:0]: begin
                xb_reg <= SINGLE_EN != 0 ? {{16{t32[31]}}, t32} : xd;
                yb_reg <= SINGLE_EN != 0 ? m : yd;
                shb_reg <= SINGLE_EN != 0 ? shs_reg : sd;
            end
            DTPU_RQ_VARIANT_FP32[2:0]: begin
                // the FP32 variant's mantissa product shares the multiplier (x: stage b -> 1)
                xb_reg <= FP32_EN != 0 ? 48'd0 : xd;
                yb_reg <= FP32_EN != 0 ? {8'd0, 1'b1, rq_lo_reg[22:0]} : yd;
                shb_reg <= FP32_EN != 0 ? 7'd0 : sd;
            end
            DTPU_RQ_VARIANT_INT64[2:0]: begin
                xb_reg <= INT64_EN != 0 ? total[47:0] : xd;
                yb_reg <= INT64_EN != 0 ? {{15{m16_reg[16]}}, m16_reg} : yd;
                shb_reg <= INT64_EN != 0 ? shi_reg : sd;
            end
            default: begin
                xb_reg <= xd;
                yb_reg <= yd;
                shb_reg <= sd;
            end
        endcase
    end
    if (!rst_n) begin
        vb_reg <= 1'b0;
        ovfb_reg <= 1'b0;
        wrapb_reg <= 1'b0;
    end
end

// ---- stage b -> 1: fp32(t)'s rounding at bit 8 and exponent, FP32's multiplier operand ----
wire [31:0] tnb = tnb_reg;
wire        tup = tnb[7] && ((|tnb[6:0]) || tnb[8]);
wire [24:0] tm25 = {1'b0, tnb[31:8]} + {24'd0, tup};
wire [23:0] fman = tm25[24] ? 24'h800000 : tm25[23:0];
// biased exponent 127 + 31 - lz (+1 when the rounding carried out)
wire [7:0]  fexp = 8'd158 - {3'd0, tlzb_reg} + {7'd0, tm25[24]};

reg               v1_reg;
reg  [2:0]        var1_reg;
reg  [7:0]        fe1_reg;
reg               fs1_reg, fz1_reg;
reg  [31:0]       sc1_reg;
reg               raw1_reg, req1_reg;
reg  signed [47:0] x1_reg;
reg  signed [31:0] y1_reg;
reg  [6:0]        sh1_reg;
reg               sat1_reg;
reg  signed [15:0] zp1_reg;
reg  [63:0]       rawv1_reg;
reg               ovf1_reg, wrap1_reg;

always @(posedge clk) begin
    if (ce) begin
        v1_reg <= vb_reg;
        var1_reg <= varb_reg;
        fe1_reg <= fexp;
        fs1_reg <= fsb_reg;
        fz1_reg <= fzb_reg;
        sc1_reg <= scb_reg;
        raw1_reg <= rawb_reg;
        req1_reg <= reqb_reg;
        zp1_reg <= zpb_reg;
        rawv1_reg <= rawvb_reg;
        ovf1_reg <= ovfb_reg;
        wrap1_reg <= wrapb_reg;
        sat1_reg <= satb_reg;
        x1_reg <= FP32_EN != 0 && varb_reg == DTPU_RQ_VARIANT_FP32[2:0] ? {24'd0, fman} : xb_reg;
        y1_reg <= yb_reg;
        sh1_reg <= shb_reg;
    end
    if (!rst_n) begin
        v1_reg <= 1'b0;
        ovf1_reg <= 1'b0;
        wrap1_reg <= 1'b0;
    end
end

// the float path's valid, three registers after v1_reg (aligned with fsum6_reg: fsum_reg is
// va_reg's stage)
reg vf2_reg, vf3_reg, vf4_reg;
always @(posedge clk) begin
    if (ce) begin
        vf2_reg <= v1_reg;
        vf3_reg <= vf2_reg;
        vf4_reg <= vf3_reg;
    end
    if (!rst_n) begin
        vf2_reg <= 1'b0;
        vf3_reg <= 1'b0;
        vf4_reg <= 1'b0;
    end
end

// ---- stage 1 -> m: the product as three partial products ----
// x = xh*2^32 + xl (xl the unsigned low 32 bits), y = yh*2^16 + yl (yl unsigned): xl*yl,
// xl*yh and xh*y, each at most one adder after its MULT18X18Ds (xl 32 bits: two), registered
// and summed in stage 2, as a DSP48E1's M register would. x*y[15:0] as one 48x17 product had
// two adders after its multipliers, dtpu_post's critical path on the ECP5 proxy (x1_reg ->
// plm_reg, docs/synthesis.md). xh is x's sign extension except in INT64 (x 48 bits, y m16);
// the product is exact in 64 bits, |x*y| <= 2^62
// Without INT64, x is a signed 32-bit value (x1_reg[31:0]; FP32's mantissa is positive there):
// two partial products of the signed x, x*yl and x*yh (|x*yl| < 2^47, |x*yh| <= 2^46: 48
// bits signed each), and no xh*y term, so stage 2 adds two values instead of three.
localparam X_SIGNED = INT64_EN == 0;
wire        [31:0] x1l = x1_reg[31:0];
wire signed [15:0] x1h = x1_reg[47:32];
wire               xs = X_SIGNED ? x1_reg[31] : 1'b0;    // x's sign bit in the low products
/* verilator lint_off UNUSEDSIGNAL */
wire signed [48:0] pll = $signed({xs, x1l}) * $signed({1'b0, y1_reg[15:0]});
wire signed [48:0] plh = $signed({xs, x1l}) * $signed(y1_reg[31:16]);
wire signed [47:0] phx = X_SIGNED ? 48'sd0 : x1h * y1_reg;
/* verilator lint_on UNUSEDSIGNAL */

reg               vm_reg;
reg  [2:0]        varm_reg;
reg  [7:0]        fem_reg;
reg               fsm_reg, fzm_reg;
reg  [31:0]       scm_reg;
reg               rawm_reg, reqm_reg, satm_reg;
reg  [47:0]       pllm_reg;         // xl*yl (< 2^48)
reg  [47:0]       plhm_reg;         // xl*yh: its low 48 bits are what bits 16..63 need
reg  [31:0]       phxm_reg;         // xh*y: its low 32 bits are what bits 32..63 need
reg  [6:0]        shm_reg;
reg  signed [15:0] zpm_reg;
reg  [63:0]       rawvm_reg;
reg               ovfm_reg, wrapm_reg;

always @(posedge clk) begin
    if (ce) begin
        vm_reg <= v1_reg;
        varm_reg <= var1_reg;
        fem_reg <= fe1_reg;
        fsm_reg <= fs1_reg;
        fzm_reg <= fz1_reg;
        scm_reg <= sc1_reg;
        rawm_reg <= raw1_reg;
        reqm_reg <= req1_reg;
        satm_reg <= sat1_reg;
        pllm_reg <= pll[47:0];
        plhm_reg <= plh[47:0];
        phxm_reg <= phx[31:0];
        shm_reg <= sh1_reg;
        zpm_reg <= zp1_reg;
        rawvm_reg <= rawv1_reg;
        ovfm_reg <= ovf1_reg;
        wrapm_reg <= wrap1_reg;
    end
    if (!rst_n) begin
        vm_reg <= 1'b0;
        ovfm_reg <= 1'b0;
        wrapm_reg <= 1'b0;
    end
end

// ---- stage m -> 2: product ----
// FP32 stage 1: exact mantissa product (in [2^46, 2^48) for a normal scale; the shared
// multiplier below) and exponent
wire [7:0]  sce = scm_reg[30:23];
wire        sc_nan = sce == 8'hFF && scm_reg[22:0] != 23'd0;
wire        sc_inf = sce == 8'hFF && scm_reg[22:0] == 23'd0;
// biased exponent of the product before normalization: fe + se - 127 (in [1, 285])
wire [9:0]  fpe = {2'd0, fem_reg} + {2'd0, sce} - 10'd127;
// result 0 (zero or subnormal scale, t = 0, NaN) / saturated (infinite scale, f != 0)
wire        fres_zero = fzm_reg || sce == 8'd0 || sc_nan;
wire        fres_big = sc_inf && !fzm_reg;
// the integer rounding's right shift 150 - pe and |p| >= 2^24, for the three exponents the
// product can have after its normalization and rounding (pe = fpe + 0, 1 or 2, decided in
// stage 2 by the product's top bit and the mantissa rounding's carry): computed here, beside
// the multiplier, so that stage 2 only selects them (the exponent adds and compares were in
// series with the product's roundings, the lane's critical path on the ECP5 proxy)
reg  [4:0]  fpsh_k [0:2];
reg  [2:0]  fpbig_k;
integer fk;
/* verilator lint_off UNUSEDSIGNAL */
reg  [9:0]  fpe_k, fpsh_full_k;
/* verilator lint_on UNUSEDSIGNAL */
always @* begin
    for (fk = 0; fk < 3; fk = fk + 1) begin
        fpe_k = fpe + fk[9:0];
        fpsh_full_k = 10'd150 - fpe_k;
        // clamped: |p| < 2^-1 rounds to 0 anyway
        fpsh_k[fk] = fpe_k >= 10'd151 ? 5'd0 : fpe_k <= 10'd125 ? 5'd25 : fpsh_full_k[4:0];
        fpbig_k[fk] = fres_big || fpe_k >= 10'd151;
    end
end


// the three partial products' sum mod 2^64: one carry-save level (a LUT a bit), then one adder
// (without INT64: x*yl sign-extended plus x*yh * 2^16, one adder)
wire [63:0] pp_a = X_SIGNED ? {{16{pllm_reg[47]}}, pllm_reg} : {16'd0, pllm_reg};
wire [63:0] pp_b = {plhm_reg, 16'd0};
wire [63:0] pp_c = {phxm_reg, 32'd0};
wire [63:0] pp_s = pp_a ^ pp_b ^ pp_c;
wire [62:0] pp_k = (pp_a[62:0] & pp_b[62:0]) | (pp_a[62:0] & pp_c[62:0]) | (pp_b[62:0] & pp_c[62:0]);
wire [63:0] p2_sum = X_SIGNED ? pp_a + pp_b : pp_s + {pp_k, 1'b0};

reg               v2_reg;
reg  [2:0]        var2_reg;
reg  [4:0]        fpsh2_reg [0:2];
reg  [2:0]        fpbig2_reg;
reg               fps2_reg, fpz2_reg;
reg               raw2_reg, req2_reg, sat2_reg;
reg  signed [63:0] p2_reg;
reg  [6:0]        sh2_reg;
reg  signed [15:0] zp2_reg;
reg  [63:0]       rawv2_reg;
reg               ovf2_reg, wrap2_reg;

always @(posedge clk) begin
    if (ce) begin
        v2_reg <= vm_reg;
        var2_reg <= varm_reg;
        fpsh2_reg[0] <= fpsh_k[0];
        fpsh2_reg[1] <= fpsh_k[1];
        fpsh2_reg[2] <= fpsh_k[2];
        fpbig2_reg <= fpbig_k;
        fps2_reg <= fsm_reg ^ scm_reg[31];
        fpz2_reg <= fres_zero;
        raw2_reg <= rawm_reg;
        req2_reg <= reqm_reg;
        sat2_reg <= satm_reg;
        p2_reg <= p2_sum;
        sh2_reg <= shm_reg;
        zp2_reg <= zpm_reg;
        rawv2_reg <= rawvm_reg;
        ovf2_reg <= ovfm_reg;
        wrap2_reg <= wrapm_reg;
    end
    if (!rst_n) begin
        v2_reg <= 1'b0;
        ovf2_reg <= 1'b0;
        wrap2_reg <= 1'b0;
    end
end

// ---- stages 2 -> 3 -> 4 -> 5: rounding shift, one adder and one shifter for every integer variant ----
// DOUBLE's SaturatingRoundingDoublingHighMul (nudge, truncate towards zero) and DOUBLE_UP's
// floor((p + 2^30) / 2^31) are the same value h = floor((p + 2^30) / 2^31) (for p < 0:
// trunc((p + 1 - 2^30) / 2^31) = floor((p + 1 - 2^30 + 2^31 - 1) / 2^31)); DOUBLE saturates
// the single overflow case (-2^31 * -2^31) to 2^31 - 1.
// Then r = (x + 2^(sh-1) - c) >> sh (arithmetic, floor):
//   SINGLE / INT64: x = p, c = 0 (ties towards +inf)
//   DOUBLE_UP:      x = h, c = 0 (ties towards +inf)
//   DOUBLE:         x = h, c = (x < 0 && sh > 0): RoundingDivideByPOT's ties away from zero
//                   (x >> sh) + ((x & mask) > (mask >> 1) + (x < 0)).
// One carry chain per stage (the ECP5 proxy fits about two in 10 ns with their routing, and
// these were five in series): stage 3 holds x (h or p), stage 4 the rounding sum, stage 5 the
// shifted result; the FP32 variant's stages beside them hold the 24-bit rounded product (3),
// its integer quotient and rounding increment (4), and the signed integer (5).
/* verilator lint_off UNUSEDSIGNAL */
wire signed [64:0] h_full = ({p2_reg[63], p2_reg} + 65'sd1073741824) >>> 31;
/* verilator lint_on UNUSEDSIGNAL */
wire is_double2 = DOUBLE_EN != 0 && var2_reg == DTPU_RQ_VARIANT_DOUBLE[2:0];
wire signed [33:0] h = (sat2_reg && is_double2) ? 34'sd2147483647 : h_full[33:0];
wire use_h = is_double2 || (DOUBLE_UP_EN != 0 && var2_reg == DTPU_RQ_VARIANT_DOUBLE_UP[2:0]);
wire signed [64:0] rx = use_h ? {{31{h[33]}}, h} : {p2_reg[63], p2_reg};

// FP32: the product rounded to an integer (ties to even), saturated to +-2^24, NaN -> 0
// the product rounded to 24 significant bits (RNE): pm * 2^(pe - 150), pm normalized
wire [47:0] fpm2_reg = p2_reg[47:0];
wire        pnorm = fpm2_reg[47];
wire [23:0] pm24 = pnorm ? fpm2_reg[47:24] : fpm2_reg[46:23];
wire        pg = pnorm ? fpm2_reg[23] : fpm2_reg[22];
wire        pst = pnorm ? (|fpm2_reg[22:0]) : (|fpm2_reg[21:0]);
wire        pinc = pg && (pst || pm24[0]);
wire [23:0] pm25 = pm24 + {23'd0, pinc};   // wraps to 0 when pcarry: pm is 2^23 then
// the increment's carry out, pm24 all ones and rounded up, as an AND beside the adder: the
// exponent's select (psh, p_big) no longer waits for the 24-bit carry chain (the int8 build's
// dtpu_post placed at 94.1 MHz on fpm2 -> psh3 through it)
wire        pcarry = pinc && (&pm24);
wire [23:0] pm = pcarry ? 24'h800000 : pm25;
// pe = fpe + pnorm + pcarry: its shift and |p| >= 2^24 were computed in stage 1 for each
wire        pe_1 = pnorm ^ pcarry;
wire        pe_2 = pnorm && pcarry;
wire        p_big = pe_2 ? fpbig2_reg[2] : pe_1 ? fpbig2_reg[1] : fpbig2_reg[0];
// |p| = pm * 2^(pe - 150); right shift 150 - pe, clamped (|p| < 2^-1 rounds to 0 anyway)
wire [4:0]  psh = pe_2 ? fpsh2_reg[2] : pe_1 ? fpsh2_reg[1] : fpsh2_reg[0];

reg               v3_reg;
reg               fp3_reg, dbl3_reg;
reg               raw3_reg, req3_reg;
reg  signed [64:0] x3_reg;
reg  [6:0]        sh3_reg;
reg  [23:0]       pm3_reg;
reg  [4:0]        psh3_reg;
reg               pbig3_reg, fps3_reg, fpz3_reg;
reg  signed [15:0] zp3_reg;
reg  [63:0]       rawv3_reg;
reg               ovf3_reg, wrap3_reg;

always @(posedge clk) begin
    if (ce) begin
        v3_reg <= v2_reg;
        fp3_reg <= FP32_EN != 0 && var2_reg == DTPU_RQ_VARIANT_FP32[2:0];
        dbl3_reg <= is_double2;
        raw3_reg <= raw2_reg;
        req3_reg <= req2_reg;
        x3_reg <= rx;
        sh3_reg <= sh2_reg;
        pm3_reg <= pm;
        psh3_reg <= psh;
        pbig3_reg <= p_big;
        fps3_reg <= fps2_reg;
        fpz3_reg <= fpz2_reg;
        zp3_reg <= zp2_reg;
        rawv3_reg <= rawv2_reg;
        ovf3_reg <= ovf2_reg;
        wrap3_reg <= wrap2_reg;
    end
    if (!rst_n) begin
        v3_reg <= 1'b0;
        ovf3_reg <= 1'b0;
        wrap3_reg <= 1'b0;
    end
end

// Every shift >= 64 gives 0 (SINGLE/INT64 only: |x| <= 2^62 < 2^sh - 2^(sh-1)), so the sum
// needs 65 bits (x + 2^62 for sh = 63) and the shift 0..63, done as three 4:1 stages that
// keep only the bits the 32-bit result can reach.
wire [5:0]  rs3 = sh3_reg[5:0];
// 2^(sh-1) as a one-hot: bit k set when rs = k + 1
wire signed [64:0] rhalf;
genvar hk;
generate
for (hk = 0; hk < 65; hk = hk + 1) begin : half
    if (hk < 63) begin : bit_k
        assign rhalf[hk] = !sh3_reg[6] && rs3 == hk + 1;
    end else begin : zero
        assign rhalf[hk] = 1'b0;
    end
end
endgenerate
wire rc = dbl3_reg && x3_reg[64] && sh3_reg != 7'd0;
wire signed [64:0] rsum = x3_reg + rhalf - {64'd0, rc};

// FP32: pm shifted right with the bits it loses: the quotient above, the guard bit (the half)
// next, the sticky bits below; ties to even is then guard && (sticky || odd), no compares
/* verilator lint_off UNUSEDSIGNAL */
wire [49:0] pqx_a = {1'b0, pm3_reg, 25'd0} >> {psh3_reg[4:3], 3'd0};
wire [49:0] pqx_b = pqx_a >> {psh3_reg[2:1], 1'b0};
wire [49:0] pqx = pqx_b >> psh3_reg[0];
/* verilator lint_on UNUSEDSIGNAL */
wire [24:0] pq = pqx[49:25];
wire        pup = pqx[24] && ((|pqx[23:0]) || pq[0]);

reg               v4_reg;
reg               fp4_reg;
reg               raw4_reg, req4_reg;
reg  signed [64:0] rsum4_reg;
reg  [6:0]        sh4_reg;
reg  [24:0]       pval4_reg;
reg               pinc4_reg, fps4_reg, fpz4_reg;
reg  signed [15:0] zp4_reg;
reg  [63:0]       rawv4_reg;
reg               ovf4_reg, wrap4_reg;

always @(posedge clk) begin
    if (ce) begin
        v4_reg <= v3_reg;
        fp4_reg <= fp3_reg;
        raw4_reg <= raw3_reg;
        req4_reg <= req3_reg;
        rsum4_reg <= rsum;
        sh4_reg <= sh3_reg;
        pval4_reg <= pbig3_reg ? 25'h1000000 : pq;
        pinc4_reg <= !pbig3_reg && pup;
        fps4_reg <= fps3_reg;
        fpz4_reg <= fpz3_reg;
        zp4_reg <= zp3_reg;
        rawv4_reg <= rawv3_reg;
        ovf4_reg <= ovf3_reg;
        wrap4_reg <= wrap3_reg;
    end
    if (!rst_n) begin
        v4_reg <= 1'b0;
        ovf4_reg <= 1'b0;
        wrap4_reg <= 1'b0;
    end
end

wire [5:0]  rs4 = sh4_reg[5:0];
/* verilator lint_off UNUSEDSIGNAL */
wire [112:0] rext = {{48{rsum4_reg[64]}}, rsum4_reg};
/* verilator lint_on UNUSEDSIGNAL */
wire [46:0] rst1 = rext[{1'b0, rs4[5:4], 4'd0} +: 47];
wire [34:0] rst2 = rst1[{2'd0, rs4[3:2], 2'd0} +: 35];
wire [31:0] rshift = sh4_reg[6] ? 32'd0 : rst2[{4'd0, rs4[1:0]} +: 32];
// FP32: +-(p_big ? 2^24 : pq + pup) as one add: -(v + u) = ~v + !u. The zero point joins the
// same add (wrap32(r + zp), r the variant's integer): one carry chain here, {r, 1} + {zp, c}
// with the increment c as the low bit's carry, so that the output keeps only the clamp's two
// compares (the add and the two compares in series after this register were the lane's output
// path, about 86 MHz with the input split on the ECP5 proxy)
// (an FP32-only build: every REQUANT value is FP32's, and the integer rounding is not built)
wire        fp4 = FP32_EN != 0 && (fp4_reg || INT_EN == 0);
wire [31:0] rv = !fp4 ? rshift : fpz4_reg ? 32'd0 : ({7'd0, pval4_reg} ^ {32{fps4_reg}});
wire        rc5 = fp4 && !fpz4_reg && (pinc4_reg ^ fps4_reg);
/* verilator lint_off UNUSEDSIGNAL */
wire [32:0] yz_full = {rv, 1'b1} + {{16{zp4_reg[15]}}, zp4_reg, rc5};
/* verilator lint_on UNUSEDSIGNAL */

reg               v5_reg;
reg               raw5_reg, req5_reg;
reg  signed [31:0] yz5_reg;          // wrap32(r + zp)
reg  [63:0]       rawv5_reg;
reg               ovf5_reg, wrap5_reg;

always @(posedge clk) begin
    if (ce) begin
        v5_reg <= v4_reg;
        raw5_reg <= raw4_reg;
        req5_reg <= req4_reg;
        yz5_reg <= yz_full[32:1];
        rawv5_reg <= rawv4_reg;
        ovf5_reg <= ovf4_reg;
        wrap5_reg <= wrap4_reg;
    end
    if (!rst_n) begin
        v5_reg <= 1'b0;
        ovf5_reg <= 1'b0;
        wrap5_reg <= 1'b0;
    end
end

// ---- output: clamp (combinational) ----
// act_min/act_max arrive saturated to the lane type (dtpu_post, once for all lanes):
// sat(min(max(y, lo), hi)) = min(max(y, sat(lo)), sat(hi)) since sat is monotone and
// sat(lo), sat(hi) lie in the type's range.
// min(max(yz, lo), hi) with its compares side by side: max(yz, lo) > hi exactly when yz > hi
// or lo > hi (then hi), else max(yz, lo).
wire signed [31:0] yz = yz5_reg;
wire signed [31:0] lo = act_min;
wire signed [31:0] hi = act_max;
wire signed [31:0] y3 = (yz > hi || lo > hi) ? hi : yz < lo ? lo : yz;

always @* begin
    if (fl)
        out_value = vf4_reg ? {32'd0, fmin} : 64'd0;
    else if (!v5_reg)
        out_value = 64'd0;
    else if (raw5_reg)
        out_value = rawv5_reg;
    else if (req5_reg)
        out_value = {{32{y3[31]}}, y3};
    else
        out_value = 64'd0;
end

assign out_valid = fl ? vf4_reg : v5_reg;
assign out_ovf = ovf5_reg;
assign out_wrap = wrap5_reg;

endmodule

`resetall
