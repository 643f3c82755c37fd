/*
 * chan_norm_kernel.cuh — what the CUDA GroupNorm / InstanceNorm / BatchNorm kernels share:
 * the parameter block (read by the host in chan_norm_cuda.c too), the tile geometry, the
 * shared-memory layout, and the device helpers that move a tile between global and shared
 * memory and walk it.
 *
 * Layout legend: X [N, C, HW] logically (HW = prod(spatial)); a "row" is one pixel of the
 * flattened (n, p) space, q = n * HW + p.  NHWC keeps C contiguous (pixel stride C); NCHW
 * keeps the pixels of one (n, c) contiguous (channel stride HW); each data tensor has its
 * own n stride (gaps allowed).  cg = channels per statistic set (GroupNorm C / G, else 1).
 *
 * Work decomposition.  Channels are cut into windows of cw channels (whole groups); a
 * *segment* is everything one window's statistics need: GroupNorm/InstanceNorm (n, window)
 * over HW rows, BatchNorm (window) over N * HW rows.  A segment is cut along rows into
 * k_tiles tiles of `rows` rows (the last may be shorter); tile t is (segment t / k_tiles,
 * index t % k_tiles), and every tile of a segment covers all S = cw / cg sets of it.  A
 * block holds one whole tile in shared memory (x, and dy for the backward), laid out
 * [rows][pitch] for NHWC (pitch = cw rounded up to 8, so every row is 16-byte aligned) and
 * [cw][pitch = rows] for NCHW, so every pass after the load is on chip.
 *
 * Modes (params.mode):
 *   RESIDENT  load, per-set tile statistics, exchange with the segment's other tiles
 *             through the workspace (when k_tiles > 1), normalize from shared memory,
 *             store.  x (and dy) cross HBM once.  Needs every tile of a segment resident
 *             at once: the host launches at most one block per SM and checks k_tiles.
 *   STATS     the first half only: per-tile partial statistics into the workspace.
 *   APPLY     the second half only: statistics from the workspace (after the finalize
 *             kernel merged the partials) or, for BatchNorm inference, the running stats.
 * STATS + finalize + APPLY is the fallback for segments too large for the chip.
 *
 * The statistics on chip, the records and the exchange between a segment's tiles are in
 * chan_norm_stats.cuh; the NHWC vector path's row cursor and the next-tile prefetch in
 * chan_norm_rows.cuh.
 *
 * Defines every key sets: DTYPE_F32|DTYPE_F16|DTYPE_BF16, KIND_GROUP|KIND_INSTANCE|
 * KIND_BATCH and LAYOUT_NCHW|LAYOUT_NHWC: what shapes the inner loops.  Scale and bias
 * (presence, f32 or the I/O dtype, zero-centred) are run-time parameters: they are read
 * once per channel and tile to build per-channel coefficients, never per element, so
 * keying them would multiply compiles by 18 for nothing.  The parameter block is passed by
 * value as each kernel's only argument: pointers first, then int64, int32, float.
 */
#ifndef FROST_CHAN_NORM_KERNEL_CUH
#define FROST_CHAN_NORM_KERNEL_CUH

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#include "frost_common.cuh"
#else
#include <stdint.h>
#endif

#define CNORM_THREADS 512
#define CNORM_WARPS (CNORM_THREADS / 32)
#define CNORM_DP_SPLIT 4 /* warps per channel of cnorm_bwd_dparams_kernel (chan_norm_bwd.cu) */
/* Sets one block of the finalize kernels merges, and its threads (cn_finalize_merge,
 * chan_norm_stats.cuh) */
#define CNORM_FIN_SETS 8
#define CNORM_FIN_THREADS 512
/* Blocks per SM the main kernels' launch bounds cut registers for: one by default (up to
 * 128 registers); the key define MINB (2 or 3: 64 or 40 registers), set when the tiling
 * runs that many blocks per SM (FROST_CNORM_BLOCKS, chan_norm_geometry.c).  Measured on
 * the H200 (2026-12-02, docs/PERF.md): at 40 registers the loops keep their per-thread
 * arrays in local memory, and 2-3 blocks per SM ran slower than one. */
