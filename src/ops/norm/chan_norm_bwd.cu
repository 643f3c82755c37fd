/*
 * chan_norm_bwd.cu — GroupNorm, InstanceNorm and BatchNorm backward (of the training
 * forward: gradients flow through the batch statistics).
 *
 * Math per set (M elements), g = dy * w_eff[c], x_hat = (x - mean) * r:
 *     dx = r * (g - mean(g) - x_hat * mean(g * x_hat))
 *        = dy * (r w) - (x - mean) * (r^2 mean(g x_hat)) - r mean(g)      (per channel)
 *     d_scale[c] = sum over n, pixels of dy * x_hat,   d_bias[c] = sum of dy
 * mean and r are the saved statistics when given, else recomputed from x with epsilon.
 *
 * Same design as the forward (chan_norm_fwd.cu): a block keeps its tile of x *and* dy in
 * shared memory from load to store, so HBM sees x and dy read once and dx written once
 * (3 x elements x 2 bytes in bf16).  On chip, per channel of the tile: sum x (only when
 * recomputing), then in one pass sum (x - c)^2, sum dy and sum dy (x - c) about a centre c
 * (the tile's own mean, or the saved mean).  A set's record is (count, centre, M2, s1, s2)
 * with s1 = sum g, s2 = sum g (x - c) for GroupNorm, and s1 = sum dy, s2 = sum dy (x - c)
 * for the one-channel sets of BatchNorm / InstanceNorm (w applied later, so d_bias and
 * d_scale come out of the same numbers).  Records merge across tiles with Chan's formulas,
 * which re-centre s2 on the merged mean: one exchange per segment even when the statistics
 * are recomputed.
 *
 * d_scale / d_bias.  BatchNorm: a set is a channel, so the segment's finalizer writes
 * d_bias = s1 and d_scale = r s2 directly.  GroupNorm / InstanceNorm: every tile, once its
 * sets' final statistics are known, writes per channel (sum dy, sum dy x_hat) for its
 * (n, c, tile) into the workspace, and cnorm_bwd_dparams_kernel adds them over n and tiles
 * in index order (one warp per channel): deterministic, and no atomics anywhere.
 *
 * Predicted, H200 bf16 NHWC target shapes: a tile holds 64 KB of x and 64 KB of dy, so
 * BatchNorm windows are 32 channels (64-byte runs; the cp.async L2::128B hint fetches whole
 * lines, and the next window's half line, one wave later, is then an L2 hit) in 16 / 8
 * waves; GroupNorm 32x512x64x64 takes 128-channel windows (256-byte runs), 16 tiles per
 * segment.  A wave moves ~192 KB per SM (6 us of HBM time) against ~4-5 us on chip
 * (the three-sum pass is the heaviest), so 3.2-3.5 TB/s effective if the prefetch holds.
 *
 * Entry points: cnorm_bwd_kernel (modes RESIDENT, STATS, APPLY), cnorm_bwd_finalize_kernel
 * (the fallback's merge) and cnorm_bwd_dparams_kernel.
 */
#include "chan_norm_stats.cuh"

#define PART_FLOATS CNORM_PART_FLOATS_BWD

typedef struct bwd_smem {
    frost_io *x, *dy;
    float *ch0, *ch1, *ch2, *ch3;                          /* per channel: sums, then coefficients */
    float *centre, *fin_r, *fin_mu, *fin_s1, *fin_s2; /* per set (fin_r holds M2 before the merge) */
    float *scratch;
    int *flag;
} bwd_smem;

FROST_DEVICE void bwd_carve(const cnorm_params *p, unsigned char *base, bwd_smem *m)
{
    const uint64_t tile = CNORM_TILE_BYTES(cn_tile_elems(p), sizeof(frost_io));
    m->x = (frost_io *)base;
    m->dy = (frost_io *)(base + tile);
    float *ch = (float *)(base + 2 * tile);
    m->ch0 = ch;
    m->ch1 = ch + p->cw;
    m->ch2 = ch + 2 * p->cw;
    m->ch3 = ch + 3 * p->cw;
    float *set = (float *)((unsigned char *)ch + CNORM_ALIGN16(4ull * CNORM_CH_ARRAYS * p->cw));
    m->centre = set;
    m->fin_r = set + p->sets;
    m->fin_mu = set + 2 * p->sets;
    m->fin_s1 = set + 3 * p->sets;
    m->fin_s2 = set + 4 * p->sets;
    m->flag = (int *)((unsigned char *)set + CNORM_ALIGN16(4ull * CNORM_SET_ARRAYS * p->sets));
    m->scratch = (float *)(m->flag + 4);
}

