/*
 * cases.h — the benchmark case lists shared by tools/frost-bench.c (and printed by
 * `frost-bench --list` for bench/peers.py): which shapes each suite holds, how much work a
 * case is (FLOPs for attention, bytes for norms, the conventions of docs/PERF.md), and the
 * shape keys of the JSON lines.  Header-only: everything is static; include it once.
 *
 * Suites: sdpa  = PERF.md's attention table: 16k tokens in all (b = 16384 / s), h * d = 2048,
 *                 d in {64, 128, 256}, s in {512, 2048, 8192}, causal and not; fwd and bwd.
 *         norm  = RMSNorm and LayerNorm fwd and bwd, bf16, rows x hidden in {16384x4096,
 *                 32768x4096, 8192x8192, 65536x1024, 1024x12288, 4096x16384}.
 *         cnorm = GroupNorm / BatchNorm / InstanceNorm over [N, C, H, W] and AdaLayerNorm
 *                 over [B, S, C] (bench/cases_norm.h).
 *         smoke = a few small shapes (seconds); all = sdpa + norm + cnorm.
 * Every op is a fwd/bwd pair: even enum values are forward, odd ones backward.
 */
#ifndef FROST_BENCH_CASES_H
#define FROST_BENCH_CASES_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/internal.h"
#include "frost/frost.h"

#define MAX_CASES 128

typedef enum {
    OP_SDPA_FWD, OP_SDPA_BWD, OP_RMS_FWD, OP_RMS_BWD, OP_LN_FWD, OP_LN_BWD, OP_GN_FWD, OP_GN_BWD,
    OP_IN_FWD, OP_IN_BWD, OP_BN_FWD, OP_BN_BWD, OP_ADALN_FWD, OP_ADALN_BWD, OP_N
} bench_op;
static const char *const op_names[OP_N] = {
    "sdpa_fwd",      "sdpa_bwd",      "rmsnorm_fwd",      "rmsnorm_bwd",      "layernorm_fwd",    "layernorm_bwd",
    "groupnorm_fwd", "groupnorm_bwd", "instancenorm_fwd", "instancenorm_bwd", "batchnorm_fwd",    "batchnorm_bwd",
    "adalayernorm_fwd", "adalayernorm_bwd"};

typedef struct bcase {
    bench_op op;
    frost_dtype dtype;
    frost_dtype param_dtype; /* RMSNorm, LayerNorm: scale and bias; FROST_DTYPE_INVALID = dtype */
    int rms_bias;            /* RMSNorm with a bias (forward) and d_bias (backward) */
    int y_only;              /* RMSNorm, LayerNorm, AdaLayerNorm forward: inference phase, y alone */
    int64_t b, h_q, h_kv, s_q, s_kv, d, d_v; /* attention; AdaLayerNorm uses b, s_q and c */
    int causal, bshd;
    int64_t rows, cols;         /* RMSNorm, LayerNorm */
    int64_t slice;              /* RMSNorm, LayerNorm: x, d_y in runs of slice rows, one unused row after each */
    int64_t n, c, h, w, groups; /* channel norms: X [n, c, h, w]; groups for GroupNorm */
    int nchw;                   /* channel norms: contiguous NCHW instead of channels-last NHWC */
} bcase;

/* ---- case lists ------------------------------------------------------------------ */
static bcase cases[MAX_CASES];
static int ncases;

static int is_sdpa(bench_op op)
{
    return op == OP_SDPA_FWD || op == OP_SDPA_BWD;
}
static int is_cnorm(bench_op op) /* GroupNorm, InstanceNorm, BatchNorm */
{
    return op >= OP_GN_FWD && op <= OP_BN_BWD;
}
static int is_adaln(bench_op op)
{
    return op == OP_ADALN_FWD || op == OP_ADALN_BWD;
}
static int is_bwd(bench_op op)
{
    return op % 2 == 1;
}
/* The row-norm options as a case uses them: the dtype of scale and bias when it differs from
 * x's (FROST_DTYPE_INVALID: x's), and RMSNorm's bias; other ops ignore both. */
