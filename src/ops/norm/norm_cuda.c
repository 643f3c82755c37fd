/*
 * norm_cuda.c — the cuda engine's LayerNorm, RMSNorm and AdaLayerNorm, forward
 * and backward: select (the configuration comes from norm_cuda_config.c), build
 * (kernels and grid), workspace, the launches and the plan's description.
 * AdaLayerNorm's per-sample parameters (addressing, and the backward's
 * segments) are worked out in adanorm_cuda.c.
 *
 * Grids are persistent: build reads the compiled kernel's registers, works out
 * how many blocks fit on an SM, and launches that many (fewer when rows are
 * few; counted in clusters when a plan splits its rows over a cluster's blocks,
 * ROW_SPLIT in norm_kernel.cuh, sm_90 only); forward rows of small row groups run as a one-pass grid instead (a
 * block per ROWS_PER_BLOCK rows, or per ROWS_PER_BLOCK * plan->trips rows when
 * each row group takes several in turn).  The backward writes one f32 partial row of
 * column sums per row group into the workspace and a second kernel adds them in
 * index order: d_scale and d_bias are bitwise repeatable by construction, so
 * the `deterministic` flag needs nothing extra.  With per-sample gradients the
 * rows come in segments (one parameter row each, norm_cuda.h) and the reduce
 * adds each parameter row's partial rows.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/norm/norm_cuda.h"

FROST__STATIC_ASSERT(sizeof(norm_fwd_params) == NORM_FWD_PARAMS_BYTES, "norm_fwd_params layout");
FROST__STATIC_ASSERT(sizeof(norm_bwd_params) == NORM_BWD_PARAMS_BYTES, "norm_bwd_params layout");
FROST__STATIC_ASSERT(sizeof(norm_reduce_params) == NORM_REDUCE_PARAMS_BYTES, "norm_reduce_params layout");
FROST__STATIC_ASSERT(NORM_ROW_LEVELS == FROST_MAX_RANK - 1, "a row level per outer dim");

#define REDUCE_COLS 32      /* columns per block of the reduce kernel (norm_bwd_reduce.cu) */

static frost_status norm_select(const frost_context *ctx, const frost__graph *g, const frost__node *n, void **plan_out,
                                frost__buf *why)
{
    const frost__norm_problem *p = n->problem;
    const frost__device *dev = ctx->device;
    (void)g;
    *plan_out = NULL;
    if (!dev) {
        frost__buf_printf(why, "cuda norm needs a CUDA context (this one has no device)");
        return FROST_NOT_SUPPORTED;
    }
    if (dev->cc_major < 8) {
        frost__buf_printf(why, "cuda norm kernels need sm_80 or newer; %s is sm_%d%d", dev->name, dev->cc_major,
                          dev->cc_minor);
        return FROST_NOT_SUPPORTED;
    }
    frost__norm_plan *plan = malloc(sizeof *plan);
    if (!plan)
        return frost__fail(FROST_OUT_OF_MEMORY, "cuda norm: no memory for a plan");
    frost_status s = dev->cc_major >= 9 ? frost__norm_cuda_config(p, plan, why)
                                        : frost__norm_cuda_config_unsplit(p, plan, why);
    if (s != FROST_OK) {
        free(plan);
        return s;
    }
    *plan_out = plan;
    return FROST_OK;
}

/* Resident blocks of the compiled kernel per SM (registers, threads, shared
 * memory). */
static int blocks_per_sm(const frost__device *dev, const frost__kernel *k, int block, size_t dyn_smem)
{
    int by_threads = 2048 / block;
    int regs = k->attrs.registers > 0 ? k->attrs.registers : 128;
    int regs_per_thread = (regs + 7) / 8 * 8; /* allocated per warp in units of 256 */
    int by_regs = 65536 / (regs_per_thread * block);
    size_t smem = (size_t)(k->attrs.static_smem > 0 ? k->attrs.static_smem : 0) + dyn_smem + 1024;
    int by_smem = (int)(dev->smem_per_sm / smem);
    int b = by_threads < by_regs ? by_threads : by_regs;
    b = b < by_smem ? b : by_smem;
    b = b < 32 ? b : 32;
    return b > 0 ? b : 1;
}

