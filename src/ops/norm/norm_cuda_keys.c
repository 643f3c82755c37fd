/*
 * norm_cuda_keys.c — the kernel keys of the cuda norm engine that frost-precompile
 * compiles ahead of time: the keys the selector (norm_cuda.c) picks for typical problems
 * of LayerNorm, RMSNorm and AdaLayerNorm, forward and backward, plus the reduce kernel.
 *
 * Typical means: f32, f16 or bf16 I/O; hidden sizes 128 .. 32768 that models use; packed
 * rows; scale in f32 or the I/O dtype, with or without bias (AdaLayerNorm always with its
 * shift, parameters [B, 1, C]).  And, in bf16 with the scale in bf16, x and dY sliced
 * (rows in runs, ROW_LEVELS=2 keys: [16, 1024, cols] of a [16, 1025, cols] buffer).  Each
 * problem goes through the selector itself, so the list can never name a key that a real
 * build would not pick for that problem.
 */
#include <string.h>

#include "ops/norm/norm_cuda.h"
#include "runtime/runtime.h"

static void add_key(frost__kernel_key *keys, int cap, int *count, const frost__kernel_key *k)
{
    if (*count < cap)
        keys[*count] = *k;
    ++*count;
}

/* A typical problem for the key list: x [16, 1024, cols] (rows packed, or with sliced one
 * row short of 1025 apart in x and dY), scale in f32 or the I/O dtype, with or without bias;
 * ada: AdaLayerNorm with [16, 1, cols] parameters. */
static void key_problem(frost__norm_problem *p, int backward, int kind, int ada, frost_dtype io, int64_t cols,
                        int scale_f32, int with_bias, int sliced)
{
    static const int used_fwd[] = {FROST__NORM_X, FROST__NORM_Y, FROST__NORM_SCALE};
    static const int used_bwd[] = {FROST__NORM_X, FROST__NORM_D_Y, FROST__NORM_D_X, FROST__NORM_SCALE,
                                   FROST__NORM_D_SCALE};
    const int *used = backward ? used_bwd : used_fwd;
    const int nused = backward ? 5 : 3;
    memset(p, 0, sizeof *p);
    p->kind = kind ? FROST__NORM_RMS : FROST__NORM_LAYER;
    p->backward = backward;
    p->rows = 1 << 14;
    p->cols = cols;
    p->inner_rank = 1;
    p->outer_rank = 2;
    p->outer_dims[0] = 16, p->outer_dims[1] = 1024;
    for (int i = 0; i < nused; i++) {
        frost__norm_layout *l = &p->slot[used[i]];
        l->present = 1;
        l->dtype = used[i] == FROST__NORM_SCALE ? (scale_f32 ? FROST_F32 : io)
                   : used[i] == FROST__NORM_D_SCALE ? FROST_F32
                                                    : io;
        const int input = used[i] == FROST__NORM_X || used[i] == FROST__NORM_D_Y;
        if (used[i] != FROST__NORM_SCALE && used[i] != FROST__NORM_D_SCALE)
            l->outer_stride[0] = (sliced && input ? 1025 : 1024) * cols, l->outer_stride[1] = cols;
        l->inner_contiguous = 1;
    }
    if (with_bias)
        p->slot[backward ? FROST__NORM_D_BIAS : FROST__NORM_BIAS] =
            p->slot[backward ? FROST__NORM_D_SCALE : FROST__NORM_SCALE];
    for (int slot = 0; slot < FROST__NORM_NUM_SLOTS; slot++) {
        const int param = slot == FROST__NORM_SCALE || slot == FROST__NORM_BIAS || slot == FROST__NORM_D_SCALE ||
                          slot == FROST__NORM_D_BIAS;
        p->param_outer_dims[slot][0] = ada ? 16 : 1;
        p->param_outer_dims[slot][1] = 1;
        if (ada && param && p->slot[slot].present) {
            p->slot[slot].outer_stride[0] = cols;
            p->per_sample_params = 1;
        }
    }
}

int frost__norm_cuda_keys(frost__kernel_key *keys, int cap)
{
    static const int64_t common_cols[] = {128, 256, 512, 768, 1024, 1536, 2048, 2560, 3072, 4096,
                                          5120, 6144, 7168, 8192, 12288, 16384, 32768};
    static const frost_dtype dtypes[] = {FROST_F32, FROST_F16, FROST_BF16};
    int count = 0;
    /* variant 0: LayerNorm, 1: RMSNorm, 2: AdaLayerNorm (with bias only: its usual form) */
    for (int backward = 0; backward < 2; backward++)
        for (int variant = 0; variant < 3; variant++)
            for (size_t d = 0; d < FROST__ARRAY_SIZE(dtypes); d++)
                for (size_t c = 0; c < FROST__ARRAY_SIZE(common_cols); c++)
                    for (int scale_f32 = 0; scale_f32 < 2; scale_f32++)
                        for (int with_bias = variant == 2; with_bias < 2; with_bias++)
                            for (int sliced = 0; sliced < (dtypes[d] == FROST_BF16 && !scale_f32 ? 2 : 1); sliced++) {
                                frost__norm_problem p;
                                frost__kernel_key key;
                                frost__buf why = {0};
                                key_problem(&p, backward, variant == 1, variant == 2, dtypes[d], common_cols[c],
                                            scale_f32, with_bias, sliced);
                                if (frost__norm_cuda_key(&p, &key, &why) == FROST_OK)
                                    add_key(keys, cap, &count, &key);
                                frost__buf_free(&why);
                            }
    frost__kernel_key reduce;
    frost__key_init(&reduce, "src/ops/norm/norm_bwd_reduce.cu", "norm_bwd_reduce_kernel");
    add_key(keys, cap, &count, &reduce);
    return count;
}
