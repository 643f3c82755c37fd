/*
 * chan_norm_stats.cuh — statistics for the channel-norm kernels: per-channel sums of a
 * tile held in shared memory, the per-set records, and their exchange and merge across the
 * tiles of a segment (tiles, modes and the shared layout: chan_norm_kernel.cuh).
 *
 * On chip: per channel of the window, sums in fp32 of x, of (x - c)^2 and (backward) of
 * dy and dy (x - c) about a per-set centre c, read 16 bytes at a time from shared memory
 * (NHWC: a thread owns 8 channels and every per-th row, row phases meet in a scratch
 * array; NCHW: a team of warps owns a channel row).  The order of every addition depends
 * only on the tile's shape, never on timing.
 *
 * Exchange: each tile writes its partial record per set, then a fence and one atomic
 * increment of the segment's counter.  The block that brings the counter to k_tiles merges
 * all k_tiles records of each set in index order (so results are bitwise repeatable no
 * matter which block comes last), writes the final record and the outputs only one writer
 * may produce (saved statistics, running statistics, BatchNorm's d_scale / d_bias), then
 * bumps the counter once more; the others spin (one thread, with a watchdog that traps
 * after 30 s instead of hanging) until it reads k_tiles + 1.  The host zeroes the counters
 * before each launch.  Merging uses Chan's formulas on (count, mean, M2) plus two
 * centred sums (backward), warp-parallel over contiguous chunks of tiles and a fixed
 * butterfly: deterministic.  Why it cannot deadlock: G <= #SMs resident blocks take tiles
 * t = b, b + G, b + 2G, ... and a segment has at most G tiles, so no block holds two tiles
 * of one segment, and every tile a block waits for belongs to a block whose earlier tiles
 * lie in earlier segments, which complete first (induction over segments).
 */
#ifndef FROST_CHAN_NORM_STATS_CUH
#define FROST_CHAN_NORM_STATS_CUH

#include "chan_norm_rows.cuh"

/* ---- per-channel sums over a shared tile ------------------------------------------------ */
#define CN_SUM_X 0   /* out0 = sum x */
#define CN_SUM_SQ 1  /* out0 = sum (x - centre)^2 */
#define CN_SUM_BWD 2 /* out0 = sum (x - centre)^2 (if with_sq), out1 = sum dy, out2 = sum dy (x - centre) */
#define CN_SUM_SHIFT 3 /* out0 = sum (x - s), out1 = sum (x - s)^2, s = the channel's value in the tile's first row */

/* How many of out0..2 a kind of sum fills. */
FROST_DEVICE int cn_sum_outputs(const int what)
{
    return what == CN_SUM_BWD ? 3 : what == CN_SUM_SHIFT ? 2 : 1;
}

FROST_DEVICE float cn_tile_elem(const frost_io *tile, int i)
{
    return frost_to_float(tile[i]);
}

/* One element into the sums of `what` (a literal at every call). */
FROST_DEVICE void cn_acc(const int what, bool with_sq, float x, float g, float ctr, float *a0, float *a1, float *a2)
{
    if (what == CN_SUM_X) {
        *a0 += x;
        return;
    }
    const float d = x - ctr;
    if (what == CN_SUM_SHIFT) {
        *a0 += d;
        *a1 = fmaf(d, d, *a1);
        return;
    }
    if (what == CN_SUM_SQ || with_sq)
        *a0 = fmaf(d, d, *a0);
    if (what == CN_SUM_BWD) {
        *a1 += g;
        *a2 = fmaf(g, d, *a2);
    }
}

/* The value of channel cl in the first row of a tile. */
FROST_DEVICE float cn_tile_first(const cnorm_params *p, const frost_io *tile, int cl)
{
#if defined(LAYOUT_NHWC)
    (void)p;
    return frost_to_float(tile[cl]);
#else
    return frost_to_float(tile[cl * p->pitch]);
#endif
}

