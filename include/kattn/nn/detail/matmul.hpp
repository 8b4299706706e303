// kattn/nn/detail/matmul.hpp — the three products of a dense layer on a GEMM policy (default
// the register-blocked simd_gemm; an attention layer passes its backend's), split over
// OpenMP threads in fixed 64-row blocks:
//   matmul     y[n, o]  (+)= x[n, i] · W[i, o]
//   matmul_bt  dx[n, i] (+)= dy[n, o] · W[i, o]ᵀ
//   matmul_tn  dW[i, o] (+)= x[n, i]ᵀ · dy[n, o]
// Every output element is one dot product in a fixed k order, so results are bitwise
// independent of the thread count.
#pragma once

#include <vector>

#include <xsimd/xsimd.hpp>

#include "../../linalg/gemm.hpp"
#include "../../core/config.hpp"
#include "namespace.hpp"

namespace kattn::nn::detail {

inline constexpr index_t matmul_block = 64;

template <class T, class Gemm = kattn::detail::simd_gemm<>>
void matmul(index_t n, index_t in, index_t out, const T* x, const T* W, T* y, bool accumulate = false) {
    const index_t blocks = (n + matmul_block - 1) / matmul_block;
#pragma omp parallel for schedule(dynamic, 1) if (blocks > 1 && n * in * out > 65536)
    for (index_t b = 0; b < blocks; ++b) {
        const index_t r0 = b * matmul_block, rn = std::min(matmul_block, n - r0);
        Gemm::template run<T>(rn, out, in, x + r0 * in, in, 1, W, out, y + r0 * out, out, accumulate);
    }
}

template <class T, class Gemm = kattn::detail::simd_gemm<>>
void matmul_bt(index_t n, index_t in, index_t out, const T* dy, const T* W, T* dx, bool accumulate = false) {
    // Wᵀ in a per-thread scratch buffer that only grows (no allocation per call).
    thread_local std::vector<T> wt;
    if (wt.size() < std::size_t(in * out)) wt.resize(std::size_t(in * out));
    kattn::detail::transpose(in, out, W, out, wt.data(), in);
    matmul<T, Gemm>(n, out, in, dy, wt.data(), dx, accumulate);
}

template <class T, class Gemm = kattn::detail::simd_gemm<>>
void matmul_tn(index_t n, index_t in, index_t out, const T* x, const T* dy, T* dW, bool accumulate = true) {
    constexpr index_t rb = 16;  // rows of dW per task
    const index_t blocks = (in + rb - 1) / rb;
#pragma omp parallel for schedule(dynamic, 1) if (blocks > 1 && n * in * out > 65536)
    for (index_t b = 0; b < blocks; ++b) {
        const index_t i0 = b * rb, ni = std::min(rb, in - i0);
        // A(i, k) = x[k·in + i0 + i]: a_rs = 1, a_cs = in.
        Gemm::template run<T>(ni, out, n, x + i0, 1, in, dy, out, dW + i0 * out, out, accumulate);
    }
}

}  // namespace kattn::nn::detail
