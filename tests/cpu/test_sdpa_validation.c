/*
 * test_sdpa_validation.c — every way frost_graph_add_sdpa / _backward (and the reference
 * engine's execute-time checks) can refuse a caller's graph, and what the refusal says.
 *
 * Each check starts from a fresh, valid fixture (Q [2,4,5,8], K [2,2,6,8], V [2,2,6,dv],
 * bias [2,4,5,6], sink [1,4,1,1], seq_len [2], all f32), breaks one thing, and asserts the
 * status and that frost_last_error() contains the words a user needs: the tensor's role,
 * the dim, the expected and the actual value.  A refused add must leave the graph as it
 * was (no node, no half-created output tensors).  The shapes frost infers for automatic
 * outputs and explain's one-line description are checked on the success path.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

enum { B = 2, HQ = 4, HKV = 2, SQ = 5, SKV = 6, DQK = 8 };

typedef struct fx {
    frost_graph *g;
    int dv;
    frost_tensor q, k, v, bias, sink, seq_q, seq_kv, next;
    frost_sdpa_desc d;
    frost_sdpa_outputs out;
} fx;

static frost_tensor tensor(fx *f, const char *name, frost_dtype dt, int rank, int64_t d0, int64_t d1, int64_t d2,
                           int64_t d3, frost_tensor ragged)
{
    frost_tensor_desc d = {.name = name, .dtype = dt, .rank = rank, .dims = {d0, d1, d2, d3},
                           .ragged_offset = ragged};
    frost_tensor id = 0;
    TU_OK(frost_graph_add_tensor(f->g, &d, &id));
    f->next = id + 1;
    return id;
}

#define T4(f, name, dt, a, b, c, d) tensor(f, name, dt, 4, a, b, c, d, 0)

static void fx_make(fx *f, frost_context *ctx, int dv)
{
    memset(f, 0, sizeof *f);
    f->dv = dv;
    TU_OK(frost_graph_create(ctx, &f->g));
    f->q = T4(f, "q", FROST_F32, B, HQ, SQ, DQK);
    f->k = T4(f, "k", FROST_F32, B, HKV, SKV, DQK);
    f->v = T4(f, "v", FROST_F32, B, HKV, SKV, dv);
    f->bias = T4(f, "bias", FROST_F32, B, HQ, SQ, SKV);
    f->sink = T4(f, "sink", FROST_F32, 1, HQ, 1, 1);
    f->seq_q = tensor(f, "seq_q", FROST_I32, 1, B, 0, 0, 0, 0);
    f->seq_kv = tensor(f, "seq_kv", FROST_I32, 1, B, 0, 0, 0, 0);
    f->d = (frost_sdpa_desc){.q = f->q, .k = f->k, .v = f->v, .bias = f->bias, .sink = f->sink,
                             .seq_len_q = f->seq_q, .seq_len_kv = f->seq_kv};
    f->d.attrs.mask_flags = FROST_MASK_RIGHT_BOUND;
    f->d.attrs.align = FROST_DIAG_BOTTOM_RIGHT;
    f->out = (frost_sdpa_outputs){FROST_TENSOR_AUTO, FROST_TENSOR_AUTO};
}

static void fx_free(fx *f)
{
    frost_graph_destroy(f->g);
    f->g = NULL;
}

/* Status and message of a refused call; the graph must hold no new tensor afterwards. */
static void expect(int line, fx *f, frost_status got, frost_status want, const char *const *needles)
{
    const char *msg = frost_last_error();
    char copy[1024];
    snprintf(copy, sizeof copy, "%s", msg);
    if (got != want)
        tu_failf("line %d: got %s, expected %s: \"%s\"", line, frost_status_name(got), frost_status_name(want), copy);
    for (int i = 0; needles[i]; i++)
        if (!strstr(copy, needles[i]))
            tu_failf("line %d: message \"%s\" lacks \"%s\"", line, copy, needles[i]);
    frost_tensor_desc d;
    if (want != FROST_OK && f && f->g && frost_graph_tensor_desc(f->g, f->next, &d) == FROST_OK)
        tu_failf("line %d: the refused call left tensor %u '%s' behind", line, (unsigned)f->next, d.name);
}

#define EXPECT(f, call, status, ...) expect(__LINE__, f, (call), status, (const char *const[]){__VA_ARGS__, NULL})
#define ADD(f) frost_graph_add_sdpa((f)->g, &(f)->d, &(f)->out)

