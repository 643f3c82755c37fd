/*
 * test_norm_fuzz.c — random descriptors for every normalization op (LayerNorm, RMSNorm,
 * AdaLayerNorm, GroupNorm, InstanceNorm, BatchNorm; forward and backward) on the CPU
 * context.  Shapes (empty dims and ranks out of range included), dtypes, strides (packed,
 * permuted with gaps, arbitrary, broadcast), parameter and statistics shapes, optional
 * tensors, a tensor passed twice or a stranger's id, and the scalar options (epsilon,
 * groups, phase, momentum) are drawn at random, most combinations invalid.
 *
 * Each call must answer OK, INVALID_ARGUMENT or NOT_SUPPORTED, and any refusal must carry a
 * message.  A graph that builds runs on guarded buffers (NaN margins and gaps, outputs
 * poisoned): the run must succeed, leave every guard element as it was, and write every
 * element of every output (finite inputs, epsilon > 0: no output element may stay NaN).
 * Under the CI's sanitizer build this is also the check that no descriptor makes the
 * validation, the planning or the reference kernels read or write out of bounds or leak.
 *
 * Every accepted graph also goes through the cuda engine's select (its whole planning: it
 * never compiles nor touches a device) for two devices described on the host, an H200 and
 * an A100: each node gets a plan or NOT_SUPPORTED with a sentence, and a row norm's plan
 * must keep the invariants its kernels rely on (check_row_plan).  A further 500 draws per
 * op and direction give X one dim of a real width (rows of up to 20000 columns, 512
 * channels) and are planned only, so the planning of real shapes with random strides and
 * options runs under the sanitizers too, without a GPU.
 */
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "norm_fuzz_draw.h"
#include "ops/norm/norm_cuda.h"

#define ITERS 1500     /* graphs per op and direction */
#define PLAN_ITERS 500 /* wide graphs per op and direction, planned only */

/* ---- the cuda engine's planning, on the host ------------------------------------------ */

static int is_row_norm(frost__op op)
{
    return op == FROST__OP_LAYERNORM_FWD || op == FROST__OP_LAYERNORM_BWD || op == FROST__OP_RMSNORM_FWD ||
           op == FROST__OP_RMSNORM_BWD || op == FROST__OP_ADALAYERNORM_FWD || op == FROST__OP_ADALAYERNORM_BWD;
}

static int planned_levels[2]; /* row norms planned on sm_90 with 2 row levels, with 3 or more */

/* The plan's row levels (frost__norm_row_map): ROW_LEVELS=levels in the key exactly when
 * there are several, each inner level at least 2 steps that divide the rows, and every data
 * and statistics row where its strides put it (first, last and middle rows, and those
 * around each level's first boundaries). */
static void check_row_map(const frost__norm_problem *p, const frost__norm_plan *pl, const char *what)
{
    static const int slots[] = {FROST__NORM_X,   FROST__NORM_Y,    FROST__NORM_D_Y,
                                FROST__NORM_D_X, FROST__NORM_MEAN, FROST__NORM_INV_STD};
    const frost__norm_row_map *m = &pl->row_map;
    int keyed = 0, bad = m->levels < 1 || m->levels > NORM_ROW_LEVELS;
    char want[32];
    snprintf(want, sizeof want, "ROW_LEVELS=%d", m->levels);
    for (int i = 0; i < pl->key.num_defines; i++)
        if (strncmp(pl->key.defines[i], "ROW_LEVELS", 10) == 0)
            keyed |= strcmp(pl->key.defines[i], want) == 0 ? 1 : 2;
    int64_t span = 1, probes[10 + 6 * NORM_ROW_LEVELS];
    int np = 0;
    for (int i = 0; !bad && i < m->levels - 1; i++) {
        bad |= m->dims[i] < 2;
        span *= m->dims[i];
        bad |= span >= p->rows || p->rows % span;
        const int64_t around[] = {span - 1, span, span + 1, 2 * span - 1, 2 * span, 2 * span + 1};
        for (int k = 0; k < 6; k++)
            probes[np++] = around[k];
    }
    if (bad || keyed != (m->levels > 1))
        tu_failf("%s: %d row levels (steps %lld, %lld; key define %d) for %lld rows", what, m->levels,
                 (long long)m->dims[0], (long long)m->dims[1], keyed, (long long)p->rows);
    const int64_t ends[] = {0, 1, 2, p->rows / 2, p->rows - 2, p->rows - 1};
    for (int k = 0; k < 6; k++)
        probes[np++] = ends[k];
    for (size_t s = 0; s < sizeof slots / sizeof slots[0]; s++)
        for (int k = 0; p->slot[slots[s]].present && k < np; k++) {
            const int64_t r = probes[k];
            if (r < 0 || r >= p->rows)
                continue;
            const int64_t got = frost__norm_row_map_offset(m, slots[s], r);
            const int64_t want_at = frost__norm_row_offset(p, slots[s], r);
            if (got != want_at)
                tu_failf("%s: slot %d row %lld starts at %lld by the plan's row map, at %lld by its strides", what,
                         slots[s], (long long)r, (long long)got, (long long)want_at);
        }
}

