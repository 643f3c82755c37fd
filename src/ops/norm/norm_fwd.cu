/*
 * norm_fwd.cu - LayerNorm, RMSNorm and AdaLayerNorm forward: y = x_hat * w_eff + b, one
 * pass over HBM.
 *
 * Layout legend: X, Y are [rows, cols] with a row stride (the host collapsed the outer
 * dims) and unit stride inside a row; scale and bias are [cols], or with PER_SAMPLE
 * (AdaLayerNorm) [count, cols] rows found through a norm_param_map per row; mean and
 * inv_std are f32, one per row, with their own strides.
 *
 * The row lives in registers (see norm_kernel.cuh for who holds which columns): each
 * thread loads its NV units of the row once, the row group reduces the sum, then (for
 * LayerNorm) the centred sum of squares over the same registers, so the variance is the
 * two-pass one, never E[x^2] - E[x]^2 (one block barrier per reduction).  A one-reduction
 * variant that merged per-thread (count, mean, M2) summaries with Chan's formula was
 * measured on the H200 (2026-12-02) at 0.54-0.72x of this: the merges' divisions, done
 * redundantly by every thread, cost more than the barrier they save.  Then y is written
 * once.  HBM sees x read once and y written once, which is the whole cost of this kernel.
 *
 * The kernel walks rows with a grid stride, so any grid covers them: the host launches a
 * persistent grid (sized to the resident blocks) or, for RMSNorm rows of small row
 * groups, one block per ROWS_PER_BLOCK rows (norm_cuda_config.c says why).  With STAGES > 1 (vector keys) each row group
 * keeps its next STAGES - 1 rows in flight through a cp.async ring in shared memory;
 * otherwise it issues the loads of its next row into registers before it computes the
 * current one.  x is loaded with L1::no_allocate or cp.async.cg (read once, past L1) so
 * that scale and bias, read for every row, stay in L1.
 *
 * The chunked path walks a row in chunks of GROUP * units units, three times (sum, centred
 * squares, output), re-reading x from L1/L2.  It serves rows too long for registers
 * (keys with LOOPED: GROUP == BLOCK, one row per block) and, with single elements, the
 * misaligned-pointer fallback of vector keys, whose registers it keeps small.  It exists
 * for coverage, not speed.
 *
 * Extra defines: ZERO_CENTERED (w_eff = 1 + w), LOOPED, STAGES (ring depth, vector keys),
 * PER_SAMPLE (parameter rows per row of X), ROW_SPLIT (rows shared by the blocks of a
 * cluster, norm_kernel.cuh; the mean and inv_std of a row are stored by rank 0).
 */
#include "norm_kernel.cuh"

#if defined(KIND_LAYER) == defined(KIND_RMS)
#error "define exactly one of KIND_LAYER and KIND_RMS"
#endif

/* Per-thread sums over the thread's elements in FWD_ACC independent accumulators (NORM_ILP:
 * 4, so each dependent chain is a quarter as long; the block's lifetime, not the issue rate,
 * bounds the one-pass forward), added pairwise at the end: a fixed order either way. */
#if defined(NORM_ILP)
#define FWD_ACC 4
#else
#define FWD_ACC 1
#endif

FROST_DEVICE float fwd_acc_total(const float *a)
{
#if FWD_ACC == 4
    return (a[0] + a[1]) + (a[2] + a[3]);
#else
    return a[0];
#endif
}

/* LN_WIDE (16-bit I/O, vector keys): fwd_process converts the thread's row to f32 words
 * once, so the passes over it (sum, centred squares, output) read floats instead of
 * unpacking each 16-bit element again.  fwd_x reads element i of a row in either form:
 * every vec > 1 row of such a key comes through fwd_process, the chunked fallback (vec 1)
 * keeps the I/O words. */
#if defined(LN_WIDE) && IO_BYTES == 2 && VEC > 1 && !defined(LOOPED)
#define FWD_WIDE 1
#else
#define FWD_WIDE 0
#endif

