/*
 * chan_norm_stream.cu — BatchNorm training forward and backward for NHWC tensors on the
 * 16-byte vector path: a grid of blocks that each own `rows` rows of every channel window
 * stream x (and dy) through registers, with no tile in shared memory.
 *
 * Why.  A BatchNorm set is a channel over the whole batch, so a window of channels is
 * tens of megabytes (32x512x64x64 bf16, 64 channels: 16 MB) and cannot stay in shared
 * memory while its statistics are gathered.  Two forms:
 *
 * Two passes (the default, "the two-launch form").  Launch 1 (mode STATS): each block reads
 * its rows of every window once, takes per-channel sums in registers and publishes
 * per-channel records (CNORM_F_MERGE_KERNEL); the finalize kernel (chan_norm_fwd.cu,
 * chan_norm_bwd.cu: cn_finalize_merge, a fixed order) merges them.  With
 * FROST_CNORM_STREAM_MERGE=0 the blocks of launch 1 arrive at the window's counter instead
 * and the last arrivals merge (below): slower, because a few blocks merge while the rest of
 * the GPU idles (ncu, 2026-12-03: SMs active 55 % of that launch).  Launch 2 (mode APPLY):
 * each block reads its rows again and writes the output.  The host takes the widest window
 * (C itself when it fits), so a block's rows are long contiguous runs, and sets keep_rows:
 * the first keep_rows rows of every tile are read evict-last in launch 1, the rest
 * evict-first, so launch 2 finds that share of x (and dy) in L2.
 *
 * One launch (FROST_CNORM_STREAM=1, mode RESIDENT).  Every block is resident: it reads
 * its rows of window s once from HBM, publishes its records and arrives, then reads its
 * rows of window s + 1, and only then waits for window s's statistics and normalizes its
 * rows of window s, reading them a second time from L2 (evict-last on the first read,
 * evict-first on the second).  The host keeps a window under a third of L2.  Deadlock-free
 * because every block is resident (the host launches no more blocks than the device holds
 * at once, and checks it) and a block's waits are for windows whose records every block
 * publishes before it waits for anything later.
 *
 * The merge (cs_arrive) has two levels so that no block merges many records:
 * the last arrival of each group of CNS_GROUP consecutive tiles merges the group's
 * records (a few round trips to L2) and arrives at the window's
 * counter; the last of the groups merges the group records, writes mean / inv_std, the
 * saved statistics and the running ones, and releases the others.  Both levels merge in
 * a fixed order, whichever block arrives last.  (A first version let one block merge all
 * k_tiles records per channel, about ten dependent round trips to L2: in the one-launch
 * form ncu put 54 % of the stall samples at the wait for it.)
 *
 * The backward (cnorm_stream_bwd_kernel, with both saved statistics) runs the same
 * schedules over x and dy: per window, per-channel sum dy and sum dy (x - mean) from the
 * first read, merged by the last arrivals, which also write d_bias and d_scale; then dx
 * from the second read,
 *     dx = dy * (r w) - x * (r^3 w sum dy (x - mean) / M) + (mean r^3 w ... - r w sum dy / M)
 * (chan_norm_bwd.cu's formula).
 *
 * Entry points: cnorm_stream_fwd_kernel, cnorm_stream_bwd_kernel (every form and mode), and
 * for the two-launch form with the finalize kernel's merge cnorm_stream_{fwd,bwd}_stats_kernel
 * and cnorm_stream_{fwd,bwd}_apply_kernel, each compiled for its own loop (no spills at
 * STREAM_BLOCKS = 2, where the combined kernel spills).  Keys: DTYPE_*, KIND_BATCH,
 * LAYOUT_NHWC, STREAM_BLOCKS (the split entry points' blocks per SM).
 * params.prefetch = CNORM_PREFETCH_NONE turns the L2 hints off (FROST_CNORM_PREFETCH=2).
 */
#include "chan_norm_units.cuh"

#if !defined(LAYOUT_NHWC) || !defined(KIND_BATCH)
#error "the stream path is BatchNorm on NHWC tensors"
#endif

#define CS_BATCH 8 /* loads in flight per thread */

/* A thread's row cursor in x or y: rows advance by `per`; crossing samples adds the gap
 * between the end of a sample and the next one's start (n stride sn). */
