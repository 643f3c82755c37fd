/*
 * test_norm_cuda_plan.c — the cuda engine's configuration of LayerNorm and RMSNorm,
 * checked on the host (no GPU needed): frost__norm_cuda_config() (norm_cuda_config.c)
 * on problems built by the public add functions, so the layouts are what the engines see.
 *
 * Each case names the row group, units a thread, chunked or not, ring depth and grid kind
 * the table must give (the choices docs/PERF.md's sweeps stand behind), and a phrase its
 * kernel key must hold; backward cases also the reduce kernel's slices of partial rows.
 * FROST_NORM_TUNE overrides are checked to reach the plan and the key, and an unset
 * variable to leave the table alone.  Then the backward's split of rows between blocks,
 * held parameters, and row levels (where each tensor's rows start).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "ops/norm/norm_cuda.h"
#include "runtime/runtime.h"
#include "test_util.h"

static frost_context *cpu;

typedef struct plan_case {
    const char *name;
    int rms, backward;
    int64_t rows, cols;
    frost_dtype dtype;
    const char *tune; /* FROST_NORM_TUNE for this case (NULL: unset) */
    int group, nv, looped, stages, persistent;
    const char *key_has; /* a phrase the key must contain (NULL: none) */
} plan_case;

static const plan_case cases[] = {
    /* name, rms, bwd, rows, cols, dtype, tune, group, nv, looped, stages, persistent, key has */
    {"rms fwd 4096: one-pass grid", 1, 0, 16384, 4096, FROST_BF16, NULL, 256, 2, 0, 2, 0, "STAGES=2"},
    {"ln fwd 4096: full rows, one-pass grid", 0, 0, 16384, 4096, FROST_BF16, NULL, 256, 2, 0, 2, 0, "MINB=4"},
    {"ln fwd 1000: a partial unit, short rows, one-pass", 0, 0, 16384, 1000, FROST_BF16, NULL, 64, 2, 0, 2, 0,
     "GROUP=64"},
    {"rms fwd 1024: 4 row groups a block", 1, 0, 65536, 1024, FROST_BF16, NULL, 64, 2, 0, 2, 0, "GROUP=64"},
    {"tune: a warp a 1000-column row, parameters per row (bench/row_short.txt)", 0, 0, 16384, 1000, FROST_BF16,
     "nv=4,preg=0,minb=4,persist=0,trips=2", 32, 4, 0, 2, 0, "GROUP=32"},
    {"rms fwd 8192: 256 x 4 units, one-pass grid", 1, 0, 8192, 8192, FROST_BF16, NULL, 256, 4, 0, 2, 0, "MINB=4"},
    {"ln fwd 8192: 256 x 4 units, one-pass grid", 0, 0, 8192, 8192, FROST_BF16, NULL, 256, 4, 0, 2, 0, "MINB=3"},
    {"ln fwd f32 4096: 512 x 2 units, persistent", 0, 0, 8192, 4096, FROST_F32, NULL, 512, 2, 0, 2, 1, "NV=2"},
    {"rms fwd 16384: 4 units, two blocks a SM, one-pass", 1, 0, 4096, 16384, FROST_BF16, NULL, 512, 4, 0, 2, 0,
     "MINB=2"},
    {"ln fwd 16384: 4 units, two blocks a SM, one-pass", 0, 0, 4096, 16384, FROST_BF16, NULL, 512, 4, 0, 2, 0,
     "MINB=2"},
    {"ln fwd f16 16384 loads its parameters per row", 0, 0, 8192, 16384, FROST_F16, NULL, 512, 4, 0, 2, 0,
     "STAGES=2"},
    {"tune: preg=1 holds the parameters, one block a SM", 0, 0, 4096, 16384, FROST_BF16, "preg=1", 512, 4, 0, 2, 0,
     "MINB=1"},
    {"tune: persist=1 on 16384 LayerNorm rows", 0, 0, 4096, 16384, FROST_BF16, "persist=1", 512, 4, 0, 2, 1,
     "MINB=2"},
    {"tune: preg=0 on 4096 LayerNorm rows: 6 blocks", 0, 0, 16384, 4096, FROST_BF16, "preg=0", 256, 2, 0, 2, 0,
     "MINB=6"},
    {"rms fwd 128: groups of 8 hold parameters, 5 blocks", 1, 0, 262144, 128, FROST_BF16, NULL, 8, 2, 0, 2, 0,
     "MINB=5"},
    {"ln fwd f16 holds its parameters", 0, 0, 16384, 4096, FROST_F16, NULL, 256, 2, 0, 2, 0, "PARAMS_REG"},
    {"rms fwd 5120: 256 x 3 units, one row a group", 1, 0, 16384, 5120, FROST_BF16, NULL, 256, 3, 0, 2, 0, "NV=3"},
    {"tune: nv=2 keeps rms fwd 5120 at 512 x 2", 1, 0, 16384, 5120, FROST_BF16, "nv=2", 512, 2, 0, 2, 1, "NV=2"},
    {"rms fwd f32 5120 (1280 units): 1024 x 2, untouched", 1, 0, 16384, 5120, FROST_F32, NULL, 1024, 2, 0, 2, 1, "NV=2"},
    {"ln fwd 16384 converts its row to f32 once", 0, 0, 4096, 16384, FROST_BF16, NULL, 512, 4, 0, 2, 0, "LN_WIDE"},
    {"tune: xf32=1 reaches 4096-column keys", 0, 0, 16384, 4096, FROST_BF16, "xf32=1", 256, 2, 0, 2, 0, "LN_WIDE"},
    {"rms fwd 32768: chunked", 1, 0, 1024, 32768, FROST_BF16, NULL, 1024, 2, 1, 0, 1, "LOOPED"},
    {"rms bwd 4096", 1, 1, 16384, 4096, FROST_BF16, NULL, 256, 2, 0, 2, 1, "DSCALE"},
    {"rms bwd 16384 split, holds its scale", 1, 1, 4096, 16384, FROST_BF16, NULL, 512, 2, 0, 3, 1, "PARAMS_REG"},
    {"tune: bpreg=0 loads the scale per row", 0, 1, 16384, 4096, FROST_BF16, "bpreg=0", 256, 2, 0, 2, 1, "DBIAS"},
    {"ln bwd 12288: 3 units", 0, 1, 1024, 12288, FROST_BF16, NULL, 512, 3, 0, 2, 1, "NV=3"},
    {"ln bwd 16384 whole: 4 units from the ring, not chunked", 0, 1, 4096, 16384, FROST_BF16, "split=0", 512, 4, 0, 2,
     1, "STAGES=2"},
    {"rms bwd f32 16384: chunked", 1, 1, 256, 16384, FROST_F32, NULL, 512, 1, 1, 0, 1, "LOOPED"},
    {"rms fwd 1001: scalar path, no ring", 1, 0, 512, 1001, FROST_BF16, NULL, 128, 8, 0, 0, 0, "VEC=1"},
    {"tune: stages=3,persist=1", 1, 0, 16384, 4096, FROST_BF16, "stages=3,persist=1", 256, 2, 0, 3, 1, "STAGES=3"},
    {"tune: l2=1 reaches the key", 0, 1, 16384, 4096, FROST_BF16, "l2=1", 256, 2, 0, 2, 1, "L2_256"},
    {"tune: bcl=0 keeps backward blocks apart", 0, 1, 16384, 4096, FROST_BF16, "bcl=0", 256, 2, 0, 2, 1, NULL},
    {"ln bwd 1000: 4 row groups, a named barrier each", 0, 1, 16384, 1000, FROST_BF16, NULL, 64, 2, 0, 2, 1,
     "GROUP_BAR"},
    {"tune: gbar=0 keeps the block barrier", 1, 1, 65536, 1024, FROST_BF16, "gbar=0", 64, 2, 0, 2, 1, "GROUP=64"},
    {"tune: gbar=1 reaches the forward", 1, 0, 65536, 1024, FROST_BF16, "gbar=1", 64, 2, 0, 2, 0, "GROUP_BAR"},
    {"tune: bcl=4 on 512-thread rows", 1, 1, 8192, 8192, FROST_BF16, "bcl=4", 512, 2, 0, 2, 1, "BWD_CLUSTER=4"},
    {"tune: nv=4 on 4096", 1, 0, 16384, 4096, FROST_BF16, "nv=4", 128, 4, 0, 2, 0, "NV=4"},
    {"tune: stages=0 is register prefetch", 0, 0, 8192, 8192, FROST_BF16, "stages=0", 256, 4, 0, 0, 0, NULL},
    {"tune: persist=0 on a backward is ignored", 1, 1, 16384, 4096, FROST_BF16, "persist=0", 256, 2, 0, 2, 1, NULL},
    {"ln fwd 1024: equal-count merges", 0, 0, 65536, 1024, FROST_BF16, NULL, 64, 2, 0, 2, 0, "LN_EQUAL"},
    {"ln fwd 16384: 512-thread rows merge per warp", 0, 0, 4096, 16384, FROST_BF16, NULL, 512, 4, 0, 2, 0, "LN_MERGE"},
    {"tune: lnm=1 on 4096", 0, 0, 16384, 4096, FROST_BF16, "lnm=1", 256, 2, 0, 2, 0, "LN_MERGE"},
    {"tune: lnm=2 on 5120 (not full) keeps two reductions", 0, 0, 16384, 5120, FROST_BF16, "lnm=2", 512, 2, 0, 2, 1,
     "NV=2"},
    {"ln fwd 5120: a partly filled unit, two reductions", 0, 0, 16384, 5120, FROST_BF16, NULL, 512, 2, 0, 2, 1, "NV=2"},
    {"ln fwd 128: row groups of 8, no barrier, one-pass", 0, 0, 262144, 128, FROST_BF16, NULL, 8, 2, 0, 2, 0,
     "GROUP=8"},
    {"tune: lnm=0 turns one-barrier statistics off", 0, 0, 16384, 4096, FROST_BF16, "lnm=0", 256, 2, 0, 2, 0, NULL},
    {"tune: minb=2 overrides the blocks", 1, 0, 16384, 4096, FROST_BF16, "minb=2", 256, 2, 0, 2, 0, "MINB=2"},
    {"rms fwd f32 1024: 6 blocks a SM", 1, 0, 4096, 1024, FROST_F32, NULL, 128, 2, 0, 2, 0, "MINB=6"},
    {"tune: lnm=1 on 5120", 0, 0, 16384, 5120, FROST_BF16, "lnm=1", 512, 2, 0, 2, 1, "LN_MERGE"},
    {"ln bwd 1024: 4 row groups, 16 reduce slices", 0, 1, 65536, 1024, FROST_BF16, NULL, 64, 2, 0, 2, 1, "DBIAS"},
    {"rms bwd 1024: 16 reduce slices", 1, 1, 65536, 1024, FROST_BF16, NULL, 64, 2, 0, 2, 1, "DSCALE"},
    {"ln bwd 128: 32 row groups, 32 reduce slices", 0, 1, 262144, 128, FROST_BF16, NULL, 8, 2, 0, 2, 1, "GROUP=8"},
    {"tune: rslices=4 reaches the reduce", 0, 1, 16384, 4096, FROST_BF16, "rslices=4", 256, 2, 0, 2, 1, NULL},
    {"tune: lnfma=0 subtracts first", 0, 0, 16384, 4096, FROST_BF16, "lnfma=0", 256, 2, 0, 2, 0, "LN_EXACT"},
    {"tune: pdl=0 launches the reduce plainly", 1, 1, 16384, 4096, FROST_BF16, "pdl=0", 256, 2, 0, 2, 1, NULL},
    {"tune: trips=3 on a one-pass grid", 1, 0, 16384, 4096, FROST_BF16, "trips=3", 256, 2, 0, 2, 0, NULL},
    {"tune: ilp=1 reaches the key", 1, 0, 16384, 4096, FROST_BF16, "ilp=1", 256, 2, 0, 2, 0, "NORM_ILP"},
    {"split ln fwd 16384: halves of 256 x 4 units", 0, 0, 4096, 16384, FROST_BF16, "split=2", 256, 4, 0, 2, 0,
     "ROW_SPLIT=2"},
    {"split rms fwd 16384", 1, 0, 4096, 16384, FROST_BF16, "split=2", 256, 4, 0, 2, 0, "ROW_SPLIT=2"},
    {"ln bwd 16384: split, halves of 512 x 2 units, 3 stages", 0, 1, 4096, 16384, FROST_BF16, NULL, 512, 2, 0, 3, 1,
     "ROW_SPLIT=2"},
    {"rms bwd f32 8192: split", 1, 1, 4096, 8192, FROST_F32, NULL, 512, 2, 0, 3, 1, "ROW_SPLIT=2"},
    {"tune: split=0 keeps backward rows whole, statistics one row ahead", 1, 1, 4096, 16384, FROST_BF16, "split=0",
     512, 4, 0, 2, 1, "BWD_STATS_AHEAD=1"},
    {"tune: sahead=3 reaches the key", 0, 1, 16384, 4096, FROST_BF16, "sahead=3", 256, 2, 0, 2, 1,
     "BWD_STATS_AHEAD=3"},
    {"tune: split=2,nv=2 forward: LN_MERGE halves stay whole", 0, 0, 4096, 16384, FROST_BF16, "split=2,nv=2", 512, 4,
     0, 2, 0, "LN_MERGE"},
    {"split: 12288 halves do not fill their groups", 0, 1, 1024, 12288, FROST_BF16, "split=2", 512, 3, 0, 2, 1,
     "NV=3"},
};
#define NUM_CASES ((int)(sizeof cases / sizeof cases[0]))

