/*
 * gn_l2.cu - GroupNorm NHWC (bf16) in one launch that reads each tile twice: once from HBM
 * for the statistics and once more from L2 for the output, with no tile held in shared
 * memory while a sample's statistics are gathered.  A stand-alone measurement.
 *
 * The cluster path (src/ops/norm/chan_norm_cluster.cu) holds a segment in a cluster's shared
 * memory, which bounds the NHWC window at 64 channels (128-byte runs) and leaves block slots
 * empty (clusters of 8).  bench/gn_span.cu held the tile in shared memory across a global
 * exchange and lost to the wait.  Here a persistent grid draws tiles from a ticket counter;
 * a tile is `rows` whole pixels (all C channels: one contiguous run).  For each ticket t a
 * block
 *   1. reads tile t from HBM (L2 evict-last), stores the tile's per-group (mean, M2) record
 *      and arrives at the sample's counter, without waiting for anything;
 *   2. queues t, and writes the output of each queued tile whose sample has had all its
 *      tickets drawn `lag` tickets ago: it waits for the sample's counter, merges the
 *      sample's records in tile order (the same bits in every block), reads the tile again,
 *      now from L2 (evict-first), and stores y (streaming).
 * Deadlock-free on any grid: a block waits only for samples whose tickets are all drawn, and
 * a drawn ticket's statistics never wait.  What is kept in L2 is the tiles between their two
 * reads: about (grid + lag + tiles a sample) tiles.
 *
 * The forward only: it ran at 0.79-0.86x of the cluster path (docs/PERF.md, 2026-12-05).
 *
 *   nvcc -arch=sm_90a -O3 -o gn_l2 bench/gn_l2.cu && ./gn_l2
 *
 * Prints, per shape and setting, the median of 40 launches (after 10 warm-ups, three buffer
 * sets rotated; the counters' memset inside the timed span) and GB/s counting x + y, after
 * checking y, mean and rstd of samples 0 and N - 1 against a double-precision host reference.
 */
#include <algorithm>
#include <cmath>
#include <vector>

#include "standalone.cuh"

constexpr int THREADS = 256;
constexpr int QN = 128; /* queued tickets a block may hold; must exceed the tiles of a sample */

struct Params {
    const bf16 *x;
    bf16 *out;
    const float *w, *b;
    float *mean, *rstd; /* [N][G] */
    float2 *rec;        /* [tiles][G]: a tile's (mean, M2) of each group */
    unsigned *ctr;      /* [0]: tickets, [1 + n]: arrivals at sample n */
    int n, c, hw, g, rows, k, tiles, lag;
    float eps;
};

/* A thread's 16-byte unit u of a pixel's C channels and its rows r0, r0 + per, ...; the
 * units of a warp are consecutive, so a warp reads 512 contiguous bytes a row. */
struct Map {
    int u, r0, per, cg, upg, j; /* j: the thread's group, upg: units a group */
};

__device__ __forceinline__ Map map_make(const Params &p)
{
    Map m;
    const int U = p.c / 8;
    m.u = threadIdx.x % U;
    m.r0 = threadIdx.x / U;
    m.per = THREADS / U;
    m.cg = p.c / p.g;
    m.upg = m.cg / 8;
    m.j = m.u / m.upg;
    return m;
}

__device__ __forceinline__ size_t tile_elem(const Params &p, const Map &m, int t)
{
    const int n = t / p.k, kt = t % p.k;
    return ((size_t)n * p.hw + (size_t)kt * p.rows + m.r0) * p.c + m.u * 8;
}

/* The block's next ticket (the barrier in front keeps the previous one's readers safe). */
__device__ __forceinline__ int draw(const Params &p, int *slot)
{
    __syncthreads();
    if (threadIdx.x == 0)
        *slot = (int)atomicAdd(p.ctr, 1u);
    __syncthreads();
    return *slot;
}

/* Records of tile t are stored: publish them and arrive at the sample's counter. */
__device__ __forceinline__ void arrive(const Params &p, int t)
{
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0)
        atomicAdd(p.ctr + 1 + t / p.k, 1u);
}

__device__ __forceinline__ void wait_sample(const Params &p, int n)
{
    if (threadIdx.x == 0)
        while (ld_acquire(p.ctr + 1 + n) < (unsigned)p.k)
            __nanosleep(64);
    __syncthreads();
}

/* ---------------------------------------------------------------- forward */

