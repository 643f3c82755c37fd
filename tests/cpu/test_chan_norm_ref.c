/*
 * test_chan_norm_ref.c — GroupNorm, InstanceNorm and BatchNorm on the reference engine,
 * forward and backward, plus a walk through every validation error of the six add
 * functions.  The naive formulas and the checks are in chan_norm_ref_checks.c, the
 * validation walk in chan_norm_ref_validation.c; chan_norm_ref.h holds what they share.
 *
 * Each case builds one graph: the forward node and, when the case asks, the backward node
 * reading the forward's saved statistics.  What is checked, and against what:
 *   - Forward y, saved mean / inv_std and the updated BatchNorm running statistics
 *     against a naive formula of this test (one-pass moments, each element sent to its
 *     set by index arithmetic; no code shared with the engine), in fp64 on the very
 *     values the engine read.  The only difference left is the final rounding to the
 *     output dtype: rtol 2.5 u(dtype).
 *   - Backward of small f32 problems against fp64 central finite differences of the
 *     naive forward for the loss L = Σ d_y·y: dL/dx, dL/dw_eff (d_scale, which equals
 *     dL/dw also with the zero-centred parameterisation) and dL/db (d_bias).
 *   - Backward of every other case against the closed-form gradient evaluated here.
 *     Reduction sets of M = 2 go there too: their x̂ are ±1 up to epsilon, so dx is
 *     the small remainder of a near-total cancellation, and neither finite differences
 *     nor f32 saved statistics can pin such an ill-conditioned gradient to 1e-4.
 *   - Outputs frost creates keep x's dim order and are dense (NHWC in, NHWC out).
 *   - Every tensor lives in a NaN-guarded buffer; outputs are poisoned before execute,
 *     so an unwritten element compares as NaN and a stray write trips the guard check.
 *   - A second execute (running statistics restored) reproduces every output bit for bit.
 *
 * Layout legend: x is [N, C, S...], S = spatial = prod(S...), G groups, Cg = C / G; a set
 * is what one statistic covers: (n, g), (n, c) or (c).  FROST_TEST_SEED / FROST_TEST_CASE
 * rerun one case; each failure prints the reproducer.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chan_norm_ref.h"
#include "ref_test_util.h"

enum { NCHW, NHWC, GAP_NCHW, GAP_NHWC, PERMUTED }; /* layouts of x-shaped tensors */

const char *const chan_norm_ref_slot_names[T_COUNT] = {
    "x", "scale", "bias", "y", "mean", "inv_std", "running_mean", "running_var", "d_y", "d_x", "d_scale", "d_bias"};
const char *const chan_norm_ref_kind_names[3] = {"groupnorm", "instancenorm", "batchnorm"};

