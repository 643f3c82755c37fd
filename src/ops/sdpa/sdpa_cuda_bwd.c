/*
 * sdpa_cuda_bwd.c — the cuda engine's attention backward: which problems the tensor-core
 * kernels of sdpa_bwd.cu can run, with which tiles, and how their launches are packed.
 *
 * Five entry points of one source (one cubin per key's defines):
 *   sdpa_bwd_preprocess  delta = rowsum(dO o O) and lse * log2(e) into the workspace
 *   sdpa_bwd_dsink       d_sink, when asked for
 *   sdpa_bwd_dkdv        dK and dV (GQA groups summed inside a block)
 *   sdpa_bwd_dq          dQ, and d_bias when it has no broadcast dim
 *   sdpa_bwd_dbias       d_bias broadcast over b and/or h (fixed-order sum, no atomics)
 * No kernel uses atomics and every reduction has a fixed order, so the results are
 * bitwise identical run to run whatever `deterministic` says; the workspace is linear:
 * two f32 per query row (b * h_q * s_q * 8 bytes, each half 256-byte aligned).
 *
 * select() is the one place that decides support and configuration; build() fetches the
 * kernels (honouring enforce_precompiled); execute() copies the parameter block, fills in
 * the pointers, picks the 16-byte cp.async path per operand from strides (select) and
 * pointer bits (execute), and launches in order on the caller's stream.  It neither
 * allocates nor hashes.
 *
 * Kernel keys: DTYPE_F16|DTYPE_BF16, D_QK and D_V (head dims rounded up to 16; the actual
 * dims are run-time), BIAS (0 none, 1 f32, 2 the I/O dtype) and the tiles KV_NW, KV_BN,
 * KV_BM, KV_STAGES, Q_NW, Q_BN, Q_STAGES.  Masks, lengths, ragged offsets, strides, sinks
 * and d_bias are run-time parameters.  Tiles come from the first row of kv_table /
 * q_table that fits the device's shared-memory tier: 163 KiB (sm_80, sm_87, sm_90,
 * sm_100) or 99 KiB (sm_86, sm_89, sm_120); the tier, not the exact limit, picks the
 * row, so frost__sdpa_bwd_cuda_keys can list a device's keys from its arch alone.
 * Operands with unit d stride and rows 16-byte aligned use cp.async; any other strides
 * (including a non-unit d stride) use element-wise loads: nothing is refused for layout.
 */
#include <stdlib.h>
#include <string.h>

#include "ops/sdpa/sdpa.h"
#include "runtime/runtime.h"

#define BWD_SOURCE "src/ops/sdpa/sdpa_bwd.cu"
#define MAX_HEAD_DIM 256
#define MAX_GRID_YZ 65535
#define MAX_SEQ ((int64_t)1 << 28) /* keeps the kernels' int band arithmetic exact */
#define MAX_BOUND ((int64_t)1 << 29)
#define SMEM_TIER_BIG ((size_t)163 * 1024)
#define SMEM_TIER_SMALL ((size_t)99 * 1024)

/* ------------------------------------------------------------------------------------ */
/* The kernels' parameter block (mirrors sdpa_bwd.cu; both sides assert the size)       */
/* ------------------------------------------------------------------------------------ */
enum { OPD_Q, OPD_K, OPD_V, OPD_O, OPD_DO, OPD_DQ, OPD_DK, OPD_DV, OPD_COUNT };
static const int opd_slot[OPD_COUNT] = {FROST__SDPA_Q,   FROST__SDPA_K,   FROST__SDPA_V,   FROST__SDPA_O,
                                        FROST__SDPA_D_O, FROST__SDPA_D_Q, FROST__SDPA_D_K, FROST__SDPA_D_V};