static frost_dtype row_param_dtype(const bcase *c)
{
    return c->op >= OP_RMS_FWD && c->op <= OP_LN_BWD && c->param_dtype != c->dtype ? c->param_dtype
                                                                                    : FROST_DTYPE_INVALID;
}
static int row_rms_bias(const bcase *c)
{
    return c->rms_bias && (c->op == OP_RMS_FWD || c->op == OP_RMS_BWD);
}
/* The forward in the inference phase: y alone, no saved statistics (what torch's forward under
 * no_grad gives through torch.compile); the training forward also writes mean (LayerNorm) and
 * inv_std, 4 bytes each a row, which the byte count leaves out. */
static int row_y_only(const bcase *c)
{
    return c->y_only && (c->op == OP_RMS_FWD || c->op == OP_LN_FWD || c->op == OP_ADALN_FWD);
}
/* The row norms' --slice (0: packed rows; other ops ignore it). */
static int64_t row_slice(const bcase *c)
{
    return c->op >= OP_RMS_FWD && c->op <= OP_LN_BWD ? c->slice : 0;
}
static void push(bcase c)
{
    if (ncases < MAX_CASES)
        cases[ncases++] = c;
}
static void sdpa_pair(int64_t b, int64_t hq, int64_t hkv, int64_t s, int64_t d, int causal) /* fwd and bwd */
{
    for (int op = OP_SDPA_FWD; op <= OP_SDPA_BWD; op++)
        push((bcase){.op = (bench_op)op, .dtype = FROST_BF16, .b = b, .h_q = hq, .h_kv = hkv, .s_q = s, .s_kv = s,
                     .d = d, .d_v = d, .causal = causal});
}
static void norm_four(int64_t rows, int64_t cols) /* RMSNorm and LayerNorm, fwd and bwd */
{
    for (int op = OP_RMS_FWD; op <= OP_LN_BWD; op++)
        push((bcase){.op = (bench_op)op, .dtype = FROST_BF16, .rows = rows, .cols = cols});
}

#include "cases_norm.h" /* the cnorm suite: channel norms and AdaLayerNorm */

static int suite_cases(const char *suite)
{
    int all = !strcmp(suite, "all");
    if (all || !strcmp(suite, "sdpa")) { /* PERF.md: 16k tokens in all, h*d = 2048 */
        static const int64_t ds[] = {64, 128, 256}, ss[] = {512, 2048, 8192};
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++)
                for (int c = 0; c < 2; c++)
                    sdpa_pair(16384 / ss[j], 2048 / ds[i], 2048 / ds[i], ss[j], ds[i], c);
    }
    if (all || !strcmp(suite, "norm")) {
        static const int64_t shapes[][2] = {{16384, 4096}, {32768, 4096}, {8192, 8192},
                                            {65536, 1024}, {1024, 12288}, {4096, 16384}};
        for (int i = 0; i < 6; i++)
            norm_four(shapes[i][0], shapes[i][1]);
    }
    if (!strcmp(suite, "smoke")) {
        sdpa_pair(2, 8, 8, 512, 64, 0);
        sdpa_pair(4, 16, 16, 1024, 128, 1);
        sdpa_pair(2, 16, 4, 1024, 128, 1); /* GQA */
        norm_four(4096, 4096);
        norm_four(1000, 1000); /* odd sizes */
        cnorm_smoke();
    } else if (all || !strcmp(suite, "cnorm")) {
        cnorm_suite();
    } else if (strcmp(suite, "sdpa") && strcmp(suite, "norm")) {
        fprintf(stderr, "frost-bench: unknown suite '%s' (smoke, sdpa, norm, cnorm, all)\n", suite);
        return -1;
    }
    return 0;
}

