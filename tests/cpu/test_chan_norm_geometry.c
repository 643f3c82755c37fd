/*
 * test_chan_norm_geometry.c — how the cuda channel-norm engine cuts GroupNorm /
 * InstanceNorm / BatchNorm problems into tiles (frost__cnorm_choose_geometry,
 * chan_norm_geometry.c), checked on the host: no GPU needed.
 *
 * The device is an H200 as the tiling sees it (132 SMs, 228 KB of shared memory per SM,
 * 227 KB per block).  Each case names the window, tiles per segment and residency the
 * tiling must choose: for the NHWC bf16 targets, the choices the 2026-12-02 sweeps
 * measured fastest (docs/PERF.md: 64-channel windows for GroupNorm, the three-kernel
 * fallback for BatchNorm), and for every case the invariants the kernels rely on: a
 * resident segment fits one wave of resident blocks, the window is whole units of the
 * vector and whole sets, rows are multiples of CNORM_ROW_ALIGN and the tile fits a block's
 * shared memory.  The developer overrides (FROST_CNORM_WINDOW, FROST_CNORM_BLOCKS,
 * FROST_CNORM_TILE_KB) are checked to reach the choice, and an unusable window to be
 * ignored.
 *
 * Then the cluster path's tiling (frost__cnorm_choose_cluster): the choices measured
 * fastest for the GroupNorm targets (64 KB of tiles per block, 64-channel windows where
 * they allow it), NCHW's choice (the fewest tiles a segment, each the widest window of
 * whole sets within 64 KB, rows in whole 16-byte units), the
 * problems it must leave to the tiling above (BatchNorm, no 16-byte units, no
 * clusters on the device, too few tiles to fill the SMs, a segment past 8 tiles), the
 * FROST_CNORM_CLUSTER override, and the invariants chan_norm_cluster.cu relies on: no
 * empty tile, whole sets and units, at most CNC_THREADS units per row, the shared memory
 * of the kernel's layout within a block's.  Last, BatchNorm's stream path
 * (frost__cnorm_choose_stream, opt-in with FROST_CNORM_STREAM=1): the windows for the
 * targets, narrower ones when the batch is large, none when no window fits a third of L2,
 * the problems it leaves alone, and off by default.  And the plane path
 * (frost__cnorm_choose_plane): a block per NCHW plane for InstanceNorm and one-channel
 * groups, its threads and units a thread, the problems it leaves to the cluster path (other
 * groups, BatchNorm, NHWC, no 16-byte units, planes under 64 or past 2048 units, under a
 * wave of planes, a forced cluster) and its switches.
 *
 * Last, 20000 random shapes (every kind and layout, forward and backward, f32 and 16-bit,
 * N up to 512, C up to 2048 with GroupNorm's groups dividing it, up to 65536 pixels) on
 * random devices (an H200 with and without clusters, an A100, a 20-SM part with 100 KB of
 * shared memory and 4 MB of L2) through all four choosers: whatever each picks must keep
 * the invariants its kernels rely on (whole sets and units, tiles that cut the segment
 * without an empty one, shared memory within a block's, a resident segment within the
 * resident blocks), and each path must be taken by at least 1 % of the shapes.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/norm/chan_norm_cuda.h"
#include "test_util.h"

enum { GN = FROST__CNORM_GROUP, IN = FROST__CNORM_INSTANCE, BN = FROST__CNORM_BATCH };

typedef struct geo_case {
    const char *name;
    int kind, nhwc, tensors; /* tensors: 1 forward, 2 backward */
    int64_t n, c, hw, groups, esize;
    const char *env; /* "NAME=value" for this case, or NULL */
    int64_t cw, k;   /* expected window and tiles per segment (0: not checked) */
    int resident;    /* expected residency (-1: not checked) */
    int64_t blocks;  /* expected blocks per SM */
} geo_case;

static const geo_case cases[] = {
    /* name, kind, nhwc, tensors, n, c, hw, groups, esize, env, cw, k, resident, blocks */
    {"gn fwd 32x512x64x64: 64-channel windows, 4 tiles", GN, 1, 1, 32, 512, 4096, 32, 2, NULL, 64, 4, 1, 1},
    {"gn bwd 32x512x64x64: 64-channel windows, 8 tiles", GN, 1, 2, 32, 512, 4096, 32, 2, NULL, 64, 8, 1, 1},
    {"gn fwd 128x256x32x32: whole groups per tile", GN, 1, 1, 128, 256, 1024, 32, 2, NULL, 64, 1, 1, 1},
    {"gn bwd 128x256x32x32: 64-channel windows, 2 tiles", GN, 1, 2, 128, 256, 1024, 32, 2, NULL, 64, 2, 1, 1},
    {"bn fwd 32x512x64x64: the fallback", BN, 1, 1, 32, 512, 4096, 0, 2, NULL, 64, 0, 0, 1},
    {"bn bwd 32x512x64x64: the fallback", BN, 1, 2, 32, 512, 4096, 0, 2, NULL, 64, 0, 0, 1},
    {"bn fwd 128x256x32x32: the fallback", BN, 1, 1, 128, 256, 1024, 0, 2, NULL, 64, 0, 0, 1},
    {"bn bwd 128x256x32x32: the fallback", BN, 1, 2, 128, 256, 1024, 0, 2, NULL, 64, 0, 0, 1},
    {"in fwd nhwc f32", IN, 1, 1, 8, 96, 900, 0, 4, NULL, 0, 0, -1, 1},
    {"gn fwd nchw f16 one group", GN, 0, 1, 2, 64, 1600, 1, 2, NULL, 0, 0, -1, 1},
    {"bn bwd nchw odd", BN, 0, 2, 7, 5, 33, 0, 4, NULL, 0, 0, -1, 1},
    {"gn fwd odd channels", GN, 1, 1, 2, 22, 81, 11, 2, NULL, 0, 0, -1, 1},
    {"window override reaches the choice", GN, 1, 1, 32, 512, 4096, 32, 2, "FROST_CNORM_WINDOW=128", 128, 8, 1, 1},
    {"an unusable window is ignored", GN, 1, 1, 32, 512, 4096, 32, 2, "FROST_CNORM_WINDOW=7", 64, 4, 1, 1},
    {"two blocks per SM", GN, 1, 1, 32, 512, 4096, 32, 2, "FROST_CNORM_BLOCKS=2", 0, 0, 1, 2},
    {"16 KB tiles push BatchNorm past a wave", BN, 1, 1, 32, 8, 18432, 0, 2, "FROST_CNORM_TILE_KB=16", 0, 0, 0, 1},
};
#define NUM_CASES ((int)(sizeof cases / sizeof cases[0]))

