/* A program that uses an installed frost through its public header only: RMSNorm of one
 * row on the CPU context, checked against the formula. */
#include <frost/frost.h>
#include <math.h>
#include <stdio.h>

int main(void)
{
    frost_context *ctx = NULL;
    frost_graph *g = NULL;
    if (frost_context_create(NULL, &ctx) != FROST_OK || frost_graph_create(ctx, &g) != FROST_OK)
        return 1;
    frost_tensor_desc xd = {.name = "x", .dtype = FROST_F32, .rank = 2, .dims = {1, 4}};
    frost_tensor x = 0;
    frost_norm_desc nd = {.phase = FROST_NORM_INFERENCE};
    frost_norm_outputs out = {0};
    if (frost_graph_add_tensor(g, &xd, &x) != FROST_OK)
        return 1;
    nd.x = x;
    if (frost_graph_add_rmsnorm(g, &nd, &out) != FROST_OK || frost_graph_build(g, NULL) != FROST_OK) {
        fprintf(stderr, "%s\n", frost_last_error());
        return 1;
    }
    float hx[4] = {1, 2, 3, 4}, hy[4];
    size_t ws = 0;
    frost_graph_workspace_size(g, &ws);
    static char workspace[1 << 16];
    if (ws > sizeof workspace)
        return 1;
    frost_binding b[2] = {{x, hx}, {out.y, hy}};
    if (frost_graph_execute(g, b, 2, workspace, NULL) != FROST_OK) {
        fprintf(stderr, "%s\n", frost_last_error());
        return 1;
    }
    double rms = sqrt((1 + 4 + 9 + 16) / 4.0 + 1e-5);
    for (int i = 0; i < 4; i++)
        if (fabs(hy[i] - hx[i] / rms) > 1e-5)
            return 1;
    printf("consumer OK (frost %s)\n", frost_version());
    frost_graph_destroy(g);
    frost_context_destroy(ctx);
    return 0;
}
