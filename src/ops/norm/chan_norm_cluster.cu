/*
 * chan_norm_cluster.cu — GroupNorm and InstanceNorm, forward and backward, for NHWC and
 * NCHW tensors, and BatchNorm's training forward and backward for NCHW, on the 16-byte
 * vector path, on sm_90: a segment (one sample's window of cw channels, all HW pixels; for
 * BatchNorm a window over every sample) is cut into k_tiles = CLUSTER tiles of `rows` rows, and the
 * tiles of a segment run as one thread-block cluster.  Each block loads its tile (x, and
 * dy for the backward) into shared memory, takes its per-set partial statistics, and the
 * blocks of the cluster read each other's partials straight from shared memory
 * (distributed shared memory, after a cluster barrier) and merge them in rank order, so
 * every block holds the same final statistics, bitwise; then each normalizes its tile
 * from shared memory and stores it.  HBM sees x (and dy) read once and the output written
 * once, with no workspace round trip, no spinning on global counters and no persistent
 * grid: the hardware schedules clusters as blocks finish, so with two or more blocks per
 * SM one block's loads overlap another's arithmetic and stores.
 *
 * Terms, layouts and the parameter block: chan_norm_kernel.cuh (the cluster path's
 * constants are CNC_*).  NHWC: a thread owns one 16-byte column unit u of the window (vec =
 * CN_VEC channels) and the rows r0, r0 + per, ... of the tile, for the load, the sums and
 * the apply alike.  NCHW (the tile [cw][rows], each channel's pixels contiguous in HBM and
 * in shared memory): a warp owns whole channels, its lanes the 16-byte units along their
 * pixels; per-channel sums fold in the warp.  The per-set statistics, the cluster merges
 * and the records are the same for both.
 *
 * Statistics.  Forward (and a backward without both saved statistics): per channel, the
 * sums of (x - s) and (x - s)^2 about s = the channel's value in the tile's first row
 * (no E[x^2] - E[x]^2 cancellation), then per set (count, mean, M2) with Chan's formula
 * for the equal-count channels; the cluster merges the blocks' records with Chan's formula
 * in rank order.  Backward: per channel sum dy and sum dy (x - mean), per set
 * A = sum w dy and B = sum w dy (x - mean) merged by plain sums in rank order, and
 *     dx = dy * (r w) - x * (r^3 B / M) + (mean r^3 B / M - r A / M),
 * the same formula as chan_norm_bwd.cu.  d_scale / d_bias: each block writes its
 * (sum dy, sum dy x_hat) per channel as record (n, c, tile) of the workspace, and
 * chan_norm_bwd.cu's cnorm_bwd_dparams_kernel adds them in a fixed order: deterministic.
 *
 * Measured (H200, bf16, docs/PERF.md): GroupNorm(32) 32x512x64x64 forward 2736 GB/s,
 * backward 2580; 128x256x32x32 forward 2767, backward 2370 (2026-12-02): 1.24-2.37x the
 * persistent-grid kernels of chan_norm_fwd.cu / chan_norm_bwd.cu on the same shapes, with
 * 64 KB of tiles per block (the tiling: chan_norm_geometry.c).  With the start ramp below
 * and the d_scale / d_bias kernel's coalesced reads (2026-12-03): forward 2923 and 2990,
 * backward 2679 and 2753.  NCHW (2026-12-03), against the three-kernel fallback: GroupNorm
 * 32x512x64x64 forward 2538 -> 3303, backward 1199 -> 2957; BatchNorm 1505 -> 2872 and
 * 1216 -> 2944.
 *
 * Entry points: cnorm_cluster_fwd_kernel, cnorm_cluster_bwd_kernel.  Keys: DTYPE_*,
 * KIND_GROUP | KIND_INSTANCE | KIND_BATCH (NCHW), LAYOUT_NHWC | LAYOUT_NCHW, CLUSTER =
 * blocks per cluster (1, 2, 4 or 8), HELD (NCHW tiles that hold part of their rows).
 */
#include "chan_norm_units.cuh"

#if !defined(CLUSTER) || (defined(KIND_BATCH) && !defined(LAYOUT_NCHW))
#error "the cluster path is GroupNorm / InstanceNorm, or NCHW BatchNorm, with CLUSTER defined"
#endif
#if defined(HELD) && !defined(LAYOUT_NCHW)
#error "HELD (tiles that hold part of their rows) is NCHW only"
#endif

/* Compiled for an older architecture (frost-precompile's cover of sm_80), the kernels keep
 * no cluster shape and trap. */
#if __CUDA_ARCH__ >= 900
#define CC_CLUSTER_DIMS __cluster_dims__(CLUSTER, 1, 1)
#else
#define CC_CLUSTER_DIMS
#endif

