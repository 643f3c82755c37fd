/*
 * test_norm_ref.c — LayerNorm and RMSNorm on the reference engine, forward and backward,
 * plus a walk through every validation error of the four add functions.
 *
 * What is checked, and against what:
 *   - Forward y (and the saved mean / inv_std) against a naive formula written here from
 *     the definition (one-pass moments over a flat index; no code shared with the
 *     engine), in fp64 on the very values the engine read.  Both sides are fp64, so the
 *     only difference is the final rounding to the output dtype: rtol 2.5 u(dtype).
 *   - Backward of small f32 problems against fp64 central finite differences of the naive
 *     forward for the loss L = Σ d_y ∘ y: dL/dx, dL/dw (d_scale, incl. the zero-centred
 *     parameterisation) and dL/db (d_bias).  This is the independent check of the math.
 *   - Backward of every other case (f16, bf16, large rows) against the closed-form
 *     gradient evaluated here, which checks dtypes, strides and saved statistics.
 *   - Every output lives in a NaN-guarded buffer, poisoned before execute: an unwritten
 *     element compares as NaN, a write outside the tensor trips the guard check.
 *
 * Case list: a table of chosen cases (hidden size 1, rows = 0, norm_dims = rank, 5120
 * wide rows, broadcast and permuted strides, every dtype) followed by seeded random cases.
 * FROST_TEST_SEED / FROST_TEST_CASE rerun one case; each failure prints the reproducer.
 * Layout legend: x is [R..., C...], rows = prod(R...), cols = prod(C...).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "norm_ref.h"
#include "ref_test_util.h"

enum { PACKED, GAPPED, OUTER_T, PERMUTED, BCAST }; /* layouts of x-like tensors */
enum { NO_BWD, BWD_FORMULA, BWD_FD };
enum { T_X, T_SCALE, T_BIAS, T_Y, T_MEAN, T_RSTD, T_DY, T_DX, T_DSCALE, T_DBIAS, T_COUNT };

static const char *const tnames[T_COUNT] = {"x", "scale", "bias", "y", "mean", "inv_std",
                                            "d_y", "d_x", "d_scale", "d_bias"};

typedef struct norm_case {
    int kind;
    int rank;
    int64_t dims[4];
    int norm_dims;
    frost_dtype dtype;
    int scale, bias; /* 0 absent, 1 f32, 2 x's dtype */
    int zero_centered;
    int inference;
    int layout;
    double epsilon; /* 0: the default 1e-5 */
    double offset;  /* added to x, so LayerNorm has a mean to remove */
    int backward;   /* NO_BWD, BWD_FORMULA, BWD_FD */
    int saved;      /* backward reads the forward's saved statistics */
} norm_case;

