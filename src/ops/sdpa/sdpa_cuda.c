/*
 * sdpa_cuda.c — the cuda engine's attention forward: which problems the tensor-core
 * kernel (sdpa_fwd.cu) can run, with which tile configuration, and how a launch is
 * packed.
 *
 * select() is the one place that answers both "supported?" and "which kernel?": it checks
 * every constraint in a fixed order and refuses with a sentence that names the constraint
 * and the nearest supported setting, or fills a plan with the kernel key, the tile
 * configuration, the grid and a parameter block holding everything but the pointers.
 * build() fetches the kernel (NVRTC compile or cache hit, honouring enforce_precompiled);
 * execute() copies the parameter block, fills in the bound pointers, decides whether every
 * row is 16-byte aligned (cp.async path) from the pointers' low bits, and launches.  It
 * neither allocates nor hashes.
 *
 * Kernel keys: DTYPE_F16|DTYPE_BF16, D_QK and D_V (head dims rounded up to 16), the tile
 * configuration (BLOCK_M, BLOCK_N, NUM_WARPS, Q_IN_REGS) and BIAS_F32|BIAS_IO when a bias
 * is present.  Masks, lengths, ragged offsets, sinks and stats are run-time parameters
 * (see the kernel's header comment), so the whole key set is 2 x 16 x 16 x 3 = 1536 keys,
 * 96 of them with d_qk = d_v; frost__sdpa_fwd_cuda_keys lists them.
 *
 * Tile configurations live in tile_table (one row per head-dim range, the place to tune).
 * Every row fits in 99 KiB of shared memory (the opt-in limit of sm_86/sm_89, the smallest
 * of sm_80+), so the key set does not depend on the device; select still checks the
 * device's limit.  Q stays in registers unless Q + O + S fragments would exceed
 * Q_REGS_BUDGET registers per thread, in which case it is re-read from shared memory.
 */
#include <stdlib.h>
#include <string.h>

#include "ops/sdpa/sdpa.h"
#include "ops/sdpa/sdpa_kernel_params.cuh"
#include "runtime/runtime.h"

FROST__STATIC_ASSERT(sizeof(sdpa_fwd_params) == SDPA_FWD_PARAMS_BYTES, "sdpa_fwd_params layout drifted");

#define FWD_SOURCE "src/ops/sdpa/sdpa_fwd.cu"
#define FWD_ENTRY "sdpa_fwd_kernel"
#define MAX_HEAD_DIM 256
#define Q_REGS_BUDGET 160 /* 32-bit registers for Q, O and S fragments per thread */
#define MAX_GRID_YZ 65535
#define MAX_SEQ (INT32_MAX - 1024) /* rows and keys are int in the kernel */

/* ------------------------------------------------------------------------------------ */
/* Tile configurations                                                                   */
/* ------------------------------------------------------------------------------------ */

typedef struct tile_config {
    int max_dim; /* rows apply while max(D_QK, D_V) <= max_dim */
    int block_m, block_n, num_warps;
} tile_config;

static const tile_config tile_table[] = {
    {64, 64, 64, 4},
    {128, 64, 64, 4},
    {256, 64, 32, 4},
};

typedef struct fwd_config {
    int d_qk, d_v; /* padded to 16 */
    int block_m, block_n, num_warps, q_in_regs;
    int bias; /* 0 none, 1 f32, 2 I/O dtype */
    frost_dtype dtype;
} fwd_config;

static int round16(int64_t d)
{
    return (int)((d + 15) / 16 * 16);
}

static fwd_config choose_config(frost_dtype dtype, int64_t d_qk, int64_t d_v, int bias)
{
    fwd_config c = {.d_qk = round16(d_qk), .d_v = round16(d_v), .bias = bias, .dtype = dtype};
    int widest = c.d_qk > c.d_v ? c.d_qk : c.d_v;
    const tile_config *t = &tile_table[FROST__ARRAY_SIZE(tile_table) - 1];
    for (size_t i = 0; i < FROST__ARRAY_SIZE(tile_table); i++) {
        if (widest <= tile_table[i].max_dim) {
            t = &tile_table[i];
            break;
        }
    }
    c.block_m = t->block_m;
    c.block_n = t->block_n;
    c.num_warps = t->num_warps;
    /* per thread: Q fragments d_qk/4, O accumulators d_v/2, S accumulators block_n/2 */
    c.q_in_regs = c.d_qk / 4 + c.d_v / 2 + c.block_n / 2 <= Q_REGS_BUDGET;
    return c;
}

static size_t config_smem(const fwd_config *c)
{
    return (size_t)SDPA_FWD_SMEM_BYTES(c->block_m, c->block_n, c->d_qk, c->d_v);
}

