/*
 * test_sdpa_fwd_gpu.c — the cuda engine's attention forward (sdpa_fwd.cu) against the
 * reference engine.
 *
 * Each case builds the same graph twice, once in a CPU context (the ref engine, fp64
 * accumulation) and once in a CUDA context (build option engine = "cuda", so a refusal is
 * a failure, never a silent fallback), runs both on the same inputs and compares every
 * element of every output allocation, guards and stride gaps included: both copies start
 * NaN-poisoned, the GPU one is copied to the device whole (guards and all) and back, so an
 * element must be NaN on one side exactly when it is NaN on the other, and otherwise agree
 * within the tolerance.  That one rule catches unwritten rows, writes into gaps, tokens of
 * a ragged output owned by no batch, and out-of-bounds writes into the margins.
 *
 * Tolerance (DESIGN.md "Pass rule", in its simplest honest form).  The kernel rounds the
 * probabilities P to the I/O dtype before P.V (relative error eps/2 each, so at most
 * eps/2 * max|V| on an output) and rounds O once more (eps/2 * |O|); everything else is
 * f32 and far smaller.  A naive low-precision computation makes errors of the same kind,
 * about eps * (max|O| + max|V|).  Inputs are uniform in [-1, 1], so max|V| <= 1 and
 *     |O_gpu - O_ref| <= O_TOL_C * eps(dtype) * (max|O_ref| + 1),   O_TOL_C = 4
 * allows twice that naive bound.  The LSE is all-f32 on both sides of the row sum, so it
 * must agree to LSE_TOL_REL * (1 + max|LSE_ref|) (a masking mistake moves it by far more),
 * and -inf must match -inf exactly.  Failures print the worst element and the
 * reproducer line (FROST_TEST_SEED / FROST_TEST_CASE).
 *
 * Cases: a named table covering head dims 8..256, d_qk != d_v, GQA/MQA, every mask in both
 * alignments, padding, ragged (i32 and i64 offsets), zero lengths, bias broadcasts in f32
 * and the I/O dtype, sinks, stats, negative and large scales, gapped 16-byte-aligned
 * strides, unaligned strides (element-wise load path) and a misaligned base pointer; then
 * random cases; then the selector's refusals.
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

#define O_TOL_C 4.0
#define LSE_TOL_REL 2e-5

typedef struct fcase {
    const char *name;
    int b, h_q, h_kv, s_q, s_kv, d_qk, d_v;
    frost_dtype dtype;
    double scale;
    uint32_t mask;
    int left, right, align;
    int layout, ragged, pad, zero_len;
    int bias, bias_io, sink, stats;
    int auto_out, misalign;
} fcase;

#define SHAPE(B, HQ, HKV, SQ, SKV, DQK, DV) .b = B, .h_q = HQ, .h_kv = HKV, .s_q = SQ, .s_kv = SKV, .d_qk = DQK, .d_v = DV
#define F16 .dtype = FROST_F16
#define BF16 .dtype = FROST_BF16
#define L FROST_MASK_LEFT_BOUND
#define R FROST_MASK_RIGHT_BOUND
#define BR FROST_DIAG_BOTTOM_RIGHT
static const fcase table[] = {
    {"bf16 d128 mha causal tl", SHAPE(2, 4, 4, 256, 256, 128, 128), BF16, .mask = R, .stats = 1},
    {"f16 d64 gqa4 causal br s_q<s_kv", SHAPE(2, 8, 2, 100, 300, 64, 64), F16, .mask = R, .align = BR,
     .layout = LAYOUT_BSHD, .stats = 1},
    {"bf16 d256 sliding window br", SHAPE(1, 2, 1, 200, 200, 256, 256), BF16, .mask = L | R, .left = 64, .align = BR,
     .stats = 1},
    {"f16 d8 tiny head", SHAPE(3, 2, 2, 17, 33, 8, 8), F16, .layout = LAYOUT_GAPPED, .stats = 1},
    {"bf16 d40 d_v 24 (head dims padded to 16)", SHAPE(2, 3, 1, 70, 65, 40, 24), BF16, .mask = R, .stats = 1},
    {"f16 d_qk 192 d_v 128", SHAPE(1, 4, 2, 130, 150, 192, 128), F16, .mask = R, .align = BR, .stats = 1},
    {"bf16 d_qk 64 d_v 256", SHAPE(2, 2, 2, 90, 80, 64, 256), BF16, .layout = LAYOUT_BSHD, .stats = 1},
    {"f16 d136 (144 in shared memory)", SHAPE(1, 2, 2, 65, 129, 136, 136), F16, .mask = L, .left = 40, .stats = 1},
    {"mqa decode s_q=1 causal br", SHAPE(4, 8, 1, 1, 1000, 128, 128), BF16, .mask = R, .align = BR,
     .layout = LAYOUT_BSHD, .stats = 1},
    {"long s=1030 both bounds tl", SHAPE(1, 2, 2, 1030, 1030, 64, 64), F16, .mask = L | R, .left = 300, .right = 7,
     .stats = 1},
    {"s_q > s_kv causal br: empty top rows", SHAPE(2, 2, 2, 130, 40, 64, 64), F16, .mask = R, .align = BR,
     .stats = 1},
    {"left bound 0: every row empty, sink", SHAPE(1, 2, 1, 20, 20, 32, 32), BF16, .mask = L | R, .sink = 1,
     .stats = 1},
    {"left bound 0: every row empty", SHAPE(1, 2, 1, 20, 20, 32, 32), F16, .mask = L | R, .stats = 1},
    {"seq_len padding, zero lengths, causal br", SHAPE(3, 4, 2, 90, 120, 128, 128), F16, .mask = R, .align = BR,
     .pad = PAD_Q | PAD_KV, .zero_len = 1, .stats = 1},
    {"ragged thd q+kv, zero lengths", SHAPE(3, 4, 2, 70, 90, 64, 64), BF16, .layout = LAYOUT_BSHD,
     .ragged = RAG_Q | RAG_KV, .zero_len = 1, .stats = 1},
    {"ragged + seq_len, causal br, auto outputs", SHAPE(3, 2, 2, 80, 80, 96, 96), F16, .mask = R, .align = BR,
     .ragged = RAG_Q | RAG_KV, .pad = PAD_Q | PAD_KV, .zero_len = 1, .stats = 1, .auto_out = 1},
    {"ragged kv only, window tl", SHAPE(2, 4, 4, 60, 100, 64, 64), BF16, .mask = L | R, .left = 10, .right = 10,
     .ragged = RAG_KV, .stats = 1},
    {"bias full f32", SHAPE(2, 2, 2, 70, 90, 64, 64), BF16, .bias = BIAS_FULL, .stats = 1},
    {"bias [1,h] io dtype causal", SHAPE(2, 4, 2, 65, 70, 128, 128), F16, .mask = R, .bias = BIAS_1H, .bias_io = 1,
     .stats = 1},
    {"bias [b,1] f32 negative scale", SHAPE(2, 2, 1, 50, 60, 32, 32), F16, .scale = -0.2, .bias = BIAS_B1,
     .stats = 1},
    {"bias [1,1] io gapped", SHAPE(2, 2, 2, 40, 40, 256, 64), BF16, .bias = BIAS_11, .bias_io = 1,
     .layout = LAYOUT_GAPPED},
    {"sink + stats negative scale", SHAPE(2, 4, 2, 70, 70, 64, 64), F16, .scale = -0.3, .mask = R, .sink = 1,
     .stats = 1},
    {"large scale: peaky softmax", SHAPE(1, 2, 2, 64, 200, 64, 64), BF16, .scale = 4.0, .stats = 1},
    {"unaligned strides: element-wise loads", SHAPE(2, 3, 3, 45, 77, 72, 72), F16, .layout = LAYOUT_UNALIGNED,
     .mask = R, .bias = BIAS_FULL, .sink = 1, .stats = 1},
    {"misaligned base pointer", SHAPE(1, 2, 2, 66, 66, 64, 64), BF16, .misalign = 1, .stats = 1},
    {"gapped layout, auto outputs", SHAPE(2, 2, 1, 33, 47, 96, 96), BF16, .layout = LAYOUT_GAPPED, .auto_out = 1,
     .stats = 1},
    {"d256 bias io causal br", SHAPE(1, 2, 1, 150, 300, 256, 256), F16, .mask = R, .align = BR, .bias = BIAS_FULL,
     .bias_io = 1, .stats = 1},
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

typedef struct run {
    const fcase *c;
    tu_rng rng;
    int64_t slice_q[MAXB], slice_kv[MAXB], len_q[MAXB], len_kv[MAXB];
    int64_t offs[2][MAXB + 1], tokens[2];
    frost_dtype offs_dtype;
    /* inputs (host), outputs (cpu and gpu copies) */
    tu_buf q, k, v, bias, sink, offs_buf[2], seq_buf[2];
    tu_buf o_cpu, o_gpu, stats_cpu, stats_gpu;
    int64_t qst[4], kst[4], vst[4], ost[4], bias_dims[4], bias_st[4], sink_st[4], stats_st[4];
    int sink_rank, seq_rank;
} run;

