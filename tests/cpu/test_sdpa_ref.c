/*
 * test_sdpa_ref.c — the reference engine's attention against formulas written here.
 * This file holds the cases, builds and runs their graphs; the naive formulas are in
 * sdpa_ref_naive.c, the checks in sdpa_ref_checks.c, what they share in sdpa_ref.h.
 *
 * Forward: each case is recomputed by a naive fp64 implementation (sdpa_ref_naive.c) that
 * gathers the inputs into dense [b, h, s, d] arrays, forms the full score matrix of each
 * (batch, head) block, masks it by "distance from the diagonal", takes a row softmax with
 * the sink as an extra column and multiplies by V.  It shares no code with sdpa_ref.c.
 * Backward: frost's gradients are compared with central finite differences of that naive
 * forward (fp64, step 1e-5) for the loss L = sum(dO * O); a perturbation recomputes only
 * the blocks it touches.  frost forms delta = rowsum(dO * O) from O as stored, which
 * differs from the exact O by e_i = rowsum(dO * (O_stored - O_exact)); since the delta term
 * of every gradient is delta_i times the gradient of lse_i, frost computes exactly the
 * gradient of L' = L - sum_i e_i * lse_i, and that is what the test differentiates.  So the
 * comparison stays tight in f16 / bf16 too (only output rounding and the f32 LSE remain).
 *
 * A backward case's graph is fwd -> bwd (the backward reads the forward's O and stats).
 * Every output sits in a NaN-filled guarded buffer: rows an output owns beyond the actual
 * length must be 0 (stats -inf), tokens of a ragged output owned by no batch must stay
 * NaN, guards and stride gaps must stay NaN.  Backward cases run twice and must match
 * bitwise.  Validation errors are covered by test_sdpa_validation.c.
 *
 * Cases: a named table, then random cases from a seeded generator.
 *   FROST_TEST_SEED=<n> changes the random cases; FROST_TEST_CASE=<n> runs one case.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sdpa_ref.h"
#include "ref_test_util.h"

#define SHAPE(B, HQ, HKV, SQ, SKV, DQK, DV) .b = B, .h_q = HQ, .h_kv = HKV, .s_q = SQ, .s_kv = SKV, .d_qk = DQK, .d_v = DV
#define F32 FROST_F32
#define F16 FROST_F16
#define BF16 FROST_BF16
#define L FROST_MASK_LEFT_BOUND
#define R FROST_MASK_RIGHT_BOUND
#define BR FROST_DIAG_BOTTOM_RIGHT
static const sdpa_case table[] = {
    {"mha f32 bhsd", SHAPE(2, 3, 3, 7, 9, 8, 8), .dtype = F32},
    {"gqa2 bf16 bshd causal tl", SHAPE(2, 8, 4, 9, 9, 16, 16), .dtype = BF16, .mask = R, .layout = LAYOUT_BSHD},
    {"gqa4 f16 causal br s_q<s_kv", SHAPE(1, 8, 2, 5, 12, 8, 8), .dtype = F16, .mask = R, .align = BR,
     .layout = LAYOUT_BSHD},
    {"mqa sliding window br", SHAPE(2, 6, 1, 10, 10, 8, 8), .dtype = F32, .mask = L | R, .left = 3, .align = BR,
     .layout = LAYOUT_RANDOM},
    {"both bounds tl", SHAPE(1, 2, 2, 11, 8, 4, 4), .dtype = F32, .mask = L | R, .left = 2, .right = 1},
    {"bounds larger than s", SHAPE(2, 2, 1, 6, 7, 4, 4), .dtype = BF16, .mask = L | R, .left = 50, .right = 40,
     .align = BR, .layout = LAYOUT_RANDOM},
    {"causal br s_q>s_kv (empty top rows)", SHAPE(1, 2, 2, 9, 4, 4, 4), .dtype = F32, .mask = R, .align = BR,
     .stats = 1},
    {"left bound 0: every row empty", SHAPE(1, 2, 1, 4, 4, 4, 4), .dtype = F32, .mask = L | R, .stats = 1},
    {"decode s_q=1", SHAPE(3, 4, 2, 1, 13, 16, 16), .dtype = BF16, .mask = R, .align = BR, .layout = LAYOUT_BSHD,
     .stats = 1},
    {"s_kv=1", SHAPE(2, 2, 2, 5, 1, 8, 8), .dtype = F16, .layout = LAYOUT_RANDOM},
    {"d_qk != d_v", SHAPE(2, 4, 2, 6, 7, 12, 5), .dtype = F32, .mask = R, .left = 1, .layout = LAYOUT_RANDOM},
    {"seq_len padding with zeros", SHAPE(3, 2, 1, 8, 9, 8, 8), .dtype = F32, .mask = R, .align = BR,
     .pad = PAD_Q | PAD_KV, .zero_len = 1, .stats = 1},
    {"ragged q+kv thd with zero lengths", SHAPE(3, 4, 2, 7, 8, 8, 8), .dtype = BF16, .layout = LAYOUT_BSHD,
     .ragged = RAG_Q | RAG_KV, .zero_len = 1, .stats = 1},
    {"ragged + seq_len, causal br", SHAPE(3, 2, 2, 8, 8, 8, 8), .dtype = F32, .mask = R, .align = BR,
     .layout = LAYOUT_RANDOM, .ragged = RAG_Q | RAG_KV, .pad = PAD_Q | PAD_KV, .zero_len = 1, .stats = 1,
     .user_out = 1},
    {"ragged q only", SHAPE(2, 2, 1, 6, 5, 4, 4), .dtype = F16, .layout = LAYOUT_RANDOM, .ragged = RAG_Q},
    {"bias full f32", SHAPE(2, 2, 2, 5, 6, 8, 8), .dtype = BF16, .bias = BIAS_FULL},
    {"bias [1,h] io dtype", SHAPE(2, 4, 2, 5, 6, 8, 8), .dtype = F16, .mask = R, .layout = LAYOUT_BSHD,
     .bias = BIAS_1H, .bias_io = 1},
    {"bias [b,1]", SHAPE(2, 2, 1, 5, 6, 8, 8), .dtype = F32, .layout = LAYOUT_RANDOM, .bias = BIAS_B1},
    {"bias [1,1]", SHAPE(2, 2, 2, 4, 4, 8, 8), .dtype = F32, .layout = LAYOUT_RANDOM, .bias = BIAS_11},
    {"bias with -inf entries and a -inf row", SHAPE(2, 2, 1, 5, 6, 4, 4), .dtype = F16, .bias = BIAS_1H,
     .bias_io = 1, .bias_inf = 1, .stats = 1},
    {"sink + stats", SHAPE(2, 4, 2, 6, 6, 8, 8), .dtype = F32, .mask = R, .sink = 1, .stats = 1},
    {"sink on empty rows", SHAPE(1, 2, 2, 4, 4, 4, 4), .dtype = F32, .mask = L | R, .sink = 1, .stats = 1},
    {"negative scale", SHAPE(2, 2, 2, 6, 6, 8, 8), .dtype = F32, .scale = -0.7, .layout = LAYOUT_RANDOM, .stats = 1},
    {"bwd f32 mha", SHAPE(2, 2, 2, 5, 6, 4, 4), .dtype = F32, .stats = 1, .backward = 1},
    {"bwd gqa causal br bias sink", SHAPE(2, 4, 2, 5, 7, 4, 3), .dtype = F32, .mask = R, .align = BR,
     .layout = LAYOUT_RANDOM, .bias = BIAS_FULL, .sink = 1, .stats = 1, .backward = 1, .user_out = 1},
    {"bwd ragged + padding", SHAPE(3, 2, 1, 6, 6, 4, 4), .dtype = F32, .mask = R, .left = 1, .layout = LAYOUT_RANDOM,
     .ragged = RAG_Q | RAG_KV, .pad = PAD_Q | PAD_KV, .zero_len = 1, .stats = 1, .backward = 1},
    {"bwd bf16 sliding window", SHAPE(2, 4, 1, 7, 7, 8, 8), .dtype = BF16, .mask = L | R, .left = 3, .align = BR,
     .layout = LAYOUT_BSHD, .stats = 1, .backward = 1},
    {"bwd f16 bias [1,1] sink", SHAPE(2, 2, 2, 5, 5, 4, 4), .dtype = F16, .scale = 0.5, .layout = LAYOUT_RANDOM,
     .bias = BIAS_11, .sink = 1, .stats = 1, .backward = 1, .user_out = 1},
    {"bwd empty rows with sink", SHAPE(1, 2, 1, 4, 4, 4, 4), .dtype = F32, .mask = L | R, .sink = 1, .stats = 1,
     .backward = 1},
    {"bwd negative scale bias [b,1]", SHAPE(2, 2, 2, 4, 5, 3, 5), .dtype = F32, .scale = -0.6, .mask = L, .left = 2,
     .layout = LAYOUT_RANDOM, .bias = BIAS_B1, .stats = 1, .backward = 1},
    {"bwd bias -inf entries, sink", SHAPE(2, 2, 2, 4, 5, 4, 4), .dtype = F32, .mask = R, .align = BR,
     .bias = BIAS_FULL, .bias_inf = 1, .sink = 1, .stats = 1, .backward = 1},
    {"bwd bias -inf entries", SHAPE(2, 2, 1, 4, 5, 4, 4), .dtype = BF16, .bias = BIAS_B1, .bias_inf = 1, .stats = 1,
     .backward = 1},
    {"bwd ragged kv gqa bf16 bias [1,h]", SHAPE(2, 4, 2, 5, 6, 4, 4), .dtype = BF16, .mask = R, .right = 1,
     .ragged = RAG_KV, .bias = BIAS_1H, .bias_io = 1, .stats = 1, .backward = 1},
};
#undef SHAPE
#undef F32
#undef F16
#undef BF16
#undef L
#undef R
#undef BR

/* ---------------------------------------------------------------------------------- */
/* Tensors of a case                                                                     */
/* ---------------------------------------------------------------------------------- */