/* The shape the engine builds for a problem (chan_norm_cuda.c's rules for the 16-byte path
 * and the window unit). */
static cnorm_shape make_shape(int kind, int nhwc, int tensors, int64_t n, int64_t c, int64_t hw, int64_t groups,
                              int64_t esize)
{
    cnorm_shape s = {.kind = kind, .nhwc = nhwc, .tensors = tensors, .n = n, .c = c, .hw = hw, .esize = esize};
    s.cg = kind == GN ? c / groups : 1;
    const int64_t vec = 16 / esize;
    s.vec_layout = nhwc ? c % vec == 0 : hw % vec == 0; /* packed tensors */
    s.cw_unit = frost__cnorm_window_unit(nhwc, s.vec_layout, s.cg, vec);
    return s;
}

/* env ("NAME=value" or NULL) set for the length of one choice. */
static void env_push(const char *env, char name[64])
{
    const char *eq = env ? strchr(env, '=') : NULL;
    name[0] = 0;
    if (eq && eq - env < 64) {
        memcpy(name, env, (size_t)(eq - env));
        name[eq - env] = 0;
        setenv(name, eq + 1, 1);
    }
}

static void env_pop(const char name[64])
{
    if (name[0])
        unsetenv(name);
}

/* The device as the tilings see an H200 (132 SMs, 228 KB of shared memory per SM, 227 KB
 * per block, 60 MB of L2), with max_cluster blocks per cluster (0: no clusters). */
static cnorm_device h200(int64_t max_cluster)
{
    const cnorm_device dev = {.sms = 132,
                              .smem_per_sm = 233472,
                              .optin = 232448,
                              .reserved = 1024,
                              .max_cluster = max_cluster,
                              .l2_bytes = 60ll << 20};
    return dev;
}

/* choose(s) with the override env ("NAME=value" or NULL) set for the call. */
typedef int (*choose_fn)(const cnorm_shape *, const cnorm_device *, cnorm_geometry *);
static int choose_with(const char *env, choose_fn choose, const cnorm_shape *s, const cnorm_device *dev,
                       cnorm_geometry *geo)
{
    char name[64];
    env_push(env, name);
    const int ok = choose(s, dev, geo);
    env_pop(name);
    return ok;
}

/* ---- invariants the kernels rely on, for the fixed and the random shapes ---------------- */

/* The tiled path: whole sets and units, tiles that cut the segment, a resident segment
 * within the resident blocks, shared memory within a block's. */
static void check_tiled(const cnorm_shape *s, const cnorm_device *dev, const cnorm_geometry *geo)
{
    const int64_t seg_rows = s->kind == BN ? s->n * s->hw : s->hw;
    if (geo->cw <= 0 || s->c % geo->cw != 0 || geo->cw % s->cw_unit != 0 || geo->sets != geo->cw / s->cg)
        tu_failf("window %lld is not whole sets and units of C %lld", (long long)geo->cw, (long long)s->c);
    if (geo->rows <= 0 || geo->rows % CNORM_ROW_ALIGN != 0 || geo->k_tiles != (seg_rows + geo->rows - 1) / geo->rows)
        tu_failf("%lld rows x %lld tiles do not cut a %lld-row segment", (long long)geo->rows, (long long)geo->k_tiles,
                 (long long)seg_rows);
    if (geo->resident && geo->k_tiles > dev->sms * geo->blocks)
        tu_failf("a resident segment of %lld tiles exceeds the %lld resident blocks", (long long)geo->k_tiles,
                 (long long)(dev->sms * geo->blocks));
    const size_t per_block = dev->smem_per_sm / (size_t)geo->blocks - dev->reserved;
    if (geo->smem > (dev->optin < per_block ? dev->optin : per_block) ||
        geo->smem != frost__cnorm_smem_bytes(s, geo->rows, geo->cw))
        tu_failf("%zu bytes of shared memory do not fit a block", geo->smem);
    if (geo->num_tiles != geo->num_segments * geo->k_tiles)
        tu_failf("%lld tiles for %lld segments of %lld", (long long)geo->num_tiles, (long long)geo->num_segments,
                 (long long)geo->k_tiles);
}

/* The cluster path's tiles cut the segment without an empty one (BatchNorm's in whole
 * samples). */
static void check_cluster_cut(const cnorm_shape *s, const cnorm_geometry *geo)
{
    const int batch = s->kind == BN;
    const int64_t seg_rows = batch ? s->n * s->hw : s->hw;
    if (geo->rows * geo->k_tiles < seg_rows || (geo->k_tiles - 1) * geo->rows >= seg_rows ||
        geo->seg_rows != seg_rows || (batch && geo->rows % s->hw != 0))
        tu_failf("%lld rows x %lld tiles do not cut %lld rows without an empty tile", (long long)geo->rows,
                 (long long)geo->k_tiles, (long long)seg_rows);
}

/* The plane path: whole warps, at most CNP_MAX_THREADS, as few as cover the plane. */
static void check_plane_threads(const cnorm_shape *s, const cnorm_geometry *geo)
{
    const int64_t units = s->hw * s->esize / 16;
    if (geo->plane % 32 != 0 || geo->plane > CNP_MAX_THREADS || geo->plane * geo->plane_units < units ||
        (geo->plane - 32) * geo->plane_units >= units)
        tu_failf("%lld threads of %lld units for a plane of %lld units", (long long)geo->plane,
                 (long long)geo->plane_units, (long long)units);
}

