/* Host kernels of the golden model's compiled fast path (dtpu.hw.kernels builds and loads this).
 *
 * Why C: the post unit and a depthwise job are one pass over their data here, where numpy
 * needs one pass per elementwise step (multiply, add, threshold, clip, floor, cast: six to
 * eight passes over float64 outputs, and one pass per tap for a depthwise job), and on
 * MobileNet-224 those passes were most of an invoke. The GEMMs stay with BLAS (numpy.matmul).
 *
 * Arrays are passed as void * (numpy buffers through cffi's from_buffer).
 *
 * Exactness. dtpu_post_exact is the post unit of dtpu.hw.core (Core.post / requant, variants
 * SINGLE, DOUBLE, DOUBLE_UP) written again in int64 with numpy's semantics: wrap32, arithmetic
 * shifts, shifts by 64 or more bits (numpy: left gives 0, right gives 0 or -1), int64 wrap on
 * overflow (done in uint64). dtpu_post_fused is the fused map of dtpu.hw.fast (_FusedPost): its
 * caller proves every step exact in float64 (the module doc of fast.py), so the result does not
 * depend on the order or on FMA contraction. tests/test_kernels.py compares both with the
 * numpy definitions on random and boundary accumulators.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"

/* numpy's int64 shifts (npy_lshift / npy_rshift) for counts >= 0 (the only ones used here):
 * past 63 bits left gives 0, right gives 0 or -1 (= a >> 63). Branch-free, so that the post
 * unit's loops vectorize. */
