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
#include "sdpa_test_util.h"
#include "test_util.h"

#define K_NAIVE 3.0
#define ATOL_C 0.5
#define NAIVE_SANITY 0.1

typedef struct bcase {
    const char *name;
    int b, h_q, h_kv, s_q, s_kv, d_qk, d_v;
    frost_dtype dtype;
    double scale;
    uint32_t mask;
    int left, right, align;
    int layout, ragged, pad, zero_len;
    int bias, bias_io, bias_inf, dbias, sink, dsink, misalign;
} bcase;

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
/* Tensors of a case                                                                     */
/* ---------------------------------------------------------------------------------- */

/* 4-D operands: Q-side (queries) and KV-side (keys). */
enum { OQ, OK, OV, OO, ODO, ODQ, ODK, ODV, NOPD };
static const int opd_side[NOPD] = {0, 1, 1, 0, 0, 0, 1, 1};
static const char *const opd_names[NOPD] = {"q", "k", "v", "o", "d_o", "d_q", "d_k", "d_v"};
/* The three copies of the backward's outputs, and of its f32 inputs. */
enum { C_REF, C_GPU, C_NAIVE, NCOPY };
enum { G_DQ, G_DK, G_DV, G_DBIAS, G_DSINK, NGRAD };

typedef struct run {
    const bcase *c;
    tu_rng rng;
    double scale;
    int64_t slice[2][MAXB], len[2][MAXB], offs[2][MAXB + 1], tokens[2];
    frost_dtype offs_dtype;
    tu_buf lp[NOPD];      /* Q, K, V, O, dO in the I/O dtype; dQ, dK, dV: the cuda outputs */
    tu_buf f32[NOPD];     /* f32 copies for the ref; dQ, dK, dV: the ref outputs */
    tu_buf naive[3];      /* naive dQ, dK, dV (f32, the ref layout) */
    int64_t st[NOPD][4];  /* strides of the [b, h, s, d] view */
    tu_buf bias, bias32, stats, sink, offs_buf[2], seq_buf[2];
    tu_buf dbias[NCOPY], dsink[NCOPY];
    int64_t bias_dims[4], stats_st[4];
    int sink_rank, seq_rank;
} run;

static int64_t heads_of(const bcase *c, int opd)
{
    return opd_side[opd] ? c->h_kv : c->h_q;
}
static int64_t seq_of(const bcase *c, int opd)
{
    return opd_side[opd] ? c->s_kv : c->s_q;
}
static int64_t dim_of(const bcase *c, int opd)
{
    return (opd == OQ || opd == OK || opd == ODQ || opd == ODK) ? c->d_qk : c->d_v;
}
static int is_ragged(const run *r, int opd)
{
    return (r->c->ragged & (opd_side[opd] ? RAG_KV : RAG_Q)) != 0;
}

/* Element offset of (b, h, s, d) of an operand, ragged offsets resolved. */
static int64_t at(const run *r, int opd, int64_t b, int64_t h, int64_t s, int64_t d)
{
    const int64_t *st = r->st[opd];
    int64_t base = is_ragged(r, opd) ? r->offs[opd_side[opd]][b] * st[2] : b * st[0];
    return base + h * st[1] + s * st[2] + d * st[3];
}

/* Rows of batch b that an operand owns. */
static int64_t owned(const run *r, int opd, int b)
{
    return is_ragged(r, opd) ? r->slice[opd_side[opd]][b] : seq_of(r->c, opd);
}

static void make_lengths(run *r)
{
    const bcase *c = r->c;
    int64_t lo = c->zero_len ? 0 : 1;
    for (int side = 0; side < 2; side++) {
        int rag = c->ragged & (side ? RAG_KV : RAG_Q), pad = c->pad & (side ? PAD_KV : PAD_Q);
        int64_t s = side ? c->s_kv : c->s_q;
        for (int b = 0; b < c->b; b++) {
            r->slice[side][b] = rag ? tu_int(&r->rng, lo, s) : s;
            r->len[side][b] = pad ? tu_int(&r->rng, lo, r->slice[side][b]) : r->slice[side][b];
        }
        if (c->zero_len && (rag || pad)) { /* batch 0 has no queries, the last batch no keys */
            int b = side ? c->b - 1 : 0;
            r->len[side][b] = 0;
            if (!pad)
                r->slice[side][b] = 0;
        }
        r->offs[side][0] = tu_int(&r->rng, 0, 2); /* tokens before the first sequence: no batch's */
        for (int b = 0; b < c->b; b++)
            r->offs[side][b + 1] = r->offs[side][b] + r->slice[side][b];
        r->tokens[side] = r->offs[side][c->b] + tu_int(&r->rng, 0, 2);
    }
    r->offs_dtype = tu_int(&r->rng, 0, 1) ? FROST_I64 : FROST_I32;
}