static frost_tensor add(frost_graph *g, const char *name, frost_dtype dt, int rank, const int64_t *dims)
{
    frost_tensor_desc d = {.name = name, .dtype = dt, .rank = rank};
    frost_tensor id = 0;
    for (int i = 0; i < rank; ++i)
        d.dims[i] = dims[i];
    TU_OK(frost_graph_add_tensor(g, &d, &id));
    return id;
}

static void add_node(frost_graph *g, const plan_case *c)
{
    const int64_t dims[2] = {c->rows, c->cols}, pdims[1] = {c->cols};
    frost_tensor x = add(g, "x", c->dtype, 2, dims), w = add(g, "scale", c->dtype, 1, pdims);
    if (!c->backward) {
        frost_norm_desc d = {.x = x, .scale = w};
        frost_norm_outputs o = {.y = FROST_TENSOR_AUTO, .inv_std = FROST_TENSOR_AUTO};
        if (!c->rms)
            d.bias = add(g, "bias", c->dtype, 1, pdims), o.mean = FROST_TENSOR_AUTO;
        TU_OK(c->rms ? frost_graph_add_rmsnorm(g, &d, &o) : frost_graph_add_layernorm(g, &d, &o));
        return;
    }
    frost_norm_backward_desc d = {.x = x, .d_y = add(g, "d_y", c->dtype, 2, dims), .scale = w, .has_bias = !c->rms};
    frost_norm_grads o = {.d_x = FROST_TENSOR_AUTO, .d_scale = FROST_TENSOR_AUTO};
    if (!c->rms)
        o.d_bias = FROST_TENSOR_AUTO;
    TU_OK(c->rms ? frost_graph_add_rmsnorm_backward(g, &d, &o) : frost_graph_add_layernorm_backward(g, &d, &o));
}

