// kattn/backends/simd/gemm.hpp — small register-blocked matrix products for tiles.
//
//   gemm<Arch>(M, N, K, A, a_rs, a_cs, B, ldb, C, ldc, accumulate)
//       C[i, j] (+)= Σ_k A[i·a_rs + k·a_cs] · B[k·ldb + j]
//
// B and C are row-major; A is addressed through two strides, so Aᵀ·B (a_rs = 1,
// a_cs = lda) and A·B (a_rs = lda, a_cs = 1) share one kernel. The micro-kernel keeps a
// 4 × (2 batches) block of C in registers, broadcasting A and streaming rows of B; the
// k-loop runs in order 0..K−1 for every element, so results are independent of blocking
// and thread count.
#pragma once

// GCC 12 reports false -W(maybe-)uninitialized warnings inside its AVX-512 intrinsics once
// they are inlined here (GCC PR 105593); silence them for this header only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"


#include <xsimd/xsimd.hpp>

#include "../../core/config.hpp"


namespace kattn::detail {

template <class Arch, class T>
void gemm(index_t M, index_t N, index_t K, const T* A, index_t a_rs, index_t a_cs, const T* B, index_t ldb, T* C,
          index_t ldc, bool accumulate) {
    using V = xsimd::batch<T, Arch>;
    constexpr index_t W = V::size;
    constexpr index_t MR = 4;
    index_t i = 0;
    for (; i + MR <= M; i += MR) {
        const T* a0 = A + (i + 0) * a_rs;
        const T* a1 = A + (i + 1) * a_rs;
        const T* a2 = A + (i + 2) * a_rs;
        const T* a3 = A + (i + 3) * a_rs;
        index_t j = 0;
        for (; j + 2 * W <= N; j += 2 * W) {
            V c00(T(0)), c01(T(0)), c10(T(0)), c11(T(0)), c20(T(0)), c21(T(0)), c30(T(0)), c31(T(0));
            for (index_t k = 0; k < K; ++k) {
                const V b0 = V::load_unaligned(B + k * ldb + j);
                const V b1 = V::load_unaligned(B + k * ldb + j + W);
                const V x0(a0[k * a_cs]), x1(a1[k * a_cs]), x2(a2[k * a_cs]), x3(a3[k * a_cs]);
                c00 = xsimd::fma(x0, b0, c00); c01 = xsimd::fma(x0, b1, c01);
                c10 = xsimd::fma(x1, b0, c10); c11 = xsimd::fma(x1, b1, c11);
                c20 = xsimd::fma(x2, b0, c20); c21 = xsimd::fma(x2, b1, c21);
                c30 = xsimd::fma(x3, b0, c30); c31 = xsimd::fma(x3, b1, c31);
            }
            const V* cs[4][2] = {{&c00, &c01}, {&c10, &c11}, {&c20, &c21}, {&c30, &c31}};
            for (index_t r = 0; r < MR; ++r)
                for (index_t h = 0; h < 2; ++h) {
                    T* c = C + (i + r) * ldc + j + h * W;
                    (accumulate ? *cs[r][h] + V::load_unaligned(c) : *cs[r][h]).store_unaligned(c);
                }
        }
        for (; j + W <= N; j += W) {
            V c0(T(0)), c1(T(0)), c2(T(0)), c3(T(0));
            for (index_t k = 0; k < K; ++k) {
                const V b0 = V::load_unaligned(B + k * ldb + j);
                c0 = xsimd::fma(V(a0[k * a_cs]), b0, c0);
                c1 = xsimd::fma(V(a1[k * a_cs]), b0, c1);
                c2 = xsimd::fma(V(a2[k * a_cs]), b0, c2);
                c3 = xsimd::fma(V(a3[k * a_cs]), b0, c3);
            }
            const V* cs[4] = {&c0, &c1, &c2, &c3};
            for (index_t r = 0; r < MR; ++r) {
                T* c = C + (i + r) * ldc + j;
                (accumulate ? *cs[r] + V::load_unaligned(c) : *cs[r]).store_unaligned(c);
            }
        }
        for (; j < N; ++j)
            for (index_t r = 0; r < MR; ++r) {
                const T* a = A + (i + r) * a_rs;
                T s = 0;
                for (index_t k = 0; k < K; ++k) s += a[k * a_cs] * B[k * ldb + j];
                T& c = C[(i + r) * ldc + j];
                c = accumulate ? c + s : s;
            }
    }
    for (; i < M; ++i) {
        const T* a = A + i * a_rs;
        index_t j = 0;
        for (; j + W <= N; j += W) {
            V c0(T(0));
            for (index_t k = 0; k < K; ++k) c0 = xsimd::fma(V(a[k * a_cs]), V::load_unaligned(B + k * ldb + j), c0);
            T* c = C + i * ldc + j;
            (accumulate ? c0 + V::load_unaligned(c) : c0).store_unaligned(c);
        }
        for (; j < N; ++j) {
            T s = 0;
            for (index_t k = 0; k < K; ++k) s += a[k * a_cs] * B[k * ldb + j];
            T& c = C[i * ldc + j];
            c = accumulate ? c + s : s;
        }
    }
}

/// C = A·B (row-major A with leading dimension lda).
template <class Arch, class T>
void gemm_nn(index_t M, index_t N, index_t K, const T* A, index_t lda, const T* B, index_t ldb, T* C, index_t ldc,
             bool accumulate) {
    gemm<Arch>(M, N, K, A, lda, 1, B, ldb, C, ldc, accumulate);
}

/// C = Aᵀ·B where A is stored K × M row-major with leading dimension lda.
template <class Arch, class T>
void gemm_tn(index_t M, index_t N, index_t K, const T* A, index_t lda, const T* B, index_t ldb, T* C, index_t ldc,
             bool accumulate) {
    gemm<Arch>(M, N, K, A, 1, lda, B, ldb, C, ldc, accumulate);
}

/// dst (cols × rows) = srcᵀ for a rows × cols row-major src.
template <class T>
void transpose(index_t rows, index_t cols, const T* src, index_t lds, T* dst, index_t ldd) {
    for (index_t i = 0; i < rows; ++i)
        for (index_t j = 0; j < cols; ++j) dst[j * ldd + i] = src[i * lds + j];
}

}  // namespace kattn::detail

#pragma GCC diagnostic pop
