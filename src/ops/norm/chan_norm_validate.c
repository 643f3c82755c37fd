/*
 * chan_norm_validate.c — the checks of one GroupNorm / InstanceNorm / BatchNorm add call:
 * every input tensor against its slot's shape rule (X-shaped data, per-statistic values,
 * per-channel values), X and the shared attributes, the outputs (the caller's tensors
 * checked, the missing ones created with X's dim order), each slot's layout split into
 * n / c / spatial strides, and the node appended.  chan_norm.c holds the per-direction
 * rules (running statistics, which outputs exist) and the public functions; the layout
 * legend and the decisions behind these checks open that file.
 *
 * Everything is validated before the first output is created, so a refused call leaves
 * the graph as it was; tensor pointers are not kept across output creation, which may
 * move the tensor table.
 */
#include "ops/norm/chan_norm_validate.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const frost__cnorm_slot_names[FROST__CNORM_NUM_SLOTS] = {
    "x", "scale", "bias", "y", "mean", "inv_std", "running_mean", "running_var", "d_y", "d_x", "d_scale", "d_bias",
};

/* What each slot holds: X-shaped data, per-statistic values, or per-channel values. */
enum { DATA, STATS, CHAN };
static const char slot_shape[FROST__CNORM_NUM_SLOTS] = {DATA, CHAN, CHAN, DATA, STATS, STATS,
                                                        CHAN, CHAN, DATA, DATA, CHAN,  CHAN};

const char *const frost__cnorm_kind_names[FROST__CNORM_KIND_COUNT] = {"GroupNorm", "InstanceNorm", "BatchNorm"};

#define DEFAULT_EPSILON 1e-5

/* INVALID_ARGUMENT with the message prefixed by "fn: slot 'name': " (by "fn: " when t is NULL). */
frost_status frost__cnorm_bad(const frost__cnorm_add *a, int slot, const frost__tensor *t, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!t)
        return frost__fail(FROST_INVALID_ARGUMENT, "%s: %s", a->fn, msg);
    return frost__fail(FROST_INVALID_ARGUMENT, "%s: %s '%s': %s", a->fn, frost__cnorm_slot_names[slot], t->name, msg);
}

/* ---- inputs ------------------------------------------------------------------------ */

/* Looks up an input; id 0 is "absent" (an error when required). */
frost_status frost__cnorm_get_input(frost__cnorm_add *a, int slot, frost_tensor id, int required,
                                    const frost__tensor **out)
{
    *out = NULL;
    if (id == FROST_TENSOR_NONE) {
        if (required)
            return frost__cnorm_bad(a, 0, NULL, "%s is required (tensor id 0 given)", frost__cnorm_slot_names[slot]);
        return FROST_OK;
    }
    const frost__tensor *t = frost__tensor_get(a->g, id);
    if (!t)
        return frost__cnorm_bad(a, 0, NULL, "%s: unknown tensor id %u (the graph has %u tensors)",
                                frost__cnorm_slot_names[slot], (unsigned)id, (unsigned)a->g->num_tensors);
    if (t->ragged_offset)
        return frost__fail(FROST_NOT_SUPPORTED,
                           "%s: %s '%s' has ragged offsets; channel norms read dense [N, C, spatial...] tensors", a->fn,
                           frost__cnorm_slot_names[slot], t->name);
    a->inputs[slot] = id;
    *out = t;
    return FROST_OK;
}

static frost_status check_exact_shape(frost__cnorm_add *a, int slot, const frost__tensor *t, int rank,
                                      const int64_t *dims, const char *why)
{
    char want[160];
    frost__dims_str(want, sizeof want, rank, dims);
    if (t->rank != rank)
        return frost__cnorm_bad(a, slot, t, "rank expected %d (dims [%s]: %s), got %d", rank, want, why, t->rank);
    for (int i = 0; i < rank; ++i)
        if (t->dims[i] != dims[i])
            return frost__cnorm_bad(a, slot, t, "dim %d expected %lld (dims [%s]: %s), got %lld", i, (long long)dims[i],
                                    want, why, (long long)t->dims[i]);
    return FROST_OK;
}

/* Per-channel tensor: [C], or rank(X) with every dim 1 except dim 1 = C. */
static frost_status check_channel_shape(frost__cnorm_add *a, int slot, const frost__tensor *t)
{
    const int64_t C = a->p->c;
    if (t->rank == 1 && t->dims[0] != C)
        return frost__cnorm_bad(a, slot, t, "dim 0 expected %lld (C, x's dim 1), got %lld", (long long)C,
                                (long long)t->dims[0]);
    if (t->rank != 1 && t->rank != a->x->rank)
        return frost__cnorm_bad(a, slot, t, "rank expected 1 ([C]) or %d ([1, C, 1, ...], x's rank), got %d",
                                a->x->rank, t->rank);
    for (int i = 0; t->rank > 1 && i < t->rank; ++i)
        if (t->dims[i] != (i == 1 ? C : 1))
            return frost__cnorm_bad(a, slot, t, "dim %d expected %lld (%s), got %lld", i, (long long)(i == 1 ? C : 1),
                                    i == 1 ? "C, x's dim 1" : "[1, C, 1, ...]", (long long)t->dims[i]);
    return FROST_OK;
}