static void random_order(tu_rng *r, int n, int *order)
{
    for (int i = 0; i < n; i++)
        order[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)tu_int(r, 0, i), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
}

/* Chooses strides for the layout and allocates the guarded buffer. */
static void tt_alloc(tt *t, tu_rng *r, frost_dtype dt, const int64_t dims[4], const int64_t *offs, int64_t tokens,
                     int layout)
{
    memset(t, 0, sizeof *t);
    memcpy(t->dims, dims, sizeof t->dims);
    t->offs = offs;
    t->tokens = tokens;
    int gap = layout == LAYOUT_RANDOM ? 3 : 0;
    if (offs) {
        int64_t pd[3] = {tokens, dims[1], dims[3]}, ps[3];
        int order[3] = {0, 1, 2};
        if (layout == LAYOUT_RANDOM)
            random_order(r, 3, order);
        tu_gapped_strides(r, 3, pd, order, gap, 1, ps);
        t->st[0] = dims[2] * ps[0];
        t->st[1] = ps[1];
        t->st[2] = ps[0];
        t->st[3] = ps[2];
        tu_buf_alloc(&t->buf, dt, 3, pd, ps, 0);
    } else {
        int order[4] = {0, 1, 2, 3};
        if (layout == LAYOUT_BSHD)
            order[1] = 2, order[2] = 1;
        else if (layout == LAYOUT_RANDOM)
            random_order(r, 4, order);
        tu_gapped_strides(r, 4, dims, order, gap, 1, t->st);
        tu_buf_alloc(&t->buf, dt, 4, dims, t->st, 0);
    }
}

