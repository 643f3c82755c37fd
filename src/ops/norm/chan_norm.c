/*
 * chan_norm.c — GroupNorm, InstanceNorm and BatchNorm, forward and backward: the six
 * public add functions, their validation and shape inference, and the six op classes.
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
#include "ops/norm/chan_norm.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const cnorm_slot_names[FROST__CNORM_NUM_SLOTS] = {
    "x", "scale", "bias", "y", "mean", "inv_std", "running_mean", "running_var", "d_y", "d_x", "d_scale", "d_bias",
};

/* What each slot holds: X-shaped data, per-statistic values, or per-channel values. */
enum { DATA, STATS, CHAN };
static const char slot_shape[FROST__CNORM_NUM_SLOTS] = {DATA, CHAN, CHAN, DATA, STATS, STATS,
                                                        CHAN, CHAN, DATA, DATA, CHAN,  CHAN};

static const char *const kind_names[] = {"GroupNorm", "InstanceNorm", "BatchNorm"};

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

#define DEFAULT_EPSILON 1e-5
#define DEFAULT_MOMENTUM 0.1

/* What an add call is working on. */
typedef struct cn_add {
    const char *fn; /* public function name, for messages */
    const char *op; /* "groupnorm_fwd", ... */
    frost__graph *g;
    frost__cnorm_problem *p;
    const frost__tensor *x;
    frost_tensor inputs[FROST__CNORM_NUM_SLOTS]; /* input ids (0 = absent) */
} cn_add;

/* One output the call writes: the caller's request and, for a tensor frost creates, its
 * dtype, dims and strides (a caller's tensor is checked by its slot's shape rule). */
typedef struct cn_out {
    int slot;
    frost_tensor *result; /* the caller's field: read as the request, written on success */
    frost_tensor id;
    frost_dtype dtype;
    int rank;
    int64_t dims[FROST_MAX_RANK];
    int64_t strides[FROST_MAX_RANK]; /* DATA only; the others are packed */
} cn_out;

/* INVALID_ARGUMENT with the message prefixed by "fn: slot 'name': " (by "fn: " when t is NULL). */
static frost_status bad(const cn_add *a, int slot, const frost__tensor *t, const char *fmt, ...) FROST__PRINTF(4, 5);
static frost_status bad(const cn_add *a, int slot, const frost__tensor *t, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!t)
        return frost__fail(FROST_INVALID_ARGUMENT, "%s: %s", a->fn, msg);
    return frost__fail(FROST_INVALID_ARGUMENT, "%s: %s '%s': %s", a->fn, cnorm_slot_names[slot], t->name, msg);
}

static void dims_str(char *buf, size_t cap, int rank, const int64_t *dims)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < rank && len + 1 < cap; ++i) {
        int k = snprintf(buf + len, cap - len, "%s%lld", i ? "," : "", (long long)dims[i]);
        if (k < 0)
            break;
        len += (size_t)k;
    }
}

/* ---- inputs ------------------------------------------------------------------------ */

/* Looks up an input; id 0 is "absent" (an error when required). */
static frost_status get_input(cn_add *a, int slot, frost_tensor id, int required, const frost__tensor **out)
{
    *out = NULL;
    if (id == FROST_TENSOR_NONE) {
        if (required)
            return bad(a, 0, NULL, "%s is required (tensor id 0 given)", cnorm_slot_names[slot]);
        return FROST_OK;
    }
    const frost__tensor *t = frost__tensor_get(a->g, id);
    if (!t)
        return bad(a, 0, NULL, "%s: unknown tensor id %u (the graph has %u tensors)", cnorm_slot_names[slot],
                   (unsigned)id, (unsigned)a->g->num_tensors);
    if (t->ragged_offset)
        return frost__fail(FROST_NOT_SUPPORTED,
                           "%s: %s '%s' has ragged offsets; channel norms read dense [N, C, spatial...] tensors", a->fn,
                           cnorm_slot_names[slot], t->name);
    a->inputs[slot] = id;
    *out = t;
    return FROST_OK;
}

