// kattn/features/feature_map.hpp — the feature-map concept and its capability traits.
//
//   kattn::feature_map<F>       a row activation φ(x) = g(Ωᵀx, x) with its VJP
//   kattn::feature_map_traits<F> capabilities with defaults (Eigen style); a type that is
//                               not a feature map fails here with a readable message
// Writing a map: docs/feature_maps.md.
#pragma once

#include <concepts>
#include <string>
#include <type_traits>

#include "../core/config.hpp"
#include "../core/detected.hpp"
#include "../core/error.hpp"
#include "../linalg/row_ops.hpp"
#include "feature_params.hpp"

namespace kattn {

namespace detail {
template <class P>
using params_of = typename P::params;
}  // namespace detail

/// The hyper-parameters of map F: F::params, or feature_params for a map that declares none.
template <class F>
using map_params_t = detail::detected_or_t<feature_params, detail::params_of, F>;

/// A feature map: static traits plus activate / activate_vjp over a row-ops policy.
template <class F>
concept feature_map = requires(index_t m, const map_params_t<F>& p, const double* c, double* o) {
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
template <class F>
concept has_requires_orthogonal = requires {
    { F::requires_orthogonal } -> std::convertible_to<bool>;
};
template <class F>
concept has_softmax_scaling = requires {
    { F::softmax_scaling } -> std::convertible_to<bool>;
};
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
        if constexpr (detail::has_softmax_scaling<F>)
            return bool(F::softmax_scaling);
        else
            return false;
    }();
    /// Maps whose definition fixes the sampler family (porf_softplus needs orthogonal Ω).
    static constexpr bool requires_orthogonal = [] {
        if constexpr (detail::has_requires_orthogonal<F>)
            return bool(F::requires_orthogonal);
        else
            return false;
    }();
    /// The map's hyper-parameters (attention_config<F, S>::feature).
    using params = map_params_t<F>;
    static constexpr index_t feature_dim(index_t m) { return F::feature_dim(m); }
    static constexpr index_t projection_dim(index_t m) { return F::projection_dim(m); }
    /// Dimension of one frequency vector drawn by the sampler: d, or 2d for pairs.
    static constexpr index_t frequency_dim(index_t d) { return uses_pairs ? 2 * d : d; }
    /// The maps' m for num_features frequency columns: num_features, or num_features/2 pairs.
    static constexpr index_t pairs_or_columns(index_t num_features) {
        return uses_pairs ? num_features / 2 : num_features;
    }
};

namespace detail {

/// φ of one row at the row's own stabiliser shift c = F::row_shift(…), returning c. A map
/// may provide `activate_own_shift<Ops>(p, d, m, x, u, b, phi) -> T` that computes the
/// row's reductions once (favor: the maximum of u and ‖x‖², which activate recomputes);
/// it must give the bits of row_shift then activate (tests/features/test_own_shift.cpp).
/// Otherwise the two calls run.
template <class F, class Ops, class T>
KATTN_HD T activate_own_shift(const map_params_t<F>& p, index_t d, index_t m, const T* x, const T* u, const T* b,
                              T* phi) {
    if constexpr (requires { F::template activate_own_shift<Ops>(p, d, m, x, u, b, phi); }) {
        return F::template activate_own_shift<Ops>(p, d, m, x, u, b, phi);
    } else {
        const T c = F::template row_shift<Ops>(p, d, m, x, u, b);
        F::template activate<Ops>(p, d, m, x, u, b, c, phi);
        return c;
    }
}

/// Whether map F, under p, is element-wise: φ_l depends on u_l and b_l alone (no sum over
/// the features, no direct x term, no dependence on m), so that activate and activate_vjp
/// on any contiguous slice of u, b, φ and dφ, with m the slice's width, give that slice of
/// the whole row's results (tests/features/test_elementwise.cpp checks every map that says
/// so). A map says so with `static constexpr bool elementwise(const params&)` (and a
/// constexpr workspace(m)); otherwise it is not. The CUDA backend's causal backward then
/// finishes the VJP inside its dφ walks (docs/cuda_backend.md §2).
template <class F>
KATTN_HD constexpr bool elementwise_features(const map_params_t<F>& p) {
    if constexpr (requires { F::elementwise(p); })
        return bool(F::elementwise(p));
    else
        return false;
}

/// Writes v into the member `get` selects in p (or in p.inner: positive<F>'s parameters of
/// F); false when neither has one. `get` is a generic lambda returning the member by
/// reference, SFINAE-friendly (the selectors of detail::field below).
template <class P, class Get, class V>
bool assign_parameter(P& p, Get get, const V& v) {
    if constexpr (requires { get(p) = v; }) {
        get(p) = v;
        return true;
    } else if constexpr (requires { p.inner; }) {
        return assign_parameter(p.inner, get, v);
    } else {
        return false;
    }
}

/// Selectors of the parameter fields that may be set by name (assign_parameter's `get`).
namespace field {
inline constexpr auto temperature = [](auto& q) -> decltype((q.temperature)) { return q.temperature; };
inline constexpr auto floor = [](auto& q) -> decltype((q.floor)) { return q.floor; };
inline constexpr auto scale = [](auto& q) -> decltype((q.scale)) { return q.scale; };
inline constexpr auto renormalize = [](auto& q) -> decltype((q.renormalize)) { return q.renormalize; };
inline constexpr auto sigma = [](auto& q) -> decltype((q.sigma)) { return q.sigma; };
inline constexpr auto norms = [](auto& q) -> decltype((q.norms)) { return q.norms; };
}  // namespace field

/// Map's parameters from a pre-0.2 feature_params: every field the map has is copied by
/// name; a field it does not have must hold its default (else kattn::error names it).
template <class Map>
map_params_t<Map> map_params_from(const feature_params& fp) {
    if constexpr (std::is_same_v<map_params_t<Map>, feature_params>) {
        return fp;
    } else {
        map_params_t<Map> p{};
        const feature_params def{};
        const auto take = [&](const char* field, auto get, auto v, auto d) {
            if (!assign_parameter(p, get, v) && v != d)
                fail(field, std::string("its default: feature map '") + Map::name + "' has no such parameter", v);
        };
        take("temperature", field::temperature, fp.temperature, def.temperature);
        take("floor", field::floor, fp.floor, def.floor);
        take("scale", field::scale, fp.scale, def.scale);
        take("renormalize", field::renormalize, fp.renormalize, def.renormalize);
        return p;
    }
}

}  // namespace detail
}  // namespace kattn
