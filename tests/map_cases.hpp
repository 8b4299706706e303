// tests/map_cases.hpp — the feature-map × sampler × hyper-parameter cases shared by the
// feature-map and linear-attention tests. Every map of docs/feature_maps.md §2 appears at least once,
// with non-default hyper-parameters where the map has any (so τ, s, floor and renorm paths
// are exercised), plus the classic linear-transformer map (elu, identity Ω, no renorm).
#pragma once

#include "support.hpp"

#include <kattn/kattn.hpp>

namespace kt::cases {

namespace kf = kattn::features;
namespace ks = kattn::samplers;

/// One case: Map, Sampler, configure(cfg) for its hyper-parameters, and whether the
/// operator uses Ω = I (then num_features must equal head_dim).
template <class Map, class Sampler>
struct base {
    using map = Map;
    using sampler = Sampler;
    static constexpr bool identity = std::is_same_v<Sampler, ks::identity>;
    /// Whether linear_attention<Map, Sampler> can be instantiated (porf_softplus needs a
    /// sampler that declares is_orthogonal; see the report in test_linear_attention.cpp).
    static constexpr bool operator_enabled =
        !kattn::feature_map_traits<Map>::requires_orthogonal || kattn::spectral_sampler_traits<Sampler>::is_orthogonal;
    static void configure(kattn::attention_config&) {}
};

struct trig : base<kf::trig, ks::gaussian> {
    static constexpr const char* name = "trig";
};
struct nonstationary : base<kf::nonstationary, ks::gaussian> {
    static constexpr const char* name = "nonstationary";
};
struct positive_trig : base<kf::positive<kf::trig>, ks::gaussian> {
    static constexpr const char* name = "positive<trig>";
    static void configure(kattn::attention_config& c) { c.scale = 1.5; }
};
struct positive_nonstationary : base<kf::positive<kf::nonstationary>, ks::gaussian> {
    static constexpr const char* name = "positive<nonstationary>";
    static void configure(kattn::attention_config& c) { c.scale = 2.0; }
};
struct favor : base<kf::favor, ks::orthogonal_gaussian> {
    static constexpr const char* name = "favor";
};
struct favor_hyperbolic : base<kf::favor_hyperbolic, ks::orthogonal_gaussian> {
    static constexpr const char* name = "favor_hyperbolic";
};
struct elu : base<kf::elu, ks::gaussian> {
    static constexpr const char* name = "elu(renorm)";
    static void configure(kattn::attention_config& c) { c.temperature = 1.3; }
};
/// Katharopoulos et al.: ELU(x) + 1 with Ω = I, floor 0, no renormalisation.
struct elu_classic : base<kf::elu, ks::identity> {
    static constexpr const char* name = "elu(identity, no renorm)";
    static void configure(kattn::attention_config& c) {
        c.floor = 0.0;
        c.renormalize = false;
    }
};
struct softplus : base<kf::softplus, ks::gaussian> {
    static constexpr const char* name = "softplus";
    static void configure(kattn::attention_config& c) { c.temperature = 0.8; }
};
struct sigmoid2 : base<kf::sigmoid2, ks::gaussian> {
    static constexpr const char* name = "sigmoid2";
    static void configure(kattn::attention_config& c) { c.temperature = 1.2; }
};
struct cos2 : base<kf::cos2, ks::gaussian> {
    static constexpr const char* name = "cos2";
};
struct softmax_features : base<kf::softmax_features, ks::gaussian> {
    static constexpr const char* name = "softmax_features";
    static void configure(kattn::attention_config& c) { c.temperature = 0.7; }
};
struct porf_softplus : base<kf::porf_softplus, ks::orthogonal_gaussian> {
    static constexpr const char* name = "porf_softplus";
};

/// The feature-map hyper-parameters a case configures.
template <class C>
kattn::feature_params params() {
    kattn::attention_config c;
    C::configure(c);
    return kattn::feature_params{c.temperature, c.floor, c.scale, c.renormalize};
}

template <class C, class T>
using op_t = kattn::linear_attention<typename C::map, typename C::sampler, kattn::backends::reference, T>;

/// An operator of case C: head_dim d, value_dim dv, num_features nf (head_dim for the
/// identity sampler). Maps with a bias get a random one (elu's initial bias is 0), except
/// the classic identity-Ω elu, which keeps b = 0.
template <class C, class T>
op_t<C, T> make_op(index_t d, index_t dv, index_t nf, std::uint64_t seed, double eps = 1e-6) {
    kattn::attention_config cfg{.head_dim = d, .value_dim = dv, .num_features = C::identity ? d : nf, .seed = seed};
    cfg.eps = eps;
    C::configure(cfg);
    op_t<C, T> op(cfg);
    if constexpr (C::map::uses_bias && !C::identity) {
        const auto m = op.bias().size();
        op.set_bias(kt::randn<T, 1>({m}, seed + 1000, 0.5));
    }
    return op;
}

/// (case, value type) pairs for TEST_CASE_TEMPLATE.
template <class C, class T>
struct combo {
    using case_t = C;
    using value_type = T;
};

}  // namespace kt::cases

#define KT_ALL_CASES                                                                                          \
    kt::cases::trig, kt::cases::nonstationary, kt::cases::positive_trig, kt::cases::positive_nonstationary,   \
        kt::cases::favor, kt::cases::favor_hyperbolic, kt::cases::elu, kt::cases::elu_classic,                \
        kt::cases::softplus, kt::cases::sigmoid2, kt::cases::cos2, kt::cases::softmax_features,               \
        kt::cases::porf_softplus

#define KT_COMBOS_T(T)                                                                                        \
    kt::cases::combo<kt::cases::trig, T>, kt::cases::combo<kt::cases::nonstationary, T>,                      \
        kt::cases::combo<kt::cases::positive_trig, T>, kt::cases::combo<kt::cases::positive_nonstationary, T>, \
        kt::cases::combo<kt::cases::favor, T>, kt::cases::combo<kt::cases::favor_hyperbolic, T>,              \
        kt::cases::combo<kt::cases::elu, T>, kt::cases::combo<kt::cases::elu_classic, T>,                     \
        kt::cases::combo<kt::cases::softplus, T>, kt::cases::combo<kt::cases::sigmoid2, T>,                   \
        kt::cases::combo<kt::cases::cos2, T>, kt::cases::combo<kt::cases::softmax_features, T>,               \
        kt::cases::combo<kt::cases::porf_softplus, T>

#define KT_ALL_COMBOS KT_COMBOS_T(double), KT_COMBOS_T(float)
