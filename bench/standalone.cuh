/*
 * standalone.cuh - what the stand-alone CUDA benchmarks of bench/ (gn_span.cu, gn_l2.cu,
 * row_warp.cu, bn_sched.cu, tile_pattern.cu, gn_ws.cu) share: the error check, the timing
 * loop, bf16 units of eight elements to and from floats, the GroupNorm benchmarks' parameters
 * and forward check, the global loads and stores with cache hints, the
 * acquire load of an exchange counter, Welford-style (count, mean, M2) merges, and the
 * hashed input fill.  Each benchmark still compiles alone:
 *
 *   nvcc -arch=sm_90a -O3 -o NAME bench/NAME.cu       (gn_ws.cu: add -lcuda, for its tensor maps)
 */
#ifndef FROST_BENCH_STANDALONE_CUH
#define FROST_BENCH_STANDALONE_CUH

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <vector>

#define CHECK(x)                                                                                                  \
    do {                                                                                                          \
        cudaError_t e_ = (x);                                                                                     \
        if (e_ != cudaSuccess) {                                                                                  \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));                           \
            exit(1);                                                                                              \
        }                                                                                                         \
    } while (0)

typedef __nv_bfloat16 bf16;

/* Eight bf16 of a 16-byte unit as floats, and back (round to nearest). */
__device__ __forceinline__ void unpack8(uint4 q, float v[8])
{
    const uint32_t w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        v[2 * i] = __uint_as_float(w[i] << 16);
        v[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
}

__device__ __forceinline__ uint4 pack8(const float v[8])
{
    uint32_t w[4];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        __nv_bfloat162 h = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
        w[i] = *(uint32_t *)&h;
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
}

/* 16 bytes read once: past L1. */
__device__ __forceinline__ uint4 ldg_stream(const void *g)
{
    uint4 r;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(g));
    return r;
}

/* L2 policies: keep (evict-last) a first read that a second will want, else evict-first. */
__device__ __forceinline__ uint64_t l2_policy(bool keep)
{
    uint64_t pol;
    if (keep)
        asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol));
    else
        asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
    return pol;
}

/* 16 bytes with the L2 policy pol. */
__device__ __forceinline__ uint4 ldg_hint(const void *g, uint64_t pol)
{
    uint4 r;
    asm volatile("ld.global.nc.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(g), "l"(pol));
    return r;
}

/* 16 bytes written once (streaming). */
__device__ __forceinline__ void stg_stream(void *g, uint4 v)
{
    asm volatile("st.global.cs.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(g), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
                 : "memory");
}

/* A counter that other blocks release into. */
__device__ __forceinline__ unsigned ld_acquire(const unsigned *p)
{
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

/* (count, mean, M2) of a set of values, merged with Chan's formula (an empty side leaves the
 * other unchanged). */
struct Stat {
    float n, mean, m2;
};

__device__ __forceinline__ Stat merge(Stat a, Stat b)
{
    const float n = a.n + b.n;
    if (n == 0.0f)
        return a;
    const float d = b.mean - a.mean, f = b.n / n;
    Stat r;
    r.n = n;
    r.mean = fmaf(d, f, a.mean);
    r.m2 = a.m2 + b.m2 + d * d * a.n * f;
    return r;
}

/* This lane's Stat merged with the one of lane ^ off. */
__device__ __forceinline__ Stat shfl_merge(Stat s, int off)
{
    Stat o;
    o.n = __shfl_xor_sync(0xffffffffu, s.n, off);
    o.mean = __shfl_xor_sync(0xffffffffu, s.mean, off);
    o.m2 = __shfl_xor_sync(0xffffffffu, s.m2, off);
    return merge(s, o);
}

/* p[i] = offset + (u - 0.5) scale, u uniform in [0, 1) from a hash of i and seed. */
__global__ void fill(bf16 *p, size_t n, uint32_t seed, float offset, float scale)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 2654435761u ^ seed;
        h ^= h >> 15;
        h *= 2246822519u;
        h ^= h >> 13;
        p[i] = __float2bfloat16(offset + ((float)(h >> 8) / 16777216.0f - 0.5f) * scale);
    }
}

/* The median, in ms, of run(it)'s times for it = warm .. total - 1: each run(it) between two
 * events, prep(it) before the first of them (untimed), the first `warm` runs not counted. */
