/*
 * norm_cuda.c — the cuda engine's LayerNorm, RMSNorm and AdaLayerNorm, forward and
 * backward: which problems the kernels cover, which kernel and launch configuration each
 * gets, and the launches.  AdaLayerNorm's per-sample parameters (addressing, and the
 * backward's segments) are worked out in adanorm_cuda.c.
 *
 * Layout legend: rows = prod(R...), cols = prod(C...) of X [R..., C...]; a "unit" is what
 * one thread loads at a time: a 16-byte vector (8 f16/bf16 or 4 f32 elements) on the
 * vector path, one element on the scalar path.
 *
 * One function, make_config(), decides both whether the kernels cover a problem and which
 * kernel runs it, so a support answer can never disagree with what build compiles; select
 * calls it with the device's checks around it, and frost__norm_cuda_keys()
 * (norm_cuda_keys.c) calls it on typical problems to list the keys frost-precompile
 * should compile.
 *
 * The kernels (norm_fwd.cu, norm_bwd.cu, norm_bwd_reduce.cu; norm_kernel.cuh has the
 * shared parameter blocks and row helpers) need rows evenly spaced (the outer dims
 * collapse to one row stride) and the normalized dims contiguous; anything else is refused
 * with the constraint named, and the ref engine takes it.  The vector path needs cols and
 * every row stride to be multiples of the unit; base-pointer alignment is only known at
 * execute, so vector kernels carry a scalar fallback chosen per launch.
 *
 * Grids are persistent: build reads the compiled kernel's registers, works out how many
 * blocks fit on an SM, and launches that many (fewer when rows are few); forward rows of
 * small row groups run as a one-pass grid instead (a block per ROWS_PER_BLOCK rows).  The backward
 * writes one f32 partial row of column sums per row group into the workspace and a second
 * kernel adds them in index order: d_scale and d_bias are bitwise repeatable by
 * construction, so the `deterministic` flag needs nothing extra.  With per-sample
 * gradients the rows come in segments (one parameter row each, norm_cuda.h) and the
 * reduce adds each parameter row's partial rows.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/norm/norm_cuda.h"
#include "runtime/runtime.h"

FROST__STATIC_ASSERT(sizeof(norm_fwd_params) == NORM_FWD_PARAMS_BYTES, "norm_fwd_params layout");
FROST__STATIC_ASSERT(sizeof(norm_bwd_params) == NORM_BWD_PARAMS_BYTES, "norm_bwd_params layout");
FROST__STATIC_ASSERT(sizeof(norm_reduce_params) == NORM_REDUCE_PARAMS_BYTES, "norm_reduce_params layout");

#define FWD_SOURCE "src/ops/norm/norm_fwd.cu"
#define BWD_SOURCE "src/ops/norm/norm_bwd.cu"
#define REDUCE_SOURCE "src/ops/norm/norm_bwd_reduce.cu"
#define REDUCE_COLS 32     /* columns per block of the reduce kernel (norm_bwd_reduce.cu) */
#define REDUCE_THREADS 1024 /* 32 columns x 32 slices */
#define MAX_COLS (1 << 30) /* column offsets are int32 in the kernels */

