/*
 * sdpa_bwd.cu: flash-attention backward on tensor cores (mma.sync m16n8k16, f16/bf16
 * operands, f32 accumulation) for sm_80 and later.  Compiled by NVRTC at run time; the
 * configuration comes from -D defines chosen by src/ops/sdpa/sdpa_cuda_bwd.c.
 *
 * Legend: b batch, h query head, hk = h / G its key-value head, i a query row and j a key
 * row (both local to their batch), d_qk / d_v head dims.  Per (b, h) with the saved
 * natural-log LSE the backward identities are (shared/specs/ops.md section 0):
 *     P = exp(scale*q.k + bias - lse)   delta_i = sum_d dO_id O_id   dP = dO V^T
 *     dS = P o (dP - delta)   dQ = scale dS K   dK = scale dS^T Q   dV = P^T dO
 *     dBias = dS (summed over broadcast dims)   dSink_h = -sum_{b,i} exp(sink_h - lse) delta
 *
 * Five kernels, launched in this order, none using atomics, so every result is bitwise
 * repeatable by construction and the workspace is linear (8 bytes per query row):
 *   sdpa_bwd_preprocess   delta and lse*log2(e) per row into the workspace.  An empty
 *                         row (lse = -inf) and a padded row are stored as +inf, so that
 *                         exp2(x - lse2) is exactly 0 there and exp(s - (-inf)) is never
 *                         formed.
 *   sdpa_bwd_dsink        one block per head; fixed-order sums over (b, i).
 *   sdpa_bwd_dkdv         one block per (b, hk, key tile of KV_BN keys).  It walks the G
 *                         query heads of its KV head and the query tiles of the band,
 *                         recomputes S^T = K Q^T and dP^T = V dO^T, stores P^T and dS^T in
 *                         shared memory and accumulates dV += P^T dO, dK += dS^T Q in
 *                         registers; dK/dV are written once (the GQA sum never leaves the
 *                         block).
 *   sdpa_bwd_dq           one block per (b, h, query tile of Q_BM rows), one warp per 16
 *                         rows.  It walks the key tiles of the band, recomputes S and dP,
 *                         and accumulates dQ += dS K with dS straight from the
 *                         accumulators (C fragments re-used as A fragments).  When dBias
 *                         has no broadcast dim it also writes dBias = dS (and zeros
 *                         outside the band).
 *   sdpa_bwd_dbias        only for a dBias broadcast over b and/or h: one block per
 *                         (bias b, bias h, query tile, key tile) loops over the reduced
 *                         (b, h) in a fixed order, recomputing dS, and writes the sum once.
 * Recomputing S in both the dK/dV and the dQ kernel costs more FLOPs than an atomic dQ
 * but needs no quadratic workspace; an atomic path can be added as another entry point.
 *
 * Shared tiles hold 16-bit elements row-major with 8 elements of padding per row (rows
 * then start on distinct 16-byte bank groups for ldmatrix); head dims are padded to a
 * multiple of 16 with zeros.  Rows past the actual lengths are zero-filled, so NaN
 * padding in user buffers never reaches a product.  Masks are tested per element through
 * the band [lmin, rmax] of the diagonal offset j - i (see band_make).
 *
 * sdpa_bwd_common.cuh holds what the five kernels share: the defines and their defaults,
 * the parameter block, and the addressing, band and bias helpers.
 */
#include "sdpa_bwd_common.cuh"