static void run_case(int index, int at)
{
    const plan_case *c = &cases[at];
    tu_set_context("test_norm_cuda_plan", 0, index, c->name);
    frost_graph *g = NULL;
    const int f0 = tu_failures();
    TU_OK(frost_graph_create(cpu, &g));
    add_node(g, c);
    if (tu_failures() != f0 || !g->g.num_nodes) {
        frost_graph_destroy(g);
        return;
    }
    if (c->tune)
        setenv("FROST_NORM_TUNE", c->tune, 1);
    else
        unsetenv("FROST_NORM_TUNE");
    frost__norm_plan plan;
    frost__buf why = {0}, text = {0};
    const frost_status s = frost__norm_cuda_config(g->g.nodes[0].problem, &plan, &why);
    unsetenv("FROST_NORM_TUNE");
    if (s != FROST_OK) {
        tu_failf("refused: %s", frost__buf_str(&why));
    } else {
        frost__key_print(&plan.key, &text);
        const char *k = frost__buf_str(&text);
        if (plan.group != c->group || plan.nv != c->nv || plan.looped != c->looped || plan.stages != c->stages ||
            plan.persistent != c->persistent)
            tu_failf("group %d nv %d looped %d stages %d persistent %d; expected %d %d %d %d %d (key %s)", plan.group,
                     plan.nv, plan.looped, plan.stages, plan.persistent, c->group, c->nv, c->looped, c->stages,
                     c->persistent, k);
        if (c->key_has && !strstr(k, c->key_has))
            tu_failf("key %s lacks \"%s\"", k, c->key_has);
        /* rows split over clusters: the backward's 512 x 4 rows by default, the forward's only
         * when asked (split=2), nothing with split=0 */
        if (strstr(k, "ROW_SPLIT") && ((!c->backward && !(c->tune && strstr(c->tune, "split=2"))) ||
                                       (c->tune && strstr(c->tune, "split=0"))))
            tu_failf("key %s splits its rows unasked", k);
        /* f32 rows once: LayerNorm forward's 16-bit 512 x 4 rows unless xf32=0, others with xf32=1 */
        const int xf32 = c->tune && strstr(c->tune, "xf32=") ? atoi(strstr(c->tune, "xf32=") + 5)
                                                              : !c->rms && plan.block == 512 && plan.nv == 4;
        if (!!strstr(k, "LN_WIDE") != (!c->backward && c->dtype != FROST_F32 && plan.vec > 1 && !plan.looped && xf32))
            tu_failf("key %s: expected LN_WIDE %d", k, xf32);
        if (!c->tune && strstr(k, "L2_256"))
            tu_failf("key %s asks for 256-byte L2 fetches without FROST_NORM_TUNE", k);
        /* LayerNorm forward: one-barrier statistics exactly when a row fills its row group of
         * more than a warp (every warp holds as many columns), equal-count merges (LN_EQUAL)
         * for groups of up to 256 threads and per-warp merges (LN_MERGE) above; lnm= says
         * which (2 only for full rows) */
        const int full = !plan.looped && plan.group > 32 &&
                         c->cols == (int64_t)plan.group * plan.nv * plan.vec * plan.row_split;
        const int lnm = c->tune && strstr(c->tune, "lnm=") ? atoi(strstr(c->tune, "lnm=") + 4)
                        : full                            ? (plan.group <= 256 ? 2 : 1)
                                                          : 0;
        const int ln = !c->rms && !c->backward;
        const int want_equal = ln && lnm == 2 && full, want_merge = ln && lnm && !want_equal;
        if (!!strstr(k, "LN_MERGE") != want_merge || !!strstr(k, "LN_EQUAL") != want_equal)
            tu_failf("key %s: expected LN_MERGE %d, LN_EQUAL %d", k, want_merge, want_equal);
        /* forward rows of 256-thread blocks ask for more resident blocks: 6 (3 at 4 units a
         * thread) for RMSNorm and for LayerNorm's full rows (on a one-pass grid); 512 x 4
         * units 2; less where parameters are held (below) */
        const int narrow = !c->backward && plan.vec > 1 && !plan.looped && plan.block == 256;
        /* forward vector rows hold their parameter units in registers unless preg=0, which
         * changes the bounds: LayerNorm's one-pass 2-unit rows 4, its 512 x 4 rows 1;
         * RMSNorm's 8-thread groups 5, its 256 x 4 rows 4.  LayerNorm's 512 x 4 rows with
         * 16-bit I/O load theirs per row (two blocks) unless preg=1 or preg=2 asks to hold them */
        const int ln_wide = ln && plan.block == 512 && plan.nv == 4 && plan.vec == 8;
        const int preg_on = c->tune && (strstr(c->tune, "preg=1") || strstr(c->tune, "preg=2"));
        int held = !c->backward && plan.vec > 1 && !plan.looped && !(c->tune && strstr(c->tune, "preg=0")) &&
                   (!ln_wide || preg_on),
            want_minb;
        for (;; held = 0) {
            want_minb = c->tune && strstr(c->tune, "minb=") ? atoi(strstr(c->tune, "minb=") + 5)
                        : narrow && c->rms ? (plan.nv <= 2 ? (held && plan.group <= 32 ? 5 : 6) : held ? 4 : 3)
                        : narrow && full   ? (plan.nv <= 2 ? (held ? 4 : 6) : 3)
                        : !c->backward && plan.block == 512 && plan.nv == 4 && plan.vec > 1 ? (held && !c->rms ? 1 : 2)
                                                                                             : 0;
            /* held only where the bounds leave 20 + 4 words a unit of x and of each parameter
             * (a parameter of x's dtype: 4 words a unit) */
            const int blocks = want_minb > 0 ? want_minb : plan.block <= 256 ? 2 : 1;
            const int cap = 65536 / (plan.block * blocks) / 8 * 8;
            if (!held || 20 + 4 * plan.nv * (c->rms ? 2 : 3) <= (cap > 255 ? 255 : cap))
                break;
        }
        /* backward rows in the ring hold their scale units where 4 words a unit fit 8 words
         * (LayerNorm) or 16 (RMSNorm), unless bpreg=0 */
        const int held_bwd = c->backward && plan.vec > 1 && !plan.looped && plan.stages > 1 &&
                             4 * plan.nv <= (c->rms ? 16 : 8) && !(c->tune && strstr(c->tune, "bpreg=0"));
        if (!!strstr(k, "PARAMS_REG") != (held || held_bwd))
            tu_failf("key %s: expected PARAMS_REG %d", k, held || held_bwd);
        char minb[16];
        snprintf(minb, sizeof minb, "MINB=%d", want_minb);
        if (want_minb ? !strstr(k, minb) : strstr(k, "MINB=") != NULL)
            tu_failf("key %s: expected %s", k, want_minb ? minb : "no MINB");
        /* named barriers per row group: the backward's blocks of several groups of 2+ warps,
         * unless gbar=0; the forward's only with gbar=1 */
        const int gbar = c->tune && strstr(c->tune, "gbar=") ? atoi(strstr(c->tune, "gbar=") + 5) : c->backward;
        const int want_gbar = gbar && !plan.looped && plan.group > 32 && plan.group < plan.block;
        if (!!strstr(k, "GROUP_BAR") != want_gbar)
            tu_failf("key %s: expected GROUP_BAR %d", k, want_gbar);
        if (!c->tune && !c->backward && strstr(k, "LN_EXACT"))
            tu_failf("key %s subtracts before the fma without FROST_NORM_TUNE lnfma=0", k);
        /* the backward's reduce: 32 slices of partial rows a block when both gradients' positions
         * (lane order: nv * group * vec, times the blocks sharing a row; column order when
         * chunked) number up to 512, 16 up
         * to 2048, else 8; REDUCE_SLICES in its key only when not 8 */
        if (c->backward) {
            const int64_t positions =
                plan.looped ? c->cols : (int64_t)plan.nv * plan.group * plan.vec * plan.row_split;
            if (plan.positions != positions)
                tu_failf("partial-row positions %lld, expected %lld", (long long)plan.positions, (long long)positions);
            const int64_t n = positions * (c->rms ? 1 : 2);
            const int slices = c->tune && strstr(c->tune, "rslices=") ? atoi(strstr(c->tune, "rslices=") + 8)
                               : n <= 512                           ? 32
                               : n <= 2048                          ? 16
                                                                    : 8;
            frost__buf rk = {0};
            frost__key_print(&plan.reduce_key, &rk);
            char want[32];
            snprintf(want, sizeof want, "REDUCE_SLICES=%d", slices);
            if (plan.reduce_threads != 32 * slices || (slices == 8) == !!strstr(frost__buf_str(&rk), want) ||
                (slices == 8 && strstr(frost__buf_str(&rk), "REDUCE_SLICES")))
                tu_failf("reduce: %d threads, key %s; expected %d slices", plan.reduce_threads, frost__buf_str(&rk),
                         slices);
            frost__buf_free(&rk);
            /* the reduce is a programmatic dependent launch unless pdl=0 */
            if (plan.reduce_early != !(c->tune && strstr(c->tune, "pdl=0")))
                tu_failf("reduce_early %d", plan.reduce_early);
            /* staged rows of one 256-thread row group a block merge partial rows in clusters
             * of two (sm_90), unless bcl says otherwise */
            const int staged_one = plan.stages > 1 && plan.vec > 1 && !plan.looped && plan.block == plan.group;
            const int want_cluster = c->tune && strstr(c->tune, "bcl=") ? atoi(strstr(c->tune, "bcl=") + 4)
                                     : staged_one && plan.block == 256 ? 2
                                                                       : 0;
            char cl[32];
            snprintf(cl, sizeof cl, "BWD_CLUSTER=%d", want_cluster);
            if ((want_cluster > 1 && staged_one) ? !strstr(k, cl) : strstr(k, "BWD_CLUSTER") != NULL)
                tu_failf("key %s: expected %s", k, want_cluster > 1 && staged_one ? cl : "no BWD_CLUSTER");
            if (plan.cluster_key != (want_cluster > 1 && staged_one ? want_cluster : 0))
                tu_failf("cluster_key %d", plan.cluster_key);
        }
        /* LayerNorm forward rows of 256-thread blocks that fill the group or are short (up to 2
         * units a thread) run a one-pass grid of two rows a row group; others stay persistent */
        const int ln_plain = narrow && !c->rms && (full || plan.nv <= 2);
        if (!c->tune && narrow && !c->rms && plan.persistent == ln_plain)
            tu_failf("LayerNorm forward %s rows on a %s grid", full ? "full" : "partial",
                     plan.persistent ? "persistent" : "one-pass");
        const int want_trips = plan.persistent                        ? 1
                               : c->tune && strstr(c->tune, "trips=") ? atoi(strstr(c->tune, "trips=") + 6)
                               : ln_plain                             ? 2
                                                                      : 1;
        if (plan.trips != want_trips)
            tu_failf("trips %d, expected %d", plan.trips, want_trips);
        /* four accumulators: LayerNorm forward rows of 512 threads x 4 units, or ilp=1 */
        const int want_ilp = !c->backward && (c->tune && strstr(c->tune, "ilp=1") ? 1
                                              : !c->rms && plan.block == 512 && plan.nv == 4 && plan.vec > 1);
        if (!!strstr(k, "NORM_ILP") != want_ilp)
            tu_failf("key %s: expected NORM_ILP %d", k, want_ilp);
    }
    frost__buf_free(&why);
    frost__buf_free(&text);
    frost_graph_destroy(g);
}