typedef struct cs_cursor {
    const frost_io *g;
    int px;
} cs_cursor;

FROST_DEVICE cs_cursor cs_begin(const cnorm_params *p, const cnorm_tile *tl, const cc_map *w, const void *base,
                                int64_t sn)
{
    cs_cursor c;
    const int q = tl->q0 + w->r0, n = q / p->hw;
    c.px = q - n * p->hw;
    c.g = (const frost_io *)base + (int64_t)n * sn + (int64_t)c.px * p->c + tl->c0 + w->u * CN_VEC;
    return c;
}

FROST_DEVICE void cs_advance(const cnorm_params *p, const cc_map *w, int64_t sn, cs_cursor *c)
{
    c->g += (int64_t)w->per * p->c;
    c->px += w->per;
    if (c->px >= p->hw) {
        const int samples = c->px / p->hw;
        c->px -= samples * p->hw;
        c->g += samples * (sn - (int64_t)p->hw * p->c);
    }
}

/* Shared memory: the reduction's scratch, per channel the tile's sums and shifts and the
 * coefficients, the scale and bias of the two windows in flight, a merged record per set,
 * the arrival flag (CNS_SMEM_BYTES, chan_norm_kernel.cuh). */
typedef struct cs_smem {
    float *scratch;
    float *s1, *s2, *shift, *coef_a, *coef_b; /* [cw] */
    float *wb;          /* [2 windows][3][cw]: forward w_eff, bias; backward w_eff, mean, inv_std */
    cnorm_stat *merged; /* [cw]: a merge's result per set */
    int *flag;
} cs_smem;

FROST_DEVICE void cs_carve(const cnorm_params *p, unsigned char *base, cs_smem *m)
{
    const int cw = p->cw;
    m->scratch = (float *)base;
    float *f = m->scratch + 2 * cw * CNC_PHASES(cw / CN_VEC);
    m->s1 = f;
    m->s2 = f + cw;
    m->shift = f + 2 * cw;
    m->coef_a = f + 3 * cw;
    m->coef_b = f + 4 * cw;
    m->wb = f + 5 * cw;
    m->merged = (cnorm_stat *)(f + 11 * cw);
    m->flag = (int *)(f + 16 * cw);
}

/* One 16-byte unit of x as floats: the vector load (with the L2 policy when hinted), or
 * element by element when a base is misaligned. */
FROST_DEVICE void cs_unit(const cnorm_params *p, const frost_io *g, float v[CN_VEC], bool hint, uint64_t pol)
{
    if (p->vec_ok) {
        uint32_t q[4];
        cn_ldg_v4(q, g, hint, pol);
        cn_unpack(q, v);
    } else {
#pragma unroll
        for (int k = 0; k < CN_VEC; k++)
            v[k] = frost_to_float(g[k]);
    }
}

/* The whole block merges `count` records of every set of the window, the first at record
 * index `first`, into m->merged (fixed order: cn_merge_recs). */
FROST_DEVICE void cs_merge_all(const cnorm_params *p, int64_t first, int count, const int floats, const cs_smem *m)
{
    const int lanes = cn_merge_lanes(p, CNC_THREADS);
    for (int base = 0; base < p->sets * lanes; base += CNC_THREADS) {
        const int j = (base + (int)threadIdx.x) / lanes;
        const cnorm_stat st = cn_merge_recs(p, first, j < p->sets ? count : 0, j, floats, lanes);
        if (j < p->sets && (threadIdx.x & (lanes - 1)) == 0)
            m->merged[j] = st;
    }
    __syncthreads();
}

/* Block b's arrival at window seg once its tile's records are stored.  Two levels, so no
 * block merges more than CNS_GROUP or CNS_GROUPS(k_tiles) records per set: the last
 * arrival of b's group of CNS_GROUP tiles merges the group's records into a group record
 * (record index num_tiles + seg x groups + group; counter num_segments + the same) and
 * arrives at the window's counter; the last of those merges the group records into
 * m->merged and returns true (to every thread): it then writes the window's final
 * records and releases the others (cn_release). */
