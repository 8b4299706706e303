// kattn/samplers/gaussian.hpp — iid Gaussian frequencies, ω ~ N(0, σ⁻² I).
//
// The spectral density of the Gaussian (RBF) kernel exp(-‖x − y‖² / (2σ²)), as in
// random Fourier features and FAVOR+ (σ = 1 there, with inputs scaled by d^{-1/4}).
//
//   out[k·dim + i] = random_stream(seed, streams::omega).normal(k·dim + i) / σ
//
// Computed in double and then cast to T, so a float result is the cast of the double
// one, and the same seed gives the same Ω on every platform and thread count.
#pragma once

#include <cstdint>
#include <type_traits>

#include "../core/config.hpp"
#include "../core/error.hpp"
#include "../core/random.hpp"
#include "sampler_params.hpp"

namespace kattn::samplers {

struct gaussian {
    static constexpr bool is_random = true;
    static constexpr const char* name = "gaussian";
    using params = gaussian_params;  ///< this sampler's parameters

    /// Writes `count` frequency vectors of dimension `dim`:
    /// out[k*dim + i] = component i of vector k. Throws kattn::error for sigma not
    /// finite and > 0, dim < 1, count < 1 ('num_features') or a null `out`.
    template <class T>
    static void sample(const params& p, index_t dim, index_t count, std::uint64_t seed, T* out) {
        static_assert(std::is_floating_point_v<T>, "gaussian::sample: T must be floating point");
        detail::check_sigma(p.sigma);
        detail::check_sampler_shape(dim, count, out);
        const random_stream rng(seed, streams::omega);
        const index_t n = dim * count;
        for (index_t j = 0; j < n; ++j) {
            out[j] = static_cast<T>(rng.normal(static_cast<std::uint64_t>(j)) / p.sigma);
        }
    }
};

}  // namespace kattn::samplers
