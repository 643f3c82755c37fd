/*
 * chan_norm_fwd.cu — GroupNorm, InstanceNorm and BatchNorm forward:
 *     y = (x - mean[set]) * inv_std[set] * w_eff[c] + b[c],  inv_std = 1 / sqrt(var + eps)
 * with var the biased variance of the set (training and GroupNorm/InstanceNorm inference),
 * or BatchNorm inference's running statistics.
 *
 * Why this design.  A norm forward is worth only the bytes it moves: x read once, y written
 * once.  Statistics need all of a set before the first output, and a set is large
 * (GroupNorm 32x512x64x64 with 32 groups: 16 channels x 4096 pixels = 64K elements;
 * BatchNorm: a channel over all N x HW pixels), so the usual two kernels read x twice and
 * cap the effective bandwidth at 2/3 of a copy (about 2.8 TB/s on an H200), and the 50 MB
 * L2 cannot keep a 134 MB tensor between them.  Here each block keeps its tile of x in
 * shared memory (up to ~220 KB) from the load to the store: per-channel sums are taken on
 * chip in one pass about a shift (the channel's value in the tile's first row, so no
 * E[x^2] - E[x]^2 cancellation) and merged per set, tiles of one segment exchange (count,
 * mean, M2) through the workspace (chan_norm_stats.cuh: Chan merge by the last arrival, in
 * tile order, so bitwise repeatable), and y is written from shared memory.  HBM traffic
 * is the floor: 2 x elements x 2 bytes in bf16.
 *
 * The grid is persistent, one block per SM (the host checks that every segment's tiles fit
 * in one wave, and sizes tiles so the waves come out even); once a block's tile has landed
 * it asks L2 for its next tile (a bulk prefetch on sm_90), so HBM keeps streaming while the
 * block computes, waits at its segment's barrier and stores.  Tiles are capped at 128 KB
 * so that one wave of prefetches (17 MB on 132 SMs) sits in L2 beside the lines being
 * written.  BatchNorm's segments are channel windows across the whole batch (NHWC: 64
 * channels, 128 bytes per pixel, for the target shapes), GroupNorm's (sample, window).
 *
 * Predicted, H200 bf16 NHWC.  32x512x64x64 GroupNorm(32): tiles of 128 pixels x 512
 * channels, 32 per sample, 8 waves; BatchNorm: 1000 pixels x 64 channels, 132 per window
 * (one wave each), 8 waves; 128x256x32x32: GroupNorm 1024 pixels x 64 channels (whole
 * groups, no exchange), BatchNorm as above in 4 waves.  A wave moves ~256 KB per SM, 8 us
 * at an SM's share of 4.18 TB/s.  Measured (ncu, 2026-12-02, docs/PERF.md), the on-chip
 * work was the larger part: the general tile walk spent ~170 instructions per 16-byte unit
 * (issue-bound at IPC 1.6), so the NHWC vector path has its own row cursor and the
 * statistics take one pass.
 *
 * Entry points: cnorm_fwd_kernel (modes RESIDENT, STATS, APPLY — see the header) and
 * cnorm_fwd_finalize_kernel (the merge of the fallback and of the stream path's two launches:
 * a block per CNORM_FIN_SETS sets).
 */
#include "chan_norm_stats.cuh"

#define PART_FLOATS CNORM_PART_FLOATS_FWD

typedef struct fwd_smem {
    frost_io *x;                     /* the tile */
    float *sum, *sq, *coef_a, *coef_b; /* per channel of the window */
    float *set_mean, *set_m2, *fin_mean, *fin_rstd; /* per set */
    float *scratch;
    int *flag;
} fwd_smem;

FROST_DEVICE void fwd_carve(const cnorm_params *p, unsigned char *base, fwd_smem *m)
{
    const uint64_t tile = CNORM_TILE_BYTES(cn_tile_elems(p), sizeof(frost_io));
    m->x = (frost_io *)base;
    float *ch = (float *)(base + tile);
    m->sum = ch;
    m->sq = ch + p->cw;
    m->coef_a = ch + 2 * p->cw;
    m->coef_b = ch + 3 * p->cw;
    float *set = (float *)((unsigned char *)ch + CNORM_ALIGN16(4ull * CNORM_CH_ARRAYS * p->cw));
    m->set_mean = set;
    m->set_m2 = set + p->sets;
    m->fin_mean = set + 2 * p->sets;
    m->fin_rstd = set + 3 * p->sets;
    m->flag = (int *)((unsigned char *)set + CNORM_ALIGN16(4ull * CNORM_SET_ARRAYS * p->sets));
    m->scratch = (float *)(m->flag + 4);
}