template <int BATCH>
__device__ void fwd_stats(const Params &p, const Map &m, int t, Stat *part)
{
    const uint64_t keep = l2_policy(true);
    const bf16 *src = p.x + tile_elem(p, m, t);
    const size_t step = (size_t)m.per * p.c;
    const int R = p.rows / m.per;
    float shift = 0.0f, s = 0.0f, ss = 0.0f;
    for (int i0 = 0; i0 < R; i0 += BATCH) {
        uint4 q[BATCH];
#pragma unroll
        for (int b = 0; b < BATCH; b++)
            q[b] = ldg_hint(src + (size_t)(i0 + b) * step, keep);
        if (i0 == 0)
            shift = __uint_as_float(q[0].x << 16);
#pragma unroll
        for (int b = 0; b < BATCH; b++) {
            float v[8];
            unpack8(q[b], v);
#pragma unroll
            for (int e = 0; e < 8; e++) {
                const float d = v[e] - shift;
                s += d;
                ss = fmaf(d, d, ss);
            }
        }
    }
    const float cnt = (float)(R * 8);
    Stat st = {cnt, shift + s / cnt, fmaxf(fmaf(-s, s / cnt, ss), 0.0f)};
    for (int off = 1; off < m.upg; off *= 2)
        st = shfl_merge(st, off);
    if (m.u % m.upg == 0)
        part[m.r0 * p.g + m.j] = st;
    __syncthreads();
    if ((int)threadIdx.x < p.g) {
        Stat a = part[threadIdx.x];
        for (int r = 1; r < m.per; r++)
            a = merge(a, part[r * p.g + threadIdx.x]);
        p.rec[(size_t)t * p.g + threadIdx.x] = make_float2(a.mean, a.m2);
    }
    arrive(p, t);
}

template <int BATCH>
__device__ void fwd_apply(const Params &p, const Map &m, int t, const float w[8], const float b[8], float2 *fin)
{
    const int n = t / p.k, kt = t % p.k;
    wait_sample(p, n);
    /* merge the sample's k records of each group: L lanes a group, lane l takes tiles l, l + L, ... */
    const int L = THREADS / p.g; /* a power of two, at most 32 */
    const float n0 = (float)(p.rows * m.cg);
    {
        const int j = threadIdx.x / L, l = threadIdx.x % L;
        Stat st = {0.0f, 0.0f, 0.0f};
        const float2 *r = p.rec + (size_t)n * p.k * p.g + j;
        for (int i0 = l; i0 < p.k; i0 += 8 * L) {
            float2 v[8];
#pragma unroll
            for (int e = 0; e < 8; e++)
                v[e] = i0 + e * L < p.k ? __ldcg(r + (size_t)(i0 + e * L) * p.g) : make_float2(0.0f, 0.0f);
#pragma unroll
            for (int e = 0; e < 8; e++)
                if (i0 + e * L < p.k)
                    st = merge(st, Stat{n0, v[e].x, v[e].y});
        }
        for (int off = L / 2; off > 0; off /= 2)
            st = shfl_merge(st, off);
        if (l == 0) {
            const float rstd = rsqrtf(st.m2 / st.n + p.eps);
            fin[j] = make_float2(st.mean, rstd);
            if (kt == 0) {
                p.mean[n * p.g + j] = st.mean;
                p.rstd[n * p.g + j] = rstd;
            }
        }
    }
    __syncthreads();
    const float2 f = fin[m.j];
    float ca[8], cb[8];
#pragma unroll
    for (int e = 0; e < 8; e++) {
        ca[e] = f.y * w[e];
        cb[e] = fmaf(-f.x, ca[e], b[e]);
    }
    const uint64_t drop = l2_policy(false);
    const size_t base = tile_elem(p, m, t), step = (size_t)m.per * p.c;
    const int R = p.rows / m.per;
    for (int i0 = 0; i0 < R; i0 += BATCH) {
        uint4 q[BATCH];
#pragma unroll
        for (int e = 0; e < BATCH; e++)
            q[e] = ldg_hint(p.x + base + (size_t)(i0 + e) * step, drop);
#pragma unroll
        for (int e = 0; e < BATCH; e++) {
            float v[8];
            unpack8(q[e], v);
#pragma unroll
            for (int h = 0; h < 8; h++)
                v[h] = fmaf(v[h], ca[h], cb[h]);
            stg_stream(p.out + base + (size_t)(i0 + e) * step, pack8(v));
        }
    }
}

/* The block's loop: draw, take the statistics, queue; write the output of the queued tiles
 * whose sample is complete enough (or when the queue is full); at the end, all that is left. */
#define TICKET_LOOP(STATS, APPLY)                                                                                 \
    __shared__ int slot, queue[QN];                                                                               \
    int head = 0, tail = 0;                                                                                       \
    for (;;) {                                                                                                    \
        const int t = draw(p, &slot);                                                                             \
        if (t >= p.tiles)                                                                                         \
            break;                                                                                                \
        STATS;                                                                                                    \
        if (threadIdx.x == 0)                                                                                     \
            queue[tail % QN] = t;                                                                                 \
        tail++;                                                                                                   \
        __syncthreads();                                                                                          \
        while (head < tail) {                                                                                     \
            const int f = queue[head % QN];                                                                       \
            if (tail - head < QN && (f / p.k) * p.k + p.k - 1 + p.lag > t)                                        \
                break;                                                                                            \
            APPLY(f);                                                                                             \
            head++;                                                                                               \
        }                                                                                                         \
    }                                                                                                             \
    while (head < tail) {                                                                                         \
        APPLY(queue[head % QN]);                                                                                  \
        head++;                                                                                                   \
    }

