/*
 * sdpa_ref_checks.c — part of test_sdpa_ref: the checks of an executed case.  The
 * operands are gathered into dense fp64 arrays for the naive forward; every row an output
 * owns is compared with it, tokens of a ragged output owned by no batch must stay NaN, and
 * guards and stride gaps must stay NaN.  Gradients are compared with finite differences
 * (tolerance widened by the noise of the f32 LSE), and a backward case's second execute
 * on poisoned outputs must match bit for bit.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref_test_util.h"
#include "sdpa_ref.h"

static int64_t tt_at(const tt *t, int64_t b, int64_t h, int64_t i, int64_t d)
{
    int64_t base = t->offs ? t->offs[b] * t->st[2] : b * t->st[0];
    return base + h * t->st[1] + i * t->st[2] + d * t->st[3];
}

static int64_t tt_rows(const tt *t, int64_t b)
{
    return t->offs ? t->offs[b + 1] - t->offs[b] : t->dims[2];
}

/* Dense fp64 copy [b][h][s][d]; rows the batch does not own are 0. */
static double *tt_gather(const tt *t)
{
    int64_t n = t->dims[0] * t->dims[1] * t->dims[2] * t->dims[3];
    double *x = calloc((size_t)(n ? n : 1), sizeof *x);
    for (int64_t b = 0; b < t->dims[0]; b++)
        for (int64_t h = 0; h < t->dims[1]; h++)
            for (int64_t i = 0; i < tt_rows(t, b); i++)
                for (int64_t d = 0; d < t->dims[3]; d++)
                    x[((b * t->dims[1] + h) * t->dims[2] + i) * t->dims[3] + d] = tu_buf_get(&t->buf, tt_at(t, b, h, i, d));
    return x;
}

/* Dense copy of a small strided tensor (all of its elements, row-major). */
static double *small_gather(const tu_buf *b)
{
    int64_t n = 1;
    for (int k = 0; k < b->rank; k++)
        n *= b->dims[k];
    double *x = malloc(sizeof(double) * (size_t)n);
    for (int64_t e = 0; e < n; e++)
        x[e] = tu_buf_get(b, tu_flat_off(b, e));
    return x;
}

static double max_abs(const double *x, int64_t n)
{
    double m = 0;
    for (int64_t i = 0; i < n; i++)
        if (isfinite(x[i]))
            m = fmax(m, fabs(x[i]));
    return m;
}

/* Compares every row an operand owns with the dense reference, and checks that tokens
 * of a ragged buffer outside all batches and the guards are untouched. */
static void check_tt(const tt *t, const double *ref, const char *what, double atol, double rtol)
{
    int64_t H = t->dims[1], S = t->dims[2], D = t->dims[3], n = 0;
    double *got = malloc(sizeof(double) * (size_t)(t->dims[0] * H * S * D + 1));
    double *want = malloc(sizeof(double) * (size_t)(t->dims[0] * H * S * D + 1));
    for (int64_t b = 0; b < t->dims[0]; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < tt_rows(t, b); i++)
                for (int64_t d = 0; d < D; d++, n++) {
                    got[n] = tu_buf_get(&t->buf, tt_at(t, b, h, i, d));
                    want[n] = ref[((b * H + h) * S + i) * D + d];
                }
    tu_expect_close(what, got, want, n, atol, rtol);
    free(got);
    free(want);
    if (t->offs) {
        int64_t written = 0;
        for (int64_t tok = 0; tok < t->tokens; tok++) {
            if (tok >= t->offs[0] && tok < t->offs[t->dims[0]])
                continue;
            for (int64_t h = 0; h < H; h++)
                for (int64_t d = 0; d < D; d++)
                    written += !isnan(tu_buf_get(&t->buf, tok * t->st[2] + h * t->st[1] + d * t->st[3]));
        }
        if (written)
            tu_failf("%s: %lld element(s) of tokens outside every batch were written", what, (long long)written);
    }
    tu_guard_check(&t->buf, what);
}

/* The dense reference of a strided small tensor ([b|1, h|1, s_q, s_kv] or sink). */
static void check_small(const tu_buf *b, const double *ref, const char *what, double atol, double rtol)
{
    int64_t n = 1;
    for (int k = 0; k < b->rank; k++)
        n *= b->dims[k];
    double *got = small_gather(b);
    tu_expect_close(what, got, ref, n, atol, rtol);
    free(got);
    tu_guard_check(b, what);
}