FROST_DEVICE float fwd_x(const uint32_t *raw, const int i, const int vec)
{
    return norm_raw_elem(raw, i, FWD_WIDE && vec > 1 ? FROST_DT_F32 : IO_DT);
}

/* Sum of x (LayerNorm) or x^2 (RMSNorm) over the thread's `units` units. */
FROST_DEVICE float fwd_partial_sum(const uint32_t *raw, const int vec, const int units)
{
    float s[FWD_ACC];
#pragma unroll
    for (int a = 0; a < FWD_ACC; a++)
        s[a] = 0.0f;
#pragma unroll
    for (int i = 0; i < units * vec; i++) {
        const float v = fwd_x(raw, i, vec);
#if defined(KIND_LAYER)
        s[i % FWD_ACC] += v;
#else
        s[i % FWD_ACC] = fmaf(v, v, s[i % FWD_ACC]);
#endif
    }
    return fwd_acc_total(s);
}

#if defined(KIND_LAYER)
/* Sum of (x - mean)^2 over the thread's valid units (cols counted from the chunk start). */
FROST_DEVICE float fwd_partial_sq(const uint32_t *raw, int lane, int cols, float mean, const int vec, const int units)
{
    float q[FWD_ACC];
#pragma unroll
    for (int a = 0; a < FWD_ACC; a++)
        q[a] = 0.0f;
#pragma unroll
    for (int k = 0; k < units; k++) {
        if (norm_unit_valid(k, lane, cols, vec)) {
#pragma unroll
            for (int j = 0; j < vec; j++) {
                const float d = fwd_x(raw, k * vec + j, vec) - mean;
                q[(k * vec + j) % FWD_ACC] = fmaf(d, d, q[(k * vec + j) % FWD_ACC]);
            }
        }
    }
    return fwd_acc_total(q);
}
#endif

/* x_hat = (x - mean) * rstd.  With 16-bit I/O, LayerNorm takes it as one fma,
 * x * rstd + (-mean * rstd): one instruction an element less (1.01x at most shapes, sweep 23,
 * 2026-12-03), and the rounding of mean * rstd (half an f32 ulp of |mean| / std) stays far
 * below the output's half ulp unless |mean| / std passes 2^14, beyond what a 16-bit x can
 * resolve.  f32 I/O and LN_EXACT (FROST_NORM_TUNE lnfma=0)
 * subtract first. */
#if defined(KIND_LAYER) && IO_BYTES == 2 && !defined(LN_EXACT)
#define FWD_XHAT(x, mean, rstd, shift) fmaf((x), (rstd), (shift))
#else
#define FWD_XHAT(x, mean, rstd, shift) (((x) - (mean)) * (rstd))
#endif

#if defined(PARAMS_REG) && VEC > 1 && !defined(PER_SAMPLE) && !defined(LOOPED)
/* Scale and bias held in registers (PARAMS_REG, vector path; norm_kernel.cuh's held
 * parameters): loaded once, next to the first row's x, instead of once a row after the
 * statistics. */
#define FWD_PREG 1
typedef struct fwd_preg {
    uint32_t w[NV * NORM_HELD_WORDS(SCALE_DT)];
    uint32_t b[NV * NORM_HELD_WORDS(BIAS_DT)];
} fwd_preg;

/* Loads the thread's units of scale and bias. */
FROST_DEVICE void fwd_preg_load(fwd_preg *r, const norm_fwd_params *p, int lane)
{
#if SCALE_DT != FROST_DT_NONE
    norm_held_load(r->w, p->scale, lane, p->cols, SCALE_DT);
#endif
#if BIAS_DT != FROST_DT_NONE
    norm_held_load(r->b, p->bias, lane, p->cols, BIAS_DT);
#endif
    (void)r, (void)p, (void)lane;
}

#else
#define FWD_PREG 0
typedef struct fwd_preg {
    int unused;
} fwd_preg;
#endif