#define F32 FROST_F32
#define F16 FROST_F16
#define BF16 FROST_BF16
static const norm_case table[] = {
    /* kind rank dims nd dtype scale bias zc inf layout eps offset bwd saved */
    {LN, 2, {4, 16}, 1, F32, 1, 1, 0, 0, PACKED, 0, 0, BWD_FD, 1},
    {RMS, 2, {4, 16}, 1, F32, 1, 0, 0, 0, PACKED, 0, 0, BWD_FD, 1},
    {RMS, 2, {3, 1}, 1, F32, 1, 1, 0, 0, GAPPED, 1e-3, 0, BWD_FD, 0},       /* hidden 1 */
    {LN, 2, {5, 1}, 1, F32, 1, 1, 0, 0, GAPPED, 0, 0, BWD_FD, 1},           /* hidden 1: y = b */
    {LN, 2, {0, 8}, 1, F32, 1, 1, 0, 0, GAPPED, 0, 0, BWD_FORMULA, 1},      /* rows = 0 */
    {RMS, 3, {0, 3, 8}, 1, BF16, 2, 0, 0, 0, PACKED, 0, 0, BWD_FORMULA, 0}, /* rows = 0 */
    {RMS, 3, {2, 3, 5}, 3, F32, 1, 1, 0, 0, GAPPED, 0, 0, BWD_FD, 1},       /* norm_dims = rank */
    {LN, 2, {4, 5120}, 1, BF16, 2, 2, 0, 0, GAPPED, 1e-6, 1.0, BWD_FORMULA, 1},
    {RMS, 2, {3, 5120}, 1, F16, 1, 0, 1, 0, PACKED, 1e-6, 0, BWD_FORMULA, 1},
    {RMS, 2, {1000, 3}, 1, F16, 1, 0, 1, 0, OUTER_T, 0, 0, BWD_FORMULA, 0},
    {LN, 3, {3, 4, 1000}, 1, F32, 0, 0, 0, 1, OUTER_T, 0, 0, BWD_FORMULA, 0},
    {RMS, 4, {2, 3, 4, 6}, 2, BF16, 2, 1, 1, 0, OUTER_T, 0, 0, BWD_FORMULA, 1},
    {LN, 4, {2, 3, 5, 7}, 2, F16, 1, 2, 0, 0, PERMUTED, 0, 2.5, BWD_FORMULA, 1},
    {LN, 3, {2, 3, 8}, 1, F32, 1, 1, 0, 1, GAPPED, 0, 0, NO_BWD, 0}, /* inference */
    {RMS, 2, {6, 40}, 1, F32, 1, 0, 1, 0, GAPPED, 0, 0, BWD_FD, 0},
    {LN, 3, {3, 4, 12}, 2, F32, 1, 1, 1, 0, PERMUTED, 0, 0, BWD_FD, 1},
    {LN, 2, {4, 8}, 1, F32, 1, 1, 0, 0, BCAST, 0, 0, BWD_FORMULA, 1}, /* x rows broadcast */
    {LN, 2, {8, 64}, 1, F32, 0, 1, 0, 0, GAPPED, 0, 3.0, BWD_FD, 0},
    {RMS, 2, {2, 7}, 1, F32, 0, 0, 0, 0, PERMUTED, 0.5, 0, BWD_FD, 0},
};
#define NUM_TABLE ((int)(sizeof table / sizeof table[0]))
#define NUM_RANDOM 48

static frost_context *cpu;

/* ---- the case as graph and buffers ---- */
typedef struct run {
    const norm_case *c;
    int64_t rows, cols;
    tu_slot t[T_COUNT];
} run;

static int64_t prod(const int64_t *d, int n)
{
    int64_t p = 1;
    for (int i = 0; i < n; ++i)
        p *= d[i];
    return p;
}

/* Strides for an x-like tensor in the case's layout (all 0 = packed). */
static void pick_strides(tu_rng *r, int layout, int rank, const int64_t *dims, int norm_dims, int64_t *strides)
{
    int order[FROST_MAX_RANK];
    memset(strides, 0, sizeof(int64_t) * FROST_MAX_RANK);
    if (layout == PACKED)
        return;
    for (int i = 0; i < rank; ++i)
        order[i] = i;
    if (layout == OUTER_T)
        tu_shuffle(r, order, rank - norm_dims);
    if (layout == PERMUTED)
        tu_shuffle(r, order, rank);
    tu_gapped_strides(r, rank, dims, order, 3, 1, strides);
}

/* A parameter-shaped tensor: rank norm_dims or rank(x) with leading 1s, maybe gapped. */
static frost_tensor add_param(frost_graph *g, tu_rng *r, const char *name, frost_dtype dt, const norm_case *c)
{
    int64_t dims[FROST_MAX_RANK], strides[FROST_MAX_RANK] = {0};
    int order[FROST_MAX_RANK], rank = tu_int(r, 0, 1) ? c->rank : c->norm_dims;
    for (int i = 0; i < rank; ++i) {
        int k = c->rank - rank + i;
        dims[i] = k < c->rank - c->norm_dims ? 1 : c->dims[k];
        order[i] = i;
    }
    if (tu_int(r, 0, 1))
        tu_gapped_strides(r, rank, dims, order, 2, 1, strides);
    return tu_add(g, name, dt, rank, dims, strides);
}

static double at(const run *R, int slot, int64_t f)
{
    return tu_buf_get(&R->t[slot].buf, tu_flat_off(&R->t[slot].buf, f));
}

