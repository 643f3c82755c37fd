/*
 * gn_ws.cu - GroupNorm NHWC forward and backward (bf16) on a persistent grid of clusters whose
 * blocks each give one warp to loading, as a stand-alone measurement.
 *
 * frost's cluster path (src/ops/norm/chan_norm_cluster.cu) runs one segment - one sample's
 * window of cw channels over all HW pixels - per cluster launch: each block loads its tile,
 * reduces it, meets its peers at a cluster barrier, then normalizes and stores.  It moves x
 * and y through HBM once, at 89-95 % of the issue's targets on the H200.  A persistent form
 * of it, where each block ran every step in sequence, lost (2026-12-04, docs/PERF.md "a
 * persistent cluster forward": 7-10 us a tile against ~4.3 us of HBM time), and that section
 * named what could win: warps specialized for loading, and the exchange through the peers'
 * mbarriers instead of cluster barriers.  This is that form:
 *
 *   - The grid is as many clusters of CL blocks as the device keeps resident
 *     (cudaOccupancyMaxActiveClusters); cluster k walks segments k, k + clusters, ...
 *     Block `rank` of a cluster owns pixels [rank * rows, (rank + 1) * rows) of each
 *     segment, rows = HW / CL: a tile of rows x cw bf16 a tensor (x; x and dy for the
 *     backward), dense in shared memory.
 *   - Warp 8 (the producer) fills a ring of S stages with bulk copies that signal the
 *     stage's `full` mbarrier: one 1-D cp.async.bulk per pixel row (LOAD_ROWS), or 2-D TMA
 *     boxes of up to 256 rows from a tensor map (LOAD_TMA).  It refills a stage when its
 *     `empty` mbarrier says the eight consumer warps are done with it.
 *   - Warps 0-7 (the consumers) reduce the stage in shared memory.  Forward: the block's
 *     per-group sum, then the sum of squares about the block's mean (exact two-pass
 *     variance), records (count, mean, M2) merged with Chan's formula.  Backward (saved mean
 *     and inv_std given): per channel sum dy and sum dy (x - mean), which give the block's
 *     d_scale / d_bias partials (written to a workspace that a small kernel adds in a fixed
 *     order) and the per-group A = sum w dy, B = sum w dy (x - mean), merged by plain sums.
 *     The records go to every peer with st.async, which completes bytes on the peer's
 *     `xfull` mbarrier (two slots, alternating); each block merges the CL records of a group
 *     in rank order, so every block holds the same bits.  Then it writes y (or
 *     dx = r w dy - (x - mean) r^3 B / M - r A / M) from shared memory with 16-byte
 *     streaming stores, and releases the stage.
 *   - Only the consumers wait for the exchange, so the producer's loads of the next stages
 *     run through it.  A slot of the exchange is written again two segments later, which a
 *     peer can only reach after this block sent the record of the segment in between -
 *     after a consumer barrier that every reader of the slot has passed.  The reduction
 *     buffers alternate the same way: a thread still sending segment i's records from them
 *     holds every other thread before segment i + 2 can write them again.
 *
 * Thread layout of a consumer: unit u = t % U of the window (U = cw / 8 units of 16 bytes)
 * and rows r0 = t / U, r0 + 256 / U, ...; a warp reads 32 consecutive units of a tile
 * (conflict-free) and stores whole 16-byte units of consecutive rows.
 *
 *   nvcc -arch=sm_90a -O3 -std=c++17 -o gn_ws bench/gn_ws.cu -lcuda && ./gn_ws
 *
 * Prints, per shape and setting, the median of 40 launches (after 10 warm-ups, three input
 * sets rotated) and GB/s counting x read and y written (forward) or x and dy read and dx
 * written (backward; its time includes the d_scale / d_bias kernel).  Checks, with every
 * output NaN before a setting's first launch (so an element no launch wrote fails), against
 * a double-precision host reference: the forward's y, mean and inv_std of samples 0 and
 * N - 1; the backward's dx of those samples and all of d_scale and d_bias.  Exit status 1
 * when a check fails.  GN_WS_ONLY="dir,cw,CL,S,load" (dir 0 forward, 1 backward; load 0
 * rows, 1 TMA) runs one setting.
 */
#include <cuda.h>

#include "../kernels/common/frost_common.cuh" /* mbarriers and clusters, as frost's kernels use them */
#include "standalone.cuh"

constexpr int CONSUMERS = 256; /* warps 0-7 */
constexpr int THREADS = CONSUMERS + 32;
constexpr int MAX_GW = 32; /* groups in a window */
enum { LOAD_ROWS = 0, LOAD_TMA = 1 };