/* Tile statistics: per-set mean and M2 into set_mean / set_m2 (two passes on chip). */
FROST_DEVICE void fwd_tile_stats(const cnorm_params *p, const cnorm_tile *tl, const fwd_smem *m)
{
    /* one pass: per channel S1 = sum (x - s), S2 = sum (x - s)^2 about a shift s, the
     * channel's value in the tile's first row (near the mean, so S2 - S1^2 / n keeps its
     * digits: no E[x^2] - E[x]^2 cancellation); then per set, the channels' (mean, M2)
     * merge with Chan's formula for equal counts. */
    const int cg = p->cg;
    cn_channel_sums(p, tl, m->x, 0, 0, CN_SUM_SHIFT, false, m->sum, m->sq, 0, m->scratch);
    const float n = (float)tl->nq, inv_n = 1.0f / n;
    for (int j = threadIdx.x; j < p->sets; j += CNORM_THREADS) {
        float mean = 0.0f, m2 = 0.0f;
        for (int k = 0; k < cg; k++) {
            const int cl = j * cg + k;
            mean += fmaf(m->sum[cl], inv_n, cn_tile_first(p, m->x, cl));
        }
        mean /= (float)cg;
        for (int k = 0; k < cg; k++) {
            const int cl = j * cg + k;
            const float s1 = m->sum[cl], dm = fmaf(s1, inv_n, cn_tile_first(p, m->x, cl)) - mean;
            m2 += fmaf(-s1 * inv_n, s1, m->sq[cl]) + n * dm * dm;
        }
        m->set_mean[j] = mean;
        m->set_m2[j] = fmaxf(m2, 0.0f);
    }
    __syncthreads();
}

/* Final mean / rstd of every set of the tile's window into fin_mean / fin_rstd. */
FROST_DEVICE void fwd_resolve_stats(const cnorm_params *p, const cnorm_tile *tl, int t, const fwd_smem *m)
{
    const int tid = threadIdx.x;
    if (p->mode == CNORM_MODE_APPLY) {
        for (int j = tid; j < p->sets; j += CNORM_THREADS) {
            if (p->flags & CNORM_F_RUNNING) {
                const int64_t c = tl->c0 + j; /* BatchNorm: a set is a channel */
                m->fin_mean[j] = p->running_mean[c * p->rmean_sc];
                m->fin_rstd[j] = rsqrtf(p->running_var[c * p->rvar_sc] + p->eps);
            } else {
                float v[4];
                cn_ld_cg_v4(v, cn_final(p, tl->seg, j));
                m->fin_mean[j] = v[0];
                m->fin_rstd[j] = v[1];
            }
        }
        __syncthreads();
        return;
    }
    fwd_tile_stats(p, tl, m);
    const float count = (float)(p->cg * tl->nq);
    if (p->k_tiles == 1 && p->mode == CNORM_MODE_RESIDENT) {
        for (int j = tid; j < p->sets; j += CNORM_THREADS) {
            cnorm_stat st = cn_stat_zero();
            st.count = count, st.mean = m->set_mean[j], st.m2 = m->set_m2[j];
            fwd_finish_set(p, tl->n, tl->c0, j, st, NULL, &m->fin_mean[j], &m->fin_rstd[j]);
        }
        __syncthreads();
        return;
    }
    for (int j = tid; j < p->sets; j += CNORM_THREADS) {
        cnorm_stat st = cn_stat_zero();
        st.count = count, st.mean = m->set_mean[j], st.m2 = m->set_m2[j];
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
                fwd_finish_set(p, tl->n, tl->c0, j, st, NULL, &m->fin_mean[j], &m->fin_rstd[j]);
                float *fin = cn_final(p, tl->seg, j);
                cn_st_v4(fin, m->fin_mean[j], m->fin_rstd[j], 0.0f, 0.0f);
            }
        }
        cn_release(p, tl->seg);
    } else {
        cn_wait_final(p, tl->seg);
        for (int j = tid; j < p->sets; j += CNORM_THREADS) {
            float v[4];
            cn_ld_cg_v4(v, cn_final(p, tl->seg, j));
            m->fin_mean[j] = v[0];
            m->fin_rstd[j] = v[1];
        }
    }
    __syncthreads();
}

/* y for the whole tile from shared memory; vec is CN_VEC or 1 (a literal at each call).
 * y = x * a + b' per channel, a = rstd * w_eff and b' = bias - mean * a. */
