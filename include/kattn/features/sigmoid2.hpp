// kattn/features/sigmoid2.hpp — squared-sigmoid positive features (Coulomb particle model).
//
//   φ(x) = renorm(σ(u/τ)² + floor),   u = Ωᵀx,   dim φ = m
//
// Bounded in (0, 1] before renormalisation. Default sampler: gaussian.
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

struct sigmoid2 {
    static constexpr const char* name = "sigmoid2";
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
        Ops::transform(
            m, phi,
            [it, fl](auto ui) {
                using V = decltype(ui);
                const V s = math::sigmoid(ui * V(it));
                return s * s + V(fl);
            },
            u);
        if (p.renormalize) detail::renormalize<Ops>(m, phi);
    }

    /// du_l = dv_l · 2σ²(1 − σ)/τ.
    template <class Ops, class T>
    KATTN_HD static void activate_vjp(const feature_params& p, index_t, index_t m, const T*, const T* u, const T*, T,
                             const T* phi, const T* dphi, T* du, T*, T*, T* work) {
        const T it = T(1 / p.temperature), fl = T(p.floor);
        const T* dv = dphi;
        if (p.renormalize) {
            Ops::transform(
                m, work,
                [it, fl](auto ui) {
                    using V = decltype(ui);
                    const V s = math::sigmoid(ui * V(it));
                    return s * s + V(fl);
                },
                u);
            detail::renormalize_vjp<Ops>(m, Ops::sum(m, work), phi, dphi, work);
            dv = work;
        }
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

#pragma GCC diagnostic pop
