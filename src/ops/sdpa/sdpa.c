/*
 * sdpa.c — scaled dot-product attention: the two add functions (validation and shape
 * inference), the op classes, and explain's one-line description of a node.
 *
 * Layout legend: b = batch, h_q / h_kv = query / key-value heads, s_q / s_kv = the
 * tensors' sequence dims, d_qk / d_v = head dims.  Every 4-D operand is [b, h, s, d] in
 * any stride order; a ragged (THD) operand replaces the batch stride by token offsets.
 *
 * Validation is one pass over the descriptor in a fixed order (attributes, Q, K, V, the
 * optional inputs, then the outputs).  The first problem found is reported through
 * frost__fail with the tensor's role ("K"), the dim (index and name), the expected and the
 * actual value, plus the user's tensor name in brackets, so that a caller can find the
 * offending line of their code without a debugger.  The seven problem dims are
 * "defined" by the first tensor that carries them (Q defines b, h_q, s_q, d_qk; K defines
 * h_kv, s_kv; V defines d_v) and every later tensor must agree: messages then say whose
 * value was expected ("must equal Q's d_qk").
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
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/sdpa/sdpa.h"

/* ------------------------------------------------------------------------------------ */
/* Slots                                                                                  */
/* ------------------------------------------------------------------------------------ */