/* CN_VEC elements of a tile at element i (16-byte aligned) as floats. */
FROST_DEVICE void cn_tile_vec(const frost_io *tile, int i, float *v)
{
    uint32_t w[4];
    cn_lds_v4(w, tile + i);
    cn_unpack(w, v);
}

#if defined(LAYOUT_NHWC)
/* NHWC: thread -> a 16-byte unit of channels and every per-th row.  Row phases meet in
 * scratch: when a warp's lanes cover whole rows (units divides 32) they first fold in the
 * warp (fixed butterfly), leaving one phase per warp; then `lanes` threads per channel add
 * the phases (strided) and fold again.  Channels past cw in the last unit are row padding:
 * summed (garbage) but never written out. */
FROST_DEVICE void cn_sums_nhwc(const cnorm_params *p, const cnorm_tile *tl, const frost_io *sx, const frost_io *sdy,
                               const float *centre, const int what, bool with_sq, float *out0, float *out1,
                               float *out2, float *scratch)
{
    const int tid = threadIdx.x, cw = p->cw, pitch = p->pitch, units = pitch / CN_VEC;
    const int per = units <= CNORM_THREADS ? CNORM_THREADS / units : 1;
    const bool fold = CNORM_NHWC_FOLDS(units);
    const int phases = fold ? CNORM_WARPS : per;
    /* threads per channel for the phase sum: a power of two <= 32 with lanes * pitch <= threads */
    int lanes = 1;
    while (lanes < 32 && lanes * 2 <= phases && lanes * 2 * pitch <= CNORM_THREADS)
        lanes *= 2;
    for (int base = 0; base < units; base += CNORM_THREADS) {
        const int cu = units <= CNORM_THREADS ? tid % units : base + tid;
        const int r0 = units <= CNORM_THREADS ? tid / units : 0;
        const bool active = cu < units && r0 < per;
        float a0[CN_VEC], a1[CN_VEC], a2[CN_VEC], ctr[CN_VEC];
#pragma unroll
        for (int k = 0; k < CN_VEC; k++) {
            a0[k] = a1[k] = a2[k] = 0.0f;
            ctr[k] = what == CN_SUM_X || what == CN_SUM_SHIFT || !active ? 0.0f
                                                                       : centre[min(cu * CN_VEC + k, cw - 1) / p->cg];
        }
        if (what == CN_SUM_SHIFT && active)
            cn_tile_vec(sx, cu * CN_VEC, ctr); /* row 0 */
        if (active) {
#pragma unroll 2
            for (int r = r0; r < tl->nq; r += per) {
                float x[CN_VEC], g[CN_VEC];
                cn_tile_vec(sx, r * pitch + cu * CN_VEC, x);
                if (what == CN_SUM_BWD)
                    cn_tile_vec(sdy, r * pitch + cu * CN_VEC, g);
#pragma unroll
                for (int k = 0; k < CN_VEC; k++)
                    cn_acc(what, with_sq, x[k], what == CN_SUM_BWD ? g[k] : 0.0f, ctr[k], &a0[k], &a1[k], &a2[k]);
            }
        }
#pragma unroll
        for (int sum = 0; sum < 3; sum++) {
            if (sum >= cn_sum_outputs(what))
                break;
            float *a = sum == 0 ? a0 : sum == 1 ? a1 : a2;
            float *out = sum == 0 ? out0 : sum == 1 ? out1 : out2;
            if (units > CNORM_THREADS) {
                if (active)
#pragma unroll
                    for (int k = 0; k < CN_VEC; k++)
                        if (cu * CN_VEC + k < cw)
                            out[cu * CN_VEC + k] = a[k];
                continue;
            }
            if (fold) {
                for (int m = units; m < 32; m <<= 1)
#pragma unroll
                    for (int k = 0; k < CN_VEC; k++)
                        a[k] += __shfl_xor_sync(0xffffffffu, a[k], m);
                if ((tid & 31) < units)
#pragma unroll
                    for (int k = 0; k < CN_VEC; k++)
                        scratch[(tid / 32) * pitch + cu * CN_VEC + k] = a[k];
            } else if (active) {
#pragma unroll
                for (int k = 0; k < CN_VEC; k++)
                    scratch[r0 * pitch + cu * CN_VEC + k] = a[k];
            }
            __syncthreads();
            /* whole warps enter (lanes > 1: one round, pitch * lanes <= CNORM_THREADS) */
            const int span = (pitch * lanes + 31) / 32 * 32;
            for (int i = tid; i < span; i += CNORM_THREADS) {
                const int cl = i / lanes, l = i % lanes; /* lanes of a channel are adjacent threads */
                float v = 0.0f;
                if (cl < pitch)
                    for (int ph = l; ph < phases; ph += lanes)
                        v += scratch[ph * pitch + cl];
                for (int m = 1; m < lanes; m <<= 1)
                    v += __shfl_xor_sync(0xffffffffu, v, m);
                if (l == 0 && cl < cw)
                    out[cl] = v;
            }
            __syncthreads();
        }
    }
    if (units > CNORM_THREADS)
        __syncthreads();
}
#endif

