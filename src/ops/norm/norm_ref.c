/*
 * norm_ref.c — the reference engine for LayerNorm, RMSNorm and AdaLayerNorm, forward and
 * backward.
 *
 * Plain C on host pointers, fp64 accumulation, any strides (the problem already split
 * them into a per-row outer part and a per-column inner part), every dtype and option.
 * It is the oracle the CUDA kernels are tested against, so it favours the obvious
 * algorithm over speed: statistics in two passes (mean, then the sum of squared
 * deviations), every element read through frost__load_elem and written once through
 * frost__store_elem (one rounding, from fp64 to the output dtype).
 *
 * Math per row, n = cols, w_eff = w (or 1 + w with zero_centered_scale; 1 without scale):
 *   LayerNorm: mean = Σx/n, var = Σ(x - mean)²/n, rstd = 1/sqrt(var + eps), x̂ = (x - mean)·rstd
 *   RMSNorm:   rstd = 1/sqrt(Σx²/n + eps), x̂ = x·rstd
 *   forward:   y = x̂·w_eff + b
 *   backward:  g = dy·w_eff
 *              LayerNorm dx = rstd·(g - mean(g) - x̂·mean(g·x̂))
 *              RMSNorm   dx = rstd·(g - x̂·mean(g·x̂))
 *              d_scale = Σ_rows dy·x̂,  d_bias = Σ_rows dy
 * AdaLayerNorm's parameters may carry X's outer dims: row r reads the parameter row at its
 * own outer index with the parameter's 1-dims set to 0 (the outer strides in the problem
 * are already 0 there), and a parameter gradient sums only over the rows that read it.
 * Backward uses the saved statistics when they are bound (exactly what the forward wrote)
 * and recomputes them from x with epsilon otherwise.
 *
 * Execute allocates nothing: the fp64 accumulators of d_scale and d_bias live in the
 * caller's workspace (one per parameter element: cols doubles per parameter row), and
 * rows are summed in order 0..rows-1, so results are bitwise repeatable.
 */
#include "ops/norm/norm.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Walks the inner (normalized) index space in row-major order, keeping each slot's
 * element offset current: no division per element. */
typedef struct col_walk {
    int64_t idx[FROST_MAX_RANK];
    int64_t off[FROST__NORM_NUM_SLOTS];
} col_walk;

static void walk_begin(col_walk *w)
{
    memset(w, 0, sizeof *w);
}

static void walk_next(const frost__norm_problem *p, col_walk *w)
{
    for (int i = p->inner_rank - 1; i >= 0; --i) {
        ++w->idx[i];
        for (int s = 0; s < FROST__NORM_NUM_SLOTS; ++s)
            w->off[s] += p->slot[s].inner_stride[i];
        if (w->idx[i] < p->inner_dims[i])
            return;
        for (int s = 0; s < FROST__NORM_NUM_SLOTS; ++s)
            w->off[s] -= p->slot[s].inner_stride[i] * p->inner_dims[i];
        w->idx[i] = 0;
    }
}

/* Element offset of row r in every slot (parameter slots have zero outer strides on the
 * dims they do not carry). */
static void row_offsets(const frost__norm_problem *p, int64_t r, int64_t *off)
{
    for (int s = 0; s < FROST__NORM_NUM_SLOTS; ++s)
        off[s] = 0;
    for (int i = p->outer_rank - 1; i >= 0; --i) {
        int64_t idx = r % p->outer_dims[i];
        r /= p->outer_dims[i];
        for (int s = 0; s < FROST__NORM_NUM_SLOTS; ++s)
            off[s] += idx * p->slot[s].outer_stride[i];
    }
}

int64_t frost__norm_row_offset(const frost__norm_problem *p, int slot, int64_t r)
{
    int64_t off[FROST__NORM_NUM_SLOTS];
    row_offsets(p, r, off);
    return off[slot];
}

static double load(const frost__norm_problem *p, void *const *ptrs, int slot, int64_t off)
{
    return frost__load_elem(ptrs[slot], off, p->slot[slot].dtype);
}

static void store(const frost__norm_problem *p, void *const *ptrs, int slot, int64_t off, double v)
{
    frost__store_elem(ptrs[slot], off, p->slot[slot].dtype, v);
}