static void run_case(int index, const geo_case *c)
{
    tu_set_context("test_chan_norm_geometry", 0, index, c->name);
    const cnorm_device dev = h200(0);
    const cnorm_shape s = make_shape(c->kind, c->nhwc, c->tensors, c->n, c->c, c->hw, c->groups, c->esize);
    char name[64];
    env_push(c->env, name);
    cnorm_geometry geo;
    const int ok = frost__cnorm_choose_geometry(&s, &dev, 1, &geo);
    env_pop(name);
    if (!ok) {
        tu_failf("no tiling found");
        return;
    }
    if (c->cw && geo.cw != c->cw)
        tu_failf("window %lld channels, expected %lld", (long long)geo.cw, (long long)c->cw);
    if (c->k && geo.k_tiles != c->k)
        tu_failf("%lld tiles per segment, expected %lld", (long long)geo.k_tiles, (long long)c->k);
    if (c->resident >= 0 && geo.resident != c->resident)
        tu_failf("resident %d, expected %d", geo.resident, c->resident);
    if (geo.blocks != c->blocks)
        tu_failf("%lld blocks per SM, expected %lld", (long long)geo.blocks, (long long)c->blocks);
    check_tiled(&s, &dev, &geo); /* invariants the kernels and the exchange rely on */
}

/* ---- the cluster path ---------------------------------------------------------------- */
typedef struct cluster_case {
    const char *name;
    int kind, nhwc, tensors;
    int64_t n, c, hw, groups, esize;
    const char *env;
    int64_t cw, k; /* expected window and tiles per segment; k = 0: the path is not taken */
} cluster_case;

static const cluster_case cluster_cases[] = {
    /* name, kind, nhwc, tensors, n, c, hw, groups, esize, env, cw, k */
    {"gn fwd 32x512x64x64: 64 channels, 8 tiles", GN, 1, 1, 32, 512, 4096, 32, 2, NULL, 64, 8},
    {"gn bwd 32x512x64x64: 32 channels, 8 tiles", GN, 1, 2, 32, 512, 4096, 32, 2, NULL, 32, 8},
    {"gn fwd 128x256x32x32: 64 channels, 2 tiles", GN, 1, 1, 128, 256, 1024, 32, 2, NULL, 64, 2},
    {"gn bwd 128x256x32x32: 64 channels, 4 tiles", GN, 1, 2, 128, 256, 1024, 32, 2, NULL, 64, 4},
    {"in fwd f32 128x96x30x30: 32 channels (128-byte runs)", IN, 1, 1, 128, 96, 900, 0, 4, NULL, 32, 2},
    {"in fwd f32 8x96x30x30: too few tiles for the SMs", IN, 1, 1, 8, 96, 900, 0, 4, NULL, 0, 0},
    {"bn nhwc: not this path", BN, 1, 1, 32, 512, 4096, 0, 2, NULL, 0, 0},
    {"bn fwd nchw 32x512x64x64: one channel, 4 tiles of 8 samples", BN, 0, 1, 32, 512, 4096, 0, 2, NULL, 1, 4},
    {"bn bwd nchw 32x512x64x64: one channel, 8 tiles of 4 samples", BN, 0, 2, 32, 512, 4096, 0, 2, NULL, 1, 8},
    {"bn fwd nchw 128x256x32x32: one channel, 4 tiles", BN, 0, 1, 128, 256, 1024, 0, 2, NULL, 1, 4},
    {"bn bwd nchw 128x256x32x32: one channel, 8 tiles", BN, 0, 2, 128, 256, 1024, 0, 2, NULL, 1, 8},
    {"bn nchw f32 4x64x8x8: too few tiles", BN, 0, 1, 4, 64, 64, 0, 4, NULL, 0, 0},
    {"bn fwd nchw 256x64x56x56: 8 tiles of 200 KB (past 8 of 64 KB)", BN, 0, 1, 256, 64, 3136, 0, 2, NULL, 1, 8},
    {"bn bwd nchw 256x64x56x56: past a block by more than a quarter", BN, 0, 2, 256, 64, 3136, 0, 2, NULL, 0, 0},
    {"bn bwd nchw 40x20x112x112: 8 tiles past a block, the rest read twice", BN, 0, 2, 40, 20, 12544, 0, 2, NULL, 1, 8},
    {"bn fwd nchw 256x64x112x112: what 8 tiles leave over is past half of L2", BN, 0, 1, 256, 64, 12544, 0, 2, NULL, 0,
     0},
    {"bn bwd nchw 64x256x56x56: 8 tiles of 100 KB", BN, 0, 2, 64, 256, 3136, 0, 2, NULL, 1, 8},
    {"bn fwd nchw 32x64x112x112: 8 tiles of 100 KB", BN, 0, 1, 32, 64, 12544, 0, 2, NULL, 1, 8},
    {"bn bwd nchw 32x64x112x112: 8 tiles of 200 KB", BN, 0, 2, 32, 64, 12544, 0, 2, NULL, 1, 8},
    {"gn fwd nchw 4x128x256x256: one group, 8 tiles of 64 KB", GN, 0, 1, 4, 128, 65536, 32, 2, NULL, 4, 8},
    {"gn bwd nchw 4x128x256x256: one group, 8 tiles of 128 KB", GN, 0, 2, 4, 128, 65536, 32, 2, NULL, 4, 8},
    {"gn bwd nchw 2x256x256x256: 8 tiles past a block, the rest read twice", GN, 0, 2, 2, 256, 65536, 32, 2, NULL, 8,
     8},
    {"gn fwd nchw 32x512x64x64: one group, 2 tiles", GN, 0, 1, 32, 512, 4096, 32, 2, NULL, 16, 2},
    {"gn bwd nchw 32x512x64x64: one group, 4 tiles", GN, 0, 2, 32, 512, 4096, 32, 2, NULL, 16, 4},
    {"gn fwd nchw 128x256x32x32: four groups, 1 tile", GN, 0, 1, 128, 256, 1024, 32, 2, NULL, 32, 1},
    {"gn bwd nchw 128x256x32x32: two groups, 1 tile", GN, 0, 2, 128, 256, 1024, 32, 2, NULL, 16, 1},
    {"in fwd nchw 32x512x64x64: 8 channels, 1 tile", IN, 0, 1, 32, 512, 4096, 0, 2, NULL, 8, 1},
    {"gn fwd nchw f32 hw 3600: one group, 2 tiles", GN, 0, 1, 64, 64, 3600, 8, 4, NULL, 8, 2},
    {"gn fwd nchw f32 hw 900: two groups, 1 tile", GN, 0, 1, 64, 64, 900, 8, 4, NULL, 16, 1},
    {"nchw hw not whole units: not this path", GN, 0, 1, 32, 512, 4095, 32, 2, NULL, 0, 0},
    {"odd C (no 16-byte units), forced", GN, 1, 1, 64, 22, 81, 11, 2, "FROST_CNORM_CLUSTER=2", 0, 0},
    {"a segment past 8 tiles", GN, 1, 1, 256, 64, 65536, 8, 2, NULL, 0, 0},
    {"gn bwd nhwc 8x512x128x128: 16 channels, 8 tiles of 128 KB", GN, 1, 2, 8, 512, 16384, 32, 2, NULL, 16, 8},
    {"gn fwd nhwc 8x512x128x128: 16 channels, 8 tiles of 64 KB", GN, 1, 1, 8, 512, 16384, 32, 2, NULL, 16, 8},
    {"gn fwd nhwc 4x128x256x256: runs under 32 bytes past 64 KB", GN, 1, 1, 4, 128, 65536, 32, 2, NULL, 0, 0},
    {"FROST_CNORM_CLUSTER=0 turns it off", GN, 1, 1, 128, 256, 1024, 32, 2, "FROST_CNORM_CLUSTER=0", 0, 0},
    {"FROST_CNORM_RAMP=0: the path without the ramp", GN, 1, 1, 32, 512, 4096, 32, 2, "FROST_CNORM_RAMP=0", 64, 8},
    {"FROST_CNORM_CLUSTER=4 forces 4 tiles", GN, 1, 1, 128, 256, 1024, 32, 2, "FROST_CNORM_CLUSTER=4", 64, 4},
    {"forced on a small problem", GN, 1, 2, 2, 64, 144, 8, 2, "FROST_CNORM_CLUSTER=8", 64, 8},
    {"forced 3 is not a power of two", GN, 1, 1, 128, 256, 1024, 32, 2, "FROST_CNORM_CLUSTER=3", 64, 2},
    {"forced past the rows leaves empty tiles", GN, 1, 1, 2, 64, 3, 8, 2, "FROST_CNORM_CLUSTER=4", 0, 0},
};
#define NUM_CLUSTER_CASES ((int)(sizeof cluster_cases / sizeof cluster_cases[0]))