/* Per-channel sums of one tile (x, and dy for CN_SUM_BWD) into out0..2[cw].  centre[set]
 * is the per-set centre.  Every thread calls it; it synchronizes the block.  The order of
 * additions depends only on the tile's shape: deterministic. */
FROST_DEVICE void cn_channel_sums(const cnorm_params *p, const cnorm_tile *tl, const frost_io *sx, const frost_io *sdy,
                                  const float *centre, const int what, bool with_sq, float *out0, float *out1,
                                  float *out2, float *scratch)
{
#if defined(LAYOUT_NHWC)
    cn_sums_nhwc(p, tl, sx, sdy, centre, what, with_sq, out0, out1, out2, scratch);
#else
    /* a team of warps per channel row, lanes along the pixels, 16 bytes at a time (rows
     * start 16-byte aligned: the pitch is a multiple of 8); a partial vector at the end of a
     * row is summed element by element */
    const int tid = threadIdx.x, cw = p->cw, nq = tl->nq;
    const int team = cw >= CNORM_WARPS ? 1 : CNORM_WARPS / cw;
    const int groups = CNORM_WARPS / team;
    const int warp = tid / 32, lane = tid & 31, first = (warp % team) * 32 + lane, step = team * 32;
    const int full = nq / CN_VEC;
    for (int cl = warp / team; warp / team < groups && cl < cw; cl += groups) {
        const frost_io *rx = sx + cl * p->pitch;
        const float ctr = what == CN_SUM_X ? 0.0f : what == CN_SUM_SHIFT ? cn_tile_elem(rx, 0) : centre[cl / p->cg];
        const frost_io *rdy = sdy + cl * p->pitch;
        float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f;
#pragma unroll 2
        for (int u = first; u < full; u += step) {
            float x[CN_VEC], g[CN_VEC];
            cn_tile_vec(rx, u * CN_VEC, x);
            if (what == CN_SUM_BWD)
                cn_tile_vec(rdy, u * CN_VEC, g);
#pragma unroll
            for (int k = 0; k < CN_VEC; k++)
                cn_acc(what, with_sq, x[k], what == CN_SUM_BWD ? g[k] : 0.0f, ctr, &a0, &a1, &a2);
        }
        for (int e = full * CN_VEC + first; e < nq; e += step)
            cn_acc(what, with_sq, cn_tile_elem(rx, e), what == CN_SUM_BWD ? cn_tile_elem(rdy, e) : 0.0f, ctr, &a0,
                   &a1, &a2);
        a0 = frost_warp_sum(a0);
        if (cn_sum_outputs(what) > 1)
            a1 = frost_warp_sum(a1);
        if (cn_sum_outputs(what) > 2)
            a2 = frost_warp_sum(a2);
        if (lane == 0) {
            if (team == 1) {
                out0[cl] = a0;
                if (cn_sum_outputs(what) > 1)
                    out1[cl] = a1;
                if (cn_sum_outputs(what) > 2)
                    out2[cl] = a2;
            } else {
                scratch[warp] = a0;
                scratch[CNORM_WARPS + warp] = a1;
                scratch[2 * CNORM_WARPS + warp] = a2;
            }
        }
    }
    __syncthreads();
    if (team > 1) {
        if (tid < cw) {
            float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f;
            for (int k = 0; k < team; k++) {
                s0 += scratch[tid * team + k];
                s1 += scratch[CNORM_WARPS + tid * team + k];
                s2 += scratch[2 * CNORM_WARPS + tid * team + k];
            }
            out0[tid] = s0;
            if (cn_sum_outputs(what) > 1)
                out1[tid] = s1;
            if (cn_sum_outputs(what) > 2)
                out2[tid] = s2;
        }
        __syncthreads();
    }
#endif
}

