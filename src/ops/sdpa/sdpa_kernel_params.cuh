/*
 * sdpa_kernel_params.cuh — the parameter block of the CUDA SDPA forward kernel, shared by
 * the host (src/ops/sdpa/sdpa_cuda.c, C11) and the device (sdpa_fwd.cu, NVRTC).
 *
 * The struct is passed by value as the kernel's only argument (a __grid_constant__
 * parameter), so host and device must agree on its layout byte for byte.  Both sides see
 * the same declaration below; it holds only 8-byte pointers, int64_t, int32_t and float,
 * ordered from the widest down so that no compiler inserts padding, and its size is a
 * multiple of 8 (checked on the host by a static assert against SDPA_FWD_PARAMS_BYTES).
 *
 * The file ends in .cuh (not .h) because the CMake step embeds src/ops/ *.cuh into the
 * library: NVRTC finds it by file name when sdpa_fwd.cu includes it.
 *
 * Everything is forward-only and prefixed sdpa_fwd_ (the backward kernel has its own).
 * Strides are in elements; the (b, h, s) strides of Q, K, V and O are those of the
 * validated problem (src/ops/sdpa/sdpa.h).  For a ragged (THD) operand the batch stride is
 * unused: batch b starts at ragged[b] * stride_s.
 */
#ifndef FROST_SDPA_KERNEL_PARAMS_CUH
#define FROST_SDPA_KERNEL_PARAMS_CUH

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#include "frost_common.cuh"
#else
#include <stdint.h>
#endif

/* Bits of sdpa_fwd_params.flags. */
#define SDPA_FWD_MASK_LEFT 1          /* key j admissible only if j > c - left_bound */
#define SDPA_FWD_MASK_RIGHT 2         /* key j admissible only if j <= c + right_bound */
#define SDPA_FWD_ALIGN_BOTTOM_RIGHT 4 /* diagonal c = i + len_kv - len_q (else c = i) */
#define SDPA_FWD_VEC_IO 8             /* every row of Q, K, V, O starts 16-byte aligned */
#define SDPA_FWD_RAGGED_Q_I64 16      /* the ragged offsets are int64 (else int32) */
#define SDPA_FWD_RAGGED_K_I64 32
#define SDPA_FWD_RAGGED_V_I64 64
#define SDPA_FWD_RAGGED_O_I64 128

typedef struct sdpa_fwd_params {
    /* Pointers (device).  Optional ones are NULL when absent. */
    const void *q, *k, *v; /* I/O dtype */
    void *o;               /* I/O dtype */
    float *lse;            /* optional natural-log LSE, [b, h_q, s_q] */
    const void *bias;      /* optional, f32 or the I/O dtype (kernel key BIAS) */
    const float *sink;     /* optional, one logit per query head */
    const int32_t *seq_len_q, *seq_len_kv; /* optional per-batch lengths */
    const void *ragged_q, *ragged_k, *ragged_v, *ragged_o; /* optional [b + 1] offsets */

    /* Strides in elements, order (b, h, s). */
    int64_t q_stride[3], k_stride[3], v_stride[3], o_stride[3];
    int64_t lse_stride[3];
    int64_t bias_stride[4]; /* (b, h, s_q, s_kv); 0 where broadcast */
    int64_t sink_stride, seq_len_q_stride, seq_len_kv_stride;
    /* Band bounds, clamped on the host to at most 2^40 (wider is the same band). */
    int64_t left_bound, right_bound;

    int32_t s_q, s_kv;   /* the tensors' s dims (upper bounds of the actual lengths) */
    int32_t d_qk, d_v;   /* actual head dims (multiples of 8; the key's D_QK/D_V round up to 16) */
    int32_t kv_group;    /* h_q / h_kv */
    int32_t flags;       /* SDPA_FWD_* bits */
    float scale_log2;    /* scale * log2(e) */
    int32_t reserved;    /* keeps the size a multiple of 8 */
} sdpa_fwd_params;

/* 13 pointers, 3*4 + 3 + 4 + 3 + 2 int64, 8 four-byte fields. */
#define SDPA_FWD_PARAMS_BYTES (13 * 8 + 24 * 8 + 8 * 4)

/* Dynamic shared memory of one CTA, in bytes, for a tile configuration (16-bit elements):
 *   Q / O staging tile  BLOCK_M x (max(D_QK, D_V) + 8)
 *   K tiles (2 stages)  BLOCK_N x (D_QK + 8)
 *   V tiles (2 stages)  BLOCK_N x (D_V + 8)
 * The + 8 elements (16 bytes) per row keep ldmatrix free of bank conflicts. */
#define SDPA_FWD_MAX2(a, b) ((a) > (b) ? (a) : (b))
#define SDPA_FWD_SMEM_BYTES(block_m, block_n, d_qk, d_v)                                        \
    (2 * ((block_m) * (SDPA_FWD_MAX2(d_qk, d_v) + 8) + 2 * (block_n) * ((d_qk) + 8) +           \
          2 * (block_n) * ((d_v) + 8)))

#endif /* FROST_SDPA_KERNEL_PARAMS_CUH */
