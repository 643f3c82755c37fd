/*
 * test_norm_gpu.c — the cuda engine's LayerNorm and RMSNorm (norm_fwd.cu, norm_bwd.cu,
 * norm_bwd_reduce.cu) against the reference engine, forward and backward.
 *
 * Each case builds the same graph in a CPU context (ref engine, fp64) and in a CUDA
 * context with build option engine = "cuda" (a refusal is a failure, never a silent
 * fallback), runs both on the same inputs and compares every element of every output
 * allocation, guards and row gaps included: both copies start NaN-poisoned and the GPU one
 * travels to the device whole and back, so an element must be NaN on one side exactly when
 * it is NaN on the other (an unwritten element or a write into a gap or margin fails).
 * The backward runs three times on the GPU; dx, d_scale and d_bias must be bitwise equal
 * across the runs (determinism is promised always, not only with the flag).
 *
 * Layout legend: X [R..., C...], rows = prod(R...), cols = prod(C...); u = unit roundoff
 * of the I/O dtype, u32 = 2^-24, L = log2(2 cols) (the depth of an fp32 row sum).
 *
 * Tolerance (DESIGN.md pass rule).  Both engines read the same stored inputs; the GPU
 * accumulates in fp32 (tree-shaped sums, error ~ L u32 relative to the sum of magnitudes),
 * the ref in fp64, and each rounds its result once to the output dtype (so they may differ
 * by one ulp = 2u relative).  Per element:
 *     y, dx:           |got - ref| <= 2.5 u |ref| + 32 L u32 * M
 *     mean:            |got - ref| <= 32 L u32 * max|x|
 *     inv_std:         |got - ref| <= 32 L u32 * |ref|
 *     d_scale, d_bias: |got - ref| <= 32 (L + log2(2 rows)) u32 * rows * M_p
 * where M bounds the magnitude of the terms the output is made of (y: max|x_hat w| + max|b|;
 * dx: max rstd * max|g| * (1 + max|x_hat|^2)) and M_p = max|dy| (1 + max|x_hat|).  These
 * are a constant times the error of the same computation done naively in fp32.
 *
 * Cases: a named table (hidden sizes 1, 3, 128, 1000, 1024, 4096, 5120, 8192, 12288,
 * 16384 and longer rows that take the chunked path; rows 0 and 1; row gaps that keep or
 * break 16-byte rows; rows at two and three levels of strides and outer dims transposed in
 * memory; a misaligned base pointer (the scalar fallback); scale and bias absent / f32 /
 * I/O dtype; zero-centred scale; inference; saved statistics given or not; norm_dims 2),
 * then seeded random cases, then the selector's refusals.
 * FROST_TEST_SEED / FROST_TEST_CASE rerun one case.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "gpu_util.h"
#include "runtime/runtime.h"
#include "test_util.h"

enum { LN = 0, RMS = 1 };
enum { T_X, T_SCALE, T_BIAS, T_DY, T_Y, T_MEAN, T_RSTD, T_DX, T_DSCALE, T_DBIAS, T_COUNT };
#define FIRST_OUTPUT T_Y
static const char *const slot_names[T_COUNT] = {"x", "scale", "bias", "dy", "y", "mean", "inv_std", "dx", "d_scale",
                                                "d_bias"};

typedef struct ncase {
    const char *name;
    int kind;
    frost_dtype dtype;
    int64_t rows, cols; /* x is [rows, cols], or [rows/n, n, cols/4, 4] with split */
    /* split: several outer dims and norm_dims 2 (cols % 4 == 0).  1: n = 2, packed outer
     * dims (one row level); 2: n = 3 and 8 more elements between the groups of 3 rows (rows
     * in runs of 3, 16-byte rows kept); 3: n = 3 and 1 more (no 16-byte rows); 4: x
     * [rows/6, 2, 3, cols/4, 4], 8 more elements after each group of 3 rows and 16 more
     * after each group of 6 (three row levels); 5: n = 3, the two outer dims transposed in
     * memory (the 3 rows of a group rows/3 rows apart) */
    int split;
    int row_gap;        /* padding elements after each row of x, y, dy, dx */
    int scale, bias;    /* 0 absent, 1 f32, 2 the I/O dtype */
    int zero_centered, inference;
    int backward, saved; /* run the backward; give it the forward's statistics */
    int misalign;        /* device copies shifted by one element: no 16-byte rows */
    double offset;       /* added to x so LayerNorm has a mean to remove */
} ncase;