/* ---- the naive forward (fp64) of one row: x[n], w_eff[n] or NULL, b[n] or NULL ---- */
static void naive_forward(int kind, const double *x, const double *w, const double *b, int64_t n, double eps,
                          double *y, double *mean_out, double *rstd_out)
{
    double s1 = 0, s2 = 0;
    for (int64_t i = 0; i < n; ++i) {
        s1 += x[i];
        s2 += x[i] * x[i];
    }
    double mean = kind == LN ? s1 / (double)n : 0.0;
    double var = s2 / (double)n - mean * mean;
    double rstd = 1.0 / sqrt((var > 0 ? var : 0) + eps);
    for (int64_t i = 0; y && i < n; ++i)
        y[i] = (x[i] - mean) * rstd * (w ? w[i] : 1.0) + (b ? b[i] : 0.0);
    if (mean_out)
        *mean_out = mean, *rstd_out = rstd;
}

static double row_loss(int kind, const double *x, const double *w, const double *b, const double *dy, int64_t n,
                       double eps, double *scratch)
{
    double l = 0;
    naive_forward(kind, x, w, b, n, eps, scratch, NULL, NULL);
    for (int64_t i = 0; i < n; ++i)
        l += dy[i] * scratch[i];
    return l;
}

/* Host copies of one row's inputs in fp64. */
typedef struct row_data {
    double *x, *w, *b, *dy, *tmp;
} row_data;

/* row_loss of one row's copies, as tu_central_diff wants it. */
typedef struct row_loss_ctx {
    int kind;
    row_data *d;
    int64_t n;
    double eps;
} row_loss_ctx;

static double row_loss_of(void *ctx)
{
    const row_loss_ctx *rl = ctx;
    return row_loss(rl->kind, rl->d->x, rl->d->w, rl->d->b, rl->d->dy, rl->n, rl->eps, rl->d->tmp);
}

static void load_params(const run *R, row_data *d)
{
    const norm_case *c = R->c;
    for (int64_t j = 0; j < R->cols; ++j) {
        double w = c->scale ? at(R, T_SCALE, j) : 0.0;
        d->w[j] = c->scale ? (c->zero_centered ? 1.0 + w : w) : 1.0;
        d->b[j] = c->bias ? at(R, T_BIAS, j) : 0.0;
    }
}

static void load_row(const run *R, int64_t r, row_data *d, int with_dy)
{
    for (int64_t j = 0; j < R->cols; ++j) {
        d->x[j] = at(R, T_X, r * R->cols + j);
        if (with_dy)
            d->dy[j] = at(R, T_DY, r * R->cols + j);
    }
}

static double eps_of(const norm_case *c)
{
    return c->epsilon > 0 ? c->epsilon : 1e-5;
}

static void check_forward(const run *R, row_data *d)
{
    const norm_case *c = R->c;
    const int64_t n = R->rows * R->cols, rows = R->rows;
    double *got = malloc(sizeof(double) * (size_t)(n + 1)), *ref = malloc(sizeof(double) * (size_t)(n + 1));
    double *st = malloc(sizeof(double) * (size_t)(4 * rows + 1)); /* got mean | ref mean | got rstd | ref rstd */
    double mag = 0, xmag = 0;
    load_params(R, d);
    for (int64_t r = 0; r < rows; ++r) {
        load_row(R, r, d, 0);
        naive_forward(c->kind, d->x, d->w, c->bias ? d->b : NULL, R->cols, eps_of(c), ref + r * R->cols,
                      &st[rows + r], &st[3 * rows + r]);
        for (int64_t j = 0; j < R->cols; ++j) {
            got[r * R->cols + j] = at(R, T_Y, r * R->cols + j);
            mag = fmax(mag, fabs((d->x[j] - st[rows + r]) * st[3 * rows + r] * d->w[j]) + fabs(d->b[j]));
            xmag = fmax(xmag, fabs(d->x[j]));
        }
        st[r] = R->t[T_MEAN].id ? at(R, T_MEAN, r) : 0;
        st[2 * rows + r] = R->t[T_RSTD].id ? at(R, T_RSTD, r) : 0;
    }
    tu_expect_close("y", got, ref, n, 1e-12 * mag + tu_subnormal_floor(c->dtype), 2.5 * tu_eps(c->dtype));
    if (R->t[T_MEAN].id)
        tu_expect_close("mean", st, st + rows, rows, 1e-12 * xmag + 1e-30, 2.5 * tu_eps(F32));
    if (R->t[T_RSTD].id)
        tu_expect_close("inv_std", st + 2 * rows, st + 3 * rows, rows, 1e-30, 2.5 * tu_eps(F32));
    free(got), free(ref), free(st);
}

