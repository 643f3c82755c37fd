/*
 * norm.c — LayerNorm and RMSNorm, forward and backward: the four public add functions,
 * their validation and shape inference, and the four op classes.
 *
 * Layout legend: X is [R..., C...]; the last norm_dims dims (C...) are normalized and the
 * leading ones (R...) index independent rows.  rows = prod(R...), cols = prod(C...).
 * Scale, bias and their gradients have the normalized shape (rank norm_dims, or rank(X)
 * with leading 1s).  Saved statistics (mean, inv_std) are f32 with X's rank and dims where
 * the normalized dims are set to 1, so they broadcast against X.
 *
 * One add function serves both kinds and both directions: it reads the caller's
 * descriptor, checks every tensor (a failure names the tensor, the dim, what was expected
 * and what was given), creates the outputs the caller left to frost (0 or AUTO), and fills
 * a frost__norm_problem in which every slot's strides are already split into an outer
 * (per row) and an inner (per column) part.  Engines read only that problem, never the
 * graph's tensor table.
 *
 * Order matters inside an add: everything is validated before the first output is
 * created, so a refused call leaves the graph as it was; and tensor pointers are fetched
 * again after creation because creating a tensor may move the tensor table.
 */
#include "ops/norm/norm.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const norm_slot_names[FROST__NORM_NUM_SLOTS] = {
    "x", "scale", "bias", "y", "mean", "inv_std", "d_y", "d_x", "d_scale", "d_bias",
};

#define DEFAULT_EPSILON 1e-5
#define STATS_WHY "x's dims with the normalized dims set to 1"

/* What an add call is working on; shared by the checks below. */
typedef struct norm_add {
    const char *fn;     /* public function name, for messages */
    const char *op;     /* "rmsnorm_fwd", ... */
    frost__graph *g;
    frost__norm_problem *p;
    const frost__tensor *x;
    frost_tensor inputs[FROST__NORM_NUM_SLOTS]; /* input ids (0 = absent), for aliasing */
} norm_add;

/* One output the call writes: what the caller asked for and what it must look like. */
typedef struct norm_out {
    int slot;
    frost_tensor *result; /* the caller's field: read as the request, written on success */
    frost_tensor id;      /* resolved id (existing or created) */
    frost_dtype dtype;
    int rank;
    int64_t dims[FROST_MAX_RANK];
    int param_shaped; /* user tensors may use rank norm_dims or rank(X) with leading 1s */
    const char *why;  /* where the expected dims come from, for messages */
} norm_out;

static const char *tname(const frost__tensor *t)
{
    return t->name ? t->name : "?";
}

static void dims_str(char *buf, size_t cap, int rank, const int64_t *dims)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < rank && len + 1 < cap; ++i) {
        int n = snprintf(buf + len, cap - len, "%s%lld", i ? "," : "", (long long)dims[i]);
        if (n < 0)
            break;
        len += (size_t)n;
    }
}

static int is_io_dtype(frost_dtype t)
{
    return t == FROST_F32 || t == FROST_F16 || t == FROST_BF16;
}

/* Looks up an input; id 0 is "absent" (an error when required). */
static frost_status get_input(norm_add *a, int slot, frost_tensor id, int required, const frost__tensor **out)
{
    *out = NULL;
    if (id == FROST_TENSOR_NONE) {
        if (required)
            return frost__fail(FROST_INVALID_ARGUMENT, "%s: %s is required (tensor id 0 given)", a->fn,
                               norm_slot_names[slot]);
        return FROST_OK;
    }
    const frost__tensor *t = frost__tensor_get(a->g, id);
    if (!t)
        return frost__fail(FROST_INVALID_ARGUMENT, "%s: %s: unknown tensor id %u (the graph has %u tensors)", a->fn,
                           norm_slot_names[slot], (unsigned)id, (unsigned)a->g->num_tensors);
    if (t->ragged_offset)
        return frost__fail(FROST_NOT_SUPPORTED,
                           "%s: %s '%s' has ragged offsets; norm ops read dense [rows..., C...] tensors: declare "
                           "the packed token tensor without ragged offsets",
                           a->fn, norm_slot_names[slot], tname(t));
    a->inputs[slot] = id;
    *out = t;
    return FROST_OK;
}