/* ---- shared memory and the thread's place ------------------------------------------------ */
typedef struct cc_smem {
    frost_io *x, *dy;       /* tiles, rows x cw */
    float *ch0, *ch1, *ch2; /* per channel: sums, then coefficients */
    float *ch3;             /* per channel: forward bias, backward w_eff */
    float *rec;             /* per set: count, mean, M2, - (read by the cluster) */
    float *recb;            /* per set: A, B (backward, read by the cluster) */
    float *fin;             /* per set: mean, inv_std */
    float *scratch;
} cc_smem;

FROST_DEVICE void cc_carve(const cnorm_params *p, unsigned char *base, int tensors, cc_smem *m)
{
    const uint64_t tile = CNORM_ALIGN16(cn_tile_elems(p) * sizeof(frost_io)); /* NCHW: the held rows */
    m->x = (frost_io *)base;
    m->dy = (frost_io *)(base + tile);
    float *f = (float *)(base + (uint64_t)tensors * tile);
    m->ch0 = f;
    m->ch1 = f + p->cw;
    m->ch2 = f + 2 * p->cw;
    m->ch3 = f + 3 * p->cw;
    m->rec = f + 4 * p->cw;
    m->recb = m->rec + 4 * p->sets;
    m->fin = m->recb + 2 * p->sets;
    m->scratch = m->fin + 2 * p->sets;
}

#if defined(LAYOUT_NHWC)
/* The global element of this thread's unit in the tile's row r0 (n stride sn). */
FROST_DEVICE int64_t cc_goff(const cnorm_params *p, const cnorm_tile *tl, const cc_map *w, int64_t sn)
{
    return (int64_t)tl->n * sn + (int64_t)(tl->q0 - tl->n * p->hw + w->r0) * p->c + tl->c0 + w->u * CN_VEC;
}

/* The thread's rows of one tensor into the shared tile: cp.async (the caller waits), or
 * element by element when a base is not 16-byte aligned. */
FROST_DEVICE void cc_load(const cnorm_params *p, const cnorm_tile *tl, const cc_map *w, const frost_io *src, int64_t sn,
                          frost_io *tile)
{
    if (w->r0 >= w->per)
        return;
    const frost_io *g = src + cc_goff(p, tl, w, sn);
    frost_io *s = tile + w->r0 * p->cw + w->u * CN_VEC;
    const int64_t gstep = (int64_t)w->per * p->c;
    const int sstep = w->per * p->cw;
    if (p->vec_ok) {
#pragma unroll 4
        for (int r = w->r0; r < tl->nq; r += w->per, g += gstep, s += sstep)
            cn_cp_async16(s, g);
    } else {
        for (int r = w->r0; r < tl->nq; r += w->per, g += gstep, s += sstep)
#pragma unroll
            for (int k = 0; k < CN_VEC; k++)
                s[k] = g[k];
    }
}
#endif

#if defined(LAYOUT_NCHW)
/* NCHW: the shared tile is [cw][pitch = rows].  A channel has wpc warps (CNC_WARPS / cw when
 * the window is narrower than the block's warps, else one): warp w takes the channels w /
 * wpc, w / wpc + CNC_WARPS / wpc, ..., as part w % wpc of each, and its lane l the 16-byte
 * units (part * 32 + l) + 32 wpc i of a channel's run of the tile's pixels (nq is whole
 * units: the path needs HW and rows in whole units). */
#define CCN_WPC(p) ((p)->cw < CNC_WARPS ? CNC_WARPS / (p)->cw : 1)
#define CCN_CHANNELS(cl)                                                                                          \
    const int wpc = CCN_WPC(p), part = ((int)threadIdx.x / 32) % wpc;                                              \
    for (int cl = (int)threadIdx.x / 32 / wpc; cl < p->cw; cl += CNC_WARPS / wpc)
#define CCN_UNITS(e, end)                                                                                         \
    for (int e = (part * 32 + (int)(threadIdx.x & 31)) * CN_VEC; e < (end); e += 32 * wpc * CN_VEC)
#define CCN_UNITS_FROM(e, from, end)                                                                              \
    for (int e = (from) + (part * 32 + (int)(threadIdx.x & 31)) * CN_VEC; e < (end); e += 32 * wpc * CN_VEC)

/* HELD: a tile holds only its first pitch rows in shared memory (pitch < rows: a segment past
 * max_cluster tiles of a block's shared memory).  Its other rows are read from global
 * memory twice: for the sums (kept in L2, evict-last) and for the output (evict-first).
 * Without HELD every row is held (pitch = rows) and the loops below are the plain ones.
 * CCN_HELD(done, len): the rows of a run (starting at tile row done, len long) in shared
 * memory. */
#if defined(HELD)
#define CCN_HELD(done, len) min((len), max(p->pitch - (done), 0))