/* An operand's 16-bit buffer; a ragged one is a [tokens, h, d] buffer. */
static void operand_alloc(run *r, int opd)
{
    const bcase *c = r->c;
    int64_t h = heads_of(c, opd), s = seq_of(c, opd), d = dim_of(c, opd);
    int64_t *st = r->st[opd];
    int bshd = c->layout == LAYOUT_BSHD || (c->layout != LAYOUT_BHSD && tu_int(&r->rng, 0, 1));
    if (is_ragged(r, opd)) {
        int64_t pd[3] = {r->tokens[opd_side[opd]], h, d}, ps[3];
        int token_major[3] = {0, 1, 2}, head_major[3] = {1, 0, 2};
        tu_sdpa_strides(&r->rng, r->c->layout, 3, pd, bshd ? token_major : head_major, ps);
        st[0] = s * ps[0], st[1] = ps[1], st[2] = ps[0], st[3] = ps[2];
        tu_buf_alloc(&r->lp[opd], c->dtype, 3, pd, ps, 0);
    } else {
        int64_t dims[4] = {c->b, h, s, d};
        int bhsd[4] = {0, 1, 2, 3}, bshd_order[4] = {0, 2, 1, 3};
        tu_sdpa_strides(&r->rng, r->c->layout, 4, dims, bshd ? bshd_order : bhsd, st);
        tu_buf_alloc(&r->lp[opd], c->dtype, 4, dims, st, 0);
    }
}

/* dst = src's layout in dtype dt, every element (guards included) converted. */
static void clone_as(tu_buf *dst, const tu_buf *src, frost_dtype dt, int copy_values)
{
    tu_buf_alloc(dst, dt, src->rank, src->dims, src->strides, src->span);
    if (copy_values)
        for (int64_t e = -src->guard; e < src->span + src->guard; e++)
            tu_buf_set(dst, e, tu_buf_get(src, e));
}

