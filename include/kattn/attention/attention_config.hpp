// kattn/attention/attention_config.hpp — the options of a linear_attention operator.
//
// The first four fields are the ones every user sets:
//   attn_t attn({.head_dim = 64, .value_dim = 64, .num_features = 256, .seed = 42});
// num_features is the number of frequency vectors (columns of Ω ∈ R^{d×num_features}).
// Paired maps (nonstationary) use them as num_features/2 pairs (ω₁, ω₂), so it must be
// even there; their feature dimension is num_features. See docs/operators.md.
#pragma once

#include <cstdint>
#include <optional>

#include "../core/config.hpp"
#include "../samplers/sampler_params.hpp"

namespace kattn {

struct attention_config {
    index_t head_dim = 0;      ///< d, the query/key dimension (≥ 1)
    index_t value_dim = 0;     ///< d_v, the value dimension (≥ 1)
    index_t num_features = 0;  ///< columns of Ω (≥ 1; even for paired maps)
    std::uint64_t seed = 0;    ///< Philox key: same seed, same Ω on every backend

    // Feature-map hyper-parameters (DESIGN.md §3; docs/feature_maps.md).
    double temperature = 1.0;   ///< τ > 0
    double floor = 1e-6;        ///< ≥ 0: added before renormalisation (elu: lower clamp)
    double scale = 1.0;         ///< s > 0 of positive<F>
    bool renormalize = true;    ///< ℓ1 renorm to √m for elu/softplus/sigmoid2/cos2

    // Sampler parameters.
    double sigma = 1.0;  ///< ω ~ N(0, σ⁻²I)
    orthogonal_norms norms = orthogonal_norms::chi;

    /// q and k are multiplied by this before the feature map. Default: d^{-1/4} for maps
    /// approximating exp(qᵀk) (favor, favor_hyperbolic: softmax attention exp(qᵀk/√d)),
    /// 1 for every other map.
    std::optional<double> input_scale{};
    /// Denominator guard ε (> 0): positive maps max(den, ε), signed maps sign(den)·max(|den|, ε).
    double eps = 1e-6;
    /// Scan inputs for NaN/Inf at the API boundary (turn off in hot paths you trust).
    bool check_finite = true;
};

}  // namespace kattn
