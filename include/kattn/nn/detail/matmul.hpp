// kattn/nn/detail/matmul.hpp — the three products of a dense layer on a GEMM policy (default
// the register-blocked simd_gemm; an attention layer passes its backend's), split over
// OpenMP threads in row blocks:
//   matmul     y[n, o]  (+)= x[n, i] · W[i, o]
//   matmul_bt  dx[n, i] (+)= dy[n, o] · W[i, o]ᵀ
//   matmul_tn  dW[i, o] (+)= x[n, i]ᵀ · dy[n, o]
// Every output element is one dot product in a fixed k order, so results are bitwise
// independent of the thread count.
#pragma once

#include <algorithm>
#include <vector>

#include <xsimd/xsimd.hpp>
#ifdef _OPENMP
#include <omp.h>
#endif

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

/// k rows per partial product of matmul_tn: dW is accumulated over [0, k_chunk), [k_chunk,
/// 2·k_chunk), … in that order, so a (k_chunk × 2 batches) panel of dy and the matching rows
/// of x stay in L1 and at most k_chunk rows (pages, for wide layers) are live per call. The
/// chunk is a constant: the sum order never depends on the thread count.
inline constexpr index_t matmul_tn_k_chunk = 64;

template <class T, class Gemm = kattn::detail::simd_gemm<>>
void matmul_tn(index_t n, index_t in, index_t out, const T* x, const T* dy, T* dW, bool accumulate = true) {
    // Rows of dW per task: 64 (each dy panel is reused by 8 register blocks), halved while
    // that leaves fewer than two tasks per thread. The row split does not change any sum.
    index_t rb = 64;
#ifdef _OPENMP
    const index_t threads = omp_get_max_threads();
#else
    const index_t threads = 1;
#endif
    while (rb > 8 && (in + rb - 1) / rb < 2 * threads) rb /= 2;
    const index_t blocks = (in + rb - 1) / rb;
#pragma omp parallel for schedule(dynamic, 1) if (blocks > 1 && n * in * out > 65536)
    for (index_t b = 0; b < blocks; ++b) {
        const index_t i0 = b * rb, ni = std::min(rb, in - i0);
        for (index_t k0 = 0; k0 < n || k0 == 0; k0 += matmul_tn_k_chunk) {
            const index_t nk = std::min(matmul_tn_k_chunk, n - k0);
            // A(i, k) = x[(k0 + k)·in + i0 + i]: a_rs = 1, a_cs = in.
            Gemm::template run<T>(ni, out, nk, x + k0 * in + i0, 1, in, dy + k0 * out, out, dW + i0 * out, out,
                                  accumulate || k0 > 0);
        }
    }
}

}  // namespace kattn::nn::detail