static void alloc_all(run *r)
{
    const bcase *c = r->c;
    for (int o = 0; o < NOPD; o++)
        operand_alloc(r, o);
    for (int o = OQ; o <= ODO; o++)
        if (o != OO)
            tu_buf_fill_uniform(&r->lp[o], &r->rng, -1.0, 1.0);
    if (c->bias) {
        int64_t dims[4] = {c->bias == BIAS_FULL || c->bias == BIAS_B1 ? c->b : 1,
                           c->bias == BIAS_FULL || c->bias == BIAS_1H ? c->h_q : 1, c->s_q, c->s_kv}, st[4];
        int rows_major[4] = {0, 1, 2, 3}, cols_major[4] = {0, 1, 3, 2};
        memcpy(r->bias_dims, dims, sizeof dims);
        tu_sdpa_strides(&r->rng, r->c->layout, 4, dims, c->layout != LAYOUT_BHSD && tu_int(&r->rng, 0, 1) ? cols_major : rows_major, st);
        tu_buf_alloc(&r->bias, c->bias_io ? c->dtype : FROST_F32, 4, dims, st, 0);
        tu_buf_fill_uniform(&r->bias, &r->rng, -1.0, 1.0);
        for (int64_t i = 0; i < c->s_q && c->bias_inf; i++) /* row 1 hidden, 1 key in 8 hidden */
            for (int64_t j = 0; j < c->s_kv; j++)
                if (i == 1 || tu_int(&r->rng, 0, 7) == 0)
                    tu_buf_set(&r->bias, i * st[2] + j * st[3], -INFINITY);
        clone_as(&r->bias32, &r->bias, FROST_F32, 1);
        if (c->dbias) {
            tu_sdpa_strides(&r->rng, r->c->layout, 4, dims, rows_major, st);
            for (int k = 0; k < NCOPY; k++)
                tu_buf_alloc(&r->dbias[k], FROST_F32, 4, dims, st, 0);
        }
    }
    if (c->sink) {
        int64_t dims4[4] = {1, c->h_q, 1, 1}, dims1 = c->h_q, st[4];
        r->sink_rank = tu_int(&r->rng, 0, 1) ? 1 : 4;
        if (r->sink_rank == 1)
            st[0] = tu_int(&r->rng, 1, 2);
        else
            tu_packed_strides(4, dims4, st);
        tu_buf_alloc(&r->sink, FROST_F32, r->sink_rank, r->sink_rank == 1 ? &dims1 : dims4, st, 0);
        tu_buf_fill_uniform(&r->sink, &r->rng, -1.5, 1.5);
        if (c->dsink)
            for (int k = 0; k < NCOPY; k++)
                tu_buf_alloc(&r->dsink[k], FROST_F32, r->sink_rank, r->sink_rank == 1 ? &dims1 : dims4, st, 0);
    }
    int64_t sdims[4] = {c->b, c->h_q, c->s_q, 1};
    int order[4] = {0, 1, 2, 3};
    tu_sdpa_strides(&r->rng, r->c->layout, 4, sdims, order, r->stats_st);
    tu_buf_alloc(&r->stats, FROST_F32, 4, sdims, r->stats_st, 0);
    r->seq_rank = tu_int(&r->rng, 0, 1) ? 1 : 4;
    for (int side = 0; side < 2; side++) {
        int64_t nb1 = c->b + 1, one = 1;
        if (c->ragged & (side ? RAG_KV : RAG_Q)) {
            tu_buf_alloc(&r->offs_buf[side], r->offs_dtype, 1, &nb1, &one, 0);
            for (int b = 0; b <= c->b; b++)
                tu_buf_set(&r->offs_buf[side], b, (double)r->offs[side][b]);
        }
        if (c->pad & (side ? PAD_KV : PAD_Q)) {
            int64_t dims4[4] = {c->b, 1, 1, 1}, st4[4] = {1, 1, 1, 1};
            tu_buf_alloc(&r->seq_buf[side], FROST_I32, r->seq_rank, dims4, st4, 0);
            for (int b = 0; b < c->b; b++)
                ((int32_t *)r->seq_buf[side].data)[b] = (int32_t)r->len[side][b];
        }
    }
}

static void free_run(run *r)
{
    tu_buf *single[] = {&r->bias, &r->bias32, &r->stats, &r->sink, &r->offs_buf[0], &r->offs_buf[1],
                        &r->seq_buf[0], &r->seq_buf[1]};
    for (size_t i = 0; i < sizeof single / sizeof single[0]; i++)
        if (single[i]->alloc)
            tu_buf_free(single[i]);
    for (int o = 0; o < NOPD; o++) {
        if (r->lp[o].alloc)
            tu_buf_free(&r->lp[o]);
        if (r->f32[o].alloc)
            tu_buf_free(&r->f32[o]);
    }
    for (int k = 0; k < NCOPY; k++) {
        if (k < 3 && r->naive[k].alloc)
            tu_buf_free(&r->naive[k]);
        if (r->dbias[k].alloc)
            tu_buf_free(&r->dbias[k]);
        if (r->dsink[k].alloc)
            tu_buf_free(&r->dsink[k]);
    }
}

/* ---------------------------------------------------------------------------------- */
/* Graphs                                                                                */
/* ---------------------------------------------------------------------------------- */

/* Tensor ids in binding order; the buffers behind them are listed by graph_buffers. */
enum { T_STATS = NOPD, T_BIAS, T_SINK, T_OFFS_Q, T_OFFS_KV, T_SEQ_Q, T_SEQ_KV, T_DBIAS, T_DSINK, NT };

/* The host buffers of one backward graph (copy C_REF: f32 I/O; C_GPU: 16-bit). */
static void graph_buffers(run *r, int copy, tu_buf *bufs[NT])
{
    for (int o = 0; o < NOPD; o++)
        bufs[o] = copy == C_REF ? &r->f32[o] : &r->lp[o];
    bufs[T_STATS] = &r->stats;
    bufs[T_BIAS] = copy == C_REF ? &r->bias32 : &r->bias;
    bufs[T_SINK] = &r->sink;
    bufs[T_OFFS_Q] = &r->offs_buf[0], bufs[T_OFFS_KV] = &r->offs_buf[1];
    bufs[T_SEQ_Q] = &r->seq_buf[0], bufs[T_SEQ_KV] = &r->seq_buf[1];
    bufs[T_DBIAS] = &r->dbias[copy];
    bufs[T_DSINK] = &r->dsink[copy];
}