/* The saved statistics of a set (those given; zeros for the others): saved[0] the mean,
 * saved[1] inv_std.  The finalize kernel loads them beside its records. */
FROST_DEVICE void bwd_load_saved(const cnorm_params *p, int n, int c0, int j, float saved[2])
{
    saved[0] = (p->flags & CNORM_F_SAVED_MEAN) ? p->mean[cn_stat_index(p, n, c0, j, p->mean_sn, p->mean_ss)] : 0.0f;
    saved[1] = (p->flags & CNORM_F_SAVED_RSTD) ? p->inv_std[cn_stat_index(p, n, c0, j, p->inv_sn, p->inv_ss)] : 0.0f;
}

/* Merged record of a set -> (mean, r, s1, s2), the saved statistics from saved
 * (bwd_load_saved) or, when saved is NULL, read here; BatchNorm's finalizer also writes
 * d_bias and d_scale of the channel. */
FROST_DEVICE void bwd_finish_set(const cnorm_params *p, int n, int c0, int j, cnorm_stat st, const float *saved,
                                 float out[4])
{
    float own[2];
    if (!saved) {
        bwd_load_saved(p, n, c0, j, own);
        saved = own;
    }
    out[0] = (p->flags & CNORM_F_SAVED_MEAN) ? saved[0] : st.mean;
    out[1] = (p->flags & CNORM_F_SAVED_RSTD) ? saved[1] : rsqrtf(st.m2 * p->inv_m + p->eps);
    out[2] = st.s1;
    out[3] = fmaf(st.mean - out[0], st.s1, st.s2); /* s2 about the final mean */
#if defined(KIND_BATCH)
    const int64_t c = c0 + j;
    if (p->d_bias)
        p->d_bias[c * p->dbias_sc] = st.s1;
    if (p->d_scale) /* sum dy x_hat about the final mean: a saved mean need not be the batch's */
        p->d_scale[c * p->dscale_sc] = out[1] * out[3];
#endif
}

FROST_DEVICE void bwd_keep_final(const bwd_smem *m, int j, const float f[4])
{
    m->fin_mu[j] = f[0];
    m->fin_r[j] = f[1];
    m->fin_s1[j] = f[2];
    m->fin_s2[j] = f[3];
}

/* Centres and channel sums of the tile: centre[set] is the tile's own mean (statistics
 * recomputed), the saved mean (both saved) or, in APPLY mode, the final mean (read with the
 * final records); then one pass gives per channel M2 (recomputing), sum dy and
 * sum dy (x - centre) in ch1..ch3.  APPLY mode needs the pass only for the records. */
FROST_DEVICE void bwd_tile_sums(const cnorm_params *p, const cnorm_tile *tl, const bwd_smem *m, bool apply, bool saved)
{
    const int tid = threadIdx.x, cg = p->cg;
    if (apply) {
        for (int j = tid; j < p->sets; j += CNORM_THREADS) {
            float f[4];
            cn_ld_cg_v4(f, cn_final(p, tl->seg, j));
            bwd_keep_final(m, j, f);
            m->centre[j] = f[0];
        }
    } else if (saved) {
        for (int j = tid; j < p->sets; j += CNORM_THREADS)
            m->centre[j] = p->mean[cn_stat_index(p, tl->n, tl->c0, j, p->mean_sn, p->mean_ss)];
    } else {
        cn_channel_sums(p, tl, m->x, 0, 0, CN_SUM_X, false, m->ch0, 0, 0, m->scratch);
        for (int j = tid; j < p->sets; j += CNORM_THREADS) {
            float s = 0.0f;
            for (int k = 0; k < cg; k++)
                s += m->ch0[j * cg + k];
            m->centre[j] = s / (float)(cg * tl->nq);
        }
    }
    __syncthreads();
    if (!apply || p->want_rec)
        cn_channel_sums(p, tl, m->x, m->dy, m->centre, CN_SUM_BWD, !apply && !saved, m->ch1, m->ch2, m->ch3,
                        m->scratch);
}

