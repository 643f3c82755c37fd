/*
 * frost_common.cuh — device helpers every frost kernel may use.
 *
 * Kernels are compiled by NVRTC at run time, where no CUDA toolkit header can be assumed
 * to exist on the user's machine; so this file includes nothing and defines what kernels
 * need: fixed-width integer types, 16-bit float storage types with conversions written in
 * inline PTX (cvt.*), and warp reductions.
 *
 * Storage dtypes: frost_f16 and frost_bf16 are 16-bit payloads; arithmetic is always done
 * in float after frost_to_float().  The DTYPE define of a kernel key picks `frost_io`:
 *     -D DTYPE_F32, -D DTYPE_F16 or -D DTYPE_BF16.
 */
#ifndef FROST_COMMON_CUH
#define FROST_COMMON_CUH

#if defined(__CUDACC_RTC__)
/* NVRTC: no system headers, so the fixed-width types are defined here. */
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
#else
/* nvcc (standalone builds for -Xptxas -v and ncu): the system's own definitions. */
#include <stdint.h>
#endif

#define FROST_DEVICE static __device__ __forceinline__

typedef struct frost_f16 {
    uint16_t bits;
} frost_f16;
typedef struct frost_bf16 {
    uint16_t bits;
} frost_bf16;

FROST_DEVICE float frost_f16_to_float(frost_f16 h)
{
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.bits));
    return f;
}
FROST_DEVICE frost_f16 frost_float_to_f16(float f)
{
    frost_f16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(f));
    return h;
}
FROST_DEVICE float frost_bf16_to_float(frost_bf16 h)
{
    return __uint_as_float(((uint32_t)h.bits) << 16);
}
FROST_DEVICE frost_bf16 frost_float_to_bf16(float f)
{
    frost_bf16 h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h.bits) : "f"(f));
    return h;
}
/* Two floats to a packed pair (lo in the low half), as the tensor cores want them. */
FROST_DEVICE uint32_t frost_pack_f16x2(float lo, float hi)
{
    uint32_t r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}
FROST_DEVICE uint32_t frost_pack_bf16x2(float lo, float hi)
{
    uint32_t r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

FROST_DEVICE float frost_to_float(float x) { return x; }
FROST_DEVICE float frost_to_float(frost_f16 x) { return frost_f16_to_float(x); }
FROST_DEVICE float frost_to_float(frost_bf16 x) { return frost_bf16_to_float(x); }

#if defined(DTYPE_F32)
typedef float frost_io;
FROST_DEVICE frost_io frost_from_float(float f) { return f; }
#elif defined(DTYPE_F16)
typedef frost_f16 frost_io;
FROST_DEVICE frost_io frost_from_float(float f) { return frost_float_to_f16(f); }
#define FROST_PACK2 frost_pack_f16x2
#elif defined(DTYPE_BF16)
typedef frost_bf16 frost_io;
FROST_DEVICE frost_io frost_from_float(float f) { return frost_float_to_bf16(f); }
#define FROST_PACK2 frost_pack_bf16x2
#endif

/* ---- thread-block clusters (sm_90) ----
 * frost_cluster_arrive / _wait: the two halves of a cluster barrier (release, acquire), so a
 * block can work between them; frost_cluster_sync: both.  frost_ld_cluster_v4 / _v2: 16 (or
 * 8) bytes at `local`'s place in the shared memory of the cluster's block `rank`.
 * frost_cluster_rank: this block's rank in its cluster.  Compiled for an older
 * architecture they trap: the host never selects a cluster key there. */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
FROST_DEVICE void frost_cluster_arrive(void)
{
    asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
}
FROST_DEVICE void frost_cluster_wait(void)
{
    asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}
FROST_DEVICE void frost_ld_cluster_v4(float v[4], const float *local, unsigned rank)
{
    uint32_t remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
                 : "=r"(remote)
                 : "r"((uint32_t)__cvta_generic_to_shared(local)), "r"(rank));
    asm volatile("ld.shared::cluster.v4.f32 {%0,%1,%2,%3}, [%4];"
                 : "=f"(v[0]), "=f"(v[1]), "=f"(v[2]), "=f"(v[3])
                 : "r"(remote)
                 : "memory");
}
FROST_DEVICE void frost_ld_cluster_v2(float v[2], const float *local, unsigned rank)
{
    uint32_t remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
                 : "=r"(remote)
                 : "r"((uint32_t)__cvta_generic_to_shared(local)), "r"(rank));
    asm volatile("ld.shared::cluster.v2.f32 {%0,%1}, [%2];" : "=f"(v[0]), "=f"(v[1]) : "r"(remote) : "memory");
}
/* mbarrier transactions (sm_90): a block's threads wait on a shared-memory barrier object
 * until an expected number of bytes, stored into its shared memory by any block of the
 * cluster with frost_st_async_f32, has landed.  Unlike a cluster barrier this orders
 * nothing else: no thread waits for its earlier global stores to become visible.
 * frost_mbar_init (one thread, then frost_mbar_init_fence and a cluster barrier before any
 * use); frost_mbar_expect (one arrival that also expects `bytes`); frost_mbar_wait (until
 * the phase of the given parity completes; acquire at CTA scope, which covers the bytes
 * landed in this block's shared memory: a cluster-scope acquire also invalidates L1,
 * CCTL.IVALL, 7 % of a split norm backward's stall samples). */