/* ------------------------------------------------------------------------------------ */
/* The launch-configuration table                                                        */
/* ------------------------------------------------------------------------------------ */
/* Per direction and path: the row group (threads per row, a power of two) is the smallest
 * that gives each thread at most nv_pref units, capped at max_group; units per thread
 * NV = ceil(units / group) must then be <= nv_max, else the row is walked in chunks
 * (LOOPED: group = block = looped_block threads, looped_nv units per chunk).  Blocks have
 * max(group, 256) threads.  Vector paths stream rows through a `stages`-deep cp.async ring
 * in shared memory (fewer stages when the ring would pass RING_MAX_BYTES, register
 * prefetch below 2).  The limits come from ptxas on sm_90a and sm_80: no spills, and
 * registers low enough for 2+ blocks of 256 per SM.
 *
 *   cols (bf16)   fwd group x NV         bwd group x NV        (f32: units are 4 elements)
 *   128           8 x 2   (32 rows/blk)  8 x 2  (32 rows/blk)
 *   1000, 1024    64 x 2   (4 rows/blk)  64 x 2  (4 rows/blk)
 *   4096          256 x 2                256 x 2
 *   5120          512 x 2                512 x 2
 *   8192          512 x 2                512 x 2
 *   12288         512 x 3                512 x 3
 *   16384         512 x 4                512 x 4 (x, dY re-read from the ring)
 *   > 16384       LOOPED                 LOOPED
 *
 * Two ring stages (one row ahead): the FROST_NORM_TUNE sweep of 2026-12-02 on the H200
 * (docs/PERF.md) found 2 stages with more resident blocks faster than 3-4 stages with
 * fewer, forward and backward, at every suite shape.
 */
typedef struct tile_rule {
    int nv_pref, nv_max, max_group;
    int looped_block, looped_nv;
    int stages; /* depth of the cp.async row ring (vector path), 0: register prefetch */
} tile_rule;

enum { PATH_VEC16 = 0, PATH_VEC32 = 1, PATH_SCALAR = 2 };

static const tile_rule tile_rules[2][3] = {
    /* forward */
    {{2, 4, 512, 1024, 2, 2}, {2, 4, 1024, 1024, 2, 2}, {8, 16, 1024, 1024, 8, 0}},
    /* backward */
    {{2, 4, 512, 512, 1, 2}, {2, 4, 512, 512, 1, 2}, {8, 8, 512, 512, 4, 0}},
};
/* The ring gets fewer stages when STAGES * (tensors * NV * BLOCK * 16 bytes) would pass
 * RING_MAX_BYTES (two blocks still fit an SM); when not even 2 stages fit, 2 stages up to
 * RING_MAX_2_BYTES (one block per SM: these are the widest rows, whose register prefetch
 * would spill); else the kernel prefetches into registers. */
#define RING_MAX_BYTES (96 * 1024)
#define RING_MAX_2_BYTES (128 * 1024)

/* Developer tuning (docs/CONTRIBUTING-GPU.md): FROST_NORM_TUNE="name=value,..." overrides
 * the table for experiments on a GPU; unset, the table rules.  Names: nv (nv_pref), nvmax,
 * group (max_group), stages (ring depth; 0 = register prefetch), l2 (1: 256-byte L2
 * fetches), persist (1: persistent grid, 0: one row group per row; forward only),
 * bps (cap on blocks per SM), minrows (backward: rows a row group should see at least). */
static int tune(const char *name, int dflt)
{
    const char *env = getenv("FROST_NORM_TUNE");
    const size_t len = strlen(name);
    for (const char *q = env; q && *q;) {
        if (!strncmp(q, name, len) && q[len] == '=')
            return atoi(q + len + 1);
        q = strchr(q, ',');
        q = q ? q + 1 : NULL;
    }
    return dflt;
}

/* ------------------------------------------------------------------------------------ */
/* Plans                                                                                 */
/* ------------------------------------------------------------------------------------ */
typedef struct norm_plan {
    int backward;
    int vec, nv, group, block, looped;
    int rows_per_block_groups; /* row groups per block (block / group) */
    int stages;                /* cp.async ring depth, 0 when none */
    int persistent;            /* grid capped at the resident blocks (else a block per row group) */
    size_t ring_bytes;         /* dynamic shared memory of the ring */
    int want_dscale, want_dbias;
    frost__adanorm_cuda ada;   /* parameter maps and backward segments */
    frost__kernel_key key, reduce_key;
    frost__kernel *kernel, *reduce;
    /* set by build */
    int blocks_per_sm;
    unsigned grid;
    int64_t rows_per_block; /* backward: contiguous rows per block */
    int64_t blocks_per_segment;
    int64_t num_partials;   /* backward: partial rows = grid * row groups per block */
    int64_t partial_stride; /* floats */
    size_t partial_bytes;   /* one partial buffer, 256-byte aligned */
} norm_plan;

