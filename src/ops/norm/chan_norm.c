/*
 * chan_norm.c — GroupNorm, InstanceNorm and BatchNorm, forward and backward: the six
 * public add functions, the rules of each direction (running statistics, which outputs
 * exist) and the six op classes.  The checks every call shares (inputs, X, outputs,
 * layouts, appending the node) are in chan_norm_validate.c.
 *
 * Layout legend: X is [N, C, S...] (S = spatial dims, spatial = prod(S...)); G = groups,
 * Cg = C / G.  Each statistic is taken over a reduction set of M elements:
 *   GroupNorm (n, g): Cg x spatial    InstanceNorm (n, c): spatial    BatchNorm (c): N x spatial
 * Statistic tensors are f32 [N, G], [N, C] or [C]; per-channel tensors (scale, bias,
 * running statistics, d_scale, d_bias) are [C] or [1, C, 1, ...] with rank(X).
 *
 * One add function per direction serves all three kinds.  It checks every tensor (a
 * failure names the tensor, the dim, the expected and the given value), creates the
 * outputs the caller left to frost (0 or AUTO), and fills a frost__cnorm_problem in which
 * every slot's strides are already split into n / c / spatial parts, with the two layout
 * facts (nchw, nhwc) kernels care about.  Engines read only that problem.
 *
 * Decisions worth knowing:
 *   - y and d_x that frost creates keep X's dim order: their strides are packed in the
 *     order of X's strides, so channels-last input gives channels-last output.
 *   - Running statistics are inputs that BatchNorm training writes in place.  They sit in
 *     the node's slots (so execute binds them) but not in output_slots: the graph's
 *     one-writer rule is about tensors an op produces, and a running statistic is state
 *     the caller owns and feeds back step after step.  Because they are written, they
 *     must be distinct from each other and from every other input.
 *   - An op that computes statistics (GroupNorm and InstanceNorm always, BatchNorm in
 *     training and backward) refuses a shape whose reduction sets are empty (M = 0 while
 *     at least one set exists): the mean of nothing is undefined.  A tensor without any
 *     set (N = 0 for GroupNorm / InstanceNorm, C = 0 for BatchNorm) is an empty op.
 *   - BatchNorm training that updates running_var needs M >= 2 (the unbiased variance
 *     divides by M - 1).
 *
 * Everything is validated before the first output is created, so a refused call leaves
 * the graph as it was; tensor pointers are not kept across output creation, which may
 * move the tensor table.
 */
#include "ops/norm/chan_norm_validate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* [forward, backward][kind]: the public function (for messages), the op name, the op id. */
static const struct cn_op {
    const char *fn, *op;
    frost__op id;
} cn_ops[2][3] = {
    {{"frost_graph_add_groupnorm", "groupnorm_fwd", FROST__OP_GROUPNORM_FWD},
     {"frost_graph_add_instancenorm", "instancenorm_fwd", FROST__OP_INSTANCENORM_FWD},
     {"frost_graph_add_batchnorm", "batchnorm_fwd", FROST__OP_BATCHNORM_FWD}},
    {{"frost_graph_add_groupnorm_backward", "groupnorm_bwd", FROST__OP_GROUPNORM_BWD},
     {"frost_graph_add_instancenorm_backward", "instancenorm_bwd", FROST__OP_INSTANCENORM_BWD},
     {"frost_graph_add_batchnorm_backward", "batchnorm_bwd", FROST__OP_BATCHNORM_BWD}},
};

#define DEFAULT_MOMENTUM 0.1

/* ---- forward ----------------------------------------------------------------------- */

/* BatchNorm running statistics: both or neither, required in inference, f32 [C]; when
 * training updates them they must be tensors of their own, and M >= 2. */