#define F32 FROST_F32
#define F16 FROST_F16
#define BF16 FROST_BF16
static const cn_case table[] = {
    /* kind rank dims G dtype scale bias full zc inf layout stats run mom eps offset bwd saved given */
    {GN, 4, {2, 6, 3, 4}, 3, F32, 1, 1, 0, 0, 0, NCHW, 1, 0, 0, 0, 0.5, BWD_FD, 1, 0},
    {GN, 4, {2, 6, 3, 4}, 2, F32, 1, 1, 1, 0, 0, NHWC, 1, 0, 0, 0, 0, BWD_FD, 0, 0},
    {IN, 3, {3, 4, 7}, 0, F32, 1, 1, 0, 0, 0, GAP_NCHW, 1, 0, 0, 0, 1.0, BWD_FD, 1, 1},
    {BN, 4, {3, 4, 2, 3}, 0, F32, 1, 1, 0, 0, 0, NCHW, 1, 1, 0, 0, 0, BWD_FD, 1, 0},
    {BN, 2, {5, 3}, 0, F32, 1, 1, 1, 0, 0, NCHW, 0, 1, 0.3, 1e-3, 2.0, BWD_FD, 0, 0},
    {GN, 2, {4, 6}, 3, F32, 1, 0, 0, 0, 0, GAP_NCHW, 1, 0, 0, 0, 0, BWD_FORMULA, 1, 0},       /* spatial 1, M = 2 */
    {GN, 2, {4, 6}, 2, F32, 1, 1, 0, 0, 0, NCHW, 1, 0, 0, 0, 0, BWD_FD, 1, 0},                /* spatial 1, M = 3 */
    {GN, 4, {2, 8, 5, 3}, 1, F16, 2, 2, 0, 0, 0, GAP_NHWC, 1, 0, 0, 0, 0, BWD_FORMULA, 1, 0}, /* G = 1 */
    {GN, 4, {3, 5, 4, 4}, 5, BF16, 1, 2, 1, 0, 0, NHWC, 1, 0, 0, 1e-6, 0, BWD_FORMULA, 0, 0}, /* G = C */
    {BN, 4, {2, 6, 3, 5}, 0, F16, 1, 1, 0, 0, 1, GAP_NHWC, 0, 1, 0, 0, 0, NO_BWD, 0, 0},      /* inference */
    {BN, 3, {1LL << 40, 3, 0}, 0, F32, 1, 1, 0, 0, 1, NCHW, 0, 1, 0, 0, 0, NO_BWD, 0, 0}, /* inference, 2^40 x 0 */
    {IN, 4, {2, 3, 5, 6}, 0, BF16, 2, 0, 1, 0, 1, PERMUTED, 0, 0, 0, 0, 0, NO_BWD, 0, 1},
    {GN, 5, {2, 4, 2, 3, 3}, 2, F32, 1, 1, 1, 0, 0, GAP_NCHW, 1, 0, 0, 0, 0, BWD_FD, 1, 0},
    {BN, 5, {2, 3, 2, 2, 3}, 0, F32, 1, 1, 0, 0, 0, PERMUTED, 1, 1, 1.0, 0, 0, BWD_FD, 1, 1},
    {GN, 3, {2, 6, 5}, 2, F32, 1, 1, 0, 1, 0, GAP_NHWC, 1, 0, 0, 0, 0, BWD_FD, 0, 0},      /* zero-centred */
    {IN, 3, {0, 3, 5}, 0, F32, 1, 1, 0, 0, 0, GAP_NCHW, 1, 0, 0, 0, 0, BWD_FORMULA, 1, 0}, /* N = 0 */
    {BN, 3, {4, 0, 3}, 0, F32, 1, 1, 0, 0, 0, NCHW, 1, 1, 0, 0, 0, BWD_FORMULA, 1, 0},     /* C = 0 */
    {IN, 3, {4, 0, 3}, 0, F32, 1, 1, 0, 0, 0, GAP_NCHW, 1, 0, 0, 0, 0, BWD_FORMULA, 1, 0}, /* C = 0: no sets */
    {BN, 4, {3, 5, 4, 2}, 0, BF16, 2, 2, 1, 1, 0, NHWC, 1, 0, 0, 0, 0, BWD_FORMULA, 1, 0}, /* no running */
    {BN, 4, {8, 32, 5, 5}, 0, F32, 1, 1, 0, 0, 0, NHWC, 1, 1, 0.01, 0, 3.0, BWD_FORMULA, 1, 0},
    {IN, 4, {4, 5, 1, 1}, 0, F32, 1, 1, 0, 0, 0, NCHW, 1, 0, 0, 0, 0, BWD_FORMULA, 1, 0}, /* M = 1 */
    {GN, 4, {3, 9, 5, 7}, 3, F16, 1, 1, 0, 0, 0, PERMUTED, 1, 0, 0, 0, 0, BWD_FORMULA, 1, 1},
    {BN, 2, {2, 3}, 0, F32, 0, 0, 0, 0, 0, NCHW, 1, 1, 0.5, 0, 0, BWD_FORMULA, 1, 0}, /* M = 2 */
    {GN, 4, {2, 4, 3, 3}, 2, F32, 0, 1, 0, 0, 0, GAP_NHWC, 1, 0, 0, 0, 3.0, BWD_FD, 1, 0},
    {IN, 5, {2, 3, 3, 2, 4}, 0, F16, 1, 1, 1, 1, 0, GAP_NHWC, 1, 0, 0, 0.25, 0, BWD_FORMULA, 1, 1},
    {BN, 3, {1, 4, 1}, 0, F32, 1, 1, 0, 0, 0, NCHW, 1, 0, 0, 0, 0, BWD_FORMULA, 1, 0}, /* M = 1, no running */
};
#define NUM_TABLE ((int)(sizeof table / sizeof table[0]))
#define NUM_RANDOM 64

