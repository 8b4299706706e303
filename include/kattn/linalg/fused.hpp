// kattn/linalg/fused.hpp — a fused multiply-add on xsimd batches that is fused everywhere.
//
//   detail::fmadd(x, y, z) = x·y + z, rounded once
//
// xsimd 8 implements `xsimd::fma` with FMA instructions for SSE/AVX/AVX2 + FMA, but for
// AVX-512 it falls back to `x * y + z`. Whether that becomes one instruction is then up to
// the compiler's floating-point contraction: GCC contracts at -O2 and above, clang (whose
// default contracts within one source expression only) and GCC at -O0 or with
// -ffp-contract=off emit a multiply and an add. That halves the GEMM kernels' throughput
// and changes their bits between instruction sets and compilers. fmadd calls the AVX-512
// intrinsics directly, so the kernels' results are the same with every compiler, flag and
// optimisation level, and equal to the AVX2 kernels' (same k order, both fused).
#pragma once

#include "../core/warnings_push.hpp"  // GCC PR 105593: false -Wmaybe-uninitialized in AVX-512 intrinsics

#include <type_traits>

#include <xsimd/xsimd.hpp>

namespace kattn::detail {

template <class T, class Arch>
inline xsimd::batch<T, Arch> fmadd(const xsimd::batch<T, Arch>& x, const xsimd::batch<T, Arch>& y,
                                   const xsimd::batch<T, Arch>& z) {
#if XSIMD_WITH_AVX512F
    if constexpr (std::is_base_of_v<xsimd::avx512f, Arch> && std::is_same_v<T, float>)
        return xsimd::batch<T, Arch>(_mm512_fmadd_ps(x, y, z));
    else if constexpr (std::is_base_of_v<xsimd::avx512f, Arch> && std::is_same_v<T, double>)
        return xsimd::batch<T, Arch>(_mm512_fmadd_pd(x, y, z));
    else
#endif
        return xsimd::fma(x, y, z);
}

}  // namespace kattn::detail

#include "../core/warnings_pop.hpp"