struct Params {
    const bf16 *x, *dy; /* [N][HW][C] */
    bf16 *out;          /* y (forward) or dx (backward) */
    const float *w, *b; /* [C] */
    float *mean, *rstd; /* [N][G]: written by the forward, read by the backward */
    float2 *prec;       /* backward: [N][CL][C] (sum dy x_hat, sum dy), a block's share */
    int n, c, hw, g, cw, rows, segs;
    float eps;
    uint32_t tile_bytes; /* one tensor's tile */
};

/* Byte offsets in the (1024-aligned) dynamic shared memory: the ring of S stages of T tiles,
 * the mbarriers (full[S], empty[S], xfull[2]), the exchange [2][CL][MAX_GW] float4 and the
 * reduction buffers: forward [2 parities][2 passes][8 warps][32]; backward [2 parities]
 * ([8 warps][U units][16] per-channel sums, then [U][2] weighted unit sums). */
struct Layout {
    uint32_t bars, xrec, red, total;
};

__host__ __device__ inline int bwd_red_floats(int units)
{
    return 8 * units * 16 + units * 2;
}

__host__ __device__ inline Layout layout(uint32_t tile_bytes, int stages, int tensors, int cl, int units)
{
    Layout l;
    l.bars = (uint32_t)stages * tensors * tile_bytes;
    l.xrec = l.bars + (uint32_t)(2 * stages + 2) * 8;
    l.red = l.xrec + (uint32_t)(2 * cl * MAX_GW * 16);
    l.total = l.red + 4 * (tensors == 1 ? 4 * 8 * 32 : 2 * bwd_red_floats(units));
    return l;
}

/* ---- shared memory addresses, mbarriers, bulk copies, cluster ------------------------------- */
__device__ inline uint32_t s_addr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* A plain arrival (frost_common.cuh has the one that also expects bytes).  Waits go through
 * frost_mbar_wait, an acquire at CTA scope, also for the exchange's barriers: it covers the
 * bytes the peers' st.async landed in this block's shared memory, as frost's split row-norm
 * backward relies on. */
__device__ inline void mbar_arrive(uint64_t *bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(s_addr(bar)) : "memory");
}

__device__ inline void bulk_row(uint32_t dst, const void *src, uint32_t bytes, uint32_t bar)
{
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
                 "l"(src), "r"(bytes), "r"(bar)
                 : "memory");
}

__device__ inline void tma_box(uint32_t dst, const CUtensorMap *map, int c, int r, uint32_t bar)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
                 "l"((uint64_t)map), "r"(c), "r"(r), "r"(bar)
                 : "memory");
}

__device__ inline uint32_t map_to_rank(uint32_t addr, uint32_t rank)
{
    uint32_t r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(addr), "r"(rank));
    return r;
}

__device__ inline void st_async_f4(uint32_t addr, float4 v, uint32_t bar)
{
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32"
                 " [%0], {%1, %2, %3, %4}, [%5];" ::"r"(addr),
                 "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w), "r"(bar)
                 : "memory");
}

__device__ inline void consumers_sync()
{
    asm volatile("bar.sync 1, %0;" ::"n"(CONSUMERS) : "memory");
}

/* ---- the producer ---------------------------------------------------------------------------- */
template <int CL, int S, int LOAD, int T>
__device__ void produce(const Params &p, const CUtensorMap *mx, const CUtensorMap *mdy, uint32_t tiles, uint64_t *full,
                        uint64_t *empty, uint32_t rank, int cluster, int clusters)
{
    const int lane = threadIdx.x % 32, wins = p.c / p.cw;
    int i = 0;
    for (int seg = cluster; seg < p.segs; seg += clusters, i++) {
        const int s = i % S;
        if (i >= S)
            frost_mbar_wait(&empty[s], (uint32_t)(i / S - 1) & 1);
        const int n = seg / wins, c0 = (seg % wins) * p.cw;
        const uint32_t bar = s_addr(&full[s]);
        if (lane == 0)
            frost_mbar_expect(&full[s], T * p.tile_bytes);
        __syncwarp();
        const size_t row0 = (size_t)n * p.hw + (size_t)rank * p.rows;
        for (int k = 0; k < T; k++) {
            const uint32_t tile = tiles + (uint32_t)(s * T + k) * p.tile_bytes;
            if (LOAD == LOAD_TMA) {
                const int box = p.rows < 256 ? p.rows : 256;
                for (int j = lane; j * box < p.rows; j += 32)
                    tma_box(tile + (uint32_t)j * box * p.cw * 2, k ? mdy : mx, c0, (int)(row0 + (size_t)j * box), bar);
            } else {
                const bf16 *src = (k ? p.dy : p.x) + row0 * p.c + c0;
                for (int r = lane; r < p.rows; r += 32)
                    bulk_row(tile + (uint32_t)r * p.cw * 2, src + (size_t)r * p.c, p.cw * 2, bar);
            }
        }
    }
}

/* ---- the consumers --------------------------------------------------------------------------- */
/* Where a consumer thread works: its unit u and first row r0, the rows' step, its group. */
struct Place {
    int t, warp, lane, U, u, r0, per, cg, upg, gw, my_g;
};

