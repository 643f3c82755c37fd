/*
 * norm_add.c — the checking kit of the LayerNorm, RMSNorm and AdaLayerNorm add functions:
 * per-tensor checks, output resolution, and the split of every slot's strides into an
 * outer (per row) and an inner (per column) part that engines read.
 *
 * Layout legend: X is [R..., C...]; the last norm_dims dims (C...) are normalized and the
 * leading ones (R...) index independent rows.  rows = prod(R...), cols = prod(C...).
 * Saved statistics (mean, inv_std) are f32 with X's rank and dims where the normalized
 * dims are set to 1, so they broadcast against X.  Parameters (scale, bias and their
 * gradients) follow the rule of the op (norm_add.h): LayerNorm and RMSNorm parameters are
 * the same for every row; AdaLayerNorm parameters have rank(X) and may carry any of X's
 * outer dims, and a parameter dim of 1 is shared by all rows along that dim.
 *
 * Every failure names the tensor, the dim, the expected and the given value.  Tensor
 * pointers are fetched again after outputs are created, because creating a tensor may
 * move the graph's tensor table.
 */
#include "ops/norm/norm_add.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const frost__norm_slot_names[FROST__NORM_NUM_SLOTS] = {
    "x", "scale", "bias", "y", "mean", "inv_std", "d_y", "d_x", "d_scale", "d_bias",
};

#define DEFAULT_EPSILON 1e-5

static const char *tname(const frost__tensor *t)
{
    return t->name ? t->name : "?";
}

static int is_io_dtype(frost_dtype t)
{
    return t == FROST_F32 || t == FROST_F16 || t == FROST_BF16;
}

/* Looks up an input; id 0 is "absent" (an error when required). */
frost_status frost__norm_get_input(frost__norm_add *a, int slot, frost_tensor id, int required,
                                   const frost__tensor **out)
{
    *out = NULL;
    if (id == FROST_TENSOR_NONE) {
        if (required)
            return frost__fail(FROST_INVALID_ARGUMENT, "%s: %s is required (tensor id 0 given)", a->fn,
                               frost__norm_slot_names[slot]);
        return FROST_OK;
    }
    const frost__tensor *t = frost__tensor_get(a->g, id);
    if (!t)
        return frost__fail(FROST_INVALID_ARGUMENT, "%s: %s: unknown tensor id %u (the graph has %u tensors)", a->fn,
                           frost__norm_slot_names[slot], (unsigned)id, (unsigned)a->g->num_tensors);
    if (t->ragged_offset)
        return frost__fail(FROST_NOT_SUPPORTED,
                           "%s: %s '%s' has ragged offsets; norm ops read dense [rows..., C...] tensors: declare "
                           "the packed token tensor without ragged offsets",
                           a->fn, frost__norm_slot_names[slot], tname(t));
    a->inputs[slot] = id;
    *out = t;
    return FROST_OK;
}

/* Parameter-shaped tensor, LayerNorm / RMSNorm rule: rank norm_dims, or rank(X) with
 * leading 1s; trailing dims = C... */
static frost_status check_shared_param_shape(frost__norm_add *a, int slot, const frost__tensor *t)
{
    const frost__norm_problem *p = a->p;
    int lead = t->rank - p->inner_rank;
    if (t->rank != p->inner_rank && t->rank != a->x->rank)
        return frost__fail(FROST_INVALID_ARGUMENT,
                           "%s: %s '%s': rank expected %d (norm_dims) or %d (x's rank, leading dims 1), got %d", a->fn,
                           frost__norm_slot_names[slot], tname(t), p->inner_rank, a->x->rank, t->rank);
    for (int i = 0; i < lead; ++i)
        if (t->dims[i] != 1)
            return frost__fail(FROST_INVALID_ARGUMENT, "%s: %s '%s': dim %d expected 1 (a leading dim), got %lld",
                               a->fn, frost__norm_slot_names[slot], tname(t), i, (long long)t->dims[i]);
    return FROST_OK;
}

/* Parameter-shaped tensor, AdaLayerNorm rule: rank(X); each outer dim 1 (shared by the
 * rows along it) or X's (one parameter row per index); trailing dims = C... */