/* The backward's row split (frost__norm_split_rows): the blocks norm_bwd.cu's
 * bwd_block_rows gives rows [j * per + min(j, extra), ... + per + (j < extra)) cover the
 * segment once, in order, within the slots; spread splits differ by one row at most. */
typedef struct split_case {
    int64_t rows, slots;
    int spread;
    int64_t per_block, blocks, extra; /* expected */
} split_case;

static const split_case split_cases[] = {
    {16384, 264, 0, 63, 261, 0}, {16384, 264, 1, 62, 264, 16}, {8192, 132, 1, 62, 132, 8},
    {8192, 132, 0, 63, 131, 0},  {4096, 132, 1, 32, 128, 0},   {1024, 132, 1, 8, 128, 0},
    {5, 132, 1, 1, 5, 0},        {7, 3, 1, 2, 3, 1},           {1, 1, 1, 1, 1, 0},
    {100, 0, 1, 100, 1, 0},
};
#define NUM_SPLIT_CASES ((int)(sizeof split_cases / sizeof split_cases[0]))

static void run_split_case(int index, int at)
{
    const split_case *c = &split_cases[at];
    char name[96];
    snprintf(name, sizeof name, "row split: %lld rows, %lld slots, spread %d", (long long)c->rows,
             (long long)c->slots, c->spread);
    tu_set_context("test_norm_cuda_plan", 0, index, name);
    int64_t per = -1, blocks = -1, extra = -1;
    frost__norm_split_rows(c->rows, c->slots, c->spread, &per, &blocks, &extra);
    if (per != c->per_block || blocks != c->blocks || extra != c->extra)
        tu_failf("split %lld blocks of %lld rows, %lld with one more; expected %lld, %lld, %lld", (long long)blocks,
                 (long long)per, (long long)extra, (long long)c->blocks, (long long)c->per_block,
                 (long long)c->extra);
    if (blocks < 1 || (c->slots >= 1 && blocks > c->slots))
        tu_failf("%lld blocks for %lld slots", (long long)blocks, (long long)c->slots);
    int64_t next = 0, lo = c->rows, hi = 0;
    for (int64_t j = 0; j < blocks; j++) {
        const int64_t n = per + (j < extra), start = j * per + (j < extra ? j : extra);
        int64_t end = start + n < c->rows ? start + n : c->rows;
        if (start != next || end <= start)
            tu_failf("block %lld takes rows [%lld, %lld); expected to start at %lld", (long long)j, (long long)start,
                     (long long)end, (long long)next);
        lo = end - start < lo ? end - start : lo;
        hi = end - start > hi ? end - start : hi;
        next = end;
    }
    if (next != c->rows)
        tu_failf("the blocks cover %lld of %lld rows", (long long)next, (long long)c->rows);
    if (c->spread && hi - lo > 1)
        tu_failf("spread split of %lld to %lld rows a block", (long long)lo, (long long)hi);
}

