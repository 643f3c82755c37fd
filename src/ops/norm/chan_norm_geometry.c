/*
 * chan_norm_geometry.c — how the cuda channel-norm engine (chan_norm_cuda.c) cuts a
 * GroupNorm / InstanceNorm / BatchNorm problem into tiles: the window of channels, the
 * rows of a tile and the tiles per segment (terms: chan_norm_cuda.c's top comment).
 *
 * frost__cnorm_choose_geometry() runs one block per SM (or FROST_CNORM_BLOCKS, up to
 * CNORM_MAX_BLOCKS), and for that count tries every window width that divides C in whole
 * sets and every tile count per segment up to one per resident block, and prices each by
 * waves x (bytes a wave moves per SM + the per-tile overheads, which other blocks'
 * streaming hides), with a penalty for NHWC windows narrower than a 128-byte line.  A
 * configuration whose segment fits one wave runs RESIDENT (x, and dy, cross HBM once)
 * unless the three-kernel fallback (x read twice) prices lower; a segment larger than a
 * wave always takes the fallback.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/norm/chan_norm_cuda.h"

/* Elements of one shared-tile row per tile row: NHWC pads a pixel's cw channels to 8. */
static int64_t row_elems(const cnorm_shape *s, int64_t cw)
{
    return s->nhwc ? CNORM_PITCH_NHWC(cw) : cw;
}

int64_t frost__cnorm_window_unit(int nhwc, int vec_layout, int64_t cg, int64_t vec)
{
    int64_t a = cg, b = vec;
    while (b) {
        const int64_t t = a % b;
        a = b, b = t;
    }
    return nhwc && vec_layout ? cg / a * vec : cg;
}

size_t frost__cnorm_smem_bytes(const cnorm_shape *s, int64_t rows, int64_t cw)
{
    const int64_t pitch = row_elems(s, cw);
    return (size_t)CNORM_SMEM_BYTES(rows * pitch, cw, cw / s->cg, s->esize, s->tensors,
                                    CNORM_SCRATCH_FLOATS(s->nhwc, pitch, 16 / s->esize));
}

/* The price of one tiling, in bytes one SM moves (or could have moved) over the whole
 * op: per wave (one tile per resident block), the blocks' reads and writes, a fixed cost
 * per tile (barriers and the passes' start-up, ~0.5 us at an SM's share of HBM), and for a
 * segment of several tiles the exchange: a fixed ~1.5 us of round trips, the merge of its
 * k x sets records, and EXCHANGE_TILE_BYTES per tile of the segment, because every block
 * waits for the slowest of the k (fitted to the 2026-12-02 sweeps, docs/PERF.md: a
 * GroupNorm segment of 32 tiles ran 0.86x one of 4, and BatchNorm's 132-tile segments
 * 0.70x the three-kernel fallback that reads x twice).  With several blocks per SM one
 * block's overheads overlap the others' streaming, so a wave pays them once.  NHWC windows
 * narrower than a 128-byte line are marked up: each pixel's run shares its lines with
 * other windows. */
#define TILE_FIXED_BYTES (16 * 1024)
#define EXCHANGE_BYTES (48 * 1024)
#define EXCHANGE_TILE_BYTES (2 * 1024)
#define FINALIZE_BYTES (64 * 1024) /* the fallback's finalize launch, once */

static double price(const cnorm_shape *s, int64_t waves, int64_t blocks, int64_t rows, int64_t cw, int64_t k)
{
    const double record = s->tensors == 2 ? 32.0 : 16.0;
    double wave =
        (double)blocks * (double)rows * (double)cw * (double)s->esize * (double)(s->tensors + 1) + TILE_FIXED_BYTES;
    if (k > 1)
        wave += EXCHANGE_BYTES + (double)k * ((double)(cw / s->cg) * record / 4.0 + EXCHANGE_TILE_BYTES);
    double cost = (double)waves * wave;
    const int64_t run = cw * s->esize;
    if (s->nhwc && cw < s->c && run < 128)
        cost *= 1.0 + (double)(128 - run) / 128.0;
    return cost;
}

/* The three-kernel fallback's price: statistics (x, and dy, read), the finalize, and the
 * apply (read again, write). */
