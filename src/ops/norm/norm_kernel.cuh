/*
 * norm_kernel.cuh - what the CUDA LayerNorm / RMSNorm / AdaLayerNorm kernels share: the
 * parameter blocks
 * (read by the host in norm_cuda.c too) and the device helpers that move one row between
 * global memory and registers.
 *
 * Parameter blocks are passed by value as each kernel's only argument, so host and device
 * must agree on their layout byte for byte: pointers first, then int64_t, then int32_t
 * and float, widest first, no padding; the host checks the sizes with static asserts.
 * Strides are in elements.
 *
 * Row layout in registers (the heart of both kernels).  A row is owned by a *row group*
 * of GROUP consecutive threads of a block (GROUP is 1..1024, a power of two; a block holds
 * BLOCK / GROUP groups).  Thread `lane` of a group holds NV "units" of the row, unit k
 * starting at column
 *     col(k) = (k * GROUP + lane) * vec
 * where a unit is a 16-byte vector (vec = VEC = 16 / sizeof(element)) on the vector path
 * or one element (vec = 1) on the scalar path.  So every unit-load of a warp is one
 * coalesced sweep, and a thread holds ELEMS = NV * VEC elements.  Loaded elements are
 * kept *raw* (the bits as loaded, two 16-bit values per word) and converted to float
 * when used: that halves the registers a 16-bit row needs, which is what lets a block
 * keep a 32K-element row and the next row's prefetch in registers at once.  Raw word
 * layout: 32-bit elements one per word; 16-bit elements two per word, element i in word
 * i / 2 (low half first), on both paths.
 *
 * A kernel whose key says VEC > 1 carries both paths and picks one per launch from
 * params.vec_ok (every base pointer 16-byte aligned; the host knows row strides and cols
 * already allow it).  A key with VEC = 1 (cols or a row stride not a multiple of the
 * vector) carries only the scalar path.
 *
 * Per-sample parameters (AdaLayerNorm, keys with PER_SAMPLE): scale and bias may differ
 * between rows.  Row r reads parameter row ((r / div) % count), which starts `stride`
 * elements after the previous one (norm_param_map); the host builds the map from the
 * parameter's outer dims (x [B, S, C], scale [B, 1, C]: div = S, count = B, stride = C).
 * Keys without PER_SAMPLE read one parameter row and ignore the maps.
 *
 * Rows split over a cluster (ROW_SPLIT = 2, sm_90, one row group a block, vector keys whose
 * rows fill the group exactly): the two blocks of a thread-block cluster share each row the
 * cluster takes, block rank r holding columns [r * cols / 2, (r + 1) * cols / 2) in the
 * layout above (the kernel sees its half as a row of cols / 2 columns).  The row-group sums
 * reach over the cluster (norm_group_sum below), so the statistics and the dot products are
 * those of the whole row, and the cluster is the unit that takes rows: logical block
 * blockIdx.x / ROW_SPLIT of a grid of gridDim.x / ROW_SPLIT (norm_split_block).  A wide row
 * then costs each block what a row half as wide costs, on twice the blocks: 4096 rows of
 * 16384 columns give 132 SMs 31 or 32 half rows' worth each instead of 32 or none.
 *
 * Defines every norm kernel key sets: DTYPE_F32|DTYPE_F16|DTYPE_BF16, KIND_LAYER|KIND_RMS,
 * VEC, NV, GROUP, BLOCK, SCALE_DT and BIAS_DT (FROST_DT_* codes, 0 = absent); STAGES > 1
 * (vector keys) streams rows through a shared-memory ring (see below); PER_SAMPLE; L2_256
 * (row loads ask L2 for the whole 256-byte block around each 16-byte load); ROW_SPLIT;
 * ROW_LEVELS (rows at more than one level of strides, norm_rows); ROW_WIDE (more than 2^30
 * rows: the per-sample parameter map keeps its 64-bit division, norm_param_row).
 */
#ifndef FROST_NORM_KERNEL_CUH
#define FROST_NORM_KERNEL_CUH

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#include "frost_common.cuh"
#else
#include <stdint.h>
#endif

/* Where row r of a data or statistics tensor starts, in elements from its base.  The host
 * folds X's outer (row) dims into row levels, innermost first, joining neighbouring dims
 * wherever every row tensor's strides let them act as one (frost__norm_row_map): level i
 * steps row_dims[i] times by stride[i] elements (the outermost level as often as the rows
 * need), so row r starts at
 *     sum_i ((r / (row_dims[0] * ... * row_dims[i - 1])) % row_dims[i]) * stride[i].
 * Keys without ROW_LEVELS have one level (rows evenly spaced: r * stride[0]); ROW_LEVELS = 2
 * is a slice [B, S', C] of a [B, S, C] buffer (runs of S' rows), 3 or more are slices in
 * more dims ([B, S', H', D] of [B, S, H, D]).  Every outer dim can be its own level. */
