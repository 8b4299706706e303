// kattn/features/nonstationary.hpp — FSKA's nonstationary spectral features (pairs).
//
//   φ(x) = (4m)^{-1/2} · [cos u₁ + cos u₂ ; sin u₁ + sin u₂],   u_r = Ω_rᵀx,   dim φ = 2m
//
// Each of the m frequencies is a pair (ω₁, ω₂) drawn jointly from a density on R^{2d};
// Ω is stored as d × 2m with ω₁ in columns [0, m) and ω₂ in [m, 2m). The estimate is
// unbiased for k(x, y) = ¼ Σ_{a,b∈{1,2}} E cos(ω_aᵀx − ω_bᵀy), a nonstationary kernel
// (it depends on x and y, not only on x − y). Every coordinate lies in [−1/√m, 1/√m].
// Signed; FSKA uses positive<nonstationary>. Default sampler: gaussian over R^{2d}.
#pragma once

#include "../core/math.hpp"
#include "../fwd.hpp"
#include "../linalg/row_ops.hpp"
#include "map_base.hpp"

#include "../core/warnings_push.hpp"

namespace kattn::features {

struct nonstationary : map_base {
    static constexpr const char* name = "nonstationary";
    static constexpr bool is_positive = false;
    static constexpr bool uses_pairs = true;
    using default_sampler = samplers::gaussian;

    KATTN_HD static constexpr index_t feature_dim(index_t m) { return 2 * m; }
    KATTN_HD static constexpr index_t projection_dim(index_t m) { return 2 * m; }

    template <class Ops, class T>
    KATTN_HD static void activate(const params&, index_t, index_t m, const T*, const T* u, const T*, T, T* phi) {
        const T c = T(1) / std::sqrt(T(4 * m));
        // cos and sin of both halves from one argument reduction each, in one pass.
        detail::transform2<Ops>(
            m, phi, phi + m,
            [c](auto a, auto b) {
                using V = decltype(a);
                const auto sa = math::sincos(a), sb = math::sincos(b);
                return math::two<V>{V(c) * (sa.second + sb.second), V(c) * (sa.first + sb.first)};
            },
            u, u + m);
    }

    /// du_{r,l} = (4m)^{-1/2} (−dφᶜ_l sin u_{r,l} + dφˢ_l cos u_{r,l}), r = 1, 2.
    template <class Ops, class T>
    KATTN_HD static void activate_vjp(const params&, index_t, index_t m, const T*, const T* u, const T*, T, const T*,
                                      const T* dphi, T* du, T*, T*, T*) {
        const T c = T(1) / std::sqrt(T(4 * m));
        auto f = [c](auto ui, auto gc, auto gs) {
            using V = decltype(ui);
            const auto sc = math::sincos(ui);
            return V(c) * (gs * sc.second - gc * sc.first);
        };
        Ops::transform(m, du, f, u, dphi, dphi + m);
        Ops::transform(m, du + m, f, u + m, dphi, dphi + m);
    }
};

}  // namespace kattn::features

#include "../core/warnings_pop.hpp"
