/*
 * testing_helpers.cuh — helpers for src/ops/testing/axpy.cu.  It exists so that the
 * runtime tests exercise include resolution (a header next to its includer) and so that
 * the cache key demonstrably covers header text.
 */
#ifndef FROST_TESTING_HELPERS_CUH
#define FROST_TESTING_HELPERS_CUH

static __device__ __forceinline__ int frost_test_global_index(void)
{
    return (int)(blockIdx.x * blockDim.x + threadIdx.x);
}

static __device__ __forceinline__ float frost_test_fma(float a, float x, float y)
{
    return fmaf(a, x, y);
}

#endif /* FROST_TESTING_HELPERS_CUH */
