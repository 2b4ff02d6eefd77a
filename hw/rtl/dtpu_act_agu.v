/*

Copyright (c) 2026 DTPU authors. Apache-2.0.

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Activation address generator of the contract 2.0 load unit (docs/contract2.md, "Activation
 * gather"; golden model: dtpu.hw.cmdlist.Executor._gather and _window_index).
 *
 * On `start` the ACT descriptor fields are registered; the unit then streams one element request
 * per cycle (ready/valid, stalls at any cycle) in the order the golden model emits lanes:
 *
 *  WINDOWS  (MODE_WINDOWS): pixel-major (n, oy, ox), then the lanes k = K0*L .. K1*L-1 of the
 *           pixel's K-vector in (ky, kx, c) order; taps outside the image and lanes k >= K =
 *           KH*KW*C are PAD.
 *  CHANNELS (MODE_CHANNELS): chunk-major (chunk, y, x, j < CHANNELS/NCHUNK) over image 0; lane j
 *           of chunk q is channel r = CH0 + q*CHANNELS/NCHUNK + j of the image whose channels
 *           are repeated REP times (source channel r / REP); r >= CV is PAD.
 *           (ACT3: REP = KP, CH0 = K0, CHANNELS = K1.)
 *
 * A request is m_index (the flat NHWC element index: byte address SRC + index*ESIZE) or m_pad
 * (m_index is then meaningless); m_last marks the final one. Outputs come from registers only.
 *
 * Per element only nested counters and one element adder run (incremental addresses: +1 along
 * c, constant steps at kx, ky, pixel, row and image wraps); the products, sums and quotients of
 * the fields (W*C, SY*W*C, the steps, the (ky, kx, c) of lane K0*L, CH0 / REP, ...) are computed
 * once after start, one step per cycle, by one shared multiplier with an accumulator and a
 * restoring divider (one quotient bit per cycle) that runs beside the multiplier steps. Setup
 * takes a fixed number of cycles: without backpressure the last of E requests is taken
 * E + 22 (WINDOWS) or E + 37 (CHANNELS: two 16-bit quotients) edges after the edge that
 * samples start (checked by sim/test_agu.py).
 *
 * Setup and walk are separate: `start` is taken whenever `start_ready` (the setup is free), also
 * while the stream before is still being walked; the new stream's walk then begins right after
 * the last request of the one before (the walk keeps its own copies of the values it reads). A
 * stream of at least SETUP + 1 requests thus hides the next one's setup completely: streams
 * back to back without backpressure take 1 request per cycle with no bubble between them.
 * `busy` is high while a setup or a walk runs.
 *
 * A start with an unknown MODE, or fields that give an empty stream (a zero dimension, K0 >= K1,
 * NCHUNK or REP = 0), streams nothing and sets `empty` until the next start. Checking the fields
 * against the job (the contract's BAD_FIELD cases) is the load unit's business.
 *
 * CHANNELS walks image 0 only (the golden model requires N = 1 there; N is not read).
 *
 * Range: element indexes (and window origins up to PT rows above the image) must fit IDX_W bits;
 * IDX_W >= 2*DIM_W (W*C is a setup product).
 */
module dtpu_act_agu #
(
    // field widths of contract.json contract2.desc_fields (ACT0..ACT4)
    parameter MODE_W = 4,           // ACT0.MODE
    parameter LANES_W = 4,          // ACT0.LANES
    parameter DIM_W = 16,           // ACT1.N/H/W/C, ACT2.OH/OW
    parameter KER_W = 4,            // ACT2.KH/KW/SY/SX/DY/DX/PT/PL
    parameter KP_W = 16,            // ACT3.KP/K0/K1/NCHUNK, ACT4.CV
    // element index width (SRC is a 32-bit byte address)
    parameter IDX_W = 32,
    // contract.json contract2.act_modes
    parameter MODE_WINDOWS = 1,
    parameter MODE_CHANNELS = 2
)
(
    input  wire                 clk,
    input  wire                 rst_n,

    /* Control */
    input  wire                 start,
    output wire                 busy,
    output wire                 start_ready,
    output wire                 empty,

    /* ACT descriptor fields, sampled on start */
    input  wire [MODE_W-1:0]    cfg_mode,
    input  wire [LANES_W-1:0]   cfg_lanes,
    input  wire [DIM_W-1:0]     cfg_n,
    input  wire [DIM_W-1:0]     cfg_h,
    input  wire [DIM_W-1:0]     cfg_w,
    input  wire [DIM_W-1:0]     cfg_c,
    input  wire [KER_W-1:0]     cfg_kh,
    input  wire [KER_W-1:0]     cfg_kw,
    input  wire [KER_W-1:0]     cfg_sy,
    input  wire [KER_W-1:0]     cfg_sx,
    input  wire [KER_W-1:0]     cfg_dy,
    input  wire [KER_W-1:0]     cfg_dx,
    input  wire [KER_W-1:0]     cfg_pt,
    input  wire [KER_W-1:0]     cfg_pl,
    input  wire [DIM_W-1:0]     cfg_oh,
    input  wire [DIM_W-1:0]     cfg_ow,
    input  wire [KP_W-1:0]      cfg_kp,
    input  wire [KP_W-1:0]      cfg_k0,
    input  wire [KP_W-1:0]      cfg_k1,
    input  wire [KP_W-1:0]      cfg_nchunk,
    input  wire [KP_W-1:0]      cfg_cv,

    /* Element requests */
    output wire                 m_valid,
    input  wire                 m_ready,
    output wire [IDX_W-1:0]     m_index,
    output wire                 m_pad,
    output wire                 m_last
);

