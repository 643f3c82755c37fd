/*
 * bn_sched.cu - how BatchNorm NHWC's two passes are scheduled over the device, priced apart
 * from everything else: a statistics pass (read x [P][C] bf16, per-channel shifted sums of
 * each chunk of rows into its own record slot) and an output pass (read x, write
 * y = x a[c] + b[c]), each under three schedules of the same rows:
 *
 *   static  - frost's stream path today: a grid of B blocks an SM, block i owning one
 *             contiguous 1 / grid of the rows (one wave, no balancing);
 *   chunks  - one block per chunk of `rows` rows, the hardware hands chunks to free slots;
 *   ticket  - a grid of B blocks an SM drawing chunks from an atomic counter.
 *
 * Every chunk's records have a fixed slot, so any schedule gives the same bits.  If a
 * balanced schedule reads at a clearly higher rate than the static one, the static grid's
 * slowest block (not the loads) is what holds the stream path's launches below DRAM speed.
 *
 *   nvcc -arch=sm_90a -O3 -o bn_sched bench/bn_sched.cu && ./bn_sched
 *
 * Prints the median of 40 launches (after 10 warm-ups, three input sets rotated) per pass,
 * schedule and chunk size: us and GB/s (statistics: x; output: x + y), after checking the
 * statistics pass's channel sums (all chunks added on the host in double) and the output.
 */
#include <algorithm>
#include <cmath>
#include <vector>

#include "standalone.cuh"

constexpr int THREADS = 256, BATCH = 8;

struct Params {
    const bf16 *x;
    bf16 *y;
    const float *a, *b;
    float2 *rec; /* [chunks][C]: (sum, sum of squares) about the chunk's first row */
    unsigned *ctr;
    int64_t rows_all;
    int c, rows, chunks, mode; /* mode 0 static, 1 chunks, 2 ticket */
};

/* The block's next range of rows [r0, r1) and its record slot; false when none is left. */
__device__ __forceinline__ bool next_range(const Params &p, int &it, int64_t &r0, int64_t &r1, int &slot)
{
    __shared__ int ticket;
    if (p.mode == 0) {
        if (it++)
            return false;
        r0 = p.rows_all * blockIdx.x / gridDim.x;
        r1 = p.rows_all * (blockIdx.x + 1) / gridDim.x;
        slot = blockIdx.x;
        return true;
    }
    if (p.mode == 1) {
        if (it++)
            return false;
        slot = blockIdx.x;
    } else {
        __syncthreads();
        if (threadIdx.x == 0)
            ticket = (int)atomicAdd(p.ctr, 1u);
        __syncthreads();
        slot = ticket;
        if (slot >= p.chunks)
            return false;
    }
    r0 = (int64_t)slot * p.rows;
    r1 = min(r0 + p.rows, p.rows_all);
    return true;
}

/* The thread's rows r0 + lane_r, + per, ... below r1 in batches of BATCH loads in flight:
 * f(row, its eight values as floats) for each, in row order. */
template <class F>
__device__ __forceinline__ void each_row(const Params &p, int64_t r0, int64_t r1, int lane_r, int per, int u, F f)
{
    for (int64_t r = r0 + lane_r; r < r1; r += (int64_t)BATCH * per) {
        uint4 v[BATCH];
#pragma unroll
        for (int i = 0; i < BATCH; i++)
            v[i] = r + i * per < r1 ? ldg_stream(p.x + (r + i * per) * p.c + u * 8) : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int i = 0; i < BATCH; i++) {
            if (r + i * per >= r1)
                break;
            float x[8];
            unpack8(v[i], x);
            f(r + i * per, x);
        }
    }
}

template <int MINB>
__global__ void __launch_bounds__(THREADS, MINB) stats_pass(Params p)
{
    __shared__ float2 part[THREADS * 8];
    const int U = p.c / 8, per = THREADS / U, u = threadIdx.x % U, lane_r = threadIdx.x / U;
    int it = 0, slot;
    int64_t r0, r1;
    while (next_range(p, it, r0, r1, slot)) {
        float sh[8], s[8], q[8];
        {
            float v[8];
            unpack8(ldg_stream(p.x + r0 * p.c + u * 8), v);
#pragma unroll
            for (int e = 0; e < 8; e++)
                sh[e] = v[e], s[e] = q[e] = 0.0f;
        }
        each_row(p, r0, r1, lane_r, per, u, [&](int64_t, const float *f) {
#pragma unroll
            for (int e = 0; e < 8; e++) {
                const float d = f[e] - sh[e];
                s[e] += d;
                q[e] = fmaf(d, d, q[e]);
            }
        });
#pragma unroll
        for (int e = 0; e < 8; e++)
            part[lane_r * p.c + u * 8 + e] = make_float2(s[e], q[e]);
        __syncthreads();
        for (int c = threadIdx.x; c < p.c; c += THREADS) {
            float2 t = part[c];
            for (int l = 1; l < per; l++)
                t.x += part[l * p.c + c].x, t.y += part[l * p.c + c].y;
            p.rec[(size_t)slot * p.c + c] = t;
        }
        __syncthreads();
    }
}

template <int MINB>
__global__ void __launch_bounds__(THREADS, MINB) apply_pass(Params p)
{
    const int U = p.c / 8, per = THREADS / U, u = threadIdx.x % U, lane_r = threadIdx.x / U;
    float a[8], b[8];
#pragma unroll
    for (int e = 0; e < 8; e++)
        a[e] = p.a[u * 8 + e], b[e] = p.b[u * 8 + e];
    int it = 0, slot;
    int64_t r0, r1;
    while (next_range(p, it, r0, r1, slot)) {
        each_row(p, r0, r1, lane_r, per, u, [&](int64_t r, const float *x) {
            float f[8];
#pragma unroll
            for (int e = 0; e < 8; e++)
                f[e] = fmaf(x[e], a[e], b[e]);
            *(uint4 *)(p.y + r * p.c + u * 8) = pack8(f);
        });
    }
}