/* What the row-norm kernels rely on in a plan: whole row groups in a block of whole warps,
 * a row covered by its group unless chunked, a reduce of whole warps, no split rows without
 * clusters, rows where the strides put them. */
static void check_row_plan(int op, const void *problem, const void *plan, int sm90, const char *what)
{
    if (!is_row_norm((frost__op)op))
        return;
    const frost__norm_plan *pl = plan;
    const frost__norm_problem *p = problem;
    const int vec_ok = pl->vec == 1 || pl->vec == 2 || pl->vec == 4 || pl->vec == 8;
    if (pl->group < 1 || pl->block < 32 || pl->block > 1024 || pl->block % 32 || pl->block % pl->group ||
        pl->rows_per_block_groups != pl->block / pl->group || pl->nv < 1 || !vec_ok || pl->row_split < 1 ||
        (!sm90 && pl->row_split != 1) || pl->stages < 0 || pl->ring_bytes > 232448 || !pl->key.source)
        tu_failf("%s: plan group %d block %d row groups %d nv %d vec %d row_split %d stages %d ring %zu", what,
                 pl->group, pl->block, pl->rows_per_block_groups, pl->nv, pl->vec, pl->row_split, pl->stages,
                 pl->ring_bytes);
    if (!pl->looped && (int64_t)pl->group * pl->nv * pl->vec * pl->row_split < p->cols)
        tu_failf("%s: %d x %d x %d x %d elements a row group, the rows hold %lld", what, pl->group, pl->nv, pl->vec,
                 pl->row_split, (long long)p->cols);
    if (pl->backward && (pl->reduce_threads < 32 || pl->reduce_threads > 1024 || pl->reduce_threads % 32))
        tu_failf("%s: the reduce has %d threads", what, pl->reduce_threads);
    /* the backward's segments: whole runs of rows, each gradient row the sum of
     * segments_per_out of them, all rows covered once */
    check_row_map(p, pl, what);
    if (sm90 && pl->row_map.levels > 1)
        planned_levels[pl->row_map.levels > 2]++;
    const frost__adanorm_cuda *a = &pl->ada;
    if (a->segment_rows < 1 || (p->rows > 0 && p->rows % a->segment_rows))
        tu_failf("%s: segments of %lld rows for %lld rows", what, (long long)a->segment_rows, (long long)p->rows);
    static const int grads[2] = {FROST__NORM_D_SCALE, FROST__NORM_D_BIAS};
    for (int k = 0; pl->backward && p->rows > 0 && k < 2; k++)
        if (p->slot[grads[k]].present &&
            (a->segments_per_out[k] < 1 || a->segments_per_out[k] * a->segment_rows * a->out_rows[k] != p->rows))
            tu_failf("%s: gradient %d: %lld rows of %lld segments of %lld rows for %lld rows", what, k,
                     (long long)a->out_rows[k], (long long)a->segments_per_out[k], (long long)a->segment_rows,
                     (long long)p->rows);
}

