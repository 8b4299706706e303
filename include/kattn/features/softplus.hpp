// kattn/features/softplus.hpp — softplus positive features (Coulomb particle model).
//
//   φ(x) = renorm(softplus(u/τ) + floor),   u = Ωᵀx,   dim φ = m
//
// renorm(v) = √m · v / Σv (skipped when params::renormalize is false).
// Default sampler: gaussian (the Coulomb paper's initial particles).
#pragma once

#include "../core/math.hpp"
#include "../fwd.hpp"
#include "feature_params.hpp"
#include "map_base.hpp"
#include "renormalize.hpp"

#include "../core/warnings_push.hpp"

namespace kattn::features {

struct softplus : map_base {
    static constexpr const char* name = "softplus";
    static constexpr bool is_positive = true;
    using default_sampler = samplers::gaussian;

    KATTN_HD static constexpr index_t workspace(index_t m) { return m; }
    /// Hyper-parameters τ, floor, renormalize (docs/feature_maps.md §3).
    using params = tempered_params;
    static void validate(const params& p, index_t, index_t) { detail::validate(p); }

    /// v = softplus(u/τ) + floor, the features before renormalisation.
    template <class T>
    KATTN_HD static auto activation(const params& p) {
        const T it = T(1 / p.temperature), fl = T(p.floor);
        return [it, fl](auto ui) {
            using V = decltype(ui);
            return math::softplus(ui * V(it)) + V(fl);
        };
    }

    template <class Ops, class T>
    KATTN_HD static void activate(const params& p, index_t, index_t m, const T*, const T* u, const T*, T, T* phi) {
        Ops::transform(m, phi, activation<T>(p), u);
        if (p.renormalize) detail::renormalize<Ops>(m, phi);
    }

    /// du_l = dv_l · σ(u_l/τ)/τ with dv the renorm VJP.
    template <class Ops, class T>
    KATTN_HD static void activate_vjp(const params& p, index_t, index_t m, const T*, const T* u, const T*, T,
                                      const T* phi, const T* dphi, T* du, T*, T*, T* work) {
        const T it = T(1 / p.temperature);
        const T* dv = detail::unnormalised_upstream<Ops>(p.renormalize, m, phi, dphi, work, activation<T>(p), u);
        Ops::transform(
            m, du,
            [it](auto ui, auto g) {
                using V = decltype(ui);
                return g * V(it) * math::sigmoid(ui * V(it));
            },
            u, dv);
    }
};

}  // namespace kattn::features

#include "../core/warnings_pop.hpp"