static frost_status check_running(frost__cnorm_add *a, const frost__tensor *rm, const frost__tensor *rv)
{
    frost__cnorm_problem *p = a->p;
    if (!rm && !rv && p->phase == FROST_NORM_INFERENCE)
        return frost__cnorm_bad(a, 0, NULL,
                                "running_mean and running_var are required in the inference phase (BatchNorm "
                                "inference normalizes with them); got tensor id 0");
    if (!rm && !rv)
        return FROST_OK;
    if (!rm || !rv)
        return frost__cnorm_bad(a, 0, NULL,
                                "%s is given but %s is not; BatchNorm takes both running statistics or neither",
                                rm ? "running_mean" : "running_var", rm ? "running_var" : "running_mean");
    frost_status s = frost__cnorm_check_input(a, FROST__CNORM_RUNNING_MEAN, rm, FROST_F32);
    if (s == FROST_OK)
        s = frost__cnorm_check_input(a, FROST__CNORM_RUNNING_VAR, rv, FROST_F32);
    if (s != FROST_OK || p->phase != FROST_NORM_TRAINING)
        return s;
    p->update_running = 1;
    /* Written in place ([C] with a stride > 0 never overlaps itself). */
    for (int slot = FROST__CNORM_RUNNING_MEAN; slot <= FROST__CNORM_RUNNING_VAR; ++slot)
        for (int i = 0; i < slot; ++i)
            if (a->inputs[i] == a->inputs[slot])
                return frost__cnorm_bad(
                    a, slot, slot == FROST__CNORM_RUNNING_MEAN ? rm : rv,
                    "is also the input %s; training updates running statistics in place, so they must be "
                    "tensors of their own",
                    frost__cnorm_slot_names[i]);
    if (p->n * p->spatial == 1 && p->c > 0)
        return frost__cnorm_bad(
            a, FROST__CNORM_RUNNING_VAR, rv,
            "x '%s' holds M = N x spatial = 1 value per channel, so the unbiased batch variance (divided by "
            "M - 1 = 0) that updates running_var is undefined; expected M >= 2, or pass no running statistics",
            a->x->name);
    return FROST_OK;
}

/* Validates a forward call and appends its node (a->p is owned by the caller until frost__cnorm_finish). */
static frost_status forward(frost__cnorm_add *a, const frost_channel_norm_desc *d, frost_norm_outputs *out)
{
    const frost_dtype FROM_X = FROST_DTYPE_INVALID; /* frost__cnorm_check_input: f32 or X's dtype */
    const frost__tensor *scale, *bias, *rm, *rv;
    frost__cnorm_problem *p = a->p;
    const frost__cnorm_kind kind = p->kind;
    frost_status s;
    p->phase = d->phase;
    p->zero_centered_scale = d->zero_centered_scale != 0;
    if (d->phase != FROST_NORM_TRAINING && d->phase != FROST_NORM_INFERENCE)
        return frost__cnorm_bad(
            a, 0, NULL, "phase expected FROST_NORM_TRAINING (0) or FROST_NORM_INFERENCE (1), got %d", (int)d->phase);
    if ((s = frost__cnorm_get_input(a, FROST__CNORM_X, d->x, 1, &a->x)) != FROST_OK ||
        (s = frost__cnorm_get_input(a, FROST__CNORM_SCALE, d->scale, 0, &scale)) != FROST_OK ||
        (s = frost__cnorm_get_input(a, FROST__CNORM_BIAS, d->bias, 0, &bias)) != FROST_OK ||
        (s = frost__cnorm_get_input(a, FROST__CNORM_RUNNING_MEAN, d->running_mean, 0, &rm)) != FROST_OK ||
        (s = frost__cnorm_get_input(a, FROST__CNORM_RUNNING_VAR, d->running_var, 0, &rv)) != FROST_OK)
        return s;
    if (kind != FROST__CNORM_BATCH && (rm || rv))
        return frost__cnorm_bad(
            a, rm ? FROST__CNORM_RUNNING_MEAN : FROST__CNORM_RUNNING_VAR, rm ? rm : rv,
            "given, but only BatchNorm keeps running statistics (%s normalizes with each sample's own "
            "statistics): pass 0",
            frost__cnorm_kind_names[kind]);
    if ((s = frost__cnorm_setup_x(a, d->num_groups, d->epsilon,
                                  kind != FROST__CNORM_BATCH || d->phase == FROST_NORM_TRAINING)) != FROST_OK ||
        (scale && (s = frost__cnorm_check_input(a, FROST__CNORM_SCALE, scale, FROM_X)) != FROST_OK) ||
        (bias && (s = frost__cnorm_check_input(a, FROST__CNORM_BIAS, bias, FROM_X)) != FROST_OK))
        return s;
    if (isnan(d->momentum) || d->momentum < 0.0 || d->momentum > 1.0)
        return frost__cnorm_bad(a, 0, NULL, "momentum expected in [0, 1] (0 means 0.1), got %g", d->momentum);
    p->momentum = d->momentum == 0.0 ? DEFAULT_MOMENTUM : d->momentum;
    if (kind == FROST__CNORM_BATCH && (s = check_running(a, rm, rv)) != FROST_OK)
        return s;
    if (d->phase == FROST_NORM_INFERENCE && (out->mean != FROST_TENSOR_NONE || out->inv_std != FROST_TENSOR_NONE))
        return frost__cnorm_bad(
            a, 0, NULL, "%s output requested in the inference phase; statistics are saved only in training: pass 0",
            out->mean != FROST_TENSOR_NONE ? "mean" : "inv_std");
    frost__cnorm_out outs[3];
    int n = 0;
    int64_t sdims[2];
    const char *why;
    const int srank = frost__cnorm_stats_shape(p, sdims, &why);
    frost__cnorm_strides_like_x(
        a->x, frost__cnorm_out_spec(&outs[n++], FROST__CNORM_Y, &out->y, a->x->dtype, a->x->rank, a->x->dims)->strides);
    if (out->mean != FROST_TENSOR_NONE)
        frost__cnorm_out_spec(&outs[n++], FROST__CNORM_MEAN, &out->mean, FROST_F32, srank, sdims);
    if (out->inv_std != FROST_TENSOR_NONE)
        frost__cnorm_out_spec(&outs[n++], FROST__CNORM_INV_STD, &out->inv_std, FROST_F32, srank, sdims);
    return frost__cnorm_finish(a, cn_ops[0][kind].id, outs, n);
}

