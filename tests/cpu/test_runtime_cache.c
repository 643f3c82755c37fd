/*
 * test_runtime_cache.c — the disk layer of the kernel cache (src/runtime/disk_cache.c and
 * compile.c), with NVRTC and no GPU.
 *
 * Every case works in a fresh directory from mkdtemp (FROST_CACHE_DIR) and removes it.
 * frost__compile_count() tells whether NVRTC ran, so "hit" and "miss" are measured, not
 * inferred.  Cases:
 *   - concurrent processes: four forked children compile one new key at the same moment;
 *     exactly one NVRTC run happens among them and all get identical cubins.  It runs
 *     first, while the parent has only loaded NVRTC and compiled nothing.
 *   - a miss compiles and writes <dir>/<2 hex>/<hex>.cubin (and the .lock), a second call hits
 *     with the same bytes, and no temp files are left behind.
 *   - a changed define is another key.
 *   - damaged entries (truncated, empty, flipped bits in header and payload, garbage, an
 *     entry of another key, a directory in its place) are misses that recompile and, where
 *     possible, repair the entry.
 *   - FROST_CACHE=readonly reads but creates nothing; FROST_CACHE=off ignores the disk.
 *   - enforce_precompiled: COMPILE_REQUIRED on a miss (naming the key), OK on a hit.
 *   - an unusable cache directory never fails a compile.
 *   - the cache location follows FROST_CACHE_DIR, XDG_CACHE_HOME, HOME.
 * Skips (exit 77) when NVRTC cannot be loaded.
 */
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/runtime.h"
#include "runtime/sha256.h"
#include "test_util.h"

#define AXPY "src/ops/testing/axpy.cu"

static char cache_dir[256];