static void make_lengths(run *r)
{
    const fcase *c = r->c;
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
        int64_t *slice = side ? r->slice_kv : r->slice_q, *offs = r->offs[side];
        offs[0] = tu_int(&r->rng, 0, 2); /* tokens before the first sequence belong to no batch */
        for (int b = 0; b < c->b; b++)
            offs[b + 1] = offs[b] + slice[b];
        r->tokens[side] = offs[c->b] + tu_int(&r->rng, 0, 2);
    }
}

/* A 4-D operand [b, h, s, d]; a ragged one lives in a [tokens, h, d] buffer. */
static void operand_alloc(run *r, tu_buf *buf, int64_t *st, int64_t h, int64_t s, int64_t d, int side, int ragged)
{
    const fcase *c = r->c;
    int bshd = c->layout == LAYOUT_BSHD || ((c->layout != LAYOUT_BHSD) && tu_int(&r->rng, 0, 1));
    if (ragged) {
        int64_t pd[3] = {r->tokens[side], h, d}, ps[3];
        int order[3] = {0, 1, 2}, head_major[3] = {1, 0, 2};
        tu_sdpa_strides(&r->rng, r->c->layout, 3, pd, bshd ? order : head_major, ps);
        st[0] = s * ps[0], st[1] = ps[1], st[2] = ps[0], st[3] = ps[2];
        tu_buf_alloc(buf, c->dtype, 3, pd, ps, 0);
    } else {
        int64_t dims[4] = {c->b, h, s, d};
        int bhsd_order[4] = {0, 1, 2, 3}, bshd_order[4] = {0, 2, 1, 3};
        tu_sdpa_strides(&r->rng, r->c->layout, 4, dims, bshd ? bshd_order : bhsd_order, st);
        tu_buf_alloc(buf, c->dtype, 4, dims, st, 0);
    }
}

