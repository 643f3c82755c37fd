/*
 * norm_cuda_config.c — which LayerNorm / RMSNorm / AdaLayerNorm problems the cuda norm
 * kernels cover and the whole configuration of each (kernel key, row groups, units a
 * thread, ring depth, grid kind): the table, the layout checks and frost__norm_cuda_config().
 * One function decides both support and configuration, so a support answer can never
 * disagree with what build compiles; norm_cuda.c's select calls it with the device's checks
 * around it, and frost__norm_cuda_keys() (norm_cuda_keys.c) calls it on typical problems to
 * list the keys frost-precompile should compile.
 *
 * Layout legend: rows = prod(R...), cols = prod(C...) of X [R..., C...]; a "unit" is what
 * one thread loads at a time: a 16-byte vector (8 f16/bf16 or 4 f32 elements) on the vector
 * path, one element on the scalar path.
 *
 * The kernels (norm_fwd.cu, norm_bwd.cu, norm_bwd_reduce.cu; norm_kernel.cuh has the shared
 * parameter blocks and row helpers) take rows at any strides (the outer dims folded into
 * the fewest levels of strides: find_row_map) and need the normalized dims contiguous;
 * anything else is refused with the constraint named, and the ref engine takes it.  The
 * vector path needs cols and every row stride to be multiples of the unit; base-pointer
 * alignment is only known at execute, so vector kernels carry a scalar fallback chosen per
 * launch.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/norm/norm_cuda.h"

#define FWD_SOURCE "src/ops/norm/norm_fwd.cu"
#define BWD_SOURCE "src/ops/norm/norm_bwd.cu"
#define REDUCE_SOURCE "src/ops/norm/norm_bwd_reduce.cu"
#define MAX_COLS (1 << 30) /* column offsets are int32 in the kernels */

/* ------------------------------------------------------------------------------------ */
/* The launch-configuration table                                                        */
/* ------------------------------------------------------------------------------------ */
/* Per direction and path: the row group (threads per row, a power of two) is the smallest
 * that gives each thread at most nv_pref units, capped at max_group; units per thread
 * NV = ceil(units / group) must then be <= nv_max, else the row is walked in chunks
 * (LOOPED: group = block = looped_block threads, looped_nv units per chunk).  Blocks have
 * max(group, 256) threads.  Vector paths stream rows through a `stages`-deep cp.async ring
 * in shared memory (fewer stages when the ring would pass RING_MAX_BYTES, register
 * prefetch below 2).  The limits come from ptxas on sm_90a and sm_80: no spills, and
 * registers low enough for 2+ blocks of 256 per SM.
 *
 *   cols (bf16)   fwd group x NV         bwd group x NV        (f32: units are 4 elements)
 *   128           8 x 2   (32 rows/blk)  8 x 2  (32 rows/blk)
 *   1000, 1024    64 x 2   (4 rows/blk)  64 x 2  (4 rows/blk)
 *   4096          256 x 2                256 x 2
 *   5120          512 x 2 (RMS 256 x 3)  512 x 2
 *   8192          512 x 2 (RMS 256 x 4)  512 x 2
 *   12288         512 x 3                512 x 3
 *   16384         512 x 4 (2 blocks/SM)  512 x 4 (x, dY re-read from the ring); on sm_90 two
 *                                          blocks of a cluster x 512 x 2 (split_rows below)
 *   > 16384       LOOPED                 LOOPED
 *
 * Two ring stages (one row ahead): the FROST_NORM_TUNE sweep of 2026-12-02 on the H200
 * (docs/PERF.md) found 2 stages with more resident blocks faster than 3-4 stages with
 * fewer, forward and backward, at every suite shape.
 */
typedef struct tile_rule {
    int nv_pref, nv_max, max_group;
    int looped_block, looped_nv;
    int stages; /* depth of the cp.async row ring (vector path), 0: register prefetch */
} tile_rule;

enum { PATH_VEC16 = 0, PATH_VEC32 = 1, PATH_SCALAR = 2 };

static const tile_rule tile_rules[2][3] = {
    /* forward */
    {{2, 4, 512, 1024, 2, 2}, {2, 4, 1024, 1024, 2, 2}, {8, 16, 1024, 1024, 8, 0}},
    /* backward */
    {{2, 4, 512, 512, 1, 2}, {2, 4, 512, 512, 1, 2}, {8, 8, 512, 512, 4, 0}},
};
/* The ring gets fewer stages when STAGES * (tensors * NV * BLOCK * 16 bytes) would pass
 * RING_MAX_BYTES (two blocks still fit an SM); when not even 2 stages fit, 2 stages up to
 * RING_MAX_2_BYTES (one block per SM: these are the widest rows, whose register prefetch
 * would spill); else the kernel prefetches into registers. */
#define RING_MAX_BYTES (96 * 1024)
#define RING_MAX_2_BYTES (128 * 1024)

