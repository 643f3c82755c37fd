/*
 * bench_run.c — part of frost-bench: what running a built case takes.  Random data comes
 * from one seeded pool per dtype (never a zero) copied in at random positions; memory is
 * the device's, or the host's with --cpu.  Each timed run has its own pair of CUDA events
 * (the host clock with --cpu, where execute blocks); the result is the median.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/internal.h"
#include "bench.h"

#define POOL_ELEMS ((size_t)1 << 24)

static uint64_t rng_next(uint64_t *s) /* splitmix64 */
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

float bench_rng_unit(uint64_t *s) /* [-1, 1) */
{
    return (float)((rng_next(s) >> 40) * (1.0 / 16777216.0) * 2.0 - 1.0);
}

frost_status bench_mem_alloc(const frost__device *dev, size_t bytes, void **p)
{
    if (dev)
        return frost__dev_alloc(dev, bytes, p);
    return (*p = malloc(bytes)) ? FROST_OK : FROST_OUT_OF_MEMORY;
}

frost_status bench_copy_in(const frost__device *dev, void *dst, const void *src, size_t bytes)
{
    return dev ? frost__dev_copy_htod(dev, dst, src, bytes) : (memcpy(dst, src, bytes), FROST_OK);
}

frost_status bench_copy_out(const frost__device *dev, void *dst, const void *src, size_t bytes)
{
    return dev ? frost__dev_copy_dtoh(dev, dst, src, bytes) : (memcpy(dst, src, bytes), FROST_OK);
}

double bench_rel_err(const void *got, const void *ref, frost_dtype dt, int64_t n)
{
    double diff = 0, scale = 0;
    for (int64_t i = 0; i < n; i++) {
        const double g = frost__load_elem(got, i, dt), r = frost__load_elem(ref, i, dt);
        if (!isnan(g) != !isnan(r) || ((isinf(g) || isinf(r)) && g != r))
            return INFINITY;
        if (!isfinite(r))
            continue;
        diff = fabs(g - r) > diff ? fabs(g - r) : diff;
        scale = fabs(r) > scale ? fabs(r) : scale;
    }
    return diff == 0 ? 0 : scale > 0 ? diff / scale : INFINITY;
}