/* Scale-like tensor: rank norm_dims, or rank(X) with leading 1s; trailing dims = C... */
static frost_status check_param_shape(norm_add *a, int slot, const frost__tensor *t)
{
    const frost__norm_problem *p = a->p;
    int lead = t->rank - p->inner_rank;
    if (t->rank != p->inner_rank && t->rank != a->x->rank)
        return frost__fail(FROST_INVALID_ARGUMENT,
                           "%s: %s '%s': rank expected %d (norm_dims) or %d (x's rank, leading dims 1), got %d", a->fn,
                           norm_slot_names[slot], tname(t), p->inner_rank, a->x->rank, t->rank);
    for (int i = 0; i < lead; ++i)
        if (t->dims[i] != 1)
            return frost__fail(FROST_INVALID_ARGUMENT, "%s: %s '%s': dim %d expected 1 (a leading dim), got %lld",
                               a->fn, norm_slot_names[slot], tname(t), i, (long long)t->dims[i]);
    for (int i = 0; i < p->inner_rank; ++i)
        if (t->dims[lead + i] != p->inner_dims[i])
            return frost__fail(FROST_INVALID_ARGUMENT,
                               "%s: %s '%s': dim %d expected %lld (normalized dim %d of x), got %lld", a->fn,
                               norm_slot_names[slot], tname(t), lead + i, (long long)p->inner_dims[i], i,
                               (long long)t->dims[lead + i]);
    return FROST_OK;
}

/* Scale or bias input: shape as above, dtype f32 or X's. */
static frost_status check_param_input(norm_add *a, int slot, const frost__tensor *t)
{
    frost_status s = check_param_shape(a, slot, t);
    if (s != FROST_OK)
        return s;
    if (t->dtype != FROST_F32 && t->dtype != a->x->dtype)
        return frost__fail(FROST_INVALID_ARGUMENT, "%s: %s '%s': dtype expected f32 or %s (x's dtype), got %s", a->fn,
                           norm_slot_names[slot], tname(t), frost_dtype_name(a->x->dtype), frost_dtype_name(t->dtype));
    return FROST_OK;
}

/* Expected dims of a statistics tensor: X's dims with the normalized dims set to 1. */
static void stats_dims(const norm_add *a, int64_t *dims)
{
    for (int i = 0; i < a->x->rank; ++i)
        dims[i] = i < a->p->outer_rank ? a->x->dims[i] : 1;
}

static frost_status check_exact_shape(norm_add *a, int slot, const frost__tensor *t, int rank, const int64_t *dims,
                                      const char *why)
{
    char want[160];
    if (t->rank != rank)
        return frost__fail(FROST_INVALID_ARGUMENT, "%s: %s '%s': rank expected %d (%s), got %d", a->fn,
                           norm_slot_names[slot], tname(t), rank, why, t->rank);
    for (int i = 0; i < rank; ++i)
        if (t->dims[i] != dims[i]) {
            dims_str(want, sizeof want, rank, dims);
            return frost__fail(FROST_INVALID_ARGUMENT, "%s: %s '%s': dim %d expected %lld (dims [%s]: %s), got %lld",
                               a->fn, norm_slot_names[slot], tname(t), i, (long long)dims[i], want, why,
                               (long long)t->dims[i]);
        }
    return FROST_OK;
}

/* X-like input (d_y): X's dims and dtype. */
static frost_status check_like_x(norm_add *a, int slot, const frost__tensor *t)
{
    frost_status s = check_exact_shape(a, slot, t, a->x->rank, a->x->dims, "x's dims");
    if (s == FROST_OK && t->dtype != a->x->dtype)
        s = frost__fail(FROST_INVALID_ARGUMENT, "%s: %s '%s': dtype expected %s (x's dtype), got %s", a->fn,
                        norm_slot_names[slot], tname(t), frost_dtype_name(a->x->dtype), frost_dtype_name(t->dtype));
    return s;
}

/* Saved statistics given to the backward: f32, X's dims with normalized dims 1. */
static frost_status check_stats_input(norm_add *a, int slot, const frost__tensor *t)
{
    int64_t dims[FROST_MAX_RANK];
    stats_dims(a, dims);
    frost_status s = check_exact_shape(a, slot, t, a->x->rank, dims, STATS_WHY);
    if (s != FROST_OK)
        return s;
    if (t->dtype != FROST_F32)
        return frost__fail(FROST_INVALID_ARGUMENT, "%s: %s '%s': dtype expected f32, got %s", a->fn,
                           norm_slot_names[slot], tname(t), frost_dtype_name(t->dtype));
    return FROST_OK;
}