/* Developer tuning (docs/CONTRIBUTING-GPU.md): FROST_NORM_TUNE="name=value,..." overrides
 * the table for experiments on a GPU; unset, the table rules.  Names: nv (nv_pref), nvmax,
 * group (max_group), stages (ring depth; 0 = register prefetch), l2 (1: 256-byte L2
 * fetches), persist (1: persistent grid, 0: one-pass grid; forward only), trips (one-pass
 * forward grids: rows a row group takes in turn, its ring loading the next while it works
 * on one), bps (cap on blocks per SM), minrows (backward: rows a row group should see at
 * least), minb (resident blocks per SM the launch bounds cut registers for), rslices (the
 * backward reduce's slices of partial rows, 1-32), lnm (LayerNorm forward: 2 equal-count
 * merges, 1 one-barrier statistics, 0 two reductions), lnfma (LayerNorm forward with 16-bit
 * I/O: 0 computes x_hat as (x - mean) * rstd instead of one fma), ilp (forward: 1 sums a
 * thread's elements in 4 accumulators, NORM_ILP in norm_fwd.cu), even (forward persistent
 * grids: 1 as many row trips for every block, 0 one block per resident slot; norm_cuda.c),
 * pdl (backward: 0 launches the reduce kernel plainly instead of early; norm_cuda.c), bal
 * (backward: 1 spreads a segment's rows over every slot where the ceil split leaves the
 * last block short, 0 never; the default spreads with one block an SM; norm_cuda.c), bcl
 * (backward: blocks a cluster that merge their partial rows, 0 / 2 / 4 / 8), block (forward:
 * threads a block, a power of two of whole row groups), preg (forward: 0 loads scale and bias
 * once a row instead of keeping a thread's units in registers, PARAMS_REG in norm_fwd.cu; 2 keeps them
 * even where held_params_fit expects spills), pf (forward: 0 drops the register
 * prefetch of the next row, NO_PREFETCH), bpreg (backward: 0 loads the scale twice a row
 * instead of holding a thread's units in registers), split (2: rows of 512 threads x 4 units
 * split over clusters of two blocks, ROW_SPLIT, forward too; 0: never; split_rows below),
 * sahead (staged backward
 * rows: saved statistics read that many rows ahead, 1-8; 2 by default, 1 at 4 units a thread),
 * xf32 (forward with 16-bit I/O, vector rows: 1 converts a thread's row to f32 once instead
 * of in every pass over it, LN_WIDE in norm_fwd.cu), gbar (1: row groups of 2+ warps that
 * share a block take their reductions' barriers on a named barrier each, GROUP_BAR in
 * norm_kernel.cuh; the backward's default; 0: the block's barrier). */
int frost__norm_tune(const char *name, int dflt)
{
    const char *env = getenv("FROST_NORM_TUNE");
    const size_t len = strlen(name);
    for (const char *q = env; q && *q;) {
        if (!strncmp(q, name, len) && q[len] == '=')
            return atoi(q + len + 1);
        q = strchr(q, ',');
        q = q ? q + 1 : NULL;
    }
    return dflt;
}

/* ------------------------------------------------------------------------------------ */
/* Plans                                                                                  */
/* ------------------------------------------------------------------------------------ */
static const char *dtype_define(frost_dtype t)
{
    return t == FROST_F32 ? "DTYPE_F32" : t == FROST_F16 ? "DTYPE_F16" : "DTYPE_BF16";
}

static int next_pow2(int64_t v)
{
    int p = 1;
    while (p < v)
        p <<= 1;
    return p;
}

/* 32-bit words one unit (vec elements) of a parameter takes in registers (0 when absent). */
static int param_words(const frost__norm_layout *l, int vec)
{
    return l->present ? vec * (l->dtype == FROST_F32 ? 4 : 2) / 4 : 0;
}

/* Words one unit of scale and bias together take in registers. */
static int params_unit_words(const frost__norm_problem *p, int vec)
{
    return param_words(&p->slot[FROST__NORM_SCALE], vec) + param_words(&p->slot[FROST__NORM_BIAS], vec);
}

/* Whether the forward's scale and bias units fit the registers that bounds for minb blocks
 * leave: about 20 + the row's 4 words a unit + the parameters' words, fitted to ptxas on
 * sm_90a (2026-12-04: every norm key of frost-precompile --report; f32 parameters and
 * RMSNorm with a bias held on 40 registers spilled). */
static int held_params_fit(const frost__norm_problem *p, const frost__norm_plan *plan, int minb)
{
    const int blocks = minb > 0 ? minb : plan->block <= 256 ? 2 : 1;
    int cap = 65536 / (plan->block * blocks) / 8 * 8;
    cap = cap > 255 ? 255 : cap;
    const int words = plan->nv * params_unit_words(p, plan->vec);
    return 20 + 4 * plan->nv + words <= cap;
}

/* Resident blocks the forward's launch bounds ask for (0: the default), with the parameters
 * held in registers or not.  The held parameters take registers: LayerNorm's one-pass rows
 * of 2 units get bounds for 4 blocks (6 spilled), its 512 x 4 rows none (80 registers, one
 * block an SM: 1.05x the two blocks' 64 registers); RMSNorm's groups of up to 32 threads 5
 * (6 spilled), its 256 x 4 rows 4.  RMSNorm's 2-unit rows with 16-bit I/O and both scale and
 * bias in f32, loaded per row, also get 5: at 6 blocks' 40 registers they spilled 4-8 B
 * (ptxas -v, sm_90a, groups of 8 to 128 threads; 48 registers and none at 5); against 6
 * blocks on the H100 (2026-12-06 23:45 UTC, docs/PERF.md): 1.01x at 128 and 1000 columns,
 * 0.995x at 1024. */