/* ---- backward ---------------------------------------------------------------------- */

static frost_status backward(frost__cnorm_add *a, const frost_channel_norm_backward_desc *d, frost_norm_grads *out)
{
    const frost__tensor *d_y, *scale, *mean, *inv_std;
    frost_status s;
    a->p->backward = 1;
    a->p->phase = FROST_NORM_TRAINING;
    a->p->zero_centered_scale = d->zero_centered_scale != 0;
    a->p->deterministic = d->deterministic != 0;
    if ((s = frost__cnorm_get_input(a, FROST__CNORM_X, d->x, 1, &a->x)) != FROST_OK ||
        (s = frost__cnorm_get_input(a, FROST__CNORM_D_Y, d->d_y, 1, &d_y)) != FROST_OK ||
        (s = frost__cnorm_get_input(a, FROST__CNORM_SCALE, d->scale, 0, &scale)) != FROST_OK ||
        (s = frost__cnorm_get_input(a, FROST__CNORM_MEAN, d->mean, 0, &mean)) != FROST_OK ||
        (s = frost__cnorm_get_input(a, FROST__CNORM_INV_STD, d->inv_std, 0, &inv_std)) != FROST_OK)
        return s;
    if ((s = frost__cnorm_setup_x(a, d->num_groups, d->epsilon, 1)) != FROST_OK ||
        (s = frost__cnorm_check_input(a, FROST__CNORM_D_Y, d_y, a->x->dtype)) != FROST_OK ||
        (scale && (s = frost__cnorm_check_input(a, FROST__CNORM_SCALE, scale, FROST_DTYPE_INVALID)) != FROST_OK) ||
        (mean && (s = frost__cnorm_check_input(a, FROST__CNORM_MEAN, mean, FROST_F32)) != FROST_OK) ||
        (inv_std && (s = frost__cnorm_check_input(a, FROST__CNORM_INV_STD, inv_std, FROST_F32)) != FROST_OK))
        return s;
    if (out->d_scale != FROST_TENSOR_NONE && !scale)
        return frost__cnorm_bad(a, 0, NULL, "d_scale requested but no scale is given; pass 0 or give scale");
    if (out->d_bias != FROST_TENSOR_NONE && !d->has_bias)
        return frost__cnorm_bad(a, 0, NULL, "d_bias requested but has_bias is 0; pass 0 or set has_bias");
    /* Parameter gradients: f32 with scale's dims ([C] without scale). */
    const int prank = scale ? scale->rank : 1;
    const int64_t *pdims = scale ? scale->dims : &a->p->c;
    frost__cnorm_out outs[3];
    int n = 0;
    frost__cnorm_strides_like_x(
        a->x,
        frost__cnorm_out_spec(&outs[n++], FROST__CNORM_D_X, &out->d_x, a->x->dtype, a->x->rank, a->x->dims)->strides);
    if (out->d_scale != FROST_TENSOR_NONE)
        frost__cnorm_out_spec(&outs[n++], FROST__CNORM_D_SCALE, &out->d_scale, FROST_F32, prank, pdims);
    if (out->d_bias != FROST_TENSOR_NONE)
        frost__cnorm_out_spec(&outs[n++], FROST__CNORM_D_BIAS, &out->d_bias, FROST_F32, prank, pdims);
    return frost__cnorm_finish(a, cn_ops[1][a->p->kind].id, outs, n);
}

/* One entry point per direction for all three kinds: checks the call, runs the body, and
 * frees the problem unless the graph took it. */
static frost_status add_op(frost_graph *graph, int dir, frost__cnorm_kind kind, const void *desc, void *out)
{
    frost__cnorm_add a;
    frost_status s = frost__cnorm_begin(&a, graph, cn_ops[dir][kind].fn, cn_ops[dir][kind].op, desc, out);
    if (s == FROST_OK) {
        a.p->kind = kind;
        s = dir == 0 ? forward(&a, desc, out) : backward(&a, desc, out);
    }
    free(a.p);
    return s;
}

/* ---- the public functions ---------------------------------------------------------- */