static frost_status norm_build(const frost_context *ctx, const frost__node *n, void *plan_ptr,
                               const frost_build_options *opt)
{
    const frost__norm_problem *p = n->problem;
    frost__norm_plan *plan = plan_ptr;
    frost__device *dev = ctx->device;
    const int enforce = opt ? opt->enforce_precompiled : 0;
    frost_status s = frost__kernel_get(dev, &plan->key, enforce, &plan->kernel);
    if (s != FROST_OK)
        return s;
    if (plan->backward && (plan->want_dscale || plan->want_dbias)) {
        s = frost__kernel_get(dev, &plan->reduce_key, enforce, &plan->reduce);
        if (s != FROST_OK)
            return s;
    }
    if (plan->ring_bytes > dev->smem_per_block_optin)
        return frost__fail(FROST_NOT_SUPPORTED,
                           "cuda norm: the row ring needs %zu bytes of shared "
                           "memory per block; %s "
                           "allows %zu",
                           plan->ring_bytes, dev->name, dev->smem_per_block_optin);
    plan->blocks_per_sm = blocks_per_sm(dev, plan->kernel, plan->block, plan->ring_bytes);
    if (plan->blocks_per_sm > plan->max_bps) /* the configuration's cap (norm_cuda_config.c) */
        plan->blocks_per_sm = plan->max_bps;
    /* Grids are counted in logical blocks: clusters of plan->row_split blocks sharing their
     * rows (norm_kernel.cuh), else blocks; the launch has row_split times as many. */
    const int64_t groups = plan->rows_per_block_groups, split = plan->row_split;
    const int64_t sms = dev->sm_count / split;
    const int64_t resident = sms * plan->blocks_per_sm;
    int64_t grid = frost__norm_ceil_div(p->rows, groups);
    if (grid > resident && plan->persistent) {
        grid = resident;
        /* Forward: as few blocks as give every block the same number of row trips, so
         * that no trip runs alone at the end (16384 rows on 528 resident blocks: 512
         * blocks of 32 trips rather than 16 of 32 and 512 of 31). */
        if (!plan->backward && frost__norm_tune("even", 1)) {
            const int64_t trips = frost__norm_ceil_div(frost__norm_ceil_div(p->rows, groups), grid);
            grid = frost__norm_ceil_div(frost__norm_ceil_div(p->rows, groups), trips);
        }
    }
    if (!plan->persistent && plan->trips > 1) /* a one-pass grid of blocks of `trips` row trips */
        grid = frost__norm_ceil_div(grid, plan->trips);
    if (grid > (1 << 30) / split) /* the kernels stride over rows: any grid covers them */
        grid = (1 << 30) / split;
    if (plan->backward) {
        /* Keep the partial buffer small next to the tensors: each row group should
         * see at least 8 rows, unless that would leave SMs idle. */
        int64_t cap = frost__norm_ceil_div(p->rows, groups * frost__norm_tune("minrows", 8));
        if (cap < sms)
            cap = sms;
        if (grid > cap)
            grid = cap;
        if (grid < 1)
            grid = 1;
        /* Spread that many blocks over the segments (one segment unless gradients are per
         * sample), at least one each.  A segment's rows spread over every slot where a slot
         * is an SM (one block an SM) and the ceil split leaves its last block short: 8192 rows
         * on 132 slots as 124 blocks of 62 rows and 8 of 63 ran 1.01-1.02x the 130 of 63 and
         * one of 2.  With two blocks an SM the SM of a short block still has its other one,
         * and spreading measured 0.98-1.00x.  An even split stays: 4096 rows as 128 blocks of
         * 32 ran 1.05x (LayerNorm, 16384 columns) the 132 blocks of 31 or 32 (2026-12-03
         * evening sweeps, docs/PERF.md). */
        const int64_t segments = p->rows / plan->ada.segment_rows;
        frost__norm_split_rows(plan->ada.segment_rows, segments > 0 ? frost__norm_ceil_div(grid, segments) : 1,
                               frost__norm_tune("bal", plan->blocks_per_sm == 1), &plan->rows_per_block,
                               &plan->blocks_per_segment, &plan->rows_extra);
        /* clusters merge their blocks' partial rows (norm_bwd.cu, sm_90; one segment): as many
         * blocks as whole clusters take, the last ones without rows when the split has fewer */
        plan->cluster = plan->cluster_key > 1 && dev->cc_major >= 9 ? plan->cluster_key : 1;
        plan->blocks_per_segment = frost__norm_ceil_div(plan->blocks_per_segment, plan->cluster) * plan->cluster;
        grid = segments * plan->blocks_per_segment;
        /* register-resident rows store their sums in lane order, plan->positions of them
         * (norm_reduce_params); the chunked paths in column order, cols.  The buffer holds a
         * row per row group, the most any path writes (partials_per_segment below). */
        plan->partial_stride = ((plan->positions > p->cols ? plan->positions : p->cols) + 7) / 8 * 8;
        plan->partial_bytes =
            ((size_t)(grid * groups) * (size_t)plan->partial_stride * sizeof(float) + 255) / 256 * 256;
    }
    plan->grid = (unsigned)(grid * split);
    return FROST_OK;
}