localparam SW = IDX_W + 2;                    // signed element arithmetic
localparam CW = DIM_W + KER_W + 2;            // signed tap coordinates
localparam LN_W = KP_W + LANES_W;             // lane counter (K0*L .. K1*L)
localparam DD_W = (DIM_W > KP_W) ? DIM_W : KP_W;  // divisor
localparam DSH_W = DD_W + KP_W;               // shifted divisor
localparam CNT_W = 6;                         // divider iterations (up to KP_W)
localparam R_W = KP_W + 1;                    // CHANNELS: channel of the repeated image
localparam KK_W = DIM_W + 2 * KER_W;          // KH*KW*C
localparam XC_W = DIM_W + KER_W;              // SX*C, DX*C
localparam STX_W = XC_W + 1;                  // signed DX*C - (C-1)

initial begin
    if (IDX_W < CW || IDX_W < LN_W + 1 || IDX_W < 2 * DIM_W || KP_W < 2 * KER_W || KP_W > 32
            || DIM_W < 2 * KER_W || LN_W < DIM_W || KER_W < 2) begin
        $error("Error: unsupported widths (instance %m)");
        $finish;
    end
end

localparam S_IDLE = 1'b0, S_SETUP = 1'b1;

// setup steps (st_reg): one product of the shared multiplier each; the divider runs beside them
localparam [4:0] ST_KBEG = 5'd0, ST_KHKW = 5'd1, ST_KEND = 5'd2, ST_KK = 5'd3, ST_WC = 5'd4,
                 ST_SXC = 5'd5, ST_HWC = 5'd6, ST_DXC = 5'd7, ST_SYWC = 5'd8, ST_STX0 = 5'd9,
                 ST_STX1 = 5'd10, ST_STY0 = 5'd11, ST_STY1 = 5'd12, ST_STY2 = 5'd13,
                 ST_IMG2 = 5'd14, ST_IMG3 = 5'd15, ST_TY0 = 5'd16, ST_TX0 = 5'd17,
                 ST_IMG0 = 5'd18, ST_IMG1 = 5'd19, ST_WINIT = 5'd21,
                 ST_C0 = 5'd24, ST_CWAIT = 5'd25, ST_CINIT = 5'd26;
localparam [CNT_W-1:0] QB_TAP = 2 * KER_W, QB_KX = KER_W, QB_CH = KP_W;

reg state_reg;                               // setup
reg run_reg;                                  // walk
reg [4:0] st_reg;
reg empty_reg;
reg win_reg;                                  // WINDOWS (else CHANNELS)

// fields
reg [LANES_W-1:0] lanes_r;
reg [DIM_W-1:0] n_r, h_r, w_r, c_r, oh_r, ow_r;
reg [KER_W-1:0] kh_r, kw_r, sy_r, sx_r, dy_r, dx_r, pt_r, pl_r;
reg [KP_W-1:0] rep_r, k0_r, k1_r, nchunk_r, cv_r;

// setup results
reg [KK_W-1:0] kk_r;
reg [XC_W-1:0] sxc_r, dxc_r;
reg [IDX_W-1:0] wc_r, hwc_r, sywc_r;
reg [LN_W-1:0] kbeg_r, kend_r;
reg [CW-1:0] ty0_r, tx0_r;                    // ky0*DY, kx0*DX
reg [KER_W-1:0] ky0_r, kx0_r;
reg [DIM_W-1:0] c0_r;
reg kdone0_r;
reg [KP_W-1:0] cpc_r, s0_r, ph0_r;
reg signed [SW-1:0] acc_r;                    // multiply-accumulate of the setup sums