/* Writes the thread's units of y for one row (or chunk: pointers and cols offset by c0);
 * scale and bias point at the row's parameter rows, or, with held (vector path, whole
 * rows), come from the thread's held units. */
FROST_DEVICE void fwd_write(const void *scale, const void *bias, const fwd_preg *held, const uint32_t *raw,
                            frost_io *yrow, int lane, int cols, int c0, float mean, float rstd, const int vec,
                            const int units)
{
    const float shift = -mean * rstd;
    (void)shift, (void)held;
#if FWD_PREG
    fwd_preg pinned;
    if (held) {
        pinned = *held;
        norm_held_pin(pinned.w, (int)(sizeof pinned.w / 4));
        norm_held_pin(pinned.b, (int)(sizeof pinned.b / 4));
    }
#endif
#pragma unroll
    for (int k = 0; k < units; k++) {
        const int col = (k * GROUP + lane) * vec;
        if (col < cols) {
            float w[VEC], b[VEC], out[VEC];
            if (!held) {
                norm_load_weight(w, scale, c0 + col, vec);
#if BIAS_DT != FROST_DT_NONE
                norm_load_param(b, bias, c0 + col, vec, BIAS_DT);
#endif
            }
            (void)bias, (void)b;
#pragma unroll
            for (int j = 0; j < vec; j++) {
#if FWD_PREG
                /* converted where used: see norm_held_pin */
                if (held) {
                    w[j] = norm_held_scale(pinned.w, k, j);
#if BIAS_DT != FROST_DT_NONE
                    b[j] = norm_held_elem(pinned.b, k, j, BIAS_DT);
#endif
                }
#endif
                const float xhat = FWD_XHAT(fwd_x(raw, k * vec + j, vec), mean, rstd, shift);
#if BIAS_DT != FROST_DT_NONE
                out[j] = fmaf(xhat, w[j], b[j]);
#else
                out[j] = xhat * w[j];
#endif
            }
            norm_store_unit(yrow, c0 + col, out, vec);
        }
    }
}

/* Writes y of one row (or, with c0 > 0, of a chunk of it). */
FROST_DEVICE void fwd_write_row(const norm_fwd_params *p, const fwd_preg *held, const uint32_t *raw, int64_t row,
                                int lane, int cols, int c0, float mean, float rstd, const int vec, const int units)
{
    fwd_write(norm_param_row(p->scale, p->scale_map, row, SCALE_DT), norm_param_row(p->bias, p->bias_map, row, BIAS_DT),
              held, raw, (frost_io *)p->y + NORM_ROW(p, y, row), lane, cols, c0, mean, rstd, vec, units);
}

FROST_DEVICE void fwd_store_stats(const norm_fwd_params *p, int64_t row, float mean, float rstd)
{
    if (p->mean)
        p->mean[NORM_ROW(p, mean, row)] = mean;
    if (p->inv_std)
        p->inv_std[NORM_ROW(p, inv_std, row)] = rstd;
}

#if NORM_RANKS > 1 && (defined(LN_MERGE) || defined(PER_SAMPLE) || defined(LOOPED) || VEC == 1)
#error "split rows (ROW_SPLIT) are whole vector rows of shared parameters; LayerNorm's take LN_EQUAL"
#endif

#if defined(KIND_LAYER) && defined(LN_MERGE) && GROUP > 32
/* LayerNorm statistics of a register-resident row with one block barrier instead of two:
 * each warp takes the mean of its own valid columns and the sum of squares about that mean
 * (both over registers, so each is a two-pass result), then the lanes of every warp merge
 * the row's warps exactly in a fixed butterfly (Chan et al.):
 *     mean = sum n_w mean_w / cols,   M2 = sum (M2_w + n_w (mean_w - mean)^2). */
