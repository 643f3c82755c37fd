/*
 * test_adanorm_ref.c — AdaLayerNorm on the reference engine, forward and backward.
 *
 * AdaLayerNorm is LayerNorm whose scale and bias have rank(x) and may carry x's outer
 * dims (x [B, S, C], scale and bias [B, 1, C]): row r reads the parameter row at its own
 * outer index with the parameter's 1-dims set to 0.  What is checked, and against what:
 *   - Forward y (and mean / inv_std) against a naive fp64 formula written here (one-pass
 *     moments, parameter rows found by decomposing the row index), on the very values
 *     the engine read: rtol 2.5 u(dtype), since the only difference is the last rounding.
 *   - Backward of small f32 problems against fp64 central finite differences of that
 *     naive forward for L = Σ d_y ∘ y: d_x per row, and d_scale / d_bias per parameter
 *     element, perturbing one element and summing the loss over the rows that read it.
 *   - Backward of larger and low-precision cases against the closed form evaluated here.
 *   - Outputs sit in NaN-poisoned guarded buffers; a second execute must give the same
 *     bits (fixed-order sums).
 * test_adanorm_validation.c walks the add functions' refusals and checks that shared
 * ([1, 1, C]) parameters give exactly LayerNorm's bits.
 * Parameter patterns: a bit mask per parameter says which outer dims of x it carries
 * ("carry" 1 on [B, S, C] is [B, 1, C]; 2 is [1, S, C]; 3 is [B, S, C]; 0 is [1, 1, C]).
 * FROST_TEST_SEED / FROST_TEST_CASE rerun one case; each failure prints the reproducer.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref_test_util.h"

enum { PACKED, GAPPED, PERMUTED };
enum { NO_BWD, BWD_FORMULA, BWD_FD };
enum { T_X, T_SCALE, T_BIAS, T_Y, T_MEAN, T_RSTD, T_DY, T_DX, T_DSCALE, T_DBIAS, T_COUNT };

static const char *const tnames[T_COUNT] = {"x",       "scale", "bias", "y",       "mean",
                                            "inv_std", "d_y",   "d_x",  "d_scale", "d_bias"};

typedef struct ada_case {
    int rank;
    int64_t dims[4];
    int norm_dims;
    frost_dtype dtype;
    int scale, bias;                  /* 0 absent, 1 f32, 2 x's dtype */
    unsigned scale_carry, bias_carry; /* bit i: the parameter carries x's outer dim i (else 1) */
    int zero_centered;
    int inference;
    int layout;
    double epsilon; /* 0: the default 1e-5 */
    int backward;   /* NO_BWD, BWD_FORMULA, BWD_FD */
    int saved;      /* backward reads the forward's saved statistics */
} ada_case;

#define F32 FROST_F32
#define F16 FROST_F16
#define BF16 FROST_BF16
static const ada_case table[] = {
    /* rank dims nd dtype scale bias s_carry b_carry zc inf layout eps bwd saved */
    {3, {2, 3, 8}, 1, F32, 1, 1, 1, 1, 0, 0, PACKED, 0, BWD_FD, 1},       /* [B,S,C], [B,1,C] */
    {3, {3, 4, 6}, 1, F32, 1, 1, 1, 0, 1, 0, GAPPED, 0, BWD_FD, 0},       /* bias shared, zero-centred */
    {3, {2, 3, 5}, 1, F32, 1, 1, 2, 3, 0, 0, PERMUTED, 1e-3, BWD_FD, 1},  /* [1,S,C] and [B,S,C] */
    {4, {2, 2, 3, 4}, 1, F32, 1, 1, 5, 1, 0, 0, GAPPED, 0, BWD_FD, 1},    /* [B,1,T,C] */
    {3, {3, 2, 4}, 2, F32, 1, 1, 1, 1, 0, 0, GAPPED, 0, BWD_FD, 0},       /* norm_dims 2: [B,S,C] params */
    {2, {3, 4}, 2, F32, 1, 1, 0, 0, 0, 0, PACKED, 0, BWD_FD, 1},          /* norm_dims = rank */
    {3, {3, 2, 5}, 1, F32, 0, 1, 0, 1, 0, 0, PACKED, 0, BWD_FD, 0},       /* bias only, per sample */
    {3, {2, 1, 8}, 1, F32, 2, 2, 1, 1, 1, 0, GAPPED, 0, BWD_FD, 1},       /* S = 1 */
    {3, {0, 3, 8}, 1, F32, 1, 1, 1, 1, 0, 0, GAPPED, 0, BWD_FORMULA, 1},  /* B = 0: zero parameter rows */
    {3, {0, 3, 8}, 1, BF16, 2, 1, 0, 0, 0, 0, PACKED, 0, BWD_FORMULA, 0}, /* rows = 0, shared params */
    {3, {4, 64, 1000}, 1, BF16, 2, 2, 1, 1, 0, 0, GAPPED, 1e-6, BWD_FORMULA, 1},
    {3, {2, 16, 4096}, 1, F16, 1, 1, 1, 1, 1, 0, PACKED, 0, BWD_FORMULA, 1},
    {3, {2, 24, 128}, 1, F32, 1, 1, 1, 1, 0, 0, PERMUTED, 0, BWD_FORMULA, 0},
    {3, {3, 5, 128}, 1, F32, 1, 0, 1, 0, 0, 1, PERMUTED, 0, NO_BWD, 0}, /* inference, scale only */
    {3, {2, 4, 16}, 1, F16, 0, 2, 0, 1, 0, 0, GAPPED, 0, BWD_FORMULA, 0},
};
#define NUM_TABLE ((int)(sizeof table / sizeof table[0]))
#define NUM_RANDOM 40