/* One 16-byte unit of global memory as floats (element by element when a base is not
 * 16-byte aligned). */
FROST_DEVICE void ccn_gvec(const cnorm_params *p, const frost_io *g, uint64_t pol, float *v)
{
    if (p->vec_ok) {
        uint32_t w[4];
        cn_ldg_v4(w, g, true, pol);
        cn_unpack(w, v);
    } else {
#pragma unroll
        for (int k = 0; k < CN_VEC; k++)
            v[k] = frost_to_float(g[k]);
    }
}
#else
#define CCN_HELD(done, len) (len)
#endif

/* A warp's part of a channel's two sums, folded in the warp, into scratch slot i. */
FROST_DEVICE void ccn_part_sums(float *scratch, int i, float a, float b)
{
    a = frost_warp_sum(a);
    b = frost_warp_sum(b);
    if ((threadIdx.x & 31) == 0)
        scratch[2 * i] = a, scratch[2 * i + 1] = b;
}

/* Per-channel totals of the warps' parts (a, b, folded in each warp) into ch0, ch1: parts in
 * order.  Ends with the block synchronized. */
FROST_DEVICE void ccn_totals(const cnorm_params *p, const float *scratch, float *ch0, float *ch1)
{
    __syncthreads();
    const int wpc = CCN_WPC(p);
    for (int c = (int)threadIdx.x; c < p->cw; c += CNC_THREADS) {
        float a = 0.0f, b = 0.0f;
        for (int k = 0; k < wpc; k++)
            a += scratch[2 * (c * wpc + k)], b += scratch[2 * (c * wpc + k) + 1];
        ch0[c] = a, ch1[c] = b;
    }
    __syncthreads();
}

/* The tile's rows [q0, q0 + nq) of the flattened (n, pixel) space in runs that stay within
 * one sample: GroupNorm / InstanceNorm tiles are one run, BatchNorm's whole samples (the
 * host cuts them so).  In a run: sample n, first pixel pp, len rows, at row `done` of the
 * shared tile.  Every bound is whole 16-byte units. */
#define CCN_RUNS(n, pp, len, done)                                                                                 \
    for (int n = tl->q0 / p->hw, pp = tl->q0 - n * p->hw, done = 0, len = min(p->hw - pp, tl->nq); done < tl->nq; \
         done += len, n++, pp = 0, len = min(p->hw, tl->nq - done))

/* The global element of channel cl's pixel pp of sample n (n stride sn). */
FROST_DEVICE int64_t ccn_goff(const cnorm_params *p, const cnorm_tile *tl, int n, int cl, int pp, int64_t sn)
{
    return (int64_t)n * sn + (int64_t)(tl->c0 + cl) * p->hw + pp;
}

/* One tensor's tile into shared memory: cp.async (the caller waits), or element by element
 * when a base is not 16-byte aligned. */
FROST_DEVICE void ccn_load(const cnorm_params *p, const cnorm_tile *tl, const frost_io *src, int64_t sn, frost_io *tile)
{
    CCN_CHANNELS(cl)
    CCN_RUNS(n, pp, len, done)
    {
        const int held = CCN_HELD(done, len); /* the rows past the held ones stay in global memory */
        if (held <= 0)
            break;
        const frost_io *g = src + ccn_goff(p, tl, n, cl, pp, sn);
        frost_io *s = tile + (int64_t)cl * p->pitch + done;
        if (p->vec_ok) {
            CCN_UNITS(e, held)
            cn_cp_async16(s + e, g + e);
        } else {
            for (int e = part * 32 + (int)(threadIdx.x & 31); e < held; e += 32 * wpc)
                s[e] = g[e];
        }
    }
}

/* Per channel of the tile: the sums of (x - s) and (x - s)^2 about s = the channel's first
 * pixel, into ch0 and ch1 (lanes in order, a fixed butterfly, the parts in order). */
FROST_DEVICE void ccn_stat_sums(const cnorm_params *p, const cnorm_tile *tl, const frost_io *x, float *scratch,
                                float *ch0, float *ch1)
{
    CCN_CHANNELS(cl)
    {
        const frost_io *t = x + (int64_t)cl * p->pitch;
        const float s = frost_to_float(t[0]);
        float a = 0.0f, b = 0.0f;
        CCN_UNITS(e, CCN_HELD(0, tl->nq))
        {
            float v[CN_VEC];
            cn_tile_vec(t, e, v);
#pragma unroll
            for (int k = 0; k < CN_VEC; k++) {
                const float d = v[k] - s;
                a += d;
                b = fmaf(d, d, b);
            }
        }
#if defined(HELD)
        if (tl->nq > p->pitch) {
            const uint64_t pol = cn_l2_policy(true);
            CCN_RUNS(n, pp, len, done) /* runs within the held rows have no units from pitch on */
            {
                const frost_io *g = (const frost_io *)p->x + ccn_goff(p, tl, n, cl, pp, p->x_sn);
                CCN_UNITS_FROM(e, max(p->pitch - done, 0), len)
                {
                    float v[CN_VEC];
                    ccn_gvec(p, g + e, pol, v);
#pragma unroll
                    for (int k = 0; k < CN_VEC; k++) {
                        const float d = v[k] - s;
                        a += d;
                        b = fmaf(d, d, b);
                    }
                }
            }
        }
#endif
        ccn_part_sums(scratch, cl * wpc + part, a, b);
    }
    ccn_totals(p, scratch, ch0, ch1);
}

