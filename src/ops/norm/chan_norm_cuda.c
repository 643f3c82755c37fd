/*
 * chan_norm_cuda.c — the cuda engine's GroupNorm, InstanceNorm and BatchNorm, forward and
 * backward: which problems the kernels cover, how a problem is cut into tiles, and the
 * launches.
 *
 * Layout legend: X [N, C, HW] with HW = prod(spatial); a row is one pixel (n, p); cg =
 * channels per statistic set (GroupNorm C / G, else 1); a window is cw channels (whole
 * sets), a segment is what one window's statistics need (GroupNorm/InstanceNorm: one
 * sample's window, BatchNorm: the window over the whole batch), a tile is `rows` rows of a
 * segment's window, held whole in one block's shared memory (chan_norm_kernel.cuh).
 *
 * select() decides support and the configuration in one place: the layout (every data
 * tensor NHWC, or every one NCHW; per-tensor n strides may differ), the vector path (16-byte
 * units when C (NHWC) or HW (NCHW) and the n strides are multiples of the unit; base
 * alignment is checked per launch), and the geometry (chan_norm_geometry.c: the window,
 * rows and tiles per segment, priced per wave).  A configuration whose segment fits one
 * wave runs RESIDENT: x (and dy) cross HBM once.  Otherwise the fallback runs three
 * kernels (per-tile statistics, a finalize that merges them, and an apply pass that reads x
 * again).  BatchNorm inference needs no statistics: one APPLY pass with the running ones.
 *
 * Residency: a RESIDENT launch with more than one tile per segment has blocks wait for
 * each other, so it is launched with exactly the blocks per SM the geometry counted on (1,
 * or up to CNORM_MAX_BLOCKS under FROST_CNORM_BLOCKS: the main kernel's key carries that
 * count, its launch bounds cut registers for it, and build checks the compiled registers
 * and shared memory), all of which the device holds at once.  The counters of that
 * exchange are zeroed by a memset on the caller's stream before each launch; nothing else
 * is allocated or hashed at execute.
 *
 * The cluster path (chan_norm_cluster.cu, sm_90): GroupNorm / InstanceNorm on 16-byte units
 * (NHWC: of channels; NCHW: of pixels) and BatchNorm's training forward and backward on
 * NCHW ones (tiles of whole samples), when frost__cnorm_choose_cluster finds a tiling that
 * fills the device: a segment's tiles run as one thread-block cluster and merge their
 * statistics through distributed shared memory, one block per tile, no workspace exchange.
 * An NCHW tile may hold only its first `held` rows in shared memory (pitch = held) and read
 * the others twice.  A base that turns out misaligned at execute takes the kernel's
 * element-by-element loads and stores.
 *
 * The plane path (chan_norm_plane.cu): NCHW InstanceNorm, and GroupNorm with one channel a
 * group, on 16-byte units, when a plane (HW pixels) fits a block's registers and the N x C
 * planes fill a wave (frost__cnorm_choose_plane): a block per plane, taken before the
 * cluster path.  FROST_CNORM_PLANE=0 turns it off.
 *
 * The stream path (chan_norm_stream.cu): BatchNorm training forward, and backward with both
 * saved statistics, on NHWC 16-byte units: by default two launches of one grid, the
 * statistics (each tile's records, merged per channel by the finalize kernel launched
 * between them) and then the output, with the first rows of each tile kept in L2 between
 * them (each launch an entry point of its own, cnorm_stream_{fwd,bwd}_{stats,apply}_kernel,
 * whose registers serve its loop alone; FROST_CNORM_STREAM_SPLIT=0 runs both launches on the
 * combined kernel); or (FROST_CNORM_STREAM=1) one launch
 * of a resident grid that reads each window once from HBM for the sums and again from L2
 * for the output.
 *
 * Kernel keys: DTYPE_F32|F16|BF16, KIND_GROUP|INSTANCE|BATCH, LAYOUT_NCHW|NHWC, per entry
 * point (main, finalize, dparams): 90 keys; the cluster path's main kernels add CLUSTER =
 * 1, 2, 4, 8 (GroupNorm / InstanceNorm in both layouts, BatchNorm NCHW: 120 keys) and, for
 * NCHW tiles that hold part of their rows, CLUSTER = 8 with HELD (18 keys), the
 * stream path three per dtype and direction (the combined kernel,
 * the statistics and the output entry points with STREAM_BLOCKS = 2: 18), the plane path
 * GroupNorm and InstanceNorm NCHW with PLANE_UNITS = CNP_UNITS or CNP_UNITS_WIDE (24); all listed by
 * frost__cnorm_cuda_keys.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/norm/chan_norm_cuda.h"
#include "runtime/runtime.h"

FROST__STATIC_ASSERT(sizeof(cnorm_params) == CNORM_PARAMS_BYTES, "cnorm_params layout drifted");

#define FWD_SOURCE "src/ops/norm/chan_norm_fwd.cu"
#define BWD_SOURCE "src/ops/norm/chan_norm_bwd.cu"
#define CLUSTER_SOURCE "src/ops/norm/chan_norm_cluster.cu"
#define STREAM_SOURCE "src/ops/norm/chan_norm_stream.cu"
#define PLANE_SOURCE "src/ops/norm/chan_norm_plane.cu"
#define SMEM_RESERVED 1024 /* per block, taken by the hardware */
#define MAX_ROWS ((int64_t)INT32_MAX - 4096)

/* ENTRY_APPLY: the stream path's output launch when it has an entry point of its own */
enum { ENTRY_MAIN = 0, ENTRY_FINALIZE = 1, ENTRY_DPARAMS = 2, ENTRY_APPLY = 3, NUM_ENTRIES = 4 };
static const char *const entry_names[2][NUM_ENTRIES] = {
    {"cnorm_fwd_kernel", "cnorm_fwd_finalize_kernel", NULL, NULL},
    {"cnorm_bwd_kernel", "cnorm_bwd_finalize_kernel", "cnorm_bwd_dparams_kernel", NULL},
};
/* the stream path's entry points: [backward][combined, statistics, output] */
static const char *const stream_entry[2][3] = {
    {"cnorm_stream_fwd_kernel", "cnorm_stream_fwd_stats_kernel", "cnorm_stream_fwd_apply_kernel"},
    {"cnorm_stream_bwd_kernel", "cnorm_stream_bwd_stats_kernel", "cnorm_stream_bwd_apply_kernel"},
};
static const char *const cluster_entry[2] = {"cnorm_cluster_fwd_kernel", "cnorm_cluster_bwd_kernel"};
static const char *const plane_entry[2] = {"cnorm_plane_fwd_kernel", "cnorm_plane_bwd_kernel"};
#define PATH_PLANE (-3) /* fill_key's cluster argument for the plane path's main kernel */
static const char *const kind_define[3] = {"KIND_GROUP", "KIND_INSTANCE", "KIND_BATCH"};
static const char *const kind_label[3] = {"GroupNorm", "InstanceNorm", "BatchNorm"};

