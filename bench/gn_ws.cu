/*
 * gn_ws.cu - GroupNorm NHWC forward (bf16) on a persistent grid of clusters whose blocks each
 * give one warp to loading, as a stand-alone measurement.
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
 *     segment, rows = HW / CL: a tile of rows x cw bf16, dense in shared memory.
 *   - Warp 8 (the producer) fills a ring of S tiles with bulk copies that signal the
 *     stage's `full` mbarrier: one 1-D cp.async.bulk per pixel row (LOAD_ROWS), or 2-D TMA
 *     boxes of up to 256 rows from a tensor map (LOAD_TMA).  It refills a stage when its
 *     `empty` mbarrier says the eight consumer warps are done with it.
 *   - Warps 0-7 (the consumers) take each tile through two passes in shared memory: the
 *     block's per-group sum, then the sum of squares about the block's mean (exact two-pass
 *     variance); the (count, mean, M2) records go to every peer with st.async, which
 *     completes bytes on the peer's `xfull` mbarrier (two slots, alternating).  Each block
 *     merges the CL records of a group in rank order (Chan's formula), so every block holds
 *     the same bits; then it normalizes the tile from shared memory and stores y with
 *     16-byte streaming stores, and releases the stage.
 *   - Only the consumers wait for the exchange, so the producer's loads of the next tiles
 *     run through it.  A slot of the exchange is written again two segments later, which a
 *     peer can only reach after this block sent the record of the segment in between -
 *     after a consumer barrier that every reader of the slot has passed.  The reduction
 *     buffers alternate the same way: a thread still sending segment i's records from them
 *     holds every other thread before segment i + 2 can write them again.
 *
 * Thread layout of a consumer: unit u = t % U of the window (U = cw / 8 units of 16 bytes)
 * and rows r0 = t / U, r0 + 256 / U, ...; a warp reads 32 consecutive units of the tile
 * (conflict-free) and stores whole 16-byte units of consecutive rows.
 *
 *   nvcc -arch=sm_90a -O3 -o gn_ws bench/gn_ws.cu -lcuda && ./gn_ws
 *
 * Prints, per shape and setting, the median of 40 launches (after 10 warm-ups, three input
 * sets rotated) and GB/s counting x read and y written, after checking y, mean and inv_std
 * of samples 0 and N - 1 of the last launch against a double-precision host reference (the
 * outputs are NaN before a setting's first launch, so an element no launch wrote fails).
 * Exit status 1 when a check fails.  GN_WS_ONLY="cw,CL,S,load" runs one setting.
 */
#include <algorithm>
#include <cmath>
#include <cstring>
#include <cuda.h>
#include <vector>

#include "standalone.cuh"

constexpr int CONSUMERS = 256; /* warps 0-7 */
constexpr int THREADS = CONSUMERS + 32;
constexpr int MAX_GW = 32; /* groups in a window */
enum { LOAD_ROWS = 0, LOAD_TMA = 1 };

struct Params {
    const bf16 *x; /* [N][HW][C] */
    bf16 *y;
    const float *w, *b; /* [C] */
    float *mean, *rstd; /* [N][G] */
    int n, c, hw, g, cw, rows, segs;
    float eps;
    uint32_t tile_bytes;
};

/* ---- shared memory ------------------------------------------------------------------------ */
struct Smem {
    uint32_t tiles;          /* S tiles of tile_bytes, 1024-aligned */
    uint32_t full, empty;    /* S mbarriers each */
    uint32_t xfull;          /* 2 mbarriers */
    uint32_t xrec;           /* [2][CL][MAX_GW] float4 */
    float *red;              /* [2 segment parities][2 passes][8 warps][32] */
};

__host__ __device__ inline size_t smem_bytes(uint32_t tile_bytes, int stages, int cl)
{
    return 1024 + (size_t)stages * tile_bytes + (size_t)(2 * stages + 2) * 8 + (size_t)2 * cl * MAX_GW * 16 +
           4 * 8 * 32 * 4 + 64;
}