/* A written tensor must not address one element twice.  Sufficient test: sorted by
 * stride, every stride reaches past everything the smaller ones span. */
static int elements_overlap(int rank, const int64_t *dims, const int64_t *strides)
{
    int64_t st[FROST_MAX_RANK], dm[FROST_MAX_RANK];
    int n = 0;
    for (int i = 0; i < rank; ++i) {
        if (dims[i] == 0)
            return 0;
        if (dims[i] == 1)
            continue;
        st[n] = strides[i] < 0 ? -strides[i] : strides[i];
        dm[n] = dims[i];
        ++n;
    }
    for (int i = 1; i < n; ++i) /* insertion sort by stride */
        for (int j = i; j > 0 && st[j] < st[j - 1]; --j) {
            int64_t ts = st[j], td = dm[j];
            st[j] = st[j - 1], dm[j] = dm[j - 1];
            st[j - 1] = ts, dm[j - 1] = td;
        }
    int64_t extent = 1;
    for (int i = 0; i < n; ++i) {
        if (st[i] < extent)
            return 1;
        extent += st[i] * (dm[i] - 1);
    }
    return 0;
}

/* Checks a caller-provided output tensor against its spec. */
static frost_status check_output(norm_add *a, const norm_out *o, const norm_out *outs)
{
    frost_tensor id = *o->result;
    const char *what = norm_slot_names[o->slot];
    const frost__tensor *t = frost__tensor_get(a->g, id);
    frost_status s;
    if (!t)
        return frost__fail(FROST_INVALID_ARGUMENT, "%s: %s: unknown tensor id %u (the graph has %u tensors)", a->fn,
                           what, (unsigned)id, (unsigned)a->g->num_tensors);
    for (int i = 0; i < FROST__NORM_NUM_SLOTS; ++i)
        if (a->inputs[i] == id)
            return frost__fail(FROST_INVALID_ARGUMENT,
                               "%s: %s '%s' is also the input %s; outputs must not alias inputs (no in-place norm)",
                               a->fn, what, tname(t), norm_slot_names[i]);
    for (const norm_out *other = outs; other < o; ++other)
        if (*other->result == id)
            return frost__fail(FROST_INVALID_ARGUMENT, "%s: %s '%s' is also given as output %s of the same op", a->fn,
                               what, tname(t), norm_slot_names[other->slot]);
    if (t->producer >= 0)
        return frost__fail(FROST_INVALID_ARGUMENT,
                           "%s: %s '%s' is already produced by node %d; a tensor has one writer", a->fn, what,
                           tname(t), t->producer);
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
    if (elements_overlap(t->rank, t->dims, t->strides))
        return frost__fail(FROST_INVALID_ARGUMENT,
                           "%s: %s '%s': its strides address some elements twice (a broadcast or overlapping "
                           "output); give it distinct elements",
                           a->fn, what, tname(t));
    return FROST_OK;
}

/* Collapses dims into one run: 1 and the stride of the innermost non-1 dim (0 if all dims
 * are 1) when stride[i] == stride[i+1] * dims[i+1] across the non-1 dims; else 0. */
static int collapse(int n, const int64_t *dims, const int64_t *strides, int64_t *stride)
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

/* Which strides a slot keeps: x-like (outer + inner), statistics (outer), parameters (inner). */
enum { LAYOUT_DATA, LAYOUT_STATS, LAYOUT_PARAM };
static const int slot_layout[FROST__NORM_NUM_SLOTS] = {
    [FROST__NORM_X] = LAYOUT_DATA,        [FROST__NORM_SCALE] = LAYOUT_PARAM,  [FROST__NORM_BIAS] = LAYOUT_PARAM,
    [FROST__NORM_Y] = LAYOUT_DATA,        [FROST__NORM_MEAN] = LAYOUT_STATS,   [FROST__NORM_INV_STD] = LAYOUT_STATS,
    [FROST__NORM_D_Y] = LAYOUT_DATA,      [FROST__NORM_D_X] = LAYOUT_DATA,     [FROST__NORM_D_SCALE] = LAYOUT_PARAM,
    [FROST__NORM_D_BIAS] = LAYOUT_PARAM,
};