typedef struct cnorm_plan {
    int backward, kind, nhwc, vec_layout, empty;
    frost_dtype dtype;
    cnorm_geometry geo;
    int use[NUM_ENTRIES];
    int merge_kernel; /* the stream path's two-launch form: the finalize kernel merges the statistics */
    int split;        /* ... and its two launches run their own entry points (ENTRY_MAIN, ENTRY_APPLY) */
    int early;        /* ... and the finalize kernel and ENTRY_APPLY are programmatic dependent launches */
    int early_dparams; /* ENTRY_DPARAMS is a programmatic dependent launch (the cluster path) */
    frost__kernel_key keys[NUM_ENTRIES];
    frost__kernel *kernels[NUM_ENTRIES];
    int64_t counters; /* RESIDENT with an exchange: the counters to zero before the launch */
    unsigned grid_main, grid_finalize, grid_dparams;
    size_t workspace;
    cnorm_params params; /* everything but the pointers and the mode */
} cnorm_plan;

/* ------------------------------------------------------------------------------------ */
/* select                                                                                */
/* ------------------------------------------------------------------------------------ */

static const char *const slot_label[FROST__CNORM_NUM_SLOTS] = {
    "X", "scale", "bias", "Y", "mean", "inv_std", "running_mean", "running_var", "dY", "dX", "d_scale", "d_bias",
};

static void print_strides(frost__buf *why, const frost__graph *g, const frost__node *n, int slot)
{
    const frost__tensor *t = frost__tensor_get(g, n->slot[slot]);
    frost__buf_printf(why, "[");
    for (int i = 0; t && i < t->rank; i++)
        frost__buf_printf(why, "%s%lld", i ? ", " : "", (long long)t->strides[i]);
    frost__buf_printf(why, "] (dims [");
    for (int i = 0; t && i < t->rank; i++)
        frost__buf_printf(why, "%s%lld", i ? ", " : "", (long long)t->dims[i]);
    frost__buf_printf(why, "])");
}

/* Every data tensor NHWC (preferred when both hold, e.g. no spatial dims) or every one
 * NCHW; *nhwc receives which.  NOT_SUPPORTED with the sentence otherwise. */
static frost_status pick_layout(const frost__graph *g, const frost__node *n, const frost__cnorm_problem *p,
                                const int *slots, int count, int *nhwc, frost__buf *why)
{
    int all_nhwc = 1, all_nchw = 1;
    for (int i = 0; i < count; i++) {
        const frost__cnorm_layout *l = &p->slot[slots[i]];
        if (!l->nhwc && !l->nchw) {
            frost__buf_printf(why, "cuda channel norms need NCHW or NHWC layout (spatial dims contiguous per channel, "
                                   "or channels contiguous per pixel); %s's strides are ", slot_label[slots[i]]);
            print_strides(why, g, n, slots[i]);
            return FROST_NOT_SUPPORTED;
        }
        all_nhwc &= l->nhwc;
        all_nchw &= l->nchw;
    }
    if (!all_nhwc && !all_nchw) {
        frost__buf_printf(why, "cuda channel norms need every data tensor in one layout; X is %s but ",
                          p->slot[FROST__CNORM_X].nhwc ? "NHWC" : "NCHW");
        for (int i = 1; i < count; i++)
            if (p->slot[slots[i]].nhwc != p->slot[FROST__CNORM_X].nhwc) {
                frost__buf_printf(why, "%s's strides are ", slot_label[slots[i]]);
                print_strides(why, g, n, slots[i]);
                break;
            }
        frost__buf_printf(why, " (let frost create the output: it keeps X's layout)");
        return FROST_NOT_SUPPORTED;
    }
    *nhwc = all_nhwc;
    return FROST_OK;
}

/* blocks: resident blocks per SM of the main kernel (> 1 only under FROST_CNORM_BLOCKS; the
 * stream path's split entry points: the geometry's count; the plane path: the units a
 * thread holds); cluster: > 0 for the cluster path's main kernel (chan_norm_cluster.cu),
 * its blocks per cluster, -1 for the stream path's combined kernel (chan_norm_stream.cu),
 * -2 for its split entry points (ENTRY_MAIN: the statistics, ENTRY_APPLY: the output),
 * PATH_PLANE for the plane path's (chan_norm_plane.cu) */
static void fill_key(frost__kernel_key *k, int backward, int entry, frost_dtype dtype, int kind, int nhwc,
                     int64_t blocks, int64_t cluster, int held)
{
    const int clustered = entry == ENTRY_MAIN && cluster > 0;
    const int planar = entry == ENTRY_MAIN && cluster == PATH_PLANE;
    const int streamed = (entry == ENTRY_MAIN || entry == ENTRY_APPLY) && cluster < 0 && !planar,
              split = cluster == -2;
    if (planar)
        frost__key_init(k, PLANE_SOURCE, plane_entry[backward]);
    else if (streamed)
        frost__key_init(k, STREAM_SOURCE, stream_entry[backward][!split ? 0 : entry == ENTRY_MAIN ? 1 : 2]);
    else
        frost__key_init(k, clustered ? CLUSTER_SOURCE : backward ? BWD_SOURCE : FWD_SOURCE,
                        clustered ? cluster_entry[backward] : entry_names[backward][entry]);
    frost__key_define(k, dtype == FROST_F32 ? "DTYPE_F32" : dtype == FROST_F16 ? "DTYPE_F16" : "DTYPE_BF16", NULL);
    frost__key_define(k, kind_define[kind], NULL);
    frost__key_define(k, nhwc ? "LAYOUT_NHWC" : "LAYOUT_NCHW", NULL);
    if (planar) {
        frost__key_define(k, "PLANE_UNITS", "%d", (int)blocks);
        /* FROST_CNORM_PLANE_MINB = 2..4 (developer tuning): registers for that many blocks of
         * CNP_MAX_THREADS threads an SM */
        const char *minb = getenv("FROST_CNORM_PLANE_MINB");
        if (minb && minb[0] >= '2' && minb[0] <= '4' && !minb[1])
            frost__key_define(k, "MINB", "%c", minb[0]);
    } else if (clustered) {
        frost__key_define(k, "CLUSTER", "%d", (int)cluster);
        if (held) /* NCHW tiles that hold part of their rows (the kernel's other rows are read twice) */
            frost__key_define(k, "HELD", NULL);
    } else if (streamed && split)
        frost__key_define(k, "STREAM_BLOCKS", "%d", (int)blocks);
    else if (entry == ENTRY_MAIN && blocks > 1 && !streamed)
        frost__key_define(k, "MINB", "%d", (int)blocks);
}

