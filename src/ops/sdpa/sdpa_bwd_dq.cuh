/*
 * sdpa_bwd_dq.cuh — the dQ / dBias kernels' tile geometry and helpers (rows a thread holds,
 * the loads of the query block and the key / value stages, the dS tile), included by
 * sdpa_bwd.cu after sdpa_bwd_common.cuh: the entry points stay in the one source file so
 * every backward entry of a key shares its cubin.
 */
#ifndef FROST_SDPA_BWD_DQ_CUH
#define FROST_SDPA_BWD_DQ_CUH

#include "sdpa_bwd_common.cuh"

/* ------------------------------------------------------------------------------------ */
/* dQ (and dBias).  Q_NW warps, one per 16 query rows; key tiles of Q_BN.                 */
/* Shared memory (16-bit elements): Q [Q_BM], dO [Q_BM], STAGES x (K, V) [Q_BN].          */
/* ------------------------------------------------------------------------------------ */
#define Q_NT (Q_NW * 32)
#define Q_BM (Q_NW * 16)
#define Q_NKT (Q_BN / 8)
#define Q_NDT (DQK_P / 8)
#define Q_SMEM_DO (Q_BM * LD_QK)
#define Q_SMEM_K (Q_SMEM_DO + Q_BM * LD_V)
#define Q_SMEM_V (Q_SMEM_K + Q_STAGES * Q_BN * LD_QK)
static_assert(Q_BN % 16 == 0, "Q_BN must be a multiple of 16");

/* The two rows (i0 = m0 + 16 warp + g and i0 + 8) a thread holds in C fragments. */
typedef struct qrows {
    int i[2];
    float lse2[2], delta[2];
} qrows;

FROST_DEVICE void qrows_load(qrows *r, const sdpa_bwd_params *p, int b, int h, int m0, const band *m)
{
    const int64_t ws = ws_row(p, b, h);
#pragma unroll
    for (int e = 0; e < 2; e++) {
        const int i = m0 + (threadIdx.x >> 5) * 16 + ((threadIdx.x & 31) >> 2) + 8 * e;
        r->i[e] = i;
        r->lse2[e] = i < m->len_q ? p->ws_lse2[ws + i] : FROST_INF;
        r->delta[e] = i < m->len_q ? p->ws_delta[ws + i] : 0.f;
    }
}

/* Starts the copies of the Q and dO rows [m0, m0 + Q_BM) of (b, h); no commit. */
FROST_DEVICE void q_load_queries(const sdpa_bwd_params *p, uint16_t *smem, int b, int h, int m0, const band *m)
{
    const int valid = imin(Q_BM, m->len_q - m0);
    const int64_t *sq = p->str[OPD_Q], *sdo = p->str[OPD_DO];
    frost_tile_load_b16(smem, LD_QK, p->q + batch_base(p, OPD_Q, b) + h * sq[1] + m0 * sq[2], sq[2], sq[3], Q_BM,
                        DQK_P, valid, p->dim_qk, (p->vec >> OPD_Q) & 1, threadIdx.x, Q_NT);
    frost_tile_load_b16(smem + Q_SMEM_DO, LD_V, p->d_o + batch_base(p, OPD_DO, b) + h * sdo[1] + m0 * sdo[2], sdo[2],
                        sdo[3], Q_BM, DV_P, valid, p->dim_v, (p->vec >> OPD_DO) & 1, threadIdx.x, Q_NT);
}