template <int MINB, int BATCH>
__global__ void __launch_bounds__(THREADS, MINB) l2_fwd(Params p)
{
    __shared__ Stat part[THREADS];
    __shared__ float2 fin[64];
    const Map m = map_make(p);
    float w[8], b[8];
#pragma unroll
    for (int e = 0; e < 8; e++)
        w[e] = p.w[m.u * 8 + e], b[e] = p.b[m.u * 8 + e];
#define FWD_APPLY(f)                                                                                              \
    do {                                                                                                          \
        __syncthreads();                                                                                          \
        fwd_apply<BATCH>(p, m, f, w, b, fin);                                                                     \
    } while (0)
    TICKET_LOOP(fwd_stats<BATCH>(p, m, t, part), FWD_APPLY)
#undef FWD_APPLY
}

/* ---------------------------------------------------------------- host */

struct Shape {
    int n, c, hw;
};

typedef void (*Kern)(Params);

int main()
{
    const int G = 32;
    const Shape shapes[] = {{32, 512, 4096}, {128, 256, 1024}};
    int sms = 0;
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    printf("%-14s %5s %5s %4s %5s %5s %5s %9s %8s %s\n", "shape", "rows", "tiles", "minb", "batch", "grid", "lag", "us",
           "GB/s", "check");
    int bad = 0;
    for (const Shape &sh : shapes) {
        const size_t elems = (size_t)sh.n * sh.c * sh.hw, bytes = elems * 2;
        const int sets_n = 3;
        bf16 *x[sets_n], *y;
        for (int i = 0; i < sets_n; i++) {
            CHECK(cudaMalloc(&x[i], bytes));
            fill<<<1024, 256>>>(x[i], elems, 17u + i, 0.5f, 4.0f);
        }
        CHECK(cudaMalloc(&y, bytes));
        float *w, *b, *mean, *rstd;
        float2 *rec;
        unsigned *ctr;
        std::vector<float> hw_, hb_;
        gn_params(sh.c, hw_, hb_, &w, &b);
        CHECK(cudaMalloc(&mean, sh.n * G * 4));
        CHECK(cudaMalloc(&rstd, sh.n * G * 4));
        CHECK(cudaMalloc(&rec, (size_t)8 << 20));
        CHECK(cudaMalloc(&ctr, 1 << 20));
        for (int kb : {32, 64, 128})
            for (int minb : {2, 3, 4})
                for (int batch : {4, 8})
                    for (int lagf : {0, 1, 2}) { /* lag: 0, grid / 2, grid tickets */
                        const int rows = kb * 1024 / (sh.c * 2), k = sh.hw / rows, per = THREADS / (sh.c / 8);
                        if (sh.hw % rows || rows % (per * batch) || k >= QN || (minb == 4 && batch != 4))
                            continue;
                        Kern kern = minb == 4   ? l2_fwd<4, 4>
                                    : minb == 3 ? (batch == 4 ? l2_fwd<3, 4> : l2_fwd<3, 8>)
                                                : (batch == 4 ? l2_fwd<2, 4> : l2_fwd<2, 8>);
                        int occ = 0;
                        CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kern, THREADS, 0));
                        const int grid = occ * sms;
                        Params p = {};
                        p.w = w, p.b = b, p.mean = mean, p.rstd = rstd, p.rec = rec, p.ctr = ctr, p.out = y;
                        p.n = sh.n, p.c = sh.c, p.hw = sh.hw, p.g = G, p.rows = rows, p.k = k, p.tiles = sh.n * k;
                        p.lag = lagf * grid / 2, p.eps = 1e-5f;
                        const float med = median_ms(
                            50, 10,
                            [&](int) {
                                CHECK(cudaMemsetAsync(ctr, 0, (1 + sh.n) * 4));
                                kern<<<grid, THREADS>>>(p);
                            },
                            [&](int it) { p.x = x[it % sets_n]; });
                        /* check samples 0 and n - 1 of the last launch's set */
                        const double worst =
                            gn_fwd_error(sh.n, sh.c, sh.hw, G, x[49 % sets_n], y, mean, rstd, hw_, hb_);
                        const bool ok = worst < 2e-2;
                        bad += !ok;
                        char name[32];
                        snprintf(name, sizeof name, "%dx%dx%d", sh.n, sh.c, sh.hw);
                        printf("%-14s %5d %5d %4d %5d %5d %5d %9.1f %8.0f %s (%.1e)\n", name, rows, k, minb, batch, grid,
                               p.lag, med * 1e3, 2.0 * bytes / (med * 1e-3) / 1e9, ok ? "ok" : "FAIL", worst);
                        fflush(stdout);
                    }
        for (int i = 0; i < sets_n; i++)
            CHECK(cudaFree(x[i]));
        for (void *q : {(void *)y, (void *)w, (void *)b, (void *)mean, (void *)rstd, (void *)rec, (void *)ctr})
            CHECK(cudaFree(q));
    }
    return bad ? 1 : 0;
}
