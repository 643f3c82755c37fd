/*
 * test_sdpa_bwd_gpu.c — the cuda engine's attention backward (sdpa_bwd.cu) against the
 * reference engine.
 *
 * Each case: random f16/bf16 inputs Q, K, V, dO (plus bias, sinks, lengths, ragged
 * offsets) in strided, NaN-guarded buffers; the ref engine's forward gives O and the LSE
 * stats; then the backward runs three ways on the same values:
 *   ref     the CPU context on f32 copies of every 16-bit tensor (fp64 accumulation,
 *           f32 outputs): the fp64 reference, rounded once;
 *   cuda    the CUDA context on the 16-bit tensors (build option engine = "cuda", so a
 *           refusal is a failure, never a fallback); every guarded allocation is copied
 *           to the device whole and back;
 *   naive   a plain low-precision backward written here: f32 sums, P and dS rounded to
 *           the I/O dtype before the products that use them, outputs rounded.
 * Pass rule (DESIGN.md), per output tensor over every element of its allocation:
 *   - an element is NaN in the cuda copy exactly when it is NaN in the ref copy (both
 *     start poisoned: catches unwritten rows, writes into stride gaps, into tokens of a
 *     ragged output that no batch owns, and into the guard margins);
 *   - max |cuda - ref| <= K_NAIVE * max |naive - ref| + ATOL_C * eps(dtype) * max |ref|
 *     + 1e-6, i.e. at most K_NAIVE times the error of the naive low-precision algorithm
 *     plus half an output rounding at the largest element;
 *   - the naive error itself stays below NAIVE_SANITY * max |ref| (so a naive that
 *     disagrees with the ref, which would inflate the budget, fails the test instead).
 * (K_NAIVE, ATOL_C and NAIVE_SANITY are defined in sdpa_bwd_gpu_naive.c, next to the
 * naive backward and the comparison; sdpa_bwd_gpu.h maps the parts of this test.)
 * Determinism: the cuda backward runs three times; dQ, dK, dV, dBias and dSink must be
 * bitwise identical (whole allocations compared with memcmp).
 * Failures print the worst element (element offset, got, ref) and the reproducer line.
 *
 * Cases: a named table (head dims 8..256, d_qk != d_v, GQA/MQA, every mask in both
 * alignments, padding and ragged offsets with zero lengths, bias with d_bias in every
 * broadcast, sinks with d_sink, negative and large scales, gapped, unaligned and
 * misaligned layouts), then random cases, then the selector's refusals.
 *   FROST_TEST_SEED=<n> changes the random cases; FROST_TEST_CASE=<n> runs one case.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "gpu_util.h"
#include "runtime/runtime.h"
#include "sdpa_bwd_gpu.h"
#include "test_util.h"

#define SHAPE(B, HQ, HKV, SQ, SKV, DQK, DV) .b = B, .h_q = HQ, .h_kv = HKV, .s_q = SQ, .s_kv = SKV, .d_qk = DQK, .d_v = DV
#define F16 .dtype = FROST_F16
#define BF16 .dtype = FROST_BF16
#define L FROST_MASK_LEFT_BOUND
#define R FROST_MASK_RIGHT_BOUND
#define BR FROST_DIAG_BOTTOM_RIGHT
static const bcase table[] = {
    {"bf16 d128 mha causal tl", SHAPE(2, 4, 4, 150, 150, 128, 128), BF16, .mask = R},
    {"f16 d64 gqa4 causal br s_q<s_kv", SHAPE(2, 8, 2, 70, 200, 64, 64), F16, .mask = R, .align = BR,
     .layout = LAYOUT_BSHD},
    {"bf16 d256 sliding window br", SHAPE(1, 2, 1, 130, 130, 256, 256), BF16, .mask = L | R, .left = 40,
     .align = BR},
    {"f16 d8 tiny head gapped", SHAPE(3, 2, 2, 17, 33, 8, 8), F16, .layout = LAYOUT_GAPPED},
    {"bf16 d40 d_v 24", SHAPE(2, 3, 1, 70, 65, 40, 24), BF16, .mask = R},
    {"f16 d_qk 192 d_v 128 gqa2", SHAPE(1, 4, 2, 90, 110, 192, 128), F16, .mask = R, .align = BR},
    {"bf16 d_qk 64 d_v 256", SHAPE(2, 2, 2, 60, 80, 64, 256), BF16, .layout = LAYOUT_BSHD},
    {"mqa decode s_q=1 causal br", SHAPE(3, 8, 1, 1, 300, 128, 128), BF16, .mask = R, .align = BR},
    {"long s=700 both bounds tl gqa2", SHAPE(1, 4, 2, 700, 700, 64, 64), F16, .mask = L | R, .left = 200,
     .right = 7},
    {"s_q > s_kv causal br: empty top rows", SHAPE(2, 2, 2, 130, 40, 64, 64), F16, .mask = R, .align = BR},
    {"left bound 0: every row empty, sink", SHAPE(1, 2, 1, 20, 20, 32, 32), BF16, .mask = L | R, .sink = 1,
     .dsink = 1},
    {"seq_len padding, zero lengths, causal br", SHAPE(3, 4, 2, 90, 120, 128, 128), F16, .mask = R, .align = BR,
     .pad = PAD_Q | PAD_KV, .zero_len = 1},
    {"ragged thd q+kv, zero lengths", SHAPE(3, 4, 2, 70, 90, 64, 64), BF16, .layout = LAYOUT_BSHD,
     .ragged = RAG_Q | RAG_KV, .zero_len = 1},
    {"ragged + seq_len, causal br, bias", SHAPE(3, 2, 2, 80, 80, 96, 96), F16, .mask = R, .align = BR,
     .ragged = RAG_Q | RAG_KV, .pad = PAD_Q | PAD_KV, .zero_len = 1, .bias = BIAS_FULL, .dbias = 1},
    {"bias full f32, d_bias direct", SHAPE(2, 2, 2, 70, 90, 64, 64), BF16, .bias = BIAS_FULL, .dbias = 1},
    {"bias [1,h] io, d_bias summed over b", SHAPE(3, 4, 2, 65, 70, 128, 128), F16, .mask = R, .bias = BIAS_1H,
     .bias_io = 1, .dbias = 1},
    {"bias [b,1] f32 negative scale, d_bias over h", SHAPE(2, 4, 1, 50, 60, 32, 32), F16, .scale = -0.2,
     .bias = BIAS_B1, .dbias = 1},
    {"bias [1,1] io gapped, d_bias over b and h", SHAPE(2, 3, 3, 40, 40, 256, 64), BF16, .bias = BIAS_11,
     .bias_io = 1, .dbias = 1, .layout = LAYOUT_GAPPED},
    {"bias with -inf: hidden keys and a hidden row", SHAPE(2, 4, 2, 50, 70, 64, 64), F16, .mask = R,
     .bias = BIAS_1H, .bias_inf = 1, .dbias = 1, .sink = 1, .dsink = 1},
    {"sink + d_sink negative scale", SHAPE(2, 4, 2, 70, 70, 64, 64), F16, .scale = -0.3, .mask = R, .sink = 1,
     .dsink = 1},
    {"large scale: peaky softmax", SHAPE(1, 2, 2, 64, 200, 64, 64), BF16, .scale = 2.0},
    {"unaligned strides: element-wise loads", SHAPE(2, 3, 3, 45, 77, 72, 72), F16, .layout = LAYOUT_UNALIGNED,
     .mask = R, .bias = BIAS_FULL, .dbias = 1, .sink = 1, .dsink = 1},
    {"misaligned base pointers", SHAPE(1, 2, 2, 66, 66, 64, 64), BF16, .misalign = 1},
};
#undef SHAPE
#undef F16
#undef BF16
#undef L
#undef R
#undef BR


/* ---------------------------------------------------------------------------------- */
/* One case                                                                              */
/* ---------------------------------------------------------------------------------- */

