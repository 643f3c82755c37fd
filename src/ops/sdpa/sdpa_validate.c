/*
 * sdpa_validate.c — the checks of an SDPA descriptor's tensors and attributes (for
 * sdpa.c's add functions, through sdpa_validate.h): per-tensor checks of rank, dtype,
 * dims, strides and ragged offsets, and the checks of the inputs forward and backward
 * share.
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
 * value was expected ("must equal Q's d_qk").  Each check also records what it accepted
 * in the problem (dtype, strides, ragged offsets) that every engine reads.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ops/sdpa/sdpa_validate.h"

static const char *const pd_names[PD_COUNT] = {"b", "h_q", "h_kv", "s_q", "s_kv", "d_qk", "d_v"};

/* Fails with INVALID_ARGUMENT and "<op>: <message>". */
frost_status FROST__PRINTF(2, 3) frost__sdpa_invalid(const vstate *v, const char *fmt, ...)
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
frost_status frost__sdpa_lookup(const vstate *v, frost_tensor id, const char *role, int required,
                                const frost__tensor **out)
{
    *out = NULL;
    if (id == FROST_TENSOR_NONE) {
        if (required)
            return frost__sdpa_invalid(v, "%s is required but the descriptor's field is 0 (no tensor)", role);
        return FROST_OK;
    }
    if (id == FROST_TENSOR_AUTO)
        return frost__sdpa_invalid(v, "%s: FROST_TENSOR_AUTO names an output frost creates; %s is an input", role,
                                   role);
    const frost__tensor *t = frost__tensor_get(v->g, id);
    if (!t)
        return frost__sdpa_invalid(v, "%s: unknown tensor id %u (the graph has %u tensors)", role, (unsigned)id,
                                   (unsigned)v->g->num_tensors);
    *out = t;
    return FROST_OK;
}

static int is_io_dtype(frost_dtype t)
{
    return t == FROST_F32 || t == FROST_F16 || t == FROST_BF16;
}

/* Notes that data_slot is ragged by the offsets tensor `ragged` (of dtype dt). */
void frost__sdpa_record_ragged(vstate *v, int data_slot, frost_tensor ragged, frost_dtype dt)
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
        return frost__sdpa_invalid(v, "%s's ragged offset: unknown tensor id %u [tensor \"%s\"]", role,
                                   (unsigned)t->ragged_offset, tname(t));
    if (r->dtype != FROST_I32 && r->dtype != FROST_I64)
        return frost__sdpa_invalid(v, "%s's ragged offset dtype must be i32 or i64, got %s [tensor \"%s\"]", role,
                                   frost_dtype_name(r->dtype), tname(r));
    int64_t want = v->pd[PD_B] + 1;
    if (r->rank != 1 && r->rank != 4)
        return frost__sdpa_invalid(v,
                                   "%s's ragged offset must have rank 1 ([b + 1]) or 4 ([b + 1, 1, 1, 1]), got rank %d "
                                   "[tensor \"%s\"]",
                                   role, r->rank, tname(r));
    if (r->dims[0] != want)
        return frost__sdpa_invalid(v, "%s's ragged offset dim 0 must be b + 1: expected %lld, got %lld [tensor \"%s\"]",
                                   role, (long long)want, (long long)r->dims[0], tname(r));
    for (int k = 1; k < r->rank; k++)
        if (r->dims[k] != 1)
            return frost__sdpa_invalid(v, "%s's ragged offset dim %d must be 1: expected 1, got %lld [tensor \"%s\"]",
                                       role, k, (long long)r->dims[k], tname(r));
    if (r->strides[0] != 1)
        return frost__sdpa_invalid(
            v, "%s's ragged offset dim 0 must be contiguous: expected stride 1, got %lld [tensor \"%s\"]", role,
            (long long)r->strides[0], tname(r));
    frost__sdpa_record_ragged(v, data_slot, t->ragged_offset, r->dtype);
    return FROST_OK;
}

/* An output must not broadcast (two elements sharing one address). */
frost_status frost__sdpa_check_no_broadcast(const vstate *v, const char *role, const frost__tensor *t)
{
    for (int k = 0; k < t->rank; k++)
        if (t->dims[k] > 1 && t->strides[k] == 0)
            return frost__sdpa_invalid(
                v, "%s dim %d has stride 0 but size %lld: an output cannot broadcast [tensor \"%s\"]", role, k,
                (long long)t->dims[k], tname(t));
    return FROST_OK;
}