static frost_context *cpu;

/* ---- layouts and tensors ---- */

/* Dim order (outermost first) and strides of an x-shaped tensor in a layout. */
static void layout_strides(tu_rng *r, int layout, int rank, const int64_t *dims, int *order, int64_t *strides)
{
    for (int i = 0; i < rank; ++i)
        order[i] = i;
    if (layout == NHWC || layout == GAP_NHWC) { /* N, S..., C */
        for (int i = 1; i < rank - 1; ++i)
            order[i] = i + 1;
        order[rank - 1] = 1;
    }
    if (layout == PERMUTED)
        tu_shuffle(r, order, rank);
    tu_gapped_strides(r, rank, dims, order, layout == NCHW || layout == NHWC ? 0 : 3, 1, strides);
}

/* A per-channel tensor: [C] or [1, C, 1, ...], sometimes with a gap between entries. */
static frost_tensor add_channel(frost_graph *g, tu_rng *r, const char *name, frost_dtype dt, const cn_case *c, int full)
{
    int64_t dims[FROST_MAX_RANK], strides[FROST_MAX_RANK];
    int rank = full ? c->rank : 1;
    for (int i = 0; i < rank; ++i)
        dims[i] = 1;
    dims[full ? 1 : 0] = c->dims[1];
    tu_packed_strides(rank, dims, strides);
    if (tu_int(r, 0, 2) == 0)
        strides[full ? 1 : 0] = tu_int(r, 2, 3);
    return tu_add(g, name, dt, rank, dims, strides);
}

/* ---- building the case ---- */

frost_status chan_norm_ref_add_fwd(frost_graph *g, int kind, const frost_channel_norm_desc *d, frost_norm_outputs *o)
{
    return kind == GN   ? frost_graph_add_groupnorm(g, d, o)
           : kind == IN ? frost_graph_add_instancenorm(g, d, o)
                        : frost_graph_add_batchnorm(g, d, o);
}

frost_status chan_norm_ref_add_bwd(frost_graph *g, int kind, const frost_channel_norm_backward_desc *d,
                                   frost_norm_grads *o)
{
    return kind == GN   ? frost_graph_add_groupnorm_backward(g, d, o)
           : kind == IN ? frost_graph_add_instancenorm_backward(g, d, o)
                        : frost_graph_add_batchnorm_backward(g, d, o);
}

/* An x-shaped output: the caller's own gapped tensor, or left to frost (0 or AUTO). */
static frost_tensor data_output(frost_graph *g, tu_rng *r, const char *name, const cn_case *c)
{
    int order[FROST_MAX_RANK];
    int64_t st[FROST_MAX_RANK];
    if (!c->given_out)
        return tu_int(r, 0, 1) ? FROST_TENSOR_AUTO : FROST_TENSOR_NONE;
    layout_strides(r, (int)tu_int(r, GAP_NCHW, PERMUTED), c->rank, c->dims, order, st);
    return tu_add(g, name, c->dtype, c->rank, c->dims, st);
}

static frost_tensor stats_output(frost_graph *g, tu_rng *r, const char *name, const run *R)
{
    int64_t dims[2] = {R->N, R->c->kind == GN ? R->G : R->C}, st[2];
    int order[2] = {0, 1};
    if (!R->c->given_out)
        return FROST_TENSOR_AUTO;
    if (R->c->kind == BN)
        return tu_add(g, name, F32, 1, &R->C, NULL);
    tu_gapped_strides(r, 2, dims, order, 2, 1, st);
    return tu_add(g, name, F32, 2, dims, st);
}

