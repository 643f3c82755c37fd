/*
 * device.c — CUDA devices, the in-process kernel map, launches and thin driver wrappers.
 *
 * A frost__device holds a retained primary context (the one the CUDA runtime and PyTorch
 * share, so frost's allocations and theirs live in one address space), the properties
 * kernel selection needs, and the map of kernels loaded on it.
 *
 * Kernel map: printable key -> loaded kernel (module, function, attributes), a plain
 * array searched linearly under one mutex.  Lookups happen when graphs are built, not when
 * they execute (execute walks pre-resolved kernel pointers), and a process loads tens of
 * kernels, so a hash table would buy nothing.  The mutex is held across a compile, so two
 * threads asking for the same kernel compile it once; different kernels compile one
 * after another, which only matters at build time.
 *
 * Dynamic shared memory: above 48 KiB a kernel must opt in through
 * CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES.  frost sets that limit once, when the
 * kernel is loaded, to all the device allows beside the kernel's static shared memory
 * (the limit reserves nothing; the launch's own size decides occupancy).  After that
 * dyn_smem_set never changes, so launches from many threads read it without a lock, and
 * a launch asking for more fails with a sentence instead of a driver error.
 *
 * Every call that touches the driver first makes the device's context current on the
 * calling thread (cuCtxGetCurrent, then cuCtxSetCurrent only if it differs).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/loader.h"

typedef struct kernel_entry {
    char *key_text;
    frost__kernel *kernel;
} kernel_entry;

struct frost__kernel_map {
    pthread_mutex_t lock;
    kernel_entry *entries;
    size_t count, cap;
};

#define DEFAULT_DYNAMIC_SMEM_LIMIT (48u * 1024u)

static frost__CUcontext context_of(const frost__device *dev)
{
    return (frost__CUcontext)dev->cu_context;
}

static frost__CUdevice device_handle_of(const frost__device *dev)
{
    return (frost__CUdevice)(intptr_t)dev->cu_device;
}

static frost__CUdeviceptr device_pointer(const void *ptr)
{
    return (frost__CUdeviceptr)(uintptr_t)ptr;
}

/* ---- devices --------------------------------------------------------------------------- */
static frost_status read_attribute(frost__CUdevice device, int attribute, const char *name, int *value)
{
    frost__CUresult r = frost__cu.DeviceGetAttribute(value, attribute, device);
    return r == FROST__CUDA_SUCCESS ? FROST_OK : frost__cu_fail(r, name);
}

static frost_status read_properties(frost__device *dev)
{
    frost__CUdevice device = device_handle_of(dev);
    int sm_count = 0, major = 0, minor = 0, optin = 0, per_sm = 0, l2 = 0;
    frost_status s = read_attribute(device, FROST__CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "SM count", &sm_count);
    if (s == FROST_OK) {
        s = read_attribute(device, FROST__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "compute capability", &major);
    }
    if (s == FROST_OK) {
        s = read_attribute(device, FROST__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "compute capability", &minor);
    }
    if (s == FROST_OK) {
        s = read_attribute(device, FROST__CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                           "shared memory per block", &optin);
    }
    if (s == FROST_OK) {
        s = read_attribute(device, FROST__CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR,
                           "shared memory per SM", &per_sm);
    }
    if (s == FROST_OK) {
        s = read_attribute(device, FROST__CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, "L2 size", &l2);
    }
    size_t total = 0;
    frost__CUresult r = s == FROST_OK ? frost__cu.DeviceTotalMem(&total, device) : FROST__CUDA_SUCCESS;
    if (r != FROST__CUDA_SUCCESS) {
        s = frost__cu_fail(r, "cuDeviceTotalMem");
    }
    r = s == FROST_OK ? frost__cu.DeviceGetName(dev->name, (int)sizeof dev->name, device) : FROST__CUDA_SUCCESS;
    if (r != FROST__CUDA_SUCCESS) {
        s = frost__cu_fail(r, "cuDeviceGetName");
    }
    if (s != FROST_OK) {
        return s;
    }
    dev->sm_count = sm_count;
    dev->cc_major = major;
    dev->cc_minor = minor;
    dev->smem_per_block_optin = (size_t)optin;
    dev->smem_per_sm = (size_t)per_sm;
    dev->l2_bytes = (size_t)l2;
    dev->global_mem_bytes = total;
    /* wgmma and setmaxnreg exist only in the architecture-specific sm_90a target. */
    snprintf(dev->arch, sizeof dev->arch, major == 9 && minor == 0 ? "sm_%d%da" : "sm_%d%d", major, minor);
    return FROST_OK;
}

