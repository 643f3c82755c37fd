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

#include "test_util.h"

enum { LN = 0, RMS = 1 };
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
typedef struct tslot {
    frost_tensor id;
    tu_buf buf;
} tslot;

typedef struct run {
    const norm_case *c;
    int64_t rows, cols;
    tslot t[T_COUNT];
} run;

static int64_t prod(const int64_t *d, int n)
{
    int64_t p = 1;
    for (int i = 0; i < n; ++i)
        p *= d[i];
    return p;
}

static void shuffle(tu_rng *r, int *v, int n)
{
    for (int i = n - 1; i > 0; --i) {
        int j = (int)tu_int(r, 0, i), t = v[i];
        v[i] = v[j], v[j] = t;
    }
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
        shuffle(r, order, rank - norm_dims);
    if (layout == PERMUTED)
        shuffle(r, order, rank);
    tu_gapped_strides(r, rank, dims, order, 3, 1, strides);
}

static frost_tensor add(frost_graph *g, const char *name, frost_dtype dt, int rank, const int64_t *dims,
                        const int64_t *strides)
{
    frost_tensor_desc d = {.name = name, .dtype = dt, .rank = rank};
    frost_tensor id = 0;
    for (int i = 0; i < rank; ++i) {
        d.dims[i] = dims[i];
        d.strides[i] = strides ? strides[i] : 0;
    }
    TU_OK(frost_graph_add_tensor(g, &d, &id));
    return id;
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
    return add(g, name, dt, rank, dims, strides);
}

/* Element offset of the flat (row-major over dims) index f. */
static int64_t flat_off(const tu_buf *b, int64_t f)
{
    int64_t off = 0;
    for (int i = b->rank - 1; i >= 0; --i) {
        off += (f % b->dims[i]) * b->strides[i];
        f /= b->dims[i];
    }
    return off;
}

static double at(const run *R, int slot, int64_t f)
{
    return tu_buf_get(&R->t[slot].buf, flat_off(&R->t[slot].buf, f));
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

/* Compares and prints on failure. */
static void expect_close(const char *what, const double *got, const double *ref, int64_t n, double atol,
                         double rtol)
{
    tu_cmp c = tu_compare(got, ref, n, atol, rtol);
    if (c.bad) {
        tu_cmp_print(what, &c);
        tu_failf("%s: %lld of %lld elements outside atol %.3g rtol %.3g", what, (long long)c.bad, (long long)n, atol,
                 rtol);
    }
}

static double subnormal_floor(frost_dtype t)
{
    return t == F16 ? ldexp(1.0, -24) : 1e-30;
}

/* Host copies of one row's inputs in fp64. */
typedef struct row_data {
    double *x, *w, *b, *dy, *tmp;
} row_data;

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
    expect_close("y", got, ref, n, 1e-12 * mag + subnormal_floor(c->dtype), 2.5 * tu_eps(c->dtype));
    if (R->t[T_MEAN].id)
        expect_close("mean", st, st + rows, rows, 1e-12 * xmag + 1e-30, 2.5 * tu_eps(F32));
    if (R->t[T_RSTD].id)
        expect_close("inv_std", st + 2 * rows, st + 3 * rows, rows, 1e-30, 2.5 * tu_eps(F32));
    free(got), free(ref), free(st);
}

