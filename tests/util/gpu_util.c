/*
 * gpu_util.c — helpers the GPU tests share (see gpu_util.h): whole-allocation device
 * copies, the whole-allocation comparison, and graph plumbing for the ref and cuda runs.
 */
#include "gpu_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- device copies of guarded buffers ---- */
size_t tu_buf_bytes(const tu_buf *b)
{
    return (size_t)(b->span + 2 * b->guard) * b->elem_size;
}

void *tu_to_device(const frost__device *dev, const tu_buf *b, tu_dev_buf *d, size_t shift)
{
    memset(d, 0, sizeof *d);
    if (!b->alloc)
        return NULL;
    d->bytes = tu_buf_bytes(b);
    TU_OK(frost__dev_alloc(dev, d->bytes + 32, &d->base));
    if (!d->base)
        return NULL;
    /* the device allocation is 256-byte aligned; pad so that element 0 is 16-byte aligned */
    size_t lead = (size_t)b->guard * b->elem_size, pad = (16 - lead % 16) % 16;
    d->alloc = (char *)d->base + pad + shift;
    TU_OK(frost__dev_copy_htod(dev, d->alloc, b->alloc, d->bytes));
    return d->alloc + lead;
}

void tu_from_device(const frost__device *dev, const tu_dev_buf *d, void *host)
{
    if (d->base)
        TU_OK(frost__dev_copy_dtoh(dev, host, d->alloc, d->bytes));
}

void tu_dev_buf_free(const frost__device *dev, tu_dev_buf *d)
{
    if (d->base)
        frost__dev_free(dev, d->base);
    memset(d, 0, sizeof *d);
}

/* ---- comparison ---- */
int64_t tu_compare_whole(const char *what, const tu_buf *got, const tu_buf *ref, double atol, double rtol)
{
    int64_t bad = 0, worst_at = -1;
    double worst_excess = -INFINITY, worst_got = 0, worst_ref = 0;
    for (int64_t e = -got->guard; e < got->span + got->guard; e++) {
        double g = tu_buf_get(got, e), f = tu_buf_get(ref, e);
        double excess;
        if (isnan(f) || isnan(g))
            excess = isnan(f) && isnan(g) ? -INFINITY : INFINITY;
        else if (isinf(f) || isinf(g))
            excess = g == f ? -INFINITY : INFINITY;
        else
            excess = fabs(g - f) - (atol + rtol * fabs(f));
        if (excess > 0)
            bad++;
        if (excess > worst_excess)
            worst_excess = excess, worst_at = e, worst_got = g, worst_ref = f;
    }
    if (bad)
        tu_failf("%s: %lld element(s) off (atol %.3g, rtol %.3g); worst at element offset %lld: got %.9g, ref %.9g",
                 what, (long long)bad, atol, rtol, (long long)worst_at, worst_got, worst_ref);
    return bad;
}

/* ---- graph plumbing ---- */
frost_tensor tu_add_tensor(frost_graph *g, const char *name, const tu_buf *b)
{
    frost_tensor_desc d = {.name = name, .dtype = b->dtype, .rank = b->rank};
    for (int k = 0; k < b->rank; k++)
        d.dims[k] = b->dims[k], d.strides[k] = b->strides[k];
    frost_tensor id = 0;
    TU_OK(frost_graph_add_tensor(g, &d, &id));
    return id;
}

frost_tensor tu_add_tensor_4d(frost_graph *g, const char *name, const tu_buf *b, const int64_t dims4[4],
                              const int64_t st4[4], frost_tensor ragged)
{
    frost_tensor_desc d = {.name = name, .dtype = b->dtype, .rank = 4, .ragged_offset = ragged};
    for (int k = 0; k < 4; k++)
        d.dims[k] = dims4[k], d.strides[k] = st4[k];
    frost_tensor id = 0;
    TU_OK(frost_graph_add_tensor(g, &d, &id));
    return id;
}

int tu_bind(const frost_tensor *ids, void *const *ptrs, int n, frost_binding *list)
{
    int count = 0;
    for (int k = 0; k < n; k++)
        if (ids[k])
            list[count++] = (frost_binding){ids[k], ptrs[k]};
    return count;
}

void tu_execute_host(frost_graph *g, const frost_binding *list, int n)
{
    size_t ws_bytes = 0;
    TU_OK(frost_graph_workspace_size(g, &ws_bytes));
    void *ws = ws_bytes ? malloc(ws_bytes) : NULL;
    TU_OK(frost_graph_execute(g, list, n, ws, NULL));
    free(ws);
}

enum { MAX_SLOTS = 32 };