static size_t norm_workspace(const frost__node *n, const void *plan_ptr)
{
    const frost__norm_plan *plan = plan_ptr;
    (void)n;
    return plan->partial_bytes * (size_t)(plan->want_dscale + plan->want_dbias);
}

static int aligned16(const void *ptr)
{
    return ((uintptr_t)ptr & 15u) == 0;
}

static frost_status launch(const frost_context *ctx, frost__kernel *k, unsigned grid_x, unsigned grid_y, unsigned block,
                           size_t dyn_smem, void *params, void *stream)
{
    frost__launch_dims dims;
    void *args[1] = {params};
    memset(&dims, 0, sizeof dims);
    dims.dyn_smem = dyn_smem;
    dims.grid[0] = grid_x, dims.grid[1] = grid_y, dims.grid[2] = 1;
    dims.block[0] = block, dims.block[1] = 1, dims.block[2] = 1;
    return frost__launch(ctx->device, k, &dims, args, stream);
}

/* The reduce grid: 32-position blocks x pairs x parameter rows (strided past
 * 65535). */
static frost_status launch_reduce(const frost_context *ctx, const frost__norm_plan *plan, int64_t positions, int pairs,
                                  int64_t out_rows, void *params, void *stream)
{
    frost__launch_dims dims;
    void *args[1] = {params};
    memset(&dims, 0, sizeof dims);
    dims.grid[0] = (unsigned)frost__norm_ceil_div(positions, REDUCE_COLS), dims.grid[1] = (unsigned)pairs;
    dims.grid[2] = (unsigned)(out_rows < 65535 ? out_rows : 65535);
    dims.block[0] = (unsigned)plan->reduce_threads, dims.block[1] = 1, dims.block[2] = 1;
    dims.early = plan->reduce_early;
    return frost__launch(ctx->device, plan->reduce, &dims, args, stream);
}

/* Partial rows of one segment: a block writes one when its staged row groups add their sums
 * in shared memory first (lane-order rows, norm_bwd.cu), a cluster one when its blocks merge
 * theirs (plan->cluster), else every row group one. */
static int64_t partials_per_segment(const frost__norm_plan *plan, int lane_order)
{
    const int staged = lane_order && plan->stages > 1;
    return staged ? plan->blocks_per_segment / plan->cluster : plan->blocks_per_segment * plan->rows_per_block_groups;
}

/* Partial rows of the whole grid (its segments' in turn). */
static int64_t partial_rows(const frost__norm_plan *plan, int lane_order)
{
    return plan->grid / plan->row_split / plan->blocks_per_segment * partials_per_segment(plan, lane_order);
}

