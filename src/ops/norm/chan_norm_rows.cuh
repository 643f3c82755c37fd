/*
 * chan_norm_rows.cuh — the channel-norm kernels' fast path for NHWC tiles on the 16-byte
 * vector path: a per-thread row cursor (tile loads, the apply passes, per-line L2
 * prefetch) and the choice of how a block prefetches its next tile.  The general tile walk
 * and the tile geometry are in chan_norm_kernel.cuh.
 *
 * Why a second walk: the general one (any layout, any window) spent ~34 instructions per
 * 16-byte unit to issue a cp.async and ~88 per unit in the apply (ncu, 2026-12-02,
 * docs/PERF.md); here a unit costs a few adds.
 */
#ifndef FROST_CHAN_NORM_ROWS_CUH
#define FROST_CHAN_NORM_ROWS_CUH

#include "chan_norm_kernel.cuh"

#if defined(LAYOUT_NHWC)
/* The NHWC vector path's own walk, for windows of at most CNORM_THREADS units (every
 * target shape): a thread keeps one 16-byte column unit u of the window for the whole tile
 * and takes rows r0, r0 + per, ...; its global and shared addresses advance by a constant
 * per row, plus the n-stride gap at each sample boundary crossed, so a unit costs a few
 * adds instead of the general walk's index arithmetic. */
typedef struct cn_rows {
    int units, per, u, r0; /* r0 >= per: this thread has no unit */
} cn_rows;

FROST_DEVICE cn_rows cn_rows_begin(const cnorm_params *p)
{
    cn_rows w;
    w.units = p->cw / CN_VEC;
    w.per = CNORM_THREADS / w.units;
    w.u = threadIdx.x % w.units;
    w.r0 = threadIdx.x / w.units;
    return w;
}

FROST_DEVICE bool cn_rows_fit(const cnorm_params *p)
{
    return p->cw / CN_VEC <= CNORM_THREADS;
}

/* A thread's place in one data tensor (n stride sn): the global element pointer of its
 * current row at its unit, the row's pixel within its sample, and the steps per row and
 * per sample boundary. */
typedef struct cn_gcursor {
    const frost_io *g;
    int px;
    int64_t step, gap;
} cn_gcursor;

/* The cursor at row r0 of the tile. */
FROST_DEVICE cn_gcursor cn_rows_cursor(const cnorm_params *p, const cnorm_tile *tl, const cn_rows *w,
                                       const frost_io *base, int64_t sn)
{
    cn_gcursor c;
    const int q = tl->q0 + w->r0, n = q / p->hw;
    c.px = q - n * p->hw;
    c.g = base + (int64_t)n * sn + (int64_t)c.px * p->c + tl->c0 + w->u * CN_VEC;
    c.step = (int64_t)w->per * p->c;
    c.gap = sn - (int64_t)p->hw * p->c;
    return c;
}

/* Next row: rows advance by `per` pixels; crossing into the next sample adds the gap.
 * GroupNorm / InstanceNorm tiles lie within one sample (a segment is one sample's window),
 * so only BatchNorm's can cross. */
FROST_DEVICE void cn_rows_advance(const cnorm_params *p, const cn_rows *w, cn_gcursor *c)
{
    c->g += c->step;
#if defined(KIND_BATCH)
    c->px += w->per;
    if (c->px >= p->hw) {
        const int samples = c->px / p->hw;
        c->px -= samples * p->hw;
        c->g += samples * c->gap;
    }
#else
    (void)p, (void)w;
#endif
}

/* prefetch.global.L2 of the 128-byte lines of one tensor's tile: the threads whose unit
 * starts a line issue one per row. */
FROST_DEVICE void cn_prefetch_rows(const cnorm_params *p, const cnorm_tile *tl, const frost_io *src, int64_t sn)
{
    const cn_rows w = cn_rows_begin(p);
    if (w.r0 >= w.per || (w.u * 16) % 128 != 0)
        return;
    cn_gcursor cur = cn_rows_cursor(p, tl, &w, src, sn);
    for (int r = w.r0; r < tl->nq; r += w.per) {
        cn_prefetch_l2(cur.g);
        cn_rows_advance(p, &w, &cur);
    }
}

/* cp.async of one tensor's tile (the caller commits, waits and synchronizes). */
FROST_DEVICE void cn_load_rows(const cnorm_params *p, const cnorm_tile *tl, const frost_io *src, int64_t sn,
                               frost_io *tile)
{
    const cn_rows w = cn_rows_begin(p);
    if (w.r0 >= w.per)
        return;
    cn_gcursor cur = cn_rows_cursor(p, tl, &w, src, sn);
    frost_io *s = tile + w.r0 * p->pitch + w.u * CN_VEC;
    for (int r = w.r0; r < tl->nq; r += w.per) {
        cn_cp_async16(s, cur.g);
        s += w.per * p->pitch;
        cn_rows_advance(p, &w, &cur);
    }
}
#endif

/* The next tile into L2, as params.prefetch asks. */
FROST_DEVICE void cn_prefetch_next(const cnorm_params *p, const cnorm_tile *tl, const frost_io *src, int64_t sn)
{
    if (p->prefetch == CNORM_PREFETCH_NONE)
        return;
#if defined(LAYOUT_NHWC)
    if (p->prefetch == CNORM_PREFETCH_LINES && p->vec_ok && cn_rows_fit(p)) {
        cn_prefetch_rows(p, tl, src, sn);
        return;
    }
#endif
    cn_prefetch_tile(p, tl, src, sn);
}

#endif /* FROST_CHAN_NORM_ROWS_CUH */