/* ---- work counts ------------------------------------------------------------------- */
/* Admissible keys of query row i (top-left causal, as torch's is_causal). */
static int64_t row_keys(const bcase *c, int64_t i)
{
    if (!c->causal)
        return c->s_kv;
    return i + 1 < c->s_kv ? i + 1 : c->s_kv;
}

static double case_work(const bcase *c) /* FLOPs for attention, bytes for norms */
{
    if (is_sdpa(c->op)) {
        double n = 0;
        for (int64_t i = 0; i < c->s_q; i++)
            n += (double)row_keys(c, i);
        n *= (double)c->b * (double)c->h_q;
        return c->op == OP_SDPA_FWD ? 2.0 * n * (double)(c->d + c->d_v) : 2.0 * n * (double)(3 * c->d + 2 * c->d_v);
    }
    double rc = (double)c->rows * (double)c->cols;
    if (is_cnorm(c->op) || is_adaln(c->op))
        rc = cnorm_elems(c);
    rc *= (double)frost_dtype_size(c->dtype);
    return is_bwd(c->op) ? 3.0 * rc : 2.0 * rc;
}

/* The shape part of a JSON line (shared with --list). */
static void json_case(frost__buf *f, const bcase *c)
{
    frost__buf_printf(f, "{\"impl\":\"frost\",\"op\":\"%s\",\"dtype\":\"%s\"", op_names[c->op],
                      frost_dtype_name(c->dtype));
    if (is_sdpa(c->op))
        frost__buf_printf(f,
                          ",\"b\":%lld,\"h_q\":%lld,\"h_kv\":%lld,\"s_q\":%lld,\"s_kv\":%lld,\"d\":%lld,"
                          "\"d_v\":%lld,\"causal\":%s,\"layout\":\"%s\"",
                          (long long)c->b, (long long)c->h_q, (long long)c->h_kv, (long long)c->s_q,
                          (long long)c->s_kv, (long long)c->d, (long long)c->d_v, c->causal ? "true" : "false",
                          c->bshd ? "bshd" : "bhsd");
    else if (is_cnorm(c->op) || is_adaln(c->op))
        cnorm_json(f, c);
    else
        frost__buf_printf(f, ",\"rows\":%lld,\"cols\":%lld", (long long)c->rows, (long long)c->cols);
    if (row_param_dtype(c))
        frost__buf_printf(f, ",\"param_dtype\":\"%s\"", frost_dtype_name(row_param_dtype(c)));
    if (row_rms_bias(c))
        frost__buf_printf(f, ",\"rms_bias\":true");
    if (row_slice(c))
        frost__buf_printf(f, ",\"slice\":%lld", (long long)row_slice(c));
    if (row_y_only(c))
        frost__buf_printf(f, ",\"y_only\":true");
}

static void case_label(const bcase *c, char *buf, size_t cap)
{
    char slice[32] = "";
    if (row_slice(c))
        snprintf(slice, sizeof slice, " slice %lld", (long long)row_slice(c));
    if (is_sdpa(c->op))
        snprintf(buf, cap, "b=%lld h=%lld/%lld s=%lld/%lld d=%lld%s%s", (long long)c->b, (long long)c->h_q,
                 (long long)c->h_kv, (long long)c->s_q, (long long)c->s_kv, (long long)c->d, c->causal ? " causal" : "",
                 c->bshd ? " bshd" : "");
    else if (is_cnorm(c->op) || is_adaln(c->op))
        cnorm_label(c, buf, cap);
    else
        snprintf(buf, cap, "%lld x %lld%s%s%s%s", (long long)c->rows, (long long)c->cols,
                 row_param_dtype(c) ? " params " : "", row_param_dtype(c) ? frost_dtype_name(row_param_dtype(c)) : "",
                 row_rms_bias(c) ? " bias" : "", slice);
    size_t len = strlen(buf);
    if (row_y_only(c) && len < cap)
        snprintf(buf + len, cap - len, " y only");
}

#endif /* FROST_BENCH_CASES_H */