static frost_status fwd_execute(const frost_context *ctx, const frost__node *n, const void *plan_ptr, void *const *ptrs,
                                void *workspace, void *stream)
{
    const frost__norm_problem *p = n->problem;
    const frost__norm_plan *plan = plan_ptr;
    norm_fwd_params params;
    (void)workspace;
    if (p->rows == 0)
        return FROST_OK;
    memset(&params, 0, sizeof params);
    params.x = ptrs[FROST__NORM_X];
    params.y = ptrs[FROST__NORM_Y];
    params.scale = ptrs[FROST__NORM_SCALE];
    params.bias = ptrs[FROST__NORM_BIAS];
    params.mean = ptrs[FROST__NORM_MEAN];
    params.inv_std = ptrs[FROST__NORM_INV_STD];
    params.rows = p->rows;
    memcpy(params.row_dims, plan->row_map.dims, sizeof params.row_dims);
    params.x_rows = plan->row_map.slot[FROST__NORM_X];
    params.y_rows = plan->row_map.slot[FROST__NORM_Y];
    params.mean_rows = plan->row_map.slot[FROST__NORM_MEAN];
    params.inv_std_rows = plan->row_map.slot[FROST__NORM_INV_STD];
    params.scale_map = plan->ada.scale;
    params.bias_map = plan->ada.bias;
    params.cols = (int32_t)p->cols;
    params.vec_ok = plan->vec > 1 && aligned16(params.x) && aligned16(params.y) && aligned16(params.scale) &&
                    aligned16(params.bias);
    params.epsilon = (float)p->epsilon;
    params.inv_cols = (float)(1.0 / (double)p->cols);
    if (!params.x || !params.y)
        return frost__fail(FROST_INVALID_ARGUMENT, "cuda norm forward: X or Y is bound to NULL");
    return launch(ctx, plan->kernel, plan->grid, 1, (unsigned)plan->block, plan->ring_bytes, &params, stream);
}

