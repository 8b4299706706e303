// Bad input to linear_attention throws kattn::error whose message names the argument
// (docs/errors.md: never undefined behaviour, never a silent NaN).
#include "map_cases.hpp"

#include <array>
#include <limits>
#include <vector>

namespace {

using kattn::index_t;
namespace kf = kattn::features;
namespace ks = kattn::samplers;
using kattn::backends::reference;

template <class Map, class Sampler = typename Map::default_sampler, class T = double>
using op_t = kattn::linear_attention<Map, Sampler, reference, T>;

constexpr double nan_v = std::numeric_limits<double>::quiet_NaN();
constexpr double inf_v = std::numeric_limits<double>::infinity();

kattn::attention_config<> base_cfg() { return {.head_dim = 4, .value_dim = 3, .num_features = 8, .seed = 1}; }

std::string arg(const std::string& name) { return "argument '" + name + "'"; }

template <std::size_t R>
xt::xtensor<double, R> t(const std::array<std::size_t, R>& s, std::uint64_t seed = 1) {
    return kt::randn<double, R>(s, seed, 0.5);
}

}  // namespace

TEST_CASE("linear_attention config: bad options throw naming the option") {
    auto with = [](auto f) {
        auto c = base_cfg();
        f(c);
        return c;
    };
    using favor_op = op_t<kf::favor>;
    kt::check_error([&] { favor_op(with([](auto& c) { c.head_dim = 0; })); }, {arg("head_dim")});
    kt::check_error([&] { favor_op(with([](auto& c) { c.value_dim = 0; })); }, {arg("value_dim")});
    kt::check_error([&] { favor_op(with([](auto& c) { c.num_features = 0; })); }, {arg("num_features")});
    kt::check_error([&] { favor_op(with([](auto& c) { c.num_features = -3; })); }, {arg("num_features")});

    SUBCASE("odd num_features for paired maps") {
        kt::check_error([&] { op_t<kf::nonstationary>(with([](auto& c) { c.num_features = 7; })); },
                        {arg("num_features"), "even", "7"});
        kt::check_error([&] { op_t<kf::positive<kf::nonstationary>>(with([](auto& c) { c.num_features = 5; })); },
                        {arg("num_features"), "even"});
        CHECK_NOTHROW(op_t<kf::nonstationary>(with([](auto& c) { c.num_features = 6; })));
        // unpaired maps accept odd counts
        CHECK_NOTHROW(op_t<kf::trig>(with([](auto& c) { c.num_features = 7; })));
    }
    SUBCASE("temperature <= 0") {
        for (double v : {0.0, -1.0, nan_v, inf_v})
            kt::check_error([&] { op_t<kf::softplus>(with([v](auto& c) { c.temperature = v; })); },
                            {arg("temperature")});
    }
    SUBCASE("floor < 0") {
        for (double v : {-1e-9, -1.0, nan_v})
            kt::check_error([&] { op_t<kf::elu>(with([v](auto& c) { c.floor = v; })); }, {arg("floor")});
        CHECK_NOTHROW(op_t<kf::elu>(with([](auto& c) { c.floor = 0.0; })));
    }
    SUBCASE("scale <= 0") {
        for (double v : {0.0, -2.0, nan_v})
            kt::check_error([&] { op_t<kf::positive<kf::trig>>(with([v](auto& c) { c.scale = v; })); }, {arg("scale")});
    }
    SUBCASE("eps <= 0") {
        for (double v : {0.0, -1e-6, nan_v, inf_v})
            kt::check_error([&] { favor_op(with([v](auto& c) { c.eps = v; })); }, {arg("eps")});
    }
    SUBCASE("input_scale <= 0") {
        for (double v : {0.0, -1.0, nan_v})
            kt::check_error([&] { favor_op(with([v](auto& c) { c.input_scale = v; })); }, {arg("input_scale")});
    }
    SUBCASE("sigma <= 0") {
        for (double v : {0.0, -1.0, nan_v})
            kt::check_error([&] { op_t<kf::trig>(with([v](auto& c) { c.sigma = v; })); }, {arg("sigma")});
    }
    SUBCASE("identity sampler needs num_features == head_dim") {
        kt::check_error([&] { op_t<kf::elu, ks::identity>(with([](auto& c) { c.num_features = 5; })); },
                        {arg("num_features"), "head_dim"});
        CHECK_NOTHROW(op_t<kf::elu, ks::identity>(with([](auto& c) { c.num_features = 4; })));
    }
}

