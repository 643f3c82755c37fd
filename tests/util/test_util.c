/*
 * test_util.c — the shared test harness (see test_util.h): a splitmix64 generator,
 * NaN-poisoned guarded buffers for strided tensors, element-wise comparison, and failure
 * reporting that always ends with a one-line reproducer.
 */
#include "test_util.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

/* ---- randomness ---- */
tu_rng tu_rng_make(uint64_t seed)
{
    tu_rng r = {seed ^ 0x9e3779b97f4a7c15ull};
    return r;
}

uint64_t tu_next(tu_rng *r)
{
    uint64_t z = (r->state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double tu_uniform(tu_rng *r, double lo, double hi)
{
    return lo + (hi - lo) * ((double)(tu_next(r) >> 11) * (1.0 / 9007199254740992.0));
}

int64_t tu_int(tu_rng *r, int64_t lo, int64_t hi)
{
    if (hi <= lo)
        return lo;
    return lo + (int64_t)(tu_next(r) % (uint64_t)(hi - lo + 1));
}

double tu_normal(tu_rng *r)
{
    double u1 = tu_uniform(r, 1e-300, 1.0), u2 = tu_uniform(r, 0.0, 1.0);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

uint64_t tu_seed(uint64_t fallback)
{
    const char *e = getenv("FROST_TEST_SEED");
    return e && *e ? strtoull(e, NULL, 0) : fallback;
}

int tu_case_filter(void)
{
    const char *e = getenv("FROST_TEST_CASE");
    return e && *e ? atoi(e) : -1;
}

/* ---- layouts ---- */
void tu_packed_strides(int rank, const int64_t *dims, int64_t *strides)
{
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        strides[i] = s;
        s *= dims[i] > 0 ? dims[i] : 1;
    }
}

void tu_gapped_strides(tu_rng *r, int rank, const int64_t *dims, const int *order, int max_gap, int align,
                       int64_t *strides)
{
    int64_t s = 1;
    for (int k = rank - 1; k >= 0; k--) {
        int d = order[k];
        strides[d] = s;
        int64_t extent = s * (dims[d] > 0 ? dims[d] : 1);
        if (k > 0) {
            extent += tu_int(r, 0, max_gap);
            if (align > 1)
                extent = (extent + align - 1) / align * align;
        }
        s = extent;
    }
}

int64_t tu_span(int rank, const int64_t *dims, const int64_t *strides)
{
    int64_t span = 1;
    for (int i = 0; i < rank; i++) {
        if (dims[i] == 0)
            return 0;
        span += (dims[i] - 1) * strides[i];
    }
    return span;
}

/* ---- guarded buffers ---- */
static void poison_range(tu_buf *b, int64_t first, int64_t count)
{
    char *base = (char *)b->alloc;
    for (int64_t i = first; i < first + count; i++) {
        void *p = base + (size_t)i * b->elem_size;
        switch (b->dtype) {
        case FROST_F32: { float v = NAN; memcpy(p, &v, 4); break; }
        case FROST_F64: { double v = NAN; memcpy(p, &v, 8); break; }
        case FROST_F16: { uint16_t v = 0x7e00; memcpy(p, &v, 2); break; }
        case FROST_BF16: { uint16_t v = 0x7fc0; memcpy(p, &v, 2); break; }
        default: memset(p, 0x7f, b->elem_size); break;
        }
    }
}

int tu_buf_alloc(tu_buf *b, frost_dtype dtype, int rank, const int64_t *dims, const int64_t *strides,
                 int64_t span_override)
{
    memset(b, 0, sizeof *b);
    b->dtype = dtype;
    b->elem_size = frost_dtype_size(dtype);
    b->rank = rank;
    for (int i = 0; i < rank; i++) {
        b->dims[i] = dims[i];
        b->strides[i] = strides[i];
    }
    b->span = span_override > 0 ? span_override : tu_span(rank, dims, strides);
    b->guard = 64;
    int64_t total = b->span + 2 * b->guard;
    b->alloc = malloc((size_t)total * b->elem_size);
    if (!b->alloc)
        return 0;
    b->data = (char *)b->alloc + (size_t)b->guard * b->elem_size;
    poison_range(b, 0, total);
    return 1;
}

void tu_buf_free(tu_buf *b)
{
    free(b->alloc);
    memset(b, 0, sizeof *b);
}

void tu_buf_poison(tu_buf *b)
{
    poison_range(b, 0, b->span + 2 * b->guard);
}

double tu_buf_get(const tu_buf *b, int64_t offset)
{
    return frost__load_elem(b->data, offset, b->dtype);
}

void tu_buf_set(tu_buf *b, int64_t offset, double v)
{
    frost__store_elem(b->data, offset, b->dtype, v);
}

void tu_buf_for_each(const tu_buf *b, void (*fn)(const tu_buf *, int64_t, void *), void *user)
{
    int64_t idx[FROST_MAX_RANK] = {0};
    for (int i = 0; i < b->rank; i++)
        if (b->dims[i] == 0)
            return;
    for (;;) {
        int64_t off = 0;
        for (int i = 0; i < b->rank; i++)
            off += idx[i] * b->strides[i];
        fn(b, off, user);
        int d = b->rank - 1;
        while (d >= 0 && ++idx[d] == b->dims[d])
            idx[d--] = 0;
        if (d < 0)
            return;
    }
}

typedef struct fill_ctx {
    tu_rng *r;
    double lo, hi;
} fill_ctx;

static void fill_one(const tu_buf *b, int64_t off, void *user)
{
    fill_ctx *f = user;
    frost__store_elem(b->data, off, b->dtype, tu_uniform(f->r, f->lo, f->hi));
}

void tu_buf_fill_uniform(tu_buf *b, tu_rng *r, double lo, double hi)
{
    fill_ctx f = {r, lo, hi};
    tu_buf_for_each(b, fill_one, &f);
}

static void count_nan(const tu_buf *b, int64_t off, void *user)
{
    *(int64_t *)user += isnan(tu_buf_get(b, off)) != 0;
}

int64_t tu_buf_count_nan(const tu_buf *b)
{
    int64_t n = 0;
    tu_buf_for_each(b, count_nan, &n);
    return n;
}

static void mark_one(const tu_buf *b, int64_t off, void *user)
{
    (void)b;
    ((unsigned char *)user)[off] = 1;
}

static int is_poison(const tu_buf *b, int64_t i)
{
    const char *p = (const char *)b->alloc + (size_t)i * b->elem_size;
    switch (b->dtype) {
    case FROST_F32: { float v; memcpy(&v, p, 4); return isnan(v); }
    case FROST_F64: { double v; memcpy(&v, p, 8); return isnan(v); }
    case FROST_F16: { uint16_t v; memcpy(&v, p, 2); return (v & 0x7c00) == 0x7c00 && (v & 0x3ff); }
    case FROST_BF16: { uint16_t v; memcpy(&v, p, 2); return (v & 0x7f80) == 0x7f80 && (v & 0x7f); }
    default:
        for (size_t k = 0; k < b->elem_size; k++)
            if ((unsigned char)p[k] != 0x7f)
                return 0;
        return 1;
    }
}

int64_t tu_guard_check(const tu_buf *b, const char *what)
{
    int64_t total = b->span + 2 * b->guard;
    unsigned char *addressed = calloc((size_t)(b->span > 0 ? b->span : 1), 1);
    if (!addressed)
        return -1;
    tu_buf_for_each(b, mark_one, addressed);
    int64_t bad = 0;
    for (int64_t i = 0; i < total; i++) {
        int64_t rel = i - b->guard;
        if (rel >= 0 && rel < b->span && addressed[rel])
            continue;
        if (!is_poison(b, i)) {
            if (bad < 3)
                fprintf(stderr, "  guard violated in %s at element offset %" PRId64 "\n", what, rel);
            bad++;
        }
    }
    free(addressed);
    if (bad)
        tu_failf("%s: %" PRId64 " element(s) outside the tensor were written", what, bad);
    return bad;
}

/* ---- comparison ---- */
tu_cmp tu_compare(const double *got, const double *ref, int64_t n, double atol, double rtol)
{
    tu_cmp c = {0};
    c.count = n;
    c.worst_index = -1;
    double worst_excess = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs(got[i] - ref[i]);
        int both_inf = isinf(got[i]) && isinf(ref[i]) && (got[i] > 0) == (ref[i] > 0);
        if (both_inf)
            d = 0;
        double lim = atol + rtol * fabs(ref[i]);
        int ok = !isnan(got[i]) && !isnan(ref[i]) && (both_inf || d <= lim);
        if (isnan(got[i]) && isnan(ref[i]))
            ok = 1;
        if (!ok)
            c.bad++;
        if (!isnan(d) && d > c.max_abs)
            c.max_abs = d;
        double rel = ref[i] != 0 ? d / fabs(ref[i]) : 0;
        if (!isnan(rel) && rel > c.max_rel)
            c.max_rel = rel;
        double excess = isnan(d) ? INFINITY : d - lim;
        if (!ok && isnan(got[i]))
            excess = INFINITY;
        if (excess > worst_excess) {
            worst_excess = excess;
            c.worst_index = i;
            c.worst_got = got[i];
            c.worst_ref = ref[i];
        }
    }
    return c;
}

void tu_cmp_print(const char *name, const tu_cmp *c)
{
    fprintf(stderr, "  %s: n=%" PRId64 " bad=%" PRId64 " max_abs=%.3g max_rel=%.3g worst at %" PRId64
                    ": got %.9g ref %.9g\n",
            name, c->count, c->bad, c->max_abs, c->max_rel, c->worst_index, c->worst_got, c->worst_ref);
}

double tu_eps(frost_dtype t)
{
    switch (t) {
    case FROST_F16: return ldexp(1.0, -11);
    case FROST_BF16: return ldexp(1.0, -8);
    case FROST_F64: return ldexp(1.0, -53);
    default: return ldexp(1.0, -24);
    }
}

/* ---- failures ---- */
static const char *ctx_test = "test";
static uint64_t ctx_seed;
static int ctx_case = -1;
static char ctx_desc[512];
static int failures;
static int last_reported_case = -2;

void tu_set_context(const char *test_name, uint64_t seed, int case_index, const char *case_desc)
{
    ctx_test = test_name;
    ctx_seed = seed;
    ctx_case = case_index;
    snprintf(ctx_desc, sizeof ctx_desc, "%s", case_desc ? case_desc : "");
}

static void repro(void)
{
    if (last_reported_case == ctx_case)
        return;
    last_reported_case = ctx_case;
    fprintf(stderr, "  case: %s\n  REPRO: FROST_TEST_SEED=%" PRIu64 " FROST_TEST_CASE=%d ./%s\n", ctx_desc, ctx_seed,
            ctx_case, ctx_test);
}

void tu_fail_at(const char *file, int line, const char *expr)
{
    failures++;
    fprintf(stderr, "FAIL %s:%d: %s\n", file, line, expr);
    repro();
}

void tu_fail_status(const char *file, int line, const char *call, frost_status got, frost_status expected)
{
    failures++;
    fprintf(stderr, "FAIL %s:%d: %s returned %s, expected %s: %s\n", file, line, call, frost_status_name(got),
            frost_status_name(expected), frost_last_error());
    repro();
}

void tu_failf(const char *fmt, ...)
{
    failures++;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    repro();
}

int tu_failures(void)
{
    return failures;
}

static int case_mark, cases_passed, cases_failed;

void tu_case_begin(void)
{
    case_mark = failures;
}

int tu_case_end(void)
{
    int failed = failures > case_mark;
    if (failed)
        cases_failed++;
    else
        cases_passed++;
    return failed;
}

int tu_finish(int cases_run)
{
    if (cases_passed + cases_failed > 0) {
        printf("%d passed, %d failed\n", cases_passed, cases_failed);
    } else {
        int failed_cases = failures > cases_run ? cases_run : failures;
        printf("%d passed, %d failed\n", cases_run - failed_cases, failed_cases);
    }
    return failures ? 1 : 0;
}

frost_context *tu_cuda_context_or_skip(void)
{
    frost_context_options o = {.kind = FROST_DEVICE_CUDA, .device_index = 0};
    frost_context *ctx = NULL;
    frost_status s = frost_context_create(&o, &ctx);
    if (s != FROST_OK) {
        printf("skipped: no CUDA device (%s: %s)\n", frost_status_name(s), frost_last_error());
        exit(77);
    }
    return ctx;
}

int64_t tu_next_checked_row(int64_t r, int64_t rows)
{
    return r == 4095 && rows > 4096 + 64 ? rows - 64 : r + 1;
}