__device__ inline uint32_t s_addr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* ---- mbarriers, bulk copies, cluster ------------------------------------------------------- */
__device__ inline void mbar_init(uint32_t bar, uint32_t count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}

__device__ inline void mbar_arrive(uint32_t bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}

__device__ inline void mbar_arrive_expect(uint32_t bar, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}

/* Wait until the phase of the given parity has completed.  Acquire at CTA scope, also for the
 * exchange's barriers: it covers the bytes the peers' st.async landed in this block's shared
 * memory (as frost's split row-norm backward waits; a cluster-scope acquire would also
 * invalidate L1). */
__device__ inline void mbar_wait(uint32_t bar, uint32_t parity)
{
    uint32_t done;
    do {
        asm volatile("{\n\t.reg .pred p;\n\t"
                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                     "selp.u32 %0, 1, 0, p;\n\t}"
                     : "=r"(done)
                     : "r"(bar), "r"(parity)
                     : "memory");
    } while (!done);
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

__device__ inline uint32_t cluster_rank()
{
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
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

__device__ inline void cluster_sync_all()
{
    asm volatile("barrier.cluster.arrive.release;\n\tbarrier.cluster.wait.acquire;" ::: "memory");
}

__device__ inline void consumers_sync()
{
    asm volatile("bar.sync 1, %0;" ::"n"(CONSUMERS) : "memory");
}

/* ---- the kernel ---------------------------------------------------------------------------- */
template <int CL, int S, int LOAD>
__global__ void __launch_bounds__(THREADS, 2) gn_ws_fwd(const __grid_constant__ Params p,
                                                        const __grid_constant__ CUtensorMap map)
{
    extern __shared__ unsigned char raw[];
    unsigned char *base = (unsigned char *)(((uintptr_t)raw + 1023) & ~(uintptr_t)1023);
    Smem m;
    m.tiles = s_addr(base);
    m.full = m.tiles + S * p.tile_bytes;
    m.empty = m.full + 8 * S;
    m.xfull = m.empty + 8 * S;
    m.xrec = m.xfull + 16;
    m.red = (float *)(base + S * p.tile_bytes + 8 * (2 * S + 2) + 2 * CL * MAX_GW * 16);

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const uint32_t rank = cluster_rank();
    const int cluster = blockIdx.x / CL, clusters = gridDim.x / CL;
    const int wins = p.c / p.cw, U = p.cw / 8, cg = p.c / p.g, upg = cg / 8, gw = p.cw / cg;

    if (threadIdx.x == 0) {
        for (int s = 0; s < S; s++) {
            mbar_init(m.full + 8 * s, 1);
            mbar_init(m.empty + 8 * s, CONSUMERS / 32);
        }
        mbar_init(m.xfull, 1);
        mbar_init(m.xfull + 8, 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    cluster_sync_all(); /* the peers' barriers exist before any st.async reaches them */

    if (warp == CONSUMERS / 32) { /* ---- producer ---- */
        int i = 0;
        for (int seg = cluster; seg < p.segs; seg += clusters, i++) {
            const int s = i % S;
            if (i >= S)
                mbar_wait(m.empty + 8 * s, (uint32_t)(i / S - 1) & 1);
            const int n = seg / wins, c0 = (seg % wins) * p.cw;
            const uint32_t tile = m.tiles + s * p.tile_bytes, bar = m.full + 8 * s;
            if (lane == 0)
                mbar_arrive_expect(bar, p.tile_bytes);
            __syncwarp();
            const size_t row0 = (size_t)n * p.hw + (size_t)rank * p.rows;
            if (LOAD == LOAD_TMA) {
                const int box = p.rows < 256 ? p.rows : 256;
                for (int j = lane; j * box < p.rows; j += 32)
                    tma_box(tile + (uint32_t)j * box * p.cw * 2, &map, c0, (int)(row0 + (size_t)j * box), bar);
            } else {
                const bf16 *src = p.x + row0 * p.c + c0;
                for (int r = lane; r < p.rows; r += 32)
                    bulk_row(tile + (uint32_t)r * p.cw * 2, src + (size_t)r * p.c, p.cw * 2, bar);
            }
        }
    } else { /* ---- consumers ---- */
        const int t = threadIdx.x, u = t % U, r0 = t / U, per = CONSUMERS / U, my_g = u / upg;
        const float cnt_block = (float)p.rows * cg, cnt_all = cnt_block * CL;
        int i = 0;
        for (int seg = cluster; seg < p.segs; seg += clusters, i++) {
            const int s = i % S, xs = i & 1;
            const int n = seg / wins, c0 = (seg % wins) * p.cw;
            const bf16 *tile = (const bf16 *)(base + (size_t)s * p.tile_bytes);
            float *red1 = m.red + xs * 2 * 8 * 32, *red2 = red1 + 8 * 32;
            mbar_wait(m.full + 8 * s, (uint32_t)(i / S) & 1);

            /* pass 1: the block's sum per group */
            float v[8], acc = 0.0f;
            for (int r = r0; r < p.rows; r += per) {
                unpack8(*(const uint4 *)(tile + (size_t)r * p.cw + u * 8), v);
#pragma unroll
                for (int k = 0; k < 8; k++)
                    acc += v[k];
            }
            for (int off = U; off < 32; off *= 2)
                acc += __shfl_xor_sync(0xffffffffu, acc, off);
            if (lane < U)
                red1[warp * 32 + lane] = acc;
            consumers_sync();
            auto group_total = [&](const float *red, int g) {
                float sum = 0.0f;
                for (int w = 0; w < 8; w++)
                    for (int j = 0; j < upg; j++)
                        sum += red[w * 32 + g * upg + j];
                return sum;
            };
            const float mean_b = group_total(red1, my_g) / cnt_block;

            /* pass 2: the sum of squares about the block's mean */
            acc = 0.0f;
            for (int r = r0; r < p.rows; r += per) {
                unpack8(*(const uint4 *)(tile + (size_t)r * p.cw + u * 8), v);
#pragma unroll
                for (int k = 0; k < 8; k++) {
                    const float d = v[k] - mean_b;
                    acc = fmaf(d, d, acc);
                }
            }
            for (int off = U; off < 32; off *= 2)
                acc += __shfl_xor_sync(0xffffffffu, acc, off);
            if (lane < U)
                red2[warp * 32 + lane] = acc;
            consumers_sync();

            /* the records to every block of the cluster (this one included) */
            if (t == 0)
                mbar_arrive_expect(m.xfull + 8 * xs, (uint32_t)(CL * gw * 16));
            if (t < CL * gw) {
                const int to = t / gw, g = t % gw;
                const float4 rec = make_float4(cnt_block, group_total(red1, g) / cnt_block,
                                               fmaxf(group_total(red2, g), 0.0f), 0.0f);
                const uint32_t slot = m.xrec + (uint32_t)((xs * CL + rank) * MAX_GW + g) * 16;
                st_async_f4(map_to_rank(slot, to), rec, map_to_rank(m.xfull + 8 * xs, to));
            }
            mbar_wait(m.xfull + 8 * xs, (uint32_t)(i >> 1) & 1);

            /* the cluster's statistics of this thread's group, merged in rank order */
            const float4 *xr = (const float4 *)(base + S * p.tile_bytes + 8 * (2 * S + 2));
            Stat st = {0.0f, 0.0f, 0.0f};
#pragma unroll
            for (int k = 0; k < CL; k++) {
                const float4 q = xr[(xs * CL + k) * MAX_GW + my_g];
                st = merge(st, Stat{q.x, q.y, q.z});
            }
            const float rstd = 1.0f / sqrtf(st.m2 / cnt_all + p.eps);
            if (rank == 0 && t < U && u % upg == 0) {
                p.mean[(size_t)n * p.g + c0 / cg + my_g] = st.mean;
                p.rstd[(size_t)n * p.g + c0 / cg + my_g] = rstd;
            }

            /* y = x_hat w + b from the tile */
            float a[8], sh[8];
#pragma unroll
            for (int k = 0; k < 8; k++) {
                a[k] = __ldg(p.w + c0 + u * 8 + k) * rstd;
                sh[k] = __ldg(p.b + c0 + u * 8 + k) - st.mean * a[k];
            }
            bf16 *dst = p.y + ((size_t)n * p.hw + (size_t)rank * p.rows) * p.c + c0 + u * 8;
            for (int r = r0; r < p.rows; r += per) {
                unpack8(*(const uint4 *)(tile + (size_t)r * p.cw + u * 8), v);
#pragma unroll
                for (int k = 0; k < 8; k++)
                    v[k] = fmaf(v[k], a[k], sh[k]);
                stg_stream(dst + (size_t)r * p.c, pack8(v));
            }
            __syncwarp();
            if (lane == 0)
                mbar_arrive(m.empty + 8 * s);
        }
    }
    cluster_sync_all(); /* no block leaves while a peer may still write its shared memory */
}

/* ---- host ------------------------------------------------------------------------------------ */
struct Shape {
    int n, c, hw;
};

struct Setting {
    int cw, cl, stages, load;
};

template <int CL, int S, int LOAD>
static cudaError_t launch(const Params &p, const CUtensorMap &map, size_t smem, int *clusters, bool query)
{
    auto kern = gn_ws_fwd<CL, S, LOAD>;
    cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e != cudaSuccess)
        return e;
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = CL, attr[0].val.clusterDim.y = 1, attr[0].val.clusterDim.z = 1;
    cfg.blockDim = dim3(THREADS);
    cfg.dynamicSmemBytes = smem;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    if (query) {
        cfg.gridDim = dim3(CL * 64);
        return cudaOccupancyMaxActiveClusters(clusters, (void *)kern, &cfg);
    }
    cfg.gridDim = dim3(CL * *clusters);
    return cudaLaunchKernelEx(&cfg, kern, p, map);
}

typedef cudaError_t (*Launcher)(const Params &, const CUtensorMap &, size_t, int *, bool);

static Launcher pick(int cl, int s, int load)
{
#define GN_WS_CASE(CL_, S_)                                                                                         \
    if (cl == CL_ && s == S_)                                                                                       \
        return load == LOAD_TMA ? launch<CL_, S_, LOAD_TMA> : launch<CL_, S_, LOAD_ROWS>;
    GN_WS_CASE(1, 2) GN_WS_CASE(1, 3) GN_WS_CASE(2, 2) GN_WS_CASE(2, 3) GN_WS_CASE(4, 2) GN_WS_CASE(4, 3)
    GN_WS_CASE(8, 2) GN_WS_CASE(8, 3)
#undef GN_WS_CASE
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

int main()
{
    const int G = 32;
    const Shape shapes[] = {{32, 512, 4096}, {128, 256, 1024}};
    std::vector<Setting> settings;
    for (int cw : {32, 64, 128, 256})
        for (int cl : {1, 2, 4, 8})
            for (int s : {2, 3})
                for (int load : {LOAD_ROWS, LOAD_TMA})
                    settings.push_back({cw, cl, s, load});
    Setting only = {0, 0, 0, 0};
    if (const char *e = getenv("GN_WS_ONLY"))
        if (sscanf(e, "%d,%d,%d,%d", &only.cw, &only.cl, &only.stages, &only.load) != 4)
            only.cw = 0;
    printf("%-16s %5s %3s %2s %5s %5s %8s %9s %8s %s\n", "shape", "cw", "CL", "S", "load", "rows", "clusters", "us",
           "GB/s", "check");
    int bad = 0;
    for (const Shape &sh : shapes) {
        const size_t elems = (size_t)sh.n * sh.c * sh.hw, bytes = elems * 2;
        const int sets_n = 3; /* 3 x 134 MB (or 67 MB) of x: past twice the L2 */
        bf16 *x[sets_n], *y;
        for (int i = 0; i < sets_n; i++) {
            CHECK(cudaMalloc(&x[i], bytes));
            fill<<<1024, 256>>>(x[i], elems, 17u + i, 0.5f, 4.0f);
        }
        CHECK(cudaMalloc(&y, bytes));
        std::vector<float> hw_, hb_;
        float *w, *b, *mean, *rstd;
        gn_params(sh.c, hw_, hb_, &w, &b);
        CHECK(cudaMalloc(&mean, sh.n * G * 4));
        CHECK(cudaMalloc(&rstd, sh.n * G * 4));
        for (const Setting &st : settings) {
            if (only.cw && (st.cw != only.cw || st.cl != only.cl || st.stages != only.stages || st.load != only.load))
                continue;
            const int cg = sh.c / G, U = st.cw / 8;
            if (st.cw > sh.c || sh.c % st.cw || st.cw % cg || st.cw / cg > MAX_GW || sh.hw % st.cl)
                continue;
            const int rows = sh.hw / st.cl;
            const uint32_t tile_bytes = (uint32_t)rows * st.cw * 2;
            const size_t smem = smem_bytes(tile_bytes, st.stages, st.cl);
            if (smem > 227 * 1024 || ((size_t)rows * U) % CONSUMERS || tile_bytes % 1024)
                continue;
            if (st.load == LOAD_TMA && rows > 256 && rows % 256)
                continue;
            Launcher go = pick(st.cl, st.stages, st.load);
            int clusters = 0;
            if (!go || go(Params{}, CUtensorMap{}, smem, &clusters, true) != cudaSuccess || clusters < 1) {
                cudaGetLastError();
                continue;
            }
            Params p = {};
            p.w = w, p.b = b, p.mean = mean, p.rstd = rstd, p.y = y;
            p.n = sh.n, p.c = sh.c, p.hw = sh.hw, p.g = G, p.cw = st.cw, p.rows = rows;
            p.segs = sh.n * (sh.c / st.cw), p.eps = 1e-5f, p.tile_bytes = tile_bytes;
            CUtensorMap maps[sets_n];
            bool maps_ok = true;
            for (int i = 0; i < sets_n; i++)
                maps_ok &= make_map(&maps[i], x[i], sh, st.cw, rows < 256 ? rows : 256);
            if (st.load == LOAD_TMA && !maps_ok) {
                printf("tensor map refused: cw %d rows %d\n", st.cw, rows);
                continue;
            }
            /* NaN everywhere the launches must write: an unwritten element fails the check */
            CHECK(cudaMemset(y, 0xff, bytes));
            CHECK(cudaMemset(mean, 0xff, sh.n * G * 4));
            CHECK(cudaMemset(rstd, 0xff, sh.n * G * 4));
            const float med = median_ms(
                50, 10, [&](int it) { CHECK(go(p, maps[it % sets_n], smem, &clusters, false)); },
                [&](int it) { p.x = x[it % sets_n]; });
            const double worst = gn_fwd_error(sh.n, sh.c, sh.hw, G, x[49 % sets_n], y, mean, rstd, hw_, hb_);
            const bool ok = worst < 2e-2;
            bad += !ok;
            char name[32];
            snprintf(name, sizeof name, "%dx%dx%d", sh.n, sh.c, sh.hw);
            printf("%-16s %5d %3d %2d %5s %5d %8d %9.1f %8.0f %s (%.1e)\n", name, st.cw, st.cl, st.stages,
                   st.load == LOAD_TMA ? "tma" : "rows", rows, clusters, med * 1e3, 2.0 * bytes / (med * 1e-3) / 1e9,
                   ok ? "ok" : "FAIL", worst);
            fflush(stdout);
        }
        for (int i = 0; i < sets_n; i++)
            CHECK(cudaFree(x[i]));
        for (void *q : {(void *)y, (void *)w, (void *)b, (void *)mean, (void *)rstd})
            CHECK(cudaFree(q));
    }
    return bad ? 1 : 0;
}