static void walk_forward(frost_context *ctx)
{
    fx f;
    fx_make(&f, ctx, 7);
    EXPECT(NULL, frost_graph_add_sdpa(NULL, &f.d, &f.out), FROST_INVALID_ARGUMENT, "graph is NULL");
    EXPECT(&f, frost_graph_add_sdpa(f.g, NULL, &f.out), FROST_INVALID_ARGUMENT, "desc is NULL");
    EXPECT(&f, frost_graph_add_sdpa(f.g, &f.d, NULL), FROST_INVALID_ARGUMENT, "out is NULL");

#define CASE(setup, status, ...)                                                                             \
    do {                                                                                                     \
        fx_free(&f);                                                                                         \
        fx_make(&f, ctx, 7);                                                                                 \
        setup;                                                                                               \
        EXPECT(&f, ADD(&f), status, __VA_ARGS__);                                                            \
    } while (0)

    CASE(f.d.q = 0, FROST_INVALID_ARGUMENT, "Q is required");
    CASE(f.d.k = 999, FROST_INVALID_ARGUMENT, "K: unknown tensor id 999");
    CASE(f.d.v = FROST_TENSOR_AUTO, FROST_INVALID_ARGUMENT, "V: FROST_TENSOR_AUTO");
    CASE(f.d.q = tensor(&f, "q3", FROST_F32, 3, HQ, SQ, DQK, 0, 0), FROST_INVALID_ARGUMENT, "Q must have rank 4",
         "got rank 3");
    CASE(f.d.q = T4(&f, "q64", FROST_F64, B, HQ, SQ, DQK), FROST_INVALID_ARGUMENT,
         "Q dtype must be f32, f16 or bf16, got f64");
    CASE(f.d.k = T4(&f, "k16", FROST_F16, B, HKV, SKV, DQK), FROST_INVALID_ARGUMENT,
         "K dtype must equal Q's dtype: expected f32, got f16");
    CASE(f.d.k = T4(&f, "k6", FROST_F32, B, HKV, SKV, 6), FROST_INVALID_ARGUMENT,
         "K dim 3 (d_qk) must equal Q's d_qk: expected 8, got 6", "\"k6\"");
    CASE(f.d.k = T4(&f, "kb", FROST_F32, 3, HKV, SKV, DQK), FROST_INVALID_ARGUMENT,
         "K dim 0 (b) must equal Q's b: expected 2, got 3");
    CASE(f.d.v = T4(&f, "vs", FROST_F32, B, HKV, 5, 7), FROST_INVALID_ARGUMENT,
         "V dim 2 (s_kv) must equal K's s_kv: expected 6, got 5");
    CASE(f.d.v = T4(&f, "vh", FROST_F32, B, 1, SKV, 7), FROST_INVALID_ARGUMENT,
         "V dim 1 (h_kv) must equal K's h_kv: expected 2, got 1");
    CASE(f.d.v = T4(&f, "vt", FROST_BF16, B, HKV, SKV, 7), FROST_INVALID_ARGUMENT, "V dtype must equal Q's dtype");
    CASE(f.d.k = T4(&f, "k3", FROST_F32, B, 3, SKV, DQK), FROST_INVALID_ARGUMENT, "GQA ratio not integral",
         "h_q 4, h_kv 3");
    CASE(f.d.q = T4(&f, "q0", FROST_F32, B, HQ, 0, DQK), FROST_INVALID_ARGUMENT, "Q dim 2 (s_q) must be >= 1, got 0");
    CASE(f.d.bias = T4(&f, "b3", FROST_F32, 3, HQ, SQ, SKV), FROST_INVALID_ARGUMENT,
         "bias dim 0 (b) must be 1 or Q's b: expected 1 or 2, got 3");
    CASE(f.d.bias = T4(&f, "bh", FROST_F32, 1, 2, SQ, SKV), FROST_INVALID_ARGUMENT, "bias dim 1 (h_q) must be 1 or");
    CASE(f.d.bias = T4(&f, "bs", FROST_F32, 1, 1, SQ, 5), FROST_INVALID_ARGUMENT,
         "bias dim 3 (s_kv) must equal K's s_kv: expected 6, got 5");
    CASE(f.d.bias = T4(&f, "bq", FROST_F32, 1, 1, 4, SKV), FROST_INVALID_ARGUMENT, "bias dim 2 (s_q)");
    CASE(f.d.bias = T4(&f, "bt", FROST_F16, 1, 1, SQ, SKV), FROST_INVALID_ARGUMENT,
         "bias dtype must be f32 or the I/O dtype f32, got f16");
    CASE(f.d.bias = tensor(&f, "b2", FROST_F32, 2, SQ, SKV, 0, 0, 0), FROST_INVALID_ARGUMENT,
         "bias must have rank 4");
    CASE(f.d.sink = T4(&f, "s", FROST_F32, 1, HQ, 1, 2), FROST_INVALID_ARGUMENT, "sink dim 3 must be 1");
    CASE(f.d.sink = tensor(&f, "s", FROST_F32, 1, HQ + 1, 0, 0, 0, 0), FROST_INVALID_ARGUMENT,
         "sink dim 0 (h_q) must equal Q's h_q: expected 4, got 5");
    CASE(f.d.sink = tensor(&f, "s", FROST_F16, 1, HQ, 0, 0, 0, 0), FROST_INVALID_ARGUMENT,
         "sink dtype must be f32, got f16");
    CASE(f.d.sink = tensor(&f, "s", FROST_F32, 2, 1, HQ, 0, 0, 0), FROST_INVALID_ARGUMENT, "sink must have rank 4");
    CASE(f.d.seq_len_q = tensor(&f, "l", FROST_I64, 1, B, 0, 0, 0, 0), FROST_INVALID_ARGUMENT,
         "seq_len_q dtype must be i32, got i64");
    CASE(f.d.seq_len_kv = tensor(&f, "l", FROST_I32, 1, B + 1, 0, 0, 0, 0), FROST_INVALID_ARGUMENT,
         "seq_len_kv dim 0 (b) must equal Q's b: expected 2, got 3");
    CASE(f.d.seq_len_q = T4(&f, "l", FROST_I32, B, 1, 2, 1), FROST_INVALID_ARGUMENT, "seq_len_q dim 2 must be 1");
    CASE(f.d.seq_len_q = tensor(&f, "l", FROST_I32, 2, B, 1, 0, 0, 0), FROST_INVALID_ARGUMENT,
         "seq_len_q must have rank 1");
    CASE(f.d.q = tensor(&f, "qr", FROST_F32, 4, B, HQ, SQ, DQK, tensor(&f, "cu", FROST_I32, 1, B, 0, 0, 0, 0)),
         FROST_INVALID_ARGUMENT, "Q's ragged offset dim 0 must be b + 1: expected 3, got 2");
    CASE(f.d.k = tensor(&f, "kr", FROST_F32, 4, B, HKV, SKV, DQK, tensor(&f, "cu", FROST_I64, 2, B + 1, 1, 0, 0, 0)),
         FROST_INVALID_ARGUMENT, "K's ragged offset must have rank 1");
    CASE(f.d.v = tensor(&f, "vr", FROST_F32, 4, B, HKV, SKV, 7, T4(&f, "cu", FROST_I32, B + 1, 1, 2, 1)),
         FROST_INVALID_ARGUMENT, "V's ragged offset dim 2 must be 1");
    {
        fx_free(&f);
        fx_make(&f, ctx, 7);
        frost_tensor_desc cd = {.name = "cu", .dtype = FROST_I32, .rank = 1, .dims = {B + 1}, .strides = {2}};
        frost_tensor cu = 0;
        TU_OK(frost_graph_add_tensor(f.g, &cd, &cu));
        f.d.q = tensor(&f, "qr", FROST_F32, 4, B, HQ, SQ, DQK, cu);
        EXPECT(&f, ADD(&f), FROST_INVALID_ARGUMENT, "contiguous: expected stride 1, got 2");
    }
    CASE(f.d.attrs.mask_flags = 4, FROST_INVALID_ARGUMENT, "mask_flags has unknown bits 0x4");
    CASE(f.d.attrs.left_bound = -1, FROST_INVALID_ARGUMENT, "left_bound must be >= 0, got -1");
    CASE(f.d.attrs.right_bound = -3, FROST_INVALID_ARGUMENT, "right_bound must be >= 0, got -3");
    CASE(f.d.attrs.align = (frost_diag_align)2, FROST_INVALID_ARGUMENT, "align must be", "got 2");
    CASE(f.d.attrs.scale = NAN, FROST_INVALID_ARGUMENT, "scale must be finite");
    CASE(f.d.attrs.scale = -INFINITY, FROST_INVALID_ARGUMENT, "scale must be finite");
    CASE(f.out.stats = T4(&f, "st", FROST_F32, B, HQ, SQ, 2), FROST_INVALID_ARGUMENT,
         "stats dim 3 must be 1: expected 1, got 2");
    CASE(f.out.stats = T4(&f, "st", FROST_F16, B, HQ, SQ, 1), FROST_INVALID_ARGUMENT, "stats dtype must be f32, got f16");
    CASE(f.out.stats = T4(&f, "st", FROST_F32, B, HQ, SQ + 1, 1), FROST_INVALID_ARGUMENT,
         "stats dim 2 (s_q) must equal Q's s_q: expected 5, got 6");
    CASE(f.out.stats = tensor(&f, "st", FROST_F32, 4, B, HQ, SQ, 1, tensor(&f, "cu", FROST_I32, 1, B + 1, 0, 0, 0, 0)),
         FROST_INVALID_ARGUMENT, "stats cannot be ragged");
    CASE(f.out.o = T4(&f, "o", FROST_F32, B, HQ, SQ, 8), FROST_INVALID_ARGUMENT,
         "O dim 3 (d_v) must equal V's d_v: expected 7, got 8");
    CASE(f.out.o = T4(&f, "o", FROST_BF16, B, HQ, SQ, 7), FROST_INVALID_ARGUMENT,
         "O dtype must equal Q's dtype: expected f32, got bf16");
    {
        fx_free(&f);
        fx_make(&f, ctx, 7);
        frost_tensor_desc od = {.name = "o", .dtype = FROST_F32, .rank = 4, .dims = {B, HQ, SQ, 7},
                                .strides = {SQ * 7, 0, 7, 1}};
        TU_OK(frost_graph_add_tensor(f.g, &od, &f.out.o));
        f.next = f.out.o + 1;
        EXPECT(&f, ADD(&f), FROST_INVALID_ARGUMENT, "O dim 1 has stride 0 but size 4: an output cannot broadcast");
    }
    /* aliasing and producers need O and Q of one shape: d_v = d_qk */
    fx_free(&f);
    fx_make(&f, ctx, DQK);
    f.out.o = f.q;
    EXPECT(&f, ADD(&f), FROST_INVALID_ARGUMENT, "O aliases this node's q");
    f.out = (frost_sdpa_outputs){FROST_TENSOR_AUTO, 0};
    frost_tensor q2 = T4(&f, "q2", FROST_F32, B, HQ, SQ, DQK);
    frost_sdpa_desc d2 = f.d;
    d2.q = q2;
    frost_sdpa_outputs first = {FROST_TENSOR_AUTO, 0};
    TU_OK(frost_graph_add_sdpa(f.g, &d2, &first)); /* node 0 reads q2, writes first.o */
    f.next = first.o + 1;
    f.out.o = first.o;
    EXPECT(&f, ADD(&f), FROST_INVALID_ARGUMENT, "O is already produced by node 0", "sdpa0.o");
    f.out.o = q2;
    EXPECT(&f, ADD(&f), FROST_INVALID_ARGUMENT, "O is read by node 0, which runs before this one", "\"q2\"");
    f.out = (frost_sdpa_outputs){FROST_TENSOR_AUTO, FROST_TENSOR_AUTO};
    TU_OK(ADD(&f));
    f.next = f.out.stats + 1;
    TU_OK(frost_graph_build(f.g, NULL));
    EXPECT(&f, ADD(&f), FROST_BAD_STATE, "already built");
    fx_free(&f);
#undef CASE
}

