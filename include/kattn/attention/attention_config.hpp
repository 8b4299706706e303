// kattn/attention/attention_config.hpp — the options of a linear_attention operator.
//
//   attention_config<Map, Sampler>   sizes, seed and options, plus `feature` (Map::params)
//                                    and `sampler` (Sampler::params): each policy owns its
//                                    parameters, the configuration only composes them
//   attention_config<>               the same without policies (what `kattn::attention_config
//                                    cfg{…}` deduces): converts to any attention_config<M, S>
//
//   attn_t attn({.head_dim = 64, .value_dim = 64, .num_features = 256, .seed = 42,
//                .feature = {.temperature = 0.8}});
// Shorthands: `.temperature = 0.8` (also floor, scale, renormalize, sigma, norms) sets the
// field of that name in whichever policy's params has it (positive<F> looks into F's), and
// is rejected with a kattn::error naming the field when neither has one. See
// docs/operators.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>

#include "../core/config.hpp"
#include "../core/error.hpp"
#include "../features/feature_map.hpp"
#include "../samplers/sampler_params.hpp"
#include "../samplers/spectral_sampler.hpp"

namespace kattn {

namespace detail {
/// A policy type, as opposed to `void` (the untyped configuration).
template <class T>
concept policy_type = !std::is_void_v<T>;

template <class Map>
struct default_sampler_of {
    using type = typename Map::default_sampler;
};
template <>
struct default_sampler_of<void> {
    using type = void;
};
}  // namespace detail

/// Untyped configuration (Map = void): the shorthands are plain values; see the file comment.
template <class Map = void, class Sampler = typename detail::default_sampler_of<Map>::type>
struct attention_config {
    index_t head_dim = 0;      ///< d, the query/key dimension (≥ 1)
    index_t value_dim = 0;     ///< d_v, the value dimension (≥ 1)
    index_t num_features = 0;  ///< columns of Ω (≥ 1; even for paired maps)
    std::uint64_t seed = 0;    ///< Philox key: same seed, same Ω on every backend

    double temperature = 1.0;                        ///< τ of the map (elu, softplus, sigmoid2, softmax_features)
    double floor = 1e-6;                             ///< floor of the map (elu, softplus, sigmoid2, cos2)
    double scale = 1.0;                              ///< s of positive<F>
    bool renormalize = true;                         ///< ℓ1 renormalisation (elu, softplus, sigmoid2, cos2)
    double sigma = 1.0;                              ///< ω ~ N(0, σ⁻²I) (gaussian, orthogonal_gaussian)
    orthogonal_norms norms = orthogonal_norms::chi;  ///< orthogonal_gaussian

    /// q and k are multiplied by this before the map (default: d^{-1/4} for maps
    /// approximating exp(qᵀk), 1 otherwise).
    std::optional<double> input_scale{};
    double eps = 1e-6;         ///< denominator guard ε > 0
    bool check_finite = true;  ///< scan inputs for NaN/Inf at the API boundary
    /// Bytes the simd backend may keep between the two passes of a causal backward (the
    /// tiles' features and intra-tile scores) instead of recomputing them; 0 always
    /// recomputes. The gradients are bitwise the same either way (docs/operators.md).
    std::size_t backward_cache_bytes = std::size_t(256) << 20;

    /// The typed configuration: each field that differs from its default becomes a shorthand.
    template <detail::policy_type M, class S>
    operator attention_config<M, S>() const;
};

namespace detail {
template <class C, class Get, class V>
void apply_shorthand(C& c, const char* field, const std::optional<V>& v, Get get);
}  // namespace detail

/// Typed configuration of linear_attention<Map, Sampler, …>.
template <detail::policy_type Map, class Sampler>
struct attention_config<Map, Sampler> {
    using map_type = Map;
    using sampler_type = Sampler;