static frost_tensor add_operand(run *r, frost_graph *g, int opd, const tu_buf *b, const frost_tensor *ids)
{
    const bcase *c = r->c;
    int64_t dims[4] = {c->b, heads_of(c, opd), seq_of(c, opd), dim_of(c, opd)};
    frost_tensor rag = is_ragged(r, opd) ? ids[opd_side[opd] ? T_OFFS_KV : T_OFFS_Q] : 0;
    return tu_add_tensor_4d(g, opd_names[opd], b, dims, r->st[opd], rag);
}

static void add_lengths(run *r, frost_graph *g, tu_buf *bufs[NT], frost_tensor *ids)
{
    static const char *const names[4] = {"cu_q", "cu_kv", "seq_q", "seq_kv"};
    for (int k = T_OFFS_Q; k <= T_SEQ_KV; k++)
        if (bufs[k]->alloc)
            ids[k] = tu_add_tensor(g, names[k - T_OFFS_Q], bufs[k]);
    (void)r;
}

static frost_sdpa_attrs attrs_of(const bcase *c)
{
    return (frost_sdpa_attrs){c->scale, c->mask, c->left, c->right, (frost_diag_align)c->align};
}

/* The ref engine's forward on the 16-bit inputs: fills r->lp[OO] and r->stats. */
static void run_forward(run *r, frost_context *cpu)
{
    tu_buf *bufs[NT];
    frost_tensor ids[NT] = {0};
    graph_buffers(r, C_GPU, bufs);
    frost_graph *g = NULL;
    TU_OK(frost_graph_create(cpu, &g));
    if (!g)
        return;
    add_lengths(r, g, bufs, ids);
    for (int o = OQ; o <= OO; o++)
        ids[o] = add_operand(r, g, o, bufs[o], ids);
    ids[T_STATS] = tu_add_tensor(g, "stats", &r->stats);
    if (r->c->bias)
        ids[T_BIAS] = tu_add_tensor(g, "bias", bufs[T_BIAS]);
    if (r->c->sink)
        ids[T_SINK] = tu_add_tensor(g, "sink", &r->sink);
    frost_sdpa_desc d = {.q = ids[OQ], .k = ids[OK], .v = ids[OV], .bias = ids[T_BIAS], .sink = ids[T_SINK],
                         .seq_len_q = ids[T_SEQ_Q], .seq_len_kv = ids[T_SEQ_KV], .attrs = attrs_of(r->c)};
    frost_sdpa_outputs out = {ids[OO], ids[T_STATS]};
    TU_OK(frost_graph_add_sdpa(g, &d, &out));
    frost_build_options opt = {.engine = "ref"};
    TU_OK(frost_graph_build(g, &opt));
    void *ptrs[NT];
    frost_binding list[NT];
    for (int k = 0; k < NT; k++)
        ptrs[k] = bufs[k]->data;
    tu_execute_host(g, list, tu_bind(ids, ptrs, NT, list));
    frost_graph_destroy(g);
}