#define ADD_BWD(f, bd, gr) frost_graph_add_sdpa_backward((f)->g, (bd), (gr))

static void walk_backward(frost_context *ctx)
{
    fx f;
    frost_sdpa_backward_desc bd;
    frost_sdpa_grads gr;
#define CASE(dv, setup, status, ...)                                                                         \
    do {                                                                                                     \
        fx_free(&f);                                                                                         \
        fx_make(&f, ctx, dv);                                                                                \
        TU_OK(ADD(&f));                                                                                      \
        bd = (frost_sdpa_backward_desc){.q = f.q, .k = f.k, .v = f.v, .o = f.out.o,                          \
                                        .d_o = T4(&f, "d_o", FROST_F32, B, HQ, SQ, dv), .stats = f.out.stats,  \
                                        .bias = f.bias, .sink = f.sink, .seq_len_q = f.seq_q,                \
                                        .seq_len_kv = f.seq_kv, .attrs = f.d.attrs};                         \
        gr = (frost_sdpa_grads){FROST_TENSOR_AUTO, FROST_TENSOR_AUTO, FROST_TENSOR_AUTO, FROST_TENSOR_AUTO,  \
                                FROST_TENSOR_AUTO};                                                          \
        setup;                                                                                               \
        EXPECT(&f, ADD_BWD(&f, &bd, &gr), status, __VA_ARGS__);                                              \
    } while (0)
    f.g = NULL;
    CASE(7, (void)0, FROST_OK, "");
    EXPECT(NULL, frost_graph_add_sdpa_backward(NULL, &bd, &gr), FROST_INVALID_ARGUMENT, "graph is NULL");
    CASE(7, bd.o = 0, FROST_INVALID_ARGUMENT, "O is required");
    CASE(7, bd.d_o = 0, FROST_INVALID_ARGUMENT, "dO is required");
    CASE(7, bd.stats = 0, FROST_INVALID_ARGUMENT, "stats is required");
    CASE(7, EXPECT(&f, ADD_BWD(&f, NULL, &gr), FROST_INVALID_ARGUMENT, "desc is NULL"), FROST_OK, "");
    CASE(7, bd.d_o = T4(&f, "x", FROST_BF16, B, HQ, SQ, 7), FROST_INVALID_ARGUMENT, "dO dtype must equal Q's dtype");
    CASE(7, bd.d_o = T4(&f, "x", FROST_F32, B, HQ, 4, 7), FROST_INVALID_ARGUMENT,
         "dO dim 2 (s_q) must equal Q's s_q: expected 5, got 4");
    CASE(7, bd.stats = T4(&f, "x", FROST_F16, B, HQ, SQ, 1), FROST_INVALID_ARGUMENT, "stats dtype must be f32");
    CASE(7, bd.bias = 0, FROST_INVALID_ARGUMENT, "d_bias is requested but the descriptor has no bias");
    CASE(7, bd.sink = 0, FROST_INVALID_ARGUMENT, "d_sink is requested but the descriptor has no sink");
    CASE(7, gr.d_q = T4(&f, "x", FROST_F32, B, HQ, SQ, 7), FROST_INVALID_ARGUMENT,
         "dQ dim 3 (d_qk) must equal Q's d_qk: expected 8, got 7");
    CASE(7, gr.d_bias = T4(&f, "x", FROST_F32, B, 1, SQ, SKV), FROST_INVALID_ARGUMENT,
         "d_bias dim 1 must equal bias's dim 1: expected 4, got 1");
    CASE(7, gr.d_bias = T4(&f, "x", FROST_BF16, B, HQ, SQ, SKV), FROST_INVALID_ARGUMENT,
         "d_bias dtype must be f32, got bf16");
    CASE(7, gr.d_sink = tensor(&f, "x", FROST_F32, 1, HQ + 1, 0, 0, 0, 0), FROST_INVALID_ARGUMENT,
         "d_sink dim 0 (h_q) must equal Q's h_q: expected 4, got 5");
    CASE(7, gr.d_q = f.q, FROST_INVALID_ARGUMENT, "dQ aliases this node's q");
    CASE(DQK, gr.d_q = f.out.o, FROST_INVALID_ARGUMENT, "already produced by node 0");
    CASE(DQK, (gr.d_k = T4(&f, "x", FROST_F32, B, HKV, SKV, DQK), gr.d_v = gr.d_k), FROST_INVALID_ARGUMENT,
         "dV aliases this node's d_k");
    CASE(7, TU_OK(frost_graph_build(f.g, NULL)); f.next = 999, FROST_BAD_STATE, "already built");
    fx_free(&f);
#undef CASE
}