FROST_DEVICE bool cs_arrive(const cnorm_params *p, int seg, const int floats, const cs_smem *m)
{
    const int groups = p->arrivals, g = (int)blockIdx.x / CNS_GROUP, first = g * CNS_GROUP;
    const int size = p->k_tiles - first < CNS_GROUP ? p->k_tiles - first : CNS_GROUP;
    const int64_t group_rec = (int64_t)seg * groups + g;
    if (!cn_arrive_at(p, p->num_segments + group_rec, size, m->flag))
        return false;
    cs_merge_all(p, (int64_t)seg * p->k_tiles + first, size, floats, m);
    for (int j = threadIdx.x; j < p->sets; j += CNC_THREADS)
        cn_store_part(p, (int)(p->num_tiles + group_rec), j, m->merged[j], floats);
    if (!cn_arrive(p, seg, m->flag))
        return false;
    cs_merge_all(p, p->num_tiles + (int64_t)seg * groups, groups, floats, m);
    return true;
}

FROST_DEVICE void cs_acc(const float x[CN_VEC], const float s[CN_VEC], float a[CN_VEC], float b[CN_VEC])
{
#pragma unroll
    for (int k = 0; k < CN_VEC; k++) {
        const float d = x[k] - s[k];
        a[k] += d;
        b[k] = fmaf(d, d, b[k]);
    }
}

/* This block's scale and bias of tile tl's window into wb[par] (read while x streams). */
FROST_DEVICE void cs_params(const cnorm_params *p, const cnorm_tile *tl, const cs_smem *m, int par)
{
    float *wb = m->wb + par * 3 * p->cw;
    for (int cl = threadIdx.x; cl < p->cw; cl += CNC_THREADS) {
        const int c = tl->c0 + cl;
        wb[cl] = cn_weight(p, c);
        wb[p->cw + cl] = p->bias_dt != FROST_DT_NONE ? cn_param(p->bias, (int64_t)c * p->bias_sc, p->bias_dt) : 0.0f;
    }
}

/* Tile t's rows: per-channel sums about the tile's first row into s1, s2, shift; then the
 * records and, unless the finalize kernel merges them (CNORM_F_MERGE_KERNEL), the arrival
 * and for the last arrival the window's merge. */
FROST_DEVICE void cs_stats(const cnorm_params *p, const cnorm_tile *tl, int t, const cc_map *w, const cs_smem *m,
                           uint64_t keep, uint64_t drop, const bool merge_here)
{
    const bool hint = p->prefetch != CNORM_PREFETCH_NONE;
    float s[CN_VEC], a[CN_VEC], b[CN_VEC];
#pragma unroll
    for (int k = 0; k < CN_VEC; k++)
        s[k] = a[k] = b[k] = 0.0f;
    if (w->r0 < w->per && tl->nq > 0) {
        cc_map w0 = *w;
        w0.r0 = 0;
        cs_unit(p, cs_begin(p, tl, &w0, p->x, p->x_sn).g, s, false, keep);
        cs_cursor c = cs_begin(p, tl, w, p->x, p->x_sn);
        int r = w->r0;
        if (p->vec_ok)
            for (; r < tl->nq; r += CS_BATCH * w->per) { /* CS_BATCH loads in flight, the last batch predicated */
                uint32_t v[CS_BATCH][4];
#pragma unroll
                for (int i = 0; i < CS_BATCH; i++) {
                    if (r + i * w->per < tl->nq)
                        cn_ldg_v4(v[i], c.g, hint, r + i * w->per < p->keep_rows ? keep : drop);
                    cs_advance(p, w, p->x_sn, &c);
                }
#pragma unroll
                for (int i = 0; i < CS_BATCH; i++)
                    if (r + i * w->per < tl->nq) {
                        float x[CN_VEC];
                        cn_unpack(v[i], x);
                        cs_acc(x, s, a, b);
                    }
            }
        for (; r < tl->nq; r += w->per) {
            float x[CN_VEC];
            cs_unit(p, c.g, x, hint, r < p->keep_rows ? keep : drop);
            cs_advance(p, w, p->x_sn, &c);
            cs_acc(x, s, a, b);
        }
        if (w->r0 == 0)
#pragma unroll
            for (int k = 0; k < CN_VEC; k++)
                m->shift[w->u * CN_VEC + k] = s[k];
    }
    cc_reduce(p, w, a, b, m->s1, m->s2, m->scratch);
    const float n = (float)tl->nq, inv_n = tl->nq > 0 ? 1.0f / n : 0.0f;
    for (int cl = threadIdx.x; cl < p->cw; cl += CNC_THREADS) {
        cnorm_stat st = cn_stat_zero();
        if (tl->nq > 0) {
            const float s1 = m->s1[cl];
            st.count = n;
            st.mean = fmaf(s1, inv_n, m->shift[cl]);
            st.m2 = fmaxf(fmaf(-s1 * inv_n, s1, m->s2[cl]), 0.0f);
        }
        cn_store_part(p, t, cl, st, CNORM_PART_FLOATS_FWD);
    }
    if (!merge_here)
        return;
    if (cs_arrive(p, tl->seg, CNORM_PART_FLOATS_FWD, m)) {
        for (int j = threadIdx.x; j < p->sets; j += CNC_THREADS) {
            float mean, rstd;
            fwd_finish_set(p, 0, tl->c0, j, m->merged[j], NULL, &mean, &rstd);
            cn_st_v4(cn_final(p, tl->seg, j), mean, rstd, 0.0f, 0.0f);
        }
        cn_release(p, tl->seg);
    }
}