static frost_status check_exact_shape(cn_add *a, int slot, const frost__tensor *t, int rank, const int64_t *dims,
                                      const char *why)
{
    char want[160];
    dims_str(want, sizeof want, rank, dims);
    if (t->rank != rank)
        return bad(a, slot, t, "rank expected %d (dims [%s]: %s), got %d", rank, want, why, t->rank);
    for (int i = 0; i < rank; ++i)
        if (t->dims[i] != dims[i])
            return bad(a, slot, t, "dim %d expected %lld (dims [%s]: %s), got %lld", i, (long long)dims[i], want, why,
                       (long long)t->dims[i]);
    return FROST_OK;
}

/* Per-channel tensor: [C], or rank(X) with every dim 1 except dim 1 = C. */
static frost_status check_channel_shape(cn_add *a, int slot, const frost__tensor *t)
{
    const int64_t C = a->p->c;
    if (t->rank == 1 && t->dims[0] != C)
        return bad(a, slot, t, "dim 0 expected %lld (C, x's dim 1), got %lld", (long long)C, (long long)t->dims[0]);
    if (t->rank != 1 && t->rank != a->x->rank)
        return bad(a, slot, t, "rank expected 1 ([C]) or %d ([1, C, 1, ...], x's rank), got %d", a->x->rank, t->rank);
    for (int i = 0; t->rank > 1 && i < t->rank; ++i)
        if (t->dims[i] != (i == 1 ? C : 1))
            return bad(a, slot, t, "dim %d expected %lld (%s), got %lld", i, (long long)(i == 1 ? C : 1),
                       i == 1 ? "C, x's dim 1" : "[1, C, 1, ...]", (long long)t->dims[i]);
    return FROST_OK;
}

/* Dims of a statistics tensor: [N, G], [N, C] or [C]. */
static int stats_shape(const frost__cnorm_problem *p, int64_t *dims, const char **why)
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
static frost_status check_slot_shape(cn_add *a, int slot, const frost__tensor *t)
{
    int64_t dims[2];
    const char *why;
    if (slot_shape[slot] == DATA)
        return check_exact_shape(a, slot, t, a->x->rank, a->x->dims, "x's dims");
    if (slot_shape[slot] == STATS) {
        int rank = stats_shape(a->p, dims, &why);
        return check_exact_shape(a, slot, t, rank, dims, why);
    }
    if (slot == FROST__CNORM_RUNNING_MEAN || slot == FROST__CNORM_RUNNING_VAR)
        return check_exact_shape(a, slot, t, 1, &a->p->c, "[C], one per channel");
    return check_channel_shape(a, slot, t);
}

/* An input in its slot's shape with dtype `want` (FROST_DTYPE_INVALID: f32 or X's). */
static frost_status check_input(cn_add *a, int slot, const frost__tensor *t, frost_dtype want)
{
    frost_status s = check_slot_shape(a, slot, t);
    if (s != FROST_OK || t->dtype == want || (want == FROST_DTYPE_INVALID && t->dtype == FROST_F32))
        return s;
    if (want == FROST_DTYPE_INVALID && t->dtype != a->x->dtype)
        return bad(a, slot, t, "dtype expected f32 or %s (x's dtype), got %s", frost_dtype_name(a->x->dtype),
                   frost_dtype_name(t->dtype));
    if (want != FROST_DTYPE_INVALID)
        return bad(a, slot, t, "dtype expected %s%s, got %s", frost_dtype_name(want),
                   want == a->x->dtype && slot_shape[slot] == DATA ? " (x's dtype)" : "", frost_dtype_name(t->dtype));
    return FROST_OK;
}

/* Does a tensor address one element twice?  Sorted by stride, each stride must reach past
 * everything the smaller ones span; a 0 stride on a dim of size > 1 fails at once. */
