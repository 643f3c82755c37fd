/*
 * norm_bwd_reduce.cu - the second step of the norm backward's parameter gradients: adds
 * the f32 partial rows that norm_bwd.cu's row groups wrote, in index order.
 *
 * Layout legend: partial[p][c], p = 0..num_partials-1 (one row per row group of the main
 * kernel), c = 0..cols-1, rows partial_stride floats apart; out[c] is d_scale or d_bias
 * (f32, unit stride).  blockIdx.y picks the pair (scale, bias).
 *
 * A block covers 32 columns with 8 slices of partial rows: thread (slice s, column c)
 * adds rows s, s + 8, s + 16, ... in that order (a warp reads 32 consecutive floats per
 * row: coalesced), then slice 0 adds the 8 slice sums in slice order.  The order of every
 * addition is fixed by (num_partials, cols) alone, so the result is bitwise repeatable;
 * num_partials = 0 writes zeros (a backward over zero rows).
 */
#include "norm_kernel.cuh"

#define REDUCE_COLS 32
#define REDUCE_SLICES 8

extern "C" __global__ void __launch_bounds__(REDUCE_COLS * REDUCE_SLICES)
    norm_bwd_reduce_kernel(const __grid_constant__ norm_reduce_params p)
{
    __shared__ float slice_sum[REDUCE_SLICES][REDUCE_COLS + 1];
    const int c = threadIdx.x % REDUCE_COLS, slice = threadIdx.x / REDUCE_COLS;
    const int col = blockIdx.x * REDUCE_COLS + c;
    const float *src = p.partial[blockIdx.y];
    float s = 0.0f;
    if (col < p.cols) {
        const float *at = src + col;
#pragma unroll 8
        for (int r = slice; r < p.num_partials; r += REDUCE_SLICES)
            s += at[(int64_t)r * p.partial_stride];
    }
    slice_sum[slice][c] = s;
    __syncthreads();
    if (slice == 0 && col < p.cols) {
        float t = slice_sum[0][c];
#pragma unroll
        for (int i = 1; i < REDUCE_SLICES; i++)
            t += slice_sum[i][c];
        p.out[blockIdx.y][col] = t;
    }
}
