/*
 * sdpa_fwd.cu — scaled dot-product attention forward on tensor cores (mma.sync m16n8k16),
 * the generic kernel of the cuda engine for sm_80 and newer (Hopper runs it too).
 *
 * Layout legend: b = batch, h = query head, hk = KV head = h / G, i = query row, j = key
 * row, d = head-dim index; a "tile" is BLOCK_M query rows x BLOCK_N keys.
 *
 * One CTA owns BLOCK_M = 16 * NUM_WARPS query rows of one (b, h); warp w owns rows
 * 16w .. 16w + 15 of it, so every row's softmax statistics live inside one warp (in the
 * four lanes of a quad) and no cross-warp reduction is ever needed.  The CTA walks the key
 * tiles that the mask band can reach:
 *
 *     S  = Q K^T          (f32 accumulators, Q as A fragments, K rows via ldmatrix)
 *     S2 = S * scale*log2(e) + bias*log2(e), -inf where the key is masked
 *     m  = max(m, rowmax S2);  P = 2^(S2 - m);  l = l * 2^(m_old - m) + rowsum P
 *     O  = O * 2^(m_old - m) + P V      (P re-packed from C to A fragments in registers,
 *                                        V via ldmatrix.trans)
 *
 * and at the end O /= l and LSE = (m + log2 l) * ln 2 (natural log at the API boundary).
 * Working in base 2 with the scale folded into one multiply lets each probability cost one
 * ex2.approx; the max is taken after scaling, so a negative scale needs no special case.
 * A sink logit joins the softmax as a column with no value: the running max starts at
 * sink*log2(e) and the running sum at 1.  A row whose running max is still -inf uses 0 as
 * its reference, so 2^(-inf - 0) = 0 and nothing turns into NaN; such a row (no admissible
 * key, no sink) ends with l = 0 and is written as O = 0, LSE = -inf.
 *
 * Shared memory: the Q tile (later reused to stage O for 16-byte stores) and two stages
 * each of K and V, filled by cp.async.  Each row is padded by 16 bytes so that the eight
 * row addresses of an ldmatrix phase hit distinct banks.  Head dims that are not a multiple
 * of 16 are padded to one in shared memory; the padding columns are zero-filled by cp.async
 * (src-size 0) exactly like key rows beyond len_kv, so global memory is never read out of
 * bounds and the padding adds exact zeros to Q K^T.
 *
 * What is a -D define and what is a run-time parameter: defines fix what shapes registers
 * and loops: DTYPE_F16 / DTYPE_BF16, D_QK and D_V (the head dims rounded up to 16),
 * BLOCK_M, BLOCK_N, NUM_WARPS, Q_IN_REGS (Q fragments held in registers for the whole key
 * loop; off for wide heads, where they are re-read from shared memory) and BIAS_F32 /
 * BIAS_IO.  Masks, lengths, ragged offsets, sinks and stats are run-time fields of
 * sdpa_fwd_params: they cost a few instructions per CTA or per boundary tile (a tile fully
 * inside the band for every row of the CTA skips the element mask), and keeping them out
 * of the key keeps the number of kernels small (dtype x D_QK x D_V x bias).  Whether rows
 * are 16-byte aligned (cp.async path) or not (element-wise loads) is also a run-time flag,
 * because pointer alignment is only known at execute time.
 *
 * Rows the CTA writes (the reference engine's contract, sdpa_ref.c): O rows i < len_q get
 * the attention; rows len_q <= i < (rows O owns: s_q, or its ragged slice) get 0; stats
 * rows len_q <= i < s_q get -inf.
 */
#include "frost_mma.cuh"
#include "sdpa_kernel_params.cuh"