static int elements_overlap(const frost__tensor *t)
{
    int64_t st[FROST_MAX_RANK], dm[FROST_MAX_RANK];
    int n = 0;
    for (int i = 0; i < t->rank; ++i) {
        if (t->dims[i] == 0)
            return 0;
        if (t->dims[i] > 1)
            st[n] = t->strides[i], dm[n++] = t->dims[i];
    }
    for (int i = 1; i < n; ++i)
        for (int j = i; j > 0 && st[j] < st[j - 1]; --j) {
            int64_t ts = st[j], td = dm[j];
            st[j] = st[j - 1], dm[j] = dm[j - 1];
            st[j - 1] = ts, dm[j - 1] = td;
        }
    int64_t reach = 1; /* elements spanned by the dims sorted so far */
    for (int i = 0; i < n; ++i) {
        if (st[i] < reach)
            return 1;
        reach += st[i] * (dm[i] - 1);
    }
    return 0;
}

/* ---- X and the shared attributes --------------------------------------------------- */

/* Checks X, epsilon and num_groups; fills the problem's dims.  computes_stats: the op takes
 * statistics from x, so its reduction sets must not be empty. */
static frost_status setup_x(cn_add *a, int num_groups, double epsilon, int computes_stats)
{
    frost__cnorm_problem *p = a->p;
    const frost__tensor *x = a->x;
    if (x->rank < 2)
        return bad(a, FROST__CNORM_X, x, "rank expected 2..%d ([N, C, spatial...]), got %d", FROST_MAX_RANK, x->rank);
    if (x->dtype != FROST_F32 && x->dtype != FROST_F16 && x->dtype != FROST_BF16)
        return bad(a, FROST__CNORM_X, x, "dtype expected f32, f16 or bf16, got %s", frost_dtype_name(x->dtype));
    if (isnan(epsilon) || epsilon < 0.0 || isinf(epsilon))
        return bad(a, 0, NULL, "epsilon expected finite and >= 0 (0 means 1e-5), got %g", epsilon);
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
        return bad(a, 0, NULL, "num_groups expected a divisor of C = %lld (x '%s' dim 1) and >= 1, got %d",
                   (long long)p->c, x->name, num_groups);
    p->groups = p->kind == FROST__CNORM_GROUP ? num_groups : p->kind == FROST__CNORM_INSTANCE ? p->c : 1;
    const int64_t sets = p->kind == FROST__CNORM_BATCH ? p->c : p->n * p->groups;
    const int64_t m = p->kind == FROST__CNORM_BATCH ? p->n * p->spatial : p->c / p->groups * p->spatial;
    if (computes_stats && sets > 0 && m == 0) {
        int dim = 2;
        while (dim < x->rank && x->dims[dim] != 0)
            ++dim;
        if (dim == x->rank) /* no zero spatial dim: GroupNorm C = 0 or BatchNorm N = 0 */
            dim = p->kind == FROST__CNORM_BATCH ? 0 : 1;
        return bad(a, FROST__CNORM_X, x,
                   "dim %d is 0, so each of the %lld %s statistics is taken over 0 elements (undefined); expected "
                   "every reduction set to hold >= 1 element",
                   dim, (long long)sets, kind_names[p->kind]);
    }
    return FROST_OK;
}

/* ---- outputs ----------------------------------------------------------------------- */

/* Packed strides that follow X's dim order (X's strides, largest outermost). */
static void strides_like_x(const frost__tensor *x, int64_t *strides)
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

