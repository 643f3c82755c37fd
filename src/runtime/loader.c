/*
 * loader.c — opens the CUDA driver (libcuda.so.1) and NVRTC with dlopen and fills the
 * entry-point tables of loader.h.
 *
 * Each library is opened at most once per process, inside pthread_once, so any number of
 * threads may race to the first use.  The outcome (OK, or NO_DEVICE and a sentence) is
 * kept: every later call on any thread gets the same status and the same message through
 * frost__fail, because frost_last_error is thread-local.  Libraries are never closed; the
 * kernels loaded from them live as long as the process.
 *
 * NVRTC search order: $FROST_NVRTC_PATH alone when set (a path or a soname), else
 * libnvrtc.so.13, libnvrtc.so.12 through the dynamic loader's search path, then the same
 * names under $CUDA_HOME/lib64 and /usr/local/cuda/lib64.  NVRTC itself opens
 * libnvrtc-builtins.so.<version> next to it when compiling; see compile.c for the message
 * when that fails.
 *
 * Symbols: each table entry names the exported symbol (the versioned one where cuda.h
 * maps the name, see cuda_abi.h) and the offset of its slot, so one loop loads them all.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/loader.h"

frost__cu_api frost__cu;
frost__nvrtc_api frost__nvrtc;

typedef struct symbol_slot {
    const char *name;
    size_t offset;
    int optional; /* 1: a missing symbol leaves the slot NULL */
} symbol_slot;