    index_t head_dim = 0;      ///< d, the query/key dimension (≥ 1)
    index_t value_dim = 0;     ///< d_v, the value dimension (≥ 1)
    index_t num_features = 0;  ///< columns of Ω (≥ 1; even for paired maps)
    std::uint64_t seed = 0;    ///< Philox key: same seed, same Ω on every backend

    map_params_t<Map> feature{};          ///< the map's parameters (Map::params)
    sampler_params_t<Sampler> sampler{};  ///< the sampler's parameters (Sampler::params)

    // Shorthands for a field of `feature` or `sampler` (file comment).
    std::optional<double> temperature{};
    std::optional<double> floor{};
    std::optional<double> scale{};
    std::optional<bool> renormalize{};
    std::optional<double> sigma{};
    std::optional<orthogonal_norms> norms{};

    /// q and k are multiplied by this before the map (default: d^{-1/4} for maps
    /// approximating exp(qᵀk), 1 otherwise).
    std::optional<double> input_scale{};
    double eps = 1e-6;         ///< denominator guard ε > 0
    bool check_finite = true;  ///< scan inputs for NaN/Inf at the API boundary
    /// Bytes the simd backend may keep between the two passes of a causal backward (the
    /// tiles' features and intra-tile scores) instead of recomputing them; 0 always
    /// recomputes. The gradients are bitwise the same either way (docs/operators.md).
    std::size_t backward_cache_bytes = std::size_t(256) << 20;

    /// Writes every shorthand into `feature` / `sampler` and clears it. Throws kattn::error
    /// naming a shorthand that neither policy has.
    void resolve() {
        auto& c = *this;
        detail::apply_shorthand(c, "temperature", temperature, detail::field::temperature);
        detail::apply_shorthand(c, "floor", floor, detail::field::floor);
        detail::apply_shorthand(c, "scale", scale, detail::field::scale);
        detail::apply_shorthand(c, "renormalize", renormalize, detail::field::renormalize);
        detail::apply_shorthand(c, "sigma", sigma, detail::field::sigma);
        detail::apply_shorthand(c, "norms", norms, detail::field::norms);
        temperature.reset();
        floor.reset();
        scale.reset();
        renormalize.reset();
        sigma.reset();
        norms.reset();
    }
    /// A copy with the shorthands resolved (see resolve()).
    attention_config resolved() const {
        attention_config c = *this;
        c.resolve();
        return c;
    }
};

namespace detail {

template <class C, class Get, class V>
void apply_shorthand(C& c, const char* field, const std::optional<V>& v, Get get) {
    if (!v) return;
    const bool in_map = assign_parameter(c.feature, get, *v);
    const bool in_sampler = in_map ? false : assign_parameter(c.sampler, get, *v);
    if (in_map || in_sampler) return;
    const char* map_name = C::map_type::name;
    const char* sampler_name = [] {
        if constexpr (requires { C::sampler_type::name; })
            return static_cast<const char*>(C::sampler_type::name);
        else
            return "?";
    }();
    fail(field, std::string("a parameter of feature map '") + map_name + "' or sampler '" + sampler_name + "'",
         "a value, but neither has one of that name");
}

}  // namespace detail

template <class Map, class Sampler>
template <detail::policy_type M, class S>
attention_config<Map, Sampler>::operator attention_config<M, S>() const {
    const attention_config<> def{};
    attention_config<M, S> c;
    c.head_dim = head_dim;
    c.value_dim = value_dim;
    c.num_features = num_features;
    c.seed = seed;
    if (temperature != def.temperature) c.temperature = temperature;
    if (floor != def.floor) c.floor = floor;
    if (scale != def.scale) c.scale = scale;
    if (renormalize != def.renormalize) c.renormalize = renormalize;
    if (sigma != def.sigma) c.sigma = sigma;
    if (norms != def.norms) c.norms = norms;
    c.input_scale = input_scale;
    c.eps = eps;
    c.check_finite = check_finite;
    c.backward_cache_bytes = backward_cache_bytes;
    return c;
}

}  // namespace kattn
