/*
 * chan_norm_ref.c — the reference engine for GroupNorm, InstanceNorm and BatchNorm,
 * forward and backward.
 *
 * Plain C on host pointers, fp64 accumulation, any strides (the problem already split
 * them into n, c and per-spatial-dim parts), every dtype and option.  It is the oracle the
 * CUDA kernels are tested against, so it prefers the obvious algorithm to a fast one.
 *
 * All three ops are one loop over reduction sets.  A set is a box of samples [n0, n1) x
 * channels [c0, c1) x every spatial position:
 *   GroupNorm    set (n, g): n0 = n, channels g*Cg .. g*Cg+Cg-1   (InstanceNorm: Cg = 1)
 *   BatchNorm    set (c):    every n, channel c
 * and every computation is a pass over one set's elements in a fixed order (n, then c,
 * then the spatial dims row-major), so results are bitwise repeatable.
 *
 * Math per set of M elements, w_eff(c) = w(c) (1 + w(c) with zero_centered_scale; 1 without
 * scale), b(c) = bias or 0:
 *   mean = Σx / M, var = Σ(x - mean)² / M (two passes), rstd = 1 / sqrt(var + eps)
 *   forward:  y = (x - mean)·rstd·w_eff + b
 *             BatchNorm inference uses running_mean and running_var instead of the set's
 *             statistics; GroupNorm and InstanceNorm have no running statistics and
 *             normalize with the sample's own in both phases.
 *             BatchNorm training with running statistics then updates them in place:
 *             running = (1 - momentum)·running + momentum·batch, with var·M/(M - 1).
 *   backward: x̂ = (x - mean)·rstd, g = dy·w_eff
 *             dx = rstd·(g - mean_set(g) - x̂·mean_set(g·x̂))
 *             d_scale(c) = Σ dy·x̂ and d_bias(c) = Σ dy over every n and spatial position.
 * Backward uses the saved statistics when they are bound and recomputes them from x
 * (with epsilon) otherwise.
 *
 * Execute allocates nothing: the per-channel fp64 accumulators of d_scale and d_bias live
 * in the caller's workspace (C doubles each; workspace() reports the size).
 */
#include "ops/norm/chan_norm.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* The slots that have X's shape, walked together. */
enum { DATA_X, DATA_Y, DATA_DY, DATA_DX, NUM_DATA };
static const int data_slot[NUM_DATA] = {FROST__CNORM_X, FROST__CNORM_Y, FROST__CNORM_D_Y, FROST__CNORM_D_X};

/* One reduction set: samples [n0, n1) x channels [c0, c1) x all spatial; m elements;
 * its statistics sit at stat_off[0] in mean and stat_off[1] in inv_std. */
typedef struct red_set {
    int64_t n0, n1, c0, c1;
    int64_t stat_off[2];
    double m;
} red_set;

typedef enum pass_kind {
    PASS_SUM,       /* sum += x */
    PASS_SQDEV,     /* sum += (x - mean)² */
    PASS_Y,         /* y = x̂·w_eff + b */
    PASS_GRAD_SUMS, /* sum += g, sum2 += g·x̂; per-channel d_scale / d_bias terms */
    PASS_DX,        /* dx = rstd·(g - mean_g - x̂·mean_gx) */
} pass_kind;

/* What a pass reads and accumulates. */
typedef struct set_state {
    double mean, rstd;
    double sum, sum2;
    double mean_g, mean_gx;
    double *acc_scale, *acc_bias; /* per-channel accumulators, NULL when not wanted */
} set_state;

static int64_t num_sets(const frost__cnorm_problem *p)
{
    return p->kind == FROST__CNORM_BATCH ? p->c : p->n * p->groups;
}

static void set_at(const frost__cnorm_problem *p, int64_t i, red_set *s)
{
    const frost__cnorm_layout *mean = &p->slot[FROST__CNORM_MEAN], *rstd = &p->slot[FROST__CNORM_INV_STD];
    if (p->kind == FROST__CNORM_BATCH) {
        s->n0 = 0, s->n1 = p->n;
        s->c0 = i, s->c1 = i + 1;
        s->stat_off[0] = i * mean->stat_stride[0];
        s->stat_off[1] = i * rstd->stat_stride[0];
    } else {
        const int64_t n = i / p->groups, g = i % p->groups, cg = p->c / p->groups;
        s->n0 = n, s->n1 = n + 1;
        s->c0 = g * cg, s->c1 = g * cg + cg;
        s->stat_off[0] = n * mean->stat_stride[0] + g * mean->stat_stride[1];
        s->stat_off[1] = n * rstd->stat_stride[0] + g * rstd->stat_stride[1];
    }
    s->m = (double)((s->n1 - s->n0) * (s->c1 - s->c0) * p->spatial);
}