static cn_out *out_spec(cn_out *o, int slot, frost_tensor *result, frost_dtype dtype, int rank, const int64_t *dims)
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
static frost_status check_output(cn_add *a, const cn_out *o, const cn_out *outs)
{
    const frost_tensor id = *o->result;
    const frost__tensor *t = frost__tensor_get(a->g, id);
    if (!t)
        return bad(a, 0, NULL, "%s: unknown tensor id %u (the graph has %u tensors)", cnorm_slot_names[o->slot],
                   (unsigned)id, (unsigned)a->g->num_tensors);
    for (int i = 0; i < FROST__CNORM_NUM_SLOTS; ++i)
        if (a->inputs[i] == id)
            return bad(a, o->slot, t, "is also the input %s; outputs must not alias inputs (no in-place norm)",
                       cnorm_slot_names[i]);
    for (const cn_out *other = outs; other < o; ++other)
        if (*other->result == id)
            return bad(a, o->slot, t, "is also given as output %s of the same op", cnorm_slot_names[other->slot]);
    if (t->producer >= 0)
        return bad(a, o->slot, t, "is already produced by node %d; a tensor has one writer", t->producer);
    if (t->ragged_offset)
        return frost__fail(FROST_NOT_SUPPORTED, "%s: %s '%s' has ragged offsets; channel-norm outputs are dense", a->fn,
                           cnorm_slot_names[o->slot], t->name);
    frost_status s = check_input(a, o->slot, t, o->dtype);
    if (s == FROST_OK && elements_overlap(t))
        return bad(a, o->slot, t,
                   "its strides address some elements twice (a broadcast or overlapping output); "
                   "give it distinct elements");
    return s;
}

/* Validates every caller-given output, then creates the missing ones. */
static frost_status resolve_outputs(cn_add *a, cn_out *outs, int n)
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
        snprintf(name, sizeof name, "%s%d.%s", a->op, a->g->num_nodes, cnorm_slot_names[outs[i].slot]);
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
static frost_status finish(cn_add *a, frost__op op, cn_out *outs, int num_outs)
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

static frost_status begin(cn_add *a, frost_graph *graph, const char *fn, const char *op, const void *desc,
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
    if (!desc || !outs)
        return frost__fail(FROST_INVALID_ARGUMENT, "%s: %s is NULL", fn, desc ? "output struct" : "descriptor");
    a->g = &graph->g;
    a->p = calloc(1, sizeof *a->p);
    if (!a->p)
        return frost__fail(FROST_OUT_OF_MEMORY, "%s: no memory for the problem", fn);
    return FROST_OK;
}

/* ---- forward ----------------------------------------------------------------------- */

/* BatchNorm running statistics: both or neither, required in inference, f32 [C]; when
 * training updates them they must be tensors of their own, and M >= 2. */
static frost_status check_running(cn_add *a, const frost__tensor *rm, const frost__tensor *rv)
{
    frost__cnorm_problem *p = a->p;
    if (!rm && !rv && p->phase == FROST_NORM_INFERENCE)
        return bad(a, 0, NULL,
                   "running_mean and running_var are required in the inference phase (BatchNorm "
                   "inference normalizes with them); got tensor id 0");
    if (!rm && !rv)
        return FROST_OK;
    if (!rm || !rv)
        return bad(a, 0, NULL, "%s is given but %s is not; BatchNorm takes both running statistics or neither",
                   rm ? "running_mean" : "running_var", rm ? "running_var" : "running_mean");
    frost_status s = check_input(a, FROST__CNORM_RUNNING_MEAN, rm, FROST_F32);
    if (s == FROST_OK)
        s = check_input(a, FROST__CNORM_RUNNING_VAR, rv, FROST_F32);
    if (s != FROST_OK || p->phase != FROST_NORM_TRAINING)
        return s;
    p->update_running = 1;
    /* Written in place ([C] with a stride > 0 never overlaps itself). */
    for (int slot = FROST__CNORM_RUNNING_MEAN; slot <= FROST__CNORM_RUNNING_VAR; ++slot)
        for (int i = 0; i < slot; ++i)
            if (a->inputs[i] == a->inputs[slot])
                return bad(a, slot, slot == FROST__CNORM_RUNNING_MEAN ? rm : rv,
                           "is also the input %s; training updates running statistics in place, so they must be "
                           "tensors of their own",
                           cnorm_slot_names[i]);
    if (p->n * p->spatial == 1 && p->c > 0)
        return bad(a, FROST__CNORM_RUNNING_VAR, rv,
                   "x '%s' holds M = N x spatial = 1 value per channel, so the unbiased batch variance (divided by "
                   "M - 1 = 0) that updates running_var is undefined; expected M >= 2, or pass no running statistics",
                   a->x->name);
    return FROST_OK;
}