/* y for tile tl's rows, once its window's statistics are out: x read again (from L2). */
FROST_DEVICE void cs_apply(const cnorm_params *p, const cnorm_tile *tl, const cc_map *w, const cs_smem *m, int par,
                           uint64_t drop, const bool later_launch)
{
    const bool hint = p->prefetch != CNORM_PREFETCH_NONE;
    if (later_launch) /* a later launch than the statistics' merge */
        __syncthreads();
    else
        cn_wait_final(p, tl->seg);
    const float *wb = m->wb + par * 3 * p->cw;
    for (int cl = threadIdx.x; cl < p->cw; cl += CNC_THREADS) {
        float f[4];
        cn_ld_cg_v4(f, cn_final(p, tl->seg, cl));
        const float a = f[1] * wb[cl];
        m->coef_a[cl] = a;
        m->coef_b[cl] = fmaf(-f[0], a, wb[p->cw + cl]);
    }
    __syncthreads();
    if (w->r0 >= w->per || tl->nq <= 0)
        return;
    float a[CN_VEC], b[CN_VEC];
#pragma unroll
    for (int k = 0; k < CN_VEC; k++) {
        a[k] = m->coef_a[w->u * CN_VEC + k];
        b[k] = m->coef_b[w->u * CN_VEC + k];
    }
    cs_cursor cx = cs_begin(p, tl, w, p->x, p->x_sn), cy = cs_begin(p, tl, w, p->out, p->out_sn);
    int r = w->r0;
    if (p->vec_ok)
        for (; r < tl->nq; r += CS_BATCH * w->per) {
            uint32_t v[CS_BATCH][4];
#pragma unroll
            for (int i = 0; i < CS_BATCH; i++) {
                if (r + i * w->per < tl->nq)
                    cn_ldg_v4(v[i], cx.g, hint, drop);
                cs_advance(p, w, p->x_sn, &cx);
            }
#pragma unroll
            for (int i = 0; i < CS_BATCH; i++) {
                if (r + i * w->per < tl->nq) {
                    float x[CN_VEC];
                    cn_unpack(v[i], x);
#pragma unroll
                    for (int k = 0; k < CN_VEC; k++)
                        x[k] = fmaf(x[k], a[k], b[k]);
                    cn_pack(v[i], x);
                    cn_st_stream_v4((void *)cy.g, v[i]);
                }
                cs_advance(p, w, p->out_sn, &cy);
            }
        }
    for (; r < tl->nq; r += w->per) {
        float x[CN_VEC];
        cs_unit(p, cx.g, x, hint, drop);
        cs_advance(p, w, p->x_sn, &cx);
#pragma unroll
        for (int k = 0; k < CN_VEC; k++)
            x[k] = fmaf(x[k], a[k], b[k]);
        cc_store(p, (frost_io *)cy.g, x);
        cs_advance(p, w, p->out_sn, &cy);
    }
}

/* Block b owns tile b of every window.  Mode RESIDENT (the grid is k_tiles blocks, all
 * resident): the statistics of window s, then the output of window s - 1.  The two-launch
 * form: mode STATS, every window's statistics records (merged by the finalize kernel, or by
 * the last arrivals under FROST_CNORM_STREAM_MERGE=0; no block waits for another);
 * mode APPLY, a second launch, every window's output. */