static frost_status check_ada_param_shape(frost__norm_add *a, int slot, const frost__tensor *t)
{
    const frost__norm_problem *p = a->p;
    if (t->rank != a->x->rank)
        return frost__fail(FROST_INVALID_ARGUMENT,
                           "%s: %s '%s': rank expected %d (x's rank: AdaLayerNorm parameters carry x's outer dims, "
                           "each 1 or x's), got %d",
                           a->fn, frost__norm_slot_names[slot], tname(t), a->x->rank, t->rank);
    for (int i = 0; i < p->outer_rank; ++i)
        if (t->dims[i] != 1 && t->dims[i] != a->x->dims[i])
            return frost__fail(FROST_INVALID_ARGUMENT,
                               "%s: %s '%s': dim %d expected 1 (shared) or %lld (x '%s' dim %d, per sample), got %lld",
                               a->fn, frost__norm_slot_names[slot], tname(t), i, (long long)a->x->dims[i], tname(a->x),
                               i, (long long)t->dims[i]);
    return FROST_OK;
}

/* Scale-like tensor under the call's rule; the trailing dims are the normalized dims. */
static frost_status check_param_shape(frost__norm_add *a, int slot, const frost__tensor *t)
{
    const frost__norm_problem *p = a->p;
    frost_status s = a->ada ? check_ada_param_shape(a, slot, t) : check_shared_param_shape(a, slot, t);
    if (s != FROST_OK)
        return s;
    int lead = t->rank - p->inner_rank;
    for (int i = 0; i < p->inner_rank; ++i)
        if (t->dims[lead + i] != p->inner_dims[i])
            return frost__fail(FROST_INVALID_ARGUMENT,
                               "%s: %s '%s': dim %d expected %lld (normalized dim %d of x), got %lld", a->fn,
                               frost__norm_slot_names[slot], tname(t), lead + i, (long long)p->inner_dims[i], i,
                               (long long)t->dims[lead + i]);
    return FROST_OK;
}

/* Scale or bias input: shape as above, dtype f32 or X's. */
frost_status frost__norm_check_param_input(frost__norm_add *a, int slot, const frost__tensor *t)
{
    frost_status s = check_param_shape(a, slot, t);
    if (s != FROST_OK)
        return s;
    if (t->dtype != FROST_F32 && t->dtype != a->x->dtype)
        return frost__fail(FROST_INVALID_ARGUMENT, "%s: %s '%s': dtype expected %s%s (x's dtype), got %s", a->fn,
                           frost__norm_slot_names[slot], tname(t), a->x->dtype == FROST_F32 ? "" : "f32 or ",
                           frost_dtype_name(a->x->dtype), frost_dtype_name(t->dtype));
    return FROST_OK;
}

/* Expected dims of a statistics tensor: X's dims with the normalized dims set to 1. */
void frost__norm_stats_dims(const frost__norm_add *a, int64_t *dims)
{
    for (int i = 0; i < a->x->rank; ++i)
        dims[i] = i < a->p->outer_rank ? a->x->dims[i] : 1;
}

static frost_status check_exact_shape(frost__norm_add *a, int slot, const frost__tensor *t, int rank,
                                      const int64_t *dims, const char *why)
{
    char want[160];
    if (t->rank != rank)
        return frost__fail(FROST_INVALID_ARGUMENT, "%s: %s '%s': rank expected %d (%s), got %d", a->fn,
                           frost__norm_slot_names[slot], tname(t), rank, why, t->rank);
    for (int i = 0; i < rank; ++i)
        if (t->dims[i] != dims[i]) {
            frost__dims_str(want, sizeof want, rank, dims);
            return frost__fail(FROST_INVALID_ARGUMENT, "%s: %s '%s': dim %d expected %lld (dims [%s]: %s), got %lld",
                               a->fn, frost__norm_slot_names[slot], tname(t), i, (long long)dims[i], want, why,
                               (long long)t->dims[i]);
        }
    return FROST_OK;
}

/* X-like input (d_y): X's dims and dtype. */
frost_status frost__norm_check_like_x(frost__norm_add *a, int slot, const frost__tensor *t)
{
    frost_status s = check_exact_shape(a, slot, t, a->x->rank, a->x->dims, "x's dims");
    if (s == FROST_OK && t->dtype != a->x->dtype)
        s = frost__fail(FROST_INVALID_ARGUMENT, "%s: %s '%s': dtype expected %s (x's dtype), got %s", a->fn,
                        frost__norm_slot_names[slot], tname(t), frost_dtype_name(a->x->dtype),
                        frost_dtype_name(t->dtype));
    return s;
}

