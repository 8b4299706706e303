// The policy concepts accept every shipped policy and reject types that do not fit.
#include <doctest/doctest.h>

#include <kattn/kattn.hpp>

namespace {
struct not_a_map {
    static constexpr const char* name = "not_a_map";
};
struct half_a_sampler {
    static constexpr const char* name = "half";
    static constexpr bool is_random = true;  // no sample()
};
}  // namespace

using namespace kattn;

// Every registered map is a feature_map, and the registry holds each map once.
template <class... Maps>
constexpr bool all_feature_maps(type_list<Maps...>) {
    return (feature_map<Maps> && ...);
}
template <class T, class... Us>
constexpr int count_of = (int(std::is_same_v<T, Us>) + ... + 0);
template <class... Maps>
constexpr bool each_once(type_list<Maps...>) {
    return ((count_of<Maps, Maps...> == 1) && ...);
}
static_assert(all_feature_maps(features::all{}) && each_once(features::all{}));
static_assert(feature_map<features::porf_softplus> && feature_map<features::relu>);
static_assert(!feature_map<not_a_map> && !feature_map<int>);
static_assert(spectral_sampler<samplers::identity> && spectral_sampler<samplers::gaussian> &&
              spectral_sampler<samplers::orthogonal_gaussian>);
static_assert(!spectral_sampler<half_a_sampler>);
static_assert(execution_backend<backends::reference> && execution_backend<backends::simd>);
static_assert(std::is_same_v<execution_backend_traits<backends::simd>::row_ops, detail::simd_ops<>> &&
              std::is_same_v<execution_backend_traits<backends::reference>::row_ops, detail::scalar_ops>);
static_assert(!execution_backend<not_a_map>);

TEST_CASE("feature_map_traits report the maps' capabilities") {
    using tf = feature_map_traits<features::trig>;
    using nf = feature_map_traits<features::nonstationary>;
    using pf = feature_map_traits<features::positive<features::nonstationary>>;
    using ff = feature_map_traits<features::favor>;
    CHECK_FALSE(tf::is_positive);
    CHECK(tf::feature_dim(16) == 32);
    CHECK(nf::uses_pairs);
    CHECK(nf::frequency_dim(8) == 16);
    CHECK(pf::is_positive);
    CHECK(pf::uses_pairs);
    CHECK(ff::has_stabiliser);
    CHECK(ff::softmax_scaling);
    CHECK_FALSE(tf::softmax_scaling);
    CHECK(feature_map_traits<features::porf_softplus>::requires_orthogonal);
    CHECK_FALSE(feature_map_traits<features::softplus>::requires_orthogonal);
    CHECK(feature_map_traits<features::elu>::uses_bias);
    CHECK(feature_map_traits<features::cos2>::uses_bias);
    CHECK(spectral_sampler_traits<samplers::orthogonal_gaussian>::is_orthogonal);
    CHECK_FALSE(spectral_sampler_traits<samplers::gaussian>::is_orthogonal);
    CHECK_FALSE(spectral_sampler_traits<samplers::identity>::is_random);
}