typedef struct sdpa_bwd_params {
    const void *q, *k, *v, *o, *d_o;
    void *d_q, *d_k, *d_v;
    const float *stats;
    const void *bias;
    const float *sink;
    const int32_t *seq_len_q, *seq_len_kv;
    float *d_bias, *d_sink;
    float *ws_delta, *ws_lse2;
    const void *ragged[OPD_COUNT];
    int64_t str[OPD_COUNT][4];
    int64_t str_bias[4], str_dbias[4], str_stats[4];
    int64_t str_sink, str_dsink, str_seq_len_q, str_seq_len_kv;
    int32_t b, h_q, h_kv, group, s_q, s_kv, dim_qk, dim_v;
    int32_t mask_flags, left, right, bottom_right;
    int32_t ragged_i64;
    int32_t vec;
    int32_t dbias_reduce_b, dbias_reduce_h;
    float scale, scale_log2;
} sdpa_bwd_params;
FROST__STATIC_ASSERT(sizeof(sdpa_bwd_params) == 656, "sdpa_bwd_params drifted from sdpa_bwd.cu");

/* ------------------------------------------------------------------------------------ */
/* Tile configurations                                                                   */
/* ------------------------------------------------------------------------------------ */
typedef struct kv_tiles {
    int max_dim; /* the row applies while max(D_QK, D_V) <= max_dim */
    int warps, block_n, block_m, stages;
} kv_tiles;
typedef struct q_tiles {
    int max_dim; /* while D_QK <= max_dim (dQ accumulators live in registers) */
    int warps, block_n, stages;
} q_tiles;

/* In order of preference; the first row that fits the tier wins.  block_m 32 above 128
 * keeps the dK/dV accumulators plus S^T / dP^T of a thread under 255 registers. */
static const kv_tiles kv_table[] = {
    {128, 8, 64, 64, 2}, {128, 8, 64, 64, 1}, {256, 8, 64, 32, 2},
    {256, 8, 64, 32, 1}, {256, 4, 32, 32, 2}, {256, 4, 32, 32, 1},
};
static const q_tiles q_table[] = {
    {128, 4, 64, 2}, {128, 4, 64, 1}, {256, 4, 32, 2}, {256, 4, 32, 1}, {256, 2, 32, 2}, {256, 2, 32, 1},
};

typedef struct bwd_config {
    frost_dtype dtype;
    int d_qk, d_v; /* rounded up to 16 */
    int bias;      /* 0 none, 1 f32, 2 I/O dtype */
    kv_tiles kv;
    q_tiles q;
} bwd_config;

static int round16(int64_t d)
{
    return (int)((d + 15) / 16 * 16);
}

/* Shared memory of the dK/dV kernel: K, V, stages x (Q, dO), P^T, dS^T (16-bit), then
 * lse2 and delta per stage (f32); rows padded by 8 elements (sdpa_bwd.cu, KV_SMEM_*). */
static size_t kv_smem(const bwd_config *c)
{
    size_t ld = (size_t)(c->d_qk + 8 + c->d_v + 8), ld_p = (size_t)c->kv.block_m + 8;
    size_t elems = (size_t)c->kv.block_n * ld + (size_t)c->kv.stages * c->kv.block_m * ld +
                   2 * (size_t)c->kv.block_n * ld_p;
    return elems * 2 + 2 * (size_t)c->kv.stages * c->kv.block_m * sizeof(float);
}

/* Shared memory of the dQ (and d_bias) kernel: Q, dO [16 x warps], stages x (K, V). */
static size_t q_smem(const bwd_config *c)
{
    size_t ld = (size_t)(c->d_qk + 8 + c->d_v + 8);
    return ((size_t)16 * c->q.warps * ld + (size_t)c->q.stages * c->q.block_n * ld) * 2;
}

static size_t smem_tier(size_t optin)
{
    return optin >= SMEM_TIER_BIG ? SMEM_TIER_BIG : SMEM_TIER_SMALL;
}

/* Fills c for the tier; 0 when no row fits. */
static int choose_config(frost_dtype dtype, int64_t d_qk, int64_t d_v, int bias, size_t tier, bwd_config *c)
{
    memset(c, 0, sizeof *c);
    c->dtype = dtype;
    c->d_qk = round16(d_qk);
    c->d_v = round16(d_v);
    c->bias = bias;
    int widest = c->d_qk > c->d_v ? c->d_qk : c->d_v, kv_ok = 0, q_ok = 0;
    for (size_t i = 0; i < FROST__ARRAY_SIZE(kv_table) && !kv_ok; i++) {
        c->kv = kv_table[i];
        kv_ok = widest <= kv_table[i].max_dim && kv_smem(c) <= tier;
    }
    for (size_t i = 0; i < FROST__ARRAY_SIZE(q_table) && !q_ok; i++) {
        c->q = q_table[i];
        q_ok = c->d_qk <= q_table[i].max_dim && q_smem(c) <= tier;
    }
    return kv_ok && q_ok;
}

