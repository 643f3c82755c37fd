/*
 * chan_norm_ref.h — what test_chan_norm_ref.c shares with its parts
 * chan_norm_ref_validation.c (the validation walk) and chan_norm_ref_checks.c (the naive
 * formulas and the forward / backward checks): the case, the tensors of a run and the
 * dense fp64 copies the checks work on.
 *
 * Layout legend: x is [N, C, S...], S = spatial = prod(S...), G groups; a set is what one
 * statistic covers: (n, g), (n, c) or (c).
 */
#ifndef FROST_TEST_CHAN_NORM_REF_H
#define FROST_TEST_CHAN_NORM_REF_H

#include "frost/frost.h"
#include "ref_test_util.h"

enum { GN = 0, IN = 1, BN = 2 }; /* GroupNorm, InstanceNorm, BatchNorm */
enum { NO_BWD, BWD_FORMULA, BWD_FD };
enum { T_X, T_SCALE, T_BIAS, T_Y, T_MEAN, T_RSTD, T_RMEAN, T_RVAR, T_DY, T_DX, T_DSCALE, T_DBIAS, T_COUNT };

extern const char *const chan_norm_ref_kind_names[3];       /* "groupnorm", ... (op names without _fwd / _bwd) */
extern const char *const chan_norm_ref_slot_names[T_COUNT]; /* "x", "scale", ... by T_* slot */

typedef struct cn_case {
    int kind;
    int rank;
    int64_t dims[5];
    int groups; /* GroupNorm */
    frost_dtype dtype;
    int scale, bias; /* 0 absent, 1 f32, 2 x's dtype */
    int full_param;  /* scale and bias as [1, C, 1, ...] instead of [C] */
    int zero_centered;
    int inference;
    int layout;
    int stats;   /* training forward writes mean and inv_std */
    int running; /* BatchNorm running statistics given */
    double momentum, epsilon;
    double offset; /* added to x, so there is a mean to remove */
    int backward;  /* NO_BWD, BWD_FORMULA, BWD_FD */
    int saved;     /* backward reads the forward's statistics */
    int given_out; /* y and d_x are caller tensors with their own gapped layout */
} cn_case;

/* One case being run: its sizes, its tensors by T_* slot and the running statistics. */
typedef struct run {
    const cn_case *c;
    int64_t N, C, S, G, sets;
    tu_slot t[T_COUNT];
    double *rm0, *rv0; /* running statistics before execute */
} run;

/* Dense fp64 copies of what the engine read: x, dy [(n*C + c)*S + s], w, b [c]; scratch. */
typedef struct dense {
    double *x, *dy, *w, *b, *acc, *got, *ref;
} dense;

/* frost_graph_add_{groupnorm,instancenorm,batchnorm}[_backward] by kind. */
frost_status chan_norm_ref_add_fwd(frost_graph *g, int kind, const frost_channel_norm_desc *d, frost_norm_outputs *o);
frost_status chan_norm_ref_add_bwd(frost_graph *g, int kind, const frost_channel_norm_backward_desc *d,
                                   frost_norm_grads *o);
/* Fails unless out, made by frost, is dense and keeps x's dim order (dims of size > 1). */
void chan_norm_ref_check_made_like_x(frost_graph *g, frost_tensor x, frost_tensor out, const char *what);

/* Every refusal of the six add functions, the accepted edges and the built-graph refusal. */
void chan_norm_ref_validation_walk(frost_context *cpu);

/* Channel ch of a per-channel tensor ([C] or [1, C, 1, ...]) in slot. */
double chan_norm_ref_chan_at(const run *R, int slot, int64_t ch);
/* Fills d's x, dy, w (the effective scale) and b from the executed run. */
void chan_norm_ref_load_dense(const run *R, dense *d);
/* y, saved mean / inv_std and the running statistics against the naive forward. */
void chan_norm_ref_check_forward(const run *R, dense *d);
/* d_x, d_scale and d_bias against the closed form or finite differences. */
void chan_norm_ref_check_backward(const run *R, dense *d);

#endif /* FROST_TEST_CHAN_NORM_REF_H */