#if !defined(D_QK) || !defined(D_V) || !defined(BLOCK_M) || !defined(BLOCK_N) || !defined(NUM_WARPS)
#error "sdpa_fwd.cu needs D_QK, D_V, BLOCK_M, BLOCK_N and NUM_WARPS"
#endif
#if !defined(DTYPE_F16) && !defined(DTYPE_BF16)
#error "sdpa_fwd.cu needs DTYPE_F16 or DTYPE_BF16"
#endif
#if D_QK % 16 != 0 || D_V % 16 != 0 || BLOCK_N % 16 != 0 || BLOCK_M != NUM_WARPS * 16
#error "sdpa_fwd.cu: D_QK, D_V, BLOCK_N must be multiples of 16 and BLOCK_M = 16 * NUM_WARPS"
#endif
#ifndef Q_IN_REGS
#define Q_IN_REGS 1
#endif
#if defined(BIAS_F32) || defined(BIAS_IO)
#define HAS_BIAS 1
#else
#define HAS_BIAS 0
#endif

#define THREADS (NUM_WARPS * 32)
#define QO_COLS (D_QK > D_V ? D_QK : D_V)
#define Q_STRIDE (QO_COLS + 8) /* elements per shared row of the Q / O staging tile */
#define K_STRIDE (D_QK + 8)
#define V_STRIDE (D_V + 8)
#define S_TILES (BLOCK_N / 8) /* n8 score tiles per warp and key tile */
#define O_TILES (D_V / 8)     /* n8 output tiles per warp */
#define QK_STEPS (D_QK / 16)  /* k16 steps of Q K^T */
#define PV_STEPS (BLOCK_N / 16)

/* ------------------------------------------------------------------------------------ */
/* Global -> shared tiles                                                                */
/* ------------------------------------------------------------------------------------ */

/* Copies `rows` rows of `chunks` 16-byte chunks: row r comes from src + r * src_stride and
 * lands at dst + r * dst_stride (elements).  Chunks of rows >= rows_valid or of columns
 * >= d are zero-filled and not read.  `safe` is any readable address (the tensor's base):
 * cp.async gets it for zero-fill chunks.  vec = 0 uses plain loads (rows not 16-byte
 * aligned); those finish before the function returns.
 *
 * Thread tid always takes column chunk tid % chunks of rows tid / chunks + k * rows_per_pass
 * (threads beyond rows_per_pass * chunks idle): one 64-bit source offset per thread that
 * steps by a uniform amount.  A flat chunk index would give every thread a different row
 * per step, and the compiler keeps all those 64-bit row offsets live across the key loop
 * (about 70 registers at d = 128). */
FROST_DEVICE void load_tile(uint16_t *dst, int dst_stride, const uint16_t *src, int64_t src_stride, int rows_valid,
                            int d, int vec, const void *safe, int rows, int chunks)
{
    const int rows_per_pass = THREADS / chunks;
    const int r0 = (int)threadIdx.x / chunks, col = ((int)threadIdx.x % chunks) * 8;
    if (r0 >= rows_per_pass)
        return;
    const int col_ok = col < d;
    uint16_t *to = dst + r0 * dst_stride + col;
    const uint16_t *from = src + (int64_t)r0 * src_stride + col;
    const int64_t step = (int64_t)rows_per_pass * src_stride;
#pragma unroll
    for (int pass = 0; pass < (rows + rows_per_pass - 1) / rows_per_pass; ++pass, from += step) {
        const int r = r0 + pass * rows_per_pass;
        if (rows % rows_per_pass != 0 && r >= rows)
            break;
        const int ok = col_ok && r < rows_valid;
        uint16_t *at = to + pass * rows_per_pass * dst_stride;
        if (vec) {
            frost_cp_async_16(at, ok ? (const void *)from : safe, ok ? 16 : 0);
        } else {
            uint32_t w[4] = {0u, 0u, 0u, 0u};
            if (ok) {
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    w[e] = (uint32_t)from[2 * e] | ((uint32_t)from[2 * e + 1] << 16);
            }
            frost_st_shared_16(at, w);
        }
    }
}

/* ------------------------------------------------------------------------------------ */
/* Per-batch geometry                                                                    */
/* ------------------------------------------------------------------------------------ */

FROST_DEVICE int64_t offset_at(const void *offsets, int is64, int i)
{
    return is64 ? ((const int64_t *)offsets)[i] : (int64_t)((const int32_t *)offsets)[i];
}

FROST_DEVICE int clamp_len(int64_t v, int64_t hi)
{
    return (int)(v < 0 ? 0 : v > hi ? hi : v);
}

