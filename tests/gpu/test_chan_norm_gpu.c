/*
 * test_chan_norm_gpu.c — the cuda engine's GroupNorm, InstanceNorm and BatchNorm
 * (chan_norm_fwd.cu, chan_norm_bwd.cu) against the reference engine, forward and backward.
 *
 * Each case builds the same graph in a CPU context (ref engine, fp64) and in a CUDA
 * context with build option engine = "cuda" (a refusal is a failure, never a silent
 * fallback), runs both on the same stored inputs and compares every element of every
 * output allocation, guards and sample gaps included: both copies start NaN-poisoned and
 * the GPU one travels to the device whole and back, so an element must be NaN on one side
 * exactly when it is NaN on the other (an unwritten element, or a write into a gap or a
 * margin, fails).  Running statistics are inputs written in place: each side starts from
 * its own copy of the same initial values, and every GPU run starts from them.  The
 * backward runs three times and the forward twice on the GPU; every output must be bitwise
 * equal across the runs (the kernels promise determinism always).
 *
 * Layout legend: X [N, C, H, W], NCHW or NHWC, with `n_gap` padding elements between
 * samples; G groups; M = elements per statistic set (GroupNorm C/G x HW, InstanceNorm HW,
 * BatchNorm N x HW); u = unit roundoff of the I/O dtype, u32 = 2^-24.
 *
 * Tolerance (DESIGN.md pass rule).  Both engines read the same stored inputs; the GPU sums
 * in fp32 (per-thread runs, then fixed trees and Chan merges), the ref in fp64, and each
 * rounds its result once to the output dtype (so they may differ by one ulp = 2u).  The
 * error of the same sums done naively in fp32 is about E = (log2(2M) + sqrt(M)) u32 relative
 * to the sum of magnitudes; per element:
 *     y:                 |got - ref| <= 2.5 u |ref| + 32 E (rstd max|x| |w| + |b| + 1)
 *     mean:              32 E (max|x| + 1)
 *     inv_std, run. var: 32 E (1 + max x_hat^2) relative (+ 1e-6 absolute for running_var)
 *     dx:                2.5 u |ref| + 32 E rstd |dy w| (1 + max x_hat^2)
 *     d_scale, d_bias:   32 E_p N HW max|dy| (1 + max|x_hat|), E_p for N x HW terms
 * a constant times the naive fp32 error, as the pass rule asks.
 *
 * Cases: a named table (the three ops in both layouts and three dtypes; GroupNorm with 1,
 * C/2, 32 and C groups; odd C and odd spatial sizes that take the 1-element path; sample
 * gaps; a misaligned base (scalar fallback); scale and bias absent, f32, I/O dtype and
 * [1, C, 1, 1]; zero-centred scale; GroupNorm/InstanceNorm inference; BatchNorm training
 * with and without running statistics and inference; backward with saved, recomputed and
 * half-saved statistics; segments split over many tiles (workspace exchange) and, with
 * FROST_CNORM_TILE_KB=16 and one block per SM, segments of more than 132 tiles: larger
 * than a wave on an H200, so they take the three-kernel fallback; random cases also fix
 * the blocks per SM, FROST_CNORM_BLOCKS); the cluster path (chan_norm_cluster.cu) forced
 * with FROST_CNORM_CLUSTER = 1..8 tiles per cluster (uneven last tiles, a misaligned base,
 * saved, half-saved and recomputed statistics, inference, sample gaps), chosen by the
 * tiling, and turned off, in both layouts (random cases force it too; it applies to
 * GroupNorm / InstanceNorm on 16-byte units, NHWC of channels, NCHW of pixels, and to NCHW
 * BatchNorm in training, tiles of whole samples); BatchNorm's stream path (chan_norm_stream.cu, NHWC
 * training forward and backward with both saved statistics; its two-launch form by
 * default, the one-launch form with FROST_CNORM_STREAM=1) with odd row counts, sample gaps,
 * a misaligned base, three windows, one window of 512 or 256 channels, tiles shorter than a
 * block pass, the statistics merged by the finalize kernel or (FROST_CNORM_STREAM_MERGE=0) in
 * the statistics launch, the two launches on their own entry points (2 or, with
 * FROST_CNORM_STREAM_BLOCKS=3, 3 blocks per SM) or (FROST_CNORM_STREAM_SPLIT=0) on the
 * combined kernel, the output launch's early L2 prefetch over the whole tile or off
 * (FROST_CNORM_STREAM_EARLY=100 or 0), and explicitly off (the NHWC cases that test the
 * three-kernel fallback; random cases draw off, default, one and two launches), then
 * seeded random cases, then the selector's refusals.  FROST_TEST_SMALL=1 runs only the
 * cases marked small (for compute-sanitizer).  FROST_TEST_SEED / FROST_TEST_CASE rerun one.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "runtime/runtime.h"
#include "gpu_util.h"
#include "test_util.h"

enum { GN = 0, IN = 1, BN = 2 };
enum { T_X, T_SCALE, T_BIAS, T_RMEAN, T_RVAR, T_DY, T_Y, T_MEAN, T_RSTD, T_DX, T_DSCALE, T_DBIAS, T_COUNT };
static const char *const names[T_COUNT] = {"x", "scale", "bias", "running_mean", "running_var", "dy",
                                           "y", "mean", "inv_std", "dx", "d_scale", "d_bias"};

typedef struct ccase {
    const char *name;
    int kind;
    frost_dtype dtype;
    int64_t n, c, h, w;
    int groups;         /* GroupNorm */
    int nhwc, n_gap;    /* channels-last; padding elements between samples */
    int scale, bias;    /* 0 absent, 1 f32 [C], 2 I/O dtype [C], 3 I/O dtype [1, C, 1, 1] */
    int zc, inference;  /* zero-centred scale; forward phase */
    int running;        /* BatchNorm: running statistics given */
    int backward;       /* then run the backward */
    int saved;          /* backward statistics: 0 recomputed, 1 both saved, 2 mean only, 3 inv_std only */
    int misalign;       /* device copies shifted by one element: no 16-byte units */
    double offset;      /* added to x: a mean to remove */
    int tile_kb;        /* FROST_CNORM_TILE_KB for the GPU build (0: default) */
    int small;          /* part of the FROST_TEST_SMALL subset */
    int blocks;         /* FROST_CNORM_BLOCKS for the GPU build (0: the tiling's choice, 1 with tile_kb) */
    int cluster;        /* FROST_CNORM_CLUSTER for the GPU build: 0 unset, -1 off, 1..8 tiles per cluster */
    int stream;         /* FROST_CNORM_STREAM for the GPU build (BatchNorm's stream path): 0 unset (the
                           two-launch form), 1 one launch, 2 two launches, -1 "0" (off) */
    int plane;          /* FROST_CNORM_PLANE for the GPU build (the plane path): 0 unset (the rule), 1 whenever
                           the planes fit, -1 off; "8 units" in the name: FROST_CNORM_PLANE_UNITS=8 */
} ccase;