static double load(const frost__cnorm_problem *p, void *const *ptrs, int slot, int64_t off)
{
    return frost__load_elem(ptrs[slot], off, p->slot[slot].dtype);
}

static void store(const frost__cnorm_problem *p, void *const *ptrs, int slot, int64_t off, double v)
{
    frost__store_elem(ptrs[slot], off, p->slot[slot].dtype, v);
}

/* Element c of a per-channel tensor ([C] or [1, C, 1, ...]: stride in stat_stride[0]). */
static int64_t chan_off(const frost__cnorm_problem *p, int slot, int64_t c)
{
    return c * p->slot[slot].stat_stride[0];
}

static double weight(const frost__cnorm_problem *p, void *const *ptrs, int64_t c)
{
    if (!p->slot[FROST__CNORM_SCALE].present)
        return 1.0;
    double w = load(p, ptrs, FROST__CNORM_SCALE, chan_off(p, FROST__CNORM_SCALE, c));
    return p->zero_centered_scale ? 1.0 + w : w;
}

static double bias(const frost__cnorm_problem *p, void *const *ptrs, int64_t c)
{
    if (!p->slot[FROST__CNORM_BIAS].present)
        return 0.0;
    return load(p, ptrs, FROST__CNORM_BIAS, chan_off(p, FROST__CNORM_BIAS, c));
}

/* One element of a pass; off[] are the element's offsets in the X-shaped slots. */
static void visit(const frost__cnorm_problem *p, void *const *ptrs, pass_kind pass, set_state *st, const int64_t *off,
                  int64_t c, double w, double b)
{
    const double x = load(p, ptrs, FROST__CNORM_X, off[DATA_X]);
    const double xhat = (x - st->mean) * st->rstd;
    double dy, g;
    switch (pass) {
    case PASS_SUM:
        st->sum += x;
        return;
    case PASS_SQDEV:
        st->sum += (x - st->mean) * (x - st->mean);
        return;
    case PASS_Y:
        store(p, ptrs, FROST__CNORM_Y, off[DATA_Y], xhat * w + b);
        return;
    case PASS_GRAD_SUMS:
        dy = load(p, ptrs, FROST__CNORM_D_Y, off[DATA_DY]);
        g = dy * w;
        st->sum += g;
        st->sum2 += g * xhat;
        if (st->acc_scale)
            st->acc_scale[c] += dy * xhat;
        if (st->acc_bias)
            st->acc_bias[c] += dy;
        return;
    case PASS_DX:
        g = load(p, ptrs, FROST__CNORM_D_Y, off[DATA_DY]) * w;
        store(p, ptrs, FROST__CNORM_D_X, off[DATA_DX], st->rstd * (g - st->mean_g - xhat * st->mean_gx));
        return;
    }
}

/* Visits every element of set s in the order n, c, spatial dims row-major, keeping each
 * X-shaped slot's offset current (absent slots have zero strides and are never read). */
static void run_pass(const frost__cnorm_problem *p, void *const *ptrs, const red_set *s, pass_kind pass, set_state *st)
{
    int64_t idx[FROST_MAX_RANK], off[NUM_DATA];
    /* No spatial positions: no element, however many (n, c) pairs the set spans (BatchNorm
     * inference may take N = 2^40 samples of 0 pixels; walking them would take hours). */
    if (p->spatial == 0)
        return;
    for (int64_t n = s->n0; n < s->n1; ++n)
        for (int64_t c = s->c0; c < s->c1; ++c) {
            const double w = weight(p, ptrs, c), b = pass == PASS_Y ? bias(p, ptrs, c) : 0.0;
            for (int k = 0; k < NUM_DATA; ++k)
                off[k] = n * p->slot[data_slot[k]].stride_n + c * p->slot[data_slot[k]].stride_c;
            memset(idx, 0, sizeof idx);
            for (int64_t e = 0; e < p->spatial; ++e) {
                visit(p, ptrs, pass, st, off, c, w, b);
                for (int i = p->spatial_rank - 1; i >= 0; --i) { /* next spatial position */
                    for (int k = 0; k < NUM_DATA; ++k)
                        off[k] += p->slot[data_slot[k]].spatial_stride[i];
                    if (++idx[i] < p->spatial_dims[i])
                        break;
                    for (int k = 0; k < NUM_DATA; ++k)
                        off[k] -= p->slot[data_slot[k]].spatial_stride[i] * p->spatial_dims[i];
                    idx[i] = 0;
                }
            }
        }
}