frost_status frost__device_open(int ordinal, frost__device **out)
{
    *out = NULL;
    frost_status s = frost__driver_load();
    if (s == FROST_OK) {
        s = frost__nvrtc_load();
    }
    if (s != FROST_OK) {
        return s;
    }
    int count = 0;
    frost__CUresult r = frost__cu.DeviceGetCount(&count);
    if (r != FROST__CUDA_SUCCESS || count == 0) {
        char text[256];
        frost__cu_error_text(r, text, sizeof text);
        return frost__fail(FROST_NO_DEVICE, "the CUDA driver sees no GPU (%s)", r ? text : "0 devices");
    }
    if (ordinal < 0 || ordinal >= count) {
        return frost__fail(FROST_NO_DEVICE, "CUDA device %d was asked for; this machine has %d (0..%d)", ordinal,
                           count, count - 1);
    }
    frost__device *dev = calloc(1, sizeof *dev);
    struct frost__kernel_map *map = calloc(1, sizeof *map);
    if (!dev || !map) {
        free(dev);
        free(map);
        return frost__fail(FROST_OUT_OF_MEMORY, "out of memory opening CUDA device %d", ordinal);
    }
    pthread_mutex_init(&map->lock, NULL);
    dev->kernels = map;
    dev->ordinal = ordinal;
    frost__CUdevice device = 0;
    r = frost__cu.DeviceGet(&device, ordinal);
    if (r != FROST__CUDA_SUCCESS) {
        s = frost__cu_fail(r, "cuDeviceGet");
    }
    dev->cu_device = (void *)(intptr_t)device;
    if (s == FROST_OK) {
        s = read_properties(dev);
    }
    frost__CUcontext context = NULL;
    if (s == FROST_OK && (r = frost__cu.DevicePrimaryCtxRetain(&context, device)) != FROST__CUDA_SUCCESS) {
        s = frost__cu_fail(r, "cuDevicePrimaryCtxRetain");
    }
    dev->cu_context = context;
    if (s == FROST_OK) {
        s = frost__device_make_current(dev);
    }
    if (s != FROST_OK) {
        frost__device_close(dev);
        return s;
    }
    frost__log(FROST_LOG_INFO, "CUDA device %d: %s, %s, %d SMs, %zu MiB, %zu KiB shared memory per block", ordinal,
               dev->name, dev->arch, dev->sm_count, dev->global_mem_bytes >> 20, dev->smem_per_block_optin >> 10);
    *out = dev;
    return FROST_OK;
}

void frost__device_close(frost__device *dev)
{
    if (!dev) {
        return;
    }
    struct frost__kernel_map *map = dev->kernels;
    if (dev->cu_context) {
        frost__device_make_current(dev);
    }
    for (size_t i = 0; map && i < map->count; i++) {
        frost__cu.ModuleUnload((frost__CUmodule)map->entries[i].kernel->module);
        free(map->entries[i].kernel);
        free(map->entries[i].key_text);
    }
    if (map) {
        pthread_mutex_destroy(&map->lock);
        free(map->entries);
        free(map);
    }
    if (dev->cu_context) {
        frost__cu.DevicePrimaryCtxRelease(device_handle_of(dev));
    }
    free(dev);
}

frost_status frost__device_make_current(const frost__device *dev)
{
    frost__CUcontext current = NULL;
    frost__CUresult r = frost__cu.CtxGetCurrent(&current);
    if (r == FROST__CUDA_SUCCESS && current == context_of(dev)) {
        return FROST_OK;
    }
    r = frost__cu.CtxSetCurrent(context_of(dev));
    return r == FROST__CUDA_SUCCESS ? FROST_OK : frost__cu_fail(r, "cuCtxSetCurrent");
}