static double price_fallback(const cnorm_shape *s, int64_t waves, int64_t blocks, int64_t rows, int64_t cw)
{
    const double once = price(s, waves, blocks, rows, cw, 1);
    return once * (double)(2 * s->tensors + 1) / (double)(s->tensors + 1) + FINALIZE_BYTES;
}

/* Bytes of data (x, and dy for the backward) one SM's tiles hold at most.  Each block
 * asks L2 for its next tile while it works on the current one, so a wave keeps about
 * sm_count x cap bytes of prefetched data in L2 (17 MB at 128 KB on 132 SMs) next to the
 * lines being written: the cap trades that footprint against per-tile overheads.  A guess
 * until measured.  For tuning (and the tests), FROST_CNORM_TILE_KB overrides it (16..1024,
 * per tile), FROST_CNORM_BLOCKS sets the blocks per SM (1..CNORM_MAX_BLOCKS) and
 * FROST_CNORM_WINDOW the channels per window (when it is a valid width). */
#define SM_BYTES_CAP (128 * 1024)

/* The divisors of c (the window widths to try), ascending; returns how many. */
#define MAX_WIDTHS (2 * 1536)
static int divisors(int64_t c, int64_t widths[MAX_WIDTHS])
{
    int count = 0;
    for (int64_t d = 1; d * d <= c && count + 2 <= MAX_WIDTHS; d++)
        if (c % d == 0) {
            widths[count++] = d;
            if (d * d != c)
                widths[count++] = c / d;
        }
    for (int i = 1; i < count; i++) /* insertion sort: a few dozen entries */
        for (int j = i; j > 0 && widths[j] < widths[j - 1]; j--) {
            const int64_t t = widths[j];
            widths[j] = widths[j - 1], widths[j - 1] = t;
        }
    return count;
}

static int64_t env_int(const char *name, int64_t lo, int64_t hi)
{
    const char *env = getenv(name);
    const long v = env ? strtol(env, NULL, 10) : 0;
    return v >= lo && v <= hi ? (int64_t)v : 0;
}

/* Picks the window, rows and tiles per segment (see the top of this file).  stats: the op
 * computes statistics (else a single APPLY pass).  Returns 0 when not even 8 rows of the
 * narrowest window fit in `budget` bytes of shared memory. */
