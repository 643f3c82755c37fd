/*
 * test_norm_fuzz_gpu.c — the cuda engine against the reference engine on random
 * normalization graphs: test_norm_fuzz's descriptions (tests/util/norm_fuzz_draw), each drawn
 * twice from one seed, into a CPU context and into a CUDA context.
 *
 * Per draw:
 *  - both contexts must answer the add call alike and declare the same tensors;
 *  - when the reference engine builds it, the cuda engine must build it too, or refuse it as
 *    NOT_SUPPORTED with a message (INVALID_ARGUMENT for a graph the reference took fails);
 *  - both run on the same data, every tensor (inputs too) in a guarded allocation that
 *    travels to the device whole and back: NaN margins and gaps, outputs poisoned;
 *  - the GPU runs twice, and the second run must reproduce the first bitwise (inputs and
 *    in-place running statistics included);
 *  - every tensor is compared over its whole allocation: NaN where the reference left NaN
 *    (a margin, a gap, an element the op does not write) and nowhere else, infinities
 *    equal, finite values within the tolerance below;
 *  - the explain report of the cuda build is checked for size and truncation.
 * Device copies sit one element off their 16-byte boundary in one draw in eight (the
 * cuda engine's unaligned paths).  Three draws in ten give one dim of X a real width (row
 * norms: 128 to 20000 columns; channel norms: 32 to 512 channels or a spatial dim of 32 to
 * 1024) and cut the others to 4 at most, so the kernels of real shapes see the random
 * strides and options too.
 *
 * Data: multiples of 1/16 in [-2, 2] (running statistics in [1/16, 2]), exact in every I/O
 * dtype.  A row's sum is then exact in fp32 at these sizes, and a row is either constant
 * (its deviations from the mean exactly 0 in both engines: with epsilon 0 both give
 * inv_std = inf and y = NaN) or has a variance of at least (1/16)^2 / n, so no row is
 * nearly constant and the two engines cannot part over a rounding.
 *
 * Tolerance: structural.  Per element |got - ref| <= t |ref| + t (1 + max|ref| / 16), where
 * max|ref| is over the tensor and t is 2^-6 for a 16-bit tensor (one ulp is 2^-8 relative
 * for bf16) and 2^-10 for an f32 one.  That is loose against rounding and tight against a
 * wrong, missing or misplaced element, which is off by the size of the values.  The
 * precision bounds are derived and checked by the case-table tests (test_norm_gpu,
 * test_adanorm_gpu, test_chan_norm_gpu), at the sizes whose kernels these tiny shapes do
 * not reach.
 *
 * FROST_FUZZ_ITERS sets the draws per op and direction (default 500; FROST_TEST_SMALL=1:
 * 80, for compute-sanitizer).  The cuda engine's select, run on the host for an H200
 * (tests/util/fuzz_util), takes about half of what the reference builds: at 500 draws
 * 27-85 graphs per op and direction are expected to run on the GPU, about 610 in all; at
 * 80, 2-12.  At the end a table counts, per op and direction, the draws
 * the reference built and the graphs the GPU ran or refused (FROST_TEST_VERBOSE=1 prints
 * each refusal); each op and direction must have run on the GPU at least ITERS / 50 times.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "gpu_util.h"
#include "norm_fuzz_draw.h"

enum {
    DEFAULT_ITERS = 500,
    SMALL_ITERS = 80,
    WIDE_PERCENT = 30, /* draws with one dim of a real width: 4096-column rows, 512 channels */
    MAX_SPAN = 1 << 21 /* elements of one tensor; larger graphs are not run */
};

static int iters = DEFAULT_ITERS;
static int built[TU_NF_OPS][2], ran[TU_NF_OPS][2], refused[TU_NF_OPS][2];

/* ---- data --------------------------------------------------------------------------- */

typedef struct grid_fill {
    tu_rng *r;
    int lo, hi; /* values k / 16 for k in [lo, hi] */
} grid_fill;

static void grid_element(const tu_buf *b, int64_t off, void *user)
{
    grid_fill *g = user;
    tu_buf_set((tu_buf *)b, off, (double)tu_int(g->r, g->lo, g->hi) / 16.0);
}

static void fill_grid(tu_buf *b, tu_rng *r, const char *name)
{
    grid_fill g = {r, -32, 32};
    if (!strncmp(name, "running_", 8))
        g.lo = 1;
    tu_buf_for_each(b, grid_element, &g);
}

