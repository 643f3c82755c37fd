/*
 * graphs_norm.h — frost-bench's graphs for the normalization cases: RMSNorm, LayerNorm,
 * AdaLayerNorm (build_norm) and GroupNorm, InstanceNorm, BatchNorm (build_cnorm).  A part of
 * tools/frost-bench.c kept in its own file for length: it is included there once, after
 * the graph helpers it uses (bgraph, add_in, note and the R_* fill roles).
 *
 * Each builder declares the inputs in a fixed order (bound by index below), adds the op
 * with every output left to frost (AUTO) and notes the outputs to bind.  Backward cases get
 * saved statistics as inputs (filled synthetically by frost-bench), so they run without
 * the forward.
 */
#ifndef FROST_BENCH_GRAPHS_NORM_H
#define FROST_BENCH_GRAPHS_NORM_H

/* RMSNorm (with a bias under --rms-bias), LayerNorm over [rows, cols] (sliced rows under
 * --slice); AdaLayerNorm over [b, s, c] with (1 + scale) and shift [b, 1, c], as in DiT
 * blocks.  The forward is the training forward (y, inv_std and LayerNorm's mean), or under
 * --y-only the inference forward (y alone). */
static frost_status build_norm(const bcase *c, bgraph *bg)
{
    int ada = is_adaln(c->op), ln = ada || c->op == OP_LN_FWD || c->op == OP_LN_BWD, bwd = is_bwd(c->op);
    const int biased = ln || row_rms_bias(c); /* LayerNorm always; RMSNorm with --rms-bias */
    int r = ada ? 3 : 2, pr = ada ? 3 : 1;
    int64_t xd[3] = {c->rows, c->cols}, pd[3] = {c->cols}, sd[3] = {c->rows, 1}, xs[3] = {0};
    const int64_t n = row_slice(c);
    if (n) { /* [rows / n, n, cols] of a [rows / n, n + 1, cols] buffer */
        r = 3;
        xd[0] = sd[0] = c->rows / n, xd[1] = sd[1] = n, xd[2] = c->cols, sd[2] = 1;
        xs[0] = (n + 1) * c->cols, xs[1] = c->cols, xs[2] = 1;
    }
    if (ada) {
        xd[0] = pd[0] = sd[0] = c->b;
        xd[1] = sd[1] = c->s_q;
        xd[2] = pd[2] = c->c;
        pd[1] = sd[2] = 1;
    }
    const frost_dtype pdt = row_param_dtype(c) ? row_param_dtype(c) : c->dtype;
    frost_status s = FROST_OK;
    s = s ? s : add_in(bg, "x", c->dtype, r, xd, n ? xs : NULL, R_RANDOM);
    s = s ? s : add_in(bg, "scale", pdt, pr, pd, NULL, R_RANDOM);
    if (biased && !bwd)
        s = s ? s : add_in(bg, "bias", pdt, pr, pd, NULL, R_RANDOM);
    if (bwd) {
        s = s ? s : add_in(bg, "d_y", c->dtype, r, xd, n ? xs : NULL, R_RANDOM);
        if (ln)
            s = s ? s : add_in(bg, "mean", FROST_F32, r, sd, NULL, R_MEAN);
        s = s ? s : add_in(bg, "inv_std", FROST_F32, r, sd, NULL, R_INVSTD);
    }
    if (s)
        return s;
    frost_tensor x = bg->id[0], w = bg->id[1];
    if (!bwd) {
        const int stats = !row_y_only(c); /* the training forward saves inv_std (and LayerNorm's mean) */
        frost_norm_desc d = {.x = x, .scale = w, .bias = biased ? bg->id[2] : 0,
                             .phase = stats ? FROST_NORM_TRAINING : FROST_NORM_INFERENCE, .zero_centered_scale = ada};
        frost_norm_outputs o = {.y = FROST_TENSOR_AUTO, .inv_std = stats ? FROST_TENSOR_AUTO : FROST_TENSOR_NONE,
                                .mean = ln && stats ? FROST_TENSOR_AUTO : FROST_TENSOR_NONE};
        s = ada  ? frost_graph_add_adalayernorm(bg->g, &d, &o)
            : ln ? frost_graph_add_layernorm(bg->g, &d, &o)
                 : frost_graph_add_rmsnorm(bg->g, &d, &o);
        note(bg, o.y, R_OUTPUT), note(bg, o.mean, R_OUTPUT), note(bg, o.inv_std, R_OUTPUT);
    } else {
        frost_norm_backward_desc d = {.x = x, .d_y = bg->id[2], .scale = w, .mean = ln ? bg->id[3] : 0,
                                      .inv_std = bg->id[ln ? 4 : 3], .has_bias = biased, .zero_centered_scale = ada};
        frost_norm_grads gr = {.d_x = FROST_TENSOR_AUTO, .d_scale = FROST_TENSOR_AUTO,
                               .d_bias = biased ? FROST_TENSOR_AUTO : FROST_TENSOR_NONE};
        s = ada  ? frost_graph_add_adalayernorm_backward(bg->g, &d, &gr)
            : ln ? frost_graph_add_layernorm_backward(bg->g, &d, &gr)
                 : frost_graph_add_rmsnorm_backward(bg->g, &d, &gr);
        note(bg, gr.d_x, R_OUTPUT), note(bg, gr.d_scale, R_OUTPUT), note(bg, gr.d_bias, R_OUTPUT);
    }
    return s;
}