TEST_CASE("linear_attention forward: bad shapes throw naming the argument") {
    const op_t<kf::favor> op(base_cfg());
    const auto q = t<4>({2, 3, 5, 4}), k = t<4>({2, 3, 6, 4}), v = t<4>({2, 3, 6, 3});
    CHECK_NOTHROW(op(q, k, v));

    SUBCASE("wrong rank") {
        // The operator's rank is a template parameter (rank 2 or 4, same for q, k, v), so a
        // rank-3 tensor does not compile; the runtime check behind it is check_qkv.
        using S = std::vector<std::size_t>;
        kt::check_error([] { kattn::detail::check_qkv(S{5, 4, 1}, S{5, 4, 1}, S{5, 3, 1}, 4, 3); }, {arg("q"), "rank"});
        kt::check_error([] { kattn::detail::check_qkv(S{5, 4}, S{1, 5, 4}, S{5, 3}, 4, 3); }, {arg("k"), "rank"});
        kt::check_error([] { kattn::detail::check_qkv(S{5, 4}, S{5, 4}, S{1, 1, 5, 3}, 4, 3); }, {arg("v"), "rank"});
    }
    SUBCASE("mismatched batch or heads") {
        kt::check_error([&] { op(q, t<4>({1, 3, 6, 4}), t<4>({1, 3, 6, 3})); }, {arg("k"), "batch"});
        kt::check_error([&] { op(q, t<4>({2, 2, 6, 4}), t<4>({2, 2, 6, 3})); }, {arg("k"), "heads"});
        kt::check_error([&] { op(q, k, t<4>({2, 1, 6, 3})); }, {arg("v"), "heads"});
        kt::check_error([&] { op(q, k, t<4>({3, 3, 6, 3})); }, {arg("v")});
    }
    SUBCASE("mismatched dims and lengths") {
        kt::check_error([&] { op(q, t<4>({2, 3, 6, 5}), v); }, {arg("k"), "dim"});
        kt::check_error([&] { op(t<4>({2, 3, 5, 5}), t<4>({2, 3, 6, 5}), v); }, {arg("q"), "head_dim"});
        kt::check_error([&] { op(q, k, t<4>({2, 3, 6, 2})); }, {arg("v"), "value_dim"});
        kt::check_error([&] { op(q, k, t<4>({2, 3, 7, 3})); }, {arg("v"), "length"});
        // rank 2
        kt::check_error([&] { op(t<2>({5, 3}), t<2>({6, 3}), t<2>({6, 3})); }, {arg("q"), "head_dim"});
        kt::check_error([&] { op(t<2>({5, 4}), t<2>({6, 4}), t<2>({6, 4})); }, {arg("v"), "value_dim"});
    }
    SUBCASE("zero length") {
        kt::check_error([&] { op(t<4>({2, 3, 0, 4}), k, v); }, {arg("q"), "length"});
        kt::check_error([&] { op(q, t<4>({2, 3, 0, 4}), t<4>({2, 3, 0, 3})); }, {arg("k"), "length"});
        kt::check_error([&] { op(t<2>({0, 4}), t<2>({6, 4}), t<2>({6, 3})); }, {arg("q"), "length"});
    }
    SUBCASE("zero batch or heads") {
        kt::check_error([&] { op(t<4>({0, 3, 5, 4}), t<4>({0, 3, 6, 4}), t<4>({0, 3, 6, 3})); }, {arg("q"), "batch"});
        kt::check_error([&] { op(t<4>({2, 0, 5, 4}), t<4>({2, 0, 6, 4}), t<4>({2, 0, 6, 3})); }, {arg("q"), "heads"});
    }
    SUBCASE("causal with q_len != k_len") {
        kt::check_error([&] { op(q, k, v, kattn::causal); }, {arg("k"), "causal"});
        const std::array<index_t, 2> len{6, 6};
        kt::check_error([&] { op(q, k, v, kattn::causal, kattn::key_lengths(len)); }, {arg("k"), "causal"});
        const auto g = t<4>({2, 3, 5, 3});
        kt::check_error([&] { op.backward(q, k, v, g, kattn::causal); }, {arg("k"), "causal"});
    }
}