static frost_context *cpu;

typedef struct run {
    const ada_case *c;
    int outer;
    int64_t rows, cols;
    int64_t prow_count[T_COUNT]; /* parameter rows of scale/bias/d_scale/d_bias */
    tu_slot t[T_COUNT];
} run;

static int64_t prod(const int64_t *d, int n)
{
    int64_t p = 1;
    for (int i = 0; i < n; ++i)
        p *= d[i];
    return p;
}

static void pick_strides(tu_rng *r, int layout, int rank, const int64_t *dims, int64_t *strides)
{
    int order[FROST_MAX_RANK];
    memset(strides, 0, sizeof(int64_t) * FROST_MAX_RANK);
    if (layout == PACKED)
        return;
    for (int i = 0; i < rank; ++i)
        order[i] = i;
    if (layout == PERMUTED)
        tu_shuffle(r, order, rank);
    tu_gapped_strides(r, rank, dims, order, 3, 1, strides);
}

/* A parameter's dims: x's outer dims where it carries them, else 1; then the normalized dims. */
static void param_dims(const ada_case *c, unsigned carry, int64_t *dims)
{
    const int outer = c->rank - c->norm_dims;
    for (int i = 0; i < c->rank; ++i)
        dims[i] = i >= outer || (carry >> i & 1u) ? c->dims[i] : 1;
}

/* A tensor with a random layout (packed, gapped or permuted-gapped) or AUTO for outputs. */
static frost_tensor declare(frost_graph *g, tu_rng *r, const char *name, frost_dtype dt, int rank, const int64_t *dims,
                            int may_be_auto)
{
    int64_t st[FROST_MAX_RANK];
    if (may_be_auto && tu_int(r, 0, 1))
        return FROST_TENSOR_AUTO;
    pick_strides(r, (int)tu_int(r, 0, 2), rank, dims, st);
    return tu_add(g, name, dt, rank, dims, st);
}

static double at(const run *R, int slot, int64_t f)
{
    return tu_buf_get(&R->t[slot].buf, tu_flat_off(&R->t[slot].buf, f));
}

/* The parameter row of x's row r, for a parameter carrying the outer dims in `carry`. */
static int64_t prow_of(const run *R, unsigned carry, int64_t r)
{
    int64_t q = 0, step = 1;
    for (int i = R->outer - 1; i >= 0; --i) {
        int64_t d = R->c->dims[i], idx = r % d;
        r /= d;
        if (carry >> i & 1u) {
            q += idx * step;
            step *= d;
        }
    }
    return q;
}

/* Host copies of one row in fp64: x, the effective scale, the bias, d_y; tmp is scratch. */
typedef struct row_data {
    double *x, *w, *b, *dy, *tmp;
} row_data;

static double eps_of(const ada_case *c)
{
    return c->epsilon > 0 ? c->epsilon : 1e-5;
}

static void load_row(const run *R, int64_t r, row_data *d)
{
    const ada_case *c = R->c;
    const int64_t qs = prow_of(R, c->scale_carry, r), qb = prow_of(R, c->bias_carry, r);
    for (int64_t j = 0; j < R->cols; ++j) {
        d->x[j] = at(R, T_X, r * R->cols + j);
        double w = c->scale ? at(R, T_SCALE, qs * R->cols + j) : 1.0;
        d->w[j] = c->scale && c->zero_centered ? 1.0 + w : w;
        d->b[j] = c->bias ? at(R, T_BIAS, qb * R->cols + j) : 0.0;
        d->dy[j] = R->t[T_DY].id ? at(R, T_DY, r * R->cols + j) : 0.0;
    }
}