#define F32 FROST_F32
#define F16 FROST_F16
#define BF16 FROST_BF16
static const ncase table[] = {
    /* name, kind, dtype, rows, cols, split, gap, scale, bias, zc, inf, bwd, saved, misalign, offset */
    {"ln bf16 4096 io params saved", LN, BF16, 256, 4096, 0, 0, 2, 2, 0, 0, 1, 1, 0, 1.0},
    {"rms bf16 4096 f32 scale recomputed", RMS, BF16, 200, 4096, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0},
    {"ln f16 1000 gap 8", LN, F16, 130, 1000, 0, 8, 1, 1, 0, 0, 1, 1, 0, 2.0},
    {"rms f32 1024 no params", RMS, F32, 97, 1024, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0},
    {"ln f32 cols 1", LN, F32, 33, 1, 0, 0, 1, 1, 0, 0, 1, 0, 0, 0},
    {"rms bf16 cols 1", RMS, BF16, 40, 1, 0, 3, 2, 2, 0, 0, 1, 1, 0, 0},
    {"ln bf16 cols 3 (scalar)", LN, BF16, 300, 3, 0, 0, 2, 1, 0, 0, 1, 0, 0, 0.5},
    {"ln f16 128 many rows per block", LN, F16, 1000, 128, 0, 0, 2, 2, 1, 0, 1, 1, 0, 0},
    {"rms bf16 rows 0", RMS, BF16, 0, 4096, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0},
    {"ln f32 rows 0 with d_bias", LN, F32, 0, 64, 0, 0, 1, 1, 0, 0, 1, 0, 0, 0},
    {"ln bf16 rows 1", LN, BF16, 1, 8192, 0, 0, 2, 2, 0, 0, 1, 1, 0, 0},
    {"rms bf16 5120 zero-centred", RMS, BF16, 64, 5120, 0, 0, 2, 0, 1, 0, 1, 1, 0, 0},
    {"ln f16 8192 f32 params", LN, F16, 48, 8192, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0.25},
    {"rms bf16 12288", RMS, BF16, 40, 12288, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0},
    {"rms bf16 8192 (256 x 4 units)", RMS, BF16, 300, 8192, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0},
    {"rms f16 16384 (two blocks a SM)", RMS, F16, 300, 16384, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0.5},
    {"ln bf16 16384 (bwd chunked)", LN, BF16, 24, 16384, 0, 0, 2, 2, 0, 0, 1, 1, 0, 1.0},
    {"ln f32 16384", LN, F32, 20, 16384, 0, 0, 1, 1, 0, 0, 1, 0, 0, 0},
    {"rms f16 20000 (chunked)", RMS, F16, 12, 20000, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0},
    {"ln bf16 16385 odd (scalar chunked)", LN, BF16, 9, 16385, 0, 0, 2, 2, 0, 0, 1, 0, 0, 0},
    {"ln bf16 4096 inference", LN, BF16, 101, 4096, 0, 0, 2, 2, 0, 1, 0, 0, 0, 0},
    {"rms f16 1000 inference + bwd", RMS, F16, 60, 1000, 0, 0, 2, 0, 0, 1, 1, 0, 0, 0},
    {"ln bf16 128 inference (the report's y-only rows)", LN, BF16, 1000, 128, 0, 0, 2, 2, 0, 1, 0, 0, 0, 1.0},
    {"rms bf16 128 inference", RMS, BF16, 777, 128, 0, 0, 2, 0, 0, 1, 0, 0, 0, 0},
    {"ln bf16 4096 misaligned (fallback)", LN, BF16, 70, 4096, 0, 0, 2, 2, 0, 0, 1, 1, 1, 0},
    {"rms f32 1000 misaligned", RMS, F32, 50, 1000, 0, 0, 1, 0, 1, 0, 1, 0, 1, 0},
    {"ln bf16 1000 gap 3 (scalar rows)", LN, BF16, 80, 1000, 0, 3, 2, 2, 0, 0, 1, 0, 0, 0},
    {"ln f16 norm_dims 2", LN, F16, 64, 1024, 1, 0, 2, 2, 0, 0, 1, 1, 0, 0},
    {"rms bf16 norm_dims 2 gap 8", RMS, BF16, 30, 512, 1, 8, 1, 0, 1, 0, 1, 0, 0, 0},
    {"ln f32 777 odd", LN, F32, 111, 777, 0, 0, 1, 1, 0, 0, 1, 1, 0, 3.0},
    {"rms bf16 1024 bias only", RMS, BF16, 300, 1024, 0, 0, 0, 2, 0, 0, 1, 0, 0, 0},
    {"ln f32 4096 zero-centred, held parameters", LN, F32, 150, 4096, 0, 0, 1, 1, 1, 0, 1, 1, 0, 1.0},
    /* RMSNorm 2-unit rows with 16-bit I/O and f32 scale and bias: bounds for 5 blocks */
    {"rms bf16 1024 f32 scale and bias", RMS, BF16, 300, 1024, 0, 0, 1, 1, 0, 0, 1, 0, 0, 0.5},
    {"rms f16 128 f32 scale and bias", RMS, F16, 1000, 128, 0, 0, 1, 1, 1, 0, 1, 1, 0, 0},
    /* backward blocks of several rows in clusters of two, the last cluster's second block
     * without rows (on 132 SMs: 1601 rows as 201 blocks of 8 rows or fewer, 1297 as 163) */
    {"ln bf16 4096 bwd odd blocks in clusters", LN, BF16, 1601, 4096, 0, 0, 2, 2, 0, 0, 1, 1, 0, 0.5},
    {"rms f16 4096 bwd odd blocks in clusters", RMS, F16, 1297, 4096, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0},
    /* rows that a cluster's two blocks share (FROST_NORM_TUNE split=2 on sm_90; else whole) */
    {"ln bf16 16384 recomputed, rows spread (split)", LN, BF16, 133, 16384, 0, 0, 2, 2, 0, 0, 1, 0, 0, 1.0},
    {"rms bf16 16384 misaligned (split fallback)", RMS, BF16, 37, 16384, 0, 0, 2, 0, 0, 0, 1, 1, 1, 0},
    {"ln f32 8192 zero-centred (split)", LN, F32, 70, 8192, 0, 0, 1, 1, 1, 0, 1, 1, 0, 0.5},
    {"rms bf16 16384 no scale, rows 1 (split)", RMS, BF16, 1, 16384, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0},
    {"ln f16 16384 inference, gap 8 (split)", LN, F16, 90, 16384, 0, 8, 2, 2, 0, 1, 0, 0, 0, 0},
    /* rows in runs of 3 (ROW_LEVELS=2 keys): the register, staged, clustered, split and
     * chunked paths, 16-byte rows or not, statistics packed (one row level) beside them */
    {"rms bf16 128 runs of 3", RMS, BF16, 1200, 128, 2, 0, 2, 0, 0, 0, 1, 1, 0, 0},
    {"ln bf16 4096 runs of 3, gap 8", LN, BF16, 300, 4096, 2, 8, 2, 2, 0, 0, 1, 1, 0, 1.0},
    {"ln f16 1000 runs of 3, odd gaps", LN, F16, 129, 1000, 3, 3, 1, 1, 0, 0, 1, 0, 0, 2.0},
    {"rms f32 8192 runs of 3", RMS, F32, 99, 8192, 2, 0, 1, 0, 0, 0, 1, 0, 0, 0},
    {"ln bf16 16384 runs of 3 (split rows)", LN, BF16, 33, 16384, 2, 0, 2, 2, 0, 0, 1, 1, 0, 0.5},
    {"rms bf16 40000 runs of 3 (chunked)", RMS, BF16, 9, 40000, 2, 0, 2, 0, 1, 0, 1, 0, 0, 0},
    {"ln bf16 1024 runs of 3 inference misaligned", LN, BF16, 600, 1024, 2, 0, 2, 2, 0, 1, 0, 0, 1, 0},
    /* three row levels (ROW_LEVELS=3), and outer dims transposed in memory */
    {"rms bf16 128 three levels", RMS, BF16, 1200, 128, 4, 0, 2, 0, 0, 0, 1, 1, 0, 0},
    {"ln bf16 4096 three levels, gap 8", LN, BF16, 300, 4096, 4, 8, 2, 2, 0, 0, 1, 1, 0, 1.0},
    {"ln f16 1000 three levels, gap 3 (scalar rows)", LN, F16, 132, 1000, 4, 3, 1, 1, 0, 0, 1, 0, 0, 2.0},
    {"ln bf16 16384 three levels (split rows)", LN, BF16, 36, 16384, 4, 0, 2, 2, 0, 0, 1, 1, 0, 0.5},
    {"rms f32 20000 three levels (chunked)", RMS, F32, 12, 20000, 4, 0, 1, 1, 0, 0, 1, 0, 0, 0},
    {"rms bf16 1024 outer dims transposed", RMS, BF16, 900, 1024, 5, 0, 2, 0, 0, 0, 1, 1, 0, 0},
    {"ln f32 8192 outer dims transposed, gap 4", LN, F32, 60, 8192, 5, 4, 1, 1, 0, 0, 1, 0, 0, 1.0},
};
#undef F32
#undef F16
#undef BF16
#define NUM_TABLE ((int)(sizeof table / sizeof table[0]))
#define NUM_RANDOM 40

