/* Host kernels of the golden model's compiled fast path (dtpu.hw.kernels builds and loads this).
 *
 * Why C: the post unit and a depthwise job are one pass over their data here, where numpy
 * needs one pass per elementwise step (multiply, add, threshold, clip, floor, cast: six to
 * eight passes over float64 outputs, and one pass per tap for a depthwise job), and on
 * MobileNet-224 those passes were most of an invoke. The GEMMs stay with BLAS (numpy.matmul).
 *
 * Exactness. dtpu_post_exact is the post unit of dtpu.hw.model (Core._post / requant, variants
 * SINGLE, DOUBLE, DOUBLE_UP) written again in int64 with numpy's semantics: wrap32, arithmetic
 * shifts, shifts by 64 or more bits (numpy: left gives 0, right gives 0 or -1), int64 wrap on
 * overflow (done in uint64). dtpu_post_fused is the fused map of dtpu.hw.fast (_FusedPost): its
 * caller proves every step exact in float64 (the module doc of fast.py), so the result does not
 * depend on the order or on FMA contraction. tests/test_kernels.py compares both with the
 * numpy definitions on random and boundary accumulators.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

/* numpy's int64 shifts (npy_lshift / npy_rshift): defined for every count */
static inline int64_t shl64(int64_t a, int64_t b) {
    if (b < 0 || b >= 64) return 0;
    return (int64_t)((uint64_t)a << b);
}
static inline int64_t shr64(int64_t a, int64_t b) {
    if (b < 0 || b >= 64) return a < 0 ? -1 : 0;
    return a >> b;  /* arithmetic on gcc/clang */
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

/* requant of one wrapped total (dtpu.hw.model.requant) */
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
    int64_t t = add64(ab, ab >= 0 ? (1LL << 30) : 1 - (1LL << 30));
    int64_t high = t >= 0 ? shr64(t, 31) : -shr64(-t, 31);
    if (a == I32MIN && m == I32MIN) high = I32MAX;
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

static inline int64_t acc_at(int akind, const void *acc, int64_t i) {
    switch (akind) {
    case A_F32: return (int64_t)((const float *)acc)[i];
    case A_F64: return (int64_t)((const double *)acc)[i];
    default: return ((const int32_t *)acc)[i];
    }
}

static inline void store(int okind, void *out, int64_t i, int64_t y) {
    switch (okind) {
    case O_I8: ((int8_t *)out)[i] = (int8_t)y; break;
    case O_U8: ((uint8_t *)out)[i] = (uint8_t)y; break;
    default: ((int16_t *)out)[i] = (int16_t)y; break;
    }
}

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
        int64_t p = (r / rows_per_block) * c;                                                \
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

/* The post unit (REQUANT) on `rows` x `c` accumulators, row-major; row r uses the parameters
 * of block r / rows_per_block (each block holds c channels). Returns 1 if some acc + bias
 * left int32 (ERR_WARN_WRAP32), else 0. act_lo/act_hi: ACT_MIN/ACT_MAX as signed 32-bit;
 * type_lo/type_hi: the lane type's range. */
int dtpu_post_exact(int akind, const void *acc, int64_t rows, int64_t c, int64_t rows_per_block,
                    const int64_t *bias, const int64_t *mult, const int64_t *shift,
                    const int64_t *zp, int variant, int64_t act_lo, int64_t act_hi,
                    int64_t type_lo, int64_t type_hi, int okind, void *out) {
    int wrapped = 0;
    BY_ACC(EXACT_BY_VARIANT)
    return wrapped;
}

/* The fused post unit: v = acc*scale + offset; v -= delta where v < threshold (numpy:
 * v - (v < threshold) * delta); clip to [lo, hi] as numpy does; floor. Parameters per block as
 * in dtpu_post_exact. */
#define FUSED_LOOP(ATYPE, OTYPE)                                                             \
    for (int64_t r = 0; r < rows; r++) {                                                     \
        int64_t p = (r / rows_per_block) * c;                                                \
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

void dtpu_post_fused(int akind, const void *acc, int64_t rows, int64_t c, int64_t rows_per_block,
                     const double *scale, const double *offset, const double *thr,
                     const double *delta, double lo, double hi, int okind, void *out) {
    BY_ACC(FUSED_LOOP)
}

/* Depthwise accumulators: x (nchunk, ih, iw, cl) 8-bit lanes (signed if xsigned), w (taps,
 * nchunk*cl) int32 with WGT_OFFSET applied, acc (nchunk, oh, ow, cl) int32 =
 * sum over the taps inside the image of (x + in_off) * w (taps in the padding add 0). The
 * caller proves |acc| < 2^31. */
#define DW_LOOP(XTYPE)                                                                       \
    for (int64_t ch = 0; ch < nchunk; ch++)                                                  \
        for (int64_t oy = 0; oy < oh; oy++)                                                  \
            for (int64_t ox = 0; ox < ow; ox++) {                                            \
                int32_t *a = acc + ((ch * oh + oy) * ow + ox) * cl;                          \
                memset(a, 0, (size_t)cl * sizeof(int32_t));                                  \
                for (int64_t ky = 0; ky < kh; ky++) {                                        \
                    int64_t iy = oy * sy - pt + ky * dy;                                     \
                    if (iy < 0 || iy >= ih) continue;                                        \
                    for (int64_t kx = 0; kx < kw; kx++) {                                    \
                        int64_t ix = ox * sx - pl + kx * dx;                                 \
                        if (ix < 0 || ix >= iw) continue;                                    \
                        const XTYPE *xp = (const XTYPE *)x + ((ch * ih + iy) * iw + ix) * cl; \
                        const int32_t *wp = w + (ky * kw + kx) * nchunk * cl + ch * cl;      \
                        for (int64_t j = 0; j < cl; j++)                                     \
                            a[j] += ((int32_t)xp[j] + off) * wp[j];                          \
                    }                                                                        \
                }                                                                            \
            }

void dtpu_dw_acc(int xsigned, const void *x, int64_t nchunk, int64_t ih, int64_t iw, int64_t cl,
                 const int32_t *w, int64_t kh, int64_t kw, int64_t oh, int64_t ow, int64_t sy,
                 int64_t sx, int64_t dy, int64_t dx, int64_t pt, int64_t pl, int32_t off,
                 int32_t *acc) {
    if (xsigned) { DW_LOOP(int8_t) }
    else { DW_LOOP(uint8_t) }
}