/* The backward graph of one copy; ids[] receives the tensor ids in binding order. */
static frost_graph *make_bwd_graph(run *r, frost_context *ctx, int copy, frost_tensor ids[NT])
{
    const bcase *c = r->c;
    tu_buf *bufs[NT];
    graph_buffers(r, copy, bufs);
    memset(ids, 0, sizeof(frost_tensor) * NT);
    frost_graph *g = NULL;
    TU_OK(frost_graph_create(ctx, &g));
    if (!g)
        return NULL;
    add_lengths(r, g, bufs, ids);
    for (int o = 0; o < NOPD; o++)
        ids[o] = add_operand(r, g, o, bufs[o], ids);
    ids[T_STATS] = tu_add_tensor(g, "stats", &r->stats);
    if (c->bias)
        ids[T_BIAS] = tu_add_tensor(g, "bias", bufs[T_BIAS]);
    if (c->sink)
        ids[T_SINK] = tu_add_tensor(g, "sink", &r->sink);
    if (c->bias && c->dbias)
        ids[T_DBIAS] = tu_add_tensor(g, "d_bias", bufs[T_DBIAS]);
    if (c->sink && c->dsink)
        ids[T_DSINK] = tu_add_tensor(g, "d_sink", bufs[T_DSINK]);
    frost_sdpa_backward_desc d = {.q = ids[OQ], .k = ids[OK], .v = ids[OV], .o = ids[OO], .d_o = ids[ODO],
                                  .stats = ids[T_STATS], .bias = ids[T_BIAS], .sink = ids[T_SINK],
                                  .seq_len_q = ids[T_SEQ_Q], .seq_len_kv = ids[T_SEQ_KV], .attrs = attrs_of(c),
                                  .deterministic = 1};
    frost_sdpa_grads out = {ids[ODQ], ids[ODK], ids[ODV], ids[T_DBIAS], ids[T_DSINK]};
    TU_OK(frost_graph_add_sdpa_backward(g, &d, &out));
    frost_build_options opt = {.engine = copy == C_REF ? "ref" : "cuda"};
    frost_status s = frost_graph_build(g, &opt);
    if (s != FROST_OK) {
        tu_failf("backward build (engine %s) failed: %s: %s", opt.engine, frost_status_name(s), frost_last_error());
        frost_graph_destroy(g);
        return NULL;
    }
    return g;
}

/* ---------------------------------------------------------------------------------- */
/* The naive low-precision backward (the error budget)                                  */
/* ---------------------------------------------------------------------------------- */

static double round_io(frost_dtype t, double x)
{
    float f = (float)x;
    return t == FROST_BF16 ? frost__bf16_to_f32(frost__f32_to_bf16(f)) : frost__f16_to_f32(frost__f32_to_f16(f));
}

static int admissible(const bcase *c, int64_t i, int64_t j, int64_t len_q, int64_t len_kv)
{
    int64_t diag = c->align == FROST_DIAG_BOTTOM_RIGHT ? i + len_kv - len_q : i;
    if (j >= len_kv || ((c->mask & FROST_MASK_RIGHT_BOUND) && j > diag + c->right))
        return 0;
    return !((c->mask & FROST_MASK_LEFT_BOUND) && j <= diag - c->left);
}

/* Element offset of (b, h, i, j) in a [b|1, h|1, s_q, s_kv] tensor. */
static int64_t bias_at(const tu_buf *t, int64_t b, int64_t h, int64_t i, int64_t j)
{
    return (t->dims[0] > 1 ? b : 0) * t->strides[0] + (t->dims[1] > 1 ? h : 0) * t->strides[1] + i * t->strides[2] +
           j * t->strides[3];
}

static int64_t sink_at(const run *r, int64_t h)
{
    return h * r->sink.strides[r->sink_rank == 1 ? 0 : 1];
}

/* Gathers row (b, h, s) of an operand into dst[0..n). */
static void gather(const run *r, int opd, int64_t b, int64_t h, int64_t s, int64_t n, float *dst)
{
    for (int64_t d = 0; d < n; d++)
        dst[d] = (float)tu_buf_get(&r->lp[opd], at(r, opd, b, h, s, d));
}

/* Writes the naive dQ, dK, dV, d_bias, d_sink into the C_NAIVE copies.  Per batch the KV
 * heads are gathered into dense f32 arrays; per query row Q, dO and O. */
