// kattn/features/elu.hpp — ELU+1 positive features (linear transformer; Coulomb model).
//
//   φ(x) = renorm(max(1 + ELU(u/τ + b), floor)),   u = Ωᵀx,   b ∈ R^m,   dim φ = m
//
// b is a learnable bias initialised to 0. The classic linear-transformer map
// ELU(x) + 1 (Katharopoulos et al.) is this map with the `identity` sampler, τ = 1,
// floor = 0 and renormalize = false. Default sampler: gaussian.
#pragma once

#include <cstdint>

#include "../core/math.hpp"
#include "../fwd.hpp"
#include "../linalg/row_ops.hpp"
#include "feature_params.hpp"
#include "map_base.hpp"
#include "renormalize.hpp"

#include "../core/warnings_push.hpp"

namespace kattn::features {

struct elu : map_base {
    static constexpr const char* name = "elu";
    static constexpr bool is_positive = true;
    static constexpr bool uses_bias = true;
    using default_sampler = samplers::gaussian;

    KATTN_HD static constexpr index_t workspace(index_t m) { return m; }
    /// Hyper-parameters τ, floor, renormalize (docs/feature_maps.md §3).
    using params = tempered_params;
    static void validate(const params& p, index_t, index_t) { detail::validate(p); }

    /// b = 0.
    template <class T>
    static void init_bias(index_t m, std::uint64_t, T* b) {
        for (index_t l = 0; l < m; ++l) b[l] = T(0);
    }

    /// v = max(1 + ELU(u/τ + b), floor), the features before renormalisation.
    template <class T>
    KATTN_HD static auto activation(const params& p) {
        const T it = T(1 / p.temperature), fl = T(p.floor);
        return [it, fl](auto ui, auto bi) {
            using V = decltype(ui);
            return math::max(V(1) + math::elu(ui * V(it) + bi), V(fl));
        };
    }

    template <class Ops, class T>
    KATTN_HD static void activate(const params& p, index_t, index_t m, const T*, const T* u, const T* b, T, T* phi) {
        Ops::transform(m, phi, activation<T>(p), u, b);
        if (p.renormalize) detail::renormalize<Ops>(m, phi);
    }
    /// Feature by feature unless renormalised (detail::elementwise_features).
    KATTN_HD static constexpr bool elementwise(const params& p) { return !p.renormalize; }

    /// With a = u/τ + b: dv masked where the floor is active; da = dv · ELU'(a);
    /// du = da/τ, db += da.
    template <class Ops, class T>
    KATTN_HD static void activate_vjp(const params& p, index_t, index_t m, const T*, const T* u, const T* b, T,
                                      const T* phi, const T* dphi, T* du, T*, T* db, T* work) {
        const T it = T(1 / p.temperature), fl = T(p.floor);
        const T* dv = detail::unnormalised_upstream<Ops>(p.renormalize, m, phi, dphi, work, activation<T>(p), u, b);
        // du holds da = dv · ELU'(a) · [1 + ELU(a) >= floor] first.
        Ops::transform(
            m, du,
            [it, fl](auto ui, auto bi, auto g) {
                using V = decltype(ui);
                const V a = ui * V(it) + bi;
                return math::select(V(1) + math::elu(a) >= V(fl), g * math::elu_grad(a), V(0));
            },
            u, b, dv);
        if (db != nullptr) detail::axpy<Ops>(m, T(1), du, db);
        Ops::transform(
            m, du,
            [it](auto g) {
                using V = decltype(g);
                return g * V(it);
            },
            du);
    }
};

}  // namespace kattn::features

#include "../core/warnings_pop.hpp"