static int choose(const cnorm_shape *s, const cnorm_device *dev, int stats, int64_t window, cnorm_geometry *out)
{
    const int64_t tile_kb = env_int("FROST_CNORM_TILE_KB", 16, 1024),
                  forced = env_int("FROST_CNORM_BLOCKS", 1, CNORM_MAX_BLOCKS);
    const int64_t seg_rows = s->kind == FROST__CNORM_BATCH ? s->n * s->hw : s->hw;
    double best = -1.0;
    int64_t best_exchange = 0;
    memset(out, 0, sizeof *out);
    int64_t widths[MAX_WIDTHS];
    const int count = divisors(s->c, widths);
    const int64_t blocks = forced ? forced : 1;
    const int64_t slots = dev->sms * blocks, tile_cap = tile_kb ? tile_kb * 1024 : SM_BYTES_CAP / blocks;
    const size_t per_sm = dev->smem_per_sm / (size_t)blocks - dev->reserved;
    const size_t budget = dev->optin < per_sm ? dev->optin : per_sm;
    for (int wi = 0; wi < count; wi++) {
        const int64_t cw = widths[wi];
        if (cw % s->cw_unit != 0 || frost__cnorm_smem_bytes(s, CNORM_ROW_ALIGN, cw) > budget ||
            (window && cw != window))
            continue;
        const int64_t fixed = (int64_t)frost__cnorm_smem_bytes(s, 0, cw);
        const int64_t row_bytes = row_elems(s, cw) * s->esize;
        int64_t rmax = ((int64_t)budget - fixed) / s->tensors / row_bytes;
        while (rmax >= CNORM_ROW_ALIGN &&
               frost__cnorm_smem_bytes(s, rmax / CNORM_ROW_ALIGN * CNORM_ROW_ALIGN, cw) > budget)
            rmax -= CNORM_ROW_ALIGN;
        rmax = rmax / CNORM_ROW_ALIGN * CNORM_ROW_ALIGN;
        if (rmax > tile_cap / s->tensors / row_bytes)
            rmax = tile_cap / s->tensors / row_bytes;
        rmax = rmax / CNORM_ROW_ALIGN * CNORM_ROW_ALIGN;
        if (rmax > frost__cnorm_align_up(seg_rows, CNORM_ROW_ALIGN))
            rmax = frost__cnorm_align_up(seg_rows, CNORM_ROW_ALIGN);
        if (rmax < CNORM_ROW_ALIGN)
            continue;
        const int64_t segs = (s->kind == FROST__CNORM_BATCH ? 1 : s->n) * (s->c / cw);
        const int64_t kmin = frost__cnorm_ceil_div(seg_rows, rmax);
        const int can_reside = stats && kmin <= slots;
        /* tiles per segment: from the fewest that fit up to one per resident block */
        const int64_t kmax = can_reside ? (slots < frost__cnorm_ceil_div(seg_rows, CNORM_ROW_ALIGN)
                                               ? slots
                                               : frost__cnorm_ceil_div(seg_rows, CNORM_ROW_ALIGN))
                                        : kmin;
        int64_t k_best = 0, rows_best = 0;
        double cost = 0.0;
        for (int64_t k = kmin; k <= kmax; k++) {
            const int64_t rows = frost__cnorm_align_up(frost__cnorm_ceil_div(seg_rows, k), CNORM_ROW_ALIGN),
                          tiles = frost__cnorm_ceil_div(seg_rows, rows);
            const double c = price(s, frost__cnorm_ceil_div(segs * tiles, slots), blocks, rows, cw, tiles);
            if (k_best == 0 || c < cost)
                k_best = tiles, rows_best = rows, cost = c;
        }
        int resident = can_reside;
        if (stats) { /* the fallback, with the fewest tiles, when it is cheaper (or the only way) */
            const int64_t rows = frost__cnorm_align_up(frost__cnorm_ceil_div(seg_rows, kmin), CNORM_ROW_ALIGN),
                          tiles = frost__cnorm_ceil_div(seg_rows, rows);
            const double c = price_fallback(s, frost__cnorm_ceil_div(segs * tiles, slots), blocks, rows, cw);
            if (!can_reside || c < cost)
                resident = 0, k_best = tiles, rows_best = rows, cost = c;
        }
        /* within 2%: the smaller exchange wins; then a resident tiling takes the wider
         * window (fewer segments), the fallback the narrower (measured faster down to
         * 128-byte runs, 2026-12-02) */
        const int64_t exchange = resident ? k_best : 1;
        if (best >= 0.0 && (cost > best * 1.02 || (cost * 1.02 >= best && (exchange > best_exchange ||
                                                                           (exchange == best_exchange && !resident)))))
            continue;
        best = best >= 0.0 && best < cost ? best : cost;
        best_exchange = exchange;
        out->cw = cw;
        out->sets = cw / s->cg;
        out->windows = s->c / cw;
        out->rows = rows_best;
        out->seg_rows = seg_rows;
        out->k_tiles = k_best;
        out->num_segments = segs;
        out->num_tiles = segs * k_best;
        out->waves = frost__cnorm_ceil_div(out->num_tiles, slots);
        out->blocks = blocks;
        out->resident = resident;
        out->smem = frost__cnorm_smem_bytes(s, rows_best, cw);
    }
    return best >= 0.0;
}

int frost__cnorm_choose_geometry(const cnorm_shape *s, const cnorm_device *dev, int stats, cnorm_geometry *out)
{
    const int64_t window = env_int("FROST_CNORM_WINDOW", 1, INT32_MAX);
    return (window && choose(s, dev, stats, window, out)) || choose(s, dev, stats, 0, out);
}