/* Dims of a statistics tensor: [N, G], [N, C] or [C]. */
int frost__cnorm_stats_shape(const frost__cnorm_problem *p, int64_t *dims, const char **why)
{
    if (p->kind == FROST__CNORM_BATCH) {
        dims[0] = p->c, *why = "[C] for BatchNorm";
        return 1;
    }
    dims[0] = p->n;
    dims[1] = p->groups; /* C for InstanceNorm */
    *why = p->kind == FROST__CNORM_GROUP ? "[N, G] for GroupNorm" : "[N, C] for InstanceNorm";
    return 2;
}

/* A tensor in its slot's shape: X's dims (DATA), the statistics' dims (STATS) or one
 * value per channel (CHAN; running statistics only as [C]). */
static frost_status check_slot_shape(frost__cnorm_add *a, int slot, const frost__tensor *t)
{
    int64_t dims[2];
    const char *why;
    if (slot_shape[slot] == DATA)
        return check_exact_shape(a, slot, t, a->x->rank, a->x->dims, "x's dims");
    if (slot_shape[slot] == STATS) {
        int rank = frost__cnorm_stats_shape(a->p, dims, &why);
        return check_exact_shape(a, slot, t, rank, dims, why);
    }
    if (slot == FROST__CNORM_RUNNING_MEAN || slot == FROST__CNORM_RUNNING_VAR)
        return check_exact_shape(a, slot, t, 1, &a->p->c, "[C], one per channel");
    return check_channel_shape(a, slot, t);
}

/* An input in its slot's shape with dtype `want` (FROST_DTYPE_INVALID: f32 or X's). */
frost_status frost__cnorm_check_input(frost__cnorm_add *a, int slot, const frost__tensor *t, frost_dtype want)
{
    frost_status s = check_slot_shape(a, slot, t);
    if (s != FROST_OK || t->dtype == want || (want == FROST_DTYPE_INVALID && t->dtype == FROST_F32))
        return s;
    if (want == FROST_DTYPE_INVALID && t->dtype != a->x->dtype)
        return frost__cnorm_bad(a, slot, t, "dtype expected %s%s (x's dtype), got %s",
                                a->x->dtype == FROST_F32 ? "" : "f32 or ", frost_dtype_name(a->x->dtype),
                                frost_dtype_name(t->dtype));
    if (want != FROST_DTYPE_INVALID)
        return frost__cnorm_bad(a, slot, t, "dtype expected %s%s, got %s", frost_dtype_name(want),
                                want == a->x->dtype && slot_shape[slot] == DATA ? " (x's dtype)" : "",
                                frost_dtype_name(t->dtype));
    return FROST_OK;
}

/* Does a tensor address one element twice?  Sorted by stride, each stride must reach past
 * everything the smaller ones span; a 0 stride on a dim of size > 1 fails at once. */
/* ---- X and the shared attributes --------------------------------------------------- */

/* Checks X, epsilon and num_groups; fills the problem's dims.  computes_stats: the op takes
 * statistics from x, so its reduction sets must not be empty. */