extern "C" __global__ void __launch_bounds__(CNC_THREADS, CNS_MIN_BLOCKS)
    cnorm_stream_fwd_kernel(const __grid_constant__ cnorm_params p)
{
    extern __shared__ uint4 cnorm_smem[];
    cs_smem m;
    cs_carve(&p, (unsigned char *)cnorm_smem, &m);
    const cc_map w = cc_map_make(&p);
    const uint64_t keep = cn_l2_policy(true), drop = cn_l2_policy(false);
    if (p.mode != CNORM_MODE_RESIDENT) {
        for (int s = 0; s < p.windows; s++) {
            const int t = s * p.k_tiles + (int)blockIdx.x;
            const cnorm_tile tl = cn_tile(&p, t);
            if (p.mode == CNORM_MODE_STATS) {
                cs_stats(&p, &tl, t, &w, &m, keep, drop, !(p.flags & CNORM_F_MERGE_KERNEL));
            } else {
                cs_params(&p, &tl, &m, 0);
                cs_apply(&p, &tl, &w, &m, 0, drop, true);
            }
            __syncthreads(); /* shift, sums and coefficients are reused */
        }
        return;
    }
    for (int s = 0; s <= p.windows; s++) {
        if (s < p.windows) {
            const int t = s * p.k_tiles + (int)blockIdx.x;
            const cnorm_tile tl = cn_tile(&p, t);
            cs_params(&p, &tl, &m, s & 1);
            cs_stats(&p, &tl, t, &w, &m, keep, drop, true);
        }
        if (s > 0) {
            const cnorm_tile tl = cn_tile(&p, (s - 1) * p.k_tiles + (int)blockIdx.x);
            cs_apply(&p, &tl, &w, &m, (s - 1) & 1, drop, false);
        }
        __syncthreads(); /* shift, sums and coefficients are reused */
    }
}

/* ---- backward ------------------------------------------------------------------------------ */
/* This block's w_eff and the saved mean / inv_std of tile tl's window into wb[par]. */
FROST_DEVICE void cs_bwd_params(const cnorm_params *p, const cnorm_tile *tl, const cs_smem *m, int par)
{
    float *wb = m->wb + par * 3 * p->cw;
    for (int cl = threadIdx.x; cl < p->cw; cl += CNC_THREADS) {
        wb[cl] = cn_weight(p, tl->c0 + cl);
        wb[p->cw + cl] = p->mean[cn_stat_index(p, 0, tl->c0, cl, p->mean_sn, p->mean_ss)];
        wb[2 * p->cw + cl] = p->inv_std[cn_stat_index(p, 0, tl->c0, cl, p->inv_sn, p->inv_ss)];
    }
}

FROST_DEVICE void cs_acc_bwd(const float x[CN_VEC], const float g[CN_VEC], const float mu[CN_VEC], float a[CN_VEC],
                             float b[CN_VEC])
{
#pragma unroll
    for (int k = 0; k < CN_VEC; k++) {
        a[k] += g[k];
        b[k] = fmaf(g[k], x[k] - mu[k], b[k]);
    }
}

/* Tile t's rows: per channel sum dy and sum dy (x - mean) into the workspace records; then,
 * unless the finalize kernel merges them (CNORM_F_MERGE_KERNEL), the arrival, and for the
 * last arrival the window's merge, d_bias and d_scale. */
