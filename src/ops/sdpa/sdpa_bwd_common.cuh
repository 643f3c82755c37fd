/*
 * sdpa_bwd_common.cuh: what the attention-backward kernels (sdpa_bwd.cu) share: the
 * configuration defines and their standalone-compile defaults, the parameter block the
 * host fills (sdpa_cuda_bwd.c), and the device helpers for addressing (ragged offsets,
 * lengths, workspace rows), the mask band and the bias.  Terms: sdpa_bwd.cu's top comment.
 */
#ifndef FROST_SDPA_BWD_COMMON_CUH
#define FROST_SDPA_BWD_COMMON_CUH

/* Standalone-compile defaults (nvcc -Xptxas -v); real builds always pass every define. */
#if !defined(DTYPE_F16) && !defined(DTYPE_BF16)
#define DTYPE_BF16 1
#endif
#include "frost_mma.cuh"

#ifndef D_QK
#define D_QK 128
#endif
#ifndef D_V
#define D_V D_QK
#endif
#ifndef BIAS
#define BIAS 0 /* 0 none, 1 f32, 2 the I/O dtype */
#endif
#ifndef KV_NW
#define KV_NW 8
#endif
#ifndef KV_BN
#define KV_BN 64
#endif
#ifndef KV_BM
#define KV_BM 64
#endif
#ifndef KV_STAGES
#define KV_STAGES 2
#endif
#ifndef Q_NW
#define Q_NW 4
#endif
#ifndef Q_BN
#define Q_BN 64
#endif
#ifndef Q_STAGES
#define Q_STAGES 2
#endif

/* D_QK and D_V are the head dims rounded up to 16 (the columns the tiles hold); the
 * actual dims p.dim_qk, p.dim_v are run-time, the extra columns are zero-filled. */
#define DQK_P D_QK
#define DV_P D_V
static_assert(D_QK % 16 == 0 && D_V % 16 == 0, "D_QK and D_V are head dims rounded up to 16");
#define LD_QK (DQK_P + 8)
#define LD_V (DV_P + 8)
#define BAND_BIG (1 << 30)

/* Operand indices of the per-operand arrays (strides, ragged offsets, 16-byte flag). */
enum { OPD_Q, OPD_K, OPD_V, OPD_O, OPD_DO, OPD_DQ, OPD_DK, OPD_DV, OPD_COUNT };

/* Mirrors struct sdpa_bwd_params in sdpa_cuda_bwd.c field by field (656 bytes; both
 * sides assert the size).  Pointers and int64 first, then 4-byte fields: no padding. */
typedef struct sdpa_bwd_params {
    const uint16_t *q, *k, *v, *o, *d_o;
    uint16_t *d_q, *d_k, *d_v;
    const float *stats;
    const void *bias;
    const float *sink;
    const int32_t *seq_len_q, *seq_len_kv;
    float *d_bias, *d_sink;
    float *ws_delta, *ws_lse2; /* [b][h_q][s_q] each */
    const void *ragged[OPD_COUNT];
    int64_t str[OPD_COUNT][4]; /* (b, h, s, d) element strides */
    int64_t str_bias[4], str_dbias[4], str_stats[4];
    int64_t str_sink, str_dsink, str_seq_len_q, str_seq_len_kv;
    int32_t b, h_q, h_kv, group, s_q, s_kv, dim_qk, dim_v; /* dim_*: actual head dims */
    int32_t mask_flags, left, right, bottom_right; /* bounds clamped to 2^29 by the host */
    int32_t ragged_i64; /* bit OPD_x: ragged offsets of operand x are int64 */
    int32_t vec;        /* bit OPD_x: operand x may use the 16-byte cp.async path */
    int32_t dbias_reduce_b, dbias_reduce_h;
    float scale, scale_log2;
} sdpa_bwd_params;
static_assert(sizeof(sdpa_bwd_params) == 656, "sdpa_bwd_params layout changed: update sdpa_cuda_bwd.c");

#define PARAMS const __grid_constant__ sdpa_bwd_params

FROST_DEVICE int imin(int a, int b) { return a < b ? a : b; }
FROST_DEVICE int imax(int a, int b) { return a > b ? a : b; }
/* An int64 count clamped to [0, hi]. */
FROST_DEVICE int clamp_len(int64_t n, int hi) { return n < 0 ? 0 : n > hi ? hi : (int)n; }