__device__ inline Place place(const Params &p)
{
    Place q;
    q.t = threadIdx.x, q.warp = q.t / 32, q.lane = q.t % 32;
    q.U = p.cw / 8, q.u = q.t % q.U, q.r0 = q.t / q.U, q.per = CONSUMERS / q.U;
    q.cg = p.c / p.g, q.upg = q.cg / 8, q.gw = p.cw / q.cg, q.my_g = q.u / q.upg;
    return q;
}

/* Sends this block's record of each of the window's groups to every block of the cluster
 * (arming this block's own exchange barrier first); rec(g) gives group g's float4. */
template <int CL, class Rec>
__device__ void send_records(const Place &q, uint64_t *xfull, uint32_t xrec, uint32_t rank, Rec rec)
{
    if (q.t == 0)
        frost_mbar_expect(xfull, (uint32_t)(CL * q.gw * 16));
    if (q.t < CL * q.gw) {
        const int to = q.t / q.gw, g = q.t % q.gw;
        const uint32_t slot = xrec + (uint32_t)(rank * MAX_GW + g) * 16;
        st_async_f4(map_to_rank(slot, to), rec(g), map_to_rank(s_addr(xfull), to));
    }
}

template <int CL>
__device__ void consume_fwd(const Params &p, const unsigned char *base, const Layout &l, uint32_t sbase, int S,
                            uint32_t rank, int cluster, int clusters)
{
    const Place q = place(p);
    const int wins = p.c / p.cw;
    const float cnt_block = (float)p.rows * q.cg, cnt_all = cnt_block * CL;
    int i = 0;
    for (int seg = cluster; seg < p.segs; seg += clusters, i++) {
        const int s = i % S, xs = i & 1;
        const int n = seg / wins, c0 = (seg % wins) * p.cw;
        const bf16 *tile = (const bf16 *)(base + (size_t)s * p.tile_bytes);
        float *red1 = (float *)(base + l.red) + xs * 2 * 8 * 32, *red2 = red1 + 8 * 32;
        uint64_t *bars = (uint64_t *)(base + l.bars), *xfull = &bars[2 * S + xs];
        const uint32_t xrec = sbase + l.xrec + xs * CL * MAX_GW * 16;
        frost_mbar_wait(&bars[s], (uint32_t)(i / S) & 1);

        /* pass 1: the block's sum per group */
        float v[8], acc = 0.0f;
        for (int r = q.r0; r < p.rows; r += q.per) {
            unpack8(*(const uint4 *)(tile + (size_t)r * p.cw + q.u * 8), v);
#pragma unroll
            for (int k = 0; k < 8; k++)
                acc += v[k];
        }
        for (int off = q.U; off < 32; off *= 2)
            acc += __shfl_xor_sync(0xffffffffu, acc, off);
        if (q.lane < q.U)
            red1[q.warp * 32 + q.lane] = acc;
        consumers_sync();
        auto group_total = [&](const float *red, int g) {
            float sum = 0.0f;
            for (int w = 0; w < 8; w++)
                for (int j = 0; j < q.upg; j++)
                    sum += red[w * 32 + g * q.upg + j];
            return sum;
        };
        const float mean_b = group_total(red1, q.my_g) / cnt_block;

        /* pass 2: the sum of squares about the block's mean */
        acc = 0.0f;
        for (int r = q.r0; r < p.rows; r += q.per) {
            unpack8(*(const uint4 *)(tile + (size_t)r * p.cw + q.u * 8), v);
#pragma unroll
            for (int k = 0; k < 8; k++) {
                const float d = v[k] - mean_b;
                acc = fmaf(d, d, acc);
            }
        }
        for (int off = q.U; off < 32; off *= 2)
            acc += __shfl_xor_sync(0xffffffffu, acc, off);
        if (q.lane < q.U)
            red2[q.warp * 32 + q.lane] = acc;
        consumers_sync();

        send_records<CL>(q, xfull, xrec, rank, [&](int g) {
            return make_float4(cnt_block, group_total(red1, g) / cnt_block, fmaxf(group_total(red2, g), 0.0f), 0.0f);
        });
        frost_mbar_wait(xfull, (uint32_t)(i >> 1) & 1);

        /* the cluster's statistics of this thread's group, merged in rank order */
        const float4 *xr = (const float4 *)(base + l.xrec) + xs * CL * MAX_GW;
        Stat st = {0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int k = 0; k < CL; k++) {
            const float4 r = xr[k * MAX_GW + q.my_g];
            st = merge(st, Stat{r.x, r.y, r.z});
        }
        const float rstd = 1.0f / sqrtf(st.m2 / cnt_all + p.eps);
        if (rank == 0 && q.t < q.U && q.u % q.upg == 0) {
            p.mean[(size_t)n * p.g + c0 / q.cg + q.my_g] = st.mean;
            p.rstd[(size_t)n * p.g + c0 / q.cg + q.my_g] = rstd;
        }

        /* y = x_hat w + b from the tile */
        float a[8], sh[8];
#pragma unroll
        for (int k = 0; k < 8; k++) {
            a[k] = __ldg(p.w + c0 + q.u * 8 + k) * rstd;
            sh[k] = __ldg(p.b + c0 + q.u * 8 + k) - st.mean * a[k];
        }
        bf16 *dst = p.out + ((size_t)n * p.hw + (size_t)rank * p.rows) * p.c + c0 + q.u * 8;
        for (int r = q.r0; r < p.rows; r += q.per) {
            unpack8(*(const uint4 *)(tile + (size_t)r * p.cw + q.u * 8), v);
#pragma unroll
            for (int k = 0; k < 8; k++)
                v[k] = fmaf(v[k], a[k], sh[k]);
            stg_stream(dst + (size_t)r * p.c, pack8(v));
        }
        __syncwarp();
        if (q.lane == 0)
            mbar_arrive(&bars[S + s]);
    }
}

