/*
 * context.c — where graphs run: the CPU (reference engine on host memory) or one CUDA
 * device (frost's kernels on device memory).  A CUDA context opens the driver and NVRTC
 * through the runtime layer; without them creation fails with NO_DEVICE and says what was
 * missing, while CPU contexts keep working.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "runtime/runtime.h"

frost_status frost_context_create(const frost_context_options *opt, frost_context **out)
{
    frost__clear_error();
    if (!out)
        return frost__fail(FROST_INVALID_ARGUMENT, "frost_context_create: out is NULL");
    *out = NULL;
    frost_context_options o = {0};
    if (opt)
        o = *opt;
    if (o.kind != FROST_DEVICE_CPU && o.kind != FROST_DEVICE_CUDA)
        return frost__fail(FROST_INVALID_ARGUMENT,
                           "frost_context_create: options.kind must be FROST_DEVICE_CPU (0) or FROST_DEVICE_CUDA (1), "
                           "got %d",
                           (int)o.kind);
    if (o.device_index < 0)
        return frost__fail(FROST_INVALID_ARGUMENT,
                           "frost_context_create: options.device_index must be >= 0, got %d", o.device_index);
    frost_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return frost__fail(FROST_OUT_OF_MEMORY, "frost_context_create: out of host memory");
    ctx->kind = o.kind;
    ctx->device_index = o.device_index;
    if (o.kind == FROST_DEVICE_CPU) {
        snprintf(ctx->name, sizeof ctx->name, "cpu (reference engine)");
    } else {
        frost_status s = frost__device_open(o.device_index, &ctx->device);
        if (s != FROST_OK) {
            free(ctx);
            return s; /* message set by the runtime */
        }
        const frost__device *d = ctx->device;
        snprintf(ctx->name, sizeof ctx->name, "%s, %s, %d SMs, %zu KiB shared memory per block, %zu MiB L2", d->name,
                 d->arch, d->sm_count, d->smem_per_block_optin / 1024, d->l2_bytes >> 20);
    }
    *out = ctx;
    return FROST_OK;
}

void frost_context_destroy(frost_context *ctx)
{
    if (!ctx)
        return;
    if (ctx->device)
        frost__device_close(ctx->device);
    free(ctx);
}

const char *frost_context_device_name(const frost_context *ctx)
{
    return ctx ? ctx->name : "";
}