void tu_run_ref(frost_graph *g, const tu_slots *s)
{
    frost_build_options opt = {.engine = "ref"};
    TU_OK(frost_graph_build(g, &opt));
    void *ptrs[MAX_SLOTS];
    frost_binding list[MAX_SLOTS];
    for (int k = 0; k < s->count; k++)
        ptrs[k] = s->host[k].data;
    tu_execute_host(g, list, tu_bind(s->ids, ptrs, s->count, list));
}

int tu_run_cuda(frost_graph *g, const frost__device *dev, const tu_slots *s, int misalign, int repeat)
{
    frost_build_options opt = {.engine = "cuda"};
    frost_status st = frost_graph_build(g, &opt);
    if (st == FROST_NOT_SUPPORTED && s->may_refuse && frost_last_error()[0])
        return -1;
    if (st != FROST_OK) {
        tu_failf("cuda build failed: %s: %s", frost_status_name(st), frost_last_error());
        return 0;
    }
    size_t ws_bytes = 0;
    void *ws = NULL;
    TU_OK(frost_graph_workspace_size(g, &ws_bytes));
    if (ws_bytes)
        TU_OK(frost__dev_alloc(dev, ws_bytes, &ws));
    tu_buf copies[MAX_SLOTS], starts[MAX_SLOTS];
    memset(copies, 0, sizeof copies);
    memset(starts, 0, sizeof starts);
    for (int rep = 0; rep < repeat; rep++) {
        tu_dev_buf d[MAX_SLOTS];
        frost_binding list[MAX_SLOTS];
        int n = 0;
        for (int k = 0; k < s->count; k++) {
            memset(&d[k], 0, sizeof d[k]);
            if (!s->ids[k])
                continue;
            const int out = (s->output_mask >> k) & 1u;
            const tu_buf *first = &s->device_out[k];
            if (out && rep == 0) { /* later runs start from run 1's starting content (NaN, or in/out values) */
                TU_CHECK(tu_buf_alloc(&starts[k], first->dtype, first->rank, first->dims, first->strides, 0));
                memcpy(starts[k].alloc, first->alloc, tu_buf_bytes(first));
            }
            if (out && rep > 0 && !copies[k].alloc)
                TU_CHECK(tu_buf_alloc(&copies[k], first->dtype, first->rank, first->dims, first->strides, 0));
            if (out && rep > 0)
                memcpy(copies[k].alloc, starts[k].alloc, tu_buf_bytes(first));
            const tu_buf *src = !out ? &s->host[k] : rep == 0 ? first : &copies[k];
            list[n++] = (frost_binding){s->ids[k], tu_to_device(dev, src, &d[k], misalign ? src->elem_size : 0)};
        }
        TU_OK(frost_graph_execute(g, list, n, ws, NULL));
        TU_OK(frost__dev_synchronize(dev));
        for (int k = 0; k < s->count; k++) {
            if (s->ids[k] && ((s->output_mask >> k) & 1u) && d[k].base) {
                tu_buf *dst = rep == 0 ? &s->device_out[k] : &copies[k];
                tu_from_device(dev, &d[k], dst->alloc);
                if (rep > 0 && memcmp(dst->alloc, s->device_out[k].alloc, d[k].bytes) != 0)
                    tu_failf("run %d: %s differs bitwise from run 1 (not deterministic)", rep + 1, s->names[k]);
            }
            tu_dev_buf_free(dev, &d[k]);
        }
    }
    for (int k = 0; k < s->count; k++) {
        tu_buf_free(&copies[k]);
        tu_buf_free(&starts[k]);
    }
    if (ws)
        frost__dev_free(dev, ws);
    return 1;
}

int tu_gpu_main(uint64_t default_seed, int num_cases, int (*skip)(int index),
                void (*run_one)(int index, uint64_t seed, frost_context *cpu, frost_context *gpu),
                void (*refusals)(frost_context *gpu))
{
    frost_context *gpu = tu_cuda_context_or_skip();
    frost_context *cpu = NULL;
    TU_OK(frost_context_create(NULL, &cpu));
    const uint64_t seed = tu_seed(default_seed);
    const int only = tu_case_filter();
    int run_count = 0;
    for (int i = 0; i < num_cases; i++) {
        if ((only >= 0 && i != only) || (skip && skip(i)))
            continue;
        tu_case_begin();
        run_one(i, seed, cpu, gpu);
        tu_case_end();
        run_count++;
    }
    if (only < 0 && refusals) {
        tu_case_begin();
        refusals(gpu);
        tu_case_end();
        run_count++;
    }
    frost_context_destroy(cpu);
    frost_context_destroy(gpu);
    return tu_finish(run_count);
}