/* Validates a forward call and appends its node (a->p is owned by the caller until finish). */
static frost_status forward(cn_add *a, const frost_channel_norm_desc *d, frost_norm_outputs *out)
{
    const frost_dtype FROM_X = FROST_DTYPE_INVALID; /* check_input: f32 or X's dtype */
    const frost__tensor *scale, *bias, *rm, *rv;
    frost__cnorm_problem *p = a->p;
    const frost__cnorm_kind kind = p->kind;
    frost_status s;
    p->phase = d->phase;
    p->zero_centered_scale = d->zero_centered_scale != 0;
    if (d->phase != FROST_NORM_TRAINING && d->phase != FROST_NORM_INFERENCE)
        return bad(a, 0, NULL, "phase expected FROST_NORM_TRAINING (0) or FROST_NORM_INFERENCE (1), got %d",
                   (int)d->phase);
    if ((s = get_input(a, FROST__CNORM_X, d->x, 1, &a->x)) != FROST_OK ||
        (s = get_input(a, FROST__CNORM_SCALE, d->scale, 0, &scale)) != FROST_OK ||
        (s = get_input(a, FROST__CNORM_BIAS, d->bias, 0, &bias)) != FROST_OK ||
        (s = get_input(a, FROST__CNORM_RUNNING_MEAN, d->running_mean, 0, &rm)) != FROST_OK ||
        (s = get_input(a, FROST__CNORM_RUNNING_VAR, d->running_var, 0, &rv)) != FROST_OK)
        return s;
    if (kind != FROST__CNORM_BATCH && (rm || rv))
        return bad(a, rm ? FROST__CNORM_RUNNING_MEAN : FROST__CNORM_RUNNING_VAR, rm ? rm : rv,
                   "given, but only BatchNorm keeps running statistics (%s normalizes with each sample's own "
                   "statistics): pass 0",
                   kind_names[kind]);
    if ((s = setup_x(a, d->num_groups, d->epsilon, kind != FROST__CNORM_BATCH || d->phase == FROST_NORM_TRAINING)) !=
            FROST_OK ||
        (scale && (s = check_input(a, FROST__CNORM_SCALE, scale, FROM_X)) != FROST_OK) ||
        (bias && (s = check_input(a, FROST__CNORM_BIAS, bias, FROM_X)) != FROST_OK))
        return s;
    if (isnan(d->momentum) || d->momentum < 0.0 || d->momentum > 1.0)
        return bad(a, 0, NULL, "momentum expected in [0, 1] (0 means 0.1), got %g", d->momentum);
    p->momentum = d->momentum == 0.0 ? DEFAULT_MOMENTUM : d->momentum;
    if (kind == FROST__CNORM_BATCH && (s = check_running(a, rm, rv)) != FROST_OK)
        return s;
    if (d->phase == FROST_NORM_INFERENCE && (out->mean != FROST_TENSOR_NONE || out->inv_std != FROST_TENSOR_NONE))
        return bad(a, 0, NULL,
                   "%s output requested in the inference phase; statistics are saved only in training: pass 0",
                   out->mean != FROST_TENSOR_NONE ? "mean" : "inv_std");
    cn_out outs[3];
    int n = 0;
    int64_t sdims[2];
    const char *why;
    const int srank = stats_shape(p, sdims, &why);
    strides_like_x(a->x, out_spec(&outs[n++], FROST__CNORM_Y, &out->y, a->x->dtype, a->x->rank, a->x->dims)->strides);
    if (out->mean != FROST_TENSOR_NONE)
        out_spec(&outs[n++], FROST__CNORM_MEAN, &out->mean, FROST_F32, srank, sdims);
    if (out->inv_std != FROST_TENSOR_NONE)
        out_spec(&outs[n++], FROST__CNORM_INV_STD, &out->inv_std, FROST_F32, srank, sdims);
    return finish(a, cn_ops[0][kind].id, outs, n);
}