FROST_API frost_status frost_graph_add_groupnorm(frost_graph *g, const frost_channel_norm_desc *d,
                                                 frost_norm_outputs *out)
{
    return add_op(g, 0, FROST__CNORM_GROUP, d, out);
}

FROST_API frost_status frost_graph_add_instancenorm(frost_graph *g, const frost_channel_norm_desc *d,
                                                    frost_norm_outputs *out)
{
    return add_op(g, 0, FROST__CNORM_INSTANCE, d, out);
}

FROST_API frost_status frost_graph_add_batchnorm(frost_graph *g, const frost_channel_norm_desc *d,
                                                 frost_norm_outputs *out)
{
    return add_op(g, 0, FROST__CNORM_BATCH, d, out);
}

FROST_API frost_status frost_graph_add_groupnorm_backward(frost_graph *g, const frost_channel_norm_backward_desc *d,
                                                          frost_norm_grads *out)
{
    return add_op(g, 1, FROST__CNORM_GROUP, d, out);
}

FROST_API frost_status frost_graph_add_instancenorm_backward(frost_graph *g, const frost_channel_norm_backward_desc *d,
                                                             frost_norm_grads *out)
{
    return add_op(g, 1, FROST__CNORM_INSTANCE, d, out);
}

FROST_API frost_status frost_graph_add_batchnorm_backward(frost_graph *g, const frost_channel_norm_backward_desc *d,
                                                          frost_norm_grads *out)
{
    return add_op(g, 1, FROST__CNORM_BATCH, d, out);
}

/* ---- op classes -------------------------------------------------------------------- */

/* One line of attributes for explain (the graph lists the slots' tensors itself). */
static void cnorm_describe(const frost__graph *g, const frost__node *n, frost__buf *out)
{
    const frost__cnorm_problem *p = n->problem;
    (void)g;
    char dims[160];
    if (!p)
        return;
    frost__dims_str(dims, sizeof dims, p->spatial_rank, p->spatial_dims);
    frost__buf_printf(out, "N=%lld C=%lld", (long long)p->n, (long long)p->c);
    if (p->kind == FROST__CNORM_GROUP)
        frost__buf_printf(out, " G=%lld", (long long)p->groups);
    frost__buf_printf(out, " spatial=[%s] eps=%g", dims, p->epsilon);
    if (!p->backward)
        frost__buf_printf(out, " %s", p->phase == FROST_NORM_INFERENCE ? "inference" : "training");
    if (p->update_running)
        frost__buf_printf(out, " momentum=%g updates running stats", p->momentum);
    if (p->zero_centered_scale)
        frost__buf_printf(out, " zero_centered_scale");
    if (p->deterministic)
        frost__buf_printf(out, " deterministic");
    const frost__cnorm_layout *x = &p->slot[FROST__CNORM_X];
    frost__buf_printf(out, " x_layout=%s", x->nchw ? "nchw" : x->nhwc ? "nhwc" : "strided");
}

/* All three kinds share one impl per direction (kind is in the problem).  Running
 * statistics are deliberately not output slots (see the comment at the top). */
#define CNORM_CLASS(var, op_name, dir, outputs)                                                                        \
    const frost__op_class var = {                                                                                      \
        .name = op_name,                                                                                               \
        .num_slots = FROST__CNORM_NUM_SLOTS,                                                                           \
        .slot_names = frost__cnorm_slot_names,                                                                         \
        .describe = cnorm_describe,                                                                                    \
        .impl = {[FROST__ENGINE_CUDA] = &frost__cnorm_##dir##_cuda, [FROST__ENGINE_REF] = &frost__cnorm_##dir##_ref},  \
        .output_slots = outputs,                                                                                       \
    }

#define FWD_OUTPUTS ((1u << FROST__CNORM_Y) | (1u << FROST__CNORM_MEAN) | (1u << FROST__CNORM_INV_STD))
#define BWD_OUTPUTS ((1u << FROST__CNORM_D_X) | (1u << FROST__CNORM_D_SCALE) | (1u << FROST__CNORM_D_BIAS))

CNORM_CLASS(frost__groupnorm_fwd_class, "groupnorm_fwd", fwd, FWD_OUTPUTS);
CNORM_CLASS(frost__groupnorm_bwd_class, "groupnorm_bwd", bwd, BWD_OUTPUTS);
CNORM_CLASS(frost__instancenorm_fwd_class, "instancenorm_fwd", fwd, FWD_OUTPUTS);
CNORM_CLASS(frost__instancenorm_bwd_class, "instancenorm_bwd", bwd, BWD_OUTPUTS);
CNORM_CLASS(frost__batchnorm_fwd_class, "batchnorm_fwd", fwd, FWD_OUTPUTS);
CNORM_CLASS(frost__batchnorm_bwd_class, "batchnorm_bwd", bwd, BWD_OUTPUTS);