static int64_t stride_or_zero(const frost__cnorm_problem *p, int slot, int which)
{
    return p->slot[slot].present ? p->slot[slot].stat_stride[which] : 0;
}

/* Developer switches that are on unless their variable is exactly "0". */
static int env_on(const char *name)
{
    const char *v = getenv(name);
    return !(v && v[0] == '0' && !v[1]);
}

/* Everything of the parameter block that does not change between launches. */
static void fill_params(const frost__cnorm_problem *p, cnorm_plan *pl)
{
    cnorm_params *k = &pl->params;
    const cnorm_geometry *geo = &pl->geo;
    memset(k, 0, sizeof *k);
    k->x_sn = p->slot[FROST__CNORM_X].stride_n;
    k->dy_sn = p->backward ? p->slot[FROST__CNORM_D_Y].stride_n : 0;
    k->out_sn = p->slot[p->backward ? FROST__CNORM_D_X : FROST__CNORM_Y].stride_n;
    const int batch = p->kind == FROST__CNORM_BATCH;
    k->mean_sn = batch ? 0 : stride_or_zero(p, FROST__CNORM_MEAN, 0);
    k->mean_ss = stride_or_zero(p, FROST__CNORM_MEAN, batch ? 0 : 1);
    k->inv_sn = batch ? 0 : stride_or_zero(p, FROST__CNORM_INV_STD, 0);
    k->inv_ss = stride_or_zero(p, FROST__CNORM_INV_STD, batch ? 0 : 1);
    k->scale_sc = stride_or_zero(p, FROST__CNORM_SCALE, 0);
    k->bias_sc = stride_or_zero(p, FROST__CNORM_BIAS, 0);
    k->rmean_sc = stride_or_zero(p, FROST__CNORM_RUNNING_MEAN, 0);
    k->rvar_sc = stride_or_zero(p, FROST__CNORM_RUNNING_VAR, 0);
    k->dscale_sc = stride_or_zero(p, FROST__CNORM_D_SCALE, 0);
    k->dbias_sc = stride_or_zero(p, FROST__CNORM_D_BIAS, 0);
    k->n = (int32_t)p->n;
    k->c = (int32_t)p->c;
    k->hw = (int32_t)p->spatial;
    k->cg = (int32_t)(p->groups > 0 ? p->c / p->groups : 1);
    if (p->kind == FROST__CNORM_BATCH)
        k->cg = 1;
    k->cw = (int32_t)geo->cw;
    k->sets = (int32_t)geo->sets;
    k->windows = (int32_t)geo->windows;
    k->rows = (int32_t)geo->rows;
    k->seg_rows = (int32_t)geo->seg_rows;
    k->k_tiles = (int32_t)geo->k_tiles;
    k->num_tiles = (int32_t)geo->num_tiles;
    k->num_segments = (int32_t)geo->num_segments;
    k->arrivals = (int32_t)(geo->stream ? CNS_GROUPS(geo->k_tiles) : geo->k_tiles);
    k->keep_rows = (int32_t)geo->keep_rows;
    k->early_rows = (int32_t)(pl->early ? geo->early_rows : 0);
    k->ramp_cycles = (int32_t)geo->ramp_cycles;
    k->ramp_classes = (int32_t)geo->ramp_classes;
    k->first_wave = (int32_t)(geo->first_wave < INT32_MAX ? geo->first_wave : INT32_MAX);
    k->plane_threads = (int32_t)geo->plane;
    k->pitch = (int32_t)(!pl->nhwc                    ? (geo->held ? geo->held : geo->rows)
                         : geo->cluster || geo->stream ? geo->cw
                                                       : CNORM_PITCH_NHWC(geo->cw));
    /* developer tuning: FROST_CNORM_PREFETCH = 0 bulk, 1 lines (the default), 2 none */
    const char *pf = getenv("FROST_CNORM_PREFETCH");
    k->prefetch = pf && pf[0] >= '0' && pf[0] <= '2' && !pf[1] ? pf[0] - '0' : CNORM_PREFETCH_DEFAULT;
    if (p->slot[FROST__CNORM_SCALE].present) {
        k->scale_dt = (int32_t)p->slot[FROST__CNORM_SCALE].dtype;
        if (p->zero_centered_scale)
            k->flags |= CNORM_F_ZERO_CENTERED;
    }
    if (!p->backward && p->slot[FROST__CNORM_BIAS].present)
        k->bias_dt = (int32_t)p->slot[FROST__CNORM_BIAS].dtype;
    if (!p->backward && batch && p->phase == FROST_NORM_INFERENCE)
        k->flags |= CNORM_F_RUNNING;
    if (!p->backward && p->update_running)
        k->flags |= CNORM_F_UPDATE_RUNNING;
    if (p->backward && p->slot[FROST__CNORM_MEAN].present)
        k->flags |= CNORM_F_SAVED_MEAN;
    if (p->backward && p->slot[FROST__CNORM_INV_STD].present)
        k->flags |= CNORM_F_SAVED_RSTD;
    /* FROST_CNORM_REVERSE=0 (developer tuning) keeps the APPLY pass in tile order */
    if (env_on("FROST_CNORM_REVERSE"))
        k->flags |= CNORM_F_REVERSE;
    k->want_rec = pl->use[ENTRY_DPARAMS];
    if (pl->merge_kernel)
        k->flags |= CNORM_F_MERGE_KERNEL;
    const double m = p->kind == FROST__CNORM_BATCH ? (double)p->n * (double)p->spatial
                                                   : (double)k->cg * (double)p->spatial;
    k->eps = (float)p->epsilon;
    k->momentum = (float)p->momentum;
    k->inv_m = m > 0.0 ? (float)(1.0 / m) : 0.0f;
    k->unbias = m > 1.0 ? (float)(m / (m - 1.0)) : 0.0f;
}

