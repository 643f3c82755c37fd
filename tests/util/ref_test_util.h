/*
 * ref_test_util.h — what the CPU reference-engine tests of the norm families
 * (test_norm_ref.c, test_adanorm_ref.c, test_chan_norm_ref.c) share on top of
 * test_util.h: declaring tensors, tensor slots with guarded buffers (allocate, bind,
 * guard-check, free), the bit-for-bit second-execute check, comparison with the failure
 * message, validation-walk expectations, central finite differences and the case loop.
 * test_sdpa_ref uses the comparison, the flat offsets and the finite differences.
 *
 * Layout legend: a "flat" index runs row-major over a tensor's logical dims.
 */
#ifndef FROST_TEST_REF_TEST_UTIL_H
#define FROST_TEST_REF_TEST_UTIL_H

#include <stdint.h>

#include "test_util.h"

/* Fisher-Yates shuffle of v[0..n) driven by r. */
void tu_shuffle(tu_rng *r, int *v, int n);
/* Adds a tensor (strides NULL or all 0: packed) and returns its id; a failure is recorded. */
frost_tensor tu_add(frost_graph *g, const char *name, frost_dtype dt, int rank, const int64_t *dims,
                    const int64_t *strides);
/* Element offset of the flat (row-major over dims) index f. */
int64_t tu_flat_off(const tu_buf *b, int64_t f);
/* The absolute floor of a comparison in dtype t: f16's smallest subnormal, else 1e-30. */
double tu_subnormal_floor(frost_dtype t);
/* Compares got with ref; on failure prints the worst element and records a failure. */
void tu_expect_close(const char *what, const double *got, const double *ref, int64_t n, double atol, double rtol);

/* Validation walks: `call` must return `status` with a message containing `needle`. */
void tu_expect_fail(frost_status got, frost_status want, const char *needle, const char *expr, int line);
#define TU_EXPECT(call, status, needle) tu_expect_fail((call), (status), (needle), #call, __LINE__)

/* dL/dv at *v by central differences with step h; *v is restored. */
double tu_central_diff(double *v, double h, double (*loss)(void *ctx), void *ctx);

/* Saved statistics are f32, so a backward that reads them works from a rounded mean and
 * inv_std, which moves the exact gradient; finite differences see the exact one.  For a
 * set with saved mean `mean` (saved_mean) and inv_std `rstd` (saved_rstd), the bound on how
 * far that rounding moves d_x of an element (its x_hat xh, g = dy w) given the set's means
 * mg = mean(g), mgx = mean(g x_hat), mabs_g = mean(|g|), and one element's term of
 * d_scale / d_bias (its dy).  In a well-spread set these are a few ulps; in a set whose
 * values nearly agree (x_hat = +-1 up to epsilon) the rounded mean dominates the gradient. */
double tu_norm_dx_slack(int saved_mean, int saved_rstd, double mean, double rstd, double xh, double g, double mg,
                        double mgx, double mabs_g);
double tu_norm_param_slack(int saved_mean, int saved_rstd, double mean, double rstd, double xh, double dy);
/* Forgives each |got[i] - ref[i]| its slack[i] (an error bound outside the engine's
 * control); NaN stays NaN. */
void tu_take_slack(double *got, const double *ref, const double *slack, int64_t n);

/* ---- a graph's tensors in guarded host buffers ---- */
typedef struct tu_slot {
    frost_tensor id; /* 0: absent */
    tu_buf buf;
} tu_slot;

/* Allocates a buffer for every present slot (as the graph describes it) and binds it;
 * returns the number of bindings written to bind. */
int tu_slots_alloc(frost_graph *g, tu_slot *slots, int count, frost_binding *bind);
/* Guard-checks every present slot, named by names[slot]. */
void tu_slots_guard_check(const tu_slot *slots, int count, const char *const *names);
void tu_slots_free(tu_slot *slots, int count);
/* Bytes of a buffer's whole allocation (guards included). */
size_t tu_alloc_bytes(const tu_buf *b);
/* For every present slot from `first` on except `skip`: poisons it, executes again and
 * fails unless the allocation holds the same bytes as after the first execute. */
void tu_slots_same_on_reexecute(frost_graph *g, const frost_binding *bind, int nb, void *ws, tu_slot *slots, int first,
                                int count, int skip, const char *const *names);

/* The case loop of a ref test: the validation walk (when given and no FROST_TEST_CASE is
 * set) and cases 0 .. num_cases-1, each wrapped in tu_case_begin / tu_case_end.  Returns
 * the number of cases run, for tu_finish. */
int tu_run_cases(frost_context *ctx, uint64_t seed, int num_cases, void (*validation_walk)(frost_context *ctx),
                 void (*run_one)(frost_context *ctx, int index, uint64_t seed));
/* The main of a ref test: creates the CPU context (also stored in *ctx, for a file that keeps
 * it), runs tu_run_cases on it with seed tu_seed(default_seed), destroys it and returns
 * tu_finish's exit code. */
int tu_ref_main(frost_context **ctx, uint64_t default_seed, int num_cases, void (*validation_walk)(frost_context *ctx),
                void (*run_one)(frost_context *ctx, int index, uint64_t seed));

#endif /* FROST_TEST_REF_TEST_UTIL_H */
