/*
 * sdpa.h — scaled dot-product attention: the validated problem that every engine reads.
 *
 * Layout legend: b = batch, h_q / h_kv = query / key-value heads, s_q / s_kv = sequence
 * lengths (the tensors' s dims; actual lengths may be shorter per batch through seq_len or
 * ragged offsets), d_qk / d_v = head dims.  G = h_q / h_kv.
 *
 * One slot enum serves forward and backward (forward uses the first part).  For each
 * tensor slot the problem records the element strides in (b, h, s, d) order, so engines
 * never look at the graph's tensor table:
 *   - Q, K, V, O, D_O, D_Q, D_K, D_V: strides of [b, h, s, d].  When the operand is ragged
 *     (THD), stride[0] is unused and batch b starts at ragged[b] * stride[2].
 *   - BIAS, D_BIAS: strides of [b, h, s_q, s_kv]; a broadcast dim has stride 0.
 *   - STATS: strides of [b, h_q, s_q] (the trailing 1 dropped).
 *   - SINK, D_SINK: stride[1] is the per-head stride.
 *   - SEQ_LEN_Q, SEQ_LEN_KV: stride[0] is the per-batch stride (int32).
 *   - RAGGED_*: int32 or int64 [b + 1], contiguous.
 */
#ifndef FROST_OPS_SDPA_H
#define FROST_OPS_SDPA_H

#include "core/internal.h"

typedef enum frost__sdpa_slot {
    FROST__SDPA_Q = 0,
    FROST__SDPA_K,
    FROST__SDPA_V,
    FROST__SDPA_O,
    FROST__SDPA_STATS,
    FROST__SDPA_BIAS,
    FROST__SDPA_SINK,
    FROST__SDPA_SEQ_LEN_Q,
    FROST__SDPA_SEQ_LEN_KV,
    FROST__SDPA_D_O,
    FROST__SDPA_D_Q,
    FROST__SDPA_D_K,
    FROST__SDPA_D_V,
    FROST__SDPA_D_BIAS,
    FROST__SDPA_D_SINK,
    FROST__SDPA_RAGGED_Q,
    FROST__SDPA_RAGGED_K,
    FROST__SDPA_RAGGED_V,
    FROST__SDPA_RAGGED_O,
    FROST__SDPA_RAGGED_D_O,
    FROST__SDPA_RAGGED_D_Q,
    FROST__SDPA_RAGGED_D_K,
    FROST__SDPA_RAGGED_D_V,
    FROST__SDPA_NUM_SLOTS
} frost__sdpa_slot;

FROST__STATIC_ASSERT(FROST__SDPA_NUM_SLOTS <= FROST__MAX_SLOTS, "sdpa slots exceed FROST__MAX_SLOTS");

/* For a data slot, the slot that holds its ragged offsets (or -1). */
int frost__sdpa_ragged_slot(int data_slot);

typedef struct frost__sdpa_operand {
    int present;
    frost_dtype dtype;
    int64_t stride[4];
    int ragged;                /* nonzero: THD, see above */
    frost_dtype ragged_dtype;  /* I32 or I64 */
} frost__sdpa_operand;

typedef struct frost__sdpa_problem {
    int backward;
    int64_t b, h_q, h_kv, s_q, s_kv, d_qk, d_v;
    frost_dtype dtype;       /* I/O dtype of Q, K, V, O, dO, dQ, dK, dV */
    double scale;            /* resolved (never 0) */
    uint32_t mask_flags;     /* FROST_MASK_* */
    int64_t left_bound, right_bound;
    frost_diag_align align;
    int deterministic;       /* backward only */
    frost__sdpa_operand op[FROST__SDPA_NUM_SLOTS];
} frost__sdpa_problem;

/* Admissibility of key j for row i given the actual lengths (the one definition of the
 * mask that every engine follows; kernels re-state it in device code). */
static inline int frost__sdpa_admissible(const frost__sdpa_problem *p, int64_t i, int64_t j, int64_t len_q,
                                         int64_t len_kv)
{
    int64_t c = p->align == FROST_DIAG_BOTTOM_RIGHT ? i + len_kv - len_q : i;
    if (j >= len_kv)
        return 0;
    if ((p->mask_flags & FROST_MASK_RIGHT_BOUND) && j > c + p->right_bound)
        return 0;
    if ((p->mask_flags & FROST_MASK_LEFT_BOUND) && j <= c - p->left_bound)
        return 0;
    return 1;
}

extern const frost__op_class frost__sdpa_fwd_class;
extern const frost__op_class frost__sdpa_bwd_class;

/* Engine implementations (defined in sdpa_ref.c and sdpa_cuda.c). */
extern const frost__op_impl frost__sdpa_fwd_ref;
extern const frost__op_impl frost__sdpa_bwd_ref;
extern const frost__op_impl frost__sdpa_fwd_cuda;
extern const frost__op_impl frost__sdpa_bwd_cuda;

/* Every kernel key the cuda engine's forward selector can choose (sdpa_cuda.c), in a fixed
 * order, for frost-precompile and for CI's proof that every variant compiles.  Writes
 * min(cap, total) keys (keys may be NULL when cap is 0) and returns the total: 1536 keys,
 * or 96 with equal_dims_only (d_qk = d_v).  The set does not depend on the device. */
struct frost__kernel_key; /* src/runtime/runtime.h */
size_t frost__sdpa_fwd_cuda_keys(struct frost__kernel_key *keys, size_t cap, int equal_dims_only);

/* Every kernel key the cuda engine's backward selector can choose (sdpa_cuda_bwd.c) on a
 * device of architecture `arch` ("sm_90a", "sm_80", "sm_89", ...: the arch picks the
 * shared-memory tier and so the tiles), in a fixed order: for each f16/bf16 x bias
 * (none, f32, I/O dtype) x D_QK x D_V (16..256 in steps of 16), the five entry points
 * sdpa_bwd_preprocess, _dsink, _dkdv, _dq, _dbias, which share one cubin (the cache key
 * ignores the entry).  Writes min(cap, total) keys (keys may be NULL when cap is 0) and
 * returns the total: 7680 keys, or 480 with equal_dims_only (d_qk = d_v). */
size_t frost__sdpa_bwd_cuda_keys(struct frost__kernel_key *keys, size_t cap, const char *arch, int equal_dims_only);

#endif /* FROST_OPS_SDPA_H */
