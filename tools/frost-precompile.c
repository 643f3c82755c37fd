/*
 * frost-precompile — fills the kernel cache ahead of time, with no GPU.
 *
 *     frost-precompile --arch sm_90a [--arch sm_80 ...] [--list FILE] [KEY ...] [--report]
 *
 * Each KEY is a kernel key in its printable form, one shell argument per key:
 *     'src/ops/sdpa/sdpa_fwd.cu:sdpa_fwd_kernel DTYPE_BF16 D_QK=128 D_V=128'
 * A list file holds one key per line; '#' starts a comment, blank lines are skipped, and
 * "-" reads the list from standard input.  Every key is compiled for every --arch with
 * NVRTC into the cache that the library itself uses ($FROST_CACHE_DIR, else
 * $XDG_CACHE_HOME/frost, else ~/.cache/frost), so a later process built with
 * enforce_precompiled finds them.  Keys already cached are not compiled again.
 *
 * Progress goes to stderr, one line per key and arch:
 *     [3/40] sm_90a src/ops/sdpa/sdpa_fwd.cu:sdpa_fwd_kernel ... compiled (1.2 s)
 * --report also prints, on stdout, what ptxas says about each entry point (registers,
 * spill stores and loads, stack frame, static shared memory); this compiles each key a
 * second time with ptxas in verbose mode and needs no GPU either.
 *
 * Exit status: 0 when every key compiled (or was cached), 1 when any failed, 2 for a
 * usage error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "frost/frost.h"
#include "runtime/runtime.h"

#define MAX_ARCHS 8

typedef struct key_list {
    char **texts;
    int count, cap;
} key_list;

static void usage(FILE *to)
{
    fprintf(to,
            "usage: frost-precompile --arch ARCH [--arch ARCH ...] [--list FILE] [--report] [KEY ...]\n"
            "  --arch ARCH   target such as sm_90a (Hopper) or sm_80; may be repeated\n"
            "  --list FILE   keys, one per line ('#' comments; '-' reads stdin)\n"
            "  --report      print registers and spills per key (stdout)\n"
            "  KEY           a printable kernel key, e.g.\n"
            "                'src/ops/testing/axpy.cu:frost_test_axpy SCALE=2.0f'\n"
            "The cache is $FROST_CACHE_DIR, else $XDG_CACHE_HOME/frost, else ~/.cache/frost.\n");
}

static int add_key(key_list *keys, const char *text)
{
    if (keys->count == keys->cap) {
        int cap = keys->cap ? 2 * keys->cap : 64;
        char **grown = realloc(keys->texts, sizeof *grown * (size_t)cap);
        if (!grown) {
            return 0;
        }
        keys->texts = grown;
        keys->cap = cap;
    }
    keys->texts[keys->count] = strdup(text);
    return keys->texts[keys->count++] != NULL;
}

/* Reads keys from a list file; 0 when the file cannot be read. */
static int read_list(const char *path, key_list *keys)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    if (!f) {
        fprintf(stderr, "frost-precompile: cannot open %s\n", path);
        return 0;
    }
    char line[4096];
    int ok = 1;
    while (ok && fgets(line, sizeof line, f)) {
        char *hash = strchr(line, '#');
        if (hash) {
            *hash = '\0';
        }
        char *start = line + strspn(line, " \t\r\n");
        size_t len = strlen(start);
        while (len > 0 && strchr(" \t\r\n", start[len - 1])) {
            start[--len] = '\0';
        }
        if (len > 0) {
            ok = add_key(keys, start);
        }
    }
    if (f != stdin) {
        fclose(f);
    }
    return ok;
}

