// kattn/features/softplus.hpp — softplus positive features (Coulomb particle model).
//
//   φ(x) = renorm(softplus(u/τ) + floor),   u = Ωᵀx,   dim φ = m
//
// renorm(v) = √m · v / Σv (skipped when params::renormalize is false).
// Default sampler: gaussian (the Coulomb paper's initial particles).
#pragma once

#include "../core/math.hpp"
#include "../fwd.hpp"
#include "tempered_map.hpp"

#include "../core/warnings_push.hpp"

namespace kattn::features {

struct softplus : tempered_map<softplus> {
    static constexpr const char* name = "softplus";

    /// g(a) = softplus(a).
    template <class V>
    KATTN_HD static V value(V a) {
        return math::softplus(a);
    }
    /// ∂/∂u softplus(u/τ) = σ(u/τ)/τ.
    template <class V>
    KATTN_HD static V vjp(V a, V g, V it) {
        return g * it * math::sigmoid(a);
    }
};

}  // namespace kattn::features

#include "../core/warnings_pop.hpp"