enum { K_PRE, K_DSINK, K_DKDV, K_DQ, K_DBIAS, K_COUNT };
static const char *const entry_names[K_COUNT] = {"sdpa_bwd_preprocess", "sdpa_bwd_dsink", "sdpa_bwd_dkdv",
                                                 "sdpa_bwd_dq", "sdpa_bwd_dbias"};

static void config_key(const bwd_config *c, int entry, frost__kernel_key *key)
{
    frost__key_init(key, BWD_SOURCE, entry_names[entry]);
    frost__key_define(key, c->dtype == FROST_BF16 ? "DTYPE_BF16" : "DTYPE_F16", NULL);
    frost__key_define(key, "D_QK", "%d", c->d_qk);
    frost__key_define(key, "D_V", "%d", c->d_v);
    frost__key_define(key, "BIAS", "%d", c->bias);
    frost__key_define(key, "KV_NW", "%d", c->kv.warps);
    frost__key_define(key, "KV_BN", "%d", c->kv.block_n);
    frost__key_define(key, "KV_BM", "%d", c->kv.block_m);
    frost__key_define(key, "KV_STAGES", "%d", c->kv.stages);
    frost__key_define(key, "Q_NW", "%d", c->q.warps);
    frost__key_define(key, "Q_BN", "%d", c->q.block_n);
    frost__key_define(key, "Q_STAGES", "%d", c->q.stages);
}

/* 163 KiB tier for sm_80, sm_87, sm_90(a) and sm_100 and later datacenter parts; the
 * 99 KiB tier for sm_86, sm_89 and sm_12x. */
static size_t arch_tier(const char *arch)
{
    int num = arch && strncmp(arch, "sm_", 3) == 0 ? atoi(arch + 3) : 0;
    return num == 86 || num == 89 || num >= 120 ? SMEM_TIER_SMALL : SMEM_TIER_BIG;
}

size_t frost__sdpa_bwd_cuda_keys(struct frost__kernel_key *keys, size_t cap, const char *arch, int equal_dims_only)
{
    static const frost_dtype dtypes[] = {FROST_F16, FROST_BF16};
    size_t count = 0, tier = arch_tier(arch);
    for (size_t t = 0; t < FROST__ARRAY_SIZE(dtypes); t++)
        for (int bias = 0; bias <= 2; bias++)
            for (int d_qk = 16; d_qk <= MAX_HEAD_DIM; d_qk += 16)
                for (int d_v = 16; d_v <= MAX_HEAD_DIM; d_v += 16) {
                    if (equal_dims_only && d_qk != d_v)
                        continue;
                    bwd_config c;
                    int fits = choose_config(dtypes[t], d_qk, d_v, bias, tier, &c);
                    for (int e = 0; e < K_COUNT && fits; e++, count++)
                        if (count < cap)
                            config_key(&c, e, &keys[count]);
                }
    return count;
}

/* ------------------------------------------------------------------------------------ */
/* The plan                                                                              */
/* ------------------------------------------------------------------------------------ */
typedef struct bwd_plan {
    bwd_config config;
    int used[K_COUNT];
    frost__kernel_key key[K_COUNT];
    frost__kernel *kernel[K_COUNT]; /* owned by the device; set by build */
    frost__launch_dims dims[K_COUNT];
    int vec_strides;      /* bit OPD_x: x's strides keep every row 16-byte aligned */
    int dbias_mode;       /* 0 none, 1 written by sdpa_bwd_dq, 2 reduced by sdpa_bwd_dbias */
    size_t ws_half;       /* bytes of each workspace array (256-byte multiple) */
    sdpa_bwd_params params; /* everything but the pointers and the vec bits */
} bwd_plan;