/* ---- statistics records and merging ---------------------------------------------------- */
typedef struct cnorm_stat {
    float count, mean, m2; /* Chan: elements, their mean, sum of squared deviations */
    float s1, s2;          /* backward: a plain sum and a sum of (x - mean) * something */
} cnorm_stat;

FROST_DEVICE cnorm_stat cn_stat_zero(void)
{
    cnorm_stat s;
    s.count = s.mean = s.m2 = s.s1 = s.s2 = 0.0f;
    return s;
}

/* a then b (order matters only in the last bits; callers fix it). */
FROST_DEVICE cnorm_stat cn_merge(cnorm_stat a, cnorm_stat b)
{
    const float count = a.count + b.count;
    if (count == 0.0f)
        return a;
    const float fb = b.count / count;
    const float delta = b.mean - a.mean;
    cnorm_stat r;
    r.count = count;
    r.mean = fmaf(delta, fb, a.mean);
    r.m2 = a.m2 + b.m2 + delta * delta * a.count * fb;
    r.s1 = a.s1 + b.s1;
    r.s2 = a.s2 + b.s2 + (a.mean - r.mean) * a.s1 + (b.mean - r.mean) * b.s1;
    return r;
}

FROST_DEVICE cnorm_stat cn_shfl_stat(cnorm_stat s, int lane_mask)
{
    cnorm_stat o;
    o.count = __shfl_xor_sync(0xffffffffu, s.count, lane_mask);
    o.mean = __shfl_xor_sync(0xffffffffu, s.mean, lane_mask);
    o.m2 = __shfl_xor_sync(0xffffffffu, s.m2, lane_mask);
    o.s1 = __shfl_xor_sync(0xffffffffu, s.s1, lane_mask);
    o.s2 = __shfl_xor_sync(0xffffffffu, s.s2, lane_mask);
    return o;
}

/* Reads partial record (tile t, set j). */
FROST_DEVICE cnorm_stat cn_load_part(const cnorm_params *p, int t, int j, const int floats)
{
    const float *rec = (const float *)(p->ws + p->off_part) + ((int64_t)t * p->sets + j) * floats;
    float v[4];
    cn_ld_cg_v4(v, rec);
    cnorm_stat s;
    s.count = v[0], s.mean = v[1], s.m2 = v[2], s.s1 = v[3], s.s2 = 0.0f;
    if (floats > 4) {
        cn_ld_cg_v4(v, rec + 4);
        s.s2 = v[0];
    } else {
        s.s1 = 0.0f;
    }
    return s;
}

FROST_DEVICE void cn_store_part(const cnorm_params *p, int t, int j, cnorm_stat s, const int floats)
{
    float *rec = (float *)(p->ws + p->off_part) + ((int64_t)t * p->sets + j) * floats;
    cn_st_v4(rec, s.count, s.mean, s.m2, s.s1);
    if (floats > 4)
        cn_st_v4(rec + 4, s.s2, 0.0f, 0.0f, 0.0f);
}