TEST_CASE("linear_attention: key_lengths of the wrong size or out of range") {
    const op_t<kf::elu> op(base_cfg());
    const auto q = t<4>({2, 3, 5, 4}), k = t<4>({2, 3, 6, 4}), v = t<4>({2, 3, 6, 3}), g = t<4>({2, 3, 5, 3});
    auto bad = [&](std::vector<index_t> len, std::initializer_list<std::string> frag) {
        kt::check_error([&] { op(q, k, v, kattn::key_lengths(len)); }, frag);
        kt::check_error([&] { op.backward(q, k, v, g, kattn::key_lengths(len)); }, frag);
        const auto qc = t<4>({2, 3, 6, 4});
        const auto gc = t<4>({2, 3, 6, 3});
        kt::check_error([&] { op(qc, k, v, kattn::causal, kattn::key_lengths(len)); }, frag);
        kt::check_error([&] { op.backward(qc, k, v, gc, kattn::causal, kattn::key_lengths(len)); }, frag);
    };
    bad({6}, {arg("key_lengths"), "one entry per batch"});
    bad({6, 6, 6}, {arg("key_lengths"), "one entry per batch"});
    bad({}, {arg("key_lengths")});
    bad({6, 0}, {arg("key_lengths"), "0 at batch 1"});
    bad({-1, 3}, {arg("key_lengths"), "at batch 0"});
    bad({7, 3}, {arg("key_lengths"), "7 at batch 0"});
    std::vector<index_t> ok{6, 1};
    CHECK_NOTHROW(op(q, k, v, kattn::key_lengths(ok)));
    // rank 2: one entry
    std::vector<index_t> two{3, 3};
    kt::check_error(
        [&] {
            op(t<2>({5, 4}), t<2>({6, 4}), t<2>({6, 3}), kattn::key_lengths(two));
        },
        {arg("key_lengths")});
}

TEST_CASE_TEMPLATE("linear_attention: NaN/Inf in q, k, v, dout throw unless check_finite is off", T, double, float) {
    auto cfg = base_cfg();
    const op_t<kf::favor, ks::orthogonal_gaussian, T> op(cfg);
    cfg.check_finite = false;
    const op_t<kf::favor, ks::orthogonal_gaussian, T> unchecked(cfg);
    const auto q = kt::randn<T, 4>({2, 3, 5, 4}, 1, 0.5), k = kt::randn<T, 4>({2, 3, 5, 4}, 2, 0.5),
               v = kt::randn<T, 4>({2, 3, 5, 3}, 3), g = kt::randn<T, 4>({2, 3, 5, 3}, 4);
    for (T bad : {std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::infinity(),
                  -std::numeric_limits<T>::infinity()}) {
        auto q2 = q, k2 = k, v2 = v, g2 = g;
        q2(1, 2, 3, 1) = bad;
        k2(0, 1, 4, 0) = bad;
        v2(1, 0, 0, 2) = bad;
        g2(0, 0, 1, 1) = bad;
        kt::check_error([&] { op(q2, k, v); }, {arg("q"), "finite"});
        kt::check_error([&] { op(q, k2, v); }, {arg("k"), "finite"});
        kt::check_error([&] { op(q, k, v2); }, {arg("v"), "finite"});
        kt::check_error([&] { op(q2, k, v, kattn::causal); }, {arg("q")});
        kt::check_error([&] { op.backward(q2, k, v, g); }, {arg("q")});
        kt::check_error([&] { op.backward(q, k2, v, g); }, {arg("k")});
        kt::check_error([&] { op.backward(q, k, v2, g); }, {arg("v")});
        kt::check_error([&] { op.backward(q, k, v, g2); }, {arg("dout"), "finite"});
        kt::check_error([&] { op.backward(q, k, v, g2, kattn::causal); }, {arg("dout")});
        kt::check_error([&] { op.features(xt::xtensor<T, 2>{{T(0), bad, T(0), T(0)}}); }, {arg("x"), "finite"});
        // check_finite = false skips the scan (the result may then contain NaN).
        CHECK_NOTHROW(unchecked(q2, k, v));
        CHECK_NOTHROW(unchecked(q, k2, v));
        CHECK_NOTHROW(unchecked(q, k, v2));
        CHECK_NOTHROW(unchecked.backward(q, k, v, g2));
        CHECK_NOTHROW(unchecked.features(xt::xtensor<T, 2>{{T(0), bad, T(0), T(0)}}));
    }
    CHECK_NOTHROW(op(q, k, v));
    CHECK_NOTHROW(op.backward(q, k, v, g));
}

TEST_CASE("linear_attention backward: dout with the wrong shape") {
    const op_t<kf::softmax_features> op(base_cfg());
    const auto q = t<4>({2, 3, 5, 4}), k = t<4>({2, 3, 6, 4}), v = t<4>({2, 3, 6, 3});
    kt::check_error([&] { op.backward(q, k, v, t<4>({2, 3, 5, 4})); }, {arg("dout"), "[2, 3, 5, 3]"});
    kt::check_error([&] { op.backward(q, k, v, t<4>({2, 3, 6, 3})); }, {arg("dout")});
    kt::check_error([&] { op.backward(q, k, v, t<4>({1, 3, 5, 3})); }, {arg("dout")});
    kt::check_error([&] { op.backward(t<2>({5, 4}), t<2>({6, 4}), t<2>({6, 3}), t<2>({5, 2})); }, {arg("dout")});
    CHECK_NOTHROW(op.backward(q, k, v, t<4>({2, 3, 5, 3})));
}

