/* Placeholder until the CUDA sdpa backward kernels land: the cuda engine refuses the op. */
#include "ops/sdpa/sdpa.h"

static frost_status placeholder_select(const frost_context *ctx, const frost__graph *g, const frost__node *n,
                                       void **plan, frost__buf *why)
{
    (void)ctx, (void)g, (void)n, (void)plan;
    frost__buf_printf(why, "cuda engine: sdpa backward kernels are not built yet");
    return FROST_NOT_SUPPORTED;
}

const frost__op_impl frost__sdpa_bwd_cuda = {.select = placeholder_select, .coverage = "not yet"};
