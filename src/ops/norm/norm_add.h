/*
 * norm_add.h — the checking kit behind the LayerNorm, RMSNorm and AdaLayerNorm add
 * functions (norm.c), implemented in norm_add.c.  Private to src/ops/norm/.
 *
 * An add call works on one frost__norm_add: the caller's graph, the problem being filled,
 * X, and the ids of the inputs seen so far (outputs may not alias them).  The kit checks
 * one tensor at a time and fails with INVALID_ARGUMENT naming the tensor, the dim, what
 * was expected and what was given.  Outputs are described first (frost__norm_out) and
 * resolved together by frost__norm_finish, which validates every caller-provided output
 * before it creates a single tensor, so a refused call leaves the graph as it was.
 *
 * Parameter shapes (scale, bias, d_scale, d_bias) follow one of two rules, picked by
 * frost__norm_add.ada:
 *   LayerNorm / RMSNorm: rank norm_dims, or rank(X) with leading 1s; trailing dims = C...
 *   AdaLayerNorm:        rank(X); each outer dim 1 or X's; trailing dims = C...
 */
#ifndef FROST_OPS_NORM_ADD_H
#define FROST_OPS_NORM_ADD_H

#include "ops/norm/norm.h"

extern const char *const frost__norm_slot_names[FROST__NORM_NUM_SLOTS];

/* What an add call is working on. */
typedef struct frost__norm_add {
    const char *fn; /* public function name, for messages */
    const char *op; /* "rmsnorm_fwd", ..., the prefix of created tensors' names */
    frost__graph *g;
    frost__norm_problem *p; /* owned by the call until finish hands it to the graph */
    const frost__tensor *x;
    int ada;                                    /* AdaLayerNorm parameter rule */
    frost_tensor inputs[FROST__NORM_NUM_SLOTS]; /* input ids (0 = absent), for aliasing */
} frost__norm_add;

/* One output the call writes: what the caller asked for and what it must look like. */
typedef struct frost__norm_out {
    int slot;
    frost_tensor *result; /* the caller's field: read as the request, written on success */
    frost_tensor id;      /* resolved id (existing or created) */
    frost_dtype dtype;
    int rank;
    int64_t dims[FROST_MAX_RANK];
    int param_shaped; /* a user tensor may take any parameter shape (rank and dims follow the rule) */
    const char *why;  /* where the expected dims come from, for messages */
} frost__norm_out;

/* Clears the error, checks graph / descriptor / output struct and allocates the problem. */
frost_status frost__norm_add_begin(frost__norm_add *a, frost_graph *graph, const char *fn, const char *op,
                                   const void *desc, const void *outs);
/* Looks up an input; id 0 is "absent" (an error when required). */
frost_status frost__norm_get_input(frost__norm_add *a, int slot, frost_tensor id, int required,
                                   const frost__tensor **out);
/* Resolves norm_dims (0 -> 1) and epsilon (0 -> 1e-5), checks X, splits its dims. */
frost_status frost__norm_setup_x(frost__norm_add *a, int norm_dims, double epsilon);
/* Scale or bias input: the parameter shape rule, dtype f32 or X's. */
frost_status frost__norm_check_param_input(frost__norm_add *a, int slot, const frost__tensor *t);
/* d_y: X's dims and dtype. */
frost_status frost__norm_check_like_x(frost__norm_add *a, int slot, const frost__tensor *t);
/* Saved mean / inv_std given to a backward: f32 with X's dims, normalized dims 1. */
frost_status frost__norm_check_stats_input(frost__norm_add *a, int slot, const frost__tensor *t);
/* X's dims with the normalized dims set to 1 (the statistics' dims). */
void frost__norm_stats_dims(const frost__norm_add *a, int64_t *dims);
#define FROST__NORM_STATS_WHY "x's dims with the normalized dims set to 1"

/* Fills an output description (dims copied). */
void frost__norm_out_spec(frost__norm_out *o, int slot, frost_tensor *result, frost_dtype dtype, int rank,
                          const int64_t *dims, int param_shaped, const char *why);
/* Checks the caller's outputs, creates the missing ones (0 or AUTO), fills every slot's
 * layout, appends the node and writes the ids back.  Takes the problem from a->p (a->p is
 * NULL afterwards, on success and failure). */
frost_status frost__norm_finish(frost__norm_add *a, frost__op op, frost__norm_out *outs, int num_outs);

#endif /* FROST_OPS_NORM_ADD_H */