/* Held parameters against their registers: LayerNorm bf16 rows with f32 scale and bias hold
 * them at 4096 columns (2 units: 20 + 8 + 32 words within the 64 of 4 blocks) and load them
 * per row at 8192 (4 units: 20 + 16 + 64 past the 80 of 3 blocks), keeping the old bounds.
 * RMSNorm's 2-unit rows with both in f32 load them per row with bounds for 5 blocks, not 6
 * (which spilled), whatever their row group (128 columns: 8 threads; 1024: 64).  LayerNorm's
 * 8192-column rows sliced out of a larger X (two row levels) that hold 8 parameter words a
 * unit (bf16 scale and bias, or an f32 scale alone) get bounds for 2 blocks, not 3 (which
 * spilled); with a bf16 scale alone, packed, or with f32 scale and bias they keep 3. */
#define NO_BIAS FROST_DTYPE_INVALID
static const struct {
    int rms;
    int64_t cols;
    frost_dtype scale;
    frost_dtype bias; /* or NO_BIAS */
    int sliced;
    int held;
    const char *minb;
} param_cases[] = {
    {0, 4096, FROST_F32, FROST_F32, 0, 1, "MINB=4"},  {0, 8192, FROST_F32, FROST_F32, 0, 0, "MINB=3"},
    {1, 128, FROST_F32, FROST_F32, 0, 0, "MINB=5"},   {1, 1024, FROST_F32, FROST_F32, 0, 0, "MINB=5"},
    {0, 8192, FROST_BF16, FROST_BF16, 1, 1, "MINB=2"}, {0, 8192, FROST_F32, NO_BIAS, 1, 1, "MINB=2"},
    {0, 8192, FROST_BF16, NO_BIAS, 1, 1, "MINB=3"},   {0, 8192, FROST_F32, FROST_F32, 1, 0, "MINB=3"},
    {0, 8192, FROST_BF16, FROST_BF16, 0, 1, "MINB=3"},
};
#define NUM_PARAM_CASES ((int)(sizeof param_cases / sizeof param_cases[0]))

