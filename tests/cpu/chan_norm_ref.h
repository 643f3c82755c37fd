/*
 * chan_norm_ref.h — what test_chan_norm_ref.c shares with its part
 * chan_norm_ref_validation.c.
 */
#ifndef FROST_TEST_CHAN_NORM_REF_H
#define FROST_TEST_CHAN_NORM_REF_H

#include "frost/frost.h"

enum { GN = 0, IN = 1, BN = 2 }; /* GroupNorm, InstanceNorm, BatchNorm */

extern const char *const chan_norm_ref_kind_names[3]; /* "groupnorm", ... (op names without _fwd / _bwd) */

/* frost_graph_add_{groupnorm,instancenorm,batchnorm}[_backward] by kind. */
frost_status chan_norm_ref_add_fwd(frost_graph *g, int kind, const frost_channel_norm_desc *d, frost_norm_outputs *o);
frost_status chan_norm_ref_add_bwd(frost_graph *g, int kind, const frost_channel_norm_backward_desc *d,
                                   frost_norm_grads *o);
/* Fails unless out, made by frost, is dense and keeps x's dim order (dims of size > 1). */
void chan_norm_ref_check_made_like_x(frost_graph *g, frost_tensor x, frost_tensor out, const char *what);

/* Every refusal of the six add functions, the accepted edges and the built-graph refusal. */
void chan_norm_ref_validation_walk(frost_context *cpu);

#endif /* FROST_TEST_CHAN_NORM_REF_H */
