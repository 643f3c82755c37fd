/*
 * runtime.h — the CUDA runtime layer of frost: the CUDA driver and NVRTC loaded with
 * dlopen, device properties, kernel compilation keyed by a printable key, the kernel
 * cache (in-process map, then disk), and launches.
 *
 * frost links no CUDA library.  The driver (libcuda.so.1) and NVRTC (libnvrtc.so.13, then
 * .so.12) are opened on first use; a missing one turns into NO_DEVICE with a message that
 * names the library and dlerror().  NVRTC alone is enough to compile (frost-precompile
 * needs no GPU).
 *
 * Kernel sources live next to their op (src/ops/<op>/ *.cu) and in kernels/common/ (*.cuh).
 * A CMake step embeds them all into the library (frost__embedded_sources); a kernel is
 * named by its path relative to the repository root ("src/ops/sdpa/sdpa_fwd.cu") and
 * includes common headers as "#include \"frost_common.cuh\"" (found by file name).
 *
 * Cache key = SHA-256 over (the source after resolving includes, the NVRTC options, the
 * NVRTC version, the target arch, the frost version).  Disk layout:
 *   $FROST_CACHE_DIR (else $XDG_CACHE_HOME/frost, else ~/.cache/frost)/<2 hex>/<64 hex>.cubin
 * Entries carry a header (magic, version, payload size, SHA-256 of the payload); anything
 * that does not check out is a miss.  Writes go to a temp file renamed into place; a lock
 * file per key (flock) makes concurrent processes compile once.
 * FROST_CACHE=off disables the disk layer; FROST_CACHE=readonly reads but never writes.
 */
#ifndef FROST_RUNTIME_RUNTIME_H
#define FROST_RUNTIME_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include "core/internal.h"

/* ------------------------------------------------------------------------------------ */
/* Embedded sources                                                                      */
/* ------------------------------------------------------------------------------------ */
typedef struct frost__source {
    const char *path; /* "src/ops/sdpa/sdpa_fwd.cu", "kernels/common/frost_common.cuh" */
    const char *text;
    size_t size;
} frost__source;

extern const frost__source frost__embedded_sources[];
extern const size_t frost__embedded_source_count;

/* Finds an embedded source by its path or (for headers) by its file name. */
const frost__source *frost__source_find(const char *path_or_name);

/* ------------------------------------------------------------------------------------ */
/* Loading the driver and NVRTC                                                          */
/* ------------------------------------------------------------------------------------ */
/* Opens libcuda.so.1 and calls cuInit(0).  Idempotent, thread-safe. */
frost_status frost__driver_load(void);
/* Opens NVRTC (libnvrtc.so.13, then libnvrtc.so.12; FROST_NVRTC_PATH overrides).
 * Idempotent, thread-safe. */
frost_status frost__nvrtc_load(void);
/* NVRTC version as major*1000 + minor*10 (e.g. 13000); 0 when not loaded. */
int frost__nvrtc_version(void);

/* ------------------------------------------------------------------------------------ */
/* Devices                                                                               */
/* ------------------------------------------------------------------------------------ */
typedef struct frost__kernel frost__kernel;

typedef struct frost__device {
    int ordinal;
    int cc_major, cc_minor;
    char arch[16];          /* NVRTC target: "sm_90a" on Hopper, "sm_80", ... */
    int sm_count;
    size_t smem_per_block_optin; /* max dynamic shared memory per block after opt-in */
    size_t smem_per_sm;
    size_t l2_bytes;
    size_t global_mem_bytes;
    char name[128];
    void *cu_device;        /* CUdevice, stored widened */
    void *cu_context;       /* CUcontext: the device's retained primary context */
    struct frost__kernel_map *kernels; /* in-process cache of loaded kernels (private) */
} frost__device;

/* Loads the driver and NVRTC, retains the primary context of device `ordinal` and reads
 * its properties.  NO_DEVICE (with the reason) when anything is missing. */
frost_status frost__device_open(int ordinal, frost__device **out);
void frost__device_close(frost__device *dev);
/* Makes dev's context current on the calling thread (cheap when it already is). */
frost_status frost__device_make_current(const frost__device *dev);

/* ------------------------------------------------------------------------------------ */
/* Kernel keys and compilation                                                           */
/* ------------------------------------------------------------------------------------ */
#define FROST__KEY_MAX_DEFINES 32

/* A printable kernel key: which source, which entry point, which -D defines.  Printed as
 *   src/ops/sdpa/sdpa_fwd.cu:sdpa_fwd_kernel DTYPE=bf16 D_QK=128 ...  */
typedef struct frost__kernel_key {
    const char *source;  /* embedded source path */
    const char *entry;   /* extern "C" __global__ function name */
    int num_defines;
    char defines[FROST__KEY_MAX_DEFINES][48]; /* "NAME=VALUE" or "NAME" */
} frost__kernel_key;

void frost__key_init(frost__kernel_key *k, const char *source, const char *entry);
/* Appends a define "NAME=VALUE" (printf-style value); silently bounded. */
void frost__key_define(frost__kernel_key *k, const char *name, const char *value_fmt, ...) FROST__PRINTF(3, 4);
/* Writes the printable form into buf. */
void frost__key_print(const frost__kernel_key *k, frost__buf *out);
/* Parses the printable form back (frost-precompile's input).  INVALID_ARGUMENT if bad. */
frost_status frost__key_parse(const char *text, frost__kernel_key *out);

