/*
 * test_util.h — the shared test harness.
 *
 *  - Seeds: FROST_TEST_SEED=<n> reruns one seed; otherwise each test uses its fixed base
 *    seed so CI is repeatable.  Every failure prints a one-line reproducer:
 *        REPRO: FROST_TEST_SEED=<seed> FROST_TEST_CASE=<case> ./<test>
 *    FROST_TEST_CASE=<n> runs only case n of a case table.
 *  - Guarded buffers: a tensor's storage sits inside a larger allocation whose every
 *    element (the gaps between strided elements and the margins) starts as NaN (or a
 *    0x7fff.. pattern for integer types).  tu_guard_check reports any guard element that
 *    changed, and outputs are poisoned with NaN before execute so unwritten elements fail.
 *  - Comparison: max |got - ref| <= atol + rtol * |ref| per element, NaN never passes;
 *    prints the worst element.
 */
#ifndef FROST_TEST_UTIL_H
#define FROST_TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "frost/frost.h"

/* ---- randomness ---- */
typedef struct tu_rng {
    uint64_t state;
} tu_rng;
tu_rng tu_rng_make(uint64_t seed);
uint64_t tu_next(tu_rng *r);
double tu_uniform(tu_rng *r, double lo, double hi);     /* [lo, hi) */
int64_t tu_int(tu_rng *r, int64_t lo, int64_t hi);      /* [lo, hi] inclusive */
double tu_normal(tu_rng *r);

/* Base seed for a test: FROST_TEST_SEED if set, else `fallback`. */
uint64_t tu_seed(uint64_t fallback);
/* Case filter: -1 when FROST_TEST_CASE is unset, else its value. */
int tu_case_filter(void);

/* ---- layouts ---- */
/* Packed row-major strides for dims (rank r). */
void tu_packed_strides(int rank, const int64_t *dims, int64_t *strides);
/* Strides that follow the dim order `order` (order[0] outermost) with random gaps: each
 * stride is padded by 0..max_gap elements (and rounded up to a multiple of `align`
 * elements when align > 1).  The innermost dim of `order` keeps stride 1. */
void tu_gapped_strides(tu_rng *r, int rank, const int64_t *dims, const int *order, int max_gap, int align,
                       int64_t *strides);
/* Number of elements a tensor spans: 1 + sum (dims[i]-1)*strides[i] (0 if any dim is 0). */
int64_t tu_span(int rank, const int64_t *dims, const int64_t *strides);

/* ---- guarded host buffers ---- */
typedef struct tu_buf {
    void *alloc;        /* whole allocation */
    void *data;         /* the tensor's element 0 */
    size_t elem_size;
    frost_dtype dtype;
    int64_t span;       /* elements the tensor spans */
    int64_t guard;      /* guard elements on each side */
    int rank;
    int64_t dims[FROST_MAX_RANK];
    int64_t strides[FROST_MAX_RANK];
} tu_buf;

/* Allocates a guarded buffer for a tensor (dims, strides explicit; span from them, or
 * `span_override` elements when > 0, e.g. for ragged tensors).  Everything is poisoned. */
int tu_buf_alloc(tu_buf *b, frost_dtype dtype, int rank, const int64_t *dims, const int64_t *strides,
                 int64_t span_override);
void tu_buf_free(tu_buf *b);
/* Fills the tensor's elements (only the addressed ones) with uniform values in [lo, hi). */
void tu_buf_fill_uniform(tu_buf *b, tu_rng *r, double lo, double hi);
/* Calls fn(b, offset, user) for every element the dims and strides address, last dim fastest. */
void tu_buf_for_each(const tu_buf *b, void (*fn)(const tu_buf *, int64_t, void *), void *user);
/* The addressed elements that are NaN (an output's unwritten elements after poisoning). */
int64_t tu_buf_count_nan(const tu_buf *b);
/* Poisons every element (addressed and guard) with NaN / integer pattern. */
void tu_buf_poison(tu_buf *b);
/* Element access by linear element offset from data (handles dtypes). */
double tu_buf_get(const tu_buf *b, int64_t offset);
void tu_buf_set(tu_buf *b, int64_t offset, double v);
/* Returns the number of guard elements (outside the addressed set) that are no longer
 * poisoned; prints the first few.  `addressed` may be NULL (then every element within
 * the span that the dims/strides address is considered addressed). */
int64_t tu_guard_check(const tu_buf *b, const char *what);

/* ---- comparison ---- */
typedef struct tu_cmp {
    int64_t count, bad;
    double max_abs, max_rel;
    int64_t worst_index;
    double worst_got, worst_ref;
} tu_cmp;
/* Compares element sets: got[i] vs ref[i] for n elements. */
tu_cmp tu_compare(const double *got, const double *ref, int64_t n, double atol, double rtol);
/* Prints one line "name: n=.. bad=.. max_abs=.. worst at i: got .. ref .." to stderr. */
void tu_cmp_print(const char *name, const tu_cmp *c);

/* Unit-roundoff of a dtype (2^-24 f32, 2^-11 f16, 2^-8 bf16, 2^-53 f64). */
double tu_eps(frost_dtype t);

/* ---- status checks ---- */
/* Fails the current test (prints file:line, the expression, status and frost_last_error,
 * plus the reproducer line) and increments the failure counter. */
#define TU_CHECK(expr)                                                                        \
    do {                                                                                      \
        if (!(expr)) {                                                                        \
            tu_fail_at(__FILE__, __LINE__, #expr);                                            \
        }                                                                                     \
    } while (0)
#define TU_CHECK_STATUS(call, expected)                                                       \
    do {                                                                                      \
        frost_status tu_s_ = (call);                                                          \
        if (tu_s_ != (expected)) {                                                            \
            tu_fail_status(__FILE__, __LINE__, #call, tu_s_, (expected));                     \
        }                                                                                     \
    } while (0)
#define TU_OK(call) TU_CHECK_STATUS(call, FROST_OK)

/* The reproducer context printed with failures. */
void tu_set_context(const char *test_name, uint64_t seed, int case_index, const char *case_desc);
void tu_fail_at(const char *file, int line, const char *expr);
void tu_fail_status(const char *file, int line, const char *call, frost_status got, frost_status expected);
/* Records a failure with a printf message (prints the reproducer line too). */
void tu_failf(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
int tu_failures(void);
/* Case accounting: wrap each case in tu_case_begin() / tu_case_end(); a case failed when
 * any failure was recorded in between.  tu_case_end returns 1 when the case failed. */
void tu_case_begin(void);
int tu_case_end(void);
/* Exit code for main: 0 when no failure, 1 otherwise.  Prints "N passed, N failed" from the
 * case accounting (when no case was accounted, cases_run is the number of cases run and
 * failed cases are approximated by recorded failures). */
int tu_finish(int cases_run);

/* The row after r that a per-row check visits: every row of a problem of up to 4160 rows,
 * else the first 4096 and the last 64 (for (r = 0; r < rows; r = tu_next_checked_row(r,
 * rows))). */
int64_t tu_next_checked_row(int64_t r, int64_t rows);

/* GPU tests: returns a CUDA context or exits with 77 (skip) when none can be created. */
frost_context *tu_cuda_context_or_skip(void);

#endif /* FROST_TEST_UTIL_H */