static frost_tensor add_tensor(frost_graph *g, const char *name, frost_dtype dt, int rank, const int64_t *dims,
                               const int64_t *strides, frost_tensor ragged)
{
    frost_tensor_desc d = {.name = name, .dtype = dt, .rank = rank, .ragged_offset = ragged};
    for (int k = 0; k < rank; k++) {
        d.dims[k] = dims[k];
        d.strides[k] = strides ? strides[k] : 0;
    }
    frost_tensor id = 0;
    TU_OK(frost_graph_add_tensor(g, &d, &id));
    return id;
}

/* Allocates the buffer of an output frost created, from the desc it inferred. */
static void tt_adopt(tt *t, const frost_graph *g, frost_tensor id, const int64_t *offs, int64_t tokens)
{
    frost_tensor_desc d;
    memset(t, 0, sizeof *t);
    TU_OK(frost_graph_tensor_desc(g, id, &d));
    TU_CHECK((d.ragged_offset != 0) == (offs != NULL));
    t->id = id;
    t->offs = offs;
    t->tokens = tokens;
    memcpy(t->dims, d.dims, sizeof t->dims);
    memcpy(t->st, d.strides, sizeof t->st);
    if (offs) {
        int64_t pd[3] = {tokens, d.dims[1], d.dims[3]}, ps[3] = {d.strides[2], d.strides[1], d.strides[3]};
        tu_buf_alloc(&t->buf, d.dtype, 3, pd, ps, 0);
    } else {
        tu_buf_alloc(&t->buf, d.dtype, 4, d.dims, d.strides, 0);
    }
}

