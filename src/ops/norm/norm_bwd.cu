/*
 * norm_bwd.cu - LayerNorm, RMSNorm and AdaLayerNorm backward: dx for every row, and per
 * row group the column sums that become d_scale and d_bias.
 *
 * Layout legend: X, dY, dX are [rows, cols] (row strides, unit stride in a row); scale
 * [cols] (PER_SAMPLE: a parameter row per row of X, see norm_param_map); saved mean /
 * inv_std f32, one per row.  Per row, with g = dy * w_eff and
 * x_hat = (x - mean) * rstd:
 *     LayerNorm  dx = rstd * (g - mean(g) - x_hat * mean(g * x_hat))
 *     RMSNorm    dx = rstd * (g - x_hat * mean(g * x_hat))
 *     d_scale += dy * x_hat,   d_bias += dy       (summed over rows)
 * Missing saved statistics are recomputed from the register-resident x (two-pass mean
 * and centred variance, with epsilon), exactly as the reference engine does.
 *
 * Parameter gradients, deterministically.  Block b owns rows_per_block (+1) contiguous rows
 * of one segment (norm_kernel.cuh: one segment of all rows for LayerNorm / RMSNorm;
 * segments that never straddle two parameter rows of AdaLayerNorm's per-sample d_scale /
 * d_bias); its row group r takes every ROWS_PER_BLOCK-th of them starting at r and keeps,
 * in registers, running sums for the columns it holds.  At the end each group writes its
 * sums to its own row (b * ROWS_PER_BLOCK + r) of a f32 partial buffer in the workspace
 * (in lane order, see bwd_store_lanes; the chunked paths in column order), and
 * norm_bwd_reduce.cu adds the partial rows in index order, per parameter row (the
 * blocks of one parameter row's segments are consecutive, and so are their partial rows).
 * Every sum has a fixed order that depends only on the plan (grid size, rows), never on
 * timing, so d_scale and d_bias are bitwise repeatable run to run, with or without the
 * `deterministic` flag.
 *
 * The grid is persistent (the host sizes it to the resident blocks, fewer when rows are
 * few, so that the partial buffer stays small next to the tensors).  Each row group keeps
 * its next STAGES - 1 rows of x and dy in flight through a cp.async ring in shared memory
 * (vector keys with STAGES > 1), or else prefetches the next row into registers, before
 * it computes the current one.
 *
 * The chunked path (keys with LOOPED, and the misaligned fallback of vector keys) walks
 * each row several times in chunks and accumulates into its partial row in global
 * memory (each column of that row has one owner thread, so this is race-free and
 * deterministic too).
 *
 * Extra defines: ZERO_CENTERED, LOOPED, STAGES, BWD_CLUSTER (blocks a cluster: staged rows of
 * one row group a block store one partial row per cluster), DSCALE (produce d_scale partials), DBIAS,
 * PER_SAMPLE (scale read through scale_map), ROW_SPLIT (rows shared by the blocks of a cluster,
 * norm_kernel.cuh: each block stores its columns' sums into the cluster's partial row).
 */
#include "norm_kernel.cuh"

#if defined(KIND_LAYER) == defined(KIND_RMS)
#error "define exactly one of KIND_LAYER and KIND_RMS"
#endif

/* Per-row statistics of the thread's units; every thread of the block calls it.  Uses the
 * saved values when present (mean_s / rstd_s), else reduces over the row group. */
FROST_DEVICE void bwd_stats(const norm_bwd_params *p, const uint32_t *x, int lane, int cols, float mean_s,
                            float rstd_s, norm_red *red, const int vec, const int units, float *mean, float *rstd)
{
#if defined(KIND_LAYER)
    float mean_c = 0.0f;
    if (!p->mean || !p->inv_std) {
        float s = 0.0f;
#pragma unroll
        for (int i = 0; i < units * vec; i++)
            s += norm_elem(x, i, vec);
        mean_c = norm_group_sum(s, red) * p->inv_cols;
    }
    *mean = p->mean ? mean_s : mean_c;
#else
    const float mean_c = 0.0f;
    *mean = 0.0f;
#endif
    if (p->inv_std) {
        *rstd = rstd_s;
    } else {
        float q = 0.0f;
#pragma unroll
        for (int k = 0; k < units; k++) {
            if (norm_unit_valid(k, lane, cols, vec)) {
#pragma unroll
                for (int j = 0; j < vec; j++) {
                    const float d = norm_elem(x, k * vec + j, vec) - mean_c;
                    q = fmaf(d, d, q);
                }
            }
        }
        *rstd = rsqrtf(norm_group_sum(q, red) * p->inv_cols + p->epsilon);
    }
}

/* The rows [*start, *end) of this block (see norm_bwd_params). */
FROST_DEVICE void bwd_block_rows(const norm_bwd_params *p, int64_t *start, int64_t *end)
{
    const int64_t b = norm_split_block();
    const int64_t segment = b / p->blocks_per_segment;
    const int64_t seg_start = segment * p->rows_per_segment;
    const int64_t seg_end = seg_start + p->rows_per_segment < p->rows ? seg_start + p->rows_per_segment : p->rows;
    const int64_t j = b % p->blocks_per_segment;
    const int64_t n = p->rows_per_block + (j < p->rows_extra);
    *start = seg_start + j * p->rows_per_block + (j < p->rows_extra ? j : p->rows_extra);
    *end = *start + n < seg_end ? *start + n : seg_end;
}

