/*
 * test_norm_fuzz.c — random descriptors for every normalization op (LayerNorm, RMSNorm,
 * AdaLayerNorm, GroupNorm, InstanceNorm, BatchNorm; forward and backward) on the CPU
 * context.  Shapes (empty dims and ranks out of range included), dtypes, strides (packed,
 * permuted with gaps, arbitrary, broadcast), parameter and statistics shapes, optional
 * tensors, a tensor passed twice or a stranger's id, and the scalar options (epsilon,
 * groups, phase, momentum) are drawn at random, most combinations invalid.
 *
 * Each call must answer OK, INVALID_ARGUMENT or NOT_SUPPORTED, and any refusal must carry a
 * message.  A graph that builds runs on guarded buffers (NaN margins and gaps, outputs
 * poisoned): the run must succeed, leave every guard element as it was, and write every
 * element of every output (finite inputs, epsilon > 0: no output element may stay NaN).
 * Under the CI's sanitizer build this is also the check that no descriptor makes the
 * validation, the planning or the reference kernels read or write out of bounds or leak.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"

#define ITERS 1500 /* graphs per op and direction */

typedef enum op_kind { OP_LN, OP_RMS, OP_ADA, OP_GN, OP_IN, OP_BN, OP_KINDS } op_kind;
static const char *const op_names[OP_KINDS] = {"layernorm", "rmsnorm",      "adalayernorm",
                                               "groupnorm", "instancenorm", "batchnorm"};

static double epsilon(tu_rng *r)
{
    static const double ok[] = {0.0, 1e-5, 1e-3, 0.25};
    if (tu_fz_chance(r, 4))
        return tu_fz_chance(r, 50) ? -1e-3 : NAN;
    return ok[tu_fz_pick(r, 4)];
}

/* The forward's output slots: y like X, the statistics (f32) like X with the normalized
 * dims 1 (row norms) or [N, G] / [N, C] / [C] (channel norms). */
static frost_norm_outputs draw_outputs(tu_fuzz *f, frost_dtype dt, int rank, const int64_t *dims, int srank,
                                       const int64_t *sdims)
{
    frost_norm_outputs out;
    out.y = tu_fz_maybe_output(f, "y", dt, rank, dims, 5);
    out.mean = tu_fz_maybe_output(f, "mean", FROST_F32, srank, sdims, 40);
    out.inv_std = tu_fz_maybe_output(f, "inv_std", FROST_F32, srank, sdims, 40);
    return out;
}

/* The backward's gradient slots: d_x like X, d_scale and d_bias (f32) like the parameters. */
static frost_norm_grads draw_grads(tu_fuzz *f, frost_dtype dt, int rank, const int64_t *dims, int prank,
                                   const int64_t *pdims)
{
    frost_norm_grads out;
    out.d_x = tu_fz_maybe_output(f, "d_x", dt, rank, dims, 5);
    out.d_scale = tu_fz_maybe_output(f, "d_scale", FROST_F32, prank, pdims, 40);
    out.d_bias = tu_fz_maybe_output(f, "d_bias", FROST_F32, prank, pdims, 40);
    return out;
}

/* Records the three output slots of an accepted op (those it created: AUTO) for binding;
 * passes the status through.  Pointers: read after the op has filled them in. */
static frost_status created(tu_fuzz *f, frost_status s, const frost_tensor *a, const frost_tensor *b,
                            const frost_tensor *c)
{
    if (s == FROST_OK)
        tu_fz_created(f, *a), tu_fz_created(f, *b), tu_fz_created(f, *c);
    return s;
}

/* ---- the ops ---------------------------------------------------------------------------- */

