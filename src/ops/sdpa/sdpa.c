/*
 * sdpa.c — scaled dot-product attention: the two add functions (shape inference of the
 * outputs, creation of the node), the op classes, and explain's one-line description of
 * a node.  The checks of the descriptor's tensors live in sdpa_validate.c.
 *
 * Layout legend: b = batch, h_q / h_kv = query / key-value heads, s_q / s_kv = the
 * tensors' sequence dims, d_qk / d_v = head dims.  Every 4-D operand is [b, h, s, d] in
 * any stride order; a ragged (THD) operand replaces the batch stride by token offsets.
 *
 * Validation is one pass over the descriptor in a fixed order (attributes, Q, K, V, the
 * optional inputs, then the outputs); sdpa_validate.c's header says how it reports.
 *
 * Nothing is created until everything user-given has been checked; outputs frost creates
 * (id 0 or FROST_TENSOR_AUTO) are packed, follow the dim order of their input (O and dQ
 * follow Q, dK follows K, dV follows V) and share its ragged offsets; a ragged output is
 * always token-major (b, then s, then h and d in the input's order), since the token
 * count is unknown before execute.  If appending the node fails after that, the tensors
 * created for it are removed again.
 *
 * Semantics the engines share (also stated in sdpa_ref.c's header comment):
 *   - the problem's BIAS and D_BIAS strides are 0 exactly on the dims where the bias has
 *     size 1 (broadcast forward, reduced backward);
 *   - every row an output owns is written: rows beyond the actual length get 0 (O, dQ,
 *     dK, dV) or -inf (stats).  A padded output owns its s rows per batch; a ragged one
 *     the tokens of each batch's slice, and nothing outside the slices is touched.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/sdpa/sdpa_validate.h"

/* ------------------------------------------------------------------------------------ */
/* Slots                                                                                  */
/* ------------------------------------------------------------------------------------ */

const char *const frost__sdpa_slot_names[FROST__SDPA_NUM_SLOTS] = {
    [FROST__SDPA_Q] = "q",           [FROST__SDPA_K] = "k",           [FROST__SDPA_V] = "v",
    [FROST__SDPA_O] = "o",           [FROST__SDPA_STATS] = "stats",   [FROST__SDPA_BIAS] = "bias",
    [FROST__SDPA_SINK] = "sink",     [FROST__SDPA_SEQ_LEN_Q] = "seq_len_q",
    [FROST__SDPA_SEQ_LEN_KV] = "seq_len_kv",                          [FROST__SDPA_D_O] = "d_o",
    [FROST__SDPA_D_Q] = "d_q",       [FROST__SDPA_D_K] = "d_k",       [FROST__SDPA_D_V] = "d_v",
    [FROST__SDPA_D_BIAS] = "d_bias", [FROST__SDPA_D_SINK] = "d_sink", [FROST__SDPA_RAGGED_Q] = "ragged_q",
    [FROST__SDPA_RAGGED_K] = "ragged_k",     [FROST__SDPA_RAGGED_V] = "ragged_v",
    [FROST__SDPA_RAGGED_O] = "ragged_o",     [FROST__SDPA_RAGGED_D_O] = "ragged_d_o",
    [FROST__SDPA_RAGGED_D_Q] = "ragged_d_q", [FROST__SDPA_RAGGED_D_K] = "ragged_d_k",
    [FROST__SDPA_RAGGED_D_V] = "ragged_d_v",
};

int frost__sdpa_ragged_slot(int data_slot)
{
    switch (data_slot) {
    case FROST__SDPA_Q: return FROST__SDPA_RAGGED_Q;
    case FROST__SDPA_K: return FROST__SDPA_RAGGED_K;
    case FROST__SDPA_V: return FROST__SDPA_RAGGED_V;
    case FROST__SDPA_O: return FROST__SDPA_RAGGED_O;
    case FROST__SDPA_D_O: return FROST__SDPA_RAGGED_D_O;
    case FROST__SDPA_D_Q: return FROST__SDPA_RAGGED_D_Q;
    case FROST__SDPA_D_K: return FROST__SDPA_RAGGED_D_K;
    case FROST__SDPA_D_V: return FROST__SDPA_RAGGED_D_V;
    default: return -1;
    }
}

/* ------------------------------------------------------------------------------------ */
/* Outputs                                                                                */
/* ------------------------------------------------------------------------------------ */