static void expect_desc(const frost_graph *g, frost_tensor id, const char *what, frost_dtype dt, int rank,
                        const int64_t *dims, const int64_t *strides, frost_tensor ragged)
{
    frost_tensor_desc d;
    TU_OK(frost_graph_tensor_desc(g, id, &d));
    int ok = d.dtype == dt && d.rank == rank && d.ragged_offset == ragged;
    for (int k = 0; ok && k < rank; k++)
        ok = d.dims[k] == dims[k] && (!strides || d.strides[k] == strides[k]);
    if (!ok)
        tu_failf("%s: inferred %s rank %d [%lld,%lld,%lld,%lld] strides [%lld,%lld,%lld,%lld] ragged %u", what,
                 frost_dtype_name(d.dtype), d.rank, (long long)d.dims[0], (long long)d.dims[1], (long long)d.dims[2],
                 (long long)d.dims[3], (long long)d.strides[0], (long long)d.strides[1], (long long)d.strides[2],
                 (long long)d.strides[3], (unsigned)d.ragged_offset);
}

/* Shapes of automatic outputs, and explain's description of both nodes. */
static void check_inference(frost_context *ctx)
{
    fx f;
    fx_make(&f, ctx, 7);
    TU_OK(ADD(&f));
    expect_desc(f.g, f.out.o, "O", FROST_F32, 4, (int64_t[]){B, HQ, SQ, 7}, (int64_t[]){HQ * SQ * 7, SQ * 7, 7, 1}, 0);
    expect_desc(f.g, f.out.stats, "stats", FROST_F32, 4, (int64_t[]){B, HQ, SQ, 1}, NULL, 0);
    frost_sdpa_backward_desc bd = {.q = f.q, .k = f.k, .v = f.v, .o = f.out.o, .d_o = f.out.o, .stats = f.out.stats,
                                   .bias = f.bias, .sink = f.sink, .seq_len_q = f.seq_q, .seq_len_kv = f.seq_kv,
                                   .attrs = f.d.attrs, .deterministic = 1};
    frost_sdpa_grads gr = {0, FROST_TENSOR_AUTO, 0, FROST_TENSOR_AUTO, FROST_TENSOR_AUTO};
    TU_OK(frost_graph_add_sdpa_backward(f.g, &bd, &gr));
    expect_desc(f.g, gr.d_q, "dQ", FROST_F32, 4, (int64_t[]){B, HQ, SQ, DQK}, NULL, 0);
    expect_desc(f.g, gr.d_k, "dK", FROST_F32, 4, (int64_t[]){B, HKV, SKV, DQK}, NULL, 0);
    expect_desc(f.g, gr.d_v, "dV", FROST_F32, 4, (int64_t[]){B, HKV, SKV, 7}, NULL, 0);
    expect_desc(f.g, gr.d_bias, "d_bias", FROST_F32, 4, (int64_t[]){B, HQ, SQ, SKV}, NULL, 0);
    expect_desc(f.g, gr.d_sink, "d_sink", FROST_F32, 4, (int64_t[]){1, HQ, 1, 1}, NULL, 0);
    TU_OK(frost_graph_build(f.g, NULL));
    char text[8192];
    TU_OK(frost_graph_explain(f.g, text, sizeof text, NULL));
    const char *needles[] = {
        ("sdpa_fwd b=2 h_q=4 h_kv=2 s_q=5 s_kv=6 d_qk=8 d_v=7 f32 scale=0.353553 mask=right:0,bottom_right bias sink "
         "stats seq_len_q seq_len_kv"),
        "sdpa_bwd b=2 h_q=4", "d_bias d_sink deterministic", "engine: ref"};
    for (size_t i = 0; i < sizeof needles / sizeof needles[0]; i++)
        if (!strstr(text, needles[i]))
            tu_failf("explain lacks \"%s\":\n%s", needles[i], text);
    fx_free(&f);

    /* a ragged BHSD-strided Q still gives a THD output: tokens outside heads */
    fx_make(&f, ctx, 7);
    frost_tensor cu = tensor(&f, "cu", FROST_I64, 1, B + 1, 0, 0, 0, 0);
    frost_tensor_desc qd = {.name = "q_htd", .dtype = FROST_F32, .rank = 4, .dims = {B, HQ, SQ, DQK},
                            .strides = {0, 100 * DQK, DQK, 1}, .ragged_offset = cu};
    TU_OK(frost_graph_add_tensor(f.g, &qd, &f.d.q));
    TU_OK(ADD(&f));
    expect_desc(f.g, f.out.o, "ragged O", FROST_F32, 4, (int64_t[]){B, HQ, SQ, 7},
                (int64_t[]){SQ * HQ * 7, 7, HQ * 7, 1}, cu);
    fx_free(&f);
}