static void alloc_inputs(run *r)
{
    const fcase *c = r->c;
    int rq = (c->ragged & RAG_Q) != 0, rkv = (c->ragged & RAG_KV) != 0;
    operand_alloc(r, &r->q, r->qst, c->h_q, c->s_q, c->d_qk, 0, rq);
    operand_alloc(r, &r->k, r->kst, c->h_kv, c->s_kv, c->d_qk, 1, rkv);
    operand_alloc(r, &r->v, r->vst, c->h_kv, c->s_kv, c->d_v, 1, rkv);
    tu_buf_fill_uniform(&r->q, &r->rng, -1.0, 1.0);
    tu_buf_fill_uniform(&r->k, &r->rng, -1.0, 1.0);
    tu_buf_fill_uniform(&r->v, &r->rng, -1.0, 1.0);
    if (c->bias) {
        int64_t dims[4] = {c->bias == BIAS_FULL || c->bias == BIAS_B1 ? c->b : 1,
                           c->bias == BIAS_FULL || c->bias == BIAS_1H ? c->h_q : 1, c->s_q, c->s_kv};
        int rows_major[4] = {0, 1, 2, 3}, cols_major[4] = {0, 1, 3, 2};
        int transposed = c->layout != LAYOUT_BHSD && tu_int(&r->rng, 0, 1);
        memcpy(r->bias_dims, dims, sizeof dims);
        tu_sdpa_strides(&r->rng, r->c->layout, 4, dims, transposed ? cols_major : rows_major, r->bias_st);
        tu_buf_alloc(&r->bias, c->bias_io ? c->dtype : FROST_F32, 4, dims, r->bias_st, 0);
        tu_buf_fill_uniform(&r->bias, &r->rng, -1.0, 1.0);
    }
    if (c->sink) {
        int64_t dims4[4] = {1, c->h_q, 1, 1};
        r->sink_rank = tu_int(&r->rng, 0, 1) ? 1 : 4;
        if (r->sink_rank == 1)
            r->sink_st[0] = tu_int(&r->rng, 1, 2);
        else
            tu_packed_strides(4, dims4, r->sink_st);
        int64_t dims1 = c->h_q;
        tu_buf_alloc(&r->sink, FROST_F32, r->sink_rank, r->sink_rank == 1 ? &dims1 : dims4, r->sink_st, 0);
        tu_buf_fill_uniform(&r->sink, &r->rng, -1.5, 1.5);
    }
    r->seq_rank = tu_int(&r->rng, 0, 1) ? 1 : 4;
    for (int side = 0; side < 2; side++) {
        int64_t nb1 = c->b + 1, one = 1;
        if (side ? rkv : rq) {
            tu_buf_alloc(&r->offs_buf[side], r->offs_dtype, 1, &nb1, &one, 0);
            for (int b = 0; b <= c->b; b++) {
                if (r->offs_dtype == FROST_I64)
                    ((int64_t *)r->offs_buf[side].data)[b] = r->offs[side][b];
                else
                    ((int32_t *)r->offs_buf[side].data)[b] = (int32_t)r->offs[side][b];
            }
        }
        if (c->pad & (side ? PAD_KV : PAD_Q)) {
            int64_t dims4[4] = {c->b, 1, 1, 1}, st4[4] = {1, 1, 1, 1};
            tu_buf_alloc(&r->seq_buf[side], FROST_I32, r->seq_rank, dims4, st4, 0);
            for (int b = 0; b < c->b; b++)
                ((int32_t *)r->seq_buf[side].data)[b] = (int32_t)(side ? r->len_kv[b] : r->len_q[b]);
        }
    }
}