/* The scale row that row `row` reads. */
FROST_DEVICE const void *bwd_scale_row(const norm_bwd_params *p, int64_t row)
{
    return norm_param_row(p->scale, p->scale_map, row, SCALE_DT);
}

#if defined(PARAMS_REG) && defined(STAGES) && STAGES > 1 && VEC > 1 && !defined(PER_SAMPLE) && \
    !defined(LOOPED) && SCALE_DT != FROST_DT_NONE
/* Staged rows hold the thread's units of scale in registers (PARAMS_REG; norm_kernel.cuh's
 * held parameters) instead of loading them twice a row. */
#define BWD_HELD 1
#define BWD_HELD_WORDS (NV * NORM_HELD_WORDS(SCALE_DT))
#else
#define BWD_HELD_WORDS 1 /* so that pinned copies can be declared; never read */
#endif

/* Loads the thread's held scale units (nothing when the kernel loads its scale per row). */
FROST_DEVICE void bwd_load_held(uint32_t held[BWD_HELD_WORDS], const norm_bwd_params *p, int lane)
{
#if defined(BWD_HELD)
    norm_held_load(held, p->scale, lane, p->cols, SCALE_DT);
#else
    (void)p, (void)lane;
    held[0] = 0u;
#endif
}

/* A row's copy of the held scale words (norm_held_pin), or NULL when the kernel loads its
 * scale per row. */
FROST_DEVICE const uint32_t *bwd_pin_held(uint32_t pinned[BWD_HELD_WORDS], const uint32_t *held)
{
#if defined(BWD_HELD)
#pragma unroll
    for (int t = 0; t < BWD_HELD_WORDS; t++)
        pinned[t] = held[t];
    norm_held_pin(pinned, BWD_HELD_WORDS);
    return pinned;
#else
    (void)pinned, (void)held;
    return 0;
#endif
}

/* The effective scale of unit k at column col: from the held words (a pinned copy) when
 * the kernel holds them, else loaded. */
FROST_DEVICE void bwd_weight(float w[VEC], const void *scale, const uint32_t *held, int k, int col, const int vec)
{
#if defined(BWD_HELD)
    if (held) {
#pragma unroll
        for (int j = 0; j < VEC; j++)
            w[j] = norm_held_scale(held, k, j);
        return;
    }
#endif
    (void)held, (void)k;
    norm_load_weight(w, scale, col, vec);
}

/* Adds the thread's share of sum(g) and sum(g * x_hat). */
FROST_DEVICE void bwd_partial_dots(const void *scale, const uint32_t *held, const uint32_t *x, const uint32_t *dy,
                                   int lane, int cols, int c0, float mean, float rstd, const int vec, const int units,
                                   float *sg, float *sgx)
{
#pragma unroll
    for (int k = 0; k < units; k++) {
        const int col = (k * GROUP + lane) * vec;
        if (col < cols) {
            float w[VEC];
            bwd_weight(w, scale, held, k, c0 + col, vec);
#pragma unroll
            for (int j = 0; j < vec; j++) {
                const float xhat = (norm_elem(x, k * vec + j, vec) - mean) * rstd;
                const float g = norm_elem(dy, k * vec + j, vec) * w[j];
                *sg += g;
                *sgx = fmaf(g, xhat, *sgx);
            }
        }
    }
}

/* Writes dx for the thread's units and adds dy * x_hat and dy to the column sums acc_w and
 * acc_b (indexed by the thread's element i = k * vec + j). */
FROST_DEVICE void bwd_write_dx(const void *scale, const uint32_t *held, const uint32_t *x, const uint32_t *dy,
                               frost_io *dxrow, int lane, int cols, int c0, float mean, float rstd, float mg, float mgx,
                               const int vec, const int units, float *acc_w, float *acc_b)
{
#pragma unroll
    for (int k = 0; k < units; k++) {
        const int col = (k * GROUP + lane) * vec;
        if (col < cols) {
            float w[VEC], out[VEC];
            bwd_weight(w, scale, held, k, c0 + col, vec);
#pragma unroll
            for (int j = 0; j < vec; j++) {
                const float xhat = (norm_elem(x, k * vec + j, vec) - mean) * rstd;
                const float d = norm_elem(dy, k * vec + j, vec);
                out[j] = rstd * (d * w[j] - mg - xhat * mgx);
#if defined(DSCALE)
                acc_w[k * vec + j] = fmaf(d, xhat, acc_w[k * vec + j]);
#endif
#if defined(DBIAS)
                acc_b[k * vec + j] += d;
#endif
            }
            norm_store_unit(dxrow, c0 + col, out, vec);
        }
    }
    (void)acc_w, (void)acc_b;
}

/* Stores (first) or adds `units` units of sums into a partial row in column order at
 * column offset c0 (the chunked paths). */
FROST_DEVICE void bwd_store_partial(float *prow, const float *acc, int lane, int cols, int c0, bool add,
                                    const int vec, const int units)
{
#pragma unroll
    for (int k = 0; k < units; k++) {
        const int col = (k * GROUP + lane) * vec;
        if (col < cols) {
#pragma unroll
            for (int j = 0; j < vec; j++)
                prow[c0 + col + j] = add ? prow[c0 + col + j] + acc[k * vec + j] : acc[k * vec + j];
        }
    }
}

