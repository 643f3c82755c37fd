/*
 * cases_norm.h — the "cnorm" suite of frost-bench: GroupNorm, BatchNorm and InstanceNorm
 * over X [N, C, H, W], and AdaLayerNorm over X [B, S, C] with per-sample scale and shift
 * [B, 1, C].  Included by bench/cases.h (after bcase and push); bench/peers.py mirrors the
 * lists.
 *
 * The shapes are the issue's: GroupNorm (32 groups) and BatchNorm, bf16, channels-last, at
 * 32x512x64x64 and 128x256x32x32, forward and backward; both shapes again in contiguous
 * NCHW; InstanceNorm at the first shape in both layouts; GroupNorm at a diffusion UNet's
 * 8x320x64x64 in NCHW; AdaLayerNorm at [8, 4096, 2048].
 * Forward is the training forward (statistics saved; BatchNorm also updates running
 * statistics); backward starts from saved mean and inv_std and yields d_x, d_scale, d_bias.
 *
 * Work: bytes of the big tensors only, read once and written once: forward x + y
 * (2 x elems x dtype size), backward x + d_y + d_x (3 x elems x size).  The per-channel and
 * per-group tensors (scale, bias, statistics, running statistics, d_scale, d_bias; for
 * AdaLayerNorm the [B, 1, C] rows and [B, S, 1] statistics) are not counted: they add
 * about 0.1% at the suite's shapes (AdaLayerNorm; far less for the channel norms) and up to
 * 0.2% at the smoke shapes.
 *
 * JSON keys: channel norms n, c, h, w, layout ("nhwc" | "nchw") and, for GroupNorm,
 * groups; AdaLayerNorm b, s, c.
 */
#ifndef FROST_BENCH_CASES_NORM_H
#define FROST_BENCH_CASES_NORM_H

/* One channel-norm op (kind = OP_GN_FWD, OP_IN_FWD or OP_BN_FWD), forward and backward. */
static void cnorm_pair(bench_op kind, int64_t n, int64_t c, int64_t h, int64_t w, int nchw)
{
    for (int op = (int)kind; op <= (int)kind + 1; op++)
        push((bcase){.op = (bench_op)op, .dtype = FROST_BF16, .n = n, .c = c, .h = h, .w = w,
                     .groups = kind == OP_GN_FWD ? 32 : 0, .nchw = nchw});
}
static void adaln_pair(int64_t b, int64_t s, int64_t c)
{
    for (int op = OP_ADALN_FWD; op <= OP_ADALN_BWD; op++)
        push((bcase){.op = (bench_op)op, .dtype = FROST_BF16, .b = b, .s_q = s, .s_kv = s, .c = c});
}

static void cnorm_suite(void)
{
    static const int64_t shapes[][4] = {{32, 512, 64, 64}, {128, 256, 32, 32}};
    for (int i = 0; i < 2; i++) {
        cnorm_pair(OP_GN_FWD, shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3], 0);
        cnorm_pair(OP_BN_FWD, shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3], 0);
    }
    for (int i = 0; i < 2; i++) { /* the same in NCHW */
        cnorm_pair(OP_GN_FWD, shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3], 1);
        cnorm_pair(OP_BN_FWD, shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3], 1);
    }
    cnorm_pair(OP_IN_FWD, 32, 512, 64, 64, 0);
    cnorm_pair(OP_IN_FWD, 32, 512, 64, 64, 1);
    cnorm_pair(OP_GN_FWD, 8, 320, 64, 64, 1);
    adaln_pair(8, 4096, 2048);
}

static void cnorm_smoke(void) /* small: an SD-like 320 channels at 24 x 24, a DiT-like 1152 */
{
    cnorm_pair(OP_GN_FWD, 8, 320, 24, 24, 0);
    cnorm_pair(OP_BN_FWD, 8, 320, 24, 24, 0);
    adaln_pair(4, 1024, 1152);
}

static double cnorm_elems(const bcase *c)
{
    if (is_adaln(c->op))
        return (double)c->b * (double)c->s_q * (double)c->c;
    return (double)c->n * (double)c->c * (double)c->h * (double)c->w;
}

static void cnorm_json(frost__buf *f, const bcase *c)
{
    if (is_adaln(c->op)) {
        frost__buf_printf(f, ",\"b\":%lld,\"s\":%lld,\"c\":%lld", (long long)c->b, (long long)c->s_q,
                          (long long)c->c);
        return;
    }
    frost__buf_printf(f, ",\"n\":%lld,\"c\":%lld,\"h\":%lld,\"w\":%lld,\"layout\":\"%s\"", (long long)c->n,
                      (long long)c->c, (long long)c->h, (long long)c->w, c->nchw ? "nchw" : "nhwc");
    if (c->op == OP_GN_FWD || c->op == OP_GN_BWD)
        frost__buf_printf(f, ",\"groups\":%lld", (long long)c->groups);
}

static void cnorm_label(const bcase *c, char *buf, size_t cap)
{
    if (is_adaln(c->op))
        snprintf(buf, cap, "%lld x %lld x %lld, [B,1,C] params", (long long)c->b, (long long)c->s_q,
                 (long long)c->c);
    else if (c->op == OP_GN_FWD || c->op == OP_GN_BWD)
        snprintf(buf, cap, "%lldx%lldx%lldx%lld %s G=%lld", (long long)c->n, (long long)c->c, (long long)c->h,
                 (long long)c->w, c->nchw ? "nchw" : "nhwc", (long long)c->groups);
    else
        snprintf(buf, cap, "%lldx%lldx%lldx%lld %s", (long long)c->n, (long long)c->c, (long long)c->h,
                 (long long)c->w, c->nchw ? "nchw" : "nhwc");
}

#endif /* FROST_BENCH_CASES_NORM_H */