/* ------------------------------------------------------------------------------------ */
/* Preprocess: delta and lse2 per (b, h, i).  Grid (ceil(s_q / 32), h_q, b), 128 threads. */
/* ------------------------------------------------------------------------------------ */
extern "C" __global__ void __launch_bounds__(128) sdpa_bwd_preprocess(PARAMS p)
{
    const int b = blockIdx.z, h = blockIdx.y, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int len_q = length_q(&p, b);
    const int64_t ws = ws_row(&p, b, h);
    const int64_t o_base = batch_base(&p, OPD_O, b) + h * p.str[OPD_O][1];
    const int64_t do_base = batch_base(&p, OPD_DO, b) + h * p.str[OPD_DO][1];
    for (int r = 0; r < 8; r++) {
        const int i = blockIdx.x * 32 + warp * 8 + r;
        if (i >= p.s_q)
            break;
        float delta = 0.f, lse2 = FROST_INF;
        if (i < len_q) {
            const uint16_t *o = p.o + o_base + i * p.str[OPD_O][2];
            const uint16_t *d_o = p.d_o + do_base + i * p.str[OPD_DO][2];
            for (int c = lane; c < p.dim_v; c += 32) {
                frost_io x, y;
                x.bits = o[c * p.str[OPD_O][3]];
                y.bits = d_o[c * p.str[OPD_DO][3]];
                delta += frost_to_float(x) * frost_to_float(y);
            }
            delta = frost_warp_sum(delta);
            const float lse = p.stats[b * p.str_stats[0] + h * p.str_stats[1] + i * p.str_stats[2]];
            lse2 = lse == FROST_NEG_INF ? FROST_INF : lse * FROST_LOG2E;
        }
        if (lane == 0) {
            p.ws_delta[ws + i] = delta;
            p.ws_lse2[ws + i] = lse2;
        }
    }
}

/* ------------------------------------------------------------------------------------ */
/* dSink[h] = -sum_{b, i < len_q} exp(sink_h - lse) delta.  Grid h_q, 256 threads; every  */
/* thread sums a fixed set of rows in a fixed order, then a fixed tree: deterministic.    */
/* ------------------------------------------------------------------------------------ */
extern "C" __global__ void __launch_bounds__(256) sdpa_bwd_dsink(PARAMS p)
{
    __shared__ float partial[8];
    const int h = blockIdx.x;
    const float sink2 = p.sink[h * p.str_sink] * FROST_LOG2E;
    float acc = 0.f;
    for (int b = 0; b < p.b; b++) {
        const int len_q = length_q(&p, b);
        const int64_t ws = ws_row(&p, b, h);
        for (int i = threadIdx.x; i < len_q; i += 256)
            acc += frost_exp2_approx(sink2 - p.ws_lse2[ws + i]) * p.ws_delta[ws + i];
    }
    acc = frost_warp_sum(acc);
    if ((threadIdx.x & 31) == 0)
        partial[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        float total = 0.f;
        for (int w = 0; w < 8; w++)
            total += partial[w];
        p.d_sink[h * p.str_dsink] = 0.f - total; /* +0, not -0, when nothing contributes */
    }
}


/* ------------------------------------------------------------------------------------ */
/* dK, dV.  Grid (ceil(s_kv / KV_BN), h_kv, b), KV_NW warps.  Phase 1 tiles S^T and dP^T  */
/* [KV_BN keys x KV_BM queries] as KV_BN/16 key strips x KV_WQ query strips; phase 2      */
/* tiles dK and dV [KV_BN x d] as the same key strips x KV_WQ column strips, so a warp    */
/* keeps its 16 key rows in both phases.                                                  */
/* ------------------------------------------------------------------------------------ */
#define KV_NT (KV_NW * 32)
#define KV_WQ (KV_NW / (KV_BN / 16))
#define KV_QSPAN (KV_BM / KV_WQ)
#define KV_NQT (KV_QSPAN / 8)
#define KV_NKT (DQK_P / KV_WQ / 8)
#define KV_NVT (DV_P / KV_WQ / 8)
#define LD_P (KV_BM + 8)
/* Blocks per SM that ptxas must allow for: two while both head dims fit in 64 (2 x 8 warps
 * at <= 128 registers; shared memory allows it), else one, which lets the dK/dV
 * accumulators use up to 255 registers without spilling. */
#define KV_MIN_BLOCKS (DQK_P + DV_P <= 128 ? 2 : 1)
static_assert(KV_NW % (KV_BN / 16) == 0 && (KV_WQ == 1 || KV_WQ == 2), "KV_NW must be KV_BN/16 or twice that");
static_assert(KV_QSPAN % 16 == 0, "each warp's query strip must be a multiple of 16");

/* Shared memory, in 16-bit elements: K, V, STAGES x (Q, dO), P^T, dS^T, then floats
 * lse2[STAGES][BM] and delta[STAGES][BM].  sdpa_cuda_bwd.c computes the same size. */