/* ---- the cluster path -------------------------------------------------------------------
 * GroupNorm / InstanceNorm on 16-byte units (chan_norm_cluster.cu): one cluster of k tiles
 * per segment, no persistent grid.  NCHW (units along a channel's pixels): the fewest tiles
 * a segment (a power of two) for which some window of whole sets keeps a block's tiles
 * within CLUSTER_TILE_BYTES, with the widest such window; rows in whole units, and for
 * BatchNorm (NCHW only: a segment is a window over every sample) whole samples.  When no
 * window fits that in max_cluster tiles, the smallest larger tiles a block's shared memory
 * holds (the most a segment, the narrowest window: two blocks an SM where they fit).
 * Measured on the H200 (2026-12-03, bf16, GB/s, against the three-kernel fallback):
 * GroupNorm(32) 32x512x64x64 forward 2538 -> 3303, backward 1199 -> 2957, BatchNorm 1505 ->
 * 2872 and 1216 -> 2944; with the larger tiles (8 a segment), BatchNorm 64x256x56x56
 * backward 946 -> 2184, 32x64x112x112 forward 1319 -> 1755 and backward 973 -> 2194,
 * GroupNorm(32) 4x128x256x256 backward 1189 -> 2222; 4 tiles of twice the size gave 0.95x
 * (BatchNorm 64x256x56x56 backward) and 1.04x (32x64x112x112 forward).  NHWC: the window:
 * the narrowest whose pixel run is a whole 128-byte line or more (C itself when C is
 * narrower), then narrower ones when the segment would need more than max_cluster tiles;
 * past that, larger tiles as for NCHW in windows of 32-byte runs or more (GroupNorm(32)
 * 8x512x128x128 backward, 16-channel windows in 8 tiles of 128 KB: 1832 GB/s against 1128
 * for the fallback; 16-byte runs ran at half the fallback's speed).  The tiles per segment:
 * the fewest (a power of two) that keep a block's tiles (x, and dy) at or under
 * CLUSTER_TILE_BYTES together, so two or three blocks share an SM (one's loads overlap another's arithmetic
 * and stores).  Measured on the H200 (2026-12-02, docs/PERF.md, GroupNorm(32) bf16):
 * 64-channel windows with 64 KB tiles were the fastest forward of the windows 32-256 and
 * clusters 2-8 tried at both target shapes, and the backward ran 1.13-1.20x faster with 32 KB
 * tiles of x and dy than with 64 KB ones.  Chosen only when the segments fill every SM at
 * least once; FROST_CNORM_CLUSTER = 0 turns the path off, 1 / 2 / 4 / 8 forces that many
 * tiles per segment (any occupancy, any tile size that fits). */
#define CLUSTER_TILE_BYTES (64 * 1024)

/* The start ramp (cc_ramp in chan_norm_cluster.cu): the first wave's clusters start over
 * RAMP_KCYCLES thousand SM cycles in RAMP_CLASSES classes, from two waves of tiles up (with
 * fewer, the delayed blocks would have no later ones to overlap).  GroupNorm(32) NHWC bf16
 * on the H200 (2026-12-03, docs/PERF.md), against starting at once: forward 2681 -> 2926
 * GB/s (32x512x64x64) and 2694 -> 3009 (128x256x32x32), backward 2533 -> 2601 and 2398 ->
 * 2516; three classes 6 K cycles apart: 0.97-0.99x of that.  FROST_CNORM_RAMP (thousands of
 * cycles, 0: off) and FROST_CNORM_RAMP_CLASSES override them. */
#define RAMP_KCYCLES 18
#define RAMP_CLASSES 6

/* The windows the cluster and stream paths try, in order of preference: those whose pixel
 * run is a whole 128-byte line or more (or all of C) narrowest first, then the narrower
 * ones widest first down to runs of min_run bytes; whole units, at most CNC_THREADS units,
 * and only `window` when the override names one.  Returns how many. */
static int preferred_windows(const cnorm_shape *s, int64_t window, int64_t min_run, int64_t order[MAX_WIDTHS])
{
    int64_t widths[MAX_WIDTHS];
    const int total = divisors(s->c, widths);
    int count = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < total; i++) {
            const int64_t cw = widths[pass == 0 ? i : total - 1 - i];
            const int wide = cw * s->esize >= 128 || cw == s->c;
            if (cw % s->cw_unit != 0 || cw / (16 / s->esize) > CNC_THREADS || cw * s->esize < min_run ||
                (window && cw != window) || wide != (pass == 0))
                continue;
            order[count++] = cw;
        }
    return count;
}

