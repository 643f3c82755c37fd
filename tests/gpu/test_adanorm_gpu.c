/*
 * test_adanorm_gpu.c — the cuda engine's AdaLayerNorm (norm_fwd.cu, norm_bwd.cu,
 * norm_bwd_reduce.cu with per-sample parameters) against the reference engine.
 *
 * x is [B, S, C]; scale and bias are [B or 1, S or 1, C] ("carry" bit 0: the parameter
 * has x's B, bit 1: x's S), typically [B, 1, C]: row (b, s) reads parameter row b.  The
 * backward's d_scale and d_bias have the parameters' dims and sum over the rows that read
 * each parameter row.  Each case builds the same graph in a CPU context (ref engine, fp64)
 * and in a CUDA context with build option engine = "cuda" (a refusal fails the case), runs
 * both on the same inputs and compares every element of every output allocation, guards
 * and row gaps included: both copies start NaN-poisoned and the GPU copy travels to the
 * device whole and back, so an element must be NaN on one side exactly when it is on the
 * other.  The backward runs three times on the GPU; dx, d_scale and d_bias must be
 * bitwise equal across the runs.
 *
 * Layout legend: rows = B * S, u = unit roundoff of the I/O dtype, u32 = 2^-24,
 * L = log2(2 C).  Tolerances (as test_norm_gpu.c; each a constant times the error of the
 * same computation done naively in fp32):
 *     y, dx:           |got - ref| <= 2.5 u |ref| + 32 L u32 * M
 *     mean / inv_std:  32 L u32 * max|x|  /  32 L u32 * |ref|
 *     d_scale, d_bias: 32 (L + log2(2 n)) u32 * n * M_p,  n = rows per parameter row
 * with M the magnitude of the terms of the output (y: max|x_hat w| + max|b|; dx: max rstd
 * max|g| (1 + max|x_hat|^2)) and M_p = max|dy| (1 + max|x_hat|).
 *
 * Cases: C in {128, 1000, 4096} (and 1, 3, 16384 for the scalar and chunked paths), f32 /
 * f16 / bf16, [B, 1, C] parameters in f32 or the I/O dtype, shared and per-row patterns,
 * [1, S, C] (forward only), row gaps, a misaligned base (the scalar fallback), B = 0 and
 * S = 0, x a slice of a longer buffer (rows in runs of S), x of rank 4 with gaps after each
 * group of rows and each sample (three row levels); then seeded random cases; then
 * the selector's refusals, each checked for the constraint it names.  FROST_TEST_SEED / FROST_TEST_CASE rerun one case.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "gpu_util.h"
#include "runtime/runtime.h"
#include "test_util.h"

enum { T_X, T_SCALE, T_BIAS, T_DY, T_Y, T_MEAN, T_RSTD, T_DX, T_DSCALE, T_DBIAS, T_COUNT };
#define FIRST_OUTPUT T_Y
static const char *const slot_names[T_COUNT] = {"x", "scale", "bias", "dy", "y", "mean", "inv_std", "dx", "d_scale",
                                                "d_bias"};

typedef struct acase {
    const char *name;
    frost_dtype dtype;
    int64_t b, s, c;
    int row_gap;                      /* padding elements after each row of x, y, dy, dx */
    int scale, bias;                  /* 0 absent, 1 f32, 2 the I/O dtype */
    unsigned scale_carry, bias_carry; /* bit 0: carries B, bit 1: carries S */
    int zero_centered, inference;
    int backward, saved;
    int misalign; /* device copies shifted by one element: no 16-byte rows */
    int run_gap;  /* padding elements after each sample of x, y, dy, dx (x a slice: rows in runs of S) */
    int s2;       /* > 0: x, y, dy, dx are [B, S / s2, s2, C] (rank 4), parameters [B|1, S/s2|1, s2|1, C] */
    int mid_gap;  /* with s2: padding elements after each group of s2 rows (with a run gap: three row levels) */
} acase;