/* Final (mean, r, s1, s2) of every set of the tile into fin_*; centre keeps the centre the
 * channel sums ch2 / ch3 were taken about. */
FROST_DEVICE void bwd_resolve_stats(const cnorm_params *p, const cnorm_tile *tl, int t, const bwd_smem *m)
{
    const int tid = threadIdx.x, cg = p->cg;
    const bool apply = p->mode == CNORM_MODE_APPLY;
    /* both saved: centre on the saved mean, no M2; else recompute like the reference */
    const int both = CNORM_F_SAVED_MEAN | CNORM_F_SAVED_RSTD;
    const bool saved = (p->flags & both) == both;
    bwd_tile_sums(p, tl, m, apply, saved);
    if (apply)
        return;
    /* the tile's record per set: M2 (in fin_r until the merge), s1, s2 */
    for (int j = tid; j < p->sets; j += CNORM_THREADS) {
        float m2 = 0.0f, s1 = 0.0f, s2 = 0.0f;
        for (int k = 0; k < cg; k++) {
            const int cl = j * cg + k;
#if defined(KIND_GROUP)
            const float w = cn_weight(p, tl->c0 + cl); /* per channel, not per element */
#else
            const float w = 1.0f; /* one-channel sets: w is applied with the coefficients */
#endif
            m2 += m->ch1[cl];
            s1 = fmaf(w, m->ch2[cl], s1);
            s2 = fmaf(w, m->ch3[cl], s2);
        }
        m->fin_r[j] = saved ? 0.0f : m2;
        m->fin_s1[j] = s1;
        m->fin_s2[j] = s2;
    }
    __syncthreads();
    const float count = (float)(p->cg * tl->nq);
    if (p->k_tiles == 1 && p->mode == CNORM_MODE_RESIDENT) {
        for (int j = tid; j < p->sets; j += CNORM_THREADS) {
            cnorm_stat st;
            st.count = count, st.mean = m->centre[j], st.m2 = m->fin_r[j], st.s1 = m->fin_s1[j], st.s2 = m->fin_s2[j];
            float f[4];
            bwd_finish_set(p, tl->n, tl->c0, j, st, NULL, f);
            bwd_keep_final(m, j, f);
        }
        __syncthreads();
        return;
    }
    for (int j = tid; j < p->sets; j += CNORM_THREADS) {
        cnorm_stat st;
        st.count = count, st.mean = m->centre[j], st.m2 = m->fin_r[j], st.s1 = m->fin_s1[j], st.s2 = m->fin_s2[j];
        cn_store_part(p, t, j, st, PART_FLOATS);
    }
    if (p->mode == CNORM_MODE_STATS) {
        __syncthreads();
        return;
    }
    if (cn_arrive(p, tl->seg, m->flag)) {
        const int lanes = cn_merge_lanes(p, CNORM_THREADS);
        for (int base = 0; base < p->sets * lanes; base += CNORM_THREADS) {
            const int j = (base + tid) / lanes;
            const cnorm_stat st = cn_merge_set(p, tl->seg, j, PART_FLOATS, lanes);
            if (j < p->sets && (tid & (lanes - 1)) == 0) {
                float f[4];
                bwd_finish_set(p, tl->n, tl->c0, j, st, NULL, f);
                bwd_keep_final(m, j, f);
                cn_st_v4(cn_final(p, tl->seg, j), f[0], f[1], f[2], f[3]);
            }
        }
        cn_release(p, tl->seg);
    } else {
        cn_wait_final(p, tl->seg);
        for (int j = tid; j < p->sets; j += CNORM_THREADS) {
            float f[4];
            cn_ld_cg_v4(f, cn_final(p, tl->seg, j));
            bwd_keep_final(m, j, f);
        }
    }
    __syncthreads();
}