/* ---------------------------------------------------------------------------------- */
/* Tensors of a case                                                                     */
/* ---------------------------------------------------------------------------------- */

typedef struct run {
    const ncase *c;
    int rank, norm_dims;
    int64_t dims[5], strides[5];          /* x-like tensors */
    int64_t sdims[5], sstrides[5];        /* statistics */
    int64_t pdims[2], pstrides[2];        /* parameters and their gradients */
    tu_buf cpu[T_COUNT], gpu[T_COUNT];    /* cpu: inputs + ref outputs; gpu: outputs */
    frost_tensor id[T_COUNT];
} run;

static void layout(run *r)
{
    const ncase *c = r->c;
    const int64_t row = c->cols + c->row_gap;
    if (c->split == 4) {
        r->rank = 5, r->norm_dims = 2;
        r->dims[0] = c->rows / 6, r->dims[1] = 2, r->dims[2] = 3, r->dims[3] = c->cols / 4, r->dims[4] = 4;
        r->strides[4] = 1, r->strides[3] = 4, r->strides[2] = row;
        r->strides[1] = 3 * row + 8, r->strides[0] = 2 * r->strides[1] + 16;
        r->pdims[0] = c->cols / 4, r->pdims[1] = 4;
    } else if (c->split) {
        const int64_t n = c->split == 1 ? 2 : 3;
        r->rank = 4, r->norm_dims = 2;
        r->dims[0] = c->rows / n, r->dims[1] = n, r->dims[2] = c->cols / 4, r->dims[3] = 4;
        r->strides[3] = 1, r->strides[2] = 4, r->strides[1] = row;
        r->strides[0] = n * row + (c->split == 2 ? 8 : c->split == 3 ? 1 : 0);
        if (c->split == 5)
            r->strides[0] = row, r->strides[1] = r->dims[0] * row;
        r->pdims[0] = c->cols / 4, r->pdims[1] = 4;
    } else {
        r->rank = 2, r->norm_dims = 1;
        r->dims[0] = c->rows, r->dims[1] = c->cols;
        r->strides[0] = row, r->strides[1] = 1;
        r->pdims[0] = c->cols;
    }
    for (int i = 0; i < r->rank; i++)
        r->sdims[i] = i < r->rank - r->norm_dims ? r->dims[i] : 1;
    tu_packed_strides(r->rank, r->sdims, r->sstrides);
    if (c->row_gap) /* statistics with a gap too: one f32 between rows */
        for (int i = 0; i < r->rank - r->norm_dims; i++)
            r->sstrides[i] *= 2;
    tu_packed_strides(r->norm_dims, r->pdims, r->pstrides);
}