/* Frost-made x-shaped outputs are dense and keep x's dim order (for dims of size > 1). */
void chan_norm_ref_check_made_like_x(frost_graph *g, frost_tensor x, frost_tensor out, const char *what)
{
    frost_tensor_desc xd, od;
    TU_OK(frost_graph_tensor_desc(g, x, &xd));
    TU_OK(frost_graph_tensor_desc(g, out, &od));
    int64_t numel = 1;
    for (int i = 0; i < xd.rank; ++i)
        numel *= xd.dims[i];
    if (numel > 0 && tu_span(od.rank, od.dims, od.strides) != numel)
        tu_failf("%s made by frost is not dense: span %lld for %lld elements", what,
                 (long long)tu_span(od.rank, od.dims, od.strides), (long long)numel);
    for (int i = 0; i < xd.rank; ++i)
        for (int j = 0; j < xd.rank; ++j)
            if (xd.dims[i] > 1 && xd.dims[j] > 1 && (xd.strides[i] > xd.strides[j]) != (od.strides[i] > od.strides[j]))
                tu_failf("%s made by frost does not keep x's dim order: dims %d and %d swap", what, i, j);
}

static void add_ops(frost_graph *g, tu_rng *rng, run *R)
{
    const cn_case *c = R->c;
    int64_t st[FROST_MAX_RANK];
    int order[FROST_MAX_RANK];
    layout_strides(rng, c->layout, c->rank, c->dims, order, st);
    R->t[T_X].id = tu_add(g, "x", c->dtype, c->rank, c->dims, st);
    if (c->scale)
        R->t[T_SCALE].id = add_channel(g, rng, "scale", c->scale == 1 ? F32 : c->dtype, c, c->full_param);
    if (c->bias)
        R->t[T_BIAS].id = add_channel(g, rng, "bias", c->bias == 1 ? F32 : c->dtype, c, c->full_param);
    if (c->running) {
        R->t[T_RMEAN].id = add_channel(g, rng, "running_mean", F32, c, 0);
        R->t[T_RVAR].id = add_channel(g, rng, "running_var", F32, c, 0);
    }
    frost_channel_norm_desc fd = {.x = R->t[T_X].id,
                                  .scale = R->t[T_SCALE].id,
                                  .bias = R->t[T_BIAS].id,
                                  .epsilon = c->epsilon,
                                  .num_groups = c->kind == GN ? c->groups : (int)tu_int(rng, -3, 3),
                                  .phase = c->inference ? FROST_NORM_INFERENCE : FROST_NORM_TRAINING,
                                  .zero_centered_scale = c->zero_centered,
                                  .running_mean = R->t[T_RMEAN].id,
                                  .running_var = R->t[T_RVAR].id,
                                  .momentum = c->momentum};
    frost_norm_outputs fo = {.y = data_output(g, rng, "y", c)};
    if (!c->inference && (c->stats || c->saved)) {
        fo.mean = stats_output(g, rng, "mean", R);
        fo.inv_std = stats_output(g, rng, "inv_std", R);
    }
    frost_tensor y_req = fo.y;
    TU_OK(chan_norm_ref_add_fwd(g, c->kind, &fd, &fo));
    R->t[T_Y].id = fo.y, R->t[T_MEAN].id = fo.mean, R->t[T_RSTD].id = fo.inv_std;
    if (y_req == FROST_TENSOR_AUTO || y_req == FROST_TENSOR_NONE)
        chan_norm_ref_check_made_like_x(g, R->t[T_X].id, fo.y, "y");
    if (!c->backward)
        return;
    layout_strides(rng, (int)tu_int(rng, NCHW, PERMUTED), c->rank, c->dims, order, st);
    R->t[T_DY].id = tu_add(g, "d_y", c->dtype, c->rank, c->dims, st);
    const int saved_mean = c->saved == 1 || c->saved == 2, saved_rstd = c->saved == 1 || c->saved == 3;
    frost_channel_norm_backward_desc bd = {.x = R->t[T_X].id,
                                           .d_y = R->t[T_DY].id,
                                           .scale = R->t[T_SCALE].id,
                                           .mean = saved_mean ? fo.mean : 0,
                                           .inv_std = saved_rstd ? fo.inv_std : 0,
                                           .epsilon = c->epsilon,
                                           .num_groups = c->groups,
                                           .has_bias = c->bias != 0,
                                           .zero_centered_scale = c->zero_centered,
                                           .deterministic = (int)tu_int(rng, 0, 1)};
    frost_norm_grads bo = {.d_x = data_output(g, rng, "d_x", c)};
    if (c->scale)
        bo.d_scale = c->given_out ? add_channel(g, rng, "d_scale", F32, c, tu_int(rng, 0, 1)) : FROST_TENSOR_AUTO;
    if (c->bias)
        bo.d_bias = c->given_out ? add_channel(g, rng, "d_bias", F32, c, tu_int(rng, 0, 1)) : FROST_TENSOR_AUTO;
    frost_tensor dx_req = bo.d_x;
    TU_OK(chan_norm_ref_add_bwd(g, c->kind, &bd, &bo));
    R->t[T_DX].id = bo.d_x, R->t[T_DSCALE].id = bo.d_scale, R->t[T_DBIAS].id = bo.d_bias;
    if (dx_req == FROST_TENSOR_AUTO || dx_req == FROST_TENSOR_NONE)
        chan_norm_ref_check_made_like_x(g, R->t[T_X].id, bo.d_x, "d_x");
}

