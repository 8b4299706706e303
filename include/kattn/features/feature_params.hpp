// kattn/features/feature_params.hpp — hyper-parameters shared by the feature maps.
//
// Notation (DESIGN.md §3): x ∈ R^d, Ω ∈ R^{d×P}, u = Ωᵀx, b ∈ R^m an optional bias,
// τ the temperature, `floor` a small positive constant, renorm(v) = √m · v / Σᵢ vᵢ.
// These values are fixed (not learned); Ω and b are the learnable spectral parameters.
#pragma once

#include <cmath>
#include <string>

#include "../core/config.hpp"
#include "../core/error.hpp"

// GCC 12 reports false -W(maybe-)uninitialized warnings inside its AVX-512 intrinsics when
// the element functions here are inlined on xsimd batches (GCC PR 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace kattn {

struct feature_params {
    /// τ > 0: the projection is divided by τ before the activation (elu, softplus,
    /// sigmoid2, softmax_features).
    double temperature = 1.0;
    /// ≥ 0. Added before renormalisation (softplus, sigmoid2, cos2) so features stay strictly
    /// positive; elu applies it as a lower clamp max(·, floor).
    double floor = 1e-6;
    /// s > 0 in positive<F>: φ⁺ = ELU(s·φ_F) + 1.
    double scale = 1.0;
    /// ℓ1 re-normalisation to sum √m (elu, softplus, sigmoid2, cos2). The classic
    /// linear-transformer map ELU(x)+1 is `elu` with identity Ω, floor 0, no renorm.
    bool renormalize = true;
};

namespace detail {

inline void validate(const feature_params& p) {
    require(std::isfinite(p.temperature) && p.temperature > 0, "temperature", "a finite value > 0", p.temperature);
    require(std::isfinite(p.floor) && p.floor >= 0, "floor", "a finite value >= 0", p.floor);
    require(std::isfinite(p.scale) && p.scale > 0, "scale", "a finite value > 0", p.scale);
}

/// y = √m · v / Σv in place; returns Σv. Requires Σv > 0 (guaranteed by floor > 0 or
/// positive activations).
template <class Ops, class T>
KATTN_HD T renormalize(index_t m, T* v) {
    const T s = Ops::sum(m, v);
    const T c = std::sqrt(T(m)) / s;
    Ops::transform(m, v, [c](auto vi) { return vi * decltype(vi)(c); }, v);
    return s;
}

/// VJP of y = √m v / s, s = Σv: dv = (√m / s)(dy − ⟨dy, y⟩ / √m), written into dv.
template <class Ops, class T>
KATTN_HD void renormalize_vjp(index_t m, T s, const T* y, const T* dy, T* dv) {
    const T rm = std::sqrt(T(m));
    const T g = Ops::dot(m, dy, y) / rm;
    const T c = rm / s;
    Ops::transform(m, dv, [c, g](auto d) { using V = decltype(d); return V(c) * (d - V(g)); }, dy);
}

}  // namespace detail
}  // namespace kattn

#pragma GCC diagnostic pop