static int present(const run *r, int t)
{
    const ncase *c = r->c;
    switch (t) {
    case T_SCALE: return c->scale != 0;
    case T_BIAS: return c->bias != 0;
    case T_DY: case T_DX: return c->backward;
    case T_MEAN: return c->kind == LN && !c->inference;
    case T_RSTD: return !c->inference;
    case T_DSCALE: return c->backward && c->scale;
    case T_DBIAS: return c->backward && c->bias;
    default: return 1;
    }
}

static void alloc_all(run *r, tu_rng *rng)
{
    const ncase *c = r->c;
    const frost_dtype io = c->dtype;
    for (int t = 0; t < T_COUNT; t++) {
        if (!present(r, t))
            continue;
        frost_dtype dt = io;
        const int64_t *dims = r->dims, *st = r->strides;
        int rank = r->rank;
        if (t == T_SCALE || t == T_BIAS || t == T_DSCALE || t == T_DBIAS) {
            dims = r->pdims, st = r->pstrides, rank = r->norm_dims;
            dt = t == T_SCALE ? (c->scale == 1 ? FROST_F32 : io)
                 : t == T_BIAS ? (c->bias == 1 ? FROST_F32 : io)
                               : FROST_F32;
        } else if (t == T_MEAN || t == T_RSTD) {
            dims = r->sdims, st = r->sstrides, dt = FROST_F32;
        }
        TU_CHECK(tu_buf_alloc(&r->cpu[t], dt, rank, dims, st, 0));
        if (t >= FIRST_OUTPUT)
            TU_CHECK(tu_buf_alloc(&r->gpu[t], dt, rank, dims, st, 0));
    }
    tu_buf_fill_uniform(&r->cpu[T_X], rng, -2.0 + c->offset, 2.0 + c->offset);
    if (c->scale)
        tu_buf_fill_uniform(&r->cpu[T_SCALE], rng, c->zero_centered ? -0.5 : 0.5, c->zero_centered ? 0.5 : 1.5);
    if (c->bias)
        tu_buf_fill_uniform(&r->cpu[T_BIAS], rng, -1.0, 1.0);
    if (c->backward)
        tu_buf_fill_uniform(&r->cpu[T_DY], rng, -1.0, 1.0);
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
    const ncase *c = r->c;
    frost_graph *g = NULL;
    TU_OK(frost_graph_create(ctx, &g));
    if (!g)
        return NULL;
    memset(r->id, 0, sizeof r->id);
    for (int t = 0; t < T_COUNT; t++) {
        int used = backward ? (t == T_X || t == T_SCALE || t == T_DY || t >= T_DX ||
                               ((t == T_MEAN || t == T_RSTD) && c->saved))
                            : (t <= T_BIAS || (t >= T_Y && t <= T_RSTD));
        if (used && present(r, t))
            r->id[t] = tu_add_tensor(g, slot_names[t], &r->cpu[t]);
    }
    frost_status s;
    if (!backward) {
        frost_norm_desc d = {.x = r->id[T_X], .scale = r->id[T_SCALE], .bias = r->id[T_BIAS],
                             .norm_dims = r->norm_dims, .zero_centered_scale = c->zero_centered,
                             .phase = c->inference ? FROST_NORM_INFERENCE : FROST_NORM_TRAINING};
        frost_norm_outputs o = {.y = r->id[T_Y], .mean = r->id[T_MEAN], .inv_std = r->id[T_RSTD]};
        s = c->kind == LN ? frost_graph_add_layernorm(g, &d, &o) : frost_graph_add_rmsnorm(g, &d, &o);
    } else {
        frost_norm_backward_desc d = {.x = r->id[T_X], .d_y = r->id[T_DY], .scale = r->id[T_SCALE],
                                      .mean = r->id[T_MEAN], .inv_std = r->id[T_RSTD], .norm_dims = r->norm_dims,
                                      .has_bias = c->bias != 0, .zero_centered_scale = c->zero_centered,
                                      .deterministic = 1};
        frost_norm_grads o = {.d_x = r->id[T_DX], .d_scale = r->id[T_DSCALE], .d_bias = r->id[T_DBIAS]};
        s = c->kind == LN ? frost_graph_add_layernorm_backward(g, &d, &o) : frost_graph_add_rmsnorm_backward(g, &d, &o);
    }
    TU_OK(s);
    return g;
}

