/*
 * chan_norm_plane.cu — InstanceNorm, and GroupNorm with one channel a group, forward and
 * backward on NCHW tensors whose planes fit a block's registers: one block per (n, c)
 * plane of HW contiguous pixels, no shared-memory tile, no cluster.
 *
 * Thread t of a plane's T threads holds the 16-byte units t, t + T, ..., t + (PLANE_UNITS
 * - 1) T of the plane (of x, and of dy for the backward), loaded together at the top, so a
 * plane's loads are all in flight at once and neighbouring lanes read neighbouring units.
 * The host picks T = the plane's units / PLANE_UNITS rounded up to a warp (at most
 * CNP_MAX_THREADS, params.plane_threads); units past the plane's end are masked.  A block
 * holds one plane, or CNP_WARP_PLANES planes of one warp each.  A plane reduces in a fixed
 * order (warp butterflies, then every thread adds the warps' sums in warp order), so each
 * of its threads holds the same, bitwise repeatable, statistics.
 *
 * Forward: mean = sum x / M, then var = sum (x - mean)^2 / M over the registers (two exact
 * passes, no cancellation), y = x (r w) + (b - mean r w); saved mean / inv_std written by
 * thread 0.  Backward: mean and r from the saved statistics or recomputed the same way,
 * A = sum dy, B = sum dy (x - mean), and
 *     dx = r w (dy - A / M - (x - mean) r^2 B / M);
 * d_scale / d_bias: each block writes its plane's (sum dy, sum dy x_hat) as record (n, c)
 * of the workspace (k_tiles = 1), added per channel in a fixed order by chan_norm_bwd.cu's
 * cnorm_bwd_dparams_kernel.  HBM sees x (and dy) read once and the output written once,
 * like the cluster path, but a plane's bytes go straight from the loads to registers and
 * back: the tile staging, its barriers and the cluster exchange are gone, and the grid of
 * N C small blocks ends in a short tail.
 *
 * Why (docs/PERF.md, 2026-12-06): on the H200, InstanceNorm 32x512x64x64 NCHW backward's
 * cluster-path kernel took 114 us, 3.5 TB/s, where torch.compile's one reduction kernel of
 * a program per plane took 106.5 us.  On the H100 this path ran InstanceNorm NCHW
 * 1.04-1.08x the cluster path at 32x512x64x64 and 128x256x32x32, forward and backward.
 *
 * A base that turns out misaligned at execute (params.vec_ok = 0) takes element loads and
 * stores into the same registers.
 *
 * Entry points: cnorm_plane_fwd_kernel, cnorm_plane_bwd_kernel.  Keys: DTYPE_*,
 * KIND_INSTANCE | KIND_GROUP, LAYOUT_NCHW, PLANE_UNITS (units a thread holds).
 */
#include "chan_norm_stats.cuh"

#if !defined(LAYOUT_NCHW) || defined(KIND_BATCH) || !defined(PLANE_UNITS)
#error "the plane path is InstanceNorm / GroupNorm on NCHW tensors, with PLANE_UNITS defined"
#endif

/* Registers: the launch bound of CNP_MAX_THREADS threads, or with the key define MINB
 * (FROST_CNORM_PLANE_MINB, a developer switch) of MINB such blocks an SM. */
#if defined(MINB)
#define CNP_BOUNDS __launch_bounds__(CNP_MAX_THREADS, MINB)
#else
#define CNP_BOUNDS __launch_bounds__(CNP_MAX_THREADS)
#endif

/* A plane's units in a thread's registers: packed 16-byte words, and which exist. */
typedef struct cp_regs {
    uint32_t r[PLANE_UNITS][4];
} cp_regs;

/* The thread's place in its plane: params.plane_threads threads a plane, a block of
 * blockDim / plane_threads planes (several only when a plane is one warp). */
FROST_DEVICE int cp_lane(const cnorm_params *p)
{
    return (int)threadIdx.x % p->plane_threads;
}

FROST_DEVICE bool cp_valid(const cnorm_params *p, int k, int units)
{
    return cp_lane(p) + k * p->plane_threads < units;
}

