/*
 * standalone.cuh - what the stand-alone CUDA benchmarks of bench/ (gn_span.cu, gn_l2.cu,
 * row_warp.cu, bn_sched.cu, tile_pattern.cu, gn_ws.cu) share: the error check, bf16 units of eight
 * elements to and from floats, the global loads and stores with cache hints, the
 * acquire load of an exchange counter, Welford-style (count, mean, M2) merges, and the
 * hashed input fill.  Each benchmark still compiles alone:
 *
 *   nvcc -arch=sm_90a -O3 -o NAME bench/NAME.cu       (gn_ws.cu: add -lcuda, for its tensor maps)
 */
#ifndef FROST_BENCH_STANDALONE_CUH
#define FROST_BENCH_STANDALONE_CUH

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

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

static inline float host_bf(bf16 v)
{
    return __bfloat162float(v);
}

#endif