#define NORM_ROW_LEVELS 7 /* FROST_MAX_RANK - 1 */
typedef struct norm_rows {
    int64_t stride[NORM_ROW_LEVELS];
} norm_rows;

/* Row r of X reads parameter row (r / div) % count, at that index times stride elements. */
typedef struct norm_param_map {
    int64_t div;
    int64_t count;
    int64_t stride;
} norm_param_map;

/* y = norm(x) * w_eff + b for `rows` rows; mean / inv_std written when non-NULL. */
typedef struct norm_fwd_params {
    const void *x;
    void *y;
    const void *scale; /* SCALE_DT elements, or NULL */
    const void *bias;  /* BIAS_DT elements, or NULL */
    float *mean;       /* LayerNorm training: one per row, or NULL */
    float *inv_std;    /* training: one per row, or NULL */
    int64_t rows;
    int64_t row_dims[NORM_ROW_LEVELS - 1]; /* ROW_LEVELS keys: steps of each inner level (norm_rows) */
    norm_rows x_rows;
    norm_rows y_rows;
    norm_rows mean_rows;
    norm_rows inv_std_rows;
    norm_param_map scale_map; /* PER_SAMPLE keys */
    norm_param_map bias_map;
    int32_t cols;
    int32_t vec_ok;  /* 1: every pointer above is 16-byte aligned */
    float epsilon;
    float inv_cols;  /* 1 / cols */
} norm_fwd_params;
#define NORM_FWD_PARAMS_BYTES 392

/* dx for the rows of block b, plus that block's column sums of dy * x_hat and dy into its
 * rows of the partial buffers (one per row group).  Rows come in segments of
 * rows_per_segment consecutive rows (a segment never straddles two parameter rows of a
 * per-sample d_scale or d_bias; without those it is all rows), each served by
 * blocks_per_segment blocks: block j = b % blocks_per_segment of segment b / blocks_per_segment
 * takes rows_per_block rows, one more when j < rows_extra, starting at
 * j * rows_per_block + min(j, rows_extra). */
typedef struct norm_bwd_params {
    const void *x;
    const void *dy;
    const void *scale;     /* SCALE_DT elements, or NULL */
    const float *mean;     /* saved mean, or NULL (recomputed) */
    const float *inv_std;  /* saved inverse std, or NULL (recomputed with epsilon) */
    void *dx;
    float *partial_scale;  /* [gridDim.x][partial_stride], or NULL (no d_scale) */
    float *partial_bias;   /* [gridDim.x][partial_stride], or NULL (no d_bias) */
    int64_t rows;
    int64_t row_dims[NORM_ROW_LEVELS - 1]; /* ROW_LEVELS keys: steps of each inner level (norm_rows) */
    norm_rows x_rows;
    norm_rows dy_rows;
    norm_rows dx_rows;
    norm_rows mean_rows;
    norm_rows inv_std_rows;
    int64_t rows_per_block;
    int64_t rows_extra; /* the first rows_extra blocks of a segment take one row more */
    int64_t rows_per_segment;
    int64_t blocks_per_segment;
    int64_t partial_stride; /* floats between partial rows (norm_reduce_params' positions) */
    norm_param_map scale_map; /* PER_SAMPLE keys */
    int32_t cols;
    int32_t vec_ok;
    float epsilon;
    float inv_cols;
} norm_bwd_params;
#define NORM_BWD_PARAMS_BYTES 480

/* out[q * out_stride + c] = sum over b in [q * partials_per_out, (q + 1) * partials_per_out)
 * (clipped to num_partials) of partial[b][pos(c)], in that order, for the out_rows parameter
 * rows q; blockIdx.y picks the pair (0: scale, 1: bias; a missing pair is skipped by the
 * grid).  Shared parameters: one out row made of every partial row.  A partial row holds
 * column c = (k * lanes + lane) * vec + j at position pos = (k * vec + j) * lanes + lane,
 * so that the register-resident row groups of norm_bwd.cu store it coalesced (lanes =
 * GROUP, vec = the unit); lanes = vec = 1 is column order (the chunked paths).  Positions
 * [0, positions) cover every column once; those of columns >= cols are never written. */