typedef struct batch_geo {
    int len_q, len_kv; /* actual lengths */
    int rows_o;        /* rows of O this batch owns (s_q, or its ragged slice) */
    int64_t q, k, v, o; /* element offset of (b, hk or h, 0, 0) */
} batch_geo;

/* Lengths follow the reference: seq_len when given, else the ragged slice of Q (of K,
 * then V, for keys), else the s dim.  Device data is not validated here (the reference
 * engine reports bad offsets and lengths as INVALID_ARGUMENT); lengths are clamped to the
 * rows their operands own and to the s dims, so a bad seq_len never reads past a slice,
 * but offsets themselves must be valid. */
FROST_DEVICE batch_geo batch_geometry(const sdpa_fwd_params &p, int b, int h)
{
    batch_geo g;
    const int hk = h / p.kv_group;
    int64_t len_q = p.s_q, len_kv = p.s_kv, own_q = p.s_q, own_kv = p.s_kv, own_o = p.s_q;
    g.q = (int64_t)b * p.q_stride[0];
    g.k = (int64_t)b * p.k_stride[0];
    g.v = (int64_t)b * p.v_stride[0];
    g.o = (int64_t)b * p.o_stride[0];
    if (p.ragged_q) {
        const int64_t first = offset_at(p.ragged_q, p.flags & SDPA_FWD_RAGGED_Q_I64, b);
        own_q = len_q = offset_at(p.ragged_q, p.flags & SDPA_FWD_RAGGED_Q_I64, b + 1) - first;
        g.q = first * p.q_stride[2];
    }
    if (p.ragged_v) {
        const int64_t first = offset_at(p.ragged_v, p.flags & SDPA_FWD_RAGGED_V_I64, b);
        const int64_t n = offset_at(p.ragged_v, p.flags & SDPA_FWD_RAGGED_V_I64, b + 1) - first;
        own_kv = len_kv = n;
        g.v = first * p.v_stride[2];
    }
    if (p.ragged_k) {
        const int64_t first = offset_at(p.ragged_k, p.flags & SDPA_FWD_RAGGED_K_I64, b);
        const int64_t n = offset_at(p.ragged_k, p.flags & SDPA_FWD_RAGGED_K_I64, b + 1) - first;
        own_kv = n < own_kv ? n : own_kv;
        len_kv = n;
        g.k = first * p.k_stride[2];
    }
    if (p.ragged_o) {
        const int64_t first = offset_at(p.ragged_o, p.flags & SDPA_FWD_RAGGED_O_I64, b);
        own_o = offset_at(p.ragged_o, p.flags & SDPA_FWD_RAGGED_O_I64, b + 1) - first;
        g.o = first * p.o_stride[2];
    }
    if (p.seq_len_q)
        len_q = p.seq_len_q[(int64_t)b * p.seq_len_q_stride];
    if (p.seq_len_kv)
        len_kv = p.seq_len_kv[(int64_t)b * p.seq_len_kv_stride];
    g.rows_o = clamp_len(own_o, p.s_q);
    g.len_q = clamp_len(len_q, own_q < p.s_q ? own_q : p.s_q);
    g.len_q = g.len_q < g.rows_o ? g.len_q : g.rows_o;
    g.len_kv = clamp_len(len_kv, own_kv < p.s_kv ? own_kv : p.s_kv);
    g.q += (int64_t)h * p.q_stride[1];
    g.k += (int64_t)hk * p.k_stride[1];
    g.v += (int64_t)hk * p.v_stride[1];
    g.o += (int64_t)h * p.o_stride[1];
    return g;
}

/* The admissible keys of row i form [lo, hi) (see frost__sdpa_admissible): with diagonal
 * c = i (+ len_kv - len_q for bottom-right), lo = c - left + 1 and hi = c + right + 1,
 * both clamped to 0..len_kv; an empty band has lo >= hi.  Both ends grow with i, which is
 * what lets a CTA bound its key loop by its first and last rows. */