FROST_DEVICE float *bwd_partial_row(float *base, const norm_bwd_params *p)
{
    const int group = threadIdx.x / GROUP;
    return base ? base + (norm_split_block() * ROWS_PER_BLOCK + group) * p->partial_stride : 0;
}

/* Reduces the row group's dot products to mean(g) (LayerNorm; 0 for RMSNorm) and
 * mean(g * x_hat); every thread of the block calls it. */
FROST_DEVICE void bwd_row_means(const norm_bwd_params *p, float sg, float sgx, norm_red *red, float *mg, float *mgx)
{
    norm_group_sum2(&sg, &sgx, red);
#if defined(KIND_LAYER)
    *mg = sg * p->inv_cols;
#else
    *mg = 0.0f;
#endif
    *mgx = sgx * p->inv_cols;
}

FROST_DEVICE void bwd_load_stats(const norm_bwd_params *p, int64_t row, float *mean_s, float *rstd_s)
{
    *mean_s = p->mean ? p->mean[NORM_ROW(p, mean, row)] : 0.0f;
    *rstd_s = p->inv_std ? p->inv_std[NORM_ROW(p, inv_std, row)] : 1.0f;
}

/* Staged rows read their saved statistics BWD_STATS_AHEAD rows ahead (FROST_NORM_TUNE
 * sahead=), through a queue in registers: a row's turn can be shorter than a loaded HBM's
 * latency (a split row's inv_std one row ahead was 27 % of its stall samples, 2026-12-04). */
#if !defined(BWD_STATS_AHEAD)
#define BWD_STATS_AHEAD 2
#endif
typedef struct bwd_stats_queue {
    float mean[BWD_STATS_AHEAD], rstd[BWD_STATS_AHEAD];
} bwd_stats_queue;

/* Starts the loads of rows row, row + step, ... (those below end). */
FROST_DEVICE void bwd_stats_fill(const norm_bwd_params *p, bwd_stats_queue *q, int64_t row, int64_t step,
                                 int64_t end)
{
#pragma unroll
    for (int s = 0; s < BWD_STATS_AHEAD; s++) {
        q->mean[s] = 0.0f, q->rstd[s] = 1.0f;
        if (row + s * step < end)
            bwd_load_stats(p, row + s * step, &q->mean[s], &q->rstd[s]);
    }
}

/* The statistics of the queue's first row, and the loads of row `next` (if below end) behind
 * the others. */
FROST_DEVICE void bwd_stats_pop(const norm_bwd_params *p, bwd_stats_queue *q, int64_t next, int64_t end,
                                float *mean, float *rstd)
{
    *mean = q->mean[0], *rstd = q->rstd[0];
#pragma unroll
    for (int s = 0; s + 1 < BWD_STATS_AHEAD; s++)
        q->mean[s] = q->mean[s + 1], q->rstd[s] = q->rstd[s + 1];
    q->mean[BWD_STATS_AHEAD - 1] = 0.0f, q->rstd[BWD_STATS_AHEAD - 1] = 1.0f;
    if (next < end)
        bwd_load_stats(p, next, &q->mean[BWD_STATS_AHEAD - 1], &q->rstd[BWD_STATS_AHEAD - 1]);
}

/* Stores a register-resident row group's sums in lane order (norm_reduce_params): element
 * j of unit k of lane `lane` at (k * vec + j) * GROUP + lane, so that a warp's store of one
 * (k, j) writes consecutive floats.  (Column order would spread each store instruction over
 * 32 sectors, and every block stores at the same moment, at its end.) */
FROST_DEVICE void bwd_store_lanes(float *prow, const float *acc, int lane, int cols, const int vec, const int units)
{
#pragma unroll
    for (int k = 0; k < units; k++) {
        if ((k * GROUP + lane) * vec < cols) {
#pragma unroll
            for (int j = 0; j < vec; j++)
                prow[(k * vec + j) * GROUP + lane] = acc[k * vec + j];
        }
    }
}

FROST_DEVICE void bwd_store_partials(const norm_bwd_params *p, const float *acc_w, const float *acc_b, int lane,
                                     const int vec, const int units)
{
#if defined(DSCALE)
    bwd_store_lanes(bwd_partial_row(p->partial_scale, p), acc_w, lane, p->cols, vec, units);
#endif
#if defined(DBIAS)
    bwd_store_lanes(bwd_partial_row(p->partial_bias, p), acc_b, lane, p->cols, vec, units);
#endif
    (void)p, (void)acc_w, (void)acc_b, (void)lane;
}

#if !defined(LOOPED) && !(defined(STAGES) && STAGES > 1 && VEC > 1)
/* dx of one register-resident row and its share of the column sums; every thread of the
 * block calls it (inactive: an idle group that only joins the reductions). */
