// kattn/features/softmax_features.hpp — softmax over the features (Coulomb particle model).
//
//   φ(x) = √m · softmax(u/τ),   u = Ωᵀx,   dim φ = m
//
// Computed with the row maximum subtracted (exact, overflow-free). Sums to √m like the
// renormalised maps. Default sampler: gaussian.
#pragma once

#include "../core/math.hpp"
#include "../fwd.hpp"
#include "feature_params.hpp"
#include "map_base.hpp"

#include "../core/warnings_push.hpp"

namespace kattn::features {

struct softmax_features : map_base {
    static constexpr const char* name = "softmax_features";
    static constexpr bool is_positive = true;
    using default_sampler = samplers::gaussian;

    /// Hyper-parameters (docs/feature_maps.md §3).
    struct params {
        double temperature = 1.0;  ///< τ > 0: u is divided by τ
    };
    static void validate(const params& p, index_t, index_t) { detail::check_temperature(p.temperature); }

    template <class Ops, class T>
    KATTN_HD static void activate(const params& p, index_t, index_t m, const T*, const T* u, const T*, T, T* phi) {
        const T it = T(1 / p.temperature);
        const T mx = Ops::max(m, u) * it;
        Ops::transform(
            m, phi,
            [it, mx](auto ui) {
                using V = decltype(ui);
                return math::exp(ui * V(it) - V(mx));
            },
            u);
        const T c = std::sqrt(T(m)) / Ops::sum(m, phi);
        Ops::transform(
            m, phi, [c](auto f) { return f * decltype(f)(c); }, phi);
    }

    /// With p = φ/√m: du_l = p_l (√m dφ_l − ⟨√m dφ, p⟩)/τ = φ_l (dφ_l − ⟨dφ, φ⟩/√m)/τ.
    template <class Ops, class T>
    KATTN_HD static void activate_vjp(const params& p, index_t, index_t m, const T*, const T*, const T*, T,
                                      const T* phi, const T* dphi, T* du, T*, T*, T*) {
        const T it = T(1 / p.temperature);
        const T g = Ops::dot(m, phi, dphi) / std::sqrt(T(m));
        Ops::transform(
            m, du,
            [it, g](auto f, auto dp) {
                using V = decltype(f);
                return f * (dp - V(g)) * V(it);
            },
            phi, dphi);
    }
};

}  // namespace kattn::features

#include "../core/warnings_pop.hpp"