template <int CL>
__device__ void consume_bwd(const Params &p, const unsigned char *base, const Layout &l, uint32_t sbase, int S,
                            uint32_t rank, int cluster, int clusters)
{
    const Place q = place(p);
    const int wins = p.c / p.cw;
    const float cnt_all = (float)p.rows * q.cg * CL;
    int i = 0;
    for (int seg = cluster; seg < p.segs; seg += clusters, i++) {
        const int s = i % S, xs = i & 1;
        const int n = seg / wins, c0 = (seg % wins) * p.cw;
        const bf16 *tx = (const bf16 *)(base + (size_t)(2 * s) * p.tile_bytes);
        const bf16 *tdy = (const bf16 *)(base + (size_t)(2 * s + 1) * p.tile_bytes);
        float *dred = (float *)(base + l.red) + xs * bwd_red_floats(q.U), *ured = dred + 8 * q.U * 16;
        uint64_t *bars = (uint64_t *)(base + l.bars), *xfull = &bars[2 * S + xs];
        const uint32_t xrec = sbase + l.xrec + xs * CL * MAX_GW * 16;
        const size_t stat = (size_t)n * p.g + c0 / q.cg + q.my_g;
        const float mu = __ldg(p.mean + stat), rstd = __ldg(p.rstd + stat);
        frost_mbar_wait(&bars[s], (uint32_t)(i / S) & 1);

        /* per channel of the unit: sum dy and sum dy (x - mean) over the thread's rows */
        float xv[8], dv[8], sdy[8] = {}, sdyx[8] = {};
        for (int r = q.r0; r < p.rows; r += q.per) {
            unpack8(*(const uint4 *)(tx + (size_t)r * p.cw + q.u * 8), xv);
            unpack8(*(const uint4 *)(tdy + (size_t)r * p.cw + q.u * 8), dv);
#pragma unroll
            for (int k = 0; k < 8; k++) {
                sdy[k] += dv[k];
                sdyx[k] = fmaf(dv[k], xv[k] - mu, sdyx[k]);
            }
        }
        for (int off = q.U; off < 32; off *= 2)
#pragma unroll
            for (int k = 0; k < 8; k++) {
                sdy[k] += __shfl_xor_sync(0xffffffffu, sdy[k], off);
                sdyx[k] += __shfl_xor_sync(0xffffffffu, sdyx[k], off);
            }
        if (q.lane < q.U)
#pragma unroll
            for (int k = 0; k < 8; k++) {
                dred[(q.warp * q.U + q.lane) * 16 + k] = sdy[k];
                dred[(q.warp * q.U + q.lane) * 16 + 8 + k] = sdyx[k];
            }
        consumers_sync();

        /* a unit's channel sums over the warps: the d_scale / d_bias partials, and the unit's
         * w-weighted share of the group's A and B */
        if (q.t < q.U) {
            float A = 0.0f, B = 0.0f;
#pragma unroll
            for (int k = 0; k < 8; k++) {
                float cdy = 0.0f, cdyx = 0.0f;
                for (int w = 0; w < 8; w++) {
                    cdy += dred[(w * q.U + q.t) * 16 + k];
                    cdyx += dred[(w * q.U + q.t) * 16 + 8 + k];
                }
                const int ch = c0 + q.t * 8 + k;
                p.prec[((size_t)n * CL + rank) * p.c + ch] = make_float2(rstd * cdyx, cdy);
                const float wc = __ldg(p.w + ch);
                A = fmaf(wc, cdy, A);
                B = fmaf(wc, cdyx, B);
            }
            ured[q.t * 2] = A;
            ured[q.t * 2 + 1] = B;
        }
        consumers_sync();

        send_records<CL>(q, xfull, xrec, rank, [&](int g) {
            float A = 0.0f, B = 0.0f;
            for (int j = 0; j < q.upg; j++)
                A += ured[(g * q.upg + j) * 2], B += ured[(g * q.upg + j) * 2 + 1];
            return make_float4(A, B, 0.0f, 0.0f);
        });
        frost_mbar_wait(xfull, (uint32_t)(i >> 1) & 1);

        /* the group's A and B over the cluster, in rank order; dx from the tiles */
        const float4 *xr = (const float4 *)(base + l.xrec) + xs * CL * MAX_GW;
        float A = 0.0f, B = 0.0f;
#pragma unroll
        for (int k = 0; k < CL; k++) {
            const float4 r = xr[k * MAX_GW + q.my_g];
            A += r.x, B += r.y;
        }
        const float c2 = rstd * rstd * rstd * B / cnt_all, c3 = mu * c2 - rstd * A / cnt_all;
        float c1[8];
#pragma unroll
        for (int k = 0; k < 8; k++)
            c1[k] = rstd * __ldg(p.w + c0 + q.u * 8 + k);
        bf16 *dst = p.out + ((size_t)n * p.hw + (size_t)rank * p.rows) * p.c + c0 + q.u * 8;
        for (int r = q.r0; r < p.rows; r += q.per) {
            unpack8(*(const uint4 *)(tx + (size_t)r * p.cw + q.u * 8), xv);
            unpack8(*(const uint4 *)(tdy + (size_t)r * p.cw + q.u * 8), dv);
#pragma unroll
            for (int k = 0; k < 8; k++)
                xv[k] = fmaf(c1[k], dv[k], fmaf(-c2, xv[k], c3));
            stg_stream(dst + (size_t)r * p.c, pack8(xv));
        }
        __syncwarp();
        if (q.lane == 0)
            mbar_arrive(&bars[S + s]);
    }
}