#define F32 FROST_F32
#define F16 FROST_F16
#define BF16 FROST_BF16
static const ccase table[] = {
    /* name, kind, dtype, n, c, h, w, groups, nhwc, gap, scale, bias, zc, inf, run, bwd, saved, mis, off, tile, small,
     * blocks, cluster, stream */
    {"gn bf16 nhwc 32 groups", GN, BF16, 4, 128, 16, 16, 32, 1, 0, 2, 2, 0, 0, 0, 1, 1, 0, 1.0, 0, 1, 0, 0, 0, 0},
    {"gn bf16 nchw 32 groups", GN, BF16, 4, 128, 16, 16, 32, 0, 0, 2, 2, 0, 0, 0, 1, 1, 0, 1.0, 0, 1, 0, 0, 0, 0},
    {"bn bf16 nhwc running", BN, BF16, 8, 64, 12, 12, 0, 1, 0, 2, 2, 0, 0, 1, 1, 1, 0, 0.5, 0, 1, 0, 0, 0, 0},
    {"bn f32 nchw recomputed", BN, F32, 6, 24, 9, 16, 0, 0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 2.0, 0, 1, 0, 0, 0, 0},
    {"in f16 nhwc gap", IN, F16, 3, 40, 10, 6, 0, 1, 8, 1, 2, 0, 0, 0, 1, 1, 0, 0.0, 0, 1, 0, 0, 0, 0},
    {"bn bf16 nhwc inference", BN, BF16, 5, 48, 7, 7, 0, 1, 0, 2, 1, 0, 1, 1, 0, 0, 0, 0.0, 0, 1, 0, 0, 0, 0},
    {"gn f16 nhwc exchange", GN, F16, 2, 256, 32, 48, 8, 1, 0, 2, 2, 0, 0, 0, 1, 0, 0, 1.5, 0, 0, 0, 0, 0, 0},
    {"gn bf16 nchw 1 group", GN, BF16, 2, 64, 40, 40, 1, 0, 0, 3, 2, 1, 0, 0, 1, 1, 0, 0.0, 0, 0, 0, 0, 0, 0},
    {"gn f32 nhwc groups = C", GN, F32, 3, 32, 5, 7, 32, 1, 0, 1, 1, 0, 0, 0, 1, 2, 0, 0.5, 0, 0, 0, 0, 0, 0},
    {"gn bf16 nhwc C/2 groups odd C", GN, BF16, 2, 22, 9, 9, 11, 1, 0, 2, 2, 0, 0, 0, 1, 3, 0, 0.0, 0, 0, 0, 0, 0, 0},
    {"gn f16 nchw odd spatial", GN, F16, 3, 12, 5, 7, 4, 0, 3, 1, 0, 0, 0, 0, 1, 1, 0, 0.0, 0, 0, 0, 0, 0, 0},
    {"gn bf16 inference", GN, BF16, 3, 64, 8, 8, 16, 1, 0, 2, 2, 0, 1, 0, 0, 0, 0, 0.0, 0, 0, 0, 0, 0, 0},
    {"in bf16 nchw inference", IN, BF16, 4, 16, 20, 20, 0, 0, 0, 2, 0, 0, 1, 0, 0, 0, 0, 1.0, 0, 0, 0, 0, 0, 0},
    {"in f32 nchw exchange", IN, F32, 2, 8, 96, 96, 0, 0, 0, 3, 1, 1, 0, 0, 1, 0, 0, 0.0, 0, 0, 0, 0, 0, 0},
    {"in bf16 nhwc no params", IN, BF16, 3, 24, 14, 14, 0, 1, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0.0, 0, 0, 0, 0, 0, 0},
    {"bn bf16 nhwc exchange", BN, BF16, 32, 64, 32, 32, 0, 1, 0, 2, 2, 0, 0, 1, 1, 1, 0, 0.25, 0, 0, 0, 0, -1, 0},
    {"bn f16 nchw exchange", BN, F16, 16, 32, 32, 32, 0, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 0.0, 0, 0, 0, 0, 0, 0},
    {"bn bf16 nhwc 2d input", BN, BF16, 1000, 64, 1, 1, 0, 1, 0, 2, 2, 0, 0, 1, 1, 1, 0, 0.0, 0, 0, 0, 0, 0, 0},
    {"bn f32 nchw odd", BN, F32, 7, 5, 3, 11, 0, 0, 1, 1, 1, 0, 0, 1, 1, 2, 0, 0.0, 0, 0, 0, 0, 0, 0},
    {"bn f16 nchw inference", BN, F16, 4, 16, 16, 16, 0, 0, 0, 1, 1, 0, 1, 1, 0, 0, 0, 0.0, 0, 0, 0, 0, 0, 0},
    {"bn bf16 training no running", BN, BF16, 4, 32, 8, 8, 0, 1, 0, 2, 0, 1, 0, 0, 1, 3, 0, 0.0, 0, 0, 0, 0, 0, 0},
    {"gn bf16 nhwc misaligned", GN, BF16, 2, 64, 12, 12, 8, 1, 0, 2, 2, 0, 0, 0, 1, 1, 1, 0.0, 0, 1, 0, 0, 0, 0},
    {"bn f32 nchw misaligned", BN, F32, 4, 16, 8, 8, 0, 0, 0, 1, 1, 0, 0, 1, 1, 0, 1, 0.0, 0, 0, 0, 0, 0, 0},
    {"bn bf16 nhwc fallback", BN, BF16, 32, 8, 96, 96, 0, 1, 0, 2, 2, 0, 0, 1, 1, 0, 0, 1.0, 16, 1, 0, 0, -1, 0},
    {"gn f16 nchw fallback", GN, F16, 1, 32, 192, 192, 1, 0, 0, 2, 2, 0, 0, 0, 1, 1, 0, 0.0, 16, 0, 0, 0, 0, 0},
    {"in bf16 nhwc many tiles", IN, BF16, 2, 32, 64, 64, 0, 1, 0, 2, 2, 0, 0, 0, 1, 0, 0, 0.5, 16, 0, 0, 0, 0, 0},
    {"gn bf16 nhwc 3 blocks per SM", GN, BF16, 8, 256, 32, 32, 32, 1, 0, 2, 2, 0, 0, 0, 1, 0, 0, 0.5, 0, 0, 3, 0, 0, 0},
    {"bn bf16 nhwc 2 blocks per SM", BN, BF16, 16, 64, 32, 32, 0, 1, 0, 2, 2, 0, 0, 1, 1, 0, 0, 1.0, 0, 1, 2, 0, -1, 0},
    {"in f16 nchw 3 blocks per SM", IN, F16, 2, 16, 96, 96, 0, 0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0.0, 16, 0, 3, 0, 0, 0},
    {"gn bf16 nhwc offset 8", GN, BF16, 2, 64, 16, 16, 4, 1, 0, 2, 2, 0, 0, 0, 1, 0, 0, 8.0, 0, 0, 0, 0, 0, 0},
    {"gn bf16 n 0", GN, BF16, 0, 32, 4, 4, 4, 1, 0, 2, 2, 0, 0, 0, 1, 0, 0, 0.0, 0, 0, 0, 0, 0, 0},
    {"gn bf16 nhwc cluster 2", GN, BF16, 4, 128, 16, 16, 32, 1, 0, 2, 2, 0, 0, 0, 1, 1, 0, 1.0, 0, 1, 0, 2, 0, 0},
    {"gn f16 nhwc cluster 8 recomputed", GN, F16, 2, 256, 32, 48, 8, 1, 0, 1, 1, 0, 0, 0, 1, 0, 0, 1.5, 0, 0, 0, 8, 0, 0},
    {"in f32 nhwc cluster 4 gap", IN, F32, 3, 40, 10, 6, 0, 1, 8, 1, 2, 0, 0, 0, 1, 2, 0, 0.5, 0, 1, 0, 4, 0, 0},
    {"gn bf16 nhwc cluster misaligned", GN, BF16, 2, 64, 12, 12, 8, 1, 0, 2, 2, 0, 0, 0, 1, 3, 1, 0.0, 0, 1, 0, 2, 0, 0},
    {"gn bf16 inference cluster 1", GN, BF16, 3, 64, 8, 8, 16, 1, 0, 2, 2, 0, 1, 0, 0, 0, 0, 0.0, 0, 0, 0, 1, 0, 0},
    {"gn bf16 nhwc odd hw cluster 8", GN, BF16, 2, 96, 7, 9, 4, 1, 0, 3, 2, 1, 0, 0, 1, 0, 0, 2.0, 0, 0, 0, 8, 0, 0},
    {"in bf16 nhwc no params cluster 4", IN, BF16, 3, 24, 14, 14, 0, 1, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0.0, 0, 0, 0, 4, 0, 0},
    {"gn bf16 nhwc cluster by choice", GN, BF16, 66, 64, 32, 32, 16, 1, 0, 2, 2, 0, 0, 0, 1, 0, 0, 0.5, 0, 0, 0, 0, 0, 0},
    {"gn bf16 nhwc cluster off", GN, BF16, 66, 64, 32, 32, 16, 1, 0, 2, 2, 0, 0, 0, 1, 1, 0, 0.5, 0, 0, 0, -1, 0, 0},
    {"gn bf16 nchw cluster 2", GN, BF16, 4, 128, 16, 16, 32, 0, 0, 2, 2, 0, 0, 0, 1, 1, 0, 1.0, 0, 1, 0, 2, 0, 0},
    {"gn f16 nchw cluster 8 recomputed", GN, F16, 2, 256, 32, 48, 8, 0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 1.5, 0, 0, 0, 8, 0, 0},
    {"in f32 nchw cluster 4 gap", IN, F32, 3, 40, 10, 6, 0, 0, 8, 1, 2, 0, 0, 0, 1, 2, 0, 0.5, 0, 1, 0, 4, 0, 0},
    {"gn bf16 nchw cluster misaligned", GN, BF16, 2, 64, 12, 12, 8, 0, 0, 2, 2, 0, 0, 0, 1, 3, 1, 0.0, 0, 1, 0, 2, 0, 0},
    {"gn bf16 nchw uneven tiles cluster 2", GN, BF16, 2, 96, 8, 9, 4, 0, 0, 3, 2, 1, 0, 0, 1, 0, 0, 2.0, 0, 0, 0, 2, 0, 0},
    {"in bf16 nchw inference cluster 1", IN, BF16, 3, 16, 16, 16, 0, 0, 0, 2, 0, 0, 1, 0, 0, 0, 0, 1.0, 0, 0, 0, 1, 0, 0},
    {"gn bf16 nchw cluster by choice", GN, BF16, 66, 64, 32, 32, 16, 0, 0, 2, 2, 0, 0, 0, 1, 0, 0, 0.5, 0, 0, 0, 0, 0, 0},
    {"bn bf16 nchw cluster 4", BN, BF16, 8, 16, 16, 16, 0, 0, 0, 2, 2, 0, 0, 1, 1, 1, 0, 0.5, 0, 1, 0, 4, 0, 0},
    {"bn f32 nchw cluster 2 recomputed", BN, F32, 5, 12, 6, 10, 0, 0, 4, 1, 1, 0, 0, 1, 1, 0, 0, 1.0, 0, 0, 0, 2, 0, 0},
    {"bn f16 nchw cluster 8 half-saved", BN, F16, 16, 8, 8, 8, 0, 0, 0, 1, 0, 1, 0, 0, 1, 2, 0, 2.0, 0, 0, 0, 8, 0, 0},
    {"bn bf16 nchw cluster misaligned", BN, BF16, 4, 8, 8, 8, 0, 0, 0, 2, 2, 0, 0, 1, 1, 3, 1, 0.0, 0, 1, 0, 2, 0, 0},
    {"bn bf16 nchw cluster large tiles", BN, BF16, 16, 24, 112, 112, 0, 0, 0, 2, 2, 0, 0, 1, 1, 1, 0, 0.5, 0, 0, 0, 0,
     0, 0},
    {"gn bf16 nchw cluster large tiles", GN, BF16, 2, 64, 256, 256, 16, 0, 0, 2, 2, 0, 0, 0, 1, 1, 0, 1.0, 0, 0, 0, 0,
     0, 0},
    {"gn bf16 nhwc cluster large tiles", GN, BF16, 1, 512, 128, 128, 32, 1, 0, 2, 2, 0, 0, 0, 1, 1, 0, 0.5, 0, 0, 0, 0,
     0, 0},
    {"bn bf16 nchw cluster large tiles, bwd past shared memory", BN, BF16, 40, 20, 112, 112, 0, 0, 0, 2, 2, 0, 0, 1, 1,
     1, 0, 0.5, 0, 1, 0, 0, 0, 0},
    {"gn bf16 nchw cluster fwd past shared memory", GN, BF16, 1, 32, 1000, 1024, 32, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0, 1.0,
     0, 0, 0, 0, 0, 0},
    {"bn f32 nhwc stream misaligned", BN, F32, 4, 16, 8, 8, 0, 1, 0, 1, 1, 0, 0, 1, 0, 0, 1, 1.0, 0, 1, 0, 0, 1, 0},
    {"bn bf16 nhwc stream odd rows gap", BN, BF16, 7, 64, 5, 3, 0, 1, 8, 2, 2, 1, 0, 1, 0, 0, 0, 2.0, 0, 1, 0, 0, 1, 0},
    {"bn f16 nhwc stream 3 windows", BN, F16, 16, 192, 24, 20, 0, 1, 0, 1, 2, 0, 0, 1, 1, 1, 0, 0.5, 0, 0, 0, 0, 1, 0},
    {"bn f32 nhwc stream two-launch misaligned", BN, F32, 4, 16, 8, 8, 0, 1, 0, 1, 1, 0, 0, 1, 1, 0, 1, 1.0, 0, 1, 0,
     0, 2, 0},
    {"bn bf16 nhwc stream two-launch odd rows gap", BN, BF16, 7, 64, 5, 3, 0, 1, 8, 2, 2, 1, 0, 1, 1, 1, 0, 2.0, 0, 1,
     0, 0, 2, 0},
    {"bn f16 nhwc stream two-launch 3 windows", BN, F16, 16, 192, 24, 20, 0, 1, 0, 1, 2, 0, 0, 1, 1, 1, 0, 0.5, 0, 0,
     0, 0, 2, 0},
    {"bn bf16 nhwc stream two-launch big", BN, BF16, 64, 128, 32, 32, 0, 1, 0, 2, 2, 0, 0, 1, 1, 1, 0, 0.5, 0, 0, 0, 0,
     2, 0},
    {"bn bf16 nhwc stream off", BN, BF16, 16, 64, 16, 16, 0, 1, 0, 2, 2, 0, 0, 1, 0, 0, 0, 0.5, 0, 0, 0, 0, -1, 0},
    {"bn bf16 nhwc stream 512 channels", BN, BF16, 8, 512, 45, 45, 0, 1, 0, 2, 2, 0, 0, 1, 1, 1, 0, 1.0, 0, 0,
     0, 0, 0, 0},
    {"bn bf16 nhwc stream 256 channels", BN, BF16, 2, 256, 128, 128, 0, 1, 0, 1, 2, 1, 0, 1, 1, 1, 0,
     2.0, 0, 1, 0, 0, 0, 0},
    {"bn f16 nhwc stream tiles under a block pass", BN, F16, 3, 64, 7, 7, 0, 1, 0, 2, 0, 0, 0, 0, 1, 1, 0, 0.5,
     0, 1, 0, 0, 0, 0},
    {"bn f32 nhwc stream 24 channels", BN, F32, 6, 24, 10, 10, 0, 1, 0, 1, 1, 0, 0, 1, 1, 1, 0, 0.0, 0, 1, 0, 0,
     0, 0},
    {"bn bf16 nhwc stream 256 channels merge in launch", BN, BF16, 2, 256, 128, 128, 0, 1, 0, 1, 2, 1, 0, 1, 1, 1, 0,
     2.0, 0, 1, 0, 0, 0, 0},
    {"bn f16 nhwc stream two-launch gap merge in launch", BN, F16, 7, 64, 5, 3, 0, 1, 8, 2, 2, 1, 0, 1, 1, 1, 0, 2.0, 0,
     1, 0, 0, 2, 0},
    {"bn bf16 nhwc stream 256 channels combined kernel", BN, BF16, 2, 256, 128, 128, 0, 1, 0, 1, 2, 1, 0, 1, 1, 1, 0,
     2.0, 0, 1, 0, 0, 0, 0},
    {"bn bf16 nhwc stream 256 channels 3 blocks", BN, BF16, 2, 256, 128, 128, 0, 1, 0, 1, 2, 1, 0, 1, 1, 1, 0, 2.0, 0,
     1, 0, 0, 0, 0},
    {"bn f16 nhwc stream two-launch gap 3 blocks", BN, F16, 7, 64, 5, 3, 0, 1, 8, 2, 2, 1, 0, 1, 1, 1, 0, 2.0, 0, 1, 0,
     0, 2, 0},
    {"bn f32 nhwc stream misaligned 3 blocks", BN, F32, 4, 16, 8, 8, 0, 1, 0, 1, 1, 0, 0, 1, 1, 0, 1, 1.0, 0, 1, 0, 0,
     0, 0},
    {"bn bf16 nhwc stream two-launch early", BN, BF16, 64, 128, 32, 32, 0, 1, 0, 2, 2, 0, 0, 1, 1, 1, 0, 0.5, 0, 1, 0,
     0, 2, 0},
    {"bn f16 nhwc stream two-launch gap early", BN, F16, 7, 64, 5, 3, 0, 1, 8, 2, 2, 1, 0, 1, 1, 1, 0, 2.0, 0, 1, 0, 0,
     2, 0},
    {"bn bf16 nhwc stream two-launch no early", BN, BF16, 8, 512, 45, 45, 0, 1, 0, 2, 2, 0, 0, 1, 1, 1, 0, 1.0, 0, 1,
     0, 0, 2, 0},
    /* the plane path: a block a (n, c) plane in registers (NCHW, one channel a set) */
    {"in bf16 nchw plane", IN, BF16, 4, 24, 32, 64, 0, 0, 0, 2, 2, 0, 0, 0, 1, 1, 0, 1.0, 0, 1, 0, 0, 0, 1},
    {"in f32 nchw plane recomputed gap, masked units", IN, F32, 3, 10, 24, 40, 0, 0, 8, 1, 1, 1, 0, 0, 1, 0, 0, 1.5, 0,
     1, 0, 0, 0, 1},
    {"gn f16 nchw plane groups = C half-saved", GN, F16, 2, 16, 33, 32, 16, 0, 0, 3, 0, 0, 0, 0, 1, 2, 0, 0.5, 0, 1, 0,
     0, 0, 1},
    {"in bf16 nchw plane inv_std saved no params", IN, BF16, 3, 8, 16, 32, 0, 0, 0, 0, 0, 0, 0, 0, 1, 3, 0, 2.0, 0, 1,
     0, 0, 0, 1},
    {"in f32 nchw plane one warp a plane, a partial last block", IN, F32, 3, 7, 16, 16, 0, 0, 4, 2, 1, 0, 0, 0, 1, 1,
     0, 0.5, 0, 1, 0, 0, 0, 1},
    {"in bf16 nchw plane misaligned", IN, BF16, 2, 12, 32, 32, 0, 0, 0, 2, 2, 0, 0, 0, 1, 1, 1, 0.0, 0, 1, 0, 0, 0, 1},
    {"in f16 nchw plane 8 units", IN, F16, 2, 16, 32, 128, 0, 0, 0, 2, 1, 0, 0, 0, 1, 1, 0, 0.5, 0, 0, 0, 0, 0, 1},
    {"in bf16 nchw plane over FROST_CNORM_CLUSTER=2", IN, BF16, 2, 16, 32, 32, 0, 0, 0, 2, 2, 0, 0, 0, 1, 0, 0, 0.0, 0, 0,
     0, 2, 0, 1},
    {"in bf16 nchw plane off", IN, BF16, 9, 128, 64, 64, 0, 0, 0, 2, 2, 0, 0, 0, 1, 1, 0, 0.5, 0, 0, 0, 0, 0, -1},
    {"in bf16 nchw wide plane by choice", IN, BF16, 4, 136, 128, 128, 0, 0, 0, 1, 2, 1, 0, 0, 1, 0, 0, 1.0, 0, 0, 0, 0,
     0, 0},
    {"in bf16 nchw plane by choice", IN, BF16, 9, 128, 64, 64, 0, 0, 0, 2, 2, 0, 0, 0, 1, 1, 0, 0.5, 0, 0, 0, 0, 0,
     0},
};
#undef F32
#undef F16
#undef BF16
#define NUM_TABLE ((int)(sizeof table / sizeof table[0]))
#define NUM_RANDOM 30

