/*
 * chan_norm.h — GroupNorm, InstanceNorm and BatchNorm: the validated problem every engine
 * reads.
 *
 * Layout legend: X is [N, C, S...] logically (S = spatial dims, spatial = prod(S...)).
 * G = groups (GroupNorm), Cg = C / G.  The reduction set of one statistic:
 *   GroupNorm    (n, g): channels g*Cg .. g*Cg+Cg-1, all spatial      -> M = Cg * spatial
 *   InstanceNorm (n, c): all spatial                                  -> M = spatial
 *   BatchNorm    (c):    all n, all spatial                           -> M = N * spatial
 * Statistic tensors are f32: [N, G], [N, C] or [C] (their strides in stat_stride[]).
 * Per data slot the strides of n, c and each spatial dim are kept, plus two layout facts
 * kernels use: `nchw` (spatial collapses to one contiguous run and C's stride is that
 * run's length) and `nhwc` (C has stride 1 and the spatial dims collapse to one run of
 * stride C).  Anything else is "strided" and may be refused by a fast engine.
 */
#ifndef FROST_OPS_CHAN_NORM_H
#define FROST_OPS_CHAN_NORM_H

#include "core/internal.h"

typedef enum frost__cnorm_kind {
    FROST__CNORM_GROUP = 0,
    FROST__CNORM_INSTANCE = 1,
    FROST__CNORM_BATCH = 2,
} frost__cnorm_kind;

typedef enum frost__cnorm_slot {
    FROST__CNORM_X = 0,
    FROST__CNORM_SCALE,
    FROST__CNORM_BIAS,
    FROST__CNORM_Y,
    FROST__CNORM_MEAN,
    FROST__CNORM_INV_STD,
    FROST__CNORM_RUNNING_MEAN,
    FROST__CNORM_RUNNING_VAR,
    FROST__CNORM_D_Y,
    FROST__CNORM_D_X,
    FROST__CNORM_D_SCALE,
    FROST__CNORM_D_BIAS,
    FROST__CNORM_NUM_SLOTS
} frost__cnorm_slot;

FROST__STATIC_ASSERT(FROST__CNORM_NUM_SLOTS <= FROST__MAX_SLOTS, "channel-norm slots exceed FROST__MAX_SLOTS");

typedef struct frost__cnorm_layout {
    int present;
    frost_dtype dtype;
    int64_t stride_n, stride_c;
    int64_t spatial_stride[FROST_MAX_RANK]; /* per spatial dim */
    int nchw, nhwc;
    /* statistics and per-channel tensors: stride between consecutive entries along
     * their (up to two) dims: stat_stride[0] for n (or c for BatchNorm / per-channel
     * tensors), stat_stride[1] for g or c */
    int64_t stat_stride[2];
} frost__cnorm_layout;

typedef struct frost__cnorm_problem {
    frost__cnorm_kind kind;
    int backward;
    int64_t n, c, spatial;
    int spatial_rank;
    int64_t spatial_dims[FROST_MAX_RANK];
    int64_t groups;          /* G for GroupNorm; C for InstanceNorm; 1 for BatchNorm */
    double epsilon, momentum;
    frost_norm_phase phase;
    int zero_centered_scale;
    int deterministic;
    int update_running;      /* BatchNorm training with running stats given */
    frost__cnorm_layout slot[FROST__CNORM_NUM_SLOTS];
} frost__cnorm_problem;

extern const frost__op_class frost__groupnorm_fwd_class;
extern const frost__op_class frost__groupnorm_bwd_class;
extern const frost__op_class frost__instancenorm_fwd_class;
extern const frost__op_class frost__instancenorm_bwd_class;
extern const frost__op_class frost__batchnorm_fwd_class;
extern const frost__op_class frost__batchnorm_bwd_class;

extern const frost__op_impl frost__cnorm_fwd_ref;
extern const frost__op_impl frost__cnorm_bwd_ref;
extern const frost__op_impl frost__cnorm_fwd_cuda;
extern const frost__op_impl frost__cnorm_bwd_cuda;

/* Kernel keys of the cuda channel norms (forward and backward, every dtype, kind and
 * layout, each entry point: main, finalize, dparams): the list frost-precompile compiles.
 * Writes at most cap keys (keys may be NULL when cap is 0) and returns how many there are.
 * Defined in chan_norm_cuda.c. */
struct frost__kernel_key;
int frost__cnorm_cuda_keys(struct frost__kernel_key *keys, int cap);

#endif /* FROST_OPS_CHAN_NORM_H */