template <class Run, class Prep>
static float median_ms(int total, int warm, Run run, Prep prep)
{
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    std::vector<float> t;
    for (int it = 0; it < total; it++) {
        prep(it);
        CHECK(cudaEventRecord(e0));
        run(it);
        CHECK(cudaEventRecord(e1));
        CHECK(cudaEventSynchronize(e1));
        float ms;
        CHECK(cudaEventElapsedTime(&ms, e0, e1));
        if (it >= warm)
            t.push_back(ms);
    }
    CHECK(cudaGetLastError());
    CHECK(cudaEventDestroy(e0));
    CHECK(cudaEventDestroy(e1));
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

template <class Run>
static float median_ms(int total, int warm, Run run)
{
    return median_ms(total, warm, run, [](int) {});
}

static inline float host_bf(bf16 v)
{
    return __bfloat162float(v);
}

/* ---- GroupNorm NHWC benchmarks (gn_span.cu, gn_l2.cu, gn_ws.cu) ---- */

/* The scale and bias every GroupNorm benchmark uses, on the host (w, b) and the device. */
static void gn_params(int c, std::vector<float> &w, std::vector<float> &b, float **dw, float **db)
{
    w.resize(c), b.resize(c);
    for (int i = 0; i < c; i++)
        w[i] = 0.5f + 0.001f * i, b[i] = 0.01f * (i % 7) - 0.03f;
    CHECK(cudaMalloc(dw, c * 4));
    CHECK(cudaMalloc(db, c * 4));
    CHECK(cudaMemcpy(*dw, w.data(), c * 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(*db, b.data(), c * 4, cudaMemcpyHostToDevice));
}

/* The larger of two errors, a NaN (an unwritten, poisoned output) winning. */
static double worse(double a, double b)
{
    return (b != b || b > a) ? b : a;
}

/* The worst relative error of a GroupNorm forward's y [n][hw][c] and mean / inv_std [n][g]
 * over samples 0 and n - 1, against a two-pass double-precision reference (eps 1e-5). */
static double gn_fwd_error(int n, int c, int hw, int g, const bf16 *x, const bf16 *y, const float *mean,
                           const float *rstd, const std::vector<float> &w, const std::vector<float> &b)
{
    const size_t sample = (size_t)c * hw;
    std::vector<bf16> hx(sample), hy(sample);
    std::vector<float> hm((size_t)n * g), hr((size_t)n * g);
    CHECK(cudaMemcpy(hm.data(), mean, hm.size() * 4, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(hr.data(), rstd, hr.size() * 4, cudaMemcpyDeviceToHost));
    double worst = 0.0;
    const int cg = c / g;
    for (int s : {0, n - 1}) {
        CHECK(cudaMemcpy(hx.data(), x + s * sample, sample * 2, cudaMemcpyDeviceToHost));
        CHECK(cudaMemcpy(hy.data(), y + s * sample, sample * 2, cudaMemcpyDeviceToHost));
        for (int gi = 0; gi < g; gi++) {
            double sum = 0, m2 = 0;
            const double cnt = (double)cg * hw;
            for (int px = 0; px < hw; px++)
                for (int cc = 0; cc < cg; cc++)
                    sum += host_bf(hx[(size_t)px * c + gi * cg + cc]);
            const double mu = sum / cnt;
            for (int px = 0; px < hw; px++)
                for (int cc = 0; cc < cg; cc++) {
                    const double d = host_bf(hx[(size_t)px * c + gi * cg + cc]) - mu;
                    m2 += d * d;
                }
            const double r = 1.0 / sqrt(m2 / cnt + 1e-5);
            worst = worse(worst, fabs(hm[(size_t)s * g + gi] - mu) / (1.0 + fabs(mu)));
            worst = worse(worst, fabs(hr[(size_t)s * g + gi] - r) / r);
            for (int px = 0; px < hw; px++)
                for (int cc = 0; cc < cg; cc++) {
                    const int ch = gi * cg + cc;
                    const size_t e = (size_t)px * c + ch;
                    const double ref = (host_bf(hx[e]) - mu) * r * w[ch] + b[ch];
                    worst = worse(worst, fabs(host_bf(hy[e]) - ref) / (1.0 + fabs(ref)));
                }
        }
    }
    return worst;
}

#endif