/* ---------------------------------------------------------------------------------- */
/* Tensors of a case                                                                     */
/* ---------------------------------------------------------------------------------- */

typedef struct run {
    const ccase *c;
    int64_t dims[4], strides[4];   /* X-shaped tensors */
    int srank;
    int64_t sdims[2], sstrides[2]; /* statistics */
    tu_buf cpu[T_COUNT], gpu[T_COUNT];
    frost_tensor id[T_COUNT];
} run;

static int present(const ccase *c, int t)
{
    switch (t) {
    case T_SCALE: return c->scale != 0;
    case T_BIAS: return c->bias != 0;
    case T_RMEAN: case T_RVAR: return c->kind == BN && c->running;
    case T_DY: case T_DX: return c->backward;
    case T_MEAN: case T_RSTD: return !c->inference;
    case T_DSCALE: return c->backward && c->scale;
    case T_DBIAS: return c->backward && c->bias;
    default: return 1;
    }
}

/* Written by the graph: outputs, and the running statistics that training updates. */
static int is_output(const ccase *c, int t, int backward)
{
    if (backward)
        return t >= T_DX;
    return (t >= T_Y && t <= T_RSTD) || ((t == T_RMEAN || t == T_RVAR) && !c->inference);
}

static void alloc_all(run *r, tu_rng *rng)
{
    const ccase *c = r->c;
    const int64_t hw = c->h * c->w;
    r->dims[0] = c->n, r->dims[1] = c->c, r->dims[2] = c->h, r->dims[3] = c->w;
    if (c->nhwc)
        r->strides[1] = 1, r->strides[3] = c->c, r->strides[2] = c->c * c->w;
    else
        r->strides[3] = 1, r->strides[2] = c->w, r->strides[1] = hw;
    r->strides[0] = c->c * hw + c->n_gap;
    r->srank = c->kind == BN ? 1 : 2;
    r->sdims[0] = c->kind == BN ? c->c : c->n;
    r->sdims[1] = c->kind == GN ? c->groups : c->c;
    tu_packed_strides(r->srank, r->sdims, r->sstrides);
    const int64_t cdims4[4] = {1, c->c, 1, 1}, cstrides4[4] = {c->c, 1, 1, 1}, one = 1;
    for (int t = 0; t < T_COUNT; t++) {
        if (!present(c, t))
            continue;
        frost_dtype dt = c->dtype;
        int rank = 4;
        const int64_t *dims = r->dims, *st = r->strides;
        if (t == T_SCALE || t == T_BIAS || t == T_DSCALE || t == T_DBIAS || t == T_RMEAN || t == T_RVAR) {
            const int p = t == T_SCALE || t == T_DSCALE ? c->scale : t == T_BIAS || t == T_DBIAS ? c->bias : 1;
            const int four = p == 3 && t != T_DBIAS && t != T_RMEAN && t != T_RVAR;
            rank = four ? 4 : 1, dims = four ? cdims4 : &c->c, st = four ? cstrides4 : &one;
            if (t == T_DBIAS && c->scale == 3) /* d_bias takes scale's dims */
                rank = 4, dims = cdims4, st = cstrides4;
            dt = (t == T_SCALE || t == T_BIAS) && p != 1 ? c->dtype : FROST_F32;
        } else if (t == T_MEAN || t == T_RSTD) {
            rank = r->srank, dims = r->sdims, st = r->sstrides, dt = FROST_F32;
        }
        TU_CHECK(tu_buf_alloc(&r->cpu[t], dt, rank, dims, st, 0));
        TU_CHECK(tu_buf_alloc(&r->gpu[t], dt, rank, dims, st, 0));
    }
    tu_buf_fill_uniform(&r->cpu[T_X], rng, -2.0 + c->offset, 2.0 + c->offset);
    if (c->scale)
        tu_buf_fill_uniform(&r->cpu[T_SCALE], rng, c->zc ? -0.5 : 0.5, c->zc ? 0.5 : 1.5);
    if (c->bias)
        tu_buf_fill_uniform(&r->cpu[T_BIAS], rng, -1.0, 1.0);
    if (c->backward)
        tu_buf_fill_uniform(&r->cpu[T_DY], rng, -1.0, 1.0);
    if (present(c, T_RMEAN)) {
        tu_buf_fill_uniform(&r->cpu[T_RMEAN], rng, -0.5 + c->offset, 0.5 + c->offset);
        tu_buf_fill_uniform(&r->cpu[T_RVAR], rng, 0.5, 2.0);
        for (int t = T_RMEAN; t <= T_RVAR; t++) /* the GPU's own copy of the initial values */
            memcpy(r->gpu[t].alloc, r->cpu[t].alloc, (size_t)(r->cpu[t].span + 2 * r->cpu[t].guard) * 4);
    }
}