FROST_DEVICE void frost_mbar_init(uint64_t *bar, unsigned count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"((uint32_t)__cvta_generic_to_shared(bar)),
                 "r"(count)
                 : "memory");
}
FROST_DEVICE void frost_mbar_init_fence(void)
{
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
FROST_DEVICE void frost_mbar_expect(uint64_t *bar, unsigned bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(
                     (uint32_t)__cvta_generic_to_shared(bar)),
                 "r"(bytes)
                 : "memory");
}
FROST_DEVICE void frost_mbar_wait(uint64_t *bar, unsigned parity)
{
    asm volatile("{\n"
                 ".reg .pred done;\n"
                 "wait_%=:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 "@!done bra wait_%=;\n"
                 "}" ::"r"((uint32_t)__cvta_generic_to_shared(bar)),
                 "r"(parity)
                 : "memory");
}
/* Stores v at `local`'s place in block `rank` of the cluster and counts its 4 bytes on the
 * mbarrier at `bar`'s place there. */
FROST_DEVICE void frost_st_async_f32(float *local, uint64_t *bar, unsigned rank, float v)
{
    uint32_t dst, rbar;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
                 : "=r"(dst)
                 : "r"((uint32_t)__cvta_generic_to_shared(local)), "r"(rank));
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
                 : "=r"(rbar)
                 : "r"((uint32_t)__cvta_generic_to_shared(bar)), "r"(rank));
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];" ::"r"(dst),
                 "r"(__float_as_uint(v)), "r"(rbar)
                 : "memory");
}
FROST_DEVICE unsigned frost_cluster_rank(void)
{
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}
#else
FROST_DEVICE void frost_cluster_arrive(void)
{
    __trap();
}
FROST_DEVICE void frost_cluster_wait(void)
{
    __trap();
}
FROST_DEVICE void frost_ld_cluster_v4(float v[4], const float *local, unsigned rank)
{
    (void)local, (void)rank;
    v[0] = v[1] = v[2] = v[3] = 0.0f;
    __trap();
}
FROST_DEVICE void frost_ld_cluster_v2(float v[2], const float *local, unsigned rank)
{
    (void)local, (void)rank;
    v[0] = v[1] = 0.0f;
    __trap();
}
FROST_DEVICE void frost_mbar_init(uint64_t *bar, unsigned count)
{
    (void)bar, (void)count;
    __trap();
}
FROST_DEVICE void frost_mbar_init_fence(void)
{
    __trap();
}
FROST_DEVICE void frost_mbar_expect(uint64_t *bar, unsigned bytes)
{
    (void)bar, (void)bytes;
    __trap();
}
FROST_DEVICE void frost_mbar_wait(uint64_t *bar, unsigned parity)
{
    (void)bar, (void)parity;
    __trap();
}
FROST_DEVICE void frost_st_async_f32(float *local, uint64_t *bar, unsigned rank, float v)
{
    (void)local, (void)bar, (void)rank, (void)v;
    __trap();
}
FROST_DEVICE unsigned frost_cluster_rank(void)
{
    return 0;
}
#endif
FROST_DEVICE void frost_cluster_sync(void)
{
    frost_cluster_arrive();
    frost_cluster_wait();
}

/* ---- programmatic dependent launch (sm_90+; runtime.h's frost__launch_dims.early) ----
 * frost_allow_next_grid: this block no longer holds back the stream's next kernel, if that
 * one was launched early (it may then be scheduled, once every block of this grid has
 * called this or exited).  frost_wait_prior_grid: waits until the kernel this one was
 * launched early after has finished and its writes are visible.  Both are no-ops for a
 * plain launch and before sm_90. */
FROST_DEVICE void frost_allow_next_grid(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
FROST_DEVICE void frost_wait_prior_grid(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/* ---- warp reductions (all 32 lanes take part) ---- */
FROST_DEVICE float frost_warp_sum(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
FROST_DEVICE float frost_warp_max(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

#define FROST_INF __int_as_float(0x7f800000)
#define FROST_NEG_INF __int_as_float(0xff800000)
#define FROST_LOG2E 1.4426950408889634f
#define FROST_LN2 0.6931471805599453f

/* ---- appended: 16-byte global accesses and sub-warp sums (norm kernels) ----
 * Element dtype codes, equal to frost_dtype's values, for kernel keys that name the dtype
 * of a secondary tensor (a norm's scale or bias): -D SCALE_DT=1 means f32. */
#define FROST_DT_NONE 0
#define FROST_DT_F32 1
#define FROST_DT_F16 2
#define FROST_DT_BF16 3

/* 16-byte load of data read exactly once: skips L1 so that reused data stays there.
 * p must be 16-byte aligned. */
FROST_DEVICE void frost_ld_stream_v4(uint32_t r[4], const void *p)
{
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "l"(p));
}
/* 16-byte load of read-only data that is reused (weights): cached in L1. */
FROST_DEVICE void frost_ld_cached_v4(uint32_t r[4], const void *p)
{
    asm volatile("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "l"(p));
}
/* 16-byte store; p must be 16-byte aligned. */
FROST_DEVICE void frost_st_v4(void *p, const uint32_t r[4])
{
    asm volatile("st.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
                 : "memory");
}
/* Sum over aligned groups of `width` lanes (a power of two <= 32); every lane of the
 * warp must call it, and each lane gets its group's sum.  Fixed order: deterministic. */
FROST_DEVICE float frost_group_sum(float v, int width)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        if (o < width)
            v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

#endif /* FROST_COMMON_CUH */