/* ---- running one case ---- */

static void describe(const cn_case *c, char *buf, size_t cap)
{
    static const char *const layouts[] = {"nchw", "nhwc", "gapped-nchw", "gapped-nhwc", "permuted"};
    static const char *const bwds[] = {"none", "formula", "finite-diff"};
    char dims[96] = "";
    for (int i = 0; i < c->rank; ++i)
        snprintf(dims + strlen(dims), sizeof dims - strlen(dims), "%s%lld", i ? "," : "", (long long)c->dims[i]);
    snprintf(buf, cap,
             "%s x=[%s] G=%d %s scale=%d bias=%d full=%d zc=%d %s %s stats=%d running=%d momentum=%g eps=%g "
             "offset=%g bwd=%s saved=%d given_out=%d",
             chan_norm_ref_kind_names[c->kind], dims, c->groups, frost_dtype_name(c->dtype), c->scale, c->bias,
             c->full_param, c->zero_centered, c->inference ? "inference" : "training", layouts[c->layout], c->stats,
             c->running, c->momentum, c->epsilon, c->offset, bwds[c->backward], c->saved, c->given_out);
}

static int is_output(int slot)
{
    return slot == T_Y || slot == T_MEAN || slot == T_RSTD || slot == T_DX || slot == T_DSCALE || slot == T_DBIAS;
}

/* Restores the running statistics, poisons every output and executes again. */
static void execute_fresh(const run *R, frost_graph *g, const frost_binding *bind, int nb, void *ws)
{
    for (int64_t ch = 0; R->c->running && ch < R->C; ++ch) {
        const tu_buf *m = &R->t[T_RMEAN].buf, *v = &R->t[T_RVAR].buf;
        tu_buf_set((tu_buf *)m, ch * m->strides[0], R->rm0[ch]);
        tu_buf_set((tu_buf *)v, ch * v->strides[0], R->rv0[ch]);
    }
    for (int s = 0; s < T_COUNT; ++s)
        if (R->t[s].id && is_output(s))
            tu_buf_poison((tu_buf *)&R->t[s].buf);
    TU_OK(frost_graph_execute(g, bind, nb, ws, NULL));
}