/* ---- the kernels ----------------------------------------------------------------------------- */
template <int CL, int S, int LOAD, int T>
__global__ void __launch_bounds__(THREADS, 2)
    gn_ws(const __grid_constant__ Params p, const __grid_constant__ CUtensorMap mx,
          const __grid_constant__ CUtensorMap mdy)
{
    extern __shared__ unsigned char raw[];
    unsigned char *base = (unsigned char *)(((uintptr_t)raw + 1023) & ~(uintptr_t)1023);
    const uint32_t sbase = s_addr(base);
    const Layout l = layout(p.tile_bytes, S, T, CL, p.cw / 8);
    const uint32_t rank = frost_cluster_rank();
    const int cluster = blockIdx.x / CL, clusters = gridDim.x / CL;

    uint64_t *bars = (uint64_t *)(base + l.bars); /* full[S], empty[S], xfull[2] */
    if (threadIdx.x == 0) {
        for (int s = 0; s < S; s++) {
            frost_mbar_init(&bars[s], 1);
            frost_mbar_init(&bars[S + s], CONSUMERS / 32);
        }
        frost_mbar_init(&bars[2 * S], 1);
        frost_mbar_init(&bars[2 * S + 1], 1);
        frost_mbar_init_fence();
    }
    frost_cluster_sync(); /* the peers' barriers exist before any st.async reaches them */

    if (threadIdx.x >= CONSUMERS) {
        produce<CL, S, LOAD, T>(p, &mx, &mdy, sbase, bars, &bars[S], rank, cluster, clusters);
    } else if (T == 1) {
        consume_fwd<CL>(p, base, l, sbase, S, rank, cluster, clusters);
    } else {
        consume_bwd<CL>(p, base, l, sbase, S, rank, cluster, clusters);
    }
    frost_cluster_sync(); /* no block leaves while a peer may still write its shared memory */
}

/* d_scale[c], d_bias[c]: the blocks' partials [N][CL][C] added in a fixed order. */
__global__ void gn_dparams(const float2 *prec, float *dscale, float *dbias, int n, int cl, int c)
{
    const int ch = blockIdx.x * blockDim.x + threadIdx.x;
    if (ch >= c)
        return;
    float s = 0.0f, b = 0.0f;
    for (int i = 0; i < n * cl; i++) {
        const float2 v = prec[(size_t)i * c + ch];
        s += v.x, b += v.y;
    }
    dscale[ch] = s, dbias[ch] = b;
}

/* mean and inv_std [n][g] of x (NHWC) in two passes, a block per (n, g): the backward's saved
 * statistics. */
__device__ float block_sum(float v, float *red)
{
    for (int off = 16; off; off /= 2)
        v += __shfl_xor_sync(0xffffffffu, v, off);
    __syncthreads(); /* red's last readers are done */
    if (threadIdx.x % 32 == 0)
        red[threadIdx.x / 32] = v;
    __syncthreads();
    float total = 0.0f;
    for (int i = 0; i < (int)blockDim.x / 32; i++)
        total += red[i];
    return total;
}

