// kattn/features/tempered_map.hpp — the base of the tempered positive maps (softplus, sigmoid2).
//
//   φ(x) = renorm(g(u/τ) + floor),   u = Ωᵀx,   dim φ = m,   params: tempered_params
//
// A map derives as `struct my_map : tempered_map<my_map>` and supplies its name and two
// element functions, generic over scalars and xsimd batches:
//   value(a)         g(a)
//   vjp(a, dv, it)   ∂v/∂u · dv with it = 1/τ (the gradient reaching u through g(u/τ))
// Default sampler: gaussian. See docs/feature_maps.md §9.
#pragma once

#include "../core/math.hpp"
#include "../fwd.hpp"
#include "feature_params.hpp"
#include "map_base.hpp"
#include "renormalize.hpp"

namespace kattn::features {

template <class Derived>
struct tempered_map : map_base {
    static constexpr bool is_positive = true;
    using default_sampler = samplers::gaussian;
    /// Hyper-parameters τ, floor, renormalize (docs/feature_maps.md §3).
    using params = tempered_params;
    static void validate(const params& p, index_t, index_t) { detail::validate(p); }
    KATTN_HD static constexpr index_t workspace(index_t m) { return m; }

    /// v = g(u/τ) + floor, the features before renormalisation.
    template <class T>
    KATTN_HD static auto activation(const params& p) {
        const T it = T(1 / p.temperature), fl = T(p.floor);
        return [it, fl](auto ui) {
            using V = decltype(ui);
            return Derived::value(ui * V(it)) + V(fl);
        };
    }

    template <class Ops, class T>
    KATTN_HD static void activate(const params& p, index_t, index_t m, const T*, const T* u, const T*, T, T* phi) {
        Ops::transform(m, phi, activation<T>(p), u);
        if (p.renormalize) detail::renormalize<Ops>(m, phi);
    }
    /// Feature by feature unless renormalised (detail::elementwise_features).
    KATTN_HD static constexpr bool elementwise(const params& p) { return !p.renormalize; }

    /// du_l = vjp(u_l/τ, dv_l, 1/τ) with dv the renorm VJP.
    template <class Ops, class T>
    KATTN_HD static void activate_vjp(const params& p, index_t, index_t m, const T*, const T* u, const T*, T,
                                      const T* phi, const T* dphi, T* du, T*, T*, T* work) {
        const T it = T(1 / p.temperature);
        const T* dv = detail::unnormalised_upstream<Ops>(p.renormalize, m, phi, dphi, work, activation<T>(p), u);
        Ops::transform(
            m, du,
            [it](auto ui, auto g) {
                using V = decltype(ui);
                return Derived::vjp(ui * V(it), g, V(it));
            },
            u, dv);
    }
};

}  // namespace kattn::features
