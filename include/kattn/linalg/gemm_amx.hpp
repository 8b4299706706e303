// kattn/linalg/gemm_amx.hpp — bf16 matrix products on AMX tiles (TDPBF16PS), float sums.
//
//   gemm_amx(M, N, KT, A, lda, B, ldb, C, ldc, accumulate)
//       C[i, j] (+)= Σ_{k < 32·KT} A[i, k] · B[k, j]
//
// A: M rows of bf16 (stride lda elements); B: pairs (bf16_pack.hpp), [16·KT × N] words
// (stride ldb words); C: float (stride ldc). M and N are multiples of 16 and K is 32·KT:
// callers pad their buffers (bf16_pack.hpp writes the zeros). One TDPBF16PS multiplies a
// 16 × 32 tile of A by a 32 × 16 tile of B into a 16 × 16 float tile: 16,384 FLOPs, and a
// Sapphire Rapids core issues one every 16 cycles, about 14× its AVX-512 FMA peak
// (bench/bench_bf16 measures both). Products of pairs are exact in float; the sums are
// float, with the instruction's rounding. Every C tile's k-loop runs in order, so results
// do not depend on the blocking or on threads.
//
// bf16_amx_supported(): the CPU has AMX-BF16 and AVX512-BF16 (for the packing) and the
// kernel lets this process use the tile registers (Linux asks each process to request
// them: arch_prctl ARCH_REQ_XCOMP_PERM, done once on the first call). Tiles are configured
// and released inside each gemm_amx call, so a thread holds no tile state between calls.
#pragma once

#include <cstdint>

#include "../core/bfloat16.hpp"
#include "../core/config.hpp"
#include "bf16_pack.hpp"

#if KATTN_BF16_KERNELS && defined(__linux__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace kattn::detail {

/// True when gemm_amx (and the bf16 packing) can run in this process.
inline bool bf16_amx_supported() {
#if KATTN_BF16_KERNELS && defined(__linux__)
    static const bool yes = [] {
        unsigned a = 0, b = 0, c = 0, d = 0;
        if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
        const bool avx512 = (b >> 16 & 1) && (b >> 30 & 1) && (b >> 31 & 1);  // F, BW, VL
        const bool amx = (d >> 22 & 1) && (d >> 24 & 1);                      // AMX-BF16, AMX-TILE
        unsigned a1 = 0, b1 = 0, c1 = 0, d1 = 0;
        const bool bf16 = __get_cpuid_count(7, 1, &a1, &b1, &c1, &d1) && (a1 >> 5 & 1);  // AVX512-BF16
        if (!(avx512 && amx && bf16)) return false;
        __get_cpuid(1, &a, &b, &c, &d);
        if (!(c >> 27 & 1)) return false;  // OSXSAVE
        constexpr long arch_req_xcomp_perm = 0x1023, xfeature_xtiledata = 18;
        return syscall(SYS_arch_prctl, arch_req_xcomp_perm, xfeature_xtiledata) == 0;
    }();
    return yes;
#else
    return false;
#endif
}

#if KATTN_BF16_KERNELS

namespace amx_impl {

/// The LDTILECFG operand: palette 1, every tile 16 rows × 64 bytes.
struct alignas(64) tile_config {
    std::uint8_t palette = 1, start_row = 0;
    std::uint8_t reserved[14] = {};
    std::uint16_t colsb[16] = {64, 64, 64, 64, 64, 64, 64, 64};
    std::uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};

/// C tiles 0..3 (rows mi, columns nj), A tiles 4, 5, B tiles 6, 7: a (16·MI) × (16·NJ) block.
template <int MI, int NJ>
[[gnu::target("amx-tile,amx-bf16")]] inline void block(index_t KT, const bf16* A, index_t lda, const std::uint32_t* B,
                                                       index_t ldb, float* C, index_t ldc, bool accumulate) {
    const auto ca = static_cast<long>(ldc * 4), aa = static_cast<long>(lda * 2), ba = static_cast<long>(ldb * 4);
    if (accumulate) {
        _tile_loadd(0, C, ca);
        if constexpr (NJ == 2) _tile_loadd(1, C + 16, ca);
        if constexpr (MI == 2) _tile_loadd(2, C + 16 * ldc, ca);
        if constexpr (MI == 2 && NJ == 2) _tile_loadd(3, C + 16 * ldc + 16, ca);
    } else {
        _tile_zero(0);
        if constexpr (NJ == 2) _tile_zero(1);
        if constexpr (MI == 2) _tile_zero(2);
        if constexpr (MI == 2 && NJ == 2) _tile_zero(3);
    }
    for (index_t t = 0; t < KT; ++t) {
        _tile_loadd(4, A + 32 * t, aa);
        _tile_loadd(6, B + 16 * t * ldb, ba);
        if constexpr (NJ == 2) _tile_loadd(7, B + 16 * t * ldb + 16, ba);
        if constexpr (MI == 2) _tile_loadd(5, A + 16 * lda + 32 * t, aa);
        _tile_dpbf16ps(0, 4, 6);
        if constexpr (NJ == 2) _tile_dpbf16ps(1, 4, 7);
        if constexpr (MI == 2) _tile_dpbf16ps(2, 5, 6);
        if constexpr (MI == 2 && NJ == 2) _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, C, ca);
    if constexpr (NJ == 2) _tile_stored(1, C + 16, ca);
    if constexpr (MI == 2) _tile_stored(2, C + 16 * ldc, ca);
    if constexpr (MI == 2 && NJ == 2) _tile_stored(3, C + 16 * ldc + 16, ca);
}

}  // namespace amx_impl

/// C (M × N float) (+)= A (M × 32·KT bf16) · B (pairs, 16·KT × N); M, N multiples of 16.
/// Needs bf16_amx_supported().
[[gnu::target("amx-tile,amx-bf16")]] inline void gemm_amx(index_t M, index_t N, index_t KT, const bf16* A, index_t lda,
                                                          const std::uint32_t* B, index_t ldb, float* C, index_t ldc,
                                                          bool accumulate) {
    static constexpr amx_impl::tile_config config{};
    _tile_loadconfig(&config);
    for (index_t i = 0; i < M; i += 32) {
        const bool two_rows = M - i >= 32;
        for (index_t j = 0; j < N; j += 32) {
            const bool two_cols = N - j >= 32;
            const bf16* a = A + i * lda;
            const std::uint32_t* b = B + j;
            float* c = C + i * ldc + j;
            if (two_rows && two_cols)
                amx_impl::block<2, 2>(KT, a, lda, b, ldb, c, ldc, accumulate);
            else if (two_rows)
                amx_impl::block<2, 1>(KT, a, lda, b, ldb, c, ldc, accumulate);
            else if (two_cols)
                amx_impl::block<1, 2>(KT, a, lda, b, ldb, c, ldc, accumulate);
            else
                amx_impl::block<1, 1>(KT, a, lda, b, ldb, c, ldc, accumulate);
        }
    }
    _tile_release();
}

#endif  // KATTN_BF16_KERNELS

}  // namespace kattn::detail