/* y = x * a + b per channel from the shared tile (forward). */
FROST_DEVICE void ccn_apply_fwd(const cnorm_params *p, const cnorm_tile *tl, const frost_io *x, const float *ca,
                                const float *cb)
{
    CCN_CHANNELS(cl)
    {
        const float a = ca[cl], b = cb[cl];
        const frost_io *t = x + (int64_t)cl * p->pitch;
#if defined(HELD)
        const uint64_t pol = tl->nq > p->pitch ? cn_l2_policy(false) : 0;
#endif
        CCN_RUNS(n, pp, len, done)
        {
            frost_io *g = (frost_io *)p->out + ccn_goff(p, tl, n, cl, pp, p->out_sn);
            const int held = CCN_HELD(done, len);
            CCN_UNITS(e, held)
            {
                float v[CN_VEC];
                cn_tile_vec(t, done + e, v);
#pragma unroll
                for (int k = 0; k < CN_VEC; k++)
                    v[k] = fmaf(v[k], a, b);
                cc_store(p, g + e, v);
            }
#if defined(HELD)
            if (held < len) {
                const frost_io *gx = (const frost_io *)p->x + ccn_goff(p, tl, n, cl, pp, p->x_sn);
                CCN_UNITS_FROM(e, held, len)
                {
                    float v[CN_VEC];
                    ccn_gvec(p, gx + e, pol, v);
#pragma unroll
                    for (int k = 0; k < CN_VEC; k++)
                        v[k] = fmaf(v[k], a, b);
                    cc_store(p, g + e, v);
                }
            }
#endif
        }
    }
}

/* Per channel of the tile: sum dy into ch0 and sum dy (x - mean) into ch1, mean the set's
 * (fin[2 j]). */
FROST_DEVICE void ccn_bwd_sums(const cnorm_params *p, const cnorm_tile *tl, const frost_io *x, const frost_io *dy,
                               const float *fin, float *scratch, float *ch0, float *ch1)
{
    CCN_CHANNELS(cl)
    {
        const float mu = fin[2 * (cl / p->cg)];
        const frost_io *tx = x + (int64_t)cl * p->pitch, *tdy = dy + (int64_t)cl * p->pitch;
        float a = 0.0f, b = 0.0f;
        CCN_UNITS(e, CCN_HELD(0, tl->nq))
        {
            float vx[CN_VEC], vdy[CN_VEC];
            cn_tile_vec(tx, e, vx);
            cn_tile_vec(tdy, e, vdy);
#pragma unroll
            for (int k = 0; k < CN_VEC; k++) {
                a += vdy[k];
                b = fmaf(vdy[k], vx[k] - mu, b);
            }
        }
#if defined(HELD)
        if (tl->nq > p->pitch) {
            const uint64_t pol = cn_l2_policy(true);
            CCN_RUNS(n, pp, len, done) /* runs within the held rows have no units from pitch on */
            {
                const frost_io *gx = (const frost_io *)p->x + ccn_goff(p, tl, n, cl, pp, p->x_sn);
                const frost_io *gdy = (const frost_io *)p->dy + ccn_goff(p, tl, n, cl, pp, p->dy_sn);
                CCN_UNITS_FROM(e, max(p->pitch - done, 0), len)
                {
                    float vx[CN_VEC], vdy[CN_VEC];
                    ccn_gvec(p, gx + e, pol, vx);
                    ccn_gvec(p, gdy + e, pol, vdy);
#pragma unroll
                    for (int k = 0; k < CN_VEC; k++) {
                        a += vdy[k];
                        b = fmaf(vdy[k], vx[k] - mu, b);
                    }
                }
            }
        }
#endif
        ccn_part_sums(scratch, cl * wpc + part, a, b);
    }
    ccn_totals(p, scratch, ch0, ch1);
}