static int fwd_min_blocks(const frost__norm_problem *p, const frost__norm_plan *plan, int wide, int narrow,
                          int ln_one_pass, int held)
{
    int minb = wide ? (held && p->kind == FROST__NORM_LAYER ? 1 : 2) : 0;
    if (narrow && p->kind == FROST__NORM_RMS && plan->nv > 2)
        minb = held ? 4 : 3;
    else if (narrow && p->kind == FROST__NORM_RMS)
        minb = (held && plan->group <= 32) || (!held && params_unit_words(p, plan->vec) > 12) ? 5 : 6;
    /* LayerNorm's one-pass 256 x 4 rows (8192 columns) get 3, but 2 where their rows sit at
     * two row levels or more and the held parameters take 8 words a unit (bf16 scale and
     * bias, or an f32 scale alone): there 3 blocks' 80 registers spilled 44-48 B (ptxas -v,
     * sm_90a, 2026-12-07), 2 blocks' 100 none.  H100, 2026-12-07 22:31 UTC
     * (bench/row_slice_spill.txt, docs/PERF.md): 1.06x on 8192 x 8192 bf16 sliced to 2048
     * rows, where loading the parameters per row at 3 blocks gave 1.03x.  Fewer words held
     * do not spill at 3 blocks; more do not fit there and are loaded per row (neither timed
     * at two levels). */
    if (ln_one_pass && plan->nv <= 2)
        minb = held ? 4 : 6;
    else if (ln_one_pass)
        minb = held && plan->row_map.levels > 1 && params_unit_words(p, plan->vec) >= 8 && held_params_fit(p, plan, 3)
                   ? 2
                   : 3;
    /* three or more row levels take a division and a few registers more per level: bounds
     * for one block fewer, which keeps those keys from spilling (ptxas, sm_90a, 2026-12-07:
     * at the bounds above 10 of the 66 bf16 forward keys with 3 levels spilled 8-48 B; with
     * one block fewer the 3- to 6-block ones spill nothing at 3 levels and two of them 8 B
     * at 7; the 2-block key that spills 8 B keeps its bounds, a second block of 512 threads
     * being the dearer loss) */
    if (plan->row_map.levels > 2 && minb >= 3)
        minb--;
    return frost__norm_tune("minb", minb);
}

/* Writes "[a, b, c]" for n values. */
static void print_list(frost__buf *why, int n, const int64_t *v)
{
    frost__buf_printf(why, "[");
    for (int i = 0; i < n; i++)
        frost__buf_printf(why, "%s%lld", i ? ", " : "", (long long)v[i]);
    frost__buf_printf(why, "]");
}

/* Writes "3" or "[12, 1]" for a slot's inner strides. */
static void print_inner_strides(frost__buf *why, const frost__norm_problem *p, const frost__norm_layout *l)
{
    if (p->inner_rank == 1)
        frost__buf_printf(why, "%lld", (long long)l->inner_stride[0]);
    else
        print_list(why, p->inner_rank, l->inner_stride);
}

static const char *const slot_label[FROST__NORM_NUM_SLOTS] = {
    "X", "scale", "bias", "Y", "mean", "inv_std", "dY", "dX", "d_scale", "d_bias",
};

/* The slots whose rows the kernels address (norm_rows). */
static const int row_slots[] = {FROST__NORM_X, FROST__NORM_Y, FROST__NORM_D_Y, FROST__NORM_D_X, FROST__NORM_MEAN,
                                FROST__NORM_INV_STD};

/* Where rows start (frost__norm_row_map): X's outer dims innermost first, size-1 dims
 * skipped; a dim joins the current level when, in every present row slot, its stride is
 * where that level ends (the level's stride times its steps), and otherwise opens the next
 * level.  Any strides fold so (at worst a level per dim), so this never refuses.  (Strides
 * are never negative: the graph refuses them.) */
static void find_row_map(const frost__norm_problem *p, frost__norm_row_map *m)
{
    memset(m, 0, sizeof *m);
    m->levels = 1;
    int cur = -1;
    for (int d = p->outer_rank - 1; d >= 0 && p->rows > 1; d--) {
        const int64_t n = p->outer_dims[d];
        if (n == 1)
            continue;
        int join = cur >= 0;
        for (size_t i = 0; join && i < FROST__ARRAY_SIZE(row_slots); i++) {
            const int slot = row_slots[i];
            join = !p->slot[slot].present ||
                   p->slot[slot].outer_stride[d] == m->slot[slot].stride[cur] * m->dims[cur];
        }
        if (join) {
            m->dims[cur] *= n;
            continue;
        }
        m->dims[++cur] = n;
        for (size_t i = 0; i < FROST__ARRAY_SIZE(row_slots); i++)
            if (p->slot[row_slots[i]].present)
                m->slot[row_slots[i]].stride[cur] = p->slot[row_slots[i]].outer_stride[d];
    }
    m->levels = cur > 0 ? cur + 1 : 1;
}

int64_t frost__norm_row_map_offset(const frost__norm_row_map *m, int slot, int64_t r)
{
    int64_t at = 0;
    for (int i = 0; i < m->levels - 1; i++) {
        at += r % m->dims[i] * m->slot[slot].stride[i];
        r /= m->dims[i];
    }
    return at + r * m->slot[slot].stride[m->levels - 1];
}