TEST_CASE("linear_attention: set_omega and set_bias validate shape and values") {
    op_t<kf::cos2> op(base_cfg());
    kt::check_error([&] { op.set_omega(t<2>({4, 7})); }, {arg("omega"), "[4, 8]", "[4, 7]"});
    kt::check_error([&] { op.set_omega(t<2>({8, 4})); }, {arg("omega")});
    auto w = op.omega();
    w(2, 3) = nan_v;
    kt::check_error([&] { op.set_omega(w); }, {arg("omega"), "finite"});
    w(2, 3) = inf_v;
    kt::check_error([&] { op.set_omega(w); }, {arg("omega"), "finite"});
    CHECK(std::isfinite(op.omega()(2, 3)));  // a rejected Ω leaves the operator unchanged
    kt::check_error([&] { op.set_bias(t<1>({7})); }, {arg("bias"), "size 8"});
    auto b = op.bias();
    b(0) = nan_v;
    kt::check_error([&] { op.set_bias(b); }, {arg("bias"), "finite"});
    // a map without a bias rejects one
    op_t<kf::favor> fav(base_cfg());
    kt::check_error([&] { fav.set_bias(t<1>({8})); }, {arg("bias")});
    // paired maps: Ω is d × num_features
    op_t<kf::nonstationary> ns(base_cfg());
    CHECK_NOTHROW(ns.set_omega(t<2>({4, 8})));
    kt::check_error([&] { ns.set_omega(t<2>({4, 4})); }, {arg("omega")});
}

TEST_CASE("linear_attention features(): wrong input dimension") {
    const op_t<kf::trig> op(base_cfg());
    kt::check_error([&] { op.features(t<2>({3, 5})); }, {arg("x"), "head_dim"});
    kt::check_error([&] { op.features(t<2>({0, 4})); }, {arg("x")});
}

TEST_CASE("linear_attention step(): wrong token shapes and states") {
    const op_t<kf::favor> op(base_cfg());
    SUBCASE("single sequence, rank-1 tokens") {
        auto st = op.initial_state();
        const auto q = t<1>({4}), k = t<1>({4}), v = t<1>({3});
        kt::check_error([&] { op.step(st, t<1>({5}), k, v); }, {arg("q_t"), "[4]"});
        kt::check_error([&] { op.step(st, q, t<1>({3}), v); }, {arg("k_t")});
        kt::check_error([&] { op.step(st, q, k, t<1>({4})); }, {arg("v_t"), "[3]"});
        auto qn = q;
        qn(0) = nan_v;
        kt::check_error([&] { op.step(st, qn, k, v); }, {arg("q_t"), "finite"});
        CHECK(st.steps[0] == 0);  // rejected tokens do not advance the state
        CHECK_NOTHROW(op.step(st, q, k, v));
        CHECK(st.steps[0] == 1);
    }
    SUBCASE("batched state, rank-3 tokens") {
        auto st = op.initial_state(2, 3);
        const auto q = t<3>({2, 3, 4}), k = t<3>({2, 3, 4}), v = t<3>({2, 3, 3});
        CHECK_NOTHROW(op.step(st, q, k, v));
        kt::check_error([&] { op.step(st, t<3>({1, 3, 4}), k, v); }, {arg("q_t"), "[2, 3, 4]"});
        kt::check_error([&] { op.step(st, q, t<3>({2, 2, 4}), v); }, {arg("k_t")});
        kt::check_error([&] { op.step(st, q, k, t<3>({2, 3, 4})); }, {arg("v_t")});
        // rank-1 tokens for a batched state
        kt::check_error([&] { op.step(st, t<1>({4}), t<1>({4}), t<1>({3})); }, {arg("q_t"), "rank 3"});
    }
    SUBCASE("a state from another operator") {
        const op_t<kf::favor> other({.head_dim = 4, .value_dim = 5, .num_features = 8, .seed = 1});
        auto st = other.initial_state();
        kt::check_error([&] { op.step(st, t<1>({4}), t<1>({4}), t<1>({3})); }, {arg("state.S"), "value_dim"});
    }
    SUBCASE("initial_state with zero batch or heads") {
        kt::check_error([&] { (void)op.initial_state(0, 1); }, {arg("batch")});
        kt::check_error([&] { (void)op.initial_state(1, 0); }, {arg("heads")});
    }
}