__global__ void gn_stats(const bf16 *x, float *mean, float *rstd, int c, int hw, int g, float eps)
{
    __shared__ float red[32];
    const int n = blockIdx.x / g, gi = blockIdx.x % g, cg = c / g;
    const int count = hw * cg;
    const bf16 *xs = x + (size_t)n * hw * c + gi * cg;
    float s = 0.0f;
    for (int e = threadIdx.x; e < count; e += blockDim.x)
        s += __bfloat162float(xs[(size_t)(e / cg) * c + e % cg]);
    const float mu = block_sum(s, red) / count;
    float m2 = 0.0f;
    for (int e = threadIdx.x; e < count; e += blockDim.x) {
        const float d = __bfloat162float(xs[(size_t)(e / cg) * c + e % cg]) - mu;
        m2 = fmaf(d, d, m2);
    }
    m2 = block_sum(m2, red);
    if (threadIdx.x == 0)
        mean[blockIdx.x] = mu, rstd[blockIdx.x] = 1.0f / sqrtf(m2 / count + eps);
}

/* ---- host ------------------------------------------------------------------------------------ */
struct Shape {
    int n, c, hw;
};

struct Setting {
    int dir, cw, cl, stages, load;
};

template <int CL, int S, int LOAD, int T>
static cudaError_t launch(const Params &p, const CUtensorMap &mx, const CUtensorMap &mdy, size_t smem, int *clusters,
                          bool query)
{
    auto kern = gn_ws<CL, S, LOAD, T>;
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = CL, attr[0].val.clusterDim.y = 1, attr[0].val.clusterDim.z = 1;
    cfg.blockDim = dim3(THREADS);
    cfg.dynamicSmemBytes = smem;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    if (query) { /* first for every setting: the shared-memory size is set here, outside the timed launches */
        cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e != cudaSuccess)
            return e;
        cfg.gridDim = dim3(CL * 64);
        return cudaOccupancyMaxActiveClusters(clusters, (void *)kern, &cfg);
    }
    cfg.gridDim = dim3(CL * *clusters);
    return cudaLaunchKernelEx(&cfg, kern, p, mx, mdy);
}

typedef cudaError_t (*Launcher)(const Params &, const CUtensorMap &, const CUtensorMap &, size_t, int *, bool);

static Launcher pick(int cl, int s, int load, int t)
{
#define GN_WS_T(CL_, S_, L_) (t == 2 ? launch<CL_, S_, L_, 2> : launch<CL_, S_, L_, 1>)
#define GN_WS_CASE(CL_, S_)                                                                                         \
    if (cl == CL_ && s == S_)                                                                                       \
        return load == LOAD_TMA ? GN_WS_T(CL_, S_, LOAD_TMA) : GN_WS_T(CL_, S_, LOAD_ROWS);
    GN_WS_CASE(1, 2) GN_WS_CASE(1, 3) GN_WS_CASE(2, 2) GN_WS_CASE(2, 3) GN_WS_CASE(4, 2) GN_WS_CASE(4, 3)
    GN_WS_CASE(8, 2) GN_WS_CASE(8, 3)
#undef GN_WS_CASE
#undef GN_WS_T
    return nullptr;
}

