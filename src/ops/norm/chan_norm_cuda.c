/* Placeholder until the CUDA channel-norm kernels land: the cuda engine refuses the ops. */
#include "ops/norm/chan_norm.h"

static frost_status placeholder_select(const frost_context *ctx, const frost__graph *g, const frost__node *n,
                                       void **plan, frost__buf *why)
{
    (void)ctx, (void)g, (void)n, (void)plan;
    frost__buf_printf(why, "cuda engine: channel-norm kernels are not built yet");
    return FROST_NOT_SUPPORTED;
}

const frost__op_impl frost__cnorm_fwd_cuda = {.select = placeholder_select, .coverage = "not yet"};
const frost__op_impl frost__cnorm_bwd_cuda = {.select = placeholder_select, .coverage = "not yet"};
