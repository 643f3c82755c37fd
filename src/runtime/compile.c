/*
 * compile.c — turns a kernel key into a cubin: cache key, disk cache, NVRTC.
 *
 * Steps of frost__compile(key, arch):
 *   1. Gather the source and its include closure (source.c) and the NVRTC options:
 *        --gpu-architecture=<arch> -std=c++17 -default-device -lineinfo -D<define>...
 *      --use_fast_math is deliberately absent: kernels pick exp2 and friends themselves.
 *      A real sm_XX(a) target makes NVRTC emit a cubin directly (nvrtcGetCUBIN), so the
 *      driver never JIT-compiles PTX.
 *   2. Cache key = SHA-256 over tagged, length-prefixed fields: the frost version, the
 *      arch, the NVRTC version, the source path and text, every header's include name,
 *      path and text in include order, and every option.  Length prefixes keep distinct
 *      inputs from concatenating into the same bytes.  The entry name is not hashed: one
 *      cubin holds every entry point of its source.
 *   3. Disk cache (disk_cache.c) by FROST_CACHE mode: read; on a miss in read-write mode
 *      take the key's lock, read again, compile, write, unlock.  enforce_precompiled turns
 *      the compile step into COMPILE_REQUIRED.
 *   4. NVRTC: headers are passed as named headers, so its messages cite real file names
 *      and lines; the log goes to result->log and, on failure, into the message.
 *
 * frost__compile_report compiles again with --ptxas-options=-v and no cache, and reads
 * registers, spills and shared memory of the entry from ptxas's report in the log: that
 * needs no GPU, which is the point (frost-precompile --report).
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/disk_cache.h"
#include "runtime/loader.h"
#include "runtime/sha256.h"
#include "runtime/source.h"

#define MAX_OPTIONS (FROST__KEY_MAX_DEFINES + 8)
#define LOG_LINES_IN_MESSAGE 20

static atomic_ulong compile_counter;

unsigned long frost__compile_count(void)
{
    return atomic_load(&compile_counter);
}

typedef struct compile_input {
    frost__source_closure closure;
    int num_options;
    const char *options[MAX_OPTIONS];
    char option_text[MAX_OPTIONS][64];
    uint8_t cache_key[FROST__SHA256_BYTES];
    frost__buf printable; /* the key's printable form, for messages */
} compile_input;

static double seconds_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* "sm_" followed by 2-3 digits and an optional 'a' or 'f'. */
static int arch_is_valid(const char *arch)
{
    if (!arch || strncmp(arch, "sm_", 3) != 0) {
        return 0;
    }
    const char *p = arch + 3;
    int digits = 0;
    while (*p >= '0' && *p <= '9') {
        p++, digits++;
    }
    if (*p == 'a' || *p == 'f') {
        p++;
    }
    return digits >= 2 && digits <= 3 && *p == '\0';
}

static void add_option(compile_input *in, const char *fmt, const char *value)
{
    snprintf(in->option_text[in->num_options], sizeof in->option_text[0], fmt, value);
    in->options[in->num_options] = in->option_text[in->num_options];
    in->num_options++;
}

static void hash_field(frost__sha256_ctx *h, const char *tag, const void *data, size_t size)
{
    uint8_t length[8];
    for (int i = 0; i < 8; i++) {
        length[i] = (uint8_t)((uint64_t)size >> (8 * i));
    }
    frost__sha256_update(h, tag, strlen(tag) + 1);
    frost__sha256_update(h, length, sizeof length);
    frost__sha256_update(h, data, size);
}

static void hash_string(frost__sha256_ctx *h, const char *tag, const char *text)
{
    hash_field(h, tag, text, strlen(text));
}

