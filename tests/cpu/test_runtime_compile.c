/*
 * test_runtime_compile.c — NVRTC compilation without a GPU (src/runtime/compile.c).
 *
 * Compiles the test kernel src/ops/testing/axpy.cu for sm_90a and sm_80 with the disk
 * cache off and checks: an ELF cubin comes back, each compile counts once, the cache key
 * is 64 hex digits that change with the arch and with a define but not with the entry
 * point (one cubin holds all entries of a source), a forced #error gives COMPILE_FAILED
 * with the printable key and the NVRTC log in the message, bad arches and broken keys are
 * refused before NVRTC runs, and the ptxas report names registers for the entry.
 *
 * Skips (exit 77) when NVRTC cannot be loaded.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime.h"
#include "test_util.h"

#define AXPY "src/ops/testing/axpy.cu"

static void axpy_key(frost__kernel_key *k, const char *entry, const char *scale)
{
    frost__key_init(k, AXPY, entry);
    if (scale) {
        frost__key_define(k, "SCALE", "%s", scale);
    }
}

static int is_hex64(const char *s)
{
    if (strlen(s) != 64) {
        return 0;
    }
    for (int i = 0; i < 64; i++) {
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) {
            return 0;
        }
    }
    return 1;
}

/* Compiles and checks the basics; returns the key hex in hex (65 bytes). */
static void compile_ok(const frost__kernel_key *k, const char *arch, char *hex)
{
    unsigned long before = frost__compile_count();
    frost__compile_result r;
    TU_OK(frost__compile(k, arch, 0, &r));
    TU_CHECK(frost__compile_count() == before + 1);
    TU_CHECK(r.from_cache == 0);
    TU_CHECK(r.cubin != NULL && r.cubin_size > 64);
    TU_CHECK(r.cubin && memcmp(r.cubin, "\177ELF", 4) == 0);
    TU_CHECK(is_hex64(r.key_hex));
    strcpy(hex, r.key_hex);
    free(r.cubin);
    frost__buf_free(&r.log);
}

static void case_compile_archs(void)
{
    frost__kernel_key k;
    axpy_key(&k, "frost_test_axpy", NULL);
    char hopper[65], ampere[65], hopper_again[65];
    compile_ok(&k, "sm_90a", hopper);
    compile_ok(&k, "sm_80", ampere);
    compile_ok(&k, "sm_90a", hopper_again);
    TU_CHECK(strcmp(hopper, ampere) != 0);
    TU_CHECK(strcmp(hopper, hopper_again) == 0); /* the key is deterministic */
}

static void case_key_inputs(void)
{
    frost__kernel_key plain, scaled, scaled_more, fill;
    axpy_key(&plain, "frost_test_axpy", NULL);
    axpy_key(&scaled, "frost_test_axpy", "2.0f");
    axpy_key(&scaled_more, "frost_test_axpy", "3.0f");
    axpy_key(&fill, "frost_test_fill", NULL);
    char h_plain[65], h_scaled[65], h_more[65], h_fill[65];
    compile_ok(&plain, "sm_80", h_plain);
    compile_ok(&scaled, "sm_80", h_scaled);
    compile_ok(&scaled_more, "sm_80", h_more);
    compile_ok(&fill, "sm_80", h_fill);
    TU_CHECK(strcmp(h_plain, h_scaled) != 0);
    TU_CHECK(strcmp(h_scaled, h_more) != 0);
    TU_CHECK(strcmp(h_plain, h_fill) == 0);
}

static void case_compile_error(void)
{
    frost__kernel_key k;
    axpy_key(&k, "frost_test_axpy", NULL);
    frost__key_define(&k, "FROST_TEST_FORCE_ERROR", NULL);
    frost__compile_result r;
    TU_CHECK_STATUS(frost__compile(&k, "sm_90a", 0, &r), FROST_COMPILE_FAILED);
    const char *msg = frost_last_error();
    TU_CHECK(strstr(msg, AXPY ":frost_test_axpy FROST_TEST_FORCE_ERROR") != NULL);
    TU_CHECK(strstr(msg, "intended by the runtime tests") != NULL); /* from the NVRTC log */
    TU_CHECK(strstr(frost__buf_str(&r.log), "FROST_TEST_FORCE_ERROR is defined") != NULL);
    TU_CHECK(r.cubin == NULL);
    frost__buf_free(&r.log);
}

