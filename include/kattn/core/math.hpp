// kattn/core/math.hpp — element-wise math written once for scalars and SIMD batches.
//
// Feature maps express their activation as generic lambdas over a value type V that is
// either a scalar (float, double) or an `xsimd::batch`. They call `kattn::math::exp(v)`
// and friends, which forward to `vec_math<V>`: the primary template (here) handles
// scalars with <cmath>; `linalg/batch_math.hpp` specialises it for batches.
// Class-template specialisation (rather than overloading) lets the batch version be
// declared after the feature maps and still be found at instantiation.
#pragma once

#include <cmath>
#include <type_traits>

#include "config.hpp"

#include "warnings_push.hpp"  // GCC PR 105593: false -Wmaybe-uninitialized in AVX-512 intrinsics

namespace kattn::math {

/// Two values computed together (math::sincos, row ops' transform2).
template <class V>
struct two {
    V first, second;
};

/// Scalar implementation; specialised for SIMD batches by the simd backend.
template <class V, class Enable = void>
struct vec_math {
    static_assert(std::is_floating_point_v<V>,
                  "kattn::math: value type must be float, double or an xsimd::batch "
                  "(include <kattn/backends/simd.hpp> for batches)");
    KATTN_HD static V exp(V x) { return std::exp(x); }
    KATTN_HD static V expm1(V x) { return std::expm1(x); }
    KATTN_HD static V log(V x) { return std::log(x); }
    KATTN_HD static V log1p(V x) { return std::log1p(x); }
    KATTN_HD static V sin(V x) { return std::sin(x); }
    KATTN_HD static V cos(V x) { return std::cos(x); }
    KATTN_HD static two<V> sincos(V x) { return {std::sin(x), std::cos(x)}; }
    KATTN_HD static V sqrt(V x) { return std::sqrt(x); }
    KATTN_HD static V abs(V x) { return std::abs(x); }
    KATTN_HD static V max(V a, V b) { return a < b ? b : a; }
    KATTN_HD static V min(V a, V b) { return b < a ? b : a; }
    KATTN_HD static V select(bool c, V a, V b) { return c ? a : b; }
};

template <class V>
KATTN_HD V exp(V x) {
    return vec_math<V>::exp(x);
}
template <class V>
KATTN_HD V expm1(V x) {
    return vec_math<V>::expm1(x);
}
template <class V>
KATTN_HD V log(V x) {
    return vec_math<V>::log(x);
}
template <class V>
KATTN_HD V log1p(V x) {
    return vec_math<V>::log1p(x);
}
template <class V>
KATTN_HD V sin(V x) {
    return vec_math<V>::sin(x);
}
template <class V>
KATTN_HD V cos(V x) {
    return vec_math<V>::cos(x);
}
/// {sin x, cos x} from one argument reduction where the value type has a fused form
/// (xsimd batches); the scalar form calls sin and cos.
template <class V>
KATTN_HD two<V> sincos(V x) {
    return vec_math<V>::sincos(x);
}
template <class V>
KATTN_HD V sqrt(V x) {
    return vec_math<V>::sqrt(x);
}
template <class V>
KATTN_HD V abs(V x) {
    return vec_math<V>::abs(x);
}
template <class V>
KATTN_HD V max(V a, V b) {
    return vec_math<V>::max(a, b);
}
template <class V>
KATTN_HD V min(V a, V b) {
    return vec_math<V>::min(a, b);
}
template <class C, class V>
KATTN_HD V select(const C& c, V a, V b) {
    return vec_math<V>::select(c, a, b);
}

/// ELU(x) = x for x > 0, exp(x) − 1 otherwise.
template <class V>
KATTN_HD V elu(V x) {
    return select(x > V(0), x, expm1(min(x, V(0))));
}
/// d ELU / dx = 1 for x > 0, exp(x) otherwise.
template <class V>
KATTN_HD V elu_grad(V x) {
    return select(x > V(0), V(1), exp(min(x, V(0))));
}
/// Numerically stable softplus log(1 + e^x) = max(x, 0) + log1p(e^{−|x|}).
template <class V>
KATTN_HD V softplus(V x) {
    return max(x, V(0)) + log1p(exp(-abs(x)));
}
/// Logistic sigmoid 1 / (1 + e^{−x}), stable for large |x|.
template <class V>
KATTN_HD V sigmoid(V x) {
    const V e = exp(-abs(x));
    return select(x >= V(0), V(1) / (V(1) + e), e / (V(1) + e));
}

}  // namespace kattn::math

#include "warnings_pop.hpp"