/* dx = dy * cdy + (k - x * cx) per channel from the shared tiles (backward). */
FROST_DEVICE void ccn_apply_bwd(const cnorm_params *p, const cnorm_tile *tl, const frost_io *x, const frost_io *dy,
                                const float *ck, const float *cdy, const float *cx)
{
    CCN_CHANNELS(cl)
    {
        const float k0 = ck[cl], d0 = cdy[cl], x0 = cx[cl];
        const frost_io *tx = x + (int64_t)cl * p->pitch, *tdy = dy + (int64_t)cl * p->pitch;
#if defined(HELD)
        const uint64_t pol = tl->nq > p->pitch ? cn_l2_policy(false) : 0;
#endif
        CCN_RUNS(n, pp, len, done)
        {
            frost_io *g = (frost_io *)p->out + ccn_goff(p, tl, n, cl, pp, p->out_sn);
            const int held = CCN_HELD(done, len);
            CCN_UNITS(e, held)
            {
                float vx[CN_VEC], vdy[CN_VEC];
                cn_tile_vec(tx, done + e, vx);
                cn_tile_vec(tdy, done + e, vdy);
#pragma unroll
                for (int k = 0; k < CN_VEC; k++)
                    vx[k] = fmaf(vdy[k], d0, fmaf(-vx[k], x0, k0));
                cc_store(p, g + e, vx);
            }
#if defined(HELD)
            if (held < len) {
                const frost_io *gx = (const frost_io *)p->x + ccn_goff(p, tl, n, cl, pp, p->x_sn);
                const frost_io *gdy = (const frost_io *)p->dy + ccn_goff(p, tl, n, cl, pp, p->dy_sn);
                CCN_UNITS_FROM(e, held, len)
                {
                    float vx[CN_VEC], vdy[CN_VEC];
                    ccn_gvec(p, gx + e, pol, vx);
                    ccn_gvec(p, gdy + e, pol, vdy);
#pragma unroll
                    for (int k = 0; k < CN_VEC; k++)
                        vx[k] = fmaf(vdy[k], d0, fmaf(-vx[k], x0, k0));
                    cc_store(p, g + e, vx);
                }
            }
#endif
        }
    }
}
#define CC_SHIFT(m, p, c) frost_to_float((m)->x[(int64_t)(c) * (p)->pitch])
#else
#define CC_SHIFT(m, p, c) frost_to_float((m)->x[(c)])
#endif

/* Statistics of the segment: per set (mean, M2 over the whole segment) into fin[2 j],
 * fin[2 j + 1], identical in every block of the cluster.  Synchronizes the cluster once;
 * the caller's next cluster barrier releases rec. */
FROST_DEVICE void cc_stats(const cnorm_params *p, const cnorm_tile *tl, const cc_map *w, const cc_smem *m)
{
#if defined(LAYOUT_NCHW)
    (void)w;
    ccn_stat_sums(p, tl, m->x, m->scratch, m->ch0, m->ch1);
#else
    float s[CN_VEC], a[CN_VEC], b[CN_VEC];
#pragma unroll
    for (int k = 0; k < CN_VEC; k++)
        s[k] = a[k] = b[k] = 0.0f;
    if (w->r0 < w->per) {
        cn_tile_vec(m->x, w->u * CN_VEC, s); /* the shift: row 0 */
        const frost_io *t = m->x + w->r0 * p->cw + w->u * CN_VEC;
#pragma unroll 4
        for (int r = w->r0; r < tl->nq; r += w->per, t += w->per * p->cw) {
            float v[CN_VEC];
            cn_tile_vec(t, 0, v);
#pragma unroll
            for (int k = 0; k < CN_VEC; k++) {
                const float d = v[k] - s[k];
                a[k] += d;
                b[k] = fmaf(d, d, b[k]);
            }
        }
    }
    cc_reduce(p, w, a, b, m->ch0, m->ch1, m->scratch);
#endif
    const int cg = p->cg;
    const float n = (float)tl->nq, inv_n = 1.0f / n;
    for (int j = threadIdx.x; j < p->sets; j += CNC_THREADS) {
        float mean = 0.0f, m2 = 0.0f;
        for (int k = 0; k < cg; k++) {
            const int c = j * cg + k;
            mean += fmaf(m->ch0[c], inv_n, CC_SHIFT(m, p, c));
        }
        mean /= (float)cg;
        for (int k = 0; k < cg; k++) {
            const int c = j * cg + k;
            const float s1 = m->ch0[c], dm = fmaf(s1, inv_n, CC_SHIFT(m, p, c)) - mean;
            m2 += fmaf(-s1 * inv_n, s1, m->ch1[c]) + n * dm * dm;
        }
        float *r = m->rec + 4 * j;
        r[0] = n * (float)cg, r[1] = mean, r[2] = fmaxf(m2, 0.0f), r[3] = 0.0f;
    }
    frost_cluster_sync();
    for (int j = threadIdx.x; j < p->sets; j += CNC_THREADS) {
        cnorm_stat st = cn_stat_zero();
        for (int i = 0; i < CLUSTER; i++) {
            float v[4];
            frost_ld_cluster_v4(v, m->rec + 4 * j, (unsigned)i);
            cnorm_stat o = cn_stat_zero();
            o.count = v[0], o.mean = v[1], o.m2 = v[2];
            st = cn_merge(st, o);
        }
        m->fin[2 * j] = st.mean;
        m->fin[2 * j + 1] = st.m2;
    }
}

