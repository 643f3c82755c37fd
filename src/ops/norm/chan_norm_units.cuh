/*
 * chan_norm_units.cuh — what the channel-norm kernels of CNC_THREADS-thread blocks share
 * (chan_norm_cluster.cu, chan_norm_stream.cu): a thread's 16-byte column unit of the
 * window and its rows, the per-channel reduction over the block, and the store of one
 * output unit (NHWC); L2 policies and the global load that takes one (both layouts).
 */
#ifndef FROST_CHAN_NORM_UNITS_CUH
#define FROST_CHAN_NORM_UNITS_CUH

#include "chan_norm_stats.cuh"

/* L2 policies: keep (evict-last) a first read that a second will want, drop (evict-first)
 * the second. */
FROST_DEVICE uint64_t cn_l2_policy(bool keep)
{
    uint64_t pol;
    if (keep)
        asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol));
    else
        asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
    return pol;
}

/* 16 bytes of global memory, with the L2 policy pol when hint. */
FROST_DEVICE void cn_ldg_v4(uint32_t r[4], const void *g, bool hint, uint64_t pol)
{
    if (hint)
        asm volatile("ld.global.nc.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "l"(g), "l"(pol));
    else
        asm volatile("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "l"(g));
}

/* A thread owns one 16-byte column unit u of the window (CN_VEC channels) and the rows
 * r0, r0 + per, ... of a tile. */
typedef struct cc_map {
    int units, per, u, r0; /* r0 >= per: no unit (only when units does not divide the block) */
} cc_map;

FROST_DEVICE cc_map cc_map_make(const cnorm_params *p)
{
    cc_map w;
    w.units = p->cw / CN_VEC;
    w.per = CNC_THREADS / w.units;
    w.u = threadIdx.x % w.units;
    w.r0 = threadIdx.x / w.units;
    return w;
}

/* Per-channel totals over the block of the thread's a[], b[] (its unit's CN_VEC channels)
 * into outa[cw], outb[cw]: lanes of one unit fold in the warp when units divides 32, then
 * the phases add in order in shared memory.  Fixed order: deterministic. */
FROST_DEVICE void cc_reduce(const cnorm_params *p, const cc_map *w, float a[CN_VEC], float b[CN_VEC], float *outa,
                            float *outb, float *scratch)
{
    const int tid = threadIdx.x, cw = p->cw, units = w->units;
    const bool fold = units <= 32 && 32 % units == 0;
    const int phases = CNC_PHASES(units);
    float *row = 0;
    if (fold) {
        for (int m = units; m < 32; m <<= 1)
#pragma unroll
            for (int k = 0; k < CN_VEC; k++) {
                a[k] += __shfl_xor_sync(0xffffffffu, a[k], m);
                b[k] += __shfl_xor_sync(0xffffffffu, b[k], m);
            }
        if ((tid & 31) < units)
            row = scratch + (tid / 32) * 2 * cw;
    } else if (w->r0 < w->per) {
        row = scratch + w->r0 * 2 * cw;
    }
    if (row)
#pragma unroll
        for (int k = 0; k < CN_VEC; k++) {
            row[w->u * CN_VEC + k] = a[k];
            row[cw + w->u * CN_VEC + k] = b[k];
        }
    __syncthreads();
    for (int i = tid; i < 2 * cw; i += CNC_THREADS) {
        float s = 0.0f;
        for (int ph = 0; ph < phases; ph++)
            s += scratch[ph * 2 * cw + i];
        if (i < cw)
            outa[i] = s;
        else
            outb[i - cw] = s;
    }
    __syncthreads();
}

/* One output unit: 16-byte streaming store, or element by element when misaligned. */
FROST_DEVICE void cc_store(const cnorm_params *p, frost_io *g, const float v[CN_VEC])
{
    if (p->vec_ok) {
        uint32_t q[4];
        cn_pack(q, v);
        cn_st_stream_v4(g, q);
    } else {
#pragma unroll
        for (int k = 0; k < CN_VEC; k++)
            g[k] = frost_from_float(v[k]);
    }
}

#endif /* FROST_CHAN_NORM_UNITS_CUH */