FROST_DEVICE void row_band(const sdpa_fwd_params &p, int i, int len_q, int len_kv, int *lo, int *hi)
{
    const int64_t c = (int64_t)i + ((p.flags & SDPA_FWD_ALIGN_BOTTOM_RIGHT) ? len_kv - len_q : 0);
    int64_t l = 0, u = len_kv;
    if (p.flags & SDPA_FWD_MASK_LEFT)
        l = c - p.left_bound + 1;
    if (p.flags & SDPA_FWD_MASK_RIGHT)
        u = c + p.right_bound + 1;
    *lo = clamp_len(l, len_kv);
    *hi = clamp_len(u, len_kv);
}

/* Bias elements are read one by one through their strides (any layout, 0 on broadcast
 * dims).  Each thread keeps one pointer per row and steps it along the key tile, so the
 * 64-bit address math per element is one multiply by the key stride. */
#if defined(BIAS_F32)
typedef float bias_t;
#elif defined(BIAS_IO)
typedef frost_io bias_t;
#endif

/* Max and sum over the four lanes of a quad (the lanes that share a row). */
FROST_DEVICE float quad_max(float v)
{
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
    return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
FROST_DEVICE float quad_sum(float v)
{
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

/* ------------------------------------------------------------------------------------ */
/* The kernel                                                                            */
/* ------------------------------------------------------------------------------------ */

extern "C" __global__ void __launch_bounds__(THREADS) sdpa_fwd_kernel(const __grid_constant__ sdpa_fwd_params p)
{
    extern __shared__ __attribute__((aligned(16))) uint16_t sdpa_fwd_smem[];
    uint16_t *q_tile = sdpa_fwd_smem;                /* [BLOCK_M][Q_STRIDE] */
    uint16_t *k_tiles = q_tile + BLOCK_M * Q_STRIDE; /* [2][BLOCK_N][K_STRIDE] */
    uint16_t *v_tiles = k_tiles + 2 * BLOCK_N * K_STRIDE; /* [2][BLOCK_N][V_STRIDE] */

    const int lane = (int)threadIdx.x % 32, warp = (int)threadIdx.x / 32;
    const int g = lane / 4, t = lane % 4; /* fragment row group and column pair */
    const int b = (int)blockIdx.z, h = (int)blockIdx.y;
    /* The heaviest query blocks (most keys under a causal band) go first. */
    const int m0 = ((int)gridDim.x - 1 - (int)blockIdx.x) * BLOCK_M;
    const int vec = (p.flags & SDPA_FWD_VEC_IO) != 0;

    const batch_geo geo = batch_geometry(p, b, h);
    const uint16_t *q_src = (const uint16_t *)p.q + geo.q;
    const uint16_t *k_src = (const uint16_t *)p.k + geo.k;
    const uint16_t *v_src = (const uint16_t *)p.v + geo.v;

    /* This thread's two rows and their bands; the CTA's key range from its first and last
     * valid rows. */
    const int row0 = m0 + warp * 16 + g, row1 = row0 + 8;
    int lo0, hi0, lo1, hi1;
    row_band(p, row0, geo.len_q, geo.len_kv, &lo0, &hi0);
    row_band(p, row1, geo.len_q, geo.len_kv, &lo1, &hi1);
    int tile_begin = 0, tile_end = 0, full_lo = 0, full_hi = 0;
    if (m0 < geo.len_q) {
        const int last = (m0 + BLOCK_M < geo.len_q ? m0 + BLOCK_M : geo.len_q) - 1;
        int band_lo, band_hi, last_lo;
        row_band(p, m0, geo.len_q, geo.len_kv, &band_lo, &full_hi);
        row_band(p, last, geo.len_q, geo.len_kv, &last_lo, &band_hi);
        full_lo = last_lo; /* keys in [full_lo, full_hi) are admissible for every row */
        if (band_hi > band_lo) {
            tile_begin = band_lo / BLOCK_N;
            tile_end = (band_hi + BLOCK_N - 1) / BLOCK_N;
        }
    }

    /* Running statistics of rows row0 (index 0) and row1 (index 1), in the base-2 domain.
     * l is this lane's partial sum; the quad's four partials add up at the end. */
    float m_run[2], l_run[2];
    {
        const float sink2 = p.sink ? p.sink[(int64_t)h * p.sink_stride] * FROST_LOG2E : FROST_NEG_INF;
        m_run[0] = m_run[1] = sink2;
        l_run[0] = l_run[1] = (t == 0 && sink2 != FROST_NEG_INF) ? 1.0f : 0.0f;
    }
    float o_acc[O_TILES][4];
#pragma unroll
    for (int n = 0; n < O_TILES; ++n)
        o_acc[n][0] = o_acc[n][1] = o_acc[n][2] = o_acc[n][3] = 0.0f;

    if (tile_begin < tile_end) {
        load_tile(q_tile, Q_STRIDE, q_src + (int64_t)m0 * p.q_stride[2], p.q_stride[2], geo.len_q - m0, p.d_qk, vec,
                  p.q, BLOCK_M, D_QK / 8);
        const int n_first = tile_begin * BLOCK_N;
        load_tile(k_tiles, K_STRIDE, k_src + (int64_t)n_first * p.k_stride[2], p.k_stride[2], geo.len_kv - n_first,
                  p.d_qk, vec, p.k, BLOCK_N, D_QK / 8);
        load_tile(v_tiles, V_STRIDE, v_src + (int64_t)n_first * p.v_stride[2], p.v_stride[2], geo.len_kv - n_first,
                  p.d_v, vec, p.v, BLOCK_N, D_V / 8);
        frost_cp_async_commit();
        frost_cp_async_wait(0);
        __syncthreads();

        /* A-fragment k-step s of this warp's 16 rows: matrices (rows 0-7 | 8-15) x
         * (cols 0-7 | 8-15) in the order a[0..3] wants; lane l addresses row l % 16 of
         * column half l / 16. */
        const uint16_t *q_frag_row = q_tile + (warp * 16 + (lane % 16)) * Q_STRIDE + (lane / 16) * 8;
#if Q_IN_REGS
        uint32_t q_frag[QK_STEPS][4];
#pragma unroll
        for (int s = 0; s < QK_STEPS; ++s)
            frost_ldmatrix_x4(q_frag[s], q_frag_row + s * 16);
#endif
        /* B fragments of K for n-tiles (2n, 2n+1): lane l addresses key row
         * (l / 16) * 8 + l % 8 of the pair, column half (l / 8) % 2, giving
         * {b0, b1} of tile 2n then {b0, b1} of tile 2n+1. */
        const int k_lane_off = ((lane / 16) * 8 + (lane % 8)) * K_STRIDE + ((lane / 8) % 2) * 8;
        /* B fragments of V (ldmatrix.trans) for output tiles (2n, 2n+1): lane l addresses
         * key row ((l / 8) % 2) * 8 + l % 8 of the k16 step, column half l / 16. */
        const int v_lane_off = (((lane / 8) % 2) * 8 + (lane % 8)) * V_STRIDE + (lane / 16) * 8;
        const float scale_log2 = p.scale_log2;
#if HAS_BIAS
        /* rows beyond len_q are never read; their pointers stay in range anyway */
        const bias_t *bias_head = (const bias_t *)p.bias + (int64_t)b * p.bias_stride[0] + (int64_t)h * p.bias_stride[1];
        const bias_t *bias_row[2] = {bias_head + (int64_t)(row0 < geo.len_q ? row0 : 0) * p.bias_stride[2],
                                     bias_head + (int64_t)(row1 < geo.len_q ? row1 : 0) * p.bias_stride[2]};
#endif

        for (int tile = tile_begin; tile < tile_end; ++tile) {
            const int stage = (tile - tile_begin) & 1;
            const int n0 = tile * BLOCK_N;
            const uint16_t *k_tile = k_tiles + stage * BLOCK_N * K_STRIDE;
            const uint16_t *v_tile = v_tiles + stage * BLOCK_N * V_STRIDE;
            if (tile + 1 < tile_end) { /* prefetch the next tile into the other stage */
                const int n1 = n0 + BLOCK_N;
                load_tile(k_tiles + (stage ^ 1) * BLOCK_N * K_STRIDE, K_STRIDE, k_src + (int64_t)n1 * p.k_stride[2],
                          p.k_stride[2], geo.len_kv - n1, p.d_qk, vec, p.k, BLOCK_N, D_QK / 8);
                load_tile(v_tiles + (stage ^ 1) * BLOCK_N * V_STRIDE, V_STRIDE, v_src + (int64_t)n1 * p.v_stride[2],
                          p.v_stride[2], geo.len_kv - n1, p.d_v, vec, p.v, BLOCK_N, D_V / 8);
            }
            frost_cp_async_commit();

            /* S = Q K^T for this warp's 16 rows x BLOCK_N keys. */
            float s_acc[S_TILES][4];
#pragma unroll
            for (int n = 0; n < S_TILES; ++n)
                s_acc[n][0] = s_acc[n][1] = s_acc[n][2] = s_acc[n][3] = 0.0f;
#pragma unroll
            for (int s = 0; s < QK_STEPS; ++s) {
#if Q_IN_REGS
                const uint32_t *a = q_frag[s];
#else
                uint32_t a[4];
                frost_ldmatrix_x4(a, q_frag_row + s * 16);
#endif
#pragma unroll
                for (int n = 0; n < S_TILES / 2; ++n) {
                    uint32_t kb[4];
                    frost_ldmatrix_x4(kb, k_tile + n * 16 * K_STRIDE + s * 16 + k_lane_off);
                    frost_mma_16816(s_acc[2 * n], a, kb);
                    frost_mma_16816(s_acc[2 * n + 1], a, kb + 2);
                }
            }

            /* Scale into the base-2 domain; bias and mask only where they can matter.
             * Element e of n-tile n sits at row (e < 2 ? row0 : row1), key
             * n0 + 8n + 2t + (e & 1). */
            const int need_mask = !(n0 >= full_lo && n0 + BLOCK_N <= full_hi);
#if HAS_BIAS
            const bias_t *bias_at[2] = {bias_row[0] + (int64_t)(n0 + 2 * t) * p.bias_stride[3],
                                        bias_row[1] + (int64_t)(n0 + 2 * t) * p.bias_stride[3]};
#endif
            if (HAS_BIAS || need_mask) {
#pragma unroll
                for (int n = 0; n < S_TILES; ++n) {
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const int j = n0 + 8 * n + 2 * t + (e & 1);
                        const int i = e < 2 ? row0 : row1;
                        const int ok = (e < 2 ? (j >= lo0 && j < hi0) : (j >= lo1 && j < hi1)) && i < geo.len_q;
                        float v = s_acc[n][e] * scale_log2;
#if HAS_BIAS
                        if (ok)
                            v += frost_to_float(bias_at[e / 2][(int64_t)(8 * n + (e & 1)) * p.bias_stride[3]]) *
                                 FROST_LOG2E;
#endif
                        s_acc[n][e] = ok ? v : FROST_NEG_INF;
                    }
                }
            } else {
#pragma unroll
                for (int n = 0; n < S_TILES; ++n)
#pragma unroll
                    for (int e = 0; e < 4; ++e)
                        s_acc[n][e] *= scale_log2;
            }

            /* Online softmax: new running max, rescale of the old sum and output. */
            float m_ref[2];
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                float mx = m_run[r];
#pragma unroll
                for (int n = 0; n < S_TILES; ++n)
                    mx = fmaxf(mx, fmaxf(s_acc[n][2 * r], s_acc[n][2 * r + 1]));
                mx = quad_max(mx);
                m_ref[r] = mx == FROST_NEG_INF ? 0.0f : mx;
                const float alpha = frost_exp2_approx(m_run[r] - m_ref[r]);
                m_run[r] = mx;
                l_run[r] *= alpha;
#pragma unroll
                for (int n = 0; n < O_TILES; ++n) {
                    o_acc[n][2 * r] *= alpha;
                    o_acc[n][2 * r + 1] *= alpha;
                }
            }
#pragma unroll
            for (int n = 0; n < S_TILES; ++n) {
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    s_acc[n][e] = frost_exp2_approx(s_acc[n][e] - m_ref[e / 2]);
                    l_run[e / 2] += s_acc[n][e];
                }
            }

            /* O += P V: P's C fragments of n-tiles (2s, 2s+1) are the A fragment of k-step
             * s (a[0] = row g keys 2t.., a[1] = row g+8, a[2] / a[3] the next 8 keys). */
#pragma unroll
            for (int s = 0; s < PV_STEPS; ++s) {
                uint32_t pa[4];
                pa[0] = FROST_PACK2(s_acc[2 * s][0], s_acc[2 * s][1]);
                pa[1] = FROST_PACK2(s_acc[2 * s][2], s_acc[2 * s][3]);
                pa[2] = FROST_PACK2(s_acc[2 * s + 1][0], s_acc[2 * s + 1][1]);
                pa[3] = FROST_PACK2(s_acc[2 * s + 1][2], s_acc[2 * s + 1][3]);
#pragma unroll
                for (int n = 0; n < O_TILES / 2; ++n) {
                    uint32_t vb[4];
                    frost_ldmatrix_x4_trans(vb, v_tile + s * 16 * V_STRIDE + n * 16 + v_lane_off);
                    frost_mma_16816(o_acc[2 * n], pa, vb);
                    frost_mma_16816(o_acc[2 * n + 1], pa, vb + 2);
                }
            }

            /* The next stage has landed and everyone is done with this one. */
            frost_cp_async_wait(0);
            __syncthreads();
        }
    }

    /* ---- epilogue: normalise, stage O in shared memory (this warp's own Q rows), store */
    float inv_l[2], lse[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const float l = quad_sum(l_run[r]);
        const int valid = (r == 0 ? row0 : row1) < geo.len_q && l > 0.0f;
        inv_l[r] = valid ? 1.0f / l : 0.0f;
        lse[r] = valid ? (m_run[r] + log2f(l)) * FROST_LN2 : FROST_NEG_INF;
    }
    __syncwarp();
    uint16_t *o_stage = q_tile + warp * 16 * Q_STRIDE;