static void run_cluster_case(int index, const cluster_case *c, int clusters)
{
    tu_set_context("test_chan_norm_geometry", 0, index, c->name);
    const cnorm_device dev = h200(clusters);
    const cnorm_shape s = make_shape(c->kind, c->nhwc, c->tensors, c->n, c->c, c->hw, c->groups, c->esize);
    const int64_t vec = 16 / c->esize;
    cnorm_geometry geo;
    const int ok = choose_with(c->env, frost__cnorm_choose_cluster, &s, &dev, &geo);
    const int64_t want_k = clusters ? c->k : 0;
    if (ok != (want_k > 0)) {
        tu_failf("cluster path %s, expected %s", ok ? "taken" : "not taken", want_k ? "taken" : "not taken");
        return;
    }
    if (!ok)
        return;
    if (geo.cw != c->cw || geo.k_tiles != want_k || geo.cluster != want_k)
        tu_failf("window %lld, %lld tiles per segment (cluster %lld), expected %lld, %lld", (long long)geo.cw,
                 (long long)geo.k_tiles, (long long)geo.cluster, (long long)c->cw, (long long)want_k);
    if (c->c % geo.cw != 0 || geo.cw % s.cw_unit != 0 || geo.sets != geo.cw / s.cg || geo.cw / vec > CNC_THREADS)
        tu_failf("window %lld is not whole sets and units of C %lld", (long long)geo.cw, (long long)c->c);
    const int batch = c->kind == BN; /* a BatchNorm segment is a window over every sample, cut in whole samples */
    check_cluster_cut(&s, &geo);
    const int64_t units = c->nhwc ? geo.cw / vec : 32; /* NCHW reserves the smallest reduction scratch */
    /* a tile past a block's shared memory (NCHW) holds whole units, as many as fit, and leaves
     * over at most half of L2 across the SMs */
    const int64_t held = geo.held ? geo.held : geo.rows, row_bytes = geo.cw * c->esize * c->tensors;
    if (geo.held && (c->nhwc || held % vec != 0 || held >= geo.rows || geo.blocks != 1 ||
                     (size_t)CNC_SMEM_BYTES(held + vec, geo.cw, geo.sets, c->esize, c->tensors, units) <= dev.optin ||
                     (geo.rows - held) * 4 > geo.rows || dev.sms * (geo.rows - held) * row_bytes > dev.l2_bytes / 2))
        tu_failf("%lld of %lld rows held in shared memory", (long long)geo.held, (long long)geo.rows);
    const size_t smem = (size_t)CNC_SMEM_BYTES(held, geo.cw, geo.sets, c->esize, c->tensors, units);
    if (!c->nhwc && geo.rows % vec != 0)
        tu_failf("NCHW tiles of %lld rows are not whole 16-byte units", (long long)geo.rows);
    if (geo.smem != smem || smem > dev.optin || !geo.resident)
        tu_failf("%zu bytes of shared memory (the layout needs %zu, a block has %zu)", geo.smem, smem, dev.optin);
    /* past 64 KB only when the narrowest window needs it in max_cluster tiles (NHWC: with runs of
     * 32 bytes or more) */
    const int64_t least = c->nhwc ? (c->hw + 7) / 8 * s.cw_unit
                                  : (batch ? (c->n + 7) / 8 * c->hw : ((c->hw + 7) / 8 + vec - 1) / vec * vec) * s.cg;
    if (!c->env && geo.rows * geo.cw * c->esize * c->tensors > 64 * 1024 &&
        (least * c->esize * c->tensors <= 64 * 1024 || (c->nhwc && geo.cw * c->esize < 32)))
        tu_failf("tiles of %lld bytes per block", (long long)(geo.rows * geo.cw * c->esize * c->tensors));
    if (geo.num_tiles != geo.num_segments * geo.k_tiles || geo.num_segments != (batch ? 1 : c->n) * (c->c / geo.cw) ||
        (!c->env && geo.num_tiles < dev.sms))
        tu_failf("%lld tiles for %lld segments of %lld", (long long)geo.num_tiles, (long long)geo.num_segments,
                 (long long)geo.k_tiles);
    if (geo.first_wave != dev.sms * geo.blocks) /* the start ramp's first wave (chan_norm_cluster.cu, cc_ramp) */
        tu_failf("first wave of %lld blocks, expected %lld SMs x %lld blocks", (long long)geo.first_wave,
                 (long long)dev.sms, (long long)geo.blocks);
    /* the ramp: from two waves of tiles up, unless FROST_CNORM_RAMP=0 */
    const int ramp_off = c->env && !strcmp(c->env, "FROST_CNORM_RAMP=0");
    const int want_ramp = geo.num_tiles >= 2 * geo.first_wave && !ramp_off;
    if ((geo.ramp_cycles > 0 && geo.ramp_classes > 1) != want_ramp)
        tu_failf("start ramp of %lld cycles in %lld classes with %lld tiles and a first wave of %lld",
                 (long long)geo.ramp_cycles, (long long)geo.ramp_classes, (long long)geo.num_tiles,
                 (long long)geo.first_wave);
}