#define CNORM_MAX_BLOCKS 3
#if defined(MINB)
#define CNORM_MIN_BLOCKS MINB
#else
#define CNORM_MIN_BLOCKS 1
#endif
#define CNORM_ROW_ALIGN 8 /* rows per tile are a multiple of this (a 16-byte vector) */

#define CNORM_MODE_RESIDENT 0
#define CNORM_MODE_STATS 1
#define CNORM_MODE_APPLY 2

#define CNORM_F_RUNNING 1        /* forward APPLY: normalize with the running statistics */
#define CNORM_F_UPDATE_RUNNING 2 /* forward: update running_mean / running_var */
#define CNORM_F_SAVED_MEAN 4     /* backward: the saved mean is given */
#define CNORM_F_SAVED_RSTD 8     /* backward: the saved inv_std is given */
#define CNORM_F_ZERO_CENTERED 16 /* w_eff = 1 + w */
#define CNORM_F_REVERSE 32       /* APPLY visits the tiles last first: the end of the STATS pass is in L2 */
#define CNORM_F_MERGE_KERNEL 64  /* stream path STATS: records only; the finalize kernel merges them */

/* How a block asks L2 for its next tile (params.prefetch): bulk prefetches of each
 * contiguous run, one prefetch.global.L2 per 128-byte line (NHWC vector path), or none. */
#define CNORM_PREFETCH_BULK 0
#define CNORM_PREFETCH_LINES 1
#define CNORM_PREFETCH_NONE 2
/* Measured on the H200 (2026-12-02, docs/PERF.md): per-line prefetches beat the bulk ones
 * (whose operands must be warp-uniform, so the compiler loops over the lanes' addresses)
 * in 6 of the 8 NHWC targets, by up to 1.10x.  The host's default. */
#define CNORM_PREFETCH_DEFAULT CNORM_PREFETCH_LINES

/* Workspace records, floats: partial per (tile, set), final per (segment, set). */
#define CNORM_PART_FLOATS_FWD 4 /* count, mean, M2, - */
#define CNORM_PART_FLOATS_BWD 8 /* count, mean, M2, s1 | s2, -, -, - */
#define CNORM_FINAL_FLOATS 4    /* mean, inv_std, s1, s2 (s1, s2 centred on mean) */

/* Shared memory of a block: tiles, 4 per-channel and 5 per-set float arrays, a flag, scratch. */
#define CNORM_CH_ARRAYS 4
#define CNORM_SET_ARRAYS 5
/* Scratch of the channel sums: NHWC row phases x pitch (one phase per warp when a warp's
 * lanes fold onto whole rows: CNORM_THREADS / units phases otherwise, units = pitch / vec),
 * NCHW three floats per warp. */
#define CNORM_NHWC_FOLDS(units) ((units) <= 32 && 32 % (units) == 0)
#define CNORM_SCRATCH_FLOATS(nhwc, pitch, vec)                                                                     \
    (!(nhwc)                                 ? 3 * CNORM_WARPS                                                    \
     : CNORM_NHWC_FOLDS((pitch) / (vec))     ? CNORM_WARPS * (pitch)                                              \
     : (pitch) / (vec) <= CNORM_THREADS      ? CNORM_THREADS / ((pitch) / (vec)) * (pitch)                         \
                                             : 0)
#define CNORM_ALIGN16(b) (((b) + 15) / 16 * 16)
/* A tile is rows x pitch (NHWC, pitch = cw rounded up to 8) or cw x pitch (NCHW, pitch =
 * rows) elements: every shared row starts 16-byte aligned. */
#define CNORM_PITCH_NHWC(cw) (((cw) + 7) / 8 * 8)
#define CNORM_TILE_BYTES(elems, esize) CNORM_ALIGN16((uint64_t)(elems) * (uint64_t)(esize))
#define CNORM_SMEM_BYTES(elems, cw, sets, esize, tensors, scratch)                                                 \
    ((tensors) * CNORM_TILE_BYTES(elems, esize) + CNORM_ALIGN16(4ull * CNORM_CH_ARRAYS * (uint64_t)(cw)) +          \
     CNORM_ALIGN16(4ull * CNORM_SET_ARRAYS * (uint64_t)(sets)) + 16ull + 4ull * (uint64_t)(scratch))