/* An output frost creates later: its slot, name suffix, and shape. */
typedef struct auto_out {
    int slot;
    const char *suffix;
    frost_dtype dtype;
    int rank;
    int64_t dims[4];
    int64_t strides[4];
    frost_tensor ragged;
    frost_tensor *dest; /* where the new id is written back */
} auto_out;

static int64_t abs64(int64_t x)
{
    return x < 0 ? -x : x;
}

/* Ordering key of axis a of `like`: larger is outer.  A ragged tensor keeps the batch
 * outermost and the tokens next (the token count is unknown until execute, so no other
 * dim can sit outside the tokens). */
static int64_t axis_key(const frost__tensor *like, int a)
{
    if (like->ragged_offset && (a == 0 || a == 2))
        return a == 0 ? INT64_MAX : INT64_MAX - 1;
    return abs64(like->strides[a]);
}

/* Packed strides for dims in the dim order of `like` (outermost = largest stride; ties
 * keep the natural order). */
static void strides_like(const frost__tensor *like, const int64_t dims[4], int64_t out[4])
{
    int order[4] = {0, 1, 2, 3};
    for (int i = 1; i < 4; i++) {
        for (int j = i; j > 0; j--) {
            int a = order[j - 1], c = order[j];
            int64_t ka = axis_key(like, a), kc = axis_key(like, c);
            if (kc > ka || (kc == ka && c < a)) {
                order[j - 1] = c;
                order[j] = a;
            }
        }
    }
    int64_t stride = 1;
    for (int i = 3; i >= 0; i--) {
        out[order[i]] = stride;
        stride *= dims[order[i]];
    }
}

static auto_out *plan_auto(auto_out *autos, int *n_autos, int slot, frost_tensor *dest, frost_dtype dtype,
                           const int64_t dims[4])
{
    auto_out *a = &autos[(*n_autos)++];
    memset(a, 0, sizeof *a);
    a->slot = slot;
    a->suffix = frost__sdpa_slot_names[slot];
    a->dtype = dtype;
    a->rank = 4;
    memcpy(a->dims, dims, sizeof a->dims);
    int64_t stride = 1;
    for (int k = 3; k >= 0; k--) {
        a->strides[k] = stride;
        stride *= dims[k];
    }
    a->dest = dest;
    return a;
}

/* Resolves a 4-D I/O output (O, dQ, dK, dV): checks a user-given tensor or plans an
 * automatic one shaped like `like`. */
static frost_status resolve_io_out(vstate *v, frost_tensor *id, int slot, const char *role, const int roles[4],
                                   const frost__tensor *like, auto_out *autos, int *n_autos)
{
    if (*id != FROST_TENSOR_NONE && *id != FROST_TENSOR_AUTO) {
        const frost__tensor *t;
        frost_status s;
        if ((s = frost__sdpa_lookup(v, *id, role, 1, &t)) || (s = frost__sdpa_check_io(v, slot, role, t, roles)) ||
            (s = frost__sdpa_check_no_broadcast(v, role, t)) ||
            (s = frost__sdpa_check_output_id(v, *id, role, t, slot)))
            return s;
        v->slot[slot] = *id;
        return FROST_OK;
    }
    int64_t dims[4];
    for (int k = 0; k < 4; k++)
        dims[k] = v->pd[roles[k]];
    auto_out *a = plan_auto(autos, n_autos, slot, id, v->p->dtype, dims);
    strides_like(like, a->dims, a->strides);
    a->ragged = like->ragged_offset;
    frost__sdpa_operand *o = &v->p->op[slot];
    o->present = 1;
    o->dtype = a->dtype;
    memcpy(o->stride, a->strides, sizeof o->stride);
    if (a->ragged) /* `like` passed check_ragged, so its offsets tensor exists */
        frost__sdpa_record_ragged(v, slot, a->ragged, frost__tensor_get(v->g, a->ragged)->dtype);
    return FROST_OK;
}