/* ---------------------------------------------------------------------------------- */
/* One case                                                                              */
/* ---------------------------------------------------------------------------------- */

static void make_lengths(run *r)
{
    const sdpa_case *c = r->c;
    int64_t lo = c->zero_len ? 0 : 1;
    for (int b = 0; b < c->b; b++) {
        r->slice_q[b] = (c->ragged & RAG_Q) ? tu_int(&r->rng, lo, c->s_q) : c->s_q;
        r->slice_kv[b] = (c->ragged & RAG_KV) ? tu_int(&r->rng, lo, c->s_kv) : c->s_kv;
        r->len_q[b] = (c->pad & PAD_Q) ? tu_int(&r->rng, lo, r->slice_q[b]) : r->slice_q[b];
        r->len_kv[b] = (c->pad & PAD_KV) ? tu_int(&r->rng, lo, r->slice_kv[b]) : r->slice_kv[b];
    }
    if (c->zero_len) { /* batch 0 has no queries, the last batch no keys */
        if (c->pad & PAD_Q)
            r->len_q[0] = 0;
        else if (c->ragged & RAG_Q)
            r->len_q[0] = r->slice_q[0] = 0;
        if (c->pad & PAD_KV)
            r->len_kv[c->b - 1] = 0;
        else if (c->ragged & RAG_KV)
            r->len_kv[c->b - 1] = r->slice_kv[c->b - 1] = 0;
    }
    r->offs_dtype = tu_int(&r->rng, 0, 1) ? FROST_I64 : FROST_I32;
    for (int side = 0; side < 2; side++) {
        int64_t *offs = side ? r->offs_kv : r->offs_q, *slice = side ? r->slice_kv : r->slice_q;
        offs[0] = tu_int(&r->rng, 0, 2); /* tokens before the first sequence belong to no batch */
        for (int b = 0; b < c->b; b++)
            offs[b + 1] = offs[b] + slice[b];
        *(side ? &r->tokens_kv : &r->tokens_q) = offs[c->b] + tu_int(&r->rng, 0, 2);
        for (int b = 0; b <= c->b; b++) {
            if (r->offs_dtype == FROST_I64)
                r->offs_mem[side][b] = offs[b];
            else
                ((int32_t *)r->offs_mem[side])[b] = (int32_t)offs[b];
        }
        int64_t *len = side ? r->len_kv : r->len_q;
        for (int b = 0; b < c->b; b++)
            r->seq_mem[side][b] = (int32_t)len[b];
    }
}

static void bind(run *r, frost_tensor id, void *ptr)
{
    if (id)
        r->bind[r->nb++] = (frost_binding){id, ptr};
}