// shared multiplier, and the accumulator: acc = (clear ? 0 : acc) +/- product
// Operands are selected a step ahead into op_a_r / op_b_r (from the step st_reg moves to), the
// product is registered (prod_r) and used the cycle after its step: the multiplier sits alone
// between registers (the operand select, the multiply and the accumulate in one cycle were the
// unit's critical path on the ECP5 proxy, docs/synthesis.md). A step's result register is
// written one cycle after its step (pst_r says which); a step whose operand is the product of
// the step two before selects it from prod_r (ST_KK: KH*KW, ST_HWC: W*C, ST_STX0: DX*C), so
// the steps are ordered with one step between a product and its use. The accumulator's
// captures come a step after its last accumulate (ST_STY1, ST_IMG3), and the image origin's
// last term c0 is added by the walk's adder at ST_WINIT. The tap offsets ky0*DY and kx0*DX
// (ST_TY0, ST_TX0) are 4x4-bit products of their own: ky0 and kx0 come from the divider just
// before, too late for a selection a step ahead. The setup keeps its step count, so its timing
// is unchanged.
reg [IDX_W-1:0] sel_a, op_a_r;
reg [DIM_W-1:0] sel_b, op_b_r;
reg acc_en, acc_clr, acc_neg;
wire [IDX_W-1:0] mul_p = op_a_r * {{(IDX_W-DIM_W){1'b0}}, op_b_r};
reg [IDX_W-1:0] prod_r;
reg [4:0] pst_r;                               // the step of prod_r
reg pv_r, acc_en_r, acc_clr_r, acc_neg_r;     // prod_r is a setup step's; its accumulate

// the step whose operands are selected: the next one (a WINDOWS start: ST_KBEG, its operands
// from the fields being sampled). The steps that wait (ST_TY0, ST_WINIT, ST_CWAIT, ST_CINIT)
// are followed by steps that do not multiply, so a wait never holds a selection.
wire [4:0] st_sel = state_reg == S_IDLE ? ST_KBEG : st_reg + 5'd1;

always @* begin
    sel_a = {IDX_W{1'b0}};
    sel_b = {DIM_W{1'b0}};
    case (st_sel)
        ST_KBEG:  begin sel_a = {{(IDX_W-KP_W){1'b0}}, cfg_k0}; sel_b = {{(DIM_W-LANES_W){1'b0}}, cfg_lanes}; end
        ST_KHKW:  begin sel_a = {{(IDX_W-KER_W){1'b0}}, kh_r}; sel_b = {{(DIM_W-KER_W){1'b0}}, kw_r}; end
        ST_KEND:  begin sel_a = {{(IDX_W-KP_W){1'b0}}, k1_r}; sel_b = {{(DIM_W-LANES_W){1'b0}}, lanes_r}; end
        ST_KK:    begin sel_a = {{(IDX_W-2*KER_W){1'b0}}, prod_r[2*KER_W-1:0]}; sel_b = c_r; end   // KH*KW
        ST_WC:    begin sel_a = {{(IDX_W-DIM_W){1'b0}}, w_r}; sel_b = c_r; end
        ST_SXC:   begin sel_a = {{(IDX_W-DIM_W){1'b0}}, c_r}; sel_b = {{(DIM_W-KER_W){1'b0}}, sx_r}; end
        ST_HWC:   begin sel_a = prod_r; sel_b = h_r; end   // W*C
        ST_DXC:   begin sel_a = {{(IDX_W-DIM_W){1'b0}}, c_r}; sel_b = {{(DIM_W-KER_W){1'b0}}, dx_r}; end
        ST_SYWC:  begin sel_a = wc_r; sel_b = {{(DIM_W-KER_W){1'b0}}, sy_r}; end
        // STX = DX*C - (C-1)
        ST_STX0:  begin sel_a = {{(IDX_W-XC_W){1'b0}}, prod_r[XC_W-1:0]}; sel_b = {{(DIM_W-1){1'b0}}, 1'b1}; end   // DX*C
        ST_STX1:  begin sel_a = {{(IDX_W-DIM_W){1'b0}}, c_r - 1'b1}; sel_b = {{(DIM_W-1){1'b0}}, 1'b1}; end
        // STY = DY*W*C - (KW-1)*DX*C - (C-1)
        ST_STY0:  begin sel_a = wc_r; sel_b = {{(DIM_W-KER_W){1'b0}}, dy_r}; end
        ST_STY1:  begin sel_a = {{(IDX_W-XC_W){1'b0}}, dxc_r}; sel_b = {{(DIM_W-KER_W){1'b0}}, kw_r - 1'b1}; end
        ST_STY2:  begin sel_a = {{(IDX_W-DIM_W){1'b0}}, c_r - 1'b1}; sel_b = {{(DIM_W-1){1'b0}}, 1'b1}; end
        // image origin + offset of lane K0*L: -PT*W*C - PL*C + ky0*DY*W*C + kx0*DX*C (+ c0 at
        // ST_WINIT)
        ST_IMG2:  begin sel_a = wc_r; sel_b = {{(DIM_W-KER_W){1'b0}}, pt_r}; end
        ST_IMG3:  begin sel_a = {{(IDX_W-DIM_W){1'b0}}, c_r}; sel_b = {{(DIM_W-KER_W){1'b0}}, pl_r}; end
        ST_IMG0:  begin sel_a = wc_r; sel_b = ty0_r[DIM_W-1:0]; end
        ST_IMG1:  begin sel_a = {{(IDX_W-DIM_W){1'b0}}, c_r}; sel_b = tx0_r[DIM_W-1:0]; end
        default: ;
    endcase
end

wire [2*KER_W-1:0] ty0_p = dy_r * ky0_r;
wire [2*KER_W-1:0] tx0_p = dx_r * kx0_r;

// the accumulator's control, decoded from the step that multiplies
always @* begin
    acc_en = 1'b0;
    acc_clr = 1'b0;
    acc_neg = 1'b0;
    case (st_reg)
        ST_STX0:  begin acc_en = 1'b1; acc_clr = 1'b1; end
        ST_STX1:  begin acc_en = 1'b1; acc_neg = 1'b1; end
        ST_STY0:  begin acc_en = 1'b1; acc_clr = 1'b1; end
        ST_STY1:  begin acc_en = 1'b1; acc_neg = 1'b1; end
        ST_STY2:  begin acc_en = 1'b1; acc_neg = 1'b1; end
        ST_IMG2:  begin acc_en = 1'b1; acc_clr = 1'b1; acc_neg = 1'b1; end
        ST_IMG3:  begin acc_en = 1'b1; acc_neg = 1'b1; end
        ST_IMG0:  begin acc_en = 1'b1; end
        ST_IMG1:  begin acc_en = 1'b1; end
        default: ;
    endcase
end

wire signed [SW-1:0] acc_in = acc_clr_r ? {SW{1'b0}} : acc_r;
wire signed [SW-1:0] mul_s = $signed({2'b00, prod_r});
wire signed [SW-1:0] acc_next = acc_neg_r ? acc_in - mul_s : acc_in + mul_s;

// restoring divider: dv_cnt iterations of one quotient bit each, phases 1 and 2
reg [1:0] dv_ph;
reg [LN_W-1:0] dv_rem;
reg [DSH_W-1:0] dv_dsh;
reg [KP_W-1:0] dv_q;
reg [CNT_W-1:0] dv_cnt;
wire dv_ge = {{(DSH_W-LN_W){1'b0}}, dv_rem} >= dv_dsh;
wire [LN_W-1:0] dv_sub = dv_rem - dv_dsh[LN_W-1:0];
wire kdone0 = {{(IDX_W-LN_W){1'b0}}, kbeg_r} >= {{(IDX_W-KK_W){1'b0}}, kk_r};   // lane K0*L is past K

// run state
// each counter's last value (its count - 1, modulo its width) is kept beside it, so that the
// walk's "last" tests are equality compares, not an increment and a compare in series ahead
// of the element adder's operand select (the unit's critical path on the ECP5 proxy,
// docs/synthesis.md)
reg [LN_W-1:0] lane_r, lane0_r, lane_l_r;     // WINDOWS: lane k; CHANNELS: j
reg [DIM_W-1:0] x_r, y_r, x_l_r, y_l_r;       // ox, oy / x, y
reg [KP_W-1:0] z_r, z_l_r;                    // n / chunk
reg signed [SW-1:0] elem_r;
// WINDOWS
reg [KER_W-1:0] ky_r, kx_r;
reg [DIM_W-1:0] cc_r;
reg kdone_r;
reg signed [CW-1:0] ix_r;                     // ox*SX - PL: the window's column kx = 0
reg signed [CW-1:0] xt0_r, yt0_r;             // the pixel's first tap (ky0, kx0)
reg signed [CW-1:0] ty_r, tx_r;               // the current tap
reg signed [SW-1:0] org_r, row_r, img_r;      // element of the first tap: pixel, row, image
reg signed [STX_W-1:0] stx_r;                 // setup results
reg signed [SW-1:0] sty_r;
// the walk's copies of what it reads, loaded when it starts (the next setup runs meanwhile)
reg win_q;
reg [DIM_W-1:0] h_q, w_q, c_q, c_l_q, c0_q;
reg [KER_W-1:0] kh_l_q, kw_l_q, sy_q, sx_q, dy_q, dx_q, ky0_q, kx0_q;   // KH - 1, KW - 1
reg [KP_W-1:0] rep_l_q, cv_q;                                          // KP - 1
reg kdone0_q;
reg signed [STX_W-1:0] stx_q;
reg [XC_W-1:0] sxc_q;
reg signed [SW-1:0] sty_q, sywc_q, hwc_q;
reg signed [CW-1:0] ty00_q, tx00_q, npl_q;
// CHANNELS
reg [R_W-1:0] r_r, rc_r;
reg [KP_W-1:0] s_r, sc_r, ph_r, phc_r;
reg signed [SW-1:0] pel_r;                    // the pixel's first element

function signed [SW-1:0] sx_idx(input [IDX_W-1:0] v);
    sx_idx = $signed({2'b00, v});
endfunction

function signed [CW-1:0] sx_dim(input [DIM_W-1:0] v);
    sx_dim = $signed({{(CW-DIM_W){1'b0}}, v});
endfunction

function signed [CW-1:0] sx_ker(input [KER_W-1:0] v);
    sx_ker = $signed({{(CW-KER_W){1'b0}}, v});
endfunction

// the four counters' last tests (m_last and the start of the next stream's walk, whose
// registers load on `fire && m_last`: a path from the counters through their compares and the
// taker's ready into every start register, the load unit's critical path on the ECP5 proxy,
// docs/synthesis.md) as registers set with their counters (look-ahead): each write of a
// counter sets its flag from the value written
reg lane_last_r, x_last_r, y_last_r, z_last_r;
wire fire = m_valid && m_ready;
wire lane_last = lane_last_r;
wire x_last = x_last_r;
wire y_last = y_last_r;
wire z_last = z_last_r;
wire c_last = cc_r == c_l_q;
wire kx_last = kx_r == kw_l_q;
wire ky_last = ky_r == kh_l_q;
wire ph_last = ph_r == rep_l_q;

wire win_pad = kdone_r || ty_r < 0 || ty_r >= sx_dim(h_q) || tx_r < 0 || tx_r >= sx_dim(w_q);
wire ch_pad = r_r >= {1'b0, cv_q};

wire signed [CW-1:0] ty00 = $signed(ty0_r) - sx_ker(pt_r);   // first tap of an image's first row
wire signed [CW-1:0] tx00 = $signed(tx0_r) - sx_ker(pl_r);
wire signed [CW-1:0] npl = -sx_ker(pl_r);
wire signed [CW-1:0] xt0_step = xt0_r + sx_ker(sx_q);
wire signed [CW-1:0] yt0_step = yt0_r + sx_ker(sy_q);
wire signed [SW-1:0] c_s = sx_idx({{(IDX_W-DIM_W){1'b0}}, c_q});
// CHANNELS: the channel after (r, s, ph)
wire [KP_W-1:0] s_next = ph_last ? s_r + 1'b1 : s_r;
wire [KP_W-1:0] ph_next = ph_last ? {KP_W{1'b0}} : ph_r + 1'b1;

// the counters' last values a stream starts with (WINDOWS, CHANNELS)
wire [LN_W-1:0] lane_l_win = kend_r - 1'b1;
wire [DIM_W-1:0] x_l_win = ow_r - 1'b1;
wire [DIM_W-1:0] y_l_win = oh_r - 1'b1;
wire [KP_W-1:0] z_l_win = {{(KP_W-DIM_W){1'b0}}, n_r} - 1'b1;
wire [LN_W-1:0] lane_l_chn = {{(LN_W-KP_W){1'b0}}, cpc_r} - 1'b1;
wire [DIM_W-1:0] x_l_chn = w_r - 1'b1;
wire [DIM_W-1:0] y_l_chn = h_r - 1'b1;
wire [KP_W-1:0] z_l_chn = nchunk_r - 1'b1;

// the walk of a new stream starts (its setup is done, the stream before has ended)
wire init_go = state_reg == S_SETUP && (st_reg == ST_WINIT || st_reg == ST_CINIT)
        && !(run_reg && !(fire && m_last));

// the walk's next element (also the first element of a new stream: the walk does not add
// then). Every candidate sum is formed beside the others and the last tests only select among
// them: a last test, an operand select and one adder in series were the unit's critical path
// on the ECP5 proxy (lane_r -> elem_r, docs/synthesis.md)
wire signed [SW-1:0] sum_inc = elem_r + {{(SW-1){1'b0}}, 1'b1};
wire signed [SW-1:0] sum_sty = elem_r + sty_q;
wire signed [SW-1:0] sum_stx = elem_r + {{(SW-STX_W){stx_q[STX_W-1]}}, stx_q};
wire signed [SW-1:0] sum_org = org_r + sx_idx({{(IDX_W-XC_W){1'b0}}, sxc_q});
wire signed [SW-1:0] sum_row = row_r + sywc_q;
wire signed [SW-1:0] sum_img = img_r + hwc_q;
wire signed [SW-1:0] sum_win = acc_r + sx_idx({{(IDX_W-DIM_W){1'b0}}, c0_r});
wire signed [SW-1:0] sum_pel = pel_r + c_s;
reg signed [SW-1:0] add_s;
always @* begin
    add_s = sum_inc;
    if (init_go) begin
        add_s = st_reg == ST_WINIT ? sum_win : sx_idx({{(IDX_W-KP_W){1'b0}}, s0_r});
    end else if (win_q) begin
        if (!lane_last) begin
            if (c_last) begin
                add_s = kx_last ? sum_sty : sum_stx;
            end
        end else if (!x_last) begin
            add_s = sum_org;
        end else if (!y_last) begin
            add_s = sum_row;
        end else begin
            add_s = sum_img;
        end
    end else if (lane_last) begin
        if (x_last && y_last) begin
            add_s = sx_idx({{(IDX_W-KP_W){1'b0}}, s_next});
        end else begin
            add_s = sum_pel;
        end
    end
end

always @(posedge clk) begin
    // the divider (started by the setup steps ST_KHKW and ST_C0)
    if (dv_ph != 2'd0) begin
        if (dv_cnt != {CNT_W{1'b0}}) begin
            dv_cnt <= dv_cnt - 1'b1;
            dv_dsh <= dv_dsh >> 1;
            dv_q <= {dv_q[KP_W-2:0], dv_ge};
            if (dv_ge) begin
                dv_rem <= dv_sub;
            end
        end else begin
            dv_q <= {KP_W{1'b0}};
            dv_ph <= dv_ph == 2'd1 ? 2'd2 : 2'd0;
            if (win_reg && dv_ph == 2'd1) begin
                // tap index, c0 = divmod(K0*L, C) (tap < KH*KW < 2^(2*KER_W)); then divmod(tap, KW)
                c0_r <= dv_rem[DIM_W-1:0];
                dv_rem <= {{(LN_W-KP_W){1'b0}}, dv_q};
                dv_dsh <= {{(DSH_W-KER_W){1'b0}}, kw_r} << (KER_W - 1);
                dv_cnt <= QB_KX;
            end else if (win_reg) begin
                // ky0 < KH < 2^KER_W, kx0; a chunk that starts past K starts on PAD
                kdone0_r <= kdone0;
                ky0_r <= kdone0 ? {KER_W{1'b0}} : dv_q[KER_W-1:0];
                kx0_r <= kdone0 ? {KER_W{1'b0}} : dv_rem[KER_W-1:0];
                if (kdone0) begin
                    c0_r <= {DIM_W{1'b0}};
                end
            end else if (dv_ph == 2'd1) begin
                // CHANNELS per chunk; then CH0 / REP
                cpc_r <= dv_q;
                dv_rem <= {{(LN_W-KP_W){1'b0}}, k0_r};
                dv_dsh <= {{(DSH_W-KP_W){1'b0}}, rep_r} << (KP_W - 1);
                dv_cnt <= QB_CH;
            end else begin
                // the first channel's source channel and phase
                s0_r <= dv_q;
                ph0_r <= dv_rem[KP_W-1:0];
            end
        end
    end

    // the walk
    if (fire) begin
        if (!lane_last) begin
            lane_r <= lane_r + 1'b1;
            lane_last_r <= lane_r + 1'b1 == lane_l_r;
            if (win_q) begin
                if (!kdone_r) begin
                    if (!c_last) begin
                        cc_r <= cc_r + 1'b1;
                        elem_r <= add_s;
                    end else if (!kx_last) begin
                        cc_r <= {DIM_W{1'b0}};
                        kx_r <= kx_r + 1'b1;
                        tx_r <= tx_r + sx_ker(dx_q);
                        elem_r <= add_s;
                    end else if (!ky_last) begin
                        cc_r <= {DIM_W{1'b0}};
                        kx_r <= {KER_W{1'b0}};
                        ky_r <= ky_r + 1'b1;
                        tx_r <= ix_r;
                        ty_r <= ty_r + sx_ker(dy_q);
                        elem_r <= add_s;
                    end else begin
                        kdone_r <= 1'b1;
                    end
                end
            end else begin
                r_r <= r_r + 1'b1;
                s_r <= s_next;
                ph_r <= ph_next;
                if (ph_last) begin
                    elem_r <= add_s;
                end
            end
        end else if (x_last && y_last && z_last) begin
            run_reg <= 1'b0;
        end else begin
            lane_r <= lane0_r;
            lane_last_r <= lane0_r == lane_l_r;
            if (win_q) begin
                ky_r <= ky0_q; kx_r <= kx0_q; cc_r <= c0_q; kdone_r <= kdone0_q;
                elem_r <= add_s;
                org_r <= add_s;
                if (!x_last) begin
                    x_r <= x_r + 1'b1;
                    x_last_r <= x_r + 1'b1 == x_l_r;
                    ix_r <= ix_r + sx_ker(sx_q);
                    xt0_r <= xt0_step;
                    tx_r <= xt0_step;
                    ty_r <= yt0_r;
                end else begin
                    x_r <= {DIM_W{1'b0}};
                    x_last_r <= x_l_r == {DIM_W{1'b0}};
                    ix_r <= npl_q;
                    xt0_r <= tx00_q;
                    tx_r <= tx00_q;
                    row_r <= add_s;
                    if (!y_last) begin
                        y_r <= y_r + 1'b1;
                        y_last_r <= y_r + 1'b1 == y_l_r;
                        yt0_r <= yt0_step;
                        ty_r <= yt0_step;
                    end else begin
                        y_r <= {DIM_W{1'b0}};
                        y_last_r <= y_l_r == {DIM_W{1'b0}};
                        z_r <= z_r + 1'b1;
                        z_last_r <= z_r + 1'b1 == z_l_r;
                        yt0_r <= ty00_q;
                        ty_r <= ty00_q;
                        img_r <= add_s;
                    end
                end
            end else begin
                if (!(x_last && y_last)) begin
                    // next pixel of the chunk
                    x_r <= x_last ? {DIM_W{1'b0}} : x_r + 1'b1;
                    x_last_r <= x_last ? x_l_r == {DIM_W{1'b0}} : x_r + 1'b1 == x_l_r;
                    if (x_last) begin
                        y_r <= y_r + 1'b1;
                        y_last_r <= y_r + 1'b1 == y_l_r;
                    end
                    pel_r <= add_s;
                    elem_r <= add_s;
                    r_r <= rc_r; s_r <= sc_r; ph_r <= phc_r;
                end else begin
                    // next chunk: its first channel follows the last one of this chunk
                    x_r <= {DIM_W{1'b0}};
                    y_r <= {DIM_W{1'b0}};
                    z_r <= z_r + 1'b1;
                    x_last_r <= x_l_r == {DIM_W{1'b0}};
                    y_last_r <= y_l_r == {DIM_W{1'b0}};
                    z_last_r <= z_r + 1'b1 == z_l_r;
                    pel_r <= add_s;
                    elem_r <= add_s;
                    r_r <= r_r + 1'b1; rc_r <= r_r + 1'b1;
                    s_r <= s_next; sc_r <= s_next;
                    ph_r <= ph_next; phc_r <= ph_next;
                end
            end
        end
    end

    // the operands of the next step; the product of the step before: its result register, or
    // the accumulator
    op_a_r <= sel_a;
    op_b_r <= sel_b;
    prod_r <= mul_p;
    pst_r <= st_reg;
    pv_r <= state_reg == S_SETUP;
    acc_en_r <= state_reg == S_SETUP && acc_en;
    acc_clr_r <= acc_clr;
    acc_neg_r <= acc_neg;
    if (acc_en_r) begin
        acc_r <= acc_next;
    end
    if (pv_r) begin
        case (pst_r)
        ST_KBEG:  kbeg_r <= prod_r[LN_W-1:0];
        ST_KK:    kk_r <= prod_r[KK_W-1:0];
        ST_KEND:  kend_r <= prod_r[LN_W-1:0];
        ST_WC:    wc_r <= prod_r;
        ST_HWC:   hwc_r <= prod_r;
        ST_SXC:   sxc_r <= prod_r[XC_W-1:0];
        ST_DXC:   dxc_r <= prod_r[XC_W-1:0];
        ST_SYWC:  sywc_r <= prod_r;
        default: ;
        endcase
    end

    case (state_reg)
    S_IDLE: begin
        if (start) begin
            lanes_r <= cfg_lanes;
            n_r <= cfg_n; h_r <= cfg_h; w_r <= cfg_w; c_r <= cfg_c;
            kh_r <= cfg_kh; kw_r <= cfg_kw; sy_r <= cfg_sy; sx_r <= cfg_sx;
            dy_r <= cfg_dy; dx_r <= cfg_dx; pt_r <= cfg_pt; pl_r <= cfg_pl;
            oh_r <= cfg_oh; ow_r <= cfg_ow;
            rep_r <= cfg_kp; k0_r <= cfg_k0; k1_r <= cfg_k1; nchunk_r <= cfg_nchunk; cv_r <= cfg_cv;
            win_reg <= cfg_mode == MODE_WINDOWS[MODE_W-1:0];
            empty_reg <= 1'b0;
            if (cfg_mode == MODE_WINDOWS[MODE_W-1:0]) begin
                state_reg <= S_SETUP;
                st_reg <= ST_KBEG;
            end else if (cfg_mode == MODE_CHANNELS[MODE_W-1:0]) begin
                state_reg <= S_SETUP;
                st_reg <= ST_C0;
            end else begin
                empty_reg <= 1'b1;
            end
        end
    end
    S_SETUP: begin
        st_reg <= st_reg + 5'd1;
        case (st_reg)
        ST_KHKW: begin
            dv_ph <= 2'd1;
            dv_rem <= prod_r[LN_W-1:0];       // K0*L (ST_KBEG's product)
            dv_dsh <= {{(DSH_W-DIM_W){1'b0}}, c_r} << (2 * KER_W - 1);
            dv_q <= {KP_W{1'b0}};
            dv_cnt <= QB_TAP;
        end
        ST_STY1:  stx_r <= acc_r[STX_W-1:0];   // after ST_STX1's accumulate
        ST_IMG3:  sty_r <= acc_r;               // after ST_STY2's
        ST_TY0: begin
            // a waiting ST_TY0 writes ty0_r each cycle, its last product is the one with the
            // final ky0
            ty0_r <= {{(CW-2*KER_W){1'b0}}, ty0_p};
            if (dv_ph != 2'd0) begin
                st_reg <= st_reg;             // ky0, kx0, c0 not there yet
            end
        end
        ST_TX0:   tx0_r <= {{(CW-2*KER_W){1'b0}}, tx0_p};
        ST_WINIT: if (run_reg && !(fire && m_last)) begin
            st_reg <= st_reg;                 // the walk of the stream before is not done
        end else begin
            win_q <= 1'b1;
            h_q <= h_r; w_q <= w_r; c_q <= c_r; c_l_q <= c_r - 1'b1; c0_q <= c0_r;
            kh_l_q <= kh_r - 1'b1; kw_l_q <= kw_r - 1'b1; sy_q <= sy_r; sx_q <= sx_r; dy_q <= dy_r; dx_q <= dx_r;
            ky0_q <= ky0_r; kx0_q <= kx0_r; kdone0_q <= kdone0_r;
            stx_q <= stx_r; sty_q <= sty_r;
            sxc_q <= sxc_r; sywc_q <= sx_idx(sywc_r); hwc_q <= sx_idx(hwc_r);
            ty00_q <= ty00; tx00_q <= tx00; npl_q <= npl;
            lane_r <= kbeg_r; lane0_r <= kbeg_r; lane_l_r <= lane_l_win;
            x_r <= {DIM_W{1'b0}}; x_l_r <= x_l_win;
            y_r <= {DIM_W{1'b0}}; y_l_r <= y_l_win;
            z_r <= {KP_W{1'b0}}; z_l_r <= z_l_win;
            lane_last_r <= kbeg_r == lane_l_win;
            x_last_r <= x_l_win == {DIM_W{1'b0}};
            y_last_r <= y_l_win == {DIM_W{1'b0}};
            z_last_r <= z_l_win == {KP_W{1'b0}};
            ky_r <= ky0_r; kx_r <= kx0_r; cc_r <= c0_r; kdone_r <= kdone0_r;
            ix_r <= npl;
            xt0_r <= tx00; yt0_r <= ty00;
            tx_r <= tx00; ty_r <= ty00;
            org_r <= add_s; row_r <= add_s; img_r <= add_s; elem_r <= add_s;
            state_reg <= S_IDLE;
            if (n_r == 0 || oh_r == 0 || ow_r == 0 || c_r == 0 || kh_r == 0 || kw_r == 0
                    || kbeg_r >= kend_r) begin
                empty_reg <= 1'b1;
                run_reg <= 1'b0;
            end else begin
                run_reg <= 1'b1;
            end
        end
        ST_C0: begin
            dv_ph <= 2'd1;
            dv_rem <= {{(LN_W-KP_W){1'b0}}, k1_r};
            dv_dsh <= {{(DSH_W-KP_W){1'b0}}, nchunk_r} << (KP_W - 1);
            dv_q <= {KP_W{1'b0}};
            dv_cnt <= QB_CH;
        end
        ST_CWAIT: begin
            if (dv_ph != 2'd0) begin
                st_reg <= st_reg;
            end
        end
        ST_CINIT: if (run_reg && !(fire && m_last)) begin
            st_reg <= st_reg;
        end else begin
            win_q <= 1'b0;
            c_q <= c_r; c_l_q <= c_r - 1'b1; rep_l_q <= rep_r - 1'b1; cv_q <= cv_r;
            lane_r <= {LN_W{1'b0}}; lane0_r <= {LN_W{1'b0}}; lane_l_r <= lane_l_chn;
            x_r <= {DIM_W{1'b0}}; x_l_r <= x_l_chn;
            y_r <= {DIM_W{1'b0}}; y_l_r <= y_l_chn;
            z_r <= {KP_W{1'b0}}; z_l_r <= z_l_chn;
            lane_last_r <= lane_l_chn == {LN_W{1'b0}};
            x_last_r <= x_l_chn == {DIM_W{1'b0}};
            y_last_r <= y_l_chn == {DIM_W{1'b0}};
            z_last_r <= z_l_chn == {KP_W{1'b0}};
            r_r <= {1'b0, k0_r}; rc_r <= {1'b0, k0_r};
            s_r <= s0_r; ph_r <= ph0_r; sc_r <= s0_r; phc_r <= ph0_r;
            pel_r <= add_s;
            elem_r <= add_s;
            state_reg <= S_IDLE;
            if (h_r == 0 || w_r == 0 || nchunk_r == 0 || rep_r == 0 || cpc_r == 0) begin
                empty_reg <= 1'b1;
                run_reg <= 1'b0;
            end else begin
                run_reg <= 1'b1;
            end
        end
        default: ;
        endcase
    end
    endcase
    if (!rst_n) begin
        state_reg <= S_IDLE;
        run_reg <= 1'b0;
        st_reg <= 5'd0;
        empty_reg <= 1'b0;
        dv_ph <= 2'd0;
        pv_r <= 1'b0;
        acc_en_r <= 1'b0;
    end
end

assign busy = state_reg != S_IDLE || run_reg;
assign start_ready = state_reg == S_IDLE;
assign empty = empty_reg;
assign m_valid = run_reg;
assign m_pad = win_q ? win_pad : ch_pad;
assign m_last = lane_last && x_last && y_last && z_last;

/* verilator lint_off UNUSEDSIGNAL */
wire [SW-IDX_W-1:0] elem_hi = elem_r[SW-1:IDX_W];  // an index needs IDX_W bits (see Range)
/* verilator lint_on UNUSEDSIGNAL */
assign m_index = elem_r[IDX_W-1:0];

endmodule

`resetall