/* GroupNorm / InstanceNorm: this tile's (sum dy, sum dy x_hat) per channel, for the
 * dparams kernel; record (n, c, tile index). */
FROST_DEVICE void bwd_write_records(const cnorm_params *p, const cnorm_tile *tl, const bwd_smem *m)
{
    float *rec = (float *)(p->ws + p->off_rec);
    for (int cl = threadIdx.x; cl < p->cw; cl += CNORM_THREADS) {
        const int j = cl / p->cg;
        const float sdy = m->ch2[cl];
        const float sdyx = m->fin_r[j] * fmaf(m->centre[j] - m->fin_mu[j], sdy, m->ch3[cl]);
        const int64_t at = (((int64_t)tl->n * p->c + tl->c0 + cl) * p->k_tiles + tl->index) * 2;
        rec[at] = sdy;
        rec[at + 1] = sdyx;
    }
}

/* dx for the whole tile; vec is CN_VEC or 1 (a literal at each call). */
FROST_DEVICE void bwd_apply(const cnorm_params *p, const cnorm_tile *tl, const bwd_smem *m, const int vec)
{
    for (int cl = threadIdx.x; cl < p->cw; cl += CNORM_THREADS) {
        const int j = cl / p->cg;
        const float w = cn_weight(p, tl->c0 + cl), r = m->fin_r[j];
#if defined(KIND_GROUP)
        const float mean_g = m->fin_s1[j] * p->inv_m;
        const float mean_gx = r * m->fin_s2[j] * p->inv_m;
#else
        const float mean_g = w * m->fin_s1[j] * p->inv_m;
        const float mean_gx = w * r * m->fin_s2[j] * p->inv_m;
#endif
        /* dx = dy * cdy - x * cx + k */
        const float cx = r * r * mean_gx;
        m->ch0[cl] = fmaf(m->fin_mu[j], cx, -r * mean_g);
        m->ch1[cl] = r * w;
        m->ch2[cl] = cx;
    }
    __syncthreads();
#if defined(LAYOUT_NHWC)
    if (vec > 1 && cn_rows_fit(p)) {
        const cn_rows w = cn_rows_begin(p);
        if (w.r0 >= w.per)
            return;
        float kk[CN_VEC], cdy[CN_VEC], cx[CN_VEC];
#pragma unroll
        for (int k = 0; k < CN_VEC; k++) {
            kk[k] = m->ch0[w.u * CN_VEC + k];
            cdy[k] = m->ch1[w.u * CN_VEC + k];
            cx[k] = m->ch2[w.u * CN_VEC + k];
        }
        cn_gcursor cur = cn_rows_cursor(p, tl, &w, (const frost_io *)p->out, p->out_sn);
        const int first = w.r0 * p->pitch + w.u * CN_VEC;
#pragma unroll 2
        for (int r = w.r0, s = first; r < tl->nq; r += w.per, s += w.per * p->pitch) {
            uint32_t q[4];
            float vx[CN_VEC], vdy[CN_VEC];
            cn_lds_v4(q, m->x + s);
            cn_unpack(q, vx);
            cn_lds_v4(q, m->dy + s);
            cn_unpack(q, vdy);
#pragma unroll
            for (int k = 0; k < CN_VEC; k++)
                vx[k] = fmaf(vdy[k], cdy[k], fmaf(-vx[k], cx[k], kk[k]));
            cn_pack(q, vx);
            cn_st_stream_v4((void *)cur.g, q);
            cn_rows_advance(p, &w, &cur);
        }
        return;
    }
#endif
    frost_io *dx = (frost_io *)p->out;
    float kk[CN_VEC], cdy[CN_VEC], cx[CN_VEC];
    cnorm_walk w;
    bool fresh = true;
    for (cn_walk_begin(&w, p, tl, vec); cn_walk_valid(&w); fresh = cn_walk_next(&w)) {
        const int cl = cn_walk_channel(&w);
        if (fresh) {
#pragma unroll
            for (int k = 0; k < CN_VEC; k++) {
#if defined(LAYOUT_NHWC)
                const int ck = k < vec ? cl + k : cl;
#else
                const int ck = cl;
#endif
                kk[k] = m->ch0[ck];
                cdy[k] = m->ch1[ck];
                cx[k] = m->ch2[ck];
            }
        }
        const int64_t g = cn_goff(p, &w, p->out_sn, tl->c0 + cl);
        const int s = cn_walk_sidx(p, &w);
        if (vec > 1) {
            uint32_t r[4];
            float vx[CN_VEC], vdy[CN_VEC];
            cn_lds_v4(r, m->x + s);
            cn_unpack(r, vx);
            cn_lds_v4(r, m->dy + s);
            cn_unpack(r, vdy);
#pragma unroll
            for (int k = 0; k < CN_VEC; k++)
                vx[k] = fmaf(vdy[k], cdy[k], fmaf(-vx[k], cx[k], kk[k]));
            cn_pack(r, vx);
            cn_st_stream_v4(dx + g, r);
        } else {
            const float xv = frost_to_float(m->x[s]), dyv = frost_to_float(m->dy[s]);
            dx[g] = frost_from_float(fmaf(dyv, cdy[0], fmaf(-xv, cx[0], kk[0])));
        }
    }
}