typedef struct norm_reduce_params {
    const float *partial[2];
    float *out[2];
    int64_t partial_stride;
    int64_t out_stride[2];
    int32_t num_partials;
    int32_t cols;
    int32_t partials_per_out[2];
    int32_t out_rows[2];
    int32_t positions;
    int32_t lanes;
    int32_t vec;
    int32_t pad_;
} norm_reduce_params;
#define NORM_REDUCE_PARAMS_BYTES 96

#if (defined(__CUDACC__) || defined(__CUDACC_RTC__)) && defined(NV)

#define ELEMS (NV * VEC)                 /* elements of a row one thread holds */
/* Launch-bounds residency: caps registers at 128 a thread (64 for 1024-thread blocks).
 * Without it ptxas sometimes aims at 64 for 512-thread blocks and spills.  MINB (a tuning
 * key define, FROST_NORM_TUNE minb=) asks for more resident blocks instead. */
#if defined(MINB)
#define MIN_BLOCKS MINB
#else
#define MIN_BLOCKS (BLOCK <= 256 ? 2 : 1)
#endif
#define ROWS_PER_BLOCK (BLOCK / GROUP)   /* row groups per block */
#if defined(DTYPE_F32)
#define IO_DT FROST_DT_F32
#define IO_BYTES 4
#elif defined(DTYPE_F16)
#define IO_DT FROST_DT_F16
#define IO_BYTES 2
#else
#define IO_DT FROST_DT_BF16
#define IO_BYTES 2
#endif

/* 16 payload bits of dtype dt (FROST_DT_F16 or FROST_DT_BF16) to float. */
FROST_DEVICE float norm_half_to_float(uint32_t bits, const int dt)
{
    if (dt == FROST_DT_BF16)
        return __uint_as_float(bits << 16);
    frost_f16 h;
    h.bits = (uint16_t)bits;
    return frost_f16_to_float(h);
}

/* Loads the thread's first `units` units of one row (raw); units past `cols` read as 0.
 * raw holds units * vec * IO_BYTES / 4 words (units * vec words on the f32 path). */
FROST_DEVICE void norm_load_row(uint32_t *raw, const frost_io *row, int lane, int cols, const int vec,
                                const int units)
{
#pragma unroll
    for (int k = 0; k < units; k++) {
        const int col = (k * GROUP + lane) * vec;
        if (vec > 1) {
            if (col < cols) {
#if defined(L2_256)
                uint32_t *r = &raw[4 * k];
                asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];"
                             : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                             : "l"(row + col));
#else
                frost_ld_stream_v4(&raw[4 * k], row + col);
#endif
            } else {
                raw[4 * k] = raw[4 * k + 1] = raw[4 * k + 2] = raw[4 * k + 3] = 0u;
            }
        } else if (IO_BYTES == 4) {
            raw[k] = col < cols ? *(const uint32_t *)(row + col) : 0u;
        } else {
            /* two 16-bit elements per word, as on the vector path */
            const uint32_t bits = col < cols ? (uint32_t)(*(const uint16_t *)(row + col)) : 0u;
            raw[k >> 1] = (k & 1) ? raw[k >> 1] | (bits << 16) : bits;
        }
    }
}

/* Element i of raw words of dtype dt (one per word for f32, two per word low half first
 * for 16-bit dtypes), as float. */
FROST_DEVICE float norm_raw_elem(const uint32_t *raw, const int i, const int dt)
{
    if (dt == FROST_DT_F32)
        return __uint_as_float(raw[i]);
    return norm_half_to_float((raw[i >> 1] >> ((i & 1) * 16)) & 0xffffu, dt);
}

/* Element i (= k * vec + j) of the thread's raw row, as float. */
FROST_DEVICE float norm_elem(const uint32_t *raw, const int i, const int vec)
{
    (void)vec;
    return norm_raw_elem(raw, i, IO_DT);
}

/* Does unit k of this thread lie inside the row? */
FROST_DEVICE bool norm_unit_valid(int k, int lane, int cols, const int vec)
{
    return (k * GROUP + lane) * vec < cols;
}

/* Loads `vec` consecutive parameter values (scale or bias, dtype dt) from column col. */
FROST_DEVICE void norm_load_param(float out[VEC], const void *base, int col, const int vec, const int dt)
{
    const int bytes = dt == FROST_DT_F32 ? 4 : 2;
    if (vec * bytes < 16) {
#pragma unroll
        for (int j = 0; j < vec; j++)
            out[j] = dt == FROST_DT_F32 ? ((const float *)base)[col + j]
                                        : norm_half_to_float(((const uint16_t *)base)[col + j], dt);
        return;
    }
    const char *p = (const char *)base + (int64_t)col * bytes;
#pragma unroll
    for (int q = 0; q < vec * bytes / 16; q++) {
        uint32_t r[4];
        frost_ld_cached_v4(r, p + 16 * q);
#pragma unroll
        for (int t = 0; t < 16 / bytes; t++)
            out[16 / bytes * q + t] = norm_raw_elem(r, t, dt);
    }
}