/* An operand [b, h, s, d] the caller declares (inputs, and outputs in user_out cases). */
static void declare(run *r, tt *t, const char *name, int64_t h, int64_t s, int64_t d, int kv, int ragged)
{
    int64_t dims[4] = {r->c->b, h, s, d};
    const int64_t *offs = ragged ? (kv ? r->offs_kv : r->offs_q) : NULL;
    tt_alloc(t, &r->rng, r->c->dtype, dims, offs, kv ? r->tokens_kv : r->tokens_q, r->c->layout);
    t->id = add_tensor(r->g, name, r->c->dtype, 4, dims, t->st, ragged ? r->offs_id[kv] : 0);
}

static void small_buf(tu_buf *b, tu_rng *rng, frost_dtype dt, int rank, const int64_t *dims, int gapped)
{
    int64_t st[4];
    int order[4] = {0, 1, 2, 3};
    tu_gapped_strides(rng, rank, dims, order, gapped ? 2 : 0, 1, st);
    if (rank == 1 && gapped)
        st[0] = 2;
    tu_buf_alloc(b, dt, rank, dims, st, 0);
}

static frost_tensor add_buf(run *r, const char *name, const tu_buf *b, frost_tensor ragged)
{
    return add_tensor(r->g, name, b->dtype, b->rank, b->dims, b->strides, ragged);
}