/* Whether a window of cw channels in k tiles a segment fits a block, its tiles (x, and dy)
 * at most cap bytes together; if so, the geometry into out.  overflow (NCHW): the tile may
 * hold fewer rows than it has, as many as the block's shared memory takes, when the rows
 * past them are at most a quarter of the tile and, over one block an SM, stay within half
 * of L2.  Measured on the H200 (2026-12-03, bf16, GB/s, against the three-kernel
 * fallback): GroupNorm(32) 2x256x256x256 backward (12 % of the rows read twice) 1158 ->
 * 1841, 1x32x1000x1024 forward (10 %) 1558 -> 1730; BatchNorm 256x64x56x56 backward (42 %)
 * 1080 -> 967, so not past a quarter. */
static int cluster_fits(const cnorm_shape *s, const cnorm_device *dev, int64_t cw, int64_t k, size_t cap,
                        int overflow, cnorm_geometry *out)
{
    /* NCHW tiles cut a channel's pixels in whole 16-byte units, BatchNorm's (whose segment
     * is a window over every sample) in whole samples; the kernel keeps no reduction scratch
     * for NCHW (the macro's smallest, for 32 units, is reserved) */
    const int batch = s->kind == FROST__CNORM_BATCH;
    const int64_t vec = 16 / s->esize, seg_rows = batch ? s->n * s->hw : s->hw;
    const int64_t rows = batch    ? frost__cnorm_ceil_div(s->n, k) * s->hw
                         : s->nhwc ? frost__cnorm_ceil_div(s->hw, k)
                                   : frost__cnorm_align_up(frost__cnorm_ceil_div(s->hw, k), vec);
    const int64_t units = s->nhwc ? cw / vec : 32;
    const size_t per_sm = dev->smem_per_sm - dev->reserved, budget = dev->optin < per_sm ? dev->optin : per_sm;
    if ((k - 1) * rows >= seg_rows || (size_t)(rows * cw * s->esize * s->tensors) > cap)
        return 0;
    int64_t held = rows;
    if (overflow && !s->nhwc) { /* the most whole units a block holds */
        const int64_t row_bytes = cw * s->esize * s->tensors;
        const size_t extra = (size_t)CNC_SMEM_BYTES(vec, cw, cw / s->cg, s->esize, s->tensors, units) -
                             (size_t)(vec * row_bytes);
        held = budget > extra ? (int64_t)((budget - extra) / (size_t)row_bytes) / vec * vec : 0;
        while (held > 0 && (size_t)CNC_SMEM_BYTES(held, cw, cw / s->cg, s->esize, s->tensors, units) > budget)
            held -= vec;
        if (held <= 0 || held >= rows || (rows - held) * 4 > rows ||
            dev->sms * (rows - held) * row_bytes > dev->l2_bytes / 2)
            return 0;
    }
    const size_t smem = (size_t)CNC_SMEM_BYTES(held, cw, cw / s->cg, s->esize, s->tensors, units);
    if (smem > budget)
        return 0;
    memset(out, 0, sizeof *out);
    out->cw = cw;
    out->sets = cw / s->cg;
    out->windows = s->c / cw;
    out->rows = rows;
    out->seg_rows = seg_rows;
    out->k_tiles = k;
    out->num_segments = batch ? out->windows : s->n * out->windows;
    out->num_tiles = out->num_segments * k;
    out->blocks = (int64_t)(dev->smem_per_sm / (smem + dev->reserved));
    out->blocks = out->blocks < 1 ? 1 : out->blocks > 3 ? 3 : out->blocks; /* launch bounds: 3 */
    out->waves = frost__cnorm_ceil_div(out->num_tiles, dev->sms * out->blocks);
    out->first_wave = dev->sms * out->blocks;
    if (out->num_tiles >= 2 * out->first_wave) {
        out->ramp_cycles = 1000 * (getenv("FROST_CNORM_RAMP") ? env_int("FROST_CNORM_RAMP", 0, 1000000) : RAMP_KCYCLES);
        out->ramp_classes =
            getenv("FROST_CNORM_RAMP_CLASSES") ? env_int("FROST_CNORM_RAMP_CLASSES", 0, 1000000) : RAMP_CLASSES;
    }
    out->resident = 1;
    out->cluster = k;
    out->held = held < rows ? held : 0;
    out->smem = smem;
    return 1;
}

