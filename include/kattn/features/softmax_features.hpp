// kattn/features/softmax_features.hpp — softmax over the features (Coulomb particle model).
//
//   φ(x) = √m · softmax(u/τ),   u = Ωᵀx,   dim φ = m
//
// Computed with the row maximum subtracted (exact, overflow-free). Sums to √m like the
// renormalised maps. Default sampler: gaussian.
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

struct softmax_features {
    static constexpr const char* name = "softmax_features";
    static constexpr bool is_positive = true;
    static constexpr bool uses_pairs = false;
    static constexpr bool uses_bias = false;
    static constexpr bool has_stabiliser = false;
    static constexpr bool softmax_scaling = false;
    using default_sampler = samplers::gaussian;

    KATTN_HD static constexpr index_t feature_dim(index_t m) { return m; }
    KATTN_HD static constexpr index_t projection_dim(index_t m) { return m; }
    KATTN_HD static constexpr index_t workspace(index_t) { return 0; }
    static void validate(const feature_params& p, index_t, index_t) { detail::validate(p); }

    template <class Ops, class T>
    KATTN_HD static void activate(const feature_params& p, index_t, index_t m, const T*, const T* u, const T*, T, T* phi) {
        const T it = T(1 / p.temperature);
        const T mx = Ops::max(m, u) * it;
        Ops::transform(m, phi, [it, mx](auto ui) { using V = decltype(ui); return math::exp(ui * V(it) - V(mx)); }, u);
        const T c = std::sqrt(T(m)) / Ops::sum(m, phi);
        Ops::transform(m, phi, [c](auto f) { return f * decltype(f)(c); }, phi);
    }

    /// With p = φ/√m: du_l = p_l (√m dφ_l − ⟨√m dφ, p⟩)/τ = φ_l (dφ_l − ⟨dφ, φ⟩/√m)/τ.
    template <class Ops, class T>
    KATTN_HD static void activate_vjp(const feature_params& p, index_t, index_t m, const T*, const T*, const T*, T,
                             const T* phi, const T* dphi, T* du, T*, T*, T*) {
        const T it = T(1 / p.temperature);
        const T g = Ops::dot(m, phi, dphi) / std::sqrt(T(m));
        Ops::transform(m, du, [it, g](auto f, auto dp) { using V = decltype(f); return f * (dp - V(g)) * V(it); }, phi,
                       dphi);
    }
};

}  // namespace kattn::features

#pragma GCC diagnostic pop