/* The cluster path (chan_norm_cluster.cu: GroupNorm / InstanceNorm, NHWC, 16-byte units,
 * sm_90): blocks of CNC_THREADS threads, a segment's k_tiles tiles in one thread-block
 * cluster of at most CNC_MAX_CLUSTER blocks.  Shared memory: the tiles (rows x cw
 * elements each, no padding), four per-channel and eight per-set float arrays, and the
 * scratch of the per-channel reduction: 2 x cw floats per row phase, one phase per warp
 * when a warp's lanes fold onto whole rows (units = cw / vec divides 32), else one per
 * row a block pass covers (CNC_THREADS / units). */
#define CNC_THREADS 256
#define CNC_WARPS (CNC_THREADS / 32)
#define CNC_MAX_CLUSTER 8
#define CNC_PHASES(units) (((units) <= 32 && 32 % (units) == 0) ? CNC_WARPS : CNC_THREADS / (units))
#define CNC_SMEM_BYTES(rows, cw, sets, esize, tensors, units)                                                      \
    ((tensors) * CNORM_ALIGN16((uint64_t)(rows) * (uint64_t)(cw) * (uint64_t)(esize)) +                             \
     4ull * (4ull * (uint64_t)(cw) + 8ull * (uint64_t)(sets) + 2ull * (uint64_t)(cw) * (uint64_t)CNC_PHASES(units)))

/* The plane path (chan_norm_plane.cu: InstanceNorm / GroupNorm with one channel a group,
 * NCHW, 16-byte units): a block per (n, c) plane, at most CNP_MAX_THREADS threads (the
 * tiling's own choice at most CNP_RULE_THREADS) holding CNP_UNITS, or for planes past
 * CNP_RULE_THREADS x CNP_UNITS units CNP_UNITS_WIDE, 16-byte units each of x (and dy) in
 * registers; planes of CNP_MIN_UNITS units or more (chan_norm_geometry.c). */
#define CNP_MAX_THREADS 512
#define CNP_RULE_THREADS 256
#define CNP_UNITS 4
#define CNP_UNITS_WIDE 8
#define CNP_MIN_UNITS 64
#define CNP_WARP_PLANES 4 /* planes of one warp: this many a block */

/* The stream path (chan_norm_stream.cu: BatchNorm training forward and backward with saved
 * statistics, NHWC, 16-byte units): CNC_THREADS-thread blocks, CNS_MIN_BLOCKS per SM (all
 * resident in the one-launch form).  A window's tiles merge in two levels: groups of CNS_GROUP consecutive tiles,
 * then the CNS_GROUPS(k_tiles) group records.  Shared memory: the reduction's scratch,
 * eleven per-channel float arrays, a merged record (five floats) per channel and a flag. */
#define CNS_MIN_BLOCKS 2
#define CNS_GROUP 16
/* The two-launch form's early prefetch: the share of L2 (percent) that the output launch
 * asks for before the statistics are final (chan_norm_stream.cu, cs_prefetch_early).  H100,
 * 2026-12-05 13:45 UTC (docs/PERF.md), against none: forward 1.01-1.02x at 20 and at 30,
 * backward 1.00-1.01x at 20 and 1.01-1.02x at 30 */
#define CNS_EARLY_L2_PCT 30
#define CNS_GROUPS(k_tiles) (((k_tiles) + CNS_GROUP - 1) / CNS_GROUP)
#define CNS_SMEM_BYTES(cw, units)                                                                                  \
    (4ull * (2ull * (uint64_t)(cw) * (uint64_t)CNC_PHASES(units) + 16ull * (uint64_t)(cw)) + 16ull)

