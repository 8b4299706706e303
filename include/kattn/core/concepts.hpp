// kattn/core/concepts.hpp — the three policy axes and their traits.
//
//   kattn::feature_map<F>         a row activation φ(x) = g(Ωᵀx, x) with its VJP
//   kattn::spectral_sampler<S>    draws the frequencies Ω from a seed
//   kattn::execution_backend<B>   runs the attention primitives (reference, simd, thrust)
//
// `feature_map_traits<F>` / `spectral_sampler_traits<S>` expose capabilities with
// defaults (Eigen style) and fail with a readable static_assert when a type does not
// model the concept (CUTLASS style). Operators read them at compile time.
#pragma once

#include <concepts>
#include <cstdint>

#include "config.hpp"
#include "row_ops.hpp"
#include "../features/feature_params.hpp"
#include "../samplers/sampler_params.hpp"

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

/// A spectral sampler: writes `count` vectors of dimension `dim` from a seed. Stateless
/// samplers (gaussian, …) make `sample` static; learned ones (with parameters) make it a
/// const member — both are called as `s.template sample<T>(params, dim, count, seed, out)`.
template <class S>
concept spectral_sampler = requires(const S& s, const sampler_params& p, index_t n, std::uint64_t seed, double* out) {
    { S::name } -> std::convertible_to<const char*>;
    { S::is_random } -> std::convertible_to<bool>;
    s.template sample<double>(p, n, n, seed, out);
};

/// An execution backend: a policy type with a `name` and a `backend_tag`; its primitives
/// (features, forward, backward, step) are function templates checked at instantiation.
template <class B>
concept execution_backend = requires {
    { B::name } -> std::convertible_to<const char*>;
    typename B::backend_tag;
};

namespace detail {
template <class F> concept has_requires_orthogonal = requires { { F::requires_orthogonal } -> std::convertible_to<bool>; };
template <class F> concept has_softmax_scaling = requires { { F::softmax_scaling } -> std::convertible_to<bool>; };
template <class S> concept has_is_orthogonal = requires { { S::is_orthogonal } -> std::convertible_to<bool>; };
template <class S> concept has_orthogonal_init = requires { { S::orthogonal_init } -> std::convertible_to<bool>; };
}  // namespace detail

template <class F>
struct feature_map_traits {
    static_assert(feature_map<F>,
                  "kattn: this type is not a kattn::feature_map. A feature map provides static members "
                  "name, is_positive, uses_pairs, uses_bias, has_stabiliser, feature_dim(m), projection_dim(m), "
                  "workspace(m), validate(params, d, m), a default_sampler type, and "
                  "activate<Ops>(...) / activate_vjp<Ops>(...) (see docs/feature_maps.md).");
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
};

template <class S>
struct spectral_sampler_traits {
    static_assert(spectral_sampler<S>,
                  "kattn: this type is not a kattn::spectral_sampler. A sampler provides static members "
                  "name, is_random and sample<T>(sampler_params, dim, count, seed, T* out) "
                  "(see docs/samplers.md).");
    static constexpr bool is_random = S::is_random;
    static constexpr bool is_orthogonal = [] {
        if constexpr (detail::has_is_orthogonal<S>) return bool(S::is_orthogonal);
        else return false;
    }();
    /// A learned sampler whose frequencies start as orthogonal blocks and are then moved
    /// (samplers::langevin for a map that requires orthogonal frequencies). Default false.
    static constexpr bool orthogonal_init = [] {
        if constexpr (detail::has_orthogonal_init<S>) return bool(S::orthogonal_init);
        else return false;
    }();
};

template <class B>
struct execution_backend_traits {
    static_assert(execution_backend<B>,
                  "kattn: this type is not a kattn::execution_backend. A backend provides `name`, a "
                  "`backend_tag` type, and the primitives features/forward/backward/step "
                  "(see docs/backends.md).");
};

}  // namespace kattn
