// Equivalence of dtpu_dw_seq and dtpu_dw_seq_old (an earlier revision of the same file, renamed by
// sim/equiv/dw_seq_equiv.py): random DWCONV jobs biased to the legal corners (the ring, weight and
// parameter bounds, strides and dilations up to 255, the widest x = ox*SX - PL + kx*DX), the same
// stalls (adv) and activation beats on both; every output compared where the core reads it
// (abuf_waddr on a beat, the per-column rows for valid columns, the tag when tag_valid), the rest
// counted. Not part of the test suite: a check for changes that must not change behaviour.
`timescale 1ns/1ps
module tb_dw_seq_equiv;
parameter COLS = 8, LOG_COLS = 3, LWW = 10, LPE = 8, LAW = 9, ROT = 1, PP = 0;
parameter integer NJOBS = 2000, MAXCYC = 6000, SEED = 1;
localparam AR = LAW - LOG_COLS, WR = LWW - LOG_COLS;
reg clk = 0, rst_n = 0, adv = 0, latch = 0, run = 0, act_rnd = 0, check_param = 1;
reg [31:0] r_in, r_out, r_k, r_s, r_g, r_ring, r_wb, r_pb;
reg [1:0] log_l, log_lo;
`define OUTS(p) \
wire [31:0] p``cfg_err; wire [63:0] p``in_total, p``res_total; wire p``need_act, p``conflict; \
wire [LAW-1:0] p``abuf_waddr; wire [COLS-1:0] p``col_valid, p``col_zero; wire p``col_first, p``col_last; \
wire [COLS*AR-1:0] p``col_arow, p``bank_arow; wire [COLS*LOG_COLS-1:0] p``col_abank, p``col_wbank; \
wire [COLS*WR-1:0] p``col_wrow; wire [LOG_COLS-1:0] p``act_rot; wire [WR-1:0] p``wgt_row_rot; \
wire p``tag_valid, p``tag_job_last; wire [15:0] p``tag_words, p``tag_nvals, p``tag_g; \
wire [LPE-1:0] p``tag_ch, p``tag_wrap_ch;
`OUTS(a_)
`OUTS(b_)
wire act_fire = a_need_act && act_rnd;
`define INST(M, p) \
M #(.COLS(COLS), .LOG_COLS(LOG_COLS), .LOG_WEIGHT_WORDS(LWW), .LOG_PARAM_ENTRIES(LPE), \
    .LOG_ACT_WORDS(LAW), .PE_PAIR(PP), .DW_ROTATE(ROT)) p``u ( \
 .clk(clk), .rst_n(rst_n), .adv(adv), .reg_dw_in(r_in), .reg_dw_out(r_out), .reg_dw_kernel(r_k), \
 .reg_dw_stride(r_s), .reg_dw_groups(r_g), .reg_dw_ring(r_ring), .reg_wgt_base(r_wb), \
 .reg_param_base(r_pb), .log_l(log_l), .log_lo(log_lo), .check_param(check_param), \
 .cfg_err(p``cfg_err), .latch(latch), .run(run), .in_total(p``in_total), .res_total(p``res_total), \
 .need_act(p``need_act), .act_fire(act_fire), .conflict(p``conflict), .abuf_waddr(p``abuf_waddr), \
 .col_valid(p``col_valid), .col_zero(p``col_zero), .col_first(p``col_first), .col_last(p``col_last), \
 .col_arow(p``col_arow), .col_abank(p``col_abank), .col_wrow(p``col_wrow), .col_wbank(p``col_wbank), \
 .bank_arow(p``bank_arow), .act_rot(p``act_rot), .wgt_row_rot(p``wgt_row_rot), \
 .tag_valid(p``tag_valid), .tag_job_last(p``tag_job_last), .tag_words(p``tag_words), \
 .tag_nvals(p``tag_nvals), .tag_ch(p``tag_ch), .tag_wrap_ch(p``tag_wrap_ch), .tag_g(p``tag_g));
`INST(dtpu_dw_seq, a_)
`INST(dtpu_dw_seq_old, b_)

always #5 clk = ~clk;

integer big_x = 0, errors = 0, legal = 0, cyc, j, strict = 0, checked_cycles = 0, jobs_done = 0;
reg any_valid;
task automatic check(input string what);
    if (errors < 20) $display("MISMATCH %s at job %0d cycle %0d", what, legal, cyc);
    errors = errors + 1;
endtask

always @(negedge clk) if (rst_n && run) begin
    checked_cycles = checked_cycles + 1;
    if (a_cfg_err != b_cfg_err) check("cfg_err");
    if (a_in_total != b_in_total) check("in_total");
    if (a_res_total != b_res_total) check("res_total");
    if (a_need_act != b_need_act) check("need_act");
    if (a_conflict != b_conflict) check("conflict");
    if (act_fire && a_abuf_waddr != b_abuf_waddr) check("abuf_waddr");
    if (a_col_valid != b_col_valid) check("col_valid");
    if (a_col_first != b_col_first || a_col_last != b_col_last) check("first/last");
    any_valid = |a_col_valid;
    if (a_col_valid[0] && b_u.col[0].x >= 65536) big_x = big_x + 1;
    for (j = 0; j < COLS; j = j + 1) if (a_col_valid[j]) begin
        if (a_col_zero[j] != b_col_zero[j]) check("col_zero");
        if (a_col_arow[j*AR +: AR] != b_col_arow[j*AR +: AR]) check("col_arow");
        if (a_col_abank[j*LOG_COLS +: LOG_COLS] != b_col_abank[j*LOG_COLS +: LOG_COLS]) check("col_abank");
        if (a_col_wrow[j*WR +: WR] != b_col_wrow[j*WR +: WR]) check("col_wrow");
        if (a_col_wbank[j*LOG_COLS +: LOG_COLS] != b_col_wbank[j*LOG_COLS +: LOG_COLS]) check("col_wbank");
    end
    if (any_valid && (a_bank_arow != b_bank_arow || a_act_rot != b_act_rot || a_wgt_row_rot != b_wgt_row_rot))
        check("rotated rows");
    if (a_tag_valid != b_tag_valid) check("tag_valid");
    if (a_tag_valid && {a_tag_job_last, a_tag_words, a_tag_nvals, a_tag_ch, a_tag_wrap_ch, a_tag_g}
                    != {b_tag_job_last, b_tag_words, b_tag_nvals, b_tag_ch, b_tag_wrap_ch, b_tag_g})
        check("tag");
    // the unmasked outputs too (informational: the core ignores them there)
    if ({a_col_zero, a_col_arow, a_col_abank, a_col_wrow, a_col_wbank, a_bank_arow, a_act_rot, a_wgt_row_rot,
         a_tag_words, a_tag_nvals, a_tag_ch, a_tag_wrap_ch, a_tag_g, a_abuf_waddr}
        != {b_col_zero, b_col_arow, b_col_abank, b_col_wrow, b_col_wbank, b_bank_arow, b_act_rot, b_wgt_row_rot,
         b_tag_words, b_tag_nvals, b_tag_ch, b_tag_wrap_ch, b_tag_g, b_abuf_waddr})
        strict = strict + 1;
end

function automatic integer rnd(input integer lo, input integer hi);
    rnd = lo + $urandom % (hi - lo + 1);
endfunction

integer gc, nchunk, sx, sy, dx, dy, kw, kh, pl, pt, iw, ih, ow, oh, lb, tc, spanh, spanw, slotmax,
        iwmax, ohmax, owmax, taps, gpc, wb, pb, rsc, k, seen_last, mode;
initial begin
    void'($urandom(SEED));
    repeat (3) @(posedge clk);
    rst_n = 1;
    for (k = 0; k < NJOBS; k = k + 1) begin
        mode = rnd(0, 10) == 10 ? 9 : rnd(0, 9);
        gc = rnd(1, COLS);
        nchunk = rnd(1, 3);
        sx = mode == 0 ? rnd(1, 255) : rnd(1, 4);
        sy = mode == 1 ? rnd(1, 255) : rnd(1, 4);
        dx = mode == 2 ? rnd(1, 255) : rnd(1, 3);
        dy = mode == 3 ? rnd(1, 255) : rnd(1, 3);
        kw = mode == 4 ? rnd(1, 255) : rnd(1, 5);
        kh = mode == 5 ? rnd(1, 40) : rnd(1, 5);
        if (mode == 2) kw = rnd(1, 3);
        if (mode == 7) begin kw = rnd(100, 255); dx = rnd(100, 255); kh = rnd(1, 2); end
        if (mode == 8) begin sx = rnd(1, 255); kw = rnd(1, 255); dx = rnd(1, 255); end
        if (mode == 3) kh = rnd(1, 2);
        if (mode == 9) begin kh = 1; gc = rnd(1, 2); sx = rnd(1, 3); kw = rnd(253, 255); dx = rnd(253, 255); end
        spanh = (kh - 1) * dy + 1;
        spanw = (kw - 1) * dx + 1;
        pt = rnd(0, spanh - 1 > 255 ? 255 : spanh - 1);
        pl = rnd(0, spanw - 1 > 255 ? 255 : spanw - 1);
        lb = spanh + rnd(0, 2);
        // the slot's words that fit the ring
        slotmax = ((1 << LAW) / lb / COLS) * COLS;
        iwmax = ROT ? slotmax / gc - (sx - 1) : slotmax / gc;
        if (iwmax < 1) begin iwmax = 1; end
        iw = rnd(0, 2) == 0 ? iwmax : rnd(1, iwmax);
        if (rnd(0, 19) == 0) iw = iw + rnd(1, 3);            // past the ring: refused
        ih = mode == 6 ? rnd(1, 65535) : rnd(1, 12);
        ohmax = (ih - 1 + pt) / sy + 1;
        owmax = (iw - 1 + pl) / sx + 1;
        oh = rnd(0, 1) ? ohmax : rnd(1, ohmax);
        ow = rnd(0, 1) ? owmax : rnd(1, owmax);
        if (rnd(0, 19) == 0) ow = ow + 1;                     // refused
        if (oh > 65535) oh = 65535;
        tc = 1 << rnd(0, LOG_COLS);
        taps = kh * kw;
        gpc = ROT ? nchunk * 1 : (gc * nchunk + COLS - 1) / COLS;
        wb = COLS * rnd(0, 3);
        pb = COLS * rnd(0, 3);
        if (rnd(0, 9) == 0) lb = rnd(0, 3);
        if (mode == 9) begin
            iw = rnd(800, 2000); ih = rnd(1, 2); nchunk = 1; tc = 1; lb = spanh;
            pl = rnd(0, 255); pt = 0; oh = 1; ow = (iw - 1 + pl) / sx + 1;
        end
        r_in = {iw[15:0], ih[15:0]};
        r_out = {ow[15:0], oh[15:0]};
        r_k = {pl[7:0], pt[7:0], kw[7:0], kh[7:0]};
        r_s = {dx[7:0], dy[7:0], sx[7:0], sy[7:0]};
        r_g = {nchunk[15:0], gc[15:0]};
        r_ring = {12'd0, tc[3:0], lb[15:0]};
        r_wb = wb;
        r_pb = pb;
        log_l = rnd(0, 3);
        log_lo = log_l - rnd(0, log_l);
        check_param = rnd(0, 3) != 0;
        run = 0;
        @(posedge clk);
        #1;
        if (a_cfg_err != b_cfg_err) begin
            $display("MISMATCH cfg_err %h %h", a_cfg_err, b_cfg_err); errors = errors + 1;
        end
        latch = 1;
        @(posedge clk); #1;
        latch = 0;
        if (a_cfg_err == 0) begin
            legal = legal + 1;
            run = 1;
            seen_last = 0;
            for (cyc = 0; cyc < MAXCYC && seen_last < 20; cyc = cyc + 1) begin
                adv = rnd(0, 4) != 0;
                act_rnd = rnd(0, 3) != 0;
                @(posedge clk); #1;
                if (seen_last > 0 || (a_tag_valid && a_tag_job_last)) seen_last = seen_last + 1;
            end
            if (seen_last > 0) jobs_done = jobs_done + 1;
            run = 0; adv = 0; act_rnd = 0;
        end
    end
    $display("valid column-0 cycles with x >= 2^16: %0d", big_x);
    $display("DONE jobs %0d legal %0d finished %0d checked %0d cycles, errors %0d, unmasked differences %0d",
             NJOBS, legal, jobs_done, checked_cycles, errors, strict);
    if (errors != 0) $fatal(1, "mismatch");
    $finish;
end
endmodule
