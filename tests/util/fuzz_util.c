/*
 * fuzz_util.c — see fuzz_util.h.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"

#include "core/internal.h"
#include "runtime/runtime.h"

int tu_fz_pick(tu_rng *r, int n)
{
    return (int)tu_int(r, 0, n - 1);
}

int tu_fz_chance(tu_rng *r, int percent)
{
    return tu_int(r, 0, 99) < percent;
}

int64_t tu_fz_small_dim(tu_rng *r)
{
    static const int64_t dims[] = {1, 2, 3, 4, 5, 7, 8, 16};
    if (tu_fz_chance(r, 3))
        return 0;
    if (tu_fz_chance(r, 1))
        return tu_fz_chance(r, 50) ? -1 : (int64_t)1 << 40;
    return dims[tu_fz_pick(r, (int)(sizeof dims / sizeof dims[0]))];
}

frost_dtype tu_fz_io_dtype(tu_rng *r)
{
    static const frost_dtype ok[] = {FROST_F32, FROST_F16, FROST_BF16};
    static const frost_dtype bad[] = {FROST_F64, FROST_I32, FROST_U8, FROST_FP8_E4M3, FROST_DTYPE_INVALID};
    if (tu_fz_chance(r, 5))
        return bad[tu_fz_pick(r, (int)(sizeof bad / sizeof bad[0]))];
    return ok[tu_fz_pick(r, 3)];
}

/* The last error after a refusal must say something. */
void tu_fz_expect_refusal(frost_status s, const char *what)
{
    if (s != FROST_OK && s != FROST_INVALID_ARGUMENT && s != FROST_NOT_SUPPORTED)
        tu_failf("%s: status %s (%s)", what, frost_status_name(s), frost_last_error());
    else if (s != FROST_OK && !frost_last_error()[0])
        tu_failf("%s: %s without a message", what, frost_status_name(s));
}

/* Declares a tensor with random strides: packed (all zero), dims in `order` with gaps, or
 * arbitrary strides (0 included).  Returns its id, or FROST_TENSOR_NONE when frost refused
 * the description (checked to be a refusal with a message). */
frost_tensor tu_fz_declare(tu_fuzz *f, const char *name, frost_dtype dt, int rank, const int64_t *dims,
                           const int *order, int output)
{
    frost_tensor_desc d = {.name = name, .dtype = dt, .rank = rank};
    for (int i = 0; i < rank && i < FROST_MAX_RANK; i++)
        d.dims[i] = dims[i];
    const int mode = tu_fz_pick(f->r, 10);
    int ok_dims = rank >= 1 && rank <= FROST_MAX_RANK;
    for (int i = 0; ok_dims && i < rank; i++)
        ok_dims = dims[i] >= 0 && dims[i] <= 32768;
    if (ok_dims && mode >= 5 && mode < 9) {
        int ord[FROST_MAX_RANK];
        for (int i = 0; i < rank; i++)
            ord[i] = order ? order[i] : i;
        tu_gapped_strides(f->r, rank, d.dims, ord, 3, 1, d.strides);
    } else if (ok_dims && mode == 9) {
        for (int i = 0; i < rank; i++)
            d.strides[i] = tu_int(f->r, 0, 40);
    }
    frost_tensor t = FROST_TENSOR_NONE;
    frost_status s = frost_graph_add_tensor(f->g, &d, &t);
    tu_fz_expect_refusal(s, name);
    if (s != FROST_OK)
        return FROST_TENSOR_NONE;
    if (f->nt < TU_FZ_MAX_TENSORS) {
        f->id[f->nt] = t;
        f->output[f->nt++] = output;
    }
    return t;
}

/* An optional input: absent, a tensor of the given dims (sometimes one dim off), another
 * rank, another dtype, or an id that names nothing. */
frost_tensor tu_fz_maybe_input(tu_fuzz *f, const char *name, frost_dtype dt, int rank, const int64_t *dims,
                               int absent_percent)
{
    if (tu_fz_chance(f->r, absent_percent))
        return FROST_TENSOR_NONE;
    if (tu_fz_chance(f->r, 2))
        return (frost_tensor)(4000 + tu_fz_pick(f->r, 100));
    int64_t d[FROST_MAX_RANK + 1] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    int r = rank;
    for (int i = 0; i < rank && i <= FROST_MAX_RANK; i++)
        d[i] = dims[i];
    if (tu_fz_chance(f->r, 8) && r > 0)
        d[tu_fz_pick(f->r, r)] += tu_fz_chance(f->r, 50) ? 1 : -1;
    if (tu_fz_chance(f->r, 5))
        r = (int)tu_int(f->r, 1, 4), d[0] = d[0] > 0 ? d[0] : 1, d[1] = d[2] = d[3] = 1;
    if (tu_fz_chance(f->r, 8))
        dt = tu_fz_io_dtype(f->r);
    return tu_fz_declare(f, name, dt, r, d, NULL, 0);
}