/* Creates the planned outputs and appends the node; on failure removes what it created. */
static frost_status commit(vstate *v, frost__op op, auto_out *autos, int n_autos)
{
    frost__graph *g = v->g;
    uint32_t first_new = g->num_tensors + 1;
    frost_tensor ids[8];
    int node = g->num_nodes;
    frost_status s = FROST_OK;
    for (int i = 0; i < n_autos; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s%d.%s", v->op, node, autos[i].suffix);
        ids[i] = frost__tensor_new_output(g, name, autos[i].dtype, autos[i].rank, autos[i].dims, autos[i].strides,
                                          autos[i].ragged);
        if (!ids[i]) {
            s = frost__fail(FROST_OUT_OF_MEMORY, "%s: could not create output %s", v->op, autos[i].suffix);
            break;
        }
        v->slot[autos[i].slot] = ids[i];
    }
    if (s == FROST_OK) {
        frost__sdpa_problem *p = v->p;
        v->p = NULL; /* frost__graph_add_node owns it from here, on success and failure */
        s = frost__graph_add_node(g, op, v->slot, p);
    } else {
        free(v->p);
        v->p = NULL;
    }
    if (s != FROST_OK) {
        for (uint32_t id = first_new; id <= g->num_tensors; id++) {
            free(g->tensors[id].name);
            g->tensors[id].name = NULL;
        }
        if (g->num_tensors >= first_new)
            g->num_tensors = first_new - 1;
        return s;
    }
    for (int i = 0; i < n_autos; i++)
        *autos[i].dest = ids[i];
    return FROST_OK;
}

static frost_status begin(vstate *v, frost_graph *graph, const char *op, const char *fn, int backward)
{
    memset(v, 0, sizeof *v);
    v->op = op;
    for (int k = 0; k < PD_COUNT; k++)
        v->pd[k] = -1;
    frost_status s = frost__graph_check_mutable(graph ? &graph->g : NULL, fn);
    if (s)
        return s;
    v->g = &graph->g;
    v->p = calloc(1, sizeof *v->p);
    if (!v->p)
        return frost__fail(FROST_OUT_OF_MEMORY, "%s: out of memory", op);
    v->p->backward = backward;
    return FROST_OK;
}

/* ------------------------------------------------------------------------------------ */
/* Public add functions                                                                  */
/* ------------------------------------------------------------------------------------ */

FROST_API frost_status frost_graph_add_sdpa(frost_graph *graph, const frost_sdpa_desc *d, frost_sdpa_outputs *out)
{
    frost__clear_error();
    vstate v;
    frost_status s = begin(&v, graph, "sdpa", "frost_graph_add_sdpa", 0);
    if (s)
        return s;
    if (!d || !out) {
        free(v.p);
        return frost__sdpa_invalid(&v, "%s is NULL", !d ? "desc" : "out");
    }
    const frost__tensor *bias = NULL, *t;
    sdpa_inputs in = {d->q, d->k, d->v, d->bias, d->sink, d->seq_len_q, d->seq_len_kv, &d->attrs};
    auto_out autos[2];
    int n_autos = 0;
    frost_tensor o_id = out->o, stats_id = out->stats;
    if ((s = frost__sdpa_check_inputs(&v, &in, &bias)))
        goto fail;
    if ((s = resolve_io_out(&v, &o_id, FROST__SDPA_O, "O", roles_o, frost__tensor_get(v.g, d->q), autos, &n_autos)))
        goto fail;
    if (stats_id == FROST_TENSOR_AUTO) {
        int64_t dims[4] = {v.p->b, v.p->h_q, v.p->s_q, 1};
        auto_out *a = plan_auto(autos, &n_autos, FROST__SDPA_STATS, &stats_id, FROST_F32, dims);
        frost__sdpa_operand *o = &v.p->op[FROST__SDPA_STATS];
        o->present = 1;
        o->dtype = FROST_F32;
        memcpy(o->stride, a->strides, 3 * sizeof(int64_t));
    } else if (stats_id != FROST_TENSOR_NONE) {
        if ((s = frost__sdpa_lookup(&v, stats_id, "stats", 1, &t)) || (s = frost__sdpa_check_stats(&v, "stats", t)) ||
            (s = frost__sdpa_check_no_broadcast(&v, "stats", t)) ||
            (s = frost__sdpa_check_output_id(&v, stats_id, "stats", t, -1)))
            goto fail;
        v.slot[FROST__SDPA_STATS] = stats_id;
    }
    if ((s = commit(&v, FROST__OP_SDPA_FWD, autos, n_autos)))
        return s;
    out->o = o_id;
    out->stats = stats_id;
    return FROST_OK;
fail:
    free(v.p);
    return s;
}