/* Loads the thread's units of the plane at base (zeros past its end). */
FROST_DEVICE void cp_load(const cnorm_params *p, const frost_io *base, int units, cp_regs *v)
{
#pragma unroll
    for (int k = 0; k < PLANE_UNITS; k++) {
        const int u = cp_lane(p) + k * p->plane_threads;
        if (u >= units) {
            v->r[k][0] = v->r[k][1] = v->r[k][2] = v->r[k][3] = 0u;
        } else if (p->vec_ok) {
            frost_ld_stream_v4(v->r[k], base + (int64_t)u * CN_VEC);
        } else {
            float f[CN_VEC];
#pragma unroll
            for (int e = 0; e < CN_VEC; e++)
                f[e] = frost_to_float(base[(int64_t)u * CN_VEC + e]);
            cn_pack(v->r[k], f);
        }
    }
}

/* Stores unit k of the thread (f: its CN_VEC values) at base. */
FROST_DEVICE void cp_store(const cnorm_params *p, frost_io *base, int k, const float *f)
{
    const int64_t at = ((int64_t)cp_lane(p) + (int64_t)k * p->plane_threads) * CN_VEC;
    if (p->vec_ok) {
        uint32_t r[4];
        cn_pack(r, f);
        frost_st_v4(base + at, r);
    } else {
#pragma unroll
        for (int e = 0; e < CN_VEC; e++)
            base[at + e] = frost_from_float(f[e]);
    }
}

/* Sums of a and b over the plane's threads, the same bits in every one (fixed order): a
 * warp's butterfly, then for planes of several warps the warps' sums in warp order. */
FROST_DEVICE float2 cp_block_sum2(const cnorm_params *p, float a, float b, float2 *red)
{
    a = frost_warp_sum(a);
    b = frost_warp_sum(b);
    if (p->plane_threads == 32)
        return make_float2(a, b);
    const int warps = (int)blockDim.x / 32;
    if ((threadIdx.x & 31) == 0)
        red[threadIdx.x / 32] = make_float2(a, b);
    __syncthreads();
    float2 s = red[0];
    for (int w = 1; w < warps; w++) {
        s.x += red[w].x;
        s.y += red[w].y;
    }
    __syncthreads(); /* red is free again */
    return s;
}

/* The plane's mean and sum of squared deviations about it (M2). */
FROST_DEVICE float2 cp_mean_m2(const cnorm_params *p, const cp_regs *x, int units, float2 *red)
{
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < PLANE_UNITS; k++) { /* units past the end hold zeros */
        float f[CN_VEC];
        cn_unpack(x->r[k], f);
#pragma unroll
        for (int e = 0; e < CN_VEC; e++)
            s += f[e];
    }
    const float mean = cp_block_sum2(p, s, 0.0f, red).x * p->inv_m;
    float q = 0.0f;
#pragma unroll
    for (int k = 0; k < PLANE_UNITS; k++)
        if (cp_valid(p, k, units)) {
            float f[CN_VEC];
            cn_unpack(x->r[k], f);
#pragma unroll
            for (int e = 0; e < CN_VEC; e++)
                q = fmaf(f[e] - mean, f[e] - mean, q);
        }
    return make_float2(mean, cp_block_sum2(p, q, 0.0f, red).x);
}

/* The thread's plane: sample and channel; false past the last plane (only in a block of
 * one-warp planes, whose threads never meet at a barrier). */
FROST_DEVICE bool cp_plane(const cnorm_params *p, int *n, int *c)
{
    const int64_t plane = (int64_t)blockIdx.x * (blockDim.x / p->plane_threads) + threadIdx.x / p->plane_threads;
    *n = (int)(plane / p->c);
    *c = (int)(plane - (int64_t)*n * p->c);
    return plane < (int64_t)p->n * p->c;
}

/* Plane (n, c) of a data tensor with n stride sn. */
FROST_DEVICE frost_io *cp_at(const void *base, int64_t sn, const cnorm_params *p, int n, int c)
{
    return (frost_io *)base + (int64_t)n * sn + (int64_t)c * p->hw;
}