/* The slots of the forward or backward graph (ids as make_graph set them): inputs from
 * r->cpu, the ref's outputs in r->cpu too, the GPU's in r->gpu. */
static tu_slots slots_of(run *r, int backward)
{
    unsigned outputs = backward ? 1u << T_DX | 1u << T_DSCALE | 1u << T_DBIAS
                                : 1u << T_Y | 1u << T_MEAN | 1u << T_RSTD;
    return (tu_slots){T_COUNT, r->id, r->cpu, r->gpu, outputs, slot_names, 0};
}

/* ---------------------------------------------------------------------------------- */
/* Tolerances from the data (see the essay)                                              */
/* ---------------------------------------------------------------------------------- */

typedef struct mags {
    double x, xhat, rstd, w, b, dy;
} mags;

static double elem(const run *r, int t, int64_t row, int64_t col)
{
    const tu_buf *b = &r->cpu[t];
    int64_t off = 0, f = row;
    for (int i = r->rank - r->norm_dims - 1; i >= 0; i--) {
        off += (f % b->dims[i]) * b->strides[i];
        f /= b->dims[i];
    }
    f = col;
    for (int i = r->rank - 1; i >= r->rank - r->norm_dims; i--) {
        off += (f % b->dims[i]) * b->strides[i];
        f /= b->dims[i];
    }
    return tu_buf_get(b, off);
}