typedef struct frost__compile_result {
    void *cubin;          /* malloc'd; caller frees */
    size_t cubin_size;
    int from_cache;       /* 1: disk hit; 0: compiled now */
    char key_hex[65];     /* SHA-256 cache key */
    frost__buf log;       /* NVRTC log (warnings or errors) */
} frost__compile_result;

/* Compiles (or fetches from the disk cache) key for arch ("sm_90a", "sm_80").  Needs
 * NVRTC only.  enforce_precompiled: a miss returns COMPILE_REQUIRED.  COMPILE_FAILED
 * carries the NVRTC log in the message.  Caller frees result->cubin and result->log. */
frost_status frost__compile(const frost__kernel_key *key, const char *arch, int enforce_precompiled,
                            frost__compile_result *result);

/* Reports registers, spill bytes and static shared memory of the key's entry in a cubin
 * (via the driver when a device is present: cuFuncGetAttribute), for frost-precompile. */
typedef struct frost__kernel_attrs {
    int registers;
    int local_bytes;  /* per-thread local memory (spills + stack) */
    int static_smem;
    int max_threads;
} frost__kernel_attrs;

/* ------------------------------------------------------------------------------------ */
/* Loaded kernels and launches                                                           */
/* ------------------------------------------------------------------------------------ */
struct frost__kernel {
    void *module;   /* CUmodule */
    void *function; /* CUfunction */
    frost__kernel_attrs attrs;
    size_t dyn_smem_set; /* dynamic shared memory limit already set on the function */
};

/* Returns the loaded kernel for key on dev: in-process map, then disk cache, then NVRTC.
 * The kernel is owned by dev and lives until frost__device_close.  Thread-safe. */
frost_status frost__kernel_get(frost__device *dev, const frost__kernel_key *key, int enforce_precompiled,
                               frost__kernel **out);

typedef struct frost__launch_dims {
    unsigned grid[3];
    unsigned block[3];
    size_t dyn_smem; /* raises the function's dynamic shared-memory limit when needed */
    /* 1: a programmatic dependent launch (sm_90+, CUDA 12.3+ drivers; loader.c):
     * the kernel may be scheduled once every block of the stream's previous kernel has
     * called frost_allow_next_grid() (frost_common.cuh) or exited, and must call
     * frost_wait_prior_grid() before it touches what that kernel wrote.  Elsewhere a plain
     * launch, where both calls are no-ops. */
    int early;
} frost__launch_dims;

/* Launches k with the kernel parameters in args (cuLaunchKernel's kernelParams).
 * stream is a CUstream (NULL = default stream).  DEVICE_ERROR names the driver error. */
frost_status frost__launch(const frost__device *dev, frost__kernel *k, const frost__launch_dims *dims, void **args,
                           void *stream);

/* ------------------------------------------------------------------------------------ */
/* Thin driver wrappers (for engines, tests and tools)                                  */
/* ------------------------------------------------------------------------------------ */
frost_status frost__dev_alloc(const frost__device *dev, size_t bytes, void **ptr);
void frost__dev_free(const frost__device *dev, void *ptr);
frost_status frost__dev_memset_async(const frost__device *dev, void *ptr, int byte_value, size_t bytes, void *stream);
frost_status frost__dev_copy_htod(const frost__device *dev, void *dst, const void *src, size_t bytes);
frost_status frost__dev_copy_dtoh(const frost__device *dev, void *dst, const void *src, size_t bytes);
frost_status frost__dev_synchronize(const frost__device *dev);
/* Events for timing (frost-bench). */
frost_status frost__event_create(void **ev);
void frost__event_destroy(void *ev);
frost_status frost__event_record(void *ev, void *stream);
frost_status frost__event_elapsed_ms(void *start, void *end, float *ms);

/* ------------------------------------------------------------------------------------ */
/* Additions (appended; see src/runtime/compile.c and disk_cache.c)                      */
/* ------------------------------------------------------------------------------------ */
/* Number of NVRTC compilations this process has run (a disk-cache hit runs none).  Tests
 * use it to prove that the cache worked and that concurrent processes compiled once. */
unsigned long frost__compile_count(void);

/* What ptxas reported for one entry point (frost-precompile --report; no GPU needed). */
typedef struct frost__ptxas_info {
    int registers;
    int stack_bytes;       /* per-thread stack frame */
    int spill_store_bytes; /* per thread */
    int spill_load_bytes;
    int static_smem;       /* bytes of static shared memory */
} frost__ptxas_info;

/* Reads the ptxas -v lines of entry point `entry` from a compile log (as returned by
 * frost__compile_report, for that entry or a sibling of the same cubin) into info;
 * returns 1 when its registers were found, 0 when not (info untouched when the entry's
 * report is missing altogether). */
int frost__ptxas_parse(const char *log, const char *entry, frost__ptxas_info *info);

/* Compiles key for arch with NVRTC and --ptxas-options=-v, bypassing every cache, and
 * parses the ptxas report of key->entry from the log (which it appends to *log; caller
 * frees).  COMPILE_FAILED when the compile fails or ptxas reports nothing for the entry. */
frost_status frost__compile_report(const frost__kernel_key *key, const char *arch, frost__ptxas_info *info,
                                   frost__buf *log);

/* One line saying where the disk cache is and how it is used:
 *   "/home/u/.cache/frost (read-write)", "... (readonly)", "off (FROST_CACHE=off)". */
void frost__cache_describe(frost__buf *out);

#endif /* FROST_RUNTIME_RUNTIME_H */