/* An output slot: none, AUTO, or declared (right dims or not, f32 or not). */
frost_tensor tu_fz_maybe_output(tu_fuzz *f, const char *name, frost_dtype dt, int rank, const int64_t *dims,
                                int none_percent)
{
    const int k = tu_fz_pick(f->r, 100);
    if (f->x != FROST_TENSOR_NONE && tu_fz_chance(f->r, 2)) { /* in place: never accepted */
        f->aliased = 1;
        return f->x;
    }
    if (k < none_percent)
        return FROST_TENSOR_NONE;
    if (k < none_percent + (100 - none_percent) / 2)
        return FROST_TENSOR_AUTO;
    int64_t d[FROST_MAX_RANK + 1] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    for (int i = 0; i < rank && i <= FROST_MAX_RANK; i++)
        d[i] = dims[i];
    if (tu_fz_chance(f->r, 8) && rank > 0)
        d[tu_fz_pick(f->r, rank)] += 1;
    if (tu_fz_chance(f->r, 8))
        dt = tu_fz_io_dtype(f->r);
    return tu_fz_declare(f, name, dt, rank, d, NULL, 1);
}

/* Records a tensor the op tu_fz_created (AUTO) as an output to bind. */
void tu_fz_created(tu_fuzz *f, frost_tensor t)
{
    if (t == FROST_TENSOR_NONE || t == FROST_TENSOR_AUTO)
        return;
    for (int i = 0; i < f->nt; i++)
        if (f->id[i] == t)
            return;
    if (f->nt < TU_FZ_MAX_TENSORS) {
        f->id[f->nt] = t;
        f->output[f->nt++] = 1;
    }
}

/* The explain report: a sizing call, a short buffer (truncated, terminated, nothing written
 * past its cap) and the whole report, of the same length. */
void tu_fz_check_explain(const frost_graph *g, tu_rng *r, const char *what)
{
    size_t len = 0, again = 0;
    char part[17];
    frost_status s = frost_graph_explain(g, NULL, 0, &len);
    if (s != FROST_OK || len == 0) {
        tu_failf("%s: explain (sizing) returned %s, length %zu", what, frost_status_name(s), len);
        return;
    }
    const size_t cap = (size_t)tu_int(r, 1, 16);
    memset(part, '#', sizeof part);
    s = frost_graph_explain(g, part, cap, NULL);
    if (s != FROST_OK || strlen(part) != (len < cap - 1 ? len : cap - 1) || part[cap] != '#' || part[16] != '#')
        tu_failf("%s: explain into %zu bytes: %s, not the report's first bytes, terminated", what, cap,
                 frost_status_name(s));
    char *full = malloc(len + 1);
    if (!full)
        return;
    s = frost_graph_explain(g, full, len + 1, &again);
    if (s != FROST_OK || again != len || strlen(full) != len)
        tu_failf("%s: explain returned %s, %zu bytes (sized %zu)", what, frost_status_name(s), strlen(full), len);
    free(full);
}

/* Runs the built graph on guarded buffers; returns 1 when it ran. */
int tu_fz_run(tu_fuzz *f, const char *what)
{
    tu_buf buf[TU_FZ_MAX_TENSORS];
    frost_binding bind[TU_FZ_MAX_TENSORS];
    const char *names[TU_FZ_MAX_TENSORS];
    int nb = 0, ran = 0;
    size_t wsb = 0;
    void *ws = NULL;
    TU_OK(frost_graph_workspace_size(f->g, &wsb));
    if (wsb > ((size_t)64 << 20))
        return 0;
    for (int i = 0; i < f->nt; i++) {
        frost_tensor_desc d;
        TU_OK(frost_graph_tensor_desc(f->g, f->id[i], &d));
        if (tu_span(d.rank, d.dims, d.strides) > TU_FZ_MAX_SPAN)
            goto out;
        if (!tu_buf_alloc(&buf[nb], d.dtype, d.rank, d.dims, d.strides, 0)) {
            tu_failf("%s: no buffer for %s", what, d.name);
            goto out;
        }
        names[nb] = d.name;
        if (!f->output[i] && f->fill)
            f->fill(f, d.name, &buf[nb]);
        else if (!f->output[i])
            tu_buf_fill_uniform(&buf[nb], f->r, -2.0, 2.0);
        bind[nb] = (frost_binding){f->id[i], buf[nb].data};
        nb++;
    }
    ws = wsb ? malloc(wsb) : NULL;
    frost_status s = frost_graph_execute(f->g, bind, nb, ws, NULL);
    if (s == FROST_INVALID_ARGUMENT && f->data_may_be_invalid) {
        tu_fz_expect_refusal(s, what);
        goto out;
    }
    if (s != FROST_OK) {
        tu_failf("%s: execute returned %s (%s)", what, frost_status_name(s), frost_last_error());
        goto out;
    }
    ran = 1;
    for (int i = 0; i < nb; i++) {
        if (tu_guard_check(&buf[i], names[i]) != 0)
            tu_failf("%s: tensor %s: elements outside the tensor were written", what, names[i]);
        const int64_t n = f->output[i] ? tu_buf_count_nan(&buf[i]) : 0;
        if (n)
            tu_failf("%s: output %s: %lld elements left NaN", what, names[i], (long long)n);
    }
    if (getenv("FROST_TEST_VERBOSE")) /* the graph's tensors, to read a failure */
        for (int i = 0; i < nb; i++) {
            fprintf(stderr, "  %s %s %s [", f->output[i] ? "out" : "in ", names[i], frost_dtype_name(buf[i].dtype));
            for (int k = 0; k < buf[i].rank; k++)
                fprintf(stderr, "%s%lld/%lld", k ? ", " : "", (long long)buf[i].dims[k], (long long)buf[i].strides[k]);
            fprintf(stderr, "] (dim/stride)\n");
        }
out:
    for (int i = 0; i < nb; i++)
        tu_buf_free(&buf[i]);
    free(ws);
    return ran;
}