/* The offset of row `row` of a tensor whose row levels have strides m and steps dims
 * (norm_rows); 32-bit divisions while both sides fit, as in norm_param_row. */
FROST_DEVICE int64_t norm_row_at(const norm_rows *m, const int64_t *dims, int64_t row)
{
#if defined(ROW_LEVELS) && ROW_LEVELS > 1
    int64_t wide = row;
#pragma unroll
    for (int i = 0; i < ROW_LEVELS - 1; i++)
        wide |= dims[i];
    int64_t at = 0;
    if ((wide >> 31) == 0) {
        uint32_t r = (uint32_t)row;
#pragma unroll
        for (int i = 0; i < ROW_LEVELS - 1; i++) {
            const uint32_t d = (uint32_t)dims[i], q = r / d;
            at += (int64_t)(r - q * d) * m->stride[i];
            r = q;
        }
        return at + (int64_t)r * m->stride[ROW_LEVELS - 1];
    }
#pragma unroll
    for (int i = 0; i < ROW_LEVELS - 1; i++) {
        at += row % dims[i] * m->stride[i];
        row /= dims[i];
    }
    return at + row * m->stride[ROW_LEVELS - 1];
#else
    (void)dims;
    return row * m->stride[0];
#endif
}

/* The offset of row `row` of tensor t (x, y, dy, dx, mean, inv_std) of parameter block p. */
#define NORM_ROW(p, t, row) norm_row_at(&(p)->t##_rows, (p)->row_dims, (row))

/* Element `col` of a parameter of dtype dt (f32, or a 16-bit dtype). */
FROST_DEVICE const void *norm_param_at(const void *base, int64_t col, const int dt)
{
    return (const char *)base + col * (dt == FROST_DT_F32 ? 4 : 2);
}

/* The parameter row that row `row` of X reads (base itself without PER_SAMPLE). */
FROST_DEVICE const void *norm_param_row(const void *base, const norm_param_map m, int64_t row, const int dt)
{
#if defined(PER_SAMPLE)
    const int64_t bytes = dt == FROST_DT_F32 ? 4 : 2;
    /* 32-bit division when everything fits: a fraction of the cost of the 64-bit one.  The
     * row index (with the look-ahead past the last), div and count fit 31 bits unless the
     * problem has more than 2^30 rows, which the host marks with ROW_WIDE
     * (norm_cuda_config.c); only then is the 64-bit division compiled beside it.  As a call
     * it spilled AdaLayerNorm's 512 x 4-unit backward keys (24 B stores, ptxas sm_90a) when
     * every per-sample key carried it. */
#if defined(ROW_WIDE)
    const int64_t q = ((row | m.div | m.count) >> 31) == 0
                          ? (int64_t)((uint32_t)row / (uint32_t)m.div % (uint32_t)m.count)
                          : row / m.div % m.count;
#else
    const int64_t q = (int64_t)((uint32_t)row / (uint32_t)m.div % (uint32_t)m.count);
#endif
    return base ? (const void *)((const char *)base + q * m.stride * bytes) : base;
#else
    (void)m, (void)row, (void)dt;
    return base;
#endif
}

/* Effective scale of `vec` columns: w, 1 + w (ZERO_CENTERED) or 1 (no scale). */
FROST_DEVICE void norm_load_weight(float w[VEC], const void *scale, int col, const int vec)
{
#if SCALE_DT != FROST_DT_NONE
    norm_load_param(w, scale, col, vec, SCALE_DT);
#if defined(ZERO_CENTERED)
#pragma unroll
    for (int j = 0; j < vec; j++)
        w[j] += 1.0f;
#endif
#else
    (void)scale, (void)col;
#pragma unroll
    for (int j = 0; j < vec; j++)
        w[j] = 1.0f;
#endif
}

/* ---- held parameters: a thread's units of scale (and bias) kept in registers, raw ----
 * A thread's columns are the same for every row it takes, so a kernel that walks rows can
 * load its NV units of a [cols] parameter once (norm_held_load) and convert them when used
 * (norm_held_elem), instead of loading them again for every row.  Unit k takes
 * NORM_HELD_WORDS(dt) words from k * NORM_HELD_WORDS(dt); units past cols hold zeros. */
