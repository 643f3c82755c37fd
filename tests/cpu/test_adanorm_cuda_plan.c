/*
 * test_adanorm_cuda_plan.c — the cuda engine's plan for AdaLayerNorm, checked on the host
 * (no GPU needed): adanorm_cuda.c's parameter maps and backward segments, and the
 * selector's kernel keys (norm_cuda.c).
 *
 * Problems come from real graphs (add functions on a CPU context), so the parameter
 * layouts are exactly what the engines see.  For every row r of x the kernels' address
 * of its parameter row, ((r / div) % count) * stride, must equal the offset the reference
 * engine uses (the row's outer index times the parameter's outer strides, 1-dims
 * skipped); for every per-sample gradient, segment r / segment_rows must fall in parameter
 * row q = segment / segments_per_out, stored at q * out_stride, again the reference's
 * offset, and a segment must never straddle two parameter rows of either gradient.
 * Refusals are checked for the constraint their message names, and keys for PER_SAMPLE
 * and for the vector path (VEC > 1 only when parameter rows stay 16-byte aligned).
 *
 * Layout legend: x [B, S, C] (or [B, S, T, C]); scale [B, 1, C] carries B.
 */
#include <stdio.h>
#include <string.h>

#include "core/internal.h"
#include "ops/norm/norm_cuda.h"
#include "runtime/runtime.h"
#include "test_util.h"

static frost_context *cpu;

static frost_tensor add(frost_graph *g, const char *name, frost_dtype dt, int rank, const int64_t *dims,
                        const int64_t *strides)
{
    frost_tensor_desc d = {.name = name, .dtype = dt, .rank = rank};
    frost_tensor id = 0;
    for (int i = 0; i < rank; ++i) {
        d.dims[i] = dims[i];
        d.strides[i] = strides ? strides[i] : 0;
    }
    TU_OK(frost_graph_add_tensor(g, &d, &id));
    return id;
}

/* Parameter dims: x's outer dims where `carry` has the bit, 1 elsewhere; then C. */
static void param_dims(int rank, const int64_t *xd, unsigned carry, int64_t *pd)
{
    for (int i = 0; i < rank; ++i)
        pd[i] = i == rank - 1 || (carry >> i & 1u) ? xd[i] : 1;
}

static int64_t map_offset(const norm_param_map *m, int64_t r)
{
    return (r / m->div) % m->count * m->stride;
}

/* Checks the maps and segments of one problem against the reference addressing (every row;
 * of a larger problem the first 4096 and the last 64). */
static void check_plan(const frost__norm_problem *p, const frost__adanorm_cuda *a)
{
    static const int params[2] = {FROST__NORM_SCALE, FROST__NORM_BIAS};
    static const int grads[2] = {FROST__NORM_D_SCALE, FROST__NORM_D_BIAS};
    const norm_param_map *maps[2] = {&a->scale, &a->bias};
    for (int64_t r = 0; r < p->rows; r = tu_next_checked_row(r, p->rows)) {
        for (int k = 0; k < 2; ++k) {
            if (!p->slot[params[k]].present)
                continue;
            const int64_t got = map_offset(maps[k], r), want = frost__norm_row_offset(p, params[k], r);
            if (got != want) {
                tu_failf("row %lld: %s map gives %lld, the ref engine %lld", (long long)r, k ? "bias" : "scale",
                         (long long)got, (long long)want);
                return;
            }
        }
        for (int k = 0; k < 2 && p->backward; ++k) {
            if (!p->slot[grads[k]].present)
                continue;
            /* every row of a segment lands in the ref engine's parameter row: no straddling */
            const int64_t segment = r / a->segment_rows, q = segment / a->segments_per_out[k];
            const int64_t want = frost__norm_row_offset(p, grads[k], r);
            if (q >= a->out_rows[k] || q * a->out_stride[k] != want) {
                tu_failf("row %lld: %s parameter row %lld of %lld (offset %lld), the ref engine's offset %lld",
                         (long long)r, k ? "d_bias" : "d_scale", (long long)q, (long long)a->out_rows[k],
                         (long long)(q * a->out_stride[k]), (long long)want);
                return;
            }
        }
    }
}