FROST_DEVICE void bwd_process(const norm_bwd_params *p, const uint32_t *x, const uint32_t *dy, int64_t row,
                              bool active, float mean_s, float rstd_s, int lane, norm_red *red, const int vec,
                              const int units, float *acc_w, float *acc_b)
{
    float mean, rstd;
    bwd_stats(p, x, lane, p->cols, mean_s, rstd_s, red, vec, units, &mean, &rstd);
    const void *scale = bwd_scale_row(p, row);
    float sg = 0.0f, sgx = 0.0f;
    bwd_partial_dots(scale, 0, x, dy, lane, p->cols, 0, mean, rstd, vec, units, &sg, &sgx);
    float mg, mgx;
    bwd_row_means(p, sg, sgx, red, &mg, &mgx);
    if (active)
        bwd_write_dx(scale, 0, x, dy, (frost_io *)p->dx + NORM_ROW(p, dx, row), lane, p->cols, 0, mean, rstd, mg,
                     mgx, vec, units, acc_w, acc_b);
}

/* Prefetching doubles the raw registers of x and dy; see the budget note in norm_fwd.cu. */
#define PREFETCH (ELEMS * IO_BYTES <= (BLOCK < 1024 ? 64 : 32))

FROST_DEVICE void bwd_load(const norm_bwd_params *p, int64_t row, int lane, const int vec, const int units,
                           uint32_t *x, uint32_t *dy, float *mean_s, float *rstd_s)
{
    norm_load_row(x, (const frost_io *)p->x + NORM_ROW(p, x, row), lane, p->cols, vec, units);
    norm_load_row(dy, (const frost_io *)p->dy + NORM_ROW(p, dy, row), lane, p->cols, vec, units);
    bwd_load_stats(p, row, mean_s, rstd_s);
}

/* Register-resident rows (see the essay at the top). */
FROST_DEVICE void bwd_rows(const norm_bwd_params *p, const int vec)
{
    NORM_RED(red);
    const int units = ELEMS / vec;
    const int group = threadIdx.x / GROUP, lane = threadIdx.x % GROUP;
    int64_t start, end;
    bwd_block_rows(p, &start, &end);
    float acc_w[ELEMS], acc_b[ELEMS];
    uint32_t x[ELEMS], dy[ELEMS];
    float mean_s = 0.0f, rstd_s = 1.0f;
#pragma unroll
    for (int i = 0; i < ELEMS; i++) {
        acc_w[i] = acc_b[i] = 0.0f;
        x[i] = dy[i] = 0u;
    }
    int64_t row = start + group;
#if PREFETCH
    uint32_t nx[ELEMS], ndy[ELEMS];
    float nmean = 0.0f, nrstd = 1.0f;
#pragma unroll
    for (int i = 0; i < ELEMS; i++)
        nx[i] = ndy[i] = 0u;
    if (row < end)
        bwd_load(p, row, lane, vec, units, x, dy, &mean_s, &rstd_s);
#endif

    /* The loop bound is the block's first row, so every thread runs the same trips. */
    for (int64_t first = start; first < end; first += ROWS_PER_BLOCK, row += ROWS_PER_BLOCK) {
        const bool active = row < end;
#if PREFETCH
        if (row + ROWS_PER_BLOCK < end)
            bwd_load(p, row + ROWS_PER_BLOCK, lane, vec, units, nx, ndy, &nmean, &nrstd);
#else
        if (active)
            bwd_load(p, row, lane, vec, units, x, dy, &mean_s, &rstd_s);
#endif
        bwd_process(p, x, dy, row, active, mean_s, rstd_s, lane, red, vec, units, acc_w, acc_b);
#if PREFETCH
#pragma unroll
        for (int i = 0; i < ELEMS; i++) {
            x[i] = nx[i];
            dy[i] = ndy[i];
        }
        mean_s = nmean;
        rstd_s = nrstd;
#endif
    }
    bwd_store_partials(p, acc_w, acc_b, lane, vec, units);
}
#endif

#if !defined(LOOPED) && defined(STAGES) && STAGES > 1 && VEC > 1
#if NORM_RANKS == 1
/* bwd_process for a row waiting in ring slot `stage`: the thread reads its units from the
 * ring once for the statistics and dot products and again, after the reduction, for dx,
 * so x and dy do not occupy registers across the barrier (rows up to NV = 4 units a
 * thread then keep their d_scale / d_bias sums in registers without spilling). */
FROST_DEVICE void bwd_process_staged(const norm_bwd_params *p, const norm_cell *ring, int stage, int64_t row,
                                     bool active, float mean_s, float rstd_s, int lane, norm_red *red, float *acc_w,
                                     float *acc_b, const uint32_t *held_row)
{
    float mean, rstd, sg = 0.0f, sgx = 0.0f;
    const void *scale = bwd_scale_row(p, row);
    uint32_t pinned[BWD_HELD_WORDS];
    const uint32_t *held = bwd_pin_held(pinned, held_row);
    {
        uint32_t x[ELEMS], dy[ELEMS];
        norm_unstage_row(x, ring, stage, 0, 2);
        norm_unstage_row(dy, ring, stage, 1, 2);
        bwd_stats(p, x, lane, p->cols, mean_s, rstd_s, red, VEC, NV, &mean, &rstd);
        bwd_partial_dots(scale, held, x, dy, lane, p->cols, 0, mean, rstd, VEC, NV, &sg, &sgx);
    }
    float mg, mgx;
    bwd_row_means(p, sg, sgx, red, &mg, &mgx);
    if (active) {
        uint32_t x[ELEMS], dy[ELEMS];
        norm_unstage_row(x, ring, stage, 0, 2);
        norm_unstage_row(dy, ring, stage, 1, 2);
        bwd_write_dx(scale, held, x, dy, (frost_io *)p->dx + NORM_ROW(p, dx, row), lane, p->cols, 0, mean, rstd, mg,
                     mgx, VEC, NV, acc_w, acc_b);
    }
}