static void config_key(const fwd_config *c, frost__kernel_key *key)
{
    frost__key_init(key, FWD_SOURCE, FWD_ENTRY);
    frost__key_define(key, c->dtype == FROST_BF16 ? "DTYPE_BF16" : "DTYPE_F16", NULL);
    frost__key_define(key, "D_QK", "%d", c->d_qk);
    frost__key_define(key, "D_V", "%d", c->d_v);
    frost__key_define(key, "BLOCK_M", "%d", c->block_m);
    frost__key_define(key, "BLOCK_N", "%d", c->block_n);
    frost__key_define(key, "NUM_WARPS", "%d", c->num_warps);
    frost__key_define(key, "Q_IN_REGS", "%d", c->q_in_regs);
    if (c->bias)
        frost__key_define(key, c->bias == 1 ? "BIAS_F32" : "BIAS_IO", NULL);
}

size_t frost__sdpa_fwd_cuda_keys(frost__kernel_key *keys, size_t cap, int equal_dims_only)
{
    static const frost_dtype dtypes[] = {FROST_F16, FROST_BF16};
    size_t count = 0;
    for (size_t t = 0; t < FROST__ARRAY_SIZE(dtypes); t++)
        for (int bias = 0; bias <= 2; bias++)
            for (int d_qk = 16; d_qk <= MAX_HEAD_DIM; d_qk += 16)
                for (int d_v = 16; d_v <= MAX_HEAD_DIM; d_v += 16) {
                    if (equal_dims_only && d_qk != d_v)
                        continue;
                    if (count < cap) {
                        fwd_config c = choose_config(dtypes[t], d_qk, d_v, bias);
                        config_key(&c, &keys[count]);
                    }
                    count++;
                }
    return count;
}

/* ------------------------------------------------------------------------------------ */
/* The plan                                                                              */
/* ------------------------------------------------------------------------------------ */

typedef struct fwd_plan {
    fwd_config config;
    frost__kernel_key key;
    frost__kernel *kernel; /* owned by the device; set by build */
    size_t smem;
    unsigned grid[3];
    int strides_aligned;   /* every row of Q, K, V, O is 16-byte aligned when the bases are */
    sdpa_fwd_params params; /* everything but the pointers */
} fwd_plan;

static const int io_slots[] = {FROST__SDPA_Q, FROST__SDPA_K, FROST__SDPA_V, FROST__SDPA_O};
static const char *const io_names[] = {"Q", "K", "V", "O"};

/* Rows start 16 bytes apart (8 elements) along every dim that can move the row start. */
static int rows_aligned(const frost__sdpa_problem *p, int slot, int64_t heads, int64_t seq)
{
    const frost__sdpa_operand *o = &p->op[slot];
    if (!o->ragged && p->b > 1 && o->stride[0] % 8 != 0)
        return 0;
    if (heads > 1 && o->stride[1] % 8 != 0)
        return 0;
    if ((o->ragged || seq > 1) && o->stride[2] % 8 != 0)
        return 0;
    return 1;
}

static void copy3(int64_t dst[3], const int64_t src[4])
{
    dst[0] = src[0], dst[1] = src[1], dst[2] = src[2];
}

static int64_t clamp_bound(int64_t v)
{
    const int64_t cap = (int64_t)1 << 40;
    return v > cap ? cap : v;
}

static void fill_params(const frost__sdpa_problem *p, sdpa_fwd_params *k)
{
    memset(k, 0, sizeof *k);
    copy3(k->q_stride, p->op[FROST__SDPA_Q].stride);
    copy3(k->k_stride, p->op[FROST__SDPA_K].stride);
    copy3(k->v_stride, p->op[FROST__SDPA_V].stride);
    copy3(k->o_stride, p->op[FROST__SDPA_O].stride);
    if (p->op[FROST__SDPA_STATS].present)
        copy3(k->lse_stride, p->op[FROST__SDPA_STATS].stride);
    if (p->op[FROST__SDPA_BIAS].present)
        memcpy(k->bias_stride, p->op[FROST__SDPA_BIAS].stride, sizeof k->bias_stride);
    k->sink_stride = p->op[FROST__SDPA_SINK].stride[1];
    k->seq_len_q_stride = p->op[FROST__SDPA_SEQ_LEN_Q].stride[0];
    k->seq_len_kv_stride = p->op[FROST__SDPA_SEQ_LEN_KV].stride[0];
    k->left_bound = clamp_bound(p->left_bound);
    k->right_bound = clamp_bound(p->right_bound);
    k->s_q = (int32_t)p->s_q;
    k->s_kv = (int32_t)p->s_kv;
    k->d_qk = (int32_t)p->d_qk;
    k->d_v = (int32_t)p->d_v;
    k->kv_group = (int32_t)(p->h_q / p->h_kv);
    k->scale_log2 = (float)(p->scale * 1.4426950408889634);
    if (p->mask_flags & FROST_MASK_LEFT_BOUND)
        k->flags |= SDPA_FWD_MASK_LEFT;
    if (p->mask_flags & FROST_MASK_RIGHT_BOUND)
        k->flags |= SDPA_FWD_MASK_RIGHT;
    if (p->align == FROST_DIAG_BOTTOM_RIGHT)
        k->flags |= SDPA_FWD_ALIGN_BOTTOM_RIGHT;
    static const int ragged_bits[] = {SDPA_FWD_RAGGED_Q_I64, SDPA_FWD_RAGGED_K_I64, SDPA_FWD_RAGGED_V_I64,
                                      SDPA_FWD_RAGGED_O_I64};
    for (int i = 0; i < 4; i++)
        if (p->op[io_slots[i]].ragged && p->op[io_slots[i]].ragged_dtype == FROST_I64)
            k->flags |= ragged_bits[i];
}