/* Rows start 16 bytes apart along every dim that can move the row start, and d is unit. */
static int rows_aligned(const frost__sdpa_problem *p, int slot, int64_t heads, int64_t seq)
{
    const frost__sdpa_operand *o = &p->op[slot];
    if (o->stride[3] != 1)
        return 0;
    if (!o->ragged && p->b > 1 && o->stride[0] % 8 != 0)
        return 0;
    if (heads > 1 && o->stride[1] % 8 != 0)
        return 0;
    return !((o->ragged || seq > 1) && o->stride[2] % 8 != 0);
}

static int32_t clamp_bound(int64_t v)
{
    return (int32_t)(v > MAX_BOUND ? MAX_BOUND : v);
}

static void fill_params(const frost__sdpa_problem *p, sdpa_bwd_params *k)
{
    memset(k, 0, sizeof *k);
    for (int i = 0; i < OPD_COUNT; i++) {
        const frost__sdpa_operand *o = &p->op[opd_slot[i]];
        memcpy(k->str[i], o->stride, sizeof k->str[i]);
        if (o->ragged && o->ragged_dtype == FROST_I64)
            k->ragged_i64 |= 1 << i;
    }
    memcpy(k->str_bias, p->op[FROST__SDPA_BIAS].stride, sizeof k->str_bias);
    memcpy(k->str_dbias, p->op[FROST__SDPA_D_BIAS].stride, sizeof k->str_dbias);
    memcpy(k->str_stats, p->op[FROST__SDPA_STATS].stride, sizeof k->str_stats);
    k->str_sink = p->op[FROST__SDPA_SINK].stride[1];
    k->str_dsink = p->op[FROST__SDPA_D_SINK].stride[1];
    k->str_seq_len_q = p->op[FROST__SDPA_SEQ_LEN_Q].stride[0];
    k->str_seq_len_kv = p->op[FROST__SDPA_SEQ_LEN_KV].stride[0];
    k->b = (int32_t)p->b;
    k->h_q = (int32_t)p->h_q;
    k->h_kv = (int32_t)p->h_kv;
    k->group = (int32_t)(p->h_q / p->h_kv);
    k->s_q = (int32_t)p->s_q;
    k->s_kv = (int32_t)p->s_kv;
    k->dim_qk = (int32_t)p->d_qk;
    k->dim_v = (int32_t)p->d_v;
    k->mask_flags = (int32_t)(p->mask_flags & (FROST_MASK_LEFT_BOUND | FROST_MASK_RIGHT_BOUND));
    k->left = clamp_bound(p->left_bound);
    k->right = clamp_bound(p->right_bound);
    k->bottom_right = p->align == FROST_DIAG_BOTTOM_RIGHT;
    if (p->op[FROST__SDPA_D_BIAS].present) {
        k->dbias_reduce_b = p->b > 1 && p->op[FROST__SDPA_D_BIAS].stride[0] == 0;
        k->dbias_reduce_h = p->h_q > 1 && p->op[FROST__SDPA_D_BIAS].stride[1] == 0;
    }
    k->scale = (float)p->scale;
    k->scale_log2 = (float)(p->scale * 1.4426950408889634);
}

static unsigned ceil_div(int64_t a, int64_t b)
{
    return (unsigned)((a + b - 1) / b);
}

static void fill_launches(const frost__sdpa_problem *p, bwd_plan *pl)
{
    const bwd_config *c = &pl->config;
    const int q_bm = 16 * c->q.warps;
    const unsigned b = (unsigned)p->b;
    pl->dims[K_PRE] = (frost__launch_dims){{ceil_div(p->s_q, 32), (unsigned)p->h_q, b}, {128, 1, 1}, 0, 0};
    pl->dims[K_DSINK] = (frost__launch_dims){{(unsigned)p->h_q, 1, 1}, {256, 1, 1}, 0, 0};
    pl->dims[K_DKDV] = (frost__launch_dims){
        {ceil_div(p->s_kv, c->kv.block_n), (unsigned)p->h_kv, b}, {(unsigned)(32 * c->kv.warps), 1, 1}, kv_smem(c), 0};
    pl->dims[K_DQ] = (frost__launch_dims){
        {ceil_div(p->s_q, q_bm), (unsigned)p->h_q, b}, {(unsigned)(32 * c->q.warps), 1, 1}, q_smem(c), 0};
    unsigned groups = (unsigned)((pl->params.dbias_reduce_b ? 1 : p->b) * (pl->params.dbias_reduce_h ? 1 : p->h_q));
    pl->dims[K_DBIAS] = (frost__launch_dims){
        {ceil_div(p->s_kv, c->q.block_n), ceil_div(p->s_q, q_bm), groups}, {(unsigned)(32 * c->q.warps), 1, 1},
        q_smem(c), 0};
}