#define KV_SMEM_K 0
#define KV_SMEM_V (KV_SMEM_K + KV_BN * LD_QK)
#define KV_SMEM_Q (KV_SMEM_V + KV_BN * LD_V)
#define KV_SMEM_DO (KV_SMEM_Q + KV_STAGES * KV_BM * LD_QK)
#define KV_SMEM_PT (KV_SMEM_DO + KV_STAGES * KV_BM * LD_V)
#define KV_SMEM_DST (KV_SMEM_PT + KV_BN * LD_P)
#define KV_SMEM_ROWS (KV_SMEM_DST + KV_BN * LD_P)

/* Starts the copies of one query tile (Q, dO, lse2, delta) into a stage and commits. */
FROST_DEVICE void kv_load_queries(const sdpa_bwd_params *p, uint16_t *smem, int stage, int b, int h, int m0,
                                  const band *m)
{
    const int valid = imin(KV_BM, m->len_q - m0);
    const int64_t *sq = p->str[OPD_Q], *sdo = p->str[OPD_DO];
    frost_tile_load_b16(smem + KV_SMEM_Q + stage * KV_BM * LD_QK, LD_QK,
                        p->q + batch_base(p, OPD_Q, b) + h * sq[1] + m0 * sq[2], sq[2], sq[3], KV_BM, DQK_P,
                        valid, p->dim_qk, (p->vec >> OPD_Q) & 1, threadIdx.x, KV_NT);
    frost_tile_load_b16(smem + KV_SMEM_DO + stage * KV_BM * LD_V, LD_V,
                        p->d_o + batch_base(p, OPD_DO, b) + h * sdo[1] + m0 * sdo[2], sdo[2], sdo[3], KV_BM, DV_P,
                        valid, p->dim_v, (p->vec >> OPD_DO) & 1, threadIdx.x, KV_NT);
    float *rows = (float *)(smem + KV_SMEM_ROWS);
    const int64_t ws = ws_row(p, b, h);
    for (int r = threadIdx.x; r < KV_BM; r += KV_NT) {
        const int i = m0 + r;
        rows[stage * KV_BM + r] = i < m->len_q ? p->ws_lse2[ws + i] : FROST_INF;
        rows[(KV_STAGES + stage) * KV_BM + r] = i < m->len_q ? p->ws_delta[ws + i] : 0.f;
    }
    frost_cp_async_commit();
}