/* Ids of the tensors of one graph; both graphs get the same ones in the same order. */
typedef struct ids {
    frost_tensor q, k, v, o, stats, bias, sink, offs[2], seq[2];
} ids;

static frost_graph *make_graph(run *r, frost_context *ctx, ids *t)
{
    const fcase *c = r->c;
    frost_graph *g = NULL;
    memset(t, 0, sizeof *t);
    TU_OK(frost_graph_create(ctx, &g));
    if (!g)
        return NULL;
    for (int side = 0; side < 2; side++) {
        if (r->offs_buf[side].alloc)
            t->offs[side] = tu_add_tensor(g, side ? "cu_kv" : "cu_q", &r->offs_buf[side]);
        if (r->seq_buf[side].alloc)
            t->seq[side] = tu_add_tensor(g, side ? "seq_kv" : "seq_q", &r->seq_buf[side]);
    }
    int64_t qd[4] = {c->b, c->h_q, c->s_q, c->d_qk}, kd[4] = {c->b, c->h_kv, c->s_kv, c->d_qk};
    int64_t vd[4] = {c->b, c->h_kv, c->s_kv, c->d_v}, od[4] = {c->b, c->h_q, c->s_q, c->d_v};
    t->q = tu_add_tensor_4d(g, "q", &r->q, qd, r->qst, t->offs[0]);
    t->k = tu_add_tensor_4d(g, "k", &r->k, kd, r->kst, t->offs[1]);
    t->v = tu_add_tensor_4d(g, "v", &r->v, vd, r->vst, t->offs[1]);
    frost_sdpa_desc d = {.q = t->q, .k = t->k, .v = t->v, .seq_len_q = t->seq[0], .seq_len_kv = t->seq[1]};
    d.attrs = (frost_sdpa_attrs){c->scale, c->mask, c->left, c->right, (frost_diag_align)c->align};
    if (c->bias)
        d.bias = t->bias = tu_add_tensor(g, "bias", &r->bias);
    if (c->sink)
        d.sink = t->sink = tu_add_tensor(g, "sink", &r->sink);
    frost_sdpa_outputs out = {FROST_TENSOR_AUTO, c->stats ? FROST_TENSOR_AUTO : 0};
    if (!c->auto_out) {
        out.o = tu_add_tensor_4d(g, "o", &r->o_cpu, od, r->ost, t->offs[0]);
        if (c->stats)
            out.stats = tu_add_tensor(g, "stats", &r->stats_cpu);
    }
    TU_OK(frost_graph_add_sdpa(g, &d, &out));
    t->o = out.o;
    t->stats = out.stats;
    return g;
}