/* The reference engine refuses bad lengths at execute time, before writing anything. */
static void check_execute_errors(frost_context *ctx)
{
    fx f;
    fx_make(&f, ctx, 7);
    frost_tensor cu = tensor(&f, "cu_q", FROST_I32, 1, B + 1, 0, 0, 0, 0);
    frost_tensor_desc qd = {.name = "q_thd", .dtype = FROST_F32, .rank = 4, .dims = {B, HQ, SQ, DQK},
                            .strides = {SQ * HQ * DQK, DQK, HQ * DQK, 1}, .ragged_offset = cu};
    TU_OK(frost_graph_add_tensor(f.g, &qd, &f.d.q));
    f.d.bias = f.d.sink = 0;
    TU_OK(ADD(&f));
    TU_OK(frost_graph_build(f.g, NULL));
    size_t ws_size = 0;
    TU_OK(frost_graph_workspace_size(f.g, &ws_size));
    enum { TOK = 2 * SQ };
    static float q[TOK * HQ * DQK], k[B * HKV * SKV * DQK], v[B * HKV * SKV * 7], o[TOK * HQ * 7], stats[B * HQ * SQ];
    int32_t offs[B + 1], seq_q[B], seq_kv[B] = {SKV, SKV};
    void *ws = malloc(ws_size + 1);
    const frost_binding bind[] = {{f.d.q, q},       {f.k, k},         {f.v, v},   {f.out.o, o}, {f.out.stats, stats},
                                  {cu, offs},       {f.seq_q, seq_q}, {f.seq_kv, seq_kv}};
    const struct {
        int32_t offs[B + 1], seq_q[B];
        const char *msg;
    } bad[] = {
        {{0, 3, 2}, {1, 1}, "Q's ragged offsets [1] = 3, [2] = 2 give batch 1 a length of -1"},
        {{0, 3, 9}, {1, 1}, "give batch 1 a length of 6; it must lie in 0..5"},
        {{0, 3, 6}, {4, 3}, "batch 0 has length 4 (from seq_len_q) but Q's ragged slice holds only 3 rows"},
        {{0, 3, 6}, {9, 1}, "seq_len_q[0] = 9 must lie in 0..5"},
        {{0, 3, 6}, {-1, 1}, "seq_len_q[0] = -1"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memcpy(offs, bad[i].offs, sizeof offs);
        memcpy(seq_q, bad[i].seq_q, sizeof seq_q);
        for (size_t e = 0; e < sizeof o / sizeof o[0]; e++)
            o[e] = NAN;
        EXPECT(NULL, frost_graph_execute(f.g, bind, (int)(sizeof bind / sizeof bind[0]), ws, NULL),
               FROST_INVALID_ARGUMENT, bad[i].msg);
        for (size_t e = 0; e < sizeof o / sizeof o[0]; e++)
            if (!isnan(o[e])) {
                tu_failf("case %zu: a refused execute wrote O[%zu]", i, e);
                break;
            }
    }
    memcpy(offs, (int32_t[]){0, 3, 6}, sizeof offs);
    memcpy(seq_q, (int32_t[]){3, 2}, sizeof seq_q);
    TU_OK(frost_graph_execute(f.g, bind, (int)(sizeof bind / sizeof bind[0]), ws, NULL));
    free(ws);
    fx_free(&f);
}

int main(void)
{
    frost_context *ctx = NULL;
    TU_OK(frost_context_create(NULL, &ctx));
    void (*steps[])(frost_context *) = {walk_forward, walk_backward, check_inference, check_execute_errors};
    const char *names[] = {"walk_forward", "walk_backward", "check_inference", "check_execute_errors"};
    int filter = tu_case_filter(), count = 0;
    for (int i = 0; i < 4; i++) {
        if (filter >= 0 && filter != i)
            continue;
        tu_set_context("test_sdpa_validation", 0, i, names[i]);
        tu_case_begin();
        steps[i](ctx);
        tu_case_end();
        count++;
    }
    frost_context_destroy(ctx);
    return tu_finish(count);
}