static void free_all(run *r)
{
    for (int t = 0; t < T_COUNT; t++) {
        tu_buf_free(&r->cpu[t]);
        tu_buf_free(&r->gpu[t]);
    }
}

/* The forward or backward graph of the case, every tensor declared by the test. */
static frost_graph *make_graph(run *r, frost_context *ctx, int backward)
{
    const ccase *c = r->c;
    frost_graph *g = NULL;
    TU_OK(frost_graph_create(ctx, &g));
    if (!g)
        return NULL;
    memset(r->id, 0, sizeof r->id);
    for (int t = 0; t < T_COUNT; t++) {
        const int used = backward ? t == T_X || t == T_SCALE || t == T_DY || t >= T_DX ||
                                        (t == T_MEAN && (c->saved == 1 || c->saved == 2)) ||
                                        (t == T_RSTD && (c->saved == 1 || c->saved == 3))
                                  : t <= T_RVAR || (t >= T_Y && t <= T_RSTD);
        if (used && present(c, t))
            r->id[t] = tu_add_tensor(g, names[t], &r->cpu[t]);
    }
    frost_status s;
    if (!backward) {
        frost_channel_norm_desc d = {.x = r->id[T_X], .scale = r->id[T_SCALE], .bias = r->id[T_BIAS],
                                     .num_groups = c->groups, .zero_centered_scale = c->zc,
                                     .phase = c->inference ? FROST_NORM_INFERENCE : FROST_NORM_TRAINING,
                                     .running_mean = r->id[T_RMEAN], .running_var = r->id[T_RVAR], .momentum = 0.3};
        frost_norm_outputs o = {.y = r->id[T_Y], .mean = r->id[T_MEAN], .inv_std = r->id[T_RSTD]};
        s = c->kind == GN ? frost_graph_add_groupnorm(g, &d, &o)
            : c->kind == IN ? frost_graph_add_instancenorm(g, &d, &o)
                            : frost_graph_add_batchnorm(g, &d, &o);
    } else {
        frost_channel_norm_backward_desc d = {.x = r->id[T_X], .d_y = r->id[T_DY], .scale = r->id[T_SCALE],
                                              .mean = r->id[T_MEAN], .inv_std = r->id[T_RSTD],
                                              .num_groups = c->groups, .has_bias = c->bias != 0,
                                              .zero_centered_scale = c->zc, .deterministic = 1};
        frost_norm_grads o = {.d_x = r->id[T_DX], .d_scale = r->id[T_DSCALE], .d_bias = r->id[T_DBIAS]};
        s = c->kind == GN ? frost_graph_add_groupnorm_backward(g, &d, &o)
            : c->kind == IN ? frost_graph_add_instancenorm_backward(g, &d, &o)
                            : frost_graph_add_batchnorm_backward(g, &d, &o);
    }
    TU_OK(s);
    return g;
}

