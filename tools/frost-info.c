/*
 * frost-info — what this frost build can do on this machine: the version, the engines,
 * the devices it can open (or why not), and which ops each engine supports.
 *
 * Usage: frost-info
 */
#include <stdio.h>

#include "frost/frost.h"

int main(void)
{
    printf("frost %s\n\n", frost_version());

    frost_context *cpu = NULL, *gpu = NULL;
    frost_context_options copt = {.kind = FROST_DEVICE_CPU};
    if (frost_context_create(&copt, &cpu) != FROST_OK) {
        fprintf(stderr, "cannot create a CPU context: %s\n", frost_last_error());
        return 1;
    }
    printf("devices:\n  cpu: %s\n", frost_context_device_name(cpu));
    frost_context_options gopt = {.kind = FROST_DEVICE_CUDA, .device_index = 0};
    frost_status s = frost_context_create(&gopt, &gpu);
    if (s == FROST_OK)
        printf("  cuda:0: %s\n", frost_context_device_name(gpu));
    else
        printf("  cuda: none (%s: %s)\n", frost_status_name(s), frost_last_error());

    printf("\nengines:");
    for (int e = 0; e < frost_engine_count(); e++)
        printf(" %s", frost_engine_name(e));
    printf("\n\nops (engine: coverage):\n");
    char text[1024];
    for (int op = 0; op < frost_op_count(); op++) {
        printf("  %s\n", frost_op_name(op));
        for (int e = 0; e < frost_engine_count(); e++) {
            const char *name = frost_engine_name(e);
            frost_context *ctx = name[0] == 'r' ? cpu : gpu;
            s = frost_engine_op_support(ctx, e, op, text, sizeof text);
            if (ctx == NULL && s == FROST_OK) /* no device: say what the engine would cover */
                printf("    %-5s %s (no device here)\n", name, text);
            else
                printf("    %-5s %s%s\n", name, s == FROST_OK ? "" : "not supported: ", text);
        }
    }
    frost_context_destroy(gpu);
    frost_context_destroy(cpu);
    return 0;
}