/* One AdaLayerNorm graph (forward, or backward with d_scale and d_bias) over x [dims];
 * parameters carry the outer dims in their carry masks, rows param_gap elements apart
 * beyond C, and break_collapse adds 8 to their outermost stride; x_gap sets x and dY
 * apart the same way. */
typedef struct plan_case {
    const char *name;
    int rank;
    int64_t dims[4];
    frost_dtype dtype;
    unsigned scale_carry, bias_carry;
    int backward;
    int param_gap, break_collapse;
    const char *refusal;  /* NULL: supported; else a phrase of the refusal */
    const char *key_has;  /* a phrase the key must contain (NULL: none) */
    int per_sample;       /* the key must (1) or must not (0) say PER_SAMPLE */
    int64_t x_gap;        /* x and dY: elements added to every outer stride but the rows' own (rank 3: rows in
                           * runs; rank 4: three row levels) */
} plan_case;

static const plan_case cases[] = {
    /* name, rank, dims, dtype, scale carry, bias carry, bwd, gap, break, refusal, key has, per sample, x gap */
    {"[B,S,C] [B,1,C] fwd", 3, {4, 64, 1024}, FROST_BF16, 1, 1, 0, 0, 0, NULL, "VEC=8", 1, 0},
    {"[B,S,C] [B,1,C] fwd 16384: 512 x 4 units", 3, {2, 8, 16384}, FROST_BF16, 1, 1, 0, 0, 0, NULL, "NV=4", 1, 0},
    {"[B,S,C] [B,1,C] bwd", 3, {4, 64, 1024}, FROST_BF16, 1, 1, 1, 0, 0, NULL, "VEC=8", 1, 0},
    {"[B,S,C] scale [B,1,C] bias [1,1,C] bwd", 3, {3, 50, 128}, FROST_F16, 1, 0, 1, 0, 0, NULL, NULL, 1, 0},
    {"[B,S,C] [1,S,C] fwd", 3, {3, 50, 1000}, FROST_BF16, 2, 2, 0, 0, 0, NULL, NULL, 1, 0},
    {"[B,S,C] [B,S,C] fwd", 3, {3, 7, 4096}, FROST_F32, 3, 3, 0, 0, 0, NULL, "VEC=4", 1, 0},
    {"[B,S,C] [B,S,C] bwd 4096", 3, {2, 24, 4096}, FROST_BF16, 3, 3, 1, 0, 0, NULL, NULL, 1, 0},
    {"[B,1,S,C] [B,1,S,C] bwd (1-dim inside the run)", 4, {3, 1, 20, 4096}, FROST_BF16, 5, 5, 1, 0, 0, NULL, NULL, 1,
     0},
    {"[B,S,T,C] [B,S,1,C] bwd", 4, {2, 3, 10, 1024}, FROST_F32, 3, 3, 1, 0, 0, NULL, NULL, 1, 0},
    {"[B,S,C] [1,1,C] (LayerNorm)", 3, {4, 64, 1024}, FROST_BF16, 0, 0, 1, 0, 0, NULL, "VEC=8", 0, 0},
    {"B 1: [B,1,C] carries nothing", 3, {1, 64, 1024}, FROST_BF16, 1, 1, 1, 0, 0, NULL, NULL, 0, 0},
    {"[B,1,C] rows 1 apart beyond C: scalar path", 3, {4, 64, 1024}, FROST_BF16, 1, 1, 0, 1, 0, NULL, "VEC=1", 1, 0},
    {"[B,1,C] rows 8 apart beyond C: vector path", 3, {4, 64, 1024}, FROST_BF16, 1, 1, 1, 8, 0, NULL, "VEC=8", 1, 0},
    {"B 0: no parameter rows", 3, {0, 16, 128}, FROST_F32, 1, 1, 1, 0, 0, NULL, NULL, 0, 0},
    {"S 0: parameter rows of zeros", 3, {3, 0, 128}, FROST_F32, 1, 1, 1, 0, 0, NULL, NULL, 1, 0},
    {"[1,S,C] bwd refused", 3, {4, 64, 1024}, FROST_BF16, 2, 2, 1, 0, 0, "repeats along x's outer dim 0", NULL, 1, 0},
    {"[B,1,T,C] refused", 4, {2, 3, 4, 1024}, FROST_BF16, 5, 0, 0, 0, 0, "outer dims 0 and 2 but not dim 1", NULL, 1,
     0},
    {"per-row bf16 128 bwd refused", 3, {2, 512, 128}, FROST_BF16, 3, 3, 1, 0, 0, "rows per parameter row", NULL, 1, 0},
    {"[B,S,C] params not collapsing refused", 3, {2, 6, 1024}, FROST_F32, 3, 3, 0, 0, 1, "collapse to one stride",
     NULL, 1, 0},
    /* x a slice [B, S, C] of [B, S + 1, C]: rows in runs of S, parameter rows as before */
    {"[B,S,C] slice [B,1,C] fwd: rows in runs", 3, {4, 64, 1024}, FROST_BF16, 1, 1, 0, 0, 0, NULL, "ROW_LEVELS=2", 1,
     1024},
    {"[B,S,C] slice [B,1,C] bwd: rows in runs", 3, {4, 64, 1024}, FROST_BF16, 1, 1, 1, 0, 0, NULL, "ROW_LEVELS=2", 1,
     1024},
    /* x [B, S, T, C] with gaps after each T rows and each sample: rows at three levels of strides */
    {"[B,S,T,C] [B,1,1,C] fwd: three row levels", 4, {2, 3, 10, 1024}, FROST_BF16, 1, 1, 0, 0, 0, NULL,
     "ROW_LEVELS=3", 1, 8},
    {"[B,S,T,C] [B,1,1,C] bwd: three row levels", 4, {2, 3, 10, 1024}, FROST_BF16, 1, 1, 1, 0, 0, NULL,
     "ROW_LEVELS=3", 1, 8},
    {"[B,S,T,C] [B,S,1,C] bwd: three row levels", 4, {2, 3, 10, 4096}, FROST_F32, 3, 3, 1, 0, 0, NULL,
     "ROW_LEVELS=3", 1, 4},
    {"[B,S,T,C] [B,S,T,C] fwd: three row levels", 4, {2, 3, 10, 1000}, FROST_F16, 7, 7, 0, 0, 0, NULL,
     "ROW_LEVELS=3", 1, 3},
    /* more than 2^30 rows: the parameter map keeps its 64-bit division (ROW_WIDE) */
    {"rows past 2^30 [B,1,C] fwd", 3, {1024, 1048577, 8}, FROST_BF16, 1, 1, 0, 0, 0, NULL, "ROW_WIDE", 1, 0},
    {"[B,S,C] slice [1,S,C] bwd refused", 3, {4, 64, 1024}, FROST_BF16, 2, 2, 1, 0, 0, "repeats along x's outer dim 0",
     NULL, 1, 1024},
};
#define NUM_CASES ((int)(sizeof cases / sizeof cases[0]))

