/*
 * tile_pattern.cu - what the shape of a shared-memory tile costs in HBM, with nothing else
 * in the way: a copy of a 32x512x64x64 bf16 NHWC tensor (134 MB) through 64 KB tiles, 256
 * threads and 3 blocks an SM, a grid of 2048 tiles, loaded with cp.async and stored back from
 * shared memory, as the channel norms' cluster path (src/ops/norm/chan_norm_cluster.cu)
 * moves its tiles.  A tile is a window of `run` bytes of each of its pixels (a pixel is 1 KB:
 * 512 channels), so run = 1024 is one contiguous 64 KB block and run = 128 is a 64-channel
 * window, 512 pixels of 128 bytes at a 1 KB stride.
 *
 * order 0: consecutive blocks are the tiles of one window (as the blocks of one cluster);
 * order 1: consecutive blocks are the windows of the same pixels (their runs share lines
 * of HBM at about the same time).
 *
 *   nvcc -arch=sm_90a -O3 -o tile_pattern bench/tile_pattern.cu && ./tile_pattern
 *
 * Prints the median time of 50 copies (after 10 warm-ups, three buffer sets rotated, 805 MB
 * in all) and the rate counting bytes read plus written, then checks one set's copy.
 * docs/PERF.md (2026-12-04) has the H200's figures.
 */
#include <algorithm>
#include <vector>

#include "standalone.cuh"

constexpr int TILE = 64 * 1024, PIXEL = 1024, SAMPLE = 4096 * PIXEL, THREADS = 256;

__device__ __forceinline__ void cp_async16(void *smem, const void *gmem)
{
    asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16;" ::"r"((uint32_t)__cvta_generic_to_shared(smem)),
                 "l"(gmem)
                 : "memory");
}

__global__ void fill(uint32_t *p, size_t words, uint32_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < words; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 2654435761u ^ seed;
        h ^= h >> 15;
        p[i] = h * 2246822519u;
    }
}

__global__ void __launch_bounds__(THREADS, 3) copy_tiles(const uint8_t *x, uint8_t *y, int run, int order)
{
    extern __shared__ uint4 smem[];
    uint8_t *s = (uint8_t *)smem;
    const int rows = TILE / run, windows = PIXEL / run, ranks = SAMPLE / PIXEL / rows, b = blockIdx.x;
    const int k = order == 0 ? b % ranks : (b / windows) % ranks;
    const int w = order == 0 ? (b / ranks) % windows : b % windows;
    const size_t base = (size_t)(b / (ranks * windows)) * SAMPLE + (size_t)k * rows * PIXEL + (size_t)w * run;
    const int units = run / 16;
    for (int i = threadIdx.x; i < rows * units; i += THREADS)
        cp_async16(s + i * 16, x + base + (size_t)(i / units) * PIXEL + (i % units) * 16);
    asm volatile("cp.async.commit_group;\n\tcp.async.wait_group 0;" ::: "memory");
    __syncthreads();
    for (int i = threadIdx.x; i < rows * units; i += THREADS)
        *(uint4 *)(y + base + (size_t)(i / units) * PIXEL + (i % units) * 16) = *(const uint4 *)(s + i * 16);
}

int main()
{
    const size_t bytes = (size_t)32 * SAMPLE;
    const int sets = 3, grid = (int)(bytes / TILE);
    uint8_t *x[sets], *y[sets];
    for (int i = 0; i < sets; i++) {
        CHECK(cudaMalloc(&x[i], bytes));
        CHECK(cudaMalloc(&y[i], bytes));
        fill<<<1024, 256>>>((uint32_t *)x[i], bytes / 4, 17u + (uint32_t)i);
    }
    CHECK(cudaFuncSetAttribute(copy_tiles, cudaFuncAttributeMaxDynamicSharedMemorySize, TILE));
    printf("%6s %5s %9s %8s\n", "run", "order", "us", "GB/s");
    for (int run : {64, 128, 256, 512, 1024})
        for (int order = 0; order < (run < PIXEL ? 2 : 1); order++) {
            const float med = median_ms(60, 10, [&](int it) {
                copy_tiles<<<grid, THREADS, TILE>>>(x[it % sets], y[it % sets], run, order);
            });
            printf("%6d %5d %9.1f %8.0f\n", run, order, med * 1e3, 2.0 * bytes / (med * 1e-3) / 1e9);
        }
    std::vector<uint8_t> hx(bytes), hy(bytes);
    CHECK(cudaMemcpy(hx.data(), x[0], bytes, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(hy.data(), y[0], bytes, cudaMemcpyDeviceToHost));
    const bool same = hx == hy;
    printf("copy check: %s\n", same ? "ok" : "MISMATCH");
    return same ? 0 : 1;
}
