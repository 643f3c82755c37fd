/*
 * sdpa_ref_naive.c — part of test_sdpa_ref: attention written out in fp64, sharing no code
 * with sdpa_ref.c.  Each (batch, head) block forms its full score matrix, masks it by the
 * distance from the diagonal, takes a row softmax with the sink as an extra column and
 * multiplies by V.  The loss L = sum(dO * O) - sum(w * lse) of a block and its central
 * differences give the reference gradients (why the lse term: test_sdpa_ref.c's top).
 */
#include <math.h>

#include "ref_test_util.h"
#include "sdpa_ref.h"

/* Key j is visible from row i when its distance right of row i's diagonal is within the
 * bounds; the diagonal of bottom-right alignment is shifted by len_kv - len_q. */
static int visible(const sdpa_case *c, int64_t lq, int64_t lk, int64_t i, int64_t j)
{
    int64_t shift = c->align == FROST_DIAG_BOTTOM_RIGHT ? lk - lq : 0;
    int64_t right_of_diag = j - (i + shift);
    if (i >= lq || j >= lk)
        return 0;
    if ((c->mask & FROST_MASK_RIGHT_BOUND) && right_of_diag > c->right)
        return 0;
    if ((c->mask & FROST_MASK_LEFT_BOUND) && -right_of_diag >= c->left)
        return 0;
    return 1;
}

/* One (b, h) block: o [s_q][d_v] and lse [s_q] (-inf and 0 on rows beyond len_q).
 * Returns sum(d_o * o) - sum(w * lse) over the block when d_o is given (w = lse_weight,
 * rows with lse = -inf left out). */
static double naive_block(const naive *nv, int64_t b, int64_t h, double *o, double *lse, const double *d_o)
{
    const sdpa_case *c = nv->c;
    int64_t sq = c->s_q, skv = c->s_kv, hk = h / (c->h_q / c->h_kv);
    const double *qb = nv->q + (b * c->h_q + h) * sq * c->d_qk;
    const double *kb = nv->k + (b * c->h_kv + hk) * skv * c->d_qk;
    const double *vb = nv->v + (b * c->h_kv + hk) * skv * c->d_v;
    const double *bb = nv->bias ? nv->bias + ((nv->bias_b > 1 ? b : 0) * nv->bias_h + (nv->bias_h > 1 ? h : 0)) * sq * skv
                                : NULL;
    int64_t lq = nv->len_q[b], lk = nv->len_kv[b];
    for (int64_t i = 0; i < sq; i++)
        for (int64_t j = 0; j < skv; j++) {
            double acc = 0;
            for (int64_t d = 0; d < c->d_qk; d++)
                acc += qb[i * c->d_qk + d] * kb[j * c->d_qk + d];
            nv->s[i * skv + j] = visible(c, lq, lk, i, j) ? nv->scale * acc + (bb ? bb[i * skv + j] : 0) : -INFINITY;
        }
    double loss = 0;
    for (int64_t i = 0; i < sq; i++) {
        double *row = nv->s + i * skv;
        double top = nv->sink ? nv->sink[h] : -INFINITY;
        for (int64_t j = 0; j < skv; j++)
            top = fmax(top, row[j]);
        double denom = 0;
        if (i < lq && top > -INFINITY) {
            denom = nv->sink ? exp(nv->sink[h] - top) : 0;
            for (int64_t j = 0; j < skv; j++) {
                row[j] = exp(row[j] - top); /* exp(-inf) = 0 */
                denom += row[j];
            }
        }
        lse[i] = denom > 0 ? top + log(denom) : -INFINITY;
        if (d_o && nv->lse_weight && denom > 0)
            loss -= nv->lse_weight[(b * c->h_q + h) * sq + i] * lse[i];
        for (int64_t e = 0; e < c->d_v; e++) {
            double acc = 0;
            if (denom > 0)
                for (int64_t j = 0; j < skv; j++)
                    acc += row[j] / denom * vb[j * c->d_v + e];
            o[i * c->d_v + e] = acc;
            if (d_o)
                loss += d_o[((b * c->h_q + h) * sq + i) * c->d_v + e] * acc;
        }
    }
    return loss;
}

void sdpa_ref_naive_forward(const naive *nv, double *o, double *lse)
{
    const sdpa_case *c = nv->c;
    for (int64_t b = 0; b < c->b; b++)
        for (int64_t h = 0; h < c->h_q; h++)
            naive_block(nv, b, h, o + (b * c->h_q + h) * c->s_q * c->d_v, lse + (b * c->h_q + h) * c->s_q, NULL);
}

/* The loss over the blocks with b in [b0, b1) and h in [h0, h1), as tu_central_diff wants it. */
typedef struct blocks_loss {
    const naive *nv;
    const double *d_o;
    int64_t b0, b1, h0, h1;
    double *o_tmp, *lse_tmp;
} blocks_loss;

static double naive_loss(void *ctx)
{
    const blocks_loss *bl = ctx;
    double loss = 0;
    for (int64_t b = bl->b0; b < bl->b1; b++)
        for (int64_t h = bl->h0; h < bl->h1; h++)
            loss += naive_block(bl->nv, b, h, bl->o_tmp, bl->lse_tmp, bl->d_o);
    return loss;
}

double sdpa_ref_fd(const naive *nv, const double *d_o, double *x, int64_t idx, int64_t b0, int64_t b1, int64_t h0,
                   int64_t h1, double *o_tmp, double *lse_tmp)
{
    blocks_loss bl = {nv, d_o, b0, b1, h0, h1, o_tmp, lse_tmp};
    return tu_central_diff(&x[idx], 1e-5, naive_loss, &bl);
}