extern "C" __global__ void __launch_bounds__(CNORM_THREADS, CNORM_MIN_BLOCKS) cnorm_bwd_kernel(const __grid_constant__ cnorm_params p)
{
    extern __shared__ uint4 cnorm_smem[];
    bwd_smem m;
    bwd_carve(&p, (unsigned char *)cnorm_smem, &m);
    const frost_io *x = (const frost_io *)p.x, *dy = (const frost_io *)p.dy;
    for (int i = blockIdx.x; i < p.num_tiles; i += gridDim.x) {
        const int t = cn_visit(&p, i);
        const cnorm_tile tl = cn_tile(&p, t);
        if (p.vec_ok) {
#if defined(LAYOUT_NHWC)
            if (cn_rows_fit(&p)) {
                cn_load_rows(&p, &tl, x, p.x_sn, m.x);
                cn_load_rows(&p, &tl, dy, p.dy_sn, m.dy);
            } else
#endif
            {
                cn_load_tile(&p, &tl, x, p.x_sn, m.x, CN_VEC);
                cn_load_tile(&p, &tl, dy, p.dy_sn, m.dy, CN_VEC);
            }
            cn_cp_async_wait_all();
        } else {
            cn_load_tile(&p, &tl, x, p.x_sn, m.x, 1);
            cn_load_tile(&p, &tl, dy, p.dy_sn, m.dy, 1);
        }
        __syncthreads();
        if (i + (int)gridDim.x < p.num_tiles) {
            const cnorm_tile next = cn_tile(&p, cn_visit(&p, i + (int)gridDim.x));
            cn_prefetch_next(&p, &next, x, p.x_sn);
            cn_prefetch_next(&p, &next, dy, p.dy_sn);
        }
        bwd_resolve_stats(&p, &tl, t, &m);
        if (p.mode != CNORM_MODE_STATS) {
            if (p.want_rec) {
                bwd_write_records(&p, &tl, &m);
                __syncthreads(); /* ch2 / ch3 become coefficients next */
            }
            if (p.vec_ok)
                bwd_apply(&p, &tl, &m, CN_VEC);
            else
                bwd_apply(&p, &tl, &m, 1);
        }
        __syncthreads();
    }
}

/* The merge of the fallback and of the stream path's two launches: a block per
 * CNORM_FIN_SETS sets (cn_finalize_merge: a fixed order). */
