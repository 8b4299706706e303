// kattn/backends/tf32_tiles.cuh — what the CUDA backend's tensor-core kernels share (nvcc only).
//
// The kernels that keep a product on chip (projected_rows.cuh: U = X·Ω; chunk_outputs.cuh:
// the forward's scores and numerators; chunk_states.cuh: the causal block states; the single
// passes, causal_single_pass.cuh and causal_single_pass_grads.cuh) multiply float tiles with
// WMMA m16n16k8: inputs rounded to TF32, FP32 accumulation, on devices of compute capability
// 8.0 or newer.
//   tile_ld(n)            the leading dimension of a shared tile (shared_tiles.hpp)
//   tf32_a / tf32_at / tf32_b / tf32_bt / f32_acc
//                         the fragment types: A row-major, A column-major, B row-major,
//                         B column-major (the column-major ones read transposed operands),
//                         the FP32 accumulator
//   load_tf32(frag, p, ld)
//                         load_matrix_sync, then every element rounded to TF32
//   mma_tf32<TA, TB>(acc, a, lda, b, ldb, K)
//                         acc += op(A)·op(B), each operand read transposed or not; and
//   mma_tf32_rows(acc, a, lda, b, ldb, K)
//                         acc += A·B for row-major A (16 × K) and B (K × 16)
//   mma_tf32_at_b(acc, a, lda, b, ldb, K)
//                         acc += Aᵀ·B for row-major A (K × 16, read transposed) and B (K × 16)
//   mma_tf32_a_bt(acc, a, lda, b, ldb, K)
//                         acc += A·Bᵀ for row-major A (16 × K) and B (16 × K, read transposed)
// Each runs its depth in steps of 8 in order, so a product has the same bits wherever it is made.
#pragma once

#include <mma.h>

#include <type_traits>

#include "shared_tiles.hpp"

namespace kattn::detail {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
using tf32_a =
    nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 8, nvcuda::wmma::precision::tf32, nvcuda::wmma::row_major>;
using tf32_b =
    nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 8, nvcuda::wmma::precision::tf32, nvcuda::wmma::row_major>;
using tf32_bt =
    nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 8, nvcuda::wmma::precision::tf32, nvcuda::wmma::col_major>;
using tf32_at =
    nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 8, nvcuda::wmma::precision::tf32, nvcuda::wmma::col_major>;
using f32_acc = nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 8, float>;

/// A fragment from p (leading dimension ld elements, p 32-byte aligned), rounded to TF32.
template <class Fragment>
__device__ inline void load_tf32(Fragment& f, const float* p, int ld) {
    nvcuda::wmma::load_matrix_sync(f, p, unsigned(ld));
    for (int e = 0; e < f.num_elements; ++e) f.x[e] = nvcuda::wmma::__float_to_tf32(f.x[e]);
}

/// acc += op(A)·op(B) over depth K (a multiple of 8), in steps of 8 in order. A is 16 × K
/// row-major at a (leading dimension lda), or with TA its transpose stored K × 16; B is
/// K × 16 row-major at b (ldb), or with TB its transpose stored 16 × K.
template <bool TA, bool TB>
__device__ inline void mma_tf32(f32_acc& acc, const float* a, int lda, const float* b, int ldb, int K) {
    for (int k = 0; k < K; k += 8) {
        std::conditional_t<TA, tf32_at, tf32_a> fa;
        std::conditional_t<TB, tf32_bt, tf32_b> fb;
        load_tf32(fa, a + (TA ? k * lda : k), lda);
        load_tf32(fb, b + (TB ? k : k * ldb), ldb);
        nvcuda::wmma::mma_sync(acc, fa, fb, acc);
    }
}

/// acc += A·B: A's 16 rows of K at a, B's K rows of 16 at b (both row-major).
__device__ inline void mma_tf32_rows(f32_acc& acc, const float* a, int lda, const float* b, int ldb, int K) {
    mma_tf32<false, false>(acc, a, lda, b, ldb, K);
}

/// acc += Aᵀ·B: A's K rows of 16 at a, B's K rows of 16 at b (both row-major).
__device__ inline void mma_tf32_at_b(f32_acc& acc, const float* a, int lda, const float* b, int ldb, int K) {
    mma_tf32<true, false>(acc, a, lda, b, ldb, K);
}

/// acc += A·Bᵀ: A's 16 rows of K at a, B's 16 rows of K at b (both row-major).
__device__ inline void mma_tf32_a_bt(f32_acc& acc, const float* a, int lda, const float* b, int ldb, int K) {
    mma_tf32<false, true>(acc, a, lda, b, ldb, K);
}
#endif

}  // namespace kattn::detail