#define NORM_HELD_WORDS(dt) (VEC * ((dt) == FROST_DT_F32 ? 4 : 2) / 4)

FROST_DEVICE void norm_held_load(uint32_t *dst, const void *base, int lane, int cols, const int dt)
{
    const int bytes = dt == FROST_DT_F32 ? 4 : 2;
#pragma unroll
    for (int k = 0; k < NV; k++) {
        uint32_t *u = dst + k * NORM_HELD_WORDS(dt);
        const int col = (k * GROUP + lane) * VEC;
        const char *q = (const char *)base + (int64_t)col * bytes;
#pragma unroll
        for (int t = 0; t < NORM_HELD_WORDS(dt); t++)
            u[t] = 0u;
        if (col >= cols)
            continue;
        /* a parameter is f32 or of x's dtype, so a unit of it is 16 or 32 bytes */
#pragma unroll
        for (int t = 0; t < VEC * bytes / 16; t++)
            frost_ld_cached_v4(u + 4 * t, q + 16 * t);
    }
}

/* Value j of unit k of a held parameter, as float. */
FROST_DEVICE float norm_held_elem(const uint32_t *raw, int k, int j, const int dt)
{
    return norm_raw_elem(raw + k * NORM_HELD_WORDS(dt), j, dt);
}

/* Effective scale of value j of unit k from the held scale words, as norm_load_weight. */
FROST_DEVICE float norm_held_scale(const uint32_t *held, int k, int j)
{
#if SCALE_DT != FROST_DT_NONE && defined(ZERO_CENTERED)
    return norm_held_elem(held, k, j, SCALE_DT) + 1.0f;
#elif SCALE_DT != FROST_DT_NONE
    return norm_held_elem(held, k, j, SCALE_DT);
#else
    (void)held, (void)k, (void)j;
    return 1.0f;
#endif
}

/* Call on a copy of the held words where a row uses them: the empty asm makes them look
 * written there, once a row, so the compiler converts them there instead of hoisting the
 * conversions out of the row loop and keeping floats (twice the registers of 16-bit
 * parameters) across it. */
FROST_DEVICE void norm_held_pin(uint32_t *raw, const int words)
{
#pragma unroll
    for (int t = 0; t < words; t++)
        asm volatile("" : "+r"(raw[t]));
}

/* Stores `vec` values (one unit) of an I/O-dtype row at column col. */
FROST_DEVICE void norm_store_unit(frost_io *row, int col, const float v[VEC], const int vec)
{
    if (vec > 1) {
        uint32_t w[4];
#if defined(DTYPE_F32)
#pragma unroll
        for (int t = 0; t < 4; t++)
            w[t] = __float_as_uint(v[t]);
#else
#pragma unroll
        for (int t = 0; t < 4; t++)
            w[t] = FROST_PACK2(v[2 * t], v[2 * t + 1]);
#endif
        frost_st_v4(row + col, w);
    } else {
        row[col] = frost_from_float(v[0]);
    }
}

/* ---- rows split over a cluster (ROW_SPLIT, see the top) ---- */
#if defined(ROW_SPLIT) && ROW_SPLIT > 1
#define NORM_RANKS ROW_SPLIT
#if GROUP != BLOCK || GROUP < 64 || NORM_RANKS * BLOCK / 32 > 32 || (NORM_RANKS & (NORM_RANKS - 1)) != 0
#error "ROW_SPLIT needs one row group a block of 64 to 32 * 32 / ROW_SPLIT threads, ROW_SPLIT a power of two"
#endif
#if __CUDA_ARCH__ >= 900
#define NORM_SPLIT_DIMS __cluster_dims__(ROW_SPLIT, 1, 1)
#else /* compiled for an older architecture the key traps (frost_cluster_*): never selected there */
#define NORM_SPLIT_DIMS
#endif
#else
#define NORM_RANKS 1
#define NORM_SPLIT_DIMS
#endif
/* Warp totals a row-group reduction adds: the row group's warps, in every block of its row. */
#define NORM_TOTALS (NORM_RANKS * (GROUP / 32))

/* The logical block (the cluster with ROW_SPLIT, else the block) and the grid's count. */
FROST_DEVICE int64_t norm_split_block(void)
{
    return (int64_t)(blockIdx.x / NORM_RANKS);
}
FROST_DEVICE int64_t norm_split_blocks(void)
{
    return (int64_t)(gridDim.x / NORM_RANKS);
}
/* This block's rank in the cluster that shares its rows (0 without ROW_SPLIT). */
FROST_DEVICE unsigned norm_split_rank(void)
{
#if NORM_RANKS > 1
    return frost_cluster_rank();
#else
    return 0;
#endif
}