/* The start ramp.  Launched together, the first wave's blocks would load their tiles at
 * once, take their statistics at once (HBM idle), store at once, and their successors
 * inherit that lockstep.  So the first wave's clusters start in ramp_classes classes (a
 * hash of the cluster index), class i after i * ramp_cycles / ramp_classes SM cycles:
 * the blocks sharing an SM reach their loads, statistics and stores at different times,
 * and later clusters, starting as earlier ones leave, keep the offsets. */
FROST_DEVICE void cc_ramp(const cnorm_params *p)
{
    if (p->ramp_cycles <= 0 || p->ramp_classes <= 1 || (int)blockIdx.x >= p->first_wave)
        return;
    const unsigned cls = (((unsigned)blockIdx.x / CLUSTER) * 2654435761u >> 16) % (unsigned)p->ramp_classes;
    const long long wait = (long long)cls * p->ramp_cycles / p->ramp_classes, t0 = clock64();
    while (clock64() - t0 < wait)
        __nanosleep(256);
}

/* ---- forward ---------------------------------------------------------------------------- */
extern "C" __global__ void CC_CLUSTER_DIMS __launch_bounds__(CNC_THREADS, 3)
    cnorm_cluster_fwd_kernel(const __grid_constant__ cnorm_params p)
{
    extern __shared__ uint4 cnorm_smem[];
    cc_smem m;
    cc_carve(&p, (unsigned char *)cnorm_smem, 1, &m);
    const cnorm_tile tl = cn_tile(&p, blockIdx.x);
#if defined(LAYOUT_NCHW)
    const cc_map w = {0, 0, 0, 0}; /* NCHW walks the tile by warps (ccn_*) */
#else
    const cc_map w = cc_map_make(&p);
#endif
    const bool leader = frost_cluster_rank() == 0;
    cc_ramp(&p);
#if defined(LAYOUT_NCHW)
    ccn_load(&p, &tl, (const frost_io *)p.x, p.x_sn, m.x);
#else
    cc_load(&p, &tl, &w, (const frost_io *)p.x, p.x_sn, m.x);
#endif
    /* the per-channel parameters while the tile lands: ch2 = w_eff, ch3 = bias */
    for (int cl = threadIdx.x; cl < p.cw; cl += CNC_THREADS) {
        const int c = tl.c0 + cl;
        m.ch2[cl] = cn_weight(&p, c);
        m.ch3[cl] = p.bias_dt != FROST_DT_NONE ? cn_param(p.bias, (int64_t)c * p.bias_sc, p.bias_dt) : 0.0f;
    }
    cn_cp_async_wait_all();
    __syncthreads();
    cc_stats(&p, &tl, &w, &m);
    frost_cluster_arrive(); /* this block is done reading the others' records */
    for (int j = threadIdx.x; j < p.sets; j += CNC_THREADS) {
        const float mean = m.fin[2 * j], var = m.fin[2 * j + 1] * p.inv_m, rstd = rsqrtf(var + p.eps);
        m.fin[2 * j + 1] = rstd;
        if (leader) /* saved statistics, and BatchNorm's running statistics */
            fwd_set_outputs(&p, tl.n, tl.c0, j, mean, var, rstd, NULL);
    }
    __syncthreads();
    /* y = x * a + b' per channel: a = rstd w_eff, b' = bias - mean a */
    for (int cl = threadIdx.x; cl < p.cw; cl += CNC_THREADS) {
        const int j = cl / p.cg;
        const float a = m.fin[2 * j + 1] * m.ch2[cl];
        m.ch0[cl] = a;
        m.ch1[cl] = fmaf(-m.fin[2 * j], a, m.ch3[cl]);
    }
    __syncthreads();
#if defined(LAYOUT_NCHW)
    ccn_apply_fwd(&p, &tl, m.x, m.ch0, m.ch1);
#else
    if (w.r0 < w.per) {
        float a[CN_VEC], b[CN_VEC];
#pragma unroll
        for (int k = 0; k < CN_VEC; k++) {
            a[k] = m.ch0[w.u * CN_VEC + k];
            b[k] = m.ch1[w.u * CN_VEC + k];
        }
        frost_io *g = (frost_io *)p.out + cc_goff(&p, &tl, &w, p.out_sn);
        const frost_io *t = m.x + w.r0 * p.cw + w.u * CN_VEC;
        const int64_t gstep = (int64_t)w.per * p.c;
#pragma unroll 4
        for (int r = w.r0; r < tl.nq; r += w.per, t += w.per * p.cw, g += gstep) {
            float v[CN_VEC];
            cn_tile_vec(t, 0, v);
#pragma unroll
            for (int k = 0; k < CN_VEC; k++)
                v[k] = fmaf(v[k], a[k], b[k]);
            cc_store(&p, g, v);
        }
    }
#endif
    frost_cluster_wait(); /* no block leaves while another may still read its records */
}

