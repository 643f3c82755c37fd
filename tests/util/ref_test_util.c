/*
 * ref_test_util.c — the shared scaffolding of the CPU norm reference tests (see
 * ref_test_util.h): tensors, guarded slots, comparisons, finite differences, the case loop.
 */
#include "ref_test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void tu_shuffle(tu_rng *r, int *v, int n)
{
    for (int i = n - 1; i > 0; --i) {
        int j = (int)tu_int(r, 0, i), t = v[i];
        v[i] = v[j], v[j] = t;
    }
}

frost_tensor tu_add(frost_graph *g, const char *name, frost_dtype dt, int rank, const int64_t *dims,
                    const int64_t *strides)
{
    frost_tensor_desc d = {.name = name, .dtype = dt, .rank = rank};
    frost_tensor id = 0;
    for (int i = 0; i < rank; ++i) {
        d.dims[i] = dims[i];
        d.strides[i] = strides ? strides[i] : 0;
    }
    TU_OK(frost_graph_add_tensor(g, &d, &id));
    return id;
}

int64_t tu_flat_off(const tu_buf *b, int64_t f)
{
    int64_t off = 0;
    for (int i = b->rank - 1; i >= 0; --i) {
        off += (f % b->dims[i]) * b->strides[i];
        f /= b->dims[i];
    }
    return off;
}

double tu_subnormal_floor(frost_dtype t)
{
    return t == FROST_F16 ? ldexp(1.0, -24) : 1e-30;
}

void tu_expect_close(const char *what, const double *got, const double *ref, int64_t n, double atol, double rtol)
{
    tu_cmp c = tu_compare(got, ref, n, atol, rtol);
    if (c.bad) {
        tu_cmp_print(what, &c);
        tu_failf("%s: %lld of %lld elements outside atol %.3g rtol %.3g", what, (long long)c.bad, (long long)n, atol,
                 rtol);
    }
}

void tu_expect_fail(frost_status got, frost_status want, const char *needle, const char *expr, int line)
{
    if (got != want)
        tu_failf("line %d: %s returned %s, expected %s (%s)", line, expr, frost_status_name(got),
                 frost_status_name(want), frost_last_error());
    else if (needle && !strstr(frost_last_error(), needle))
        tu_failf("line %d: %s: the message \"%s\" does not name '%s'", line, expr, frost_last_error(), needle);
}

double tu_central_diff(double *v, double h, double (*loss)(void *ctx), void *ctx)
{
    const double v0 = *v;
    *v = v0 + h;
    double lp = loss(ctx);
    *v = v0 - h;
    double lm = loss(ctx);
    *v = v0;
    return (lp - lm) / (2 * h);
}

/* The f32 rounding of a saved statistic: half an ulp, doubled for margin. */
static double f32_round(void)
{
    return 2 * tu_eps(FROST_F32);
}

double tu_norm_dx_slack(int saved_mean, int saved_rstd, double mean, double rstd, double xh, double g, double mg,
                        double mgx, double mabs_g)
{
    const double u2 = f32_round();
    return (saved_mean ? u2 * fabs(mean) * rstd * rstd * (fabs(mgx) + fabs(xh) * mabs_g) : 0) +
           (saved_rstd ? 2 * u2 * rstd * (fabs(g) + fabs(mg) + fabs(xh * mgx)) : 0);
}

double tu_norm_param_slack(int saved_mean, int saved_rstd, double mean, double rstd, double xh, double dy)
{
    return fabs(dy) * f32_round() * ((saved_mean ? rstd * fabs(mean) : 0) + (saved_rstd ? fabs(xh) : 0));
}

void tu_take_slack(double *got, const double *ref, const double *slack, int64_t n)
{
    for (int64_t i = 0; i < n; ++i) {
        double diff = got[i] - ref[i];
        got[i] = fabs(diff) <= slack[i] ? ref[i] : got[i] - copysign(slack[i], diff);
    }
}

int tu_slots_alloc(frost_graph *g, tu_slot *slots, int count, frost_binding *bind)
{
    int nb = 0;
    for (int s = 0; s < count; ++s) {
        frost_tensor_desc td;
        if (!slots[s].id)
            continue;
        TU_OK(frost_graph_tensor_desc(g, slots[s].id, &td));
        TU_CHECK(tu_buf_alloc(&slots[s].buf, td.dtype, td.rank, td.dims, td.strides, 0));
        bind[nb++] = (frost_binding){slots[s].id, slots[s].buf.data};
    }
    return nb;
}

void tu_slots_guard_check(const tu_slot *slots, int count, const char *const *names)
{
    for (int s = 0; s < count; ++s)
        if (slots[s].id)
            tu_guard_check(&slots[s].buf, names[s]);
}

void tu_slots_free(tu_slot *slots, int count)
{
    for (int s = 0; s < count; ++s)
        if (slots[s].id)
            tu_buf_free(&slots[s].buf);
}

size_t tu_alloc_bytes(const tu_buf *b)
{
    return (size_t)(b->span + 2 * b->guard) * b->elem_size;
}

void tu_slots_same_on_reexecute(frost_graph *g, const frost_binding *bind, int nb, void *ws, tu_slot *slots, int first,
                                int count, int skip, const char *const *names)
{
    for (int s = first; s < count; ++s) {
        if (!slots[s].id || s == skip)
            continue;
        tu_buf *b = &slots[s].buf;
        size_t bytes = tu_alloc_bytes(b);
        void *before = malloc(bytes);
        memcpy(before, b->alloc, bytes);
        tu_buf_poison(b);
        TU_OK(frost_graph_execute(g, bind, nb, ws, NULL));
        if (memcmp(before, b->alloc, bytes) != 0)
            tu_failf("%s differs between two executes of the same graph", names[s]);
        free(before);
    }
}

int tu_run_cases(frost_context *ctx, uint64_t seed, int num_cases, void (*validation_walk)(frost_context *ctx),
                 void (*run_one)(frost_context *ctx, int index, uint64_t seed))
{
    const int only = tu_case_filter();
    int run_count = 0;
    if (validation_walk && only < 0) {
        tu_case_begin();
        validation_walk(ctx);
        tu_case_end();
        ++run_count;
    }
    for (int i = 0; i < num_cases; ++i) {
        if (only >= 0 && only != i)
            continue;
        tu_case_begin();
        run_one(ctx, i, seed);
        tu_case_end();
        ++run_count;
    }
    return run_count;
}

int tu_ref_main(frost_context **ctx, uint64_t default_seed, int num_cases, void (*validation_walk)(frost_context *ctx),
                void (*run_one)(frost_context *ctx, int index, uint64_t seed))
{
    const uint64_t seed = tu_seed(default_seed);
    frost_context *c = NULL;
    TU_OK(frost_context_create(NULL, &c));
    if (!c)
        return tu_finish(0);
    *ctx = c;
    const int run_count = tu_run_cases(c, seed, num_cases, validation_walk, run_one);
    frost_context_destroy(c);
    *ctx = NULL;
    return tu_finish(run_count);
}