/* ---- kernels ----------------------------------------------------------------------------- */
static frost_status read_kernel_attrs(frost__kernel *k)
{
    static const struct {
        int attribute;
        size_t offset;
    } fields[] = {
        {FROST__CU_FUNC_ATTRIBUTE_NUM_REGS, offsetof(frost__kernel_attrs, registers)},
        {FROST__CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, offsetof(frost__kernel_attrs, local_bytes)},
        {FROST__CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, offsetof(frost__kernel_attrs, static_smem)},
        {FROST__CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, offsetof(frost__kernel_attrs, max_threads)},
    };
    for (size_t i = 0; i < FROST__ARRAY_SIZE(fields); i++) {
        int value = 0;
        frost__CUresult r = frost__cu.FuncGetAttribute(&value, fields[i].attribute, (frost__CUfunction)k->function);
        if (r != FROST__CUDA_SUCCESS) {
            return frost__cu_fail(r, "cuFuncGetAttribute");
        }
        memcpy((char *)&k->attrs + fields[i].offset, &value, sizeof value);
    }
    return FROST_OK;
}

/* Raises k's dynamic shared-memory limit to what the device allows beside its static
 * shared memory.  A refusal leaves the default limit (logged): launches above it fail. */
static void opt_in_dynamic_smem(const frost__device *dev, frost__kernel *k, const char *key_text)
{
    size_t static_smem = (size_t)k->attrs.static_smem;
    size_t most = dev->smem_per_block_optin > static_smem ? dev->smem_per_block_optin - static_smem : 0;
    k->dyn_smem_set = DEFAULT_DYNAMIC_SMEM_LIMIT > static_smem ? DEFAULT_DYNAMIC_SMEM_LIMIT - static_smem : 0;
    if (most <= k->dyn_smem_set) {
        return;
    }
    frost__CUresult r = frost__cu.FuncSetAttribute((frost__CUfunction)k->function,
                                                   FROST__CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)most);
    if (r == FROST__CUDA_SUCCESS) {
        k->dyn_smem_set = most;
    } else {
        char text[256];
        frost__cu_error_text(r, text, sizeof text);
        frost__log(FROST_LOG_WARN, "kernel %s: raising its dynamic shared memory limit to %zu bytes failed (%s); "
                   "it keeps %zu", key_text, most, text, k->dyn_smem_set);
    }
}

/* Loads a cubin and finds key's entry point in it. */
static frost_status load_kernel(const frost__device *dev, const frost__kernel_key *key, const char *key_text,
                                const void *cubin, frost__kernel **out)
{
    frost__kernel *k = calloc(1, sizeof *k);
    if (!k) {
        return frost__fail(FROST_OUT_OF_MEMORY, "out of memory loading kernel %s", key_text);
    }
    frost__CUmodule module = NULL;
    frost__CUfunction function = NULL;
    char what[512];
    frost_status s = frost__device_make_current(dev);
    frost__CUresult r = s == FROST_OK ? frost__cu.ModuleLoadData(&module, cubin) : FROST__CUDA_SUCCESS;
    if (r != FROST__CUDA_SUCCESS) {
        snprintf(what, sizeof what, "cuModuleLoadData for kernel %s on %s", key_text, dev->arch);
        s = frost__cu_fail(r, what);
    }
    r = s == FROST_OK ? frost__cu.ModuleGetFunction(&function, module, key->entry) : FROST__CUDA_SUCCESS;
    if (r != FROST__CUDA_SUCCESS) {
        s = frost__fail(FROST_INTERNAL, "kernel %s: the compiled module has no entry point %s (is it extern \"C\" "
                                        "__global__?)", key_text, key->entry);
    }
    k->module = module;
    k->function = function;
    if (s == FROST_OK) {
        s = read_kernel_attrs(k);
    }
    if (s == FROST_OK) {
        opt_in_dynamic_smem(dev, k, key_text);
    }
    if (s != FROST_OK) {
        if (module) {
            frost__cu.ModuleUnload(module);
        }
        free(k);
        return s;
    }
    *out = k;
    return FROST_OK;
}