/* An output frost created follows its input's dim order. */
static void check_dim_order(const tt *like, const tt *out, const char *what)
{
    if (like->offs)
        return;
    for (int a = 0; a < 4; a++)
        for (int c = 0; c < 4; c++)
            if (out->dims[a] > 1 && out->dims[c] > 1 && like->st[a] > like->st[c] && !(out->st[a] > out->st[c]))
                tu_failf("%s: dim %d should be outside dim %d like the input's", what, a, c);
}

/* Extra tolerance for the gradient noise of the f32 LSE: each row's terms are off by a
 * factor exp(lse - lse_f32), i.e. relatively by about |lse| * 2^-24. */
static double grad_atol(const double *ref, int64_t n, double max_lse)
{
    return 1e-9 + 4 * ldexp(1.0, -24) * (1 + max_lse) * (1 + max_abs(ref, n));
}

static void check_backward(run *r, naive *nv, const double *o_ref)
{
    const sdpa_case *c = r->c;
    int64_t G = c->h_q / c->h_kv, nq = c->b * c->h_q * c->s_q;
    double *d_o = tt_gather(&r->d_o), *o_got = tt_gather(&r->o), *w = calloc((size_t)nq, sizeof(double));
    double *o_tmp = malloc(sizeof(double) * (size_t)(c->s_q * c->d_v)), *lse_tmp = malloc(sizeof(double) * (size_t)c->s_q);
    double max_lse = 0;
    for (int64_t row = 0; row < nq; row++)
        for (int64_t e = 0; e < c->d_v; e++)
            w[row] += d_o[row * c->d_v + e] * (o_got[row * c->d_v + e] - o_ref[row * c->d_v + e]);
    nv->lse_weight = w;
    /* gradients of Q, K, V by finite differences of the loss, block by block */
    struct { tt *t; double *x; int64_t H, S, D; int kv; const char *name; } ops[3] = {
        {&r->dq, nv->q, c->h_q, c->s_q, c->d_qk, 0, "dQ"},
        {&r->dk, nv->k, c->h_kv, c->s_kv, c->d_qk, 1, "dK"},
        {&r->dv, nv->v, c->h_kv, c->s_kv, c->d_v, 1, "dV"},
    };
    for (int64_t b = 0; b < c->b; b++)
        for (int64_t h = 0; h < c->h_q; h++)
            for (int64_t i = 0; i < c->s_q; i++) {
                const int64_t *st = r->stats.strides;
                double lse = tu_buf_get(&r->stats, b * st[0] + h * st[1] + i * st[2]);
                if (isfinite(lse))
                    max_lse = fmax(max_lse, fabs(lse));
            }
    for (int k = 0; k < 3; k++) {
        int64_t n = c->b * ops[k].H * ops[k].S * ops[k].D;
        double *ref = calloc((size_t)(n ? n : 1), sizeof(double));
        for (int64_t b = 0; b < c->b; b++)
            for (int64_t h = 0; h < ops[k].H; h++)
                for (int64_t i = 0; i < (ops[k].kv ? r->len_kv[b] : r->len_q[b]); i++)
                    for (int64_t d = 0; d < ops[k].D; d++) {
                        int64_t idx = ((b * ops[k].H + h) * ops[k].S + i) * ops[k].D + d;
                        int64_t h0 = ops[k].kv ? h * G : h, h1 = ops[k].kv ? (h + 1) * G : h + 1;
                        ref[idx] = sdpa_ref_fd(nv, d_o, ops[k].x, idx, b, b + 1, h0, h1, o_tmp, lse_tmp);
                    }
        check_tt(ops[k].t, ref, ops[k].name, grad_atol(ref, n, max_lse), 1.5 * tu_eps(c->dtype));
        free(ref);
    }
    if (c->bias) {
        int64_t n = r->bias_dims[0] * r->bias_dims[1] * c->s_q * c->s_kv;
        double *ref = calloc((size_t)n, sizeof(double));
        for (int64_t e = 0; e < n; e++) {
            int64_t bb = e / (r->bias_dims[1] * c->s_q * c->s_kv), hh = e / (c->s_q * c->s_kv) % r->bias_dims[1];
            int64_t b0 = r->bias_dims[0] > 1 ? bb : 0, b1 = r->bias_dims[0] > 1 ? bb + 1 : c->b;
            int64_t h0 = r->bias_dims[1] > 1 ? hh : 0, h1 = r->bias_dims[1] > 1 ? hh + 1 : c->h_q;
            ref[e] = sdpa_ref_fd(nv, d_o, nv->bias, e, b0, b1, h0, h1, o_tmp, lse_tmp);
        }
        check_small(&r->dbias, ref, "d_bias", grad_atol(ref, n, max_lse), 1.5 * tu_eps(FROST_F32));
        free(ref);
    }
    if (c->sink) {
        double *ref = calloc((size_t)c->h_q, sizeof(double));
        for (int64_t h = 0; h < c->h_q; h++)
            ref[h] = sdpa_ref_fd(nv, d_o, nv->sink, h, 0, c->b, h, h + 1, o_tmp, lse_tmp);
        check_small(&r->dsink, ref, "d_sink", grad_atol(ref, c->h_q, max_lse), 1.5 * tu_eps(FROST_F32));
        free(ref);
    }
    free(d_o), free(o_got), free(w), free(o_tmp), free(lse_tmp);
}