#endif /* NORM_RANKS == 1 */

#if defined(BWD_CLUSTER) && ROWS_PER_BLOCK == 1 && __CUDA_ARCH__ >= 900
/* Staged rows in thread-block clusters of BWD_CLUSTER blocks (sm_90; compiled for an older
 * architecture the key stores a partial row per block, and the host expects that there) end
 * with one partial row per cluster: each block puts its sums, in lane order, into its
 * drained ring (2 * BLOCK * ELEMS floats fit in its 2 * STAGES * NV * BLOCK cells of 16
 * bytes); after a cluster barrier block r adds slice r of the positions over the cluster's
 * blocks, rank 0 first (distributed shared memory), and stores it to partial row
 * blockIdx.x / BWD_CLUSTER; a second barrier keeps every block's shared memory until the
 * others have read it.  So the reduce kernel reads BWD_CLUSTER times fewer partial rows, in
 * a fixed order as before. */
#define BWD_CLUSTER_DIMS __cluster_dims__(BWD_CLUSTER, 1, 1)

FROST_DEVICE void bwd_store_cluster_partials(const norm_bwd_params *p, float *sm, const float *acc_w,
                                             const float *acc_b, int lane)
{
    const int positions = ELEMS * GROUP; /* lane-order positions (GROUP == BLOCK) */
    __syncthreads();                     /* every thread's ring reads are done */
#pragma unroll
    for (int i = 0; i < ELEMS; i++) {
        sm[i * GROUP + lane] = acc_w[i];
        sm[positions + i * GROUP + lane] = acc_b[i];
    }
    frost_cluster_sync();
    const int64_t row = blockIdx.x / BWD_CLUSTER;
    float *out_w = p->partial_scale ? p->partial_scale + row * p->partial_stride : 0;
    float *out_b = p->partial_bias ? p->partial_bias + row * p->partial_stride : 0;
    const int slice = positions / BWD_CLUSTER, first = (int)frost_cluster_rank() * slice;
    for (int pos = first + 4 * threadIdx.x; pos < first + slice; pos += 4 * BLOCK) {
        float4 w = make_float4(0.0f, 0.0f, 0.0f, 0.0f), b = w;
#pragma unroll
        for (unsigned r = 0; r < BWD_CLUSTER; r++) {
            float v[4];
            if (out_w) {
                frost_ld_cluster_v4(v, sm + pos, r);
                w.x += v[0], w.y += v[1], w.z += v[2], w.w += v[3];
            }
            if (out_b) {
                frost_ld_cluster_v4(v, sm + positions + pos, r);
                b.x += v[0], b.y += v[1], b.z += v[2], b.w += v[3];
            }
        }
        if (out_w)
            *(float4 *)(out_w + pos) = w;
        if (out_b)
            *(float4 *)(out_b + pos) = b;
    }
    frost_cluster_sync();
}
#endif

#if ROWS_PER_BLOCK > 1
/* Staged rows of several row groups a block end with one partial row per block: the groups'
 * sums, in lane order, meet in shared memory (the drained ring: 2 * BLOCK * ELEMS floats fit
 * in its 2 * STAGES * NV * BLOCK cells of 16 bytes) and are added group 0 first, so the
 * reduce kernel reads ROWS_PER_BLOCK times fewer partial rows.  Every thread of the block
 * calls it. */
FROST_DEVICE void bwd_store_block_partials(const norm_bwd_params *p, float *sm, const float *acc_w,
                                           const float *acc_b, int group, int lane)
{
    const int positions = ELEMS * GROUP; /* a group's lane-order positions */
    __syncthreads();                     /* every thread's ring reads and copies are done */
#pragma unroll
    for (int i = 0; i < ELEMS; i++) {
        const int pos = i * GROUP + lane; /* element i = k * VEC + j, as bwd_store_lanes */
        sm[group * positions + pos] = acc_w[i];
        sm[(ROWS_PER_BLOCK + group) * positions + pos] = acc_b[i];
    }
    __syncthreads();
    float *out_w = p->partial_scale ? p->partial_scale + (int64_t)blockIdx.x * p->partial_stride : 0;
    float *out_b = p->partial_bias ? p->partial_bias + (int64_t)blockIdx.x * p->partial_stride : 0;
    for (int pos = threadIdx.x; pos < positions; pos += BLOCK) {
        float w = sm[pos], b = sm[ROWS_PER_BLOCK * positions + pos];
#pragma unroll
        for (int g = 1; g < ROWS_PER_BLOCK; g++) {
            w += sm[g * positions + pos];
            b += sm[(ROWS_PER_BLOCK + g) * positions + pos];
        }
        if (out_w)
            out_w[pos] = w;
        if (out_b)
            out_b[pos] = b;
    }
}
#endif