static double seconds_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Compiles one key for one arch; prints its progress line.  Returns 1 on success. */
static int precompile_one(const char *text, const char *arch, int index, int total, int report)
{
    fprintf(stderr, "[%d/%d] %s %s ... ", index, total, arch, text);
    fflush(stderr);
    frost__kernel_key key;
    frost_status s = frost__key_parse(text, &key);
    if (s != FROST_OK) {
        fprintf(stderr, "bad key\n  %s\n", frost_last_error());
        return 0;
    }
    double start = seconds_now();
    frost__compile_result result;
    s = frost__compile(&key, arch, 0, &result);
    double elapsed = seconds_now() - start;
    if (s != FROST_OK) {
        fprintf(stderr, "FAILED (%s)\n  %s\n", frost_status_name(s), frost_last_error());
        frost__buf_free(&result.log);
        return 0;
    }
    if (result.from_cache) {
        fprintf(stderr, "cached\n");
    } else {
        fprintf(stderr, "compiled (%.2f s)\n", elapsed);
    }
    free(result.cubin);
    frost__buf_free(&result.log);
    if (!report) {
        return 1;
    }
    frost__ptxas_info info;
    frost__buf log = {0};
    s = frost__compile_report(&key, arch, &info, &log);
    if (s == FROST_OK) {
        printf("%-7s %9d %10d %10d %9d %9d  %s%s\n", arch, info.registers, info.spill_store_bytes,
               info.spill_load_bytes, info.stack_bytes, info.static_smem, text,
               info.spill_store_bytes || info.spill_load_bytes ? "  <- spills" : "");
    } else {
        printf("%-7s %9s %10s %10s %9s %9s  %s  (no report: %s)\n", arch, "?", "?", "?", "?", "?", text,
               frost_last_error());
    }
    fflush(stdout);
    frost__buf_free(&log);
    return s == FROST_OK;
}

int main(int argc, char **argv)
{
    const char *archs[MAX_ARCHS];
    int num_archs = 0, report = 0, status = 0;
    key_list keys = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if ((strcmp(a, "--arch") == 0 || strcmp(a, "--list") == 0) && i + 1 >= argc) {
            fprintf(stderr, "frost-precompile: %s needs a value\n", a);
            status = 2;
        } else if (strcmp(a, "--arch") == 0) {
            if (num_archs == MAX_ARCHS) {
                fprintf(stderr, "frost-precompile: at most %d --arch options\n", MAX_ARCHS);
                status = 2;
            } else {
                archs[num_archs++] = argv[++i];
            }
        } else if (strcmp(a, "--list") == 0) {
            status = read_list(argv[++i], &keys) ? status : 2;
        } else if (strcmp(a, "--report") == 0) {
            report = 1;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (a[0] == '-' && a[1] == '-') {
            fprintf(stderr, "frost-precompile: unknown option %s\n", a);
            status = 2;
        } else if (!add_key(&keys, a)) {
            status = 2;
        }
    }
    if (status == 0 && (num_archs == 0 || keys.count == 0)) {
        fprintf(stderr, "frost-precompile: %s\n", num_archs == 0 ? "--arch is required" : "no keys given");
        status = 2;
    }
    if (status != 0) {
        usage(stderr);
    } else if (frost__nvrtc_load() != FROST_OK) {
        fprintf(stderr, "frost-precompile: %s\n", frost_last_error());
        status = 1;
    } else {
        frost__buf where = {0};
        frost__cache_describe(&where);
        int nvrtc = frost__nvrtc_version();
        fprintf(stderr, "frost-precompile: %d keys x %d arch(s), NVRTC %d.%d, cache %s\n", keys.count, num_archs,
                nvrtc / 1000, nvrtc % 1000 / 10, frost__buf_str(&where));
        if (strncmp(frost__buf_str(&where), "off", 3) == 0 || strstr(frost__buf_str(&where), "(readonly)")) {
            fprintf(stderr, "frost-precompile: warning: the cache is not writable in this mode; nothing will be "
                            "stored (unset FROST_CACHE)\n");
        }
        frost__buf_free(&where);
        if (report) {
            printf("%-7s %9s %10s %10s %9s %9s  %s\n", "arch", "registers", "spill_st_B", "spill_ld_B", "stack_B",
                   "smem_B", "key");
        }
        int total = keys.count * num_archs, done = 0, failed = 0;
        for (int a = 0; a < num_archs; a++) {
            for (int k = 0; k < keys.count; k++) {
                failed += !precompile_one(keys.texts[k], archs[a], ++done, total, report);
            }
        }
        fprintf(stderr, "frost-precompile: %d of %d done, %d failed\n", total - failed, total, failed);
        status = failed ? 1 : 0;
    }
    for (int k = 0; k < keys.count; k++) {
        free(keys.texts[k]);
    }
    free(keys.texts);
    return status;
}
