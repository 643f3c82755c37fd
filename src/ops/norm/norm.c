/*
 * norm.c — LayerNorm, RMSNorm and AdaLayerNorm, forward and backward: the six public add
 * functions and the six op classes.  The per-tensor checks live in norm_add.c.
 *
 * Layout legend: X is [R..., C...]; the last norm_dims dims (C...) are normalized and the
 * leading ones (R...) index independent rows.  rows = prod(R...), cols = prod(C...).
 *
 * One add function per direction serves every kind: it reads the caller's descriptor,
 * checks every tensor, describes the outputs (the caller's or 0/AUTO for frost to create)
 * and hands the result to frost__norm_finish, which fills a frost__norm_problem whose
 * slots carry their strides already split into an outer (per row) and an inner (per
 * column) part.  Engines read only that problem, never the graph's tensor table.
 *
 * AdaLayerNorm is LayerNorm with the descriptor unchanged and one rule different: scale
 * and bias have rank(X) and may carry X's outer dims (X [B, S, C], scale [B, 1, C]), so
 * rows of different samples read different parameters.  Its backward's d_scale has
 * scale's dims; d_bias has the dims of the bias the forward used, which the backward
 * descriptor does not name: a caller-declared d_bias says them (any AdaLayerNorm
 * parameter shape), and AUTO takes scale's dims (the usual case, both [B, 1, C]).
 */
#include "ops/norm/norm_add.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What differs between the three ops: the math (kind), the parameter rule, the names. */
typedef struct norm_variant {
    frost__norm_kind kind;
    int ada;
    const char *fn_fwd, *fn_bwd; /* public names, for messages */
    const char *op_fwd, *op_bwd; /* op class names, prefixes of created tensors */
    frost__op fwd, bwd;
} norm_variant;

static const norm_variant layernorm = {
    .kind = FROST__NORM_LAYER,
    .fn_fwd = "frost_graph_add_layernorm",
    .fn_bwd = "frost_graph_add_layernorm_backward",
    .op_fwd = "layernorm_fwd",
    .op_bwd = "layernorm_bwd",
    .fwd = FROST__OP_LAYERNORM_FWD,
    .bwd = FROST__OP_LAYERNORM_BWD,
};
static const norm_variant rmsnorm = {
    .kind = FROST__NORM_RMS,
    .fn_fwd = "frost_graph_add_rmsnorm",
    .fn_bwd = "frost_graph_add_rmsnorm_backward",
    .op_fwd = "rmsnorm_fwd",
    .op_bwd = "rmsnorm_bwd",
    .fwd = FROST__OP_RMSNORM_FWD,
    .bwd = FROST__OP_RMSNORM_BWD,
};
static const norm_variant adalayernorm = {
    .kind = FROST__NORM_LAYER,
    .ada = 1,
    .fn_fwd = "frost_graph_add_adalayernorm",
    .fn_bwd = "frost_graph_add_adalayernorm_backward",
    .op_fwd = "adalayernorm_fwd",
    .op_bwd = "adalayernorm_bwd",
    .fwd = FROST__OP_ADALAYERNORM_FWD,
    .bwd = FROST__OP_ADALAYERNORM_BWD,
};

