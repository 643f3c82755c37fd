/*
 * test_runtime_key.c — kernel keys and embedded sources (src/runtime/key.c, source.c).
 *
 * Keys: building, printing, parsing back (round trip), redefining a NAME, bare defines,
 * overflow marking the key broken, and every kind of malformed text parse must reject.
 * Sources: lookup by full path and by file name, and the include closure of the test
 * kernel src/ops/testing/axpy.cu (which includes testing_helpers.cuh next to it).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime.h"
#include "runtime/source.h"
#include "test_util.h"

#define AXPY "src/ops/testing/axpy.cu"

static void expect_print(const frost__kernel_key *k, const char *expected)
{
    frost__buf b = {0};
    frost__key_print(k, &b);
    if (strcmp(frost__buf_str(&b), expected) != 0) {
        tu_failf("key prints as \"%s\", expected \"%s\"", frost__buf_str(&b), expected);
    }
    frost__buf_free(&b);
}

static void case_build_and_print(void)
{
    frost__kernel_key k;
    frost__key_init(&k, AXPY, "frost_test_axpy");
    expect_print(&k, AXPY ":frost_test_axpy");
    frost__key_define(&k, "SCALE", "%.1ff", 2.0);
    frost__key_define(&k, "BLOCK", "%d", 128);
    frost__key_define(&k, "DTYPE_BF16", NULL);
    expect_print(&k, AXPY ":frost_test_axpy SCALE=2.0f BLOCK=128 DTYPE_BF16");
    TU_CHECK(k.num_defines == 3);
    /* Redefining replaces in place. */
    frost__key_define(&k, "BLOCK", "%d", 256);
    expect_print(&k, AXPY ":frost_test_axpy SCALE=2.0f BLOCK=256 DTYPE_BF16");
    TU_CHECK(k.num_defines == 3);
    /* An empty value is a bare define. */
    frost__key_define(&k, "CAUSAL", "%s", "");
    expect_print(&k, AXPY ":frost_test_axpy SCALE=2.0f BLOCK=256 DTYPE_BF16 CAUSAL");
}

static void case_overflow_breaks_key(void)
{
    frost__kernel_key k;
    frost__key_init(&k, AXPY, "frost_test_axpy");
    frost__key_define(&k, "NAME", "%s", "a_value_that_is_much_too_long_for_forty_seven_characters");
    TU_CHECK(k.num_defines < 0);
    frost__key_define(&k, "LATER", "%d", 1); /* ignored once broken */
    TU_CHECK(k.num_defines < 0);
    frost__buf b = {0};
    frost__key_print(&k, &b);
    TU_CHECK(strstr(frost__buf_str(&b), "broken") != NULL);
    frost__buf_free(&b);

    frost__key_init(&k, AXPY, "frost_test_axpy");
    for (int i = 0; i < FROST__KEY_MAX_DEFINES; i++) {
        frost__key_define(&k, "D", "%d", i); /* same name: replaced, never overflows */
    }
    TU_CHECK(k.num_defines == 1);
    frost__key_init(&k, AXPY, "frost_test_axpy");
    char name[16];
    for (int i = 0; i < FROST__KEY_MAX_DEFINES; i++) {
        snprintf(name, sizeof name, "D%d", i);
        frost__key_define(&k, name, "%d", i);
    }
    TU_CHECK(k.num_defines == FROST__KEY_MAX_DEFINES);
    frost__key_define(&k, "ONE_TOO_MANY", "%d", 1);
    TU_CHECK(k.num_defines < 0);
}

static void case_parse_round_trip(void)
{
    static const char *const texts[] = {
        AXPY ":frost_test_axpy",
        AXPY ":frost_test_axpy SCALE=2.0f",
        AXPY ":frost_test_fill A=1 B=-3 DTYPE_F16 EXPR=(1+2) C=x",
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        frost__kernel_key k;
        TU_OK(frost__key_parse(texts[i], &k));
        expect_print(&k, texts[i]);
        TU_CHECK(k.source && strcmp(k.source, AXPY) == 0);
    }
    /* Surrounding and repeated whitespace is accepted; the print is canonical. */
    frost__kernel_key k;
    TU_OK(frost__key_parse("  " AXPY ":frost_test_axpy \t SCALE=3.0f   BLOCK=64 \n", &k));
    expect_print(&k, AXPY ":frost_test_axpy SCALE=3.0f BLOCK=64");
    TU_CHECK(strcmp(k.entry, "frost_test_axpy") == 0);
    /* A key built in code and one parsed from its print are the same key. */
    frost__kernel_key built;
    frost__key_init(&built, AXPY, "frost_test_axpy");
    frost__key_define(&built, "SCALE", "3.0f");
    frost__key_define(&built, "BLOCK", "%d", 64);
    frost__buf a = {0}, b = {0};
    frost__key_print(&built, &a);
    frost__key_print(&k, &b);
    TU_CHECK(strcmp(frost__buf_str(&a), frost__buf_str(&b)) == 0);
    frost__buf_free(&a);
    frost__buf_free(&b);
}