typedef struct cnorm_params {
    const void *x;
    const void *dy;          /* backward */
    void *out;               /* y or dx */
    const void *scale;       /* scale_dt elements, or NULL */
    const void *bias;        /* forward: bias_dt elements, or NULL */
    float *mean;             /* forward: saved mean out (or NULL); backward: saved mean in (or NULL) */
    float *inv_std;
    float *running_mean;     /* BatchNorm */
    float *running_var;
    float *d_scale;          /* backward, or NULL */
    float *d_bias;
    unsigned char *ws;       /* workspace */
    int64_t x_sn, dy_sn, out_sn; /* n strides of the data tensors, elements */
    int64_t mean_sn, mean_ss;    /* statistic strides: n, then set (BatchNorm: 0, channel) */
    int64_t inv_sn, inv_ss;
    int64_t scale_sc, bias_sc, rmean_sc, rvar_sc, dscale_sc, dbias_sc; /* per-channel strides */
    int64_t off_count, off_part, off_final, off_rec;                    /* workspace sections, bytes */
    int32_t n, c, hw;
    int32_t cg;           /* channels per set */
    int32_t cw;           /* channels per window */
    int32_t sets;         /* sets per window: cw / cg */
    int32_t windows;      /* c / cw */
    int32_t rows;         /* rows per tile (multiple of CNORM_ROW_ALIGN) */
    int32_t seg_rows;     /* rows per segment: hw, or n * hw for BatchNorm */
    int32_t k_tiles;      /* tiles per segment */
    int32_t num_tiles;
    int32_t num_segments;
    int32_t arrivals;     /* arrivals at a segment's workspace counter before its merge: k_tiles, or for
                             the stream path its tile groups (CNS_GROUPS) */
    int32_t mode;
    int32_t vec_ok;       /* 16-byte path: bases aligned and strides multiples of the vector */
    int32_t flags;
    int32_t want_rec;     /* backward GroupNorm/InstanceNorm: write d_scale / d_bias records */
    int32_t scale_dt;     /* FROST_DT_* of scale and bias, FROST_DT_NONE when absent */
    int32_t bias_dt;
    int32_t pitch;        /* elements between rows of a shared tile: NHWC cw rounded up to 8, NCHW rows (or the
                             rows held in shared memory, cluster path) */
    int32_t prefetch;     /* next tile into L2: CNORM_PREFETCH_BULK, _LINES or _NONE */
    int32_t keep_rows;    /* stream path: the first reads of a tile's rows below this keep them in L2 (evict-last
                             hint) for the second read; the others are read evict-first */
    int32_t early_rows;   /* two-launch stream path: the output launch's L2 prefetch of rows keep_rows to
                             keep_rows + early_rows of its tiles, issued before it waits for the statistics */
    int32_t ramp_cycles;  /* cluster path: the first wave's clusters start over this many SM cycles, in */
    int32_t ramp_classes; /* ramp_classes evenly spaced classes (chan_norm_cluster.cu, cc_ramp); 0: at once */
    int32_t first_wave;   /* cluster path: the tiles of the first wave (SMs x resident blocks) */
    int32_t plane_threads; /* plane path: threads per plane (a block holds blockDim / plane_threads planes) */
    float eps, momentum;
    float inv_m;          /* 1 / elements per set */
    float unbias;         /* M / (M - 1) (BatchNorm running variance) */
} cnorm_params;
#define CNORM_PARAMS_BYTES 360

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)

#if defined(KIND_GROUP) + defined(KIND_INSTANCE) + defined(KIND_BATCH) != 1
#error "define exactly one of KIND_GROUP, KIND_INSTANCE, KIND_BATCH"
#endif
#if defined(LAYOUT_NCHW) == defined(LAYOUT_NHWC)
#error "define exactly one of LAYOUT_NCHW and LAYOUT_NHWC"
#endif

#define CN_VEC ((int)(16 / sizeof(frost_io)))