static frost_status add_forward(frost_graph *graph, const frost_norm_desc *d, frost_norm_outputs *out,
                                const norm_variant *v)
{
    frost__norm_add a;
    const char *fn = v->fn_fwd;
    frost_status s = frost__norm_add_begin(&a, graph, fn, v->op_fwd, d, out);
    const frost__tensor *scale = NULL, *bias = NULL;
    frost__norm_out outs[3];
    int n = 0;
    if (s != FROST_OK)
        goto done;
    a.ada = v->ada;
    a.p->kind = v->kind;
    a.p->phase = d->phase;
    a.p->zero_centered_scale = d->zero_centered_scale != 0;
    if ((s = frost__norm_get_input(&a, FROST__NORM_X, d->x, 1, &a.x)) != FROST_OK ||
        (s = frost__norm_get_input(&a, FROST__NORM_SCALE, d->scale, 0, &scale)) != FROST_OK ||
        (s = frost__norm_get_input(&a, FROST__NORM_BIAS, d->bias, 0, &bias)) != FROST_OK)
        goto done;
    if ((s = frost__norm_setup_x(&a, d->norm_dims, d->epsilon)) != FROST_OK)
        goto done;
    if (d->phase != FROST_NORM_TRAINING && d->phase != FROST_NORM_INFERENCE) {
        s = frost__fail(FROST_INVALID_ARGUMENT,
                        "%s: phase expected FROST_NORM_TRAINING (0) or FROST_NORM_INFERENCE (1), got %d", fn,
                        (int)d->phase);
        goto done;
    }
    if ((scale && (s = frost__norm_check_param_input(&a, FROST__NORM_SCALE, scale)) != FROST_OK) ||
        (bias && (s = frost__norm_check_param_input(&a, FROST__NORM_BIAS, bias)) != FROST_OK))
        goto done;
    if (v->kind == FROST__NORM_RMS && out->mean != FROST_TENSOR_NONE) {
        s = frost__fail(FROST_INVALID_ARGUMENT, "%s: mean output requested, but RMSNorm has no mean: pass 0", fn);
        goto done;
    }
    if (d->phase == FROST_NORM_INFERENCE && (out->mean != FROST_TENSOR_NONE || out->inv_std != FROST_TENSOR_NONE)) {
        s = frost__fail(FROST_INVALID_ARGUMENT,
                        "%s: %s output requested in the inference phase; statistics are saved only in training: pass 0",
                        fn, out->mean != FROST_TENSOR_NONE ? "mean" : "inv_std");
        goto done;
    }
    int64_t sdims[FROST_MAX_RANK];
    frost__norm_stats_dims(&a, sdims);
    frost__norm_out_spec(&outs[n++], FROST__NORM_Y, &out->y, a.x->dtype, a.x->rank, a.x->dims, 0, "x's dims");
    if (out->mean != FROST_TENSOR_NONE)
        frost__norm_out_spec(&outs[n++], FROST__NORM_MEAN, &out->mean, FROST_F32, a.x->rank, sdims, 0,
                             FROST__NORM_STATS_WHY);
    if (out->inv_std != FROST_TENSOR_NONE)
        frost__norm_out_spec(&outs[n++], FROST__NORM_INV_STD, &out->inv_std, FROST_F32, a.x->rank, sdims, 0,
                             FROST__NORM_STATS_WHY);
    s = frost__norm_finish(&a, v->fwd, outs, n);
done:
    free(a.p);
    return s;
}

/* Describes d_scale and d_bias (f32).  LayerNorm / RMSNorm: created with scale's dims (the
 * normalized dims without scale), a caller's tensor may take any parameter shape.
 * AdaLayerNorm: d_scale exactly scale's dims; d_bias any AdaLayerNorm parameter shape
 * (it says which rows each bias element served), created with scale's dims. */
static frost_status param_grad_specs(frost__norm_add *a, const frost__tensor *scale, frost_norm_grads *out,
                                     frost__norm_out *outs, int *n)
{
    const frost__norm_problem *p = a->p;
    int prank = scale ? scale->rank : p->inner_rank;
    int64_t pdims[FROST_MAX_RANK];
    for (int i = 0; i < prank; ++i)
        pdims[i] = scale ? scale->dims[i] : p->inner_dims[i];
    if (out->d_scale != FROST_TENSOR_NONE)
        frost__norm_out_spec(&outs[(*n)++], FROST__NORM_D_SCALE, &out->d_scale, FROST_F32, prank, pdims, !a->ada,
                             "scale's dims");
    if (out->d_bias == FROST_TENSOR_NONE)
        return FROST_OK;
    if (a->ada && !scale && out->d_bias == FROST_TENSOR_AUTO)
        return frost__fail(FROST_INVALID_ARGUMENT,
                           "%s: d_bias is AUTO but there is no scale to take its dims from; declare d_bias (f32) "
                           "with the bias's dims (rank %d, each outer dim 1 or x's, then the normalized dims)",
                           a->fn, a->x->rank);
    frost__norm_out_spec(&outs[(*n)++], FROST__NORM_D_BIAS, &out->d_bias, FROST_F32, prank, pdims, 1, NULL);
    return FROST_OK;
}