frost_status frost__cnorm_setup_x(frost__cnorm_add *a, int num_groups, double epsilon, int computes_stats)
{
    frost__cnorm_problem *p = a->p;
    const frost__tensor *x = a->x;
    if (x->rank < 2)
        return frost__cnorm_bad(a, FROST__CNORM_X, x, "rank expected 2..%d ([N, C, spatial...]), got %d",
                                FROST_MAX_RANK, x->rank);
    if (x->dtype != FROST_F32 && x->dtype != FROST_F16 && x->dtype != FROST_BF16)
        return frost__cnorm_bad(a, FROST__CNORM_X, x, "dtype expected f32, f16 or bf16, got %s",
                                frost_dtype_name(x->dtype));
    if (isnan(epsilon) || epsilon < 0.0 || isinf(epsilon))
        return frost__cnorm_bad(a, 0, NULL, "epsilon expected finite and >= 0 (0 means 1e-5), got %g", epsilon);
    p->epsilon = epsilon == 0.0 ? DEFAULT_EPSILON : epsilon;
    p->n = x->dims[0];
    p->c = x->dims[1];
    p->spatial_rank = x->rank - 2;
    p->spatial = 1;
    for (int i = 0; i < p->spatial_rank; ++i) {
        p->spatial_dims[i] = x->dims[2 + i];
        p->spatial *= x->dims[2 + i];
    }
    if (p->kind == FROST__CNORM_GROUP && (num_groups <= 0 || p->c % num_groups != 0))
        return frost__cnorm_bad(a, 0, NULL, "num_groups expected a divisor of C = %lld (x '%s' dim 1) and >= 1, got %d",
                                (long long)p->c, x->name, num_groups);
    p->groups = p->kind == FROST__CNORM_GROUP ? num_groups : p->kind == FROST__CNORM_INSTANCE ? p->c : 1;
    const int64_t sets = p->kind == FROST__CNORM_BATCH ? p->c : p->n * p->groups;
    /* elements a set: InstanceNorm with C = 0 has no sets (and 0 groups) */
    const int64_t m = p->kind == FROST__CNORM_BATCH ? p->n * p->spatial
                      : p->groups > 0             ? p->c / p->groups * p->spatial
                                                  : 0;
    if (computes_stats && sets > 0 && m == 0) {
        int dim = 2;
        while (dim < x->rank && x->dims[dim] != 0)
            ++dim;
        if (dim == x->rank) /* no zero spatial dim: GroupNorm C = 0 or BatchNorm N = 0 */
            dim = p->kind == FROST__CNORM_BATCH ? 0 : 1;
        return frost__cnorm_bad(
            a, FROST__CNORM_X, x,
            "dim %d is 0, so each of the %lld %s statistics is taken over 0 elements (undefined); expected "
            "every reduction set to hold >= 1 element",
            dim, (long long)sets, frost__cnorm_kind_names[p->kind]);
    }
    return FROST_OK;
}

/* ---- outputs ----------------------------------------------------------------------- */

/* Packed strides that follow X's dim order (X's strides, largest outermost). */
void frost__cnorm_strides_like_x(const frost__tensor *x, int64_t *strides)
{
    int order[FROST_MAX_RANK];
    for (int i = 0; i < x->rank; ++i)
        order[i] = i;
    for (int i = 1; i < x->rank; ++i) /* stable: equal strides keep the logical order */
        for (int j = i; j > 0 && x->strides[order[j]] > x->strides[order[j - 1]]; --j) {
            int t = order[j];
            order[j] = order[j - 1], order[j - 1] = t;
        }
    int64_t s = 1;
    for (int k = x->rank - 1; k >= 0; --k) {
        strides[order[k]] = s;
        s *= x->dims[order[k]] > 0 ? x->dims[order[k]] : 1;
    }
}

frost__cnorm_out *frost__cnorm_out_spec(frost__cnorm_out *o, int slot, frost_tensor *result, frost_dtype dtype,
                                        int rank, const int64_t *dims)
{
    memset(o, 0, sizeof *o);
    o->slot = slot;
    o->result = result;
    o->dtype = dtype;
    o->rank = rank;
    for (int i = 0; i < rank; ++i)
        o->dims[i] = dims[i];
    return o;
}

/* Checks a caller-provided output tensor against its slot's rules. */
static frost_status check_output(frost__cnorm_add *a, const frost__cnorm_out *o, const frost__cnorm_out *outs)
{
    const frost_tensor id = *o->result;
    const frost__tensor *t = frost__tensor_get(a->g, id);
    if (!t)
        return frost__cnorm_bad(a, 0, NULL, "%s: unknown tensor id %u (the graph has %u tensors)",
                                frost__cnorm_slot_names[o->slot], (unsigned)id, (unsigned)a->g->num_tensors);
    for (int i = 0; i < FROST__CNORM_NUM_SLOTS; ++i)
        if (a->inputs[i] == id)
            return frost__cnorm_bad(a, o->slot, t,
                                    "is also the input %s; outputs must not alias inputs (no in-place norm)",
                                    frost__cnorm_slot_names[i]);
    for (const frost__cnorm_out *other = outs; other < o; ++other)
        if (*other->result == id)
            return frost__cnorm_bad(a, o->slot, t, "is also given as output %s of the same op",
                                    frost__cnorm_slot_names[other->slot]);
    if (t->producer >= 0)
        return frost__cnorm_bad(a, o->slot, t, "is already produced by node %d; a tensor has one writer", t->producer);
    if (t->ragged_offset)
        return frost__fail(FROST_NOT_SUPPORTED, "%s: %s '%s' has ragged offsets; channel-norm outputs are dense", a->fn,
                           frost__cnorm_slot_names[o->slot], t->name);
    frost_status s = frost__cnorm_check_input(a, o->slot, t, o->dtype);
    if (s == FROST_OK && frost__elements_overlap(t->rank, t->dims, t->strides))
        return frost__cnorm_bad(a, o->slot, t,
                                "its strides address some elements twice (a broadcast or overlapping output); "
                                "give it distinct elements");
    return s;
}

