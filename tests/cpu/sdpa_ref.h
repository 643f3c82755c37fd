/*
 * sdpa_ref.h — what test_sdpa_ref.c shares with its parts sdpa_ref_naive.c (the naive
 * fp64 attention and its finite differences) and sdpa_ref_checks.c (the checks of an
 * executed case): the case, the operands of a run, the naive forward's inputs.
 *
 * Layout legend: b = batch, h = heads (h_q query heads, h_kv key/value heads, a group of
 * h_q / h_kv query heads shares one), s = sequence (s_q queries, s_kv keys), d = head dim.
 */
#ifndef FROST_TEST_SDPA_REF_H
#define FROST_TEST_SDPA_REF_H

#include <stdint.h>

#include "test_util.h"

enum { LAYOUT_BHSD, LAYOUT_BSHD, LAYOUT_RANDOM };
enum { BIAS_NONE, BIAS_FULL, BIAS_1H, BIAS_B1, BIAS_11 }; /* bias dims [b|1, h|1, s_q, s_kv] */
enum { RAG_Q = 1, RAG_KV = 2 };                           /* packed THD operands */
enum { PAD_Q = 1, PAD_KV = 2 };                           /* seq_len tensors */
enum { MAXB = 4 };

typedef struct sdpa_case {
    const char *name;
    int b, h_q, h_kv, s_q, s_kv, d_qk, d_v;
    frost_dtype dtype;
    double scale;
    uint32_t mask;
    int left, right, align;
    int layout, ragged, pad, zero_len;
    int bias, bias_io, bias_inf, sink, stats; /* bias_inf: -inf entries, row 0 all -inf */
    int backward, user_out;
} sdpa_case;

/* One 4-D operand [b, h, s, d]; a ragged one lives in a [tokens, h, d] buffer. */
typedef struct tt {
    tu_buf buf;
    frost_tensor id;
    int64_t dims[4], st[4];
    const int64_t *offs; /* ragged token offsets (b + 1), or NULL */
    int64_t tokens;
} tt;

/* The naive forward's inputs, dense fp64 copies of what the engine read. */
typedef struct naive {
    const sdpa_case *c;
    double scale;
    const int64_t *len_q, *len_kv;
    double *q, *k, *v, *bias, *sink; /* dense; bias [bias_b][bias_h][s_q][s_kv] */
    const double *lse_weight;        /* [b][h_q][s_q] or NULL: the loss subtracts w * lse */
    int64_t bias_b, bias_h;
    double *s; /* scratch [s_q][s_kv] */
} naive;

/* One case being run: lengths, offsets, operands, bindings. */
typedef struct run {
    const sdpa_case *c;
    tu_rng rng;
    frost_graph *g;
    int64_t slice_q[MAXB], slice_kv[MAXB], len_q[MAXB], len_kv[MAXB];
    int64_t offs_q[MAXB + 1], offs_kv[MAXB + 1], tokens_q, tokens_kv;
    frost_dtype offs_dtype;
    int64_t offs_mem[2][MAXB + 1]; /* as i32 or i64, bound at execute */
    int32_t seq_mem[2][MAXB];
    frost_tensor offs_id[2], seq_id[2];
    tt q, k, v, o, d_o, dq, dk, dv;
    tu_buf bias, sink, stats, dbias, dsink;
    frost_tensor bias_id, sink_id, stats_id, dbias_id, dsink_id;
    int64_t bias_dims[4];
    frost_binding bind[24];
    int nb;
} run;

/* O [s_q][d_v] and lse [s_q] of every (b, h) block, into o [b][h_q][s_q][d_v], lse [b][h_q][s_q]. */
void sdpa_ref_naive_forward(const naive *nv, double *o, double *lse);
/* Central difference (step 1e-5) of the loss in x[idx], recomputing only the blocks
 * [b0, b1) x [h0, h1) it touches; o_tmp [s_q][d_v] and lse_tmp [s_q] are scratch. */
double sdpa_ref_fd(const naive *nv, const double *d_o, double *x, int64_t idx, int64_t b0, int64_t b1, int64_t h0,
                   int64_t h1, double *o_tmp, double *lse_tmp);

/* Checks an executed run against the naive formulas: O, stats, the dim order of outputs
 * frost created; for a backward case the gradients and a bitwise second execute. */
void sdpa_ref_check_run(run *r, void *ws);

#endif /* FROST_TEST_SDPA_REF_H */