static frost_status bwd_execute(const frost_context *ctx, const frost__node *n, const void *plan_ptr, void *const *ptrs,
                                void *workspace, void *stream)
{
    const frost__norm_problem *p = n->problem;
    const frost__norm_plan *plan = plan_ptr;
    const int pairs = plan->want_dscale + plan->want_dbias;
    float *partial[2] = {NULL, NULL};
    int lane_order = 0; /* the partial rows' layout: lane order from register-resident rows */
    frost_status s;
    if (pairs > 0 && plan->partial_bytes > 0) {
        if (!workspace || !aligned16(workspace))
            return frost__fail(FROST_INVALID_ARGUMENT,
                               "cuda norm backward needs a 16-byte aligned workspace of %zu "
                               "bytes; got %p",
                               norm_workspace(n, plan), workspace);
        partial[0] = workspace;
        partial[1] = (float *)((char *)workspace + plan->partial_bytes);
    }
    if (p->rows > 0) {
        norm_bwd_params params;
        memset(&params, 0, sizeof params);
        params.x = ptrs[FROST__NORM_X];
        params.dy = ptrs[FROST__NORM_D_Y];
        params.scale = ptrs[FROST__NORM_SCALE];
        params.mean = ptrs[FROST__NORM_MEAN];
        params.inv_std = ptrs[FROST__NORM_INV_STD];
        params.dx = ptrs[FROST__NORM_D_X];
        params.partial_scale = plan->want_dscale ? partial[0] : NULL;
        params.partial_bias = plan->want_dbias ? partial[plan->want_dscale] : NULL;
        params.rows = p->rows;
        memcpy(params.row_dims, plan->row_map.dims, sizeof params.row_dims);
        params.x_rows = plan->row_map.slot[FROST__NORM_X];
        params.dy_rows = plan->row_map.slot[FROST__NORM_D_Y];
        params.dx_rows = plan->row_map.slot[FROST__NORM_D_X];
        params.mean_rows = plan->row_map.slot[FROST__NORM_MEAN];
        params.inv_std_rows = plan->row_map.slot[FROST__NORM_INV_STD];
        params.rows_per_block = plan->rows_per_block;
        params.rows_extra = plan->rows_extra;
        params.rows_per_segment = plan->ada.segment_rows;
        params.blocks_per_segment = plan->blocks_per_segment;
        params.partial_stride = plan->partial_stride;
        params.scale_map = plan->ada.scale;
        params.cols = (int32_t)p->cols;
        params.vec_ok = plan->vec > 1 && aligned16(params.x) && aligned16(params.dy) && aligned16(params.dx) &&
                        aligned16(params.scale);
        params.epsilon = (float)p->epsilon;
        params.inv_cols = (float)(1.0 / (double)p->cols);
        if (!params.x || !params.dy || !params.dx)
            return frost__fail(FROST_INVALID_ARGUMENT, "cuda norm backward: X, dY or dX is bound to NULL");
        lane_order = !plan->looped && (plan->vec == 1 || params.vec_ok);
        s = launch(ctx, plan->kernel, plan->grid, 1, (unsigned)plan->block, plan->ring_bytes, &params, stream);
        if (s != FROST_OK)
            return s;
    }
    if (pairs > 0) {
        norm_reduce_params rp;
        memset(&rp, 0, sizeof rp);
        const int64_t per_out = partials_per_segment(plan, lane_order);
        int64_t out_rows = 0;
        int i = 0;
        for (int k = 0; k < 2; k++) {
            if (!(k == 0 ? plan->want_dscale : plan->want_dbias))
                continue;
            rp.partial[i] = partial[i];
            rp.out[i] = ptrs[k == 0 ? FROST__NORM_D_SCALE : FROST__NORM_D_BIAS];
            rp.out_stride[i] = plan->ada.out_stride[k];
            rp.out_rows[i] = (int32_t)plan->ada.out_rows[k];
            rp.partials_per_out[i] = p->rows > 0 ? (int32_t)(plan->ada.segments_per_out[k] * per_out) : 0;
            if (!rp.out[i] && rp.out_rows[i] > 0)
                return frost__fail(FROST_INVALID_ARGUMENT, "cuda norm backward: %s is bound to NULL",
                                   k == 0 ? "d_scale" : "d_bias");
            out_rows = plan->ada.out_rows[k] > out_rows ? plan->ada.out_rows[k] : out_rows;
            i++;
        }
        rp.partial_stride = plan->partial_stride;
        rp.num_partials = p->rows > 0 ? (int32_t)partial_rows(plan, lane_order) : 0;
        rp.cols = (int32_t)p->cols;
        rp.lanes = lane_order ? plan->group : 1;
        rp.vec = lane_order ? plan->vec : 1;
        rp.positions = (int32_t)(lane_order ? plan->positions : p->cols);
        if (out_rows > 0) {
            s = launch_reduce(ctx, plan, rp.positions, pairs, out_rows, &rp, stream);
            if (s != FROST_OK)
                return s;
        }
    }
    return FROST_OK;
}

/* "rows in runs of 5 (...)" for two row levels, the levels outermost first for more. */
static void explain_row_map(const frost__norm_row_map *m, frost__buf *out)
{
    const norm_rows *x = &m->slot[FROST__NORM_X];
    if (m->levels == 2) {
        frost__buf_printf(out, "; rows in runs of %lld (X: %lld elements apart in a run, %lld from run to run)",
                          (long long)m->dims[0], (long long)x->stride[0], (long long)x->stride[1]);
        return;
    }
    frost__buf_printf(out, "; rows at %d levels of strides (X's rows as [", m->levels);
    for (int i = m->levels - 1; i >= 0; i--)
        frost__buf_printf(out, "%lld%s", (long long)m->dims[i], i ? ", " : "] at strides [");
    for (int i = m->levels - 1; i >= 0; i--)
        frost__buf_printf(out, "%lld%s", (long long)x->stride[i], i ? ", " : "] elements)");
}