static const char *dtype_define(frost_dtype t)
{
    return t == FROST_F32 ? "DTYPE_F32" : t == FROST_F16 ? "DTYPE_F16" : "DTYPE_BF16";
}

static int next_pow2(int64_t v)
{
    int p = 1;
    while (p < v)
        p <<= 1;
    return p;
}

static int64_t ceil_div(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

/* Writes "3" or "[12, 1]" for a slot's inner strides. */
static void print_inner_strides(frost__buf *why, const frost__norm_problem *p, const frost__norm_layout *l)
{
    if (p->inner_rank == 1) {
        frost__buf_printf(why, "%lld", (long long)l->inner_stride[0]);
        return;
    }
    frost__buf_printf(why, "[");
    for (int i = 0; i < p->inner_rank; i++)
        frost__buf_printf(why, "%s%lld", i ? ", " : "", (long long)l->inner_stride[i]);
    frost__buf_printf(why, "]");
}

static const char *const slot_label[FROST__NORM_NUM_SLOTS] = {
    "X", "scale", "bias", "Y", "mean", "inv_std", "dY", "dX", "d_scale", "d_bias",
};

/* Layout checks shared by both directions; NOT_SUPPORTED with the sentence in why. */
static frost_status check_layouts(const frost__norm_problem *p, frost__buf *why)
{
    static const int data_slots[] = {FROST__NORM_X, FROST__NORM_Y, FROST__NORM_D_Y, FROST__NORM_D_X};
    static const int param_slots[] = {FROST__NORM_SCALE, FROST__NORM_BIAS, FROST__NORM_D_SCALE, FROST__NORM_D_BIAS};
    static const int stat_slots[] = {FROST__NORM_MEAN, FROST__NORM_INV_STD};
    if (p->cols > MAX_COLS) {
        frost__buf_printf(why, "cuda norm handles up to %d normalized elements per row; this row has %lld", MAX_COLS,
                          (long long)p->cols);
        return FROST_NOT_SUPPORTED;
    }
    for (size_t i = 0; i < FROST__ARRAY_SIZE(data_slots); i++) {
        const frost__norm_layout *l = &p->slot[data_slots[i]];
        if (!l->present)
            continue;
        if (!l->inner_contiguous) {
            frost__buf_printf(why, "cuda norm needs the normalized dims contiguous (stride 1); %s's inner stride is ",
                              slot_label[data_slots[i]]);
            print_inner_strides(why, p, l);
            return FROST_NOT_SUPPORTED;
        }
        if (l->row_stride < 0 && p->rows > 1) {
            frost__buf_printf(why,
                              "cuda norm needs %s's outer (row) dims to collapse to one non-negative row stride; "
                              "its %d outer dims do not (make the rows evenly spaced, e.g. packed)",
                              slot_label[data_slots[i]], p->outer_rank);
            return FROST_NOT_SUPPORTED;
        }
    }
    for (size_t i = 0; i < FROST__ARRAY_SIZE(param_slots); i++) {
        const frost__norm_layout *l = &p->slot[param_slots[i]];
        if (l->present && !l->inner_contiguous) {
            frost__buf_printf(why, "cuda norm needs %s contiguous (stride 1); its stride is ",
                              slot_label[param_slots[i]]);
            print_inner_strides(why, p, l);
            return FROST_NOT_SUPPORTED;
        }
    }
    for (size_t i = 0; i < FROST__ARRAY_SIZE(stat_slots); i++) {
        const frost__norm_layout *l = &p->slot[stat_slots[i]];
        if (l->present && l->row_stride < 0 && p->rows > 1) {
            frost__buf_printf(why,
                              "cuda norm needs %s's outer dims to collapse to one stride between rows; they do not "
                              "(give it packed strides)",
                              slot_label[stat_slots[i]]);
            return FROST_NOT_SUPPORTED;
        }
    }
    return FROST_OK;
}

/* Can every row of every data slot, and every per-sample parameter row the kernels read,
 * start on a 16-byte boundary (given aligned bases)? */
static int rows_allow_vectors(const frost__norm_problem *p, int unit_elems)
{
    static const int data_slots[] = {FROST__NORM_X, FROST__NORM_Y, FROST__NORM_D_Y, FROST__NORM_D_X};
    if (p->cols % unit_elems != 0)
        return 0;
    for (size_t i = 0; i < FROST__ARRAY_SIZE(data_slots); i++) {
        const frost__norm_layout *l = &p->slot[data_slots[i]];
        if (l->present && p->rows > 1 && l->row_stride % unit_elems != 0)
            return 0;
    }
    for (int slot = FROST__NORM_SCALE; slot <= FROST__NORM_BIAS && p->per_sample_params; slot++) {
        const frost__norm_layout *l = &p->slot[slot];
        for (int i = 0; l->present && i < p->outer_rank; i++)
            if (l->outer_stride[i] * (l->dtype == FROST_F32 ? 4 : 2) % 16 != 0)
                return 0;
    }
    return 1;
}

/* Decides support and the whole configuration of a problem (device-independent). */
static frost_status make_config(const frost__norm_problem *p, norm_plan *plan, frost__buf *why)
{
    frost_status s = check_layouts(p, why);
    if (s != FROST_OK)
        return s;
    const frost_dtype io = p->slot[FROST__NORM_X].dtype;
    const int io_bytes = io == FROST_F32 ? 4 : 2;
    const int unit_elems = 16 / io_bytes;
    const int vector = rows_allow_vectors(p, unit_elems);
    const int path = !vector ? PATH_SCALAR : io_bytes == 4 ? PATH_VEC32 : PATH_VEC16;
    const tile_rule *rule = &tile_rules[p->backward][path];
    const int64_t units = ceil_div(p->cols, vector ? unit_elems : 1);

    memset(plan, 0, sizeof *plan);
    plan->backward = p->backward;
    plan->vec = vector ? unit_elems : 1;
    plan->group = next_pow2(ceil_div(units, tune("nv", rule->nv_pref)));
    if (plan->group > tune("group", rule->max_group))
        plan->group = tune("group", rule->max_group);
    plan->nv = (int)ceil_div(units, plan->group);
    if (plan->nv > tune("nvmax", rule->nv_max)) {
        plan->looped = 1;
        plan->group = rule->looped_block;
        plan->nv = rule->looped_nv;
    }
    plan->block = plan->group < 256 ? 256 : plan->group;
    /* Forward rows of up to 256 threads run as a plain grid, one row per row group: the
     * hardware's block scheduler overlaps short blocks better than the persistent loop
     * (sweep of 2026-12-02: RMSNorm 1.04-1.07x at hidden 1024 and 4096, 0.90x at 8192). */
    plan->persistent = p->backward || tune("persist", plan->block > 256);
    plan->rows_per_block_groups = plan->block / plan->group;
    s = frost__adanorm_cuda_config(p, plan->rows_per_block_groups, &plan->ada, why);
    if (s != FROST_OK)
        return s;
    if (vector && !plan->looped) {
        const size_t slot = (size_t)(p->backward ? 2 : 1) * (size_t)plan->nv * (size_t)plan->block * 16;
        plan->stages = tune("stages", rule->stages);
        while (plan->stages > 1 && (size_t)plan->stages * slot > RING_MAX_BYTES)
            plan->stages--;
        if (plan->stages < 2 && tune("stages", -1) != 0)
            plan->stages = 2 * slot <= RING_MAX_2_BYTES ? 2 : 0;
        if (plan->stages < 2)
            plan->stages = 0;
        plan->ring_bytes = (size_t)plan->stages * slot;
    }

    const frost__norm_layout *scale = &p->slot[FROST__NORM_SCALE];
    const frost__norm_layout *bias = &p->slot[FROST__NORM_BIAS];
    frost__kernel_key *k = &plan->key;
    if (!p->backward)
        frost__key_init(k, FWD_SOURCE, "norm_fwd_kernel");
    else
        frost__key_init(k, BWD_SOURCE, "norm_bwd_kernel");
    frost__key_define(k, dtype_define(io), NULL);
    frost__key_define(k, p->kind == FROST__NORM_LAYER ? "KIND_LAYER" : "KIND_RMS", NULL);
    frost__key_define(k, "VEC", "%d", plan->vec);
    frost__key_define(k, "NV", "%d", plan->nv);
    frost__key_define(k, "GROUP", "%d", plan->group);
    frost__key_define(k, "BLOCK", "%d", plan->block);
    frost__key_define(k, "SCALE_DT", "%d", scale->present ? (int)scale->dtype : 0);
    if (!p->backward)
        frost__key_define(k, "BIAS_DT", "%d", bias->present ? (int)bias->dtype : 0);
    if (scale->present && p->zero_centered_scale)
        frost__key_define(k, "ZERO_CENTERED", NULL);
    if (plan->looped)
        frost__key_define(k, "LOOPED", NULL);
    if (plan->stages)
        frost__key_define(k, "STAGES", "%d", plan->stages);
    if (p->per_sample_params)
        frost__key_define(k, "PER_SAMPLE", NULL);
    if (tune("l2", 0))
        frost__key_define(k, "L2_256", NULL);
    if (p->backward) {
        plan->want_dscale = p->slot[FROST__NORM_D_SCALE].present;
        plan->want_dbias = p->slot[FROST__NORM_D_BIAS].present;
        if (plan->want_dscale)
            frost__key_define(k, "DSCALE", NULL);
        if (plan->want_dbias)
            frost__key_define(k, "DBIAS", NULL);
        frost__key_init(&plan->reduce_key, REDUCE_SOURCE, "norm_bwd_reduce_kernel");
    }
    return FROST_OK;
}

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
    norm_plan *plan = malloc(sizeof *plan);
    if (!plan)
        return frost__fail(FROST_OUT_OF_MEMORY, "cuda norm: no memory for a plan");
    frost_status s = make_config(p, plan, why);
    if (s != FROST_OK) {
        free(plan);
        return s;
    }
    *plan_out = plan;
    return FROST_OK;
}

