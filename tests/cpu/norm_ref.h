/*
 * norm_ref.h — what test_norm_ref.c shares with its part norm_ref_validation.c.
 */
#ifndef FROST_TEST_NORM_REF_H
#define FROST_TEST_NORM_REF_H

#include "frost/frost.h"

enum { LN = 0, RMS = 1 }; /* LayerNorm, RMSNorm */

/* Every refusal of the four add functions, its status and a message naming the culprit;
 * then the accepted edge cases and the built-graph refusal. */
void norm_ref_validation_walk(frost_context *cpu);

#endif /* FROST_TEST_NORM_REF_H */