/* ---- one draw ----------------------------------------------------------------------- */

/* 1 when both graphs hold the same tensors, in the same order */
static int same_tensors(const tu_fuzz *a, const tu_fuzz *b, const char *what)
{
    if (a->nt != b->nt) {
        tu_failf("%s: the CPU context's graph has %d tensors, the CUDA context's %d", what, a->nt, b->nt);
        return 0;
    }
    for (int i = 0; i < a->nt; i++) {
        frost_tensor_desc da, db;
        TU_OK(frost_graph_tensor_desc(a->g, a->id[i], &da));
        TU_OK(frost_graph_tensor_desc(b->g, b->id[i], &db));
        int same = da.dtype == db.dtype && da.rank == db.rank && a->output[i] == b->output[i];
        for (int k = 0; same && k < da.rank; k++)
            same = da.dims[k] == db.dims[k] && da.strides[k] == db.strides[k];
        if (!same) {
            tu_failf("%s: tensor %d (%s) differs between the two contexts", what, i, da.name ? da.name : "?");
            return 0;
        }
    }
    return 1;
}

static double tolerance(frost_dtype dt)
{
    return dt == FROST_F32 ? 1.0 / 1024 : 1.0 / 64;
}

static double max_abs_finite(const tu_buf *b)
{
    double m = 0;
    for (int64_t e = -b->guard; e < b->span + b->guard; e++) {
        const double v = fabs(tu_buf_get(b, e));
        if (isfinite(v) && v > m)
            m = v;
    }
    return m;
}


/* Graphs the GPU ran whose explain reports row norms with rows in runs (two row levels)
 * and with three or more levels: printed with the coverage table, so a log shows that the
 * draws reached the ROW_LEVELS kernels. */
static int ran_levels[2];

static void count_row_levels(const frost_graph *g)
{
    size_t len = 0;
    if (frost_graph_explain(g, NULL, 0, &len) != FROST_OK)
        return;
    char *text = malloc(len + 1);
    if (text && frost_graph_explain(g, text, len + 1, NULL) == FROST_OK) {
        ran_levels[0] += strstr(text, "; rows in runs of ") != NULL;
        ran_levels[1] += strstr(text, "; rows at ") != NULL && strstr(text, " levels of strides") != NULL;
    }
    free(text);
}
/* Runs the two graphs on the same data and compares every tensor. */
static void run_both(tu_fuzz *fc, tu_fuzz *fg, const frost__device *dev, tu_rng *rd, int op, int backward,
                     const char *what)
{
    const int nt = fc->nt;
    tu_buf host[TU_FZ_MAX_TENSORS], dev_out[TU_FZ_MAX_TENSORS];
    const char *names[TU_FZ_MAX_TENSORS];
    frost_binding bind[TU_FZ_MAX_TENSORS] = {{0}};
    memset(host, 0, sizeof host);
    memset(dev_out, 0, sizeof dev_out);
    int ok = 1;
    for (int i = 0; i < nt && ok; i++) {
        frost_tensor_desc d;
        TU_OK(frost_graph_tensor_desc(fc->g, fc->id[i], &d));
        names[i] = d.name ? d.name : "?";
        ok = tu_span(d.rank, d.dims, d.strides) <= MAX_SPAN;
        if (ok && (!tu_buf_alloc(&host[i], d.dtype, d.rank, d.dims, d.strides, 0) ||
                   !tu_buf_alloc(&dev_out[i], d.dtype, d.rank, d.dims, d.strides, 0))) {
            tu_failf("%s: no buffer for %s", what, names[i]);
            ok = 0;
        }
        if (ok && !fc->output[i])
            fill_grid(&host[i], rd, names[i]);
        if (ok)
            memcpy(dev_out[i].alloc, host[i].alloc, tu_buf_bytes(&host[i]));
        bind[i] = (frost_binding){fc->id[i], host[i].data};
    }
    if (ok) {
        built[op][backward]++;
        tu_execute_host(fc->g, bind, nt);
        const tu_slots s = {.count = nt,
                            .ids = fg->id,
                            .host = host,
                            .device_out = dev_out,
                            .output_mask = (1u << nt) - 1, /* every tensor comes back, inputs too */
                            .names = names,
                            .may_refuse = 1};
        const int got = tu_run_cuda(fg->g, dev, &s, tu_fz_chance(rd, 12), 2);
        if (got < 0)
            refused[op][backward]++;
        if (got < 0 && getenv("FROST_TEST_VERBOSE"))
            fprintf(stderr, "%s: refused: %s\n", what, frost_last_error());
        if (got > 0) {
            ran[op][backward]++;
            tu_fz_check_explain(fg->g, rd, what);
            count_row_levels(fg->g);
            for (int i = 0; i < nt; i++) {
                char tensor[128];
                snprintf(tensor, sizeof tensor, "%s: %s", what, names[i]);
                const double t = tolerance(host[i].dtype);
                tu_compare_whole(tensor, &dev_out[i], &host[i], t * (1 + max_abs_finite(&host[i]) / 16), t);
            }
        }
    }
    for (int i = 0; i < nt; i++) {
        tu_buf_free(&host[i]);
        tu_buf_free(&dev_out[i]);
    }
}