/* x viewed as [N * HW pixels][C channels], boxes of cw channels x box rows. */
static bool make_map(CUtensorMap *map, const bf16 *x, const Shape &sh, int cw, int box)
{
    const cuuint64_t dims[2] = {(cuuint64_t)sh.c, (cuuint64_t)sh.n * sh.hw};
    const cuuint64_t strides[1] = {(cuuint64_t)sh.c * 2};
    const cuuint32_t boxd[2] = {(cuuint32_t)cw, (cuuint32_t)box}, elem[2] = {1, 1};
    CUresult r = cuTensorMapEncodeTiled(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, (void *)x, dims, strides, boxd, elem,
                                        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                                        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return r == CUDA_SUCCESS;
}

/* The backward's worst relative error: dx of samples 0 and n - 1, every d_scale and d_bias,
 * against a double-precision reference from the same saved statistics. */
static double bwd_error(const Shape &sh, int G, const bf16 *x, const bf16 *dy, const float *mean, const float *rstd,
                        const bf16 *dx, const float *dscale, const float *dbias, const std::vector<float> &w)
{
    const size_t elems = (size_t)sh.n * sh.c * sh.hw, sample = (size_t)sh.c * sh.hw;
    std::vector<bf16> hx(elems), hdy(elems), hdx(sample);
    std::vector<float> hm((size_t)sh.n * G), hr((size_t)sh.n * G), hs(sh.c), hb(sh.c);
    CHECK(cudaMemcpy(hx.data(), x, elems * 2, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(hdy.data(), dy, elems * 2, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(hm.data(), mean, hm.size() * 4, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(hr.data(), rstd, hr.size() * 4, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(hs.data(), dscale, sh.c * 4, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(hb.data(), dbias, sh.c * 4, cudaMemcpyDeviceToHost));
    const int cg = sh.c / G;
    std::vector<double> rs(sh.c, 0.0), rb(sh.c, 0.0);
    double worst = 0.0;
    for (int n = 0; n < sh.n; n++) {
        const bool check_dx = n == 0 || n == sh.n - 1;
        if (check_dx)
            CHECK(cudaMemcpy(hdx.data(), dx + n * sample, sample * 2, cudaMemcpyDeviceToHost));
        for (int gi = 0; gi < G; gi++) {
            const double mu = hm[(size_t)n * G + gi], r = hr[(size_t)n * G + gi], m = (double)cg * sh.hw;
            double A = 0, B = 0;
            for (int px = 0; px < sh.hw; px++)
                for (int cc = 0; cc < cg; cc++) {
                    const int ch = gi * cg + cc;
                    const size_t e = n * sample + (size_t)px * sh.c + ch;
                    const double d = host_bf(hdy[e]), xc = host_bf(hx[e]) - mu;
                    A += w[ch] * d, B += w[ch] * d * xc;
                    rs[ch] += d * xc * r, rb[ch] += d;
                }
            if (!check_dx)
                continue;
            for (int px = 0; px < sh.hw; px++)
                for (int cc = 0; cc < cg; cc++) {
                    const int ch = gi * cg + cc;
                    const size_t e = (size_t)px * sh.c + ch;
                    const double d = host_bf(hdy[n * sample + e]), xc = host_bf(hx[n * sample + e]) - mu;
                    const double ref = r * w[ch] * d - r * A / m - xc * r * r * r * B / m;
                    worst = worse(worst, fabs(host_bf(hdx[e]) - ref) / (1.0 + fabs(ref)));
                }
        }
    }
    for (int ch = 0; ch < sh.c; ch++) {
        worst = worse(worst, fabs(hs[ch] - rs[ch]) / (1.0 + fabs(rs[ch])));
        worst = worse(worst, fabs(hb[ch] - rb[ch]) / (1.0 + fabs(rb[ch])));
    }
    return worst;
}

int main()
{
    const int G = 32;
    const Shape shapes[] = {{32, 512, 4096}, {128, 256, 1024}};
    std::vector<Setting> settings;
    for (int dir : {0, 1})
        for (int cw : {32, 64, 128, 256})
            for (int cl : {1, 2, 4, 8})
                for (int s : {2, 3})
                    for (int load : {LOAD_ROWS, LOAD_TMA})
                        settings.push_back({dir, cw, cl, s, load});
    Setting only = {-1, 0, 0, 0, 0};
    if (const char *e = getenv("GN_WS_ONLY"))
        if (sscanf(e, "%d,%d,%d,%d,%d", &only.dir, &only.cw, &only.cl, &only.stages, &only.load) != 5)
            only.dir = -1;
    printf("%-16s %4s %5s %3s %2s %5s %5s %8s %9s %8s %s\n", "shape", "dir", "cw", "CL", "S", "load", "rows",
           "clusters", "us", "GB/s", "check");
    int bad = 0;
    for (const Shape &sh : shapes) {
        const size_t elems = (size_t)sh.n * sh.c * sh.hw, bytes = elems * 2;
        const int sets_n = 3; /* 3 x 134 MB (or 67 MB) of x, and of dy: past twice the L2 */
        bf16 *x[sets_n], *dy[sets_n], *out;
        float *smean[sets_n], *srstd[sets_n];
        for (int i = 0; i < sets_n; i++) {
            CHECK(cudaMalloc(&x[i], bytes));
            CHECK(cudaMalloc(&dy[i], bytes));
            CHECK(cudaMalloc(&smean[i], sh.n * G * 4));
            CHECK(cudaMalloc(&srstd[i], sh.n * G * 4));
            fill<<<1024, 256>>>(x[i], elems, 17u + i, 0.5f, 4.0f);
            fill<<<1024, 256>>>(dy[i], elems, 91u + i, 0.0f, 4.0f);
            gn_stats<<<sh.n * G, 512>>>(x[i], smean[i], srstd[i], sh.c, sh.hw, G, 1e-5f);
        }
        CHECK(cudaGetLastError());
        CHECK(cudaMalloc(&out, bytes));
        std::vector<float> hw_, hb_;
        float *w, *b, *mean, *rstd, *dscale, *dbias;
        float2 *prec;
        gn_params(sh.c, hw_, hb_, &w, &b);
        CHECK(cudaMalloc(&mean, sh.n * G * 4));
        CHECK(cudaMalloc(&rstd, sh.n * G * 4));
        CHECK(cudaMalloc(&dscale, sh.c * 4));
        CHECK(cudaMalloc(&dbias, sh.c * 4));
        CHECK(cudaMalloc(&prec, (size_t)sh.n * 8 * sh.c * sizeof(float2)));
        for (const Setting &st : settings) {
            if (only.dir >= 0 && (st.dir != only.dir || st.cw != only.cw || st.cl != only.cl ||
                                  st.stages != only.stages || st.load != only.load))
                continue;
            const int cg = sh.c / G, U = st.cw / 8, T = st.dir + 1;
            if (st.cw > sh.c || sh.c % st.cw || st.cw % cg || st.cw / cg > MAX_GW || sh.hw % st.cl)
                continue;
            const int rows = sh.hw / st.cl;
            const uint32_t tile_bytes = (uint32_t)rows * st.cw * 2;
            const size_t smem = 1024 + layout(tile_bytes, st.stages, T, st.cl, U).total;
            if (smem > 227 * 1024 || ((size_t)rows * U) % CONSUMERS || tile_bytes % 1024)
                continue;
            if (st.load == LOAD_TMA && rows > 256 && rows % 256)
                continue;
            Launcher go = pick(st.cl, st.stages, st.load, T);
            int clusters = 0;
            if (!go || go(Params{}, CUtensorMap{}, CUtensorMap{}, smem, &clusters, true) != cudaSuccess ||
                clusters < 1) {
                cudaGetLastError();
                continue;
            }
            Params p = {};
            p.w = w, p.b = b, p.out = out, p.prec = prec;
            p.n = sh.n, p.c = sh.c, p.hw = sh.hw, p.g = G, p.cw = st.cw, p.rows = rows;
            p.segs = sh.n * (sh.c / st.cw), p.eps = 1e-5f, p.tile_bytes = tile_bytes;
            CUtensorMap mx[sets_n], mdy[sets_n];
            bool maps_ok = true;
            for (int i = 0; i < sets_n; i++) {
                maps_ok &= make_map(&mx[i], x[i], sh, st.cw, rows < 256 ? rows : 256);
                maps_ok &= make_map(&mdy[i], dy[i], sh, st.cw, rows < 256 ? rows : 256);
            }
            if (st.load == LOAD_TMA && !maps_ok) {
                printf("tensor map refused: cw %d rows %d\n", st.cw, rows);
                continue;
            }
            /* NaN everywhere the launches must write: an element no launch wrote fails the check */
            CHECK(cudaMemset(out, 0xff, bytes));
            CHECK(cudaMemset(mean, 0xff, sh.n * G * 4));
            CHECK(cudaMemset(rstd, 0xff, sh.n * G * 4));
            CHECK(cudaMemset(dscale, 0xff, sh.c * 4));
            CHECK(cudaMemset(dbias, 0xff, sh.c * 4));
            const float med = median_ms(
                50, 10,
                [&](int it) {
                    CHECK(go(p, mx[it % sets_n], mdy[it % sets_n], smem, &clusters, false));
                    if (st.dir)
                        gn_dparams<<<(sh.c + 255) / 256, 256>>>(prec, dscale, dbias, sh.n, st.cl, sh.c);
                },
                [&](int it) {
                    const int set = it % sets_n;
                    p.x = x[set], p.dy = dy[set];
                    p.mean = st.dir ? smean[set] : mean, p.rstd = st.dir ? srstd[set] : rstd;
                });
            const int set = 49 % sets_n;
            const double worst = st.dir ? bwd_error(sh, G, x[set], dy[set], smean[set], srstd[set], out, dscale,
                                                    dbias, hw_)
                                        : gn_fwd_error(sh.n, sh.c, sh.hw, G, x[set], out, mean, rstd, hw_, hb_);
            const bool ok = worst < 2e-2;
            bad += !ok;
            char name[32];
            snprintf(name, sizeof name, "%dx%dx%d", sh.n, sh.c, sh.hw);
            printf("%-16s %4s %5d %3d %2d %5s %5d %8d %9.1f %8.0f %s (%.1e)\n", name, st.dir ? "bwd" : "fwd", st.cw,
                   st.cl, st.stages, st.load == LOAD_TMA ? "tma" : "rows", rows, clusters, med * 1e3,
                   (2.0 + st.dir) * bytes / (med * 1e-3) / 1e9, ok ? "ok" : "FAIL", worst);
            fflush(stdout);
        }
        for (int i = 0; i < sets_n; i++)
            for (void *q : {(void *)x[i], (void *)dy[i], (void *)smean[i], (void *)srstd[i]})
                CHECK(cudaFree(q));
        for (void *q : {(void *)out, (void *)w, (void *)b, (void *)mean, (void *)rstd, (void *)dscale,
                        (void *)dbias, (void *)prec})
            CHECK(cudaFree(q));
    }
    return bad ? 1 : 0;
}