/* Backward: closed form (evaluated here) or finite differences of the naive forward. */
static void check_backward(const run *R, row_data *d)
{
    const norm_case *c = R->c;
    const int64_t n = R->rows * R->cols, C = R->cols;
    const int fd = c->backward == BWD_FD;
    double *got = malloc(sizeof(double) * (size_t)(n + 1)), *ref = malloc(sizeof(double) * (size_t)(n + 1));
    double *pgot = calloc((size_t)(4 * C), sizeof(double)), *pref = pgot + 2 * C;
    double mag = 0, pmag = 0, patol, prtol = 2.5 * tu_eps(F32);
    load_params(R, d);
    for (int64_t r = 0; r < R->rows; ++r) {
        double mean, rstd, sg = 0, sgx = 0;
        load_row(R, r, d, 1);
        naive_forward(c->kind, d->x, NULL, NULL, C, eps_of(c), NULL, &mean, &rstd);
        if (R->t[T_MEAN].id && c->saved)
            mean = at(R, T_MEAN, r);
        if (R->t[T_RSTD].id && c->saved)
            rstd = at(R, T_RSTD, r);
        for (int64_t j = 0; j < C; ++j) {
            double xh = (d->x[j] - mean) * rstd, g = d->dy[j] * d->w[j];
            sg += g, sgx += g * xh;
            pref[j] += d->dy[j] * xh, pref[C + j] += d->dy[j];
            pmag = fmax(pmag, (fabs(d->dy[j] * xh) + fabs(d->dy[j])) * (double)R->rows);
        }
        if (c->kind == RMS)
            sg = 0;
        for (int64_t j = 0; j < C; ++j) {
            double xh = (d->x[j] - mean) * rstd, g = d->dy[j] * d->w[j];
            ref[r * C + j] = rstd * (g - sg / (double)C - xh * sgx / (double)C);
            mag = fmax(mag, rstd * (fabs(g) + fabs(sg / (double)C) + fabs(xh * sgx / (double)C)));
            got[r * C + j] = at(R, T_DX, r * C + j);
        }
        if (!fd)
            continue;
        for (int64_t j = 0; j < C; ++j) { /* dL/dx by central differences, this row only */
            const double h = 1e-6, x0 = d->x[j];
            d->x[j] = x0 + h;
            double lp = row_loss(c->kind, d->x, d->w, d->b, d->dy, C, eps_of(c), d->tmp);
            d->x[j] = x0 - h;
            double lm = row_loss(c->kind, d->x, d->w, d->b, d->dy, C, eps_of(c), d->tmp);
            d->x[j] = x0;
            ref[r * C + j] = (lp - lm) / (2 * h);
        }
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
        expect_close("d_x (vs finite differences)", got, ref, n, 2e-5 * fmax(1, m), 1e-4);
        patol = 2e-5 * fmax(1, pm);
        prtol = 1e-4;
    } else {
        expect_close("d_x", got, ref, n, 1e-12 * mag + subnormal_floor(c->dtype), 2.5 * tu_eps(c->dtype));
    }
    for (int64_t j = 0; j < C; ++j) {
        if (R->t[T_DSCALE].id)
            pgot[j] = at(R, T_DSCALE, j);
        if (R->t[T_DBIAS].id)
            pgot[C + j] = at(R, T_DBIAS, j);
    }
    if (R->t[T_DSCALE].id)
        expect_close("d_scale", pgot, pref, C, patol, prtol);
    if (R->t[T_DBIAS].id)
        expect_close("d_bias", pgot + C, pref + C, C, patol, prtol);
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
    shuffle(r, order, rank);
    tu_gapped_strides(r, rank, dims, order, 2, 1, st);
    return add(g, name, dt, rank, dims, st);
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
    R->t[T_X].id = add(g, "x", c->dtype, c->rank, c->dims, st);
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
    R->t[T_DY].id = add(g, "d_y", c->dtype, c->rank, c->dims, st);
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
    for (int s = 0; s < T_COUNT; ++s) {
        frost_tensor_desc td;
        if (!R.t[s].id)
            continue;
        TU_OK(frost_graph_tensor_desc(g, R.t[s].id, &td));
        TU_CHECK(tu_buf_alloc(&R.t[s].buf, td.dtype, td.rank, td.dims, td.strides, 0));
        bind[nb++] = (frost_binding){R.t[s].id, R.t[s].buf.data};
    }
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
    for (int s = 0; s < T_COUNT; ++s)
        if (R.t[s].id)
            tu_guard_check(&R.t[s].buf, tnames[s]);
    size_t n = (size_t)R.cols + 1;
    d.x = malloc(5 * n * sizeof(double));
    d.w = d.x + n, d.b = d.w + n, d.dy = d.b + n, d.tmp = d.dy + n;
    check_forward(&R, &d);
    if (c->backward)
        check_backward(&R, &d);
    /* a second execute on poisoned outputs gives the same bits (fixed-order reductions) */
    for (int s = T_Y; s < T_COUNT; ++s) {
        if (!R.t[s].id || s == T_DY)
            continue;
        tu_buf *b = &R.t[s].buf;
        size_t bytes = (size_t)(b->span + 2 * b->guard) * b->elem_size;
        void *first = malloc(bytes);
        memcpy(first, b->alloc, bytes);
        tu_buf_poison(b);
        TU_OK(frost_graph_execute(g, bind, nb, ws, NULL));
        if (memcmp(first, b->alloc, bytes) != 0)
            tu_failf("%s differs between two executes of the same graph", tnames[s]);
        free(first);
    }
out:
    free(d.x);
    free(ws);
    for (int s = 0; s < T_COUNT; ++s)
        if (R.t[s].id)
            tu_buf_free(&R.t[s].buf);
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

/* ---- the validation walk: every refusal, its status, and a message naming the culprit ---- */
static void expect_fail(frost_status got, frost_status want, const char *needle, const char *expr, int line)
{
    if (got != want)
        tu_failf("line %d: %s returned %s, expected %s (%s)", line, expr, frost_status_name(got),
                 frost_status_name(want), frost_last_error());
    else if (needle && !strstr(frost_last_error(), needle))
        tu_failf("line %d: %s: the message \"%s\" does not name '%s'", line, expr, frost_last_error(), needle);
}
#define EXPECT(call, status, needle) expect_fail((call), (status), (needle), #call, __LINE__)
#define INVALID FROST_INVALID_ARGUMENT

static frost_status fwd(frost_graph *g, int kind, frost_norm_desc d, frost_norm_outputs o)
{
    return kind == LN ? frost_graph_add_layernorm(g, &d, &o) : frost_graph_add_rmsnorm(g, &d, &o);
}

static frost_status bwd(frost_graph *g, int kind, frost_norm_backward_desc d, frost_norm_grads o)
{
    return kind == LN ? frost_graph_add_layernorm_backward(g, &d, &o) : frost_graph_add_rmsnorm_backward(g, &d, &o);
}

typedef frost_norm_desc FD;
typedef frost_norm_outputs FO;
typedef frost_norm_backward_desc BD;
typedef frost_norm_grads BG;

static void validation_walk(void)
{
    tu_set_context("test_norm_ref", 0, -1, "validation walk");
    frost_graph *g = NULL;
    TU_OK(frost_graph_create(cpu, &g));
    const int64_t d3[] = {4, 6, 8}, d3b[] = {4, 6, 9}, st[] = {4, 6, 1}, w1[] = {8}, w1b[] = {7}, w2[] = {6, 8};
    const int64_t wl[] = {1, 1, 8}, wlb[] = {2, 1, 8}, sr[] = {4, 6}, z2[] = {4, 0}, r0[] = {0, 8}, bc[] = {0, 8, 1};
    frost_tensor x = add(g, "vx", F32, 3, d3, NULL), xi = add(g, "vx_i32", FROST_I32, 3, d3, NULL);
    frost_tensor xz = add(g, "vx_zero", F32, 2, z2, NULL), xr0 = add(g, "vx_rows0", F32, 2, r0, NULL);
    frost_tensor w = add(g, "vw", F32, 1, w1, NULL), wb = add(g, "vw_bad", F32, 1, w1b, NULL);
    frost_tensor w2t = add(g, "vw2", F32, 2, w2, NULL), wlt = add(g, "vw_lead", F32, 3, wl, NULL);
    frost_tensor wlbt = add(g, "vw_lead_bad", F32, 3, wlb, NULL), wi = add(g, "vw_i32", FROST_I32, 1, w1, NULL);
    frost_tensor wh = add(g, "vw_f16", F16, 1, w1, NULL);
    frost_tensor y = add(g, "vy", F32, 3, d3, NULL), yb = add(g, "vy_bad", F32, 3, d3b, NULL);
    frost_tensor yh = add(g, "vy_f16", F16, 3, d3, NULL), ybc = add(g, "vy_bcast", F32, 3, d3, bc);
    frost_tensor s = add(g, "vstats", F32, 3, st, NULL), sb = add(g, "vstats_bad", F32, 3, d3, NULL);
    frost_tensor sh = add(g, "vstats_f16", F16, 3, st, NULL), srk = add(g, "vstats_rank", F32, 2, sr, NULL);
    frost_tensor dy = add(g, "vdy", F32, 3, d3, NULL), dyb = add(g, "vdy_bad", F32, 3, d3b, NULL);
    frost_tensor dyh = add(g, "vdy_f16", F16, 3, d3, NULL), dsh = add(g, "vdscale_f16", F16, 1, w1, NULL);
    frost_tensor last = dsh;
    const frost_tensor A = FROST_TENSOR_AUTO;
    FO o = {0};
    BG bo = {0};

    EXPECT(frost_graph_add_rmsnorm(NULL, &(FD){.x = x}, &o), INVALID, "graph");
    EXPECT(frost_graph_add_rmsnorm(g, NULL, &o), INVALID, "descriptor");
    EXPECT(frost_graph_add_layernorm(g, &(FD){.x = x}, NULL), INVALID, "output");
    EXPECT(frost_graph_add_layernorm_backward(NULL, &(BD){.x = x, .d_y = dy}, &bo), INVALID, "graph");
    EXPECT(frost_graph_add_rmsnorm_backward(g, NULL, &bo), INVALID, "descriptor");
    EXPECT(fwd(g, LN, (FD){0}, (FO){0}), INVALID, "x");
    EXPECT(fwd(g, RMS, (FD){.x = 999}, (FO){0}), INVALID, "999");
    EXPECT(fwd(g, RMS, (FD){.x = x, .scale = 555}, (FO){0}), INVALID, "555");
    EXPECT(fwd(g, LN, (FD){.x = x, .norm_dims = 4}, (FO){0}), INVALID, "norm_dims");
    EXPECT(fwd(g, LN, (FD){.x = x, .norm_dims = -1}, (FO){0}), INVALID, "norm_dims");
    EXPECT(fwd(g, RMS, (FD){.x = xi}, (FO){0}), INVALID, "vx_i32");
    EXPECT(fwd(g, RMS, (FD){.x = xz}, (FO){0}), INVALID, "vx_zero");
    EXPECT(fwd(g, RMS, (FD){.x = x, .scale = wh}, (FO){0}), INVALID, "vw_f16");
    EXPECT(fwd(g, RMS, (FD){.x = x, .scale = wi}, (FO){0}), INVALID, "vw_i32");
    EXPECT(fwd(g, RMS, (FD){.x = x, .scale = wb}, (FO){0}), INVALID, "vw_bad");
    EXPECT(fwd(g, LN, (FD){.x = x, .bias = wb}, (FO){0}), INVALID, "vw_bad");
    EXPECT(fwd(g, LN, (FD){.x = x, .scale = wlbt}, (FO){0}), INVALID, "vw_lead_bad");
    EXPECT(fwd(g, LN, (FD){.x = x, .scale = w2t}, (FO){0}), INVALID, "vw2"); /* rank 2 with norm_dims 1 */
    EXPECT(fwd(g, LN, (FD){.x = x, .epsilon = -1.0}, (FO){0}), INVALID, "epsilon");
    EXPECT(fwd(g, LN, (FD){.x = x, .epsilon = NAN}, (FO){0}), INVALID, "epsilon");
    EXPECT(fwd(g, LN, (FD){.x = x, .phase = (frost_norm_phase)7}, (FO){0}), INVALID, "phase");
    EXPECT(fwd(g, LN, (FD){.x = x}, (FO){.y = yb}), INVALID, "vy_bad");
    EXPECT(fwd(g, LN, (FD){.x = x}, (FO){.y = yh}), INVALID, "vy_f16");
    EXPECT(fwd(g, LN, (FD){.x = x}, (FO){.y = ybc}), INVALID, "vy_bcast");
    EXPECT(fwd(g, LN, (FD){.x = x}, (FO){.y = x}), INVALID, "vx");
    EXPECT(fwd(g, LN, (FD){.x = x, .scale = w}, (FO){.y = w}), INVALID, "vw");
    EXPECT(fwd(g, LN, (FD){.x = x}, (FO){.y = 777}), INVALID, "777");
    EXPECT(fwd(g, RMS, (FD){.x = x}, (FO){.y = A, .mean = A}), INVALID, "mean");
    EXPECT(fwd(g, LN, (FD){.x = x, .phase = FROST_NORM_INFERENCE}, (FO){.y = A, .inv_std = A}), INVALID, "inv_std");
    EXPECT(fwd(g, LN, (FD){.x = x}, (FO){.mean = sb}), INVALID, "vstats_bad");
    EXPECT(fwd(g, LN, (FD){.x = x}, (FO){.inv_std = sh}), INVALID, "vstats_f16");
    EXPECT(fwd(g, LN, (FD){.x = x}, (FO){.inv_std = srk}), INVALID, "vstats_rank");
    EXPECT(fwd(g, LN, (FD){.x = x}, (FO){.mean = s, .inv_std = s}), INVALID, "vstats");
    /* backward */
    EXPECT(bwd(g, LN, (BD){.x = x}, (BG){0}), INVALID, "d_y");
    EXPECT(bwd(g, LN, (BD){.d_y = dy}, (BG){0}), INVALID, "x");
    EXPECT(bwd(g, LN, (BD){.x = x, .d_y = dyb}, (BG){0}), INVALID, "vdy_bad");
    EXPECT(bwd(g, RMS, (BD){.x = x, .d_y = dyh}, (BG){0}), INVALID, "vdy_f16");
    EXPECT(bwd(g, RMS, (BD){.x = x, .d_y = dy, .mean = s}, (BG){0}), INVALID, "mean");
    EXPECT(bwd(g, LN, (BD){.x = x, .d_y = dy, .mean = sb}, (BG){0}), INVALID, "vstats_bad");
    EXPECT(bwd(g, LN, (BD){.x = x, .d_y = dy, .inv_std = sh}, (BG){0}), INVALID, "vstats_f16");
    EXPECT(bwd(g, LN, (BD){.x = x, .d_y = dy, .scale = wb}, (BG){0}), INVALID, "vw_bad");
    EXPECT(bwd(g, LN, (BD){.x = x, .d_y = dy, .norm_dims = 9}, (BG){0}), INVALID, "norm_dims");
    EXPECT(bwd(g, LN, (BD){.x = x, .d_y = dy, .epsilon = -2}, (BG){0}), INVALID, "epsilon");
    EXPECT(bwd(g, LN, (BD){.x = x, .d_y = dy}, (BG){.d_scale = A}), INVALID, "d_scale");
    EXPECT(bwd(g, LN, (BD){.x = x, .d_y = dy, .scale = w}, (BG){.d_bias = A}), INVALID, "d_bias");
    EXPECT(bwd(g, LN, (BD){.x = x, .d_y = dy}, (BG){.d_x = dy}), INVALID, "vdy");
    EXPECT(bwd(g, LN, (BD){.x = x, .d_y = dy}, (BG){.d_x = yb}), INVALID, "vy_bad");
    EXPECT(bwd(g, LN, (BD){.x = x, .d_y = dy, .scale = w}, (BG){.d_scale = dsh}), INVALID, "vdscale_f16");
    EXPECT(bwd(g, LN, (BD){.x = x, .d_y = dy, .scale = w}, (BG){.d_scale = wb}), INVALID, "vw_bad");

    /* a refused call leaves the graph as it was: the next tensor gets the next id */
    TU_CHECK(add(g, "vnext", F32, 1, w1, NULL) == last + 1);

    /* accepted edges: norm_dims == rank, leading-1 scale, rank-2 scale over 2 dims, rows = 0 */
    o = (FO){0};
    TU_OK(frost_graph_add_rmsnorm(g, &(FD){.x = x, .norm_dims = 3}, &o));
    TU_CHECK(o.y != 0 && o.y != A && o.mean == 0 && o.inv_std == 0);
    TU_OK(fwd(g, LN, (FD){.x = x, .scale = wlt, .bias = w}, (FO){0}));
    TU_OK(fwd(g, LN, (FD){.x = x, .scale = w2t, .norm_dims = 2}, (FO){0}));
    TU_OK(fwd(g, RMS, (FD){.x = xr0, .scale = w}, (FO){.inv_std = A}));
    /* one writer per tensor: across nodes and within one call */
    TU_OK(fwd(g, LN, (FD){.x = x}, (FO){.y = y, .mean = s}));
    EXPECT(fwd(g, RMS, (FD){.x = x}, (FO){.y = y}), INVALID, "vy");
    EXPECT(fwd(g, LN, (FD){.x = x}, (FO){.inv_std = s}), INVALID, "vstats");
    EXPECT(bwd(g, LN, (BD){.x = x, .d_y = dy}, (BG){.d_x = y}), INVALID, "vy");
    bo = (BG){.d_scale = A, .d_bias = A};
    TU_OK(frost_graph_add_layernorm_backward(g, &(BD){.x = x, .d_y = dy, .scale = wlt, .has_bias = 1}, &bo));
    frost_tensor_desc td;
    TU_OK(frost_graph_tensor_desc(g, bo.d_scale, &td)); /* f32 with scale's dims */
    TU_CHECK(td.dtype == F32 && td.rank == 3 && td.dims[0] == 1 && td.dims[2] == 8);
    TU_OK(frost_graph_tensor_desc(g, bo.d_x, &td));
    TU_CHECK(td.dtype == F32 && td.rank == 3 && td.dims[1] == 6);

    /* after build nothing can be added */
    TU_OK(frost_graph_build(g, NULL));
    EXPECT(fwd(g, RMS, (FD){.x = x}, (FO){0}), FROST_BAD_STATE, "frost_graph_add_rmsnorm");
    EXPECT(bwd(g, LN, (BD){.x = x, .d_y = dy}, (BG){0}), FROST_BAD_STATE, "frost_graph_add_layernorm_backward");
    frost_graph_destroy(g);
}

int main(void)
{
    const uint64_t seed = tu_seed(20261202);
    const int only = tu_case_filter();
    int run_count = 0;
    TU_OK(frost_context_create(NULL, &cpu));
    if (!cpu)
        return tu_finish(0);
    if (only < 0) {
        tu_case_begin();
        validation_walk();
        tu_case_end();
        ++run_count;
    }
    for (int i = 0; i < NUM_TABLE + NUM_RANDOM; ++i) {
        if (only >= 0 && only != i)
            continue;
        norm_case c;
        if (i < NUM_TABLE) {
            c = table[i];
        } else {
            tu_rng r = tu_rng_make(seed * 31u + (uint64_t)i);
            c = random_case(&r);
        }
        tu_case_begin();
        run_case(i, &c, seed);
        tu_case_end();
        ++run_count;
    }
    frost_context_destroy(cpu);
    return tu_finish(run_count);
}