static frost_status map_insert(struct frost__kernel_map *map, const char *key_text, frost__kernel *k)
{
    if (map->count == map->cap) {
        size_t cap = map->cap ? 2 * map->cap : 16;
        kernel_entry *grown = realloc(map->entries, cap * sizeof *grown);
        if (!grown) {
            return frost__fail(FROST_OUT_OF_MEMORY, "out of memory growing the kernel map");
        }
        map->entries = grown;
        map->cap = cap;
    }
    char *copy = strdup(key_text);
    if (!copy) {
        return frost__fail(FROST_OUT_OF_MEMORY, "out of memory growing the kernel map");
    }
    map->entries[map->count].key_text = copy;
    map->entries[map->count].kernel = k;
    map->count++;
    return FROST_OK;
}

frost_status frost__kernel_get(frost__device *dev, const frost__kernel_key *key, int enforce_precompiled,
                               frost__kernel **out)
{
    *out = NULL;
    frost__buf key_text = {0};
    frost__key_print(key, &key_text);
    if (key_text.oom) {
        return frost__fail(FROST_OUT_OF_MEMORY, "out of memory printing a kernel key");
    }
    struct frost__kernel_map *map = dev->kernels;
    frost_status s = FROST_OK;
    pthread_mutex_lock(&map->lock);
    for (size_t i = 0; i < map->count && !*out; i++) {
        if (strcmp(map->entries[i].key_text, key_text.data) == 0) {
            *out = map->entries[i].kernel;
        }
    }
    if (!*out) {
        frost__compile_result compiled;
        s = frost__compile(key, dev->arch, enforce_precompiled, &compiled);
        frost__kernel *k = NULL;
        if (s == FROST_OK) {
            s = load_kernel(dev, key, key_text.data, compiled.cubin, &k);
        }
        if (s == FROST_OK && (s = map_insert(map, key_text.data, k)) != FROST_OK) {
            frost__cu.ModuleUnload((frost__CUmodule)k->module);
            free(k);
            k = NULL;
        }
        *out = k;
        free(compiled.cubin);
        frost__buf_free(&compiled.log);
    }
    pthread_mutex_unlock(&map->lock);
    frost__buf_free(&key_text);
    return s;
}

/* ---- launches ---------------------------------------------------------------------------- */
frost_status frost__launch(const frost__device *dev, frost__kernel *k, const frost__launch_dims *dims, void **args,
                           void *stream)
{
    if (dims->dyn_smem > k->dyn_smem_set) {
        return frost__fail(FROST_INTERNAL, "a launch asks for %zu bytes of dynamic shared memory; %s allows %zu "
                           "per block and the kernel uses %d statically (its selector should have refused)",
                           dims->dyn_smem, dev->name, dev->smem_per_block_optin, k->attrs.static_smem);
    }
    frost_status s = frost__device_make_current(dev);
    if (s != FROST_OK) {
        return s;
    }
    frost__CUresult r;
    const int early = dims->early && frost__cu.LaunchKernelEx && dev->cc_major >= 9;
    if (early) {
        frost__CUlaunchAttribute attr;
        memset(&attr, 0, sizeof attr);
        attr.id = FROST__CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attr.value.programmatic_stream_serialization_allowed = 1;
        const frost__CUlaunchConfig cfg = {dims->grid[0],  dims->grid[1],   dims->grid[2],
                                           dims->block[0], dims->block[1],  dims->block[2],
                                           (unsigned)dims->dyn_smem, (frost__CUstream)stream, &attr, 1};
        r = frost__cu.LaunchKernelEx(&cfg, (frost__CUfunction)k->function, args, NULL);
    } else {
        r = frost__cu.LaunchKernel((frost__CUfunction)k->function, dims->grid[0], dims->grid[1], dims->grid[2],
                                   dims->block[0], dims->block[1], dims->block[2], (unsigned)dims->dyn_smem,
                                   (frost__CUstream)stream, args, NULL);
    }
    if (r != FROST__CUDA_SUCCESS) {
        char what[256];
        snprintf(what, sizeof what, "%s (grid %ux%ux%u, block %ux%ux%u, %zu bytes dynamic shared memory)",
                 early ? "cuLaunchKernelEx (programmatic dependent launch)" : "cuLaunchKernel", dims->grid[0],
                 dims->grid[1], dims->grid[2], dims->block[0], dims->block[1], dims->block[2], dims->dyn_smem);
        return frost__cu_fail(r, what);
    }
    return FROST_OK;
}