static const char *const slot_names[FROST__SDPA_NUM_SLOTS] = {
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
/* Validation state                                                                       */
/* ------------------------------------------------------------------------------------ */

/* The seven problem dims; each 4-D operand maps its axes onto four of them. */
enum { PD_B, PD_HQ, PD_HKV, PD_SQ, PD_SKV, PD_DQK, PD_DV, PD_COUNT };
static const char *const pd_names[PD_COUNT] = {"b", "h_q", "h_kv", "s_q", "s_kv", "d_qk", "d_v"};

static const int roles_q[4] = {PD_B, PD_HQ, PD_SQ, PD_DQK};
static const int roles_k[4] = {PD_B, PD_HKV, PD_SKV, PD_DQK};
static const int roles_v[4] = {PD_B, PD_HKV, PD_SKV, PD_DV};
static const int roles_o[4] = {PD_B, PD_HQ, PD_SQ, PD_DV};

typedef struct vstate {
    frost__graph *g;
    const char *op;                 /* "sdpa" or "sdpa_backward": message prefix */
    frost__sdpa_problem *p;
    frost_tensor slot[FROST__SDPA_NUM_SLOTS];
    int64_t pd[PD_COUNT];           /* -1 until defined */
    const char *pd_src[PD_COUNT];   /* role of the tensor that defined it */
    const char *dtype_src;          /* role that defined p->dtype */
} vstate;

/* Fails with INVALID_ARGUMENT and "<op>: <message>". */
static frost_status FROST__PRINTF(2, 3) invalid(const vstate *v, const char *fmt, ...)
{
    frost__buf msg = {0};
    va_list ap;
    va_start(ap, fmt);
    frost__buf_vprintf(&msg, fmt, ap);
    va_end(ap);
    frost_status s = frost__fail(FROST_INVALID_ARGUMENT, "%s: %s", v->op, frost__buf_str(&msg));
    frost__buf_free(&msg);
    return s;
}

static const char *tname(const frost__tensor *t)
{
    return t->name ? t->name : "?";
}

/* Looks up a tensor given in the descriptor.  *out is NULL when the field is 0 and the
 * tensor is optional. */
static frost_status lookup(const vstate *v, frost_tensor id, const char *role, int required,
                           const frost__tensor **out)
{
    *out = NULL;
    if (id == FROST_TENSOR_NONE) {
        if (required)
            return invalid(v, "%s is required but the descriptor's field is 0 (no tensor)", role);
        return FROST_OK;
    }
    if (id == FROST_TENSOR_AUTO)
        return invalid(v, "%s: FROST_TENSOR_AUTO names an output frost creates; %s is an input", role, role);
    const frost__tensor *t = frost__tensor_get(v->g, id);
    if (!t)
        return invalid(v, "%s: unknown tensor id %u (the graph has %u tensors)", role, (unsigned)id,
                       (unsigned)v->g->num_tensors);
    *out = t;
    return FROST_OK;
}

static int is_io_dtype(frost_dtype t)
{
    return t == FROST_F32 || t == FROST_F16 || t == FROST_BF16;
}

/* Notes that data_slot is ragged by the offsets tensor `ragged` (of dtype dt). */
static void record_ragged(vstate *v, int data_slot, frost_tensor ragged, frost_dtype dt)
{
    int rs = frost__sdpa_ragged_slot(data_slot);
    v->p->op[data_slot].ragged = 1;
    v->p->op[data_slot].ragged_dtype = dt;
    v->slot[rs] = ragged;
    v->p->op[rs].present = 1;
    v->p->op[rs].dtype = dt;
    v->p->op[rs].stride[0] = 1;
}

/* Ragged offsets of a 4-D operand: int32/int64 [b + 1] or [b + 1, 1, 1, 1], contiguous. */
static frost_status check_ragged(vstate *v, int data_slot, const char *role, const frost__tensor *t)
{
    if (t->ragged_offset == FROST_TENSOR_NONE)
        return FROST_OK;
    const frost__tensor *r = frost__tensor_get(v->g, t->ragged_offset);
    if (!r)
        return invalid(v, "%s's ragged offset: unknown tensor id %u [tensor \"%s\"]", role,
                       (unsigned)t->ragged_offset, tname(t));
    if (r->dtype != FROST_I32 && r->dtype != FROST_I64)
        return invalid(v, "%s's ragged offset dtype must be i32 or i64, got %s [tensor \"%s\"]", role,
                       frost_dtype_name(r->dtype), tname(r));
    int64_t want = v->pd[PD_B] + 1;
    if (r->rank != 1 && r->rank != 4)
        return invalid(v, "%s's ragged offset must have rank 1 ([b + 1]) or 4 ([b + 1, 1, 1, 1]), got rank %d "
                       "[tensor \"%s\"]", role, r->rank, tname(r));
    if (r->dims[0] != want)
        return invalid(v, "%s's ragged offset dim 0 must be b + 1: expected %lld, got %lld [tensor \"%s\"]", role,
                       (long long)want, (long long)r->dims[0], tname(r));
    for (int k = 1; k < r->rank; k++)
        if (r->dims[k] != 1)
            return invalid(v, "%s's ragged offset dim %d must be 1: expected 1, got %lld [tensor \"%s\"]", role, k,
                           (long long)r->dims[k], tname(r));
    if (r->strides[0] != 1)
        return invalid(v, "%s's ragged offset dim 0 must be contiguous: expected stride 1, got %lld [tensor \"%s\"]",
                       role, (long long)r->strides[0], tname(r));
    record_ragged(v, data_slot, t->ragged_offset, r->dtype);
    return FROST_OK;
}

/* An output must not broadcast (two elements sharing one address). */
static frost_status check_no_broadcast(const vstate *v, const char *role, const frost__tensor *t)
{
    for (int k = 0; k < t->rank; k++)
        if (t->dims[k] > 1 && t->strides[k] == 0)
            return invalid(v, "%s dim %d has stride 0 but size %lld: an output cannot broadcast [tensor \"%s\"]",
                           role, k, (long long)t->dims[k], tname(t));
    return FROST_OK;
}

/* A 4-D I/O operand ([b, h, s, d] with the given roles), in the I/O dtype. */
static frost_status check_io(vstate *v, int slot, const char *role, const frost__tensor *t, const int roles[4])
{
    if (t->rank != 4)
        return invalid(v, "%s must have rank 4 ([b, h, s, d] in any stride order), got rank %d [tensor \"%s\"]",
                       role, t->rank, tname(t));
    if (!v->dtype_src) {
        if (!is_io_dtype(t->dtype))
            return invalid(v, "%s dtype must be f32, f16 or bf16, got %s [tensor \"%s\"]", role,
                           frost_dtype_name(t->dtype), tname(t));
        v->p->dtype = t->dtype;
        v->dtype_src = role;
    } else if (t->dtype != v->p->dtype) {
        return invalid(v, "%s dtype must equal %s's dtype: expected %s, got %s [tensor \"%s\"]", role, v->dtype_src,
                       frost_dtype_name(v->p->dtype), frost_dtype_name(t->dtype), tname(t));
    }
    for (int k = 0; k < 4; k++) {
        int r = roles[k];
        if (t->dims[k] < 1)
            return invalid(v, "%s dim %d (%s) must be >= 1, got %lld [tensor \"%s\"]", role, k, pd_names[r],
                           (long long)t->dims[k], tname(t));
        if (v->pd[r] < 0) {
            v->pd[r] = t->dims[k];
            v->pd_src[r] = role;
        } else if (t->dims[k] != v->pd[r]) {
            return invalid(v, "%s dim %d (%s) must equal %s's %s: expected %lld, got %lld [tensor \"%s\"]", role, k,
                           pd_names[r], v->pd_src[r], pd_names[r], (long long)v->pd[r], (long long)t->dims[k],
                           tname(t));
        }
    }
    frost__sdpa_operand *o = &v->p->op[slot];
    o->present = 1;
    o->dtype = t->dtype;
    for (int k = 0; k < 4; k++)
        o->stride[k] = t->strides[k];
    return check_ragged(v, slot, role, t);
}

/* Optional bias [b|1, h_q|1, s_q, s_kv], f32 or the I/O dtype. */
static frost_status check_bias(vstate *v, int slot, const char *role, const frost__tensor *t)
{
    (void)role;
    static const int roles[4] = {PD_B, PD_HQ, PD_SQ, PD_SKV};
    if (t->rank != 4)
        return invalid(v, "bias must have rank 4 ([b or 1, h_q or 1, s_q, s_kv]), got rank %d [tensor \"%s\"]",
                       t->rank, tname(t));
    if (t->dtype != FROST_F32 && t->dtype != v->p->dtype)
        return invalid(v, "bias dtype must be f32 or the I/O dtype %s, got %s [tensor \"%s\"]",
                       frost_dtype_name(v->p->dtype), frost_dtype_name(t->dtype), tname(t));
    for (int k = 0; k < 4; k++) {
        int64_t want = v->pd[roles[k]];
        int broadcastable = k < 2;
        if (t->dims[k] == want || (broadcastable && t->dims[k] == 1))
            continue;
        if (broadcastable)
            return invalid(v, "bias dim %d (%s) must be 1 or %s's %s: expected 1 or %lld, got %lld [tensor \"%s\"]",
                           k, pd_names[roles[k]], v->pd_src[roles[k]], pd_names[roles[k]], (long long)want,
                           (long long)t->dims[k], tname(t));
        return invalid(v, "bias dim %d (%s) must equal %s's %s: expected %lld, got %lld [tensor \"%s\"]", k,
                       pd_names[roles[k]], v->pd_src[roles[k]], pd_names[roles[k]], (long long)want,
                       (long long)t->dims[k], tname(t));
    }
    if (t->ragged_offset)
        return invalid(v, "bias cannot be ragged (it has a ragged offset tensor) [tensor \"%s\"]", tname(t));
    frost__sdpa_operand *o = &v->p->op[slot];
    o->present = 1;
    o->dtype = t->dtype;
    for (int k = 0; k < 4; k++)
        o->stride[k] = t->dims[k] == 1 ? 0 : t->strides[k];
    return FROST_OK;
}

/* Sink logits (input) or their gradient (output): f32 [1, h_q, 1, 1] or [h_q]. */
static frost_status check_sink(vstate *v, int slot, const char *role, const frost__tensor *t)
{
    int64_t h_q = v->pd[PD_HQ];
    if (t->dtype != FROST_F32)
        return invalid(v, "%s dtype must be f32, got %s [tensor \"%s\"]", role, frost_dtype_name(t->dtype), tname(t));
    int head_axis;
    if (t->rank == 1) {
        head_axis = 0;
    } else if (t->rank == 4) {
        head_axis = 1;
        for (int k = 0; k < 4; k++)
            if (k != 1 && t->dims[k] != 1)
                return invalid(v, "%s dim %d must be 1 ([1, h_q, 1, 1]): expected 1, got %lld [tensor \"%s\"]", role,
                               k, (long long)t->dims[k], tname(t));
    } else {
        return invalid(v, "%s must have rank 4 ([1, h_q, 1, 1]) or 1 ([h_q]), got rank %d [tensor \"%s\"]", role,
                       t->rank, tname(t));
    }
    if (t->dims[head_axis] != h_q)
        return invalid(v, "%s dim %d (h_q) must equal Q's h_q: expected %lld, got %lld [tensor \"%s\"]", role,
                       head_axis, (long long)h_q, (long long)t->dims[head_axis], tname(t));
    frost__sdpa_operand *o = &v->p->op[slot];
    o->present = 1;
    o->dtype = FROST_F32;
    o->stride[1] = t->strides[head_axis];
    return FROST_OK;
}

/* seq_len_q / seq_len_kv: i32 [b] or [b, 1, 1, 1]. */
static frost_status check_seq_len(vstate *v, int slot, const char *role, const frost__tensor *t)
{
    int64_t b = v->pd[PD_B];
    if (t->dtype != FROST_I32)
        return invalid(v, "%s dtype must be i32, got %s [tensor \"%s\"]", role, frost_dtype_name(t->dtype), tname(t));
    if (t->rank != 1 && t->rank != 4)
        return invalid(v, "%s must have rank 1 ([b]) or 4 ([b, 1, 1, 1]), got rank %d [tensor \"%s\"]", role,
                       t->rank, tname(t));
    if (t->dims[0] != b)
        return invalid(v, "%s dim 0 (b) must equal Q's b: expected %lld, got %lld [tensor \"%s\"]", role,
                       (long long)b, (long long)t->dims[0], tname(t));
    for (int k = 1; k < t->rank; k++)
        if (t->dims[k] != 1)
            return invalid(v, "%s dim %d must be 1 ([b, 1, 1, 1]): expected 1, got %lld [tensor \"%s\"]", role, k,
                           (long long)t->dims[k], tname(t));
    frost__sdpa_operand *o = &v->p->op[slot];
    o->present = 1;
    o->dtype = FROST_I32;
    o->stride[0] = t->strides[0];
    return FROST_OK;
}

/* Stats (LSE): f32 [b, h_q, s_q, 1]; never ragged. */
static frost_status check_stats(vstate *v, const char *role, const frost__tensor *t)
{
    static const int roles[3] = {PD_B, PD_HQ, PD_SQ};
    if (t->rank != 4)
        return invalid(v, "%s must have rank 4 ([b, h_q, s_q, 1]), got rank %d [tensor \"%s\"]", role, t->rank,
                       tname(t));
    if (t->dtype != FROST_F32)
        return invalid(v, "%s dtype must be f32, got %s [tensor \"%s\"]", role, frost_dtype_name(t->dtype), tname(t));
    for (int k = 0; k < 3; k++)
        if (t->dims[k] != v->pd[roles[k]])
            return invalid(v, "%s dim %d (%s) must equal %s's %s: expected %lld, got %lld [tensor \"%s\"]", role, k,
                           pd_names[roles[k]], v->pd_src[roles[k]], pd_names[roles[k]], (long long)v->pd[roles[k]],
                           (long long)t->dims[k], tname(t));
    if (t->dims[3] != 1)
        return invalid(v, "%s dim 3 must be 1: expected 1, got %lld [tensor \"%s\"]", role, (long long)t->dims[3],
                       tname(t));
    if (t->ragged_offset)
        return invalid(v, "%s cannot be ragged (it is always [b, h_q, s_q, 1]) [tensor \"%s\"]", role, tname(t));
    frost__sdpa_operand *o = &v->p->op[FROST__SDPA_STATS];
    o->present = 1;
    o->dtype = FROST_F32;
    for (int k = 0; k < 3; k++)
        o->stride[k] = t->strides[k];
    return FROST_OK;
}

/* d_bias: f32 with bias's dims. */
static frost_status check_d_bias(vstate *v, const frost__tensor *t, const frost__tensor *bias)
{
    if (t->dtype != FROST_F32)
        return invalid(v, "d_bias dtype must be f32, got %s [tensor \"%s\"]", frost_dtype_name(t->dtype), tname(t));
    if (t->rank != 4)
        return invalid(v, "d_bias must have rank 4 (bias's dims), got rank %d [tensor \"%s\"]", t->rank, tname(t));
    for (int k = 0; k < 4; k++)
        if (t->dims[k] != bias->dims[k])
            return invalid(v, "d_bias dim %d must equal bias's dim %d: expected %lld, got %lld [tensor \"%s\"]", k, k,
                           (long long)bias->dims[k], (long long)t->dims[k], tname(t));
    if (t->ragged_offset)
        return invalid(v, "d_bias cannot be ragged [tensor \"%s\"]", tname(t));
    frost__sdpa_operand *o = &v->p->op[FROST__SDPA_D_BIAS];
    o->present = 1;
    o->dtype = FROST_F32;
    for (int k = 0; k < 4; k++)
        o->stride[k] = t->dims[k] == 1 ? 0 : t->strides[k];
    return FROST_OK;
}

/* A user-given output: not produced elsewhere, not read by an earlier node, not one of
 * this node's inputs or other outputs. */
static frost_status check_output_id(const vstate *v, frost_tensor id, const char *role, const frost__tensor *t,
                                    int out_slot)
{
    if (t->producer >= 0)
        return invalid(v, "%s is already produced by node %d: a tensor has one producer [tensor \"%s\"]", role,
                       t->producer, tname(t));
    for (int s = 0; s < FROST__SDPA_NUM_SLOTS; s++) {
        if (s == out_slot || v->slot[s] != id)
            continue;
        return invalid(v, "%s aliases this node's %s (tensor id %u): outputs must be distinct tensors and not "
                       "inputs [tensor \"%s\"]", role, slot_names[s], (unsigned)id, tname(t));
    }
    for (int n = 0; n < v->g->num_nodes; n++)
        for (int s = 0; s < FROST__MAX_SLOTS; s++)
            if (v->g->nodes[n].slot[s] == id)
                return invalid(v, "%s is read by node %d, which runs before this one [tensor \"%s\"]", role, n,
                               tname(t));
    return FROST_OK;
}

static frost_status check_attrs(const vstate *v, const frost_sdpa_attrs *a)
{
    const uint32_t known = FROST_MASK_LEFT_BOUND | FROST_MASK_RIGHT_BOUND;
    if (a->mask_flags & ~known)
        return invalid(v, "attrs.mask_flags has unknown bits 0x%x (known: FROST_MASK_LEFT_BOUND 0x1, "
                       "FROST_MASK_RIGHT_BOUND 0x2)", (unsigned)(a->mask_flags & ~known));
    if (a->left_bound < 0)
        return invalid(v, "attrs.left_bound must be >= 0, got %lld", (long long)a->left_bound);
    if (a->right_bound < 0)
        return invalid(v, "attrs.right_bound must be >= 0, got %lld", (long long)a->right_bound);
    if (a->align != FROST_DIAG_TOP_LEFT && a->align != FROST_DIAG_BOTTOM_RIGHT)
        return invalid(v, "attrs.align must be FROST_DIAG_TOP_LEFT (0) or FROST_DIAG_BOTTOM_RIGHT (1), got %d",
                       (int)a->align);
    if (!isfinite(a->scale))
        return invalid(v, "attrs.scale must be finite, got %g", a->scale);
    return FROST_OK;
}

/* ------------------------------------------------------------------------------------ */
/* Shared input checks of forward and backward                                            */
/* ------------------------------------------------------------------------------------ */

typedef struct sdpa_inputs {
    frost_tensor q, k, v, bias, sink, seq_len_q, seq_len_kv;
    const frost_sdpa_attrs *attrs;
} sdpa_inputs;

static frost_status check_common(vstate *v, const sdpa_inputs *in, const frost__tensor **bias_out)
{
    frost__sdpa_problem *p = v->p;
    const frost__tensor *t;
    frost_status s = check_attrs(v, in->attrs);
    if (s)
        return s;
    if ((s = lookup(v, in->q, "Q", 1, &t)) || (s = check_io(v, FROST__SDPA_Q, "Q", t, roles_q)))
        return s;
    v->slot[FROST__SDPA_Q] = in->q;
    if ((s = lookup(v, in->k, "K", 1, &t)) || (s = check_io(v, FROST__SDPA_K, "K", t, roles_k)))
        return s;
    v->slot[FROST__SDPA_K] = in->k;
    if (v->pd[PD_HQ] % v->pd[PD_HKV] != 0)
        return invalid(v, "GQA ratio not integral: Q's h_q (dim 1) must be a multiple of K's h_kv (dim 1): "
                       "h_q %lld, h_kv %lld", (long long)v->pd[PD_HQ], (long long)v->pd[PD_HKV]);
    if ((s = lookup(v, in->v, "V", 1, &t)) || (s = check_io(v, FROST__SDPA_V, "V", t, roles_v)))
        return s;
    v->slot[FROST__SDPA_V] = in->v;

    const struct {
        frost_tensor id;
        int slot;
        const char *role;
        frost_status (*check)(vstate *, int, const char *, const frost__tensor *);
    } optional[] = {
        {in->bias, FROST__SDPA_BIAS, "bias", check_bias},
        {in->sink, FROST__SDPA_SINK, "sink", check_sink},
        {in->seq_len_q, FROST__SDPA_SEQ_LEN_Q, "seq_len_q", check_seq_len},
        {in->seq_len_kv, FROST__SDPA_SEQ_LEN_KV, "seq_len_kv", check_seq_len},
    };
    for (size_t i = 0; i < FROST__ARRAY_SIZE(optional); i++) {
        if ((s = lookup(v, optional[i].id, optional[i].role, 0, &t)))
            return s;
        if (t && (s = optional[i].check(v, optional[i].slot, optional[i].role, t)))
            return s;
        v->slot[optional[i].slot] = optional[i].id;
        if (optional[i].slot == FROST__SDPA_BIAS)
            *bias_out = t;
    }

    const frost_sdpa_attrs *a = in->attrs;
    p->b = v->pd[PD_B];
    p->h_q = v->pd[PD_HQ];
    p->h_kv = v->pd[PD_HKV];
    p->s_q = v->pd[PD_SQ];
    p->s_kv = v->pd[PD_SKV];
    p->d_qk = v->pd[PD_DQK];
    p->d_v = v->pd[PD_DV];
    p->scale = a->scale != 0.0 ? a->scale : 1.0 / sqrt((double)p->d_qk);
    p->mask_flags = a->mask_flags;
    p->left_bound = a->left_bound;
    p->right_bound = a->right_bound;
    p->align = a->align;
    return FROST_OK;
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
    a->suffix = slot_names[slot];
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
        if ((s = lookup(v, *id, role, 1, &t)) || (s = check_io(v, slot, role, t, roles)) ||
            (s = check_no_broadcast(v, role, t)) || (s = check_output_id(v, *id, role, t, slot)))
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
        record_ragged(v, slot, a->ragged, frost__tensor_get(v->g, a->ragged)->dtype);
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
        return invalid(&v, "%s is NULL", !d ? "desc" : "out");
    }
    const frost__tensor *bias = NULL, *t;
    sdpa_inputs in = {d->q, d->k, d->v, d->bias, d->sink, d->seq_len_q, d->seq_len_kv, &d->attrs};
    auto_out autos[2];
    int n_autos = 0;
    frost_tensor o_id = out->o, stats_id = out->stats;
    if ((s = check_common(&v, &in, &bias)))
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
        if ((s = lookup(&v, stats_id, "stats", 1, &t)) || (s = check_stats(&v, "stats", t)) ||
            (s = check_no_broadcast(&v, "stats", t)) || (s = check_output_id(&v, stats_id, "stats", t, -1)))
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
        return invalid(&v, "%s is NULL", !d ? "desc" : "out");
    }
    const frost__tensor *bias = NULL, *t;
    sdpa_inputs in = {d->q, d->k, d->v, d->bias, d->sink, d->seq_len_q, d->seq_len_kv, &d->attrs};
    auto_out autos[5];
    int n_autos = 0;
    frost_sdpa_grads res = *out;
    v.p->deterministic = d->deterministic != 0;
    if ((s = check_common(&v, &in, &bias)))
        goto fail;
    if ((s = lookup(&v, d->o, "O", 1, &t)) || (s = check_io(&v, FROST__SDPA_O, "O", t, roles_o)))
        goto fail;
    v.slot[FROST__SDPA_O] = d->o;
    if ((s = lookup(&v, d->d_o, "dO", 1, &t)) || (s = check_io(&v, FROST__SDPA_D_O, "dO", t, roles_o)))
        goto fail;
    v.slot[FROST__SDPA_D_O] = d->d_o;
    if ((s = lookup(&v, d->stats, "stats", 1, &t)) || (s = check_stats(&v, "stats", t)))
        goto fail;
    v.slot[FROST__SDPA_STATS] = d->stats;

    if (res.d_bias != FROST_TENSOR_NONE && !bias) {
        s = invalid(&v, "d_bias is requested but the descriptor has no bias");
        goto fail;
    }
    if (res.d_sink != FROST_TENSOR_NONE && !v.slot[FROST__SDPA_SINK]) {
        s = invalid(&v, "d_sink is requested but the descriptor has no sink");
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
        if ((s = lookup(&v, res.d_bias, "d_bias", 1, &t)) || (s = check_d_bias(&v, t, bias)) ||
            (s = check_no_broadcast(&v, "d_bias", t)) ||
            (s = check_output_id(&v, res.d_bias, "d_bias", t, FROST__SDPA_D_BIAS)))
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
        if ((s = lookup(&v, res.d_sink, "d_sink", 1, &t)) ||
            (s = check_sink(&v, FROST__SDPA_D_SINK, "d_sink", t)) || (s = check_no_broadcast(&v, "d_sink", t)) ||
            (s = check_output_id(&v, res.d_sink, "d_sink", t, FROST__SDPA_D_SINK)))
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
    .slot_names = slot_names,
    .describe = describe,
    .impl = {[FROST__ENGINE_CUDA] = &frost__sdpa_fwd_cuda, [FROST__ENGINE_REF] = &frost__sdpa_fwd_ref},
    .output_slots = 1u << FROST__SDPA_O | 1u << FROST__SDPA_STATS,
};

const frost__op_class frost__sdpa_bwd_class = {
    .name = "sdpa_bwd",
    .num_slots = FROST__SDPA_NUM_SLOTS,
    .slot_names = slot_names,
    .describe = describe,
    .impl = {[FROST__ENGINE_CUDA] = &frost__sdpa_bwd_cuda, [FROST__ENGINE_REF] = &frost__sdpa_bwd_ref},
    .output_slots = 1u << FROST__SDPA_D_Q | 1u << FROST__SDPA_D_K | 1u << FROST__SDPA_D_V |
                    1u << FROST__SDPA_D_BIAS | 1u << FROST__SDPA_D_SINK,
};