/* ------------------------------------------------------------------------------------ */
/* select / build / execute                                                             */
/* ------------------------------------------------------------------------------------ */

static frost_status refuse(frost__buf *why, const char *sentence)
{
    frost__buf_printf(why, "%s", sentence);
    return FROST_NOT_SUPPORTED;
}

static frost_status fwd_select(const frost_context *ctx, const frost__graph *g, const frost__node *n, void **plan,
                               frost__buf *why)
{
    (void)g;
    const frost__sdpa_problem *p = n->problem;
    const frost__device *dev = ctx->device;
    *plan = NULL;
    if (!dev)
        return refuse(why, "cuda sdpa needs a CUDA context");
    if (p->dtype != FROST_F16 && p->dtype != FROST_BF16) {
        frost__buf_printf(why, "cuda sdpa needs f16 or bf16 I/O, got %s; f32 runs on the CPU context's ref engine",
                          frost_dtype_name(p->dtype));
        return FROST_NOT_SUPPORTED;
    }
    if (dev->cc_major < 8) {
        frost__buf_printf(why, "cuda sdpa needs compute capability 8.0 or newer (mma.sync with bf16 and cp.async); "
                               "this device is sm_%d%d", dev->cc_major, dev->cc_minor);
        return FROST_NOT_SUPPORTED;
    }
    const int64_t dims[2] = {p->d_qk, p->d_v};
    for (int i = 0; i < 2; i++) {
        const char *name = i ? "d_v" : "d_qk";
        if (dims[i] > MAX_HEAD_DIM) {
            frost__buf_printf(why, "cuda sdpa supports %s up to %d, got %lld", name, MAX_HEAD_DIM, (long long)dims[i]);
            return FROST_NOT_SUPPORTED;
        }
        if (dims[i] % 8 != 0) {
            frost__buf_printf(why, "cuda sdpa needs %s to be a multiple of 8, got %lld (zero-pad it to %lld and set "
                                   "the scale explicitly)", name, (long long)dims[i], (long long)(dims[i] / 8 * 8 + 8));
            return FROST_NOT_SUPPORTED;
        }
    }
    for (int i = 0; i < 4; i++) {
        int64_t st = p->op[io_slots[i]].stride[3];
        if (st != 1) {
            frost__buf_printf(why, "cuda sdpa needs %s contiguous along d (stride 1), got stride %lld; make the "
                                   "head dim the innermost dim", io_names[i], (long long)st);
            return FROST_NOT_SUPPORTED;
        }
    }
    if (p->b > MAX_GRID_YZ || p->h_q > MAX_GRID_YZ) {
        frost__buf_printf(why, "cuda sdpa runs at most %d batches and %d query heads per launch, got b=%lld "
                               "h_q=%lld; split the batch", MAX_GRID_YZ, MAX_GRID_YZ, (long long)p->b,
                          (long long)p->h_q);
        return FROST_NOT_SUPPORTED;
    }
    if (p->s_q > MAX_SEQ || p->s_kv > MAX_SEQ) {
        frost__buf_printf(why, "cuda sdpa needs s_q and s_kv below %d, got s_q=%lld s_kv=%lld", MAX_SEQ,
                          (long long)p->s_q, (long long)p->s_kv);
        return FROST_NOT_SUPPORTED;
    }

    int bias = 0;
    if (p->op[FROST__SDPA_BIAS].present)
        bias = p->op[FROST__SDPA_BIAS].dtype == FROST_F32 ? 1 : 2;
    fwd_config c = choose_config(p->dtype, p->d_qk, p->d_v, bias);
    size_t smem = config_smem(&c);
    if (smem > dev->smem_per_block_optin) {
        frost__buf_printf(why, "cuda sdpa with d_qk=%lld d_v=%lld needs %zu bytes of shared memory per block; this "
                               "device allows %zu (head dims up to 128 need at most 87040)", (long long)p->d_qk,
                          (long long)p->d_v, smem, dev->smem_per_block_optin);
        return FROST_NOT_SUPPORTED;
    }

    fwd_plan *pl = calloc(1, sizeof *pl);
    if (!pl)
        return frost__fail(FROST_OUT_OF_MEMORY, "sdpa_fwd (cuda): out of host memory for the plan");
    pl->config = c;
    config_key(&c, &pl->key);
    pl->smem = smem;
    pl->grid[0] = (unsigned)((p->s_q + c.block_m - 1) / c.block_m);
    pl->grid[1] = (unsigned)p->h_q;
    pl->grid[2] = (unsigned)p->b;
    pl->strides_aligned = rows_aligned(p, FROST__SDPA_Q, p->h_q, p->s_q) &&
                          rows_aligned(p, FROST__SDPA_K, p->h_kv, p->s_kv) &&
                          rows_aligned(p, FROST__SDPA_V, p->h_kv, p->s_kv) &&
                          rows_aligned(p, FROST__SDPA_O, p->h_q, p->s_q);
    fill_params(p, &pl->params);
    *plan = pl;
    return FROST_OK;
}