extern "C" __global__ void __launch_bounds__(KV_NT, KV_MIN_BLOCKS) sdpa_bwd_dkdv(PARAMS p)
{
    extern __shared__ __align__(16) uint16_t smem[];
    const int b = blockIdx.z, hk = blockIdx.y, n0 = blockIdx.x * KV_BN;
    const int rows_dk = rows_owned(&p, OPD_DK, b, p.s_kv), rows_dv = rows_owned(&p, OPD_DV, b, p.s_kv);
    if (n0 >= rows_dk && n0 >= rows_dv)
        return;
    const band m = band_make(&p, b);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int kr0 = (warp / KV_WQ) * 16, part = warp % KV_WQ;
    const int qc0 = part * KV_QSPAN, dk0 = part * (DQK_P / KV_WQ), dv0 = part * (DV_P / KV_WQ);

    /* Query tiles that meet keys [n0, n1): lmin < j - i <= rmax. */
    int mt_begin = 0, n_mt = 0;
    if (n0 < m.len_kv) {
        const int n1 = imin(n0 + KV_BN, m.len_kv);
        const int i_begin = imax(0, n0 - m.rmax), i_end = imin(m.len_q, n1 - 1 - m.lmin);
        if (i_begin < i_end) {
            mt_begin = i_begin / KV_BM;
            n_mt = (i_end + KV_BM - 1) / KV_BM - mt_begin;
        }
    }
    const int n_iter = n_mt * p.group;

    float acc_dk[KV_NKT][4], acc_dv[KV_NVT][4];
#pragma unroll
    for (int n = 0; n < KV_NKT; n++)
        acc_dk[n][0] = acc_dk[n][1] = acc_dk[n][2] = acc_dk[n][3] = 0.f;
#pragma unroll
    for (int n = 0; n < KV_NVT; n++)
        acc_dv[n][0] = acc_dv[n][1] = acc_dv[n][2] = acc_dv[n][3] = 0.f;

    const uint16_t *sK = smem + KV_SMEM_K, *sV = smem + KV_SMEM_V;
    uint16_t *sPt = smem + KV_SMEM_PT, *sdSt = smem + KV_SMEM_DST;
    if (n_iter > 0) {
        const int valid = imin(KV_BN, m.len_kv - n0);
        const int64_t *sk = p.str[OPD_K], *sv = p.str[OPD_V];
        frost_tile_load_b16(smem + KV_SMEM_K, LD_QK, p.k + batch_base(&p, OPD_K, b) + hk * sk[1] + n0 * sk[2], sk[2],
                            sk[3], KV_BN, DQK_P, valid, p.dim_qk, (p.vec >> OPD_K) & 1, threadIdx.x, KV_NT);
        frost_tile_load_b16(smem + KV_SMEM_V, LD_V, p.v + batch_base(&p, OPD_V, b) + hk * sv[1] + n0 * sv[2], sv[2],
                            sv[3], KV_BN, DV_P, valid, p.dim_v, (p.vec >> OPD_V) & 1, threadIdx.x, KV_NT);
        kv_load_queries(&p, smem, 0, b, hk * p.group, mt_begin * KV_BM, &m);
    }

    for (int it = 0; it < n_iter; it++) {
        const int stage = KV_STAGES == 2 ? (it & 1) : 0;
        const int m0 = (mt_begin + it % n_mt) * KV_BM;
        if (KV_STAGES == 2 && it + 1 < n_iter) {
            kv_load_queries(&p, smem, stage ^ 1, b, hk * p.group + (it + 1) / n_mt,
                            (mt_begin + (it + 1) % n_mt) * KV_BM, &m);
            frost_cp_async_wait(1);
        } else {
            frost_cp_async_wait(0);
        }
        __syncthreads();
        const uint16_t *sQ = smem + KV_SMEM_Q + stage * KV_BM * LD_QK;
        const uint16_t *sdO = smem + KV_SMEM_DO + stage * KV_BM * LD_V;
        const float *lse2 = (const float *)(smem + KV_SMEM_ROWS) + stage * KV_BM;
        const float *delta = (const float *)(smem + KV_SMEM_ROWS) + (KV_STAGES + stage) * KV_BM;

        /* Phase 1 for 16 keys x KV_QSPAN queries: S^T = K Q^T, then P^T in place (before
         * dP^T is live, which keeps the peak register count down), then dP^T = V dO^T and
         * dS^T = P^T o (dP^T - delta).  P^T and dS^T (unscaled) go to shared memory in the
         * I/O dtype. */
        float s[KV_NQT][4], dp[KV_NQT][4];
#if BIAS
        const void *bias = bias_at(&p, b, hk * p.group + it / n_mt);
        const float inv_scale = 1.f / p.scale;
#endif
#pragma unroll
        for (int n = 0; n < KV_NQT; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                dp[n][e] = 0.f;
#if BIAS
                s[n][e] = bias_over_scale(bias, p.str_bias, m0 + qc0 + n * 8 + 2 * t + (e & 1),
                                          n0 + kr0 + g + 8 * (e >> 1), &m, inv_scale);
#else
                s[n][e] = 0.f;
#endif
            }
#pragma unroll
        for (int kk = 0; kk < DQK_P / 16; kk++) {
            uint32_t a[4], b0[2], b1[2];
            frost_frag_a(a, sK, LD_QK, kr0, kk * 16);
#pragma unroll
            for (int jj = 0; jj < KV_NQT / 2; jj++) {
                frost_frag_b_nk_x2(b0, b1, sQ, LD_QK, qc0 + jj * 16, kk * 16);
                frost_mma_16816(s[2 * jj], a, b0);
                frost_mma_16816(s[2 * jj + 1], a, b1);
            }
        }
#pragma unroll
        for (int n = 0; n < KV_NQT; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int j = n0 + kr0 + g + 8 * (e >> 1), qc = qc0 + n * 8 + 2 * t + (e & 1), i = m0 + qc;
                s[n][e] = band_has(&m, i, j) ? frost_exp2_approx(s[n][e] * p.scale_log2 - lse2[qc]) : 0.f;
            }
#pragma unroll
        for (int kk = 0; kk < DV_P / 16; kk++) {
            uint32_t a[4], b0[2], b1[2];
            frost_frag_a(a, sV, LD_V, kr0, kk * 16);
#pragma unroll
            for (int jj = 0; jj < KV_NQT / 2; jj++) {
                frost_frag_b_nk_x2(b0, b1, sdO, LD_V, qc0 + jj * 16, kk * 16);
                frost_mma_16816(dp[2 * jj], a, b0);
                frost_mma_16816(dp[2 * jj + 1], a, b1);
            }
        }
#pragma unroll
        for (int n = 0; n < KV_NQT; n++)
#pragma unroll
            for (int half = 0; half < 2; half++) {
                const int kr = kr0 + g + half * 8, qc = qc0 + n * 8 + 2 * t;
                const float *pv = &s[n][2 * half], *dpv = &dp[n][2 * half];
                *(uint32_t *)(sPt + kr * LD_P + qc) = FROST_PACK2(pv[0], pv[1]);
                *(uint32_t *)(sdSt + kr * LD_P + qc) =
                    FROST_PACK2(pv[0] * (dpv[0] - delta[qc]), pv[1] * (dpv[1] - delta[qc + 1]));
            }
        __syncthreads();

        /* Phase 2: dV += P^T dO and dK += dS^T Q over the tile's KV_BM queries. */
#pragma unroll
        for (int kk = 0; kk < KV_BM / 16; kk++) {
            uint32_t a[4], b0[2], b1[2];
            frost_frag_a(a, sPt, LD_P, kr0, kk * 16);
#pragma unroll
            for (int jj = 0; jj < KV_NVT / 2; jj++) {
                frost_frag_b_kn_x2(b0, b1, sdO, LD_V, kk * 16, dv0 + jj * 16);
                frost_mma_16816(acc_dv[2 * jj], a, b0);
                frost_mma_16816(acc_dv[2 * jj + 1], a, b1);
            }
            if (KV_NVT & 1) {
                frost_frag_b_kn(b0, sdO, LD_V, kk * 16, dv0 + (KV_NVT - 1) * 8);
                frost_mma_16816(acc_dv[KV_NVT - 1], a, b0);
            }
            frost_frag_a(a, sdSt, LD_P, kr0, kk * 16);
#pragma unroll
            for (int jj = 0; jj < KV_NKT / 2; jj++) {
                frost_frag_b_kn_x2(b0, b1, sQ, LD_QK, kk * 16, dk0 + jj * 16);
                frost_mma_16816(acc_dk[2 * jj], a, b0);
                frost_mma_16816(acc_dk[2 * jj + 1], a, b1);
            }
            if (KV_NKT & 1) {
                frost_frag_b_kn(b0, sQ, LD_QK, kk * 16, dk0 + (KV_NKT - 1) * 8);
                frost_mma_16816(acc_dk[KV_NKT - 1], a, b0);
            }
        }
        __syncthreads();
        if (KV_STAGES == 1 && it + 1 < n_iter)
            kv_load_queries(&p, smem, 0, b, hk * p.group + (it + 1) / n_mt, (mt_begin + (it + 1) % n_mt) * KV_BM, &m);
    }

    /* Write once; keys past len_kv (padding) get exact zeros. */
    const int64_t *sdk = p.str[OPD_DK], *sdv = p.str[OPD_DV];
    const int64_t dk_base = batch_base(&p, OPD_DK, b) + hk * sdk[1], dv_base = batch_base(&p, OPD_DV, b) + hk * sdv[1];
#pragma unroll
    for (int half = 0; half < 2; half++) {
        const int j = n0 + kr0 + g + half * 8;
        const bool live = j < m.len_kv;
#pragma unroll
        for (int n = 0; n < KV_NVT; n++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int c = dv0 + n * 8 + 2 * t + e;
                if (j < rows_dv && c < p.dim_v)
                    store_io(p.d_v, dv_base + j * sdv[2] + c * sdv[3], live ? acc_dv[n][half * 2 + e] : 0.f);
            }
#pragma unroll
        for (int n = 0; n < KV_NKT; n++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int c = dk0 + n * 8 + 2 * t + e;
                if (j < rows_dk && c < p.dim_qk)
                    store_io(p.d_k, dk_base + j * sdk[2] + c * sdk[3], live ? p.scale * acc_dk[n][half * 2 + e] : 0.f);
            }
    }
}