FROST_DEVICE void fwd_apply(const cnorm_params *p, const cnorm_tile *tl, const fwd_smem *m, const int vec)
{
    for (int cl = threadIdx.x; cl < p->cw; cl += CNORM_THREADS) {
        const int j = cl / p->cg, c = tl->c0 + cl;
        const float a = m->fin_rstd[j] * cn_weight(p, c);
        const float b = p->bias_dt != FROST_DT_NONE ? cn_param(p->bias, (int64_t)c * p->bias_sc, p->bias_dt) : 0.0f;
        m->coef_a[cl] = a;
        m->coef_b[cl] = fmaf(-m->fin_mean[j], a, b);
    }
    __syncthreads();
#if defined(LAYOUT_NHWC)
    if (vec > 1 && cn_rows_fit(p)) {
        const cn_rows w = cn_rows_begin(p);
        if (w.r0 >= w.per)
            return;
        float a[CN_VEC], b[CN_VEC];
#pragma unroll
        for (int k = 0; k < CN_VEC; k++) {
            a[k] = m->coef_a[w.u * CN_VEC + k];
            b[k] = m->coef_b[w.u * CN_VEC + k];
        }
        cn_gcursor cur = cn_rows_cursor(p, tl, &w, (const frost_io *)p->out, p->out_sn);
        const frost_io *s = m->x + w.r0 * p->pitch + w.u * CN_VEC;
#pragma unroll 4
        for (int r = w.r0; r < tl->nq; r += w.per) {
            uint32_t q[4];
            float v[CN_VEC];
            cn_lds_v4(q, s);
            cn_unpack(q, v);
#pragma unroll
            for (int k = 0; k < CN_VEC; k++)
                v[k] = fmaf(v[k], a[k], b[k]);
            cn_pack(q, v);
            cn_st_stream_v4((void *)cur.g, q);
            s += w.per * p->pitch;
            cn_rows_advance(p, &w, &cur);
        }
        return;
    }
#endif
    frost_io *y = (frost_io *)p->out;
    float mul[CN_VEC], add[CN_VEC];
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
                mul[k] = m->coef_a[ck];
                add[k] = m->coef_b[ck];
            }
        }
        const int64_t g = cn_goff(p, &w, p->out_sn, tl->c0 + cl);
        const int s = cn_walk_sidx(p, &w);
        if (vec > 1) {
            uint32_t r[4];
            float v[CN_VEC];
            cn_lds_v4(r, m->x + s);
            cn_unpack(r, v);
#pragma unroll
            for (int k = 0; k < CN_VEC; k++)
                v[k] = fmaf(v[k], mul[k], add[k]);
            cn_pack(r, v);
            cn_st_stream_v4(y + g, r);
        } else {
            y[g] = frost_from_float(fmaf(frost_to_float(m->x[s]), mul[0], add[0]));
        }
    }
}

extern "C" __global__ void __launch_bounds__(CNORM_THREADS, CNORM_MIN_BLOCKS) cnorm_fwd_kernel(const __grid_constant__ cnorm_params p)
{
    extern __shared__ uint4 cnorm_smem[];
    fwd_smem m;
    fwd_carve(&p, (unsigned char *)cnorm_smem, &m);
    const frost_io *x = (const frost_io *)p.x;
    for (int i = blockIdx.x; i < p.num_tiles; i += gridDim.x) {
        const int t = cn_visit(&p, i);
        const cnorm_tile tl = cn_tile(&p, t);
        if (p.vec_ok) {
#if defined(LAYOUT_NHWC)
            if (cn_rows_fit(&p))
                cn_load_rows(&p, &tl, x, p.x_sn, m.x);
            else
#endif
                cn_load_tile(&p, &tl, x, p.x_sn, m.x, CN_VEC);
            cn_cp_async_wait_all();
        } else {
            cn_load_tile(&p, &tl, x, p.x_sn, m.x, 1);
        }
        __syncthreads();
        if (i + (int)gridDim.x < p.num_tiles) {
            const cnorm_tile next = cn_tile(&p, cn_visit(&p, i + (int)gridDim.x));
            cn_prefetch_next(&p, &next, x, p.x_sn);
        }
        fwd_resolve_stats(&p, &tl, t, &m);
        if (p.mode != CNORM_MODE_STATS) {
            if (p.vec_ok)
                fwd_apply(&p, &tl, &m, CN_VEC);
            else
                fwd_apply(&p, &tl, &m, 1);
        }
        __syncthreads(); /* the tile and the arrays are reused */
    }
}

/* The merge of the fallback and of the stream path's two-launch form: block b finalizes
 * the CNORM_FIN_SETS sets from b * CNORM_FIN_SETS on (over all segments) from their k_tiles
 * partials (cn_finalize_merge: a fixed order). */
extern "C" __global__ void __launch_bounds__(CNORM_FIN_THREADS) cnorm_fwd_finalize_kernel(const __grid_constant__ cnorm_params p)
{
    int seg, j, n, c0;
    cnorm_stat st;
    float run[2] = {0.0f, 0.0f}, mean, rstd;
    const bool valid = cn_finalize_set(&p, &seg, &j);
    cn_seg_origin(&p, seg, &n, &c0);
    frost_wait_prior_grid(); /* launched early on the stream path (chan_norm_cuda.c) */
    frost_allow_next_grid();
    if (valid && threadIdx.x < CNORM_FIN_SETS) /* the finalizing lanes (cn_finalize_merge) */
        fwd_load_running(&p, c0, j, run);
    if (!cn_finalize_merge(&p, PART_FLOATS, seg, j, valid, &st))
        return;
    fwd_finish_set(&p, n, c0, j, st, run, &mean, &rstd);
    cn_st_v4(cn_final(&p, seg, j), mean, rstd, 0.0f, 0.0f);
}