/* Backward: closed form (evaluated here) or finite differences of the naive forward. */
static void check_backward(const run *R, row_data *d)
{
    const norm_case *c = R->c;
    const int64_t n = R->rows * R->cols, C = R->cols;
    const int fd = c->backward == BWD_FD;
    const int saved_mean = R->t[T_MEAN].id && c->saved, saved_rstd = R->t[T_RSTD].id && c->saved;
    double *got = malloc(sizeof(double) * (size_t)(2 * n + 1)), *ref = malloc(sizeof(double) * (size_t)(n + 1));
    double *pgot = calloc((size_t)(6 * C), sizeof(double)), *pref = pgot + 2 * C, *pslack = pref + 2 * C;
    double *slack = got + n;
    double mag = 0, pmag = 0, patol, prtol = 2.5 * tu_eps(F32);
    load_params(R, d);
    for (int64_t r = 0; r < R->rows; ++r) {
        double mean, rstd, sg = 0, sgx = 0, sabsg = 0;
        load_row(R, r, d, 1);
        naive_forward(c->kind, d->x, NULL, NULL, C, eps_of(c), NULL, &mean, &rstd);
        if (saved_mean)
            mean = at(R, T_MEAN, r);
        if (saved_rstd)
            rstd = at(R, T_RSTD, r);
        for (int64_t j = 0; j < C; ++j) {
            double xh = (d->x[j] - mean) * rstd, g = d->dy[j] * d->w[j];
            sg += g, sgx += g * xh, sabsg += fabs(g);
            pref[j] += d->dy[j] * xh, pref[C + j] += d->dy[j];
            pslack[j] += tu_norm_param_slack(saved_mean, saved_rstd, mean, rstd, xh, d->dy[j]);
            pmag = fmax(pmag, (fabs(d->dy[j] * xh) + fabs(d->dy[j])) * (double)R->rows);
        }
        if (c->kind == RMS)
            sg = 0;
        for (int64_t j = 0; j < C; ++j) {
            double xh = (d->x[j] - mean) * rstd, g = d->dy[j] * d->w[j];
            ref[r * C + j] = rstd * (g - sg / (double)C - xh * sgx / (double)C);
            mag = fmax(mag, rstd * (fabs(g) + fabs(sg / (double)C) + fabs(xh * sgx / (double)C)));
            got[r * C + j] = at(R, T_DX, r * C + j);
            slack[r * C + j] = tu_norm_dx_slack(saved_mean, saved_rstd, mean, rstd, xh, g, sg / (double)C,
                                                sgx / (double)C, sabsg / (double)C);
        }
        if (!fd)
            continue;
        row_loss_ctx rl = {c->kind, d, C, eps_of(c)};
        for (int64_t j = 0; j < C; ++j) /* dL/dx by central differences, this row only */
            ref[r * C + j] = tu_central_diff(&d->x[j], 1e-6, row_loss_of, &rl);
    }
    patol = 1e-12 * pmag + 1e-30;
    if (fd) {
        for (int p = 0; p < 2; ++p) { /* dL/dw (zero-centred: w_eff = 1 + w) and dL/db */
            double *param = p == 0 ? d->w : d->b;
            for (int64_t j = 0; j < C; ++j) {
                const double h = 1e-6, p0 = param[j];
                double l[2] = {0, 0};
                for (int side = 0; side < 2; ++side) {
                    param[j] = p0 + (side ? -h : h);
                    for (int64_t r = 0; r < R->rows; ++r) {
                        load_row(R, r, d, 1);
                        l[side] += row_loss(c->kind, d->x, d->w, d->b, d->dy, C, eps_of(c), d->tmp);
                    }
                }
                param[j] = p0;
                pref[p * C + j] = (l[0] - l[1]) / (2 * h);
            }
        }
        double m = 0, pm = 0;
        for (int64_t i = 0; i < n; ++i)
            m = fmax(m, fabs(ref[i]));
        for (int64_t j = 0; j < 2 * C; ++j)
            pm = fmax(pm, fabs(pref[j]));
        tu_take_slack(got, ref, slack, n);
        tu_expect_close("d_x (vs finite differences)", got, ref, n, 2e-5 * fmax(1, m), 1e-4);
        patol = 2e-5 * fmax(1, pm);
        prtol = 1e-4;
    } else {
        tu_expect_close("d_x", got, ref, n, 1e-12 * mag + tu_subnormal_floor(c->dtype), 2.5 * tu_eps(c->dtype));
    }
    for (int64_t j = 0; j < C; ++j) {
        if (R->t[T_DSCALE].id)
            pgot[j] = at(R, T_DSCALE, j);
        if (R->t[T_DBIAS].id)
            pgot[C + j] = at(R, T_DBIAS, j);
    }
    if (fd)
        tu_take_slack(pgot, pref, pslack, 2 * C);
    if (R->t[T_DSCALE].id)
        tu_expect_close("d_scale", pgot, pref, C, patol, prtol);
    if (R->t[T_DBIAS].id)
        tu_expect_close("d_bias", pgot + C, pref + C, C, patol, prtol);
    free(got), free(ref), free(pgot);
}

