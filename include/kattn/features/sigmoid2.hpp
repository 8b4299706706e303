// kattn/features/sigmoid2.hpp — squared-sigmoid positive features (Coulomb particle model).
//
//   φ(x) = renorm(σ(u/τ)² + floor),   u = Ωᵀx,   dim φ = m
//
// Bounded in (0, 1] before renormalisation. Default sampler: gaussian.
#pragma once

#include "../core/math.hpp"
#include "../fwd.hpp"
#include "feature_params.hpp"
#include "map_base.hpp"
#include "renormalize.hpp"

#include "../core/warnings_push.hpp"

namespace kattn::features {

struct sigmoid2 : map_base {
    static constexpr const char* name = "sigmoid2";
    static constexpr bool is_positive = true;
    using default_sampler = samplers::gaussian;

    KATTN_HD static constexpr index_t workspace(index_t m) { return m; }
    /// Hyper-parameters τ, floor, renormalize (docs/feature_maps.md §3).
    using params = tempered_params;
    static void validate(const params& p, index_t, index_t) { detail::validate(p); }

    /// v = σ(u/τ)² + floor, the features before renormalisation.
    template <class T>
    KATTN_HD static auto activation(const params& p) {
        const T it = T(1 / p.temperature), fl = T(p.floor);
        return [it, fl](auto ui) {
            using V = decltype(ui);
            const V s = math::sigmoid(ui * V(it));
            return s * s + V(fl);
        };
    }

    template <class Ops, class T>
    KATTN_HD static void activate(const params& p, index_t, index_t m, const T*, const T* u, const T*, T, T* phi) {
        Ops::transform(m, phi, activation<T>(p), u);
        if (p.renormalize) detail::renormalize<Ops>(m, phi);
    }

    /// du_l = dv_l · 2σ²(1 − σ)/τ.
    template <class Ops, class T>
    KATTN_HD static void activate_vjp(const params& p, index_t, index_t m, const T*, const T* u, const T*, T,
                                      const T* phi, const T* dphi, T* du, T*, T*, T* work) {
        const T it = T(1 / p.temperature);
        const T* dv = detail::unnormalised_upstream<Ops>(p.renormalize, m, phi, dphi, work, activation<T>(p), u);
        Ops::transform(
            m, du,
            [it](auto ui, auto g) {
                using V = decltype(ui);
                const V s = math::sigmoid(ui * V(it));
                return g * V(2 * it) * s * s * (V(1) - s);
            },
            u, dv);
    }
};

}  // namespace kattn::features

#include "../core/warnings_pop.hpp"