#define F32 FROST_F32
#define F16 FROST_F16
#define BF16 FROST_BF16
static const acase table[] = {
    /* name, dtype, B, S, C, gap, scale, bias, s_carry, b_carry, zc, inf, bwd, saved, misalign, run gap, s2, mid gap */
    {"bf16 [4,256,128] [B,1,C] io params saved", BF16, 4, 256, 128, 0, 2, 2, 1, 1, 0, 0, 1, 1, 0, 0, 0, 0},
    {"bf16 [4,96,1000] f32 params", BF16, 4, 96, 1000, 0, 1, 1, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0},
    {"bf16 [2,64,4096] io params", BF16, 2, 64, 4096, 0, 2, 2, 1, 1, 1, 0, 1, 1, 0, 0, 0, 0},
    {"f16 [8,33,128] f32 params zero-centred", F16, 8, 33, 128, 0, 1, 1, 1, 1, 1, 0, 1, 0, 0, 0, 0, 0},
    {"f16 [3,50,1000] gap 8", F16, 3, 50, 1000, 8, 2, 2, 1, 1, 0, 0, 1, 1, 0, 0, 0, 0},
    {"f16 [2,40,4096]", F16, 2, 40, 4096, 0, 2, 1, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0},
    {"f32 [5,20,128]", F32, 5, 20, 128, 0, 1, 1, 1, 1, 0, 0, 1, 1, 0, 0, 0, 0},
    {"f32 [3,17,1000] gap 4", F32, 3, 17, 1000, 4, 1, 1, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0},
    {"f32 [2,30,4096]", F32, 2, 30, 4096, 0, 1, 1, 1, 1, 0, 0, 1, 1, 0, 0, 0, 0},
    {"bf16 scale [B,1,C], bias [1,1,C]", BF16, 4, 80, 1000, 0, 2, 2, 1, 0, 0, 0, 1, 1, 0, 0, 0, 0},
    {"bf16 scale [1,1,C], bias [B,1,C]", BF16, 4, 80, 128, 0, 1, 2, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0},
    {"bf16 scale only [B,1,C]", BF16, 6, 40, 4096, 0, 2, 0, 1, 0, 1, 0, 1, 0, 0, 0, 0, 0},
    {"f16 bias only [B,1,C]", F16, 6, 40, 1000, 0, 0, 2, 0, 1, 0, 0, 1, 1, 0, 0, 0, 0},
    {"bf16 per-row [B,S,C] 4096", BF16, 2, 24, 4096, 0, 2, 2, 3, 3, 0, 0, 1, 1, 0, 0, 0, 0},
    {"bf16 [1,S,C] forward", BF16, 3, 50, 1000, 0, 2, 2, 2, 2, 0, 1, 0, 0, 0, 0, 0, 0},
    {"bf16 [B,1,C] misaligned (fallback)", BF16, 3, 40, 4096, 0, 2, 2, 1, 1, 0, 0, 1, 1, 1, 0, 0, 0},
    {"f32 [B,1,C] misaligned", F32, 3, 30, 1000, 0, 1, 1, 1, 1, 0, 0, 1, 0, 1, 0, 0, 0},
    {"bf16 [B,1,C] gap 3 (scalar rows)", BF16, 4, 30, 1000, 3, 2, 2, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0},
    {"bf16 C 1", BF16, 4, 80, 1, 0, 2, 2, 1, 1, 0, 0, 1, 1, 0, 0, 0, 0},
    {"f32 C 3 (scalar)", F32, 3, 40, 3, 0, 1, 1, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0},
    {"bf16 C 16384 (chunked bwd)", BF16, 2, 12, 16384, 0, 2, 2, 1, 1, 0, 0, 1, 1, 0, 0, 0, 0},
    {"bf16 B 1", BF16, 1, 500, 1000, 0, 2, 2, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0},
    {"bf16 S 1", BF16, 64, 1, 1000, 0, 2, 2, 1, 1, 0, 0, 1, 1, 0, 0, 0, 0},
    {"bf16 many samples", BF16, 300, 9, 128, 0, 2, 2, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0},
    {"bf16 B 0", BF16, 0, 16, 1000, 0, 2, 2, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0},
    {"f32 S 0 (zero gradients per sample)", F32, 3, 0, 128, 0, 1, 1, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0},
    {"bf16 shared [1,1,C] (LayerNorm)", BF16, 4, 64, 1000, 0, 2, 2, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0},
    /* x, y, dy, dx slices of a longer buffer: rows in runs of S (ROW_LEVELS=2 keys) */
    {"bf16 [4,64,1024] [B,1,C] rows in runs", BF16, 4, 64, 1024, 0, 2, 2, 1, 1, 0, 0, 1, 1, 0, 1024, 0, 0},
    {"f16 [3,50,1000] [B,1,C] rows in runs, odd gap", F16, 3, 50, 1000, 0, 1, 2, 1, 1, 1, 0, 1, 0, 0, 3, 0, 0},
    {"bf16 [2,24,4096] per-row [B,S,C] rows in runs", BF16, 2, 24, 4096, 8, 2, 2, 3, 3, 0, 0, 1, 0, 0, 16, 0, 0},
    /* rank 4, gaps after each row group and each sample: rows at three levels of strides (ROW_LEVELS=3 keys) */
    {"bf16 [3,8,16,1024] [B,1,1,C] three row levels", BF16, 3, 128, 1024, 0, 2, 2, 1, 1, 0, 0, 1, 1, 0, 24, 16, 8},
    {"f16 [2,6,5,1000] [B,1,1,C] three row levels, odd gaps", F16, 2, 30, 1000, 0, 1, 2, 1, 1, 1, 0, 1, 0, 0, 5, 5, 3},
    {"f32 [2,4,12,4096] per-row three row levels", F32, 2, 48, 4096, 4, 1, 1, 3, 3, 0, 0, 1, 1, 0, 8, 12, 4},
    {"bf16 [2,16,8,5120] [B,1,1,C] three row levels forward", BF16, 2, 128, 5120, 0, 2, 2, 1, 1, 0, 1, 0, 0, 0, 16, 8,
     8},
};
#undef F32
#undef F16
#undef BF16
#define NUM_TABLE ((int)(sizeof table / sizeof table[0]))
#define NUM_RANDOM 32

