/*
 * sdpa_bwd_gpu_tensors.c — the tensors of one test_sdpa_bwd_gpu case (see sdpa_bwd_gpu.h):
 * per-batch lengths and ragged offsets, strided NaN-guarded buffers of every operand in
 * the I/O dtype (and f32 copies for the ref), and the graphs: the ref forward that makes
 * O and the LSE stats, and the backward of the ref and cuda copies.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_util.h"
#include "sdpa_bwd_gpu.h"

const int opd_side[NOPD] = {0, 1, 1, 0, 0, 0, 1, 1};
const char *const opd_names[NOPD] = {"q", "k", "v", "o", "d_o", "d_q", "d_k", "d_v"};

void make_lengths(run *r)
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
void clone_as(tu_buf *dst, const tu_buf *src, frost_dtype dt, int copy_values)
{
    tu_buf_alloc(dst, dt, src->rank, src->dims, src->strides, src->span);
    if (copy_values)
        for (int64_t e = -src->guard; e < src->span + src->guard; e++)
            tu_buf_set(dst, e, tu_buf_get(src, e));
}

void alloc_all(run *r)
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

void free_run(run *r)
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

/* The host buffers of one backward graph (copy C_REF: f32 I/O; C_GPU: 16-bit). */
void graph_buffers(run *r, int copy, tu_buf *bufs[NT])
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
void run_forward(run *r, frost_context *cpu)
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
frost_graph *make_bwd_graph(run *r, frost_context *ctx, int copy, frost_tensor ids[NT])
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