/* Output buffers the test declares (strided like the inputs); made before the graphs. */
static void alloc_user_outputs(run *r)
{
    const fcase *c = r->c;
    operand_alloc(r, &r->o_cpu, r->ost, c->h_q, c->s_q, c->d_v, 0, (c->ragged & RAG_Q) != 0);
    tu_buf_alloc(&r->o_gpu, r->o_cpu.dtype, r->o_cpu.rank, r->o_cpu.dims, r->o_cpu.strides, 0);
    if (c->stats) {
        int64_t dims[4] = {c->b, c->h_q, c->s_q, 1};
        int order[4] = {0, 1, 2, 3};
        tu_sdpa_strides(&r->rng, r->c->layout, 4, dims, order, r->stats_st);
        tu_buf_alloc(&r->stats_cpu, FROST_F32, 4, dims, r->stats_st, 0);
        tu_buf_alloc(&r->stats_gpu, FROST_F32, 4, dims, r->stats_st, 0);
    }
}

/* Output buffers frost created (AUTO): laid out as the graph inferred them. */
static void alloc_auto_outputs(run *r, const frost_graph *g, const ids *t)
{
    const fcase *c = r->c;
    frost_tensor_desc d;
    TU_OK(frost_graph_tensor_desc(g, t->o, &d));
    memcpy(r->ost, d.strides, sizeof r->ost);
    for (int copy = 0; copy < 2; copy++) {
        tu_buf *b = copy ? &r->o_gpu : &r->o_cpu;
        if (c->ragged & RAG_Q) {
            int64_t pd[3] = {r->tokens[0], d.dims[1], d.dims[3]}, ps[3] = {d.strides[2], d.strides[1], d.strides[3]};
            tu_buf_alloc(b, d.dtype, 3, pd, ps, 0);
        } else {
            tu_buf_alloc(b, d.dtype, 4, d.dims, d.strides, 0);
        }
    }
    if (c->stats) {
        TU_OK(frost_graph_tensor_desc(g, t->stats, &d));
        tu_buf_alloc(&r->stats_cpu, FROST_F32, 4, d.dims, d.strides, 0);
        tu_buf_alloc(&r->stats_gpu, FROST_F32, 4, d.dims, d.strides, 0);
    }
}

static void free_run(run *r)
{
    tu_buf *bufs[] = {&r->q,     &r->k,     &r->v,           &r->bias,        &r->sink,        &r->offs_buf[0],
                      &r->offs_buf[1], &r->seq_buf[0], &r->seq_buf[1], &r->o_cpu, &r->o_gpu, &r->stats_cpu,
                      &r->stats_gpu};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i]->alloc)
            tu_buf_free(bufs[i]);
}

/* Largest finite |element| of b's span (the scale of its tolerance). */
static double max_finite(const tu_buf *b)
{
    double m = 0;
    for (int64_t e = 0; e < b->span; e++) {
        double v = tu_buf_get(b, e);
        if (isfinite(v))
            m = fmax(m, fabs(v));
    }
    return m;
}

/* ---------------------------------------------------------------------------------- */
/* One case                                                                              */
/* ---------------------------------------------------------------------------------- */

static int build_and_bind(frost_graph *g, const char *engine, const ids *t, void *const ptrs[11],
                          frost_binding *list)
{
    frost_build_options opt = {.engine = engine};
    frost_status s = frost_graph_build(g, &opt);
    if (s != FROST_OK) {
        tu_failf("build (engine %s) failed: %s: %s", engine, frost_status_name(s), frost_last_error());
        return -1;
    }
    const frost_tensor order[11] = {t->q, t->k, t->v, t->o, t->stats, t->bias, t->sink, t->offs[0], t->offs[1],
                                    t->seq[0], t->seq[1]};
    return tu_bind(order, ptrs, 11, list);
}