/* ---- one case: graph, buffers, execute, checks ---- */
static void describe(const norm_case *c, char *buf, size_t cap)
{
    static const char *const layouts[] = {"packed", "gapped", "outer-transposed", "permuted", "broadcast-rows"};
    static const char *const bwds[] = {"none", "formula", "finite-diff"};
    int len = snprintf(buf, cap, "%s dims=[", c->kind == LN ? "layernorm" : "rmsnorm");
    for (int i = 0; i < c->rank && len > 0 && (size_t)len < cap; ++i)
        len += snprintf(buf + len, cap - (size_t)len, "%s%lld", i ? "," : "", (long long)c->dims[i]);
    if (len > 0 && (size_t)len < cap)
        snprintf(buf + len, cap - (size_t)len,
                 "] norm_dims=%d %s scale=%d bias=%d zero_centered=%d %s layout=%s eps=%g offset=%g bwd=%s saved=%d",
                 c->norm_dims, frost_dtype_name(c->dtype), c->scale, c->bias, c->zero_centered,
                 c->inference ? "inference" : "training", layouts[c->layout], c->epsilon, c->offset,
                 bwds[c->backward], c->saved);
}

/* An output the test declares itself (gapped strides) or leaves to frost (AUTO). */
static frost_tensor maybe_output(frost_graph *g, tu_rng *r, const char *name, frost_dtype dt, int rank,
                                 const int64_t *dims)
{
    int64_t st[FROST_MAX_RANK];
    int order[FROST_MAX_RANK];
    if (tu_int(r, 0, 1))
        return FROST_TENSOR_AUTO;
    for (int i = 0; i < rank; ++i)
        order[i] = i;
    tu_shuffle(r, order, rank);
    tu_gapped_strides(r, rank, dims, order, 2, 1, st);
    return tu_add(g, name, dt, rank, dims, st);
}