static void compute_cache_key(compile_input *in, const char *arch)
{
    char numbers[64];
    frost__sha256_ctx h;
    frost__sha256_init(&h);
    hash_string(&h, "frost-kernel-cache", "1");
    snprintf(numbers, sizeof numbers, "%d", FROST_VERSION_NUMBER);
    hash_string(&h, "frost-version", numbers);
    hash_string(&h, "arch", arch);
    snprintf(numbers, sizeof numbers, "%d", frost__nvrtc_version());
    hash_string(&h, "nvrtc-version", numbers);
    const frost__source_closure *c = &in->closure;
    hash_string(&h, "source-path", c->root->path);
    hash_field(&h, "source-text", c->root->text, c->root->size);
    for (int i = 0; i < c->count; i++) {
        hash_string(&h, "header-name", c->include_names[i]);
        hash_string(&h, "header-path", c->headers[i]->path);
        hash_field(&h, "header-text", c->headers[i]->text, c->headers[i]->size);
    }
    for (int i = 0; i < in->num_options; i++) {
        hash_string(&h, "option", in->options[i]);
    }
    frost__sha256_final(&h, in->cache_key);
}

/* Validates key and arch, loads NVRTC, builds the closure, options and cache key. */
static frost_status prepare(const frost__kernel_key *key, const char *arch, compile_input *in)
{
    memset(in, 0, sizeof *in);
    if (!key || !key->source || !key->entry) {
        return frost__fail(FROST_INTERNAL, "kernel key without a source or entry point");
    }
    frost__key_print(key, &in->printable);
    if (key->num_defines < 0) {
        return frost__fail(FROST_INTERNAL, "kernel key %s is broken: a define did not fit (see the log)",
                           frost__buf_str(&in->printable));
    }
    if (!arch_is_valid(arch)) {
        return frost__fail(FROST_INVALID_ARGUMENT, "kernel %s: \"%s\" is not a GPU architecture like sm_90a or sm_80",
                           frost__buf_str(&in->printable), arch ? arch : "(null)");
    }
    frost_status s = frost__nvrtc_load();
    if (s == FROST_OK) {
        s = frost__source_closure_build(key->source, &in->closure);
    }
    if (s != FROST_OK) {
        return s;
    }
    add_option(in, "--gpu-architecture=%s", arch);
    add_option(in, "%s", "-std=c++17");
    add_option(in, "%s", "-default-device");
    add_option(in, "%s", "-lineinfo");
    for (int i = 0; i < key->num_defines; i++) {
        add_option(in, "-D%s", key->defines[i]);
    }
    compute_cache_key(in, arch);
    return FROST_OK;
}

/* Appends the first LOG_LINES_IN_MESSAGE lines of log to msg. */
static void append_log_head(frost__buf *msg, const char *log)
{
    int lines = 0;
    const char *p = log;
    while (*p && lines < LOG_LINES_IN_MESSAGE) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        frost__buf_printf(msg, "\n  %.*s", (int)len, p);
        lines++;
        p = nl ? nl + 1 : p + len;
    }
    if (*p) {
        frost__buf_printf(msg, "\n  ... (the full log is in the compile result)");
    }
}