/* Naive LayerNorm of one row (fp64): y (may be NULL), mean and rstd. */
static void naive_row(const double *x, const double *w, const double *b, int64_t n, double eps, double *y,
                      double *mean_out, double *rstd_out)
{
    double s1 = 0, s2 = 0;
    for (int64_t i = 0; i < n; ++i)
        s1 += x[i], s2 += x[i] * x[i];
    double mean = s1 / (double)n, var = s2 / (double)n - mean * mean;
    double rstd = 1.0 / sqrt((var > 0 ? var : 0) + eps);
    for (int64_t i = 0; y && i < n; ++i)
        y[i] = (x[i] - mean) * rstd * w[i] + b[i];
    *mean_out = mean, *rstd_out = rstd;
}

static double row_loss(const row_data *d, int64_t n, double eps)
{
    double mean, rstd, l = 0;
    naive_row(d->x, d->w, d->b, n, eps, d->tmp, &mean, &rstd);
    for (int64_t i = 0; i < n; ++i)
        l += d->dy[i] * d->tmp[i];
    return l;
}

/* row_loss of one row's copies, as tu_central_diff wants it. */
typedef struct row_loss_ctx {
    const row_data *d;
    int64_t n;
    double eps;
} row_loss_ctx;

static double row_loss_of(void *ctx)
{
    const row_loss_ctx *rl = ctx;
    return row_loss(rl->d, rl->n, rl->eps);
}

