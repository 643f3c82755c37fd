/*
 * fuzz_util.h — random graph descriptions for the fuzz tests (tests/cpu/test_*_fuzz.c): a
 * tensor declared with random strides (packed, permuted with gaps, arbitrary, broadcast),
 * optional inputs and outputs drawn present, absent, AUTO, mis-shaped, of another dtype,
 * aliasing X or naming no tensor; the check that a call answers OK, INVALID_ARGUMENT or
 * NOT_SUPPORTED with a message; the explain report's sizing and truncation; and a run of a
 * built graph on guarded host buffers (guards untouched, no output element left NaN).
 */
#ifndef FROST_TEST_FUZZ_UTIL_H
#define FROST_TEST_FUZZ_UTIL_H

#include "test_util.h"

#define TU_FZ_MAX_TENSORS 16
#define TU_FZ_MAX_SPAN 20000 /* elements: larger graphs are built but not run */

typedef struct tu_fuzz tu_fuzz;
struct tu_fuzz {
    tu_rng *r;
    frost_graph *g;
    int nt;
    frost_tensor id[TU_FZ_MAX_TENSORS];
    int output[TU_FZ_MAX_TENSORS]; /* written by the op (checked for unwritten elements) */
    frost_tensor x;                /* the op's main input, once declared (offered as an output) */
    int aliased;                   /* an output slot was given x: the op must refuse */
    /* fills input `name` (NULL: uniform in [-2, 2)) */
    void (*fill)(tu_fuzz *f, const char *name, tu_buf *b);
    int data_may_be_invalid; /* execute may refuse the filled data (INVALID_ARGUMENT) */
    int wide_percent;        /* draws of real sizes, in percent (0: none, and nothing drawn for it):
                                norm_fuzz_draw one dim of X, test_sdpa_fuzz head dims and lengths */
};

int tu_fz_pick(tu_rng *r, int n);         /* [0, n) */
int tu_fz_chance(tu_rng *r, int percent); /* 1 with that probability */
/* A dim, mostly 1-16, sometimes 0, -1 or 2^40. */
int64_t tu_fz_small_dim(tu_rng *r);
/* f32, f16 or bf16, sometimes a dtype no op takes. */
frost_dtype tu_fz_io_dtype(tu_rng *r);
/* Records a failure unless s is OK, INVALID_ARGUMENT or NOT_SUPPORTED, or a refusal has
 * no message. */
void tu_fz_expect_refusal(frost_status s, const char *what);
/* Declares a tensor (strides at random; `order` the dim order, outermost first, for the
 * gapped strides, NULL: as given); FROST_TENSOR_NONE when refused. */
frost_tensor tu_fz_declare(tu_fuzz *f, const char *name, frost_dtype dt, int rank, const int64_t *dims,
                           const int *order, int output);
/* An optional input, absent with absent_percent. */
frost_tensor tu_fz_maybe_input(tu_fuzz *f, const char *name, frost_dtype dt, int rank, const int64_t *dims,
                               int absent_percent);
/* An output slot: none with none_percent, else AUTO or declared; sometimes f->x. */
frost_tensor tu_fz_maybe_output(tu_fuzz *f, const char *name, frost_dtype dt, int rank, const int64_t *dims,
                                int none_percent);
/* Records an output the op created (AUTO) for binding. */
void tu_fz_created(tu_fuzz *f, frost_tensor t);
/* The explain report: sized, truncated into 1-16 bytes, whole. */
void tu_fz_check_explain(const frost_graph *g, tu_rng *r, const char *what);
/* Runs the built graph on guarded buffers; returns 1 when it ran. */
int tu_fz_run(tu_fuzz *f, const char *what);
/* Explains, builds (options at random: the default, every candidate, the absent cuda
 * engine, an unknown engine), explains again and runs; returns -1 when the build refused,
 * else 1 when the graph ran and 0 when it did not. */
int tu_fz_build_and_run(tu_fuzz *f, const char *what);

/* The case loop of a fuzz test: `iters` draws of each of `kinds` kinds (kind-major), then
 * `wide_iters` of each with wide set, numbered on from the small ones; only
 * FROST_TEST_CASE's draw when it is set.  Each is one(ctx, seed, index, kind, it, wide)
 * between tu_case_begin and tu_case_end.  Returns the number of draws run. */
int tu_fz_cases(frost_context *ctx, uint64_t seed, int kinds, int iters, int wide_iters,
                void (*one)(frost_context *ctx, uint64_t seed, int index, int kind, int it, int wide));

/* ---- the cuda engine's planning, on the host ---- */
/* Every node of g through the cuda engine's select (its whole planning: it never compiles
 * nor touches a device) on two devices described here, an H200 (sm_90, index 0) and an
 * A100 (sm_80, index 1): each must plan, or refuse with NOT_SUPPORTED and a sentence.
 * check (NULL: none) sees each plan before it is released: the node's frost__op, its
 * problem, the plan and whether the device is sm_90.  Counts land in tu_fz_planned and
 * tu_fz_plan_refused, per device; returns the nodes planned on the sm_90 device. */
int tu_fz_check_cuda_plans(const frost_graph *g, const char *what,
                           void (*check)(int op, const void *problem, const void *plan, int sm90, const char *what));
extern int tu_fz_planned[2], tu_fz_plan_refused[2];

#endif /* FROST_TEST_FUZZ_UTIL_H */