static void add_ops(frost_graph *g, tu_rng *rng, run *R)
{
    const norm_case *c = R->c;
    int64_t st[FROST_MAX_RANK], sdims[FROST_MAX_RANK];
    for (int i = 0; i < c->rank; ++i)
        sdims[i] = i < c->rank - c->norm_dims ? c->dims[i] : 1;
    pick_strides(rng, c->layout, c->rank, c->dims, c->norm_dims, st);
    if (c->layout == BCAST)
        st[0] = 0;
    R->t[T_X].id = tu_add(g, "x", c->dtype, c->rank, c->dims, st);
    if (c->scale)
        R->t[T_SCALE].id = add_param(g, rng, "scale", c->scale == 1 ? F32 : c->dtype, c);
    if (c->bias)
        R->t[T_BIAS].id = add_param(g, rng, "bias", c->bias == 1 ? F32 : c->dtype, c);
    frost_norm_desc fd = {.x = R->t[T_X].id, .scale = R->t[T_SCALE].id, .bias = R->t[T_BIAS].id,
                          .epsilon = c->epsilon, .norm_dims = c->norm_dims,
                          .phase = c->inference ? FROST_NORM_INFERENCE : FROST_NORM_TRAINING,
                          .zero_centered_scale = c->zero_centered};
    frost_norm_outputs fo = {.y = maybe_output(g, rng, "y", c->dtype, c->rank, c->dims)};
    if (!c->inference && c->kind == LN && (c->saved || tu_int(rng, 0, 2)))
        fo.mean = maybe_output(g, rng, "mean", F32, c->rank, sdims);
    if (!c->inference && (c->saved || tu_int(rng, 0, 2)))
        fo.inv_std = maybe_output(g, rng, "inv_std", F32, c->rank, sdims);
    TU_OK(c->kind == LN ? frost_graph_add_layernorm(g, &fd, &fo) : frost_graph_add_rmsnorm(g, &fd, &fo));
    R->t[T_Y].id = fo.y, R->t[T_MEAN].id = fo.mean, R->t[T_RSTD].id = fo.inv_std;
    if (!c->backward)
        return;
    pick_strides(rng, c->layout == BCAST ? GAPPED : c->layout, c->rank, c->dims, c->norm_dims, st);
    R->t[T_DY].id = tu_add(g, "d_y", c->dtype, c->rank, c->dims, st);
    frost_norm_backward_desc bd = {.x = R->t[T_X].id, .d_y = R->t[T_DY].id, .scale = R->t[T_SCALE].id,
                                   .mean = c->saved ? fo.mean : 0, .inv_std = c->saved ? fo.inv_std : 0,
                                   .epsilon = c->epsilon, .norm_dims = c->norm_dims, .has_bias = c->bias != 0,
                                   .zero_centered_scale = c->zero_centered, .deterministic = (int)tu_int(rng, 0, 1)};
    frost_norm_grads bo = {.d_x = maybe_output(g, rng, "d_x", c->dtype, c->rank, c->dims)};
    int64_t pdims[FROST_MAX_RANK];
    for (int i = 0; i < c->norm_dims; ++i)
        pdims[i] = c->dims[c->rank - c->norm_dims + i];
    if (c->scale)
        bo.d_scale = tu_int(rng, 0, 1) ? FROST_TENSOR_AUTO : add_param(g, rng, "d_scale", F32, c);
    if (c->bias)
        bo.d_bias = maybe_output(g, rng, "d_bias", F32, c->norm_dims, pdims);
    TU_OK(c->kind == LN ? frost_graph_add_layernorm_backward(g, &bd, &bo)
                        : frost_graph_add_rmsnorm_backward(g, &bd, &bo));
    R->t[T_DX].id = bo.d_x, R->t[T_DSCALE].id = bo.d_scale, R->t[T_DBIAS].id = bo.d_bias;
}

static void run_case(int index, const norm_case *c, uint64_t seed)
{
    char desc[400];
    describe(c, desc, sizeof desc);
    tu_set_context("test_norm_ref", seed, index, desc);
    tu_rng rng = tu_rng_make(seed + 7919u * (uint64_t)index);
    run R = {.c = c};
    frost_graph *g = NULL;
    frost_binding bind[T_COUNT];
    int nb = 0, f0 = tu_failures();
    void *ws = NULL;
    row_data d = {0};
    R.rows = prod(c->dims, c->rank - c->norm_dims);
    R.cols = prod(c->dims + c->rank - c->norm_dims, c->norm_dims);
    TU_OK(frost_graph_create(cpu, &g));
    add_ops(g, &rng, &R);
    TU_OK(frost_graph_build(g, NULL));
    if (tu_failures() != f0)
        goto out;
    char report[4096];
    TU_OK(frost_graph_explain(g, report, sizeof report, NULL));
    if (!strstr(report, c->kind == LN ? "layernorm_fwd" : "rmsnorm_fwd") || !strstr(report, "engine: ref"))
        tu_failf("explain does not show the op on the ref engine:\n%s", report);
    size_t ws_bytes = 0;
    TU_OK(frost_graph_workspace_size(g, &ws_bytes));
    ws = ws_bytes ? malloc(ws_bytes) : NULL;
    nb = tu_slots_alloc(g, R.t, T_COUNT, bind);
    tu_buf_fill_uniform(&R.t[T_X].buf, &rng, -2.0 + c->offset, 2.0 + c->offset);
    if (c->scale)
        tu_buf_fill_uniform(&R.t[T_SCALE].buf, &rng, c->zero_centered ? -0.5 : 0.5, c->zero_centered ? 0.5 : 1.5);
    if (c->bias)
        tu_buf_fill_uniform(&R.t[T_BIAS].buf, &rng, -1.0, 1.0);
    if (c->backward)
        tu_buf_fill_uniform(&R.t[T_DY].buf, &rng, -1.0, 1.0);
    for (int s = T_Y; s < T_COUNT; ++s)
        if (R.t[s].id && s != T_DY)
            tu_buf_poison(&R.t[s].buf);
    TU_OK(frost_graph_execute(g, bind, nb, ws, NULL));
    tu_slots_guard_check(R.t, T_COUNT, tnames);
    size_t n = (size_t)R.cols + 1;
    d.x = malloc(5 * n * sizeof(double));
    d.w = d.x + n, d.b = d.w + n, d.dy = d.b + n, d.tmp = d.dy + n;
    check_forward(&R, &d);
    if (c->backward)
        check_backward(&R, &d);
    /* a second execute on poisoned outputs gives the same bits (fixed-order reductions) */
    tu_slots_same_on_reexecute(g, bind, nb, ws, R.t, T_Y, T_COUNT, T_DY, tnames);
out:
    free(d.x);
    free(ws);
    tu_slots_free(R.t, T_COUNT);
    frost_graph_destroy(g);
}