/* ---------------------------------------------------------------------------------- */
/* Running both engines                                                                  */
/* ---------------------------------------------------------------------------------- */

/* The plane path (chan_norm_plane.cu) is taken exactly where it may be and the case asks
 * for it: NCHW InstanceNorm or GroupNorm with one channel a group, 16-byte units of pixels
 * (and n strides), planes of 64 units or more, 4 units a thread (8 past 1024 units, or
 * with "8 units"), at most 512 threads; forced by the case, or by the rule for "by choice"
 * (at most 256 threads, a wave of planes at 1024 threads an SM); never when the case turns
 * it off. */
static void check_plane(const ccase *c, const frost__device *dev, int planar, const char *explain)
{
    const int64_t esize = c->dtype == FROST_F32 ? 4 : 2, vec = 16 / esize, units = c->h * c->w / vec;
    const int64_t per = strstr(c->name, "8 units") || units > 1024 ? 8 : 4;
    const int64_t threads = ((units + per - 1) / per + 31) / 32 * 32;
    const int64_t per_sm = threads == 0 || threads > 1024 ? 1 : 1024 / threads;
    const int fits = c->n > 0 && !c->nhwc && c->kind != BN && (c->kind == IN || c->groups == c->c) &&
                     (c->h * c->w) % vec == 0 && (c->n <= 1 || c->n_gap % vec == 0) && units >= 64 &&
                     threads <= 512;
    const int want = c->plane > 0 || (strstr(c->name, "by choice") && threads <= 256 &&
                                      c->n * c->c >= dev->sm_count * per_sm);
    if (planar ? !fits || c->plane < 0 : fits && want)
        tu_failf("plane path %s for this case:\n%s", planar ? "taken" : "not taken", explain);
    if (planar && !strstr(explain, per == 8 ? "PLANE_UNITS=8" : "PLANE_UNITS=4"))
        tu_failf("the plane path does not hold %d units a thread:\n%s", (int)per, explain);
}

