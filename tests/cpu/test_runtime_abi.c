/*
 * test_runtime_abi.c — checks src/runtime/cuda_abi.h, frost's hand-written copy of the
 * CUDA driver and NVRTC ABI, against the toolkit's own cuda.h and nvrtc.h.
 *
 * When /usr/local/cuda/include/cuda.h is present at build time, every constant is
 * compared with _Static_assert (a mismatch fails the build, not just the test), and the
 * versioned symbol names the loader asks dlsym for are compared with what cuda.h's
 * name-mapping macros expand to.  Without the headers the test skips (exit 77): frost
 * itself never needs them.
 */
#include <stdio.h>
#include <string.h>

#include "runtime/cuda_abi.h"
#include "test_util.h"

#if defined(__has_include)
#if __has_include("/usr/local/cuda/include/cuda.h") && __has_include("/usr/local/cuda/include/nvrtc.h")
#define HAVE_CUDA_HEADERS 1
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#include "/usr/local/cuda/include/cuda.h"
#include "/usr/local/cuda/include/nvrtc.h"
#pragma GCC diagnostic pop
#endif
#endif

#ifdef HAVE_CUDA_HEADERS
#define SAME(ours, theirs) _Static_assert((int)(ours) == (int)(theirs), #ours " differs from cuda.h's " #theirs)

SAME(FROST__CUDA_SUCCESS, CUDA_SUCCESS);
SAME(FROST__CUDA_ERROR_OUT_OF_MEMORY, CUDA_ERROR_OUT_OF_MEMORY);
SAME(FROST__CUDA_ERROR_NOT_INITIALIZED, CUDA_ERROR_NOT_INITIALIZED);
SAME(FROST__CUDA_ERROR_NO_DEVICE, CUDA_ERROR_NO_DEVICE);
SAME(FROST__CUDA_ERROR_INVALID_DEVICE, CUDA_ERROR_INVALID_DEVICE);

SAME(FROST__CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
SAME(FROST__CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
SAME(FROST__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
SAME(FROST__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
SAME(FROST__CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR,
     CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
SAME(FROST__CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);

SAME(FROST__CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
SAME(FROST__CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES);
SAME(FROST__CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES, CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES);
SAME(FROST__CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES);
SAME(FROST__CU_FUNC_ATTRIBUTE_NUM_REGS, CU_FUNC_ATTRIBUTE_NUM_REGS);
SAME(FROST__CU_FUNC_ATTRIBUTE_PTX_VERSION, CU_FUNC_ATTRIBUTE_PTX_VERSION);
SAME(FROST__CU_FUNC_ATTRIBUTE_BINARY_VERSION, CU_FUNC_ATTRIBUTE_BINARY_VERSION);
SAME(FROST__CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES);
SAME(FROST__CU_EVENT_DEFAULT, CU_EVENT_DEFAULT);

SAME(FROST__NVRTC_SUCCESS, NVRTC_SUCCESS);
SAME(FROST__NVRTC_ERROR_OUT_OF_MEMORY, NVRTC_ERROR_OUT_OF_MEMORY);
SAME(FROST__NVRTC_ERROR_PROGRAM_CREATION_FAILURE, NVRTC_ERROR_PROGRAM_CREATION_FAILURE);
SAME(FROST__NVRTC_ERROR_INVALID_INPUT, NVRTC_ERROR_INVALID_INPUT);
SAME(FROST__NVRTC_ERROR_INVALID_PROGRAM, NVRTC_ERROR_INVALID_PROGRAM);
SAME(FROST__NVRTC_ERROR_INVALID_OPTION, NVRTC_ERROR_INVALID_OPTION);
SAME(FROST__NVRTC_ERROR_COMPILATION, NVRTC_ERROR_COMPILATION);
SAME(FROST__NVRTC_ERROR_BUILTIN_OPERATION_FAILURE, NVRTC_ERROR_BUILTIN_OPERATION_FAILURE);

_Static_assert(sizeof(frost__CUresult) == sizeof(CUresult), "CUresult size");
_Static_assert(sizeof(frost__CUdevice) == sizeof(CUdevice), "CUdevice size");
_Static_assert(sizeof(frost__CUdeviceptr) == sizeof(CUdeviceptr), "CUdeviceptr size");
_Static_assert(sizeof(frost__nvrtcResult) == sizeof(nvrtcResult), "nvrtcResult size");

#define EXPANDED_NAME2(x) #x
#define EXPANDED_NAME(x) EXPANDED_NAME2(x)

static void check_name(const char *what, const char *ours, const char *theirs)
{
    if (strcmp(ours, theirs) != 0) {
        tu_failf("%s: frost loads \"%s\" but cuda.h maps the name to \"%s\"", what, ours, theirs);
    }
}

static void case_symbol_names(void)
{
    check_name("cuDeviceTotalMem", FROST__SYM_cuDeviceTotalMem, EXPANDED_NAME(cuDeviceTotalMem));
    check_name("cuDevicePrimaryCtxRelease", FROST__SYM_cuDevicePrimaryCtxRelease,
               EXPANDED_NAME(cuDevicePrimaryCtxRelease));
    check_name("cuMemAlloc", FROST__SYM_cuMemAlloc, EXPANDED_NAME(cuMemAlloc));
    check_name("cuMemFree", FROST__SYM_cuMemFree, EXPANDED_NAME(cuMemFree));
    check_name("cuMemcpyHtoD", FROST__SYM_cuMemcpyHtoD, EXPANDED_NAME(cuMemcpyHtoD));
    check_name("cuMemcpyDtoH", FROST__SYM_cuMemcpyDtoH, EXPANDED_NAME(cuMemcpyDtoH));
    check_name("cuEventDestroy", FROST__SYM_cuEventDestroy, EXPANDED_NAME(cuEventDestroy));
    /* Unversioned in the header: the loader asks for exactly these names. */
    check_name("cuMemsetD8Async", "cuMemsetD8Async", EXPANDED_NAME(cuMemsetD8Async));
    check_name("cuLaunchKernel", "cuLaunchKernel", EXPANDED_NAME(cuLaunchKernel));
    check_name("cuEventRecord", "cuEventRecord", EXPANDED_NAME(cuEventRecord));
    check_name("cuModuleLoadData", "cuModuleLoadData", EXPANDED_NAME(cuModuleLoadData));
    check_name("cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain", EXPANDED_NAME(cuDevicePrimaryCtxRetain));
    check_name("cuCtxSynchronize", "cuCtxSynchronize", EXPANDED_NAME(cuCtxSynchronize));
    /* CUDA 12.8+ maps cuEventElapsedTime to _v2; older headers do not.  The loader tries both. */
    const char *elapsed = EXPANDED_NAME(cuEventElapsedTime);
    if (strcmp(elapsed, FROST__SYM_cuEventElapsedTime) != 0 && strcmp(elapsed, FROST__SYM_cuEventElapsedTime_old) != 0) {
        tu_failf("cuEventElapsedTime maps to \"%s\", which the loader does not try", elapsed);
    }
}

int main(void)
{
    printf("checking cuda_abi.h against CUDA %d.%d headers\n", CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10);
    tu_set_context("test_runtime_abi", 0, 0, "symbol_names");
    tu_case_begin();
    case_symbol_names();
    tu_case_end();
    return tu_finish(1);
}
#else
int main(void)
{
    printf("skipped: /usr/local/cuda/include/cuda.h and nvrtc.h are not installed\n");
    return 77;
}
#endif