static void run_params_case(int index, int at)
{
    const int rms = param_cases[at].rms, want_held = param_cases[at].held, sliced = param_cases[at].sliced;
    const int64_t cols = param_cases[at].cols;
    const char *want_minb = param_cases[at].minb;
    char name[128];
    snprintf(name, sizeof name, "%s fwd bf16 %lld%s, scale %s, bias %s: held %d", rms ? "rms" : "ln", (long long)cols,
             sliced ? " sliced" : "", frost_dtype_name(param_cases[at].scale),
             param_cases[at].bias == NO_BIAS ? "none" : frost_dtype_name(param_cases[at].bias), want_held);
    tu_set_context("test_norm_cuda_plan", 0, index, name);
    frost_graph *g = NULL;
    TU_OK(frost_graph_create(cpu, &g));
    /* packed: [8192, cols]; sliced: 4096 of the 8192 rows of each of 2 [8192, cols] matrices */
    const frost_tensor_desc packed = {.name = "x", .dtype = FROST_BF16, .rank = 2, .dims = {8192, cols}};
    const frost_tensor_desc slice = {.name = "x", .dtype = FROST_BF16, .rank = 3, .dims = {2, 4096, cols},
                                     .strides = {8192 * cols, cols, 1}};
    const frost_tensor_desc xd = sliced ? slice : packed;
    const int64_t pdims[1] = {cols};
    frost_tensor x = 0;
    TU_OK(frost_graph_add_tensor(g, &xd, &x));
    frost_norm_desc d = {.x = x, .scale = add(g, "scale", param_cases[at].scale, 1, pdims)};
    if (param_cases[at].bias != NO_BIAS)
        d.bias = add(g, "bias", param_cases[at].bias, 1, pdims);
    frost_norm_outputs o = {.y = FROST_TENSOR_AUTO, .inv_std = FROST_TENSOR_AUTO};
    if (!rms)
        o.mean = FROST_TENSOR_AUTO;
    TU_OK(rms ? frost_graph_add_rmsnorm(g, &d, &o) : frost_graph_add_layernorm(g, &d, &o));
    unsetenv("FROST_NORM_TUNE");
    frost__norm_plan plan;
    frost__buf why = {0}, text = {0};
    if (g->g.num_nodes && frost__norm_cuda_config(g->g.nodes[0].problem, &plan, &why) == FROST_OK) {
        frost__key_print(&plan.key, &text);
        const char *k = frost__buf_str(&text);
        if (!!strstr(k, "PARAMS_REG") != want_held || !strstr(k, want_minb) ||
            !!strstr(k, "ROW_LEVELS=2") != sliced)
            tu_failf("key %s: expected PARAMS_REG %d, %s and %s", k, want_held, want_minb,
                     sliced ? "ROW_LEVELS=2" : "one row level");
    } else {
        tu_failf("config failed: %s", frost__buf_str(&why));
    }
    frost__buf_free(&why);
    frost__buf_free(&text);
    frost_graph_destroy(g);
}