static inline int64_t shl64(int64_t a, int64_t b) {
    int64_t keep = -(int64_t)(b < 64);
    return (int64_t)((uint64_t)a << (b < 64 ? b : 63)) & keep;
}
static inline int64_t shr64(int64_t a, int64_t b) {
    return a >> (b < 63 ? b : 63);  /* arithmetic on gcc/clang */
}
static inline int64_t wrap32(int64_t x) { return (int64_t)(int32_t)(uint32_t)(uint64_t)x; }
static inline int64_t add64(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static inline int64_t mul64(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }
static inline int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

static inline int64_t shift_round_half_up(int64_t x, int64_t s) {
    int64_t half = s > 0 ? shl64(1, max64(s - 1, 0)) : 0;
    return shr64(add64(x, half), s);
}

#define V_SINGLE 0
#define V_DOUBLE 1
#define V_DOUBLE_UP 2
#define I32MIN (-2147483648LL)
#define I32MAX 2147483647LL

/* requant of one wrapped total (dtpu.hw.units.post.requant) */
static inline int64_t requant1(int variant, int64_t total, int64_t m, int64_t s) {
    if (variant == V_SINGLE)
        return wrap32(shift_round_half_up(mul64(total, m), max64(31 - s, 0)));
    int64_t left = max64(s, 0), right = max64(-s, 0);
    int64_t a = wrap32(shl64(total, left));
    int64_t ab = mul64(a, m);
    if (variant == V_DOUBLE_UP) {
        int64_t high = shr64(add64(ab, 1LL << 30), 31);
        return wrap32(shift_round_half_up(high, right));
    }
    /* nudge 2^30 if ab >= 0 else 1 - 2^30; then t / 2^31 truncated towards zero */
    int64_t t = add64(ab, (1LL << 30) - (int64_t)(ab < 0) * ((1LL << 31) - 1));
    int64_t high = (t + ((t >> 63) & ((1LL << 31) - 1))) >> 31;
    high = ((a == I32MIN) & (m == I32MIN)) ? I32MAX : high;
    int64_t mask = shl64(1, right) - 1;
    int64_t threshold = shr64(mask, 1) + (high < 0);
    return add64(shr64(high, right), (high & mask) > threshold);
}

/* out kinds */
#define O_I8 0
#define O_U8 1
#define O_I16 2
/* acc kinds */
#define A_F32 0
#define A_F64 1
#define A_I32 2

/* One row of the post unit for a constant variant (inlined per variant so that the loop is
 * branch-free and vectorizes). */
#define EXACT_ROW(VARIANT, ATYPE, OTYPE)                                                     \
    do {                                                                                     \
        const ATYPE *restrict a = (const ATYPE *)acc + r * c;                               \
        OTYPE *restrict o = (OTYPE *)out + r * c;                                            \
        for (int64_t j = 0; j < c; j++) {                                                    \
            int64_t total = add64((int64_t)a[j], bias[p + j]);                               \
            int64_t w = wrap32(total);                                                       \
            wrapped |= w != total;                                                           \
            int64_t y = wrap32(add64(requant1(VARIANT, w, mult[p + j], shift[p + j]), zp[p + j])); \
            /* numpy's clip: min(max(y, lo), hi), also when lo > hi */                       \
            y = y < act_lo ? act_lo : y;                                                     \
            y = y > act_hi ? act_hi : y;                                                     \
            y = y < type_lo ? type_lo : y;                                                   \
            y = y > type_hi ? type_hi : y;                                                   \
            o[j] = (OTYPE)y;                                                                 \
        }                                                                                    \
    } while (0)

#define EXACT_BY_VARIANT(ATYPE, OTYPE)                                                       \
    for (int64_t r = 0; r < rows; r++) {                                                     \
        int64_t p = (block0 + r / rows_per_block) * c;                                       \
        if (variant == V_SINGLE) EXACT_ROW(V_SINGLE, ATYPE, OTYPE);                          \
        else if (variant == V_DOUBLE) EXACT_ROW(V_DOUBLE, ATYPE, OTYPE);                     \
        else EXACT_ROW(V_DOUBLE_UP, ATYPE, OTYPE);                                           \
    }

#define BY_OUT(BODY, ATYPE)                                                                  \
    if (okind == O_I8) { BODY(ATYPE, int8_t) }                                               \
    else if (okind == O_U8) { BODY(ATYPE, uint8_t) }                                         \
    else { BODY(ATYPE, int16_t) }

#define BY_ACC(BODY)                                                                         \
    if (akind == A_F32) { BY_OUT(BODY, float) }                                              \
    else if (akind == A_F64) { BY_OUT(BODY, double) }                                        \
    else { BY_OUT(BODY, int32_t) }


/* Returns 1 if some acc + bias left int32 (ERR_WARN_WRAP32), else 0. */
static int post_exact(const dtpu_post_t *P, const void *acc, int64_t rows, int64_t block0,
                      int64_t rows_per_block, void *out) {
    int akind = P->akind, okind = P->okind, variant = P->variant;
    int64_t c = P->c;
    const int64_t *bias = P->bias, *mult = P->mult, *shift = P->shift, *zp = P->zp;
    int64_t act_lo = P->act_lo, act_hi = P->act_hi, type_lo = P->type_lo, type_hi = P->type_hi;
    int wrapped = 0;
    BY_ACC(EXACT_BY_VARIANT)
    return wrapped;
}

/* The fused post unit: v = acc*scale + offset; v -= delta where v < threshold (numpy:
 * v - (v < threshold) * delta); clip to [lo, hi] as numpy does; floor. Parameters per block as
 * in post_exact. */
#define FUSED_LOOP(ATYPE, OTYPE)                                                             \
    for (int64_t r = 0; r < rows; r++) {                                                     \
        int64_t p = (block0 + r / rows_per_block) * c;                                       \
        const ATYPE *restrict a = (const ATYPE *)acc + r * c;                                \
        OTYPE *restrict o = (OTYPE *)out + r * c;                                            \
        const double *restrict sc = scale + p, *restrict of = offset + p;                    \
        const double *restrict th = thr + p, *restrict de = delta + p;                       \
        for (int64_t j = 0; j < c; j++) {                                                    \
            double v = (double)a[j] * sc[j] + of[j];                                         \
            v = v - (v < th[j] ? de[j] : 0.0);                                               \
            v = v < lo ? lo : v;                                                             \
            v = v > hi ? hi : v;                                                             \
            o[j] = (OTYPE)(int32_t)floor(v);                                                 \
        }                                                                                    \
    }

static void post_fused(const dtpu_post_t *P, const void *acc, int64_t rows, int64_t block0,
                       int64_t rows_per_block, void *out) {
    int akind = P->akind, okind = P->okind;
    int64_t c = P->c;
    const double *scale = P->scale, *offset = P->offset, *thr = P->thr, *delta = P->delta;
    double lo = P->lo, hi = P->hi;
    BY_ACC(FUSED_LOOP)
}

/* rows from parameter block block0 on, a new block every rows_per_block rows */
static int post_rows(const dtpu_post_t *P, const void *acc, int64_t rows, int64_t block0,
                     int64_t rows_per_block, void *out) {
    if (P->exact) return post_exact(P, acc, rows, block0, rows_per_block, out);
    post_fused(P, acc, rows, block0, rows_per_block, out);
    return 0;
}

int dtpu_post(const dtpu_post_t *P, const void *acc, int64_t rows, void *out) {
    return post_rows(P, acc, rows, 0, P->rows_per_block, out);
}

/* Depthwise accumulators: x (nchunk, ih, iw, cl) 8-bit lanes (signed if xsigned), w (taps,
 * nchunk*cl) int32 with WGT_OFFSET applied, acc (nchunk, oh, ow, cl) int32 =
 * sum over the taps inside the image of (x + in_off) * w (taps in the padding add 0). The
 * caller proves |acc| < 2^31. */
#define DW_LOOP(XTYPE)                                                                       \
    for (int64_t ch = 0; ch < nchunk; ch++)                                                  \
        for (int64_t oy = 0; oy < oh; oy++) {                                                \
            int32_t *restrict arow = acc;                                                    \
            memset(arow, 0, (size_t)(ow * cl) * sizeof(int32_t));                            \
            for (int64_t ky = 0; ky < kh; ky++) {                                            \
                int64_t iy = oy * sy - pt + ky * dy;                                         \
                if (iy < 0 || iy >= ih) continue;                                            \
                const XTYPE *restrict xrow = (const XTYPE *)x + (ch * ih + iy) * iw * cl;    \
                for (int64_t kx = 0; kx < kw; kx++) {                                        \
                    /* the outputs whose tap lands inside the row: 0 <= ox*sx - pl + kx*dx < iw */ \
                    int64_t base = kx * dx - pl;                                             \
                    int64_t ox0 = base >= 0 ? 0 : (-base + sx - 1) / sx;                     \
                    int64_t ox1 = iw - base <= 0 ? 0 : (iw - base + sx - 1) / sx;            \
                    if (ox1 > ow) ox1 = ow;                                                  \
                    if (sx == 1 && ox1 > ox0) {                                              \
                        /* unit stride: the outputs' lanes and the taps' lanes are two       \
                         * contiguous runs; the weights repeat every cl lanes, tiled rep      \
                         * times in wt, so the run goes in blocks of rep*cl lanes */        \
                        const int32_t *restrict wtp = wt + ((ky * kw + kx) * nchunk + ch) * rcl; \
                        const XTYPE *restrict xp = xrow + (ox0 + base) * cl;                 \
                        int32_t *restrict a = arow + ox0 * cl;                               \
                        int64_t n = (ox1 - ox0) * cl;                                        \
                        for (int64_t i = 0; i < n; i += rcl) {                               \
                            int64_t m = n - i < rcl ? n - i : rcl;                           \
                            for (int64_t j = 0; j < m; j++)                                  \
                                a[i + j] += ((int32_t)xp[i + j] + off) * wtp[j];             \
                        }                                                                    \
                        continue;                                                            \
                    }                                                                        \
                    const int32_t *restrict wp = w + (ky * kw + kx) * nchunk * cl + ch * cl; \
                    for (int64_t ox = ox0; ox < ox1; ox++) {                                 \
                        const XTYPE *restrict xp = xrow + (ox * sx + base) * cl;             \
                        int32_t *restrict a = arow + ox * cl;                                \
                        for (int64_t j = 0; j < cl; j++)                                     \
                            a[j] += ((int32_t)xp[j] + off) * wp[j];                          \
                    }                                                                        \
                }                                                                            \
            }                                                                                \
            /* the row's post unit while its accumulators are in cache (chunk ch's params) */ \
            wrapped |= post_rows(P, arow, ow * cl / P->c, ch, INT64_MAX,                      \
                                 (char *)out + (ch * oh + oy) * ow * cl * osize);             \
        }


/* A depthwise job: per output row, its accumulators into acc (ow * cl int32 scratch), then
 * the post unit P on them into out (nchunk, oh, ow, cl) lanes. Returns 1 if a total wrapped
 * (exact post unit), else 0. */
int dtpu_dw(const dtpu_dw_t *D, const dtpu_post_t *P, const void *x, void *acc_, void *out) {
    int64_t nchunk = D->nchunk, ih = D->ih, iw = D->iw, cl = D->cl, kh = D->kh, kw = D->kw;
    int64_t oh = D->oh, ow = D->ow, sy = D->sy, sx = D->sx, dy = D->dy, dx = D->dx;
    int64_t pt = D->pt, pl = D->pl;
    int32_t off = D->off;
    const int32_t *w = D->w, *wt = D->wt;
    int64_t rcl = D->rcl;
    int32_t *acc = acc_;
    int64_t osize = P->okind == O_I16 ? 2 : 1;
    int wrapped = 0;
    if (D->xsigned) { DW_LOOP(int8_t) }
    else { DW_LOOP(uint8_t) }
    return wrapped;
}

/* ---- the memory model's cycle simulations (dtpu.hw.units.load.stream_sim, dtpu.hw.dw_timing) --
 *
 * Both are the Python functions of the same names written again statement for statement (the
 * Python ones stay: they are the reference and the fallback without a C compiler;
 * tests/test_dw_timing.py compares the two on random streams). Integer arithmetic only. */



/* units.store.StoreWrites */
typedef struct {
    int64_t *b_start, *b_cum, *b_resp;
    int64_t nb, last_beat, k, run_s, run_e, outst, slot, wl, burst, hold, aw_d;
    int open;
    const int64_t *wa;
} store_t;

static void st_issue(store_t *W, int64_t req, int64_t a, int64_t n) {
    while (n > 0) {
        int64_t m = 512 - a % 512;
        if (m > n) m = n;
        int64_t aw = req > W->last_beat ? req : W->last_beat;
        if (W->nb >= W->outst && W->b_resp[W->nb - W->outst] + W->slot > aw)
            aw = W->b_resp[W->nb - W->outst] + W->slot;
        W->b_start[W->nb] = aw + 1;
        W->b_cum[W->nb + 1] = W->b_cum[W->nb] + m;
        W->last_beat = aw + m;
        W->b_resp[W->nb] = aw + m + W->wl;
        W->nb++;
        a += m;
        n -= m;
    }
}

static int64_t st_room_at(const store_t *W, int64_t c) {
    int64_t m = W->k - W->hold;
    if (m <= 0 || m > W->b_cum[W->nb]) return c;
    int64_t lo = 0, hi = W->nb;     /* b_cum[lo] < m <= b_cum[hi] */
    while (hi - lo > 1) {
        int64_t mid = (lo + hi) / 2;
        if (W->b_cum[mid] < m) lo = mid; else hi = mid;
    }
    int64_t t = W->b_start[lo] + (m - 1 - W->b_cum[lo]) + 1;
    return t > c ? t : c;
}

static void st_emit(store_t *W, int64_t c) {
    int64_t a = W->wa[W->k];
    if (W->open && (a != W->run_e + 1 || W->run_e - W->run_s + 1 == W->burst)) {
        st_issue(W, c + W->aw_d, W->run_s, W->run_e - W->run_s + 1);
        W->open = 0;
    }
    W->k++;
    if (!W->open) { W->run_s = W->run_e = a; W->open = 1; }
    else W->run_e = a;
    if (W->run_e - W->run_s + 1 == W->burst) {
        st_issue(W, c + W->aw_d, W->run_s, W->burst);
        W->open = 0;
    }
}

int dtpu_stream_sim(dtpu_stream_t *S) {
    const int64_t n = S->n, nw = S->nw, per_word = S->per_word, intake = S->intake;
    const int64_t RL = S->rl, burst = S->burst, outst = S->outst, ef_d = S->ef_d;
    const int64_t rq_d = S->rq_d, buf_d = S->buf_d, to_pk = S->to_pk;
    const int64_t *wa = S->wa, *need = S->need;
    int64_t blk_next = S->blk_next, blk_left = S->blk_left, blk_words = S->blk_words;
    const int64_t blk_gap = S->blk_gap;
    int64_t blk_addr = S->blk_addr;   /* the next block's word address (its 4 KiB splits) */
    int64_t cap_ends = n + blk_left * (blk_words + 1) + 8;
    unsigned char *newbeat = calloc((size_t)(n > 0 ? n : 1), 1);
    int64_t *ends = malloc(sizeof(int64_t) * (size_t)cap_ends);
    int64_t *beat_t = malloc(sizeof(int64_t) * (size_t)(n + 1));
    int64_t *rq_wa = malloc(sizeof(int64_t) * (size_t)(rq_d + 1));
    int64_t *rq_len = malloc(sizeof(int64_t) * (size_t)(rq_d + 1));
    const int64_t nr = S->n_res;
    store_t W;
    memset(&W, 0, sizeof W);
    if (nr > 0) {
        int64_t cap = 2 * nr + 8;
        W.b_start = malloc(sizeof(int64_t) * (size_t)cap);
        W.b_cum = malloc(sizeof(int64_t) * (size_t)(cap + 1));
        W.b_resp = malloc(sizeof(int64_t) * (size_t)cap);
        W.last_beat = -((int64_t)1 << 40);
        W.outst = S->outst; W.slot = S->slot; W.wl = S->wl; W.burst = S->burst;
        W.hold = S->hold; W.aw_d = S->aw_d; W.wa = S->res_wa;
        if (W.b_cum) W.b_cum[0] = 0;
    }
    if (!newbeat || !ends || !beat_t || !rq_wa || !rq_len
            || (nr > 0 && (!W.b_start || !W.b_cum || !W.b_resp))) {
        free(newbeat); free(ends); free(beat_t); free(rq_wa); free(rq_len);
        free(W.b_start); free(W.b_cum); free(W.b_resp);
        return -1;
    }
    const int64_t BIG = (int64_t)1 << 62;
    int64_t n_ends = 0, n_beats = 0, n_blk = 0, rq_h = 0, rq_n = 0;
    int64_t e = 0, p = 0;
    int run_open = 0, prev_ok = 0;
    int64_t run_wa = 0, run_len = 0, prev_wa = 0;
    int gen_busy = 0, gen_blk = 0, arv = 0, ar_blk = 0;
    int64_t gen_addr = 0, gen_left = 0, ar_beats = 0;
    int64_t ei = 0, resv = 0, bi = 0, br = 0, bt = 0;
    int64_t last_beat = S->rd_free - 1, owed = 0, lane = 0;
    int out_valid = 0;
    int64_t j = 0, stall = 0, cyc = 0;
    /* a block the master took goes on after the core's last word, to its last AR */
    while (j < nw || (nr > 0 && W.k < nr) || (gen_busy && gen_blk) || (arv && ar_blk)) {
        int acted = 0;
        int take = 0, has_wait = 0;
        int64_t wait_room = 0;
        if (nr == 0) {
            take = j < nw && out_valid && cyc >= need[j] + stall;
            if (take) {
                stall = cyc - need[j];
                if (S->takes) S->takes[j] = cyc;
                j++;
                acted = 1;
                if (j == nw && !((gen_busy && gen_blk) || (arv && ar_blk))) break;
            }
        } else {
            int64_t t_in = j < nw ? need[j] : BIG;
            int64_t t_out = W.k < nr ? S->res_t[W.k] : BIG;
            int64_t tau = t_in < t_out ? t_in : t_out;
            if (cyc >= tau + stall) {
                int in_ok = t_in != tau || out_valid;
                int64_t room = t_out == tau ? st_room_at(&W, cyc) : cyc;
                if (in_ok && room <= cyc) {
                    stall = cyc - tau;
                    if (t_in == tau) {
                        take = 1;
                        if (S->takes) S->takes[j] = cyc;
                        j++;
                    }
                    if (t_out == tau) st_emit(&W, cyc);
                    acted = 1;
                } else if (in_ok) {
                    has_wait = 1;
                    wait_room = room;
                }
            }
        }
        int out_free = !out_valid || take;
        int64_t done = 0;
        while (ei < n_ends && ends[ei] <= cyc) { done++; ei++; acted = 1; }
        while (bi < n_beats && beat_t[bi] <= cyc) { bi++; acted = 1; }
        while (br < n_beats && beat_t[br] + to_pk <= cyc) br++;
        int pop = 0;
        if (p < e) {
            int nb = newbeat[p];
            int h_word = per_word == 1 || lane == per_word - 1 || p == n - 1;
            if ((!nb || bt < br) && (!h_word || out_free)) pop = 1;
        }
        int s1_take = 0, push = 0;
        int64_t push_wa = 0, push_len = 0;
        if (e < n && cyc >= intake + e) {
            int64_t a = wa[e];
            int pad = a < 0;
            int same = !pad && prev_ok && a == prev_wa;
            int extend = !pad && !same && prev_ok && run_open && a == prev_wa + 1;
            int new_run = !pad && !same && !extend;
            int ext_full = extend && run_len == burst - 1;
            int need_push = run_open && (new_run || ext_full);
            if (e - p - (pop ? 1 : 0) < ef_d && (!need_push || rq_n < rq_d)) {
                s1_take = 1;
                if (need_push) { push = 1; push_wa = run_wa; push_len = extend ? run_len + 1 : run_len; }
                if (!pad) {
                    if (!same) { prev_ok = 1; prev_wa = a; }
                    if (extend) {
                        run_len++;
                        if (ext_full) run_open = 0;
                    } else if (new_run) {
                        run_wa = a; run_len = 1; run_open = 1;
                    }
                }
                newbeat[e] = (!pad && !same) ? 1 : 0;
                if (e == n - 1) prev_ok = 0;
            }
        }
        if (!s1_take && run_open && rq_n < rq_d) {
            push = 1; push_wa = run_wa; push_len = run_len; run_open = 0;
        }
        int blk_req = blk_left > 0 && cyc >= blk_next - 2 && !gen_busy;
        int64_t freed = (pop && newbeat[p]) ? 1 : 0;
        int accept = !blk_req && rq_n > 0 && !gen_busy && rq_len[rq_h] <= buf_d - owed + freed;
        int issue = gen_busy && resv < outst && !arv;
        if (arv) {
            int64_t first = cyc + RL > last_beat + 1 ? cyc + RL : last_beat + 1;
            last_beat = first + ar_beats - 1;
            ends[n_ends++] = last_beat;
            if (ar_blk) {
                if (ar_blk & 2) {
                    S->blk_reads[2 * n_blk] = first;
                    S->blk_reads[2 * n_blk + 1] = first + ar_beats;
                    n_blk++;
                } else {
                    S->blk_reads[2 * n_blk - 1] = first + ar_beats;
                }
                if (ar_blk & 4) blk_next = last_beat + blk_gap;
            } else {
                for (int64_t b = 0; b < ar_beats; b++) beat_t[n_beats++] = first + b;
            }
            arv = 0;
            acted = 1;
        }
        if (issue) {
            int64_t bnd = 512 - (gen_addr % 512);
            int64_t beats = gen_left < burst ? gen_left : burst;
            if (bnd < beats) beats = bnd;
            arv = 1; ar_beats = beats;
            ar_blk = gen_blk ? (1 | (gen_blk == 2 ? 2 : 0) | (gen_left == beats ? 4 : 0)) : 0;
            if (gen_blk == 2) gen_blk = 1;
            gen_addr += beats;
            gen_left -= beats;
            gen_busy = gen_left > 0;
            resv++;
            acted = 1;
        }
        resv -= done;
        if (blk_req) {
            gen_addr = blk_addr; gen_left = blk_words; gen_blk = 2;
            blk_addr += blk_words;
            gen_busy = 1;
            blk_left--;
            blk_next = (int64_t)1 << 60;
            acted = 1;
        } else if (accept) {
            gen_addr = rq_wa[rq_h]; gen_left = rq_len[rq_h]; gen_blk = 0;
            gen_busy = gen_left > 0;
            owed += gen_left;
            rq_h = (rq_h + 1) % (rq_d + 1);
            rq_n--;
            acted = 1;
        }
        if (push) {
            int64_t at = (rq_h + rq_n) % (rq_d + 1);
            rq_wa[at] = push_wa; rq_len[at] = push_len;
            rq_n++;
            acted = 1;
        }
        if (pop) {
            if (newbeat[p]) { bt++; owed--; }
            int h_word = per_word == 1 || lane == per_word - 1 || p == n - 1;
            lane = h_word ? 0 : lane + 1;
            out_valid = h_word || (out_valid && !take);
            p++;
            acted = 1;
        } else if (take) {
            out_valid = 0;
        }
        if (s1_take) { e++; acted = 1; }
        if (!acted && !accept && !issue) {
            int64_t nxt = INT64_MAX, c;
#define CAND(x) do { c = (x); if (c > cyc && c < nxt) nxt = c; } while (0)
            if (ei < n_ends) CAND(ends[ei]);
            if (blk_left) CAND(blk_next - 2);
            if (bi < n_beats) CAND(beat_t[bi]);
            if (br < n_beats) CAND(beat_t[br] + to_pk);
            if (e < n) CAND(intake + e);
            if (nr == 0) {
                if (out_valid && j < nw) CAND(need[j] + stall);
            } else {
                int64_t t_in = j < nw ? need[j] : BIG;
                int64_t t_out = W.k < nr ? S->res_t[W.k] : BIG;
                if ((t_in <= t_out && out_valid) || t_out < t_in)
                    CAND((t_in < t_out ? t_in : t_out) + stall);
                if (has_wait) CAND(wait_room);
            }
#undef CAND
            if (nxt == INT64_MAX) nxt = cyc + 1;
            cyc = nxt > cyc + 1 ? nxt : cyc + 1;
            continue;
        }
        cyc++;
    }
    S->w_end = INT64_MIN;
    if (nr > 0) {
        if (W.open) st_issue(&W, S->end0 + stall + S->tail, W.run_s, W.run_e - W.run_s + 1);
        if (W.nb) S->w_end = W.b_resp[W.nb - 1] + 1;
        free(W.b_start); free(W.b_cum); free(W.b_resp);
    }
    S->stall = stall;
    S->beats = n_beats;
    S->first = n_beats ? beat_t[0] : INT64_MIN;
    S->end = n_beats ? beat_t[n_beats - 1] + 1 : INT64_MIN;
    S->n_blk = n_blk;
    S->blk_next_out = blk_left ? blk_next : INT64_MIN;
    free(newbeat); free(ends); free(beat_t); free(rq_wa); free(rq_len);
    return 0;
}


/* units.store.store_sim: the store unit's ITEMS path and the write master cycle by cycle (the
 * same statements; the Python is the reference, tests/test_dw_timing.py compares them).
 * b_due must hold n_prior + 4 * n + 16 entries. */
int dtpu_store_sim(dtpu_store_t *S) {
    const int64_t n = S->n, WL = S->wl, burst = S->burst, outst = S->outst;
    const int64_t max_gap = S->max_gap, wq = S->wq;
    const int64_t *addr = S->addr, *kept = S->kept, *offer = S->offer;
    int64_t *hs = S->hs, *b_due = S->b_due;
    int64_t nb_due = S->n_prior;
    const int64_t cap_rf = 4 * n + 16;
    int64_t *rf_a = malloc(sizeof(int64_t) * (size_t)cap_rf);
    int64_t *rf_n = malloc(sizeof(int64_t) * (size_t)cap_rf);
    int64_t *f_q = malloc(sizeof(int64_t) * (size_t)cap_rf);
    if (!rf_a || !rf_n || !f_q) { free(rf_a); free(rf_n); free(f_q); return 1; }
    int64_t rf_h = 0, rf_t = 0, fq_h = 0, fq_t = 0;
    /* prior responses, sorted */
    for (int64_t i = 0; i < nb_due; i++) b_due[i] = S->prior[i];
    for (int64_t i = 1; i < nb_due; i++) {
        int64_t v = b_due[i], j = i - 1;
        while (j >= 0 && b_due[j] > v) { b_due[j + 1] = b_due[j]; j--; }
        b_due[j + 1] = v;
    }
    int64_t w_beats = 0, held = 0, r = 0;
    int st_v = 0, st_last = 0;
    int64_t st_a = 0, st_n = 0;
    int64_t b_w = 0, b_m = 0;
    int fl = 0;
    int o_v = 0, o_c = 0;
    int64_t o_w = 0, o_m = 0;
    int64_t wf = 0;
    int run_v = 0;
    int64_t run_a = 0, run_n = 0;
    int gen_busy = 0;
    int64_t gen_addr = 0, gen_left = 0;
    int64_t resv = nb_due;
    int awv = 0;
    int64_t aw_beats = 0, wb = 0, bi = 0;
    int64_t last_b = INT64_MIN;
    int closed = 0;
    int64_t cyc = offer[0];
    if (nb_due && b_due[0] < cyc) cyc = b_due[0];
    for (;;) {
        int acted = 0;
        int64_t done = 0;
        while (bi < nb_due && b_due[bi] <= cyc) { done++; last_b = b_due[bi]; bi++; acted = 1; }
        const int wf_full = wf >= wq, rf_full = (rf_t - rf_h) >= wq;
        const int has_word = o_m != 0;
        const int follows = run_v && o_w == run_a + run_n && run_n != burst;
        const int64_t gap = o_w - (run_a + run_n);
        const int fill_want = o_v && has_word && run_v && !follows && gap > 0 && gap <= max_gap
                              && run_n + gap < burst;
        const int fill = fill_want && !wf_full && !rf_full;
        const int q_ready = !wf_full && !rf_full && !fill_want;
        const int in_hs = o_v && q_ready;
        const int can = !o_v || q_ready;
        int pk_take = 0, sends = 0;
        int64_t w0 = 0, mg_m = 0, hi_m = 0;
        if (st_v) {
            const int64_t off = st_a & 7;
            w0 = st_a >> 3;
            const int64_t sh_m = ((((int64_t)1) << st_n) - 1) << off;
            const int64_t lo_m = sh_m & 0xFF;
            hi_m = sh_m >> 8;
            mg_m = b_m | lo_m;
            const int other = b_m != 0 && b_w != w0;
            sends = hi_m != 0 || mg_m == 0xFF;
            const int sends_own = hi_m != 0 || lo_m == 0xFF;
            pk_take = can && !fl && !(st_n && other && sends_own);
        }
        const int core_hs = r < n && cyc >= offer[r] + held && (!st_v || pk_take);
        const int wvalid = fq_t > fq_h && wf > 0;
        const int w_done = wvalid && wb == f_q[fq_h] - 1;
        const int req_hs = rf_t > rf_h && !gen_busy;
        const int issue = gen_busy && resv < outst && !awv;
        if (wvalid) {
            wf--; w_beats++; acted = 1;
            if (w_done) { fq_h++; wb = 0; b_due[nb_due++] = cyc + WL; }
            else wb++;
        }
        if (awv) { f_q[fq_t++] = aw_beats; awv = 0; acted = 1; }
        if (issue) {
            const int64_t bnd = 512 - gen_addr % 512;
            int64_t beats = gen_left < burst ? gen_left : burst;
            if (bnd < beats) beats = bnd;
            awv = 1; aw_beats = beats;
            gen_addr += beats; gen_left -= beats; gen_busy = gen_left > 0;
            resv++; acted = 1;
        }
        resv -= done;
        if (req_hs) {
            gen_addr = rf_a[rf_h]; gen_left = rf_n[rf_h]; rf_h++;
            gen_busy = gen_left > 0; acted = 1;
        }
        if (fill) { wf++; run_n++; acted = 1; }
        else if (in_hs) {
            acted = 1;
            const int64_t n_after = follows ? run_n + 1 : 1;
            const int push_full = has_word && follows && n_after == burst;
            if (run_v && (o_c || (has_word && !follows))) {
                rf_a[rf_t] = run_a; rf_n[rf_t] = run_n; rf_t++;
            } else if (push_full) {
                rf_a[rf_t] = run_a; rf_n[rf_t] = n_after; rf_t++;
            }
            if (has_word) wf++;
            if (o_c || push_full) { run_v = 0; if (o_c) closed = 1; }
            else if (has_word) { run_v = 1; run_n = n_after; if (!follows) run_a = o_w; }
        }
        int new_o = can ? 0 : o_v;
        if (can && fl) {
            new_o = 1; o_w = b_w; o_m = b_m; o_c = b_m == 0;
            if (b_m == 0) fl = 0;
            b_m = 0; acted = 1;
        } else if (can && st_v && st_n && b_m != 0 && b_w != (st_a >> 3)) {
            new_o = 1; o_w = b_w; o_m = b_m; o_c = 0;
            b_m = 0;
            if (pk_take) {
                b_w = st_a >> 3; b_m = ((((int64_t)1) << st_n) - 1) << (st_a & 7);
                if (st_last) fl = 1;
            }
            acted = 1;
        } else if (pk_take) {
            if (st_n) {
                if (sends) { new_o = 1; o_w = w0; o_m = mg_m; o_c = 0; b_w = w0 + 1; b_m = hi_m; }
                else { b_w = w0; b_m = mg_m; }
            }
            if (st_last) fl = 1;
            acted = 1;
        }
        o_v = new_o;
        if (core_hs) {
            st_v = 1; st_a = addr[r]; st_n = kept[r]; st_last = r == n - 1;
            hs[r] = cyc; r++; acted = 1;
        } else if (pk_take) {
            st_v = 0;
        }
        const int waiting = r < n && cyc >= offer[r] + held && !core_hs;
        if (waiting) held++;
        if (closed && rf_t == rf_h && !gen_busy && !awv && fq_t == fq_h && wf == 0
            && bi >= nb_due)
            break;
        if (!acted) {
            int64_t best = INT64_MAX;
            if (bi < nb_due && b_due[bi] > cyc) best = b_due[bi];
            if (r < n && !waiting && offer[r] + held > cyc && offer[r] + held < best)
                best = offer[r] + held;
            int64_t nxt = best == INT64_MAX ? cyc + 1 : best;
            if (nxt < cyc + 1) nxt = cyc + 1;
            if (waiting) held += nxt - cyc - 1;
            cyc = nxt;
            continue;
        }
        cyc++;
    }
    S->held = held; S->last_b = last_b; S->n_b = nb_due; S->w_beats = w_beats;
    free(rf_a); free(rf_n); free(f_q);
    return 0;
}

/* ---- the load unit's WINDOWS gather (im2col) ----------------------------------------------
 *
 * Why C: numpy gathers by a precomputed index (one int32 per output lane, 4x the bytes it
 * moves, and the index of a 224x224 net's first layers is tens of MB), where the stream is a
 * handful of contiguous runs per output pixel: a tap's channels, or a whole row of taps when
 * the horizontal dilation is 1 and the row lies inside the image. */

static void fill_pad(uint8_t *o, int64_t count, int64_t es, uint64_t pad) {
    if (es == 1) {
        memset(o, (int)(pad & 0xFF), (size_t)count);
        return;
    }
    for (int64_t i = 0; i < count; i++)
        memcpy(o + i * es, &pad, (size_t)es);   /* little-endian: the low es bytes */
}

int dtpu_gather_windows(const dtpu_gather_t *G, const void *x_, void *out_) {
    const uint8_t *x = (const uint8_t *)x_;
    uint8_t *o = (uint8_t *)out_;
    const int64_t es = G->es, h = G->h, w = G->w, c = G->c, kw = G->kw;
    const int64_t k = G->kh * kw * c, j0 = G->j0, j1 = G->j1;
    for (int64_t b = 0; b < G->n; b++)
        for (int64_t oy = 0; oy < G->oh; oy++)
            for (int64_t ox = 0; ox < G->ow; ox++) {
                int64_t j = j0;
                while (j < j1) {
                    if (j >= k) {
                        fill_pad(o, j1 - j, es, G->pad);
                        o += (j1 - j) * es;
                        break;
                    }
                    const int64_t tap = j / c, ci = j - tap * c;
                    const int64_t ky = tap / kw, kx = tap - ky * kw;
                    const int64_t y = oy * G->sy + ky * G->dy - G->pt;
                    const int64_t xx = ox * G->sx + kx * G->dx - G->pl;
                    int64_t run = c - ci;
                    const int inside = y >= 0 && y < h && xx >= 0 && xx < w;
                    if (inside && G->dx == 1) {
                        /* the row's next taps continue the same source run while inside */
                        int64_t more = kw - 1 - kx;
                        if (more > w - 1 - xx)
                            more = w - 1 - xx;
                        run += more * c;
                    }
                    if (run > j1 - j)
                        run = j1 - j;
                    if (inside)
                        memcpy(o, x + (((b * h + y) * w + xx) * c + ci) * es, (size_t)(run * es));
                    else
                        fill_pad(o, run, es, G->pad);
                    o += run * es;
                    j += run;
                }
            }
    return 0;
}

/* ---- 8-bit GEMMs with few columns ---------------------------------------------------------
 *
 * Why C: a streamed node runs as many RUNs of COLS..2*COLS columns, each over the same long
 * activation rows; BLAS on such thin matrices converts the activations to float at every RUN
 * and then runs far below its peak. Here each output is one dot product of an int8/uint8 row
 * with an int16 weight row (the compiler vectorizes it as multiply-add of 16-bit pairs),
 * exact in int32 (the caller's bound). */

/* rows of activations widened to int16 once (a scratch of 2 x k), then each output one dot
 * product of two int16 rows, which gcc turns into 16-bit multiply-adds (pmaddwd): two rows
 * by four columns a pass, so that each load of an activation serves four columns and each
 * load of a weight two rows */
static inline int32_t col_off(const int32_t *coff, int64_t j) { return coff ? coff[j] : 0; }

static void gemm_rows2(const int16_t *a0, const int16_t *a1, const int16_t *wt, int64_t kp,
                       int64_t c, const int32_t *coff, int32_t *o0, int32_t *o1) {
    /* kp a multiple of 16: whole vectors, no remainder loop */
    int64_t j = 0;
    for (; j + 4 <= c; j += 4) {
        const int16_t *w0 = wt + j * kp, *w1 = w0 + kp, *w2 = w1 + kp, *w3 = w2 + kp;
        int32_t s00 = 0, s01 = 0, s02 = 0, s03 = 0, s10 = 0, s11 = 0, s12 = 0, s13 = 0;
        for (int64_t q = 0; q < kp; q++) {
            const int32_t u = a0[q], v = a1[q];
            const int32_t x0 = w0[q], x1 = w1[q], x2 = w2[q], x3 = w3[q];
            s00 += u * x0; s01 += u * x1; s02 += u * x2; s03 += u * x3;
            s10 += v * x0; s11 += v * x1; s12 += v * x2; s13 += v * x3;
        }
        o0[j] = s00 + col_off(coff, j); o0[j + 1] = s01 + col_off(coff, j + 1);
        o0[j + 2] = s02 + col_off(coff, j + 2); o0[j + 3] = s03 + col_off(coff, j + 3);
        o1[j] = s10 + col_off(coff, j); o1[j + 1] = s11 + col_off(coff, j + 1);
        o1[j + 2] = s12 + col_off(coff, j + 2); o1[j + 3] = s13 + col_off(coff, j + 3);
    }
    for (; j < c; j++) {
        const int16_t *w0 = wt + j * kp;
        int32_t s0 = 0, s1 = 0;
        for (int64_t q = 0; q < kp; q++) {
            s0 += (int32_t)a0[q] * w0[q];
            s1 += (int32_t)a1[q] * w0[q];
        }
        o0[j] = s0 + col_off(coff, j);
        o1[j] = s1 + col_off(coff, j);
    }
}

/* row i of a widened to int16, zero from k to kp */
static void widen_row(const void *a, int asigned, int64_t i, int64_t k, int64_t kp, int16_t *row) {
    if (asigned) {
        const int8_t *ar = (const int8_t *)a + i * k;
        for (int64_t q = 0; q < k; q++)
            row[q] = ar[q];
    } else {
        const uint8_t *ar = (const uint8_t *)a + i * k;
        for (int64_t q = 0; q < k; q++)
            row[q] = ar[q];
    }
    for (int64_t q = k; q < kp; q++)
        row[q] = 0;
}

int dtpu_gemm_i8(const dtpu_gemm_t *G, const void *a, int32_t *acc) {
    const int64_t m = G->m, k = G->k, c = G->c, kp = G->kp;
    if (kp < k || kp % 16)
        return -2;
    int16_t *rows = (int16_t *)malloc((size_t)(kp > 0 ? 2 * kp : 2) * sizeof(int16_t));
    if (!rows)
        return -1;
    for (int64_t i = 0; i < m; i += 2) {
        /* an odd last row is paired with itself (computed twice, written once) */
        const int64_t i1 = i + 1 < m ? i + 1 : i;
        widen_row(a, G->asigned, i, k, kp, rows);
        widen_row(a, G->asigned, i1, k, kp, rows + kp);
        int32_t *o0 = acc + i * c, *o1 = acc + i1 * c;   /* the same row: equal values */
        gemm_rows2(rows, rows + kp, G->wt, kp, c, G->coff, o0, o1);
    }
    free(rows);
    return 0;
}

/* ---- one RUN of a replayed list ----------------------------------------------------------
 *
 * Why C: a 224x224 net's list has a few hundred RUNs; in Python each one's gather, GEMM, post
 * unit and store were six or more calls through cffi and numpy, together as much time as the
 * GEMMs themselves. */

static int64_t load_signed(const uint8_t *p, int64_t es) {
    switch (es) {
    case 1: { int8_t v; memcpy(&v, p, 1); return v; }
    case 2: { int16_t v; memcpy(&v, p, 2); return v; }
    case 4: { int32_t v; memcpy(&v, p, 4); return v; }
    default: { int64_t v; memcpy(&v, p, 8); return v; }
    }
}

static void run_store(const dtpu_run_t *R) {
    const uint8_t *out = (const uint8_t *)R->out;
    uint8_t *dst = (uint8_t *)R->dst;
    const int64_t ses = R->ses, des = R->des;
    for (int64_t p = 0; p < R->pix; p++)
        for (int64_t o = 0; o < R->outer; o++)
            for (int64_t i = 0; i < R->inner; i++) {
                const int64_t c0 = R->ch0 + (o * R->inner + i) * R->gw;
                if (c0 >= R->hi)
                    continue;
                const int64_t n = R->gw < R->hi - c0 ? R->gw : R->hi - c0;
                const uint8_t *s = out + ((o * R->pix + p) * R->inner + i) * R->wstride;
                uint8_t *d = dst + (p * R->dstc + c0) * des;
                if (R->store == 1) {
                    memcpy(d, s, (size_t)(n * ses));
                    continue;
                }
                for (int64_t e = 0; e < n; e++) {
                    int64_t v = load_signed(s + e * ses, ses), t = 0;
                    if (R->store == 2)
                        memcpy(&t, d + e * 8, 8);
                    /* int64 wraps as numpy's += does */
                    t = (int64_t)((uint64_t)t + (uint64_t)v);
                    memcpy(d + e * 8, &t, 8);
                }
            }
}

int dtpu_run(const dtpu_run_t *R) {
    int flag = 0;
    dtpu_memo_t *memo = R->memo;
    if (R->gather && memo) {
        if (memo->valid && memcmp(memo->xcopy, R->x, (size_t)memo->xbytes) == 0)
            goto gathered;
        memcpy(memo->xcopy, R->x, (size_t)memo->xbytes);
        memo->valid = 1;
    }
    if (R->gather == 1) {
        dtpu_gather_windows(R->G, R->x, R->words);
    } else if (R->gather == 2) {
        const uint8_t *x = (const uint8_t *)R->x;
        uint8_t *w = (uint8_t *)R->words;
        for (int64_t r = 0; r < R->rows; r++)
            memcpy(w + r * R->row_out, x + r * R->row_in, (size_t)R->row_in);
    }
gathered:
    if (R->job == 1) {
        if (dtpu_gemm_i8(R->M, R->words, R->acc))
            return -1;
        flag = dtpu_post(R->P, R->acc, R->post_rows, R->out);
    } else if (R->job == 2) {
        if (dtpu_gemm_i8(R->M, R->words, (int32_t *)R->out))
            return -1;
    }
    if (R->store)
        run_store(R);
    return flag;
}