static void naive_backward(run *r)
{
    const bcase *c = r->c;
    const frost_dtype dt = c->dtype;
    const int64_t G = c->h_q / c->h_kv, dqk = c->d_qk, dv = c->d_v, nk = c->h_kv * c->s_kv;
    const float scale = (float)r->scale;
    float *kd = calloc((size_t)(nk * dqk), sizeof(float)), *vd = calloc((size_t)(nk * dv), sizeof(float));
    float *acc_k = calloc((size_t)(nk * dqk), sizeof(float)), *acc_v = calloc((size_t)(nk * dv), sizeof(float));
    float *row = calloc((size_t)(2 * dqk + 2 * dv), sizeof(float)), *dsink = calloc((size_t)c->h_q, sizeof(float));
    tu_buf *dbias = c->dbias ? &r->dbias[C_NAIVE] : NULL;
    if (!kd || !vd || !acc_k || !acc_v || !row || !dsink) {
        tu_failf("out of host memory in the naive backward");
        goto done;
    }
    float *q = row, *acc_q = row + dqk, *d_o = row + 2 * dqk, *o = row + 2 * dqk + dv;
    if (dbias) /* every element written: zeros, then the sums */
        for (int64_t bb = 0; bb < dbias->dims[0]; bb++)
            for (int64_t bh = 0; bh < dbias->dims[1]; bh++)
                for (int64_t i = 0; i < c->s_q; i++)
                    for (int64_t j = 0; j < c->s_kv; j++)
                        tu_buf_set(dbias, bias_at(dbias, bb, bh, i, j), 0.0);
    for (int b = 0; b < c->b; b++) {
        const int64_t lq = r->len[0][b], lk = r->len[1][b];
        memset(acc_k, 0, sizeof(float) * (size_t)(nk * dqk));
        memset(acc_v, 0, sizeof(float) * (size_t)(nk * dv));
        for (int64_t hk = 0; hk < c->h_kv; hk++)
            for (int64_t j = 0; j < lk; j++) {
                gather(r, OK, b, hk, j, dqk, kd + (hk * c->s_kv + j) * dqk);
                gather(r, OV, b, hk, j, dv, vd + (hk * c->s_kv + j) * dv);
            }
        for (int64_t h = 0; h < c->h_q; h++)
            for (int64_t i = 0; i < owned(r, ODQ, b); i++) {
                const int64_t hk = h / G;
                double lse = -INFINITY;
                float delta = 0.f;
                memset(acc_q, 0, sizeof(float) * (size_t)dqk);
                if (i < lq) {
                    lse = tu_buf_get(&r->stats, b * r->stats_st[0] + h * r->stats_st[1] + i * r->stats_st[2]);
                    gather(r, OQ, b, h, i, dqk, q);
                    gather(r, ODO, b, h, i, dv, d_o);
                    gather(r, OO, b, h, i, dv, o);
                    for (int64_t d = 0; d < dv; d++)
                        delta += d_o[d] * o[d];
                }
                for (int64_t j = 0; j < lk && lse != -INFINITY; j++) {
                    const float *k = kd + (hk * c->s_kv + j) * dqk, *v = vd + (hk * c->s_kv + j) * dv;
                    float s = 0.f, dp = 0.f;
                    if (!admissible(c, i, j, lq, lk))
                        continue;
                    for (int64_t d = 0; d < dqk; d++)
                        s += q[d] * k[d];
                    s = s * scale + (c->bias ? (float)tu_buf_get(&r->bias, bias_at(&r->bias, b, h, i, j)) : 0.f);
                    if (s == -INFINITY)
                        continue;
                    float p = expf(s - (float)lse), p_io = (float)round_io(dt, p);
                    for (int64_t d = 0; d < dv; d++)
                        dp += d_o[d] * v[d];
                    float ds = (float)round_io(dt, p * (dp - delta));
                    for (int64_t d = 0; d < dv; d++)
                        acc_v[(hk * c->s_kv + j) * dv + d] += p_io * d_o[d];
                    for (int64_t d = 0; d < dqk; d++) {
                        acc_k[(hk * c->s_kv + j) * dqk + d] += ds * q[d];
                        acc_q[d] += ds * k[d];
                    }
                    if (dbias) {
                        int64_t e = bias_at(dbias, b, h, i, j);
                        tu_buf_set(dbias, e, (float)tu_buf_get(dbias, e) + ds);
                    }
                }
                if (c->sink && lse != -INFINITY)
                    dsink[h] -= expf((float)tu_buf_get(&r->sink, sink_at(r, h)) - (float)lse) * delta;
                for (int64_t d = 0; d < dqk; d++)
                    tu_buf_set(&r->naive[0], at(r, ODQ, b, h, i, d), round_io(dt, scale * acc_q[d]));
            }
        for (int64_t hk = 0; hk < c->h_kv; hk++)
            for (int64_t j = 0; j < owned(r, ODK, b); j++) {
                for (int64_t d = 0; d < dqk; d++)
                    tu_buf_set(&r->naive[1], at(r, ODK, b, hk, j, d),
                               j < lk ? round_io(dt, scale * acc_k[(hk * c->s_kv + j) * dqk + d]) : 0.0);
                for (int64_t d = 0; d < dv; d++)
                    tu_buf_set(&r->naive[2], at(r, ODV, b, hk, j, d),
                               j < lk ? round_io(dt, acc_v[(hk * c->s_kv + j) * dv + d]) : 0.0);
            }
    }
    if (c->sink && c->dsink)
        for (int64_t h = 0; h < c->h_q; h++)
            tu_buf_set(&r->dsink[C_NAIVE], sink_at(r, h), dsink[h]);
done:
    free(kd), free(vd), free(acc_k), free(acc_v), free(row), free(dsink);
}