#if defined(STAGES) && STAGES > 1 && VEC > 1 && !defined(LOOPED)
/* Starts the copies of row r's x and dy (zeros when r >= end) into ring slot `slot`, as one
 * cp.async group. */
FROST_DEVICE void bwd_stage_rows(const norm_bwd_params *p, norm_cell *ring, int slot, int64_t r, int64_t end,
                                 int lane)
{
    const bool ok = r < end;
    norm_stage_row(ring, slot, 0, 2, (const frost_io *)p->x + NORM_ROW(p, x, ok ? r : 0), lane, p->cols, ok);
    norm_stage_row(ring, slot, 1, 2, (const frost_io *)p->dy + NORM_ROW(p, dy, ok ? r : 0), lane, p->cols, ok);
    norm_cp_async_commit();
}
#endif

#if NORM_RANKS == 1
/* Staged rows: as bwd_rows on the vector path, but the next STAGES - 1 rows of x and dy of
 * each group wait in the shared-memory ring (norm_kernel.cuh); the saved statistics of
 * the next row are prefetched into two registers. */
FROST_DEVICE void bwd_rows_staged(const norm_bwd_params *p)
{
    extern __shared__ norm_cell ring[];
    NORM_RED(red);
    const int group = threadIdx.x / GROUP, lane = threadIdx.x % GROUP;
    int64_t start, end;
    bwd_block_rows(p, &start, &end);
    float acc_w[ELEMS], acc_b[ELEMS];
#pragma unroll
    for (int i = 0; i < ELEMS; i++)
        acc_w[i] = acc_b[i] = 0.0f;
    int64_t row = start + group;
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        bwd_stage_rows(p, ring, s, row + s * ROWS_PER_BLOCK, end, lane);
    }
    bwd_stats_queue sq;
    bwd_stats_fill(p, &sq, row, ROWS_PER_BLOCK, end);
    uint32_t held[BWD_HELD_WORDS];
    bwd_load_held(held, p, lane);
    int stage = 0;
    for (int64_t first = start; first < end; first += ROWS_PER_BLOCK, row += ROWS_PER_BLOCK) {
        const bool active = row < end;
        bwd_stage_rows(p, ring, stage == 0 ? STAGES - 1 : stage - 1, row + (STAGES - 1) * ROWS_PER_BLOCK, end, lane);
        float mean_s, rstd_s;
        bwd_stats_pop(p, &sq, row + BWD_STATS_AHEAD * ROWS_PER_BLOCK, end, &mean_s, &rstd_s);
        norm_cp_async_wait_ring();
        bwd_process_staged(p, ring, stage, row, active, mean_s, rstd_s, lane, red, acc_w, acc_b, held);
        stage = stage + 1 == STAGES ? 0 : stage + 1;
    }
    norm_cp_async_drain();
#if ROWS_PER_BLOCK > 1
    bwd_store_block_partials(p, (float *)ring, acc_w, acc_b, group, lane);
#elif defined(BWD_CLUSTER_DIMS)
    bwd_store_cluster_partials(p, (float *)ring, acc_w, acc_b, lane);
#else
    bwd_store_partials(p, acc_w, acc_b, lane, VEC, NV);
#endif
}
#endif /* NORM_RANKS == 1 */
#endif

#if NORM_RANKS > 1 && !defined(LOOPED) && defined(STAGES) && STAGES > 1 && VEC > 1
#if STAGES < 3
#error "split backward rows keep a row in the ring while the next one starts: STAGES >= 3"
#endif
/* Waits until this thread's copies of the row about to start have landed: at most
 * STAGES - 2 later groups in flight (the slot of the row before is refilled after it). */
FROST_DEVICE void bwd_cp_async_wait_split(void)
{
    asm volatile("cp.async.wait_group %0;" ::"n"(STAGES - 2) : "memory");
}

/* Staged rows of a split row (ROW_SPLIT, one row group a block): as bwd_rows_staged, but a
 * row's dot products go out to the cluster (norm_group_sum2_begin) and its dx waits for
 * them only after the next row's dot products are out, so that the exchange between the
 * blocks overlaps a row's work instead of stalling the block.  The ring holds the row
 * finishing, the row starting and the rows loading: row r sits in slot (r - start) %
 * STAGES, refilled with row r + STAGES once r's dx is written. */