#define CU_SLOT(field, sym) {sym, offsetof(frost__cu_api, field), 0}
static const symbol_slot cu_symbols[] = {
    CU_SLOT(Init, "cuInit"),
    CU_SLOT(DriverGetVersion, "cuDriverGetVersion"),
    CU_SLOT(GetErrorName, "cuGetErrorName"),
    CU_SLOT(GetErrorString, "cuGetErrorString"),
    CU_SLOT(DeviceGetCount, "cuDeviceGetCount"),
    CU_SLOT(DeviceGet, "cuDeviceGet"),
    CU_SLOT(DeviceGetName, "cuDeviceGetName"),
    CU_SLOT(DeviceGetAttribute, "cuDeviceGetAttribute"),
    CU_SLOT(DeviceTotalMem, FROST__SYM_cuDeviceTotalMem),
    CU_SLOT(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
    CU_SLOT(DevicePrimaryCtxRelease, FROST__SYM_cuDevicePrimaryCtxRelease),
    CU_SLOT(CtxGetCurrent, "cuCtxGetCurrent"),
    CU_SLOT(CtxSetCurrent, "cuCtxSetCurrent"),
    CU_SLOT(CtxSynchronize, "cuCtxSynchronize"),
    CU_SLOT(ModuleLoadData, "cuModuleLoadData"),
    CU_SLOT(ModuleUnload, "cuModuleUnload"),
    CU_SLOT(ModuleGetFunction, "cuModuleGetFunction"),
    CU_SLOT(FuncGetAttribute, "cuFuncGetAttribute"),
    CU_SLOT(FuncSetAttribute, "cuFuncSetAttribute"),
    CU_SLOT(LaunchKernel, "cuLaunchKernel"),
    CU_SLOT(MemAlloc, FROST__SYM_cuMemAlloc),
    CU_SLOT(MemFree, FROST__SYM_cuMemFree),
    CU_SLOT(MemsetD8Async, "cuMemsetD8Async"),
    CU_SLOT(MemcpyHtoD, FROST__SYM_cuMemcpyHtoD),
    CU_SLOT(MemcpyDtoH, FROST__SYM_cuMemcpyDtoH),
    CU_SLOT(EventCreate, "cuEventCreate"),
    CU_SLOT(EventDestroy, FROST__SYM_cuEventDestroy),
    CU_SLOT(EventRecord, "cuEventRecord"),
    {FROST__SYM_cuEventElapsedTime, offsetof(frost__cu_api, EventElapsedTime), 1},
    {"cuLaunchKernelEx", offsetof(frost__cu_api, LaunchKernelEx), 1},
};

#define NVRTC_SLOT(field, sym) {sym, offsetof(frost__nvrtc_api, field), 0}
static const symbol_slot nvrtc_symbols[] = {
    NVRTC_SLOT(Version, "nvrtcVersion"),
    NVRTC_SLOT(GetErrorString, "nvrtcGetErrorString"),
    NVRTC_SLOT(CreateProgram, "nvrtcCreateProgram"),
    NVRTC_SLOT(DestroyProgram, "nvrtcDestroyProgram"),
    NVRTC_SLOT(CompileProgram, "nvrtcCompileProgram"),
    NVRTC_SLOT(GetCUBINSize, "nvrtcGetCUBINSize"),
    NVRTC_SLOT(GetCUBIN, "nvrtcGetCUBIN"),
    NVRTC_SLOT(GetProgramLogSize, "nvrtcGetProgramLogSize"),
    NVRTC_SLOT(GetProgramLog, "nvrtcGetProgramLog"),
};

FROST__STATIC_ASSERT(sizeof(void *) == sizeof(frost__cuInit_fn), "function pointers must fit a void *");

/* Looks up one symbol into its slot.  dlsym returns an object pointer; memcpy moves its
 * bits into the function-pointer slot without a conversion ISO C does not define. */
static int load_symbol(void *lib, void *table, const symbol_slot *s)
{
    void *sym = dlsym(lib, s->name);
    memcpy((char *)table + s->offset, &sym, sizeof sym);
    return sym != NULL || s->optional;
}

/* Loads every slot; on a missing one writes its name into missing. */
static int load_table(void *lib, void *table, const symbol_slot *slots, size_t count, const char **missing)
{
    for (size_t i = 0; i < count; i++) {
        if (!load_symbol(lib, table, &slots[i])) {
            *missing = slots[i].name;
            return 0;
        }
    }
    return 1;
}

/* ---- the driver ---------------------------------------------------------------------- */
static pthread_once_t driver_once = PTHREAD_ONCE_INIT;
static frost_status driver_status = FROST_NO_DEVICE;
static char driver_message[512];

static void driver_load_once(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *err = dlerror();
        snprintf(driver_message, sizeof driver_message,
                 "the CUDA driver library libcuda.so.1 could not be opened (%s); is an NVIDIA driver installed?",
                 err ? err : "unknown dlopen error");
        return;
    }
    const char *missing = NULL;
    if (!load_table(lib, &frost__cu, cu_symbols, FROST__ARRAY_SIZE(cu_symbols), &missing)) {
        snprintf(driver_message, sizeof driver_message,
                 "libcuda.so.1 lacks the symbol %s; the NVIDIA driver is too old for frost", missing);
        return;
    }
    if (!frost__cu.EventElapsedTime) {
        void *old = dlsym(lib, FROST__SYM_cuEventElapsedTime_old);
        memcpy(&frost__cu.EventElapsedTime, &old, sizeof old);
    }
    frost__CUresult r = frost__cu.Init(0);
    if (r != FROST__CUDA_SUCCESS) {
        char text[256];
        frost__cu_error_text(r, text, sizeof text);
        snprintf(driver_message, sizeof driver_message, "cuInit(0) failed: %s", text);
        return;
    }
    int version = 0;
    frost__cu.DriverGetVersion(&version);
    /* Programmatic dependent launches (runtime.h: frost__launch_dims.early) from CUDA 12.3
     * drivers on, whose graphs keep programmatic edges when a stream is captured; older
     * drivers get plain launches. */
    if (version < 12030)
        frost__cu.LaunchKernelEx = NULL;
    frost__log(FROST_LOG_INFO, "CUDA driver loaded (libcuda.so.1, CUDA %d.%d)", version / 1000, version % 1000 / 10);
    driver_status = FROST_OK;
}

frost_status frost__driver_load(void)
{
    pthread_once(&driver_once, driver_load_once);
    if (driver_status != FROST_OK) {
        return frost__fail(driver_status, "%s", driver_message);
    }
    return FROST_OK;
}

/* ---- NVRTC --------------------------------------------------------------------------- */
static pthread_once_t nvrtc_once = PTHREAD_ONCE_INIT;
static frost_status nvrtc_status = FROST_NO_DEVICE;
static char nvrtc_message[1024];
static char nvrtc_path[512];
static int nvrtc_version_number;

/* Tries one candidate; appends "name: dlerror" to tried on failure. */
static void *try_open(const char *name, char *tried, size_t cap)
{
    void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (lib) {
        snprintf(nvrtc_path, sizeof nvrtc_path, "%s", name);
        return lib;
    }
    const char *err = dlerror();
    size_t used = strlen(tried);
    if (used < cap) {
        snprintf(tried + used, cap - used, "%s%s", used ? "; " : "", err ? err : name);
    }
    return NULL;
}

