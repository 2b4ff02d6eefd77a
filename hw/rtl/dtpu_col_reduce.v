/*

Copyright (c) 2026 DTPU authors. Apache-2.0.

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Column adder tree (GEMM): sums the ROWS accumulators of every MXU column, one registered
 * level per tree stage (log2 ROWS = LAT_REDUCE cycles), adjacent pairs first:
 * ((r0+r1)+(r2+r3))+((r4+r5)+(r6+r7)). Exact in AW bits.
 * Float jobs (fp = 1): fp32 adds (round to nearest even) over the first 2^log_l rows only, the
 * golden model's pairwise tree over the lanes; later levels pass their left input through.
 */
module dtpu_col_reduce #
(
    // rows (a power of two)
    parameter ROWS = 8,
    // columns
    parameter COLS = 8,
    // value width
    parameter AW = 84,
    // fp32 adders (0: integer-only build)
    parameter FP_ENABLE = 1,
    // significant bits of the inputs (sign-extended to AW): rows < 4 / rows >= 4 (the MXU's
    // int8-only rows have narrower accumulators); every tree node is built that wide + depth
    parameter W_HI = AW,
    parameter W_LO = AW,
    // tree levels (derived)
    parameter LEVELS = $clog2(ROWS)
)
(
    input  wire                     clk,
    input  wire                     rst_n,
    input  wire                     ce,

    input  wire [ROWS*COLS*AW-1:0]  in_acc,
    input  wire                     in_valid,
    input  wire                     fp,
    input  wire [1:0]               log_l,

    output wire [COLS*AW-1:0]       out_sum,
    output wire                     out_valid
);

initial begin
    if ((1 << LEVELS) != ROWS) begin
        $error("Error: ROWS must be a power of two (instance %m)");
        $finish;
    end
end

reg [LEVELS-1:0] valid_reg;

always @(posedge clk) begin
    if (ce) begin
        valid_reg <= {valid_reg[LEVELS-2:0], in_valid};
    end
    if (!rst_n) begin
        valid_reg <= {LEVELS{1'b0}};
    end
end

assign out_valid = valid_reg[LEVELS-1];

genvar j, l, k;
generate
for (j = 0; j < COLS; j = j + 1) begin : col
    for (l = 0; l < LEVELS; l = l + 1) begin : lvl
        localparam N = ROWS >> (l + 1);
        reg [N*AW-1:0] sum_reg;
        for (k = 0; k < N; k = k + 1) begin : add
            // node k of level l sums rows k*2^(l+1) .. (k+1)*2^(l+1)-1: NW bits are exact
            localparam IW = (k << (l + 1)) < 4 ? W_HI : W_LO;
            localparam NW0 = IW + l + 1;
            localparam NW = NW0 > AW ? AW : NW0;
            wire [AW-1:0] a, b;
            if (l == 0) begin : first
                assign a = in_acc[(j*ROWS + 2*k)*AW +: AW];
                assign b = in_acc[(j*ROWS + 2*k + 1)*AW +: AW];
            end else begin : next
                assign a = col[j].lvl[l-1].sum_reg[(2*k)*AW +: AW];
                assign b = col[j].lvl[l-1].sum_reg[(2*k+1)*AW +: AW];
            end
            /* verilator lint_off UNUSEDSIGNAL */
            wire [AW-1:0] ab = a + b;
            /* verilator lint_on UNUSEDSIGNAL */
            wire [AW-1:0] ab_ext = {{(AW-NW){ab[NW-1]}}, ab[NW-1:0]};
            // fp32 adds exist only where a float lane tree needs them: float jobs use at most 4
            // rows (bf16), i.e. level 0 pairs (r0,r1), (r2,r3) and level 1's first pair
            wire [31:0] f;
            if (FP_ENABLE != 0 && ((l == 0 && k < 2) || (l == 1 && k == 0))) begin : fadd
                dtpu_fp_add fadd_inst (.a(a[31:0]), .b(b[31:0]), .y(f));
            end else begin : nofadd
                assign f = a[31:0];
            end
            always @(posedge clk) begin
                if (ce) begin
                    if (FP_ENABLE == 0 || !fp)
                        sum_reg[k*AW +: AW] <= ab_ext;
                    else if (l < log_l)
                        sum_reg[k*AW +: AW] <= {{(AW-32){1'b0}}, f};
                    else
                        sum_reg[k*AW +: AW] <= a;
                end
            end
        end
    end
    assign out_sum[j*AW +: AW] = col[j].lvl[LEVELS-1].sum_reg;
end
endgenerate

endmodule

`resetall