FROST_DEVICE void bwd_rows_split(const norm_bwd_params *p)
{
    extern __shared__ norm_cell ring[];
    NORM_RED(red);
    const int lane = threadIdx.x;
    int64_t start, end;
    bwd_block_rows(p, &start, &end);
    float acc_w[ELEMS], acc_b[ELEMS];
#pragma unroll
    for (int i = 0; i < ELEMS; i++)
        acc_w[i] = acc_b[i] = 0.0f;
#pragma unroll
    for (int s = 0; s < STAGES; s++) {
        bwd_stage_rows(p, ring, s, start + s, end, lane);
    }
    bwd_stats_queue sq;
    bwd_stats_fill(p, &sq, start, 1, end);
    uint32_t held[BWD_HELD_WORDS];
    bwd_load_held(held, p, lane);
    /* the row waiting for its sums: its slot, statistics and reduction */
    int prev_stage = 0;
    float prev_mean = 0.0f, prev_rstd = 1.0f;
    unsigned prev_h = 0;
    int stage = 0;
    for (int64_t row = start; row <= end && start < end; row++) {
        uint32_t pinned[BWD_HELD_WORDS];
        const uint32_t *hw = bwd_pin_held(pinned, held);
        float mean = 0.0f, rstd = 1.0f;
        unsigned h = 0;
        if (row < end) {
            float mean_s, rstd_s;
            bwd_stats_pop(p, &sq, row + BWD_STATS_AHEAD, end, &mean_s, &rstd_s);
            bwd_cp_async_wait_split();
            uint32_t x[ELEMS], dy[ELEMS];
            norm_unstage_row(x, ring, stage, 0, 2);
            norm_unstage_row(dy, ring, stage, 1, 2);
            bwd_stats(p, x, lane, p->cols, mean_s, rstd_s, red, VEC, NV, &mean, &rstd);
            float sg = 0.0f, sgx = 0.0f;
            bwd_partial_dots(p->scale, hw, x, dy, lane, p->cols, 0, mean, rstd, VEC, NV, &sg, &sgx);
            h = norm_group_sum2_begin(sg, sgx, red);
        }
        if (row > start) {
            const int64_t prev = row - 1;
            float sg, sgx;
            norm_group_sum2_end(red, prev_h, &sg, &sgx);
#if defined(KIND_LAYER)
            const float mg = sg * p->inv_cols;
#else
            const float mg = 0.0f;
#endif
            const float mgx = sgx * p->inv_cols;
            uint32_t x[ELEMS], dy[ELEMS];
            norm_unstage_row(x, ring, prev_stage, 0, 2);
            norm_unstage_row(dy, ring, prev_stage, 1, 2);
            bwd_write_dx(p->scale, hw, x, dy, (frost_io *)p->dx + NORM_ROW(p, dx, prev), lane, p->cols, 0,
                         prev_mean, prev_rstd, mg, mgx, VEC, NV, acc_w, acc_b);
            /* every thread reads only its own cells: its slot is free for row prev + STAGES */
            bwd_stage_rows(p, ring, prev_stage, prev + STAGES, end, lane);
        }
        prev_stage = stage;
        prev_mean = mean;
        prev_rstd = rstd;
        prev_h = h;
        stage = stage + 1 == STAGES ? 0 : stage + 1;
    }
    norm_cp_async_drain();
    bwd_store_partials(p, acc_w, acc_b, lane, VEC, NV);
}
#endif

#if defined(LOOPED) || VEC > 1
/* Elements per thread and chunk of the misaligned fallback of vector keys. */
#define FALLBACK_UNITS 4
#define CHUNK_WORDS (ELEMS > FALLBACK_UNITS ? ELEMS : FALLBACK_UNITS)

/* Chunked rows: several passes over each row in chunks of GROUP * units units; the column
 * sums go straight to the group's partial rows (stored by its first row, then added). */
FROST_DEVICE void bwd_rows_chunked(const norm_bwd_params *p, const int vec, const int units)
{
    NORM_RED(red);
    const int group = threadIdx.x / GROUP, lane = threadIdx.x % GROUP;
    const int chunk = GROUP * units * vec;
    int64_t start, end;
    bwd_block_rows(p, &start, &end);
    float *pscale = bwd_partial_row(p->partial_scale, p);
    float *pbias = bwd_partial_row(p->partial_bias, p);
    uint32_t x[CHUNK_WORDS], dy[CHUNK_WORDS];
    float acc_w[CHUNK_WORDS], acc_b[CHUNK_WORDS];
    int64_t row = start + group;
    bool first_row = true;

    for (int64_t first = start; first < end; first += ROWS_PER_BLOCK, row += ROWS_PER_BLOCK) {
        const bool active = row < end;
        const int64_t r = active ? row : start;
        const frost_io *xrow = (const frost_io *)p->x + NORM_ROW(p, x, r);
        const frost_io *dyrow = (const frost_io *)p->dy + NORM_ROW(p, dy, r);
        const void *scale = bwd_scale_row(p, r);
        const int cols = active ? p->cols : 0; /* an idle group reads nothing */
        float mean_c = 0.0f, q = 0.0f;
#if defined(KIND_LAYER)
        if (!p->mean || !p->inv_std) {
            float s = 0.0f;
            for (int c0 = 0; c0 < cols; c0 += chunk) {
                norm_load_row(x, xrow + c0, lane, cols - c0, vec, units);
#pragma unroll
                for (int i = 0; i < units * vec; i++)
                    s += norm_elem(x, i, vec);
            }
            mean_c = norm_group_sum(s, red) * p->inv_cols;
        }
        const float mean = p->mean ? (active ? p->mean[NORM_ROW(p, mean, r)] : 0.0f) : mean_c;
#else
        const float mean = 0.0f;
#endif
        float rstd = p->inv_std && active ? p->inv_std[NORM_ROW(p, inv_std, r)] : 1.0f;
        if (!p->inv_std) {
            for (int c0 = 0; c0 < cols; c0 += chunk) {
                norm_load_row(x, xrow + c0, lane, cols - c0, vec, units);
#pragma unroll
                for (int k = 0; k < units; k++)
                    if (norm_unit_valid(k, lane, cols - c0, vec))
#pragma unroll
                        for (int j = 0; j < vec; j++) {
                            const float d = norm_elem(x, k * vec + j, vec) - mean_c;
                            q = fmaf(d, d, q);
                        }
            }
            rstd = rsqrtf(norm_group_sum(q, red) * p->inv_cols + p->epsilon);
        }
        float sg = 0.0f, sgx = 0.0f;
        for (int c0 = 0; c0 < cols; c0 += chunk) {
            norm_load_row(x, xrow + c0, lane, cols - c0, vec, units);
            norm_load_row(dy, dyrow + c0, lane, cols - c0, vec, units);
            bwd_partial_dots(scale, 0, x, dy, lane, cols - c0, c0, mean, rstd, vec, units, &sg, &sgx);
        }
        float mg, mgx;
        bwd_row_means(p, sg, sgx, red, &mg, &mgx);
        frost_io *dxrow = (frost_io *)p->dx + NORM_ROW(p, dx, r);
        for (int c0 = 0; c0 < cols; c0 += chunk) {
            norm_load_row(x, xrow + c0, lane, cols - c0, vec, units);
            norm_load_row(dy, dyrow + c0, lane, cols - c0, vec, units);
#pragma unroll
            for (int i = 0; i < units * vec; i++)
                acc_w[i] = acc_b[i] = 0.0f;
            bwd_write_dx(scale, 0, x, dy, dxrow, lane, cols - c0, c0, mean, rstd, mg, mgx, vec, units, acc_w, acc_b);
#if defined(DSCALE)
            bwd_store_partial(pscale, acc_w, lane, cols - c0, c0, !first_row, vec, units);
#endif
#if defined(DBIAS)
            bwd_store_partial(pbias, acc_b, lane, cols - c0, c0, !first_row, vec, units);
#endif
        }
        first_row = first_row && !active;
    }
    if (first_row) { /* a group without rows still owns its partial rows: zero them */
#pragma unroll
        for (int i = 0; i < CHUNK_WORDS; i++)
            acc_w[i] = 0.0f;
        for (int c0 = 0; c0 < p->cols; c0 += chunk) {
#if defined(DSCALE)
            bwd_store_partial(pscale, acc_w, lane, p->cols - c0, c0, false, vec, units);
#endif
#if defined(DBIAS)
            bwd_store_partial(pbias, acc_w, lane, p->cols - c0, c0, false, vec, units);
#endif
        }
    }
    (void)pscale, (void)pbias;
}
#endif