/* Builds and runs g on the GPU `repeat` times (gpu_util: inputs copied whole, outputs
 * from their poisoned or, for running statistics, initial host copies; later runs must
 * reproduce run 1 bitwise); run 1's results land in r->gpu[].  The case's tile and block
 * overrides hold for the build only. */
static int run_gpu(run *r, frost_graph *g, const frost__device *dev, int backward, int repeat)
{
    const ccase *c = r->c;
    unsigned outputs = 0;
    for (int t = 0; t < T_COUNT; t++)
        outputs |= is_output(c, t, backward) ? 1u << t : 0u;
    const tu_slots slots = {.count = T_COUNT, .ids = r->id, .host = r->cpu, .device_out = r->gpu,
                            .output_mask = outputs, .names = names};
    char kb[16], blocks[16], cluster[16];
    snprintf(kb, sizeof kb, "%d", c->tile_kb);
    snprintf(blocks, sizeof blocks, "%d", c->blocks ? c->blocks : 1);
    snprintf(cluster, sizeof cluster, "%d", c->cluster > 0 ? c->cluster : 0);
    if (c->tile_kb)
        setenv("FROST_CNORM_TILE_KB", kb, 1);
    if (c->tile_kb || c->blocks)
        setenv("FROST_CNORM_BLOCKS", blocks, 1);
    if (c->cluster)
        setenv("FROST_CNORM_CLUSTER", cluster, 1);
    if (c->stream)
        setenv("FROST_CNORM_STREAM", c->stream == 2 ? "2" : c->stream > 0 ? "1" : "0", 1);
    if (strstr(c->name, "early"))
        setenv("FROST_CNORM_STREAM_EARLY", strstr(c->name, "no early") ? "0" : "100", 1);
    if (strstr(c->name, "merge in launch"))
        setenv("FROST_CNORM_STREAM_MERGE", "0", 1);
    if (strstr(c->name, "combined kernel"))
        setenv("FROST_CNORM_STREAM_SPLIT", "0", 1);
    if (strstr(c->name, "3 blocks"))
        setenv("FROST_CNORM_STREAM_BLOCKS", "3", 1);
    if (c->plane)
        setenv("FROST_CNORM_PLANE", c->plane > 0 ? "1" : "0", 1);
    if (strstr(c->name, "8 units"))
        setenv("FROST_CNORM_PLANE_UNITS", "8", 1);
    const int built = tu_run_cuda(g, dev, &slots, c->misalign, repeat);
    unsetenv("FROST_CNORM_STREAM_MERGE");
    unsetenv("FROST_CNORM_STREAM_EARLY");
    unsetenv("FROST_CNORM_STREAM_SPLIT");
    unsetenv("FROST_CNORM_STREAM_BLOCKS");
    unsetenv("FROST_CNORM_TILE_KB");
    unsetenv("FROST_CNORM_BLOCKS");
    unsetenv("FROST_CNORM_CLUSTER");
    unsetenv("FROST_CNORM_STREAM");
    unsetenv("FROST_CNORM_PLANE");
    unsetenv("FROST_CNORM_PLANE_UNITS");
    return built;
}

static void run_cpu(run *r, frost_graph *g)
{
    const tu_slots slots = {.count = T_COUNT, .ids = r->id, .host = r->cpu, .names = names};
    tu_run_ref(g, &slots);
}

/* ---------------------------------------------------------------------------------- */
/* Magnitudes for the tolerances                                                         */
/* ---------------------------------------------------------------------------------- */

typedef struct mags {
    double x, xhat, rstd, w, b, dy;
} mags;

static double at(const run *r, int t, int64_t n, int64_t c, int64_t s)
{
    const tu_buf *b = &r->cpu[t];
    const int64_t h = s / r->c->w, w = s % r->c->w;
    return tu_buf_get(b, n * b->strides[0] + c * b->strides[1] + h * b->strides[2] + w * b->strides[3]);
}

static double chan(const tu_buf *b, int64_t c)
{
    return tu_buf_get(b, c * b->strides[b->rank == 1 ? 0 : 1]);
}

/* Per set (the reference's own definition), the largest rstd and |x_hat|. */
static mags measure(const run *r)
{
    const ccase *c = r->c;
    const int64_t hw = c->h * c->w, cg = c->kind == GN ? c->c / c->groups : 1;
    const int64_t sets = c->kind == BN ? c->c : c->n * (c->c / cg);
    mags m = {0, 0, 0, 0, 0, 0};
    for (int64_t ch = 0; ch < c->c; ch++) {
        m.w = fmax(m.w, c->scale ? fabs(chan(&r->cpu[T_SCALE], ch) + (c->zc ? 1.0 : 0.0)) : 1.0);
        m.b = c->bias ? fmax(m.b, fabs(chan(&r->cpu[T_BIAS], ch))) : 0.0;
    }
    for (int64_t i = 0; i < sets; i++) {
        const int64_t n0 = c->kind == BN ? 0 : i / (c->c / cg), n1 = c->kind == BN ? c->n : n0 + 1;
        const int64_t c0 = c->kind == BN ? i : (i % (c->c / cg)) * cg, c1 = c->kind == BN ? i + 1 : c0 + cg;
        double s = 0, q = 0, cnt = (double)((n1 - n0) * (c1 - c0) * hw), mean, rstd;
        for (int64_t n = n0; n < n1; n++)
            for (int64_t ch = c0; ch < c1; ch++)
                for (int64_t e = 0; e < hw; e++)
                    s += at(r, T_X, n, ch, e);
        mean = s / cnt;
        for (int64_t n = n0; n < n1; n++)
            for (int64_t ch = c0; ch < c1; ch++)
                for (int64_t e = 0; e < hw; e++)
                    q += (at(r, T_X, n, ch, e) - mean) * (at(r, T_X, n, ch, e) - mean);
        rstd = 1.0 / sqrt(q / cnt + 1e-5);
        if (c->kind == BN && c->inference) {
            mean = chan(&r->cpu[T_RMEAN], i);
            rstd = 1.0 / sqrt(chan(&r->cpu[T_RVAR], i) + 1e-5);
        }
        m.rstd = fmax(m.rstd, rstd);
        for (int64_t n = n0; n < n1; n++)
            for (int64_t ch = c0; ch < c1; ch++)
                for (int64_t e = 0; e < hw; e++) {
                    const double x = at(r, T_X, n, ch, e);
                    m.x = fmax(m.x, fabs(x));
                    m.xhat = fmax(m.xhat, fabs((x - mean) * rstd));
                    if (c->backward)
                        m.dy = fmax(m.dy, fabs(at(r, T_DY, n, ch, e)));
                }
    }
    return m;
}

/* ---------------------------------------------------------------------------------- */
/* One case                                                                              */
/* ---------------------------------------------------------------------------------- */

static const char *const kind_names[] = {"groupnorm", "instancenorm", "batchnorm"};

/* Adds 1/4 to element `offset` of the buffer `user` (walked as b). */
static void shift_quarter(const tu_buf *b, int64_t offset, void *user)
{
    tu_buf_set(user, offset, tu_buf_get(b, offset) + 0.25);
}

