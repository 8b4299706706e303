// kattn/features/trig.hpp — stationary random Fourier features (Rahimi & Recht).
//
//   φ(x) = m^{-1/2} · [cos u ; sin u],   u = Ωᵀx,   dim φ = 2m
//
// φ(x)ᵀφ(y) = (1/m) Σ_l cos(ω_lᵀ(x − y)), unbiased for E cos(ωᵀ(x−y)); with
// ω ~ N(0, σ⁻²I) that is the RBF kernel exp(−‖x−y‖²/(2σ²)). Signed: attention uses
// the signed denominator guard. Default sampler: gaussian.
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

struct trig {
    static constexpr const char* name = "trig";
    static constexpr bool is_positive = false;
    static constexpr bool uses_pairs = false;
    static constexpr bool uses_bias = false;
    static constexpr bool has_stabiliser = false;
    static constexpr bool softmax_scaling = false;
    using default_sampler = samplers::gaussian;

    KATTN_HD static constexpr index_t feature_dim(index_t m) { return 2 * m; }
    KATTN_HD static constexpr index_t projection_dim(index_t m) { return m; }
    KATTN_HD static constexpr index_t workspace(index_t) { return 0; }
    static void validate(const feature_params& p, index_t, index_t) { detail::validate(p); }

    template <class Ops, class T>
    KATTN_HD static void activate(const feature_params&, index_t, index_t m, const T*, const T* u, const T*, T, T* phi) {
        const T c = T(1) / std::sqrt(T(m));
        Ops::transform(m, phi, [c](auto ui) { using V = decltype(ui); return V(c) * math::cos(ui); }, u);
        Ops::transform(m, phi + m, [c](auto ui) { using V = decltype(ui); return V(c) * math::sin(ui); }, u);
    }

    /// du_l = m^{-1/2} (−dφᶜ_l sin u_l + dφˢ_l cos u_l); no direct x term.
    template <class Ops, class T>
    KATTN_HD static void activate_vjp(const feature_params&, index_t, index_t m, const T*, const T* u, const T*, T, const T*,
                             const T* dphi, T* du, T*, T*, T*) {
        const T c = T(1) / std::sqrt(T(m));
        Ops::transform(
            m, du,
            [c](auto ui, auto gc, auto gs) {
                using V = decltype(ui);
                return V(c) * (gs * math::cos(ui) - gc * math::sin(ui));
            },
            u, dphi, dphi + m);
    }
};

}  // namespace kattn::features

#pragma GCC diagnostic pop
