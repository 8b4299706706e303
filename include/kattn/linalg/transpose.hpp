// kattn/linalg/transpose.hpp — vectorised out-of-place transpose for the simd backend.
//
//   transpose_simd<Arch>(rows, cols, src, lds, dst, ldd):  dst (cols × rows) = srcᵀ
//
// The causal tiles transpose a tile's key features (64 × F) and the running state
// (F × d_v) once per tile; element by element that was a tenth of a causal backward.
// Where the instruction set has AVX (every AVX2 and AVX-512 architecture of xsimd), the
// interior is moved in 8 × 8 (float) or 4 × 4 (double) register blocks with the
// unpack/shuffle/permute network (xsimd's AVX-512 tags do not derive from avx, so
// both families are named); the edges, and every other architecture, use the
// blocked scalar transpose of linalg/gemm.hpp. A transpose only moves values, so the
// result is bitwise the same on every path.
#pragma once

#include "../core/warnings_push.hpp"  // GCC PR 105593: false -Wmaybe-uninitialized in AVX-512 intrinsics

#include <type_traits>

#include <xsimd/xsimd.hpp>

#include "../core/config.hpp"
#include "gemm.hpp"

#if XSIMD_WITH_AVX
#include <immintrin.h>
#endif

namespace kattn::detail {

#if XSIMD_WITH_AVX
/// One 8 × 8 float block: dst[j][i] = src[i][j].
[[gnu::always_inline]] inline void transpose_block8(const float* src, index_t lds, float* dst, index_t ldd) {
    __m256 r[8], t[8], u[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * lds);
#pragma GCC unroll 4
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
#pragma GCC unroll 2
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
        _mm256_storeu_ps(dst + i * ldd, _mm256_permute2f128_ps(u[i], u[i + 4], 0x20));
        _mm256_storeu_ps(dst + (i + 4) * ldd, _mm256_permute2f128_ps(u[i], u[i + 4], 0x31));
    }
}

/// One 4 × 4 double block: dst[j][i] = src[i][j].
[[gnu::always_inline]] inline void transpose_block4(const double* src, index_t lds, double* dst, index_t ldd) {
    const __m256d r0 = _mm256_loadu_pd(src), r1 = _mm256_loadu_pd(src + lds), r2 = _mm256_loadu_pd(src + 2 * lds),
                  r3 = _mm256_loadu_pd(src + 3 * lds);
    const __m256d t0 = _mm256_unpacklo_pd(r0, r1), t1 = _mm256_unpackhi_pd(r0, r1), t2 = _mm256_unpacklo_pd(r2, r3),
                  t3 = _mm256_unpackhi_pd(r2, r3);
    _mm256_storeu_pd(dst, _mm256_permute2f128_pd(t0, t2, 0x20));
    _mm256_storeu_pd(dst + ldd, _mm256_permute2f128_pd(t1, t3, 0x20));
    _mm256_storeu_pd(dst + 2 * ldd, _mm256_permute2f128_pd(t0, t2, 0x31));
    _mm256_storeu_pd(dst + 3 * ldd, _mm256_permute2f128_pd(t1, t3, 0x31));
}
#endif

template <class Arch, class T>
void transpose_simd(index_t rows, index_t cols, const T* src, index_t lds, T* dst, index_t ldd) {
#if XSIMD_WITH_AVX
    constexpr bool avx = std::is_base_of_v<xsimd::avx, Arch> || std::is_base_of_v<xsimd::avx512f, Arch>;
    if constexpr (avx && (std::is_same_v<T, float> || std::is_same_v<T, double>)) {
        constexpr index_t B = std::is_same_v<T, float> ? 8 : 4;
        const index_t rb = rows - rows % B, cb = cols - cols % B;
        // Panels of B rows: the B source rows stay in L1 while their columns are written.
        for (index_t i = 0; i < rb; i += B)
            for (index_t j = 0; j < cb; j += B) {
                if constexpr (B == 8)
                    transpose_block8(src + i * lds + j, lds, dst + j * ldd + i, ldd);
                else
                    transpose_block4(src + i * lds + j, lds, dst + j * ldd + i, ldd);
            }
        if (cb < cols) transpose(rows, cols - cb, src + cb, lds, dst + cb * ldd, ldd);
        if (rb < rows) transpose(rows - rb, cb, src + rb * lds, lds, dst + rb, ldd);
        return;
    }
#endif
    transpose(rows, cols, src, lds, dst, ldd);
}

}  // namespace kattn::detail

#include "../core/warnings_pop.hpp"