FROST_DEVICE void fwd_layer_stats(const norm_fwd_params *p, const uint32_t *cur, int lane, norm_red *red,
                                  const int vec, const int units, float *mean, float *rstd)
{
    int n = 0;
#pragma unroll
    for (int k = 0; k < units; k++)
        n += norm_unit_valid(k, lane, p->cols, vec) ? vec : 0;
    const int nw = __reduce_add_sync(0xffffffffu, n);
    const float mw = nw > 0 ? frost_warp_sum(fwd_partial_sum(cur, vec, units)) / (float)nw : 0.0f;
    const float qw = frost_warp_sum(fwd_partial_sq(cur, lane, p->cols, mw, vec, units));
    float *buf = norm_red_next(red);
    if ((threadIdx.x & 31) == 0) {
        buf[3 * (threadIdx.x / 32)] = (float)nw;
        buf[3 * (threadIdx.x / 32) + 1] = mw;
        buf[3 * (threadIdx.x / 32) + 2] = qw;
    }
    norm_group_barrier();
    /* lane l takes warp l % (GROUP / 32) of the row; butterflies add over the warps */
    const float *mine = buf + 3 * ((threadIdx.x / GROUP) * (GROUP / 32) + (threadIdx.x & 31) % (GROUP / 32));
    const float n_l = mine[0], m_l = mine[1];
    float s = n_l * m_l;
#pragma unroll
    for (int o = GROUP / 64; o > 0; o >>= 1)
        s += __shfl_xor_sync(0xffffffffu, s, o);
    const float m = s * p->inv_cols, d = m_l - m;
    float q = fmaf(n_l * d, d, mine[2]);
#pragma unroll
    for (int o = GROUP / 64; o > 0; o >>= 1)
        q += __shfl_xor_sync(0xffffffffu, q, o);
    *mean = m;
    *rstd = rsqrtf(q * p->inv_cols + p->epsilon);
}
#endif

#if defined(KIND_LAYER) && defined(LN_EQUAL)
/* Merges this lane's (mean, M2) summary of c elements with lane ^ o's summary of as many
 * (Chan et al. with equal counts: no division):
 *     mean = (m_a + m_b) / 2,   M2 = M2_a + M2_b + (m_a - m_b)^2 c / 2.
 * Both lanes of the pair compute the same bits (each operation is symmetric in a and b). */
FROST_DEVICE void fwd_merge_equal(float *m, float *q, int o, float c)
{
    const float mo = __shfl_xor_sync(0xffffffffu, *m, o), qo = __shfl_xor_sync(0xffffffffu, *q, o);
    const float d = mo - *m;
    *q = fmaf(d * d, 0.5f * c, *q + qo);
    *m = 0.5f * (*m + mo);
}

/* LayerNorm statistics of a register-resident row that fills its row group exactly (every
 * thread holds units * vec columns): each thread takes the mean and the centred sum of
 * squares of its own columns from registers, then summaries of equal counts merge in
 * butterflies, over the lanes and then (one barrier) over the row's warps.  Every merge is
 * exact in the two-pass sense and every lane ends with the same bits; the dependent
 * shuffle chain is half that of a sum followed by a centred sum. */
