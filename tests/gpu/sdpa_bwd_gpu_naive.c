/*
 * sdpa_bwd_gpu_naive.c — the error budget of test_sdpa_bwd_gpu (see its essay): a plain
 * low-precision backward (f32 sums, P and dS rounded to the I/O dtype before the products
 * that use them, outputs rounded) and the comparison of each cuda output with the ref,
 * allowed K_NAIVE times the naive algorithm's error.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "sdpa_bwd_gpu.h"

#define K_NAIVE 3.0
#define ATOL_C 0.5
#define NAIVE_SANITY 0.1

/* ---------------------------------------------------------------------------------- */
/* The naive low-precision backward (the error budget)                                  */
/* ---------------------------------------------------------------------------------- */

static double round_io(frost_dtype t, double x)
{
    float f = (float)x;
    return t == FROST_BF16 ? frost__bf16_to_f32(frost__f32_to_bf16(f)) : frost__f16_to_f32(frost__f32_to_f16(f));
}

static int admissible(const bcase *c, int64_t i, int64_t j, int64_t len_q, int64_t len_kv)
{
    int64_t diag = c->align == FROST_DIAG_BOTTOM_RIGHT ? i + len_kv - len_q : i;
    if (j >= len_kv || ((c->mask & FROST_MASK_RIGHT_BOUND) && j > diag + c->right))
        return 0;
    return !((c->mask & FROST_MASK_LEFT_BOUND) && j <= diag - c->left);
}

/* Element offset of (b, h, i, j) in a [b|1, h|1, s_q, s_kv] tensor. */
static int64_t bias_at(const tu_buf *t, int64_t b, int64_t h, int64_t i, int64_t j)
{
    return (t->dims[0] > 1 ? b : 0) * t->strides[0] + (t->dims[1] > 1 ? h : 0) * t->strides[1] + i * t->strides[2] +
           j * t->strides[3];
}

static int64_t sink_at(const run *r, int64_t h)
{
    return h * r->sink.strides[r->sink_rank == 1 ? 0 : 1];
}

/* Gathers row (b, h, s) of an operand into dst[0..n). */
static void gather(const run *r, int opd, int64_t b, int64_t h, int64_t s, int64_t n, float *dst)
{
    for (int64_t d = 0; d < n; d++)
        dst[d] = (float)tu_buf_get(&r->lp[opd], at(r, opd, b, h, s, d));
}

/* Writes the naive dQ, dK, dV, d_bias, d_sink into the C_NAIVE copies.  Per batch the KV
 * heads are gathered into dense f32 arrays; per query row Q, dO and O. */
void naive_backward(run *r)
{
    const bcase *c = r->c;
    const frost_dtype dt = c->dtype;
    const int64_t G = c->h_q / c->h_kv, dqk = c->d_qk, dv = c->d_v, nk = c->h_kv * c->s_kv;
    const float scale = (float)r->scale;
    float *kd = calloc((size_t)(nk * dqk), sizeof(float)), *vd = calloc((size_t)(nk * dv), sizeof(float));
    float *acc_k = calloc((size_t)(nk * dqk), sizeof(float)), *acc_v = calloc((size_t)(nk * dv), sizeof(float));
    float *row = calloc((size_t)(2 * dqk + 2 * dv), sizeof(float)), *dsink = calloc((size_t)c->h_q, sizeof(float));
    tu_buf *dbias = c->dbias ? &r->dbias[C_NAIVE] : NULL;
    if (!kd || !vd || !acc_k || !acc_v || !row || !dsink) {
        tu_failf("out of host memory in the naive backward");
        goto done;
    }
    float *q = row, *acc_q = row + dqk, *d_o = row + 2 * dqk, *o = row + 2 * dqk + dv;
    if (dbias) /* every element written: zeros, then the sums */
        for (int64_t bb = 0; bb < dbias->dims[0]; bb++)
            for (int64_t bh = 0; bh < dbias->dims[1]; bh++)
                for (int64_t i = 0; i < c->s_q; i++)
                    for (int64_t j = 0; j < c->s_kv; j++)
                        tu_buf_set(dbias, bias_at(dbias, bb, bh, i, j), 0.0);
    for (int b = 0; b < c->b; b++) {
        const int64_t lq = r->len[0][b], lk = r->len[1][b];
        memset(acc_k, 0, sizeof(float) * (size_t)(nk * dqk));
        memset(acc_v, 0, sizeof(float) * (size_t)(nk * dv));
        for (int64_t hk = 0; hk < c->h_kv; hk++)
            for (int64_t j = 0; j < lk; j++) {
                gather(r, OK, b, hk, j, dqk, kd + (hk * c->s_kv + j) * dqk);
                gather(r, OV, b, hk, j, dv, vd + (hk * c->s_kv + j) * dv);
            }
        for (int64_t h = 0; h < c->h_q; h++)
            for (int64_t i = 0; i < owned(r, ODQ, b); i++) {
                const int64_t hk = h / G;
                double lse = -INFINITY;
                float delta = 0.f;
                memset(acc_q, 0, sizeof(float) * (size_t)dqk);
                if (i < lq) {
                    lse = tu_buf_get(&r->stats, b * r->stats_st[0] + h * r->stats_st[1] + i * r->stats_st[2]);
                    gather(r, OQ, b, h, i, dqk, q);
                    gather(r, ODO, b, h, i, dv, d_o);
                    gather(r, OO, b, h, i, dv, o);
                    for (int64_t d = 0; d < dv; d++)
                        delta += d_o[d] * o[d];
                }
                for (int64_t j = 0; j < lk && lse != -INFINITY; j++) {
                    const float *k = kd + (hk * c->s_kv + j) * dqk, *v = vd + (hk * c->s_kv + j) * dv;
                    float s = 0.f, dp = 0.f;
                    if (!admissible(c, i, j, lq, lk))
                        continue;
                    for (int64_t d = 0; d < dqk; d++)
                        s += q[d] * k[d];
                    s = s * scale + (c->bias ? (float)tu_buf_get(&r->bias, bias_at(&r->bias, b, h, i, j)) : 0.f);
                    if (s == -INFINITY)
                        continue;
                    float p = expf(s - (float)lse), p_io = (float)round_io(dt, p);
                    for (int64_t d = 0; d < dv; d++)
                        dp += d_o[d] * v[d];
                    float ds = (float)round_io(dt, p * (dp - delta));
                    for (int64_t d = 0; d < dv; d++)
                        acc_v[(hk * c->s_kv + j) * dv + d] += p_io * d_o[d];
                    for (int64_t d = 0; d < dqk; d++) {
                        acc_k[(hk * c->s_kv + j) * dqk + d] += ds * q[d];
                        acc_q[d] += ds * k[d];
                    }
                    if (dbias) {
                        int64_t e = bias_at(dbias, b, h, i, j);
                        tu_buf_set(dbias, e, (float)tu_buf_get(dbias, e) + ds);
                    }
                }
                if (c->sink && lse != -INFINITY)
                    dsink[h] -= expf((float)tu_buf_get(&r->sink, sink_at(r, h)) - (float)lse) * delta;
                for (int64_t d = 0; d < dqk; d++)
                    tu_buf_set(&r->naive[0], at(r, ODQ, b, h, i, d), round_io(dt, scale * acc_q[d]));
            }
        for (int64_t hk = 0; hk < c->h_kv; hk++)
            for (int64_t j = 0; j < owned(r, ODK, b); j++) {
                for (int64_t d = 0; d < dqk; d++)
                    tu_buf_set(&r->naive[1], at(r, ODK, b, hk, j, d),
                               j < lk ? round_io(dt, scale * acc_k[(hk * c->s_kv + j) * dqk + d]) : 0.0);
                for (int64_t d = 0; d < dv; d++)
                    tu_buf_set(&r->naive[2], at(r, ODV, b, hk, j, d),
                               j < lk ? round_io(dt, acc_v[(hk * c->s_kv + j) * dv + d]) : 0.0);
            }
    }
    if (c->sink && c->dsink)
        for (int64_t h = 0; h < c->h_q; h++)
            tu_buf_set(&r->dsink[C_NAIVE], sink_at(r, h), dsink[h]);
done:
    free(kd), free(vd), free(acc_k), free(acc_v), free(row), free(dsink);
}