/* Resident blocks of the compiled kernel per SM (registers, threads, shared memory). */
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
    norm_plan *plan = plan_ptr;
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
        return frost__fail(FROST_NOT_SUPPORTED, "cuda norm: the row ring needs %zu bytes of shared memory per block; %s "
                           "allows %zu", plan->ring_bytes, dev->name, dev->smem_per_block_optin);
    plan->blocks_per_sm = blocks_per_sm(dev, plan->kernel, plan->block, plan->ring_bytes);
    if (plan->blocks_per_sm > tune("bps", 32))
        plan->blocks_per_sm = tune("bps", 32);
    const int64_t groups = plan->rows_per_block_groups;
    const int64_t resident = (int64_t)dev->sm_count * plan->blocks_per_sm;
    int64_t grid = ceil_div(p->rows, groups);
    if (grid > resident && plan->persistent)
        grid = resident;
    if (grid > (1 << 30)) /* the kernels stride over rows: any grid covers them */
        grid = 1 << 30;
    if (plan->backward) {
        /* Keep the partial buffer small next to the tensors: each row group should see at
         * least 8 rows, unless that would leave SMs idle. */
        int64_t cap = ceil_div(p->rows, groups * tune("minrows", 8));
        if (cap < dev->sm_count)
            cap = dev->sm_count;
        if (grid > cap)
            grid = cap;
        if (grid < 1)
            grid = 1;
        /* Spread that many blocks over the segments (one segment unless gradients are per
         * sample), at least one each; a segment's rows are split evenly between its own. */
        const int64_t segments = p->rows / plan->ada.segment_rows;
        plan->rows_per_block = ceil_div(plan->ada.segment_rows, segments > 0 ? ceil_div(grid, segments) : 1);
        plan->blocks_per_segment = ceil_div(plan->ada.segment_rows, plan->rows_per_block);
        grid = segments * plan->blocks_per_segment;
        plan->num_partials = grid * groups;
        plan->partial_stride = (p->cols + 7) / 8 * 8;
        plan->partial_bytes = ((size_t)plan->num_partials * (size_t)plan->partial_stride * sizeof(float) + 255) /
                              256 * 256;
    }
    plan->grid = (unsigned)grid;
    return FROST_OK;
}