FROST_DEVICE void fwd_layer_stats(const norm_fwd_params *p, const uint32_t *cur, norm_red *red, const int vec,
                                  const int units, float *mean, float *rstd)
{
    const int e = units * vec;
    float m = fwd_partial_sum(cur, vec, units) * (1.0f / (float)e), qa[FWD_ACC];
#pragma unroll
    for (int a = 0; a < FWD_ACC; a++)
        qa[a] = 0.0f;
#pragma unroll
    for (int i = 0; i < e; i++) {
        const float d = fwd_x(cur, i, vec) - m;
        qa[i % FWD_ACC] = fmaf(d, d, qa[i % FWD_ACC]);
    }
    float q = fwd_acc_total(qa);
    float c = (float)e;
#pragma unroll
    for (int o = 1; o < (GROUP < 32 ? GROUP : 32); o <<= 1, c *= 2.0f)
        fwd_merge_equal(&m, &q, o, c);
#if GROUP > 32
    /* the warps' summaries (of every block of a split row: equal counts too), means first */
    float *buf = norm_red_next(red);
    const int qs = NORM_TOTALS * (BLOCK / GROUP);
    norm_publish(red, buf, 0, m);
    norm_publish(red, buf, qs, q);
    norm_publish_wait(red, 2);
    /* lane l takes warp l % NORM_TOTALS of the row */
    const int mine = (threadIdx.x / GROUP) * (GROUP / 32) + (threadIdx.x & 31) % NORM_TOTALS;
    m = buf[mine];
    q = buf[qs + mine];
#pragma unroll
    for (int o = 1; o < NORM_TOTALS; o <<= 1, c *= 2.0f)
        fwd_merge_equal(&m, &q, o, c);
#else
    (void)red;
#endif
    *mean = m;
    *rstd = rsqrtf(q * p->inv_cols + p->epsilon);
}
#endif

/* Statistics and output of one register-resident row; every thread of the block calls
 * it (row >= rows: an idle group that only joins the reductions). */
FROST_DEVICE void fwd_process(const norm_fwd_params *p, const uint32_t *raw, int64_t row, int lane, norm_red *red,
                              const int vec, const int units, const fwd_preg *preg)
{
#if FWD_WIDE
    /* the row as f32 words (fwd_x); the empty asm keeps the compiler from converting again
     * from the 16-bit words where it runs short of registers */
    uint32_t cur[ELEMS];
#pragma unroll
    for (int i = 0; i < ELEMS; i++) {
        cur[i] = __float_as_uint(norm_elem(raw, i, vec));
        asm volatile("" : "+r"(cur[i]));
    }
#else
    const uint32_t *cur = raw;
#endif
#if defined(KIND_LAYER) && defined(LN_EQUAL)
    float mean, rstd;
    fwd_layer_stats(p, cur, red, vec, units, &mean, &rstd);
#elif defined(KIND_LAYER) && defined(LN_MERGE) && GROUP > 32
    float mean, rstd;
    fwd_layer_stats(p, cur, lane, red, vec, units, &mean, &rstd);
#elif defined(KIND_LAYER)
    const float s = norm_group_sum(fwd_partial_sum(cur, vec, units), red);
    const float mean = s * p->inv_cols;
    const float q = norm_group_sum(fwd_partial_sq(cur, lane, p->cols, mean, vec, units), red);
    const float rstd = rsqrtf(q * p->inv_cols + p->epsilon);
#else
    const float s = norm_group_sum(fwd_partial_sum(cur, vec, units), red);
    const float mean = 0.0f;
    const float rstd = rsqrtf(s * p->inv_cols + p->epsilon);
#endif
    if (row < p->rows) {
        if (lane == 0 && norm_split_rank() == 0)
            fwd_store_stats(p, row, mean, rstd);
        fwd_write_row(p, FWD_PREG && vec > 1 ? preg : 0, cur, row, lane, p->cols, 0, mean, rstd, vec, units);
    }
}

#if !defined(LOOPED) && !(defined(STAGES) && STAGES > 1 && VEC > 1)
/* Prefetching doubles the raw registers; a 1024-thread block has 64 registers a thread,
 * which a 16-byte-per-unit row of more than 8 words plus its prefetch does not fit. */
#if defined(NO_PREFETCH) /* one row a row group (a plain grid): nothing to prefetch */
#define PREFETCH 0
#else
#define PREFETCH (BLOCK < 1024 || ELEMS * IO_BYTES <= 32)
#endif

/* Register-resident rows: a persistent grid of blocks, each with ROWS_PER_BLOCK groups;
 * each thread holds NV units of its group's row and prefetches the next row's. */
