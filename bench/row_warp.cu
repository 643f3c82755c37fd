/*
 * row_warp.cu - LayerNorm / RMSNorm forward (bf16 x, y, scale, bias; f32 mean and inv_std
 * saved, as frost-bench's training forward) on short rows with G lanes a row and nothing
 * else: no shared memory, no block barrier, no grid stride.  A stand-alone measurement of
 * what a dedicated short-row kernel gives against frost's general row kernel.
 *
 * A row group takes RPT rows, GROUPS = 128 / G apart, and loads them all at the top.
 * A lane holds NV 16-byte units of each row, units l, l + G, l + 2G, ... (so each of a row
 * group's NV loads is one contiguous run of G x 16 bytes), and loads them, its scale and
 * its bias units at the top, x with L1::no_allocate.  The row's sums are xor shuffles over
 * the G lanes: LayerNorm takes the mean, then the centred squares over the same registers
 * (the two-pass variance), RMSNorm the mean square.  A block is T threads (32 to 128)
 * holding RPT x T / G rows; the grid is one block per RPT x T / G rows.  Columns past the row's end (cols
 * not a multiple of 8 G NV) are masked per unit; cols must be a multiple of 8.
 *
 *   nvcc -arch=sm_90a -O3 -o row_warp bench/row_warp.cu && ./row_warp
 *
 * Prints the median of 50 launches (after 10 warm-ups; input sets rotated past twice the
 * L2) and GB/s counting x + y, after checking every row of the last launch's set against a
 * double-precision host reference (y, mean, inv_std).
 */
#include <algorithm>
#include <cmath>
#include <vector>

#include "standalone.cuh"

struct Params {
    const bf16 *x, *w, *b;
    bf16 *y;
    float *mean, *rstd;
    int rows, cols;
    float eps;
};