/* ---- backward ---------------------------------------------------------------------- */

static frost_status backward(cn_add *a, const frost_channel_norm_backward_desc *d, frost_norm_grads *out)
{
    const frost__tensor *d_y, *scale, *mean, *inv_std;
    frost_status s;
    a->p->backward = 1;
    a->p->phase = FROST_NORM_TRAINING;
    a->p->zero_centered_scale = d->zero_centered_scale != 0;
    a->p->deterministic = d->deterministic != 0;
    if ((s = get_input(a, FROST__CNORM_X, d->x, 1, &a->x)) != FROST_OK ||
        (s = get_input(a, FROST__CNORM_D_Y, d->d_y, 1, &d_y)) != FROST_OK ||
        (s = get_input(a, FROST__CNORM_SCALE, d->scale, 0, &scale)) != FROST_OK ||
        (s = get_input(a, FROST__CNORM_MEAN, d->mean, 0, &mean)) != FROST_OK ||
        (s = get_input(a, FROST__CNORM_INV_STD, d->inv_std, 0, &inv_std)) != FROST_OK)
        return s;
    if ((s = setup_x(a, d->num_groups, d->epsilon, 1)) != FROST_OK ||
        (s = check_input(a, FROST__CNORM_D_Y, d_y, a->x->dtype)) != FROST_OK ||
        (scale && (s = check_input(a, FROST__CNORM_SCALE, scale, FROST_DTYPE_INVALID)) != FROST_OK) ||
        (mean && (s = check_input(a, FROST__CNORM_MEAN, mean, FROST_F32)) != FROST_OK) ||
        (inv_std && (s = check_input(a, FROST__CNORM_INV_STD, inv_std, FROST_F32)) != FROST_OK))
        return s;
    if (out->d_scale != FROST_TENSOR_NONE && !scale)
        return bad(a, 0, NULL, "d_scale requested but no scale is given; pass 0 or give scale");
    if (out->d_bias != FROST_TENSOR_NONE && !d->has_bias)
        return bad(a, 0, NULL, "d_bias requested but has_bias is 0; pass 0 or set has_bias");
    /* Parameter gradients: f32 with scale's dims ([C] without scale). */
    const int prank = scale ? scale->rank : 1;
    const int64_t *pdims = scale ? scale->dims : &a->p->c;
    cn_out outs[3];
    int n = 0;
    strides_like_x(a->x,
                   out_spec(&outs[n++], FROST__CNORM_D_X, &out->d_x, a->x->dtype, a->x->rank, a->x->dims)->strides);
    if (out->d_scale != FROST_TENSOR_NONE)
        out_spec(&outs[n++], FROST__CNORM_D_SCALE, &out->d_scale, FROST_F32, prank, pdims);
    if (out->d_bias != FROST_TENSOR_NONE)
        out_spec(&outs[n++], FROST__CNORM_D_BIAS, &out->d_bias, FROST_F32, prank, pdims);
    return finish(a, cn_ops[1][a->p->kind].id, outs, n);
}

/* One entry point per direction for all three kinds: checks the call, runs the body, and
 * frees the problem unless the graph took it. */
static frost_status add_op(frost_graph *graph, int dir, frost__cnorm_kind kind, const void *desc, void *out)
{
    cn_add a;
    frost_status s = begin(&a, graph, cn_ops[dir][kind].fn, cn_ops[dir][kind].op, desc, out);
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
    dims_str(dims, sizeof dims, p->spatial_rank, p->spatial_dims);
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
        .slot_names = cnorm_slot_names,                                                                                \
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