/* Workspace sections, 256-byte aligned: counters, partial records, final records, the
 * d_scale / d_bias records. */
static void plan_workspace(cnorm_plan *pl)
{
    const cnorm_geometry *geo = &pl->geo;
    cnorm_params *k = &pl->params;
    /* through the workspace: the fallback's records, a resident segment of several tiles, and
     * every window of the stream path (the cluster path exchanges through distributed shared
     * memory) */
    const int exchange = geo->cluster ? 0 : geo->stream ? 1 : geo->resident ? geo->k_tiles > 1 : 1;
    const int64_t part_floats = pl->backward ? CNORM_PART_FLOATS_BWD : CNORM_PART_FLOATS_FWD;
    const int stats = !(k->flags & CNORM_F_RUNNING);
    int64_t at = 0;
    /* the stream path's in-launch two-level merge: a counter and a record per tile group after
     * the segments' counters and the tiles' records (none when the finalize kernel merges) */
    const int64_t groups = geo->stream && !pl->merge_kernel ? geo->num_segments * CNS_GROUPS(geo->k_tiles) : 0;
    pl->counters = exchange && geo->resident && !pl->merge_kernel ? geo->num_segments + groups : 0;
    k->off_count = at;
    at += frost__cnorm_align_up(pl->counters * 4, 256);
    k->off_part = at;
    at += stats && exchange ? frost__cnorm_align_up((geo->num_tiles + groups) * geo->sets * part_floats * 4, 256) : 0;
    k->off_final = at;
    at += stats && exchange ? frost__cnorm_align_up(geo->num_segments * geo->sets * CNORM_FINAL_FLOATS * 4, 256) : 0;
    k->off_rec = at;
    at +=
        k->want_rec ? frost__cnorm_align_up((int64_t)k->n * k->c * (geo->k_tiles > 0 ? geo->k_tiles : 1) * 8, 256) : 0;
    pl->workspace = (size_t)at;
}

static frost_status refuse(frost__buf *why, const char *sentence)
{
    frost__buf_printf(why, "%s", sentence);
    return FROST_NOT_SUPPORTED;
}

