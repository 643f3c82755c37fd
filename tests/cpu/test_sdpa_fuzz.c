/*
 * test_sdpa_fuzz.c — random descriptors for SDPA forward and backward on the CPU context:
 * batch, heads (GQA groups, and head counts that do not divide), sequence lengths and head
 * dims (0 included), BHSD or BSHD and random strides, dtypes, bias of every broadcast
 * shape or a wrong one, sinks, per-batch lengths (with values out of range too), scale,
 * mask bounds, alignment and flags (valid or not), statistics, and the build options.
 *
 * The checks are tests/util/fuzz_util's: each call answers OK, INVALID_ARGUMENT or
 * NOT_SUPPORTED with a message, Q offered as an output is refused, the explain report is
 * sized and truncated correctly, and a graph that builds runs on guarded buffers without
 * touching a guard or leaving an output element NaN.  Lengths out of range may make the run
 * itself refuse (INVALID_ARGUMENT with a message).
 *
 * Every accepted graph also goes through the cuda engine's select on an H200 and an A100
 * described on the host (tu_fz_check_cuda_plans: a plan or NOT_SUPPORTED with a sentence),
 * and a further 1000 draws per direction with real head dims (32-512) and lengths (up to
 * 65536) in f16 / bf16 are planned only, so the planning runs under the CI's sanitizers.
 */
#include <math.h>
#include <string.h>

#include "fuzz_util.h"

#define ITERS 1500      /* graphs per direction */
#define PLAN_ITERS 1000 /* graphs per direction with real head dims and lengths, planned only */

typedef struct sdpa_fuzz {
    tu_fuzz f; /* first: the fill callback gets &f */
    int64_t s_q, s_kv;
} sdpa_fuzz;

typedef struct len_fill {
    tu_rng *r;
    tu_buf *b;
    int64_t s;
} len_fill;

static void fill_len(const tu_buf *b, int64_t off, void *user)
{
    const len_fill *l = user;
    (void)b; /* l->b: the same buffer, writable */
    tu_buf_set(l->b, off, (double)(tu_fz_chance(l->r, 95) ? tu_int(l->r, 0, l->s) : tu_int(l->r, -1, l->s + 1)));
}

/* Lengths mostly within the sequence (0 included), sometimes one past it or negative. */
static void fill(tu_fuzz *f, const char *name, tu_buf *b)
{
    const sdpa_fuzz *z = (const sdpa_fuzz *)f;
    if (strncmp(name, "seq_len_", 8) != 0) {
        tu_buf_fill_uniform(b, f->r, -2.0, 2.0);
        return;
    }
    len_fill l = {f->r, b, strcmp(name, "seq_len_q") == 0 ? z->s_q : z->s_kv};
    tu_buf_for_each(b, fill_len, &l);
}

static frost_sdpa_attrs attrs(tu_rng *r, int64_t s_kv)
{
    static const double scales[] = {0.0, 0.5, -0.25, 2.0};
    frost_sdpa_attrs a = {.scale = scales[tu_fz_pick(r, 4)],
                          .mask_flags = (uint32_t)tu_fz_pick(r, 4),
                          .left_bound = tu_int(r, 0, s_kv + 1),
                          .right_bound = tu_int(r, 0, s_kv + 1),
                          .align = (frost_diag_align)tu_fz_pick(r, 2)};
    if (tu_fz_chance(r, 3))
        a.scale = tu_fz_chance(r, 50) ? NAN : INFINITY;
    if (tu_fz_chance(r, 3))
        a.mask_flags |= 1u << 5;
    if (tu_fz_chance(r, 3))
        a.left_bound = -1;
    if (tu_fz_chance(r, 3))
        a.align = (frost_diag_align)2;
    return a;
}

/* A backward operand: mostly as it should be (the backward has six), else drawn as any
 * optional input. */
static frost_tensor operand(tu_fuzz *f, const char *name, frost_dtype dt, const int64_t dims[4], const int *order)
{
    return tu_fz_chance(f->r, 90) ? tu_fz_declare(f, name, dt, 4, dims, order, 0)
                                  : tu_fz_maybe_input(f, name, dt, 4, dims, 20);
}