static void run_one(int index, uint64_t seed, frost_context *cpu, frost_context *gpu)
{
    const int op = index / (2 * iters), backward = index / iters % 2;
    char what[96];
    snprintf(what, sizeof what, "%s %s, graph %d", tu_nf_op_names[op], backward ? "backward" : "forward",
             index % iters);
    tu_set_context("test_norm_fuzz_gpu", seed, index, what);
    const uint64_t s = seed + (uint64_t)index * 0x9e3779b97f4a7c15ULL;
    tu_rng rc = tu_rng_make(s), rg = tu_rng_make(s), rd = tu_rng_make(s ^ 0x5eedda7aULL);
    tu_fuzz fc = {.r = &rc, .wide_percent = WIDE_PERCENT}, fg = {.r = &rg, .wide_percent = WIDE_PERCENT};
    TU_OK(frost_graph_create(cpu, &fc.g));
    TU_OK(frost_graph_create(gpu, &fg.g));
    if (!fc.g || !fg.g)
        goto out;
    const frost_status sc = tu_nf_add(&fc, (tu_nf_op)op, backward);
    const frost_status sg = tu_nf_add(&fg, (tu_nf_op)op, backward);
    if (sc != sg)
        tu_failf("%s: the CPU context answered %s, the CUDA context %s (%s)", what, frost_status_name(sc),
                 frost_status_name(sg), frost_last_error());
    if (sc != FROST_OK || sg != FROST_OK || fc.aliased || !same_tensors(&fc, &fg, what))
        goto out;
    const frost_build_options ref = {.engine = "ref"};
    if (frost_graph_build(fc.g, &ref) != FROST_OK)
        goto out;
    run_both(&fc, &fg, gpu->device, &rd, op, backward, what);
out:
    frost_graph_destroy(fc.g);
    frost_graph_destroy(fg.g);
}

/* The coverage table; each op and direction must have run on the GPU. */
static void coverage(frost_context *gpu)
{
    (void)gpu;
    tu_set_context("test_norm_fuzz_gpu", 0, -1, "coverage");
    printf("test_norm_fuzz_gpu: %d draws per op and direction; built by the reference / ran on the GPU / "
           "refused by the cuda engine:\n",
           iters);
    for (int op = 0; op < TU_NF_OPS; op++)
        for (int b = 0; b < 2; b++) {
            printf("  %-12s %-8s %4d / %4d / %4d\n", tu_nf_op_names[op], b ? "backward" : "forward", built[op][b],
                   ran[op][b], refused[op][b]);
            if (ran[op][b] < iters / 50)
                tu_failf("%s %s: only %d of %d draws ran on the GPU", tu_nf_op_names[op], b ? "backward" : "forward",
                         ran[op][b], iters);
        }
    printf("  row norms run with rows in runs: %d, with three or more row levels: %d\n", ran_levels[0],
           ran_levels[1]);
}

int main(void)
{
    const char *small = getenv("FROST_TEST_SMALL"), *n = getenv("FROST_FUZZ_ITERS");
    if (small && atoi(small))
        iters = SMALL_ITERS;
    if (n && atoi(n) > 0)
        iters = atoi(n);
    return tu_gpu_main(0x6e6f726d67707566ULL, TU_NF_OPS * 2 * iters, NULL, run_one, coverage);
}