/* The set's mean (into st->mean) and biased variance (returned), two passes. */
static double set_moments(const frost__cnorm_problem *p, void *const *ptrs, const red_set *s, set_state *st)
{
    st->mean = 0.0;
    st->sum = 0.0;
    run_pass(p, ptrs, s, PASS_SUM, st);
    st->mean = st->sum / s->m;
    st->sum = 0.0;
    run_pass(p, ptrs, s, PASS_SQDEV, st);
    return st->sum / s->m;
}

static frost_status ref_select(const frost_context *ctx, const frost__graph *g, const frost__node *n, void **plan,
                               frost__buf *why)
{
    (void)ctx, (void)g, (void)n, (void)why;
    *plan = NULL;
    return FROST_OK;
}

/* ------------------------------------------------------------------------------------ */
/* Forward                                                                               */
/* ------------------------------------------------------------------------------------ */

/* BatchNorm training: running = (1 - momentum)·running + momentum·batch (unbiased var). */
static void update_running(const frost__cnorm_problem *p, void *const *ptrs, const red_set *s, double mean, double var)
{
    const double mom = p->momentum;
    const int64_t om = chan_off(p, FROST__CNORM_RUNNING_MEAN, s->c0);
    const int64_t ov = chan_off(p, FROST__CNORM_RUNNING_VAR, s->c0);
    const double rm = load(p, ptrs, FROST__CNORM_RUNNING_MEAN, om);
    const double rv = load(p, ptrs, FROST__CNORM_RUNNING_VAR, ov);
    store(p, ptrs, FROST__CNORM_RUNNING_MEAN, om, (1.0 - mom) * rm + mom * mean);
    store(p, ptrs, FROST__CNORM_RUNNING_VAR, ov, (1.0 - mom) * rv + mom * var * s->m / (s->m - 1.0));
}

static frost_status fwd_execute(const frost_context *ctx, const frost__node *n, const void *plan, void *const *ptrs,
                                void *workspace, void *stream)
{
    const frost__cnorm_problem *p = n->problem;
    const int use_running = p->kind == FROST__CNORM_BATCH && p->phase == FROST_NORM_INFERENCE;
    const int64_t sets = num_sets(p);
    (void)ctx, (void)plan, (void)workspace, (void)stream;
    for (int64_t i = 0; i < sets; ++i) {
        red_set s;
        set_state st = {0};
        set_at(p, i, &s);
        if (use_running) {
            st.mean = load(p, ptrs, FROST__CNORM_RUNNING_MEAN, chan_off(p, FROST__CNORM_RUNNING_MEAN, s.c0));
            double var = load(p, ptrs, FROST__CNORM_RUNNING_VAR, chan_off(p, FROST__CNORM_RUNNING_VAR, s.c0));
            st.rstd = 1.0 / sqrt(var + p->epsilon);
        } else {
            double var = set_moments(p, ptrs, &s, &st);
            st.rstd = 1.0 / sqrt(var + p->epsilon);
            if (p->slot[FROST__CNORM_MEAN].present)
                store(p, ptrs, FROST__CNORM_MEAN, s.stat_off[0], st.mean);
            if (p->slot[FROST__CNORM_INV_STD].present)
                store(p, ptrs, FROST__CNORM_INV_STD, s.stat_off[1], st.rstd);
            if (p->update_running)
                update_running(p, ptrs, &s, st.mean, var);
        }
        run_pass(p, ptrs, &s, PASS_Y, &st);
    }
    return FROST_OK;
}

/* ------------------------------------------------------------------------------------ */
/* Backward                                                                              */
/* ------------------------------------------------------------------------------------ */