static size_t norm_workspace(const frost__node *n, const void *plan_ptr)
{
    const norm_plan *plan = plan_ptr;
    (void)n;
    return plan->partial_bytes * (size_t)(plan->want_dscale + plan->want_dbias);
}

static int aligned16(const void *ptr)
{
    return ((uintptr_t)ptr & 15u) == 0;
}

/* Elements between rows of a slot (select refused negative strides when rows > 1). */
static int64_t row_stride_of(const frost__norm_problem *p, int slot)
{
    return p->slot[slot].present && p->rows > 1 ? p->slot[slot].row_stride : 0;
}

static frost_status launch(const frost_context *ctx, frost__kernel *k, unsigned grid_x, unsigned grid_y,
                           unsigned block, size_t dyn_smem, void *params, void *stream)
{
    frost__launch_dims dims;
    void *args[1] = {params};
    memset(&dims, 0, sizeof dims);
    dims.dyn_smem = dyn_smem;
    dims.grid[0] = grid_x, dims.grid[1] = grid_y, dims.grid[2] = 1;
    dims.block[0] = block, dims.block[1] = 1, dims.block[2] = 1;
    return frost__launch(ctx->device, k, &dims, args, stream);
}

/* The reduce grid: 32-column blocks x pairs x parameter rows (strided past 65535). */
static frost_status launch_reduce(const frost_context *ctx, frost__kernel *k, int64_t cols, int pairs, int64_t out_rows,
                                  void *params, void *stream)
{
    frost__launch_dims dims;
    void *args[1] = {params};
    memset(&dims, 0, sizeof dims);
    dims.grid[0] = (unsigned)ceil_div(cols, REDUCE_COLS), dims.grid[1] = (unsigned)pairs;
    dims.grid[2] = (unsigned)(out_rows < 65535 ? out_rows : 65535);
    dims.block[0] = REDUCE_THREADS, dims.block[1] = 1, dims.block[2] = 1;
    return frost__launch(ctx->device, k, &dims, args, stream);
}