static const int grad_slot[NGRAD] = {ODQ, ODK, ODV, T_DBIAS, T_DSINK};
static const char *const grad_names[NGRAD] = {"dQ", "dK", "dV", "dBias", "dSink"};

static void run_case(const bcase *c, uint64_t seed, int index, frost_context *cpu, frost_context *gpu)
{
    char desc[480];
    snprintf(desc, sizeof desc,
             "%s: b=%d h_q=%d h_kv=%d s_q=%d s_kv=%d d_qk=%d d_v=%d %s scale=%g mask=%u left=%d right=%d align=%d "
             "layout=%d ragged=%d pad=%d zero_len=%d bias=%d%s%s dbias=%d sink=%d dsink=%d misalign=%d",
             c->name, c->b, c->h_q, c->h_kv, c->s_q, c->s_kv, c->d_qk, c->d_v, frost_dtype_name(c->dtype), c->scale,
             (unsigned)c->mask, c->left, c->right, c->align, c->layout, c->ragged, c->pad, c->zero_len, c->bias,
             c->bias_io ? "(io)" : "", c->bias_inf ? "(-inf)" : "", c->dbias, c->sink, c->dsink, c->misalign);
    tu_set_context("test_sdpa_bwd_gpu", seed, index, desc);
    int failures_before = tu_failures();
    static run r;
    memset(&r, 0, sizeof r);
    r.c = c;
    r.rng = tu_rng_make(seed * 1000003u + (uint64_t)index);
    r.scale = c->scale != 0 ? c->scale : 1.0 / sqrt((double)c->d_qk);
    make_lengths(&r);
    alloc_all(&r);
    const frost__device *dev = gpu->device;
    tu_dev_buf d[NT];
    memset(d, 0, sizeof d);
    frost_graph *gc = NULL, *gg = NULL;
    void *scratch = NULL;

    run_forward(&r, cpu);
    for (int o = 0; o < NOPD; o++) /* f32 copies of the inputs; poisoned f32 outputs */
        clone_as(&r.f32[o], &r.lp[o], FROST_F32, o < ODQ);
    for (int k = 0; k < 3; k++)
        clone_as(&r.naive[k], &r.f32[ODQ + k], FROST_F32, 0);
    frost_tensor tc[NT], tg[NT];
    gc = make_bwd_graph(&r, cpu, C_REF, tc);
    gg = make_bwd_graph(&r, gpu, C_GPU, tg);
    if (!gc || !gg || tu_failures() != failures_before)
        goto done;

    /* ref: host pointers */
    tu_buf *bufs[NT];
    void *ptrs[NT];
    frost_binding list[NT];
    graph_buffers(&r, C_REF, bufs);
    for (int k = 0; k < NT; k++)
        ptrs[k] = bufs[k]->data;
    tu_execute_host(gc, list, tu_bind(tc, ptrs, NT, list));
    naive_backward(&r);

    /* cuda: three runs; the first is compared, the other two must repeat it bit for bit */
    graph_buffers(&r, C_GPU, bufs);
    for (int k = 0; k < NT; k++)
        ptrs[k] = tu_to_device(dev, bufs[k], &d[k], c->misalign && k <= ODO ? 8 : 0);
    int n = tu_bind(tg, ptrs, NT, list);
    size_t ws_size = 0;
    TU_OK(frost_graph_workspace_size(gg, &ws_size));
    void *dws = NULL;
    if (ws_size)
        TU_OK(frost__dev_alloc(dev, ws_size, &dws));
    size_t biggest = 0;
    for (int k = 0; k < NGRAD; k++)
        biggest = d[grad_slot[k]].bytes > biggest ? d[grad_slot[k]].bytes : biggest;
    scratch = malloc(biggest ? biggest : 1);
    for (int rep = 0; rep < 3 && scratch; rep++) {
        TU_OK(frost_graph_execute(gg, list, n, dws, NULL));
        TU_OK(frost__dev_synchronize(dev));
        for (int k = 0; k < NGRAD; k++) {
            const tu_dev_buf *db = &d[grad_slot[k]];
            if (!db->base)
                continue;
            tu_from_device(dev, db, rep == 0 ? bufs[grad_slot[k]]->alloc : scratch);
            if (rep > 0 && memcmp(scratch, bufs[grad_slot[k]]->alloc, db->bytes) != 0)
                tu_failf("%s: run %d differs bitwise from run 1 (determinism)", grad_names[k], rep + 1);
        }
    }
    if (dws)
        frost__dev_free(dev, dws);

    compare_output("dQ", &r.lp[ODQ], &r.f32[ODQ], &r.naive[0], c->dtype);
    compare_output("dK", &r.lp[ODK], &r.f32[ODK], &r.naive[1], c->dtype);
    compare_output("dV", &r.lp[ODV], &r.f32[ODV], &r.naive[2], c->dtype);
    if (c->bias && c->dbias)
        compare_output("dBias", &r.dbias[C_GPU], &r.dbias[C_REF], &r.dbias[C_NAIVE], c->dtype);
    if (c->sink && c->dsink)
        compare_output("dSink", &r.dsink[C_GPU], &r.dsink[C_REF], &r.dsink[C_NAIVE], c->dtype);

    char explain[8192];
    TU_OK(frost_graph_explain(gg, explain, sizeof explain, NULL));
    if (!strstr(explain, "sdpa_bwd.cu:sdpa_bwd_dkdv") || !strstr(explain, "deterministic by construction"))
        tu_failf("explain does not name the cuda backward kernels and their determinism:\n%s", explain);
done:
    free(scratch);
    for (int k = 0; k < NT; k++)
        tu_dev_buf_free(dev, &d[k]);
    frost_graph_destroy(gc);
    frost_graph_destroy(gg);
    free_run(&r);
}