int frost__cnorm_choose_cluster(const cnorm_shape *s, const cnorm_device *dev, cnorm_geometry *out)
{
    const char *env = getenv("FROST_CNORM_CLUSTER");
    const int64_t window = env_int("FROST_CNORM_WINDOW", 1, INT32_MAX);
    int64_t forced = env_int("FROST_CNORM_CLUSTER", 1, CNC_MAX_CLUSTER);
    if ((forced & (forced - 1)) != 0 || forced > dev->max_cluster) /* not a usable size: the tiling's own choice */
        forced = 0;
    if ((env && env[0] == '0' && !env[1]) || dev->max_cluster < 1 || (s->kind == FROST__CNORM_BATCH && s->nhwc) ||
        !s->vec_layout || s->n * s->hw * s->c == 0)
        return 0;
    int64_t order[MAX_WIDTHS];
    /* FROST_CNORM_CLUSTER_KB: the tile bound in KB instead of CLUSTER_TILE_BYTES (a tuning knob) */
    const int64_t kb = env_int("FROST_CNORM_CLUSTER_KB", 8, 1024);
    const size_t any = (size_t)-1, cap = forced ? any : kb ? (size_t)kb * 1024 : CLUSTER_TILE_BYTES;
    if (!s->nhwc) { /* NCHW: the fewest tiles a segment, each with the widest window that fits */
        const int count = divisors(s->c, order);
        for (int64_t k = forced ? forced : 1; k <= (forced ? forced : dev->max_cluster); k *= 2)
            for (int i = count - 1; i >= 0; i--)
                if (order[i] % s->cw_unit == 0 && (!window || order[i] == window) &&
                    cluster_fits(s, dev, order[i], k, cap, 0, out))
                    return forced || out->num_tiles >= dev->sms;
        /* then the smallest tiles past that which a block holds: the most a segment, the
         * narrowest window (two blocks an SM where they fit) */
        for (int64_t k = forced ? 0 : dev->max_cluster; k >= 1; k /= 2)
            for (int i = 0; i < count; i++)
                if (order[i] % s->cw_unit == 0 && (!window || order[i] == window) &&
                    cluster_fits(s, dev, order[i], k, any, 0, out))
                    return out->num_tiles >= dev->sms;
        /* then max_cluster tiles in the narrowest window, each holding what a block can and
         * reading the rest twice (through L2) */
        for (int i = 0; i < count && !forced && dev->max_cluster > 0; i++)
            if (order[i] % s->cw_unit == 0 && (!window || order[i] == window) &&
                cluster_fits(s, dev, order[i], dev->max_cluster, any, 1, out))
                return out->num_tiles >= dev->sms;
        return 0;
    }
    int count = preferred_windows(s, window, 1, order);
    for (int i = 0; i < count; i++)
        for (int64_t k = forced ? forced : 1; k <= (forced ? forced : dev->max_cluster); k *= 2)
            if (cluster_fits(s, dev, order[i], k, cap, 0, out))
                return forced || out->num_tiles >= dev->sms;
    /* then, as for NCHW, the smallest larger tiles, in windows of 32-byte pixel runs or more */
    count = forced ? 0 : preferred_windows(s, window, 32, order);
    for (int64_t k = dev->max_cluster; k >= 1 && count; k /= 2)
        for (int i = 0; i < count; i++)
            if (cluster_fits(s, dev, order[i], k, any, 0, out))
                return out->num_tiles >= dev->sms;
    return 0;
}

/* ---- the stream path ---------------------------------------------------------------------
 * BatchNorm training forward, and backward with saved statistics (the caller decides), on
 * NHWC 16-byte units (chan_norm_stream.cu): a grid of CNS_MIN_BLOCKS blocks per SM (the
 * two-launch form: FROST_CNORM_STREAM_BLOCKS, 2 or 3), each owning `rows` rows of every
 * window.
 *
 * The two-launch form (the default; FROST_CNORM_STREAM = 2): every window's statistics,
 * then every window's output.  The window: the widest that divides C in whole 16-byte units
 * (at most CNC_THREADS units) and fits the shared memory, so that a block's rows are the
 * longest runs; the first keep_rows rows of every tile are read with an evict-last hint so
 * that the second launch finds them in L2 (as many as 60 % of L2 holds), and the next
 * early_rows (CNS_EARLY_L2_PCT percent of L2, FROST_CNORM_STREAM_EARLY) are asked of L2 by
 * the second launch's blocks while the finalize kernel still merges.
 *
 * The one-launch form (FROST_CNORM_STREAM = 1): all blocks resident, windows overlapped
 * through L2.  The window: the narrowest whose pixel run is a whole 128-byte line (C itself
 * when C is narrower), then narrower runs down to 32 bytes, the first whose x (and dy) fit a
 * third of L2 (the kernel keeps about two windows there, beside the output lines in
 * flight); every row is read evict-last.  FROST_CNORM_STREAM = 0 turns the path off (the
 * three-kernel fallback of choose_geometry). */