static void fill_layout(frost__norm_problem *p, int slot, const frost__tensor *t, int which)
{
    frost__norm_layout *l = &p->slot[slot];
    int64_t stride;
    memset(l, 0, sizeof *l);
    l->present = 1;
    l->dtype = t->dtype;
    l->row_stride = -1;
    if (which != LAYOUT_PARAM) {
        for (int i = 0; i < p->outer_rank; ++i)
            l->outer_stride[i] = t->strides[i];
        if (collapse(p->outer_rank, p->outer_dims, l->outer_stride, &stride))
            l->row_stride = stride;
    }
    if (which != LAYOUT_STATS) {
        int lead = t->rank - p->inner_rank;
        for (int i = 0; i < p->inner_rank; ++i)
            l->inner_stride[i] = t->strides[lead + i];
        l->inner_contiguous = collapse(p->inner_rank, p->inner_dims, l->inner_stride, &stride) &&
                              (stride == 1 || p->cols == 1);
    }
}

/* Resolves norm_dims, splits X's dims and checks X itself. */
static frost_status setup_x(norm_add *a, int norm_dims_in, double epsilon_in)
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
        return frost__fail(FROST_INVALID_ARGUMENT, "%s: epsilon expected finite and >= 0 (0 means 1e-5), got %g",
                           a->fn, epsilon_in);
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
static frost_status resolve_outputs(norm_add *a, norm_out *outs, int n)
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
        snprintf(name, sizeof name, "%s%d.%s", a->op, node, norm_slot_names[outs[i].slot]);
        outs[i].id = frost__tensor_new_output(a->g, name, outs[i].dtype, outs[i].rank, outs[i].dims, NULL, 0);
        if (outs[i].id == FROST_TENSOR_NONE)
            return frost__fail(FROST_OUT_OF_MEMORY, "%s: could not create output %s", a->fn, name);
    }
    return FROST_OK;
}

static void out_spec(norm_out *o, int slot, frost_tensor *result, frost_dtype dtype, int rank, const int64_t *dims,
                     int param_shaped, const char *why)
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
static frost_status finish(norm_add *a, frost__op op, norm_out *outs, int num_outs)
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

static frost_status begin(norm_add *a, frost_graph *graph, const char *fn, const char *op, const void *desc,
                          const void *outs)
{
    memset(a, 0, sizeof *a);
    a->fn = fn;
    a->op = op;
    frost__clear_error();
    if (!graph)
        return frost__fail(FROST_INVALID_ARGUMENT, "%s: graph is NULL", fn);
    frost_status s = frost__graph_check_mutable(&graph->g, fn);
    if (s != FROST_OK)
        return s;
    if (!desc)
        return frost__fail(FROST_INVALID_ARGUMENT, "%s: descriptor is NULL", fn);
    if (!outs)
        return frost__fail(FROST_INVALID_ARGUMENT, "%s: output struct is NULL", fn);
    a->g = &graph->g;
    a->p = calloc(1, sizeof *a->p);
    if (!a->p)
        return frost__fail(FROST_OUT_OF_MEMORY, "%s: no memory for the problem", fn);
    return FROST_OK;
}