/* Row levels (frost__norm_row_map): X [outer..., cols] bf16 with the strides given and Y,
 * the statistics packed; the plan's levels, their steps and each slot's strides as
 * expected (innermost level first), ROW_LEVELS in the key exactly when there are several
 * (never ROW_WIDE, which concerns per-sample parameter maps), and every row of X, Y and
 * inv_std (the first 4096 and the last 64 of a larger problem) where the ref engine's
 * addressing puts it. */
typedef struct levels_case {
    const char *name;
    int rank;
    int64_t dims[8], xstrides[8];
    const int64_t *ystrides; /* NULL: Y packed */
    int levels;
    int64_t steps[7], x[7], y[7], stat[7]; /* per level, innermost first (steps: all but the last) */
} levels_case;

static const int64_t y_split_late[4] = {816, 272, 64, 1}; /* joins [1] and [2], not [0] */
static const levels_case levels_cases[] = {
    {"packed: one level", 3, {4, 6, 64}, {384, 64, 1}, NULL, 1, {0}, {64}, {64}, {1}},
    {"rows 72 apart: one level", 3, {4, 6, 64}, {432, 72, 1}, NULL, 1, {0}, {72}, {64}, {1}},
    {"groups of 6 rows 464 apart: runs of 6", 3, {4, 6, 64}, {464, 72, 1}, NULL, 2, {6}, {72, 464}, {64, 384}, {1, 6}},
    {"a slice [2, 5 of 7, 64]: runs of 5", 3, {2, 5, 64}, {448, 64, 1}, NULL, 2, {5}, {64, 448}, {64, 320}, {1, 5}},
    {"a size-1 dim between: runs of 5", 4, {3, 1, 5, 64}, {1000, 7, 64, 1}, NULL, 2, {5}, {64, 1000}, {64, 320},
     {1, 5}},
    {"a gap after every row and every 6 rows: three levels", 4, {2, 4, 6, 64}, {1872, 464, 72, 1}, NULL, 3, {6, 4},
     {72, 464, 1872}, {64, 384, 1536}, {1, 6, 24}},
    {"X and Y gapped at different dims: three levels", 4, {2, 3, 4, 64}, {784, 256, 64, 1}, y_split_late, 3, {4, 3},
     {64, 256, 784}, {64, 272, 816}, {1, 4, 12}},
    {"rows past 2^30 in runs of 1024: two levels", 3, {1048577, 1024, 8}, {16392, 16, 1}, NULL, 2,
     {1024}, {16, 16392}, {8, 8192}, {1, 1024}},
    {"a gap at every outer dim: seven levels", 8, {2, 2, 2, 2, 2, 2, 2, 8}, {2032, 1008, 496, 240, 112, 48, 16, 1},
     NULL, 7, {2, 2, 2, 2, 2, 2}, {16, 48, 112, 240, 496, 1008, 2032}, {8, 16, 32, 64, 128, 256, 512},
     {1, 2, 4, 8, 16, 32, 64}},
};
#define NUM_LEVELS_CASES ((int)(sizeof levels_cases / sizeof levels_cases[0]))

