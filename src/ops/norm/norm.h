/*
 * norm.h — LayerNorm, RMSNorm and AdaLayerNorm: the validated problem that every engine
 * reads.
 *
 * X has rank r; its last `inner_rank` dims (C...) are normalized, the first `outer_rank`
 * dims (R...) index independent rows.  rows = prod(R...), cols = prod(C...).
 * Per slot the problem keeps the dtype and the strides split into outer and inner parts:
 *   - X, Y, D_Y, D_X: outer_stride[outer_rank] and inner_stride[inner_rank].
 *   - MEAN, INV_STD: outer_stride only (f32; one value per row).
 *   - SCALE, BIAS, D_SCALE, D_BIAS: inner_stride, and outer_stride with 0 on every outer
 *     dim the parameter does not carry (so always 0 for LayerNorm and RMSNorm, whose
 *     parameters have no outer dims or only 1s there).
 * inner_contiguous says the inner dims collapse to one run of stride 1
 * (frost__norm_collapse()); the cuda kernels fold the outer strides into row levels
 * (frost__norm_row_map, norm_cuda_config.c).
 *
 * AdaLayerNorm is LayerNorm (kind FROST__NORM_LAYER) whose parameters may carry X's outer
 * dims: X [B, S, C] with scale, bias [B, 1, C] is the typical case.  param_outer_dims[k]
 * holds parameter slot k's outer dims (each 1 or X's), and the parameter row that row r
 * of X reads is the one at r's outer index with the 1-dims set to 0.  per_sample_params
 * is set when some present parameter slot has an outer dim > 1, i.e. when rows really
 * read different parameters; an engine that addresses parameters by column only must
 * refuse such a problem.
 */
#ifndef FROST_OPS_NORM_H
#define FROST_OPS_NORM_H

#include "core/internal.h"

typedef enum frost__norm_kind {
    FROST__NORM_LAYER = 0,
    FROST__NORM_RMS = 1,
} frost__norm_kind;

typedef enum frost__norm_slot {
    FROST__NORM_X = 0,
    FROST__NORM_SCALE,
    FROST__NORM_BIAS,
    FROST__NORM_Y,
    FROST__NORM_MEAN,
    FROST__NORM_INV_STD,
    FROST__NORM_D_Y,
    FROST__NORM_D_X,
    FROST__NORM_D_SCALE,
    FROST__NORM_D_BIAS,
    FROST__NORM_NUM_SLOTS
} frost__norm_slot;

FROST__STATIC_ASSERT(FROST__NORM_NUM_SLOTS <= FROST__MAX_SLOTS, "norm slots exceed FROST__MAX_SLOTS");

typedef struct frost__norm_layout {
    int present;
    frost_dtype dtype;
    int64_t outer_stride[FROST_MAX_RANK];
    int64_t inner_stride[FROST_MAX_RANK];
    int inner_contiguous; /* inner dims collapse to a run of stride 1 */
} frost__norm_layout;

/* Collapses n dims into one evenly spaced run: 1, and in *stride the stride of the
 * innermost dim that is not 1 (0 when all are 1; any stride when a dim is 0), when
 * strides[i] == strides[i + 1] * dims[i + 1] across the dims that are not 1; else 0. */
int frost__norm_collapse(int n, const int64_t *dims, const int64_t *strides, int64_t *stride);

typedef struct frost__norm_problem {
    frost__norm_kind kind;
    int backward;
    int outer_rank, inner_rank;
    int64_t outer_dims[FROST_MAX_RANK];
    int64_t inner_dims[FROST_MAX_RANK];
    int64_t rows, cols;
    double epsilon;
    frost_norm_phase phase;
    int zero_centered_scale;
    int deterministic;
    frost__norm_layout slot[FROST__NORM_NUM_SLOTS];
    /* Appended for AdaLayerNorm (see above).  For LayerNorm and RMSNorm per_sample_params
     * is 0 and every param_outer_dims entry of a present parameter slot is 1; entries of
     * other slots are unused. */
    int per_sample_params;
    int64_t param_outer_dims[FROST__NORM_NUM_SLOTS][FROST_MAX_RANK];
} frost__norm_problem;

/* Parameter rows of a parameter slot: prod(param_outer_dims[slot]) (1 for LN and RMS). */
static inline int64_t frost__norm_param_rows(const frost__norm_problem *p, int slot)
{
    int64_t n = 1;
    for (int i = 0; i < p->outer_rank; ++i)
        n *= p->param_outer_dims[slot][i];
    return n;
}

extern const frost__op_class frost__layernorm_fwd_class;
extern const frost__op_class frost__layernorm_bwd_class;
extern const frost__op_class frost__rmsnorm_fwd_class;
extern const frost__op_class frost__rmsnorm_bwd_class;
extern const frost__op_class frost__adalayernorm_fwd_class;
extern const frost__op_class frost__adalayernorm_bwd_class;

/* Engine implementations: one impl per direction serves every kind (kind and
 * per_sample_params are in the problem).  Defined in norm_ref.c and norm_cuda.c. */
extern const frost__op_impl frost__norm_fwd_ref;
extern const frost__op_impl frost__norm_bwd_ref;
extern const frost__op_impl frost__norm_fwd_cuda;
extern const frost__op_impl frost__norm_bwd_cuda;

/* The element offset of row r of slot `slot` from its base, as the reference engine
 * addresses it (parameter slots: the parameter row that row r reads).  norm_ref.c. */
int64_t frost__norm_row_offset(const frost__norm_problem *p, int slot, int64_t r);

/* Kernel keys the cuda norm engine builds for typical problems (LayerNorm and RMSNorm,
 * forward and backward, f32/f16/bf16, common hidden sizes 128..32768, scale in f32 or the
 * I/O dtype, with and without bias / d_bias), plus the backward's reduce kernel: the list
 * frost-precompile compiles.  Writes at most cap keys (keys may be NULL when cap is 0)
 * and returns how many there are.  Defined in norm_cuda.c. */
struct frost__kernel_key;
int frost__norm_cuda_keys(struct frost__kernel_key *keys, int cap);

#endif /* FROST_OPS_NORM_H */