/* Inputs uniform in [-2, 2), running statistics in [0.05, 2): inference may take one
 * tensor for both, and a negative variance would leave y NaN. */
static void fill(tu_fuzz *f, const char *name, tu_buf *b)
{
    tu_buf_fill_uniform(b, f->r, strncmp(name, "running_", 8) ? -2.0 : 0.05, 2.0);
}

static int built, ran, ran_op[TU_NF_OPS][2], wide_planned;

/* One draw: checked, planned by the cuda engine's select and (unless `wide`: only added
 * and planned) built and run. */
static void one_graph(frost_context *ctx, uint64_t seed, int index, int kind, int it, int wide)
{
    const int op = kind / 2, backward = kind % 2;
    char what[96];
    snprintf(what, sizeof what, "%s %s, %sgraph %d", tu_nf_op_names[op], backward ? "backward" : "forward",
             wide ? "wide " : "", it);
    tu_rng r = tu_rng_make(seed + (uint64_t)index * 0x9e3779b97f4a7c15ULL);
    tu_set_context("test_norm_fuzz", seed, index, what);
    tu_fuzz f = {.r = &r, .fill = fill, .wide_percent = wide ? 100 : 0};
    TU_OK(frost_graph_create(ctx, &f.g));
    frost_status s = tu_nf_add(&f, (tu_nf_op)op, backward);
    tu_fz_expect_refusal(s, what);
    if (s == FROST_OK && f.aliased)
        tu_failf("%s: accepted X as one of its outputs", what);
    if (s == FROST_OK) {
        const int planned = tu_fz_check_cuda_plans(f.g, what, check_row_plan);
        wide_planned += wide ? planned : 0;
    }
    if (s == FROST_OK && !wide) {
        const int done = tu_fz_build_and_run(&f, what);
        built += done >= 0, ran += done > 0, ran_op[op][backward] += done > 0;
    }
    frost_graph_destroy(f.g);
}

int main(void)
{
    const uint64_t seed = tu_seed(0x6e6f726d66757aULL);
    const int only = tu_case_filter();
    frost_context *ctx = NULL;
    TU_OK(frost_context_create(NULL, &ctx));
    /* ITERS small draws an op and direction, then PLAN_ITERS with one dim of a real width
     * (planned only: the reference would take too long on them) */
    const int cases = tu_fz_cases(ctx, seed, TU_NF_OPS * 2, ITERS, PLAN_ITERS, one_graph);
    frost_context_destroy(ctx);
    printf("test_norm_fuzz: %d graphs, %d built, %d ran (forward / backward:", cases, built, ran);
    for (int op = 0; op < TU_NF_OPS; op++)
        printf(" %s %d / %d", tu_nf_op_names[op], ran_op[op][0], ran_op[op][1]);
    printf(")\n");
    printf("test_norm_fuzz: the cuda engine's select planned %d / %d nodes (%d of them wide, %d row norms with "
           "two row levels and %d with three or more on sm_90) and refused %d / %d (sm_90 / sm_80)\n",
           tu_fz_planned[0], tu_fz_planned[1], wide_planned, planned_levels[0], planned_levels[1],
           tu_fz_plan_refused[0], tu_fz_plan_refused[1]);
    if (only < 0 && (tu_fz_planned[0] < 1000 || tu_fz_planned[1] < 1000 || wide_planned < 300 ||
                     planned_levels[0] < 100 || planned_levels[1] < 50))
        tu_failf("the cuda engine planned only %d / %d nodes (%d wide, %d / %d with two / more row levels)",
                 tu_fz_planned[0], tu_fz_planned[1], wide_planned, planned_levels[0], planned_levels[1]);
    /* the draws must reach every op's reference kernels, not only the validation */
    for (int op = 0; op < TU_NF_OPS && only < 0; op++)
        for (int backward = 0; backward < 2; backward++)
            if (ran_op[op][backward] < ITERS / 20)
                tu_failf("%s %s: only %d of %d graphs ran: the draws are too often invalid", tu_nf_op_names[op],
                         backward ? "backward" : "forward", ran_op[op][backward], ITERS);
    return tu_finish(cases);
}