FROST_DEVICE void fwd_rows(const norm_fwd_params *p, const int vec)
{
    NORM_RED(red);
    const int units = ELEMS / vec;
    const int group = threadIdx.x / GROUP, lane = threadIdx.x % GROUP;
    const frost_io *x = (const frost_io *)p->x;
    const int64_t step = norm_split_blocks() * ROWS_PER_BLOCK;
    int64_t row = norm_split_block() * ROWS_PER_BLOCK + group;

    uint32_t cur[ELEMS];
#pragma unroll
    for (int i = 0; i < ELEMS; i++)
        cur[i] = 0u;
#if PREFETCH
    uint32_t next[ELEMS];
#pragma unroll
    for (int i = 0; i < ELEMS; i++)
        next[i] = 0u;
    if (row < p->rows)
        norm_load_row(cur, x + NORM_ROW(p, x, row), lane, p->cols, vec, units);
#endif
    fwd_preg preg;
#if FWD_PREG
    if (vec > 1)
        fwd_preg_load(&preg, p, lane);
#endif

    /* The loop bound is the block's first row, so every thread runs the same trips. */
    for (int64_t first = row - group; first < p->rows; first += step, row += step) {
#if PREFETCH
        if (row + step < p->rows)
            norm_load_row(next, x + NORM_ROW(p, x, row + step), lane, p->cols, vec, units);
#else
        if (row < p->rows)
            norm_load_row(cur, x + NORM_ROW(p, x, row), lane, p->cols, vec, units);
#endif
        fwd_process(p, cur, row, lane, red, vec, units, &preg);
#if PREFETCH
#pragma unroll
        for (int i = 0; i < ELEMS; i++)
            cur[i] = next[i];
#endif
    }
}
#endif

#if !defined(LOOPED) && defined(STAGES) && STAGES > 1 && VEC > 1
/* Staged rows: as fwd_rows on the vector path, but the next STAGES - 1 rows of each group
 * wait in the shared-memory ring (norm_kernel.cuh) instead of in registers. */
FROST_DEVICE void fwd_rows_staged(const norm_fwd_params *p)
{
    extern __shared__ norm_cell ring[];
    NORM_RED(red);
    const int group = threadIdx.x / GROUP, lane = threadIdx.x % GROUP;
    const frost_io *x = (const frost_io *)p->x;
    const int64_t step = norm_split_blocks() * ROWS_PER_BLOCK;
    int64_t row = norm_split_block() * ROWS_PER_BLOCK + group;
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        const int64_t r = row + s * step;
        norm_stage_row(ring, s, 0, 1, x + NORM_ROW(p, x, r < p->rows ? r : 0), lane, p->cols, r < p->rows);
        norm_cp_async_commit();
    }
    fwd_preg preg;
#if FWD_PREG
    fwd_preg_load(&preg, p, lane);
#endif
    int stage = 0;
    for (int64_t first = row - group; first < p->rows; first += step, row += step) {
        const int64_t ahead = row + (STAGES - 1) * step;
        norm_stage_row(ring, stage == 0 ? STAGES - 1 : stage - 1, 0, 1,
                       x + NORM_ROW(p, x, ahead < p->rows ? ahead : 0), lane, p->cols, ahead < p->rows);
        norm_cp_async_commit();
        norm_cp_async_wait_ring();
        uint32_t cur[ELEMS];
        norm_unstage_row(cur, ring, stage, 0, 1);
        fwd_process(p, cur, row, lane, red, VEC, NV, &preg);
        stage = stage + 1 == STAGES ? 0 : stage + 1;
    }
    norm_cp_async_drain();
}
#endif

#if defined(LOOPED) || VEC > 1
/* Elements per thread and chunk of the misaligned fallback of vector keys. */
#define FALLBACK_UNITS 8
#define CHUNK_WORDS (ELEMS > FALLBACK_UNITS ? ELEMS : FALLBACK_UNITS)

/* Chunked rows: as above, but the group walks its row in chunks of GROUP * units units,
 * reading x once per pass. */