static tu_buf *outputs(run *r, int i)
{
    tu_buf *list[] = {&r->o.buf, &r->stats, &r->dq.buf, &r->dk.buf, &r->dv.buf, &r->dbias, &r->dsink};
    return i < 7 ? list[i] : NULL;
}

/* Runs the graph again on poisoned outputs; everything must come out bit for bit. */
static void check_repeatable(run *r, void *ws)
{
    void *copy[7] = {0};
    size_t size[7] = {0};
    for (int i = 0; i < 7; i++) {
        tu_buf *b = outputs(r, i);
        if (!b->alloc)
            continue;
        size[i] = (size_t)(b->span + 2 * b->guard) * b->elem_size;
        copy[i] = malloc(size[i]);
        memcpy(copy[i], b->alloc, size[i]);
        tu_buf_poison(b);
    }
    TU_OK(frost_graph_execute(r->g, r->bind, r->nb, ws, NULL));
    for (int i = 0; i < 7; i++) {
        if (copy[i] && memcmp(copy[i], outputs(r, i)->alloc, size[i]) != 0)
            tu_failf("output %d differs between two executions", i);
        free(copy[i]);
    }
}

void sdpa_ref_check_run(run *r, void *ws)
{
    const sdpa_case *c = r->c;
    naive nv = {.c = c,
                .scale = c->scale != 0 ? c->scale : 1.0 / sqrt((double)c->d_qk),
                .len_q = r->len_q,
                .len_kv = r->len_kv,
                .q = tt_gather(&r->q),
                .k = tt_gather(&r->k),
                .v = tt_gather(&r->v),
                .bias = c->bias ? small_gather(&r->bias) : NULL,
                .sink = c->sink ? small_gather(&r->sink) : NULL,
                .bias_b = r->bias_dims[0],
                .bias_h = r->bias_dims[1]};
    nv.s = malloc(sizeof(double) * (size_t)(c->s_q * c->s_kv));
    int64_t nq = (int64_t)c->b * c->h_q * c->s_q;
    double *o_ref = malloc(sizeof(double) * (size_t)(nq * c->d_v)), *lse_ref = malloc(sizeof(double) * (size_t)nq);
    sdpa_ref_naive_forward(&nv, o_ref, lse_ref);
    double f16_tiny = c->dtype == FROST_F16 ? ldexp(1.0, -25) : 0;
    check_tt(&r->o, o_ref, "O", 1e-12 + f16_tiny, 1.5 * tu_eps(c->dtype));
    if (c->stats)
        check_small(&r->stats, lse_ref, "stats", 1e-12, ldexp(1.0, -23));
    if (!c->user_out)
        check_dim_order(&r->q, &r->o, "O (auto)");
    if (c->backward) {
        if (!c->user_out) {
            check_dim_order(&r->q, &r->dq, "dQ (auto)");
            check_dim_order(&r->k, &r->dk, "dK (auto)");
            check_dim_order(&r->v, &r->dv, "dV (auto)");
        }
        check_backward(r, &nv, o_ref);
        check_repeatable(r, ws);
    }
    free(nv.q), free(nv.k), free(nv.v), free(nv.bias), free(nv.sink), free(nv.s);
    free(o_ref), free(lse_ref);
}
