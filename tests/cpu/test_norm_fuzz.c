/*
 * test_norm_fuzz.c — random descriptors for every normalization op (LayerNorm, RMSNorm,
 * AdaLayerNorm, GroupNorm, InstanceNorm, BatchNorm; forward and backward) on the CPU
 * context.  Shapes (empty dims and ranks out of range included), dtypes, strides (packed,
 * permuted with gaps, arbitrary, broadcast), parameter and statistics shapes, optional
 * tensors, a tensor passed twice or a stranger's id, and the scalar options (epsilon,
 * groups, phase, momentum) are drawn at random, most combinations invalid.
 *
 * Each call must answer OK, INVALID_ARGUMENT or NOT_SUPPORTED, and any refusal must carry a
 * message.  A graph that builds runs on guarded buffers (NaN margins and gaps, outputs
 * poisoned): the run must succeed, leave every guard element as it was, and write every
 * element of every output (finite inputs, epsilon > 0: no output element may stay NaN).
 * Under the CI's sanitizer build this is also the check that no descriptor makes the
 * validation, the planning or the reference kernels read or write out of bounds or leak.
 */
#include <stdlib.h>
#include <string.h>

#include "norm_fuzz_draw.h"

#define ITERS 1500 /* graphs per op and direction */

/* Inputs uniform in [-2, 2), running statistics in [0.05, 2): inference may take one
 * tensor for both, and a negative variance would leave y NaN. */
static void fill(tu_fuzz *f, const char *name, tu_buf *b)
{
    tu_buf_fill_uniform(b, f->r, strncmp(name, "running_", 8) ? -2.0 : 0.05, 2.0);
}

int main(void)
{
    const uint64_t seed = tu_seed(0x6e6f726d66757aULL);
    const int only = tu_case_filter();
    frost_context *ctx = NULL;
    TU_OK(frost_context_create(NULL, &ctx));
    int cases = 0, built = 0, ran = 0, ran_op[TU_NF_OPS][2] = {{0}};
    for (int op = 0; op < TU_NF_OPS && ctx; op++)
        for (int backward = 0; backward < 2; backward++)
            for (int it = 0; it < ITERS; it++) {
                const int index = (op * 2 + backward) * ITERS + it;
                if (only >= 0 && index != only)
                    continue;
                char what[96];
                snprintf(what, sizeof what, "%s %s, graph %d", tu_nf_op_names[op], backward ? "backward" : "forward",
                         it);
                tu_rng r = tu_rng_make(seed + (uint64_t)index * 0x9e3779b97f4a7c15ULL);
                tu_set_context("test_norm_fuzz", seed, index, what);
                tu_case_begin();
                tu_fuzz f = {.r = &r, .fill = fill};
                TU_OK(frost_graph_create(ctx, &f.g));
                frost_status s = tu_nf_add(&f, (tu_nf_op)op, backward);
                tu_fz_expect_refusal(s, what);
                if (s == FROST_OK && f.aliased)
                    tu_failf("%s: accepted X as one of its outputs", what);
                if (s == FROST_OK) {
                    const int done = tu_fz_build_and_run(&f, what);
                    built += done >= 0, ran += done > 0, ran_op[op][backward] += done > 0;
                }
                frost_graph_destroy(f.g);
                tu_case_end();
                cases++;
            }
    frost_context_destroy(ctx);
    printf("test_norm_fuzz: %d graphs, %d built, %d ran (forward / backward:", cases, built, ran);
    for (int op = 0; op < TU_NF_OPS; op++)
        printf(" %s %d / %d", tu_nf_op_names[op], ran_op[op][0], ran_op[op][1]);
    printf(")\n");
    /* the draws must reach every op's reference kernels, not only the validation */
    for (int op = 0; op < TU_NF_OPS && only < 0; op++)
        for (int backward = 0; backward < 2; backward++)
            if (ran_op[op][backward] < ITERS / 20)
                tu_failf("%s %s: only %d of %d graphs ran: the draws are too often invalid", tu_nf_op_names[op],
                         backward ? "backward" : "forward", ran_op[op][backward], ITERS);
    return tu_finish(cases);
}