/* ---- backward --------------------------------------------------------------------------- */
extern "C" __global__ void CC_CLUSTER_DIMS __launch_bounds__(CNC_THREADS, 3)
    cnorm_cluster_bwd_kernel(const __grid_constant__ cnorm_params p)
{
    extern __shared__ uint4 cnorm_smem[];
    cc_smem m;
    cc_carve(&p, (unsigned char *)cnorm_smem, 2, &m);
    const cnorm_tile tl = cn_tile(&p, blockIdx.x);
#if defined(LAYOUT_NCHW)
    const cc_map w = {0, 0, 0, 0}; /* NCHW walks the tile by warps (ccn_*) */
#else
    const cc_map w = cc_map_make(&p);
#endif
    const int tid = threadIdx.x, cg = p.cg;
    cc_ramp(&p);
#if defined(LAYOUT_NCHW)
    ccn_load(&p, &tl, (const frost_io *)p.x, p.x_sn, m.x);
    ccn_load(&p, &tl, (const frost_io *)p.dy, p.dy_sn, m.dy);
#else
    cc_load(&p, &tl, &w, (const frost_io *)p.x, p.x_sn, m.x);
    cc_load(&p, &tl, &w, (const frost_io *)p.dy, p.dy_sn, m.dy);
#endif
    /* while the tiles land: ch3 = w_eff per channel, and the saved statistics */
    const int both = CNORM_F_SAVED_MEAN | CNORM_F_SAVED_RSTD;
    const bool recompute = (p.flags & both) != both;
    for (int cl = tid; cl < p.cw; cl += CNC_THREADS)
        m.ch3[cl] = cn_weight(&p, tl.c0 + cl);
    if (!recompute)
        for (int j = tid; j < p.sets; j += CNC_THREADS) {
            m.fin[2 * j] = p.mean[cn_stat_index(&p, tl.n, tl.c0, j, p.mean_sn, p.mean_ss)];
            m.fin[2 * j + 1] = p.inv_std[cn_stat_index(&p, tl.n, tl.c0, j, p.inv_sn, p.inv_ss)];
        }
    cn_cp_async_wait_all();
    __syncthreads();
    if (recompute) {               /* per set: the saved mean / inv_std where given, else recomputed (with epsilon) */
        cc_stats(&p, &tl, &w, &m); /* fin = (mean, M2); the A/B barrier below releases rec */
        for (int j = tid; j < p.sets; j += CNC_THREADS) {
            const float mean = (p.flags & CNORM_F_SAVED_MEAN)
                                   ? p.mean[cn_stat_index(&p, tl.n, tl.c0, j, p.mean_sn, p.mean_ss)]
                                   : m.fin[2 * j];
            const float rstd = (p.flags & CNORM_F_SAVED_RSTD)
                                   ? p.inv_std[cn_stat_index(&p, tl.n, tl.c0, j, p.inv_sn, p.inv_ss)]
                                   : rsqrtf(m.fin[2 * j + 1] * p.inv_m + p.eps);
            m.fin[2 * j] = mean;
            m.fin[2 * j + 1] = rstd;
        }
        __syncthreads();
    }
    /* per channel: sum dy, sum dy (x - mean) */
#if defined(LAYOUT_NCHW)
    ccn_bwd_sums(&p, &tl, m.x, m.dy, m.fin, m.scratch, m.ch0, m.ch1);
#else
    float a[CN_VEC], b[CN_VEC];
#pragma unroll
    for (int k = 0; k < CN_VEC; k++)
        a[k] = b[k] = 0.0f;
    if (w.r0 < w.per) {
        float mu[CN_VEC];
#pragma unroll
        for (int k = 0; k < CN_VEC; k++)
            mu[k] = m.fin[2 * ((w.u * CN_VEC + k) / cg)];
        const int first = w.r0 * p.cw + w.u * CN_VEC;
#pragma unroll 4
        for (int r = w.r0, s = first; r < tl.nq; r += w.per, s += w.per * p.cw) {
            float vx[CN_VEC], vdy[CN_VEC];
            cn_tile_vec(m.x, s, vx);
            cn_tile_vec(m.dy, s, vdy);
#pragma unroll
            for (int k = 0; k < CN_VEC; k++) {
                a[k] += vdy[k];
                b[k] = fmaf(vdy[k], vx[k] - mu[k], b[k]);
            }
        }
    }
    cc_reduce(&p, &w, a, b, m.ch0, m.ch1, m.scratch);
#endif
    if (p.want_rec) /* d_scale / d_bias records (n, c, tile) for cnorm_bwd_dparams_kernel */
        for (int cl = tid; cl < p.cw; cl += CNC_THREADS) {
            float *rec = (float *)(p.ws + p.off_rec) + (((int64_t)tl.n * p.c + tl.c0 + cl) * p.k_tiles + tl.index) * 2;
            rec[0] = m.ch0[cl];
            rec[1] = m.fin[2 * (cl / cg) + 1] * m.ch1[cl];
        }
    for (int j = tid; j < p.sets; j += CNC_THREADS) {
#if defined(KIND_BATCH) /* a set is a channel: the sums go out unweighted (d_bias, d_scale), w applied below */
        const float sa = m.ch0[j], sb = m.ch1[j];
#else
        float sa = 0.0f, sb = 0.0f;
        for (int k = 0; k < cg; k++) {
            const int cl = j * cg + k;
            const float wc = m.ch3[cl];
            sa = fmaf(wc, m.ch0[cl], sa);
            sb = fmaf(wc, m.ch1[cl], sb);
        }
#endif
        m.recb[2 * j] = sa;
        m.recb[2 * j + 1] = sb;
    }
    frost_cluster_sync(); /* A, B out; with recompute, everyone is also done reading rec */
    for (int j = tid; j < p.sets; j += CNC_THREADS) {
        float sa = 0.0f, sb = 0.0f;
        for (int i = 0; i < CLUSTER; i++) {
            float v[2];
            frost_ld_cluster_v2(v, m.recb + 2 * j, (unsigned)i);
            sa += v[0];
            sb += v[1];
        }
        const float r = m.fin[2 * j + 1];
#if defined(KIND_BATCH) /* d_bias = sum dy, d_scale = r sum dy (x - mean), from the cluster's first block */
        if (frost_cluster_rank() == 0) {
            if (p.d_bias)
                p.d_bias[(int64_t)(tl.c0 + j) * p.dbias_sc] = sa;
            if (p.d_scale)
                p.d_scale[(int64_t)(tl.c0 + j) * p.dscale_sc] = r * sb;
        }
        sa *= m.ch3[j];
        sb *= m.ch3[j];
#endif
        /* dx = dy * (r w) - x * cx + k, cx = r^3 B / M, k = mean cx - r A / M */
        const float cx = r * r * r * sb * p.inv_m;
        m.rec[4 * j] = cx;
        m.rec[4 * j + 1] = fmaf(m.fin[2 * j], cx, -r * sa * p.inv_m);
    }
    /* the d_scale / d_bias kernel may be scheduled now; it waits for this grid to finish */
    frost_allow_next_grid();
    frost_cluster_arrive(); /* done reading the others' A, B (rec is this block's own from here) */
    __syncthreads();
    for (int cl = tid; cl < p.cw; cl += CNC_THREADS) {
        const int j = cl / cg;
        m.ch0[cl] = m.rec[4 * j + 1];
        m.ch1[cl] = m.fin[2 * j + 1] * m.ch3[cl];
        m.ch2[cl] = m.rec[4 * j];
    }
    __syncthreads();
#if defined(LAYOUT_NCHW)
    ccn_apply_bwd(&p, &tl, m.x, m.dy, m.ch0, m.ch1, m.ch2);
#else
    if (w.r0 < w.per) {
        float kk[CN_VEC], cdy[CN_VEC], cx[CN_VEC];
#pragma unroll
        for (int k = 0; k < CN_VEC; k++) {
            kk[k] = m.ch0[w.u * CN_VEC + k];
            cdy[k] = m.ch1[w.u * CN_VEC + k];
            cx[k] = m.ch2[w.u * CN_VEC + k];
        }
        frost_io *g = (frost_io *)p.out + cc_goff(&p, &tl, &w, p.out_sn);
        const int64_t gstep = (int64_t)w.per * p.c;
        const int first = w.r0 * p.cw + w.u * CN_VEC;
#pragma unroll 4
        for (int r = w.r0, s = first; r < tl.nq; r += w.per, s += w.per * p.cw, g += gstep) {
            float vx[CN_VEC], vdy[CN_VEC];
            cn_tile_vec(m.x, s, vx);
            cn_tile_vec(m.dy, s, vdy);
#pragma unroll
            for (int k = 0; k < CN_VEC; k++)
                vx[k] = fmaf(vdy[k], cdy[k], fmaf(-vx[k], cx[k], kk[k]));
            cc_store(&p, g, vx);
        }
    }
#endif
    frost_cluster_wait();
}