/* Saved statistics given to the backward: f32, X's dims with normalized dims 1. */
frost_status frost__norm_check_stats_input(frost__norm_add *a, int slot, const frost__tensor *t)
{
    int64_t dims[FROST_MAX_RANK];
    frost__norm_stats_dims(a, dims);
    frost_status s = check_exact_shape(a, slot, t, a->x->rank, dims, FROST__NORM_STATS_WHY);
    if (s != FROST_OK)
        return s;
    if (t->dtype != FROST_F32)
        return frost__fail(FROST_INVALID_ARGUMENT, "%s: %s '%s': dtype expected f32, got %s", a->fn,
                           frost__norm_slot_names[slot], tname(t), frost_dtype_name(t->dtype));
    return FROST_OK;
}

/* A written tensor must not address one element twice.  Sufficient test: sorted by
 * stride, every stride reaches past everything the smaller ones span. */
/* Checks a caller-provided output tensor against its spec. */
static frost_status check_output(frost__norm_add *a, const frost__norm_out *o, const frost__norm_out *outs)
{
    frost_tensor id = *o->result;
    const char *what = frost__norm_slot_names[o->slot];
    const frost__tensor *t = frost__tensor_get(a->g, id);
    frost_status s;
    if (!t)
        return frost__fail(FROST_INVALID_ARGUMENT, "%s: %s: unknown tensor id %u (the graph has %u tensors)", a->fn,
                           what, (unsigned)id, (unsigned)a->g->num_tensors);
    for (int i = 0; i < FROST__NORM_NUM_SLOTS; ++i)
        if (a->inputs[i] == id)
            return frost__fail(FROST_INVALID_ARGUMENT,
                               "%s: %s '%s' is also the input %s; outputs must not alias inputs (no in-place norm)",
                               a->fn, what, tname(t), frost__norm_slot_names[i]);
    for (const frost__norm_out *other = outs; other < o; ++other)
        if (*other->result == id)
            return frost__fail(FROST_INVALID_ARGUMENT, "%s: %s '%s' is also given as output %s of the same op", a->fn,
                               what, tname(t), frost__norm_slot_names[other->slot]);
    if (t->producer >= 0)
        return frost__fail(FROST_INVALID_ARGUMENT,
                           "%s: %s '%s' is already produced by node %d; a tensor has one writer", a->fn, what, tname(t),
                           t->producer);
    if (t->ragged_offset)
        return frost__fail(FROST_NOT_SUPPORTED, "%s: %s '%s' has ragged offsets; norm outputs are dense tensors", a->fn,
                           what, tname(t));
    if (o->param_shaped)
        s = check_param_shape(a, o->slot, t);
    else
        s = check_exact_shape(a, o->slot, t, o->rank, o->dims, o->why);
    if (s != FROST_OK)
        return s;
    if (t->dtype != o->dtype)
        return frost__fail(FROST_INVALID_ARGUMENT, "%s: %s '%s': dtype expected %s, got %s", a->fn, what, tname(t),
                           frost_dtype_name(o->dtype), frost_dtype_name(t->dtype));
    if (frost__elements_overlap(t->rank, t->dims, t->strides))
        return frost__fail(FROST_INVALID_ARGUMENT,
                           "%s: %s '%s': its strides address some elements twice (a broadcast or overlapping "
                           "output); give it distinct elements",
                           a->fn, what, tname(t));
    return FROST_OK;
}

int frost__norm_collapse(int n, const int64_t *dims, const int64_t *strides, int64_t *stride)
{
    int found = 0;
    int64_t span = 0;
    *stride = 0;
    for (int i = n - 1; i >= 0; --i) {
        if (dims[i] == 1)
            continue;
        if (dims[i] == 0)
            return 1;
        if (!found) {
            *stride = strides[i];
            found = 1;
        } else if (strides[i] != span) {
            return 0;
        }
        span = strides[i] * dims[i];
    }
    return 1;
}

