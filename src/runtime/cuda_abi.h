/*
 * cuda_abi.h — the small part of the CUDA driver ABI and the NVRTC ABI that frost uses,
 * written out by hand so that frost builds without a CUDA toolkit and links no CUDA
 * library.  Both libraries are opened with dlopen at run time (src/runtime/loader.c) and
 * every function below is looked up by its exported symbol name.
 *
 * Why by hand: cuda.h maps many names onto versioned symbols through macros (cuMemAlloc
 * is really cuMemAlloc_v2, cuCtxCreate is cuCtxCreate_v4, ...).  dlsym sees the real
 * exported names, so the loader asks for the versioned symbol where one exists; the
 * FROST__SYM_* names below are those strings.
 *
 * Every value here is checked against the toolkit's own headers by
 * tests/cpu/test_runtime_abi.c whenever /usr/local/cuda/include/cuda.h exists at build
 * time.  Values only ever come from the stable, documented ABI; enums are plain ints.
 *
 * Layout: driver types and constants, driver function pointer types, then NVRTC.
 */
#ifndef FROST_RUNTIME_CUDA_ABI_H
#define FROST_RUNTIME_CUDA_ABI_H

#include <stddef.h>

/* ---- driver types -------------------------------------------------------------------- */
typedef int frost__CUresult;            /* CUresult */
typedef int frost__CUdevice;            /* CUdevice */
typedef unsigned long long frost__CUdeviceptr; /* CUdeviceptr (64-bit builds) */
typedef struct frost__CUctx_st *frost__CUcontext;
typedef struct frost__CUmod_st *frost__CUmodule;
typedef struct frost__CUfunc_st *frost__CUfunction;
typedef struct frost__CUstream_st *frost__CUstream;
typedef struct frost__CUevent_st *frost__CUevent;

/* ---- driver constants ---------------------------------------------------------------- */
enum {
    FROST__CUDA_SUCCESS = 0,
    FROST__CUDA_ERROR_OUT_OF_MEMORY = 2,
    FROST__CUDA_ERROR_NOT_INITIALIZED = 3,
    FROST__CUDA_ERROR_NO_DEVICE = 100,
    FROST__CUDA_ERROR_INVALID_DEVICE = 101,
};

/* CUdevice_attribute */
enum {
    FROST__CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
    FROST__CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38,
    FROST__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    FROST__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
    FROST__CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81,
    FROST__CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
};

/* CUfunction_attribute */
enum {
    FROST__CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0,
    FROST__CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1,
    FROST__CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES = 2,
    FROST__CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3,
    FROST__CU_FUNC_ATTRIBUTE_NUM_REGS = 4,
    FROST__CU_FUNC_ATTRIBUTE_PTX_VERSION = 5,
    FROST__CU_FUNC_ATTRIBUTE_BINARY_VERSION = 6,
    FROST__CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
};

/* CUevent_flags */
enum { FROST__CU_EVENT_DEFAULT = 0 };

/* ---- driver functions (the exported symbol each pointer is loaded from) ----------- */
typedef frost__CUresult (*frost__cuInit_fn)(unsigned flags);                               /* cuInit */
typedef frost__CUresult (*frost__cuDriverGetVersion_fn)(int *version);                     /* cuDriverGetVersion */
typedef frost__CUresult (*frost__cuGetErrorName_fn)(frost__CUresult e, const char **s);     /* cuGetErrorName */
typedef frost__CUresult (*frost__cuGetErrorString_fn)(frost__CUresult e, const char **s);   /* cuGetErrorString */
typedef frost__CUresult (*frost__cuDeviceGetCount_fn)(int *count);                         /* cuDeviceGetCount */
typedef frost__CUresult (*frost__cuDeviceGet_fn)(frost__CUdevice *dev, int ordinal);        /* cuDeviceGet */
typedef frost__CUresult (*frost__cuDeviceGetName_fn)(char *name, int len, frost__CUdevice dev); /* cuDeviceGetName */
typedef frost__CUresult (*frost__cuDeviceGetAttribute_fn)(int *value, int attr, frost__CUdevice dev);
typedef frost__CUresult (*frost__cuDeviceTotalMem_fn)(size_t *bytes, frost__CUdevice dev); /* cuDeviceTotalMem_v2 */
typedef frost__CUresult (*frost__cuDevicePrimaryCtxRetain_fn)(frost__CUcontext *ctx, frost__CUdevice dev);
typedef frost__CUresult (*frost__cuDevicePrimaryCtxRelease_fn)(frost__CUdevice dev); /* ..._v2 */
typedef frost__CUresult (*frost__cuCtxGetCurrent_fn)(frost__CUcontext *ctx);
typedef frost__CUresult (*frost__cuCtxSetCurrent_fn)(frost__CUcontext ctx);
typedef frost__CUresult (*frost__cuCtxSynchronize_fn)(void);
typedef frost__CUresult (*frost__cuModuleLoadData_fn)(frost__CUmodule *mod, const void *image);
typedef frost__CUresult (*frost__cuModuleUnload_fn)(frost__CUmodule mod);
typedef frost__CUresult (*frost__cuModuleGetFunction_fn)(frost__CUfunction *fn, frost__CUmodule mod, const char *name);
typedef frost__CUresult (*frost__cuFuncGetAttribute_fn)(int *value, int attr, frost__CUfunction fn);
typedef frost__CUresult (*frost__cuFuncSetAttribute_fn)(frost__CUfunction fn, int attr, int value);
typedef frost__CUresult (*frost__cuLaunchKernel_fn)(frost__CUfunction fn, unsigned gx, unsigned gy, unsigned gz,
                                                  unsigned bx, unsigned by, unsigned bz, unsigned smem,
                                                  frost__CUstream stream, void **params, void **extra);