static void norm_describe_plan(const void *plan_ptr, frost__buf *out)
{
    const frost__norm_plan *plan = plan_ptr;
    frost__key_print(&plan->key, out);
    frost__buf_printf(out,
                      "; %s grid %u x %d threads (%d row group%s of %d, %d %s unit%s a "
                      "thread%s; %d blocks/SM",
                      plan->persistent ? "persistent" : "one-pass", plan->grid, plan->block,
                      plan->rows_per_block_groups, plan->rows_per_block_groups > 1 ? "s" : "", plan->group, plan->nv,
                      plan->vec > 1 ? "16-byte" : "1-element", plan->nv > 1 ? "s" : "",
                      plan->looped ? " per chunk, looped over the row" : ", row in registers", plan->blocks_per_sm);
    if (plan->trips > 1)
        frost__buf_printf(out, "; %d rows a row group", plan->trips);
    if (plan->row_split > 1)
        frost__buf_printf(out, "; every row split over a cluster of %d blocks, %d columns a block", plan->row_split,
                          plan->nv * plan->group * plan->vec);
    if (plan->stages)
        frost__buf_printf(out, "; %d-stage cp.async row ring, %zu bytes of shared memory", plan->stages,
                          plan->ring_bytes);
    frost__buf_printf(out, ")");
    if (plan->row_map.levels > 1)
        explain_row_map(&plan->row_map, out);
    if (plan->ada.scale.count > 1 || plan->ada.bias.count > 1)
        frost__buf_printf(out, "; per-sample parameter rows: scale %lld, bias %lld", (long long)plan->ada.scale.count,
                          (long long)plan->ada.bias.count);
    if (plan->backward && (plan->want_dscale || plan->want_dbias)) {
        frost__buf_printf(out, "; d_scale/d_bias: %lld partial rows of column sums (%lld rows per block",
                          (long long)partial_rows(plan, !plan->looped), (long long)plan->rows_per_block);
        if (plan->rows_extra > 0)
            frost__buf_printf(out, ", %lld in the first %lld blocks of a segment",
                              (long long)(plan->rows_per_block + 1), (long long)plan->rows_extra);
        if (plan->stages > 1 && plan->rows_per_block_groups > 1)
            frost__buf_printf(out, ", the block's row groups added in shared memory");
        if (plan->stages > 1 && plan->cluster > 1)
            frost__buf_printf(out, ", clusters of %d blocks merging theirs", plan->cluster);
        if (plan->ada.out_rows[0] > 1 || plan->ada.out_rows[1] > 1)
            frost__buf_printf(out, ", segments of %lld rows; parameter rows: d_scale %lld, d_bias %lld",
                              (long long)plan->ada.segment_rows, (long long)plan->ada.out_rows[0],
                              (long long)plan->ada.out_rows[1]);
        frost__buf_printf(out, "), added in fixed order by norm_bwd_reduce_kernel: deterministic");
    }
}

const frost__op_impl frost__norm_fwd_cuda = {
    .select = norm_select,
    .build = norm_build,
    .execute = fwd_execute,
    .describe_plan = norm_describe_plan,
    .coverage = "LayerNorm, RMSNorm and AdaLayerNorm forward on sm_80+: "
                "f32/f16/bf16, any cols (rows up to 16K "
                "elements in registers, longer rows in chunks), scale/bias f32 "
                "or the I/O dtype, zero-centred scale, "
                "saved statistics, per-sample parameters whose sample dims are "
                "one run of x's outer dims ([B, 1, C], "
                "[1, S, C], [B, S, C]); rows at any outer strides; needs "
                "contiguous normalized dims",
};

const frost__op_impl frost__norm_bwd_cuda = {
    .select = norm_select,
    .build = norm_build,
    .workspace = norm_workspace,
    .execute = bwd_execute,
    .describe_plan = norm_describe_plan,
    .coverage = "LayerNorm, RMSNorm and AdaLayerNorm backward on sm_80+: dx, "
                "d_scale, d_bias (always "
                "deterministic, per sample for AdaLayerNorm when each sample's "
                "rows are consecutive, like [B, 1, C]), "
                "saved or recomputed statistics; same dtypes and layouts as "
                "the forward",
};