/* ---- the stream path (BatchNorm training forward) ------------------------------------- */
static const cluster_case stream_cases[] = {
    /* name, kind, nhwc, tensors, n, c, hw, groups, esize, env, cw, k (0: not taken) */
    {"bn fwd 32x512x64x64: 64 channels over 264 blocks", BN, 1, 1, 32, 512, 4096, 0, 2, "FROST_CNORM_STREAM=1", 64,
     264},
    {"bn fwd 128x256x32x32: 64 channels over 264 blocks", BN, 1, 1, 128, 256, 1024, 0, 2, "FROST_CNORM_STREAM=1", 64,
     264},
    {"bn fwd f32 C 16: the whole C (64-byte runs)", BN, 1, 1, 4, 16, 64, 0, 4, "FROST_CNORM_STREAM=1", 16, 32},
    {"bn fwd 512K rows: 32-byte windows fit a third of L2", BN, 1, 1, 128, 64, 4096, 0, 2, "FROST_CNORM_STREAM=1", 16,
     264},
    {"bn fwd 4M rows: no window fits", BN, 1, 1, 1024, 64, 4096, 0, 2, "FROST_CNORM_STREAM=1", 0, 0},
    {"bn bwd 32x512x64x64: 32 channels (x and dy in a third of L2)", BN, 1, 2, 32, 512, 4096, 0, 2,
     "FROST_CNORM_STREAM=1", 32, 264},
    {"bn nchw: not this path", BN, 0, 1, 32, 512, 4096, 0, 2, "FROST_CNORM_STREAM=1", 0, 0},
    {"gn: not this path", GN, 1, 1, 32, 512, 4096, 32, 2, "FROST_CNORM_STREAM=1", 0, 0},
    {"the two-launch form by default", BN, 1, 1, 32, 512, 4096, 0, 2, NULL, 512, 264},
    {"FROST_CNORM_STREAM=0 turns it off", BN, 1, 1, 32, 512, 4096, 0, 2, "FROST_CNORM_STREAM=0", 0, 0},
    {"two-launch bn fwd 32x512x64x64: the whole C, a share of rows kept", BN, 1, 1, 32, 512, 4096, 0, 2,
     "FROST_CNORM_STREAM=2", 512, 264},
    {"two-launch bn bwd 32x512x64x64: the whole C", BN, 1, 2, 32, 512, 4096, 0, 2, "FROST_CNORM_STREAM=2", 512, 264},
    {"two-launch bn fwd f32 C 4096: 1024 channels (256 units)", BN, 1, 1, 8, 4096, 64, 0, 4, "FROST_CNORM_STREAM=2",
     1024, 64},
    {"two-launch bn fwd small: every row kept", BN, 1, 1, 4, 64, 256, 0, 2, "FROST_CNORM_STREAM=2", 64, 128},
    {"two-launch bn fwd 4M rows: still taken", BN, 1, 1, 1024, 64, 4096, 0, 2, "FROST_CNORM_STREAM=2", 64, 264},
    {"FROST_CNORM_STREAM=3 is not a form: the default", BN, 1, 1, 32, 512, 4096, 0, 2, "FROST_CNORM_STREAM=3", 512,
     264},
    {"FROST_CNORM_STREAM_EARLY=100: every row after the kept ones asked early", BN, 1, 1, 32, 512, 4096, 0, 2,
     "FROST_CNORM_STREAM_EARLY=100", 512, 264},
    {"FROST_CNORM_WINDOW=32 sets the two-launch form's window", BN, 1, 1, 32, 512, 4096, 0, 2, "FROST_CNORM_WINDOW=32",
     32, 264},
    {"FROST_CNORM_STREAM_BLOCKS=3: three blocks per SM", BN, 1, 1, 32, 512, 4096, 0, 2, "FROST_CNORM_STREAM_BLOCKS=3",
     512, 396},
    {"FROST_CNORM_STREAM_BLOCKS=4 is out of range: two", BN, 1, 1, 32, 512, 4096, 0, 2, "FROST_CNORM_STREAM_BLOCKS=4",
     512, 264},
};
#define NUM_STREAM_CASES ((int)(sizeof stream_cases / sizeof stream_cases[0]))