static void run_case(const ccase *c, uint64_t seed, int index, frost_context *cpu, frost_context *gpu)
{
    char desc[352];
    snprintf(desc, sizeof desc,
             "%s: %s %s [%lld, %lld, %lld, %lld] G %d %s gap %d scale %d bias %d%s%s%s%s saved %d%s offset %g tile_kb %d "
             "blocks %d cluster %d stream %d",
             c->name, kind_names[c->kind], frost_dtype_name(c->dtype), (long long)c->n, (long long)c->c,
             (long long)c->h, (long long)c->w, c->groups, c->nhwc ? "nhwc" : "nchw", c->n_gap, c->scale, c->bias,
             c->zc ? " zc" : "", c->inference ? " inference" : "", c->running ? " running" : "",
             c->backward ? " +bwd" : "", c->saved, c->misalign ? " misaligned" : "", c->offset, c->tile_kb,
             c->blocks, c->cluster, c->stream);
    tu_set_context("test_chan_norm_gpu", seed, index, desc);
    const frost__device *dev = gpu->device;
    tu_rng rng = tu_rng_make(seed * 1000003u + (uint64_t)index);
    run r;
    memset(&r, 0, sizeof r);
    r.c = c;
    alloc_all(&r, &rng);
    const mags m = measure(&r);
    const int64_t hw = c->h * c->w;
    const double set_m = c->kind == BN ? (double)(c->n * hw) : (double)(c->kind == GN ? c->c / c->groups : 1) * hw;
    const double u = tu_eps(c->dtype), u32 = ldexp(1.0, -24);
    const double E = 32 * (log2(2.0 * set_m + 2) + sqrt(set_m)) * u32;
    const double np = (double)(c->n * hw) + 1, Ep = 32 * (log2(2.0 * np) + sqrt(np)) * u32;

    /* forward (its statistics feed the backward) */
    frost_graph *gc = make_graph(&r, cpu, 0);
    run_cpu(&r, gc);
    frost_graph *gg = make_graph(&r, gpu, 0);
    const int updates = c->running && !c->inference;
    if (gg && run_gpu(&r, gg, dev, 0, 2)) {
        tu_compare_whole("y", &r.gpu[T_Y], &r.cpu[T_Y], E * (m.rstd * (m.x + 1) * m.w + m.b + 1), 2.5 * u);
        if (r.id[T_MEAN])
            tu_compare_whole("mean", &r.gpu[T_MEAN], &r.cpu[T_MEAN], E * (m.x + 1), 0);
        if (r.id[T_RSTD])
            tu_compare_whole("inv_std", &r.gpu[T_RSTD], &r.cpu[T_RSTD], 1e-30, E * (1 + m.xhat * m.xhat));
        if (updates) {
            tu_compare_whole("running_mean", &r.gpu[T_RMEAN], &r.cpu[T_RMEAN], E * (m.x + 1), 0);
            tu_compare_whole("running_var", &r.gpu[T_RVAR], &r.cpu[T_RVAR], 1e-6, E * (1 + m.xhat * m.xhat));
        }
        char explain[4096];
        TU_OK(frost_graph_explain(gg, explain, sizeof explain, NULL));
        /* the cluster path: GroupNorm / InstanceNorm, and BatchNorm NCHW in training, on 16-byte
         * units (NHWC: C, NCHW: H x W, and the n strides, in whole units); every table case that
         * forces it is eligible, and -1 turns it off */
        const int clustered = strstr(explain, "chan_norm_cluster.cu:cnorm_cluster_fwd_kernel") != NULL;
        const int streamed = strstr(explain, "chan_norm_stream.cu:cnorm_stream_fwd_") != NULL;
        const int planar = strstr(explain, "chan_norm_plane.cu:cnorm_plane_fwd_kernel") != NULL;
        check_plane(c, dev, planar, explain);
        const int want_cluster = c->cluster > 0 && strstr(c->name, "cluster") != NULL;
        const int vec = c->dtype == FROST_F32 ? 4 : 8;
        const int units = c->c % vec == 0 && (c->n <= 1 || c->n_gap % vec == 0);
        const int pixel_units = (c->h * c->w) % vec == 0 && (c->n <= 1 || c->n_gap % vec == 0);
        if (c->n > 0 && !clustered && !streamed && !planar && !strstr(explain, "chan_norm_fwd.cu:cnorm_fwd_kernel"))
            tu_failf("explain does not name the cuda kernel:\n%s", explain);
        const int ineligible = (c->kind == BN && (c->nhwc || c->inference)) || !(c->nhwc ? units : pixel_units);
        if (c->n > 0 && (clustered ? ineligible || c->cluster < 0 : want_cluster))
            tu_failf("cluster path %s for this case:\n%s", clustered ? "taken" : "not taken", explain);
        /* the stream path (opt-in): BatchNorm training on NHWC 16-byte units (C and the n strides); the
         * table's "stream" cases take it */
        const int want_stream = c->kind == BN && c->nhwc && !c->inference && units && c->stream >= 0;
        if (c->n > 0 && (streamed ? c->kind != BN || !c->nhwc || c->inference || c->stream < 0 : want_stream))
            tu_failf("stream path %s for this case:\n%s", streamed ? "taken" : "not taken", explain);
        const int two_launches = strstr(explain, "in two passes over x") != NULL;
        /* the two-launch form merges in the finalize kernel unless a case asks for the in-launch merge */
        const char *by_finalize = "merged per channel in tile order by cnorm_fwd_finalize_kernel";
        const int merge_kernel = strstr(explain, by_finalize) != NULL;
        if (streamed && two_launches && merge_kernel != !strstr(c->name, "merge in launch"))
            tu_failf("the two-launch form's merge %s the finalize kernel:\n%s", merge_kernel ? "in" : "not in",
                     explain);
        /* ... whose launches run their own entry points unless a case asks for the combined kernel */
        const int split = strstr(explain, "cnorm_stream_fwd_stats_kernel") != NULL &&
                          strstr(explain, "then every window's output (cnorm_stream_fwd_apply_kernel") != NULL;
        if (streamed && two_launches && merge_kernel && split != !strstr(c->name, "combined kernel"))
            tu_failf("the two-launch form %s its split entry points:\n%s", split ? "ran" : "did not run", explain);
        if (streamed && two_launches && merge_kernel && !strstr(explain, strstr(c->name, "3 blocks") ? "3 blocks per SM"
                                                                                                   : "2 blocks per SM"))
            tu_failf("the two-launch form's blocks per SM are not the case's:\n%s", explain);
        if (streamed && two_launches != (c->stream != 1))
            tu_failf("the stream path's %s form, expected the other:\n%s", two_launches ? "two-launch" : "one-launch",
                     explain);
        /* these cases are sized to exceed one wave of 16 KB tiles on a GPU of <= 140 SMs */
        /* "fwd past shared memory": the tiles hold part of their rows and read the rest twice */
        const char *held = "reads the other";
        if (strstr(c->name, "fwd past shared memory") && (!clustered || !strstr(explain, held)))
            tu_failf("the forward's tiles do not read rows past shared memory twice:\n%s", explain);
        if (strstr(c->name, "fallback") && dev->sm_count <= 140 && !strstr(explain, "second read of x"))
            tu_failf("expected the three-kernel fallback:\n%s", explain);
    }
    frost_graph_destroy(gc);
    frost_graph_destroy(gg);

    /* backward, three times on the GPU; a mean saved alone is moved off the batch mean by
     * 1/4, so x_hat about it differs from x_hat about the recomputed one */
    if (c->backward) {
        if (c->saved == 2 && r.cpu[T_MEAN].alloc)
            tu_buf_for_each(&r.cpu[T_MEAN], shift_quarter, &r.cpu[T_MEAN]);
        gc = make_graph(&r, cpu, 1);
        run_cpu(&r, gc);
        gg = make_graph(&r, gpu, 1);
        if (gg && run_gpu(&r, gg, dev, 1, 3)) {
            tu_compare_whole("dx", &r.gpu[T_DX], &r.cpu[T_DX], E * m.rstd * (m.dy * m.w * (1 + m.xhat * m.xhat) + 1e-3),
                    2.5 * u);
            const double pt = Ep * np * (m.dy * (1 + m.xhat) + 1e-3);
            if (r.id[T_DSCALE])
                tu_compare_whole("d_scale", &r.gpu[T_DSCALE], &r.cpu[T_DSCALE], pt, 0);
            if (r.id[T_DBIAS])
                tu_compare_whole("d_bias", &r.gpu[T_DBIAS], &r.cpu[T_DBIAS], pt, 0);
            /* "large tiles": a segment past 8 tiles of 64 KB (x and dy), cut in 8 larger ones */
            char explain[4096];
            TU_OK(frost_graph_explain(gg, explain, sizeof explain, NULL));
            if (strstr(c->name, "large tiles") && !strstr(explain, "chan_norm_cluster.cu:cnorm_cluster_bwd_kernel"))
                tu_failf("the backward did not take the cluster path with large tiles:\n%s", explain);
            if (strstr(c->name, "bwd past shared memory") && !strstr(explain, "reads the other"))
                tu_failf("the backward's tiles do not read rows past shared memory twice:\n%s", explain);
            check_plane(c, dev, strstr(explain, "chan_norm_plane.cu:cnorm_plane_bwd_kernel") != NULL, explain);
        }
        frost_graph_destroy(gc);
        frost_graph_destroy(gg);
    }
    free_all(&r);
}