/* A 4-D I/O operand ([b, h, s, d] with the given roles), in the I/O dtype. */
frost_status frost__sdpa_check_io(vstate *v, int slot, const char *role, const frost__tensor *t, const int roles[4])
{
    if (t->rank != 4)
        return frost__sdpa_invalid(
            v, "%s must have rank 4 ([b, h, s, d] in any stride order), got rank %d [tensor \"%s\"]", role, t->rank,
            tname(t));
    if (!v->dtype_src) {
        if (!is_io_dtype(t->dtype))
            return frost__sdpa_invalid(v, "%s dtype must be f32, f16 or bf16, got %s [tensor \"%s\"]", role,
                                       frost_dtype_name(t->dtype), tname(t));
        v->p->dtype = t->dtype;
        v->dtype_src = role;
    } else if (t->dtype != v->p->dtype) {
        return frost__sdpa_invalid(v, "%s dtype must equal %s's dtype: expected %s, got %s [tensor \"%s\"]", role,
                                   v->dtype_src, frost_dtype_name(v->p->dtype), frost_dtype_name(t->dtype), tname(t));
    }
    for (int k = 0; k < 4; k++) {
        int r = roles[k];
        if (t->dims[k] < 1)
            return frost__sdpa_invalid(v, "%s dim %d (%s) must be >= 1, got %lld [tensor \"%s\"]", role, k, pd_names[r],
                                       (long long)t->dims[k], tname(t));
        if (v->pd[r] < 0) {
            v->pd[r] = t->dims[k];
            v->pd_src[r] = role;
        } else if (t->dims[k] != v->pd[r]) {
            return frost__sdpa_invalid(v, "%s dim %d (%s) must equal %s's %s: expected %lld, got %lld [tensor \"%s\"]",
                                       role, k, pd_names[r], v->pd_src[r], pd_names[r], (long long)v->pd[r],
                                       (long long)t->dims[k], tname(t));
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
        return frost__sdpa_invalid(
            v, "bias must have rank 4 ([b or 1, h_q or 1, s_q, s_kv]), got rank %d [tensor \"%s\"]", t->rank, tname(t));
    if (t->dtype != FROST_F32 && t->dtype != v->p->dtype)
        return frost__sdpa_invalid(v, "bias dtype must be f32 or the I/O dtype %s, got %s [tensor \"%s\"]",
                                   frost_dtype_name(v->p->dtype), frost_dtype_name(t->dtype), tname(t));
    for (int k = 0; k < 4; k++) {
        int64_t want = v->pd[roles[k]];
        int broadcastable = k < 2;
        if (t->dims[k] == want || (broadcastable && t->dims[k] == 1))
            continue;
        if (broadcastable)
            return frost__sdpa_invalid(
                v, "bias dim %d (%s) must be 1 or %s's %s: expected 1 or %lld, got %lld [tensor \"%s\"]", k,
                pd_names[roles[k]], v->pd_src[roles[k]], pd_names[roles[k]], (long long)want, (long long)t->dims[k],
                tname(t));
        return frost__sdpa_invalid(v, "bias dim %d (%s) must equal %s's %s: expected %lld, got %lld [tensor \"%s\"]", k,
                                   pd_names[roles[k]], v->pd_src[roles[k]], pd_names[roles[k]], (long long)want,
                                   (long long)t->dims[k], tname(t));
    }
    if (t->ragged_offset)
        return frost__sdpa_invalid(v, "bias cannot be ragged (it has a ragged offset tensor) [tensor \"%s\"]",
                                   tname(t));
    frost__sdpa_operand *o = &v->p->op[slot];
    o->present = 1;
    o->dtype = t->dtype;
    for (int k = 0; k < 4; k++)
        o->stride[k] = t->dims[k] == 1 ? 0 : t->strides[k];
    return FROST_OK;
}

/* Sink logits (input) or their gradient (output): f32 [1, h_q, 1, 1] or [h_q]. */
frost_status frost__sdpa_check_sink(vstate *v, int slot, const char *role, const frost__tensor *t)
{
    int64_t h_q = v->pd[PD_HQ];
    if (t->dtype != FROST_F32)
        return frost__sdpa_invalid(v, "%s dtype must be f32, got %s [tensor \"%s\"]", role, frost_dtype_name(t->dtype),
                                   tname(t));
    int head_axis;
    if (t->rank == 1) {
        head_axis = 0;
    } else if (t->rank == 4) {
        head_axis = 1;
        for (int k = 0; k < 4; k++)
            if (k != 1 && t->dims[k] != 1)
                return frost__sdpa_invalid(v,
                                           "%s dim %d must be 1 ([1, h_q, 1, 1]): expected 1, got %lld [tensor \"%s\"]",
                                           role, k, (long long)t->dims[k], tname(t));
    } else {
        return frost__sdpa_invalid(v, "%s must have rank 4 ([1, h_q, 1, 1]) or 1 ([h_q]), got rank %d [tensor \"%s\"]",
                                   role, t->rank, tname(t));
    }
    if (t->dims[head_axis] != h_q)
        return frost__sdpa_invalid(v, "%s dim %d (h_q) must equal Q's h_q: expected %lld, got %lld [tensor \"%s\"]",
                                   role, head_axis, (long long)h_q, (long long)t->dims[head_axis], tname(t));
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
        return frost__sdpa_invalid(v, "%s dtype must be i32, got %s [tensor \"%s\"]", role, frost_dtype_name(t->dtype),
                                   tname(t));
    if (t->rank != 1 && t->rank != 4)
        return frost__sdpa_invalid(v, "%s must have rank 1 ([b]) or 4 ([b, 1, 1, 1]), got rank %d [tensor \"%s\"]",
                                   role, t->rank, tname(t));
    if (t->dims[0] != b)
        return frost__sdpa_invalid(v, "%s dim 0 (b) must equal Q's b: expected %lld, got %lld [tensor \"%s\"]", role,
                                   (long long)b, (long long)t->dims[0], tname(t));
    for (int k = 1; k < t->rank; k++)
        if (t->dims[k] != 1)
            return frost__sdpa_invalid(v, "%s dim %d must be 1 ([b, 1, 1, 1]): expected 1, got %lld [tensor \"%s\"]",
                                       role, k, (long long)t->dims[k], tname(t));
    frost__sdpa_operand *o = &v->p->op[slot];
    o->present = 1;
    o->dtype = FROST_I32;
    o->stride[0] = t->strides[0];
    return FROST_OK;
}

/* Stats (LSE): f32 [b, h_q, s_q, 1]; never ragged. */
frost_status frost__sdpa_check_stats(vstate *v, const char *role, const frost__tensor *t)
{
    static const int roles[3] = {PD_B, PD_HQ, PD_SQ};
    if (t->rank != 4)
        return frost__sdpa_invalid(v, "%s must have rank 4 ([b, h_q, s_q, 1]), got rank %d [tensor \"%s\"]", role,
                                   t->rank, tname(t));
    if (t->dtype != FROST_F32)
        return frost__sdpa_invalid(v, "%s dtype must be f32, got %s [tensor \"%s\"]", role, frost_dtype_name(t->dtype),
                                   tname(t));
    for (int k = 0; k < 3; k++)
        if (t->dims[k] != v->pd[roles[k]])
            return frost__sdpa_invalid(v, "%s dim %d (%s) must equal %s's %s: expected %lld, got %lld [tensor \"%s\"]",
                                       role, k, pd_names[roles[k]], v->pd_src[roles[k]], pd_names[roles[k]],
                                       (long long)v->pd[roles[k]], (long long)t->dims[k], tname(t));
    if (t->dims[3] != 1)
        return frost__sdpa_invalid(v, "%s dim 3 must be 1: expected 1, got %lld [tensor \"%s\"]", role,
                                   (long long)t->dims[3], tname(t));
    if (t->ragged_offset)
        return frost__sdpa_invalid(v, "%s cannot be ragged (it is always [b, h_q, s_q, 1]) [tensor \"%s\"]", role,
                                   tname(t));
    frost__sdpa_operand *o = &v->p->op[FROST__SDPA_STATS];
    o->present = 1;
    o->dtype = FROST_F32;
    for (int k = 0; k < 3; k++)
        o->stride[k] = t->strides[k];
    return FROST_OK;
}

/* d_bias: f32 with bias's dims. */
frost_status frost__sdpa_check_d_bias(vstate *v, const frost__tensor *t, const frost__tensor *bias)
{
    if (t->dtype != FROST_F32)
        return frost__sdpa_invalid(v, "d_bias dtype must be f32, got %s [tensor \"%s\"]", frost_dtype_name(t->dtype),
                                   tname(t));
    if (t->rank != 4)
        return frost__sdpa_invalid(v, "d_bias must have rank 4 (bias's dims), got rank %d [tensor \"%s\"]", t->rank,
                                   tname(t));
    for (int k = 0; k < 4; k++)
        if (t->dims[k] != bias->dims[k])
            return frost__sdpa_invalid(
                v, "d_bias dim %d must equal bias's dim %d: expected %lld, got %lld [tensor \"%s\"]", k, k,
                (long long)bias->dims[k], (long long)t->dims[k], tname(t));
    if (t->ragged_offset)
        return frost__sdpa_invalid(v, "d_bias cannot be ragged [tensor \"%s\"]", tname(t));
    frost__sdpa_operand *o = &v->p->op[FROST__SDPA_D_BIAS];
    o->present = 1;
    o->dtype = FROST_F32;
    for (int k = 0; k < 4; k++)
        o->stride[k] = t->dims[k] == 1 ? 0 : t->strides[k];
    return FROST_OK;
}

/* A user-given output: not produced elsewhere, not read by an earlier node, not one of
 * this node's inputs or other outputs. */
frost_status frost__sdpa_check_output_id(const vstate *v, frost_tensor id, const char *role, const frost__tensor *t,
                                         int out_slot)
{
    if (t->producer >= 0)
        return frost__sdpa_invalid(v, "%s is already produced by node %d: a tensor has one producer [tensor \"%s\"]",
                                   role, t->producer, tname(t));
    for (int s = 0; s < FROST__SDPA_NUM_SLOTS; s++) {
        if (s == out_slot || v->slot[s] != id)
            continue;
        return frost__sdpa_invalid(v,
                                   "%s aliases this node's %s (tensor id %u): outputs must be distinct tensors and not "
                                   "inputs [tensor \"%s\"]",
                                   role, frost__sdpa_slot_names[s], (unsigned)id, tname(t));
    }
    for (int n = 0; n < v->g->num_nodes; n++)
        for (int s = 0; s < FROST__MAX_SLOTS; s++)
            if (v->g->nodes[n].slot[s] == id)
                return frost__sdpa_invalid(v, "%s is read by node %d, which runs before this one [tensor \"%s\"]", role,
                                           n, tname(t));
    return FROST_OK;
}

static frost_status check_attrs(const vstate *v, const frost_sdpa_attrs *a)
{
    const uint32_t known = FROST_MASK_LEFT_BOUND | FROST_MASK_RIGHT_BOUND;
    if (a->mask_flags & ~known)
        return frost__sdpa_invalid(v,
                                   "attrs.mask_flags has unknown bits 0x%x (known: FROST_MASK_LEFT_BOUND 0x1, "
                                   "FROST_MASK_RIGHT_BOUND 0x2)",
                                   (unsigned)(a->mask_flags & ~known));
    if (a->left_bound < 0)
        return frost__sdpa_invalid(v, "attrs.left_bound must be >= 0, got %lld", (long long)a->left_bound);
    if (a->right_bound < 0)
        return frost__sdpa_invalid(v, "attrs.right_bound must be >= 0, got %lld", (long long)a->right_bound);
    if (a->align != FROST_DIAG_TOP_LEFT && a->align != FROST_DIAG_BOTTOM_RIGHT)
        return frost__sdpa_invalid(
            v, "attrs.align must be FROST_DIAG_TOP_LEFT (0) or FROST_DIAG_BOTTOM_RIGHT (1), got %d", (int)a->align);
    if (!isfinite(a->scale))
        return frost__sdpa_invalid(v, "attrs.scale must be finite, got %g", a->scale);
    return FROST_OK;
}

/* ------------------------------------------------------------------------------------ */
/* Shared input checks of forward and backward                                            */
/* ------------------------------------------------------------------------------------ */

frost_status frost__sdpa_check_inputs(vstate *v, const sdpa_inputs *in, const frost__tensor **bias_out)
{
    frost__sdpa_problem *p = v->p;
    const frost__tensor *t;
    frost_status s = check_attrs(v, in->attrs);
    if (s)
        return s;
    if ((s = frost__sdpa_lookup(v, in->q, "Q", 1, &t)) || (s = frost__sdpa_check_io(v, FROST__SDPA_Q, "Q", t, roles_q)))
        return s;
    v->slot[FROST__SDPA_Q] = in->q;
    if ((s = frost__sdpa_lookup(v, in->k, "K", 1, &t)) || (s = frost__sdpa_check_io(v, FROST__SDPA_K, "K", t, roles_k)))
        return s;
    v->slot[FROST__SDPA_K] = in->k;
    if (v->pd[PD_HQ] % v->pd[PD_HKV] != 0)
        return frost__sdpa_invalid(v,
                                   "GQA ratio not integral: Q's h_q (dim 1) must be a multiple of K's h_kv (dim 1): "
                                   "h_q %lld, h_kv %lld",
                                   (long long)v->pd[PD_HQ], (long long)v->pd[PD_HKV]);
    if ((s = frost__sdpa_lookup(v, in->v, "V", 1, &t)) || (s = frost__sdpa_check_io(v, FROST__SDPA_V, "V", t, roles_v)))
        return s;
    v->slot[FROST__SDPA_V] = in->v;

    const struct {
        frost_tensor id;
        int slot;
        const char *role;
        frost_status (*check)(vstate *, int, const char *, const frost__tensor *);
    } optional[] = {
        {in->bias, FROST__SDPA_BIAS, "bias", check_bias},
        {in->sink, FROST__SDPA_SINK, "sink", frost__sdpa_check_sink},
        {in->seq_len_q, FROST__SDPA_SEQ_LEN_Q, "seq_len_q", check_seq_len},
        {in->seq_len_kv, FROST__SDPA_SEQ_LEN_KV, "seq_len_kv", check_seq_len},
    };
    for (size_t i = 0; i < FROST__ARRAY_SIZE(optional); i++) {
        if ((s = frost__sdpa_lookup(v, optional[i].id, optional[i].role, 0, &t)))
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