double bench_check_tol(frost_dtype dt)
{
    return frost_dtype_size(dt) == 2 ? 1.0 / 64 : 1e-3;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

void bench_fail(bresult *r, frost_status s, const char *where)
{
    const char *e = frost_last_error();
    r->status = s;
    snprintf(r->reason, sizeof r->reason, "%s: %s", where, e && *e ? e : frost_status_name(s));
    for (char *p = r->reason; *p; p++)
        if (*p == '\n')
            *p = ' ';
}

frost_status bench_resolve(bgraph *bg)
{
    for (int i = 0; i < bg->nt; i++) {
        frost_tensor_desc d;
        frost_status s = frost_graph_tensor_desc(bg->g, bg->id[i], &d);
        if (s)
            return s;
        int packed = 1;
        for (int k = 0; k < d.rank; k++)
            packed &= d.strides[k] == 0;
        int64_t span = 1, run = 1;
        for (int k = d.rank - 1; k >= 0; k--) {
            if (d.dims[k] == 0)
                span = 0;
            if (span)
                span += (d.dims[k] - 1) * (packed ? run : d.strides[k]);
            run *= d.dims[k];
        }
        bg->dt[i] = d.dtype;
        bg->span[i] = span;
    }
    return FROST_OK;
}

static const void *pool_get(pools *pl, frost_dtype dt, uint64_t seed)
{
    if ((int)dt >= 16 || pl->p[dt])
        return (int)dt < 16 ? pl->p[dt] : NULL;
    size_t es = frost_dtype_size(dt);
    unsigned char *p = malloc(POOL_ELEMS * es);
    if (!p)
        return NULL;
    uint64_t s = seed ^ (0x51ull * (uint64_t)dt);
    for (size_t i = 0; i < POOL_ELEMS; i++) {
        float f = bench_rng_unit(&s);
        if (f == 0.0f)
            f = 0.5f; /* never a zero */
        if (dt == FROST_BF16 || dt == FROST_F16) {
            uint16_t h = dt == FROST_BF16 ? frost__f32_to_bf16(f) : frost__f32_to_f16(f);
            memcpy(p + i * 2, &h, 2);
        } else {
            memcpy(p + i * es, &f, sizeof f);
        }
    }
    return pl->p[dt] = p;
}

/* Random tensor: copies from a random position of the pool, wrapping around. */
frost_status bench_fill_random(const frost__device *dev, pools *pl, void *dst, frost_dtype dt, int64_t n, uint64_t *rng)
{
    const unsigned char *p = pool_get(pl, dt, 0x5EEDull ^ *rng);
    size_t es = frost_dtype_size(dt);
    if (!p || es == 0)
        return FROST_OUT_OF_MEMORY;
    size_t off = (size_t)(rng_next(rng) % POOL_ELEMS), done = 0;
    while (done < (size_t)n) {
        size_t k = POOL_ELEMS - off < (size_t)n - done ? POOL_ELEMS - off : (size_t)n - done;
        frost_status s = bench_copy_in(dev, (unsigned char *)dst + done * es, p + off * es, k * es);
        if (s)
            return s;
        done += k;
        off = 0;
    }
    return FROST_OK;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Counts NaN/Inf among the first elements of a floating output (a cheap sanity check). */
static int count_nonfinite(const frost__device *dev, const void *src, frost_dtype dt, int64_t span)
{
    int64_t n = span < 65536 ? span : 65536, bad = 0;
    size_t es = frost_dtype_size(dt);
    unsigned char *h = malloc((size_t)n * es + 1);
    if (h && bench_copy_out(dev, h, src, (size_t)n * es) == FROST_OK)
        for (int64_t i = 0; i < n; i++)
            bad += !isfinite(frost__load_elem(h, i, dt));
    free(h);
    return (int)(bad > 0x7fffffff ? 0x7fffffff : bad);
}

/* warm + runs executions, set (start + it) % nsets each; run i (after the warm-up) is timed
 * with its own pair of events into t[i] (host clock with --cpu, where execute is blocking). */
static frost_status run_timed(bstate *st, int start, int warm, int runs, double *t)
{
    frost_binding bind[MAX_T];
    void **ev = calloc(2 * (size_t)runs, sizeof *ev);
    int nev = 0;
    frost_status s = ev ? FROST_OK : FROST_OUT_OF_MEMORY;
    while (!s && st->dev && nev < 2 * runs)
        s = frost__event_create(&ev[nev++]);
    for (int it = 0; !s && it < warm + runs; it++) {
        int k = (start + it) % st->nsets, ti = it - warm;
        double t0 = now_ms();
        for (int i = 0; i < st->bg.nt; i++)
            bind[i] = (frost_binding){st->bg.id[i], st->ptr[k][i]};
        if (ti >= 0 && st->dev)
            s = frost__event_record(ev[2 * ti], NULL);
        s = s ? s : frost_graph_execute(st->bg.g, bind, st->bg.nt, st->ws, NULL);
        if (!s && ti >= 0 && st->dev)
            s = frost__event_record(ev[2 * ti + 1], NULL);
        if (ti >= 0 && !st->dev)
            t[ti] = now_ms() - t0;
    }
    if (!st->dev) {
        free(ev);
        return s;
    }
    s = s ? s : frost__dev_synchronize(st->dev);
    for (int i = 0; !s && i < runs; i++) {
        float ms = 0;
        s = frost__event_elapsed_ms(ev[2 * i], ev[2 * i + 1], &ms);
        t[i] = ms;
    }
    for (int i = 0; i < nev; i++)
        frost__event_destroy(ev[i]);
    free(ev);
    return s;
}

void bench_measure(bstate *st, const bopts *o, bresult *r)
{
    double first = 0, *t = NULL;
    frost_status s;
    /* one probe run sizes the warm-up (>= 100 ms) and the timed runs (>= 50 ms) */
    if ((s = run_timed(st, 0, 0, 1, &first))) {
        bench_fail(r, s, "execute");
        return;
    }
    int warm = o->warmup, runs = o->runs;
    if (!o->exact && first > 0 && warm < 100.0 / first)
        warm = 100.0 / first < 2000 ? (int)(100.0 / first) : 2000;
    if (!o->exact && first > 0 && runs < 50.0 / first)
        runs = 50.0 / first < 2000 ? (int)(50.0 / first) : 2000;
    if (!(t = calloc((size_t)runs, sizeof *t))) {
        bench_fail(r, FROST_OUT_OF_MEMORY, "host alloc");
        return;
    }
    if ((s = run_timed(st, 1, warm, runs, t))) {
        bench_fail(r, s, "timed runs");
        free(t);
        return;
    }
    qsort(t, (size_t)runs, sizeof *t, cmp_double);
    r->status = FROST_OK;
    r->ms = runs % 2 ? t[runs / 2] : 0.5 * (t[runs / 2 - 1] + t[runs / 2]);
    r->ms_min = t[0];
    r->runs = runs;
    r->sets = st->nsets;
    int last = (warm + runs) % st->nsets; /* the set the last run wrote */
    for (int i = 0; i < st->bg.nt; i++)
        if (st->bg.role[i] == R_OUTPUT && frost__dtype_is_float(st->bg.dt[i]))
            r->nonfinite += count_nonfinite(st->dev, st->ptr[last][i], st->bg.dt[i], st->bg.span[i]);
    free(t);
}

void bench_state_free(bstate *st)
{
    for (int k = 0; k < MAX_SETS; k++)
        for (int i = 0; i < MAX_T; i++)
            if (st->ptr[k][i])
                st->dev ? frost__dev_free(st->dev, st->ptr[k][i]) : free(st->ptr[k][i]);
    if (st->ws)
        st->dev ? frost__dev_free(st->dev, st->ws) : free(st->ws);
    frost_graph_destroy(st->bg.g);
    free(st);
}