/* ------------------------------------------------------------------------------------ */
/* select / build / execute                                                             */
/* ------------------------------------------------------------------------------------ */
static frost_status check_problem(const frost__sdpa_problem *p, const frost__device *dev, frost__buf *why)
{
    if (p->dtype != FROST_F16 && p->dtype != FROST_BF16) {
        frost__buf_printf(why, "cuda sdpa backward needs f16 or bf16 I/O, got %s (its tensor-core kernels take "
                               "16-bit operands); f32 runs on the CPU context's ref engine",
                          frost_dtype_name(p->dtype));
        return FROST_NOT_SUPPORTED;
    }
    if (dev->cc_major < 8) {
        frost__buf_printf(why, "cuda sdpa backward needs compute capability 8.0 or newer (mma.sync with bf16, "
                               "cp.async); this device is sm_%d%d", dev->cc_major, dev->cc_minor);
        return FROST_NOT_SUPPORTED;
    }
    const int64_t dims[2] = {p->d_qk, p->d_v};
    for (int i = 0; i < 2; i++) {
        const char *name = i ? "d_v" : "d_qk";
        if (dims[i] > MAX_HEAD_DIM) {
            frost__buf_printf(why, "cuda sdpa backward supports %s up to %d, got %lld", name, MAX_HEAD_DIM,
                              (long long)dims[i]);
            return FROST_NOT_SUPPORTED;
        }
        if (dims[i] % 8 != 0) {
            frost__buf_printf(why, "cuda sdpa backward needs %s to be a multiple of 8, got %lld (zero-pad it to "
                                   "%lld and set the scale explicitly)", name, (long long)dims[i],
                              (long long)(dims[i] / 8 * 8 + 8));
            return FROST_NOT_SUPPORTED;
        }
    }
    if (p->b > MAX_GRID_YZ || p->h_q > MAX_GRID_YZ) {
        frost__buf_printf(why, "cuda sdpa backward runs at most %d batches and %d query heads per launch, got b=%lld "
                               "h_q=%lld; split the batch", MAX_GRID_YZ, MAX_GRID_YZ, (long long)p->b,
                          (long long)p->h_q);
        return FROST_NOT_SUPPORTED;
    }
    if (p->s_q > MAX_SEQ || p->s_kv > MAX_SEQ) {
        frost__buf_printf(why, "cuda sdpa backward needs s_q and s_kv of at most %lld (2^28), got s_q=%lld s_kv=%lld",
                          (long long)MAX_SEQ, (long long)p->s_q, (long long)p->s_kv);
        return FROST_NOT_SUPPORTED;
    }
    const frost__sdpa_operand *bias = &p->op[FROST__SDPA_BIAS];
    if (bias->present && bias->dtype != FROST_F32 && bias->dtype != p->dtype) {
        frost__buf_printf(why, "cuda sdpa backward takes a bias of dtype f32 or the I/O dtype %s, got %s",
                          frost_dtype_name(p->dtype), frost_dtype_name(bias->dtype));
        return FROST_NOT_SUPPORTED;
    }
    return FROST_OK;
}

