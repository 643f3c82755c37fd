/*
 * norm_bwd_reduce.cu - the second step of the norm backward's parameter gradients: adds
 * the f32 partial rows that norm_bwd.cu's row groups wrote, in index order.
 *
 * Layout legend: partial[b][pos], b = 0..num_partials-1 (one row per row group of the main
 * kernel), pos = 0..positions-1 (a permutation of the columns, norm_kernel.cuh's
 * norm_reduce_params), rows partial_stride floats apart; out is d_scale or d_bias (f32,
 * unit stride in a row), blockIdx.y picks the pair (scale, bias).  Out row q (a parameter
 * row: one for LayerNorm / RMSNorm, one per sample for AdaLayerNorm's [B, 1, C]) is the
 * sum of the partial rows [q * partials_per_out, (q + 1) * partials_per_out); blockIdx.z
 * strides over the out rows.
 *
 * A block covers 32 positions with S slices of partial rows (REDUCE_SLICES: 8, 16 or 32,
 * norm_cuda_config.c): thread (slice s, position c) adds rows first + s, first + s + S, ...
 * in that order (a warp reads 32 consecutive floats per row: coalesced), then slice 0 adds
 * the S slice sums in slice order and writes the position's column.  The kernel is launched
 * early (a programmatic dependent launch) and waits for the main kernel before it reads.  The
 * order of every addition is fixed by the plan alone, so the result is bitwise
 * repeatable; an out row without partial rows (a backward over zero rows) is written as
 * zeros.
 */
#include "norm_kernel.cuh"

#define REDUCE_COLS 32
#ifndef REDUCE_SLICES
#define REDUCE_SLICES 8 /* a key define when the table (or FROST_NORM_TUNE rslices=) asks for another count */
#endif

extern "C" __global__ void __launch_bounds__(REDUCE_COLS * REDUCE_SLICES)
    norm_bwd_reduce_kernel(const __grid_constant__ norm_reduce_params p)
{
    __shared__ float slice_sum[REDUCE_SLICES][REDUCE_COLS + 1];
    const int c = threadIdx.x % REDUCE_COLS, slice = threadIdx.x / REDUCE_COLS;
    const int pos = blockIdx.x * REDUCE_COLS + c;
    const int lane = pos % p.lanes, kj = pos / p.lanes;
    const int col = ((kj / p.vec) * p.lanes + lane) * p.vec + kj % p.vec;
    const bool valid = pos < p.positions && col < p.cols;
    frost_wait_prior_grid(); /* launched early after the main kernel (norm_cuda.c) */
    const int pair = blockIdx.y;
    const float *src = p.partial[pair];
    /* the trip count depends on the block only: __syncthreads below is uniform */
    for (int64_t q = blockIdx.z; q < p.out_rows[pair]; q += gridDim.z) {
        const int64_t first = q * p.partials_per_out[pair];
        const int64_t last = first + p.partials_per_out[pair] < p.num_partials ? first + p.partials_per_out[pair]
                                                                                : p.num_partials;
        float s = 0.0f;
        if (valid) {
            const float *at = src + pos;
#pragma unroll 8
            for (int64_t r = first + slice; r < last; r += REDUCE_SLICES)
                s += at[r * p.partial_stride];
        }
        slice_sum[slice][c] = s;
        __syncthreads();
        if (slice == 0 && valid) {
            float t = slice_sum[0][c];
#pragma unroll
            for (int i = 1; i < REDUCE_SLICES; i++)
                t += slice_sum[i][c];
            p.out[pair][q * p.out_stride[pair] + col] = t;
        }
        __syncthreads();
    }
}