static void run_case(int index, const cn_case *c, uint64_t seed)
{
    char desc[400];
    describe(c, desc, sizeof desc);
    tu_set_context("test_chan_norm_ref", seed, index, desc);
    tu_rng rng = tu_rng_make(seed + 7919u * (uint64_t)index);
    run R = {.c = c};
    frost_graph *g = NULL;
    frost_binding bind[T_COUNT];
    void *first[T_COUNT] = {0}, *ws = NULL;
    dense d = {0};
    int nb = 0, f0 = tu_failures();
    R.N = c->dims[0], R.C = c->dims[1], R.S = 1;
    for (int i = 2; i < c->rank; ++i)
        R.S *= c->dims[i];
    R.G = c->kind == GN ? c->groups : c->kind == IN ? R.C : 1;
    R.sets = c->kind == BN ? R.C : R.N * R.G;
    TU_OK(frost_graph_create(cpu, &g));
    add_ops(g, &rng, &R);
    if (tu_failures() != f0)
        goto out;
    TU_OK(frost_graph_build(g, NULL));
    if (tu_failures() != f0)
        goto out;
    char report[8192], opname[32];
    snprintf(opname, sizeof opname, "%s_fwd", chan_norm_ref_kind_names[c->kind]);
    TU_OK(frost_graph_explain(g, report, sizeof report, NULL));
    if (!strstr(report, opname) || !strstr(report, "engine: ref"))
        tu_failf("explain does not show %s on the ref engine:\n%s", opname, report);
    size_t ws_bytes = 0;
    TU_OK(frost_graph_workspace_size(g, &ws_bytes));
    ws = ws_bytes ? malloc(ws_bytes) : NULL;
    nb = tu_slots_alloc(g, R.t, T_COUNT, bind);
    tu_buf_fill_uniform(&R.t[T_X].buf, &rng, -2.0 + c->offset, 2.0 + c->offset);
    if (c->scale)
        tu_buf_fill_uniform(&R.t[T_SCALE].buf, &rng, c->zero_centered ? -0.5 : 0.5, c->zero_centered ? 0.5 : 1.5);
    if (c->bias)
        tu_buf_fill_uniform(&R.t[T_BIAS].buf, &rng, -1.0, 1.0);
    if (c->backward)
        tu_buf_fill_uniform(&R.t[T_DY].buf, &rng, -1.0, 1.0);
    R.rm0 = calloc((size_t)(2 * R.C + 2), sizeof(double));
    R.rv0 = R.rm0 + R.C + 1;
    if (c->running) {
        tu_buf_fill_uniform(&R.t[T_RMEAN].buf, &rng, -1.0, 1.0);
        tu_buf_fill_uniform(&R.t[T_RVAR].buf, &rng, 0.5, 2.0);
        for (int64_t ch = 0; ch < R.C; ++ch)
            R.rm0[ch] = chan_norm_ref_chan_at(&R, T_RMEAN, ch), R.rv0[ch] = chan_norm_ref_chan_at(&R, T_RVAR, ch);
    }
    execute_fresh(&R, g, bind, nb, ws);
    tu_slots_guard_check(R.t, T_COUNT, chan_norm_ref_slot_names);
    const int64_t total = R.N * R.C * R.S, most = total + R.sets + R.C + 1;
    d.x = malloc(sizeof(double) * (size_t)(2 * total + 2 * R.C + 3 * R.sets + 2 * most + 1));
    d.dy = d.x + total, d.w = d.dy + total, d.b = d.w + R.C, d.acc = d.b + R.C, d.got = d.acc + 3 * R.sets;
    d.ref = d.got + most;
    chan_norm_ref_load_dense(&R, &d);
    chan_norm_ref_check_forward(&R, &d);
    if (c->backward)
        chan_norm_ref_check_backward(&R, &d);
    /* a second execute from the same state must reproduce every written byte */
    for (int s = 0; s < T_COUNT; ++s)
        if (R.t[s].id && (first[s] = malloc(tu_alloc_bytes(&R.t[s].buf))) != NULL)
            memcpy(first[s], R.t[s].buf.alloc, tu_alloc_bytes(&R.t[s].buf));
    execute_fresh(&R, g, bind, nb, ws);
    for (int s = 0; s < T_COUNT; ++s)
        if (first[s] && memcmp(first[s], R.t[s].buf.alloc, tu_alloc_bytes(&R.t[s].buf)) != 0)
            tu_failf("%s: a second execute from the same inputs gave different bits", chan_norm_ref_slot_names[s]);
out:
    free(d.x);
    free(ws);
    free(R.rm0);
    for (int s = 0; s < T_COUNT; ++s)
        free(first[s]);
    tu_slots_free(R.t, T_COUNT);
    frost_graph_destroy(g);
}