static void run_case(const fcase *c, uint64_t seed, int index, frost_context *cpu, frost_context *gpu)
{
    char desc[480];
    snprintf(desc, sizeof desc,
             "%s: b=%d h_q=%d h_kv=%d s_q=%d s_kv=%d d_qk=%d d_v=%d %s scale=%g mask=%u left=%d right=%d align=%d "
             "layout=%d ragged=%d pad=%d zero_len=%d bias=%d%s sink=%d stats=%d auto_out=%d misalign=%d",
             c->name, c->b, c->h_q, c->h_kv, c->s_q, c->s_kv, c->d_qk, c->d_v, frost_dtype_name(c->dtype), c->scale,
             (unsigned)c->mask, c->left, c->right, c->align, c->layout, c->ragged, c->pad, c->zero_len, c->bias,
             c->bias_io ? "(io)" : "", c->sink, c->stats, c->auto_out, c->misalign);
    tu_set_context("test_sdpa_fwd_gpu", seed, index, desc);
    int failures_before = tu_failures();
    static run r;
    memset(&r, 0, sizeof r);
    r.c = c;
    r.rng = tu_rng_make(seed * 1000003u + (uint64_t)index);
    make_lengths(&r);
    alloc_inputs(&r);
    if (!c->auto_out)
        alloc_user_outputs(&r);
    ids tc, tg;
    frost_graph *gc = make_graph(&r, cpu, &tc);
    frost_graph *gg = make_graph(&r, gpu, &tg);
    if (gc && gg && c->auto_out)
        alloc_auto_outputs(&r, gc, &tc);
    frost_binding list[16];
    const frost__device *dev = gpu->device;
    tu_dev_buf d[11];
    memset(d, 0, sizeof d);
    if (!gc || !gg || tu_failures() != failures_before)
        goto done;

    /* reference: host pointers */
    void *host[11] = {r.q.data,           r.k.data,           r.v.data,           r.o_cpu.data,
                      r.stats_cpu.data,   r.bias.data,        r.sink.data,        r.offs_buf[0].data,
                      r.offs_buf[1].data, r.seq_buf[0].data,  r.seq_buf[1].data};
    int n = build_and_bind(gc, "ref", &tc, host, list);
    if (n < 0)
        goto done;
    tu_execute_host(gc, list, n);

    /* cuda: every buffer, guards included, copied to the device */
    const tu_buf *src[11] = {&r.q,    &r.k,    &r.v,           &r.o_gpu,        &r.stats_gpu,   &r.bias,
                             &r.sink, &r.offs_buf[0], &r.offs_buf[1], &r.seq_buf[0], &r.seq_buf[1]};
    void *dptr[11];
    for (int i = 0; i < 11; i++)
        dptr[i] = tu_to_device(dev, src[i], &d[i], i == 0 && c->misalign ? (size_t)r.q.elem_size : 0);
    n = build_and_bind(gg, "cuda", &tg, dptr, list);
    if (n < 0)
        goto done;
    size_t ws_size = 0;
    TU_OK(frost_graph_workspace_size(gg, &ws_size));
    TU_CHECK(ws_size == 0);
    TU_OK(frost_graph_execute(gg, list, n, NULL, NULL));
    TU_OK(frost__dev_synchronize(dev));
    tu_from_device(dev, &d[3], r.o_gpu.alloc);
    tu_from_device(dev, &d[4], r.stats_gpu.alloc);

    double o_tol = O_TOL_C * tu_eps(c->dtype) * (max_finite(&r.o_cpu) + 1.0);
    tu_compare_whole("O", &r.o_gpu, &r.o_cpu, o_tol, 0.0);
    if (c->stats)
        tu_compare_whole("stats (LSE)", &r.stats_gpu, &r.stats_cpu, LSE_TOL_REL * (1.0 + max_finite(&r.stats_cpu)),
                         0.0);

    char explain[4096];
    TU_OK(frost_graph_explain(gg, explain, sizeof explain, NULL));
    if (!strstr(explain, "sdpa_fwd.cu:sdpa_fwd_kernel"))
        tu_failf("explain does not name the cuda kernel:\n%s", explain);
done:
    for (int i = 0; i < 11; i++)
        tu_dev_buf_free(dev, &d[i]);
    frost_graph_destroy(gc);
    frost_graph_destroy(gg);
    free_run(&r);
}

/* ---------------------------------------------------------------------------------- */
/* Random cases                                                                          */
/* ---------------------------------------------------------------------------------- */

