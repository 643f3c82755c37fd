/*
 * bench.h — what frost-bench.c shares with its part bench_run.c: the options, a case's
 * graph with the tensors to bind and how each is filled, the built state of a case
 * (rotated input sets, workspace) and its result; random data pools, memory on the device
 * (or the host with --cpu) and the timed runs.  Private to frost-bench.
 */
#ifndef FROST_TOOLS_BENCH_H
#define FROST_TOOLS_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "frost/frost.h"
#include "runtime/runtime.h"

#define MAX_T 16
#define MAX_SETS 256

typedef struct bopts {
    int runs, warmup, sets, device, list, explain, cpu, exact, check;
    uint64_t seed;
} bopts;

/* How a bound tensor is filled: random pool data, synthetic statistics, or not at all. */
enum { R_RANDOM, R_OUTPUT, R_LSE, R_MEAN, R_INVSTD };

typedef struct bgraph {
    frost_graph *g;
    int nt;
    frost_tensor id[MAX_T];
    int role[MAX_T];
    frost_dtype dt[MAX_T];
    int64_t span[MAX_T];
} bgraph;

typedef struct pools {
    void *p[16]; /* by dtype: POOL_ELEMS random values in [-1, 1) */
} pools;

typedef struct bresult {
    frost_status status;
    char reason[512];
    double ms, ms_min;
    int runs, sets, nonfinite;
    /* --check: 1 passed, -1 failed, 0 not run; the worst tensor's error and name */
    int check;
    double check_err;
    char check_tensor[64];
} bresult;

typedef struct bstate { /* one built case: its graph, rotated input sets and workspace */
    const frost__device *dev;
    bgraph bg;
    void *ptr[MAX_SETS][MAX_T], *ws;
    int nsets;
} bstate;

/* A value in [-1, 1) from a splitmix64 state. */
float bench_rng_unit(uint64_t *s);
/* Device memory, or host memory when dev is NULL (--cpu). */
frost_status bench_mem_alloc(const frost__device *dev, size_t bytes, void **p);
/* Copies host memory to dst on the device (or the host when dev is NULL). */
frost_status bench_copy_in(const frost__device *dev, void *dst, const void *src, size_t bytes);
/* Copies device memory (host memory when dev is NULL) to the host. */
frost_status bench_copy_out(const frost__device *dev, void *dst, const void *src, size_t bytes);
/* Records a failure: its status and "where: frost's last error" on one line. */
void bench_fail(bresult *r, frost_status s, const char *where);

/* Bytes of bound tensor i: its element span in its dtype. */
static inline size_t bench_bytes(const bgraph *bg, int i)
{
    return (size_t)bg->span[i] * frost_dtype_size(bg->dt[i]);
}
/* Reads every bound tensor's resolved dims and strides: element span and dtype. */
frost_status bench_resolve(bgraph *bg);
/* Random tensor of n elements: copies from a random position of the pool, wrapping around. */
frost_status bench_fill_random(const frost__device *dev, pools *pl, void *dst, frost_dtype dt, int64_t n,
                               uint64_t *rng);

/* Times a set-up case: a probe run sizes the warm-up (>= 100 ms) and the timed runs
 * (>= 50 ms) unless --exact; writes the median, the minimum and the count of non-finite
 * output elements to r (or the failure). */
void bench_measure(bstate *st, const bopts *o, bresult *r);
/* --check's comparison of one tensor: the largest |got - ref| over the largest |ref| (0 when
 * ref is all zeros and got equals it), or INFINITY when NaN stands where the other has a
 * number (an element not written, or a non-finite result). */
double bench_rel_err(const void *got, const void *ref, frost_dtype dt, int64_t n);
/* The error --check allows a tensor of dtype dt: 2^-6 for 16-bit data, 1e-3 for f32. */
double bench_check_tol(frost_dtype dt);
/* Frees the input sets, the workspace, the graph and st itself. */
void bench_state_free(bstate *st);

#endif /* FROST_TOOLS_BENCH_H */