static void case_parse_rejects(void)
{
    static const char *const bad[] = {
        "",
        "no_colon_here",
        AXPY ":",                               /* no entry */
        ":frost_test_axpy",                     /* no source */
        "src/ops/testing/missing.cu:kernel",    /* not embedded */
        "axpy.cu:frost_test_axpy",              /* sources are named by full path */
        AXPY ":9starts_with_digit",
        AXPY ":frost_test_axpy =1",             /* empty name */
        AXPY ":frost_test_axpy A=",             /* empty value */
        AXPY ":frost_test_axpy 1A=2",
        AXPY ":frost_test_axpy A-B=2",
        AXPY ":frost_test_axpy A=0123456789012345678901234567890123456789012345",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        frost__kernel_key k;
        frost_status s = frost__key_parse(bad[i], &k);
        if (s != FROST_INVALID_ARGUMENT) {
            tu_failf("parsing \"%s\" returned %s, expected INVALID_ARGUMENT", bad[i], frost_status_name(s));
        } else if (!*frost_last_error()) {
            tu_failf("parsing \"%s\" failed without a message", bad[i]);
        }
    }
    /* 33 defines: one too many. */
    frost__buf many = {0};
    frost__buf_printf(&many, AXPY ":frost_test_axpy");
    for (int i = 0; i <= FROST__KEY_MAX_DEFINES; i++) {
        frost__buf_printf(&many, " D%d=%d", i, i);
    }
    frost__kernel_key k;
    TU_CHECK_STATUS(frost__key_parse(frost__buf_str(&many), &k), FROST_INVALID_ARGUMENT);
    frost__buf_free(&many);
}

static void case_source_lookup(void)
{
    TU_CHECK(frost__embedded_source_count >= 2);
    const frost__source *axpy = frost__source_find(AXPY);
    TU_CHECK(axpy && strcmp(axpy->path, AXPY) == 0);
    TU_CHECK(axpy && axpy->size == strlen(axpy->text));
    TU_CHECK(axpy && strstr(axpy->text, "frost_test_axpy") != NULL);
    /* By file name (headers are included that way). */
    const frost__source *helpers = frost__source_find("testing_helpers.cuh");
    TU_CHECK(helpers && strcmp(helpers->path, "src/ops/testing/testing_helpers.cuh") == 0);
    TU_CHECK(frost__source_find("axpy.cu") == axpy);
    /* Misses. */
    TU_CHECK(frost__source_find("no_such_file.cuh") == NULL);
    TU_CHECK(frost__source_find("src/ops/testing/no_such_file.cu") == NULL);
    TU_CHECK(frost__source_find("ops/testing/axpy.cu") == NULL);
    TU_CHECK(frost__source_find("") == NULL);
    TU_CHECK(frost__source_find(NULL) == NULL);
    /* Every table row is findable by its own path. */
    for (size_t i = 0; i < frost__embedded_source_count; i++) {
        TU_CHECK(frost__source_find(frost__embedded_sources[i].path) == &frost__embedded_sources[i]);
    }
    TU_CHECK(frost__embedded_sources[frost__embedded_source_count].path == NULL);
}

static void case_include_closure(void)
{
    frost__source_closure c;
    TU_OK(frost__source_closure_build(AXPY, &c));
    TU_CHECK(c.root == frost__source_find(AXPY));
    TU_CHECK(c.count == 1);
    if (c.count == 1) {
        TU_CHECK(strcmp(c.include_names[0], "testing_helpers.cuh") == 0);
        TU_CHECK(strcmp(c.headers[0]->path, "src/ops/testing/testing_helpers.cuh") == 0);
    }
    TU_CHECK_STATUS(frost__source_closure_build("src/ops/testing/none.cu", &c), FROST_INTERNAL);
    /* Every embedded source has a closure (no include names two files, no runaway nesting). */
    for (size_t i = 0; i < frost__embedded_source_count; i++) {
        frost_status s = frost__source_closure_build(frost__embedded_sources[i].path, &c);
        if (s != FROST_OK) {
            tu_failf("include closure of %s: %s: %s", frost__embedded_sources[i].path, frost_status_name(s),
                     frost_last_error());
        }
    }
}

int main(void)
{
    static const struct {
        const char *name;
        void (*run)(void);
    } cases[] = {
        {"build_and_print", case_build_and_print}, {"overflow_breaks_key", case_overflow_breaks_key},
        {"parse_round_trip", case_parse_round_trip}, {"parse_rejects", case_parse_rejects},
        {"source_lookup", case_source_lookup},     {"include_closure", case_include_closure},
    };
    int n = (int)(sizeof cases / sizeof cases[0]), only = tu_case_filter(), run = 0;
    for (int i = 0; i < n; i++) {
        if (only >= 0 && i != only) {
            continue;
        }
        run++;
        tu_set_context("test_runtime_key", 0, i, cases[i].name);
        tu_case_begin();
        cases[i].run();
        tu_case_end();
    }
    return tu_finish(run);
}
