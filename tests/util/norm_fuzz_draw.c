/*
 * norm_fuzz_draw.c — see norm_fuzz_draw.h.
 */
#include "norm_fuzz_draw.h"

#include <math.h>

/* With f->wide_percent, sometimes one dim of X (dims[at]) grows to one of `sizes` and every
 * other positive dim is cut to 4 at most, so the graph reaches the kernels of real widths
 * and stays small; draws nothing when wide_percent is 0. */
static void widen(tu_fuzz *f, int64_t *dims, int rank, int at, const int64_t *sizes, int nsizes)
{
    if (f->wide_percent <= 0 || at < 0 || at >= rank || rank > FROST_MAX_RANK || !tu_fz_chance(f->r, f->wide_percent))
        return;
    for (int i = 0; i < rank; i++)
        if (dims[i] > 4)
            dims[i] = 4;
    dims[at] = sizes[tu_fz_pick(f->r, nsizes)];
}

const char *const tu_nf_op_names[TU_NF_OPS] = {"layernorm", "rmsnorm",      "adalayernorm",
                                               "groupnorm", "instancenorm", "batchnorm"};

/* X's rank, in [lo, hi] or now and then `below` or past FROST_MAX_RANK, and its dims (all
 * FROST_MAX_RANK + 1 drawn, mostly small). */
static int draw_x(tu_rng *r, int lo, int hi, int below, int64_t dims[FROST_MAX_RANK + 1])
{
    int rank = (int)tu_int(r, lo, hi);
    if (tu_fz_chance(r, 2))
        rank = tu_fz_chance(r, 50) ? below : FROST_MAX_RANK + 1;
    for (int i = 0; i < FROST_MAX_RANK + 1; i++)
        dims[i] = tu_fz_small_dim(r);
    return rank;
}

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

static frost_status add_row_norm(tu_fuzz *f, tu_nf_op op, int backward)
{
    tu_rng *r = f->r;
    int64_t dims[FROST_MAX_RANK + 1];
    const int rank = draw_x(r, 1, 4, 0, dims);
    static const int64_t wide_rows[] = {128, 256, 1000, 1024, 2048, 4096, 5120, 8192, 12288, 16384, 20000};
    widen(f, dims, rank, rank - 1, wide_rows, (int)(sizeof wide_rows / sizeof wide_rows[0]));
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
    if (rank >= 1 && rank <= FROST_MAX_RANK && (op == TU_NF_ADA || tu_fz_chance(r, 20))) {
        prank = rank;
        for (int i = 0; i < rank; i++)
            pdims[i] = i >= rank - nd || (op == TU_NF_ADA && tu_fz_chance(r, 50)) ? dims[i] : 1;
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
                       op == TU_NF_LN    ? frost_graph_add_layernorm(f->g, &d, &out)
                       : op == TU_NF_RMS ? frost_graph_add_rmsnorm(f->g, &d, &out)
                                         : frost_graph_add_adalayernorm(f->g, &d, &out),
                       &out.y, &out.mean, &out.inv_std);
    }
    frost_norm_backward_desc d = {.x = x,
                                  .d_y = tu_fz_chance(r, 3) ? x : tu_fz_maybe_input(f, "d_y", dt, rank, dims, 2),
                                  .scale = scale,
                                  .mean = op != TU_NF_RMS || tu_fz_chance(r, 5)
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
                   op == TU_NF_LN    ? frost_graph_add_layernorm_backward(f->g, &d, &out)
                   : op == TU_NF_RMS ? frost_graph_add_rmsnorm_backward(f->g, &d, &out)
                                     : frost_graph_add_adalayernorm_backward(f->g, &d, &out),
                   &out.d_x, &out.d_scale, &out.d_bias);
}

static frost_status add_chan_norm(tu_fuzz *f, tu_nf_op op, int backward)
{
    tu_rng *r = f->r;
    int64_t dims[FROST_MAX_RANK + 1];
    const int rank = draw_x(r, 2, 5, 1, dims);
    if (rank >= 2 && tu_fz_chance(r, 50))
        dims[1] = 4 * (int64_t)tu_int(r, 1, 4); /* channels with divisors */
    static const int64_t wide_chan[] = {32, 64, 96, 128, 256, 320, 512}, wide_space[] = {32, 64, 100, 256, 1024};
    if (f->wide_percent > 0 && tu_fz_chance(r, 50)) /* many channels, or a long spatial dim */
        widen(f, dims, rank, 1, wide_chan, (int)(sizeof wide_chan / sizeof wide_chan[0]));
    else if (f->wide_percent > 0)
        widen(f, dims, rank, rank - 1, wide_space, (int)(sizeof wide_space / sizeof wide_space[0]));
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
    if (op == TU_NF_GN && tu_fz_chance(r, 60) && c > 0)
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
    int64_t sdims[2] = {dims[0], op == TU_NF_GN ? g : c};
    int srank = 2;
    if (op == TU_NF_BN)
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
        if (op == TU_NF_BN || tu_fz_chance(r, 5)) {
            d.running_mean = tu_fz_maybe_input(f, "running_mean", FROST_F32, 1, rdims, 30);
            d.running_var =
                tu_fz_chance(r, 10) ? d.running_mean : tu_fz_maybe_input(f, "running_var", FROST_F32, 1, rdims, 30);
        }
        const int rank_y = rank >= 1 && rank <= FROST_MAX_RANK ? rank : 2;
        frost_norm_outputs out = draw_outputs(f, dt, rank_y, dims, srank, sdims);
        return created(f,
                       op == TU_NF_GN   ? frost_graph_add_groupnorm(f->g, &d, &out)
                       : op == TU_NF_IN ? frost_graph_add_instancenorm(f->g, &d, &out)
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
                   op == TU_NF_GN   ? frost_graph_add_groupnorm_backward(f->g, &d, &out)
                   : op == TU_NF_IN ? frost_graph_add_instancenorm_backward(f->g, &d, &out)
                                    : frost_graph_add_batchnorm_backward(f->g, &d, &out),
                   &out.d_x, &out.d_scale, &out.d_bias);
}

frost_status tu_nf_add(tu_fuzz *f, tu_nf_op op, int backward)
{
    return op <= TU_NF_ADA ? add_row_norm(f, op, backward) : add_chan_norm(f, op, backward);
}