FROST_DEVICE void fwd_rows_chunked(const norm_fwd_params *p, const int vec, const int units)
{
    NORM_RED(red);
    const int group = threadIdx.x / GROUP, lane = threadIdx.x % GROUP;
    const int chunk = GROUP * units * vec;
    const int64_t step = norm_split_blocks() * ROWS_PER_BLOCK;
    int64_t row = norm_split_block() * ROWS_PER_BLOCK + group;
    uint32_t raw[CHUNK_WORDS];

    for (int64_t first = row - group; first < p->rows; first += step, row += step) {
        const bool active = row < p->rows;
        const frost_io *xrow = (const frost_io *)p->x + NORM_ROW(p, x, active ? row : 0);
        float s = 0.0f;
        for (int c0 = 0; active && c0 < p->cols; c0 += chunk) {
            norm_load_row(raw, xrow + c0, lane, p->cols - c0, vec, units);
            s += fwd_partial_sum(raw, vec, units);
        }
        s = norm_group_sum(s, red);
#if defined(KIND_LAYER)
        const float mean = s * p->inv_cols;
        float q = 0.0f;
        for (int c0 = 0; active && c0 < p->cols; c0 += chunk) {
            norm_load_row(raw, xrow + c0, lane, p->cols - c0, vec, units);
            q += fwd_partial_sq(raw, lane, p->cols - c0, mean, vec, units);
        }
        q = norm_group_sum(q, red);
        const float rstd = rsqrtf(q * p->inv_cols + p->epsilon);
#else
        const float mean = 0.0f;
        const float rstd = rsqrtf(s * p->inv_cols + p->epsilon);
#endif
        if (!active)
            continue;
        if (lane == 0 && norm_split_rank() == 0)
            fwd_store_stats(p, row, mean, rstd);
        for (int c0 = 0; c0 < p->cols; c0 += chunk) {
            norm_load_row(raw, xrow + c0, lane, p->cols - c0, vec, units);
            fwd_write_row(p, 0, raw, row, lane, p->cols - c0, c0, mean, rstd, vec, units);
        }
    }
}
#endif

#if NORM_RANKS > 1
/* This block's share of a split row (norm_kernel.cuh): its columns as a row of their own;
 * inv_cols stays that of the whole row. */
FROST_DEVICE norm_fwd_params fwd_split_share(const norm_fwd_params *p)
{
    norm_fwd_params q = *p;
    q.cols = p->cols / NORM_RANKS;
    const int64_t c0 = (int64_t)norm_split_rank() * q.cols;
    q.x = (const frost_io *)p->x + c0;
    q.y = (frost_io *)p->y + c0;
#if SCALE_DT != FROST_DT_NONE
    q.scale = norm_param_at(p->scale, c0, SCALE_DT);
#endif
#if BIAS_DT != FROST_DT_NONE
    q.bias = norm_param_at(p->bias, c0, BIAS_DT);
#endif
    return q;
}
#endif

extern "C" __global__ void NORM_SPLIT_DIMS __launch_bounds__(BLOCK, MIN_BLOCKS)
    norm_fwd_kernel(const __grid_constant__ norm_fwd_params params)
{
#if NORM_RANKS > 1
    const norm_fwd_params p = fwd_split_share(&params); /* NORM_RED then meets the cluster */
#else
    const norm_fwd_params &p = params;
#endif
#if defined(LOOPED)
#if VEC > 1
    if (p.vec_ok) {
        fwd_rows_chunked(&p, VEC, NV);
        return;
    }
#endif
    fwd_rows_chunked(&p, 1, ELEMS);
#elif VEC > 1
    if (p.vec_ok) {
#if defined(STAGES) && STAGES > 1
        fwd_rows_staged(&p);
#else
        fwd_rows(&p, VEC);
#endif
        return;
    }
    fwd_rows_chunked(&p, 1, FALLBACK_UNITS);
#else
    fwd_rows(&p, 1);
#endif
}