static void check_forward(const run *R, row_data *d)
{
    const ada_case *c = R->c;
    const int64_t n = R->rows * R->cols, rows = R->rows;
    double *got = malloc(sizeof(double) * (size_t)(2 * n + 4 * rows + 1)), *ref = got + n;
    double *st = ref + n; /* got mean | ref mean | got rstd | ref rstd */
    double mag = 0, xmag = 0;
    for (int64_t r = 0; r < rows; ++r) {
        load_row(R, r, d);
        naive_row(d->x, d->w, d->b, R->cols, eps_of(c), ref + r * R->cols, &st[rows + r], &st[3 * rows + r]);
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
    free(got);
}

/* dL/d(parameter element (q, j)) by central differences over the rows that read row q. */
static double fd_param(const run *R, row_data *d, int which, int64_t q, int64_t j)
{
    const ada_case *c = R->c;
    const unsigned carry = which == T_DSCALE ? c->scale_carry : c->bias_carry;
    const double h = 1e-6;
    double l[2] = {0, 0};
    for (int64_t r = 0; r < R->rows; ++r) {
        if (prow_of(R, carry, r) != q)
            continue;
        load_row(R, r, d);
        double *param = which == T_DSCALE ? d->w : d->b, p0 = param[j]; /* w_eff = w or 1 + w: same step */
        for (int side = 0; side < 2; ++side) {
            param[j] = p0 + (side ? -h : h);
            l[side] += row_loss(d, R->cols, eps_of(c));
        }
    }
    return (l[0] - l[1]) / (2 * h);
}

/* Backward: closed form (evaluated here) or finite differences of the naive forward. */
static void check_backward(const run *R, row_data *d)
{
    const ada_case *c = R->c;
    const int64_t n = R->rows * R->cols, C = R->cols;
    const int fd = c->backward == BWD_FD;
    const int saved_mean = c->saved && R->t[T_MEAN].id, saved_rstd = c->saved && R->t[T_RSTD].id;
    const int64_t ns = R->prow_count[T_DSCALE] * C, nb = R->prow_count[T_DBIAS] * C;
    double *got = calloc((size_t)(3 * n + 3 * ns + 2 * nb + 1), sizeof(double)), *ref = got + n;
    double *sgot = ref + n, *sref = sgot + ns, *bgot = sref + ns, *bref = bgot + nb, *slack = bref + nb;
    double *sslack = slack + n; /* d_bias takes no statistic: no slack */
    double mag = 0, pmag = 0;
    for (int64_t r = 0; r < R->rows; ++r) {
        double mean, rstd, sg = 0, sgx = 0, sabsg = 0;
        const int64_t qs = prow_of(R, c->scale_carry, r), qb = prow_of(R, c->bias_carry, r);
        load_row(R, r, d);
        naive_row(d->x, d->w, d->b, C, eps_of(c), NULL, &mean, &rstd);
        if (saved_mean)
            mean = at(R, T_MEAN, r);
        if (saved_rstd)
            rstd = at(R, T_RSTD, r);
        for (int64_t j = 0; j < C; ++j) {
            double xh = (d->x[j] - mean) * rstd, g = d->dy[j] * d->w[j];
            sg += g, sgx += g * xh, sabsg += fabs(g);
            if (ns) {
                sref[qs * C + j] += d->dy[j] * xh;
                sslack[qs * C + j] += tu_norm_param_slack(saved_mean, saved_rstd, mean, rstd, xh, d->dy[j]);
            }
            if (nb)
                bref[qb * C + j] += d->dy[j];
            pmag = fmax(pmag, (fabs(d->dy[j] * xh) + fabs(d->dy[j])) * (double)R->rows);
        }
        for (int64_t j = 0; j < C; ++j) {
            double xh = (d->x[j] - mean) * rstd, g = d->dy[j] * d->w[j];
            ref[r * C + j] = rstd * (g - sg / (double)C - xh * sgx / (double)C);
            mag = fmax(mag, rstd * (fabs(g) + fabs(sg / (double)C) + fabs(xh * sgx / (double)C)));
            got[r * C + j] = at(R, T_DX, r * C + j);
            slack[r * C + j] = tu_norm_dx_slack(saved_mean, saved_rstd, mean, rstd, xh, g, sg / (double)C,
                                                sgx / (double)C, sabsg / (double)C);
        }
        row_loss_ctx rl = {d, C, eps_of(c)};
        for (int64_t j = 0; fd && j < C; ++j) /* dL/dx by central differences, this row only */
            ref[r * C + j] = tu_central_diff(&d->x[j], 1e-6, row_loss_of, &rl);
    }
    double patol = 1e-12 * pmag + 1e-30, prtol = 2.5 * tu_eps(F32);
    if (fd) {
        double m = 0, pm = 0;
        for (int64_t i = 0; i < ns; ++i)
            sref[i] = fd_param(R, d, T_DSCALE, i / C, i % C), pm = fmax(pm, fabs(sref[i]));
        for (int64_t i = 0; i < nb; ++i)
            bref[i] = fd_param(R, d, T_DBIAS, i / C, i % C), pm = fmax(pm, fabs(bref[i]));
        for (int64_t i = 0; i < n; ++i)
            m = fmax(m, fabs(ref[i]));
        tu_take_slack(got, ref, slack, n);
        tu_expect_close("d_x (vs finite differences)", got, ref, n, 2e-5 * fmax(1, m), 1e-4);
        patol = 2e-5 * fmax(1, pm);
        prtol = 1e-4;
    } else {
        tu_expect_close("d_x", got, ref, n, 1e-12 * mag + tu_subnormal_floor(c->dtype), 2.5 * tu_eps(c->dtype));
    }
    for (int64_t i = 0; i < ns; ++i)
        sgot[i] = at(R, T_DSCALE, i);
    for (int64_t i = 0; i < nb; ++i)
        bgot[i] = at(R, T_DBIAS, i);
    if (fd)
        tu_take_slack(sgot, sref, sslack, ns);
    if (ns)
        tu_expect_close(fd ? "d_scale (vs finite differences)" : "d_scale", sgot, sref, ns, patol, prtol);
    if (nb)
        tu_expect_close(fd ? "d_bias (vs finite differences)" : "d_bias", bgot, bref, nb, patol, prtol);
    free(got);
}

static void describe(const ada_case *c, char *buf, size_t cap)
{
    static const char *const layouts[] = {"packed", "gapped", "permuted"};
    static const char *const bwds[] = {"none", "formula", "finite-diff"};
    int len = snprintf(buf, cap, "adalayernorm dims=[");
    for (int i = 0; i < c->rank && len > 0 && (size_t)len < cap; ++i)
        len += snprintf(buf + len, cap - (size_t)len, "%s%lld", i ? "," : "", (long long)c->dims[i]);
    if (len > 0 && (size_t)len < cap)
        snprintf(buf + len, cap - (size_t)len,
                 "] norm_dims=%d %s scale=%d carry=%u bias=%d carry=%u zero_centered=%d %s layout=%s eps=%g bwd=%s "
                 "saved=%d",
                 c->norm_dims, frost_dtype_name(c->dtype), c->scale, c->scale_carry, c->bias, c->bias_carry,
                 c->zero_centered, c->inference ? "inference" : "training", layouts[c->layout], c->epsilon,
                 bwds[c->backward], c->saved);
}

static void add_ops(frost_graph *g, tu_rng *rng, run *R)
{
    const ada_case *c = R->c;
    int64_t st[FROST_MAX_RANK], sdims[FROST_MAX_RANK], sd[FROST_MAX_RANK], bd[FROST_MAX_RANK];
    for (int i = 0; i < c->rank; ++i)
        sdims[i] = i < R->outer ? c->dims[i] : 1;
    param_dims(c, c->scale_carry, sd);
    param_dims(c, c->bias_carry, bd);
    pick_strides(rng, c->layout, c->rank, c->dims, st);
    R->t[T_X].id = tu_add(g, "x", c->dtype, c->rank, c->dims, st);
    if (c->scale)
        R->t[T_SCALE].id = declare(g, rng, "scale", c->scale == 1 ? F32 : c->dtype, c->rank, sd, 0);
    if (c->bias)
        R->t[T_BIAS].id = declare(g, rng, "bias", c->bias == 1 ? F32 : c->dtype, c->rank, bd, 0);
    frost_norm_desc fd = {.x = R->t[T_X].id,
                          .scale = R->t[T_SCALE].id,
                          .bias = R->t[T_BIAS].id,
                          .epsilon = c->epsilon,
                          .norm_dims = c->norm_dims,
                          .phase = c->inference ? FROST_NORM_INFERENCE : FROST_NORM_TRAINING,
                          .zero_centered_scale = c->zero_centered};
    frost_norm_outputs fo = {.y = declare(g, rng, "y", c->dtype, c->rank, c->dims, 1)};
    if (!c->inference && (c->saved || tu_int(rng, 0, 1)))
        fo.mean = declare(g, rng, "mean", F32, c->rank, sdims, 1);
    if (!c->inference && (c->saved || tu_int(rng, 0, 1)))
        fo.inv_std = declare(g, rng, "inv_std", F32, c->rank, sdims, 1);
    TU_OK(frost_graph_add_adalayernorm(g, &fd, &fo));
    R->t[T_Y].id = fo.y, R->t[T_MEAN].id = fo.mean, R->t[T_RSTD].id = fo.inv_std;
    if (!c->backward)
        return;
    pick_strides(rng, c->layout, c->rank, c->dims, st);
    R->t[T_DY].id = tu_add(g, "d_y", c->dtype, c->rank, c->dims, st);
    frost_norm_backward_desc bdesc = {.x = R->t[T_X].id,
                                      .d_y = R->t[T_DY].id,
                                      .scale = R->t[T_SCALE].id,
                                      .mean = c->saved ? fo.mean : 0,
                                      .inv_std = c->saved ? fo.inv_std : 0,
                                      .epsilon = c->epsilon,
                                      .norm_dims = c->norm_dims,
                                      .has_bias = c->bias != 0,
                                      .zero_centered_scale = c->zero_centered,
                                      .deterministic = (int)tu_int(rng, 0, 1)};
    frost_norm_grads bo = {.d_x = declare(g, rng, "d_x", c->dtype, c->rank, c->dims, 1)};
    if (c->scale)
        bo.d_scale = declare(g, rng, "d_scale", F32, c->rank, sd, 1);
    /* AUTO d_bias takes scale's dims: only right when the bias has them too */
    if (c->bias)
        bo.d_bias = declare(g, rng, "d_bias", F32, c->rank, bd, c->scale && c->scale_carry == c->bias_carry);
    TU_OK(frost_graph_add_adalayernorm_backward(g, &bdesc, &bo));
    R->t[T_DX].id = bo.d_x, R->t[T_DSCALE].id = bo.d_scale, R->t[T_DBIAS].id = bo.d_bias;
}

/* Does a parameter carrying the outer dims in `carry` have a dim > 1 there? */
static int carries_more_than_one(const ada_case *c, unsigned carry)
{
    for (int i = 0; i < c->rank - c->norm_dims; ++i)
        if ((carry >> i & 1u) && c->dims[i] > 1)
            return 1;
    return 0;
}

/* Runs the graph; on return the buffers hold the outputs of one execute. */
static void run_case(int index, const ada_case *c, uint64_t seed)
{
    char desc[400];
    describe(c, desc, sizeof desc);
    tu_set_context("test_adanorm_ref", seed, index, desc);
    tu_rng rng = tu_rng_make(seed + 7919u * (uint64_t)index);
    run R = {.c = c};
    frost_graph *g = NULL;
    frost_binding bind[T_COUNT];
    int nb = 0, f0 = tu_failures();
    void *ws = NULL;
    row_data d = {0};
    R.outer = c->rank - c->norm_dims;
    R.rows = prod(c->dims, R.outer);
    R.cols = prod(c->dims + R.outer, c->norm_dims);
    TU_OK(frost_graph_create(cpu, &g));
    add_ops(g, &rng, &R);
    TU_OK(frost_graph_build(g, NULL));
    if (tu_failures() != f0)
        goto out;
    char report[4096];
    TU_OK(frost_graph_explain(g, report, sizeof report, NULL));
    if (!strstr(report, "adalayernorm_fwd") || !strstr(report, "engine: ref"))
        tu_failf("explain does not show adalayernorm_fwd on the ref engine:\n%s", report);
    const int per_sample =
        (c->scale && carries_more_than_one(c, c->scale_carry)) || (c->bias && carries_more_than_one(c, c->bias_carry));
    if (per_sample != (strstr(report, " per-sample ") != NULL))
        tu_failf("explain does not say whether the parameters vary per sample:\n%s", report);
    size_t ws_bytes = 0;
    TU_OK(frost_graph_workspace_size(g, &ws_bytes));
    ws = ws_bytes ? malloc(ws_bytes) : NULL;
    nb = tu_slots_alloc(g, R.t, T_COUNT, bind);
    for (int s = T_DSCALE; s <= T_DBIAS; ++s) /* parameter rows of a gradient: product of its outer dims */
        if (R.t[s].id)
            R.prow_count[s] = prod(R.t[s].buf.dims, R.outer);
    tu_buf_fill_uniform(&R.t[T_X].buf, &rng, -2.0, 2.0 + (double)(index % 3));
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
    /* a second execute gives the same bits */
    tu_slots_same_on_reexecute(g, bind, nb, ws, R.t, T_Y, T_COUNT, T_DY, tnames);
out:
    free(d.x);
    free(ws);
    tu_slots_free(R.t, T_COUNT);
    frost_graph_destroy(g);
}

static ada_case random_case(tu_rng *r)
{
    static const int64_t sizes[] = {1, 2, 3, 5, 8, 16, 33, 64, 128, 257, 1000};
    static const double eps[] = {0, 1e-6, 1e-3, 0.25};
    static const frost_dtype dtypes[] = {F32, F16, BF16};
    ada_case c = {0};
    c.rank = (int)tu_int(r, 2, 4);
    c.norm_dims = (int)tu_int(r, 1, c.rank == 2 ? 1 : 2);
    c.dtype = dtypes[tu_int(r, 0, 2)];
    int outer = c.rank - c.norm_dims;
    int64_t cols = 1, rows = 1;
    for (int i = outer; i < c.rank; ++i) {
        c.dims[i] = sizes[tu_int(r, 0, c.norm_dims == 2 ? 6 : 10)];
        cols *= c.dims[i];
    }
    for (int i = 0; i < outer; ++i) {
        int64_t limit = 8000 / (cols * rows);
        c.dims[i] = tu_int(r, 0, 19) == 0 ? 0 : tu_int(r, 1, limit < 1 ? 1 : limit > 6 ? 6 : limit);
        rows *= c.dims[i] ? c.dims[i] : 1;
    }
    c.scale = (int)tu_int(r, 0, 2);
    c.bias = (int)tu_int(r, 0, 2);
    c.scale_carry = (unsigned)tu_int(r, 0, (1 << outer) - 1);
    c.bias_carry = tu_int(r, 0, 1) ? c.scale_carry : (unsigned)tu_int(r, 0, (1 << outer) - 1);
    c.zero_centered = tu_int(r, 0, 3) == 0;
    c.inference = tu_int(r, 0, 4) == 0;
    c.layout = (int)tu_int(r, 0, 2);
    c.epsilon = eps[tu_int(r, 0, 3)];
    c.backward = tu_int(r, 0, 5) == 0 ? NO_BWD : BWD_FORMULA;
    if (c.backward && c.dtype == F32 && rows * cols <= 256 && cols <= 32)
        c.backward = BWD_FD;
    c.saved = !c.inference && tu_int(r, 0, 1);
    return c;
}

static void run_index(frost_context *ctx, int index, uint64_t seed)
{
    ada_case c;
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
    return tu_ref_main(&cpu, 20261203, NUM_TABLE + NUM_RANDOM, NULL, run_index);
}