extern "C" __global__ void CNP_BOUNDS cnorm_plane_fwd_kernel(const __grid_constant__ cnorm_params p)
{
    __shared__ float2 red[CNP_MAX_THREADS / 32];
    int n, c;
    if (!cp_plane(&p, &n, &c))
        return;
    const int units = p.hw / CN_VEC;
    cp_regs x;
    cp_load(&p, cp_at(p.x, p.x_sn, &p, n, c), units, &x);
    const float2 st = cp_mean_m2(&p, &x, units, red);
    const float var = st.y * p.inv_m, rstd = rsqrtf(var + p.eps);
    if (cp_lane(&p) == 0)
        fwd_set_outputs(&p, n, c, 0, st.x, var, rstd, NULL);
    const float a = rstd * cn_weight(&p, c);
    const float b = (p.bias_dt != FROST_DT_NONE ? cn_param(p.bias, (int64_t)c * p.bias_sc, p.bias_dt) : 0.0f) -
                    st.x * a;
    frost_io *y = cp_at(p.out, p.out_sn, &p, n, c);
#pragma unroll
    for (int k = 0; k < PLANE_UNITS; k++)
        if (cp_valid(&p, k, units)) {
            float f[CN_VEC];
            cn_unpack(x.r[k], f);
#pragma unroll
            for (int e = 0; e < CN_VEC; e++)
                f[e] = fmaf(f[e], a, b);
            cp_store(&p, y, k, f);
        }
}

extern "C" __global__ void CNP_BOUNDS cnorm_plane_bwd_kernel(const __grid_constant__ cnorm_params p)
{
    __shared__ float2 red[CNP_MAX_THREADS / 32];
    int n, c;
    if (!cp_plane(&p, &n, &c))
        return;
    const int units = p.hw / CN_VEC;
    cp_regs x, dy;
    cp_load(&p, cp_at(p.x, p.x_sn, &p, n, c), units, &x);
    cp_load(&p, cp_at(p.dy, p.dy_sn, &p, n, c), units, &dy);
    const bool saved_mean = p.flags & CNORM_F_SAVED_MEAN, saved_rstd = p.flags & CNORM_F_SAVED_RSTD;
    float mean = saved_mean ? p.mean[cn_stat_index(&p, n, c, 0, p.mean_sn, p.mean_ss)] : 0.0f;
    float rstd = saved_rstd ? p.inv_std[cn_stat_index(&p, n, c, 0, p.inv_sn, p.inv_ss)] : 0.0f;
    /* the channel's scale loads beside x and dy, not after the sums: 1.00-1.015x the late
     * load at the five sweep shapes (H100, 2026-12-06 05:33 UTC, docs/PERF.md); the
     * forward's early loads ran 0.985x at 8x1024x32x64 and even elsewhere, so it keeps them late */
    const float w = cn_weight(&p, c);
    if (!saved_mean || !saved_rstd) { /* as chan_norm_bwd.cu: a missing statistic is the plane's own */
        const float2 st = cp_mean_m2(&p, &x, units, red);
        if (!saved_mean)
            mean = st.x;
        if (!saved_rstd)
            rstd = rsqrtf(st.y * p.inv_m + p.eps);
    }
    float sa = 0.0f, sb = 0.0f;
#pragma unroll
    for (int k = 0; k < PLANE_UNITS; k++)
        if (cp_valid(&p, k, units)) {
            float fx[CN_VEC], fd[CN_VEC];
            cn_unpack(x.r[k], fx);
            cn_unpack(dy.r[k], fd);
#pragma unroll
            for (int e = 0; e < CN_VEC; e++) {
                sa += fd[e];
                sb = fmaf(fd[e], fx[e] - mean, sb);
            }
        }
    const float2 s = cp_block_sum2(&p, sa, sb, red);
    if (p.want_rec && cp_lane(&p) == 0) { /* (sum dy, sum dy x_hat): record (n, c, 0) */
        float *rec = (float *)(p.ws + p.off_rec) + ((int64_t)n * p.c + c) * 2;
        rec[0] = s.x;
        rec[1] = rstd * s.y;
    }
    /* the d_scale / d_bias kernel may be scheduled now; it waits for this grid to finish */
    frost_allow_next_grid();
    const float rw = rstd * w;
    const float ka = s.x * p.inv_m, kb = rstd * rstd * s.y * p.inv_m;
    frost_io *dx = cp_at(p.out, p.out_sn, &p, n, c);
#pragma unroll
    for (int k = 0; k < PLANE_UNITS; k++)
        if (cp_valid(&p, k, units)) {
            float fx[CN_VEC], fd[CN_VEC];
            cn_unpack(x.r[k], fx);
            cn_unpack(dy.r[k], fd);
#pragma unroll
            for (int e = 0; e < CN_VEC; e++)
                fx[e] = rw * (fd[e] - ka - (fx[e] - mean) * kb);
            cp_store(&p, dx, k, fx);
        }
}