static void run_stream_case(int index, const cluster_case *c)
{
    tu_set_context("test_chan_norm_geometry", 0, index, c->name);
    const cnorm_device dev = h200(CNC_MAX_CLUSTER);
    const cnorm_shape s = make_shape(c->kind, c->nhwc, c->tensors, c->n, c->c, c->hw, c->groups, c->esize);
    const int64_t vec = 16 / c->esize;
    cnorm_geometry geo;
    const int ok = choose_with(c->env, frost__cnorm_choose_stream, &s, &dev, &geo);
    if (ok != (c->k > 0)) {
        tu_failf("stream path %s, expected %s", ok ? "taken" : "not taken", c->k ? "taken" : "not taken");
        return;
    }
    if (!ok)
        return;
    const int64_t rows_all = c->n * c->hw;
    if (geo.cw != c->cw || geo.k_tiles != c->k || !geo.stream || !geo.resident || geo.cluster)
        tu_failf("window %lld, %lld tiles per window, expected %lld, %lld", (long long)geo.cw, (long long)geo.k_tiles,
                 (long long)c->cw, (long long)c->k);
    if (c->c % geo.cw != 0 || geo.cw % s.cw_unit != 0 || geo.sets != geo.cw || geo.windows != c->c / geo.cw)
        tu_failf("window %lld is not whole units of C %lld", (long long)geo.cw, (long long)c->c);
    const int64_t blocks = c->env && strcmp(c->env, "FROST_CNORM_STREAM_BLOCKS=3") == 0 ? 3 : CNS_MIN_BLOCKS;
    if (geo.blocks != blocks)
        tu_failf("%lld blocks per SM, expected %lld", (long long)geo.blocks, (long long)blocks);
    if (geo.rows * geo.k_tiles < rows_all || (geo.k_tiles - 1) * geo.rows >= rows_all || geo.k_tiles > dev.sms * blocks)
        tu_failf("%lld rows x %lld tiles do not cut %lld rows over the resident blocks", (long long)geo.rows,
                 (long long)geo.k_tiles, (long long)rows_all);
    const int form = c->env && strcmp(c->env, "FROST_CNORM_STREAM=1") == 0 ? 1 : 2;
    const int64_t window_bytes = rows_all * geo.cw * c->esize * c->tensors;
    if (geo.stream != form)
        tu_failf("form %d, expected %d", geo.stream, form);
    if (form == 1 && window_bytes > dev.l2_bytes / 3)
        tu_failf("a window of %lld bytes, more than a third of L2", (long long)window_bytes);
    /* the first read keeps every row for the one-launch form, and for the two-launch form the
     * first rows of each tile, as many as fit 60 % of L2 over all windows */
    const double share = dev.l2_bytes * 0.6 / (double)(window_bytes * geo.windows);
    const int64_t keep = form == 1 || share >= 1.0 ? geo.rows : (int64_t)(geo.rows * share);
    if (geo.keep_rows != keep || keep > geo.rows ||
        (form == 2 && window_bytes * geo.windows > dev.l2_bytes &&
         keep * geo.k_tiles * geo.cw * c->esize * c->tensors * geo.windows > (int64_t)(dev.l2_bytes * 0.6)))
        tu_failf("%lld of %lld rows per tile kept in L2 (expected %lld)", (long long)geo.keep_rows, (long long)geo.rows,
                 (long long)keep);
    /* the two-launch form's early prefetch: the rows after keep_rows, a share of L2 over the
     * tiles of one window (FROST_CNORM_STREAM_EARLY percent, else CNS_EARLY_L2_PCT) */
    const int64_t pct = c->env && strcmp(c->env, "FROST_CNORM_STREAM_EARLY=100") == 0 ? 100 : CNS_EARLY_L2_PCT;
    const int64_t early_fit =
        (int64_t)((double)dev.l2_bytes * (double)pct / 100.0) / (geo.k_tiles * geo.cw * c->esize * c->tensors);
    const int64_t early = form == 1 ? 0 : early_fit < geo.rows - keep ? early_fit : geo.rows - keep;
    if (geo.early_rows != early || keep + geo.early_rows > geo.rows)
        tu_failf("%lld rows asked of L2 early, expected %lld", (long long)geo.early_rows, (long long)early);
    if (geo.smem != (size_t)CNS_SMEM_BYTES(geo.cw, geo.cw / vec) || geo.num_tiles != geo.windows * geo.k_tiles)
        tu_failf("%zu bytes of shared memory, %lld tiles", geo.smem, (long long)geo.num_tiles);
}

/* ---- the plane path (NCHW InstanceNorm / GroupNorm with one channel a group) ------------ */
static const cluster_case plane_cases[] = {
    /* name, kind, nhwc, tensors, n, c, hw, groups, esize, env, threads (cw), units a thread (k; 0: not taken) */
    {"in bwd 32x512x64x64 bf16: 128 threads of 4 units", IN, 0, 2, 32, 512, 4096, 0, 2, NULL, 128, 4},
    {"in fwd 32x512x64x64 bf16", IN, 0, 1, 32, 512, 4096, 0, 2, NULL, 128, 4},
    {"in fwd 128x256x32x32 bf16: a warp a plane", IN, 0, 1, 128, 256, 1024, 0, 2, NULL, 32, 4},
    {"in bwd 16x256x128x128 bf16: 256 threads of 8 units", IN, 0, 2, 16, 256, 16384, 0, 2, NULL, 256, 8},
    {"in 8x1024x32x64 bf16: under a wave at 16 blocks an SM, one at 8", IN, 0, 2, 8, 1024, 2048, 0, 2, NULL, 64, 4},
    {"in f32 4096 pixels: 256 threads", IN, 0, 2, 32, 512, 4096, 0, 4, NULL, 256, 4},
    {"gn groups = C", GN, 0, 2, 32, 512, 4096, 512, 2, NULL, 128, 4},
    {"gn 32 groups: not this path", GN, 0, 2, 32, 512, 4096, 32, 2, NULL, 0, 0},
    {"bn: not this path", BN, 0, 2, 32, 512, 4096, 0, 2, NULL, 0, 0},
    {"nhwc: not this path", IN, 1, 2, 32, 512, 4096, 0, 2, NULL, 0, 0},
    {"odd pixels (no 16-byte units): not this path", IN, 0, 2, 32, 512, 4095, 0, 2, NULL, 0, 0},
    {"planes under 64 units: not this path", IN, 0, 2, 512, 512, 256, 0, 2, NULL, 0, 0},
    {"planes past 256 x 8 units: not this path", IN, 0, 2, 16, 256, 16392, 0, 2, NULL, 0, 0},
    {"FROST_CNORM_PLANE=1 takes them: 288 threads", IN, 0, 2, 16, 256, 16392, 0, 2, "FROST_CNORM_PLANE=1", 288, 8},
    {"under a wave of planes: the cluster path's", IN, 0, 2, 1, 512, 4096, 0, 2, NULL, 0, 0},
    {"FROST_CNORM_PLANE=1 takes it under a wave", IN, 0, 2, 1, 512, 4096, 0, 2, "FROST_CNORM_PLANE=1", 128, 4},
    {"FROST_CNORM_PLANE_UNITS=1: 512 threads, past the rule's", IN, 0, 2, 32, 512, 4096, 0, 2,
     "FROST_CNORM_PLANE_UNITS=1", 0, 0},
    {"FROST_CNORM_PLANE=0 turns it off", IN, 0, 2, 32, 512, 4096, 0, 2, "FROST_CNORM_PLANE=0", 0, 0},
    {"a forced cluster wins over the rule", IN, 0, 2, 32, 512, 4096, 0, 2, "FROST_CNORM_CLUSTER=2", 0, 0},
    {"FROST_CNORM_PLANE_UNITS=8: 64 threads", IN, 0, 2, 32, 512, 4096, 0, 2, "FROST_CNORM_PLANE_UNITS=8", 64, 8},
    {"FROST_CNORM_PLANE_UNITS=3 is not a power of two: 4", IN, 0, 2, 32, 512, 4096, 0, 2, "FROST_CNORM_PLANE_UNITS=3",
     128, 4},
    {"planes of 4104 pixels: masked units in the last warp", IN, 0, 2, 32, 512, 4104, 0, 2, NULL, 160, 4},
};
#define NUM_PLANE_CASES ((int)(sizeof plane_cases / sizeof plane_cases[0]))