typedef void (*Kern)(Params);

int main()
{
    const int64_t rows_all = 32 * 4096; /* 32x512x64x64 and 128x256x32x32 both have 131072 pixels */
    const int cs[] = {512, 256};
    int sms = 0;
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    printf("%-5s %-6s %-7s %5s %5s %6s %9s %8s %s\n", "C", "pass", "sched", "rows", "minb", "grid", "us", "GB/s", "check");
    int bad = 0;
    for (int c : cs) {
        const size_t elems = (size_t)rows_all * c, bytes = elems * 2;
        const int sets = 3;
        bf16 *x[sets], *y;
        for (int i = 0; i < sets; i++) {
            CHECK(cudaMalloc(&x[i], bytes));
            fill<<<1024, 256>>>(x[i], elems, 11u + i, 0.5f, 4.0f);
        }
        CHECK(cudaMalloc(&y, bytes));
        float *a, *b;
        float2 *rec;
        unsigned *ctr;
        std::vector<float> ha(c), hb(c);
        for (int i = 0; i < c; i++)
            ha[i] = 0.7f + 0.001f * i, hb[i] = 0.01f * (i % 5);
        CHECK(cudaMalloc(&a, c * 4));
        CHECK(cudaMalloc(&b, c * 4));
        CHECK(cudaMemcpy(a, ha.data(), c * 4, cudaMemcpyHostToDevice));
        CHECK(cudaMemcpy(b, hb.data(), c * 4, cudaMemcpyHostToDevice));
        CHECK(cudaMalloc(&rec, (size_t)8192 * c * 8));
        CHECK(cudaMalloc(&ctr, 64));
        /* host truth for set (last iteration) */
        for (int pass = 0; pass < 2; pass++)
            for (int mode = 0; mode < 3; mode++)
                for (int rows : {64, 128, 256, 512})
                    for (int minb : {2, 3}) {
                        if (mode == 0 && rows != 64)
                            continue;
                        Kern k = pass ? (minb == 2 ? apply_pass<2> : apply_pass<3>)
                                      : (minb == 2 ? stats_pass<2> : stats_pass<3>);
                        const int chunks = (int)((rows_all + rows - 1) / rows);
                        const int grid = mode == 1 ? chunks : minb * sms;
                        Params p = {nullptr, y, a, b, rec, ctr, rows_all, c, rows, chunks, mode};
                        int last = 0;
                        const float med = median_ms(
                            50, 10,
                            [&](int) {
                                if (mode == 2)
                                    CHECK(cudaMemsetAsync(ctr, 0, 4));
                                k<<<grid, THREADS>>>(p);
                            },
                            [&](int itn) {
                                last = itn % sets;
                                p.x = x[last];
                            });
                        /* check: channel sums of the statistics pass (shifted sums plus the
                         * shift times the count, per slot), or 1 row in 97 of the output */
                        std::vector<bf16> hx(elems);
                        CHECK(cudaMemcpy(hx.data(), x[last], bytes, cudaMemcpyDeviceToHost));
                        double worst = 0.0;
                        if (pass == 0) {
                            const int slots = mode == 0 ? grid : chunks;
                            std::vector<float2> hr((size_t)slots * c);
                            CHECK(cudaMemcpy(hr.data(), rec, hr.size() * 8, cudaMemcpyDeviceToHost));
                            for (int ch = 0; ch < c; ch += 7) {
                                double truth = 0.0, got = 0.0;
                                for (int64_t r = 0; r < rows_all; r++)
                                    truth += __bfloat162float(hx[r * c + ch]);
                                for (int sl = 0; sl < slots; sl++) {
                                    const int64_t r0 = mode == 0 ? rows_all * sl / grid : (int64_t)sl * rows;
                                    const int64_t r1 = mode == 0 ? rows_all * (sl + 1) / grid
                                                                 : std::min<int64_t>(r0 + rows, rows_all);
                                    got += hr[(size_t)sl * c + ch].x + (double)(r1 - r0) * __bfloat162float(hx[r0 * c + ch]);
                                }
                                worst = std::max(worst, fabs(got - truth) / (1.0 + sqrt((double)rows_all)));
                            }
                        } else {
                            std::vector<bf16> hy(elems);
                            CHECK(cudaMemcpy(hy.data(), y, bytes, cudaMemcpyDeviceToHost));
                            for (int64_t r = 0; r < rows_all; r += 97)
                                for (int ch = 0; ch < c; ch++) {
                                    const double ref = __bfloat162float(hx[r * c + ch]) * ha[ch] + hb[ch];
                                    worst = std::max(worst, fabs(__bfloat162float(hy[r * c + ch]) - ref) / (1.0 + fabs(ref)));
                                }
                        }
                        const bool ok = worst < 1e-2;
                        bad += !ok;
                        static const char *const names[3] = {"static", "chunks", "ticket"};
                        printf("%-5d %-6s %-7s %5d %5d %6d %9.1f %8.0f %s (%.1e)\n", c, pass ? "output" : "stats",
                               names[mode], mode == 0 ? (int)(rows_all / grid) : rows, minb, grid, med * 1e3,
                               (pass ? 2.0 : 1.0) * bytes / (med * 1e-3) / 1e9, ok ? "ok" : "FAIL", worst);
                        fflush(stdout);
                    }
        for (int i = 0; i < sets; i++)
            CHECK(cudaFree(x[i]));
        for (void *q : {(void *)y, (void *)a, (void *)b, (void *)rec, (void *)ctr})
            CHECK(cudaFree(q));
    }
    return bad ? 1 : 0;
}