/* Starts the copies of the K and V rows [n0, n0 + Q_BN) of (b, hk) into a stage; no commit. */
FROST_DEVICE void q_load_keys(const sdpa_bwd_params *p, uint16_t *smem, int stage, int b, int hk, int n0,
                              const band *m)
{
    const int valid = imin(Q_BN, m->len_kv - n0);
    const int64_t *sk = p->str[OPD_K], *sv = p->str[OPD_V];
    frost_tile_load_b16(smem + Q_SMEM_K + stage * Q_BN * LD_QK, LD_QK,
                        p->k + batch_base(p, OPD_K, b) + hk * sk[1] + n0 * sk[2], sk[2], sk[3], Q_BN, DQK_P, valid,
                        p->dim_qk, (p->vec >> OPD_K) & 1, threadIdx.x, Q_NT);
    frost_tile_load_b16(smem + Q_SMEM_V + stage * Q_BN * LD_V, LD_V,
                        p->v + batch_base(p, OPD_V, b) + hk * sv[1] + n0 * sv[2], sv[2], sv[3], Q_BN, DV_P, valid, p->dim_v,
                        (p->vec >> OPD_V) & 1, threadIdx.x, Q_NT);
}

/* dS (f32, C-fragment order) of this warp's 16 rows against keys [n0, n0 + Q_BN): S (the
 * bias preloaded, see bias_over_scale), then P in place (before dP is live: lower peak
 * register count), then dP and dS. */
FROST_DEVICE void q_tile_ds(float ds[Q_NKT][4], const sdpa_bwd_params *p, const uint16_t *smem, int stage,
                            const qrows *r, int n0, const band *m, const void *bias)
{
    const int row0 = (threadIdx.x >> 5) * 16, t = threadIdx.x & 3;
    const uint16_t *sQ = smem, *sdO = smem + Q_SMEM_DO;
    const uint16_t *sK = smem + Q_SMEM_K + stage * Q_BN * LD_QK, *sV = smem + Q_SMEM_V + stage * Q_BN * LD_V;
    float dp[Q_NKT][4];
#if BIAS
    const float inv_scale = 1.f / p->scale;
#endif
#pragma unroll
    for (int n = 0; n < Q_NKT; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            dp[n][e] = 0.f;
#if BIAS
            ds[n][e] = bias_over_scale(bias, p->str_bias, r->i[e >> 1], n0 + n * 8 + 2 * t + (e & 1), m, inv_scale);
#else
            ds[n][e] = 0.f;
#endif
        }
    (void)bias;
#pragma unroll
    for (int kk = 0; kk < DQK_P / 16; kk++) {
        uint32_t a[4], b0[2], b1[2];
        frost_frag_a(a, sQ, LD_QK, row0, kk * 16);
#pragma unroll
        for (int jj = 0; jj < Q_NKT / 2; jj++) {
            frost_frag_b_nk_x2(b0, b1, sK, LD_QK, jj * 16, kk * 16);
            frost_mma_16816(ds[2 * jj], a, b0);
            frost_mma_16816(ds[2 * jj + 1], a, b1);
        }
    }
#pragma unroll
    for (int n = 0; n < Q_NKT; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int i = r->i[e >> 1], j = n0 + n * 8 + 2 * t + (e & 1);
            ds[n][e] = band_has(m, i, j) ? frost_exp2_approx(ds[n][e] * p->scale_log2 - r->lse2[e >> 1]) : 0.f;
        }
#pragma unroll
    for (int kk = 0; kk < DV_P / 16; kk++) {
        uint32_t a[4], b0[2], b1[2];
        frost_frag_a(a, sdO, LD_V, row0, kk * 16);
#pragma unroll
        for (int jj = 0; jj < Q_NKT / 2; jj++) {
            frost_frag_b_nk_x2(b0, b1, sV, LD_V, jj * 16, kk * 16);
            frost_mma_16816(dp[2 * jj], a, b0);
            frost_mma_16816(dp[2 * jj + 1], a, b1);
        }
    }
#pragma unroll
    for (int n = 0; n < Q_NKT; n++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            ds[n][e] *= dp[n][e] - r->delta[e >> 1];
}

FROST_DEVICE const void *q_bias(const sdpa_bwd_params *p, int b, int h)
{
#if BIAS
    return bias_at(p, b, h);
#else
    (void)p, (void)b, (void)h;
    return 0;
#endif
}

#endif /* FROST_SDPA_BWD_DQ_CUH */