static frost_status add_row_norm(tu_fuzz *f, op_kind op, int backward)
{
    tu_rng *r = f->r;
    int rank = (int)tu_int(r, 1, 4);
    if (tu_fz_chance(r, 2))
        rank = tu_fz_chance(r, 50) ? 0 : FROST_MAX_RANK + 1;
    int64_t dims[FROST_MAX_RANK + 1];
    for (int i = 0; i < FROST_MAX_RANK + 1; i++)
        dims[i] = tu_fz_small_dim(r);
    int norm_dims = tu_fz_chance(r, 85) ? (int)tu_int(r, 0, rank > 1 ? 2 : 1) : (int)tu_int(r, -1, rank + 1);
    const int nd = norm_dims == 0 ? 1 : norm_dims;
    int order[FROST_MAX_RANK];
    for (int i = 0; i < FROST_MAX_RANK; i++)
        order[i] = i;
    const frost_dtype dt = tu_fz_io_dtype(r);
    frost_tensor x = tu_fz_declare(f, "x", dt, rank, dims, order, 0);
    if (tu_fz_chance(r, 2))
        x = FROST_TENSOR_NONE;
    f->x = x;
    /* parameters: the normalized shape, rank(X) with leading ones, or (AdaLayerNorm)
     * X's outer dims kept or broadcast */
    int64_t pdims[FROST_MAX_RANK];
    int prank = nd >= 1 && nd <= rank && nd <= FROST_MAX_RANK ? nd : 1;
    for (int i = 0; i < prank; i++)
        pdims[i] = rank - prank + i >= 0 ? dims[rank - prank + i] : 1;
    if (rank >= 1 && rank <= FROST_MAX_RANK && (op == OP_ADA || tu_fz_chance(r, 20))) {
        prank = rank;
        for (int i = 0; i < rank; i++)
            pdims[i] = i >= rank - nd || (op == OP_ADA && tu_fz_chance(r, 50)) ? dims[i] : 1;
    }
    const frost_dtype pdt = tu_fz_chance(r, 50) ? FROST_F32 : dt;
    frost_tensor scale = tu_fz_maybe_input(f, "scale", pdt, prank, pdims, 30);
    int64_t sdims[FROST_MAX_RANK] = {1, 1, 1, 1, 1, 1, 1, 1};
    for (int i = 0; i < rank && i < FROST_MAX_RANK; i++)
        sdims[i] = i >= rank - nd ? 1 : dims[i];
    const int srank = rank >= 1 && rank <= FROST_MAX_RANK ? rank : 1;
    if (!backward) {
        frost_norm_desc d = {.x = x,
                             .scale = scale,
                             .bias = tu_fz_maybe_input(f, "bias", pdt, prank, pdims, 40),
                             .epsilon = epsilon(r),
                             .norm_dims = norm_dims,
                             .phase = (frost_norm_phase)(tu_fz_chance(r, 3) ? 2 : tu_fz_pick(r, 2)),
                             .zero_centered_scale = tu_fz_chance(r, 30)};
        if (tu_fz_chance(r, 5))
            d.bias = d.scale;
        frost_norm_outputs out = draw_outputs(f, dt, srank, dims, srank, sdims);
        return created(f,
                       op == OP_LN    ? frost_graph_add_layernorm(f->g, &d, &out)
                       : op == OP_RMS ? frost_graph_add_rmsnorm(f->g, &d, &out)
                                      : frost_graph_add_adalayernorm(f->g, &d, &out),
                       &out.y, &out.mean, &out.inv_std);
    }
    frost_norm_backward_desc d = {.x = x,
                                  .d_y = tu_fz_chance(r, 3) ? x : tu_fz_maybe_input(f, "d_y", dt, rank, dims, 2),
                                  .scale = scale,
                                  .mean = op != OP_RMS || tu_fz_chance(r, 5)
                                              ? tu_fz_maybe_input(f, "mean", FROST_F32, srank, sdims, 40)
                                              : FROST_TENSOR_NONE,
                                  .inv_std = tu_fz_maybe_input(f, "inv_std", FROST_F32, srank, sdims, 40),
                                  .epsilon = epsilon(r),
                                  .norm_dims = norm_dims,
                                  .has_bias = tu_fz_chance(r, 50),
                                  .zero_centered_scale = tu_fz_chance(r, 30),
                                  .deterministic = tu_fz_chance(r, 50)};
    frost_norm_grads out = draw_grads(f, dt, srank, dims, prank, pdims);
    return created(f,
                   op == OP_LN    ? frost_graph_add_layernorm_backward(f->g, &d, &out)
                   : op == OP_RMS ? frost_graph_add_rmsnorm_backward(f->g, &d, &out)
                                  : frost_graph_add_adalayernorm_backward(f->g, &d, &out),
                   &out.d_x, &out.d_scale, &out.d_bias);
}