/* Partial records a merging thread loads at once: one L2 round trip per batch (a segment
 * of 132 tiles merged by 8 threads per set: two round trips). */
#define CN_MERGE_BATCH 8

/* Merges `count` consecutive partial records of set j, the first at record index `first`
 * (a tile index, or past num_tiles for the stream path's group records), with `lanes`
 * adjacent threads (a power of two <= 32, aligned in the warp); the whole warp calls it,
 * and every lane of a set's group gets the same result.  Lane l merges a contiguous chunk
 * in order, then a butterfly merges lower lanes' chunks first: a fixed order for given
 * count and lanes, whatever the caller. */
static __device__ __noinline__ cnorm_stat cn_merge_recs(const cnorm_params *p, int64_t first, int count, int j,
                                                       const int floats, int lanes)
{
    const int lane = threadIdx.x & (lanes - 1);
    const int begin = (int)(((int64_t)lane * count) / lanes), end = (int)(((int64_t)(lane + 1) * count) / lanes);
    cnorm_stat acc = cn_stat_zero();
    for (int i = begin; i < end; i += CN_MERGE_BATCH) { /* loads in flight together, merged in order */
        cnorm_stat part[CN_MERGE_BATCH];
#pragma unroll
        for (int u = 0; u < CN_MERGE_BATCH; u++)
            part[u] = i + u < end ? cn_load_part(p, (int)(first + i + u), j, floats) : cn_stat_zero();
#pragma unroll
        for (int u = 0; u < CN_MERGE_BATCH; u++)
            acc = cn_merge(acc, part[u]);
    }
    for (int m = 1; m < lanes; m <<= 1) {
        const cnorm_stat other = cn_shfl_stat(acc, m);
        acc = (lane & m) ? cn_merge(other, acc) : cn_merge(acc, other);
    }
    return acc;
}

/* The k_tiles partials of set j of segment seg (a j past the window's sets merges nothing). */
FROST_DEVICE cnorm_stat cn_merge_set(const cnorm_params *p, int seg, int j, const int floats, int lanes)
{
    return cn_merge_recs(p, (int64_t)seg * p->k_tiles, j < p->sets ? p->k_tiles : 0, j, floats, lanes);
}

/* The finalize kernels' merge (cnorm_fwd_finalize_kernel, cnorm_bwd_finalize_kernel; blocks
 * of CNORM_FIN_THREADS): block b takes the CNORM_FIN_SETS sets b * CNORM_FIN_SETS + s,
 * counted over all segments (index seg * sets + j; cn_finalize_set gives a thread its set
 * and whether it exists), and cuts each set's k_tiles records into SLICES =
 * CNORM_FIN_THREADS / CNORM_FIN_SETS contiguous slices: lane q * CNORM_FIN_SETS + s of warp
 * w merges slice w * (32 / CNORM_FIN_SETS) + q of set s in tile order, the slices of a warp
 * merge in a fixed shuffle tree, and warp 0 merges the warps' results in warp order.  A
 * fixed order for a given k_tiles: deterministic.  The work is a few thousand instructions
 * per set, so it is spread over many SMs: a first version with 32 sets a block ran on 16
 * SMs of the H200 issue-bound (IPC 1.15, 11 us for BatchNorm's 512 channels x 264 tiles,
 * ncu 2026-12-03).  Smaller blocks over more SMs make the kernel itself shorter but not the
 * BatchNorm NHWC pass around it: on the H100 (2026-12-05, docs/PERF.md) 2 sets in blocks of
 * 128 threads (256 blocks) took 6.2-6.4 us against 7.9 for 8 in 512 (64 blocks), yet with
 * the finalizers' loads of running or saved statistics issued beside the records (in both)
 * 8 in 512 ran the three shapes measured 1.003-1.011x the old kernel and 2 in 128
 * 0.999-1.015x: the kernel's blocks hold SMs the output launch's early blocks would use.
 * Returns true on the lanes of warp 0 that hold a set (lanes below CNORM_FIN_SETS); the
 * whole block calls it. */