/* Builds fwd (and bwd) into r->g; allocates every buffer. */
static void build_graph(run *r, frost_context *ctx)
{
    const sdpa_case *c = r->c;
    int rq = (c->ragged & RAG_Q) != 0, rkv = (c->ragged & RAG_KV) != 0, gap = c->layout == LAYOUT_RANDOM;
    TU_OK(frost_graph_create(ctx, &r->g));
    int64_t nb1 = c->b + 1, seq4[4] = {c->b, 1, 1, 1};
    for (int side = 0; side < 2; side++) {
        if (side ? rkv : rq)
            r->offs_id[side] = add_tensor(r->g, side ? "cu_kv" : "cu_q", r->offs_dtype, 1, &nb1, NULL, 0);
        if (c->pad & (side ? PAD_KV : PAD_Q))
            r->seq_id[side] = add_tensor(r->g, side ? "seq_kv" : "seq_q", FROST_I32, tu_int(&r->rng, 0, 1) ? 1 : 4,
                                         seq4, NULL, 0);
    }
    declare(r, &r->q, "q", c->h_q, c->s_q, c->d_qk, 0, rq);
    declare(r, &r->k, "k", c->h_kv, c->s_kv, c->d_qk, 1, rkv);
    declare(r, &r->v, "v", c->h_kv, c->s_kv, c->d_v, 1, rkv);
    frost_sdpa_desc d = {.q = r->q.id, .k = r->k.id, .v = r->v.id, .seq_len_q = r->seq_id[0],
                         .seq_len_kv = r->seq_id[1]};
    d.attrs = (frost_sdpa_attrs){c->scale, c->mask, c->left, c->right, (frost_diag_align)c->align};
    if (c->bias) {
        int64_t dims[4] = {c->bias == BIAS_FULL || c->bias == BIAS_B1 ? c->b : 1,
                           c->bias == BIAS_FULL || c->bias == BIAS_1H ? c->h_q : 1, c->s_q, c->s_kv};
        memcpy(r->bias_dims, dims, sizeof dims);
        small_buf(&r->bias, &r->rng, c->bias_io ? c->dtype : FROST_F32, 4, dims, gap);
        d.bias = r->bias_id = add_buf(r, "bias", &r->bias, 0);
    }
    if (c->sink) {
        int64_t dims4[4] = {1, c->h_q, 1, 1}, dims1 = c->h_q;
        if (tu_int(&r->rng, 0, 1))
            small_buf(&r->sink, &r->rng, FROST_F32, 1, &dims1, gap);
        else
            small_buf(&r->sink, &r->rng, FROST_F32, 4, dims4, gap);
        d.sink = r->sink_id = add_buf(r, "sink", &r->sink, 0);
    }
    frost_sdpa_outputs out = {FROST_TENSOR_AUTO, c->stats ? FROST_TENSOR_AUTO : 0};
    int64_t stats_dims[4] = {c->b, c->h_q, c->s_q, 1};
    if (c->user_out) {
        declare(r, &r->o, "o", c->h_q, c->s_q, c->d_v, 0, rq);
        out.o = r->o.id;
        if (c->stats) {
            small_buf(&r->stats, &r->rng, FROST_F32, 4, stats_dims, 1);
            out.stats = r->stats_id = add_buf(r, "stats", &r->stats, 0);
        }
    }
    TU_OK(frost_graph_add_sdpa(r->g, &d, &out));
    if (!c->user_out) {
        tt_adopt(&r->o, r->g, out.o, rq ? r->offs_q : NULL, r->tokens_q);
        if (c->stats) {
            frost_tensor_desc sd;
            TU_OK(frost_graph_tensor_desc(r->g, out.stats, &sd));
            tu_buf_alloc(&r->stats, FROST_F32, 4, sd.dims, sd.strides, 0);
            r->stats_id = out.stats;
        }
    }
    if (!c->backward)
        return;
    declare(r, &r->d_o, "d_o", c->h_q, c->s_q, c->d_v, 0, rq);
    frost_sdpa_backward_desc bd = {.q = d.q, .k = d.k, .v = d.v, .o = r->o.id, .d_o = r->d_o.id,
                                   .stats = r->stats_id, .bias = d.bias, .sink = d.sink,
                                   .seq_len_q = d.seq_len_q, .seq_len_kv = d.seq_len_kv, .attrs = d.attrs,
                                   .deterministic = 1};
    frost_sdpa_grads gr = {FROST_TENSOR_AUTO, FROST_TENSOR_AUTO, FROST_TENSOR_AUTO, c->bias ? FROST_TENSOR_AUTO : 0,
                           c->sink ? FROST_TENSOR_AUTO : 0};
    if (c->user_out) {
        declare(r, &r->dq, "d_q", c->h_q, c->s_q, c->d_qk, 0, rq);
        declare(r, &r->dk, "d_k", c->h_kv, c->s_kv, c->d_qk, 1, rkv);
        declare(r, &r->dv, "d_v", c->h_kv, c->s_kv, c->d_v, 1, rkv);
        gr.d_q = r->dq.id, gr.d_k = r->dk.id, gr.d_v = r->dv.id;
        if (c->bias) {
            small_buf(&r->dbias, &r->rng, FROST_F32, 4, r->bias_dims, 1);
            gr.d_bias = r->dbias_id = add_buf(r, "d_bias", &r->dbias, 0);
        }
        if (c->sink) {
            int64_t dims4[4] = {1, c->h_q, 1, 1};
            small_buf(&r->dsink, &r->rng, FROST_F32, 4, dims4, 1);
            gr.d_sink = r->dsink_id = add_buf(r, "d_sink", &r->dsink, 0);
        }
    }
    TU_OK(frost_graph_add_sdpa_backward(r->g, &bd, &gr));
    if (!c->user_out) {
        tt_adopt(&r->dq, r->g, gr.d_q, rq ? r->offs_q : NULL, r->tokens_q);
        tt_adopt(&r->dk, r->g, gr.d_k, rkv ? r->offs_kv : NULL, r->tokens_kv);
        tt_adopt(&r->dv, r->g, gr.d_v, rkv ? r->offs_kv : NULL, r->tokens_kv);
        frost_tensor_desc td;
        if (c->bias) {
            TU_OK(frost_graph_tensor_desc(r->g, gr.d_bias, &td));
            tu_buf_alloc(&r->dbias, FROST_F32, 4, td.dims, td.strides, 0);
            r->dbias_id = gr.d_bias;
        }
        if (c->sink) {
            TU_OK(frost_graph_tensor_desc(r->g, gr.d_sink, &td));
            tu_buf_alloc(&r->dsink, FROST_F32, td.rank, td.dims, td.strides, 0);
            r->dsink_id = gr.d_sink;
        }
    }
}