FROST_API frost_status frost_graph_add_sdpa_backward(frost_graph *graph, const frost_sdpa_backward_desc *d,
                                                     frost_sdpa_grads *out)
{
    frost__clear_error();
    vstate v;
    frost_status s = begin(&v, graph, "sdpa_backward", "frost_graph_add_sdpa_backward", 1);
    if (s)
        return s;
    if (!d || !out) {
        free(v.p);
        return frost__sdpa_invalid(&v, "%s is NULL", !d ? "desc" : "out");
    }
    const frost__tensor *bias = NULL, *t;
    sdpa_inputs in = {d->q, d->k, d->v, d->bias, d->sink, d->seq_len_q, d->seq_len_kv, &d->attrs};
    auto_out autos[5];
    int n_autos = 0;
    frost_sdpa_grads res = *out;
    v.p->deterministic = d->deterministic != 0;
    if ((s = frost__sdpa_check_inputs(&v, &in, &bias)))
        goto fail;
    if ((s = frost__sdpa_lookup(&v, d->o, "O", 1, &t)) ||
        (s = frost__sdpa_check_io(&v, FROST__SDPA_O, "O", t, roles_o)))
        goto fail;
    v.slot[FROST__SDPA_O] = d->o;
    if ((s = frost__sdpa_lookup(&v, d->d_o, "dO", 1, &t)) ||
        (s = frost__sdpa_check_io(&v, FROST__SDPA_D_O, "dO", t, roles_o)))
        goto fail;
    v.slot[FROST__SDPA_D_O] = d->d_o;
    if ((s = frost__sdpa_lookup(&v, d->stats, "stats", 1, &t)) || (s = frost__sdpa_check_stats(&v, "stats", t)))
        goto fail;
    v.slot[FROST__SDPA_STATS] = d->stats;

    if (res.d_bias != FROST_TENSOR_NONE && !bias) {
        s = frost__sdpa_invalid(&v, "d_bias is requested but the descriptor has no bias");
        goto fail;
    }
    if (res.d_sink != FROST_TENSOR_NONE && !v.slot[FROST__SDPA_SINK]) {
        s = frost__sdpa_invalid(&v, "d_sink is requested but the descriptor has no sink");
        goto fail;
    }
    if ((s = resolve_io_out(&v, &res.d_q, FROST__SDPA_D_Q, "dQ", roles_q, frost__tensor_get(v.g, d->q), autos,
                            &n_autos)) ||
        (s = resolve_io_out(&v, &res.d_k, FROST__SDPA_D_K, "dK", roles_k, frost__tensor_get(v.g, d->k), autos,
                            &n_autos)) ||
        (s = resolve_io_out(&v, &res.d_v, FROST__SDPA_D_V, "dV", roles_v, frost__tensor_get(v.g, d->v), autos,
                            &n_autos)))
        goto fail;
    if (res.d_bias == FROST_TENSOR_AUTO) {
        auto_out *a = plan_auto(autos, &n_autos, FROST__SDPA_D_BIAS, &res.d_bias, FROST_F32, bias->dims);
        frost__sdpa_operand *o = &v.p->op[FROST__SDPA_D_BIAS];
        o->present = 1;
        o->dtype = FROST_F32;
        for (int k = 0; k < 4; k++)
            o->stride[k] = bias->dims[k] == 1 ? 0 : a->strides[k];
    } else if (res.d_bias != FROST_TENSOR_NONE) {
        if ((s = frost__sdpa_lookup(&v, res.d_bias, "d_bias", 1, &t)) || (s = frost__sdpa_check_d_bias(&v, t, bias)) ||
            (s = frost__sdpa_check_no_broadcast(&v, "d_bias", t)) ||
            (s = frost__sdpa_check_output_id(&v, res.d_bias, "d_bias", t, FROST__SDPA_D_BIAS)))
            goto fail;
        v.slot[FROST__SDPA_D_BIAS] = res.d_bias;
    }
    if (res.d_sink == FROST_TENSOR_AUTO) {
        int64_t dims[4] = {1, v.p->h_q, 1, 1};
        auto_out *a = plan_auto(autos, &n_autos, FROST__SDPA_D_SINK, &res.d_sink, FROST_F32, dims);
        frost__sdpa_operand *o = &v.p->op[FROST__SDPA_D_SINK];
        o->present = 1;
        o->dtype = FROST_F32;
        o->stride[1] = a->strides[1];
    } else if (res.d_sink != FROST_TENSOR_NONE) {
        if ((s = frost__sdpa_lookup(&v, res.d_sink, "d_sink", 1, &t)) ||
            (s = frost__sdpa_check_sink(&v, FROST__SDPA_D_SINK, "d_sink", t)) ||
            (s = frost__sdpa_check_no_broadcast(&v, "d_sink", t)) ||
            (s = frost__sdpa_check_output_id(&v, res.d_sink, "d_sink", t, FROST__SDPA_D_SINK)))
            goto fail;
        v.slot[FROST__SDPA_D_SINK] = res.d_sink;
    }
    if ((s = commit(&v, FROST__OP_SDPA_BWD, autos, n_autos)))
        return s;
    *out = res;
    return FROST_OK;
fail:
    free(v.p);
    return s;
}