int frost__cnorm_choose_stream(const cnorm_shape *s, const cnorm_device *dev, cnorm_geometry *out)
{
    const char *env = getenv("FROST_CNORM_STREAM");
    const int64_t window = env_int("FROST_CNORM_WINDOW", 1, INT32_MAX), vec = 16 / s->esize;
    const int64_t rows_all = s->n * s->hw;
    /* FROST_CNORM_STREAM: unset or 2 the two-launch form, 1 the one-launch form, 0 off */
    const int form = !env ? 2 : (env[0] >= '0' && env[0] <= '2') && !env[1] ? env[0] - '0' : 2;
    if (!form || s->kind != FROST__CNORM_BATCH || !s->nhwc || !s->vec_layout || rows_all * s->c == 0 ||
        dev->l2_bytes <= 0)
        return 0;
    /* the two-launch form: every divisor of C, widest first, so that a tile's rows are the
     * longest runs; the one-launch form: the preferred windows in their order */
    int64_t order[MAX_WIDTHS];
    const int count = form == 2 ? divisors(s->c, order) : preferred_windows(s, window, 32, order);
    /* blocks per SM: CNS_MIN_BLOCKS, or for the two-launch form FROST_CNORM_STREAM_BLOCKS (2
     * or 3; its entry points' launch bounds take the count) */
    const int64_t forced = form == 2 ? env_int("FROST_CNORM_STREAM_BLOCKS", 2, 3) : 0;
    const int64_t blocks = forced ? forced : CNS_MIN_BLOCKS;
    const size_t per_sm = dev->smem_per_sm / (size_t)blocks - dev->reserved;
    for (int i = 0; i < count; i++) {
        const int64_t cw = order[form == 2 ? count - 1 - i : i];
        const size_t smem = (size_t)CNS_SMEM_BYTES(cw, cw / vec);
        const int64_t window_bytes = rows_all * cw * s->esize * s->tensors;
        if (cw % s->cw_unit != 0 || cw / vec > CNC_THREADS || (window && cw != window) ||
            (form == 1 && window_bytes > dev->l2_bytes / 3) || smem > per_sm || smem > dev->optin)
            continue;
        memset(out, 0, sizeof *out);
        const int64_t slots = dev->sms * blocks;
        const int64_t grid = slots < frost__cnorm_ceil_div(rows_all, CNORM_ROW_ALIGN)
                                 ? slots
                                 : frost__cnorm_ceil_div(rows_all, CNORM_ROW_ALIGN);
        out->cw = cw;
        out->sets = cw;
        out->windows = s->c / cw;
        out->rows = frost__cnorm_ceil_div(rows_all, grid);
        out->seg_rows = rows_all;
        out->k_tiles = frost__cnorm_ceil_div(rows_all, out->rows);
        out->num_segments = out->windows;
        out->num_tiles = out->windows * out->k_tiles;
        out->waves = out->windows;
        out->blocks = blocks;
        out->resident = 1;
        out->stream = form;
        /* the rows of each tile whose first read keeps them in L2 for the second: all of them when
         * one launch overlaps windows that fit, else the share of 60 % of L2 in all of x (and dy) */
        out->keep_rows = out->rows;
        if (form == 2 && window_bytes * out->windows > (int64_t)(dev->l2_bytes * 0.6))
            out->keep_rows =
                (int64_t)((double)out->rows * (dev->l2_bytes * 0.6) / (double)(window_bytes * out->windows));
        /* the rows after keep_rows that the output launch asks L2 for while the finalize kernel
         * merges (chan_norm_stream.cu, cs_prefetch_early): FROST_CNORM_STREAM_EARLY percent of L2
         * over window 0's tiles */
        if (form == 2) {
            const char *early = getenv("FROST_CNORM_STREAM_EARLY");
            const int64_t pct = early ? env_int("FROST_CNORM_STREAM_EARLY", 0, 100) : CNS_EARLY_L2_PCT;
            const int64_t row_bytes = cw * s->esize * s->tensors;
            const int64_t fit = (int64_t)((double)dev->l2_bytes * (double)pct / 100.0) / (out->k_tiles * row_bytes);
            out->early_rows = fit < out->rows - out->keep_rows ? fit : out->rows - out->keep_rows;
        }
        out->smem = smem;
        return 1;
    }
    return 0;
}