FROST_DEVICE int64_t ragged_at(const sdpa_bwd_params *p, int opd, int b)
{
    return (p->ragged_i64 >> opd) & 1 ? ((const int64_t *)p->ragged[opd])[b] : ((const int32_t *)p->ragged[opd])[b];
}
/* Element offset of (b, h = 0, s = 0, d = 0) of an operand. */
FROST_DEVICE int64_t batch_base(const sdpa_bwd_params *p, int opd, int b)
{
    return p->ragged[opd] ? ragged_at(p, opd, b) * p->str[opd][2] : (int64_t)b * p->str[opd][0];
}
/* Rows of batch b that an output operand owns: the s dim, or its ragged sequence. */
FROST_DEVICE int rows_owned(const sdpa_bwd_params *p, int opd, int b, int s_dim)
{
    if (!p->ragged[opd])
        return s_dim;
    return clamp_len(ragged_at(p, opd, b + 1) - ragged_at(p, opd, b), s_dim);
}
FROST_DEVICE int length_q(const sdpa_bwd_params *p, int b)
{
    int64_t n = p->s_q;
    if (p->seq_len_q)
        n = p->seq_len_q[b * p->str_seq_len_q];
    else if (p->ragged[OPD_Q])
        n = ragged_at(p, OPD_Q, b + 1) - ragged_at(p, OPD_Q, b);
    return clamp_len(n, p->s_q);
}
FROST_DEVICE int length_kv(const sdpa_bwd_params *p, int b)
{
    int64_t n = p->s_kv;
    if (p->seq_len_kv)
        n = p->seq_len_kv[b * p->str_seq_len_kv];
    else if (p->ragged[OPD_K])
        n = ragged_at(p, OPD_K, b + 1) - ragged_at(p, OPD_K, b);
    else if (p->ragged[OPD_V])
        n = ragged_at(p, OPD_V, b + 1) - ragged_at(p, OPD_V, b);
    return clamp_len(n, p->s_kv);
}

/* The admissible set of batch b: i < len_q, j < len_kv and lmin < j - i <= rmax, which
 * restates frost__sdpa_admissible with the diagonal offset folded into the bounds. */
typedef struct band {
    int len_q, len_kv, rmax, lmin;
} band;

FROST_DEVICE band band_make(const sdpa_bwd_params *p, int b)
{
    band m;
    m.len_q = length_q(p, b);
    m.len_kv = length_kv(p, b);
    const int diag = p->bottom_right ? m.len_kv - m.len_q : 0;
    m.rmax = (p->mask_flags & 2) ? diag + p->right : BAND_BIG;
    m.lmin = (p->mask_flags & 1) ? diag - p->left : -BAND_BIG;
    return m;
}
FROST_DEVICE bool band_has(const band *m, int i, int j)
{
    return i < m->len_q && j < m->len_kv && j - i <= m->rmax && j - i > m->lmin;
}

#if BIAS
/* The bias enters as the initial value of the score accumulator, divided by the scale:
 * (q.k + bias / scale) * scale * log2(e) is the base-2 logit, and the loads are issued
 * before the products instead of holding registers while P is formed.  Elements outside
 * the actual lengths read nothing (0).  bias points at (b, h) already. */
FROST_DEVICE float bias_over_scale(const void *bias, const int64_t *str, int i, int j, const band *m, float inv_scale)
{
    if (i >= m->len_q || j >= m->len_kv)
        return 0.f;
    const int64_t at = i * str[2] + j * str[3];
#if BIAS == 1
    return ((const float *)bias)[at] * inv_scale;
#else
    return frost_to_float(((const frost_io *)bias)[at]) * inv_scale;
#endif
}
FROST_DEVICE const void *bias_at(const sdpa_bwd_params *p, int b, int h)
{
    const int64_t at = b * p->str_bias[0] + h * p->str_bias[1];
#if BIAS == 1
    return (const float *)p->bias + at;
#else
    return (const frost_io *)p->bias + at;
#endif
}
#endif

FROST_DEVICE int64_t ws_row(const sdpa_bwd_params *p, int b, int h)
{
    return ((int64_t)b * p->h_q + h) * p->s_q;
}

FROST_DEVICE void store_io(uint16_t *base, int64_t at, float x)
{
    frost_io v = frost_from_float(x);
    base[at] = v.bits;
}

#endif /* FROST_SDPA_BWD_COMMON_CUH */