static frost_status add_sdpa(sdpa_fuzz *z, int backward)
{
    tu_fuzz *f = &z->f;
    tu_rng *r = f->r;
    const int64_t b = tu_fz_small_dim(r), h_kv = tu_fz_small_dim(r) % 5, group = 1 + tu_fz_pick(r, 3);
    const int64_t h_q = tu_fz_chance(r, 90) ? h_kv * group : h_kv + 1;
    int64_t s_q = tu_fz_small_dim(r), s_kv = tu_fz_small_dim(r);
    int64_t d_qk = tu_fz_small_dim(r), d_v = tu_fz_chance(r, 70) ? d_qk : tu_fz_small_dim(r);
    const int bshd[4] = {0, 2, 1, 3}, *order = tu_fz_chance(r, 50) ? bshd : NULL;
    frost_dtype dt = tu_fz_io_dtype(r);
    if (f->wide_percent > 0 && tu_fz_chance(r, f->wide_percent)) { /* real head dims and lengths */
        static const int64_t heads[] = {32, 40, 64, 72, 96, 128, 160, 192, 256, 512};
        static const int64_t seqs[] = {1, 17, 128, 1000, 4096, 65536};
        d_qk = heads[tu_fz_pick(r, 10)];
        d_v = tu_fz_chance(r, 70) ? d_qk : heads[tu_fz_pick(r, 10)];
        s_q = seqs[tu_fz_pick(r, 6)], s_kv = seqs[tu_fz_pick(r, 6)];
        if (tu_fz_chance(r, 90))
            dt = tu_fz_chance(r, 50) ? FROST_BF16 : FROST_F16;
    }
    z->s_q = s_q, z->s_kv = s_kv;
    const int64_t qd[4] = {b, h_q, s_q, d_qk}, kd[4] = {b, h_kv, s_kv, d_qk}, vd[4] = {b, h_kv, s_kv, d_v};
    const int64_t od[4] = {b, h_q, s_q, d_v}, sd[4] = {b, h_q, s_q, 1};
    const frost_tensor q = f->x = tu_fz_declare(f, "q", dt, 4, qd, order, 0);
    const frost_tensor k = tu_fz_declare(f, "k", dt, 4, kd, order, 0);
    const frost_tensor v = tu_fz_chance(r, 3) ? k : tu_fz_declare(f, "v", dt, 4, vd, order, 0);
    /* bias [b or 1, h_q or 1, s_q, s_kv]; sink [1, h_q, 1, 1] or [h_q]; lengths [b] */
    const int64_t bd[4] = {tu_fz_chance(r, 50) ? b : 1, tu_fz_chance(r, 50) ? h_q : 1, s_q, s_kv};
    const frost_tensor bias = tu_fz_maybe_input(f, "bias", tu_fz_chance(r, 50) ? FROST_F32 : dt, 4, bd, 60);
    const int64_t kd1[4] = {1, h_q, 1, 1};
    const frost_tensor sink = tu_fz_chance(r, 50) ? tu_fz_maybe_input(f, "sink", FROST_F32, 4, kd1, 70)
                                                  : tu_fz_maybe_input(f, "sink", FROST_F32, 1, &h_q, 70);
    const frost_tensor len_q = tu_fz_maybe_input(f, "seq_len_q", FROST_I32, 1, &b, 75);
    const frost_tensor len_kv = tu_fz_maybe_input(f, "seq_len_kv", FROST_I32, 1, &b, 75);
    f->data_may_be_invalid = len_q || len_kv;
    const frost_sdpa_attrs at = attrs(r, s_kv);
    if (!backward) {
        const frost_sdpa_desc d = {q, k, v, bias, sink, len_q, len_kv, at};
        frost_sdpa_outputs out = {.o = tu_fz_maybe_output(f, "o", dt, 4, od, 5),
                                  .stats = tu_fz_maybe_output(f, "stats", FROST_F32, 4, sd, 40)};
        const frost_status s = frost_graph_add_sdpa(f->g, &d, &out);
        if (s == FROST_OK)
            tu_fz_created(f, out.o), tu_fz_created(f, out.stats);
        return s;
    }
    const frost_sdpa_backward_desc d = {.q = q,
                                        .k = k,
                                        .v = v,
                                        .o = operand(f, "o", dt, od, order),
                                        .d_o = operand(f, "d_o", dt, od, order),
                                        .stats = operand(f, "stats", FROST_F32, sd, NULL),
                                        .bias = bias,
                                        .sink = sink,
                                        .seq_len_q = len_q,
                                        .seq_len_kv = len_kv,
                                        .attrs = at,
                                        .deterministic = tu_fz_chance(r, 50)};
    frost_sdpa_grads out = {.d_q = tu_fz_maybe_output(f, "d_q", dt, 4, qd, 5),
                            .d_k = tu_fz_maybe_output(f, "d_k", dt, 4, kd, 5),
                            .d_v = tu_fz_maybe_output(f, "d_v", dt, 4, vd, 5),
                            .d_bias = tu_fz_maybe_output(f, "d_bias", FROST_F32, 4, bd, 50),
                            .d_sink = tu_fz_maybe_output(f, "d_sink", FROST_F32, 4, kd1, 50)};
    const frost_status s = frost_graph_add_sdpa_backward(f->g, &d, &out);
    if (s == FROST_OK)
        tu_fz_created(f, out.d_q), tu_fz_created(f, out.d_k), tu_fz_created(f, out.d_v), tu_fz_created(f, out.d_bias),
            tu_fz_created(f, out.d_sink);
    return s;
}

