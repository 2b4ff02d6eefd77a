// Vector unit (contract 2.1): TFLite's two requantization primitives as Verilog 2001 functions,
// used by dtpu_vec_pool; the element-wise lanes and MEAN use dtpu_vec_rq, the same arithmetic
// as a pipeline of one carry chain a stage. Include inside a module body; no include guard,
// since each including module needs its own copy.
//
// vec_srdhm(x, m)     gemmlowp's SaturatingRoundingDoublingHighMul: floor((x*m + 2^30) / 2^31),
//                     x and m int32, INT32_MIN * INT32_MIN saturated to INT32_MAX as TFLite's
//                     kernels do (the only product whose doubled high half overflows).
// vec_rdbpot(x, s)    RoundingDivideByPOT(x, -s) for TFLite's shift s <= 0: x / 2^-s rounded half
//                     away from zero; s > 0 is taken as 0 (a left shift is the caller's: MUL
//                     applies it before vec_srdhm, ADD's Prepare never makes one), s < -31 as -31.

function signed [31:0] vec_srdhm;
    input signed [31:0] x;
    input signed [31:0] m;
    reg signed [63:0] p;
    begin
        p = x * m;
        p = p + 64'sd1073741824;
        if (x == 32'sh80000000 && m == 32'sh80000000) begin
            vec_srdhm = 32'sh7fffffff;
        end else begin
            vec_srdhm = p[62:31];
        end
    end
endfunction

function signed [31:0] vec_rdbpot;
    input signed [31:0] x;
    input signed [7:0]  shift;
    reg        [5:0]  e;
    /* verilator lint_off UNUSEDSIGNAL */
    reg signed [7:0]  ns;           // -shift: only its low 6 bits are read (1..31)
    /* verilator lint_on UNUSEDSIGNAL */
    reg signed [32:0] t;
    begin
        ns = -shift;
        e = (shift >= 0) ? 6'd0 : (shift < -8'sd31) ? 6'd31 : ns[5:0];
        if (e == 6'd0) begin
            vec_rdbpot = x;
        end else begin
            t = {x[31], x} + (33'sd1 <<< (e - 6'd1)) - {32'd0, x[31]};
            t = t >>> e;
            vec_rdbpot = t[31:0];
        end
    end
endfunction
