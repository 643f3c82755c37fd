/*
 * sdpa_bwd_gpu.h — what the parts of test_sdpa_bwd_gpu share: a case, the tensors of a
 * run of it, and the functions of the other two files.
 *
 *   test_sdpa_bwd_gpu.c        the essay (pass rule), the case table, one case end to end,
 *                              random cases, refusals, main
 *   sdpa_bwd_gpu_tensors.c     lengths, strided NaN-guarded buffers, the ref forward and the
 *                              backward graphs
 *   sdpa_bwd_gpu_naive.c       the naive low-precision backward (the error budget) and the
 *                              comparison of the cuda outputs against ref and naive
 *
 * Layout legend: b = batch, h_q / h_kv = query / key-value heads, s_q / s_kv = sequence
 * dims, d_qk / d_v = head dims; every operand is a [b, h, s, d] view, a ragged one of a
 * [tokens, h, d] buffer.
 */
#ifndef FROST_TEST_SDPA_BWD_GPU_H
#define FROST_TEST_SDPA_BWD_GPU_H

#include <stdint.h>

#include "frost/frost.h"
#include "sdpa_test_util.h"
#include "test_util.h"

typedef struct bcase {
    const char *name;
    int b, h_q, h_kv, s_q, s_kv, d_qk, d_v;
    frost_dtype dtype;
    double scale;
    uint32_t mask;
    int left, right, align;
    int layout, ragged, pad, zero_len;
    int bias, bias_io, bias_inf, dbias, sink, dsink, misalign;
} bcase;

/* 4-D operands: Q-side (queries) and KV-side (keys). */
enum { OQ, OK, OV, OO, ODO, ODQ, ODK, ODV, NOPD };
extern const int opd_side[NOPD];          /* 0: a Q-side operand, 1: a KV-side one */
extern const char *const opd_names[NOPD];
/* The three copies of the backward's outputs, and of its f32 inputs. */
enum { C_REF, C_GPU, C_NAIVE, NCOPY };
enum { G_DQ, G_DK, G_DV, G_DBIAS, G_DSINK, NGRAD };

typedef struct run {
    const bcase *c;
    tu_rng rng;
    double scale;
    int64_t slice[2][MAXB], len[2][MAXB], offs[2][MAXB + 1], tokens[2];
    frost_dtype offs_dtype;
    tu_buf lp[NOPD];      /* Q, K, V, O, dO in the I/O dtype; dQ, dK, dV: the cuda outputs */
    tu_buf f32[NOPD];     /* f32 copies for the ref; dQ, dK, dV: the ref outputs */
    tu_buf naive[3];      /* naive dQ, dK, dV (f32, the ref layout) */
    int64_t st[NOPD][4];  /* strides of the [b, h, s, d] view */
    tu_buf bias, bias32, stats, sink, offs_buf[2], seq_buf[2];
    tu_buf dbias[NCOPY], dsink[NCOPY];
    int64_t bias_dims[4], stats_st[4];
    int sink_rank, seq_rank;
} run;

/* Tensor ids in binding order; the buffers behind them are listed by graph_buffers. */
enum { T_STATS = NOPD, T_BIAS, T_SINK, T_OFFS_Q, T_OFFS_KV, T_SEQ_Q, T_SEQ_KV, T_DBIAS, T_DSINK, NT };

static inline int64_t heads_of(const bcase *c, int opd)
{
    return opd_side[opd] ? c->h_kv : c->h_q;
}
static inline int64_t seq_of(const bcase *c, int opd)
{
    return opd_side[opd] ? c->s_kv : c->s_q;
}
static inline int64_t dim_of(const bcase *c, int opd)
{
    return (opd == OQ || opd == OK || opd == ODQ || opd == ODK) ? c->d_qk : c->d_v;
}
static inline int is_ragged(const run *r, int opd)
{
    return (r->c->ragged & (opd_side[opd] ? RAG_KV : RAG_Q)) != 0;
}

/* Element offset of (b, h, s, d) of an operand, ragged offsets resolved. */
static inline int64_t at(const run *r, int opd, int64_t b, int64_t h, int64_t s, int64_t d)
{
    const int64_t *st = r->st[opd];
    int64_t base = is_ragged(r, opd) ? r->offs[opd_side[opd]][b] * st[2] : b * st[0];
    return base + h * st[1] + s * st[2] + d * st[3];
}

/* Rows of batch b that an operand owns. */
static inline int64_t owned(const run *r, int opd, int b)
{
    return is_ragged(r, opd) ? r->slice[opd_side[opd]][b] : seq_of(r->c, opd);
}

/* ---- sdpa_bwd_gpu_tensors.c ---- */
/* Per-batch slices, lengths and ragged offsets of both sides (draws from r->rng). */
void make_lengths(run *r);
/* Every buffer of the case: inputs filled, outputs and gradients poisoned. */
void alloc_all(run *r);
void free_run(run *r);
/* dst = src's layout in dtype dt, every element (guards included) converted. */
void clone_as(tu_buf *dst, const tu_buf *src, frost_dtype dt, int copy_values);
/* The host buffers of one backward graph (copy C_REF: f32 I/O; C_GPU: 16-bit). */
void graph_buffers(run *r, int copy, tu_buf *bufs[NT]);
/* The ref engine's forward on the 16-bit inputs: fills r->lp[OO] and r->stats. */
void run_forward(run *r, frost_context *cpu);
/* The backward graph of one copy, built; ids[] receives the tensor ids in binding order. */
frost_graph *make_bwd_graph(run *r, frost_context *ctx, int copy, frost_tensor ids[NT]);

/* ---- sdpa_bwd_gpu_naive.c ---- */
/* Writes the naive dQ, dK, dV, d_bias, d_sink into the C_NAIVE copies. */
void naive_backward(run *r);
/* The pass rule for one output over its whole allocation (see test_sdpa_bwd_gpu.c). */
void compare_output(const char *what, const tu_buf *gpu, const tu_buf *ref, const tu_buf *naive, frost_dtype dtype);

#endif /* FROST_TEST_SDPA_BWD_GPU_H */
