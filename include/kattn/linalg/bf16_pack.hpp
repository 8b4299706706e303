// kattn/linalg/bf16_pack.hpp — float and bf16 rows into the layouts of the bf16 tile products.
//
// The bf16 products (gemm_amx.hpp) read A as bf16 rows (k contiguous) and B as *pairs*: one
// 32-bit word holds the bf16 values of rows 2p and 2p+1 of one column (the low half is the
// even row), so B is [⌈K/2⌉ × N] words. Float inputs are rounded to nearest, ties to even,
// as kattn::bf16 does (vcvtneps2bf16 also reads float subnormals as zero).
//
//   pack_pair_rows(R, N, X, ldx, P, ldp, KP)   P[p, j] = (X[2p, j], X[2p+1, j])   float → B
//   pair_columns(R, N, X, ldx, P, ldp, NR)     P[j, p] = (X[2p, j], X[2p+1, j])   bf16 Xᵀ → A
//   pack_rows(R, N, X, ldx, P, ldp)            P[r, c] = X[r, c]                   float → A
//   narrow_scaled_rows(R, N, X, ldx, s, O)     O[r, c] = X[r, c] · s[r]            float → bf16
// Everything the products read beyond the data (a missing odd row, columns up to the padded
// stride, pair rows up to KP, rows up to NR) is written as zero.
//
// The vector kernels exist where the compiler targets AVX512-BF16 by function attribute
// (GCC and clang on x86-64: KATTN_BF16_KERNELS is 1); they run only on CPUs that have it,
// which every CPU with AMX-BF16 does (gemm_amx.hpp checks both).
#pragma once

#include <algorithm>
#include <cstdint>

#include "../core/bfloat16.hpp"
#include "../core/config.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDACC__) && \
    !defined(KATTN_NO_BF16_KERNELS)
#define KATTN_BF16_KERNELS 1
#include <immintrin.h>
#else
#define KATTN_BF16_KERNELS 0
#endif

namespace kattn::detail {

/// P[j, p] = (X[2p, j], X[2p+1, j]) for R rows of N bf16 (row stride ldx); P is NR × ldp
/// words (NR ≥ N, ldp ≥ ⌈R/2⌉), zero beyond the data.
inline void pair_columns(index_t R, index_t N, const bf16* X, index_t ldx, std::uint32_t* P, index_t ldp, index_t NR) {
    const index_t KP = (R + 1) / 2;
    for (index_t p = 0; p < KP; ++p) {
        const bf16* a = X + 2 * p * ldx;
        const bf16* b = 2 * p + 1 < R ? a + ldx : nullptr;
        for (index_t j = 0; j < N; ++j)
            P[j * ldp + p] = std::uint32_t(a[j].bits) | (b ? std::uint32_t(b[j].bits) << 16 : 0u);
    }
    for (index_t j = 0; j < N; ++j) std::fill(P + j * ldp + KP, P + (j + 1) * ldp, 0u);
    std::fill(P + N * ldp, P + NR * ldp, 0u);
}

#if KATTN_BF16_KERNELS

namespace bf16_impl {

/// Mask of the first n (0 ≤ n ≤ 16) lanes.
[[gnu::target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")]] inline __mmask16 lanes(index_t n) {
    return __mmask16((1u << n) - 1u);
}

}  // namespace bf16_impl

/// P[p, j] = (X[2p, j], X[2p+1, j]) for R rows of N floats; P is KP × ldp words
/// (KP ≥ ⌈R/2⌉, ldp ≥ N), zero beyond the data.
[[gnu::target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")]] inline void pack_pair_rows(index_t R, index_t N,
                                                                                            const float* X, index_t ldx,
                                                                                            std::uint32_t* P,
                                                                                            index_t ldp, index_t KP) {
    // cvtne2ps gives [lo row's 16 | hi row's 16]; the permutation interleaves them.
    alignas(64) static constexpr short order[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                                    8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
    const __m512i idx = _mm512_load_si512(order);
    const index_t have = (R + 1) / 2;
    for (index_t p = 0; p < have; ++p) {
        const float* a = X + 2 * p * ldx;
        const float* b = 2 * p + 1 < R ? a + ldx : nullptr;
        std::uint32_t* out = P + p * ldp;
        for (index_t j = 0; j < ldp; j += 16) {
            const __mmask16 k = bf16_impl::lanes(std::clamp<index_t>(N - j, 0, 16));
            const __m512 lo = _mm512_maskz_loadu_ps(k, a + j);
            const __m512 hi = b ? _mm512_maskz_loadu_ps(k, b + j) : _mm512_setzero_ps();
            const __m512i both = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
            _mm512_mask_storeu_epi32(out + j, bf16_impl::lanes(std::min<index_t>(ldp - j, 16)),
                                     _mm512_permutexvar_epi16(idx, both));
        }
    }
    std::fill(P + have * ldp, P + KP * ldp, 0u);
}

/// P[r, c] = bf16(X[r, c]) for R rows of N floats, zero from column N to ldp (P: R × ldp bf16).
[[gnu::target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")]] inline void pack_rows(index_t R, index_t N,
                                                                                       const float* X, index_t ldx,
                                                                                       bf16* P, index_t ldp) {
    for (index_t r = 0; r < R; ++r) {
        const float* x = X + r * ldx;
        auto* out = reinterpret_cast<std::uint16_t*>(P + r * ldp);
        for (index_t j = 0; j < ldp; j += 16) {
            const index_t have = std::clamp<index_t>(N - j, 0, 16), room = std::min<index_t>(ldp - j, 16);
            const __m512 v = _mm512_maskz_loadu_ps(bf16_impl::lanes(have), x + j);
            const __m256i h = (__m256i)_mm512_cvtneps_pbh(v);
            _mm256_mask_storeu_epi16(out + j, bf16_impl::lanes(room), h);
        }
    }
}

/// O[r, c] = bf16(X[r, c] · s[r]) for R rows of N (strides ldx, ldo).
[[gnu::target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")]] inline void narrow_scaled_rows(
    index_t R, index_t N, const float* X, index_t ldx, const float* s, bf16* O, index_t ldo) {
    for (index_t r = 0; r < R; ++r) {
        const __m512 sc = _mm512_set1_ps(s[r]);
        auto* o = reinterpret_cast<std::uint16_t*>(O + r * ldo);
        for (index_t j = 0; j < N; j += 16) {
            const __mmask16 k = bf16_impl::lanes(std::min<index_t>(N - j, 16));
            const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, X + r * ldx + j), sc);
            _mm256_mask_storeu_epi16(o + j, k, (__m256i)_mm512_cvtneps_pbh(v));
        }
    }
}

#endif  // KATTN_BF16_KERNELS

}  // namespace kattn::detail