/* ---------------------------------------------------------------------------------- */
/* Comparison over whole allocations                                                     */
/* ---------------------------------------------------------------------------------- */

static void compare_output(const char *what, const tu_buf *gpu, const tu_buf *ref, const tu_buf *naive,
                           frost_dtype dtype)
{
    int64_t nan_bad = 0, nan_at = 0, naive_missing = 0, worst_at = 0;
    double max_gpu = 0, max_naive = 0, max_ref = 0, worst_got = 0, worst_ref = 0, nan_got = 0, nan_ref = 0;
    for (int64_t e = -ref->guard; e < ref->span + ref->guard; e++) {
        double g = tu_buf_get(gpu, e), f = tu_buf_get(ref, e), nv = tu_buf_get(naive, e);
        if (isnan(f) || isnan(g)) {
            if (isnan(f) != isnan(g) && nan_bad++ == 0)
                nan_at = e, nan_got = g, nan_ref = f;
            continue;
        }
        if (isnan(nv)) {
            naive_missing++;
            continue;
        }
        double err = isinf(f) || isinf(g) ? (g == f ? 0.0 : INFINITY) : fabs(g - f);
        if (err > max_gpu)
            max_gpu = err, worst_at = e, worst_got = g, worst_ref = f;
        max_naive = fmax(max_naive, fabs(nv - f));
        max_ref = fmax(max_ref, fabs(f));
    }
    double limit = K_NAIVE * max_naive + ATOL_C * tu_eps(dtype) * max_ref + 1e-6;
    if (nan_bad)
        tu_failf("%s: %lld element(s) written where the ref left NaN, or left NaN where the ref wrote; first at "
                 "element offset %lld (got %.6g, ref %.6g)", what, (long long)nan_bad, (long long)nan_at, nan_got,
                 nan_ref);
    if (!(max_gpu <= limit))
        tu_failf("%s: max |cuda - ref| = %.4g > limit %.4g (= %.0f x naive error %.4g + %.1f eps x max|ref| %.4g); "
                 "worst at element offset %lld: got %.9g, ref %.9g", what, max_gpu, limit, K_NAIVE, max_naive,
                 ATOL_C, max_ref, (long long)worst_at, worst_got, worst_ref);
    if (naive_missing)
        tu_failf("%s: the test's naive backward left %lld element(s) unwritten that the ref wrote (test bug)", what,
                 (long long)naive_missing);
    if (max_naive > NAIVE_SANITY * max_ref + 1e-4)
        tu_failf("%s: the naive backward disagrees with the ref (max error %.4g, max|ref| %.4g): test or ref bug",
                 what, max_naive, max_ref);
}

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

int main(void)
{
    frost_context *gpu = tu_cuda_context_or_skip();
    frost_context *cpu = NULL;
    TU_OK(frost_context_create(NULL, &cpu));
    uint64_t seed = tu_seed(20261204);
    int filter = tu_case_filter();
    enum { RANDOM_CASES = 30 };
    int n_table = (int)(sizeof table / sizeof table[0]), total = n_table + RANDOM_CASES, run_count = 0;
    for (int i = 0; i < total; i++) {
        if (filter >= 0 && i != filter)
            continue;
        bcase c = i < n_table ? table[i] : random_case(seed, i);
        tu_case_begin();
        run_case(&c, seed, i, cpu, gpu);
        tu_case_end();
        run_count++;
    }
    if (filter < 0) {
        tu_case_begin();
        check_refusals(gpu);
        tu_case_end();
        run_count++;
    }
    frost_context_destroy(cpu);
    frost_context_destroy(gpu);
    return tu_finish(run_count);
}