extern "C" __global__ void __launch_bounds__(CNORM_FIN_THREADS) cnorm_bwd_finalize_kernel(const __grid_constant__ cnorm_params p)
{
    int seg, j, n, c0;
    cnorm_stat st;
    float saved[2] = {0.0f, 0.0f}, f[4];
    const bool valid = cn_finalize_set(&p, &seg, &j);
    cn_seg_origin(&p, seg, &n, &c0);
    frost_wait_prior_grid(); /* launched early on the stream path (chan_norm_cuda.c) */
    frost_allow_next_grid();
    if (valid && threadIdx.x < CNORM_FIN_SETS) /* the finalizing lanes (cn_finalize_merge) */
        bwd_load_saved(&p, n, c0, j, saved);
    if (!cn_finalize_merge(&p, PART_FLOATS, seg, j, valid, &st))
        return;
    bwd_finish_set(&p, n, c0, j, st, saved, f);
    cn_st_v4(cn_final(&p, seg, j), f[0], f[1], f[2], f[3]);
}

/* d_bias[c] = sum of sum dy, d_scale[c] = sum of sum dy x_hat over the records (n, tile)
 * of channel c: CNORM_DP_SPLIT warps per channel; lane l of the channel's warp s adds the
 * records m = g, g + G, g + 2 G, ... (g = 32 s + l, G = 32 CNORM_DP_SPLIT, m = n * k_tiles +
 * tile) in order, DP_BATCH loads in flight, then a fixed butterfly in each warp and the
 * warps' sums in order.  Lanes next to each other read records next to each other, so a
 * load touches 32 / k_tiles sectors, not 32.  With each lane walking a contiguous chunk of
 * its own the kernel took 11.4 us at GroupNorm 128x256x32x32 and 7.9 us at 32x512x64x64
 * (ncu, H200, 2026-12-03), its loads uncoalesced on the 16 or 32 SMs its blocks hold; one
 * warp per channel with coalesced loads, 5.0 and 4.2 us. */
#define DP_BATCH 8
extern "C" __global__ void __launch_bounds__(CNORM_THREADS) cnorm_bwd_dparams_kernel(const __grid_constant__ cnorm_params p)
{
    __shared__ float part[CNORM_WARPS][2];
    const int warp = threadIdx.x / 32, lane = threadIdx.x & 31, split = warp % CNORM_DP_SPLIT;
    const int c = blockIdx.x * (CNORM_WARPS / CNORM_DP_SPLIT) + warp / CNORM_DP_SPLIT;
    frost_wait_prior_grid(); /* launched early after the cluster path's backward (chan_norm_cuda.c) */
    float sdy = 0.0f, sdyx = 0.0f;
    if (c < p.c) {
        const float2 *rec = (const float2 *)(p.ws + p.off_rec); /* 256-byte aligned, 8 bytes a record */
        const int g = split * 32 + lane, G = 32 * CNORM_DP_SPLIT;
        const int k = p.k_tiles, dn = G / k, di = G % k; /* a step of G records: dn samples and di tiles on */
        const int64_t total = (int64_t)p.n * k, n_stride = (int64_t)p.c * k;
        const float2 *ch = rec + (int64_t)c * k;
        int64_t n = g / k;
        int i = g % k;
        for (int64_t m0 = g; m0 < total; m0 += (int64_t)G * DP_BATCH) {
            float2 v[DP_BATCH];
#pragma unroll
            for (int q = 0; q < DP_BATCH; q++) {
                v[q] = m0 + (int64_t)G * q < total ? ch[n * n_stride + i] : make_float2(0.0f, 0.0f);
                n += dn;
                i += di;
                if (i >= k)
                    i -= k, n++;
            }
#pragma unroll
            for (int q = 0; q < DP_BATCH; q++)
                if (m0 + (int64_t)G * q < total) {
                    sdy += v[q].x;
                    sdyx += v[q].y;
                }
        }
    }
    sdy = frost_warp_sum(sdy);
    sdyx = frost_warp_sum(sdyx);
    if (lane == 0)
        part[warp][0] = sdy, part[warp][1] = sdyx;
    __syncthreads();
    if (lane == 0 && split == 0 && c < p.c) {
        float a = 0.0f, b = 0.0f;
        for (int q = 0; q < CNORM_DP_SPLIT; q++)
            a += part[warp + q][0], b += part[warp + q][1];
        if (p.d_bias)
            p.d_bias[(int64_t)c * p.dbias_sc] = a;
        if (p.d_scale)
            p.d_scale[(int64_t)c * p.dscale_sc] = b;
    }
}