template <int G>
__device__ __forceinline__ float row_sum(float v)
{
#pragma unroll
    for (int off = G / 2; off > 0; off /= 2)
        v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

template <bool LN, int G, int NV, int RPT, int MINB, int T>
__global__ void __launch_bounds__(T, MINB) row_fwd(Params p)
{
    constexpr int GROUPS = T / G;
    const int lane = threadIdx.x % G, units = p.cols / 8;
    const int first = blockIdx.x * GROUPS * RPT + threadIdx.x / G;
    uint4 qx[RPT][NV], qw[NV], qb[NV];
#pragma unroll
    for (int r = 0; r < RPT; r++) {
        const int row = min(first + r * GROUPS, p.rows - 1); /* past the end: the last row, not stored */
        const bf16 *xr = p.x + (size_t)row * p.cols;
#pragma unroll
        for (int i = 0; i < NV; i++) {
            const int u = lane + i * G;
            qx[r][i] = u < units ? ldg_stream(xr + u * 8) : make_uint4(0, 0, 0, 0);
        }
    }
#pragma unroll
    for (int i = 0; i < NV; i++) {
        const int u = lane + i * G;
        qw[i] = u < units ? __ldg((const uint4 *)(p.w + u * 8)) : make_uint4(0, 0, 0, 0);
        if (LN)
            qb[i] = u < units ? __ldg((const uint4 *)(p.b + u * 8)) : make_uint4(0, 0, 0, 0);
    }
    const float inv_n = 1.0f / (float)p.cols;
#pragma unroll
    for (int r = 0; r < RPT; r++) {
        const int row = first + r * GROUPS;
        float mean = 0.0f, s = 0.0f;
        if (LN) {
#pragma unroll
            for (int i = 0; i < NV; i++) {
                float v[8];
                unpack8(qx[r][i], v);
#pragma unroll
                for (int e = 0; e < 8; e++)
                    s += v[e];
            }
            mean = row_sum<G>(s) * inv_n;
            s = 0.0f;
#pragma unroll
            for (int i = 0; i < NV; i++) {
                if (lane + i * G >= units)
                    continue;
                float v[8];
                unpack8(qx[r][i], v);
#pragma unroll
                for (int e = 0; e < 8; e++) {
                    const float d = v[e] - mean;
                    s = fmaf(d, d, s);
                }
            }
        } else {
#pragma unroll
            for (int i = 0; i < NV; i++) {
                float v[8];
                unpack8(qx[r][i], v);
#pragma unroll
                for (int e = 0; e < 8; e++)
                    s = fmaf(v[e], v[e], s);
            }
        }
        const float rstd = rsqrtf(row_sum<G>(s) * inv_n + p.eps);
        if (row >= p.rows)
            continue;
        if (lane == 0) {
            if (LN)
                p.mean[row] = mean;
            p.rstd[row] = rstd;
        }
        bf16 *yr = p.y + (size_t)row * p.cols;
#pragma unroll
        for (int i = 0; i < NV; i++) {
            const int u = lane + i * G;
            if (u >= units)
                continue;
            float v[8], w[8], b[8];
            unpack8(qx[r][i], v);
            unpack8(qw[i], w);
            if (LN)
                unpack8(qb[i], b);
#pragma unroll
            for (int e = 0; e < 8; e++)
                v[e] = LN ? fmaf((v[e] - mean) * rstd, w[e], b[e]) : v[e] * rstd * w[e];
            *(uint4 *)(yr + u * 8) = pack8(v);
        }
    }
}

typedef void (*Kern)(Params);

struct Case {
    bool ln;
    int rows, cols, g, nv, rpt, minb, threads;
    Kern k;
    const char *name;
};

int main()
{
    const Case cases[] = {
#define BOTH(rows, cols, g, nv, rpt, minb, t)                                                                         \
    {true, rows, cols, g, nv, rpt, minb, t, row_fwd<true, g, nv, rpt, minb, t>, "layernorm"},                      \
        {false, rows, cols, g, nv, rpt, minb, t, row_fwd<false, g, nv, rpt, minb, t>, "rmsnorm"}
        BOTH(262144, 128, 16, 1, 1, 8, 128),  BOTH(262144, 128, 16, 1, 4, 8, 128), BOTH(262144, 128, 16, 1, 8, 4, 128),
        BOTH(262144, 128, 8, 2, 4, 4, 128),   BOTH(262144, 128, 16, 1, 8, 16, 64), BOTH(262144, 128, 16, 1, 4, 32, 32),
        BOTH(16384, 1000, 32, 4, 1, 4, 128),  BOTH(16384, 1000, 32, 4, 2, 4, 128), BOTH(16384, 1000, 32, 4, 2, 2, 128),
        BOTH(16384, 1000, 32, 4, 1, 32, 32),  BOTH(16384, 1000, 32, 4, 1, 16, 64), BOTH(65536, 1024, 32, 4, 1, 4, 128),
        BOTH(65536, 1024, 32, 4, 2, 4, 128),  BOTH(65536, 1024, 32, 4, 2, 2, 128), BOTH(65536, 1024, 32, 4, 1, 32, 32),
        BOTH(65536, 1024, 32, 4, 1, 16, 64),
#undef BOTH
    };
    printf("%-10s %7s %5s %3s %3s %3s %5s %4s %4s %9s %8s %s\n", "op", "rows", "cols", "G", "NV", "RPT", "minb", "T",
           "regs", "us", "GB/s", "check");
    int bad = 0;
    for (const Case &cs : cases) {
        const size_t elems = (size_t)cs.rows * cs.cols, bytes = elems * 2;
        const int sets = (int)std::max<size_t>(3, (size_t)2 * 50 * 1024 * 1024 / (2 * bytes) + 1);
        std::vector<bf16 *> x(sets);
        for (int i = 0; i < sets; i++) {
            CHECK(cudaMalloc(&x[i], bytes));
            fill<<<1024, 256>>>(x[i], elems, 17u + i, 0.3f, 4.0f);
        }
        bf16 *y, *w, *b;
        float *mean, *rstd;
        CHECK(cudaMalloc(&y, bytes));
        CHECK(cudaMalloc(&w, cs.cols * 2));
        CHECK(cudaMalloc(&b, cs.cols * 2));
        CHECK(cudaMalloc(&mean, cs.rows * 4));
        CHECK(cudaMalloc(&rstd, cs.rows * 4));
        fill<<<8, 256>>>(w, cs.cols, 5u, 1.0f, 1.0f);
        fill<<<8, 256>>>(b, cs.cols, 7u, 0.0f, 0.5f);
        cudaFuncAttributes fa;
        CHECK(cudaFuncGetAttributes(&fa, cs.k));
        Params p = {nullptr, w, b, y, mean, rstd, cs.rows, cs.cols, 1e-5f};
        const int per_block = cs.threads / cs.g * cs.rpt, grid = (cs.rows + per_block - 1) / per_block;
        int last = 0;
        const float med = median_ms(
            60, 10, [&](int) { cs.k<<<grid, cs.threads>>>(p); },
            [&](int it) {
                last = it % sets;
                p.x = x[last];
            });
        std::vector<bf16> hx(elems), hy(elems), hw(cs.cols), hb(cs.cols);
        std::vector<float> hm(cs.rows), hr(cs.rows);
        CHECK(cudaMemcpy(hx.data(), x[last], bytes, cudaMemcpyDeviceToHost));
        CHECK(cudaMemcpy(hy.data(), y, bytes, cudaMemcpyDeviceToHost));
        CHECK(cudaMemcpy(hw.data(), w, cs.cols * 2, cudaMemcpyDeviceToHost));
        CHECK(cudaMemcpy(hb.data(), b, cs.cols * 2, cudaMemcpyDeviceToHost));
        CHECK(cudaMemcpy(hm.data(), mean, cs.rows * 4, cudaMemcpyDeviceToHost));
        CHECK(cudaMemcpy(hr.data(), rstd, cs.rows * 4, cudaMemcpyDeviceToHost));
        double worst = 0.0;
        for (int r = 0; r < cs.rows; r++) {
            const bf16 *xr = &hx[(size_t)r * cs.cols];
            double s = 0.0, s2 = 0.0;
            for (int c = 0; c < cs.cols; c++)
                s += __bfloat162float(xr[c]);
            const double mu = cs.ln ? s / cs.cols : 0.0;
            for (int c = 0; c < cs.cols; c++) {
                const double d = __bfloat162float(xr[c]) - mu;
                s2 += d * d;
            }
            const double rs = 1.0 / sqrt(s2 / cs.cols + 1e-5);
            if (cs.ln)
                worst = std::max(worst, fabs(hm[r] - mu) / (1.0 + fabs(mu)));
            worst = std::max(worst, fabs(hr[r] - rs) / rs);
            for (int c = 0; c < cs.cols; c++) {
                const double ref = (__bfloat162float(xr[c]) - mu) * rs * __bfloat162float(hw[c]) +
                                   (cs.ln ? __bfloat162float(hb[c]) : 0.0);
                worst = std::max(worst, fabs(__bfloat162float(hy[(size_t)r * cs.cols + c]) - ref) / (1.0 + fabs(ref)));
            }
        }
        const bool ok = worst < 1.6e-2;
        bad += !ok;
        printf("%-10s %7d %5d %3d %3d %3d %5d %4d %4d %9.2f %8.0f %s (%.1e)\n", cs.name, cs.rows, cs.cols, cs.g, cs.nv, cs.rpt,
               cs.minb, cs.threads,
               fa.numRegs, med * 1e3, 2.0 * bytes / (med * 1e-3) / 1e9, ok ? "ok" : "FAIL", worst);
        fflush(stdout);
        for (bf16 *q : x)
            CHECK(cudaFree(q));
        for (void *q : {(void *)y, (void *)w, (void *)b, (void *)mean, (void *)rstd})
            CHECK(cudaFree(q));
    }
    return bad ? 1 : 0;
}
