/*
 * sdpa_validate.h — private to sdpa.c and sdpa_validate.c: the state of one pass of
 * validation over an SDPA descriptor and the checks sdpa.c's add functions call.
 *
 * Layout legend: b = batch, h_q / h_kv = query / key-value heads, s_q / s_kv = the
 * tensors' sequence dims, d_qk / d_v = head dims; every 4-D operand is [b, h, s, d].
 * Every check fails with INVALID_ARGUMENT through frost__fail, its message prefixed with
 * the op ("sdpa: ..."), and returns FROST_OK otherwise.
 */
#ifndef FROST_OPS_SDPA_VALIDATE_H
#define FROST_OPS_SDPA_VALIDATE_H

#include "ops/sdpa/sdpa.h"

/* Slot names (sdpa.c): the op classes' names and the suffixes of created outputs. */
extern const char *const frost__sdpa_slot_names[FROST__SDPA_NUM_SLOTS];

/* The seven problem dims; each 4-D operand maps its axes onto four of them. */
enum { PD_B, PD_HQ, PD_HKV, PD_SQ, PD_SKV, PD_DQK, PD_DV, PD_COUNT };

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

typedef struct sdpa_inputs {
    frost_tensor q, k, v, bias, sink, seq_len_q, seq_len_kv;
    const frost_sdpa_attrs *attrs;
} sdpa_inputs;

/* Fails with INVALID_ARGUMENT and "<op>: <message>". */
frost_status FROST__PRINTF(2, 3) frost__sdpa_invalid(const vstate *v, const char *fmt, ...);
/* Looks up a tensor given in the descriptor.  *out is NULL when the field is 0 and the
 * tensor is optional. */
frost_status frost__sdpa_lookup(const vstate *v, frost_tensor id, const char *role, int required,
                                const frost__tensor **out);
/* Notes that data_slot is ragged by the offsets tensor `ragged` (of dtype dt). */
void frost__sdpa_record_ragged(vstate *v, int data_slot, frost_tensor ragged, frost_dtype dt);
/* An output must not broadcast (two elements sharing one address). */
frost_status frost__sdpa_check_no_broadcast(const vstate *v, const char *role, const frost__tensor *t);
/* A 4-D I/O operand ([b, h, s, d] with the given roles), in the I/O dtype. */
frost_status frost__sdpa_check_io(vstate *v, int slot, const char *role, const frost__tensor *t, const int roles[4]);
/* Sink logits (input) or their gradient (output): f32 [1, h_q, 1, 1] or [h_q]. */
frost_status frost__sdpa_check_sink(vstate *v, int slot, const char *role, const frost__tensor *t);
/* Stats (LSE): f32 [b, h_q, s_q, 1]; never ragged. */
frost_status frost__sdpa_check_stats(vstate *v, const char *role, const frost__tensor *t);
/* d_bias: f32 with bias's dims. */
frost_status frost__sdpa_check_d_bias(vstate *v, const frost__tensor *t, const frost__tensor *bias);
/* A user-given output: not produced elsewhere, not read by an earlier node, not one of
 * the node's inputs (slot -1: no slot to name). */
frost_status frost__sdpa_check_output_id(const vstate *v, frost_tensor id, const char *role, const frost__tensor *t,
                                         int slot);
/* The inputs forward and backward share, in order (attributes, Q, K, V, bias, sink,
 * seq_len_q, seq_len_kv); fills the problem's dims and attributes.  *bias_out receives the
 * bias tensor (NULL without one). */
frost_status frost__sdpa_check_inputs(vstate *v, const sdpa_inputs *in, const frost__tensor **bias_out);

#endif /* FROST_OPS_SDPA_VALIDATE_H */
