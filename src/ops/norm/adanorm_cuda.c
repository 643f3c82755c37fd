/*
 * adanorm_cuda.c — the cuda engine's share of AdaLayerNorm: which per-sample parameter
 * layouts the norm kernels can address, and how the backward cuts rows into segments so
 * that d_scale and d_bias come out per parameter row, deterministically.
 *
 * Layout legend: x [R..., C...] with outer dims R... (rows = prod(R...)); a parameter
 * carries the outer dims where its dim is > 1 (x [B, S, C]: scale [B, 1, C] carries B,
 * [1, S, C] carries S, [B, S, C] both).
 *
 * Addressing.  The kernels find the parameter row of row r as (r / div) % count, that
 * index times `stride` elements from the base (norm_param_map).  That is exact when the
 * carried dims form one run of x's outer dims (x's size-1 dims may sit in between) whose
 * strides collapse to one: div is the product of x's outer dims after the run, count the
 * product of the run, stride the innermost carried stride.  Other layouts (a rank-4 x
 * with scale [B, 1, T, C]) are refused and run on the ref engine.
 *
 * Gradients.  The backward kernel sums dy * x_hat and dy per row group over a block's
 * rows into f32 partial rows, and a reduce kernel adds partial rows in index order
 * (norm_bwd.cu, norm_bwd_reduce.cu).  For per-sample gradients the rows are cut into
 * segments of segment_rows consecutive rows, each served by its own blocks, so no block
 * mixes two parameter rows; parameter row q of a gradient is then the sum of the partial
 * rows of its segments_per_out consecutive segments.  This needs the rows of one
 * parameter row to be consecutive (the run of carried dims starts at the first outer dim
 * of size > 1: [B, 1, C] yes, [1, S, C] no), and it costs one partial row per row group
 * and segment, so very short segments with many row groups per block are refused rather
 * than given a workspace many times the size of d_y.
 */
#include "ops/norm/norm_cuda.h"

#include <string.h>

/* A ratio of partial-row bytes to d_y bytes above which the backward refuses. */
#define MAX_PARTIAL_RATIO 8

static const char *const slot_label[FROST__NORM_NUM_SLOTS] = {
    "X", "scale", "bias", "Y", "mean", "inv_std", "dY", "dX", "d_scale", "d_bias",
};

/* "[4,1,*]": a parameter's outer dims, * for the normalized ones. */
static void print_param_dims(frost__buf *why, const frost__norm_problem *p, int slot)
{
    frost__buf_printf(why, "[");
    for (int i = 0; i < p->outer_rank; ++i)
        frost__buf_printf(why, "%lld,", (long long)p->param_outer_dims[slot][i]);
    frost__buf_printf(why, "*]");
}

/* The map of one parameter slot, or a refusal naming what breaks it.  first_carried
 * receives the outermost carried dim (-1 when the slot is shared or absent). */
static frost_status param_map(const frost__norm_problem *p, int slot, norm_param_map *m, int *first_carried,
                              frost__buf *why)
{
    const int64_t *pd = p->param_outer_dims[slot];
    const int64_t *st = p->slot[slot].outer_stride;
    int inner = -1, outer = -1;
    m->div = 1, m->count = 1, m->stride = 0;
    *first_carried = -1;
    if (!p->slot[slot].present || !p->per_sample_params)
        return FROST_OK;
    for (int i = p->outer_rank - 1; i >= 0; --i)
        if (pd[i] > 1) {
            if (inner < 0)
                inner = i;
            outer = i;
        }
    if (inner < 0)
        return FROST_OK;
    int64_t span = st[inner] * pd[inner];
    for (int i = inner - 1; i >= outer; --i) {
        if (p->outer_dims[i] == 1)
            continue;
        if (pd[i] == 1) {
            frost__buf_printf(why,
                              "cuda AdaLayerNorm needs a parameter's per-sample dims to be one run of x's outer "
                              "dims (like [B, 1, C] or [1, S, C]); %s ",
                              slot_label[slot]);
            print_param_dims(why, p, slot);
            frost__buf_printf(why, " carries x's outer dims %d and %d but not dim %d between them", outer, inner, i);
            return FROST_NOT_SUPPORTED;
        }
        if (st[i] != span) {
            frost__buf_printf(why,
                              "cuda AdaLayerNorm needs %s's per-sample dims to collapse to one stride; its dim %d "
                              "has stride %lld where %lld would continue dim %d (give it packed strides)",
                              slot_label[slot], i, (long long)st[i], (long long)span, i + 1);
            return FROST_NOT_SUPPORTED;
        }
        span = st[i] * pd[i];
    }
    for (int i = inner + 1; i < p->outer_rank; ++i)
        m->div *= p->outer_dims[i];
    for (int i = outer; i <= inner; ++i)
        m->count *= pd[i];
    m->stride = st[inner];
    *first_carried = outer;
    return FROST_OK;
}