/* Runs NVRTC with extra_option (may be NULL).  On OK *cubin is malloc'd (when wanted). */
static frost_status run_nvrtc(const compile_input *in, const char *arch, const char *extra_option, void **cubin,
                              size_t *cubin_size, frost__buf *log)
{
    const frost__source_closure *c = &in->closure;
    const char *header_texts[FROST__MAX_HEADERS], *header_names[FROST__MAX_HEADERS];
    for (int i = 0; i < c->count; i++) {
        header_texts[i] = c->headers[i]->text;
        header_names[i] = c->include_names[i];
    }
    const char *options[MAX_OPTIONS + 1];
    memcpy(options, in->options, sizeof(const char *) * (size_t)in->num_options);
    int num_options = in->num_options;
    if (extra_option) {
        options[num_options++] = extra_option;
    }
    const char *key_text = frost__buf_str(&in->printable);
    frost__nvrtcProgram program = NULL;
    frost__nvrtcResult r =
        frost__nvrtc.CreateProgram(&program, c->root->text, c->root->path, c->count, header_texts, header_names);
    if (r != FROST__NVRTC_SUCCESS) {
        return frost__fail(r == FROST__NVRTC_ERROR_OUT_OF_MEMORY ? FROST_OUT_OF_MEMORY : FROST_COMPILE_FAILED,
                           "kernel %s: nvrtcCreateProgram failed: %s", key_text, frost__nvrtc.GetErrorString(r));
    }
    double start = seconds_now();
    frost__nvrtcResult compiled = frost__nvrtc.CompileProgram(program, num_options, options);
    double elapsed = seconds_now() - start;
    atomic_fetch_add(&compile_counter, 1);

    size_t log_size = 0;
    if (frost__nvrtc.GetProgramLogSize(program, &log_size) == FROST__NVRTC_SUCCESS && log_size > 1) {
        char *text = malloc(log_size);
        if (text && frost__nvrtc.GetProgramLog(program, text) == FROST__NVRTC_SUCCESS) {
            frost__buf_printf(log, "%s", text);
        }
        free(text);
    }
    frost_status s = FROST_OK;
    if (compiled != FROST__NVRTC_SUCCESS) {
        frost__buf msg = {0};
        frost__buf_printf(&msg, "kernel %s for %s did not compile: %s", key_text, arch,
                          frost__nvrtc.GetErrorString(compiled));
        if (compiled == FROST__NVRTC_ERROR_BUILTIN_OPERATION_FAILURE) {
            frost__buf_printf(&msg, " (NVRTC could not load libnvrtc-builtins; it must sit next to %s or on "
                                    "LD_LIBRARY_PATH, with the same version)", frost__nvrtc_library());
        }
        append_log_head(&msg, frost__buf_str(log));
        s = frost__fail(FROST_COMPILE_FAILED, "%s", frost__buf_str(&msg));
        frost__buf_free(&msg);
    } else if (cubin) {
        size_t size = 0;
        void *data = NULL;
        if (frost__nvrtc.GetCUBINSize(program, &size) != FROST__NVRTC_SUCCESS || size == 0) {
            s = frost__fail(FROST_COMPILE_FAILED, "kernel %s for %s: NVRTC produced no cubin", key_text, arch);
        } else if (!(data = malloc(size))) {
            s = frost__fail(FROST_OUT_OF_MEMORY, "kernel %s: out of memory for a %zu-byte cubin", key_text, size);
        } else if (frost__nvrtc.GetCUBIN(program, data) != FROST__NVRTC_SUCCESS) {
            free(data);
            s = frost__fail(FROST_COMPILE_FAILED, "kernel %s for %s: nvrtcGetCUBIN failed", key_text, arch);
        } else {
            *cubin = data;
            *cubin_size = size;
            frost__log(FROST_LOG_INFO, "compiled kernel %s for %s in %.2f s (%zu bytes)", key_text, arch, elapsed,
                       size);
            if (log->len > 0) {
                frost__log(FROST_LOG_DEBUG, "NVRTC log for %s:\n%s", key_text, frost__buf_str(log));
            }
        }
    }
    frost__nvrtc.DestroyProgram(&program);
    return s;
}

frost_status frost__compile(const frost__kernel_key *key, const char *arch, int enforce_precompiled,
                            frost__compile_result *result)
{
    memset(result, 0, sizeof *result);
    compile_input *in = malloc(sizeof *in);
    if (!in) {
        return frost__fail(FROST_OUT_OF_MEMORY, "out of memory preparing a kernel compile");
    }
    frost_status s = prepare(key, arch, in);
    if (s != FROST_OK) {
        frost__buf_free(&in->printable);
        free(in);
        return s;
    }
    frost__sha256_hex(in->cache_key, result->key_hex);
    const char *key_text = frost__buf_str(&in->printable);

    frost__cache_mode mode = frost__cache_mode_get();
    frost__buf dir = {0};
    if (mode != FROST__CACHE_OFF && !frost__cache_dir(&dir)) {
        frost__log(FROST_LOG_DEBUG, "kernel cache: no FROST_CACHE_DIR, XDG_CACHE_HOME or HOME; cache off");
        mode = FROST__CACHE_OFF;
    }
    int lock_fd = -1;
    if (mode != FROST__CACHE_OFF) {
        int hit = frost__cache_read(dir.data, in->cache_key, &result->cubin, &result->cubin_size);
        if (!hit && mode == FROST__CACHE_READWRITE && !enforce_precompiled) {
            lock_fd = frost__cache_lock(dir.data, in->cache_key);
            hit = lock_fd >= 0 && frost__cache_read(dir.data, in->cache_key, &result->cubin, &result->cubin_size);
        }
        if (hit) {
            result->from_cache = 1;
            frost__log(FROST_LOG_DEBUG, "kernel cache hit: %s for %s (%s)", key_text, arch, result->key_hex);
        } else {
            frost__log(FROST_LOG_DEBUG, "kernel cache miss: %s for %s (%s)", key_text, arch, result->key_hex);
        }
    }
    if (!result->from_cache) {
        if (enforce_precompiled) {
            s = frost__fail(FROST_COMPILE_REQUIRED,
                            "kernel %s for %s (cache key %s) is not in the kernel cache%s%s and enforce_precompiled "
                            "is set; fill the cache with: frost-precompile --arch %s '%s'",
                            key_text, arch, result->key_hex, mode == FROST__CACHE_OFF ? " (FROST_CACHE=off)" : " at ",
                            mode == FROST__CACHE_OFF ? "" : frost__buf_str(&dir), arch, key_text);
        } else {
            s = run_nvrtc(in, arch, NULL, &result->cubin, &result->cubin_size, &result->log);
            if (s == FROST_OK && mode == FROST__CACHE_READWRITE) {
                frost__cache_write(dir.data, in->cache_key, result->cubin, result->cubin_size);
            }
        }
    }
    frost__cache_unlock(lock_fd);
    frost__buf_free(&dir);
    frost__buf_free(&in->printable);
    free(in);
    return s;
}