int tu_fz_build_and_run(tu_fuzz *f, const char *what)
{
    /* build options: the default, every candidate, an engine this context lacks, an engine
     * that does not exist */
    const int k = tu_fz_pick(f->r, 20);
    const frost_build_options opt = {.policy = k == 0 ? FROST_BUILD_ALL : FROST_BUILD_HEURISTIC,
                                     .engine = k == 1   ? "cuda"
                                               : k == 2 ? "nope"
                                                        : NULL};
    tu_fz_check_explain(f->g, f->r, what);
    frost_status s = frost_graph_build(f->g, &opt);
    tu_fz_expect_refusal(s, what);
    if (s == FROST_OK && opt.engine)
        tu_failf("%s: built with engine \"%s\" on a CPU context", what, opt.engine);
    if (s != FROST_OK)
        return -1;
    tu_fz_check_explain(f->g, f->r, what);
    return tu_fz_run(f, what);
}

int tu_fz_cases(frost_context *ctx, uint64_t seed, int kinds, int iters, int wide_iters,
                void (*one)(frost_context *ctx, uint64_t seed, int index, int kind, int it, int wide))
{
    const int only = tu_case_filter();
    int cases = 0;
    for (int wide = 0; wide < 2 && ctx; wide++) {
        const int n = wide ? wide_iters : iters, base = wide ? kinds * iters : 0;
        for (int kind = 0; kind < kinds; kind++)
            for (int it = 0; it < n; it++) {
                const int index = base + kind * n + it;
                if (only >= 0 && index != only)
                    continue;
                tu_case_begin();
                one(ctx, seed, index, kind, it, wide);
                tu_case_end();
                cases++;
            }
    }
    return cases;
}

/* ---- the cuda engine's planning, on the host ---- */

static frost__device planning_devices[2] = {
    {.cc_major = 9,
     .arch = "sm_90a",
     .sm_count = 132,
     .smem_per_block_optin = 232448,
     .smem_per_sm = 233472,
     .l2_bytes = 50u << 20,
     .name = "an H200 (planning only)"},
    {.cc_major = 8,
     .arch = "sm_80",
     .sm_count = 108,
     .smem_per_block_optin = 166912,
     .smem_per_sm = 167936,
     .l2_bytes = 40u << 20,
     .name = "an A100 (planning only)"},
};
int tu_fz_planned[2], tu_fz_plan_refused[2];

int tu_fz_check_cuda_plans(const frost_graph *graph, const char *what,
                           void (*check)(int op, const void *problem, const void *plan, int sm90, const char *what))
{
    const frost__graph *g = &graph->g;
    const int before = tu_fz_planned[0];
    for (int i = 0; i < g->num_nodes; i++) {
        const frost__node *n = &g->nodes[i];
        const frost__op_impl *impl = frost__op_classes[n->op]->impl[FROST__ENGINE_CUDA];
        for (int d = 0; impl && d < 2; d++) {
            frost_context ctx = {.kind = FROST_DEVICE_CUDA, .device = &planning_devices[d]};
            void *plan = NULL;
            frost__buf why = {0};
            const frost_status s = impl->select(&ctx, g, n, &plan, &why);
            if (s == FROST_OK) {
                tu_fz_planned[d]++;
                if (check)
                    check((int)n->op, n->problem, plan, d == 0, what);
                if (impl->release)
                    impl->release(plan);
                else
                    free(plan);
            } else if (s == FROST_NOT_SUPPORTED && frost__buf_str(&why)[0]) {
                tu_fz_plan_refused[d]++;
            } else {
                tu_failf("%s: cuda select on %s: %s, \"%s\"", what, planning_devices[d].name, frost_status_name(s),
                         frost__buf_str(&why));
            }
            frost__buf_free(&why);
        }
    }
    return tu_fz_planned[0] - before;
}