static fcase random_case(uint64_t seed, int index)
{
    tu_rng r = tu_rng_make(seed ^ (0x6a7f0000ull + (uint64_t)index * 0x9e37ull));
    fcase c = {.name = "random"};
    static const double scales[] = {0, 0, 0.2, -0.35, 1.5};
    c.b = (int)tu_int(&r, 1, MAXB - 1);
    int shape = (int)tu_int(&r, 0, 3); /* MHA, GQA 2, GQA 4, MQA */
    c.h_kv = shape == 3 ? 1 : (int)tu_int(&r, 1, 2);
    c.h_q = shape == 3 ? (int)tu_int(&r, 1, 5) : c.h_kv * (shape == 0 ? 1 : shape == 1 ? 2 : 4);
    c.s_q = tu_int(&r, 0, 5) ? (int)tu_int(&r, 1, 200) : 1;
    c.s_kv = tu_int(&r, 0, 5) ? (int)tu_int(&r, 1, 260) : 1;
    c.d_qk = 8 * (int)tu_int(&r, 1, 32);
    c.d_v = tu_int(&r, 0, 2) ? c.d_qk : 8 * (int)tu_int(&r, 1, 32);
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
    c.sink = tu_int(&r, 0, 2) == 0;
    c.stats = (int)tu_int(&r, 0, 3) != 0;
    c.auto_out = tu_int(&r, 0, 3) == 0;
    c.misalign = tu_int(&r, 0, 7) == 0;
    return c;
}

/* ---------------------------------------------------------------------------------- */
/* Refusals: each must be NOT_SUPPORTED with a sentence naming the constraint            */
/* ---------------------------------------------------------------------------------- */

static void expect_refusal(frost_context *gpu, frost_dtype dt, int64_t d_qk, int64_t d_v, int transpose_d,
                           const char *needle)
{
    char desc[160];
    snprintf(desc, sizeof desc, "refusal: %s d_qk=%lld d_v=%lld transpose_d=%d", frost_dtype_name(dt),
             (long long)d_qk, (long long)d_v, transpose_d);
    tu_set_context("test_sdpa_fwd_gpu", 0, -1, desc);
    frost_graph *g = NULL;
    TU_OK(frost_graph_create(gpu, &g));
    int64_t qd[4] = {1, 2, 16, d_qk}, vd[4] = {1, 2, 16, d_v};
    frost_tensor_desc q = {.name = "q", .dtype = dt, .rank = 4}, k, v;
    memcpy(q.dims, qd, sizeof qd);
    if (transpose_d) { /* [b, h, s, d] stored with d outside s: stride of d is s */
        int64_t st[4] = {2 * 16 * d_qk, 16 * d_qk, 1, 16};
        memcpy(q.strides, st, sizeof st);
    }
    k = q, k.name = "k";
    v = q, v.name = "v";
    memcpy(v.dims, vd, sizeof vd);
    memset(v.strides, 0, sizeof v.strides);
    frost_sdpa_desc d = {0};
    TU_OK(frost_graph_add_tensor(g, &q, &d.q));
    TU_OK(frost_graph_add_tensor(g, &k, &d.k));
    TU_OK(frost_graph_add_tensor(g, &v, &d.v));
    frost_sdpa_outputs out = {FROST_TENSOR_AUTO, 0};
    TU_OK(frost_graph_add_sdpa(g, &d, &out));
    frost_build_options opt = {.engine = "cuda"};
    TU_CHECK_STATUS(frost_graph_build(g, &opt), FROST_NOT_SUPPORTED);
    if (!strstr(frost_last_error(), needle))
        tu_failf("refusal should mention \"%s\", got: %s", needle, frost_last_error());
    frost_graph_destroy(g);
}

static void check_refusals(frost_context *gpu)
{
    expect_refusal(gpu, FROST_F32, 64, 64, 0, "f32 runs on the CPU context's ref engine");
    expect_refusal(gpu, FROST_BF16, 264, 264, 0, "d_qk up to 256");
    expect_refusal(gpu, FROST_F16, 64, 512, 0, "d_v up to 256");
    expect_refusal(gpu, FROST_F16, 12, 12, 0, "multiple of 8");
    expect_refusal(gpu, FROST_BF16, 64, 64, 1, "contiguous along d");
}

enum { NUM_TABLE = (int)(sizeof table / sizeof table[0]), NUM_RANDOM = 60 };

static void run_index(int i, uint64_t seed, frost_context *cpu, frost_context *gpu)
{
    const fcase c = i < NUM_TABLE ? table[i] : random_case(seed, i);
    run_case(&c, seed, i, cpu, gpu);
}

int main(void)
{
    return tu_gpu_main(20261203, NUM_TABLE + NUM_RANDOM, NULL, run_index, check_refusals);
}
