/*
 * chan_norm_validate.h — private to the channel norms (GroupNorm, InstanceNorm, BatchNorm):
 * what chan_norm.c's add functions share with chan_norm_validate.c, which checks the
 * tensors of one add call, creates the outputs the caller left to frost and appends the
 * node.  Layout legend and the decisions behind the checks: chan_norm.c's opening comment.
 */
#ifndef FROST_OPS_CHAN_NORM_VALIDATE_H
#define FROST_OPS_CHAN_NORM_VALIDATE_H

#include "ops/norm/chan_norm.h"

enum { FROST__CNORM_KIND_COUNT = 3 };

extern const char *const frost__cnorm_slot_names[FROST__CNORM_NUM_SLOTS];
extern const char *const frost__cnorm_kind_names[FROST__CNORM_KIND_COUNT]; /* "GroupNorm", ... */

/* What an add call is working on. */
typedef struct frost__cnorm_add {
    const char *fn; /* public function name, for messages */
    const char *op; /* "groupnorm_fwd", ... */
    frost__graph *g;
    frost__cnorm_problem *p;
    const frost__tensor *x;
    frost_tensor inputs[FROST__CNORM_NUM_SLOTS]; /* input ids (0 = absent) */
} frost__cnorm_add;

/* One output the call writes: the caller's request and, for a tensor frost creates, its
 * dtype, dims and strides (a caller's tensor is checked by its slot's shape rule). */
typedef struct frost__cnorm_out {
    int slot;
    frost_tensor *result; /* the caller's field: read as the request, written on success */
    frost_tensor id;
    frost_dtype dtype;
    int rank;
    int64_t dims[FROST_MAX_RANK];
    int64_t strides[FROST_MAX_RANK]; /* DATA only; the others are packed */
} frost__cnorm_out;

/* INVALID_ARGUMENT with the message prefixed by "fn: slot 'name': " (by "fn: " when t is NULL). */
frost_status frost__cnorm_bad(const frost__cnorm_add *a, int slot, const frost__tensor *t, const char *fmt, ...)
    FROST__PRINTF(4, 5);

/* Starts an add call: clears the error, checks graph, descriptor and output struct, and
 * allocates a->p (freed by the caller unless frost__cnorm_finish handed it to the graph). */
frost_status frost__cnorm_begin(frost__cnorm_add *a, frost_graph *graph, const char *fn, const char *op,
                                const void *desc, const void *outs);
/* Looks up an input id (0 = absent unless required) and records it in a->inputs. */
frost_status frost__cnorm_get_input(frost__cnorm_add *a, int slot, frost_tensor id, int required,
                                    const frost__tensor **out);
/* Checks X and fills the problem's n, c, spatial, groups and epsilon. */
frost_status frost__cnorm_setup_x(frost__cnorm_add *a, int num_groups, double epsilon, int computes_stats);
/* Checks an input's dtype (FROST_DTYPE_INVALID: f32 or X's dtype) and its slot's shape. */
frost_status frost__cnorm_check_input(frost__cnorm_add *a, int slot, const frost__tensor *t, frost_dtype want);
/* The statistics' rank and dims ([N, G], [N, C] or [C]); *why names them for messages. */
int frost__cnorm_stats_shape(const frost__cnorm_problem *p, int64_t *dims, const char **why);

/* Packed strides in the order of X's strides (for y and d_x that frost creates). */
void frost__cnorm_strides_like_x(const frost__tensor *x, int64_t *strides);
/* Fills one output's request; returns o so that DATA outputs can set its strides. */
frost__cnorm_out *frost__cnorm_out_spec(frost__cnorm_out *o, int slot, frost_tensor *result, frost_dtype dtype,
                                        int rank, const int64_t *dims);
/* Resolves the outputs, fills every slot's layout and appends the node (takes a->p). */
frost_status frost__cnorm_finish(frost__cnorm_add *a, frost__op op, frost__cnorm_out *outs, int num_outs);

#endif /* FROST_OPS_CHAN_NORM_VALIDATE_H */