FROST_DEVICE void cs_bwd_stats(const cnorm_params *p, const cnorm_tile *tl, int t, const cc_map *w, const cs_smem *m,
                               int par, uint64_t keep, uint64_t drop, const bool merge_here)
{
    const bool hint = p->prefetch != CNORM_PREFETCH_NONE;
    const float *wb = m->wb + par * 3 * p->cw;
    __syncthreads(); /* wb[par] is in */
    float a[CN_VEC], b[CN_VEC], mu[CN_VEC];
#pragma unroll
    for (int k = 0; k < CN_VEC; k++) {
        a[k] = b[k] = 0.0f;
        mu[k] = wb[p->cw + w->u * CN_VEC + k];
    }
    if (w->r0 < w->per) {
        cs_cursor cx = cs_begin(p, tl, w, p->x, p->x_sn), cg = cs_begin(p, tl, w, p->dy, p->dy_sn);
        int r = w->r0;
        if (p->vec_ok)
            for (; r < tl->nq; r += CS_BATCH / 2 * w->per) {
                uint32_t vx[CS_BATCH / 2][4], vg[CS_BATCH / 2][4];
#pragma unroll
                for (int i = 0; i < CS_BATCH / 2; i++) {
                    if (r + i * w->per < tl->nq) {
                        const uint64_t pol = r + i * w->per < p->keep_rows ? keep : drop;
                        cn_ldg_v4(vx[i], cx.g, hint, pol);
                        cn_ldg_v4(vg[i], cg.g, hint, pol);
                    }
                    cs_advance(p, w, p->x_sn, &cx);
                    cs_advance(p, w, p->dy_sn, &cg);
                }
#pragma unroll
                for (int i = 0; i < CS_BATCH / 2; i++)
                    if (r + i * w->per < tl->nq) {
                        float x[CN_VEC], g[CN_VEC];
                        cn_unpack(vx[i], x);
                        cn_unpack(vg[i], g);
                        cs_acc_bwd(x, g, mu, a, b);
                    }
            }
        for (; r < tl->nq; r += w->per) {
            float x[CN_VEC], g[CN_VEC];
            const uint64_t pol = r < p->keep_rows ? keep : drop;
            cs_unit(p, cx.g, x, hint, pol);
            cs_unit(p, cg.g, g, hint, pol);
            cs_advance(p, w, p->x_sn, &cx);
            cs_advance(p, w, p->dy_sn, &cg);
            cs_acc_bwd(x, g, mu, a, b);
        }
    }
    cc_reduce(p, w, a, b, m->s1, m->s2, m->scratch);
    for (int cl = threadIdx.x; cl < p->cw; cl += CNC_THREADS) {
        cnorm_stat st = cn_stat_zero();
        st.count = (float)tl->nq; /* every tile centred on the saved mean: the merge adds s1, s2 */
        st.mean = wb[p->cw + cl];
        st.s1 = m->s1[cl];
        st.s2 = m->s2[cl];
        cn_store_part(p, t, cl, st, CNORM_PART_FLOATS_BWD);
    }
    if (!merge_here)
        return;
    if (cs_arrive(p, tl->seg, CNORM_PART_FLOATS_BWD, m)) {
        for (int j = threadIdx.x; j < p->sets; j += CNC_THREADS) {
            const cnorm_stat st = m->merged[j];
            const int64_t c = tl->c0 + j;
            const float r = wb[2 * p->cw + j];
            if (p->d_bias)
                p->d_bias[c * p->dbias_sc] = st.s1;
            if (p->d_scale)
                p->d_scale[c * p->dscale_sc] = r * st.s2;
            cn_st_v4(cn_final(p, tl->seg, j), st.mean, r, st.s1, st.s2);
        }
        cn_release(p, tl->seg);
    }
}

