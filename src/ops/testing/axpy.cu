/*
 * axpy.cu — a deliberately trivial kernel that exists only for frost's own checks: the
 * runtime tests (tests/cpu/test_runtime_*.c compile it with NVRTC, cache it, corrupt the
 * cache entry...) and frost-info's self-check (compile, load, launch, compare).  It is not
 * an op and no engine selects it.
 *
 *     y[i] = SCALE * a * x[i] + y[i]        for i < n, one thread per element
 *
 * Defines (from the kernel key):
 *   SCALE=<float literal>      extra factor, default 1.0f (tests change it to change the key)
 *   FROST_TEST_FORCE_ERROR     makes compilation fail, to test COMPILE_FAILED reporting
 */
#include "testing_helpers.cuh"

#ifndef SCALE
#define SCALE 1.0f
#endif

#ifdef FROST_TEST_FORCE_ERROR
#error "FROST_TEST_FORCE_ERROR is defined: this compile failure is intended by the runtime tests"
#endif

extern "C" __global__ void frost_test_axpy(float a, const float *x, float *y, int n)
{
    int i = frost_test_global_index();
    if (i < n) {
        y[i] = frost_test_fma(SCALE * a, x[i], y[i]);
    }
}

/* A second entry point in the same source: one cubin serves both keys. */
extern "C" __global__ void frost_test_fill(float value, float *y, int n)
{
    int i = frost_test_global_index();
    if (i < n) {
        y[i] = value;
    }
}