/* Cross-warp scratch of the row-group reductions (GROUP > 32): NORM_RED_BUFS buffers of
 * NORM_RED_HALF floats, used in turn.  Two buffers and one barrier per reduction suffice:
 * reduction k writes buffer k % 2, waits at its barrier, reads; reduction k + 2 writes the
 * same buffer only after every warp has passed reduction k + 1's barrier, which each
 * reaches after its reads of k.  Every thread of the block must make the same sequence of
 * reductions.
 *
 * With ROW_SPLIT each warp stores its totals into every block of the cluster (at rank *
 * warps + warp, st.async) and each block waits on an mbarrier of its own per buffer until
 * all the row's totals have landed, then reads them from its own buffer.  (A cluster
 * barrier in their place ran 0.82-0.88x the whole rows: its release semantics make every
 * thread wait, once a row, until its global stores of the row before are visible across
 * the cluster.)  One reduction at a time may stay open (norm_group_sum2_begin / _end) while
 * up to D = 3 later ones begin (a split backward row's dot products while the next row
 * takes its mean, variance and dot products), so a block that begins reduction k has read
 * every reduction up to k - D - 1.  Its partners' totals of k land in this block only after
 * they have all of k - D - 1, among them this block's, which it published having read every
 * reduction up to k - 2D - 2.  So with 2D + 2 = 8 buffers, and mbarriers whose phases
 * alternate per buffer, nothing lands in a buffer still being read or on an mbarrier still
 * in an earlier phase. */
#if NORM_RANKS > 1
#define NORM_RED_BUFS 8
#else
#define NORM_RED_BUFS 2
#endif
#define NORM_RED_HALF (3 * NORM_RANKS * (BLOCK / 32)) /* up to three floats per warp (LN_MERGE) */
typedef struct norm_red {
    float *buf; /* shared, NORM_RED_BUFS * NORM_RED_HALF floats */
#if NORM_RANKS > 1
    uint64_t *bar; /* shared, an mbarrier per buffer */
    unsigned n;    /* reductions begun; the current one is n - 1 */
#else
    int half; /* the buffer of the next reduction */
#endif
} norm_red;

#if NORM_RANKS > 1
/* Every thread calls it once, before any reduction: thread 0 sets up the mbarriers (one
 * arrival a phase: its own, which also expects the phase's bytes), and the cluster barrier
 * makes sure every block of the cluster has, before anyone stores into another. */
FROST_DEVICE void norm_red_init(norm_red *r)
{
    if (threadIdx.x == 0) {
#pragma unroll
        for (int b = 0; b < NORM_RED_BUFS; b++)
            frost_mbar_init(&r->bar[b], 1);
        frost_mbar_init_fence();
    }
    frost_cluster_sync();
}
#define NORM_RED(name)                                        \
    __shared__ float name##_buf[NORM_RED_BUFS * NORM_RED_HALF]; \
    __shared__ uint64_t name##_bar[NORM_RED_BUFS];            \
    norm_red name##_r = {name##_buf, name##_bar, 0u};         \
    norm_red *name = &name##_r;                               \
    norm_red_init(name)

/* Reduction h's buffer and mbarrier. */
FROST_DEVICE float *norm_red_buf(const norm_red *r, unsigned h)
{
    return r->buf + (h % NORM_RED_BUFS) * NORM_RED_HALF;
}
FROST_DEVICE uint64_t *norm_red_bar(const norm_red *r, unsigned h)
{
    return &r->bar[h % NORM_RED_BUFS];
}
#else
#define NORM_RED(name)                                     \
    __shared__ float name##_buf[NORM_RED_BUFS * NORM_RED_HALF]; \
    norm_red name##_r = {name##_buf, 0};                   \
    norm_red *name = &name##_r
#endif

/* Begins a reduction: its buffer. */
FROST_DEVICE float *norm_red_next(norm_red *r)
{
#if NORM_RANKS > 1
    return norm_red_buf(r, r->n++);
#else
    float *b = r->buf + r->half * NORM_RED_HALF;
    r->half ^= 1;
    return b;
#endif
}

#if GROUP > 32
/* The sum of the row group's NORM_TOTALS warp totals at `mine` (shared): lane l loads total
 * l % NORM_TOTALS and the lanes add in a butterfly, one load and log2(NORM_TOTALS) shuffles
 * a thread instead of a load and an add per warp.  Every lane ends with the same bits (each
 * step adds the same two values in either order), in every block of a split row. */
