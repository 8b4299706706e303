// kattn/features/relu.hpp — ReLU random features (Performer's generalized attention).
//
//   φ(x) = m^{-1/2} · relu(u),   u = Ωᵀx,   dim φ = m
//
// Non-negative (a row can be all zero: the operator's denominator guard max(den, eps)
// applies). With ω ~ N(0, I), φ(x)ᵀφ(y) estimates the first-order arc-cosine kernel
// E relu(ωᵀx) relu(ωᵀy) = ‖x‖‖y‖ (sin θ + (π − θ) cos θ) / (2π), θ the angle of x and y.
// Default sampler: orthogonal_gaussian.
#pragma once

#include <cmath>

#include "../core/math.hpp"
#include "../fwd.hpp"
#include "map_base.hpp"

#include "../core/warnings_push.hpp"

namespace kattn::features {

struct relu : map_base {
    static constexpr const char* name = "relu";
    static constexpr bool is_positive = true;
    using default_sampler = samplers::orthogonal_gaussian;

    template <class Ops, class T>
    KATTN_HD static void activate(const params&, index_t, index_t m, const T*, const T* u, const T*, T, T* phi) {
        const T c = T(1) / std::sqrt(T(m));
        Ops::transform(
            m, phi,
            [c](auto ui) {
                using V = decltype(ui);
                return V(c) * math::max(ui, V(0));
            },
            u);
    }

    /// du_l = m^{-1/2} dφ_l [u_l > 0]; no direct x term.
    template <class Ops, class T>
    KATTN_HD static void activate_vjp(const params&, index_t, index_t m, const T*, const T* u, const T*, T, const T*,
                                      const T* dphi, T* du, T*, T*, T*) {
        const T c = T(1) / std::sqrt(T(m));
        Ops::transform(
            m, du,
            [c](auto ui, auto g) {
                using V = decltype(ui);
                return math::select(ui > V(0), V(c) * g, V(0));
            },
            u, dphi);
    }
};

}  // namespace kattn::features

#include "../core/warnings_pop.hpp"
