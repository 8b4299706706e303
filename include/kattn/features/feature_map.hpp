// kattn/features/feature_map.hpp — the feature-map concept and its capability traits.
//
//   kattn::feature_map<F>       a row activation φ(x) = g(Ωᵀx, x) with its VJP
//   kattn::feature_map_traits<F> capabilities with defaults (Eigen style); a type that is
//                               not a feature map fails here with a readable message
// Writing a map: docs/feature_maps.md.
#pragma once

#include <concepts>

#include "../core/config.hpp"
#include "../linalg/row_ops.hpp"
#include "feature_params.hpp"

namespace kattn {

/// A feature map: static traits plus activate / activate_vjp over a row-ops policy.
template <class F>
concept feature_map = requires(index_t m, const feature_params& p, const double* c, double* o) {
    { F::name } -> std::convertible_to<const char*>;
    { F::is_positive } -> std::convertible_to<bool>;
    { F::uses_pairs } -> std::convertible_to<bool>;
    { F::uses_bias } -> std::convertible_to<bool>;
    { F::has_stabiliser } -> std::convertible_to<bool>;
    { F::feature_dim(m) } -> std::same_as<index_t>;
    { F::projection_dim(m) } -> std::same_as<index_t>;
    { F::workspace(m) } -> std::same_as<index_t>;
    typename F::default_sampler;
    F::validate(p, m, m);
    F::template activate<detail::scalar_ops>(p, m, m, c, c, c, 0.0, o);
    F::template activate_vjp<detail::scalar_ops>(p, m, m, c, c, c, 0.0, c, c, o, o, o, o);
};

namespace detail {
template <class F> concept has_requires_orthogonal = requires { { F::requires_orthogonal } -> std::convertible_to<bool>; };
template <class F> concept has_softmax_scaling = requires { { F::softmax_scaling } -> std::convertible_to<bool>; };
}  // namespace detail

template <class F>
struct feature_map_traits {
    static_assert(feature_map<F>,
                  "kattn: this type is not a kattn::feature_map. A feature map provides static members "
                  "name, is_positive, uses_pairs, uses_bias, has_stabiliser, feature_dim(m), projection_dim(m), "
                  "workspace(m), validate(params, d, m), a default_sampler type, and "
                  "activate<Ops>(...) / activate_vjp<Ops>(...); deriving from features::map_base supplies "
                  "the defaults (see docs/feature_maps.md).");
    static constexpr bool is_positive = F::is_positive;
    static constexpr bool uses_pairs = F::uses_pairs;
    static constexpr bool uses_bias = F::uses_bias;
    static constexpr bool has_stabiliser = F::has_stabiliser;
    /// Maps approximating exp(qᵀk) default to the input scale d^{-1/4} (softmax attention).
    static constexpr bool softmax_scaling = [] {
        if constexpr (detail::has_softmax_scaling<F>) return bool(F::softmax_scaling);
        else return false;
    }();
    /// Maps whose definition fixes the sampler family (porf_softplus needs orthogonal Ω).
    static constexpr bool requires_orthogonal = [] {
        if constexpr (detail::has_requires_orthogonal<F>) return bool(F::requires_orthogonal);
        else return false;
    }();
    static constexpr index_t feature_dim(index_t m) { return F::feature_dim(m); }
    static constexpr index_t projection_dim(index_t m) { return F::projection_dim(m); }
    /// Dimension of one frequency vector drawn by the sampler: d, or 2d for pairs.
    static constexpr index_t frequency_dim(index_t d) { return uses_pairs ? 2 * d : d; }
    /// The maps' m for num_features frequency columns: num_features, or num_features/2 pairs.
    static constexpr index_t pairs_or_columns(index_t num_features) {
        return uses_pairs ? num_features / 2 : num_features;
    }
};

}  // namespace kattn
