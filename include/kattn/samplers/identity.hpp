// kattn/samplers/identity.hpp — the identity "sampler": Ω = I.
//
// For deterministic feature maps (elu, softplus, sigmoid², …) that act on x itself:
// writes the unit vectors e_0 … e_{d−1}, out[k·dim + i] = (k == i). Requires
// num_features == dim. Deterministic: sigma, norms and the seed are ignored.
#pragma once

#include <cstdint>
#include <type_traits>

#include "../core/config.hpp"
#include "../core/error.hpp"
#include "sampler_params.hpp"

namespace kattn::samplers {

struct identity {
    static constexpr bool is_random = false;
    static constexpr const char* name = "identity";
    using params = no_sampler_params;  ///< this sampler's parameters

    /// Writes out[k*dim + i] = (k == i ? 1 : 0). Throws kattn::error for dim < 1,
    /// count != dim ('num_features') or a null `out`.
    template <class T>
    static void sample(const params& /*p*/, index_t dim, index_t count, std::uint64_t /*seed*/, T* out) {
        static_assert(std::is_floating_point_v<T>, "identity::sample: T must be floating point");
        detail::require(dim >= 1, "dim", ">= 1", dim);
        detail::require(count == dim, "num_features", "== head_dim (identity sampler)", count);
        detail::check_sampler_shape(dim, count, out);
        for (index_t k = 0; k < count; ++k) {
            for (index_t i = 0; i < dim; ++i) out[k * dim + i] = static_cast<T>(k == i ? 1 : 0);
        }
    }
};

}  // namespace kattn::samplers
