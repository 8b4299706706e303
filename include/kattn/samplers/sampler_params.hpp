// kattn/samplers/sampler_params.hpp — the built-in samplers' parameter types.
//
// sigma is the kernel length-scale: frequencies are drawn as ω ~ N(0, σ⁻² I), the
// spectral density of the Gaussian kernel exp(-‖x − y‖² / (2σ²)).
// norms selects the row norms of `orthogonal_gaussian`: chi(d)-distributed (each row is
// then marginally N(0, σ⁻² I), so kernel estimates stay unbiased) or all equal to √d
// (lower variance, slightly biased).
#pragma once

#include <cmath>
#include <limits>

#include "../core/config.hpp"
#include "../core/error.hpp"

namespace kattn {

/// Row norms of orthogonal frequency blocks.
enum class orthogonal_norms {
    chi,    ///< independent chi(d)-distributed norms (unbiased)
    fixed,  ///< every norm = √d
};

/// Parameters of samplers::gaussian: ω ~ N(0, σ⁻² I).
struct gaussian_params {
    double sigma = 1.0;  ///< finite, > 0
};

/// Parameters of samplers::orthogonal_gaussian.
struct orthogonal_gaussian_params {
    double sigma = 1.0;                              ///< finite, > 0
    orthogonal_norms norms = orthogonal_norms::chi;  ///< row norms of the blocks
};

/// Parameters of samplers whose state is the sampler itself (identity, gmm, realnvp): none.
struct no_sampler_params {};

/// The pre-0.2 parameters shared by every sampler: converts to each built-in sampler's own
/// `params` (taking the fields it has), and is what a user-written sampler that declares no
/// `params` type receives.
struct sampler_params {
    double sigma = 1.0;                              ///< ω ~ N(0, σ⁻² I); finite, > 0
    orthogonal_norms norms = orthogonal_norms::chi;  ///< orthogonal_gaussian only

    operator gaussian_params() const { return {sigma}; }
    operator orthogonal_gaussian_params() const { return {sigma, norms}; }
    operator no_sampler_params() const { return {}; }
};

namespace detail {

/// Validates the arguments every sampler shares: dim ≥ 1, count ≥ 1, dim·count
/// representable, out non-null.
template <class T>
void check_sampler_shape(index_t dim, index_t count, const T* out) {
    require(dim >= 1, "dim", ">= 1", dim);
    require(count >= 1, "num_features", ">= 1", count);
    require(count <= std::numeric_limits<index_t>::max() / dim, "num_features", "num_features * dim to fit in index_t",
            count);
    require(out != nullptr, "out", "a non-null output pointer", "nullptr");
}

/// Validates sigma: finite and > 0.
inline void check_sigma(double sigma) {
    require(std::isfinite(sigma) && sigma > 0.0, "sigma", "a finite value > 0", sigma);
}

}  // namespace detail
}  // namespace kattn