FROST_DEVICE float norm_warps_sum(const float *mine)
{
    float s = mine[(threadIdx.x & 31) % NORM_TOTALS];
#pragma unroll
    for (int o = NORM_TOTALS / 2; o > 0; o >>= 1)
        s += __shfl_xor_sync(0xffffffffu, s, o);
    return s;
}

/* Publishes this warp's total v as entry `at` (plus the warp's place) of the current
 * reduction's buffer `red` (norm_red_next): lane 0 stores it, into every block of the
 * cluster with ROW_SPLIT. */
FROST_DEVICE void norm_publish(norm_red *r, float *red, int at, float v)
{
#if NORM_RANKS > 1
    if ((threadIdx.x & 31) == 0) {
        const int slot = at + (int)frost_cluster_rank() * (BLOCK / 32) + threadIdx.x / 32;
#pragma unroll
        for (unsigned q = 0; q < NORM_RANKS; q++)
            frost_st_async_f32(red + slot, norm_red_bar(r, r->n - 1u), q, v);
    }
#else
    (void)r;
    if ((threadIdx.x & 31) == 0)
        red[at + threadIdx.x / 32] = v;
#endif
}

#if NORM_RANKS > 1
/* The current reduction expects `values` totals from every warp of the row (thread 0 tells
 * its mbarrier); returns its number, for norm_red_wait. */
FROST_DEVICE unsigned norm_publish_expect(norm_red *r, int values)
{
    const unsigned h = r->n - 1u;
    if (threadIdx.x == 0)
        frost_mbar_expect(norm_red_bar(r, h), (unsigned)(values * NORM_TOTALS * 4));
    return h;
}
/* Waits until every total of reduction h has landed in this block. */
FROST_DEVICE void norm_red_wait(const norm_red *r, unsigned h)
{
    frost_mbar_wait(norm_red_bar(r, h), (h / NORM_RED_BUFS) & 1u);
}
#endif

/* The barrier of a row group's reductions: the whole block, or with GROUP_BAR (several
 * row groups a block) the group's own warps on named barrier 1 + group, so that a group
 * waits for its own row only.  Each group reads and writes only its warps' entries of the
 * reduction buffers, so the two-buffer argument above holds group by group. */
#if defined(GROUP_BAR) && GROUP > 32 && GROUP < BLOCK
#if BLOCK / GROUP > 15
#error "GROUP_BAR: a named barrier per row group needs at most 15 row groups a block"
#endif
/* The id comes from a register, so ptxas reserves all 16 of the block's barriers.  (Literal
 * ids through a switch reserved fewer but spilled in 10 of 153 keys: docs/PERF.md.) */
FROST_DEVICE void norm_group_barrier(void)
{
    asm volatile("bar.sync %0, %1;" ::"r"(1 + (int)threadIdx.x / GROUP), "n"(GROUP) : "memory");
}
#else
FROST_DEVICE void norm_group_barrier(void)
{
    __syncthreads();
}
#endif

/* Waits until every warp of the row group has published its `values` totals of the current
 * reduction: the group's barrier, or with ROW_SPLIT this block's mbarrier of the buffer. */
FROST_DEVICE void norm_publish_wait(norm_red *r, int values)
{
#if NORM_RANKS > 1
    norm_red_wait(r, norm_publish_expect(r, values));
#else
    (void)r, (void)values;
    norm_group_barrier();
#endif
}
#endif

/* Sum over the row group; every thread of the block calls it (it may synchronize the
 * block, or with ROW_SPLIT the cluster).  Fixed order: deterministic. */
FROST_DEVICE float norm_group_sum(float v, norm_red *r)
{
#if GROUP <= 32
    (void)r;
    return frost_group_sum(v, GROUP);
#else
    float *red = norm_red_next(r);
    norm_publish(r, red, 0, frost_warp_sum(v));
    norm_publish_wait(r, 1);
    return norm_warps_sum(red + (threadIdx.x / GROUP) * (GROUP / 32));
#endif
}

/* Two sums at once. */
FROST_DEVICE void norm_group_sum2(float *a, float *b, norm_red *r)
{
#if GROUP <= 32
    (void)r;
    *a = frost_group_sum(*a, GROUP);
    *b = frost_group_sum(*b, GROUP);
#else
    float *red = norm_red_next(r);
    const float va = frost_warp_sum(*a), vb = frost_warp_sum(*b);
    norm_publish(r, red, 0, va);
    norm_publish(r, red, NORM_TOTALS * (BLOCK / GROUP), vb);
    norm_publish_wait(r, 2);
    const int first = (threadIdx.x / GROUP) * (GROUP / 32);
    *a = norm_warps_sum(red + first);
    *b = norm_warps_sum(red + NORM_TOTALS * (BLOCK / GROUP) + first);
#endif
}