static cn_case random_case(tu_rng *r)
{
    static const int64_t chans[] = {1, 2, 3, 4, 6, 8, 9, 12, 16};
    static const int64_t spatial[] = {1, 2, 3, 4, 5, 7, 8};
    static const double eps[] = {0, 1e-6, 1e-3, 0.25};
    static const double mom[] = {0, 0.01, 0.5, 1.0};
    static const frost_dtype dtypes[] = {F32, F16, BF16};
    cn_case c = {0};
    c.kind = (int)tu_int(r, GN, BN);
    c.rank = (int)tu_int(r, 2, 5);
    c.dtype = dtypes[tu_int(r, 0, 2)];
    c.dims[1] = chans[tu_int(r, 0, 8)];
    int64_t sp = 1, total;
    for (int i = 2; i < c.rank; ++i) {
        c.dims[i] = spatial[tu_int(r, 0, 6)];
        while (c.dims[1] * sp * c.dims[i] > 1500)
            c.dims[i] = (c.dims[i] + 1) / 2;
        sp *= c.dims[i];
    }
    int64_t nmax = 3000 / (c.dims[1] * sp);
    c.dims[0] = c.kind != BN && tu_int(r, 0, 15) == 0 ? 0 : tu_int(r, 1, nmax < 1 ? 1 : nmax > 5 ? 5 : nmax);
    total = c.dims[0] * c.dims[1] * sp;
    int divisors[16], nd = 0;
    for (int gdiv = 1; gdiv <= c.dims[1]; ++gdiv)
        if (c.dims[1] % gdiv == 0)
            divisors[nd++] = gdiv;
    c.groups = divisors[tu_int(r, 0, nd - 1)];
    c.scale = (int)tu_int(r, 0, 2);
    c.bias = (int)tu_int(r, 0, 2);
    c.full_param = (int)tu_int(r, 0, 1);
    c.zero_centered = tu_int(r, 0, 3) == 0;
    c.inference = tu_int(r, 0, 3) == 0;
    c.layout = (int)tu_int(r, NCHW, PERMUTED);
    c.stats = !c.inference && tu_int(r, 0, 1);
    c.running = c.kind == BN && (c.inference || tu_int(r, 0, 1));
    if (c.running && !c.inference && c.dims[0] * sp == 1)
        c.running = 0; /* M = 1 cannot update running_var */
    c.momentum = mom[tu_int(r, 0, 3)];
    c.epsilon = eps[tu_int(r, 0, 3)];
    c.offset = tu_int(r, 0, 2) == 0 ? 2.0 : 0.0;
    c.backward = tu_int(r, 0, 2) ? BWD_FORMULA : NO_BWD;
    int64_t m = c.kind == GN ? c.dims[1] / c.groups * sp : c.kind == IN ? sp : c.dims[0] * sp;
    if (c.backward && c.dtype == F32 && total <= 200 && m >= 3) /* see "M = 2" at the top */
        c.backward = BWD_FD;
    c.saved = c.inference ? 0 : (int)tu_int(r, 0, 3);
    c.given_out = tu_int(r, 0, 3) == 0;
    return c;
}

static void run_index(frost_context *ctx, int index, uint64_t seed)
{
    cn_case c;
    (void)ctx; /* run_case uses the file's context */
    if (index < NUM_TABLE) {
        c = table[index];
    } else {
        tu_rng r = tu_rng_make(seed * 31u + (uint64_t)index);
        c = random_case(&r);
    }
    run_case(index, &c, seed);
}

int main(void)
{
    return tu_ref_main(&cpu, 20261203, NUM_TABLE + NUM_RANDOM, chan_norm_ref_validation_walk, run_index);
}