/* dx for tile tl's rows once its window's sums are out: x and dy read again (from L2). */
FROST_DEVICE void cs_bwd_apply(const cnorm_params *p, const cnorm_tile *tl, const cc_map *w, const cs_smem *m, int par,
                               uint64_t drop, const bool later_launch)
{
    const bool hint = p->prefetch != CNORM_PREFETCH_NONE;
    if (later_launch) /* a later launch than the statistics' merge */
        __syncthreads();
    else
        cn_wait_final(p, tl->seg);
    const float *wb = m->wb + par * 3 * p->cw;
    /* dx = dy * cdy - x * cx + k: cdy = r w, cx = r^2 mean(g x_hat), k = mean cx - r mean(g) */
    for (int cl = threadIdx.x; cl < p->cw; cl += CNC_THREADS) {
        float f[4];
        cn_ld_cg_v4(f, cn_final(p, tl->seg, cl));
        const float wc = wb[cl], r = f[1];
        const float mean_g = wc * f[2] * p->inv_m, mean_gx = wc * r * f[3] * p->inv_m, cx = r * r * mean_gx;
        m->s1[cl] = r * wc;
        m->coef_a[cl] = cx;
        m->coef_b[cl] = fmaf(f[0], cx, -r * mean_g);
    }
    __syncthreads();
    if (w->r0 >= w->per)
        return;
    float cdy[CN_VEC], cx[CN_VEC], kk[CN_VEC];
#pragma unroll
    for (int k = 0; k < CN_VEC; k++) {
        cdy[k] = m->s1[w->u * CN_VEC + k];
        cx[k] = m->coef_a[w->u * CN_VEC + k];
        kk[k] = m->coef_b[w->u * CN_VEC + k];
    }
    cs_cursor px = cs_begin(p, tl, w, p->x, p->x_sn), pg = cs_begin(p, tl, w, p->dy, p->dy_sn),
              po = cs_begin(p, tl, w, p->out, p->out_sn);
    int r = w->r0;
    if (p->vec_ok)
        for (; r < tl->nq; r += CS_BATCH / 2 * w->per) {
            uint32_t vx[CS_BATCH / 2][4], vg[CS_BATCH / 2][4];
#pragma unroll
            for (int i = 0; i < CS_BATCH / 2; i++) {
                if (r + i * w->per < tl->nq) {
                    cn_ldg_v4(vx[i], px.g, hint, drop);
                    cn_ldg_v4(vg[i], pg.g, hint, drop);
                }
                cs_advance(p, w, p->x_sn, &px);
                cs_advance(p, w, p->dy_sn, &pg);
            }
#pragma unroll
            for (int i = 0; i < CS_BATCH / 2; i++) {
                if (r + i * w->per < tl->nq) {
                    float x[CN_VEC], g[CN_VEC];
                    cn_unpack(vx[i], x);
                    cn_unpack(vg[i], g);
#pragma unroll
                    for (int k = 0; k < CN_VEC; k++)
                        x[k] = fmaf(g[k], cdy[k], fmaf(-x[k], cx[k], kk[k]));
                    cn_pack(vx[i], x);
                    cn_st_stream_v4((void *)po.g, vx[i]);
                }
                cs_advance(p, w, p->out_sn, &po);
            }
        }
    for (; r < tl->nq; r += w->per) {
        float x[CN_VEC], g[CN_VEC];
        cs_unit(p, px.g, x, hint, drop);
        cs_unit(p, pg.g, g, hint, drop);
        cs_advance(p, w, p->x_sn, &px);
        cs_advance(p, w, p->dy_sn, &pg);
#pragma unroll
        for (int k = 0; k < CN_VEC; k++)
            x[k] = fmaf(g[k], cdy[k], fmaf(-x[k], cx[k], kk[k]));
        cc_store(p, (frost_io *)po.g, x);
        cs_advance(p, w, p->out_sn, &po);
    }
}

extern "C" __global__ void __launch_bounds__(CNC_THREADS, CNS_MIN_BLOCKS)
    cnorm_stream_bwd_kernel(const __grid_constant__ cnorm_params p)
{
    extern __shared__ uint4 cnorm_smem[];
    cs_smem m;
    cs_carve(&p, (unsigned char *)cnorm_smem, &m);
    const cc_map w = cc_map_make(&p);
    const uint64_t keep = cn_l2_policy(true), drop = cn_l2_policy(false);
    if (p.mode != CNORM_MODE_RESIDENT) { /* the two-launch form, as in the forward */
        for (int s = 0; s < p.windows; s++) {
            const int t = s * p.k_tiles + (int)blockIdx.x;
            const cnorm_tile tl = cn_tile(&p, t);
            cs_bwd_params(&p, &tl, &m, 0);
            if (p.mode == CNORM_MODE_STATS)
                cs_bwd_stats(&p, &tl, t, &w, &m, 0, keep, drop, !(p.flags & CNORM_F_MERGE_KERNEL));
            else
                cs_bwd_apply(&p, &tl, &w, &m, 0, drop, true);
            __syncthreads(); /* sums and coefficients are reused */
        }
        return;
    }
    for (int s = 0; s <= p.windows; s++) {
        if (s < p.windows) {
            const int t = s * p.k_tiles + (int)blockIdx.x;
            const cnorm_tile tl = cn_tile(&p, t);
            cs_bwd_params(&p, &tl, &m, s & 1);
            cs_bwd_stats(&p, &tl, t, &w, &m, s & 1, keep, drop, true);
        }
        if (s > 0) {
            const cnorm_tile tl = cn_tile(&p, (s - 1) * p.k_tiles + (int)blockIdx.x);
            cs_bwd_apply(&p, &tl, &w, &m, (s - 1) & 1, drop, false);
        }
        __syncthreads(); /* sums and coefficients are reused */
    }
}