typedef frost__CUresult (*frost__cuMemAlloc_fn)(frost__CUdeviceptr *ptr, size_t bytes);     /* cuMemAlloc_v2 */
typedef frost__CUresult (*frost__cuMemFree_fn)(frost__CUdeviceptr ptr);                     /* cuMemFree_v2 */
typedef frost__CUresult (*frost__cuMemsetD8Async_fn)(frost__CUdeviceptr dst, unsigned char value, size_t n,
                                                   frost__CUstream stream);
typedef frost__CUresult (*frost__cuMemcpyHtoD_fn)(frost__CUdeviceptr dst, const void *src, size_t n); /* _v2 */
typedef frost__CUresult (*frost__cuMemcpyDtoH_fn)(void *dst, frost__CUdeviceptr src, size_t n);       /* _v2 */
typedef frost__CUresult (*frost__cuEventCreate_fn)(frost__CUevent *ev, unsigned flags);
typedef frost__CUresult (*frost__cuEventDestroy_fn)(frost__CUevent ev);                     /* cuEventDestroy_v2 */
typedef frost__CUresult (*frost__cuEventRecord_fn)(frost__CUevent ev, frost__CUstream stream);
typedef frost__CUresult (*frost__cuEventElapsedTime_fn)(float *ms, frost__CUevent start, frost__CUevent end);

/* cuLaunchKernelEx (CUDA 12.0+ drivers) with cuda.h's CUlaunchConfig / CUlaunchAttribute
 * layout: an attribute is its id, 4 bytes of padding and a 64-byte value union. */
enum { FROST__CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6 };
typedef struct frost__CUlaunchAttribute {
    int id;
    char pad[4];
    union {
        char pad[64];
        void *align;
        int programmatic_stream_serialization_allowed;
    } value;
} frost__CUlaunchAttribute;
typedef struct frost__CUlaunchConfig {
    unsigned grid_x, grid_y, grid_z;
    unsigned block_x, block_y, block_z;
    unsigned shared_mem_bytes;
    frost__CUstream stream;
    frost__CUlaunchAttribute *attrs;
    unsigned num_attrs;
} frost__CUlaunchConfig;
typedef frost__CUresult (*frost__cuLaunchKernelEx_fn)(const frost__CUlaunchConfig *config, frost__CUfunction fn,
                                                    void **params, void **extra);

/* Versioned symbol names (what cuda.h's #defines resolve to). */
#define FROST__SYM_cuDeviceTotalMem "cuDeviceTotalMem_v2"
#define FROST__SYM_cuDevicePrimaryCtxRelease "cuDevicePrimaryCtxRelease_v2"
#define FROST__SYM_cuMemAlloc "cuMemAlloc_v2"
#define FROST__SYM_cuMemFree "cuMemFree_v2"
#define FROST__SYM_cuMemcpyHtoD "cuMemcpyHtoD_v2"
#define FROST__SYM_cuMemcpyDtoH "cuMemcpyDtoH_v2"
#define FROST__SYM_cuEventDestroy "cuEventDestroy_v2"
/* CUDA 12.8+ exports cuEventElapsedTime_v2; older drivers only the unversioned one. */
#define FROST__SYM_cuEventElapsedTime "cuEventElapsedTime_v2"
#define FROST__SYM_cuEventElapsedTime_old "cuEventElapsedTime"

/* ---- NVRTC --------------------------------------------------------------------------- */
typedef int frost__nvrtcResult; /* nvrtcResult */
typedef struct frost__nvrtcProgram_st *frost__nvrtcProgram;

enum {
    FROST__NVRTC_SUCCESS = 0,
    FROST__NVRTC_ERROR_OUT_OF_MEMORY = 1,
    FROST__NVRTC_ERROR_PROGRAM_CREATION_FAILURE = 2,
    FROST__NVRTC_ERROR_INVALID_INPUT = 3,
    FROST__NVRTC_ERROR_INVALID_PROGRAM = 4,
    FROST__NVRTC_ERROR_INVALID_OPTION = 5,
    FROST__NVRTC_ERROR_COMPILATION = 6,
    FROST__NVRTC_ERROR_BUILTIN_OPERATION_FAILURE = 7,
};

typedef frost__nvrtcResult (*frost__nvrtcVersion_fn)(int *major, int *minor);
typedef const char *(*frost__nvrtcGetErrorString_fn)(frost__nvrtcResult r);
typedef frost__nvrtcResult (*frost__nvrtcCreateProgram_fn)(frost__nvrtcProgram *prog, const char *src, const char *name,
                                                         int num_headers, const char *const *headers,
                                                         const char *const *include_names);
typedef frost__nvrtcResult (*frost__nvrtcDestroyProgram_fn)(frost__nvrtcProgram *prog);
typedef frost__nvrtcResult (*frost__nvrtcCompileProgram_fn)(frost__nvrtcProgram prog, int num_options,
                                                          const char *const *options);
typedef frost__nvrtcResult (*frost__nvrtcGetCUBINSize_fn)(frost__nvrtcProgram prog, size_t *size);
typedef frost__nvrtcResult (*frost__nvrtcGetCUBIN_fn)(frost__nvrtcProgram prog, char *cubin);
typedef frost__nvrtcResult (*frost__nvrtcGetProgramLogSize_fn)(frost__nvrtcProgram prog, size_t *size);
typedef frost__nvrtcResult (*frost__nvrtcGetProgramLog_fn)(frost__nvrtcProgram prog, char *log);

#endif /* FROST_RUNTIME_CUDA_ABI_H */