/* ---- thin wrappers ------------------------------------------------------------------------ */
static frost_status checked(frost__CUresult r, const char *what)
{
    return r == FROST__CUDA_SUCCESS ? FROST_OK : frost__cu_fail(r, what);
}

frost_status frost__dev_alloc(const frost__device *dev, size_t bytes, void **ptr)
{
    *ptr = NULL;
    if (bytes == 0) {
        return FROST_OK;
    }
    frost_status s = frost__device_make_current(dev);
    if (s != FROST_OK) {
        return s;
    }
    frost__CUdeviceptr p = 0;
    frost__CUresult r = frost__cu.MemAlloc(&p, bytes);
    if (r != FROST__CUDA_SUCCESS) {
        char what[256];
        snprintf(what, sizeof what, "cuMemAlloc of %zu bytes on %s", bytes, dev->name);
        return frost__cu_fail(r, what);
    }
    *ptr = (void *)(uintptr_t)p;
    return FROST_OK;
}

void frost__dev_free(const frost__device *dev, void *ptr)
{
    if (ptr && frost__device_make_current(dev) == FROST_OK) {
        frost__cu.MemFree(device_pointer(ptr));
    }
}

frost_status frost__dev_memset_async(const frost__device *dev, void *ptr, int byte_value, size_t bytes, void *stream)
{
    frost_status s = frost__device_make_current(dev);
    if (s != FROST_OK || bytes == 0) {
        return s;
    }
    return checked(frost__cu.MemsetD8Async(device_pointer(ptr), (unsigned char)byte_value, bytes,
                                           (frost__CUstream)stream),
                   "cuMemsetD8Async");
}

frost_status frost__dev_copy_htod(const frost__device *dev, void *dst, const void *src, size_t bytes)
{
    frost_status s = frost__device_make_current(dev);
    if (s != FROST_OK || bytes == 0) {
        return s;
    }
    return checked(frost__cu.MemcpyHtoD(device_pointer(dst), src, bytes), "cuMemcpyHtoD");
}

frost_status frost__dev_copy_dtoh(const frost__device *dev, void *dst, const void *src, size_t bytes)
{
    frost_status s = frost__device_make_current(dev);
    if (s != FROST_OK || bytes == 0) {
        return s;
    }
    return checked(frost__cu.MemcpyDtoH(dst, device_pointer(src), bytes), "cuMemcpyDtoH");
}

frost_status frost__dev_synchronize(const frost__device *dev)
{
    frost_status s = frost__device_make_current(dev);
    return s != FROST_OK ? s : checked(frost__cu.CtxSynchronize(), "cuCtxSynchronize");
}

frost_status frost__event_create(void **ev)
{
    *ev = NULL;
    if (!frost__cu.EventCreate) {
        return frost__fail(FROST_BAD_STATE, "frost__event_create: no CUDA device has been opened");
    }
    frost__CUevent event = NULL;
    frost_status s = checked(frost__cu.EventCreate(&event, FROST__CU_EVENT_DEFAULT), "cuEventCreate");
    *ev = s == FROST_OK ? event : NULL;
    return s;
}

void frost__event_destroy(void *ev)
{
    if (ev) {
        frost__cu.EventDestroy((frost__CUevent)ev);
    }
}

frost_status frost__event_record(void *ev, void *stream)
{
    return checked(frost__cu.EventRecord((frost__CUevent)ev, (frost__CUstream)stream), "cuEventRecord");
}

frost_status frost__event_elapsed_ms(void *start, void *end, float *ms)
{
    return checked(frost__cu.EventElapsedTime(ms, (frost__CUevent)start, (frost__CUevent)end),
                   "cuEventElapsedTime");
}