/* The plane path: NCHW InstanceNorm, or GroupNorm with one channel a group, on 16-byte
 * units, planes of CNP_MIN_UNITS to CNP_RULE_THREADS x CNP_UNITS_WIDE units (bf16: 512 to
 * 16384 pixels), and at least one wave of planes at half the SM's threads (fewer, larger
 * planes are the cluster path's: it cuts a plane over several blocks).  A thread holds
 * CNP_UNITS units, or CNP_UNITS_WIDE past CNP_RULE_THREADS x CNP_UNITS; the threads are the
 * plane's units over that, rounded up to a warp; planes of one warp go CNP_WARP_PLANES to a
 * block (a block of 32 threads would leave the SM's 32-block limit holding 1024 threads).  Measured on the H100 (2026-12-06,
 * docs/PERF.md): 4 units a thread ran InstanceNorm 32x512x64x64 and 128x256x32x32 1.04-1.08x
 * the cluster path, 8 units 16x256x128x128's backward 1.03x (4 units: 0.99x), and
 * 8x1024x32x64 (0.97 waves of 128-thread blocks at 16 an SM) 1.07-1.21x.  Developer
 * switches: FROST_CNORM_PLANE=0 turns the path off, =1 takes it wherever the planes fit
 * (else the rule, which yields to a forced FROST_CNORM_CLUSTER); FROST_CNORM_PLANE_UNITS (1,
 * 2, 4 or 8) sets the units a thread holds. */
int frost__cnorm_choose_plane(const cnorm_shape *s, const cnorm_device *dev, cnorm_geometry *out)
{
    const char *env = getenv("FROST_CNORM_PLANE");
    int64_t per = env_int("FROST_CNORM_PLANE_UNITS", 1, 8);
    if ((per & (per - 1)) != 0)
        per = 0;
    if ((env && env[0] == '0' && !env[1]) || s->nhwc || !s->vec_layout || s->cg != 1 ||
        s->kind == FROST__CNORM_BATCH || s->n * s->c == 0 || s->n * s->c > INT32_MAX)
        return 0;
    const int64_t units = s->hw * s->esize / 16;
    if (!per)
        per = units <= CNP_RULE_THREADS * CNP_UNITS ? CNP_UNITS : CNP_UNITS_WIDE;
    const int64_t threads = frost__cnorm_align_up(frost__cnorm_ceil_div(units, per), 32);
    if (units < CNP_MIN_UNITS || threads > CNP_MAX_THREADS)
        return 0;
    const int forced = env && env[0] == '1' && !env[1];
    const int64_t per_sm = 1024 / threads < 1 ? 1 : 1024 / threads;
    if (!forced && (threads > CNP_RULE_THREADS || s->n * s->c < dev->sms * per_sm ||
                    env_int("FROST_CNORM_CLUSTER", 1, CNC_MAX_CLUSTER)))
        return 0;
    memset(out, 0, sizeof *out);
    out->cw = 1;
    out->sets = 1;
    out->windows = s->c;
    out->rows = s->hw;
    out->seg_rows = s->hw;
    out->k_tiles = 1;
    out->num_segments = s->n * s->c;
    out->num_tiles = out->num_segments;
    out->blocks = per_sm;
    out->waves = frost__cnorm_ceil_div(out->num_tiles, dev->sms * per_sm);
    out->resident = 1;
    out->plane = threads;
    out->plane_units = per;
    out->plane_per_block = threads == 32 ? CNP_WARP_PLANES : 1;
    return 1;
}