static double param(const run *r, int t, int64_t col)
{
    const tu_buf *b = &r->cpu[t];
    int64_t off = 0, f = col;
    for (int i = b->rank - 1; i >= 0; i--) {
        off += (f % b->dims[i]) * b->strides[i];
        f /= b->dims[i];
    }
    return tu_buf_get(b, off);
}

static mags measure(const run *r)
{
    const ncase *c = r->c;
    mags m = {0, 0, 0, 0, 0, 0};
    for (int64_t j = 0; j < c->cols; j++) {
        double w = c->scale ? param(r, T_SCALE, j) + (c->zero_centered ? 1.0 : 0.0) : 1.0;
        m.w = fmax(m.w, fabs(w));
        m.b = c->bias ? fmax(m.b, fabs(param(r, T_BIAS, j))) : 0.0;
    }
    for (int64_t i = 0; i < c->rows; i++) {
        double s = 0, q = 0, mean = 0;
        for (int64_t j = 0; j < c->cols; j++)
            s += elem(r, T_X, i, j);
        mean = c->kind == LN ? s / (double)c->cols : 0.0;
        for (int64_t j = 0; j < c->cols; j++) {
            double d = elem(r, T_X, i, j) - mean;
            q += d * d;
        }
        double rstd = 1.0 / sqrt(q / (double)c->cols + 1e-5);
        m.rstd = fmax(m.rstd, rstd);
        for (int64_t j = 0; j < c->cols; j++) {
            m.x = fmax(m.x, fabs(elem(r, T_X, i, j)));
            m.xhat = fmax(m.xhat, fabs((elem(r, T_X, i, j) - mean) * rstd));
            if (c->backward)
                m.dy = fmax(m.dy, fabs(elem(r, T_DY, i, j)));
        }
    }
    return m;
}

/* ---------------------------------------------------------------------------------- */
/* One case                                                                              */
/* ---------------------------------------------------------------------------------- */