/* ---------------------------------------------------------------------------------- */
/* Random cases                                                                          */
/* ---------------------------------------------------------------------------------- */

static bcase random_case(uint64_t seed, int index)
{
    tu_rng r = tu_rng_make(seed ^ (0x5bd10000ull + (uint64_t)index * 0x9e37ull));
    bcase c = {.name = "random"};
    static const double scales[] = {0, 0, 0.2, -0.35, 1.5};
    /* a short list of head dims keeps the number of distinct kernels (NVRTC compiles) low */
    static const int dims[] = {8, 16, 24, 40, 64, 72, 96, 128, 136, 192, 256};
    const int n_dims = (int)(sizeof dims / sizeof dims[0]);
    c.b = (int)tu_int(&r, 1, MAXB - 1);
    int shape = (int)tu_int(&r, 0, 3); /* MHA, GQA 2, GQA 4, MQA */
    c.h_kv = shape == 3 ? 1 : (int)tu_int(&r, 1, 2);
    c.h_q = shape == 3 ? (int)tu_int(&r, 1, 5) : c.h_kv * (shape == 0 ? 1 : shape == 1 ? 2 : 4);
    c.s_q = tu_int(&r, 0, 5) ? (int)tu_int(&r, 1, 200) : 1;
    c.s_kv = tu_int(&r, 0, 5) ? (int)tu_int(&r, 1, 260) : 1;
    c.d_qk = dims[tu_int(&r, 0, n_dims - 1)];
    c.d_v = tu_int(&r, 0, 2) ? c.d_qk : dims[tu_int(&r, 0, n_dims - 1)];
    c.dtype = tu_int(&r, 0, 1) ? FROST_BF16 : FROST_F16;
    c.scale = scales[tu_int(&r, 0, 4)];
    c.mask = (uint32_t)tu_int(&r, 0, 3);
    c.left = (int)tu_int(&r, 0, c.s_kv + 2);
    c.right = tu_int(&r, 0, 1) ? 0 : (int)tu_int(&r, 0, c.s_kv + 2);
    c.align = (int)tu_int(&r, 0, 1);
    c.layout = (int)tu_int(&r, 0, 3);
    c.ragged = tu_int(&r, 0, 2) ? 0 : (int)tu_int(&r, 1, 3);
    c.pad = tu_int(&r, 0, 2) ? 0 : (int)tu_int(&r, 1, 3);
    c.zero_len = (int)tu_int(&r, 0, 1);
    c.bias = tu_int(&r, 0, 1) ? 0 : (int)tu_int(&r, 1, 4);
    c.bias_io = (int)tu_int(&r, 0, 1);
    c.bias_inf = tu_int(&r, 0, 3) == 0;
    c.dbias = tu_int(&r, 0, 2) != 0;
    c.sink = tu_int(&r, 0, 2) == 0;
    c.dsink = tu_int(&r, 0, 2) != 0;
    c.misalign = tu_int(&r, 0, 7) == 0;
    return c;
}