/* Validates every caller-given output, then creates the missing ones. */
static frost_status resolve_outputs(frost__cnorm_add *a, frost__cnorm_out *outs, int n)
{
    for (int i = 0; i < n; ++i) {
        frost_tensor req = *outs[i].result;
        if (req != FROST_TENSOR_NONE && req != FROST_TENSOR_AUTO) {
            frost_status s = check_output(a, &outs[i], outs);
            if (s != FROST_OK)
                return s;
            outs[i].id = req;
        }
    }
    for (int i = 0; i < n; ++i) {
        if (outs[i].id)
            continue;
        char name[96];
        snprintf(name, sizeof name, "%s%d.%s", a->op, a->g->num_nodes, frost__cnorm_slot_names[outs[i].slot]);
        outs[i].id = frost__tensor_new_output(a->g, name, outs[i].dtype, outs[i].rank, outs[i].dims,
                                              slot_shape[outs[i].slot] == DATA ? outs[i].strides : NULL, 0);
        if (outs[i].id == FROST_TENSOR_NONE)
            return frost__fail(FROST_OUT_OF_MEMORY, "%s: could not create output %s", a->fn, name);
    }
    return FROST_OK;
}

/* Do the spatial strides sp (size-1 dims skipped) form one run with innermost stride `run`? */
static int spatial_is_run(const frost__cnorm_problem *p, const int64_t *sp, int64_t run)
{
    for (int i = p->spatial_rank - 1; i >= 0; --i) {
        if (p->spatial_dims[i] == 1)
            continue;
        if (sp[i] != run)
            return 0;
        run *= p->spatial_dims[i];
    }
    return 1;
}

static void fill_layout(frost__cnorm_problem *p, int slot, const frost__tensor *t)
{
    frost__cnorm_layout *l = &p->slot[slot];
    l->present = 1;
    l->dtype = t->dtype;
    if (slot_shape[slot] == DATA) {
        l->stride_n = t->strides[0];
        l->stride_c = t->strides[1];
        for (int i = 0; i < p->spatial_rank; ++i)
            l->spatial_stride[i] = t->strides[2 + i];
        l->nchw = spatial_is_run(p, l->spatial_stride, 1) && (p->c <= 1 || l->stride_c == p->spatial);
        l->nhwc = (p->c <= 1 || l->stride_c == 1) && spatial_is_run(p, l->spatial_stride, p->c);
    } else if (slot_shape[slot] == STATS && p->kind != FROST__CNORM_BATCH) {
        l->stat_stride[0] = t->strides[0]; /* n */
        l->stat_stride[1] = t->strides[1]; /* g or c */
    } else {                               /* one per channel: [C] or [1, C, 1, ...] */
        l->stat_stride[0] = t->rank == 1 ? t->strides[0] : t->strides[1];
    }
}

/* Common tail: resolve outputs, fill every slot's layout, append the node. */
frost_status frost__cnorm_finish(frost__cnorm_add *a, frost__op op, frost__cnorm_out *outs, int num_outs)
{
    frost_status s = resolve_outputs(a, outs, num_outs);
    if (s != FROST_OK)
        return s;
    frost_tensor slots[FROST__MAX_SLOTS] = {0};
    for (int i = 0; i < FROST__CNORM_NUM_SLOTS; ++i)
        slots[i] = a->inputs[i];
    for (int i = 0; i < num_outs; ++i)
        slots[outs[i].slot] = outs[i].id;
    for (int i = 0; i < FROST__CNORM_NUM_SLOTS; ++i) {
        const frost__tensor *t = frost__tensor_get(a->g, slots[i]);
        if (t)
            fill_layout(a->p, i, t);
    }
    s = frost__graph_add_node(a->g, op, slots, a->p);
    a->p = NULL; /* owned by the graph now, on success and failure */
    if (s != FROST_OK)
        return s;
    for (int i = 0; i < num_outs; ++i)
        *outs[i].result = outs[i].id;
    return FROST_OK;
}

frost_status frost__cnorm_begin(frost__cnorm_add *a, frost_graph *graph, const char *fn, const char *op,
                                const void *desc, const void *outs)
{
    memset(a, 0, sizeof *a);
    a->fn = fn;
    a->op = op;
    frost__clear_error();
    a->g = graph ? &graph->g : NULL;
    frost_status s = frost__graph_check_mutable(a->g, fn); /* NULL graph: INVALID_ARGUMENT */
    if (s != FROST_OK)
        return s;
    if (!desc || !outs)
        return frost__fail(FROST_INVALID_ARGUMENT, "%s: %s is NULL", fn, desc ? "output struct" : "descriptor");
    a->p = calloc(1, sizeof *a->p);
    if (!a->p)
        return frost__fail(FROST_OUT_OF_MEMORY, "%s: no memory for the problem", fn);
    return FROST_OK;
}
