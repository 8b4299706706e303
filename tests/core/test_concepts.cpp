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

static_assert(feature_map<features::trig> && feature_map<features::nonstationary> &&
              feature_map<features::positive<features::nonstationary>> && feature_map<features::favor> &&
              feature_map<features::favor_hyperbolic> && feature_map<features::elu> &&
              feature_map<features::softplus> && feature_map<features::sigmoid2> && feature_map<features::cos2> &&
              feature_map<features::softmax_features> && feature_map<features::porf_softplus>);
static_assert(!feature_map<not_a_map> && !feature_map<int>);
static_assert(spectral_sampler<samplers::identity> && spectral_sampler<samplers::gaussian> &&
              spectral_sampler<samplers::orthogonal_gaussian>);
static_assert(!spectral_sampler<half_a_sampler>);
static_assert(execution_backend<backends::reference> && execution_backend<backends::simd>);
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
