// kattn/features/sigmoid2.hpp — squared-sigmoid positive features (Coulomb particle model).
//
//   φ(x) = renorm(σ(u/τ)² + floor),   u = Ωᵀx,   dim φ = m
//
// Bounded in (0, 1] before renormalisation. Default sampler: gaussian.
#pragma once

#include "../core/math.hpp"
#include "../fwd.hpp"
#include "tempered_map.hpp"

#include "../core/warnings_push.hpp"

namespace kattn::features {

struct sigmoid2 : tempered_map<sigmoid2> {
    static constexpr const char* name = "sigmoid2";

    /// g(a) = σ(a)².
    template <class V>
    KATTN_HD static V value(V a) {
        const V s = math::sigmoid(a);
        return s * s;
    }
    /// ∂/∂u σ(u/τ)² = 2σ²(1 − σ)/τ.
    template <class V>
    KATTN_HD static V vjp(V a, V g, V it) {
        const V s = math::sigmoid(a);
        return g * (V(2) * it) * s * s * (V(1) - s);
    }
};

}  // namespace kattn::features

#include "../core/warnings_pop.hpp"