/* Which strides a slot keeps: x-like (outer + inner), statistics (outer), parameters
 * (inner, and outer on the dims they carry). */
enum { LAYOUT_DATA, LAYOUT_STATS, LAYOUT_PARAM };
static const int slot_layout[FROST__NORM_NUM_SLOTS] = {
    [FROST__NORM_X] = LAYOUT_DATA,       [FROST__NORM_SCALE] = LAYOUT_PARAM, [FROST__NORM_BIAS] = LAYOUT_PARAM,
    [FROST__NORM_Y] = LAYOUT_DATA,       [FROST__NORM_MEAN] = LAYOUT_STATS,  [FROST__NORM_INV_STD] = LAYOUT_STATS,
    [FROST__NORM_D_Y] = LAYOUT_DATA,     [FROST__NORM_D_X] = LAYOUT_DATA,    [FROST__NORM_D_SCALE] = LAYOUT_PARAM,
    [FROST__NORM_D_BIAS] = LAYOUT_PARAM,
};

/* A parameter's outer dims: 1 for each dim it does not carry (rank norm_dims tensors and
 * leading 1s), X's dim where it carries one (AdaLayerNorm); outer strides to match, 0 on
 * the shared dims, so the outer offset of row r is the same formula as for X. */
static void fill_param_outer(frost__norm_problem *p, int slot, const frost__tensor *t)
{
    frost__norm_layout *l = &p->slot[slot];
    int carries = t->rank == p->outer_rank + p->inner_rank;
    for (int i = 0; i < p->outer_rank; ++i) {
        int64_t d = carries ? t->dims[i] : 1;
        p->param_outer_dims[slot][i] = d;
        l->outer_stride[i] = d == 1 ? 0 : t->strides[i];
        if (d > 1)
            p->per_sample_params = 1;
    }
}

static void fill_layout(frost__norm_problem *p, int slot, const frost__tensor *t, int which)
{
    frost__norm_layout *l = &p->slot[slot];
    int64_t stride;
    memset(l, 0, sizeof *l);
    l->present = 1;
    l->dtype = t->dtype;
    if (which == LAYOUT_PARAM) {
        fill_param_outer(p, slot, t);
    } else {
        for (int i = 0; i < p->outer_rank; ++i)
            l->outer_stride[i] = t->strides[i];
    }
    if (which != LAYOUT_STATS) {
        int lead = t->rank - p->inner_rank;
        for (int i = 0; i < p->inner_rank; ++i)
            l->inner_stride[i] = t->strides[lead + i];
        l->inner_contiguous = frost__norm_collapse(p->inner_rank, p->inner_dims, l->inner_stride, &stride) &&
                              (stride == 1 || p->cols == 1);
    }
}

/* Resolves norm_dims, splits X's dims and checks X itself. */
frost_status frost__norm_setup_x(frost__norm_add *a, int norm_dims_in, double epsilon_in)
{
    frost__norm_problem *p = a->p;
    const frost__tensor *x = a->x;
    int norm_dims = norm_dims_in == 0 ? 1 : norm_dims_in;
    if (norm_dims < 1 || norm_dims > x->rank)
        return frost__fail(FROST_INVALID_ARGUMENT,
                           "%s: norm_dims expected 1..%d (x '%s' has rank %d; 0 means 1), got %d", a->fn, x->rank,
                           tname(x), x->rank, norm_dims_in);
    if (!is_io_dtype(x->dtype))
        return frost__fail(FROST_INVALID_ARGUMENT, "%s: x '%s': dtype expected f32, f16 or bf16, got %s", a->fn,
                           tname(x), frost_dtype_name(x->dtype));
    if (isnan(epsilon_in) || epsilon_in < 0.0 || isinf(epsilon_in))
        return frost__fail(FROST_INVALID_ARGUMENT, "%s: epsilon expected finite and >= 0 (0 means 1e-5), got %g", a->fn,
                           epsilon_in);
    p->epsilon = epsilon_in == 0.0 ? DEFAULT_EPSILON : epsilon_in;
    p->inner_rank = norm_dims;
    p->outer_rank = x->rank - norm_dims;
    p->rows = 1;
    p->cols = 1;
    for (int i = 0; i < p->outer_rank; ++i) {
        p->outer_dims[i] = x->dims[i];
        p->rows *= x->dims[i];
    }
    for (int i = 0; i < norm_dims; ++i) {
        int64_t d = x->dims[p->outer_rank + i];
        if (d == 0)
            return frost__fail(FROST_INVALID_ARGUMENT,
                               "%s: x '%s': dim %d is 0 but it is normalized (norm_dims %d): a norm over zero "
                               "elements is undefined; expected >= 1",
                               a->fn, tname(x), p->outer_rank + i, norm_dims);
        p->inner_dims[i] = d;
        p->cols *= d;
    }
    return FROST_OK;
}