static void fresh_cache_dir(void)
{
    snprintf(cache_dir, sizeof cache_dir, "/tmp/frost-cache-test-XXXXXX");
    if (!mkdtemp(cache_dir)) {
        tu_failf("mkdtemp failed");
        exit(1);
    }
    setenv("FROST_CACHE_DIR", cache_dir, 1);
    unsetenv("FROST_CACHE");
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static void remove_cache_dir(void)
{
    nftw(cache_dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

static int count_one_file;
static int count_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)path, (void)st, (void)ftw;
    count_one_file += flag == FTW_F;
    return 0;
}

static int files_under(const char *dir)
{
    count_one_file = 0;
    nftw(dir, count_one, 16, FTW_PHYS);
    return count_one_file;
}

static int tmp_found;
static int find_tmp(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    tmp_found += strstr(path, ".tmp.") != NULL;
    return 0;
}

static void entry_path(const char *hex, const char *suffix, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%.2s/%s.%s", cache_dir, hex, hex, suffix);
}

static void axpy_key(frost__kernel_key *k, const char *scale)
{
    frost__key_init(k, AXPY, "frost_test_axpy");
    if (scale) {
        frost__key_define(k, "SCALE", "%s", scale);
    }
}

/* One compile; checks status, hit/miss and NVRTC runs; returns the result (caller frees). */
static frost__compile_result compile_expect(const frost__kernel_key *k, int enforce, frost_status status,
                                            int expect_hit, int line)
{
    unsigned long before = frost__compile_count();
    frost__compile_result r;
    frost_status s = frost__compile(k, "sm_90a", enforce, &r);
    if (s != status) {
        tu_failf("line %d: frost__compile returned %s, expected %s: %s", line, frost_status_name(s),
                 frost_status_name(status), frost_last_error());
    } else if (s == FROST_OK) {
        unsigned long runs = frost__compile_count() - before;
        if (r.from_cache != expect_hit || runs != (expect_hit ? 0u : 1u)) {
            tu_failf("line %d: expected a %s; got from_cache=%d after %lu NVRTC runs", line,
                     expect_hit ? "hit" : "miss", r.from_cache, runs);
        }
    }
    return r;
}
#define COMPILE(k, enforce, status, hit) compile_expect(k, enforce, status, hit, __LINE__)

static void release(frost__compile_result *r)
{
    free(r->cubin);
    frost__buf_free(&r->log);
}

/* ---- cases ------------------------------------------------------------------------------- */
typedef struct child_report {
    int status;
    int from_cache;
    unsigned long compiles;
    uint8_t digest[FROST__SHA256_BYTES];
} child_report;

static void case_concurrent_processes(void)
{
    enum { CHILDREN = 4 };
    int go[2], results[2];
    if (pipe(go) != 0 || pipe(results) != 0) {
        tu_failf("pipe failed");
        return;
    }
    pid_t pids[CHILDREN];
    for (int i = 0; i < CHILDREN; i++) {
        pids[i] = fork();
        if (pids[i] == 0) {
            close(go[1]);
            char byte;
            if (read(go[0], &byte, 1) != 1) { /* wait until every child exists */
                _exit(2);
            }
            frost__kernel_key k;
            axpy_key(&k, "7.0f");
            child_report rep = {0};
            frost__compile_result r;
            rep.status = frost__compile(&k, "sm_90a", 0, &r);
            rep.from_cache = r.from_cache;
            rep.compiles = frost__compile_count();
            if (rep.status == FROST_OK) {
                frost__sha256(r.cubin, r.cubin_size, rep.digest);
            }
            release(&r);
            _exit(write(results[1], &rep, sizeof rep) == (ssize_t)sizeof rep ? 0 : 3);
        }
    }
    close(go[0]);
    close(results[1]);
    char bytes[CHILDREN] = {0};
    if (write(go[1], bytes, CHILDREN) != CHILDREN) { /* release them all at once */
        tu_failf("write to children failed");
    }
    close(go[1]);
    unsigned long total_compiles = 0;
    int hits = 0;
    child_report first = {0};
    for (int i = 0; i < CHILDREN; i++) {
        child_report rep;
        if (read(results[0], &rep, sizeof rep) != (ssize_t)sizeof rep) {
            tu_failf("child %d sent no report", i);
            continue;
        }
        TU_CHECK(rep.status == FROST_OK);
        total_compiles += rep.compiles;
        hits += rep.from_cache;
        if (i == 0) {
            first = rep;
        } else {
            TU_CHECK(memcmp(first.digest, rep.digest, sizeof rep.digest) == 0);
        }
    }
    close(results[0]);
    for (int i = 0; i < CHILDREN; i++) {
        int wstatus = 0;
        waitpid(pids[i], &wstatus, 0);
        TU_CHECK(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0);
    }
    if (total_compiles != 1 || hits != CHILDREN - 1) {
        tu_failf("%d processes compiled %lu times with %d cache hits; expected 1 compile", CHILDREN, total_compiles,
                 hits);
    }
}

static void case_miss_then_hit(void)
{
    frost__kernel_key k;
    axpy_key(&k, NULL);
    frost__compile_result miss = COMPILE(&k, 0, FROST_OK, 0);
    frost__compile_result hit = COMPILE(&k, 0, FROST_OK, 1);
    TU_CHECK(strcmp(miss.key_hex, hit.key_hex) == 0);
    TU_CHECK(miss.cubin_size == hit.cubin_size && miss.cubin && hit.cubin &&
             memcmp(miss.cubin, hit.cubin, miss.cubin_size) == 0);
    char path[512];
    struct stat st;
    entry_path(miss.key_hex, "cubin", path, sizeof path);
    TU_CHECK(stat(path, &st) == 0 && (size_t)st.st_size == miss.cubin_size + 88);
    entry_path(miss.key_hex, "lock", path, sizeof path);
    TU_CHECK(stat(path, &st) == 0);
    tmp_found = 0;
    nftw(cache_dir, find_tmp, 16, FTW_PHYS);
    TU_CHECK(tmp_found == 0);
    release(&miss);
    release(&hit);
}

static void case_define_changes_key(void)
{
    frost__kernel_key a, b;
    axpy_key(&a, "2.0f");
    axpy_key(&b, "4.0f");
    frost__compile_result ra = COMPILE(&a, 0, FROST_OK, 0);
    frost__compile_result rb = COMPILE(&b, 0, FROST_OK, 0);
    TU_CHECK(strcmp(ra.key_hex, rb.key_hex) != 0);
    release(&ra);
    release(&rb);
    ra = COMPILE(&a, 0, FROST_OK, 1);
    rb = COMPILE(&b, 0, FROST_OK, 1);
    release(&ra);
    release(&rb);
}

/* Damage kinds applied to a good entry file of `size` bytes. */
enum { TRUNCATE_HALF, TRUNCATE_HEADER, EMPTY, FLIP_PAYLOAD, FLIP_MAGIC, FLIP_SIZE, FLIP_CHECKSUM, GARBAGE,
       OTHER_KEY, DAMAGE_KINDS };
static const char *const damage_names[DAMAGE_KINDS] = {
    "truncated to half", "truncated inside the header", "empty", "payload byte flipped", "magic byte flipped",
    "size field flipped", "checksum byte flipped", "random garbage", "entry of another key"};

static void damage(const char *path, const char *other_path, int kind, size_t size)
{
    FILE *f = NULL;
    switch (kind) {
    case TRUNCATE_HALF: TU_CHECK(truncate(path, (off_t)size / 2) == 0); return;
    case TRUNCATE_HEADER: TU_CHECK(truncate(path, 40) == 0); return;
    case EMPTY: TU_CHECK(truncate(path, 0) == 0); return;
    case OTHER_KEY: {
        char command[1200];
        snprintf(command, sizeof command, "cp '%s' '%s'", other_path, path);
        TU_CHECK(system(command) == 0);
        return;
    }
    case GARBAGE: {
        f = fopen(path, "wb");
        tu_rng rng = tu_rng_make(42);
        for (size_t i = 0; f && i < size; i++) {
            fputc((int)(tu_next(&rng) & 0xff), f);
        }
        break;
    }
    default: {
        static const long offsets[] = {[FLIP_PAYLOAD] = 88 + 300, [FLIP_MAGIC] = 3, [FLIP_SIZE] = 17,
                                       [FLIP_CHECKSUM] = 60};
        f = fopen(path, "r+b");
        int c = -1;
        if (f && fseek(f, offsets[kind], SEEK_SET) == 0) {
            c = fgetc(f);
        }
        if (c >= 0 && fseek(f, offsets[kind], SEEK_SET) == 0) {
            fputc(c ^ 0x10, f);
        }
        TU_CHECK(c >= 0);
    }
    }
    TU_CHECK(f != NULL);
    if (f) {
        fclose(f);
    }
}

static void case_damaged_entries(void)
{
    frost__kernel_key k, other;
    axpy_key(&k, NULL);
    axpy_key(&other, "5.0f");
    frost__compile_result good = COMPILE(&k, 0, FROST_OK, 0);
    frost__compile_result other_good = COMPILE(&other, 0, FROST_OK, 0);
    char path[512], other_path[512];
    entry_path(good.key_hex, "cubin", path, sizeof path);
    entry_path(other_good.key_hex, "cubin", other_path, sizeof other_path);
    size_t entry_size = good.cubin_size + 88;
    for (int kind = 0; kind < DAMAGE_KINDS; kind++) {
        damage(path, other_path, kind, entry_size);
        frost__compile_result r = COMPILE(&k, 0, FROST_OK, 0);
        if (!r.cubin || r.cubin_size != good.cubin_size || memcmp(r.cubin, good.cubin, r.cubin_size) != 0) {
            tu_failf("entry %s: the recompiled cubin differs", damage_names[kind]);
        }
        release(&r);
        r = COMPILE(&k, 0, FROST_OK, 1); /* repaired by the recompile */
        release(&r);
    }
    /* A directory where the entry should be: a miss each time, never a failure. */
    TU_CHECK(remove(path) == 0 && mkdir(path, 0755) == 0);
    for (int i = 0; i < 2; i++) {
        frost__compile_result r = COMPILE(&k, 0, FROST_OK, 0);
        release(&r);
    }
    TU_CHECK(rmdir(path) == 0);
    release(&good);
    release(&other_good);
}

static void case_readonly(void)
{
    frost__kernel_key k;
    axpy_key(&k, NULL);
    setenv("FROST_CACHE", "readonly", 1);
    frost__compile_result r = COMPILE(&k, 0, FROST_OK, 0);
    release(&r);
    TU_CHECK(files_under(cache_dir) == 0); /* no entry, no lock file, no directory */
    r = COMPILE(&k, 1, FROST_COMPILE_REQUIRED, 0);
    release(&r);
    unsetenv("FROST_CACHE");
    r = COMPILE(&k, 0, FROST_OK, 0);
    release(&r);
    int files = files_under(cache_dir);
    setenv("FROST_CACHE", "readonly", 1);
    r = COMPILE(&k, 0, FROST_OK, 1);
    release(&r);
    r = COMPILE(&k, 1, FROST_OK, 1);
    release(&r);
    TU_CHECK(files_under(cache_dir) == files);
}

static void case_off(void)
{
    frost__kernel_key k;
    axpy_key(&k, NULL);
    frost__compile_result r = COMPILE(&k, 0, FROST_OK, 0);
    release(&r);
    int files = files_under(cache_dir);
    setenv("FROST_CACHE", "off", 1);
    r = COMPILE(&k, 0, FROST_OK, 0); /* the entry exists but the disk is not consulted */
    release(&r);
    r = COMPILE(&k, 1, FROST_COMPILE_REQUIRED, 0);
    TU_CHECK(strstr(frost_last_error(), "FROST_CACHE=off") != NULL);
    release(&r);
    TU_CHECK(files_under(cache_dir) == files);
}

static void case_enforce_precompiled(void)
{
    frost__kernel_key k;
    axpy_key(&k, "6.0f");
    frost__compile_result r = COMPILE(&k, 1, FROST_COMPILE_REQUIRED, 0);
    TU_CHECK(strstr(frost_last_error(), AXPY ":frost_test_axpy SCALE=6.0f") != NULL);
    TU_CHECK(strstr(frost_last_error(), "frost-precompile") != NULL);
    TU_CHECK(r.cubin == NULL);
    release(&r);
    TU_CHECK(files_under(cache_dir) == 0);
    r = COMPILE(&k, 0, FROST_OK, 0);
    release(&r);
    r = COMPILE(&k, 1, FROST_OK, 1);
    TU_CHECK(r.cubin != NULL);
    release(&r);
}

static void case_unusable_dir(void)
{
    frost__kernel_key k;
    axpy_key(&k, NULL);
    char file_path[300];
    snprintf(file_path, sizeof file_path, "%s/plain-file", cache_dir);
    FILE *f = fopen(file_path, "w");
    TU_CHECK(f != NULL);
    if (f) {
        fclose(f);
    }
    setenv("FROST_CACHE_DIR", file_path, 1); /* a file where a directory should be */
    for (int i = 0; i < 2; i++) {
        frost__compile_result r = COMPILE(&k, 0, FROST_OK, 0);
        release(&r);
    }
    setenv("FROST_CACHE_DIR", cache_dir, 1);
}

static void expect_location(const char *expected)
{
    frost__buf b = {0};
    frost__cache_describe(&b);
    if (strcmp(frost__buf_str(&b), expected) != 0) {
        tu_failf("cache location \"%s\", expected \"%s\"", frost__buf_str(&b), expected);
    }
    frost__buf_free(&b);
}

static void case_location(void)
{
    char *home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
    char *xdg = getenv("XDG_CACHE_HOME") ? strdup(getenv("XDG_CACHE_HOME")) : NULL;
    setenv("FROST_CACHE_DIR", "/a/b", 1);
    setenv("XDG_CACHE_HOME", "/x", 1);
    setenv("HOME", "/h", 1);
    expect_location("/a/b (read-write)");
    unsetenv("FROST_CACHE_DIR");
    expect_location("/x/frost (read-write)");
    unsetenv("XDG_CACHE_HOME");
    expect_location("/h/.cache/frost (read-write)");
    setenv("FROST_CACHE", "readonly", 1);
    expect_location("/h/.cache/frost (readonly)");
    setenv("FROST_CACHE", "off", 1);
    expect_location("off (FROST_CACHE=off)");
    unsetenv("FROST_CACHE");
    unsetenv("HOME");
    expect_location("off (no FROST_CACHE_DIR, XDG_CACHE_HOME or HOME)");
    if (home) {
        setenv("HOME", home, 1);
    }
    if (xdg) {
        setenv("XDG_CACHE_HOME", xdg, 1);
    }
    free(home);
    free(xdg);
    setenv("FROST_CACHE_DIR", cache_dir, 1);
}

int main(void)
{
    if (frost__nvrtc_load() != FROST_OK) {
        printf("skipped: %s\n", frost_last_error());
        return 77;
    }
    static const struct {
        const char *name;
        void (*run)(void);
    } cases[] = {
        {"concurrent_processes", case_concurrent_processes}, /* first: see the top comment */
        {"miss_then_hit", case_miss_then_hit},
        {"define_changes_key", case_define_changes_key},
        {"damaged_entries", case_damaged_entries},
        {"readonly", case_readonly},
        {"off", case_off},
        {"enforce_precompiled", case_enforce_precompiled},
        {"unusable_dir", case_unusable_dir},
        {"location", case_location},
    };
    int n = (int)(sizeof cases / sizeof cases[0]), only = tu_case_filter(), run = 0;
    for (int i = 0; i < n; i++) {
        if (only >= 0 && i != only) {
            continue;
        }
        run++;
        tu_set_context("test_runtime_cache", 0, i, cases[i].name);
        fresh_cache_dir();
        tu_case_begin();
        cases[i].run();
        tu_case_end();
        remove_cache_dir();
    }
    return tu_finish(run);
}