static frost_status fwd_execute(const frost_context *ctx, const frost__node *n, const void *plan_ptr,
                                void *const *ptrs, void *workspace, void *stream)
{
    const frost__norm_problem *p = n->problem;
    const norm_plan *plan = plan_ptr;
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
    params.x_row_stride = row_stride_of(p, FROST__NORM_X);
    params.y_row_stride = row_stride_of(p, FROST__NORM_Y);
    params.mean_stride = row_stride_of(p, FROST__NORM_MEAN);
    params.inv_std_stride = row_stride_of(p, FROST__NORM_INV_STD);
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

static frost_status bwd_execute(const frost_context *ctx, const frost__node *n, const void *plan_ptr,
                                void *const *ptrs, void *workspace, void *stream)
{
    const frost__norm_problem *p = n->problem;
    const norm_plan *plan = plan_ptr;
    const int pairs = plan->want_dscale + plan->want_dbias;
    float *partial[2] = {NULL, NULL};
    frost_status s;
    if (pairs > 0 && plan->partial_bytes > 0) {
        if (!workspace || !aligned16(workspace))
            return frost__fail(FROST_INVALID_ARGUMENT, "cuda norm backward needs a 16-byte aligned workspace of %zu "
                                                       "bytes; got %p", norm_workspace(n, plan), workspace);
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
        params.x_row_stride = row_stride_of(p, FROST__NORM_X);
        params.dy_row_stride = row_stride_of(p, FROST__NORM_D_Y);
        params.dx_row_stride = row_stride_of(p, FROST__NORM_D_X);
        params.mean_stride = row_stride_of(p, FROST__NORM_MEAN);
        params.inv_std_stride = row_stride_of(p, FROST__NORM_INV_STD);
        params.rows_per_block = plan->rows_per_block;
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
        s = launch(ctx, plan->kernel, plan->grid, 1, (unsigned)plan->block, plan->ring_bytes, &params, stream);
        if (s != FROST_OK)
            return s;
    }
    if (pairs > 0) {
        norm_reduce_params rp;
        memset(&rp, 0, sizeof rp);
        const int64_t per_out = plan->blocks_per_segment * plan->rows_per_block_groups; /* partial rows per segment */
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
        rp.num_partials = p->rows > 0 ? (int32_t)plan->num_partials : 0;
        rp.cols = (int32_t)p->cols;
        if (out_rows > 0) {
            s = launch_reduce(ctx, plan->reduce, p->cols, pairs, out_rows, &rp, stream);
            if (s != FROST_OK)
                return s;
        }
    }
    return FROST_OK;
}

static void norm_describe_plan(const void *plan_ptr, frost__buf *out)
{
    const norm_plan *plan = plan_ptr;
    frost__key_print(&plan->key, out);
    frost__buf_printf(out, "; %s grid %u x %d threads (%d row group%s of %d, %d %s unit%s a thread%s; %d blocks/SM",
                      plan->persistent ? "persistent" : "one-pass", plan->grid, plan->block,
                      plan->rows_per_block_groups, plan->rows_per_block_groups > 1 ? "s" : "",
                      plan->group, plan->nv, plan->vec > 1 ? "16-byte" : "1-element", plan->nv > 1 ? "s" : "",
                      plan->looped ? " per chunk, looped over the row" : ", row in registers", plan->blocks_per_sm);
    if (plan->stages)
        frost__buf_printf(out, "; %d-stage cp.async row ring, %zu bytes of shared memory", plan->stages,
                          plan->ring_bytes);
    frost__buf_printf(out, ")");
    if (plan->ada.scale.count > 1 || plan->ada.bias.count > 1)
        frost__buf_printf(out, "; per-sample parameter rows: scale %lld, bias %lld", (long long)plan->ada.scale.count,
                          (long long)plan->ada.bias.count);
    if (plan->backward && (plan->want_dscale || plan->want_dbias)) {
        frost__buf_printf(out, "; d_scale/d_bias: %lld partial rows of column sums (%lld rows per block",
                          (long long)plan->num_partials, (long long)plan->rows_per_block);
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
    .coverage = "LayerNorm, RMSNorm and AdaLayerNorm forward on sm_80+: f32/f16/bf16, any cols (rows up to 16K "
                "elements in registers, longer rows in chunks), scale/bias f32 or the I/O dtype, zero-centred scale, "
                "saved statistics, per-sample parameters whose sample dims are one run of x's outer dims ([B, 1, C], "
                "[1, S, C], [B, S, C]); needs evenly spaced rows and contiguous normalized dims",
};

const frost__op_impl frost__norm_bwd_cuda = {
    .select = norm_select,
    .build = norm_build,
    .workspace = norm_workspace,
    .execute = bwd_execute,
    .describe_plan = norm_describe_plan,
    .coverage = "LayerNorm, RMSNorm and AdaLayerNorm backward on sm_80+: dx, d_scale, d_bias (always "
                "deterministic, per sample for AdaLayerNorm when each sample's rows are consecutive, like [B, 1, C]), "
                "saved or recomputed statistics; same dtypes and layouts as the forward",
};

/* The key make_config() picks for p (the key list in norm_cuda_keys.c). */
frost_status frost__norm_cuda_key(const frost__norm_problem *p, frost__kernel_key *key, frost__buf *why)
{
    norm_plan plan;
    frost_status s = make_config(p, &plan, why);
    if (s == FROST_OK)
        *key = plan.key;
    return s;
}