static frost_status cnorm_select(const frost_context *ctx, const frost__graph *g, const frost__node *n, void **plan_out,
                                 frost__buf *why)
{
    const frost__cnorm_problem *p = n->problem;
    const frost__device *dev = ctx->device;
    static const int fwd_slots[] = {FROST__CNORM_X, FROST__CNORM_Y};
    static const int bwd_slots[] = {FROST__CNORM_X, FROST__CNORM_D_Y, FROST__CNORM_D_X};
    const int *slots = p->backward ? bwd_slots : fwd_slots;
    const int count = p->backward ? 3 : 2;
    *plan_out = NULL;
    if (!dev)
        return refuse(why, "cuda channel norms need a CUDA context (this one has no device)");
    if (dev->cc_major < 8) {
        frost__buf_printf(why, "cuda channel norms need sm_80 or newer (cp.async); %s is sm_%d%d", dev->name,
                          dev->cc_major, dev->cc_minor);
        return FROST_NOT_SUPPORTED;
    }
    int nhwc = 0;
    frost_status s = pick_layout(g, n, p, slots, count, &nhwc, why);
    if (s != FROST_OK)
        return s;
    for (int i = 0; i < count; i++)
        if (p->slot[slots[i]].stride_n < 0 && p->n > 1) {
            frost__buf_printf(why, "cuda channel norms need a non-negative n stride; %s's is %lld",
                              slot_label[slots[i]], (long long)p->slot[slots[i]].stride_n);
            return FROST_NOT_SUPPORTED;
        }
    if (p->n * p->spatial > MAX_ROWS || p->c > MAX_ROWS) {
        frost__buf_printf(why, "cuda channel norms index N x spatial = %lld pixels and C = %lld channels with 32-bit "
                               "integers; both must stay below %lld (split the batch)",
                          (long long)(p->n * p->spatial), (long long)p->c, (long long)MAX_ROWS);
        return FROST_NOT_SUPPORTED;
    }

    cnorm_plan *pl = calloc(1, sizeof *pl);
    if (!pl)
        return frost__fail(FROST_OUT_OF_MEMORY, "cuda channel norm: no memory for a plan");
    pl->backward = p->backward;
    pl->kind = (int)p->kind;
    pl->nhwc = nhwc;
    pl->dtype = p->slot[FROST__CNORM_X].dtype;
    const int64_t esize = pl->dtype == FROST_F32 ? 4 : 2, vec = 16 / esize;
    pl->vec_layout = (nhwc ? p->c : p->spatial) % vec == 0;
    for (int i = 0; i < count; i++)
        if (p->n > 1 && p->slot[slots[i]].stride_n % vec != 0)
            pl->vec_layout = 0;
    const int stats = p->backward || p->kind != FROST__CNORM_BATCH || p->phase == FROST_NORM_TRAINING;
    const int want_dparams = p->backward && (p->slot[FROST__CNORM_D_SCALE].present ||
                                             p->slot[FROST__CNORM_D_BIAS].present);
    pl->empty = p->n * p->spatial * p->c == 0;
    if (!pl->empty) {
        cnorm_shape sh = {.kind = pl->kind, .nhwc = nhwc, .tensors = p->backward ? 2 : 1,
                          .vec_layout = pl->vec_layout, .n = p->n, .c = p->c, .hw = p->spatial, .esize = esize};
        sh.cg = p->kind == FROST__CNORM_GROUP ? p->c / p->groups : 1;
        sh.cw_unit = frost__cnorm_window_unit(nhwc, pl->vec_layout, sh.cg, vec);
        const cnorm_device cd = {.sms = dev->sm_count, .smem_per_sm = dev->smem_per_sm,
                                 .optin = dev->smem_per_block_optin, .reserved = SMEM_RESERVED,
                                 .max_cluster = dev->cc_major >= 9 ? CNC_MAX_CLUSTER : 0,
                                 .l2_bytes = (int64_t)dev->l2_bytes};
        const size_t budget = cd.optin < cd.smem_per_sm - cd.reserved ? cd.optin : cd.smem_per_sm - cd.reserved;
        /* the stream path: the training forward, or a backward with both saved statistics */
        const int streamable = p->backward ? p->slot[FROST__CNORM_MEAN].present && p->slot[FROST__CNORM_INV_STD].present
                                           : p->phase == FROST_NORM_TRAINING;
        if (!(stats && frost__cnorm_choose_plane(&sh, &cd, &pl->geo)) &&
            !(stats && frost__cnorm_choose_cluster(&sh, &cd, &pl->geo)) &&
            !(streamable && frost__cnorm_choose_stream(&sh, &cd, &pl->geo)) &&
            !frost__cnorm_choose_geometry(&sh, &cd, stats, &pl->geo)) {
            frost__buf_printf(why, "cuda %s keeps at least %d rows of %lld channels (one %s) in shared memory: %zu "
                                   "bytes, more than the %zu this device allows per block",
                              kind_label[p->kind], CNORM_ROW_ALIGN, (long long)sh.cw_unit,
                              p->kind == FROST__CNORM_GROUP ? "group" : "vector of channels",
                              frost__cnorm_smem_bytes(&sh, CNORM_ROW_ALIGN, sh.cw_unit), budget);
            free(pl);
            return FROST_NOT_SUPPORTED;
        }
        if (pl->geo.num_tiles > INT32_MAX || (int64_t)p->n * p->c * pl->geo.k_tiles > ((int64_t)1 << 40)) {
            frost__buf_printf(why, "cuda channel norms cut this problem into %lld tiles, more than a launch indexes; "
                                   "split the batch", (long long)pl->geo.num_tiles);
            free(pl);
            return FROST_NOT_SUPPORTED;
        }
    }
    pl->use[ENTRY_MAIN] = !pl->empty;
    /* the two-launch stream form's statistics launch leaves the merge to the finalize kernel
     * unless FROST_CNORM_STREAM_MERGE=0 (the launch's last arrivals merge) */
    pl->merge_kernel = pl->geo.stream == 2 && env_on("FROST_CNORM_STREAM_MERGE");
    pl->split = pl->merge_kernel && env_on("FROST_CNORM_STREAM_SPLIT");
    pl->use[ENTRY_FINALIZE] = !pl->empty && stats && (!pl->geo.resident || pl->merge_kernel);
    pl->use[ENTRY_DPARAMS] = want_dparams && (p->kind != FROST__CNORM_BATCH || pl->empty) && p->c > 0;
    pl->use[ENTRY_APPLY] = !pl->empty && pl->split;
    /* they are scheduled while the kernel before them ends (runtime.h: early; the
     * statistics entry and the finalize kernel allow it from their start, the finalize
     * kernel and the output entry wait for the kernel before them first) unless
     * FROST_CNORM_PDL=0 */
    pl->early = pl->use[ENTRY_APPLY] && env_on("FROST_CNORM_PDL");
    /* the cluster path's backward lets its d_scale / d_bias kernel be scheduled as its last
     * blocks store (the kernel waits for it first) */
    pl->early_dparams = pl->use[ENTRY_DPARAMS] && (pl->geo.cluster || pl->geo.plane) && env_on("FROST_CNORM_PDL");
    for (int e = 0; e < NUM_ENTRIES; e++)
        if (pl->use[e])
            fill_key(&pl->keys[e], p->backward, e, pl->dtype, pl->kind, nhwc,
                     pl->geo.plane ? pl->geo.plane_units : pl->geo.blocks,
                     pl->geo.plane ? PATH_PLANE : pl->split ? -2 : pl->geo.stream ? -1 : pl->geo.cluster,
                     pl->geo.held != 0);
    fill_params(p, pl);
    plan_workspace(pl);
    pl->grid_finalize = (unsigned)frost__cnorm_ceil_div(pl->geo.num_segments * pl->geo.sets, CNORM_FIN_SETS);
    pl->grid_dparams = (unsigned)frost__cnorm_ceil_div(p->c, CNORM_WARPS / CNORM_DP_SPLIT);
    *plan_out = pl;
    return FROST_OK;
}

/* ------------------------------------------------------------------------------------ */
/* build / workspace / execute                                                           */
/* ------------------------------------------------------------------------------------ */

/* Blocks of `threads` threads with `smem` bytes of dynamic shared memory that the compiled
 * kernel's registers and shared memory let one SM hold. */
static int64_t blocks_fit(const frost__device *dev, const frost__kernel *k, int threads, size_t smem)
{
    const int regs = k->attrs.registers > 0 ? (k->attrs.registers + 7) / 8 * 8 : 128;
    const int64_t by_regs = 65536 / (regs * threads), by_smem = (int64_t)(dev->smem_per_sm / (smem + SMEM_RESERVED));
    return by_regs < by_smem ? by_regs : by_smem;
}