/* Index of the parameter row (0..frost__norm_param_rows-1, row-major over the slot's outer
 * dims) that row r of X reads or, for a gradient, adds to. */
static int64_t param_row_of(const frost__norm_problem *p, int slot, int64_t r)
{
    int64_t index = 0, step = 1;
    for (int i = p->outer_rank - 1; i >= 0; --i) {
        int64_t idx = r % p->outer_dims[i], d = p->param_outer_dims[slot][i];
        r /= p->outer_dims[i];
        index += (d == 1 ? 0 : idx) * step;
        step *= d;
    }
    return index;
}

/* Element offset of parameter row q of a parameter slot. */
static int64_t param_row_offset(const frost__norm_problem *p, int slot, int64_t q)
{
    int64_t off = 0;
    for (int i = p->outer_rank - 1; i >= 0; --i) {
        int64_t d = p->param_outer_dims[slot][i];
        off += (q % d) * p->slot[slot].outer_stride[i];
        q /= d;
    }
    return off;
}

/* The effective scale of the column at walk position w of the row at offsets row. */
static double scale_at(const frost__norm_problem *p, void *const *ptrs, const int64_t *row, const col_walk *w)
{
    if (!p->slot[FROST__NORM_SCALE].present)
        return 1.0;
    double v = load(p, ptrs, FROST__NORM_SCALE, row[FROST__NORM_SCALE] + w->off[FROST__NORM_SCALE]);
    return p->zero_centered_scale ? 1.0 + v : v;
}

/* fp64 statistics of one row of X: mean (0 for RMSNorm) and rstd. */
static void row_stats(const frost__norm_problem *p, void *const *ptrs, const int64_t *row, double *mean,
                      double *rstd)
{
    const int64_t base = row[FROST__NORM_X];
    const double n = (double)p->cols;
    double sum = 0.0, m = 0.0;
    col_walk w;
    if (p->kind == FROST__NORM_LAYER) {
        walk_begin(&w);
        for (int64_t c = 0; c < p->cols; ++c, walk_next(p, &w))
            sum += load(p, ptrs, FROST__NORM_X, base + w.off[FROST__NORM_X]);
        m = sum / n;
        sum = 0.0;
    }
    walk_begin(&w);
    for (int64_t c = 0; c < p->cols; ++c, walk_next(p, &w)) {
        double d = load(p, ptrs, FROST__NORM_X, base + w.off[FROST__NORM_X]) - m;
        sum += d * d;
    }
    *mean = m;
    *rstd = 1.0 / sqrt(sum / n + p->epsilon);
}

static int is_param_slot(int s)
{
    return s == FROST__NORM_SCALE || s == FROST__NORM_BIAS || s == FROST__NORM_D_SCALE || s == FROST__NORM_D_BIAS;
}

/* Checks that every slot the problem uses has a pointer (elements exist only when
 * rows > 0 for per-row slots, when the parameter rows are > 0 for parameter slots). */
static frost_status check_pointers(const frost__node *n, const frost__norm_problem *p, void *const *ptrs)
{
    for (int s = 0; s < FROST__NORM_NUM_SLOTS; ++s) {
        int64_t elements = is_param_slot(s) ? frost__norm_param_rows(p, s) : p->rows;
        if (p->slot[s].present && !ptrs[s] && elements > 0)
            return frost__fail(FROST_INVALID_ARGUMENT, "ref engine: %s of %s is bound to NULL",
                               frost__op_classes[n->op]->slot_names[s], frost__op_classes[n->op]->name);
    }
    return FROST_OK;
}

/* ------------------------------------------------------------------------------------ */
/* Forward                                                                               */
/* ------------------------------------------------------------------------------------ */

static frost_status ref_select(const frost_context *ctx, const frost__graph *g, const frost__node *n, void **plan,
                               frost__buf *why)
{
    (void)ctx, (void)g, (void)n, (void)why;
    *plan = NULL;
    return FROST_OK;
}