static frost_status add_forward(frost_graph *graph, const frost_norm_desc *d, frost_norm_outputs *out,
                                frost__norm_kind kind)
{
    norm_add a;
    const char *fn = kind == FROST__NORM_LAYER ? "frost_graph_add_layernorm" : "frost_graph_add_rmsnorm";
    const char *op = kind == FROST__NORM_LAYER ? "layernorm_fwd" : "rmsnorm_fwd";
    frost_status s = begin(&a, graph, fn, op, d, out);
    const frost__tensor *scale = NULL, *bias = NULL;
    norm_out outs[3];
    int n = 0;
    if (s != FROST_OK)
        goto done;
    a.p->kind = kind;
    a.p->phase = d->phase;
    a.p->zero_centered_scale = d->zero_centered_scale != 0;
    if ((s = get_input(&a, FROST__NORM_X, d->x, 1, &a.x)) != FROST_OK ||
        (s = get_input(&a, FROST__NORM_SCALE, d->scale, 0, &scale)) != FROST_OK ||
        (s = get_input(&a, FROST__NORM_BIAS, d->bias, 0, &bias)) != FROST_OK)
        goto done;
    if ((s = setup_x(&a, d->norm_dims, d->epsilon)) != FROST_OK)
        goto done;
    if (d->phase != FROST_NORM_TRAINING && d->phase != FROST_NORM_INFERENCE) {
        s = frost__fail(FROST_INVALID_ARGUMENT,
                        "%s: phase expected FROST_NORM_TRAINING (0) or FROST_NORM_INFERENCE (1), got %d", fn,
                        (int)d->phase);
        goto done;
    }
    if ((scale && (s = check_param_input(&a, FROST__NORM_SCALE, scale)) != FROST_OK) ||
        (bias && (s = check_param_input(&a, FROST__NORM_BIAS, bias)) != FROST_OK))
        goto done;
    if (kind == FROST__NORM_RMS && out->mean != FROST_TENSOR_NONE) {
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
    stats_dims(&a, sdims);
    out_spec(&outs[n++], FROST__NORM_Y, &out->y, a.x->dtype, a.x->rank, a.x->dims, 0, "x's dims");
    if (out->mean != FROST_TENSOR_NONE)
        out_spec(&outs[n++], FROST__NORM_MEAN, &out->mean, FROST_F32, a.x->rank, sdims, 0, STATS_WHY);
    if (out->inv_std != FROST_TENSOR_NONE)
        out_spec(&outs[n++], FROST__NORM_INV_STD, &out->inv_std, FROST_F32, a.x->rank, sdims, 0, STATS_WHY);
    s = finish(&a, kind == FROST__NORM_LAYER ? FROST__OP_LAYERNORM_FWD : FROST__OP_RMSNORM_FWD, outs, n);
done:
    free(a.p);
    return s;
}

static frost_status add_backward(frost_graph *graph, const frost_norm_backward_desc *d, frost_norm_grads *out,
                                 frost__norm_kind kind)
{
    norm_add a;
    const char *fn =
        kind == FROST__NORM_LAYER ? "frost_graph_add_layernorm_backward" : "frost_graph_add_rmsnorm_backward";
    const char *op = kind == FROST__NORM_LAYER ? "layernorm_bwd" : "rmsnorm_bwd";
    frost_status s = begin(&a, graph, fn, op, d, out);
    const frost__tensor *d_y = NULL, *scale = NULL, *mean = NULL, *inv_std = NULL;
    norm_out outs[3];
    int n = 0;
    if (s != FROST_OK)
        goto done;
    a.p->kind = kind;
    a.p->backward = 1;
    a.p->phase = FROST_NORM_TRAINING;
    a.p->zero_centered_scale = d->zero_centered_scale != 0;
    a.p->deterministic = d->deterministic != 0;
    if ((s = get_input(&a, FROST__NORM_X, d->x, 1, &a.x)) != FROST_OK ||
        (s = get_input(&a, FROST__NORM_D_Y, d->d_y, 1, &d_y)) != FROST_OK ||
        (s = get_input(&a, FROST__NORM_SCALE, d->scale, 0, &scale)) != FROST_OK)
        goto done;
    if (kind == FROST__NORM_RMS && d->mean != FROST_TENSOR_NONE) {
        s = frost__fail(FROST_INVALID_ARGUMENT, "%s: mean given, but RMSNorm has no mean: pass 0", fn);
        goto done;
    }
    if ((s = get_input(&a, FROST__NORM_MEAN, d->mean, 0, &mean)) != FROST_OK ||
        (s = get_input(&a, FROST__NORM_INV_STD, d->inv_std, 0, &inv_std)) != FROST_OK)
        goto done;
    if ((s = setup_x(&a, d->norm_dims, d->epsilon)) != FROST_OK ||
        (s = check_like_x(&a, FROST__NORM_D_Y, d_y)) != FROST_OK)
        goto done;
    if ((scale && (s = check_param_input(&a, FROST__NORM_SCALE, scale)) != FROST_OK) ||
        (mean && (s = check_stats_input(&a, FROST__NORM_MEAN, mean)) != FROST_OK) ||
        (inv_std && (s = check_stats_input(&a, FROST__NORM_INV_STD, inv_std)) != FROST_OK))
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
    /* Parameter gradients are f32 with scale's dims (the normalized dims without scale). */
    int prank = scale ? scale->rank : a.p->inner_rank;
    int64_t pdims[FROST_MAX_RANK];
    for (int i = 0; i < prank; ++i)
        pdims[i] = scale ? scale->dims[i] : a.p->inner_dims[i];
    out_spec(&outs[n++], FROST__NORM_D_X, &out->d_x, a.x->dtype, a.x->rank, a.x->dims, 0, "x's dims");
    if (out->d_scale != FROST_TENSOR_NONE)
        out_spec(&outs[n++], FROST__NORM_D_SCALE, &out->d_scale, FROST_F32, prank, pdims, 1, NULL);
    if (out->d_bias != FROST_TENSOR_NONE)
        out_spec(&outs[n++], FROST__NORM_D_BIAS, &out->d_bias, FROST_F32, prank, pdims, 1, NULL);
    s = finish(&a, kind == FROST__NORM_LAYER ? FROST__OP_LAYERNORM_BWD : FROST__OP_RMSNORM_BWD, outs, n);
done:
    free(a.p);
    return s;
}

FROST_API frost_status frost_graph_add_layernorm(frost_graph *g, const frost_norm_desc *d, frost_norm_outputs *out)
{
    return add_forward(g, d, out, FROST__NORM_LAYER);
}

FROST_API frost_status frost_graph_add_rmsnorm(frost_graph *g, const frost_norm_desc *d, frost_norm_outputs *out)
{
    return add_forward(g, d, out, FROST__NORM_RMS);
}

FROST_API frost_status frost_graph_add_layernorm_backward(frost_graph *g, const frost_norm_backward_desc *d,
                                                          frost_norm_grads *out)
{
    return add_backward(g, d, out, FROST__NORM_LAYER);
}

FROST_API frost_status frost_graph_add_rmsnorm_backward(frost_graph *g, const frost_norm_backward_desc *d,
                                                        frost_norm_grads *out)
{
    return add_backward(g, d, out, FROST__NORM_RMS);
}

/* ------------------------------------------------------------------------------------ */
/* Op classes                                                                            */
/* ------------------------------------------------------------------------------------ */

/* One line for explain; the slot -> tensor list is printed by the graph itself. */
static void norm_describe(const frost__graph *g, const frost__node *n, frost__buf *out)
{
    const frost__norm_problem *p = n->problem;
    const frost__norm_layout *l = p->slot;
    (void)g;
    frost__buf_printf(out, "rows=%lld cols=%lld norm_dims=%d %s", (long long)p->rows, (long long)p->cols,
                      p->inner_rank, frost_dtype_name(l[FROST__NORM_X].dtype));
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
    frost__buf_printf(out, "%s%s x:%s", p->zero_centered_scale ? " zero_centered_scale" : "",
                      p->deterministic ? " deterministic" : "",
                      l[FROST__NORM_X].inner_contiguous ? "contiguous-rows" : "strided-rows");
}

/* One class per op kind; both kinds share an impl per direction (kind is in the problem). */
#define NORM_CLASS(var, op_name, dir, outputs)                                                                 \
    const frost__op_class var = {                                                                       \
        .name = op_name,                                                                                \
        .num_slots = FROST__NORM_NUM_SLOTS,                                                             \
        .slot_names = norm_slot_names,                                                                  \
        .describe = norm_describe,                                                                      \
        .impl = {[FROST__ENGINE_CUDA] = &frost__norm_##dir##_cuda, [FROST__ENGINE_REF] = &frost__norm_##dir##_ref}, \
        .output_slots = outputs,                                                                        \
    }

#define FWD_OUTPUTS ((1u << FROST__NORM_Y) | (1u << FROST__NORM_MEAN) | (1u << FROST__NORM_INV_STD))
#define BWD_OUTPUTS ((1u << FROST__NORM_D_X) | (1u << FROST__NORM_D_SCALE) | (1u << FROST__NORM_D_BIAS))

NORM_CLASS(frost__layernorm_fwd_class, "layernorm_fwd", fwd, FWD_OUTPUTS);
NORM_CLASS(frost__layernorm_bwd_class, "layernorm_bwd", bwd, BWD_OUTPUTS);
NORM_CLASS(frost__rmsnorm_fwd_class, "rmsnorm_fwd", fwd, FWD_OUTPUTS);
NORM_CLASS(frost__rmsnorm_bwd_class, "rmsnorm_bwd", bwd, BWD_OUTPUTS);