static void run_plane_case(int index, const cluster_case *c)
{
    tu_set_context("test_chan_norm_geometry", 0, index, c->name);
    const cnorm_device dev = h200(CNC_MAX_CLUSTER);
    const cnorm_shape s = make_shape(c->kind, c->nhwc, c->tensors, c->n, c->c, c->hw, c->groups, c->esize);
    cnorm_geometry geo;
    const int ok = choose_with(c->env, frost__cnorm_choose_plane, &s, &dev, &geo);
    if (ok != (c->k > 0)) {
        tu_failf("plane path %s, expected %s", ok ? "taken" : "not taken", c->k ? "taken" : "not taken");
        return;
    }
    if (!ok)
        return;
    if (geo.plane != c->cw || geo.plane_units != c->k)
        tu_failf("%lld threads of %lld units, expected %lld of %lld", (long long)geo.plane, (long long)geo.plane_units,
                 (long long)c->cw, (long long)c->k);
    check_plane_threads(&s, &geo);
    if (!c->env && geo.plane > CNP_RULE_THREADS)
        tu_failf("%lld threads a plane, past the rule's %d", (long long)geo.plane, CNP_RULE_THREADS);
    if (geo.plane_per_block != (geo.plane == 32 ? CNP_WARP_PLANES : 1))
        tu_failf("%lld planes a block of %lld-thread planes", (long long)geo.plane_per_block, (long long)geo.plane);
    if (geo.k_tiles != 1 || geo.num_tiles != c->n * c->c || geo.num_segments != c->n * c->c || geo.sets != 1 ||
        geo.cw != 1 || geo.rows != c->hw || !geo.resident || geo.cluster || geo.stream || geo.smem)
        tu_failf("not a block a plane: %lld tiles of %lld rows, %lld a segment", (long long)geo.num_tiles,
                 (long long)geo.rows, (long long)geo.k_tiles);
}

/* ---- random shapes on several devices: the invariants of every path ---------------------- */
#define RANDOM_SHAPES 20000

/* Devices as the tilings see them: an H200 with and without clusters, an A100, and a small
 * part (20 SMs, 100 KB of shared memory per SM, 4 MB of L2). */
static cnorm_device random_device(tu_rng *r)
{
    cnorm_device d = h200(tu_int(r, 0, 1) ? CNC_MAX_CLUSTER : 0);
    const int64_t k = tu_int(r, 0, 3);
    if (k == 2)
        d = (cnorm_device){
            .sms = 108, .smem_per_sm = 167936, .optin = 166912, .reserved = 1024, .l2_bytes = 40ll << 20};
    if (k == 3)
        d = (cnorm_device){.sms = 20, .smem_per_sm = 102400, .optin = 101376, .reserved = 1024, .l2_bytes = 4ll << 20};
    return d;
}

/* log-uniform in [1, hi], sometimes a multiple of 8 */
static int64_t random_size(tu_rng *r, int64_t hi)
{
    int64_t v = (int64_t)exp(tu_uniform(r, 0.0, log((double)hi)));
    if (tu_int(r, 0, 1))
        v = (v + 7) / 8 * 8;
    return v < 1 ? 1 : v > hi ? hi : v;
}