/* ---- ptxas report -------------------------------------------------------------------------- */
/* Reads the number just before `suffix` on the line [line, end), or -1. */
static int number_before(const char *line, const char *end, const char *suffix)
{
    size_t suffix_len = strlen(suffix);
    for (const char *p = line; p + suffix_len <= end; p++) {
        if (memcmp(p, suffix, suffix_len) != 0) {
            continue;
        }
        const char *q = p;
        while (q > line && q[-1] == ' ') {
            q--;
        }
        const char *digits_end = q;
        while (q > line && q[-1] >= '0' && q[-1] <= '9') {
            q--;
        }
        if (q < digits_end) {
            return atoi(q);
        }
    }
    return -1;
}

/* Parses ptxas -v lines that follow "Compiling entry function '<entry>'" (runtime.h). */
int frost__ptxas_parse(const char *log, const char *entry, frost__ptxas_info *info)
{
    char marker[160];
    snprintf(marker, sizeof marker, "Compiling entry function '%s'", entry);
    const char *p = strstr(log, marker);
    if (!p) {
        return 0;
    }
    memset(info, 0, sizeof *info);
    info->registers = -1;
    const char *line = strchr(p, '\n');
    while (line && *++line) {
        const char *end = strchr(line, '\n');
        end = end ? end : line + strlen(line);
        if (memmem(line, (size_t)(end - line), "Compiling entry function", 24)) {
            break; /* the next function's report */
        }
        int v;
        if ((v = number_before(line, end, "bytes stack frame")) >= 0) {
            info->stack_bytes = v;
        }
        if ((v = number_before(line, end, "bytes spill stores")) >= 0) {
            info->spill_store_bytes = v;
        }
        if ((v = number_before(line, end, "bytes spill loads")) >= 0) {
            info->spill_load_bytes = v;
        }
        if ((v = number_before(line, end, "registers")) >= 0) {
            info->registers = v;
        }
        if ((v = number_before(line, end, "bytes smem")) >= 0) {
            info->static_smem = v;
        }
        line = *end ? end : NULL;
    }
    return info->registers >= 0;
}

frost_status frost__compile_report(const frost__kernel_key *key, const char *arch, frost__ptxas_info *info,
                                   frost__buf *log)
{
    compile_input *in = malloc(sizeof *in);
    if (!in) {
        return frost__fail(FROST_OUT_OF_MEMORY, "out of memory preparing a kernel compile");
    }
    frost_status s = prepare(key, arch, in);
    if (s == FROST_OK) {
        s = run_nvrtc(in, arch, "--ptxas-options=-v", NULL, NULL, log);
    }
    if (s == FROST_OK && !frost__ptxas_parse(frost__buf_str(log), key->entry, info)) {
        s = frost__fail(FROST_COMPILE_FAILED, "kernel %s for %s: ptxas reported nothing for entry %s",
                        frost__buf_str(&in->printable), arch, key->entry);
    }
    frost__buf_free(&in->printable);
    free(in);
    return s;
}