/* Workspace: one fp64 accumulator per channel for each requested parameter gradient. */
static size_t bwd_workspace(const frost__node *n, const void *plan)
{
    const frost__cnorm_problem *p = n->problem;
    (void)plan;
    return (size_t)p->c * sizeof(double) *
           (size_t)(p->slot[FROST__CNORM_D_SCALE].present + p->slot[FROST__CNORM_D_BIAS].present);
}

static frost_status bwd_execute(const frost_context *ctx, const frost__node *n, const void *plan, void *const *ptrs,
                                void *workspace, void *stream)
{
    const frost__cnorm_problem *p = n->problem;
    const int want_scale = p->slot[FROST__CNORM_D_SCALE].present, want_bias = p->slot[FROST__CNORM_D_BIAS].present;
    const int saved_mean = p->slot[FROST__CNORM_MEAN].present, saved_rstd = p->slot[FROST__CNORM_INV_STD].present;
    const int64_t sets = num_sets(p);
    double *acc_scale = NULL, *acc_bias = NULL;
    (void)ctx, (void)stream;
    if ((want_scale || want_bias) && p->c > 0) {
        if (!workspace)
            return frost__fail(FROST_INVALID_ARGUMENT,
                               "ref engine: channel-norm backward needs %zu bytes of "
                               "workspace; got NULL",
                               bwd_workspace(n, plan));
        if ((uintptr_t)workspace % sizeof(double) != 0)
            return frost__fail(FROST_INVALID_ARGUMENT, "ref engine: workspace must be %zu-byte aligned",
                               sizeof(double));
        double *acc = workspace;
        if (want_scale)
            acc_scale = acc, acc += p->c;
        if (want_bias)
            acc_bias = acc;
        for (int64_t c = 0; c < p->c * (want_scale + want_bias); ++c)
            ((double *)workspace)[c] = 0.0;
    }
    for (int64_t i = 0; i < sets; ++i) {
        red_set s;
        set_state st = {.acc_scale = acc_scale, .acc_bias = acc_bias};
        set_at(p, i, &s);
        if (!saved_mean || !saved_rstd)
            st.rstd = 1.0 / sqrt(set_moments(p, ptrs, &s, &st) + p->epsilon);
        if (saved_mean)
            st.mean = load(p, ptrs, FROST__CNORM_MEAN, s.stat_off[0]);
        if (saved_rstd)
            st.rstd = load(p, ptrs, FROST__CNORM_INV_STD, s.stat_off[1]);
        st.sum = st.sum2 = 0.0;
        run_pass(p, ptrs, &s, PASS_GRAD_SUMS, &st);
        st.mean_g = st.sum / s.m;
        st.mean_gx = st.sum2 / s.m;
        run_pass(p, ptrs, &s, PASS_DX, &st);
    }
    /* Parameter gradients are written even when no set exists (then they are zero).  Without
     * them there is nothing to walk: C may be 2^40 when N is 0. */
    if (!acc_scale && !acc_bias)
        return FROST_OK;
    for (int64_t c = 0; c < p->c; ++c) {
        if (acc_scale)
            store(p, ptrs, FROST__CNORM_D_SCALE, chan_off(p, FROST__CNORM_D_SCALE, c), acc_scale[c]);
        if (acc_bias)
            store(p, ptrs, FROST__CNORM_D_BIAS, chan_off(p, FROST__CNORM_D_BIAS, c), acc_bias[c]);
    }
    return FROST_OK;
}

const frost__op_impl frost__cnorm_fwd_ref = {
    .select = ref_select,
    .execute = fwd_execute,
    .coverage = "GroupNorm, InstanceNorm and BatchNorm forward: every shape, stride and layout (NCHW, NHWC, "
                "gapped), dtype (f32, f16, bf16) and option (scale, bias, zero-centred scale, training statistics, "
                "BatchNorm running statistics); fp64 accumulation on the host",
};

const frost__op_impl frost__cnorm_bwd_ref = {
    .select = ref_select,
    .workspace = bwd_workspace,
    .execute = bwd_execute,
    .coverage = "GroupNorm, InstanceNorm and BatchNorm backward: every shape, stride, dtype and option, saved or "
                "recomputed statistics; fp64 accumulation, fixed-order (deterministic) d_scale and d_bias",
};