/* A per-sample gradient must own runs of consecutive rows: no outer dim of x of size > 1
 * before its first carried dim. */
static frost_status check_consecutive(const frost__norm_problem *p, int slot, int first_carried, frost__buf *why)
{
    for (int i = 0; i < first_carried; ++i)
        if (p->outer_dims[i] > 1) {
            frost__buf_printf(why, "cuda AdaLayerNorm backward sums %s over runs of consecutive rows; %s ",
                              slot_label[slot], slot_label[slot]);
            print_param_dims(why, p, slot);
            frost__buf_printf(why,
                              " repeats along x's outer dim %d, so the rows of one parameter row are not "
                              "consecutive (per-sample dims must start at the first outer dim: [B, 1, C], not "
                              "[1, S, C]); the ref engine takes it",
                              i);
            return FROST_NOT_SUPPORTED;
        }
    return FROST_OK;
}

frost_status frost__adanorm_cuda_config(const frost__norm_problem *p, int row_groups, frost__adanorm_cuda *a,
                                        frost__buf *why)
{
    static const int grads[2] = {FROST__NORM_D_SCALE, FROST__NORM_D_BIAS};
    norm_param_map gmap[2];
    int first, per_sample[2] = {0, 0};
    frost_status s;
    memset(a, 0, sizeof *a);
    if ((s = param_map(p, FROST__NORM_SCALE, &a->scale, &first, why)) != FROST_OK ||
        (s = param_map(p, FROST__NORM_BIAS, &a->bias, &first, why)) != FROST_OK)
        return s;
    a->segment_rows = p->rows > 0 ? p->rows : 1;
    if (!p->backward)
        return FROST_OK;
    for (int k = 0; k < 2; ++k) {
        if ((s = param_map(p, grads[k], &gmap[k], &first, why)) != FROST_OK)
            return s;
        if (first < 0)
            continue;
        if ((s = check_consecutive(p, grads[k], first, why)) != FROST_OK)
            return s;
        per_sample[k] = 1;
        if (gmap[k].div < a->segment_rows)
            a->segment_rows = gmap[k].div > 0 ? gmap[k].div : 1;
    }
    const int64_t segments = p->rows / a->segment_rows; /* exact: every div divides rows */
    for (int k = 0; k < 2; ++k) {
        if (!p->slot[grads[k]].present)
            continue;
        a->segments_per_out[k] = per_sample[k] ? gmap[k].div / a->segment_rows : segments;
        a->out_rows[k] = frost__norm_param_rows(p, grads[k]); /* 1 when shared, 0 when a dim is 0 */
        a->out_stride[k] = per_sample[k] ? gmap[k].stride : 0;
    }
    const int io_bytes = p->slot[FROST__NORM_X].dtype == FROST_F32 ? 4 : 2;
    if ((per_sample[0] || per_sample[1]) && p->rows > 0 &&
        4 * (int64_t)row_groups > MAX_PARTIAL_RATIO * a->segment_rows * io_bytes) {
        const int k = per_sample[0] && (!per_sample[1] || gmap[0].div <= gmap[1].div) ? 0 : 1;
        const int64_t need =
            (4 * (int64_t)row_groups + MAX_PARTIAL_RATIO * io_bytes - 1) / (MAX_PARTIAL_RATIO * io_bytes);
        frost__buf_printf(why,
                          "cuda AdaLayerNorm backward needs at least %lld rows per parameter row of %s here (it has "
                          "%lld): each of the %d row groups of a block writes an f32 partial row per parameter row "
                          "at %lld columns, %lldx the bytes of dY; the ref engine takes it",
                          (long long)need, slot_label[grads[k]], (long long)a->segment_rows, row_groups,
                          (long long)p->cols, (long long)(4 * row_groups / (a->segment_rows * io_bytes)));
        return FROST_NOT_SUPPORTED;
    }
    return FROST_OK;
}