static void run_case(const ncase *c, uint64_t seed, int index, frost_context *cpu, frost_context *gpu)
{
    char desc[256];
    snprintf(desc, sizeof desc, "%s: %s %s rows %lld cols %lld gap %d scale %d bias %d%s%s%s%s%s", c->name,
             c->kind == LN ? "layernorm" : "rmsnorm", frost_dtype_name(c->dtype), (long long)c->rows,
             (long long)c->cols, c->row_gap, c->scale, c->bias, c->zero_centered ? " zc" : "",
             c->inference ? " inference" : "", c->backward ? " +bwd" : "", c->saved ? " saved" : "",
             c->misalign ? " misaligned" : "");
    tu_set_context("test_norm_gpu", seed, index, desc);
    const frost__device *dev = gpu->device;
    tu_rng rng = tu_rng_make(seed * 1000003u + (uint64_t)index);
    run r;
    memset(&r, 0, sizeof r);
    r.c = c;
    layout(&r);
    alloc_all(&r, &rng);
    const mags m = measure(&r);
    const double u = tu_eps(c->dtype), u32 = ldexp(1.0, -24);
    const double L = log2(2.0 * (double)c->cols), Lr = log2(2.0 * (double)(c->rows + 1));

    /* forward */
    const tu_slots fwd = slots_of(&r, 0), bwd = slots_of(&r, 1);
    frost_graph *gc = make_graph(&r, cpu, 0);
    tu_run_ref(gc, &fwd);
    frost_graph *gg = make_graph(&r, gpu, 0);
    if (gg && tu_run_cuda(gg, dev, &fwd, c->misalign, 1)) {
        tu_compare_whole("y", &r.gpu[T_Y], &r.cpu[T_Y], 32 * L * u32 * (m.xhat * m.w + m.b + 1), 2.5 * u);
        if (r.id[T_MEAN])
            tu_compare_whole("mean", &r.gpu[T_MEAN], &r.cpu[T_MEAN], 32 * L * u32 * (m.x + 1), 0);
        if (r.id[T_RSTD])
            tu_compare_whole("inv_std", &r.gpu[T_RSTD], &r.cpu[T_RSTD], 1e-30, 32 * L * u32);
        char explain[8192];
        size_t len = 0;
        TU_OK(frost_graph_explain(gg, explain, sizeof explain, &len));
        if (len >= sizeof explain)
            tu_failf("explain takes %zu bytes, more than the test's %zu", len, sizeof explain);
        if (!strstr(explain, "norm_fwd.cu:norm_fwd_kernel"))
            tu_failf("explain does not name the cuda kernel:\n%s", explain);
        const char *levels = c->split == 4 && c->rows > 6   ? "rows at 3 levels of strides (X's rows as ["
                             : c->split >= 2 && c->rows > 3 ? "rows in runs of 3 ("
                                                            : NULL;
        if (levels ? !strstr(explain, levels) : !!strstr(explain, "rows in runs") || !!strstr(explain, "levels of"))
            tu_failf("explain %s \"%s\":\n%s", levels ? "does not say" : "says", levels ? levels : "rows in runs",
                     explain);
    }
    frost_graph_destroy(gc);
    frost_graph_destroy(gg);

    /* backward, three times on the GPU; saved statistics are the ref forward's */
    if (c->backward) {
        gc = make_graph(&r, cpu, 1);
        tu_run_ref(gc, &bwd);
        gg = make_graph(&r, gpu, 1);
        if (gg && tu_run_cuda(gg, dev, &bwd, c->misalign, 3)) {
            const double g = m.dy * m.w;
            tu_compare_whole("dx", &r.gpu[T_DX], &r.cpu[T_DX],
                             32 * L * u32 * m.rstd * (g * (1 + m.xhat * m.xhat) + 1e-3), 2.5 * u);
            const double pt = 32 * (L + Lr) * u32 * (double)(c->rows + 1) * (m.dy * (1 + m.xhat) + 1e-3);
            if (r.id[T_DSCALE])
                tu_compare_whole("d_scale", &r.gpu[T_DSCALE], &r.cpu[T_DSCALE], pt, 0);
            if (r.id[T_DBIAS])
                tu_compare_whole("d_bias", &r.gpu[T_DBIAS], &r.cpu[T_DBIAS], pt, 0);
            char explain[4096];
            TU_OK(frost_graph_explain(gg, explain, sizeof explain, NULL));
            if ((c->scale || c->bias) && !strstr(explain, "deterministic"))
                tu_failf("explain does not say how d_scale/d_bias are reduced:\n%s", explain);
        }
        frost_graph_destroy(gc);
        frost_graph_destroy(gg);
    }
    free_all(&r);
}