static frost_status bwd_select(const frost_context *ctx, const frost__graph *g, const frost__node *n, void **plan,
                               frost__buf *why)
{
    (void)g;
    const frost__sdpa_problem *p = n->problem;
    const frost__device *dev = ctx->device;
    *plan = NULL;
    if (!dev) {
        frost__buf_printf(why, "cuda sdpa backward needs a CUDA context");
        return FROST_NOT_SUPPORTED;
    }
    frost_status s = check_problem(p, dev, why);
    if (s != FROST_OK)
        return s;
    int bias = 0;
    if (p->op[FROST__SDPA_BIAS].present)
        bias = p->op[FROST__SDPA_BIAS].dtype == FROST_F32 ? 1 : 2;
    bwd_config c;
    size_t tier = smem_tier(dev->smem_per_block_optin);
    if (dev->smem_per_block_optin < SMEM_TIER_SMALL || !choose_config(p->dtype, p->d_qk, p->d_v, bias, tier, &c)) {
        frost__buf_printf(why, "cuda sdpa backward with d_qk=%lld d_v=%lld has no tile configuration within this "
                               "device's %zu bytes of shared memory per block (it needs %zu)", (long long)p->d_qk,
                          (long long)p->d_v, dev->smem_per_block_optin, SMEM_TIER_SMALL);
        return FROST_NOT_SUPPORTED;
    }

    bwd_plan *pl = calloc(1, sizeof *pl);
    if (!pl)
        return frost__fail(FROST_OUT_OF_MEMORY, "sdpa_bwd (cuda): out of host memory for the plan");
    pl->config = c;
    fill_params(p, &pl->params);
    if (p->op[FROST__SDPA_D_BIAS].present)
        pl->dbias_mode = pl->params.dbias_reduce_b || pl->params.dbias_reduce_h ? 2 : 1;
    fill_launches(p, pl);
    if (pl->dbias_mode == 2 && pl->dims[K_DBIAS].grid[1] > MAX_GRID_YZ) {
        frost__buf_printf(why, "cuda sdpa backward reduces a broadcast d_bias with at most %d query tiles of %d "
                               "rows, got s_q=%lld; give d_bias the full [b, h_q] dims and sum it afterwards",
                          MAX_GRID_YZ, 16 * c.q.warps, (long long)p->s_q);
        free(pl);
        return FROST_NOT_SUPPORTED;
    }
    pl->used[K_PRE] = pl->used[K_DKDV] = pl->used[K_DQ] = 1;
    pl->used[K_DSINK] = p->op[FROST__SDPA_D_SINK].present;
    pl->used[K_DBIAS] = pl->dbias_mode == 2;
    for (int e = 0; e < K_COUNT; e++)
        if (pl->used[e])
            config_key(&c, e, &pl->key[e]);
    const int64_t heads[OPD_COUNT] = {p->h_q, p->h_kv, p->h_kv, p->h_q, p->h_q, p->h_q, p->h_kv, p->h_kv};
    const int64_t seqs[OPD_COUNT] = {p->s_q, p->s_kv, p->s_kv, p->s_q, p->s_q, p->s_q, p->s_kv, p->s_kv};
    for (int i = 0; i < OPD_COUNT; i++)
        if (rows_aligned(p, opd_slot[i], heads[i], seqs[i]))
            pl->vec_strides |= 1 << i;
    size_t rows = (size_t)(p->b * p->h_q * p->s_q);
    pl->ws_half = (rows * sizeof(float) + 255) / 256 * 256;
    *plan = pl;
    return FROST_OK;
}

static frost_status bwd_build(const frost_context *ctx, const frost__node *n, void *plan,
                              const frost_build_options *opt)
{
    (void)n;
    bwd_plan *pl = plan;
    for (int e = 0; e < K_COUNT; e++) {
        if (!pl->used[e])
            continue;
        frost_status s = frost__kernel_get(ctx->device, &pl->key[e], opt ? opt->enforce_precompiled : 0,
                                           &pl->kernel[e]);
        if (s != FROST_OK)
            return s;
    }
    return FROST_OK;
}

static size_t bwd_workspace(const frost__node *n, const void *plan)
{
    (void)n;
    const bwd_plan *pl = plan;
    return 2 * pl->ws_half;
}

static int aligned16(const void *ptr)
{
    return ((uintptr_t)ptr & 15u) == 0;
}

