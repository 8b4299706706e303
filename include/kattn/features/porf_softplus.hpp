// kattn/features/porf_softplus.hpp — PORF-softplus (Coulomb particle model).
//
//   φ(x) = renorm(softplus(u/τ) + floor) with Ω from positive *orthogonal* random
//   features: the `softplus` map whose frequencies must come from an orthogonal sampler
//   (linear_attention rejects any other sampler for this map at compile time), or from
//   Coulomb particles that start orthogonal (samplers::langevin: orthogonal_init).
#pragma once

#include "../fwd.hpp"
#include "softplus.hpp"

namespace kattn::features {

struct porf_softplus : softplus {
    static constexpr const char* name = "porf_softplus";
    static constexpr bool requires_orthogonal = true;
    using default_sampler = samplers::orthogonal_gaussian;
};

}  // namespace kattn::features