static void run_levels_case(int index, int at)
{
    const levels_case *c = &levels_cases[at];
    tu_set_context("test_norm_cuda_plan", 0, index, c->name);
    frost_graph *g = NULL;
    TU_OK(frost_graph_create(cpu, &g));
    frost_tensor_desc xd = {.name = "x", .dtype = FROST_BF16, .rank = c->rank};
    memcpy(xd.dims, c->dims, sizeof c->dims);
    memcpy(xd.strides, c->xstrides, sizeof c->xstrides);
    frost_tensor x = 0, y = FROST_TENSOR_AUTO;
    TU_OK(frost_graph_add_tensor(g, &xd, &x));
    if (c->ystrides) {
        frost_tensor_desc yd = xd;
        yd.name = "y";
        memcpy(yd.strides, c->ystrides, (size_t)c->rank * sizeof c->ystrides[0]);
        TU_OK(frost_graph_add_tensor(g, &yd, &y));
    }
    frost_norm_desc d = {.x = x};
    frost_norm_outputs o = {.y = y, .inv_std = FROST_TENSOR_AUTO};
    TU_OK(frost_graph_add_rmsnorm(g, &d, &o));
    frost__norm_plan plan;
    frost__buf why = {0}, text = {0}, want = {0};
    const frost__norm_problem *p = g->g.num_nodes ? g->g.nodes[0].problem : NULL;
    const frost_status s = p ? frost__norm_cuda_config(p, &plan, &why) : FROST_INTERNAL;
    if (s != FROST_OK) {
        tu_failf("refused: %s", frost__buf_str(&why));
    } else {
        const frost__norm_row_map *m = &plan.row_map;
        static const int slots[3] = {FROST__NORM_X, FROST__NORM_Y, FROST__NORM_INV_STD};
        const int64_t *expect[3] = {c->x, c->y, c->stat};
        int bad = m->levels != c->levels;
        for (int i = 0; !bad && i < c->levels; i++) {
            bad |= i < c->levels - 1 && m->dims[i] != c->steps[i];
            for (int k = 0; k < 3; k++)
                bad |= m->slot[slots[k]].stride[i] != expect[k][i];
        }
        frost__key_print(&plan.key, &text);
        frost__buf_printf(&want, "ROW_LEVELS=%d", c->levels);
        if (bad || !!strstr(frost__buf_str(&text), frost__buf_str(&want)) != (c->levels > 1) ||
            !!strstr(frost__buf_str(&text), "ROW_LEVELS") != (c->levels > 1) ||
            strstr(frost__buf_str(&text), "ROW_WIDE"))
            tu_failf("%d levels (steps %lld, %lld; X strides %lld, %lld, %lld; key %s); expected %d", m->levels,
                     (long long)m->dims[0], (long long)m->dims[1], (long long)m->slot[FROST__NORM_X].stride[0],
                     (long long)m->slot[FROST__NORM_X].stride[1], (long long)m->slot[FROST__NORM_X].stride[2],
                     frost__buf_str(&text), c->levels);
        for (int64_t r = 0; r < p->rows; r = tu_next_checked_row(r, p->rows))
            for (int k = 0; k < 3; k++)
                if (frost__norm_row_map_offset(m, slots[k], r) != frost__norm_row_offset(p, slots[k], r))
                    tu_failf("slot %d row %lld at %lld by the map, %lld by the strides", slots[k], (long long)r,
                             (long long)frost__norm_row_map_offset(m, slots[k], r),
                             (long long)frost__norm_row_offset(p, slots[k], r));
    }
    frost__buf_free(&why);
    frost__buf_free(&text);
    frost__buf_free(&want);
    frost_graph_destroy(g);
}

int main(void)
{
    /* the case groups in index order: a group's case k has index (cases before it) + k */
    static const struct {
        void (*run)(int index, int at); /* case `at` of the group's table */
        int count;
    } groups[] = {{run_case, NUM_CASES},
                  {run_split_case, NUM_SPLIT_CASES},
                  {run_params_case, NUM_PARAM_CASES},
                  {run_levels_case, NUM_LEVELS_CASES}};
    const int only = tu_case_filter();
    int run_count = 0, index = 0;
    TU_OK(frost_context_create(NULL, &cpu));
    if (!cpu)
        return tu_finish(0);
    for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++)
        for (int k = 0; k < groups[g].count; k++, index++) {
            if (only >= 0 && only != index)
                continue;
            tu_case_begin();
            groups[g].run(index, k);
            tu_case_end();
            ++run_count;
        }
    frost_context_destroy(cpu);
    return tu_finish(run_count);
}
