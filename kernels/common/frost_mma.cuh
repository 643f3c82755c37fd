/*
 * frost_mma.cuh — warp-level tensor-core and async-copy wrappers for sm_80+ (also used on
 * Hopper by the generic kernels): mma.sync m16n8k16 with f16 or bf16 operands and f32
 * accumulators, ldmatrix (plain and transposed), cp.async 16-byte copies with zero-fill.
 *
 * Fragment layout of mma.m16n8k16 (per lane, g = lane / 4, t = lane % 4):
 *   A (16x16, row-major): a[0] = (g, 2t..2t+1)   a[1] = (g+8, 2t..2t+1)
 *                         a[2] = (g, 2t+8..+9)   a[3] = (g+8, 2t+8..+9)
 *   B (16x8, "col"):      b[0] = (k=2t..2t+1, n=g)   b[1] = (k=2t+8..+9, n=g)
 *   C (16x8, f32):        c[0..1] = (g, 2t..2t+1)    c[2..3] = (g+8, 2t..2t+1)
 * Each 32-bit register holds two 16-bit values, the lower column in the low half.
 */
#ifndef FROST_MMA_CUH
#define FROST_MMA_CUH

#include "frost_common.cuh"

/* d += a * b for one m16n8k16 tile; FROST_MMA_BF16 selects bf16 operands, else f16. */
FROST_DEVICE void frost_mma_16816(float d[4], const uint32_t a[4], const uint32_t b[2])
{
#if defined(DTYPE_BF16)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

FROST_DEVICE uint32_t frost_smem_addr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* Four 8x8 16-bit matrices; lane l supplies the row address of row (l % 8) of matrix l / 8. */
FROST_DEVICE void frost_ldmatrix_x4(uint32_t r[4], const void *smem_row)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(frost_smem_addr(smem_row)));
}
FROST_DEVICE void frost_ldmatrix_x4_trans(uint32_t r[4], const void *smem_row)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(frost_smem_addr(smem_row)));
}
FROST_DEVICE void frost_ldmatrix_x2(uint32_t r[2], const void *smem_row)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(frost_smem_addr(smem_row)));
}
FROST_DEVICE void frost_ldmatrix_x2_trans(uint32_t r[2], const void *smem_row)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(frost_smem_addr(smem_row)));
}

/* 16-byte global->shared copy; src_bytes < 16 zero-fills the rest (0 = pure zero fill). */
FROST_DEVICE void frost_cp_async_16(void *smem_dst, const void *gmem_src, int src_bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(frost_smem_addr(smem_dst)), "l"(gmem_src),
                 "r"(src_bytes));
}
FROST_DEVICE void frost_cp_async_commit(void)
{
    asm volatile("cp.async.commit_group;");
}
/* Waits until at most n committed groups are still in flight. */
#define frost_cp_async_wait(n) asm volatile("cp.async.wait_group %0;" ::"n"(n))

/* ---- appended for the sdpa forward kernel (src/ops/sdpa/sdpa_fwd.cu) ---- */

/* 2^x on the SFU (ex2.approx.ftz.f32): 2^-inf = +0, relative error about 2^-22, subnormal
 * results flush to 0.  Softmax kernels that work in base 2 call it once per score. */
