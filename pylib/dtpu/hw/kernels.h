/* kernels.h: the structs and entry points of kernels.c, written once: kernels.c includes this
 * file, and dtpu.hw.kernels hands the same text to cffi's cdef (so it holds only what cffi
 * parses: typedefs, prototypes and comments; no preprocessor lines). */

/* A job's post unit, bound once (dtpu.hw.kernels): `rows` x `c` accumulators row-major, row r
 * takes the parameters of block r / rows_per_block (c entries each). exact: the int64 post
 * unit (bias, mult, shift, zp: int64; act_lo/act_hi: ACT_MIN/ACT_MAX as signed 32-bit;
 * type_lo/type_hi: the lane type's range); else the fused map (scale, offset, thr, delta:
 * double; clip to [lo, hi]). */
typedef struct {
    int exact, akind, okind, variant;
    int64_t c, rows_per_block;
    const int64_t *bias, *mult, *shift, *zp;
    int64_t act_lo, act_hi, type_lo, type_hi;
    const double *scale, *offset, *thr, *delta;
    double lo, hi;
} dtpu_post_t;

typedef struct {
    int xsigned;
    int64_t nchunk, ih, iw, cl, kh, kw, oh, ow, sy, sx, dy, dx, pt, pl;
    int32_t off;
    const int32_t *w;
    /* w tiled: (taps, nchunk, rep*cl), each chunk's cl weights repeated rep times */
    int64_t rcl;
    const int32_t *wt;
} dtpu_dw_t;

/* the memory model's cycle simulations (dtpu.hw.units.load.stream_sim, dtpu.hw.units.store.store_sim) */
typedef struct {
    int64_t n, nw, per_word, intake, rd_free;
    int64_t rl, burst, outst, ef_d, rq_d, buf_d, to_pk;
    int64_t blk_next, blk_left, blk_words, blk_gap, blk_addr;
    const int64_t *wa, *need;
    /* outputs */
    int64_t stall, first, end, beats, blk_next_out, n_blk;
    int64_t *blk_reads;     /* 2 * blk_left: first beat, last beat + 1 of each block read */
    int64_t *takes;         /* nw, or NULL */
    /* the store unit (n_res > 0: units.load.stream_sim's `res`, class units.store.StoreWrites) */
    int64_t n_res, hold, aw_d, slot, wl, end0, tail;
    const int64_t *res_t, *res_wa;
    int64_t w_end;          /* output: the last write response + 1, INT64_MIN: none */
} dtpu_stream_t;

typedef struct {
    int64_t n, wq, wl, burst, outst, max_gap, n_prior;
    const int64_t *addr, *kept, *offer, *prior;
    int64_t *hs, *b_due;
    int64_t held, last_b, n_b, w_beats;
} dtpu_store_t;

/* the load unit's WINDOWS stream (dtpu.hw.units.load.window_index, sliced): `es`-byte
 * elements of an (n, h, w, c) tensor, per output pixel lanes j0..j1-1 of its K-vector
 * (tap-major: lane j is channel j % c of tap j / c, taps row-major over kh x kw); lanes of taps
 * outside the image and lanes past kh*kw*c are `pad` (its low es bytes, little-endian) */
typedef struct {
    int64_t es, n, h, w, c, kh, kw, sy, sx, dy, dx, pt, pl, oh, ow, j0, j1;
    uint64_t pad;
} dtpu_gather_t;

/* a GEMM of 8-bit lanes with few columns (a streamed node's pages): acc (m, c) int32 = a (m, k)
 * int8 (asigned) or uint8 @ W, W given transposed (c, kp) as int16 (weights + WGT_OFFSET; kp
 * >= k a multiple of 16, the rows' lanes past k zero), plus coff[j] per column when coff is
 * not NULL; the caller proves |acc| < 2^31 */
typedef struct {
    int asigned;
    int64_t m, k, c, kp;
    const int16_t *wt;
    const int32_t *coff;
} dtpu_gemm_t;

int dtpu_post(const dtpu_post_t *P, const void *acc, int64_t rows, void *out);
int dtpu_dw(const dtpu_dw_t *D, const dtpu_post_t *P, const void *x, void *acc, void *out);
int dtpu_stream_sim(dtpu_stream_t *S);
int dtpu_store_sim(dtpu_store_t *S);
int dtpu_gather_windows(const dtpu_gather_t *G, const void *x, void *out);
int dtpu_gemm_i8(const dtpu_gemm_t *G, const void *a, int32_t *acc);

/* One RUN of a command list run again (dtpu.hw.replay), bound once: the load unit's gather,
 * the job's datapath and the store unit's writes in one call.
 * gather: 0 the words are already in `words`; 1 dtpu_gather_windows(G, x, words); 2 1x1 over
 *   the whole image: `rows` rows of `row_in` bytes of x to the first bytes of `words` rows of
 *   `row_out` bytes (the rest of each row is PAD, written once by the caller).
 * job: 1 dtpu_gemm_i8(M) into acc, then dtpu_post(P, acc, post_rows) into out; 2
 *   dtpu_gemm_i8(M) into out (the int32 RAW lanes).
 * store: 0 nothing (out is the destination); 1 the items copied; 2 added to int64 sums; 3
 *   written to int64 sums. Items: for each pixel p < pix, o < outer, i < inner, at channel
 *   c0 = ch0 + (o*inner + i)*gw while c0 < hi, min(gw, hi - c0) elements of `ses` bytes
 *   (signed for 2 and 3) from out + ((o*pix + p)*inner + i)*wstride bytes to
 *   dst + (p*dstc + c0)*des bytes.
 * memo (or NULL): RUNs of one stream (a streamed node's pages) share it and `words`: the
 *   gather is skipped while x's `xbytes` bytes equal the copy taken at the last one.
 * Returns the post unit's flag (job 1), 0, or -1 when the GEMM found no scratch. */
typedef struct {
    int64_t xbytes, valid;
    uint8_t *xcopy;
} dtpu_memo_t;

typedef struct {
    int gather, job, store;
    dtpu_memo_t *memo;
    const dtpu_gather_t *G;
    const void *x;
    void *words;
    int64_t rows, row_in, row_out;
    const dtpu_gemm_t *M;
    int32_t *acc;
    const dtpu_post_t *P;
    int64_t post_rows;
    void *out;
    void *dst;
    int64_t pix, outer, inner, gw, ch0, hi, dstc, wstride, ses, des;
} dtpu_run_t;

int dtpu_run(const dtpu_run_t *R);