FROST_DEVICE bool cn_finalize_set(const cnorm_params *p, int *seg, int *j)
{
    const int64_t gs = (int64_t)blockIdx.x * CNORM_FIN_SETS + (threadIdx.x & 31) % CNORM_FIN_SETS;
    const bool valid = gs < (int64_t)p->num_segments * p->sets;
    *seg = valid ? (int)(gs / p->sets) : 0;
    *j = valid ? (int)(gs - (int64_t)*seg * p->sets) : 0;
    return valid;
}

FROST_DEVICE bool cn_finalize_merge(const cnorm_params *p, const int floats, int seg, int j, bool valid,
                                    cnorm_stat *st)
{
    enum { SETS = CNORM_FIN_SETS, PER_WARP = 32 / CNORM_FIN_SETS, WARPS = CNORM_FIN_THREADS / 32,
           SLICES = CNORM_FIN_THREADS / CNORM_FIN_SETS };
    __shared__ cnorm_stat parts[WARPS][SETS];
    const int lane = threadIdx.x & 31, warp = threadIdx.x / 32, s = lane % SETS, q = lane / SETS;
    const int slice = warp * PER_WARP + q;
    const int begin = (int)((int64_t)slice * p->k_tiles / SLICES);
    const int end = valid ? (int)((int64_t)(slice + 1) * p->k_tiles / SLICES) : begin;
    const int64_t first = (int64_t)seg * p->k_tiles;
    cnorm_stat acc = cn_stat_zero();
    for (int i = begin; i < end; i += CN_MERGE_BATCH) { /* loads in flight together, merged in order */
        cnorm_stat part[CN_MERGE_BATCH];
#pragma unroll
        for (int u = 0; u < CN_MERGE_BATCH; u++)
            part[u] = i + u < end ? cn_load_part(p, (int)(first + i + u), j, floats) : cn_stat_zero();
#pragma unroll
        for (int u = 0; u < CN_MERGE_BATCH; u++)
            acc = cn_merge(acc, part[u]);
    }
    /* slices q and q + m of a warp, the lower first: lanes with q % (2 m) == 0 keep the
     * result (their partner q ^ m is q + m); the other lanes' results are not used */
#pragma unroll
    for (int m = 1; m < PER_WARP; m <<= 1)
        acc = cn_merge(acc, cn_shfl_stat(acc, m * SETS));
    if (q == 0)
        parts[warp][s] = acc;
    __syncthreads();
    if (warp != 0 || q != 0)
        return false;
    acc = parts[0][s];
    for (int w = 1; w < WARPS; w++)
        acc = cn_merge(acc, parts[w][s]);
    *st = acc;
    return valid;
}

/* Threads per set when a whole block of `threads` merges a segment's sets: a power of two
 * <= 32 with lanes x sets <= threads where the sets allow, so every set's partials are
 * read by many threads at once. */
FROST_DEVICE int cn_merge_lanes(const cnorm_params *p, int threads)
{
    int lanes = 1;
    while (lanes < 32 && lanes * 2 * p->sets <= threads)
        lanes *= 2;
    return lanes;
}

FROST_DEVICE float *cn_final(const cnorm_params *p, int seg, int j)
{
    return (float *)(p->ws + p->off_final) + ((int64_t)seg * p->sets + j) * CNORM_FINAL_FLOATS;
}

/* Barrier counters: counter i of the workspace's counter section. */
FROST_DEVICE uint32_t *cn_counter(const cnorm_params *p, int64_t i)
{
    return (uint32_t *)(p->ws + p->off_count) + i;
}

/* One arrival of `arrivals` at counter i, after this block's records are stored.  Returns
 * (to every thread) whether this block is the last arrival. */
FROST_DEVICE bool cn_arrive_at(const cnorm_params *p, int64_t i, int arrivals, int *flag)
{
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        const uint32_t old = atomicAdd(cn_counter(p, i), 1u);
        __threadfence();
        *flag = old == (uint32_t)arrivals - 1u;
    }
    __syncthreads();
    return *flag != 0;
}

