/*
 * loader.h — private to src/runtime/: the tables of driver and NVRTC entry points that
 * frost__driver_load and frost__nvrtc_load fill (src/runtime/loader.c), plus helpers that
 * turn a driver error code into a frost status with words in it.
 *
 * The tables are written once, inside pthread_once, and only read afterwards; a caller
 * must have had OK from the matching *_load function before touching them.
 */
#ifndef FROST_RUNTIME_LOADER_H
#define FROST_RUNTIME_LOADER_H

#include "runtime/cuda_abi.h"
#include "runtime/runtime.h"

typedef struct frost__cu_api {
    frost__cuInit_fn Init;
    frost__cuDriverGetVersion_fn DriverGetVersion;
    frost__cuGetErrorName_fn GetErrorName;
    frost__cuGetErrorString_fn GetErrorString;
    frost__cuDeviceGetCount_fn DeviceGetCount;
    frost__cuDeviceGet_fn DeviceGet;
    frost__cuDeviceGetName_fn DeviceGetName;
    frost__cuDeviceGetAttribute_fn DeviceGetAttribute;
    frost__cuDeviceTotalMem_fn DeviceTotalMem;
    frost__cuDevicePrimaryCtxRetain_fn DevicePrimaryCtxRetain;
    frost__cuDevicePrimaryCtxRelease_fn DevicePrimaryCtxRelease;
    frost__cuCtxGetCurrent_fn CtxGetCurrent;
    frost__cuCtxSetCurrent_fn CtxSetCurrent;
    frost__cuCtxSynchronize_fn CtxSynchronize;
    frost__cuModuleLoadData_fn ModuleLoadData;
    frost__cuModuleUnload_fn ModuleUnload;
    frost__cuModuleGetFunction_fn ModuleGetFunction;
    frost__cuFuncGetAttribute_fn FuncGetAttribute;
    frost__cuFuncSetAttribute_fn FuncSetAttribute;
    frost__cuLaunchKernel_fn LaunchKernel;
    frost__cuMemAlloc_fn MemAlloc;
    frost__cuMemFree_fn MemFree;
    frost__cuMemsetD8Async_fn MemsetD8Async;
    frost__cuMemcpyHtoD_fn MemcpyHtoD;
    frost__cuMemcpyDtoH_fn MemcpyDtoH;
    frost__cuEventCreate_fn EventCreate;
    frost__cuEventDestroy_fn EventDestroy;
    frost__cuEventRecord_fn EventRecord;
    frost__cuEventElapsedTime_fn EventElapsedTime;
    frost__cuLaunchKernelEx_fn LaunchKernelEx; /* NULL before CUDA 12.3 drivers (loader.c) */
} frost__cu_api;

typedef struct frost__nvrtc_api {
    frost__nvrtcVersion_fn Version;
    frost__nvrtcGetErrorString_fn GetErrorString;
    frost__nvrtcCreateProgram_fn CreateProgram;
    frost__nvrtcDestroyProgram_fn DestroyProgram;
    frost__nvrtcCompileProgram_fn CompileProgram;
    frost__nvrtcGetCUBINSize_fn GetCUBINSize;
    frost__nvrtcGetCUBIN_fn GetCUBIN;
    frost__nvrtcGetProgramLogSize_fn GetProgramLogSize;
    frost__nvrtcGetProgramLog_fn GetProgramLog;
} frost__nvrtc_api;

extern frost__cu_api frost__cu;
extern frost__nvrtc_api frost__nvrtc;

/* The path NVRTC was loaded from ("libnvrtc.so.13" or FROST_NVRTC_PATH); "" if it could
 * not be (tries to load it first). */
const char *frost__nvrtc_library(void);

/* Fails with DEVICE_ERROR (OUT_OF_MEMORY for CUDA_ERROR_OUT_OF_MEMORY) and a message
 * "<what>: CUDA_ERROR_NAME (description)". */
frost_status frost__cu_fail(frost__CUresult r, const char *what);
/* "CUDA_ERROR_NAME (description)" into buf. */
void frost__cu_error_text(frost__CUresult r, char *buf, size_t cap);

#endif /* FROST_RUNTIME_LOADER_H */
