/*
 * chan_norm_cuda.h — what the cuda channel-norm engine (chan_norm_cuda.c) and its tiling
 * (chan_norm_geometry.c) share: a problem's shape as the tiling sees it, the chosen
 * geometry, and the two functions that size and choose it.  Private to src/ops/norm/.
 */
#ifndef FROST_OPS_CHAN_NORM_CUDA_H
#define FROST_OPS_CHAN_NORM_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "ops/norm/chan_norm.h"
#include "ops/norm/chan_norm_kernel.cuh"

typedef struct cnorm_shape {
    int kind, nhwc, tensors; /* tensors held per tile: 1 (forward) or 2 */
    int vec_layout;          /* 16-byte units: C a multiple of the vector (NHWC), n strides too */
    int64_t n, c, hw, cg, esize, cw_unit;
} cnorm_shape;

/* What the tiling needs to know of the device. */
typedef struct cnorm_device {
    int64_t sms;
    size_t smem_per_sm, optin, reserved; /* shared memory per SM, per block (opt-in), per block taken */
    int64_t max_cluster;                 /* blocks per thread-block cluster (sm_90: 8), 0 without clusters */
    int64_t l2_bytes;
} cnorm_device;

typedef struct cnorm_geometry {
    int64_t cw, sets, windows, rows, seg_rows, k_tiles, num_segments, num_tiles, waves;
    int64_t blocks;  /* resident blocks per SM; a wave is one tile per block */
    int64_t first_wave; /* cluster path: tiles of the first wave, SMs x blocks */
    int64_t ramp_cycles, ramp_classes; /* cluster path: the first wave's start ramp (cc_ramp); 0: none */
    int resident;    /* one HBM pass; else statistics, finalize, apply */
    int64_t cluster; /* > 0: the cluster path, a segment's k_tiles = cluster tiles in one cluster */
    int stream;      /* the stream path: one tile of every window per block, the grid k_tiles blocks; 1 one
                        launch overlapping windows (all blocks resident), 2 two launches (statistics, output) */
    int64_t keep_rows; /* stream path: the rows of a tile whose first read keeps them in L2 for the second */
    int64_t early_rows; /* two-launch stream path: the rows of a tile after keep_rows that the output launch
                           asks L2 for before the statistics are final */
    int64_t held;      /* NCHW cluster path: the rows of a tile held in shared memory, when fewer than rows (the
                          others are read twice, the second time mostly from L2); else 0 */
    int64_t plane;       /* > 0: the plane path (chan_norm_plane.cu), its threads per block, a block a plane */
    int64_t plane_units; /* ... and the 16-byte units a thread holds (the key's PLANE_UNITS) */
    int64_t plane_per_block; /* ... and the planes a block holds: CNP_WARP_PLANES for one-warp planes, else 1 */
    size_t smem;
} cnorm_geometry;

static inline int64_t frost__cnorm_ceil_div(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

static inline int64_t frost__cnorm_align_up(int64_t v, int64_t a)
{
    return frost__cnorm_ceil_div(v, a) * a;
}

/* The channels a window is a multiple of: whole sets (cg channels), and on the NHWC
 * vector path whole 16-byte units of `vec` elements too. */
int64_t frost__cnorm_window_unit(int nhwc, int vec_layout, int64_t cg, int64_t vec);

/* Shared memory of a tile of `rows` rows of a cw-channel window (data, per-channel and
 * per-set arrays, scratch). */
size_t frost__cnorm_smem_bytes(const cnorm_shape *s, int64_t rows, int64_t cw);

/* Picks the blocks per SM, window, rows and tiles per segment for `dev`; stats: the op
 * computes statistics (else a single APPLY pass).  Returns 0 when not even
 * CNORM_ROW_ALIGN rows of the narrowest window fit one block's shared memory. */
int frost__cnorm_choose_geometry(const cnorm_shape *s, const cnorm_device *dev, int stats, cnorm_geometry *out);

/* The cluster path's tiling (chan_norm_cluster.cu) when the problem and device allow it
 * and it fills the device: returns 1 with *out set, else 0 (then choose_geometry). */
int frost__cnorm_choose_cluster(const cnorm_shape *s, const cnorm_device *dev, cnorm_geometry *out);

/* The plane path (chan_norm_plane.cu: InstanceNorm, or GroupNorm with one channel a group,
 * NCHW 16-byte units, a block a plane held in registers) when the problem allows it and
 * its planes fill the device: returns 1 with *out set, else 0. */
int frost__cnorm_choose_plane(const cnorm_shape *s, const cnorm_device *dev, cnorm_geometry *out);

/* The stream path's tiling (chan_norm_stream.cu: BatchNorm training forward, NHWC 16-byte
 * units) when the problem allows it: returns 1 with *out set, else 0. */
int frost__cnorm_choose_stream(const cnorm_shape *s, const cnorm_device *dev, cnorm_geometry *out);

#endif /* FROST_OPS_CHAN_NORM_CUDA_H */