static void run_random_shape(int index, uint64_t seed, int taken[4])
{
    char what[160];
    tu_rng r = tu_rng_make(seed + (uint64_t)index * 0x9e3779b97f4a7c15ULL);
    const int kind = (int)tu_int(&r, 0, 2), nhwc = (int)tu_int(&r, 0, 1), tensors = (int)tu_int(&r, 1, 2);
    const int64_t esize = tu_int(&r, 0, 2) ? 2 : 4, vec = 16 / esize;
    const int64_t n = random_size(&r, 512), hw = random_size(&r, 1 << 16);
    int64_t groups = 1, c = random_size(&r, 2048);
    if (kind == GN) { /* groups dividing C */
        groups = tu_int(&r, 1, c < 64 ? c : 64);
        c = c / groups * groups;
        if (c == 0)
            c = groups;
    }
    snprintf(what, sizeof what, "random %s %s %s n %lld c %lld hw %lld groups %lld esize %lld",
             kind == GN   ? "gn"
             : kind == IN ? "in"
                          : "bn",
             nhwc ? "nhwc" : "nchw", tensors == 2 ? "bwd" : "fwd", (long long)n, (long long)c, (long long)hw,
             (long long)groups, (long long)esize);
    tu_set_context("test_chan_norm_geometry", seed, index, what);
    const cnorm_device dev = random_device(&r);
    const cnorm_shape s = make_shape(kind, nhwc, tensors, n, c, hw, groups, esize);
    const int batch = kind == BN;
    cnorm_geometry geo;

    /* the three-kernel / resident tiling */
    if (frost__cnorm_choose_geometry(&s, &dev, 1, &geo)) {
        taken[0]++;
        check_tiled(&s, &dev, &geo);
    }
    /* the cluster path */
    if (frost__cnorm_choose_cluster(&s, &dev, &geo)) {
        taken[1]++;
        if (!dev.max_cluster || geo.cluster != geo.k_tiles || geo.k_tiles < 1 || geo.k_tiles > dev.max_cluster ||
            !geo.resident)
            tu_failf("%s: a cluster of %lld for %lld tiles a segment on a device of clusters up to %lld", what,
                     (long long)geo.cluster, (long long)geo.k_tiles, (long long)dev.max_cluster);
        /* NHWC: a pixel's window in at most CNC_THREADS units (NCHW tiles loop over channels) */
        if (c % geo.cw != 0 || geo.cw % s.cw_unit != 0 || geo.sets != geo.cw / s.cg ||
            (nhwc && geo.cw / vec > CNC_THREADS))
            tu_failf("%s: window %lld is not whole sets and units of C", what, (long long)geo.cw);
        check_cluster_cut(&s, &geo);
        if (!nhwc && geo.rows % vec != 0)
            tu_failf("%s: NCHW tiles of %lld rows are not whole 16-byte units", what, (long long)geo.rows);
        if (geo.smem > dev.optin || geo.num_tiles != geo.num_segments * geo.k_tiles ||
            geo.num_segments != (batch ? 1 : n) * (c / geo.cw))
            tu_failf("%s: %zu bytes of shared memory, %lld tiles for %lld segments", what, geo.smem,
                     (long long)geo.num_tiles, (long long)geo.num_segments);
        if (geo.held && (nhwc || geo.held % vec != 0 || geo.held >= geo.rows))
            tu_failf("%s: %lld of %lld rows held", what, (long long)geo.held, (long long)geo.rows);
    }
    /* the stream path (BatchNorm) */
    if (frost__cnorm_choose_stream(&s, &dev, &geo)) {
        taken[2]++;
        const int64_t rows_all = n * hw;
        if (!batch || !geo.stream || !geo.resident || geo.cluster || c % geo.cw != 0 || geo.cw % s.cw_unit != 0 ||
            geo.windows != c / geo.cw)
            tu_failf("%s: stream form %d, window %lld of C", what, geo.stream, (long long)geo.cw);
        if (geo.rows * geo.k_tiles < rows_all || (geo.k_tiles - 1) * geo.rows >= rows_all ||
            geo.k_tiles > dev.sms * geo.blocks)
            tu_failf("%s: %lld rows x %lld tiles do not cut %lld rows over the resident blocks", what,
                     (long long)geo.rows, (long long)geo.k_tiles, (long long)rows_all);
        if (geo.keep_rows < 0 || geo.early_rows < 0 || geo.keep_rows + geo.early_rows > geo.rows ||
            geo.smem > dev.optin || geo.num_tiles != geo.windows * geo.k_tiles)
            tu_failf("%s: %lld + %lld of %lld rows kept, %zu bytes of shared memory", what, (long long)geo.keep_rows,
                     (long long)geo.early_rows, (long long)geo.rows, geo.smem);
    }
    /* the plane path (NCHW, a block a plane) */
    if (frost__cnorm_choose_plane(&s, &dev, &geo)) {
        taken[3]++;
        check_plane_threads(&s, &geo);
        if (nhwc || batch)
            tu_failf("%s: the plane path for an %s %s", what, nhwc ? "NHWC" : "NCHW", batch ? "BatchNorm" : "op");
        if (geo.k_tiles != 1 || geo.num_tiles != n * c || geo.rows != hw || !geo.resident || geo.cluster)
            tu_failf("%s: not a block a plane: %lld tiles of %lld rows", what, (long long)geo.num_tiles,
                     (long long)geo.rows);
    }
}

int main(void)
{
    const int only = tu_case_filter();
    int run_count = 0;
    unsetenv("FROST_CNORM_WINDOW");
    unsetenv("FROST_CNORM_BLOCKS");
    unsetenv("FROST_CNORM_TILE_KB");
    unsetenv("FROST_CNORM_STREAM_BLOCKS");
    for (int i = 0; i < NUM_CASES; ++i) {
        if (only >= 0 && only != i)
            continue;
        tu_case_begin();
        run_case(i, &cases[i]);
        tu_case_end();
        ++run_count;
    }
    unsetenv("FROST_CNORM_CLUSTER");
    unsetenv("FROST_CNORM_STREAM");
    for (int i = 0; i < NUM_STREAM_CASES; ++i) {
        if (only >= 0 && only != NUM_CASES + NUM_CLUSTER_CASES + i)
            continue;
        tu_case_begin();
        run_stream_case(NUM_CASES + NUM_CLUSTER_CASES + i, &stream_cases[i]);
        tu_case_end();
        ++run_count;
    }
    unsetenv("FROST_CNORM_PLANE");
    unsetenv("FROST_CNORM_PLANE_UNITS");
    for (int i = 0; i < NUM_PLANE_CASES; ++i) {
        const int index = NUM_CASES + NUM_CLUSTER_CASES + NUM_STREAM_CASES + i;
        if (only >= 0 && only != index)
            continue;
        tu_case_begin();
        run_plane_case(index, &plane_cases[i]);
        tu_case_end();
        ++run_count;
    }
    for (int clusters = CNC_MAX_CLUSTER; clusters >= 0; clusters -= CNC_MAX_CLUSTER) /* sm_90, then no clusters */
        for (int i = 0; i < NUM_CLUSTER_CASES; ++i) {
            if (only >= 0 && only != NUM_CASES + i)
                continue;
            tu_case_begin();
            run_cluster_case(NUM_CASES + i, &cluster_cases[i], clusters);
            tu_case_end();
            ++run_count;
        }
    const uint64_t seed = tu_seed(0x67656f6d65747279ULL);
    const int base = NUM_CASES + NUM_CLUSTER_CASES + NUM_STREAM_CASES + NUM_PLANE_CASES;
    int taken[4] = {0};
    for (int i = 0; i < RANDOM_SHAPES; ++i) {
        if (only >= 0 && only != base + i)
            continue;
        tu_case_begin();
        run_random_shape(base + i, seed, taken);
        tu_case_end();
        ++run_count;
    }
    printf("test_chan_norm_geometry: %d random shapes; tiled %d, cluster %d, stream %d, plane %d\n", RANDOM_SHAPES,
           taken[0], taken[1], taken[2], taken[3]);
    for (int p = 0; p < 4 && only < 0; p++)
        if (taken[p] < RANDOM_SHAPES / 100)
            tu_failf("path %d taken by only %d of %d random shapes", p, taken[p], RANDOM_SHAPES);
    return tu_finish(run_count);
}