static norm_case random_case(tu_rng *r)
{
    static const int64_t sizes[] = {1, 2, 3, 5, 7, 16, 33, 64, 129, 256, 1000, 2048};
    static const double eps[] = {0, 1e-6, 1e-3, 0.25};
    static const frost_dtype dtypes[] = {F32, F16, BF16};
    norm_case c = {0};
    c.kind = (int)tu_int(r, 0, 1);
    c.rank = (int)tu_int(r, 2, 4);
    c.norm_dims = (int)tu_int(r, 1, 2);
    c.dtype = dtypes[tu_int(r, 0, 2)];
    int outer = c.rank - c.norm_dims;
    int64_t cols = 1, rows = 1;
    for (int i = outer; i < c.rank; ++i) {
        c.dims[i] = sizes[tu_int(r, 0, i == outer && c.norm_dims == 2 ? 7 : 11)];
        cols *= c.dims[i];
    }
    for (int i = 0; i < outer; ++i) {
        int64_t limit = 12000 / (cols * rows);
        c.dims[i] = tu_int(r, 0, 15) == 0 ? 0 : tu_int(r, 1, limit < 1 ? 1 : limit > 6 ? 6 : limit);
        rows *= c.dims[i] ? c.dims[i] : 1;
    }
    c.scale = (int)tu_int(r, 0, 2);
    c.bias = (int)tu_int(r, 0, 2);
    c.zero_centered = tu_int(r, 0, 3) == 0;
    c.inference = tu_int(r, 0, 3) == 0;
    c.layout = (int)tu_int(r, 0, 4);
    if (c.layout == BCAST && (outer == 0 || c.dims[0] < 2))
        c.layout = GAPPED;
    c.epsilon = eps[tu_int(r, 0, 3)];
    c.offset = tu_int(r, 0, 2) == 0 ? 2.0 : 0.0;
    c.backward = tu_int(r, 0, 5) == 0 ? NO_BWD : BWD_FORMULA;
    if (c.backward && c.dtype == F32 && rows * cols <= 512 && cols <= 64)
        c.backward = BWD_FD;
    c.saved = !c.inference && tu_int(r, 0, 1);
    return c;
}

static void run_index(frost_context *ctx, int index, uint64_t seed)
{
    norm_case c;
    (void)ctx; /* run_case uses the file's context */
    if (index < NUM_TABLE) {
        c = table[index];
    } else {
        tu_rng r = tu_rng_make(seed * 31u + (uint64_t)index);
        c = random_case(&r);
    }
    run_case(index, &c, seed);
}

int main(void)
{
    return tu_ref_main(&cpu, 20261202, NUM_TABLE + NUM_RANDOM, norm_ref_validation_walk, run_index);
}
