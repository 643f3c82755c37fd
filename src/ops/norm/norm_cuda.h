/*
 * norm_cuda.h — the cuda norm engine's plan (norm_cuda_config.c, norm_cuda.c)
 * and what it takes from adanorm_cuda.c: how rows find AdaLayerNorm's
 * per-sample parameter rows, and how the backward splits rows into segments so
 * that d_scale and d_bias can be summed per parameter row.  Private to
 * src/ops/norm/.
 *
 * Layout legend: x [R..., C...], rows = prod(R...); a parameter carries some of
 * x's outer dims (x [B, S, C], scale [B, 1, C] carries B).  The kernels address
 * parameter row (r / div) % count of row r (norm_param_map, norm_kernel.cuh).
 * The backward's rows are cut into segments of segment_rows consecutive rows
 * that never straddle two parameter rows of a per-sample gradient, so each
 * block's partial rows belong to one parameter row and out row q of a gradient
 * is the sum of segments_per_out consecutive segments.
 */
#ifndef FROST_OPS_NORM_CUDA_H
#define FROST_OPS_NORM_CUDA_H

#include "ops/norm/norm.h"
#include "ops/norm/norm_kernel.cuh"

typedef struct frost__adanorm_cuda {
    norm_param_map scale, bias; /* how rows read scale and bias (identity when shared) */
    int64_t segment_rows;       /* backward: rows of a segment (>= 1; all rows without
                                   per-sample gradients) */
    /* backward, per gradient (0: d_scale, 1: d_bias): consecutive segments per
     * parameter row, parameter rows, elements between parameter rows */
    int64_t segments_per_out[2], out_rows[2], out_stride[2];
} frost__adanorm_cuda;

/* Where the rows of each data and statistics slot start (norm_rows, norm_kernel.cuh): X's
 * outer dims folded into `levels` levels, innermost first, a dim joining the level below
 * it when every such slot's strides continue that level's (so the fewest levels that
 * every slot can share); dims[i] steps of level i, and per slot the stride of each level.
 * One level: rows evenly spaced in every slot (the key has no ROW_LEVELS).  Zeros for
 * absent slots. */
typedef struct frost__norm_row_map {
    int levels;
    int64_t dims[NORM_ROW_LEVELS];
    norm_rows slot[FROST__NORM_NUM_SLOTS];
} frost__norm_row_map;

/* Where row r of slot starts by the map (the kernels' norm_row_at, on the host). */
int64_t frost__norm_row_map_offset(const frost__norm_row_map *m, int slot, int64_t r);

/* Fills a for problem p (any kind; LayerNorm and RMSNorm get identity maps and
 * one segment) or refuses with NOT_SUPPORTED and the constraint in why: carried
 * dims that do not form one run of x's outer dims collapsing to one stride, a
 * per-sample gradient whose rows are not consecutive, or one whose partial rows
 * would outweigh d_y by far. row_groups is the plan's row groups per block.
 * Device-independent. */
frost_status frost__adanorm_cuda_config(const frost__norm_problem *p, int row_groups, frost__adanorm_cuda *a,
                                        frost__buf *why);

/* The kernel key the cuda norm engine picks for p, or its refusal
 * (norm_cuda.c). */
struct frost__kernel_key;
frost_status frost__norm_cuda_key(const frost__norm_problem *p, struct frost__kernel_key *key, frost__buf *why);

/* ---- the plan of a cuda norm node (norm_cuda_config.c fills the
 * configuration, norm_cuda.c the rest at build) ---- */
#include "runtime/runtime.h"

typedef struct frost__norm_plan {
    int backward;
    int vec, nv, group, block, looped;
    int rows_per_block_groups; /* row groups per block (block / group) */
    int stages;                /* cp.async ring depth, 0 when none */
    int minb;                  /* key define MINB: resident blocks the launch bounds ask for (0: the default) */
    int params_reg;            /* forward: key define PARAMS_REG (scale and bias units held in registers) */
    int max_bps;               /* cap on resident blocks per SM, whatever the registers allow */
    int persistent;            /* grid capped at the resident blocks (else a block per row
                                  group) */
    int trips;                 /* one-pass forward grids: rows each row group takes (1: one) */
    size_t ring_bytes;         /* dynamic shared memory of the ring */
    int want_dscale, want_dbias;
    frost__adanorm_cuda ada; /* parameter maps and backward segments */
    frost__norm_row_map row_map; /* where rows start (ROW_LEVELS when row_map.levels > 1) */
    frost__kernel_key key, reduce_key;
    int reduce_threads; /* 32 positions x the reduce's slices of partial rows */
    int reduce_early;   /* the reduce is a programmatic dependent launch (runtime.h) */
    int cluster_key;    /* backward: BWD_CLUSTER of the key (0: none) */
    int64_t positions;  /* backward: a partial row's positions from register-resident rows
                           (lane order, ROW_SPLIT * NV * GROUP * VEC); cols for chunked keys */
    int row_split;      /* blocks (a cluster, sm_90) sharing each row: key define ROW_SPLIT, or 1 */
    int ln_merge;       /* forward: key define LN_MERGE */
    frost__kernel *kernel, *reduce;
    /* set by build */
    int blocks_per_sm;
    int cluster; /* backward: blocks whose partial rows merge (BWD_CLUSTER on sm_90, else 1) */
    unsigned grid;
    int64_t rows_per_block; /* backward: contiguous rows per block (one more for */
    int64_t rows_extra;     /* the first rows_extra blocks of a segment) */
    int64_t blocks_per_segment;
    int64_t partial_stride; /* floats */
    size_t partial_bytes;   /* one partial buffer, 256-byte aligned */
} frost__norm_plan;

/* Support and the whole configuration of p (device-independent), or
 * NOT_SUPPORTED with the constraint in why (norm_cuda_config.c).  Plans with row_split > 1
 * run clusters (sm_90); _unsplit never picks them (older devices). */
frost_status frost__norm_cuda_config(const frost__norm_problem *p, frost__norm_plan *plan, frost__buf *why);
frost_status frost__norm_cuda_config_unsplit(const frost__norm_problem *p, frost__norm_plan *plan, frost__buf *why);

/* The backward's split of a segment of seg_rows rows between at most `slots` blocks:
 * *blocks blocks of *per_block rows, the first *extra of them one more.  The ceil split
 * (as few blocks as take ceil(seg_rows / slots) rows each), unless it leaves the last
 * block short and `spread` is set: then every slot takes a block, the counts differing by
 * one at most (norm_cuda_config.c). */
void frost__norm_split_rows(int64_t seg_rows, int64_t slots, int spread, int64_t *per_block, int64_t *blocks,
                            int64_t *extra);

/* A FROST_NORM_TUNE override by name, else dflt (developer tuning;
 * norm_cuda_config.c). */
int frost__norm_tune(const char *name, int dflt);

static inline int64_t frost__norm_ceil_div(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

#endif /* FROST_OPS_NORM_CUDA_H */