/* ---------------------------------------------------------------------------------- */
/* Tensors of a case                                                                     */
/* ---------------------------------------------------------------------------------- */

typedef struct run {
    const acase *c;
    int64_t dims[4], strides[4];   /* x-like tensors (rank 4 with c->s2, else 3) */
    int64_t sdims[4], sstrides[4]; /* statistics */
    tu_buf cpu[T_COUNT], gpu[T_COUNT];
    frost_tensor id[T_COUNT];
} run;

static int present(const run *r, int t)
{
    const acase *c = r->c;
    switch (t) {
    case T_SCALE: return c->scale != 0;
    case T_BIAS: return c->bias != 0;
    case T_DY: case T_DX: return c->backward;
    case T_MEAN: case T_RSTD: return !c->inference;
    case T_DSCALE: return c->backward && c->scale;
    case T_DBIAS: return c->backward && c->bias;
    default: return 1;
    }
}

static unsigned carry_of(const acase *c, int t)
{
    return t == T_SCALE || t == T_DSCALE ? c->scale_carry : c->bias_carry;
}

static void alloc_all(run *r, tu_rng *rng)
{
    const acase *c = r->c;
    const int rk = c->s2 ? 4 : 3;
    r->dims[0] = c->b, r->dims[rk - 1] = c->c, r->strides[rk - 1] = 1, r->strides[rk - 2] = c->c + c->row_gap;
    if (c->s2) {
        r->dims[1] = c->s / c->s2, r->dims[2] = c->s2;
        r->strides[1] = c->s2 * r->strides[2] + c->mid_gap;
    } else {
        r->dims[1] = c->s;
    }
    r->strides[0] = r->dims[1] * r->strides[1] + c->run_gap;
    memcpy(r->sdims, r->dims, sizeof r->sdims);
    r->sdims[rk - 1] = 1;
    tu_packed_strides(rk, r->sdims, r->sstrides);
    for (int t = 0; t < T_COUNT; t++) {
        if (!present(r, t))
            continue;
        frost_dtype dt = c->dtype;
        int64_t dims[4], st[4];
        memcpy(dims, r->dims, sizeof dims);
        memcpy(st, r->strides, sizeof st);
        if (t == T_SCALE || t == T_BIAS || t == T_DSCALE || t == T_DBIAS) {
            const unsigned carry = carry_of(c, t);
            dims[0] = carry & 1u ? c->b : 1;
            for (int d = 1; d < rk - 1; d++)
                dims[d] = carry & 2u ? r->dims[d] : 1;
            tu_packed_strides(rk, dims, st);
            dt = t == T_SCALE ? (c->scale == 1 ? FROST_F32 : c->dtype)
                 : t == T_BIAS ? (c->bias == 1 ? FROST_F32 : c->dtype)
                               : FROST_F32;
        } else if (t == T_MEAN || t == T_RSTD) {
            memcpy(dims, r->sdims, sizeof dims);
            memcpy(st, r->sstrides, sizeof st);
            dt = FROST_F32;
        }
        TU_CHECK(tu_buf_alloc(&r->cpu[t], dt, rk, dims, st, 0));
        if (t >= FIRST_OUTPUT)
            TU_CHECK(tu_buf_alloc(&r->gpu[t], dt, rk, dims, st, 0));
    }
    tu_buf_fill_uniform(&r->cpu[T_X], rng, -2.0, 3.0);
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

static frost_graph *make_graph(run *r, frost_context *ctx, int backward)
{
    const acase *c = r->c;
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
    if (!backward) {
        frost_norm_desc d = {.x = r->id[T_X], .scale = r->id[T_SCALE], .bias = r->id[T_BIAS],
                             .zero_centered_scale = c->zero_centered,
                             .phase = c->inference ? FROST_NORM_INFERENCE : FROST_NORM_TRAINING};
        frost_norm_outputs o = {.y = r->id[T_Y], .mean = r->id[T_MEAN], .inv_std = r->id[T_RSTD]};
        TU_OK(frost_graph_add_adalayernorm(g, &d, &o));
    } else {
        frost_norm_backward_desc d = {.x = r->id[T_X], .d_y = r->id[T_DY], .scale = r->id[T_SCALE],
                                      .mean = r->id[T_MEAN], .inv_std = r->id[T_RSTD], .has_bias = c->bias != 0,
                                      .zero_centered_scale = c->zero_centered, .deterministic = 1};
        frost_norm_grads o = {.d_x = r->id[T_DX], .d_scale = r->id[T_DSCALE], .d_bias = r->id[T_DBIAS]};
        TU_OK(frost_graph_add_adalayernorm_backward(g, &d, &o));
    }
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

/* Element `col` of sample i0's row i1 in tensor t (rank 4: row i1 is [i1 / s2, i1 % s2]);
 * a dim of 1 (a parameter's) reads index 0. */
static double elem(const run *r, int t, int64_t i0, int64_t i1, int64_t col)
{
    const tu_buf *b = &r->cpu[t];
    const int64_t s2 = r->c->s2;
    const int64_t ix[4] = {i0, s2 ? i1 / s2 : i1, s2 ? i1 % s2 : col, col}; /* rank 3 reads ix[0..2] */
    int64_t off = 0;
    for (int d = 0; d < b->rank; d++)
        off += (b->dims[d] == 1 ? 0 : ix[d]) * b->strides[d];
    return tu_buf_get(b, off);
}

static mags measure(const run *r)
{
    const acase *c = r->c;
    mags m = {0, 0, 0, 0, 0, 0};
    for (int64_t i0 = 0; i0 < c->b; i0++)
        for (int64_t i1 = 0; i1 < c->s; i1++) {
            double s = 0, q = 0;
            for (int64_t j = 0; j < c->c; j++)
                s += elem(r, T_X, i0, i1, j);
            const double mean = s / (double)c->c;
            for (int64_t j = 0; j < c->c; j++) {
                double d = elem(r, T_X, i0, i1, j) - mean;
                q += d * d;
            }
            const double rstd = 1.0 / sqrt(q / (double)c->c + 1e-5);
            m.rstd = fmax(m.rstd, rstd);
            for (int64_t j = 0; j < c->c; j++) {
                const double x = elem(r, T_X, i0, i1, j);
                m.x = fmax(m.x, fabs(x));
                m.xhat = fmax(m.xhat, fabs((x - mean) * rstd));
                if (c->scale)
                    m.w = fmax(m.w, fabs(elem(r, T_SCALE, i0, i1, j) + (c->zero_centered ? 1.0 : 0.0)));
                if (c->bias)
                    m.b = fmax(m.b, fabs(elem(r, T_BIAS, i0, i1, j)));
                if (c->backward)
                    m.dy = fmax(m.dy, fabs(elem(r, T_DY, i0, i1, j)));
            }
        }
    if (!c->scale)
        m.w = 1.0;
    return m;
}

/* Rows summed into one element of a parameter gradient with the given carry. */
static int64_t rows_per_param_row(const acase *c, unsigned carry)
{
    return (carry & 1u ? 1 : c->b) * (carry & 2u ? 1 : c->s);
}

/* What the forward's explain must say of the rows' levels where the case fixes them (NULL
 * where it does not): three levels with gaps after each row group and each sample, two with
 * a gap after each sample of rank 3. */
static const char *expected_levels(const acase *c)
{
    if (c->b < 2 || c->run_gap == 0)
        return NULL;
    if (c->s2)
        return c->s2 > 1 && c->s / c->s2 > 1 && c->mid_gap > 0 ? "rows at 3 levels of strides" : NULL;
    return c->s > 1 ? "rows in runs of" : NULL;
}

/* ---------------------------------------------------------------------------------- */
/* One case                                                                              */
/* ---------------------------------------------------------------------------------- */

static void run_case(const acase *c, uint64_t seed, int index, frost_context *cpu, frost_context *gpu)
{
    char desc[320];
    snprintf(desc, sizeof desc,
             "%s: %s [%lld,%lld,%lld] gap %d run gap %d s2 %d mid gap %d scale %d carry %u bias %d carry %u%s%s%s%s%s",
             c->name, frost_dtype_name(c->dtype), (long long)c->b, (long long)c->s, (long long)c->c, c->row_gap,
             c->run_gap, c->s2, c->mid_gap, c->scale, c->scale_carry, c->bias, c->bias_carry,
             c->zero_centered ? " zc" : "", c->inference ? " inference" : "", c->backward ? " +bwd" : "",
             c->saved ? " saved" : "", c->misalign ? " misaligned" : "");
    tu_set_context("test_adanorm_gpu", seed, index, desc);
    const frost__device *dev = gpu->device;
    tu_rng rng = tu_rng_make(seed * 1000003u + (uint64_t)index);
    run r;
    memset(&r, 0, sizeof r);
    r.c = c;
    alloc_all(&r, &rng);
    const mags m = measure(&r);
    const double u = tu_eps(c->dtype), u32 = ldexp(1.0, -24);
    const double L = log2(2.0 * (double)c->c);

    const tu_slots fwd = slots_of(&r, 0), bwd = slots_of(&r, 1);
    frost_graph *gc = make_graph(&r, cpu, 0), *gg = make_graph(&r, gpu, 0);
    tu_run_ref(gc, &fwd);
    if (gg && tu_run_cuda(gg, dev, &fwd, c->misalign, 1)) {
        tu_compare_whole("y", &r.gpu[T_Y], &r.cpu[T_Y], 32 * L * u32 * (m.xhat * m.w + m.b + 1), 2.5 * u);
        if (r.id[T_MEAN])
            tu_compare_whole("mean", &r.gpu[T_MEAN], &r.cpu[T_MEAN], 32 * L * u32 * (m.x + 1), 0);
        if (r.id[T_RSTD])
            tu_compare_whole("inv_std", &r.gpu[T_RSTD], &r.cpu[T_RSTD], 1e-30, 32 * L * u32);
        char explain[4096];
        TU_OK(frost_graph_explain(gg, explain, sizeof explain, NULL));
        if (!strstr(explain, "norm_fwd.cu:norm_fwd_kernel") || !strstr(explain, "adalayernorm_fwd"))
            tu_failf("explain does not name the op and the cuda kernel:\n%s", explain);
        const char *levels = expected_levels(c);
        if (levels && !strstr(explain, levels))
            tu_failf("explain does not say \"%s\":\n%s", levels, explain);
    }
    frost_graph_destroy(gc);
    frost_graph_destroy(gg);
    if (c->backward) {
        gc = make_graph(&r, cpu, 1), gg = make_graph(&r, gpu, 1);
        tu_run_ref(gc, &bwd);
        if (gg && tu_run_cuda(gg, dev, &bwd, c->misalign, 3)) {
            const double g = m.dy * m.w;
            tu_compare_whole("dx", &r.gpu[T_DX], &r.cpu[T_DX],
                             32 * L * u32 * m.rstd * (g * (1 + m.xhat * m.xhat) + 1e-3), 2.5 * u);
            for (int t = T_DSCALE; t <= T_DBIAS; t++) {
                if (!r.id[t])
                    continue;
                const double n = (double)rows_per_param_row(c, carry_of(c, t));
                const double pt = 32 * (L + log2(2 * n + 2)) * u32 * (n + 1) * (m.dy * (1 + m.xhat) + 1e-3);
                tu_compare_whole(t == T_DSCALE ? "d_scale" : "d_bias", &r.gpu[t], &r.cpu[t], pt, 0);
            }
        }
        frost_graph_destroy(gc);
        frost_graph_destroy(gg);
    }
    free_all(&r);
}

static acase random_case(uint64_t seed, int index)
{
    static const int64_t cols_list[] = {128, 1000, 4096, 256, 1536, 5120, 0};
    static const frost_dtype dts[] = {FROST_F32, FROST_F16, FROST_BF16};
    tu_rng rng = tu_rng_make(seed ^ (0x9e3779b97f4a7c15ull * (uint64_t)(index + 1)));
    acase c;
    memset(&c, 0, sizeof c);
    c.name = "random";
    c.dtype = dts[tu_int(&rng, 0, 2)];
    c.c = cols_list[tu_int(&rng, 0, 6)];
    if (c.c == 0)
        c.c = 2 * tu_int(&rng, 2, 1500) + 1; /* odd: the scalar path */
    c.b = tu_int(&rng, 1, 8);
    int64_t max_s = (1 << 20) / (c.c * c.b) + 1;
    c.s = tu_int(&rng, 1, max_s < 400 ? max_s : 400);
    c.row_gap = (int)(tu_int(&rng, 0, 2) == 0 ? 0 : tu_int(&rng, 0, 1) ? 8 : tu_int(&rng, 1, 5));
    c.scale = (int)tu_int(&rng, 0, 2);
    c.bias = (int)tu_int(&rng, 0, 2);
    c.scale_carry = tu_int(&rng, 0, 3) ? 1u : 0u;
    c.bias_carry = tu_int(&rng, 0, 3) ? 1u : 0u;
    c.zero_centered = c.scale && tu_int(&rng, 0, 3) == 0;
    c.inference = tu_int(&rng, 0, 4) == 0;
    c.backward = tu_int(&rng, 0, 4) != 0;
    c.saved = !c.inference && tu_int(&rng, 0, 1);
    c.misalign = tu_int(&rng, 0, 7) == 0;
    c.run_gap = tu_int(&rng, 0, 3) == 0 ? (int)(tu_int(&rng, 0, 1) ? 8 * tu_int(&rng, 1, 16) : tu_int(&rng, 1, 7)) : 0;
    /* per-sample gradients need enough rows per sample next to the row groups of a block
     * (at most 256, the scalar path of short rows): below that the engine refuses */
    if (c.backward && ((c.scale && c.scale_carry) || (c.bias && c.bias_carry)) && c.s < 64)
        c.s = 64;
    if (tu_int(&rng, 0, 3) == 0) { /* rank 4: S as [S / s2, s2], maybe with a gap after each group */
        c.s2 = (int)tu_int(&rng, 1, 8);
        c.s = (c.s + c.s2 - 1) / c.s2 * c.s2;
        c.mid_gap = tu_int(&rng, 0, 1) ? (int)tu_int(&rng, 0, 8) : 0;
    }
    return c;
}

/* ---------------------------------------------------------------------------------- */
/* Refusals                                                                              */
/* ---------------------------------------------------------------------------------- */

/* Builds an AdaLayerNorm (backward when d_scale is wanted) whose scale has `sdims` over x
 * [dims] (rank 3 or 4) and expects the cuda engine to refuse it, naming `needle`. */
static void expect_refusal(frost_context *gpu, int rank, const int64_t *dims, const int64_t *sdims, int backward,
                           const char *needle)
{
    frost_graph *g = NULL;
    TU_OK(frost_graph_create(gpu, &g));
    if (!g)
        return;
    frost_tensor_desc d;
    memset(&d, 0, sizeof d);
    d.name = "x", d.dtype = FROST_BF16, d.rank = rank;
    memcpy(d.dims, dims, sizeof(int64_t) * (size_t)rank);
    frost_tensor x = 0, w = 0, dy = 0;
    TU_OK(frost_graph_add_tensor(g, &d, &x));
    d.name = "d_y";
    TU_OK(frost_graph_add_tensor(g, &d, &dy));
    d.name = "scale";
    memcpy(d.dims, sdims, sizeof(int64_t) * (size_t)rank);
    TU_OK(frost_graph_add_tensor(g, &d, &w));
    if (backward) {
        frost_norm_backward_desc bd = {.x = x, .d_y = dy, .scale = w};
        frost_norm_grads o = {.d_scale = FROST_TENSOR_AUTO};
        TU_OK(frost_graph_add_adalayernorm_backward(g, &bd, &o));
    } else {
        frost_norm_desc nd = {.x = x, .scale = w};
        frost_norm_outputs o = {.y = FROST_TENSOR_AUTO};
        TU_OK(frost_graph_add_adalayernorm(g, &nd, &o));
    }
    frost_build_options opt = {.engine = "cuda"};
    TU_CHECK_STATUS(frost_graph_build(g, &opt), FROST_NOT_SUPPORTED);
    if (!strstr(frost_last_error(), needle))
        tu_failf("refusal message lacks \"%s\": %s", needle, frost_last_error());
    frost_graph_destroy(g);
}

static void check_refusals(frost_context *gpu)
{
    tu_set_context("test_adanorm_gpu", 0, -1, "refusals");
    const int64_t x3[3] = {4, 64, 1024}, per_pos[3] = {1, 64, 1024};
    const int64_t x4[4] = {2, 3, 4, 1024}, split[4] = {2, 1, 4, 1024};
    const int64_t x_small[3] = {2, 4096, 128}, per_row[3] = {2, 4096, 128};
    expect_refusal(gpu, 3, x3, per_pos, 1, "d_scale");
    expect_refusal(gpu, 4, x4, split, 0, "outer dims 0 and 2");
    expect_refusal(gpu, 3, x_small, per_row, 1, "rows per parameter row");
}

static void run_index(int i, uint64_t seed, frost_context *cpu, frost_context *gpu)
{
    const acase c = i < NUM_TABLE ? table[i] : random_case(seed, i);
    run_case(&c, seed, i, cpu, gpu);
}

int main(void)
{
    return tu_gpu_main(20261205, NUM_TABLE + NUM_RANDOM, NULL, run_index, check_refusals);
}