#pragma unroll
    for (int n = 0; n < O_TILES; ++n) {
        const uint32_t lo_pair = inv_l[0] == 0.0f ? 0u : FROST_PACK2(o_acc[n][0] * inv_l[0], o_acc[n][1] * inv_l[0]);
        const uint32_t hi_pair = inv_l[1] == 0.0f ? 0u : FROST_PACK2(o_acc[n][2] * inv_l[1], o_acc[n][3] * inv_l[1]);
        *(uint32_t *)(o_stage + g * Q_STRIDE + 8 * n + 2 * t) = lo_pair;
        *(uint32_t *)(o_stage + (g + 8) * Q_STRIDE + 8 * n + 2 * t) = hi_pair;
    }
    __syncwarp();

    uint16_t *o_dst = (uint16_t *)p.o + geo.o;
#pragma unroll
    for (int it = 0; it < (16 * (D_V / 8) + 31) / 32; ++it) {
        const int c = it * 32 + lane;
        const int r = c / (D_V / 8), col = (c % (D_V / 8)) * 8;
        const int i = m0 + warp * 16 + r;
        if (r < 16 && col < p.d_v && i < geo.rows_o) {
            uint32_t w[4];
            frost_ld_shared_16(w, o_stage + r * Q_STRIDE + col);
            uint16_t *to = o_dst + (int64_t)i * p.o_stride[2] + col;
            if (vec) {
                frost_st_global_16(to, w);
            } else {
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    to[2 * e] = (uint16_t)(w[e] & 0xffffu);
                    to[2 * e + 1] = (uint16_t)(w[e] >> 16);
                }
            }
        }
    }

    if (p.lse && t == 0) {
        const int64_t at = (int64_t)b * p.lse_stride[0] + (int64_t)h * p.lse_stride[1];
        if (row0 < p.s_q)
            p.lse[at + (int64_t)row0 * p.lse_stride[2]] = lse[0];
        if (row1 < p.s_q)
            p.lse[at + (int64_t)row1 * p.lse_stride[2]] = lse[1];
    }
}