/* ---- PTX helpers --------------------------------------------------------------------- */
FROST_DEVICE uint32_t cn_smem_addr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}
FROST_DEVICE void cn_cp_async16(void *smem, const void *gmem)
{
    asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16;" ::"r"(cn_smem_addr(smem)), "l"(gmem)
                 : "memory");
}
FROST_DEVICE void cn_cp_async_wait_all(void)
{
    asm volatile("cp.async.commit_group;\n\tcp.async.wait_group 0;" ::: "memory");
}
FROST_DEVICE void cn_prefetch_l2(const void *gmem)
{
    asm volatile("prefetch.global.L2 [%0];" ::"l"(gmem));
}
FROST_DEVICE void cn_st_stream_v4(void *gmem, const uint32_t r[4])
{
    asm volatile("st.global.cs.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(gmem), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
                 : "memory");
}
FROST_DEVICE void cn_lds_v4(uint32_t r[4], const void *smem)
{
    asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(cn_smem_addr(smem)));
}
FROST_DEVICE void cn_ld_cg_v4(float v[4], const float *gmem)
{
    asm volatile("ld.global.cg.v4.f32 {%0,%1,%2,%3}, [%4];" : "=f"(v[0]), "=f"(v[1]), "=f"(v[2]), "=f"(v[3]) : "l"(gmem));
}
FROST_DEVICE void cn_st_v4(float *gmem, float a, float b, float c, float d)
{
    asm volatile("st.global.v4.f32 [%0], {%1,%2,%3,%4};" ::"l"(gmem), "f"(a), "f"(b), "f"(c), "f"(d) : "memory");
}
FROST_DEVICE uint32_t cn_ld_acquire(const uint32_t *p)
{
    uint32_t v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
FROST_DEVICE uint64_t cn_globaltimer(void)
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* ---- element conversions --------------------------------------------------------------- */
FROST_DEVICE float cn_param(const void *base, int64_t index, int dt)
{
    if (dt == FROST_DT_F32)
        return ((const float *)base)[index];
    frost_f16 h;
    h.bits = ((const uint16_t *)base)[index];
    if (dt == FROST_DT_BF16)
        return __uint_as_float((uint32_t)h.bits << 16);
    return frost_f16_to_float(h);
}

/* Effective scale of channel c: w, 1 + w (zero-centred) or 1 (no scale). */
FROST_DEVICE float cn_weight(const cnorm_params *p, int c)
{
    if (p->scale_dt == FROST_DT_NONE)
        return 1.0f;
    const float w = cn_param(p->scale, (int64_t)c * p->scale_sc, p->scale_dt);
    return (p->flags & CNORM_F_ZERO_CENTERED) ? 1.0f + w : w;
}

/* CN_VEC elements of a 16-byte word group, as floats. */
FROST_DEVICE void cn_unpack(const uint32_t r[4], float *out)
{
#if defined(DTYPE_F32)
#pragma unroll
    for (int t = 0; t < 4; t++)
        out[t] = __uint_as_float(r[t]);
#else
#pragma unroll
    for (int t = 0; t < 8; t++) {
        const uint32_t bits = (r[t >> 1] >> ((t & 1) * 16)) & 0xffffu;
#if defined(DTYPE_BF16)
        out[t] = __uint_as_float(bits << 16);
#else
        frost_f16 h;
        h.bits = (uint16_t)bits;
        out[t] = frost_f16_to_float(h);
#endif
    }
#endif
}
FROST_DEVICE void cn_pack(uint32_t r[4], const float *v)
{
#if defined(DTYPE_F32)
#pragma unroll
    for (int t = 0; t < 4; t++)
        r[t] = __float_as_uint(v[t]);
#else
#pragma unroll
    for (int t = 0; t < 4; t++)
        r[t] = FROST_PACK2(v[2 * t], v[2 * t + 1]);
#endif
}

/* ---- tiles ------------------------------------------------------------------------------ */
typedef struct cnorm_tile {
    int seg, index; /* segment, tile within it */
    int n;          /* GroupNorm/InstanceNorm: the sample; BatchNorm: 0 */
    int c0;         /* first channel of the window */
    int q0, nq;     /* first row (n * hw + p) and number of rows */
} cnorm_tile;

/* The sample and first channel of segment seg (BatchNorm: the window over the whole batch). */
FROST_DEVICE void cn_seg_origin(const cnorm_params *p, int seg, int *n, int *c0)
{
#if defined(KIND_BATCH)
    *n = 0;
    *c0 = seg * p->cw;
#else
    *n = seg / p->windows;
    *c0 = (seg - *n * p->windows) * p->cw;
#endif
}

/* The tile the grid-stride loop's i-th step visits: in order, or with CNORM_F_REVERSE in
 * the APPLY pass of the fallback last first, so that the first blocks re-read the tiles the
 * STATS pass read last, while those are still in L2. */
FROST_DEVICE int cn_visit(const cnorm_params *p, int i)
{
    return (p->flags & CNORM_F_REVERSE) && p->mode == CNORM_MODE_APPLY ? p->num_tiles - 1 - i : i;
}

FROST_DEVICE cnorm_tile cn_tile(const cnorm_params *p, int t)
{
    cnorm_tile tl;
    tl.seg = t / p->k_tiles;
    tl.index = t - tl.seg * p->k_tiles;
#if defined(KIND_BATCH)
    const int w = tl.seg, base = 0;
    tl.n = 0;
#else
    tl.n = tl.seg / p->windows;
    const int w = tl.seg - tl.n * p->windows, base = tl.n * p->hw;
#endif
    tl.c0 = w * p->cw;
    const int first = tl.index * p->rows;
    tl.q0 = base + first;
    tl.nq = min(p->rows, p->seg_rows - first);
    return tl;
}

/* Elements of a shared tile (a row of it is `pitch` elements). */
FROST_DEVICE uint64_t cn_tile_elems(const cnorm_params *p)
{
#if defined(LAYOUT_NHWC)
    return (uint64_t)p->rows * (uint64_t)p->pitch;
#else
    return (uint64_t)p->cw * (uint64_t)p->pitch;
#endif
}

/* Index of set j of a segment's window in the statistic tensors' [n][set] numbering. */
FROST_DEVICE int64_t cn_stat_index(const cnorm_params *p, int n, int c0, int j, int64_t sn, int64_t ss)
{
    return (int64_t)n * sn + (int64_t)(c0 / p->cg + j) * ss;
}

/* A thread's walk over the units of a tile (a unit = vec consecutive elements in memory).
 * major/minor: NHWC column unit / row; NCHW channel row / unit along the pixels.  (n, p)
 * follow the unit's first pixel without a division per step. */
typedef struct cnorm_walk {
    int major, major_step, major_end;
    int minor, minor_first, minor_step, minor_end;
    int n, p, pix_step;
    int q0, hw;
    int vec;
} cnorm_walk;

FROST_DEVICE void cn_walk_place(cnorm_walk *w)
{
#if defined(LAYOUT_NHWC)
    const int q = w->q0 + w->minor;
#else
    const int q = w->q0 + w->minor * w->vec;
#endif
    w->n = q / w->hw;
    w->p = q - w->n * w->hw;
}

FROST_DEVICE void cn_walk_begin(cnorm_walk *w, const cnorm_params *p, const cnorm_tile *tl, int vec)
{
    const int tid = threadIdx.x;
    w->vec = vec;
    w->q0 = tl->q0;
    w->hw = p->hw;
#if defined(LAYOUT_NHWC)
    const int units = p->cw / vec;
    if (units <= CNORM_THREADS) {
        const int per = CNORM_THREADS / units;
        w->major = tid % units;
        w->major_step = units;
        w->minor_first = tid / units;
        w->minor_step = per;
        w->major_end = w->minor_first < per ? units : 0;
    } else {
        w->major = tid;
        w->major_step = CNORM_THREADS;
        w->minor_first = 0;
        w->minor_step = 1;
        w->major_end = units;
    }
    w->minor_end = tl->nq;
    w->pix_step = w->minor_step;
#else
    const int team = p->cw >= CNORM_WARPS ? 1 : CNORM_WARPS / p->cw; /* warps per channel row */
    const int groups = CNORM_WARPS / team;
    const int warp = tid / 32;
    w->major = warp / team;
    w->major_step = groups;
    w->major_end = w->major < groups ? p->cw : 0;
    w->minor_first = (warp % team) * 32 + (tid & 31);
    w->minor_step = team * 32;
    w->minor_end = tl->nq / vec;
    w->pix_step = w->minor_step * vec;
#endif
    w->minor = w->minor_first;
    if (w->minor >= w->minor_end)
        w->major = w->major_end; /* nothing for this thread */
    if (w->major < w->major_end)
        cn_walk_place(w);
}

FROST_DEVICE bool cn_walk_valid(const cnorm_walk *w)
{
    return w->major < w->major_end;
}

/* Advances; returns true when the major index changed (new channel coefficients). */
FROST_DEVICE bool cn_walk_next(cnorm_walk *w)
{
    w->minor += w->minor_step;
    if (w->minor < w->minor_end) {
        w->p += w->pix_step;
        if (w->p >= w->hw) {
            w->n += w->p / w->hw;
            w->p %= w->hw;
        }
        return false;
    }
    w->major += w->major_step;
    w->minor = w->minor_first;
    if (w->major < w->major_end)
        cn_walk_place(w);
    return true;
}

/* Element offset in a data tensor (n stride sn) of the walk's unit; channel offset c. */
FROST_DEVICE int64_t cn_goff(const cnorm_params *p, const cnorm_walk *w, int64_t sn, int c)
{
#if defined(LAYOUT_NHWC)
    return (int64_t)w->n * sn + (int64_t)w->p * p->c + c;
#else
    return (int64_t)w->n * sn + (int64_t)c * p->hw + w->p;
#endif
}
/* The unit's first channel and its element index in the shared tile. */
FROST_DEVICE int cn_walk_channel(const cnorm_walk *w)
{
#if defined(LAYOUT_NHWC)
    return w->major * w->vec;
#else
    return w->major;
#endif
}
FROST_DEVICE int cn_walk_sidx(const cnorm_params *p, const cnorm_walk *w)
{
#if defined(LAYOUT_NHWC)
    return w->minor * p->pitch + w->major * w->vec;
#else
    return w->major * p->pitch + w->minor * w->vec;
#endif
}

/* Issues the loads of one tensor's tile into shared memory (cp.async on the vector path,
 * plain loads otherwise); the caller waits with cn_cp_async_wait_all + __syncthreads. */
FROST_DEVICE void cn_load_tile(const cnorm_params *p, const cnorm_tile *tl, const frost_io *src, int64_t sn,
                               frost_io *tile, int vec)
{
    cnorm_walk w;
    for (cn_walk_begin(&w, p, tl, vec); cn_walk_valid(&w); cn_walk_next(&w)) {
        const int64_t g = cn_goff(p, &w, sn, tl->c0 + cn_walk_channel(&w));
        const int s = cn_walk_sidx(p, &w);
        if (vec > 1)
            cn_cp_async16(tile + s, src + g);
        else
            tile[s] = src[g];
    }
}

/* Asks L2 for one contiguous run of bytes: a bulk prefetch on sm_90, else one prefetch per
 * 32-byte sector.  A hint: it changes no result. */
FROST_DEVICE void cn_prefetch_run(const char *start, int bytes)
{
#if __CUDA_ARCH__ >= 900
    const uint64_t lo = (uint64_t)start & ~(uint64_t)15;
    const uint64_t hi = ((uint64_t)start + (uint64_t)bytes + 15u) & ~(uint64_t)15;
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(lo), "r"((uint32_t)(hi - lo)) : "memory");
#else
    for (uint64_t a = (uint64_t)start & ~(uint64_t)31; a < (uint64_t)start + (uint64_t)bytes; a += 32)
        cn_prefetch_l2((const void *)a);
#endif
}