/* ---------------------------------------------------------------------------------- */
/* Comparison over whole allocations                                                     */
/* ---------------------------------------------------------------------------------- */

void compare_output(const char *what, const tu_buf *gpu, const tu_buf *ref, const tu_buf *naive,
                           frost_dtype dtype)
{
    int64_t nan_bad = 0, nan_at = 0, naive_missing = 0, worst_at = 0;
    double max_gpu = 0, max_naive = 0, max_ref = 0, worst_got = 0, worst_ref = 0, nan_got = 0, nan_ref = 0;
    for (int64_t e = -ref->guard; e < ref->span + ref->guard; e++) {
        double g = tu_buf_get(gpu, e), f = tu_buf_get(ref, e), nv = tu_buf_get(naive, e);
        if (isnan(f) || isnan(g)) {
            if (isnan(f) != isnan(g) && nan_bad++ == 0)
                nan_at = e, nan_got = g, nan_ref = f;
            continue;
        }
        if (isnan(nv)) {
            naive_missing++;
            continue;
        }
        double err = isinf(f) || isinf(g) ? (g == f ? 0.0 : INFINITY) : fabs(g - f);
        if (err > max_gpu)
            max_gpu = err, worst_at = e, worst_got = g, worst_ref = f;
        max_naive = fmax(max_naive, fabs(nv - f));
        max_ref = fmax(max_ref, fabs(f));
    }
    double limit = K_NAIVE * max_naive + ATOL_C * tu_eps(dtype) * max_ref + 1e-6;
    if (nan_bad)
        tu_failf("%s: %lld element(s) written where the ref left NaN, or left NaN where the ref wrote; first at "
                 "element offset %lld (got %.6g, ref %.6g)", what, (long long)nan_bad, (long long)nan_at, nan_got,
                 nan_ref);
    if (!(max_gpu <= limit))
        tu_failf("%s: max |cuda - ref| = %.4g > limit %.4g (= %.0f x naive error %.4g + %.1f eps x max|ref| %.4g); "
                 "worst at element offset %lld: got %.9g, ref %.9g", what, max_gpu, limit, K_NAIVE, max_naive,
                 ATOL_C, max_ref, (long long)worst_at, worst_got, worst_ref);
    if (naive_missing)
        tu_failf("%s: the test's naive backward left %lld element(s) unwritten that the ref wrote (test bug)", what,
                 (long long)naive_missing);
    if (max_naive > NAIVE_SANITY * max_ref + 1e-4)
        tu_failf("%s: the naive backward disagrees with the ref (max error %.4g, max|ref| %.4g): test or ref bug",
                 what, max_naive, max_ref);
}