/* ------------------------------------------------------------------------------------ */
/* Op classes                                                                             */
/* ------------------------------------------------------------------------------------ */

static void describe(const frost__graph *g, const frost__node *n, frost__buf *out)
{
    (void)g;
    const frost__sdpa_problem *p = n->problem;
    if (!p)
        return;
    frost__buf_printf(out, "b=%lld h_q=%lld h_kv=%lld s_q=%lld s_kv=%lld d_qk=%lld d_v=%lld %s scale=%g",
                      (long long)p->b, (long long)p->h_q, (long long)p->h_kv, (long long)p->s_q, (long long)p->s_kv,
                      (long long)p->d_qk, (long long)p->d_v, frost_dtype_name(p->dtype), p->scale);
    if (!p->mask_flags) {
        frost__buf_printf(out, " mask=none");
    } else {
        frost__buf_printf(out, " mask=");
        if (p->mask_flags & FROST_MASK_LEFT_BOUND)
            frost__buf_printf(out, "left:%lld,", (long long)p->left_bound);
        if (p->mask_flags & FROST_MASK_RIGHT_BOUND)
            frost__buf_printf(out, "right:%lld,", (long long)p->right_bound);
        frost__buf_printf(out, "%s", p->align == FROST_DIAG_BOTTOM_RIGHT ? "bottom_right" : "top_left");
    }
    static const struct {
        int slot;
        const char *word;
    } flags[] = {
        {FROST__SDPA_BIAS, "bias"},           {FROST__SDPA_SINK, "sink"},
        {FROST__SDPA_STATS, "stats"},         {FROST__SDPA_SEQ_LEN_Q, "seq_len_q"},
        {FROST__SDPA_SEQ_LEN_KV, "seq_len_kv"}, {FROST__SDPA_D_BIAS, "d_bias"},
        {FROST__SDPA_D_SINK, "d_sink"},       {FROST__SDPA_RAGGED_Q, "ragged_q"},
        {FROST__SDPA_RAGGED_K, "ragged_k"},   {FROST__SDPA_RAGGED_V, "ragged_v"},
        {FROST__SDPA_RAGGED_O, "ragged_o"},   {FROST__SDPA_RAGGED_D_O, "ragged_d_o"},
        {FROST__SDPA_RAGGED_D_Q, "ragged_d_q"}, {FROST__SDPA_RAGGED_D_K, "ragged_d_k"},
        {FROST__SDPA_RAGGED_D_V, "ragged_d_v"},
    };
    for (size_t i = 0; i < FROST__ARRAY_SIZE(flags); i++) {
        /* backward always reads stats: only the forward's optional output is worth a word */
        if (p->op[flags[i].slot].present && !(p->backward && flags[i].slot == FROST__SDPA_STATS))
            frost__buf_printf(out, " %s", flags[i].word);
    }
    if (p->backward && p->deterministic)
        frost__buf_printf(out, " deterministic");
}

const frost__op_class frost__sdpa_fwd_class = {
    .name = "sdpa_fwd",
    .num_slots = FROST__SDPA_NUM_SLOTS,
    .slot_names = frost__sdpa_slot_names,
    .describe = describe,
    .impl = {[FROST__ENGINE_CUDA] = &frost__sdpa_fwd_cuda, [FROST__ENGINE_REF] = &frost__sdpa_fwd_ref},
    .output_slots = 1u << FROST__SDPA_O | 1u << FROST__SDPA_STATS,
};

const frost__op_class frost__sdpa_bwd_class = {
    .name = "sdpa_bwd",
    .num_slots = FROST__SDPA_NUM_SLOTS,
    .slot_names = frost__sdpa_slot_names,
    .describe = describe,
    .impl = {[FROST__ENGINE_CUDA] = &frost__sdpa_bwd_cuda, [FROST__ENGINE_REF] = &frost__sdpa_bwd_ref},
    .output_slots = 1u << FROST__SDPA_D_Q | 1u << FROST__SDPA_D_K | 1u << FROST__SDPA_D_V |
                    1u << FROST__SDPA_D_BIAS | 1u << FROST__SDPA_D_SINK,
};