#if NORM_RANKS > 1
#if defined(BWD_CLUSTER) || defined(PER_SAMPLE) || defined(LOOPED) || VEC == 1
#error "split rows (ROW_SPLIT) are whole vector rows of a shared scale, without BWD_CLUSTER"
#endif

/* This block's share of a split row (norm_kernel.cuh): its columns as a row of their own,
 * its column sums at the same place in the logical block's partial rows (lane-order
 * positions of a half are the columns of a half: the halves fill their row groups); inv_cols
 * stays that of the whole row. */
FROST_DEVICE norm_bwd_params bwd_split_share(const norm_bwd_params *p)
{
    norm_bwd_params q = *p;
    q.cols = p->cols / NORM_RANKS;
    const int64_t c0 = (int64_t)norm_split_rank() * q.cols;
    q.x = (const frost_io *)p->x + c0;
    q.dy = (const frost_io *)p->dy + c0;
    q.dx = (frost_io *)p->dx + c0;
#if SCALE_DT != FROST_DT_NONE
    q.scale = norm_param_at(p->scale, c0, SCALE_DT);
#endif
    q.partial_scale = p->partial_scale ? p->partial_scale + c0 : 0;
    q.partial_bias = p->partial_bias ? p->partial_bias + c0 : 0;
    return q;
}
#endif

#if !defined(BWD_CLUSTER_DIMS)
#define BWD_CLUSTER_DIMS
#endif

extern "C" __global__ void BWD_CLUSTER_DIMS NORM_SPLIT_DIMS __launch_bounds__(BLOCK, MIN_BLOCKS)
    norm_bwd_kernel(const __grid_constant__ norm_bwd_params params)
{
#if NORM_RANKS > 1
    const norm_bwd_params p = bwd_split_share(&params); /* NORM_RED then meets the cluster */
#else
    const norm_bwd_params &p = params;
#endif
    /* Every block lets the reduce kernel (launched early, norm_cuda.c) be scheduled from its
     * start: once the last block of this grid has started, the reduce's blocks take the SMs'
     * spare registers and wait there for this grid to finish, so their launch overlaps this
     * kernel's end instead of following it. */
    frost_allow_next_grid();
#if defined(LOOPED)
#if VEC > 1
    if (p.vec_ok) {
        bwd_rows_chunked(&p, VEC, NV);
        return;
    }
#endif
    bwd_rows_chunked(&p, 1, ELEMS);
#elif VEC > 1
    if (p.vec_ok) {
#if NORM_RANKS > 1 && defined(STAGES) && STAGES > 1
        bwd_rows_split(&p);
#elif defined(STAGES) && STAGES > 1
        bwd_rows_staged(&p);
#else
        bwd_rows(&p, VEC);
#endif
        return;
    }
    bwd_rows_chunked(&p, 1, FALLBACK_UNITS);
#else
    bwd_rows(&p, 1);
#endif
}