static void case_refusals(void)
{
    frost__kernel_key k;
    axpy_key(&k, "frost_test_axpy", NULL);
    frost__compile_result r;
    static const char *const bad_arches[] = {"", "sm90", "compute_90a", "sm_9", "sm_90ab", "sm_9x"};
    unsigned long before = frost__compile_count();
    for (size_t i = 0; i < sizeof bad_arches / sizeof bad_arches[0]; i++) {
        TU_CHECK_STATUS(frost__compile(&k, bad_arches[i], 0, &r), FROST_INVALID_ARGUMENT);
    }
    TU_CHECK_STATUS(frost__compile(&k, NULL, 0, &r), FROST_INVALID_ARGUMENT);
    frost__key_define(&k, "TOO_LONG", "%s", "0123456789012345678901234567890123456789");
    TU_CHECK_STATUS(frost__compile(&k, "sm_90a", 0, &r), FROST_INTERNAL);
    TU_CHECK(strstr(frost_last_error(), "broken") != NULL);
    frost__key_init(&k, "src/ops/testing/missing.cu", "kernel");
    TU_CHECK_STATUS(frost__compile(&k, "sm_90a", 0, &r), FROST_INTERNAL);
    TU_CHECK(strstr(frost_last_error(), "src/ops/testing/missing.cu") != NULL);
    TU_CHECK(frost__compile_count() == before);
}

static void case_ptxas_report(void)
{
    frost__kernel_key k;
    axpy_key(&k, "frost_test_axpy", NULL);
    frost__ptxas_info info;
    frost__buf log = {0};
    TU_OK(frost__compile_report(&k, "sm_90a", &info, &log));
    TU_CHECK(info.registers > 0 && info.registers <= 255);
    TU_CHECK(info.spill_store_bytes == 0 && info.spill_load_bytes == 0);
    TU_CHECK(info.static_smem == 0);
    TU_CHECK(strstr(frost__buf_str(&log), "frost_test_axpy") != NULL);
    frost__buf_free(&log);
    /* The second entry of the same source has its own report. */
    axpy_key(&k, "frost_test_fill", NULL);
    TU_OK(frost__compile_report(&k, "sm_80", &info, &log));
    TU_CHECK(info.registers > 0);
    frost__buf_free(&log);
    /* An entry that does not exist has no report. */
    axpy_key(&k, "no_such_entry", NULL);
    TU_CHECK_STATUS(frost__compile_report(&k, "sm_80", &info, &log), FROST_COMPILE_FAILED);
    frost__buf_free(&log);
}

int main(void)
{
    setenv("FROST_CACHE", "off", 1);
    if (frost__nvrtc_load() != FROST_OK) {
        printf("skipped: %s\n", frost_last_error());
        return 77;
    }
    TU_CHECK(frost__nvrtc_version() >= 12000);
    static const struct {
        const char *name;
        void (*run)(void);
    } cases[] = {
        {"compile_archs", case_compile_archs}, {"key_inputs", case_key_inputs},
        {"compile_error", case_compile_error}, {"refusals", case_refusals},
        {"ptxas_report", case_ptxas_report},
    };
    int n = (int)(sizeof cases / sizeof cases[0]), only = tu_case_filter(), run = 0;
    for (int i = 0; i < n; i++) {
        if (only >= 0 && i != only) {
            continue;
        }
        run++;
        tu_set_context("test_runtime_compile", 0, i, cases[i].name);
        tu_case_begin();
        cases[i].run();
        tu_case_end();
    }
    return tu_finish(run);
}