static frost_status add_chan_norm(tu_fuzz *f, op_kind op, int backward)
{
    tu_rng *r = f->r;
    int rank = (int)tu_int(r, 2, 5);
    if (tu_fz_chance(r, 2))
        rank = tu_fz_chance(r, 50) ? 1 : FROST_MAX_RANK + 1;
    int64_t dims[FROST_MAX_RANK + 1];
    for (int i = 0; i < FROST_MAX_RANK + 1; i++)
        dims[i] = tu_fz_small_dim(r);
    if (rank >= 2 && tu_fz_chance(r, 50))
        dims[1] = 4 * (int64_t)tu_int(r, 1, 4); /* channels with divisors */
    const int64_t c = rank >= 2 ? dims[1] : 1;
    /* NCHW, NHWC (channels innermost) or another order */
    int order[FROST_MAX_RANK];
    const int layout = tu_fz_pick(r, 3);
    for (int i = 0; i < FROST_MAX_RANK; i++)
        order[i] = i;
    if (rank >= 3 && rank <= FROST_MAX_RANK && layout == 1) {
        for (int i = 1; i < rank - 1; i++)
            order[i] = i + 1;
        order[rank - 1] = 1;
    } else if (rank >= 3 && rank <= FROST_MAX_RANK && layout == 2) {
        for (int i = rank - 1; i > 0; i--) {
            const int j = tu_fz_pick(r, i + 1), t = order[i];
            order[i] = order[j], order[j] = t;
        }
    }
    const frost_dtype dt = tu_fz_io_dtype(r);
    const frost_tensor x = f->x = tu_fz_declare(f, "x", dt, rank, dims, order, 0);
    int groups = (int)(tu_fz_chance(r, 70) ? tu_int(r, 1, 4) : tu_int(r, -1, c + 1));
    if (op == OP_GN && tu_fz_chance(r, 60) && c > 0)
        groups = c % 4 == 0 ? 4 : 1;
    const int64_t g = groups > 0 ? groups : 1;
    /* per-channel parameters: [C] or [1, C, 1, ...] */
    int64_t pdims[FROST_MAX_RANK] = {c};
    int prank = 1;
    if (tu_fz_chance(r, 30) && rank >= 2 && rank <= FROST_MAX_RANK) {
        prank = rank;
        for (int i = 0; i < rank; i++)
            pdims[i] = i == 1 ? c : 1;
    }
    const frost_dtype pdt = tu_fz_chance(r, 50) ? FROST_F32 : dt;
    const frost_tensor scale = tu_fz_maybe_input(f, "scale", pdt, prank, pdims, 30);
    /* statistics: GroupNorm [N, G], InstanceNorm [N, C], BatchNorm [C] */
    int64_t sdims[2] = {dims[0], op == OP_GN ? g : c};
    int srank = 2;
    if (op == OP_BN)
        sdims[0] = c, srank = 1;
    if (!backward) {
        frost_channel_norm_desc d = {.x = x,
                                     .scale = scale,
                                     .bias = tu_fz_maybe_input(f, "bias", pdt, prank, pdims, 40),
                                     .epsilon = epsilon(r),
                                     .num_groups = groups,
                                     .phase = (frost_norm_phase)(tu_fz_chance(r, 3) ? 2 : tu_fz_pick(r, 2)),
                                     .zero_centered_scale = tu_fz_chance(r, 30),
                                     .momentum = tu_fz_chance(r, 80) ? (tu_fz_chance(r, 50) ? 0.0 : 0.3)
                                                                     : (tu_fz_chance(r, 50) ? -0.5 : 1.5)};
        const int64_t rdims[1] = {c};
        if (op == OP_BN || tu_fz_chance(r, 5)) {
            d.running_mean = tu_fz_maybe_input(f, "running_mean", FROST_F32, 1, rdims, 30);
            d.running_var =
                tu_fz_chance(r, 10) ? d.running_mean : tu_fz_maybe_input(f, "running_var", FROST_F32, 1, rdims, 30);
        }
        const int rank_y = rank >= 1 && rank <= FROST_MAX_RANK ? rank : 2;
        frost_norm_outputs out = draw_outputs(f, dt, rank_y, dims, srank, sdims);
        return created(f,
                       op == OP_GN   ? frost_graph_add_groupnorm(f->g, &d, &out)
                       : op == OP_IN ? frost_graph_add_instancenorm(f->g, &d, &out)
                                     : frost_graph_add_batchnorm(f->g, &d, &out),
                       &out.y, &out.mean, &out.inv_std);
    }
    frost_channel_norm_backward_desc d = {.x = x,
                                          .d_y =
                                              tu_fz_chance(r, 3) ? x : tu_fz_maybe_input(f, "d_y", dt, rank, dims, 2),
                                          .scale = scale,
                                          .mean = tu_fz_maybe_input(f, "mean", FROST_F32, srank, sdims, 40),
                                          .inv_std = tu_fz_maybe_input(f, "inv_std", FROST_F32, srank, sdims, 40),
                                          .epsilon = epsilon(r),
                                          .num_groups = groups,
                                          .has_bias = tu_fz_chance(r, 50),
                                          .zero_centered_scale = tu_fz_chance(r, 30),
                                          .deterministic = tu_fz_chance(r, 50)};
    const int rank_dx = rank >= 1 && rank <= FROST_MAX_RANK ? rank : 2;
    frost_norm_grads out = draw_grads(f, dt, rank_dx, dims, prank, pdims);
    return created(f,
                   op == OP_GN   ? frost_graph_add_groupnorm_backward(f->g, &d, &out)
                   : op == OP_IN ? frost_graph_add_instancenorm_backward(f->g, &d, &out)
                                 : frost_graph_add_batchnorm_backward(f->g, &d, &out),
                   &out.d_x, &out.d_scale, &out.d_bias);
}