static ccase random_case(uint64_t seed, int index)
{
    static const int64_t channels[] = {1, 3, 8, 16, 24, 32, 64, 96, 128, 256, 320};
    static const frost_dtype dts[] = {FROST_F32, FROST_F16, FROST_BF16};
    tu_rng rng = tu_rng_make(seed ^ (0x9e3779b97f4a7c15ull * (uint64_t)(index + 1)));
    ccase c;
    memset(&c, 0, sizeof c);
    c.name = "random";
    c.kind = (int)tu_int(&rng, 0, 2);
    c.dtype = dts[tu_int(&rng, 0, 2)];
    c.c = channels[tu_int(&rng, 0, (int64_t)(sizeof channels / sizeof channels[0]) - 1)];
    c.h = tu_int(&rng, 1, 40);
    c.w = tu_int(&rng, 0, 2) == 0 ? 8 * tu_int(&rng, 1, 8) : tu_int(&rng, 1, 40);
    const int64_t per_sample = c.c * c.h * c.w;
    c.n = tu_int(&rng, 1, (1 << 19) / per_sample + 1 < 40 ? (1 << 19) / per_sample + 1 : 40);
    if (c.kind == BN && c.n * c.h * c.w < 2)
        c.n = 2;
    int64_t g = tu_int(&rng, 1, c.c);
    while (c.c % g != 0)
        g--;
    c.groups = (int)g;
    c.nhwc = (int)tu_int(&rng, 0, 1);
    c.n_gap = tu_int(&rng, 0, 3) == 0 ? (int)(tu_int(&rng, 0, 1) ? 8 : tu_int(&rng, 1, 5)) : 0;
    c.scale = (int)tu_int(&rng, 0, 3);
    c.bias = (int)tu_int(&rng, 0, 2);
    c.zc = c.scale && tu_int(&rng, 0, 3) == 0;
    c.inference = tu_int(&rng, 0, 4) == 0;
    c.running = c.kind == BN && (c.inference || tu_int(&rng, 0, 1));
    c.backward = !c.inference && tu_int(&rng, 0, 4) != 0;
    c.saved = (int)tu_int(&rng, 0, 3);
    c.misalign = tu_int(&rng, 0, 7) == 0;
    c.offset = tu_uniform(&rng, -1.0, 3.0);
    c.tile_kb = tu_int(&rng, 0, 4) == 0 ? 16 : 0;
    c.blocks = (int)tu_int(&rng, 0, 3);
    static const int clusters[] = {0, 0, 1, 2, 4, 8};
    c.cluster = clusters[tu_int(&rng, 0, 5)];
    c.stream = (int)tu_int(&rng, 0, 3) - 1;
    c.plane = (int)tu_int(&rng, 0, 2) - 1;
    return c;
}

/* ---------------------------------------------------------------------------------- */
/* Refusals                                                                              */
/* ---------------------------------------------------------------------------------- */

/* A GroupNorm whose x has `strides`, and y given with `y_strides` (NULL: frost's). */
static void expect_refusal(frost_context *gpu, const int64_t *strides, const int64_t *y_strides, const char *needle)
{
    const int64_t dims[4] = {2, 8, 6, 5};
    frost_graph *g = NULL;
    TU_OK(frost_graph_create(gpu, &g));
    if (!g)
        return;
    frost_tensor_desc d;
    memset(&d, 0, sizeof d);
    d.name = "x", d.dtype = FROST_BF16, d.rank = 4;
    for (int i = 0; i < 4; i++)
        d.dims[i] = dims[i], d.strides[i] = strides[i];
    frost_tensor x = 0, y = FROST_TENSOR_AUTO;
    TU_OK(frost_graph_add_tensor(g, &d, &x));
    if (y_strides) {
        d.name = "y";
        for (int i = 0; i < 4; i++)
            d.strides[i] = y_strides[i];
        TU_OK(frost_graph_add_tensor(g, &d, &y));
    }
    frost_channel_norm_desc nd = {.x = x, .num_groups = 2};
    frost_norm_outputs o = {.y = y};
    TU_OK(frost_graph_add_groupnorm(g, &nd, &o));
    frost_build_options opt = {.engine = "cuda"};
    TU_CHECK_STATUS(frost_graph_build(g, &opt), FROST_NOT_SUPPORTED);
    if (!strstr(frost_last_error(), needle))
        tu_failf("refusal message lacks \"%s\": %s", needle, frost_last_error());
    frost_graph_destroy(g);
}

static void check_refusals(frost_context *gpu)
{
    tu_set_context("test_chan_norm_gpu", 0, -1, "refusals");
    const int64_t nchw[4] = {240, 30, 5, 1}, nhwc[4] = {240, 1, 40, 8};
    const int64_t swapped_hw[4] = {240, 30, 1, 6}; /* W outer, H inner: neither layout */
    expect_refusal(gpu, swapped_hw, NULL, "cuda channel norms need NCHW or NHWC layout");
    expect_refusal(gpu, swapped_hw, NULL, "X's strides are [240, 30, 1, 6]");
    expect_refusal(gpu, nhwc, nchw, "every data tensor in one layout; X is NHWC but Y's strides are [240, 30, 5, 1]");
}

static void run_index(int i, uint64_t seed, frost_context *cpu, frost_context *gpu)
{
    const ccase c = i < NUM_TABLE ? table[i] : random_case(seed, i);
    run_case(&c, seed, i, cpu, gpu);
}

/* FROST_TEST_SMALL=1: only the table's cases marked small (for compute-sanitizer). */
static int skip_index(int i)
{
    static int small = -1;
    if (small < 0)
        small = getenv("FROST_TEST_SMALL") && atoi(getenv("FROST_TEST_SMALL"));
    return small && (i >= NUM_TABLE || !table[i].small);
}

int main(void)
{
    return tu_gpu_main(20261202, NUM_TABLE + NUM_RANDOM, skip_index, run_index, check_refusals);
}