static frost_status bwd_execute(const frost_context *ctx, const frost__node *n, const void *plan, void *const *ptrs,
                                void *workspace, void *stream)
{
    (void)n;
    const bwd_plan *pl = plan;
    sdpa_bwd_params k = pl->params;
    k.q = ptrs[FROST__SDPA_Q];
    k.k = ptrs[FROST__SDPA_K];
    k.v = ptrs[FROST__SDPA_V];
    k.o = ptrs[FROST__SDPA_O];
    k.d_o = ptrs[FROST__SDPA_D_O];
    k.d_q = ptrs[FROST__SDPA_D_Q];
    k.d_k = ptrs[FROST__SDPA_D_K];
    k.d_v = ptrs[FROST__SDPA_D_V];
    k.stats = ptrs[FROST__SDPA_STATS];
    k.bias = ptrs[FROST__SDPA_BIAS];
    k.sink = ptrs[FROST__SDPA_SINK];
    k.seq_len_q = ptrs[FROST__SDPA_SEQ_LEN_Q];
    k.seq_len_kv = ptrs[FROST__SDPA_SEQ_LEN_KV];
    k.d_bias = ptrs[FROST__SDPA_D_BIAS];
    k.d_sink = ptrs[FROST__SDPA_D_SINK];
    k.ws_delta = workspace;
    k.ws_lse2 = workspace ? (float *)((char *)workspace + pl->ws_half) : NULL;
    for (int i = 0; i < OPD_COUNT; i++) {
        const void *data = ptrs[opd_slot[i]];
        int rag = frost__sdpa_ragged_slot(opd_slot[i]);
        k.ragged[i] = rag >= 0 ? ptrs[rag] : NULL;
        if ((pl->vec_strides >> i & 1) && aligned16(data))
            k.vec |= 1 << i;
    }
    void *args[] = {&k};
    for (int e = 0; e < K_COUNT; e++) {
        const frost__launch_dims *d = &pl->dims[e];
        if (!pl->used[e] || d->grid[0] == 0 || d->grid[1] == 0 || d->grid[2] == 0)
            continue;
        frost_status s = frost__launch(ctx->device, pl->kernel[e], d, args, stream);
        if (s != FROST_OK)
            return s;
    }
    return FROST_OK;
}

static void bwd_describe(const void *plan, frost__buf *out)
{
    const bwd_plan *pl = plan;
    const bwd_config *c = &pl->config;
    static const char *const dbias_text[] = {"no d_bias", "d_bias written by sdpa_bwd_dq",
                                             "d_bias reduced over its broadcast dims by sdpa_bwd_dbias"};
    frost__buf_printf(out, "dK/dV: %d keys x %d query rows per step, %d warps, %d stage(s), %zu B shared memory; "
                           "dQ: %d rows x %d keys, %d warps, %d stage(s), %zu B shared memory; %s; %s; "
                           "deterministic by construction (no atomics, fixed-order reductions); workspace %zu B "
                           "(delta and lse per query row); 16-byte cp.async rows for operands with aligned strides "
                           "and pointers, element loads otherwise; kernels:",
                      c->kv.block_n, c->kv.block_m, c->kv.warps, c->kv.stages, kv_smem(c), 16 * c->q.warps,
                      c->q.block_n, c->q.warps, c->q.stages, q_smem(c), dbias_text[pl->dbias_mode],
                      pl->used[K_DSINK] ? "d_sink by sdpa_bwd_dsink" : "no d_sink", 2 * pl->ws_half);
    const char *sep = " ";
    for (int e = 0; e < K_COUNT; e++) {
        if (!pl->used[e])
            continue;
        frost__buf_printf(out, "%s", sep);
        frost__key_print(&pl->key[e], out);
        sep = "; ";
    }
}

const frost__op_impl frost__sdpa_bwd_cuda = {
    .select = bwd_select,
    .build = bwd_build,
    .workspace = bwd_workspace,
    .execute = bwd_execute,
    .describe_plan = bwd_describe,
    .coverage = "f16/bf16 I/O on sm_80+: head dims 8..256 (multiples of 8, d_qk may differ from d_v), GQA/MQA, "
                "band masks (both alignments), seq_len padding, ragged offsets, f32 or I/O-dtype bias with d_bias "
                "(broadcast dims reduced in a fixed order), sinks with d_sink, any strides; deterministic by "
                "construction with a linear workspace (8 bytes per query row)",
};