static void run_case(int index, const plan_case *c)
{
    tu_set_context("test_adanorm_cuda_plan", 0, index, c->name);
    frost_graph *g = NULL;
    const int f0 = tu_failures();
    TU_OK(frost_graph_create(cpu, &g));
    int64_t sd[4], bd[4], ss[4], bs[4];
    param_dims(c->rank, c->dims, c->scale_carry, sd);
    param_dims(c->rank, c->dims, c->bias_carry, bd);
    ss[c->rank - 1] = bs[c->rank - 1] = 1;
    ss[c->rank - 2] = bs[c->rank - 2] = c->dims[c->rank - 1] + c->param_gap;
    for (int i = c->rank - 3; i >= 0; --i)
        ss[i] = ss[i + 1] * sd[i + 1], bs[i] = bs[i + 1] * bd[i + 1];
    ss[0] += 8 * c->break_collapse, bs[0] += 8 * c->break_collapse;
    int64_t xs[4];
    xs[c->rank - 1] = 1;
    for (int i = c->rank - 2; i >= 0; --i)
        xs[i] = xs[i + 1] * c->dims[i + 1] + (i < c->rank - 2 ? c->x_gap : 0);
    frost_tensor x = add(g, "x", c->dtype, c->rank, c->dims, xs);
    frost_tensor w = add(g, "scale", c->dtype, c->rank, sd, ss), b = add(g, "bias", FROST_F32, c->rank, bd, bs);
    if (!c->backward) {
        frost_norm_outputs o = {.y = FROST_TENSOR_AUTO};
        TU_OK(frost_graph_add_adalayernorm(g, &(frost_norm_desc){.x = x, .scale = w, .bias = b}, &o));
    } else {
        frost_tensor dy = add(g, "d_y", c->dtype, c->rank, c->dims, xs);
        frost_tensor db = add(g, "d_bias", FROST_F32, c->rank, bd, bs);
        frost_norm_grads o = {.d_scale = FROST_TENSOR_AUTO, .d_bias = db};
        TU_OK(frost_graph_add_adalayernorm_backward(g, &(frost_norm_backward_desc){.x = x, .d_y = dy, .scale = w,
                                                                                   .has_bias = 1},
                                                    &o));
    }
    if (tu_failures() != f0 || !g->g.num_nodes) {
        frost_graph_destroy(g);
        return;
    }
    const frost__norm_problem *p = g->g.nodes[0].problem;
    frost__kernel_key key;
    frost__buf why = {0}, text = {0};
    frost_status s = frost__norm_cuda_key(p, &key, &why);
    if (c->refusal) {
        if (s != FROST_NOT_SUPPORTED || !strstr(frost__buf_str(&why), c->refusal))
            tu_failf("expected a refusal naming \"%s\", got %s: %s", c->refusal, frost_status_name(s),
                     frost__buf_str(&why));
    } else if (s != FROST_OK) {
        tu_failf("refused: %s", frost__buf_str(&why));
    } else {
        frost__key_print(&key, &text);
        const char *k = frost__buf_str(&text);
        /* per-sample rows keep their 16-bit row words: an f32 copy (LN_WIDE) spills at their
         * two blocks an SM */
        if (c->per_sample && strstr(k, "LN_WIDE"))
            tu_failf("key %s: per-sample rows must not take LN_WIDE", k);
        if (!!strstr(k, "ROW_WIDE") != (c->per_sample && p->rows > ((int64_t)1 << 30)))
            tu_failf("key %s: ROW_WIDE exactly when per-sample rows pass 2^30", k);
        if ((strstr(k, " PER_SAMPLE") != NULL) != c->per_sample || (c->key_has && !strstr(k, c->key_has)))
            tu_failf("key %s: expected PER_SAMPLE %s%s%s", k, c->per_sample ? "present" : "absent",
                     c->key_has ? " and " : "", c->key_has ? c->key_has : "");
        frost__adanorm_cuda a;
        frost__buf why2 = {0};
        TU_OK(frost__adanorm_cuda_config(p, 1, &a, &why2));
        check_plan(p, &a);
        int64_t rows_s = 1, rows_b = 1; /* parameter rows the reduce writes: all of them, no more */
        for (int i = 0; i < c->rank - 1; ++i)
            rows_s *= sd[i], rows_b *= bd[i];
        if (c->backward && (a.out_rows[0] != rows_s || a.out_rows[1] != rows_b))
            tu_failf("gradient rows %lld and %lld, expected %lld and %lld", (long long)a.out_rows[0],
                     (long long)a.out_rows[1], (long long)rows_s, (long long)rows_b);
        frost__buf_free(&why2);
    }
    frost__buf_free(&why);
    frost__buf_free(&text);
    frost_graph_destroy(g);
}

int main(void)
{
    const int only = tu_case_filter();
    int run_count = 0;
    TU_OK(frost_context_create(NULL, &cpu));
    if (!cpu)
        return tu_finish(0);
    for (int i = 0; i < NUM_CASES; ++i) {
        if (only >= 0 && only != i)
            continue;
        tu_case_begin();
        run_case(i, &cases[i]);
        tu_case_end();
        ++run_count;
    }
    frost_context_destroy(cpu);
    return tu_finish(run_count);
}