static frost_status add_backward(frost_graph *graph, const frost_norm_backward_desc *d, frost_norm_grads *out,
                                 const norm_variant *v)
{
    frost__norm_add a;
    const char *fn = v->fn_bwd;
    frost_status s = frost__norm_add_begin(&a, graph, fn, v->op_bwd, d, out);
    const frost__tensor *d_y = NULL, *scale = NULL, *mean = NULL, *inv_std = NULL;
    frost__norm_out outs[3];
    int n = 0;
    if (s != FROST_OK)
        goto done;
    a.ada = v->ada;
    a.p->kind = v->kind;
    a.p->backward = 1;
    a.p->phase = FROST_NORM_TRAINING;
    a.p->zero_centered_scale = d->zero_centered_scale != 0;
    a.p->deterministic = d->deterministic != 0;
    if ((s = frost__norm_get_input(&a, FROST__NORM_X, d->x, 1, &a.x)) != FROST_OK ||
        (s = frost__norm_get_input(&a, FROST__NORM_D_Y, d->d_y, 1, &d_y)) != FROST_OK ||
        (s = frost__norm_get_input(&a, FROST__NORM_SCALE, d->scale, 0, &scale)) != FROST_OK)
        goto done;
    if (v->kind == FROST__NORM_RMS && d->mean != FROST_TENSOR_NONE) {
        s = frost__fail(FROST_INVALID_ARGUMENT, "%s: mean given, but RMSNorm has no mean: pass 0", fn);
        goto done;
    }
    if ((s = frost__norm_get_input(&a, FROST__NORM_MEAN, d->mean, 0, &mean)) != FROST_OK ||
        (s = frost__norm_get_input(&a, FROST__NORM_INV_STD, d->inv_std, 0, &inv_std)) != FROST_OK)
        goto done;
    if ((s = frost__norm_setup_x(&a, d->norm_dims, d->epsilon)) != FROST_OK ||
        (s = frost__norm_check_like_x(&a, FROST__NORM_D_Y, d_y)) != FROST_OK)
        goto done;
    if ((scale && (s = frost__norm_check_param_input(&a, FROST__NORM_SCALE, scale)) != FROST_OK) ||
        (mean && (s = frost__norm_check_stats_input(&a, FROST__NORM_MEAN, mean)) != FROST_OK) ||
        (inv_std && (s = frost__norm_check_stats_input(&a, FROST__NORM_INV_STD, inv_std)) != FROST_OK))
        goto done;
    if (out->d_scale != FROST_TENSOR_NONE && !scale) {
        s = frost__fail(FROST_INVALID_ARGUMENT, "%s: d_scale requested but no scale is given; pass 0 or give scale",
                        fn);
        goto done;
    }
    if (out->d_bias != FROST_TENSOR_NONE && !d->has_bias) {
        s = frost__fail(FROST_INVALID_ARGUMENT, "%s: d_bias requested but has_bias is 0; pass 0 or set has_bias", fn);
        goto done;
    }
    frost__norm_out_spec(&outs[n++], FROST__NORM_D_X, &out->d_x, a.x->dtype, a.x->rank, a.x->dims, 0, "x's dims");
    if ((s = param_grad_specs(&a, scale, out, outs, &n)) != FROST_OK)
        goto done;
    s = frost__norm_finish(&a, v->bwd, outs, n);
done:
    free(a.p);
    return s;
}

FROST_API frost_status frost_graph_add_layernorm(frost_graph *g, const frost_norm_desc *d, frost_norm_outputs *out)
{
    return add_forward(g, d, out, &layernorm);
}

FROST_API frost_status frost_graph_add_rmsnorm(frost_graph *g, const frost_norm_desc *d, frost_norm_outputs *out)
{
    return add_forward(g, d, out, &rmsnorm);
}

FROST_API frost_status frost_graph_add_adalayernorm(frost_graph *g, const frost_norm_desc *d, frost_norm_outputs *out)
{
    return add_forward(g, d, out, &adalayernorm);
}

FROST_API frost_status frost_graph_add_layernorm_backward(frost_graph *g, const frost_norm_backward_desc *d,
                                                          frost_norm_grads *out)
{
    return add_backward(g, d, out, &layernorm);
}

FROST_API frost_status frost_graph_add_rmsnorm_backward(frost_graph *g, const frost_norm_backward_desc *d,
                                                        frost_norm_grads *out)
{
    return add_backward(g, d, out, &rmsnorm);
}

FROST_API frost_status frost_graph_add_adalayernorm_backward(frost_graph *g, const frost_norm_backward_desc *d,
                                                             frost_norm_grads *out)
{
    return add_backward(g, d, out, &adalayernorm);
}

/* ------------------------------------------------------------------------------------ */
/* Op classes                                                                            */
/* ------------------------------------------------------------------------------------ */

/* " per-sample scale[4,1,*] d_bias[4,1,*]": the outer dims of the parameter slots that
 * vary between rows (* stands for the normalized dims). */
