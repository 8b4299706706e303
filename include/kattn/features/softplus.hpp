// kattn/features/softplus.hpp — softplus positive features (Coulomb particle model).
//
//   φ(x) = renorm(softplus(u/τ) + floor),   u = Ωᵀx,   dim φ = m
//
// renorm(v) = √m · v / Σv (skipped when feature_params::renormalize is false).
// Default sampler: gaussian (the Coulomb paper's initial particles).
#pragma once

#include "../core/math.hpp"
#include "../samplers/gaussian.hpp"
#include "feature_params.hpp"

// GCC 12 reports false -W(maybe-)uninitialized warnings inside its AVX-512 intrinsics when
// the element functions here are inlined on xsimd batches (GCC PR 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace kattn::features {

struct softplus {
    static constexpr const char* name = "softplus";
    static constexpr bool is_positive = true;
    static constexpr bool uses_pairs = false;
    static constexpr bool uses_bias = false;
    static constexpr bool has_stabiliser = false;
    static constexpr bool softmax_scaling = false;
    using default_sampler = samplers::gaussian;

    KATTN_HD static constexpr index_t feature_dim(index_t m) { return m; }
    KATTN_HD static constexpr index_t projection_dim(index_t m) { return m; }
    KATTN_HD static constexpr index_t workspace(index_t m) { return m; }
    static void validate(const feature_params& p, index_t, index_t) { detail::validate(p); }

    template <class Ops, class T>
    KATTN_HD static void activate(const feature_params& p, index_t, index_t m, const T*, const T* u, const T*, T, T* phi) {
        const T it = T(1 / p.temperature), fl = T(p.floor);
        Ops::transform(m, phi, [it, fl](auto ui) { using V = decltype(ui); return math::softplus(ui * V(it)) + V(fl); },
                       u);
        if (p.renormalize) detail::renormalize<Ops>(m, phi);
    }

    /// du_l = dv_l · σ(u_l/τ)/τ with dv the renorm VJP.
    template <class Ops, class T>
    KATTN_HD static void activate_vjp(const feature_params& p, index_t, index_t m, const T*, const T* u, const T*, T,
                             const T* phi, const T* dphi, T* du, T*, T*, T* work) {
        const T it = T(1 / p.temperature), fl = T(p.floor);
        const T* dv = dphi;
        if (p.renormalize) {
            Ops::transform(m, work, [it, fl](auto ui) { using V = decltype(ui); return math::softplus(ui * V(it)) + V(fl); },
                           u);
            detail::renormalize_vjp<Ops>(m, Ops::sum(m, work), phi, dphi, work);
            dv = work;
        }
        Ops::transform(m, du, [it](auto ui, auto g) { using V = decltype(ui); return g * V(it) * math::sigmoid(ui * V(it)); },
                       u, dv);
    }
};

}  // namespace kattn::features

#pragma GCC diagnostic pop
