// kattn/linalg/batch_math.hpp — kattn::math for xsimd batches.
//
// Specialises `kattn::math::vec_math` (core/math.hpp) so that feature maps written as
// generic lambdas run on `xsimd::batch<T, Arch>` with xsimd's vectorised exp, sin, cos,
// expm1, log1p and the fused sincos (one range reduction for both; no scalar libm calls
// in the vector body).
#pragma once

#include "../core/warnings_push.hpp"  // GCC PR 105593: false -Wmaybe-uninitialized in AVX-512 intrinsics

#include <xsimd/xsimd.hpp>

#include "../core/math.hpp"

namespace kattn::math {

template <class T, class A>
struct vec_math<xsimd::batch<T, A>> {
    using V = xsimd::batch<T, A>;
    static V exp(const V& x) { return xsimd::exp(x); }
    static V expm1(const V& x) { return xsimd::expm1(x); }
    static V log(const V& x) { return xsimd::log(x); }
    static V log1p(const V& x) { return xsimd::log1p(x); }
    static V sin(const V& x) { return xsimd::sin(x); }
    static V cos(const V& x) { return xsimd::cos(x); }
    static two<V> sincos(const V& x) {
        const auto sc = xsimd::sincos(x);
        return {sc.first, sc.second};
    }
    static V sqrt(const V& x) { return xsimd::sqrt(x); }
    static V abs(const V& x) { return xsimd::abs(x); }
    static V max(const V& a, const V& b) { return xsimd::max(a, b); }
    static V min(const V& a, const V& b) { return xsimd::min(a, b); }
    static V select(const xsimd::batch_bool<T, A>& c, const V& a, const V& b) { return xsimd::select(c, a, b); }
};

}  // namespace kattn::math

#include "../core/warnings_pop.hpp"