#include "sdpa_bwd_dq.cuh"

/* Grid (ceil(s_q / Q_BM), h_q, b). */
extern "C" __global__ void __launch_bounds__(Q_NT, 2) sdpa_bwd_dq(PARAMS p)
{
    extern __shared__ __align__(16) uint16_t smem[];
    const int b = blockIdx.z, h = blockIdx.y, hk = h / p.group, m0 = blockIdx.x * Q_BM;
    const int rows_dq = rows_owned(&p, OPD_DQ, b, p.s_q);
    const bool dbias = p.d_bias && !p.dbias_reduce_b && !p.dbias_reduce_h;
    if (m0 >= rows_dq && !dbias)
        return;
    const band m = band_make(&p, b);
    const int t = threadIdx.x & 3;

    /* Key tiles that meet rows [m0, m1). */
    int nt_begin = 0, nt_end = 0;
    if (m0 < m.len_q) {
        const int m1 = imin(m0 + Q_BM, m.len_q);
        const int j_begin = imax(0, m0 + m.lmin + 1), j_end = imin(m.len_kv, m1 + m.rmax);
        if (j_begin < j_end) {
            nt_begin = j_begin / Q_BN;
            nt_end = (j_end + Q_BN - 1) / Q_BN;
        }
    }
    qrows r;
    qrows_load(&r, &p, b, h, m0, &m);
    const void *bias = q_bias(&p, b, h);
    float *dbias_bh = p.d_bias + b * p.str_dbias[0] + h * p.str_dbias[1];
    float dq[Q_NDT][4];
#pragma unroll
    for (int n = 0; n < Q_NDT; n++)
        dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.f;

    if (nt_begin < nt_end) {
        q_load_queries(&p, smem, b, h, m0, &m);
        q_load_keys(&p, smem, 0, b, hk, nt_begin * Q_BN, &m);
        frost_cp_async_commit();
    }
    for (int nt = nt_begin; nt < nt_end; nt++) {
        const int stage = Q_STAGES == 2 ? ((nt - nt_begin) & 1) : 0;
        if (Q_STAGES == 2 && nt + 1 < nt_end) {
            q_load_keys(&p, smem, stage ^ 1, b, hk, (nt + 1) * Q_BN, &m);
            frost_cp_async_commit();
            frost_cp_async_wait(1);
        } else {
            frost_cp_async_wait(0);
        }
        __syncthreads();
        float ds[Q_NKT][4];
        q_tile_ds(ds, &p, smem, stage, &r, nt * Q_BN, &m, bias);
        if (dbias) {
#pragma unroll
            for (int n = 0; n < Q_NKT; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int i = r.i[e >> 1], j = nt * Q_BN + n * 8 + 2 * t + (e & 1);
                    if (i < p.s_q && j < p.s_kv)
                        dbias_bh[i * p.str_dbias[2] + j * p.str_dbias[3]] = ds[n][e];
                }
        }
        const uint16_t *sK = smem + Q_SMEM_K + stage * Q_BN * LD_QK;
#pragma unroll
        for (int kk = 0; kk < Q_BN / 16; kk++) {
            uint32_t a[4], b0[2], b1[2];
            frost_frag_c_to_a(a, ds[2 * kk], ds[2 * kk + 1]);
#pragma unroll
            for (int jj = 0; jj < Q_NDT / 2; jj++) {
                frost_frag_b_kn_x2(b0, b1, sK, LD_QK, kk * 16, jj * 16);
                frost_mma_16816(dq[2 * jj], a, b0);
                frost_mma_16816(dq[2 * jj + 1], a, b1);
            }
        }
        __syncthreads();
        if (Q_STAGES == 1 && nt + 1 < nt_end) {
            q_load_keys(&p, smem, 0, b, hk, (nt + 1) * Q_BN, &m);
            frost_cp_async_commit();
        }
    }

    if (dbias) { /* dS is 0 outside the visited key tiles */
        const int lo = nt_begin * Q_BN, hi = nt_end * Q_BN;
        for (int i = m0; i < imin(m0 + Q_BM, p.s_q); i++)
            for (int j = threadIdx.x; j < p.s_kv; j += Q_NT)
                if (j < lo || j >= hi)
                    dbias_bh[i * p.str_dbias[2] + j * p.str_dbias[3]] = 0.f;
    }
    const int64_t *sdq = p.str[OPD_DQ];
    const int64_t dq_base = batch_base(&p, OPD_DQ, b) + h * sdq[1];
#pragma unroll
    for (int n = 0; n < Q_NDT; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int i = r.i[e >> 1], c = n * 8 + 2 * t + (e & 1);
            if (i < rows_dq && c < p.dim_qk)
                store_io(p.d_q, dq_base + i * sdq[2] + c * sdq[3], i < m.len_q ? p.scale * dq[n][e] : 0.f);
        }
}