/* Inputs uniform in [-2, 2), running statistics in [0.05, 2): inference may take one
 * tensor for both, and a negative variance would leave y NaN. */
static void fill(tu_fuzz *f, const char *name, tu_buf *b)
{
    tu_buf_fill_uniform(b, f->r, strncmp(name, "running_", 8) ? -2.0 : 0.05, 2.0);
}

int main(void)
{
    const uint64_t seed = tu_seed(0x6e6f726d66757aULL);
    const int only = tu_case_filter();
    frost_context *ctx = NULL;
    TU_OK(frost_context_create(NULL, &ctx));
    int cases = 0, built = 0, ran = 0, ran_op[OP_KINDS][2] = {{0}};
    for (int op = 0; op < OP_KINDS && ctx; op++)
        for (int backward = 0; backward < 2; backward++)
            for (int it = 0; it < ITERS; it++) {
                const int index = (op * 2 + backward) * ITERS + it;
                if (only >= 0 && index != only)
                    continue;
                char what[96];
                snprintf(what, sizeof what, "%s %s, graph %d", op_names[op], backward ? "backward" : "forward", it);
                tu_rng r = tu_rng_make(seed + (uint64_t)index * 0x9e3779b97f4a7c15ULL);
                tu_set_context("test_norm_fuzz", seed, index, what);
                tu_case_begin();
                tu_fuzz f = {.r = &r, .fill = fill};
                TU_OK(frost_graph_create(ctx, &f.g));
                frost_status s =
                    op <= OP_ADA ? add_row_norm(&f, (op_kind)op, backward) : add_chan_norm(&f, (op_kind)op, backward);
                tu_fz_expect_refusal(s, what);
                if (s == FROST_OK && f.aliased)
                    tu_failf("%s: accepted X as one of its outputs", what);
                if (s == FROST_OK) {
                    const int done = tu_fz_build_and_run(&f, what);
                    built += done >= 0, ran += done > 0, ran_op[op][backward] += done > 0;
                }
                frost_graph_destroy(f.g);
                tu_case_end();
                cases++;
            }
    frost_context_destroy(ctx);
    printf("test_norm_fuzz: %d graphs, %d built, %d ran (forward / backward:", cases, built, ran);
    for (int op = 0; op < OP_KINDS; op++)
        printf(" %s %d / %d", op_names[op], ran_op[op][0], ran_op[op][1]);
    printf(")\n");
    /* the draws must reach every op's reference kernels, not only the validation */
    for (int op = 0; op < OP_KINDS && only < 0; op++)
        for (int backward = 0; backward < 2; backward++)
            if (ran_op[op][backward] < ITERS / 20)
                tu_failf("%s %s: only %d of %d graphs ran: the draws are too often invalid", op_names[op],
                         backward ? "backward" : "forward", ran_op[op][backward], ITERS);
    return tu_finish(cases);
}