/* Asks L2 for a whole tile ahead of time, one thread of the block per contiguous run: NHWC
 * a pixel's cw channels, NCHW one channel's pixels within one sample. */
static __device__ __noinline__ void cn_prefetch_tile(const cnorm_params *p, const cnorm_tile *tl, const frost_io *src, int64_t sn)
{
    const int esize = (int)sizeof(frost_io);
#if defined(LAYOUT_NHWC)
    for (int r = threadIdx.x; r < tl->nq; r += (int)blockDim.x) {
        const int q = tl->q0 + r, n = q / p->hw;
        cn_prefetch_run((const char *)(src + (int64_t)n * sn + (int64_t)(q - n * p->hw) * p->c + tl->c0),
                        p->cw * esize);
    }
#else
    const int n_first = tl->q0 / p->hw, samples = (tl->q0 + tl->nq - 1) / p->hw - n_first + 1;
    for (int k = threadIdx.x; k < p->cw * samples; k += (int)blockDim.x) {
        const int cl = k / samples, n = n_first + (k - cl * samples);
        const int lo = max(tl->q0, n * p->hw), hi = min(tl->q0 + tl->nq, (n + 1) * p->hw);
        cn_prefetch_run((const char *)(src + (int64_t)n * sn + (int64_t)(tl->c0 + cl) * p->hw + (lo - n * p->hw)),
                        (hi - lo) * esize);
    }
#endif
}

#endif /* device helpers */
#endif /* FROST_CHAN_NORM_KERNEL_CUH */
