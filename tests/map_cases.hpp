// tests/map_cases.hpp — the feature-map cases shared by the feature-map, operator and
// backend tests, generated from the registry kattn::features::all: every registered map
// with its default sampler and non-default hyper-parameters where it has any (τ = 0.8,
// s = 1.5, so the parameter paths are exercised), plus the classic linear-transformer map
// (elu, identity Ω, floor 0, no renorm). A map added to the registry is tested here with
// no edit to this file.
#pragma once

#include "support.hpp"

#include <string>
#include <tuple>

#include <kattn/kattn.hpp>

namespace kt::cases {

namespace kf = kattn::features;
namespace ks = kattn::samplers;

/// "positive<trig>" for positive<trig>, the map's name otherwise.
template <class Map>
std::string label() {
    if constexpr (requires { typename Map::inner_map; })
        return std::string(Map::name) + "<" + label<typename Map::inner_map>() + ">";
    else
        return Map::name;
}

/// One case: Map, Sampler, configure(cfg) for its hyper-parameters, and whether the
/// operator uses Ω = I (then num_features must equal head_dim).
template <class Map, class Sampler = typename Map::default_sampler>
struct map_case {
    using map = Map;
    using sampler = Sampler;
    using config = kattn::attention_config<Map, Sampler>;
    static constexpr bool identity = std::is_same_v<Sampler, ks::identity>;
    /// Whether linear_attention<Map, Sampler> can be instantiated (porf_softplus needs a
    /// sampler that declares is_orthogonal).
    static constexpr bool operator_enabled =
        !kattn::feature_map_traits<Map>::requires_orthogonal || kattn::spectral_sampler_traits<Sampler>::is_orthogonal;
    static inline const std::string name = label<Map>() + (identity ? "(identity)" : "");
    static void configure(config& c) {
        auto& f = c.feature;
        kattn::detail::assign_parameter(f, kattn::detail::field::temperature, 0.8);
        kattn::detail::assign_parameter(f, kattn::detail::field::scale, 1.5);
    }
};

/// Katharopoulos et al.: ELU(x) + 1 with Ω = I, floor 0, no renormalisation.
struct elu_classic : map_case<kf::elu, ks::identity> {
    static inline const std::string name = "elu(identity, no renorm)";
    static void configure(config& c) {
        c.feature.floor = 0.0;
        c.feature.renormalize = false;
    }
};

/// (case, value type) pairs for TEST_CASE_TEMPLATE.
template <class C, class T>
struct combo {
    using case_t = C;
    using value_type = T;
};

namespace detail {
template <class L>
struct registry_cases;
template <class... Maps>
struct registry_cases<kattn::type_list<Maps...>> {
    using type = std::tuple<map_case<Maps>..., elu_classic>;
    template <class T>
    using combos = std::tuple<combo<map_case<Maps>, T>..., combo<elu_classic, T>>;
};
template <class... A, class... B>
std::tuple<A..., B...> cat(std::tuple<A...>, std::tuple<B...>);
}  // namespace detail

/// Every case, for doctest's TEST_CASE_TEMPLATE_APPLY.
using all_cases = detail::registry_cases<kf::all>::type;
/// Every (case, value type) pair, T ∈ {double, float}.
using all_combos = decltype(detail::cat(std::declval<detail::registry_cases<kf::all>::combos<double>>(),
                                        std::declval<detail::registry_cases<kf::all>::combos<float>>()));

// Names for tests that pick particular maps.
using trig = map_case<kf::trig>;
using nonstationary = map_case<kf::nonstationary>;
using positive_nonstationary = map_case<kf::positive<kf::nonstationary>>;
using favor = map_case<kf::favor>;
using favor_hyperbolic = map_case<kf::favor_hyperbolic>;
using elu = map_case<kf::elu>;
using cos2 = map_case<kf::cos2>;

/// The configuration of case C (num_features = head_dim for the identity sampler).
template <class C>
typename C::config make_config(index_t d, index_t dv, index_t nf, std::uint64_t seed, double eps = 1e-6) {
    typename C::config cfg{.head_dim = d, .value_dim = dv, .num_features = C::identity ? d : nf, .seed = seed};
    cfg.eps = eps;
    C::configure(cfg);
    return cfg;
}

/// The feature-map hyper-parameters a case configures.
template <class C>
kattn::map_params_t<typename C::map> params() {
    return make_config<C>(1, 1, 1, 0).feature;
}

template <class C, class T>
using op_t = kattn::linear_attention<typename C::map, typename C::sampler, kattn::backends::reference, T>;

/// An operator of case C: head_dim d, value_dim dv, num_features nf (head_dim for the
/// identity sampler). Maps with a bias get a random one (elu's initial bias is 0), except
/// the classic identity-Ω elu, which keeps b = 0.
template <class C, class T>
op_t<C, T> make_op(index_t d, index_t dv, index_t nf, std::uint64_t seed, double eps = 1e-6) {
    op_t<C, T> op(make_config<C>(d, dv, nf, seed, eps));
    if constexpr (C::map::uses_bias && !C::identity) {
        const auto m = op.bias().size();
        op.set_bias(kt::randn<T, 1>({m}, seed + 1000, 0.5));
    }
    return op;
}

}  // namespace kt::cases
