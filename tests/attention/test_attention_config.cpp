// attention_config<Map, Sampler>: each policy owns its parameters (`feature`, `sampler`);
// the shorthands (.temperature, .floor, .scale, .renormalize, .sigma, .norms) reach the
// policy that has the field, and are rejected by name when neither has it; the untyped
// attention_config<> converts; Langevin particles take the operator's configuration.
#include "../support.hpp"

#include <vector>

namespace {

using kattn::index_t;
namespace kf = kattn::features;
namespace ks = kattn::samplers;
using kattn::backends::reference;

template <class Map, class Sampler = typename Map::default_sampler>
using op_t = kattn::linear_attention<Map, Sampler, reference, double>;

bool same(const xt::xtensor<double, 4>& a, const xt::xtensor<double, 4>& b) {
    return a.shape() == b.shape() && std::equal(a.begin(), a.end(), b.begin());
}

struct inputs {
    xt::xtensor<double, 4> q = kt::randn<double, 4>({1, 2, 9, 4}, 1, 0.5),
                           k = kt::randn<double, 4>({1, 2, 9, 4}, 2, 0.5), v = kt::randn<double, 4>({1, 2, 9, 3}, 3);
};

}  // namespace

TEST_CASE("attention_config: typed parameters and shorthands configure the map identically") {
    const inputs in;
    const op_t<kf::elu> typed({.head_dim = 4,
                               .value_dim = 3,
                               .num_features = 8,
                               .seed = 5,
                               .feature = {.temperature = 1.3, .floor = 0.0, .renormalize = false}});
    const op_t<kf::elu> shorthand({.head_dim = 4,
                                   .value_dim = 3,
                                   .num_features = 8,
                                   .seed = 5,
                                   .temperature = 1.3,
                                   .floor = 0.0,
                                   .renormalize = false});
    kattn::attention_config untyped{.head_dim = 4, .value_dim = 3, .num_features = 8, .seed = 5};
    untyped.temperature = 1.3;
    untyped.floor = 0.0;
    untyped.renormalize = false;
    const op_t<kf::elu> converted(untyped);
    const op_t<kf::elu> plain({.head_dim = 4, .value_dim = 3, .num_features = 8, .seed = 5});

    CHECK(typed.config().feature.temperature == 1.3);
    CHECK(typed.config().feature.floor == 0.0);
    CHECK_FALSE(typed.config().feature.renormalize);
    // Shorthands are resolved into the policy's parameters and cleared.
    CHECK(shorthand.config().feature.temperature == 1.3);
    CHECK_FALSE(shorthand.config().temperature.has_value());
    CHECK(converted.config().feature.floor == 0.0);
    const auto a = typed(in.q, in.k, in.v), b = shorthand(in.q, in.k, in.v), c = converted(in.q, in.k, in.v);
    CHECK(same(a, b));
    CHECK(same(a, c));
    CHECK_FALSE(same(a, plain(in.q, in.k, in.v)));  // the parameters do reach the kernel
}

TEST_CASE("attention_config: positive<F> owns the scale and F's parameters") {
    const inputs in;
    using pe = kf::positive<kf::elu>;
    const op_t<pe> typed({.head_dim = 4,
                          .value_dim = 3,
                          .num_features = 8,
                          .seed = 2,
                          .feature = {.inner = {.temperature = 0.7}, .scale = 2.5}});
    const op_t<pe> shorthand(
        {.head_dim = 4, .value_dim = 3, .num_features = 8, .seed = 2, .temperature = 0.7, .scale = 2.5});
    CHECK(typed.config().feature.scale == 2.5);
    CHECK(shorthand.config().feature.inner.temperature == 0.7);
    CHECK(same(typed(in.q, in.k, in.v), shorthand(in.q, in.k, in.v)));
}