/* ---------------------------------------------------------------------------------- */
/* Driver                                                                                */
/* ---------------------------------------------------------------------------------- */

static void bind_all(run *r)
{
    tt *ops[] = {&r->q, &r->k, &r->v, &r->o, &r->d_o, &r->dq, &r->dk, &r->dv};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        bind(r, ops[i]->id, ops[i]->buf.data);
    bind(r, r->bias_id, r->bias.data);
    bind(r, r->sink_id, r->sink.data);
    bind(r, r->stats_id, r->stats.data);
    bind(r, r->dbias_id, r->dbias.data);
    bind(r, r->dsink_id, r->dsink.data);
    for (int side = 0; side < 2; side++) {
        bind(r, r->offs_id[side], r->offs_mem[side]);
        bind(r, r->seq_id[side], r->seq_mem[side]);
    }
}

static void free_run(run *r)
{
    tt *ops[] = {&r->q, &r->k, &r->v, &r->o, &r->d_o, &r->dq, &r->dk, &r->dv};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        tu_buf_free(&ops[i]->buf);
    tu_buf *bufs[] = {&r->bias, &r->sink, &r->stats, &r->dbias, &r->dsink};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        tu_buf_free(bufs[i]);
    frost_graph_destroy(r->g);
}

static void run_case(const sdpa_case *c, uint64_t seed, int index, frost_context *ctx)
{
    char desc[400];
    snprintf(desc, sizeof desc,
             "%s: b=%d h_q=%d h_kv=%d s_q=%d s_kv=%d d_qk=%d d_v=%d %s scale=%g mask=%u left=%d right=%d align=%d "
             "layout=%d ragged=%d pad=%d zero_len=%d bias=%d%s%s sink=%d stats=%d bwd=%d user_out=%d",
             c->name, c->b, c->h_q, c->h_kv, c->s_q, c->s_kv, c->d_qk, c->d_v, frost_dtype_name(c->dtype), c->scale,
             (unsigned)c->mask, c->left, c->right, c->align, c->layout, c->ragged, c->pad, c->zero_len, c->bias,
             c->bias_io ? "(io)" : "", c->bias_inf ? "(-inf)" : "", c->sink, c->stats, c->backward, c->user_out);
    tu_set_context("test_sdpa_ref", seed, index, desc);
    int failures_before = tu_failures();
    static run r;
    memset(&r, 0, sizeof r);
    r.c = c;
    r.rng = tu_rng_make(seed * 1000003u + (uint64_t)index);
    make_lengths(&r);
    build_graph(&r, ctx);
    if (tu_failures() != failures_before || frost_graph_build(r.g, NULL) != FROST_OK) {
        tu_failf("graph construction failed: %s", frost_last_error());
        free_run(&r);
        return;
    }
    tt *ins[] = {&r.q, &r.k, &r.v, &r.d_o};
    for (int i = 0; i < 4; i++)
        if (ins[i]->buf.alloc)
            tu_buf_fill_uniform(&ins[i]->buf, &r.rng, -1.0, 1.0);
    if (c->bias)
        tu_buf_fill_uniform(&r.bias, &r.rng, -1.0, 1.0);
    if (c->bias_inf) { /* an additive mask: some keys hidden, and row 0 hidden entirely */
        const int64_t *bd = r.bias.dims, *bs = r.bias.strides;
        for (int64_t e = 0; e < bd[0] * bd[1] * bd[2] * bd[3]; e++) {
            int64_t j = e % bd[3], i = e / bd[3] % bd[2], h = e / (bd[2] * bd[3]) % bd[1], b = e / (bd[1] * bd[2] * bd[3]);
            if (i == 0 || tu_int(&r.rng, 0, 3) == 0)
                tu_buf_set(&r.bias, b * bs[0] + h * bs[1] + i * bs[2] + j * bs[3], -INFINITY);
        }
    }
    if (c->sink)
        tu_buf_fill_uniform(&r.sink, &r.rng, -1.5, 1.5);
    bind_all(&r);
    size_t ws_size = 0;
    TU_OK(frost_graph_workspace_size(r.g, &ws_size));
    void *ws = ws_size ? malloc(ws_size) : NULL;
    TU_OK(frost_graph_execute(r.g, r.bind, r.nb, ws, NULL));

    sdpa_ref_check_run(&r, ws);
    free(ws);
    free_run(&r);
}

