// kattn/features/trig.hpp — stationary random Fourier features (Rahimi & Recht).
//
//   φ(x) = m^{-1/2} · [cos u ; sin u],   u = Ωᵀx,   dim φ = 2m
//
// φ(x)ᵀφ(y) = (1/m) Σ_l cos(ω_lᵀ(x − y)), unbiased for E cos(ωᵀ(x−y)); with
// ω ~ N(0, σ⁻²I) that is the RBF kernel exp(−‖x−y‖²/(2σ²)). Signed: attention uses
// the signed denominator guard. Default sampler: gaussian.
#pragma once

#include "../core/math.hpp"
#include "../fwd.hpp"
#include "../linalg/row_ops.hpp"
#include "map_base.hpp"

#include "../core/warnings_push.hpp"

namespace kattn::features {

struct trig : map_base {
    static constexpr const char* name = "trig";
    static constexpr bool is_positive = false;
    using default_sampler = samplers::gaussian;

    KATTN_HD static constexpr index_t feature_dim(index_t m) { return 2 * m; }

    template <class Ops, class T>
    KATTN_HD static void activate(const params&, index_t, index_t m, const T*, const T* u, const T*, T, T* phi) {
        const T c = T(1) / std::sqrt(T(m));
        // cos and sin from one argument reduction (math::sincos), written in one pass.
        detail::transform2<Ops>(
            m, phi, phi + m,
            [c](auto ui) {
                using V = decltype(ui);
                const auto sc = math::sincos(ui);
                return math::two<V>{V(c) * sc.second, V(c) * sc.first};
            },
            u);
    }

    /// du_l = m^{-1/2} (−dφᶜ_l sin u_l + dφˢ_l cos u_l); no direct x term.
    template <class Ops, class T>
    KATTN_HD static void activate_vjp(const params&, index_t, index_t m, const T*, const T* u, const T*, T, const T*,
                                      const T* dphi, T* du, T*, T*, T*) {
        const T c = T(1) / std::sqrt(T(m));
        Ops::transform(
            m, du,
            [c](auto ui, auto gc, auto gs) {
                using V = decltype(ui);
                const auto sc = math::sincos(ui);
                return V(c) * (gs * sc.second - gc * sc.first);
            },
            u, dphi, dphi + m);
    }
};

}  // namespace kattn::features

#include "../core/warnings_pop.hpp"