/* Segment barrier, first half: this tile's partials are stored; count the arrival (the
 * segment's counter takes p->arrivals of them).  Returns (to every thread) whether this
 * block is the segment's last arrival. */
FROST_DEVICE bool cn_arrive(const cnorm_params *p, int seg, int *flag)
{
    return cn_arrive_at(p, seg, p->arrivals, flag);
}

/* Second half, for the last arrival: its final records are stored; release the others. */
FROST_DEVICE void cn_release(const cnorm_params *p, int seg)
{
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0)
        atomicAdd(cn_counter(p, seg), 1u);
}

/* Second half, for everyone else: wait until the final records are out.  A wait longer
 * than 30 s means the grid was not resident (a launch-configuration bug): trap rather
 * than hang the device. */
FROST_DEVICE void cn_wait_final(const cnorm_params *p, int seg)
{
    if (threadIdx.x == 0) {
        const uint32_t *counter = cn_counter(p, seg);
        const uint32_t target = (uint32_t)p->arrivals + 1u;
        const uint64_t start = cn_globaltimer();
        while (cn_ld_acquire(counter) != target) {
            __nanosleep(64);
            if (cn_globaltimer() - start > 30000000000ull)
                __trap();
        }
        __threadfence();
    }
    __syncthreads();
}

/* ---- forward set outputs ------------------------------------------------------------- */
/* The running statistics of set j (BatchNorm updating them; zeros otherwise): run[0] the
 * mean, run[1] the variance.  The finalize kernel loads them beside its records, so that
 * the update after the merge does not wait for a second round trip to memory. */
FROST_DEVICE void fwd_load_running(const cnorm_params *p, int c0, int j, float run[2])
{
    run[0] = run[1] = 0.0f;
#if defined(KIND_BATCH)
    if (p->flags & CNORM_F_UPDATE_RUNNING) {
        const int64_t c = c0 + j;
        run[0] = p->running_mean[c * p->rmean_sc];
        run[1] = p->running_var[c * p->rvar_sc];
    }
#endif
}

/* The outputs only a set's finalizer writes: saved statistics and running statistics (the
 * old running values from run, fwd_load_running, or read here when run is NULL). */
FROST_DEVICE void fwd_set_outputs(const cnorm_params *p, int n, int c0, int j, float mean, float var, float rstd,
                                  const float *run)
{
    if (p->mean)
        p->mean[cn_stat_index(p, n, c0, j, p->mean_sn, p->mean_ss)] = mean;
    if (p->inv_std)
        p->inv_std[cn_stat_index(p, n, c0, j, p->inv_sn, p->inv_ss)] = rstd;
#if defined(KIND_BATCH)
    if (p->flags & CNORM_F_UPDATE_RUNNING) {
        const int64_t c = c0 + j;
        float *rm = p->running_mean + c * p->rmean_sc, *rv = p->running_var + c * p->rvar_sc;
        const float old_mean = run ? run[0] : *rm, old_var = run ? run[1] : *rv;
        *rm = (1.0f - p->momentum) * old_mean + p->momentum * mean;
        *rv = (1.0f - p->momentum) * old_var + p->momentum * (var * p->unbias);
    }
#endif
}

/* Merged statistics of a set -> mean, rstd (and the one-writer outputs; run as for
 * fwd_set_outputs). */
FROST_DEVICE void fwd_finish_set(const cnorm_params *p, int n, int c0, int j, cnorm_stat st, const float *run,
                                 float *mean, float *rstd)
{
    const float var = st.m2 * p->inv_m;
    *mean = st.mean;
    *rstd = rsqrtf(var + p->eps);
    fwd_set_outputs(p, n, c0, j, *mean, var, *rstd, run);
}

#endif /* FROST_CHAN_NORM_STATS_CUH */