/* ---- the two-launch form's entry points ---------------------------------------------------- */
/* The two-launch form with the finalize kernel's merge as entry points of their own, so that
 * each launch's registers are allocated for its own loop alone (the combined kernels above
 * are sized for the one-launch form and the in-launch merge as well): STREAM_BLOCKS blocks
 * per SM, the count the host's geometry gave the grid. */
#ifndef STREAM_BLOCKS
#define STREAM_BLOCKS CNS_MIN_BLOCKS
#endif
enum { CS_FWD_STATS, CS_FWD_APPLY, CS_BWD_STATS, CS_BWD_APPLY };

/* Every window's tile of this block through one launch of the two-launch form with the
 * finalize kernel's merge (stage: a CS_* constant, so that each entry point compiles its own
 * loop alone). */
FROST_DEVICE void cs_two_launch(const cnorm_params *p, const int stage)
{
    extern __shared__ uint4 cnorm_smem[];
    cs_smem m;
    cs_carve(p, (unsigned char *)cnorm_smem, &m);
    const cc_map w = cc_map_make(p);
    const uint64_t keep = cn_l2_policy(true), drop = cn_l2_policy(false);
    for (int s = 0; s < p->windows; s++) {
        const int t = s * p->k_tiles + (int)blockIdx.x;
        const cnorm_tile tl = cn_tile(p, t);
        if (stage == CS_FWD_STATS) {
            cs_stats(p, &tl, t, &w, &m, keep, drop, false);
        } else if (stage == CS_FWD_APPLY) {
            cs_params(p, &tl, &m, 0);
            cs_apply(p, &tl, &w, &m, 0, drop, true);
        } else {
            cs_bwd_params(p, &tl, &m, 0);
            if (stage == CS_BWD_STATS)
                cs_bwd_stats(p, &tl, t, &w, &m, 0, keep, drop, false);
            else
                cs_bwd_apply(p, &tl, &w, &m, 0, drop, true);
        }
        __syncthreads(); /* shift, sums and coefficients are reused */
    }
}

extern "C" __global__ void __launch_bounds__(CNC_THREADS, STREAM_BLOCKS)
    cnorm_stream_fwd_stats_kernel(const __grid_constant__ cnorm_params p)
{
    frost_allow_next_grid(); /* the finalize kernel may be scheduled (chan_norm_cuda.c) */
    cs_two_launch(&p, CS_FWD_STATS);
}

/* The output launch starts while the finalize kernel merges (a programmatic dependent launch):
 * before it waits, each block asks L2 (cn_prefetch_tile) for rows keep_rows to keep_rows +
 * early_rows of its tile of window 0 (x, and dy for the backward), the first rows its second
 * read would otherwise take from HBM, so that HBM works through the merge. */
FROST_DEVICE void cs_prefetch_early(const cnorm_params *p, const bool with_dy)
{
    if (p->early_rows <= 0)
        return;
    cnorm_tile rows = cn_tile(p, (int)blockIdx.x);
    const int first = min(p->keep_rows, rows.nq);
    rows.q0 += first;
    rows.nq = min(p->early_rows, rows.nq - first);
    cn_prefetch_tile(p, &rows, (const frost_io *)p->x, p->x_sn);
    if (with_dy)
        cn_prefetch_tile(p, &rows, (const frost_io *)p->dy, p->dy_sn);
}

extern "C" __global__ void __launch_bounds__(CNC_THREADS, STREAM_BLOCKS)
    cnorm_stream_fwd_apply_kernel(const __grid_constant__ cnorm_params p)
{
    cs_prefetch_early(&p, false);
    frost_wait_prior_grid(); /* launched early after the finalize kernel */
    cs_two_launch(&p, CS_FWD_APPLY);
}

extern "C" __global__ void __launch_bounds__(CNC_THREADS, STREAM_BLOCKS)
    cnorm_stream_bwd_stats_kernel(const __grid_constant__ cnorm_params p)
{
    frost_allow_next_grid();
    cs_two_launch(&p, CS_BWD_STATS);
}

extern "C" __global__ void __launch_bounds__(CNC_THREADS, STREAM_BLOCKS)
    cnorm_stream_bwd_apply_kernel(const __grid_constant__ cnorm_params p)
{
    cs_prefetch_early(&p, true);
    frost_wait_prior_grid();
    cs_two_launch(&p, CS_BWD_APPLY);
}