static void describe_per_sample(const frost__norm_problem *p, frost__buf *out)
{
    static const int param_slots[] = {FROST__NORM_SCALE, FROST__NORM_BIAS, FROST__NORM_D_SCALE, FROST__NORM_D_BIAS};
    if (!p->per_sample_params)
        return;
    frost__buf_printf(out, " per-sample");
    for (size_t k = 0; k < FROST__ARRAY_SIZE(param_slots); ++k) {
        int slot = param_slots[k];
        if (!p->slot[slot].present)
            continue;
        frost__buf_printf(out, " %s[", frost__norm_slot_names[slot]);
        for (int i = 0; i < p->outer_rank; ++i)
            frost__buf_printf(out, "%lld,", (long long)p->param_outer_dims[slot][i]);
        frost__buf_printf(out, "*]");
    }
}

/* One line for explain; the slot -> tensor list is printed by the graph itself. */
static void norm_describe(const frost__graph *g, const frost__node *n, frost__buf *out)
{
    const frost__norm_problem *p = n->problem;
    const frost__norm_layout *l = p->slot;
    (void)g;
    frost__buf_printf(out, "rows=%lld cols=%lld norm_dims=%d %s", (long long)p->rows, (long long)p->cols, p->inner_rank,
                      frost_dtype_name(l[FROST__NORM_X].dtype));
    frost__buf_printf(out, " scale=%s",
                      l[FROST__NORM_SCALE].present ? frost_dtype_name(l[FROST__NORM_SCALE].dtype) : "none");
    if (!p->backward)
        frost__buf_printf(out, " bias=%s %s eps=%g",
                          l[FROST__NORM_BIAS].present ? frost_dtype_name(l[FROST__NORM_BIAS].dtype) : "none",
                          p->phase == FROST_NORM_INFERENCE ? "inference" : "training", p->epsilon);
    else if (l[FROST__NORM_INV_STD].present && (p->kind == FROST__NORM_RMS || l[FROST__NORM_MEAN].present))
        frost__buf_printf(out, " saved-stats");
    else
        frost__buf_printf(out, " recomputed-stats eps=%g", p->epsilon);
    describe_per_sample(p, out);
    frost__buf_printf(out, "%s%s x:%s", p->zero_centered_scale ? " zero_centered_scale" : "",
                      p->deterministic ? " deterministic" : "",
                      l[FROST__NORM_X].inner_contiguous ? "contiguous-rows" : "strided-rows");
}

/* One class per op; every op shares one impl per direction and engine (the problem says
 * the kind and whether parameters vary per sample). */
#define NORM_CLASS(var, op_name, cuda_impl, ref_impl, outputs)                                                         \
    const frost__op_class var = {                                                                                      \
        .name = op_name,                                                                                               \
        .num_slots = FROST__NORM_NUM_SLOTS,                                                                            \
        .slot_names = frost__norm_slot_names,                                                                          \
        .describe = norm_describe,                                                                                     \
        .impl = {[FROST__ENGINE_CUDA] = cuda_impl, [FROST__ENGINE_REF] = ref_impl},                                    \
        .output_slots = outputs,                                                                                       \
    }

#define FWD_OUTPUTS ((1u << FROST__NORM_Y) | (1u << FROST__NORM_MEAN) | (1u << FROST__NORM_INV_STD))
#define BWD_OUTPUTS ((1u << FROST__NORM_D_X) | (1u << FROST__NORM_D_SCALE) | (1u << FROST__NORM_D_BIAS))

NORM_CLASS(frost__layernorm_fwd_class, "layernorm_fwd", &frost__norm_fwd_cuda, &frost__norm_fwd_ref, FWD_OUTPUTS);
NORM_CLASS(frost__layernorm_bwd_class, "layernorm_bwd", &frost__norm_bwd_cuda, &frost__norm_bwd_ref, BWD_OUTPUTS);
NORM_CLASS(frost__rmsnorm_fwd_class, "rmsnorm_fwd", &frost__norm_fwd_cuda, &frost__norm_fwd_ref, FWD_OUTPUTS);
NORM_CLASS(frost__rmsnorm_bwd_class, "rmsnorm_bwd", &frost__norm_bwd_cuda, &frost__norm_bwd_ref, BWD_OUTPUTS);
NORM_CLASS(frost__adalayernorm_fwd_class, "adalayernorm_fwd", &frost__norm_fwd_cuda, &frost__norm_fwd_ref,
           FWD_OUTPUTS);
NORM_CLASS(frost__adalayernorm_bwd_class, "adalayernorm_bwd", &frost__norm_bwd_cuda, &frost__norm_bwd_ref,
           BWD_OUTPUTS);
