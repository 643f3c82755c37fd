/*
 * registry.c — the tables that tie ops and engines together: one row per op kind (its
 * class, defined in the op's folder) and one name per engine, plus the public
 * introspection calls built on them (frost_op_*, frost_engine_*).
 *
 * Adding an op: one folder under src/ops/ and one row here; the static assert below fails
 * the build if the enum and the table disagree.
 */
#include <stdio.h>
#include <string.h>

#include "core/internal.h"
#include "ops/norm/chan_norm.h"
#include "ops/norm/norm.h"
#include "ops/sdpa/sdpa.h"

const frost__op_class *const frost__op_classes[] = {
    [FROST__OP_SDPA_FWD] = &frost__sdpa_fwd_class,
    [FROST__OP_SDPA_BWD] = &frost__sdpa_bwd_class,
    [FROST__OP_LAYERNORM_FWD] = &frost__layernorm_fwd_class,
    [FROST__OP_LAYERNORM_BWD] = &frost__layernorm_bwd_class,
    [FROST__OP_RMSNORM_FWD] = &frost__rmsnorm_fwd_class,
    [FROST__OP_RMSNORM_BWD] = &frost__rmsnorm_bwd_class,
    [FROST__OP_GROUPNORM_FWD] = &frost__groupnorm_fwd_class,
    [FROST__OP_GROUPNORM_BWD] = &frost__groupnorm_bwd_class,
    [FROST__OP_INSTANCENORM_FWD] = &frost__instancenorm_fwd_class,
    [FROST__OP_INSTANCENORM_BWD] = &frost__instancenorm_bwd_class,
    [FROST__OP_BATCHNORM_FWD] = &frost__batchnorm_fwd_class,
    [FROST__OP_BATCHNORM_BWD] = &frost__batchnorm_bwd_class,
    [FROST__OP_ADALAYERNORM_FWD] = &frost__adalayernorm_fwd_class,
    [FROST__OP_ADALAYERNORM_BWD] = &frost__adalayernorm_bwd_class,
};
FROST__STATIC_ASSERT(FROST__ARRAY_SIZE(frost__op_classes) == FROST__OP_COUNT, "one op class per frost__op");

const char *const frost__engine_names[] = {
    [FROST__ENGINE_CUDA] = "cuda",
    [FROST__ENGINE_REF] = "ref",
};
FROST__STATIC_ASSERT(FROST__ARRAY_SIZE(frost__engine_names) == FROST__ENGINE_COUNT, "one name per engine");

int frost__engine_available(const frost_context *ctx, frost__engine_id e, frost__buf *why)
{
    switch (e) {
    case FROST__ENGINE_REF:
        if (ctx->kind == FROST_DEVICE_CPU)
            return 1;
        if (why)
            frost__buf_printf(why, "the reference engine runs on host memory; this is a CUDA context (use a CPU "
                                   "context for the reference engine)");
        return 0;
    case FROST__ENGINE_CUDA:
        if (ctx->kind == FROST_DEVICE_CUDA && ctx->device)
            return 1;
        if (why)
            frost__buf_printf(why, "runs only in a CUDA context; this is a CPU context");
        return 0;
    case FROST__ENGINE_COUNT:
        break;
    }
    return 0;
}

int frost_engine_count(void)
{
    return FROST__ENGINE_COUNT;
}

const char *frost_engine_name(int index)
{
    return index >= 0 && index < FROST__ENGINE_COUNT ? frost__engine_names[index] : NULL;
}

int frost_op_count(void)
{
    return FROST__OP_COUNT;
}

const char *frost_op_name(int index)
{
    return index >= 0 && index < FROST__OP_COUNT ? frost__op_classes[index]->name : NULL;
}

frost_status frost_engine_op_support(const frost_context *ctx, int engine_index, int op_index, char *buf, size_t cap)
{
    frost__clear_error();
    if (engine_index < 0 || engine_index >= FROST__ENGINE_COUNT)
        return frost__fail(FROST_INVALID_ARGUMENT, "frost_engine_op_support: engine index must be 0..%d, got %d",
                           FROST__ENGINE_COUNT - 1, engine_index);
    if (op_index < 0 || op_index >= FROST__OP_COUNT)
        return frost__fail(FROST_INVALID_ARGUMENT, "frost_engine_op_support: op index must be 0..%d, got %d",
                           FROST__OP_COUNT - 1, op_index);
    if (!buf && cap > 0)
        return frost__fail(FROST_INVALID_ARGUMENT, "frost_engine_op_support: buf is NULL but cap is %zu", cap);
    const frost__op_impl *impl = frost__op_classes[op_index]->impl[engine_index];
    frost__buf text = {0};
    frost_status s = FROST_OK;
    if (!impl || !impl->select) {
        frost__buf_printf(&text, "not implemented");
        s = FROST_NOT_SUPPORTED;
    } else if (ctx && !frost__engine_available(ctx, (frost__engine_id)engine_index, &text)) {
        s = FROST_NOT_SUPPORTED;
    } else {
        frost__buf_printf(&text, "%s", impl->coverage ? impl->coverage : "supported");
    }
    frost__buf_copy_out(&text, buf, cap);
    frost__buf_free(&text);
    return s;
}