/* Layout checks shared by both directions, and where rows start; NOT_SUPPORTED with the
 * sentence in why. */
static frost_status check_layouts(const frost__norm_problem *p, frost__norm_row_map *map, frost__buf *why)
{
    static const int data_slots[] = {FROST__NORM_X, FROST__NORM_Y, FROST__NORM_D_Y, FROST__NORM_D_X};
    static const int param_slots[] = {FROST__NORM_SCALE, FROST__NORM_BIAS, FROST__NORM_D_SCALE, FROST__NORM_D_BIAS};
    if (p->cols > MAX_COLS) {
        frost__buf_printf(why,
                          "cuda norm handles up to %d normalized elements per row; "
                          "this row has %lld",
                          MAX_COLS, (long long)p->cols);
        return FROST_NOT_SUPPORTED;
    }
    for (size_t i = 0; i < FROST__ARRAY_SIZE(data_slots); i++) {
        const frost__norm_layout *l = &p->slot[data_slots[i]];
        if (l->present && !l->inner_contiguous) {
            frost__buf_printf(why,
                              "cuda norm needs the normalized dims contiguous "
                              "(stride 1); %s's inner stride is ",
                              slot_label[data_slots[i]]);
            print_inner_strides(why, p, l);
            return FROST_NOT_SUPPORTED;
        }
    }
    for (size_t i = 0; i < FROST__ARRAY_SIZE(param_slots); i++) {
        const frost__norm_layout *l = &p->slot[param_slots[i]];
        if (l->present && !l->inner_contiguous) {
            frost__buf_printf(why, "cuda norm needs %s contiguous (stride 1); its stride is ",
                              slot_label[param_slots[i]]);
            print_inner_strides(why, p, l);
            return FROST_NOT_SUPPORTED;
        }
    }
    find_row_map(p, map);
    return FROST_OK;
}

/* Can every row of every data slot, and every per-sample parameter row the kernels read,
 * start on a 16-byte boundary (given aligned bases)? */
static int rows_allow_vectors(const frost__norm_problem *p, const frost__norm_row_map *map, int unit_elems)
{
    static const int data_slots[] = {FROST__NORM_X, FROST__NORM_Y, FROST__NORM_D_Y, FROST__NORM_D_X};
    if (p->cols % unit_elems != 0)
        return 0;
    for (size_t i = 0; i < FROST__ARRAY_SIZE(data_slots); i++) {
        for (int k = 0; k < map->levels; k++)
            if (map->slot[data_slots[i]].stride[k] % unit_elems != 0)
                return 0;
    }
    for (int slot = FROST__NORM_SCALE; slot <= FROST__NORM_BIAS && p->per_sample_params; slot++) {
        const frost__norm_layout *l = &p->slot[slot];
        for (int i = 0; l->present && i < p->outer_rank; i++)
            if (l->outer_stride[i] * (l->dtype == FROST_F32 ? 4 : 2) % 16 != 0)
                return 0;
    }
    return 1;
}

/* What config_plan may make of a problem: whole rows or split ones, whole rows only, or the
 * half of a split row. */
enum { ROWS_ANY, ROWS_WHOLE, ROWS_HALF };
static frost_status config_plan(const frost__norm_problem *p, int rows_mode, frost__norm_plan *plan,
                                frost__buf *why);

/* Rows split over a cluster of two blocks (ROW_SPLIT, norm_kernel.cuh; sm_90): the backward's
 * widest rows kept in registers (512 threads x 4 units: 16384 bf16 or 8192 f32 columns) run
 * as two halves, each configured as the row half as wide would be, when the halves fill
 * their row groups exactly.  The cluster's blocks then take 31 or 32 half rows each where
 * whole rows gave 128 of 132 SMs 32 rows and 4 none (4096 rows).  H200, 2026-12-04 17:48 UTC
 * (docs/PERF.md): backward 1.01-1.08x (RMSNorm 4096 x 16384 3380 -> 3577 GB/s); the forward
 * ran 0.82-0.93x, its rows being shorter-lived next to the exchange, so it stays whole
 * (FROST_NORM_TUNE split=2 splits it too, split=0 neither). */
static void split_rows(const frost__norm_problem *p, frost__norm_plan *plan)
{
    if (plan->looped || plan->vec == 1 || p->per_sample_params || plan->group != 512 || plan->nv != 4 ||
        p->cols % 2 != 0 || frost__norm_tune("split", p->backward ? 2 : 0) != 2)
        return;
    frost__norm_problem half = *p;
    half.cols = p->cols / 2;
    frost__norm_plan hp;
    frost__buf scratch = {0};
    const frost_status s = config_plan(&half, ROWS_HALF, &hp, &scratch);
    frost__buf_free(&scratch);
    if (s != FROST_OK || hp.looped || hp.vec != plan->vec || hp.cluster_key || hp.ln_merge ||
        hp.block != hp.group || hp.group < 64 || hp.group > 512 || (int64_t)hp.group * hp.nv * hp.vec != half.cols ||
        (p->backward && hp.stages < 3))
        return;
    *plan = hp;
    plan->row_split = 2;
    plan->positions *= 2; /* the halves' lane-order positions, one after the other */
    frost__key_define(&plan->key, "ROW_SPLIT", "%d", 2);
}