static frost_status fwd_execute(const frost_context *ctx, const frost__node *n, const void *plan, void *const *ptrs,
                                void *workspace, void *stream)
{
    const frost__norm_problem *p = n->problem;
    const int want_mean = p->slot[FROST__NORM_MEAN].present;
    const int want_rstd = p->slot[FROST__NORM_INV_STD].present;
    const int has_bias = p->slot[FROST__NORM_BIAS].present;
    int64_t row[FROST__NORM_NUM_SLOTS];
    col_walk w;
    (void)ctx, (void)plan, (void)workspace, (void)stream;
    frost_status s = check_pointers(n, p, ptrs);
    if (s != FROST_OK)
        return s;
    for (int64_t r = 0; r < p->rows; ++r) {
        double mean, rstd;
        row_offsets(p, r, row);
        row_stats(p, ptrs, row, &mean, &rstd);
        if (want_mean)
            store(p, ptrs, FROST__NORM_MEAN, row[FROST__NORM_MEAN], mean);
        if (want_rstd)
            store(p, ptrs, FROST__NORM_INV_STD, row[FROST__NORM_INV_STD], rstd);
        walk_begin(&w);
        for (int64_t c = 0; c < p->cols; ++c, walk_next(p, &w)) {
            double x = load(p, ptrs, FROST__NORM_X, row[FROST__NORM_X] + w.off[FROST__NORM_X]);
            double y = (x - mean) * rstd * scale_at(p, ptrs, row, &w);
            if (has_bias)
                y += load(p, ptrs, FROST__NORM_BIAS, row[FROST__NORM_BIAS] + w.off[FROST__NORM_BIAS]);
            store(p, ptrs, FROST__NORM_Y, row[FROST__NORM_Y] + w.off[FROST__NORM_Y], y);
        }
    }
    return FROST_OK;
}

/* ------------------------------------------------------------------------------------ */
/* Backward                                                                              */
/* ------------------------------------------------------------------------------------ */

/* Accumulators (fp64) of one requested parameter gradient: one per element. */
static int64_t acc_count(const frost__norm_problem *p, int slot)
{
    return p->slot[slot].present ? frost__norm_param_rows(p, slot) * p->cols : 0;
}

/* Workspace: the accumulators of d_scale, then those of d_bias. */
static size_t bwd_workspace(const frost__node *n, const void *plan)
{
    const frost__norm_problem *p = n->problem;
    (void)plan;
    return (size_t)(acc_count(p, FROST__NORM_D_SCALE) + acc_count(p, FROST__NORM_D_BIAS)) * sizeof(double);
}

/* dx of one row; adds the row's terms to its parameter rows' accumulators (acc_scale and
 * acc_bias point at the row's parameter row; NULL when absent). */
static void bwd_row(const frost__norm_problem *p, void *const *ptrs, const int64_t *row, double *acc_scale,
                    double *acc_bias)
{
    const double n = (double)p->cols;
    double mean, rstd, sum_g = 0.0, sum_gx = 0.0;
    col_walk w;
    row_stats(p, ptrs, row, &mean, &rstd);
    if (p->slot[FROST__NORM_MEAN].present)
        mean = load(p, ptrs, FROST__NORM_MEAN, row[FROST__NORM_MEAN]);
    if (p->slot[FROST__NORM_INV_STD].present)
        rstd = load(p, ptrs, FROST__NORM_INV_STD, row[FROST__NORM_INV_STD]);

    walk_begin(&w);
    for (int64_t c = 0; c < p->cols; ++c, walk_next(p, &w)) {
        double xhat = (load(p, ptrs, FROST__NORM_X, row[FROST__NORM_X] + w.off[FROST__NORM_X]) - mean) * rstd;
        double g = load(p, ptrs, FROST__NORM_D_Y, row[FROST__NORM_D_Y] + w.off[FROST__NORM_D_Y]) *
                   scale_at(p, ptrs, row, &w);
        sum_g += g;
        sum_gx += g * xhat;
    }
    const double mean_g = p->kind == FROST__NORM_LAYER ? sum_g / n : 0.0;
    const double mean_gx = sum_gx / n;

    walk_begin(&w);
    for (int64_t c = 0; c < p->cols; ++c, walk_next(p, &w)) {
        double xhat = (load(p, ptrs, FROST__NORM_X, row[FROST__NORM_X] + w.off[FROST__NORM_X]) - mean) * rstd;
        double dy = load(p, ptrs, FROST__NORM_D_Y, row[FROST__NORM_D_Y] + w.off[FROST__NORM_D_Y]);
        double g = dy * scale_at(p, ptrs, row, &w);
        store(p, ptrs, FROST__NORM_D_X, row[FROST__NORM_D_X] + w.off[FROST__NORM_D_X],
              rstd * (g - mean_g - xhat * mean_gx));
        if (acc_scale)
            acc_scale[c] += dy * xhat;
        if (acc_bias)
            acc_bias[c] += dy;
    }
}