static ncase random_case(uint64_t seed, int index)
{
    static const int64_t cols_list[] = {1, 3, 128, 1000, 1024, 4096, 5120, 8192, 12288, 16384, 0};
    tu_rng rng = tu_rng_make(seed ^ (0x9e3779b97f4a7c15ull * (uint64_t)(index + 1)));
    static const frost_dtype dts[] = {FROST_F32, FROST_F16, FROST_BF16};
    ncase c;
    memset(&c, 0, sizeof c);
    c.name = "random";
    c.kind = (int)tu_int(&rng, 0, 1);
    c.dtype = dts[tu_int(&rng, 0, 2)];
    c.cols = cols_list[tu_int(&rng, 0, (int64_t)(sizeof cols_list / sizeof cols_list[0]) - 1)];
    if (c.cols == 0)
        c.cols = 2 * tu_int(&rng, 2, 1500) + 1; /* odd */
    int64_t max_rows = (1 << 20) / c.cols + 1;
    c.rows = tu_int(&rng, 0, 3) == 0 ? tu_int(&rng, 0, 1) : tu_int(&rng, 2, max_rows < 600 ? max_rows : 600);
    c.row_gap = (int)(tu_int(&rng, 0, 2) == 0 ? 0 : tu_int(&rng, 0, 1) ? 8 : tu_int(&rng, 1, 5));
    c.scale = (int)tu_int(&rng, 0, 2);
    c.bias = (int)tu_int(&rng, 0, 2);
    c.zero_centered = c.scale && tu_int(&rng, 0, 3) == 0;
    c.inference = tu_int(&rng, 0, 3) == 0;
    c.backward = tu_int(&rng, 0, 4) != 0;
    c.saved = !c.inference && tu_int(&rng, 0, 1);
    c.misalign = tu_int(&rng, 0, 7) == 0;
    c.offset = tu_uniform(&rng, -1.0, 3.0);
    c.split = c.cols % 4 == 0 && tu_int(&rng, 0, 3) == 0 ? (int)tu_int(&rng, 1, 5) : 0;
    c.rows -= c.rows % (c.split == 1 ? 2 : c.split == 4 ? 6 : c.split ? 3 : 1);
    return c;
}

/* ---------------------------------------------------------------------------------- */
/* Refusals                                                                              */
/* ---------------------------------------------------------------------------------- */

static void expect_refusal(frost_context *gpu, int rank, const int64_t *dims, const int64_t *strides,
                           const char *needle)
{
    frost_graph *g = NULL;
    TU_OK(frost_graph_create(gpu, &g));
    if (!g)
        return;
    frost_tensor_desc d;
    memset(&d, 0, sizeof d);
    d.name = "x", d.dtype = FROST_BF16, d.rank = rank;
    for (int i = 0; i < rank; i++)
        d.dims[i] = dims[i], d.strides[i] = strides[i];
    frost_tensor x = 0;
    TU_OK(frost_graph_add_tensor(g, &d, &x));
    frost_norm_desc nd = {.x = x};
    frost_norm_outputs o = {.y = FROST_TENSOR_AUTO};
    TU_OK(frost_graph_add_rmsnorm(g, &nd, &o));
    frost_build_options opt = {.engine = "cuda"};
    TU_CHECK_STATUS(frost_graph_build(g, &opt), FROST_NOT_SUPPORTED);
    if (!strstr(frost_last_error(), needle))
        tu_failf("refusal message lacks \"%s\": %s", needle, frost_last_error());
    frost_graph_destroy(g);
}

static void check_refusals(frost_context *gpu)
{
    tu_set_context("test_norm_gpu", 0, -1, "refusals");
    const int64_t dims[3] = {4, 6, 64};
    const int64_t inner_strided[3] = {6 * 64 * 3, 64 * 3, 3};
    expect_refusal(gpu, 3, dims, inner_strided, "normalized dims contiguous (stride 1); X's inner stride is 3");
}

static void run_index(int i, uint64_t seed, frost_context *cpu, frost_context *gpu)
{
    const ncase c = i < NUM_TABLE ? table[i] : random_case(seed, i);
    run_case(&c, seed, i, cpu, gpu);
}

int main(void)
{
    return tu_gpu_main(20261202, NUM_TABLE + NUM_RANDOM, NULL, run_index, check_refusals);
}
