/*
 * norm_fuzz_draw.h — a random description of one normalization op (LayerNorm, RMSNorm,
 * AdaLayerNorm, GroupNorm, InstanceNorm, BatchNorm; forward or backward) added to a graph
 * through fuzz_util: shapes (empty dims and ranks out of range included), dtypes, strides,
 * parameter and statistics shapes, optional tensors, a tensor passed twice or a stranger's
 * id, and the scalar options (epsilon, groups, phase, momentum), most combinations invalid.
 * The draws depend only on the generator's state and frost's answers, so the same seed
 * describes the same op in a CPU context and in a CUDA one (test_norm_fuzz,
 * test_norm_fuzz_gpu).
 */
#ifndef FROST_TEST_NORM_FUZZ_DRAW_H
#define FROST_TEST_NORM_FUZZ_DRAW_H

#include "fuzz_util.h"

typedef enum tu_nf_op { TU_NF_LN, TU_NF_RMS, TU_NF_ADA, TU_NF_GN, TU_NF_IN, TU_NF_BN, TU_NF_OPS } tu_nf_op;
extern const char *const tu_nf_op_names[TU_NF_OPS];

/* Draws one op of kind `op` into f->g; the status of its add call (tensors it created are
 * recorded in f for binding). */
frost_status tu_nf_add(tu_fuzz *f, tu_nf_op op, int backward);

#endif /* FROST_TEST_NORM_FUZZ_DRAW_H */