/* A random case; backward ones stay small (finite differences cost one block per input). */
static sdpa_case random_case(uint64_t seed, int index, int backward)
{
    tu_rng r = tu_rng_make(seed ^ (0x5d9a0000ull + (uint64_t)index * 0x9e37ull));
    sdpa_case c = {.name = backward ? "random bwd" : "random fwd"};
    static const frost_dtype dtypes[] = {FROST_F32, FROST_F16, FROST_BF16};
    static const double scales[] = {0, 0, 0.3, -0.45, 1.2};
    int smax = backward ? 10 : 24, dmax = backward ? 10 : 32;
    c.b = (int)tu_int(&r, 1, MAXB - 1);
    int shape = (int)tu_int(&r, 0, 3); /* MHA, GQA 2, GQA 4, MQA */
    c.h_kv = shape == 3 ? 1 : (int)tu_int(&r, 1, 2);
    c.h_q = shape == 3 ? (int)tu_int(&r, 1, 5) : c.h_kv * (shape == 0 ? 1 : shape == 1 ? 2 : 4);
    c.s_q = tu_int(&r, 0, 4) ? (int)tu_int(&r, 1, smax) : 1;
    c.s_kv = tu_int(&r, 0, 4) ? (int)tu_int(&r, 1, smax) : 1;
    c.d_qk = (int)tu_int(&r, 1, dmax);
    c.d_v = tu_int(&r, 0, 1) ? c.d_qk : (int)tu_int(&r, 1, dmax);
    c.dtype = dtypes[tu_int(&r, 0, 2)];
    c.scale = scales[tu_int(&r, 0, 4)];
    c.mask = (uint32_t)tu_int(&r, 0, 3);
    c.left = (int)tu_int(&r, 0, c.s_kv + 2);
    c.right = tu_int(&r, 0, 1) ? 0 : (int)tu_int(&r, 0, c.s_kv + 2);
    c.align = (int)tu_int(&r, 0, 1);
    c.layout = (int)tu_int(&r, 0, 2);
    c.ragged = tu_int(&r, 0, 2) ? 0 : (int)tu_int(&r, 1, 3);
    c.pad = tu_int(&r, 0, 2) ? 0 : (int)tu_int(&r, 1, 3);
    c.zero_len = (int)tu_int(&r, 0, 1);
    c.bias = tu_int(&r, 0, 1) ? 0 : (int)tu_int(&r, 1, 4);
    c.bias_io = (int)tu_int(&r, 0, 1);
    c.bias_inf = c.bias && tu_int(&r, 0, 4) == 0;
    c.sink = tu_int(&r, 0, 2) == 0;
    c.stats = backward || tu_int(&r, 0, 1);
    c.backward = backward;
    c.user_out = (int)tu_int(&r, 0, 1);
    return c;
}

enum { NUM_TABLE = (int)(sizeof table / sizeof table[0]), RANDOM_FWD = 600, RANDOM_BWD = 400 };

static void run_index(frost_context *ctx, int i, uint64_t seed)
{
    const sdpa_case c = i < NUM_TABLE ? table[i] : random_case(seed, i, i >= NUM_TABLE + RANDOM_FWD);
    run_case(&c, seed, i, ctx);
}

int main(void)
{
    frost_context *ctx = NULL;
    return tu_ref_main(&ctx, 20261202, NUM_TABLE + RANDOM_FWD + RANDOM_BWD, NULL, run_index);
}