static void *open_nvrtc(char *tried, size_t cap)
{
    const char *forced = getenv("FROST_NVRTC_PATH");
    if (forced && *forced) {
        return try_open(forced, tried, cap);
    }
    static const char *const sonames[] = {"libnvrtc.so.13", "libnvrtc.so.12"};
    const char *dirs[] = {getenv("CUDA_HOME"), "/usr/local/cuda"};
    for (size_t i = 0; i < FROST__ARRAY_SIZE(sonames); i++) {
        void *lib = try_open(sonames[i], tried, cap);
        if (lib) {
            return lib;
        }
    }
    for (size_t d = 0; d < FROST__ARRAY_SIZE(dirs); d++) {
        if (!dirs[d] || !*dirs[d]) {
            continue;
        }
        for (size_t i = 0; i < FROST__ARRAY_SIZE(sonames); i++) {
            char path[512];
            snprintf(path, sizeof path, "%s/lib64/%s", dirs[d], sonames[i]);
            void *lib = try_open(path, tried, cap);
            if (lib) {
                return lib;
            }
        }
    }
    return NULL;
}

static void nvrtc_load_once(void)
{
    char tried[768] = "";
    void *lib = open_nvrtc(tried, sizeof tried);
    if (!lib) {
        snprintf(nvrtc_message, sizeof nvrtc_message,
                 "NVRTC could not be opened (tried: %s); install the CUDA NVRTC runtime or set FROST_NVRTC_PATH",
                 tried);
        return;
    }
    const char *missing = NULL;
    if (!load_table(lib, &frost__nvrtc, nvrtc_symbols, FROST__ARRAY_SIZE(nvrtc_symbols), &missing)) {
        snprintf(nvrtc_message, sizeof nvrtc_message, "%s lacks the symbol %s; NVRTC 12 or newer is needed",
                 nvrtc_path, missing);
        return;
    }
    int major = 0, minor = 0;
    if (frost__nvrtc.Version(&major, &minor) != FROST__NVRTC_SUCCESS || major < 12) {
        snprintf(nvrtc_message, sizeof nvrtc_message, "%s reports version %d.%d; NVRTC 12 or newer is needed",
                 nvrtc_path, major, minor);
        return;
    }
    nvrtc_version_number = major * 1000 + minor * 10;
    frost__log(FROST_LOG_INFO, "NVRTC %d.%d loaded from %s", major, minor, nvrtc_path);
    nvrtc_status = FROST_OK;
}

frost_status frost__nvrtc_load(void)
{
    pthread_once(&nvrtc_once, nvrtc_load_once);
    if (nvrtc_status != FROST_OK) {
        return frost__fail(nvrtc_status, "%s", nvrtc_message);
    }
    return FROST_OK;
}

int frost__nvrtc_version(void)
{
    pthread_once(&nvrtc_once, nvrtc_load_once);
    return nvrtc_status == FROST_OK ? nvrtc_version_number : 0;
}

const char *frost__nvrtc_library(void)
{
    pthread_once(&nvrtc_once, nvrtc_load_once);
    return nvrtc_status == FROST_OK ? nvrtc_path : "";
}

/* ---- driver errors in words ------------------------------------------------------------ */
void frost__cu_error_text(frost__CUresult r, char *buf, size_t cap)
{
    const char *name = NULL, *text = NULL;
    if (frost__cu.GetErrorName) {
        frost__cu.GetErrorName(r, &name);
    }
    if (frost__cu.GetErrorString) {
        frost__cu.GetErrorString(r, &text);
    }
    if (name) {
        snprintf(buf, cap, "%s (%s)", name, text ? text : "no description");
    } else {
        snprintf(buf, cap, "CUresult %d", r);
    }
}

frost_status frost__cu_fail(frost__CUresult r, const char *what)
{
    char text[256];
    frost__cu_error_text(r, text, sizeof text);
    frost_status s = r == FROST__CUDA_ERROR_OUT_OF_MEMORY ? FROST_OUT_OF_MEMORY : FROST_DEVICE_ERROR;
    return frost__fail(s, "%s: %s", what, text);
}