/* dBias broadcast over b and/or h.  Grid (ceil(s_kv / Q_BN), ceil(s_q / Q_BM), groups):
 * group z = (bias b) * (h groups) + (bias h).  Sums dS over the reduced (b, h) in order. */
extern "C" __global__ void __launch_bounds__(Q_NT, 2) sdpa_bwd_dbias(PARAMS p)
{
#if BIAS /* d_bias needs a bias: without one the entry is never launched, so it stays empty */
    extern __shared__ __align__(16) uint16_t smem[];
    const int h_groups = p.dbias_reduce_h ? 1 : p.h_q;
    const int bb = blockIdx.z / h_groups, bh = blockIdx.z % h_groups;
    const int n0 = blockIdx.x * Q_BN, m0 = blockIdx.y * Q_BM, t = threadIdx.x & 3;
    float acc[Q_NKT][4];
#pragma unroll
    for (int n = 0; n < Q_NKT; n++)
        acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;
    qrows r;
    const int nb = p.dbias_reduce_b ? p.b : 1, nh = p.dbias_reduce_h ? p.h_q : 1;
    for (int bi = 0; bi < nb; bi++) {
        const int b = p.dbias_reduce_b ? bi : bb;
        const band m = band_make(&p, b);
        const int m1 = imin(m0 + Q_BM, m.len_q), n1 = imin(n0 + Q_BN, m.len_kv);
        const int j_begin = imax(0, m0 + m.lmin + 1), j_end = imin(m.len_kv, m1 + m.rmax);
        if (m0 >= m1 || n0 >= n1 || j_end <= n0 || j_begin >= n1)
            continue; /* uniform over the block */
        for (int hi = 0; hi < nh; hi++) {
            const int h = p.dbias_reduce_h ? hi : bh;
            q_load_queries(&p, smem, b, h, m0, &m);
            q_load_keys(&p, smem, 0, b, h / p.group, n0, &m);
            frost_cp_async_commit();
            frost_cp_async_wait(0);
            __syncthreads();
            qrows_load(&r, &p, b, h, m0, &m);
            float ds[Q_NKT][4];
            q_tile_ds(ds, &p, smem, 0, &r, n0, &m, q_bias(&p, b, h));
#pragma unroll
            for (int n = 0; n < Q_NKT; n++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    acc[n][e] += ds[n][e];
            __syncthreads();
        }
    }
    float *dbias = p.d_bias + bb * p.str_dbias[0] + bh * p.str_dbias[1];
    const int i0 = m0 + (threadIdx.x >> 5) * 16 + ((threadIdx.x & 31) >> 2);
#pragma unroll
    for (int n = 0; n < Q_NKT; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int i = i0 + 8 * (e >> 1), j = n0 + n * 8 + 2 * t + (e & 1);
            if (i < p.s_q && j < p.s_kv)
                dbias[i * p.str_dbias[2] + j * p.str_dbias[3]] = acc[n][e];
        }
#else
    (void)p;
#endif
}