static int built, ran[2], wide_planned;

/* One draw: checked, planned by the cuda engine's select and (unless `wide`: only added
 * and planned) built and run. */
static void one_graph(frost_context *ctx, uint64_t seed, int index, int backward, int it, int wide)
{
    char what[64];
    snprintf(what, sizeof what, "sdpa %s, %sgraph %d", backward ? "backward" : "forward", wide ? "wide " : "", it);
    tu_rng r = tu_rng_make(seed + (uint64_t)index * 0x9e3779b97f4a7c15ULL);
    tu_set_context("test_sdpa_fuzz", seed, index, what);
    sdpa_fuzz z = {.f = {.r = &r, .fill = fill, .wide_percent = wide ? 100 : 0}};
    TU_OK(frost_graph_create(ctx, &z.f.g));
    const frost_status s = add_sdpa(&z, backward);
    tu_fz_expect_refusal(s, what);
    if (s == FROST_OK && z.f.aliased)
        tu_failf("%s: accepted Q as one of its outputs", what);
    if (s == FROST_OK) {
        const int planned = tu_fz_check_cuda_plans(z.f.g, what, NULL);
        wide_planned += wide ? planned : 0;
    }
    if (s == FROST_OK && !wide) {
        const int done = tu_fz_build_and_run(&z.f, what);
        built += done >= 0, ran[backward] += done > 0;
    }
    frost_graph_destroy(z.f.g);
}

int main(void)
{
    const uint64_t seed = tu_seed(0x73647061667aULL);
    const int only = tu_case_filter();
    frost_context *ctx = NULL;
    TU_OK(frost_context_create(NULL, &ctx));
    /* ITERS small draws a direction, then PLAN_ITERS with real head dims and lengths
     * (planned only) */
    const int cases = tu_fz_cases(ctx, seed, 2, ITERS, PLAN_ITERS, one_graph);
    frost_context_destroy(ctx);
    printf("test_sdpa_fuzz: %d graphs, %d built, %d forward and %d backward ran\n", cases, built, ran[0], ran[1]);
    printf("test_sdpa_fuzz: the cuda engine's select planned %d / %d nodes (%d of them wide) and refused %d / %d "
           "(sm_90 / sm_80)\n",
           tu_fz_planned[0], tu_fz_planned[1], wide_planned, tu_fz_plan_refused[0], tu_fz_plan_refused[1]);
    if (only < 0 && wide_planned < 100)
        tu_failf("the cuda engine planned only %d of the wide draws", wide_planned);
    for (int backward = 0; backward < 2 && only < 0; backward++)
        if (ran[backward] < ITERS / 20)
            tu_failf("sdpa %s: only %d of %d graphs ran: the draws are too often invalid",
                     backward ? "backward" : "forward", ran[backward], ITERS);
    return tu_finish(cases);
}