static frost_status cnorm_build(const frost_context *ctx, const frost__node *n, void *plan,
                                const frost_build_options *opt)
{
    cnorm_plan *pl = plan;
    frost__device *dev = ctx->device;
    (void)n;
    for (int e = 0; e < NUM_ENTRIES; e++) {
        if (!pl->use[e])
            continue;
        frost_status s = frost__kernel_get(dev, &pl->keys[e], opt ? opt->enforce_precompiled : 0, &pl->kernels[e]);
        if (s != FROST_OK)
            return s;
    }
    if (!pl->use[ENTRY_MAIN])
        return FROST_OK;
    const frost__kernel *k = pl->kernels[ENTRY_MAIN];
    static const int tiled[] = {ENTRY_MAIN, ENTRY_APPLY}; /* the entries that take the tile's shared memory */
    for (size_t i = 0; i < FROST__ARRAY_SIZE(tiled); i++) {
        const int e = tiled[i];
        if (pl->use[e] && pl->geo.smem > pl->kernels[e]->dyn_smem_set)
            return frost__fail(FROST_INTERNAL, "cuda channel norm: a tile needs %zu bytes of shared memory, %s "
                                               "allows %zu", pl->geo.smem, pl->keys[e].entry,
                               pl->kernels[e]->dyn_smem_set);
    }
    if (pl->geo.plane) { /* plane_per_block planes a block */
        const int64_t threads = pl->geo.plane * pl->geo.plane_per_block;
        if (blocks_fit(dev, k, (int)threads, 0) < 1)
            return frost__fail(FROST_INTERNAL, "cuda channel norm plane kernel: %d registers leave no room for a block "
                                               "of %lld threads", k->attrs.registers, (long long)threads);
        pl->grid_main = (unsigned)frost__cnorm_ceil_div(pl->geo.num_tiles, pl->geo.plane_per_block);
        return FROST_OK;
    }
    if (pl->geo.cluster) { /* one block per tile; the hardware places whole clusters */
        pl->grid_main = (unsigned)pl->geo.num_tiles;
        return FROST_OK;
    }
    if (pl->geo.stream) { /* k_tiles blocks; one launch: all resident (the geometry counted CNS_MIN_BLOCKS per SM) */
        const int64_t fit = blocks_fit(dev, k, CNC_THREADS, pl->geo.smem);
        if (pl->geo.stream == 1 && fit * dev->sm_count < pl->geo.k_tiles)
            return frost__fail(FROST_INTERNAL, "cuda BatchNorm stream kernel: %lld blocks must be resident, the "
                                               "device holds %lld (%d registers, %zu B shared memory)",
                               (long long)pl->geo.k_tiles, (long long)(fit * dev->sm_count), k->attrs.registers,
                               pl->geo.smem);
        pl->grid_main = (unsigned)pl->geo.k_tiles;
        return FROST_OK;
    }
    /* blocks per SM: what registers and shared memory allow, up to the geometry's count for
     * an exchange (a segment's tiles must all run at once: the geometry counted on exactly
     * that many, and the kernel's launch bounds cut registers for that count) */
    int64_t per_sm = blocks_fit(dev, k, CNORM_THREADS, pl->geo.smem);
    per_sm = per_sm < 1 ? 1 : per_sm > 4 ? 4 : per_sm;
    if (pl->geo.resident && pl->geo.k_tiles > 1) {
        if (per_sm < pl->geo.blocks)
            return frost__fail(FROST_INTERNAL, "cuda channel norm: the tiling counts on %lld blocks per SM, the "
                                               "kernel (%d registers, %zu B shared memory) fits %lld",
                               (long long)pl->geo.blocks, k->attrs.registers, pl->geo.smem, (long long)per_sm);
        per_sm = pl->geo.blocks;
    }
    const int64_t grid = dev->sm_count * per_sm;
    pl->grid_main = (unsigned)(pl->geo.num_tiles < grid ? pl->geo.num_tiles : grid);
    return FROST_OK;
}

static size_t cnorm_workspace(const frost__node *n, const void *plan)
{
    (void)n;
    return ((const cnorm_plan *)plan)->workspace;
}

static int aligned16(const void *ptr)
{
    return ((uintptr_t)ptr & 15u) == 0;
}

/* early: a programmatic dependent launch (runtime.h), scheduled while the previous kernel ends */
static frost_status launch(const frost_context *ctx, frost__kernel *k, unsigned grid, unsigned threads, size_t smem,
                           cnorm_params *params, void *stream, int early)
{
    frost__launch_dims dims;
    void *args[1] = {params};
    memset(&dims, 0, sizeof dims);
    dims.grid[0] = grid, dims.grid[1] = 1, dims.grid[2] = 1;
    dims.block[0] = threads, dims.block[1] = 1, dims.block[2] = 1;
    dims.dyn_smem = smem;
    dims.early = early;
    return frost__launch(ctx->device, k, &dims, args, stream);
}

static frost_status cnorm_execute(const frost_context *ctx, const frost__node *n, const void *plan, void *const *ptrs,
                                  void *workspace, void *stream)
{
    const cnorm_plan *pl = plan;
    cnorm_params k = pl->params;
    (void)n;
    k.x = ptrs[FROST__CNORM_X];
    k.scale = ptrs[FROST__CNORM_SCALE];
    k.mean = ptrs[FROST__CNORM_MEAN];
    k.inv_std = ptrs[FROST__CNORM_INV_STD];
    if (pl->backward) {
        k.dy = ptrs[FROST__CNORM_D_Y];
        k.out = ptrs[FROST__CNORM_D_X];
        k.d_scale = ptrs[FROST__CNORM_D_SCALE];
        k.d_bias = ptrs[FROST__CNORM_D_BIAS];
    } else {
        k.out = ptrs[FROST__CNORM_Y];
        k.bias = ptrs[FROST__CNORM_BIAS];
        k.running_mean = ptrs[FROST__CNORM_RUNNING_MEAN];
        k.running_var = ptrs[FROST__CNORM_RUNNING_VAR];
    }
    k.ws = workspace;
    if (pl->workspace > 0 && (!workspace || !aligned16(workspace)))
        return frost__fail(FROST_INVALID_ARGUMENT, "cuda channel norm needs a 16-byte aligned workspace of %zu bytes; "
                                                   "got %p", pl->workspace, workspace);
    if (!pl->empty && (!k.x || !k.out || (pl->backward && !k.dy)))
        return frost__fail(FROST_INVALID_ARGUMENT, "cuda channel norm: a data tensor is bound to NULL");
    k.vec_ok = pl->vec_layout && aligned16(k.x) && aligned16(k.out) && (!pl->backward || aligned16(k.dy));
    frost_status s = FROST_OK;
    if (pl->counters)
        s = frost__dev_memset_async(ctx->device, (unsigned char *)workspace + k.off_count, 0, (size_t)pl->counters * 4,
                                    stream);
    /* a statistics pass, the finalize kernel's merge, then the output pass: the fallback and the
     * stream path's two-launch form (which merges in its first launch under FROST_CNORM_STREAM_MERGE=0) */
    const int two_passes = pl->use[ENTRY_FINALIZE] || pl->geo.stream == 2;
    const int threads = pl->geo.plane                        ? (int)(pl->geo.plane * pl->geo.plane_per_block)
                        : pl->geo.cluster || pl->geo.stream ? CNC_THREADS
                                                             : CNORM_THREADS;
    if (s == FROST_OK && pl->use[ENTRY_MAIN]) {
        k.mode = two_passes                   ? CNORM_MODE_STATS
                 : (k.flags & CNORM_F_RUNNING) ? CNORM_MODE_APPLY
                                               : CNORM_MODE_RESIDENT;
        s = launch(ctx, pl->kernels[ENTRY_MAIN], pl->grid_main, threads, pl->geo.smem, &k, stream, 0);
    }
    if (s == FROST_OK && pl->use[ENTRY_FINALIZE])
        s = launch(ctx, pl->kernels[ENTRY_FINALIZE], pl->grid_finalize, CNORM_FIN_THREADS, 0, &k, stream, pl->early);
    if (s == FROST_OK && pl->use[ENTRY_MAIN] && two_passes) {
        k.mode = CNORM_MODE_APPLY;
        s = launch(ctx, pl->kernels[pl->use[ENTRY_APPLY] ? ENTRY_APPLY : ENTRY_MAIN], pl->grid_main, threads,
                   pl->geo.smem, &k, stream, pl->early);
    }
    if (s == FROST_OK && pl->use[ENTRY_DPARAMS])
        s = launch(ctx, pl->kernels[ENTRY_DPARAMS], pl->grid_dparams, CNORM_THREADS, 0, &k, stream,
                   pl->early_dparams);
    return s;
}