#if NORM_RANKS > 1
/* norm_group_sum2 in two halves (split rows): _begin publishes both totals and returns the
 * reduction's number; _end, later, waits for it and reads the sums.  At most one reduction
 * may be left open while others begin and end (see NORM_RED_BUFS). */
FROST_DEVICE unsigned norm_group_sum2_begin(float a, float b, norm_red *r)
{
    float *red = norm_red_next(r);
    norm_publish(r, red, 0, frost_warp_sum(a));
    norm_publish(r, red, NORM_TOTALS, frost_warp_sum(b));
    return norm_publish_expect(r, 2);
}
FROST_DEVICE void norm_group_sum2_end(const norm_red *r, unsigned h, float *a, float *b)
{
    norm_red_wait(r, h);
    const float *red = norm_red_buf(r, h);
    *a = norm_warps_sum(red);
    *b = norm_warps_sum(red + NORM_TOTALS);
}
#endif

#if defined(STAGES) && STAGES > 1
/* ---- staged rows: a ring of STAGES row slots in shared memory, filled by cp.async ----
 * Register prefetch holds one row ahead at the price of registers; cp.async holds
 * STAGES - 1 rows ahead in shared memory at no register cost, so more bytes are in flight
 * per SM.  Each thread copies exactly the 16-byte units it will read back (the layout of
 * the row in registers above), so a thread only waits for its own copies
 * (cp.async.wait_group) and no block barrier guards the ring.  A slot is refilled one
 * iteration after the same thread consumed it.  Ring layout, 16-byte cells:
 *     [stage][tensor (NT)][unit (NV)][thread (BLOCK)]   (consecutive threads, consecutive
 *                                                         cells: conflict-free)
 * Vector path only (VEC > 1); dynamic shared memory of STAGES * NT * NV * BLOCK * 16 bytes. */
typedef struct __attribute__((aligned(16))) norm_cell {
    uint32_t w[4];
} norm_cell;

FROST_DEVICE void norm_cp_async_16(const void *smem_dst, const void *gmem_src, int src_bytes)
{
    const uint32_t dst = (uint32_t)__cvta_generic_to_shared(smem_dst);
#if defined(L2_256)
    asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;" ::"r"(dst), "l"(gmem_src), "r"(src_bytes)
                 : "memory");
#else
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(gmem_src), "r"(src_bytes)
                 : "memory");
#endif
}
FROST_DEVICE void norm_cp_async_commit(void)
{
    asm volatile("cp.async.commit_group;" ::: "memory");
}
/* Waits until at most STAGES - 1 of this thread's committed groups are in flight. */
FROST_DEVICE void norm_cp_async_wait_ring(void)
{
    asm volatile("cp.async.wait_group %0;" ::"n"(STAGES - 1) : "memory");
}

/* Drains the ring's remaining (zero-fill) copies before the thread leaves. */
FROST_DEVICE void norm_cp_async_drain(void)
{
    asm volatile("cp.async.wait_all;" ::: "memory");
}

/* Starts the copy of the thread's units of one row (of tensor t) into ring slot `stage`;
 * units past cols (or an inactive row) are zero-filled without reading. */
FROST_DEVICE void norm_stage_row(norm_cell *ring, int stage, int t, int nt, const frost_io *row, int lane, int cols,
                                 bool active)
{
#pragma unroll
    for (int k = 0; k < NV; k++) {
        const int col = (k * GROUP + lane) * VEC;
        const bool ok = active && col < cols;
        norm_cp_async_16(&ring[((stage * nt + t) * NV + k) * BLOCK + threadIdx.x], ok ? row + col : row,
                         ok ? 16 : 0);
    }
}

/* Reads the thread's units of slot `stage` (tensor t) into raw registers. */
FROST_DEVICE void norm_unstage_row(uint32_t *raw, const norm_cell *ring, int stage, int t, int nt)
{
#pragma unroll
    for (int k = 0; k < NV; k++) {
        const norm_cell c = ring[((stage * nt + t) * NV + k) * BLOCK + threadIdx.x];
#pragma unroll
        for (int q = 0; q < 4; q++)
            raw[4 * k + q] = c.w[q];
    }
}
#endif /* STAGES */

#endif /* device helpers */
#endif /* FROST_NORM_KERNEL_CUH */