/* GroupNorm, InstanceNorm, BatchNorm over X [n, c, h, w], channels-last unless nchw; d_y
 * has X's strides.  BatchNorm takes f32 scale, bias and running statistics (torch's mixed
 * precision case); the others scale and bias in X's dtype. */
static frost_status build_cnorm(const bcase *c, bgraph *bg)
{
    typedef frost_status (*fwd_fn)(frost_graph *, const frost_channel_norm_desc *, frost_norm_outputs *);
    typedef frost_status (*bwd_fn)(frost_graph *, const frost_channel_norm_backward_desc *, frost_norm_grads *);
    static const fwd_fn fwd[3] = {frost_graph_add_groupnorm, frost_graph_add_instancenorm, frost_graph_add_batchnorm};
    static const bwd_fn bwdf[3] = {frost_graph_add_groupnorm_backward, frost_graph_add_instancenorm_backward,
                                   frost_graph_add_batchnorm_backward};
    int kind = ((int)c->op - OP_GN_FWD) / 2, bn = kind == 2, bwd = is_bwd(c->op); /* group, instance, batch */
    int64_t xd[4] = {c->n, c->c, c->h, c->w}, xs[4] = {c->h * c->w * c->c, 1, c->w * c->c, c->c};
    int64_t sd[2] = {bn ? c->c : c->n, kind == 0 ? c->groups : c->c};
    frost_dtype pdt = bn ? FROST_F32 : c->dtype;
    const int64_t *st = c->nchw ? NULL : xs;
    frost_status s = FROST_OK;
    s = s ? s : add_in(bg, "x", c->dtype, 4, xd, st, R_RANDOM);
    s = s ? s : add_in(bg, "scale", pdt, 1, &c->c, NULL, R_RANDOM);
    s = s ? s : add_in(bg, bwd ? "d_y" : "bias", bwd ? c->dtype : pdt, bwd ? 4 : 1, bwd ? xd : &c->c, bwd ? st : NULL,
                       R_RANDOM);
    if (bwd || bn) { /* saved mean and inv_std (bwd), or running mean and variance (BatchNorm fwd) */
        s = s ? s : add_in(bg, bwd ? "mean" : "running_mean", FROST_F32, bn ? 1 : 2, sd, NULL, R_MEAN);
        s = s ? s : add_in(bg, bwd ? "inv_std" : "running_var", FROST_F32, bn ? 1 : 2, sd, NULL, R_INVSTD);
    }
    if (s)
        return s;
    frost_tensor *id = bg->id;
    if (!bwd) {
        frost_channel_norm_desc d = {.x = id[0], .scale = id[1], .bias = id[2], .num_groups = (int)c->groups,
                                     .phase = FROST_NORM_TRAINING, .running_mean = bn ? id[3] : 0,
                                     .running_var = bn ? id[4] : 0};
        frost_norm_outputs o = {.y = FROST_TENSOR_AUTO, .mean = FROST_TENSOR_AUTO, .inv_std = FROST_TENSOR_AUTO};
        s = fwd[kind](bg->g, &d, &o);
        note(bg, o.y, R_OUTPUT), note(bg, o.mean, R_OUTPUT), note(bg, o.inv_std, R_OUTPUT);
    } else {
        frost_channel_norm_backward_desc d = {.x = id[0], .d_y = id[2], .scale = id[1], .mean = id[3],
                                              .inv_std = id[4], .num_groups = (int)c->groups, .has_bias = 1};
        frost_norm_grads gr = {.d_x = FROST_TENSOR_AUTO, .d_scale = FROST_TENSOR_AUTO, .d_bias = FROST_TENSOR_AUTO};
        s = bwdf[kind](bg->g, &d, &gr);
        note(bg, gr.d_x, R_OUTPUT), note(bg, gr.d_scale, R_OUTPUT), note(bg, gr.d_bias, R_OUTPUT);
    }
    return s;
}

#endif /* FROST_BENCH_GRAPHS_NORM_H */