/* Decides support and the whole configuration of a problem (device-independent). */
frost_status frost__norm_cuda_config(const frost__norm_problem *p, frost__norm_plan *plan, frost__buf *why)
{
    return config_plan(p, ROWS_ANY, plan, why);
}

frost_status frost__norm_cuda_config_unsplit(const frost__norm_problem *p, frost__norm_plan *plan, frost__buf *why)
{
    return config_plan(p, ROWS_WHOLE, plan, why);
}

static frost_status config_plan(const frost__norm_problem *p, int rows_mode, frost__norm_plan *plan,
                                frost__buf *why)
{
    frost__norm_row_map map;
    frost_status s = check_layouts(p, &map, why);
    if (s != FROST_OK)
        return s;
    const frost_dtype io = p->slot[FROST__NORM_X].dtype;
    const int io_bytes = io == FROST_F32 ? 4 : 2;
    const int unit_elems = 16 / io_bytes;
    const int vector = rows_allow_vectors(p, &map, unit_elems);
    const int path = !vector ? PATH_SCALAR : io_bytes == 4 ? PATH_VEC32 : PATH_VEC16;
    const tile_rule *rule = &tile_rules[p->backward][path];
    const int64_t units = frost__norm_ceil_div(p->cols, vector ? unit_elems : 1);

    memset(plan, 0, sizeof *plan);
    plan->backward = p->backward;
    plan->row_map = map;
    plan->vec = vector ? unit_elems : 1;
    plan->group = next_pow2(frost__norm_ceil_div(units, frost__norm_tune("nv", rule->nv_pref)));
    if (plan->group > frost__norm_tune("group", rule->max_group))
        plan->group = frost__norm_tune("group", rule->max_group);
    plan->nv = (int)frost__norm_ceil_div(units, plan->group);
    if (plan->nv > frost__norm_tune("nvmax", rule->nv_max)) {
        plan->looped = 1;
        plan->group = rule->looped_block;
        plan->nv = rule->looped_nv;
    }
    /* Forward rows of 513-1024 units run as 256 threads x 3-4 units rather than 512 x 2,
     * whose second unit is partly padding.  769-1024 units (8192 bf16 columns): RMSNorm 1.08x
     * in sweep 3 (2026-12-02, docs/PERF.md); LayerNorm with 16-bit I/O 1.01-1.02x with launch
     * bounds for three blocks (below; sweeps 28 and 30, 2026-12-03), 0.94x without.  513-768
     * units (5120 bf16 columns): RMSNorm with 16-bit I/O 1.084-1.086x at 16384 x 5120 on the
     * H100 (2026-12-06 05:34 and 06:40 UTC, docs/PERF.md); LayerNorm's ran 0.94x.
     * AdaLayerNorm's per-sample rows keep 512 x 2. */
    const int rms = p->kind == FROST__NORM_RMS;
    if (!p->backward && vector && !plan->looped && !p->per_sample_params && plan->group == 512 && units > 512 &&
        units <= 1024 && (units > 768 ? rms || io_bytes == 2 : rms && io_bytes == 2) &&
        frost__norm_tune("group", 0) == 0 && frost__norm_tune("nv", 0) == 0) {
        plan->group = 256;
        plan->nv = (int)frost__norm_ceil_div(units, 256);
    }
    plan->block = plan->group < 256 ? 256 : plan->group;
    if (!p->backward && !plan->looped) { /* FROST_NORM_TUNE block=: threads a block, whole row groups */
        const int block = frost__norm_tune("block", 0);
        if (block >= plan->group && block <= 1024 && block >= 32 && (block & (block - 1)) == 0)
            plan->block = block;
    }
    /* Forward rows of 512 threads x 4 units (16384 bf16 columns): launch bounds for two
     * resident blocks (64 registers; sweep 3: 1.07x LayerNorm) and a one-pass grid (RMSNorm
     * 1.14x; LayerNorm's below, ln_wide). */
    const int wide = !p->backward && vector && !plan->looped && plan->block == 512 && plan->nv == 4;
    /* LayerNorm forward rows that fill their row group exactly (LN_MERGE below) */
    const int full_rows = vector && !plan->looped && plan->group > 32 &&
                          p->cols == (int64_t)plan->group * plan->nv * plan->vec;
    /* Forward rows of 256-thread blocks: launch bounds for more resident blocks than the
     * registers the compiler would take allow (sweep 14, 2026-12-03, docs/PERF.md): RMSNorm 6
     * blocks (40 registers; 1.03-1.06x at 1000, 1024 and 4096 columns), 3 for its 256 x 4
     * units (8192 columns; 1.04x); LayerNorm rows that fill their row group on a one-pass grid
     * with 6 blocks (8 blocks measured 1.05-1.06x the persistent grid, and either change alone
     * nothing; 6 compiles without spills for every parameter dtype, 8 spills with f32 scale
     * and bias, and ran 0.97-0.99x of 8 with bf16 ones in sweeps 15 and 17), 3 for 256 x 4
     * units (68-72 registers, no spills).  AdaLayerNorm's per-sample parameter rows keep the
     * defaults. */
    const int narrow = !p->backward && vector && !plan->looped && plan->block == 256 && !p->per_sample_params;
    /* Forward rows on the vector path keep a thread's scale and bias units in registers
     * (PARAMS_REG, norm_fwd.cu), loaded once next to the first row's x rather than once a row
     * after the statistics; AdaLayerNorm's per-sample rows load theirs per row.  On the H200
     * (2026-12-04 16:08 UTC, docs/PERF.md) with the launch bounds below: LayerNorm 1.03x at
     * 4096 and 1024 columns, 1.04x at 8192, 1.05x at 16384 (since given up for the one-pass
     * grid, ln_wide below), 1.09x at 1000; RMSNorm 1.02x at 4096 and 1024, 1.04x at 16384,
     * 1.06x at 1000. */
    const int ln_one_pass = narrow && p->kind == FROST__NORM_LAYER && full_rows;
    /* LayerNorm's 512 x 4 rows with 16-bit I/O (16384 columns) run as RMSNorm's: parameters
     * loaded per row, two blocks an SM, a one-pass grid.  H100, 2026-12-06 23:45 UTC
     * (docs/PERF.md): 1.09x at 4096 and 8192 rows against one block an SM holding its
     * parameters on the persistent grid, which had run 1.05x two blocks on that grid
     * (2026-12-04 20:37 UTC).  f32 rows and AdaLayerNorm's per-sample rows were not timed
     * and keep the persistent grid. */
    const int ln_wide = wide && p->kind == FROST__NORM_LAYER && io_bytes == 2 && !p->per_sample_params;
    const int preg = frost__norm_tune("preg", ln_wide ? 0 : 1);
    int held = preg && !p->backward && vector && !plan->looped && !p->per_sample_params;
    if (held && preg != 2 && !held_params_fit(p, plan, fwd_min_blocks(p, plan, wide, narrow, ln_one_pass, 1)))
        held = 0;
    plan->params_reg = held;
    plan->minb = fwd_min_blocks(p, plan, wide, narrow, ln_one_pass, held);
    /* RMSNorm forward rows of up to 256 threads run as a plain grid, one row per row
     * group: the hardware's block scheduler overlaps short blocks better than the
     * persistent loop (sweeps of 2026-12-02, docs/PERF.md: 1.04-1.07x at hidden 1024 and
     * 4096, 0.90x at 8192 with 512-thread rows).  LayerNorm's block spends longer between
     * its loads (two statistics, the bias), so with one row per group fewer bytes are in
     * flight; its rows that fill the group (with 6 resident blocks, above) or are short (up
     * to 2 units a thread: 128 and 1000 columns) run a plain grid of two rows per row group
     * (`trips`: the ring loads the second row while the group works on the first): 1.03x
     * at 1024 and 4096 columns against one row per group, 1.03-1.05x at 128 and 1000
     * against the persistent loop (sweep 26, 2026-12-03, docs/PERF.md).  Longer rows that
     * do not fill the group keep the persistent loop (5120 columns: 0.84x). */
    const int ln_short = narrow && p->kind == FROST__NORM_LAYER && !full_rows && plan->nv <= 2;
    plan->persistent = p->backward || frost__norm_tune("persist", !ln_one_pass && !ln_short && !ln_wide &&
                                                                      (p->kind != FROST__NORM_RMS ||
                                                                       (plan->block > 256 && !wide)));
    plan->trips = plan->persistent ? 1 : frost__norm_tune("trips", ln_one_pass || ln_short ? 2 : 1);
    if (plan->trips < 1)
        plan->trips = 1;
    plan->rows_per_block_groups = plan->block / plan->group;
    s = frost__adanorm_cuda_config(p, plan->rows_per_block_groups, &plan->ada, why);
    if (s != FROST_OK)
        return s;
    if (vector && !plan->looped) {
        const size_t slot = (size_t)(p->backward ? 2 : 1) * (size_t)plan->nv * (size_t)plan->block * 16;
        /* the backward's split halves keep a row in the ring past the next one's dot products
         * (bwd_rows_split, norm_bwd.cu): a third stage */
        plan->stages = frost__norm_tune("stages", rows_mode == ROWS_HALF && p->backward ? 3 : rule->stages);
        while (plan->stages > 1 && (size_t)plan->stages * slot > RING_MAX_BYTES)
            plan->stages--;
        if (plan->stages < 2 && frost__norm_tune("stages", -1) != 0)
            plan->stages = 2 * slot <= RING_MAX_2_BYTES ? 2 : 0;
        if (plan->stages < 2)
            plan->stages = 0;
        plan->ring_bytes = (size_t)plan->stages * slot;
    }
    /* Backward rows staged in the ring hold their scale units too, where the registers allow
     * (LayerNorm's and d_bias's accumulators take more; 512 x 4 units with d_bias spilled
     * in ptxas): H200, 2026-12-04
     * 16:27 UTC (docs/PERF.md), 1.01-1.05x on 13 of the 14 suite cases; LayerNorm's 512 x 4
     * units (16 words, 128 registers already) spilled and ran 0.97x. */
    if (p->backward && vector && !plan->looped && !p->per_sample_params && plan->stages > 1 &&
        p->slot[FROST__NORM_SCALE].present &&
        plan->nv * param_words(&p->slot[FROST__NORM_SCALE], plan->vec) <=
            (p->kind == FROST__NORM_LAYER || p->slot[FROST__NORM_D_BIAS].present ? 8 : 16))
        plan->params_reg = frost__norm_tune("bpreg", 1);
    /* Backward rows of one 256-thread group: two blocks an SM, whatever the registers allow.
     * Three (RMSNorm at 4096 columns compiles to 80 registers) ran 0.92x. */
    const int two_per_sm = p->backward && plan->stages > 1 && plan->group == 256 && plan->block == 256;
    plan->max_bps = frost__norm_tune("bps", two_per_sm ? 2 : 32);

    const frost__norm_layout *scale = &p->slot[FROST__NORM_SCALE];
    const frost__norm_layout *bias = &p->slot[FROST__NORM_BIAS];
    frost__kernel_key *k = &plan->key;
    if (!p->backward)
        frost__key_init(k, FWD_SOURCE, "norm_fwd_kernel");
    else
        frost__key_init(k, BWD_SOURCE, "norm_bwd_kernel");
    frost__key_define(k, dtype_define(io), NULL);
    frost__key_define(k, p->kind == FROST__NORM_LAYER ? "KIND_LAYER" : "KIND_RMS", NULL);
    frost__key_define(k, "VEC", "%d", plan->vec);
    frost__key_define(k, "NV", "%d", plan->nv);
    frost__key_define(k, "GROUP", "%d", plan->group);
    frost__key_define(k, "BLOCK", "%d", plan->block);
    frost__key_define(k, "SCALE_DT", "%d", scale->present ? (int)scale->dtype : 0);
    if (!p->backward)
        frost__key_define(k, "BIAS_DT", "%d", bias->present ? (int)bias->dtype : 0);
    if (scale->present && p->zero_centered_scale)
        frost__key_define(k, "ZERO_CENTERED", NULL);
    if (plan->looped)
        frost__key_define(k, "LOOPED", NULL);
    if (plan->stages)
        frost__key_define(k, "STAGES", "%d", plan->stages);
    /* staged backward rows read their saved statistics two rows ahead (norm_bwd.cu), rows of 4
     * units a thread one (their turn is long enough, and AdaLayerNorm's 512 x 4 units with
     * d_bias spill 96 bytes with two instead of 24) */
    const int sahead = frost__norm_tune("sahead", plan->nv >= 4 ? 1 : 2);
    if (p->backward && plan->stages > 1 && sahead != 2 && sahead >= 1 && sahead <= 8)
        frost__key_define(k, "BWD_STATS_AHEAD", "%d", sahead);
    if (p->per_sample_params)
        frost__key_define(k, "PER_SAMPLE", NULL);
    if (plan->row_map.levels > 1)
        frost__key_define(k, "ROW_LEVELS", "%d", plan->row_map.levels);
    /* Past 2^30 rows a row index (with the look-ahead past the last) may pass 31 bits: the
     * per-sample parameter map keeps its 64-bit division (norm_param_row) */
    if (p->per_sample_params && p->rows > ((int64_t)1 << 30))
        frost__key_define(k, "ROW_WIDE", NULL);
    if (frost__norm_tune("l2", 0))
        frost__key_define(k, "L2_256", NULL);
    if (plan->minb > 0)
        frost__key_define(k, "MINB", "%d", plan->minb);
    /* Blocks of several row groups of 2+ warps (1000-2048 bf16 columns): each group's
     * reductions wait on a named barrier of its own instead of the whole block's
     * (GROUP_BAR, norm_kernel.cuh).  H100, 2026-12-07 16:23 and 16:43 UTC (docs/PERF.md):
     * backward RMSNorm 65536 x 1024 1.006-1.009x, LayerNorm 16384 x 1000 0.996-1.003x;
     * forward 0.99-1.005x; so the backward only. */
    if (frost__norm_tune("gbar", p->backward) && plan->group > 32 && plan->group < plan->block &&
        plan->block / plan->group <= 15) /* looped rows are one group a block: excluded */
        frost__key_define(k, "GROUP_BAR", NULL);
    /* LayerNorm forward rows that fill their row group exactly (every warp holds as many
     * columns) take their statistics with one barrier (LN_MERGE, norm_fwd.cu): 1.01-1.03x at
     * 1024, 4096, 8192 and 16384 columns in two sweeps of 2026-12-03 (docs/PERF.md), 0.87x at
     * 5120, whose second unit a thread holds is mostly padding.  Rows of up to 256 threads
     * merge equal-count per-thread summaries instead (LN_EQUAL; sweep 19: 1.02-1.03x at 1024
     * and 4096 columns, 0.95-0.99x at 8192 and 16384 with 512 threads). */
    const int lnm = frost__norm_tune("lnm", full_rows ? (plan->group <= 256 ? 2 : 1) : 0);
    if (!p->backward && p->kind == FROST__NORM_LAYER && lnm == 2 && full_rows)
        frost__key_define(k, "LN_EQUAL", NULL);
    else if (!p->backward && p->kind == FROST__NORM_LAYER && lnm) {
        frost__key_define(k, "LN_MERGE", NULL);
        plan->ln_merge = 1;
    }
    /* LayerNorm's wide rows (512 threads x 4 units, 16384 bf16 columns) sum a thread's 32
     * elements in four accumulators: 1.05x in sweep 26 (2026-12-03), 0.95-1.01x elsewhere. */
    if (!p->backward && frost__norm_tune("ilp", wide && p->kind == FROST__NORM_LAYER))
        frost__key_define(k, "NORM_ILP", NULL);
    if (plan->params_reg)
        frost__key_define(k, "PARAMS_REG", NULL);
    if (!p->backward && !frost__norm_tune("pf", 1))
        frost__key_define(k, "NO_PREFETCH", NULL);
    if (!p->backward && p->kind == FROST__NORM_LAYER && io_bytes == 2 && !frost__norm_tune("lnfma", 1))
        frost__key_define(k, "LN_EXACT", NULL);
    /* LayerNorm's wide rows (512 threads x 4 units) convert a thread's row to f32 once
     * (LN_WIDE): 10 % fewer instructions (ncu, 4096 x 16384) and 1.004-1.006x at 2048, 4096
     * and 8192 rows of 16384 columns on the H100 (2026-12-06 05:34 UTC, docs/PERF.md); at
     * 12288 columns (512 x 3) 0.99-1.01x, so only these rows take it.  Not AdaLayerNorm's
     * per-sample rows: they run two blocks an SM (64 registers), where the f32 row spilled
     * 12-48 B stores and 12-76 B loads (ptxas, sm_90a, bf16 / f32 parameters). */
    if (!p->backward && io_bytes == 2 && vector && !plan->looped &&
        frost__norm_tune("xf32", wide && p->kind == FROST__NORM_LAYER && !p->per_sample_params))
        frost__key_define(k, "LN_WIDE", NULL);
    if (p->backward) {
        plan->want_dscale = p->slot[FROST__NORM_D_SCALE].present;
        plan->want_dbias = p->slot[FROST__NORM_D_BIAS].present;
        if (plan->want_dscale)
            frost__key_define(k, "DSCALE", NULL);
        if (plan->want_dbias)
            frost__key_define(k, "DBIAS", NULL);
        /* Staged rows of one 256-thread row group a block (LayerNorm / RMSNorm; two blocks an
         * SM) run in clusters of two blocks that merge their partial rows (norm_bwd.cu; sm_90,
         * norm_cuda.c): 1.00-1.02x at 16384 and 32768 rows of 4096 columns, 2026-12-03 18:03
         * UTC; 512-thread rows (one block an SM) measured 0.99-1.00x at 8192 and 16384
         * columns and 0.99x at 12288, and clusters of four 0.55-0.72x (docs/PERF.md). */
        const int cluster = frost__norm_tune("bcl", plan->block == 256 ? 2 : 0);
        if (plan->stages > 1 && plan->vec > 1 && !plan->looped && plan->block == plan->group &&
            !p->per_sample_params && (cluster == 2 || cluster == 4 || cluster == 8)) {
            frost__key_define(k, "BWD_CLUSTER", "%d", cluster);
            plan->cluster_key = cluster;
        }
        frost__key_init(&plan->reduce_key, REDUCE_SOURCE, "norm_bwd_reduce_kernel");
        /* The reduce's grid has a block per 32 positions and pair, so narrow rows leave most
         * SMs idle; more slices of partial rows a block (fewer dependent loads a thread) pay
         * there (sweep 21, 2026-12-03: 16 slices 1.02x at 1024 columns, 1.10x at 1000, 32
         * slices 1.24-1.38x at 128; 16 lost 0.97-0.98x at 12288 and 16384, 0.97x on
         * AdaLayerNorm's 2048) */
        plan->positions = plan->looped ? p->cols : (int64_t)plan->nv * plan->group * plan->vec;
        const int64_t reduce_cols = plan->positions * (plan->want_dscale + plan->want_dbias);
        const int slices = frost__norm_tune("rslices", reduce_cols <= 512 ? 32 : reduce_cols <= 2048 ? 16 : 8);
        plan->reduce_threads = 32 * 8;
        plan->reduce_early = frost__norm_tune("pdl", 1); /* scheduled while the main kernel ends */
        if (slices != 8 && slices >= 1 && slices <= 32) {
            frost__key_define(&plan->reduce_key, "REDUCE_SLICES", "%d", slices);
            plan->reduce_threads = 32 * slices;
        }
    }
    plan->row_split = 1;
    if (rows_mode == ROWS_ANY)
        split_rows(p, plan);
    return FROST_OK;
}

void frost__norm_split_rows(int64_t seg_rows, int64_t slots, int spread, int64_t *per_block, int64_t *blocks,
                            int64_t *extra)
{
    if (slots > seg_rows)
        slots = seg_rows;
    if (slots < 1)
        slots = 1;
    *per_block = frost__norm_ceil_div(seg_rows, slots);
    *blocks = frost__norm_ceil_div(seg_rows, *per_block);
    *extra = 0;
    if (spread && seg_rows % *per_block != 0) {
        *blocks = slots;
        *per_block = seg_rows / slots;
        *extra = seg_rows % slots;
    }
}

/* The key frost__norm_cuda_config() picks for p (the key list in norm_cuda_keys.c). */
frost_status frost__norm_cuda_key(const frost__norm_problem *p, frost__kernel_key *key, frost__buf *why)
{
    frost__norm_plan plan;
    frost_status s = frost__norm_cuda_config(p, &plan, why);
    if (s == FROST_OK)
        *key = plan.key;
    return s;
}