/* Validates every output, then creates the missing ones and writes the ids back. */
static frost_status resolve_outputs(frost__norm_add *a, frost__norm_out *outs, int n)
{
    for (int i = 0; i < n; ++i) {
        frost_tensor req = *outs[i].result;
        if (req != FROST_TENSOR_NONE && req != FROST_TENSOR_AUTO) {
            frost_status s = check_output(a, &outs[i], outs);
            if (s != FROST_OK)
                return s;
        }
    }
    int node = a->g->num_nodes;
    for (int i = 0; i < n; ++i) {
        frost_tensor req = *outs[i].result;
        if (req != FROST_TENSOR_NONE && req != FROST_TENSOR_AUTO) {
            outs[i].id = req;
            continue;
        }
        char name[96];
        snprintf(name, sizeof name, "%s%d.%s", a->op, node, frost__norm_slot_names[outs[i].slot]);
        outs[i].id = frost__tensor_new_output(a->g, name, outs[i].dtype, outs[i].rank, outs[i].dims, NULL, 0);
        if (outs[i].id == FROST_TENSOR_NONE)
            return frost__fail(FROST_OUT_OF_MEMORY, "%s: could not create output %s", a->fn, name);
    }
    return FROST_OK;
}

void frost__norm_out_spec(frost__norm_out *o, int slot, frost_tensor *result, frost_dtype dtype, int rank,
                          const int64_t *dims, int param_shaped, const char *why)
{
    memset(o, 0, sizeof *o);
    o->slot = slot;
    o->result = result;
    o->dtype = dtype;
    o->rank = rank;
    for (int i = 0; i < rank; ++i)
        o->dims[i] = dims[i];
    o->param_shaped = param_shaped;
    o->why = why;
}

/* Common tail: resolve outputs, fill layouts of every slot, append the node. */
frost_status frost__norm_finish(frost__norm_add *a, frost__op op, frost__norm_out *outs, int num_outs)
{
    frost_status s = resolve_outputs(a, outs, num_outs);
    if (s != FROST_OK)
        return s;
    frost__norm_problem *p = a->p;
    frost_tensor slots[FROST__MAX_SLOTS] = {0};
    for (int i = 0; i < FROST__NORM_NUM_SLOTS; ++i)
        slots[i] = a->inputs[i];
    for (int i = 0; i < num_outs; ++i)
        if (outs[i].id)
            slots[outs[i].slot] = outs[i].id;
    for (int i = 0; i < FROST__NORM_NUM_SLOTS; ++i) {
        const frost__tensor *t = frost__tensor_get(a->g, slots[i]);
        if (t)
            fill_layout(p, i, t, slot_layout[i]);
    }
    /* add_node records this node as the producer of the output slots */
    s = frost__graph_add_node(a->g, op, slots, p);
    a->p = NULL; /* owned by the graph now, on success and failure */
    if (s != FROST_OK)
        return s;
    for (int i = 0; i < num_outs; ++i)
        *outs[i].result = outs[i].id;
    return FROST_OK;
}

frost_status frost__norm_add_begin(frost__norm_add *a, frost_graph *graph, const char *fn, const char *op,
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
    if (!desc)
        return frost__fail(FROST_INVALID_ARGUMENT, "%s: descriptor is NULL", fn);
    if (!outs)
        return frost__fail(FROST_INVALID_ARGUMENT, "%s: output struct is NULL", fn);
    a->p = calloc(1, sizeof *a->p);
    if (!a->p)
        return frost__fail(FROST_OUT_OF_MEMORY, "%s: no memory for the problem", fn);
    return FROST_OK;
}