static frost_status fwd_build(const frost_context *ctx, const frost__node *n, void *plan,
                              const frost_build_options *opt)
{
    (void)n;
    fwd_plan *pl = plan;
    return frost__kernel_get(ctx->device, &pl->key, opt ? opt->enforce_precompiled : 0, &pl->kernel);
}

static int aligned16(const void *ptr)
{
    return ((uintptr_t)ptr & 15u) == 0;
}

static frost_status fwd_execute(const frost_context *ctx, const frost__node *n, const void *plan, void *const *ptrs,
                                void *workspace, void *stream)
{
    (void)n, (void)workspace;
    const fwd_plan *pl = plan;
    if (pl->grid[0] == 0 || pl->grid[1] == 0 || pl->grid[2] == 0)
        return FROST_OK;
    sdpa_fwd_params k = pl->params;
    k.q = ptrs[FROST__SDPA_Q];
    k.k = ptrs[FROST__SDPA_K];
    k.v = ptrs[FROST__SDPA_V];
    k.o = ptrs[FROST__SDPA_O];
    k.lse = ptrs[FROST__SDPA_STATS];
    k.bias = ptrs[FROST__SDPA_BIAS];
    k.sink = ptrs[FROST__SDPA_SINK];
    k.seq_len_q = ptrs[FROST__SDPA_SEQ_LEN_Q];
    k.seq_len_kv = ptrs[FROST__SDPA_SEQ_LEN_KV];
    k.ragged_q = ptrs[FROST__SDPA_RAGGED_Q];
    k.ragged_k = ptrs[FROST__SDPA_RAGGED_K];
    k.ragged_v = ptrs[FROST__SDPA_RAGGED_V];
    k.ragged_o = ptrs[FROST__SDPA_RAGGED_O];
    if (pl->strides_aligned && aligned16(k.q) && aligned16(k.k) && aligned16(k.v) && aligned16(k.o))
        k.flags |= SDPA_FWD_VEC_IO;
    frost__launch_dims dims = {
        .grid = {pl->grid[0], pl->grid[1], pl->grid[2]},
        .block = {(unsigned)(pl->config.num_warps * 32), 1, 1},
        .dyn_smem = pl->smem,
    };
    void *args[] = {&k};
    return frost__launch(ctx->device, pl->kernel, &dims, args, stream);
}

static void fwd_describe(const void *plan, frost__buf *out)
{
    const fwd_plan *pl = plan;
    const fwd_config *c = &pl->config;
    frost__buf_printf(out, "kernel ");
    frost__key_print(&pl->key, out);
    frost__buf_printf(out, "; tile %dx%d (query rows x keys), %d warps, Q %s, %zu B shared memory, grid [%u, %u, %u]; "
                           "%s",
                      c->block_m, c->block_n, c->num_warps, c->q_in_regs ? "in registers" : "re-read from shared memory",
                      pl->smem, pl->grid[0], pl->grid[1], pl->grid[2],
                      pl->strides_aligned ? "16-byte cp.async rows when the pointers are 16-byte aligned"
                                          : "element-wise loads (a row stride is not a multiple of 8 elements)");
}

const frost__op_impl frost__sdpa_fwd_cuda = {
    .select = fwd_select,
    .build = fwd_build,
    .execute = fwd_execute,
    .describe_plan = fwd_describe,
    .coverage = "f16/bf16 I/O on sm_80+: head dims 8..256 (multiples of 8, d_qk may differ from d_v), GQA/MQA, "
                "band masks (both alignments), seq_len padding, ragged offsets, f32 or I/O-dtype bias with "
                "broadcast, sinks, LSE stats, any strides with unit d stride",
};