FROST_DEVICE float frost_exp2_approx(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

/* 16-byte shared-memory load and store, and 16-byte global store; every address must be
 * 16-byte aligned.  Kept as functions so that kernels hold no inline PTX of their own. */
FROST_DEVICE void frost_ld_shared_16(uint32_t r[4], const void *smem)
{
    asm volatile("ld.shared.v4.b32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(frost_smem_addr(smem))
                 : "memory");
}
FROST_DEVICE void frost_st_shared_16(void *smem, const uint32_t r[4])
{
    asm volatile("st.shared.v4.b32 [%0], {%1,%2,%3,%4};" ::"r"(frost_smem_addr(smem)), "r"(r[0]), "r"(r[1]),
                 "r"(r[2]), "r"(r[3])
                 : "memory");
}
FROST_DEVICE void frost_st_global_16(void *gmem, const uint32_t r[4])
{
    asm volatile("st.global.v4.b32 [%0], {%1,%2,%3,%4};" ::"l"(gmem), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
                 : "memory");
}

/* ---- appended for the sdpa backward kernels (src/ops/sdpa/sdpa_bwd.cu) ---- */

/* ---- Fragment loads from shared-memory tiles of 16-bit elements (warp scope) ------------
 * A tile is row-major with `ld` elements per row (ld*2 bytes a multiple of 16).  "[m][k]"
 * names what the rows and columns of the stored tile are in the product being formed.
 * Lane l of an ldmatrix.x4 addresses row (l % 8) of matrix l / 8; the helpers below pick
 * the matrices so that the registers come out in the fragment order of the layout comment
 * at the top of this file. */

/* A fragment (16x16) of a [m][k] tile at rows m0.., columns k0... */
FROST_DEVICE void frost_frag_a(uint32_t a[4], const uint16_t *tile, int ld, int m0, int k0)
{
    const int lane = threadIdx.x & 31;
    frost_ldmatrix_x4(a, tile + (m0 + (lane & 15)) * ld + k0 + (lane >> 4) * 8);
}
/* B fragments of two n8 tiles (n0.. and n0+8..) x k16 from a [n][k] tile (k contiguous). */
FROST_DEVICE void frost_frag_b_nk_x2(uint32_t b0[2], uint32_t b1[2], const uint16_t *tile, int ld, int n0, int k0)
{
    const int lane = threadIdx.x & 31, mat = lane >> 3;
    uint32_t r[4];
    frost_ldmatrix_x4(r, tile + (n0 + (lane & 7) + (mat >> 1) * 8) * ld + k0 + (mat & 1) * 8);
    b0[0] = r[0], b0[1] = r[1], b1[0] = r[2], b1[1] = r[3];
}
/* B fragment of one n8 tile x k16 from a [n][k] tile. */
FROST_DEVICE void frost_frag_b_nk(uint32_t b[2], const uint16_t *tile, int ld, int n0, int k0)
{
    const int lane = threadIdx.x & 15;
    frost_ldmatrix_x2(b, tile + (n0 + (lane & 7)) * ld + k0 + (lane >> 3) * 8);
}
/* B fragments of two n8 tiles (n0.., n0+8..) x k16 from a [k][n] tile (n contiguous). */
FROST_DEVICE void frost_frag_b_kn_x2(uint32_t b0[2], uint32_t b1[2], const uint16_t *tile, int ld, int k0, int n0)
{
    const int lane = threadIdx.x & 31, mat = lane >> 3;
    uint32_t r[4];
    frost_ldmatrix_x4_trans(r, tile + (k0 + (lane & 7) + (mat & 1) * 8) * ld + n0 + (mat >> 1) * 8);
    b0[0] = r[0], b0[1] = r[1], b1[0] = r[2], b1[1] = r[3];
}
/* B fragment of one n8 tile x k16 from a [k][n] tile. */
FROST_DEVICE void frost_frag_b_kn(uint32_t b[2], const uint16_t *tile, int ld, int k0, int n0)
{
    const int lane = threadIdx.x & 15;
    frost_ldmatrix_x2_trans(b, tile + (k0 + lane) * ld + n0);
}

#if defined(FROST_PACK2)
/* The f32 accumulators of two adjacent n8 tiles (columns 0-7 and 8-15) re-used as the A
 * fragment of a 16x16 operand, rounded to the I/O dtype (P and dS of attention). */
FROST_DEVICE void frost_frag_c_to_a(uint32_t a[4], const float c0[4], const float c1[4])
{
    a[0] = FROST_PACK2(c0[0], c0[1]);
    a[1] = FROST_PACK2(c0[2], c0[3]);
    a[2] = FROST_PACK2(c1[0], c1[1]);
    a[3] = FROST_PACK2(c1[2], c1[3]);
}
#endif

/* ---- Block-scope tile copy: global -> shared, 16-bit elements ---------------------------
 * Copies a rows x cols tile (cols a multiple of 8) into dst ([rows][ld]): element (r, c)
 * comes from src[r * row_stride + c * col_stride].  Rows >= valid_rows and columns >=
 * valid_cols (a multiple of 8) are zero-filled, so padding never feeds NaN or foreign
 * data into a product.  vec != 0: 16-byte cp.async per 8 elements (needs col_stride 1 and
 * 16-byte aligned rows; the caller commits and waits); else plain element loads (any
 * strides).  Threads tid = 0..nthreads-1 share the work; the caller synchronises. */
FROST_DEVICE void frost_tile_load_b16(uint16_t *dst, int ld, const uint16_t *src, int64_t row_stride,
                                      int64_t col_stride, int rows, int cols, int valid_rows, int valid_cols,
                                      int vec, int tid, int nthreads)
{
    const int chunks = cols >> 3;
    for (int idx = tid; idx < rows * chunks; idx += nthreads) {
        const int r = idx / chunks, c = (idx - r * chunks) * 8;
        uint16_t *d = dst + r * ld + c;
        const bool inside = r < valid_rows && c < valid_cols;
        if (vec) {
            frost_cp_async_16(d, inside ? src + r * row_stride + c : src, inside ? 16 : 0);
        } else {
            uint32_t w[4] = {0u, 0u, 0u, 0u};
            if (inside) {
                const uint16_t *s = src + r * row_stride + c * col_stride;
#pragma unroll
                for (int e = 0; e < 8; e++)
                    w[e >> 1] |= (uint32_t)s[e * col_stride] << (16 * (e & 1));
            }
            frost_st_shared_16(d, w);
        }
    }
}

#endif /* FROST_MMA_CUH */