/* Writes the accumulators of a parameter gradient, parameter row by parameter row. */
static void store_param_grad(const frost__norm_problem *p, void *const *ptrs, int slot, const double *acc)
{
    col_walk w;
    for (int64_t q = 0; q < frost__norm_param_rows(p, slot); ++q) {
        const int64_t base = param_row_offset(p, slot, q);
        walk_begin(&w);
        for (int64_t c = 0; c < p->cols; ++c, walk_next(p, &w))
            store(p, ptrs, slot, base + w.off[slot], acc[q * p->cols + c]);
    }
}

static frost_status bwd_execute(const frost_context *ctx, const frost__node *n, const void *plan, void *const *ptrs,
                                void *workspace, void *stream)
{
    const frost__norm_problem *p = n->problem;
    const int64_t n_scale = acc_count(p, FROST__NORM_D_SCALE), n_bias = acc_count(p, FROST__NORM_D_BIAS);
    double *acc_scale = NULL, *acc_bias = NULL;
    int64_t row[FROST__NORM_NUM_SLOTS];
    (void)ctx, (void)stream;
    frost_status s = check_pointers(n, p, ptrs);
    if (s != FROST_OK)
        return s;
    if (n_scale + n_bias > 0) {
        if (!workspace)
            return frost__fail(FROST_INVALID_ARGUMENT, "ref engine: %s needs %zu bytes of workspace; got NULL",
                               frost__op_classes[n->op]->name, bwd_workspace(n, plan));
        if ((uintptr_t)workspace % sizeof(double) != 0)
            return frost__fail(FROST_INVALID_ARGUMENT, "ref engine: workspace must be %zu-byte aligned",
                               sizeof(double));
        double *acc = workspace;
        for (int64_t i = 0; i < n_scale + n_bias; ++i)
            acc[i] = 0.0;
        acc_scale = n_scale ? acc : NULL;
        acc_bias = n_bias ? acc + n_scale : NULL;
    }
    for (int64_t r = 0; r < p->rows; ++r) {
        row_offsets(p, r, row);
        bwd_row(p, ptrs, row, acc_scale ? acc_scale + param_row_of(p, FROST__NORM_D_SCALE, r) * p->cols : NULL,
                acc_bias ? acc_bias + param_row_of(p, FROST__NORM_D_BIAS, r) * p->cols : NULL);
    }
    /* Parameter gradients are written even when rows == 0 (then they are zero). */
    if (acc_scale)
        store_param_grad(p, ptrs, FROST__NORM_D_SCALE, acc_scale);
    if (acc_bias)
        store_param_grad(p, ptrs, FROST__NORM_D_BIAS, acc_bias);
    return FROST_OK;
}

const frost__op_impl frost__norm_fwd_ref = {
    .select = ref_select,
    .execute = fwd_execute,
    .coverage = "LayerNorm, RMSNorm and AdaLayerNorm forward: every shape, stride, dtype (f32, f16, bf16) and "
                "option (scale, bias, per-sample parameters, zero-centred scale, training statistics); fp64 "
                "accumulation on the host",
};

const frost__op_impl frost__norm_bwd_ref = {
    .select = ref_select,
    .workspace = bwd_workspace,
    .execute = bwd_execute,
    .coverage = "LayerNorm, RMSNorm and AdaLayerNorm backward: every shape, stride, dtype and option, saved or "
                "recomputed statistics; fp64 accumulation, fixed-order (deterministic) d_scale and d_bias, per "
                "sample for AdaLayerNorm",
};