/* ---------------------------------------------------------------------------------- */
/* Refusals: each must be NOT_SUPPORTED with a sentence naming the constraint            */
/* ---------------------------------------------------------------------------------- */

static void expect_refusal(frost_context *gpu, frost_dtype dt, int64_t d_qk, int64_t d_v, const char *needle)
{
    char desc[160];
    snprintf(desc, sizeof desc, "refusal: %s d_qk=%lld d_v=%lld", frost_dtype_name(dt), (long long)d_qk,
             (long long)d_v);
    tu_set_context("test_sdpa_bwd_gpu", 0, -1, desc);
    frost_graph *g = NULL;
    TU_OK(frost_graph_create(gpu, &g));
    if (!g)
        return;
    frost_tensor_desc t = {.dtype = dt, .rank = 4, .dims = {1, 2, 16, d_qk}};
    frost_sdpa_backward_desc d = {0};
    frost_tensor *ids[5] = {&d.q, &d.k, &d.v, &d.o, &d.d_o};
    static const char *const names[5] = {"q", "k", "v", "o", "d_o"};
    for (int k = 0; k < 5; k++) {
        t.name = names[k];
        t.dims[3] = k < 2 ? d_qk : d_v;
        TU_OK(frost_graph_add_tensor(g, &t, ids[k]));
    }
    frost_tensor_desc st = {.name = "stats", .dtype = FROST_F32, .rank = 4, .dims = {1, 2, 16, 1}};
    TU_OK(frost_graph_add_tensor(g, &st, &d.stats));
    frost_sdpa_grads out = {FROST_TENSOR_AUTO, FROST_TENSOR_AUTO, FROST_TENSOR_AUTO, 0, 0};
    TU_OK(frost_graph_add_sdpa_backward(g, &d, &out));
    frost_build_options opt = {.engine = "cuda"};
    TU_CHECK_STATUS(frost_graph_build(g, &opt), FROST_NOT_SUPPORTED);
    if (!strstr(frost_last_error(), needle))
        tu_failf("refusal should mention \"%s\", got: %s", needle, frost_last_error());
    frost_graph_destroy(g);
}

static void check_refusals(frost_context *gpu)
{
    expect_refusal(gpu, FROST_F32, 64, 64, "f32 runs on the CPU context's ref engine");
    expect_refusal(gpu, FROST_BF16, 264, 264, "d_qk up to 256");
    expect_refusal(gpu, FROST_F16, 64, 512, "d_v up to 256");
    expect_refusal(gpu, FROST_F16, 12, 12, "multiple of 8");
}

enum { NUM_TABLE = (int)(sizeof table / sizeof table[0]), NUM_RANDOM = 30 };

static void run_index(int i, uint64_t seed, frost_context *cpu, frost_context *gpu)
{
    const bcase c = i < NUM_TABLE ? table[i] : random_case(seed, i);
    run_case(&c, seed, i, cpu, gpu);
}

int main(void)
{
    return tu_gpu_main(20261204, NUM_TABLE + NUM_RANDOM, NULL, run_index, check_refusals);
}