TEST_CASE("attention_config: sampler parameters reach the sampler") {
    const op_t<kf::trig, ks::gaussian> op({.head_dim = 4, .value_dim = 3, .num_features = 6, .seed = 9, .sigma = 2.0});
    CHECK(op.config().sampler.sigma == 2.0);
    std::vector<double> w(6 * 4);
    ks::gaussian::sample(ks::gaussian::params{.sigma = 2.0}, 4, 6, 9, w.data());
    for (index_t k = 0; k < 6; ++k)
        for (index_t i = 0; i < 4; ++i) CHECK(op.omega()(i, k) == w[std::size_t(k * 4 + i)]);
    const op_t<kf::favor, ks::orthogonal_gaussian> fixed({.head_dim = 4,
                                                          .value_dim = 3,
                                                          .num_features = 8,
                                                          .seed = 9,
                                                          .sampler = {.norms = kattn::orthogonal_norms::fixed}});
    for (index_t k = 0; k < 8; ++k) {
        double n2 = 0;
        for (index_t i = 0; i < 4; ++i) n2 += fixed.omega()(i, k) * fixed.omega()(i, k);
        CHECK(n2 == doctest::Approx(4.0).epsilon(1e-12));  // every norm √d
    }
}

TEST_CASE("attention_config: a shorthand no policy has is rejected by name") {
    kt::check_error([] { op_t<kf::favor> op({.head_dim = 4, .value_dim = 3, .num_features = 8, .temperature = 2.0}); },
                    {"'temperature'", "favor", "orthogonal_gaussian"});
    kt::check_error(
        [] {
            op_t<kf::trig, ks::gaussian> op(
                {.head_dim = 4, .value_dim = 3, .num_features = 8, .norms = kattn::orthogonal_norms::fixed});
        },
        {"'norms'", "trig", "gaussian"});
    kt::check_error([] { op_t<kf::elu> op({.head_dim = 4, .value_dim = 3, .num_features = 8, .scale = 3.0}); },
                    {"'scale'", "elu"});
    // Untyped: a field left at its default is not a shorthand, so any map accepts it ...
    const kattn::attention_config untyped{.head_dim = 4, .value_dim = 3, .num_features = 8};
    CHECK_NOTHROW(op_t<kf::favor>{untyped});
    // ... and a changed one must belong to the map or the sampler.
    kattn::attention_config changed = untyped;
    changed.floor = 0.0;
    kt::check_error([&] { op_t<kf::favor> op(changed); }, {"'floor'", "favor"});
    // Invalid values of a policy's own parameters are rejected by the policy.
    kt::check_error(
        [] { op_t<kf::elu> op({.head_dim = 4, .value_dim = 3, .num_features = 8, .feature = {.temperature = 0.0}}); },
        {"'temperature'", "> 0"});
}

TEST_CASE("langevin: the particles take the operator's configuration") {
    using lv_t = ks::langevin<kf::elu>;
    const kattn::attention_config<kf::elu, lv_t> cfg{
        .head_dim = 3, .value_dim = 2, .num_features = 5, .seed = 7, .temperature = 0.7, .sigma = 2.0};
    const lv_t from_cfg(cfg);
    CHECK(from_cfg.input_dim() == 3);
    CHECK(from_cfg.num_particles() == 5);
    CHECK(from_cfg.seed() == 7);
    CHECK(from_cfg.map_parameters().temperature == 0.7);
    ks::langevin_options opt;
    opt.features.temperature = 0.7;
    const lv_t legacy(3, 5, opt, 7, kattn::sampler_params{.sigma = 2.0});
    CHECK(legacy.map_parameters().temperature == 0.7);
    const auto a = from_cfg.particles(), b = legacy.particles();
    CHECK(std::equal(a.begin(), a.end(), b.begin(), b.end()));
    // The operator built from the same configuration holds those particles as Ω.
    const kattn::linear_attention<kf::elu, lv_t, reference, double> op(cfg, from_cfg);
    for (index_t k = 0; k < 5; ++k)
        for (index_t i = 0; i < 3; ++i) CHECK(op.omega()(i, k) == a(k, i));
    // Paired maps: N = num_features / 2 pairs.
    const kattn::attention_config<kf::nonstationary, ks::langevin<kf::nonstationary>> pc{
        .head_dim = 3, .value_dim = 2, .num_features = 8, .seed = 1};
    CHECK(ks::langevin<kf::nonstationary>(pc).num_particles() == 4);
    // A pre-0.2 field the map does not have is rejected by name.
    ks::langevin_options bad;
    bad.features.temperature = 2.0;
    kt::check_error([&] { ks::langevin<kf::favor> lv(3, 4, bad, 1); }, {"'temperature'", "favor"});
    // With the operator's configuration, the map's parameters have one source.
    kt::check_error([&] { lv_t lv(cfg, bad); }, {"'features'", "configuration"});
}