static void cnorm_describe(const void *plan, frost__buf *out)
{
    const cnorm_plan *pl = plan;
    const cnorm_geometry *geo = &pl->geo;
    if (!pl->use[ENTRY_MAIN]) {
        frost__buf_printf(out, "empty tensor: %s", pl->use[ENTRY_DPARAMS] ? "d_scale / d_bias set to 0" : "no work");
        return;
    }
    frost__key_print(&pl->keys[ENTRY_MAIN], out);
    if (geo->plane) {
        frost__buf_printf(out, "; NCHW, %lld threads per (n, c) plane of %lld pixels, %lld plane%s a block (%u "
                               "blocks), each thread holding %lld 16-byte units of x%s in registers; x%s read from "
                               "HBM once, the plane's sums reduced in a fixed order (deterministic)",
                          (long long)geo->plane, (long long)geo->rows, (long long)geo->plane_per_block,
                          geo->plane_per_block == 1 ? "" : "s", pl->grid_main, (long long)geo->plane_units,
                          pl->backward ? " and dY" : "", pl->backward ? " and dY" : "");
        if (pl->use[ENTRY_DPARAMS])
            frost__buf_printf(out, "; d_scale / d_bias summed per channel by %s in fixed order",
                              pl->keys[ENTRY_DPARAMS].entry);
        return;
    }
    if (geo->cluster) {
        frost__buf_printf(out, "; %s tiles of %lld rows x %lld channels (%zu B shared memory), %lld segments, each "
                               "one thread-block cluster of %lld tiles; x%s read from HBM once%s, statistics merged "
                               "through distributed shared memory in rank order (deterministic), grid %u x %d",
                          pl->nhwc ? "NHWC" : "NCHW", (long long)geo->rows, (long long)geo->cw, geo->smem,
                          (long long)geo->num_segments, (long long)geo->k_tiles, pl->backward ? " and dY" : "",
                          geo->held ? " where shared memory holds it" : "", pl->grid_main, CNC_THREADS);
        if (geo->held)
            frost__buf_printf(out, "; each tile holds its first %lld rows in shared memory and reads the other %lld "
                                   "twice (for the sums, kept in L2, and for the output)",
                              (long long)geo->held, (long long)(geo->rows - geo->held));
        if (pl->params.ramp_cycles > 0 && pl->params.ramp_classes > 1)
            frost__buf_printf(out, "; the first %d blocks start over %d SM cycles in %d classes, so that blocks "
                                   "sharing an SM load, reduce and store at different times",
                              pl->params.first_wave, pl->params.ramp_cycles, pl->params.ramp_classes);
        if (pl->use[ENTRY_DPARAMS])
            frost__buf_printf(out, "; d_scale / d_bias summed per channel by %s in fixed order",
                              pl->keys[ENTRY_DPARAMS].entry);
        else if (pl->backward && pl->kind == FROST__CNORM_BATCH)
            frost__buf_printf(out, "; d_scale / d_bias written by each cluster's first block");
        return;
    }
    if (geo->stream) {
        const char *sums = pl->backward ? "sum dY and sum dY (x - mean)" : "statistics";
        const char *dy = pl->backward ? " and dY" : "";
        frost__buf_printf(out, "; NHWC, %lld window%s of %lld channels, each cut into %lld tiles of %lld rows, one "
                               "per block of a %sgrid of %u x %d",
                          (long long)geo->windows, geo->windows == 1 ? "" : "s", (long long)geo->cw,
                          (long long)geo->k_tiles, (long long)geo->rows, geo->stream == 2 ? "" : "resident ",
                          pl->grid_main, CNC_THREADS);
        if (geo->stream == 2 && pl->merge_kernel) {
            frost__buf_printf(out, ", in two passes over x%s: every window's %s (from HBM; the first %lld rows of "
                                   "each tile kept in L2), merged per channel in tile order by %s (deterministic), "
                                   "then every window's output (%s, %lld blocks per SM)",
                              dy, sums, (long long)geo->keep_rows, pl->keys[ENTRY_FINALIZE].entry,
                              pl->use[ENTRY_APPLY] ? pl->keys[ENTRY_APPLY].entry : pl->keys[ENTRY_MAIN].entry,
                              (long long)geo->blocks);
            if (pl->params.early_rows > 0)
                frost__buf_printf(out, "; the output launch asks L2 for the next %d rows of each tile while the "
                                       "merge runs",
                                  pl->params.early_rows);
        } else if (geo->stream == 2)
            frost__buf_printf(out, ", in two passes over x%s: every window's %s (from HBM; the first %lld rows of "
                                   "each tile kept in L2) with a fixed-order merge in two levels in the same launch "
                                   "(groups of %d tiles, then the groups; deterministic), then every window's output",
                              dy, sums, (long long)geo->keep_rows, CNS_GROUP);
        else
            frost__buf_printf(out, "; per window: %s (x%s from HBM, kept in L2), a fixed-order merge in two levels "
                                   "(groups of %d tiles, then the groups; deterministic), then a second read of x%s "
                                   "from L2 while the next window's sums run",
                              sums, dy, CNS_GROUP, dy);
        return;
    }
    frost__buf_printf(out, "; %s tiles of %lld rows x %lld channels (%zu B shared memory, %s units), %lld segments x "
                           "%lld tiles in %lld wave%s of %lld per SM, grid %u x %d",
                      pl->nhwc ? "NHWC" : "NCHW", (long long)geo->rows, (long long)geo->cw, geo->smem,
                      pl->vec_layout ? "16-byte" : "1-element", (long long)geo->num_segments, (long long)geo->k_tiles,
                      (long long)geo->waves, geo->waves == 1 ? "" : "s", (long long)geo->blocks, pl->grid_main,
                      CNORM_THREADS);
    if (pl->params.flags & CNORM_F_RUNNING)
        frost__buf_printf(out, "; one pass normalizing with the running statistics");
    else if (geo->resident)
        frost__buf_printf(out, "; x%s read from HBM once, %s", pl->backward ? " and dY" : "",
                          geo->k_tiles > 1 ? "statistics exchanged between a segment's tiles through the workspace "
                                             "(fixed-order merge: deterministic)"
                                           : "each tile holds whole sets");
    else
        frost__buf_printf(out, "; a segment exceeds one wave: statistics, finalize (%s), then a second read of x",
                          pl->keys[ENTRY_FINALIZE].entry);
    if (pl->use[ENTRY_DPARAMS])
        frost__buf_printf(out, "; d_scale / d_bias summed per channel by %s in fixed order",
                          pl->keys[ENTRY_DPARAMS].entry);
}

const frost__op_impl frost__cnorm_fwd_cuda = {
    .select = cnorm_select,
    .build = cnorm_build,
    .workspace = cnorm_workspace,
    .execute = cnorm_execute,
    .describe_plan = cnorm_describe,
    .coverage = "GroupNorm, InstanceNorm and BatchNorm forward on sm_80+: f32/f16/bf16, NCHW or NHWC (any n "
                "stride), scale/bias f32 or the I/O dtype, zero-centred scale, training statistics, BatchNorm running "
                "statistics; x read from HBM once when a segment fits one wave of tiles in shared memory",
};

const frost__op_impl frost__cnorm_bwd_cuda = {
    .select = cnorm_select,
    .build = cnorm_build,
    .workspace = cnorm_workspace,
    .execute = cnorm_execute,
    .describe_plan = cnorm_describe,
    .coverage = "GroupNorm, InstanceNorm and BatchNorm backward on sm_80+: dx, d_scale, d_bias (always "
                "deterministic), saved or recomputed statistics; same dtypes and layouts as the forward",
};

/* ------------------------------------------------------------------------------------ */
/* Keys for frost-precompile                                                             */
/* ------------------------------------------------------------------------------------ */
int frost__cnorm_cuda_keys(frost__kernel_key *keys, int cap)
{
    static const frost_dtype dtypes[] = {FROST_F32, FROST_F16, FROST_BF16};
    int count = 0;
    for (int backward = 0; backward < 2; backward++)
        for (int entry = 0; entry < NUM_ENTRIES; entry++)
            for (size_t d = 0; d < FROST__ARRAY_SIZE(dtypes); d++)
                for (int kind = 0; kind < 3; kind++)
                    for (int nhwc = 0; nhwc < 2; nhwc++) {
                        if (!entry_names[backward][entry])
                            continue;
                        if (count < cap)
                            fill_key(&keys[count], backward, entry, dtypes[d], kind, nhwc, 1, 0, 0);
                        count++;
                    }
    /* the cluster path: GroupNorm / InstanceNorm in both layouts and BatchNorm NCHW, 1 to
     * CNC_MAX_CLUSTER blocks per cluster */
    for (int backward = 0; backward < 2; backward++)
        for (size_t d = 0; d < FROST__ARRAY_SIZE(dtypes); d++)
            for (int kind = 0; kind < 3; kind++)
                for (int nhwc = 0; nhwc < 2; nhwc++)
                    for (int64_t cluster = 1; cluster <= CNC_MAX_CLUSTER; cluster *= 2) {
                        if (kind == FROST__CNORM_BATCH && nhwc)
                            continue;
                        if (count < cap)
                            fill_key(&keys[count], backward, ENTRY_MAIN, dtypes[d], kind, nhwc, 1, cluster, 0);
                        count++;
                    }
    /* the plane path: GroupNorm (one channel a group) and InstanceNorm, NCHW, CNP_UNITS or
     * CNP_UNITS_WIDE a thread */
    for (int backward = 0; backward < 2; backward++)
        for (size_t d = 0; d < FROST__ARRAY_SIZE(dtypes); d++)
            for (int kind = 0; kind < 2; kind++)
                for (int wide = 0; wide < 2; wide++) {
                    if (count < cap)
                        fill_key(&keys[count], backward, ENTRY_MAIN, dtypes[d], kind, 0,
                                 wide ? CNP_UNITS_WIDE : CNP_UNITS, PATH_PLANE, 0);
                    count++;
                }
    /* its NCHW tiles that hold part of their rows, always CNC_MAX_CLUSTER a segment */
    for (int backward = 0; backward < 2; backward++)
        for (size_t d = 0; d < FROST__ARRAY_SIZE(dtypes); d++)
            for (int kind = 0; kind < 3; kind++) {
                if (count < cap)
                    fill_key(&keys[count], backward, ENTRY_MAIN, dtypes[d], kind, 0, 1, CNC_MAX_CLUSTER, 1);
                count++;
            }
    /* the stream path: BatchNorm, NHWC; the combined kernel and the split entry points at the
     * default blocks per SM */
    for (int backward = 0; backward < 2; backward++)
        for (size_t d = 0; d < FROST__ARRAY_SIZE(dtypes); d++)
            for (int e = 0; e < 3; e++) { /* combined, split statistics, split output */
                if (count < cap)
                    fill_key(&keys[count], backward, e == 2 ? ENTRY_APPLY : ENTRY_MAIN, dtypes[d],
                             FROST__CNORM_BATCH, 1, CNS_MIN_BLOCKS, e == 0 ? -1 : -2, 0);
                count++;
            }
    return count;
}
