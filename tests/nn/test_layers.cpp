// Tests for the basic kattn::nn layers: embedding, patch_embedding, sinusoidal_positions,
// layer_norm, dropout, activations, ffn, mean_pooling, classifier_head. Forward passes
// against naive implementations and closed forms, backward against finite differences.
#include <doctest/doctest.h>

#include <omp.h>

#include <cmath>
#include <numeric>
#include <vector>

#include <kattn/nn/activation.hpp>
#include <kattn/nn/dropout.hpp>
#include <kattn/nn/embedding.hpp>
#include <kattn/nn/ffn.hpp>
#include <kattn/nn/head.hpp>
#include <kattn/nn/layer_norm.hpp>
#include <kattn/nn/patch_embedding.hpp>
#include <kattn/nn/pooling.hpp>
#include <kattn/nn/positional.hpp>

#include "gradcheck.hpp"

using namespace kattn;

namespace {
nn::context make_ctx(index_t B, index_t L, std::vector<index_t> lengths = {}, bool training = false,
                     std::uint64_t step = 0) {
    nn::context c;
    c.batch = B;
    c.length = L;
    c.lengths = std::move(lengths);
    c.training = training;
    c.step = step;
    return c;
}
}  // namespace

// ---------------------------------------------------------------- embedding

TEST_CASE("nn::embedding: N(0,1) init, scaled row lookup, zero padding row") {
    nn::embedding<double> big({.vocab = 1000, .dim = 64, .seed = 4});
    const auto& w = big.weight().value;
    const double mean = std::accumulate(w.begin(), w.end(), 0.0) / double(w.size());
    double var = 0;
    for (double v : w) var += (v - mean) * (v - mean);
    var /= double(w.size());
    CHECK(std::abs(mean) < 0.02);       // sd of the mean: 1/256
    CHECK(std::abs(var - 1.0) < 0.03);  // sd of the variance: ≈ 0.0056

    nn::embedding<double> emb({.vocab = 11, .dim = 5, .padding_index = 0, .scale = std::sqrt(5.0), .seed = 1});
    for (int c = 0; c < 5; ++c) CHECK(emb.weight().value[c] == 0.0);
    const std::vector<std::int32_t> ids{3, 0, 10, 3};
    const auto y = emb.forward(ids);
    REQUIRE(y.shape()[0] == 4);
    for (int r = 0; r < 4; ++r)
        for (int c = 0; c < 5; ++c)
            CHECK(y(r, c) == doctest::Approx(std::sqrt(5.0) * emb.weight().value[ids[r] * 5 + c]).epsilon(1e-15));
}

TEST_CASE("nn::embedding: backward matches central differences, padding row gets no gradient") {
    nn::embedding<double> emb({.vocab = 9, .dim = 6, .padding_index = 2, .scale = 2.5, .seed = 7});
    nn::parameter_list ps;
    emb.collect(ps, "emb");
    REQUIRE(ps.size() == 1);
    CHECK(ps[0].name == "emb.weight");
    const std::vector<std::int32_t> ids{1, 2, 8, 1, 1, 0, 2, 5};
    auto r = kt::check_gradients([&](const kt::dtensor&) { return emb.forward(ids); },
                                 [&](const kt::dtensor& g) {
                                     emb.backward(g);
                                     return g;
                                 },
                                 ps, kt::randn2(1, 1, 0), 1e-6, 60, 1e-6, false);
    CHECK(r.max_err_p < 1e-6);
    for (int c = 0; c < 6; ++c) CHECK(emb.weight().grad[2 * 6 + c] == 0.0);
    // Padding ids embed to zero even if the padding row was changed (e.g. by a checkpoint).
    emb.weight().value[2 * 6 + 1] = 3.0;
    const auto yp = emb.forward(ids);
    for (int c = 0; c < 6; ++c) CHECK(yp(1, c) == 0.0);
    // Repeated id 1: gradient is the sum over its three rows.
    nn::zero_grad(ps);
    emb.forward(ids);
    const auto g = kt::randn2(8, 6, 3);
    emb.backward(g);
    for (int c = 0; c < 6; ++c) CHECK(emb.weight().grad[6 + c] == doctest::Approx(2.5 * (g(0, c) + g(3, c) + g(4, c))));
}

TEST_CASE("nn::embedding: bad ids and configuration throw kattn::error") {
    nn::embedding<float> emb({.vocab = 10, .dim = 4});
    const std::vector<std::int32_t> bad{1, 17};
    CHECK_THROWS_WITH_AS(emb.forward(bad), doctest::Contains("'ids'"), kattn::error);
    CHECK_THROWS_WITH_AS(emb.forward(bad), doctest::Contains("17"), kattn::error);
    const std::vector<std::int32_t> neg{-1};
    CHECK_THROWS_WITH_AS(emb.forward(neg), doctest::Contains("-1"), kattn::error);
    CHECK_THROWS_WITH_AS(nn::embedding<float>({.vocab = 10, .dim = 4, .padding_index = 10}),
                         doctest::Contains("'padding_index'"), kattn::error);
    CHECK_THROWS_AS(nn::embedding<float>({.vocab = 0, .dim = 4}), kattn::error);
    const std::vector<std::int32_t> ok{1, 2};
    emb.forward(ok);
    CHECK_THROWS_WITH_AS(emb.backward(nn::zeros<float>(3, 4)), doctest::Contains("'dy'"), kattn::error);
}

// ---------------------------------------------------------------- patch embedding

TEST_CASE("nn::patch_embedding: raster-order patches and the shared projection") {
    const index_t H = 6, W = 8, ph = 2, pw = 4, B = 3;
    nn::patch_embedding<double> pe(
        {.image_height = H, .image_width = W, .patch_height = ph, .patch_width = pw, .dim = 5, .seed = 2});
    CHECK(pe.tokens() == 6);
    const auto img = kt::randn2(B, H * W, 8);
    // Independent construction: scatter each pixel into its patch.
    kt::dtensor naive = nn::zeros<double>(B * 6, ph * pw);
    for (index_t b = 0; b < B; ++b)
        for (index_t y = 0; y < H; ++y)
            for (index_t x = 0; x < W; ++x)
                naive(b * 6 + (y / ph) * (W / pw) + x / pw, (y % ph) * pw + x % pw) = img(b, y * W + x);
    CHECK(pe.patches(img) == naive);
    const auto tok = pe.forward(img);
    const auto ref = pe.projection().apply(naive);
    CHECK(tok == ref);

    // Rows as tokens: patch 1 × W, token t = image row t.
    nn::patch_embedding<double> rows(
        {.image_height = H, .image_width = W, .patch_height = 1, .patch_width = W, .dim = 3, .seed = 2});
    CHECK(rows.tokens() == H);
    const auto p = rows.patches(img);
    for (index_t b = 0; b < B; ++b)
        for (index_t t = 0; t < H; ++t)
            for (index_t x = 0; x < W; ++x) CHECK(p(b * H + t, x) == img(b, t * W + x));
}

TEST_CASE("nn::patch_embedding: backward matches central differences; errors") {
    nn::patch_embedding<double> pe(
        {.image_height = 4, .image_width = 6, .patch_height = 2, .patch_width = 3, .dim = 7, .seed = 5});
    nn::parameter_list ps;
    pe.collect(ps, "patch");
    REQUIRE(ps.size() == 2);
    CHECK(ps[0].name == "patch.weight");
    const auto img = kt::randn2(3, 24, 9);
    auto r = kt::check_gradients([&](const kt::dtensor&) { return pe.forward(img); },
                                 [&](const kt::dtensor& g) {
                                     pe.backward(g);
                                     return g;
                                 },
                                 ps, img, 1e-6, 40, 1e-6, false);
    CHECK(r.max_err_p < 1e-6);
    CHECK_THROWS_WITH_AS(nn::patch_embedding<float>(
                             {.image_height = 28, .image_width = 28, .patch_height = 5, .patch_width = 4, .dim = 8}),
                         doctest::Contains("'patch_height'"), kattn::error);
    CHECK_THROWS_WITH_AS(nn::patch_embedding<float>(
                             {.image_height = 28, .image_width = 28, .patch_height = 4, .patch_width = 3, .dim = 8}),
                         doctest::Contains("'patch_width'"), kattn::error);
    CHECK_THROWS_WITH_AS(pe.forward(kt::randn2(2, 23, 1)), doctest::Contains("'images'"), kattn::error);
}

// ---------------------------------------------------------------- positions

TEST_CASE("nn::sinusoidal_positions: Vaswani's closed form, added per token, identity backward") {
    const index_t D = 10, Lmax = 50;
    nn::sinusoidal_positions<double> pos({.dim = D, .max_length = Lmax});
    const auto& pe = pos.table();
    for (index_t c = 0; c < D; ++c) CHECK(pe(0, c) == (c % 2 == 0 ? 0.0 : 1.0));
    for (index_t t : {1, 7, 49}) {
        CHECK(pe(t, 0) == doctest::Approx(std::sin(double(t))));
        CHECK(pe(t, 1) == doctest::Approx(std::cos(double(t))));
        CHECK(pe(t, 8) == doctest::Approx(std::sin(double(t) / std::pow(10000.0, 0.8))));
        CHECK(pe(t, 9) == doctest::Approx(std::cos(double(t) / std::pow(10000.0, 0.8))));
        for (index_t i = 0; i < D; i += 2)
            CHECK(pe(t, i) * pe(t, i) + pe(t, i + 1) * pe(t, i + 1) == doctest::Approx(1.0));
    }
    const auto ctx = make_ctx(3, 7);
    const auto x = kt::randn2(21, D, 4);
    const auto y = pos.forward(x, ctx);
    for (index_t b = 0; b < 3; ++b)
        for (index_t t = 0; t < 7; ++t)
            for (index_t c = 0; c < D; ++c) CHECK(y(b * 7 + t, c) == x(b * 7 + t, c) + pe(t, c));
    CHECK(pos.backward(x) == x);
    CHECK_THROWS_WITH_AS(pos.forward(kt::randn2(51, D, 1), make_ctx(1, 51)), doctest::Contains("'context.length'"),
                         kattn::error);
    CHECK_THROWS_WITH_AS(pos.forward(kt::randn2(20, D, 1), ctx), doctest::Contains("'x'"), kattn::error);
}

// ---------------------------------------------------------------- layer norm

TEST_CASE("nn::layer_norm: normalised rows, naive agreement, exact backward") {
    const index_t D = 13;
    nn::layer_norm<double> ln({.dim = D});
    auto x = kt::randn2(40, D, 6, 3.0);
    for (index_t r = 0; r < 40; ++r)
        for (index_t c = 0; c < D; ++c) x(r, c) += double(r);  // row offsets
    const auto y = ln.forward(x);
    for (index_t r = 0; r < 40; ++r) {
        double m = 0, v = 0;
        for (index_t c = 0; c < D; ++c) m += y(r, c);
        m /= D;
        for (index_t c = 0; c < D; ++c) v += (y(r, c) - m) * (y(r, c) - m);
        v /= D;
        CHECK(std::abs(m) < 1e-12);
        CHECK(v == doctest::Approx(1.0).epsilon(1e-3));  // var/(var+eps)
    }
    // Random γ, β (so that their gradients are exercised), then naive forward and FD.
    for (index_t c = 0; c < D; ++c) {
        ln.weight().value[c] = 1.0 + 0.3 * std::sin(double(c));
        ln.bias().value[c] = 0.2 * std::cos(double(c));
    }
    const auto y2 = ln.apply(x);
    for (index_t r = 0; r < 40; ++r) {
        double m = 0, v = 0;
        for (index_t c = 0; c < D; ++c) m += x(r, c);
        m /= D;
        for (index_t c = 0; c < D; ++c) v += (x(r, c) - m) * (x(r, c) - m);
        v /= D;
        for (index_t c = 0; c < D; ++c)
            CHECK(y2(r, c) ==
                  doctest::Approx((x(r, c) - m) / std::sqrt(v + 1e-5) * ln.weight().value[c] + ln.bias().value[c])
                      .epsilon(1e-12));
    }
    nn::parameter_list ps;
    ln.collect(ps, "norm");
    REQUIRE(ps.size() == 2);
    CHECK(ps[0].name == "norm.weight");
    CHECK(ps[1].name == "norm.bias");
    CHECK(!ps[0].decay);
    CHECK(!ps[1].decay);
    auto r = kt::check_gradients([&](const kt::dtensor& xx) { return ln.forward(xx); },
                                 [&](const kt::dtensor& g) { return ln.backward(g); }, ps, kt::randn2(30, D, 2, 2.0));
    CHECK(r.max_err_x < 1e-6);
    CHECK(r.max_err_p < 1e-6);
    CHECK_THROWS_WITH_AS(ln.forward(kt::randn2(3, D + 1, 1)), doctest::Contains("'x'"), kattn::error);
    CHECK_THROWS_WITH_AS(nn::layer_norm<float>({.dim = 4, .eps = 0}), doctest::Contains("'eps'"), kattn::error);
}

// ---------------------------------------------------------------- dropout

TEST_CASE("nn::dropout: inverted scaling, statistics, identity at evaluation") {
    const double p = 0.3;
    nn::dropout<double> drop({.p = p, .seed = 42});
    kt::dtensor ones = kt::dtensor::from_shape({400, 500});
    ones.fill(1.0);
    const auto y = drop.forward(ones, make_ctx(400, 1, {}, true, 5));
    std::size_t zeros = 0;
    double sum = 0;
    for (double v : y) {
        if (v == 0)
            ++zeros;
        else
            CHECK(v == 1.0 / (1.0 - p));
        sum += v;
    }
    const double n = double(y.size());
    // 200k Bernoulli draws: sd of the drop fraction = sqrt(p(1-p)/n) ≈ 0.001
    CHECK(std::abs(double(zeros) / n - p) < 0.005);
    CHECK(std::abs(sum / n - 1.0) < 0.008);
    // Mask = the documented formula: u_i = w_i·2⁻³², w_i the 32-bit halves of SplitMix64 outputs.
    const auto word = [](std::uint64_t seed, std::uint64_t step, std::size_t i) {
        const std::uint64_t key =
            nn::detail::mix64(nn::detail::step_seed(seed, step) ^ nn::detail::mix64(nn::dropout_stream));
        const std::uint64_t h = nn::detail::mix64(key + std::uint64_t(i / 2) * 0x9E3779B97F4A7C15ull);
        return std::uint32_t(i % 2 == 0 ? h & 0xFFFFFFFFull : h >> 32);
    };
    std::size_t mismatches = 0;
    for (std::size_t i = 0; i < y.size(); ++i)
        mismatches += (drop.mask()[i] == 0.0) != (std::ldexp(double(word(42, 5, i)), -32) < p);
    CHECK(mismatches == 0);
    nn::dropout<double> odd({.p = 0.5, .seed = 8});  // odd element count: the last pair is half used
    odd.forward(kt::randn2(3, 5, 1), make_ctx(3, 1, {}, true, 0));
    for (std::size_t i = 0; i < 15; ++i)
        CHECK((odd.mask()[i] == 0.0) == (std::ldexp(double(word(8, 0, i)), -32) < 0.5));
    // Spanning several internal blocks with an odd tail: 1 and 2 threads, and the formula, agree.
    nn::dropout<float> wide({.p = 0.2, .seed = 77});
    const nn::tensor<float> xw = nn::zeros<float>(131, 257);
    wide.forward(xw, make_ctx(131, 1, {}, true, 9));
    mismatches = 0;
    for (std::size_t i = 0; i < xw.size(); ++i)
        mismatches += (wide.mask()[i] == 0.0f) != (std::ldexp(double(word(77, 9, i)), -32) < 0.2);
    CHECK(mismatches == 0);
    // In-place forward/backward on temporaries give the same result as the copying ones.
    nn::dropout<double> inpl({.p = p, .seed = 42});
    const auto xr = kt::randn2(40, 30, 4);
    const auto y_copy = drop.forward(xr, make_ctx(40, 1, {}, true, 6));
    CHECK(inpl.forward(kt::dtensor(xr), make_ctx(40, 1, {}, true, 6)) == y_copy);
    CHECK(inpl.mask() == drop.mask());
    CHECK(inpl.backward(kt::dtensor(xr)) == drop.backward(xr));

    const auto x = kt::randn2(20, 9, 1);
    CHECK(drop.forward(x, make_ctx(20, 1, {}, false, 5)) == x);
    CHECK(drop.backward(x) == x);
    nn::dropout<double> none({.p = 0.0});
    CHECK(none.forward(x, make_ctx(20, 1, {}, true, 5)) == x);
    CHECK_THROWS_WITH_AS(nn::dropout<float>({.p = 1.0}), doctest::Contains("'p'"), kattn::error);
}

TEST_CASE("nn::dropout: backward reuses the mask; masks keyed by (seed, step), thread-count independent") {
    nn::dropout<double> drop({.p = 0.5, .seed = 3});
    const auto x = kt::randn2(64, 33, 2);
    const auto train = make_ctx(64, 1, {}, true, 17);
    const auto y = drop.forward(x, train);
    const auto dy = kt::randn2(64, 33, 3);
    const auto dx = drop.backward(dy);
    for (std::size_t i = 0; i < x.size(); ++i) {
        CHECK(y.data()[i] == x.data()[i] * drop.mask()[i]);
        CHECK(dx.data()[i] == dy.data()[i] * drop.mask()[i]);
    }
    const auto mask17 = drop.mask();
    drop.forward(x, train);
    CHECK(drop.mask() == mask17);  // same seed + step
    drop.forward(x, make_ctx(64, 1, {}, true, 18));
    CHECK(drop.mask() != mask17);  // next step
    nn::dropout<double> other({.p = 0.5, .seed = 4});
    other.forward(x, train);
    CHECK(other.mask() != mask17);  // other seed
    // Large enough to run in parallel: 1 and 2 threads agree.
    nn::dropout<float> f({.p = 0.1, .seed = 9});
    nn::tensor<float> big = nn::zeros<float>(300, 200);
    const int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    f.forward(big, make_ctx(300, 1, {}, true, 2));
    const auto m1 = f.mask();
    omp_set_num_threads(2);
    f.forward(big, make_ctx(300, 1, {}, true, 2));
    omp_set_num_threads(saved);
    CHECK(f.mask() == m1);
    // FD with the mask fixed by a fixed training context.
    auto r = kt::check_gradients([&](const kt::dtensor& xx) { return drop.forward(xx, train); },
                                 [&](const kt::dtensor& g) { return drop.backward(g); }, {}, x);
    CHECK(r.max_err_x < 1e-6);
    CHECK_THROWS_WITH_AS(drop.backward(kt::randn2(3, 3, 1)), doctest::Contains("'dy'"), kattn::error);
}

// ---------------------------------------------------------------- activations, ffn

TEST_CASE("nn activations: relu and exact-erf gelu values and derivatives") {
    CHECK(nn::gelu::value(1.0) == doctest::Approx(0.8413447460685429).epsilon(1e-14));
    CHECK(nn::gelu::value(-1.0) == doctest::Approx(-0.15865525393145707).epsilon(1e-14));
    CHECK(nn::gelu::value(0.0) == 0.0);
    CHECK(nn::gelu::derivative(0.0) == 0.5);
    CHECK(nn::relu::value(-2.0) == 0.0);
    CHECK(nn::relu::value(3.0) == 3.0);
    CHECK(nn::relu::derivative(-2.0) == 0.0);
    CHECK(nn::relu::derivative(3.0) == 1.0);
    for (double x : {-4.0, -1.3, -0.2, 0.4, 1.7, 5.0}) {
        const double h = 1e-6;
        CHECK(nn::gelu::derivative(x) ==
              doctest::Approx((nn::gelu::value(x + h) - nn::gelu::value(x - h)) / (2 * h)).epsilon(1e-8));
    }
    CHECK(nn::parse_activation("gelu") == nn::activation_kind::gelu);
    CHECK(nn::activation_name(nn::activation_kind::relu) == "relu");
    CHECK_THROWS_WITH_AS(nn::parse_activation("tanh"), doctest::Contains("'activation'"), kattn::error);
    for (auto k : {nn::activation_kind::relu, nn::activation_kind::gelu}) {
        nn::activation_layer<double> act(k);
        auto r = kt::check_gradients([&](const kt::dtensor& xx) { return act.forward(xx); },
                                     [&](const kt::dtensor& g) { return act.backward(g); }, {}, kt::randn2(20, 7, 5));
        CHECK(r.max_err_x < 1e-6);
    }
}

TEST_CASE("nn::ffn: naive composition at evaluation, backward matches central differences") {
    const index_t B = 3, L = 5, D = 8, Hd = 12;
    for (auto k : {nn::activation_kind::relu, nn::activation_kind::gelu}) {
        nn::ffn<double> f({.dim = D, .hidden = Hd, .activation = k, .dropout = 0.25, .seed = 11});
        const auto x = kt::randn2(B * L, D, 7);
        const auto eval = make_ctx(B, L);
        const auto y = f.forward(x, eval);
        auto h = f.fc1().apply(x);
        for (auto& v : h) v = k == nn::activation_kind::relu ? nn::relu::value(v) : nn::gelu::value(v);
        const auto ref = f.fc2().apply(h);
        for (std::size_t i = 0; i < y.size(); ++i) CHECK(y.data()[i] == doctest::Approx(ref.data()[i]).epsilon(1e-13));

        nn::parameter_list ps;
        f.collect(ps, "ffn");
        REQUIRE(ps.size() == 4);
        CHECK(ps[0].name == "ffn.fc1.weight");
        CHECK(ps[3].name == "ffn.fc2.bias");
        const auto train = make_ctx(B, L, {}, true, 3);
        auto r = kt::check_gradients([&](const kt::dtensor& xx) { return f.forward(xx, train); },
                                     [&](const kt::dtensor& g) { return f.backward(g, train); }, ps, x);
        CHECK(r.max_err_x < 1e-6);
        CHECK(r.max_err_p < 1e-6);
        // Dropout active in training: some hidden units dropped.
        const auto& m = f.hidden_dropout().mask();
        CHECK(std::count(m.begin(), m.end(), 0.0) > 0);
    }
    nn::ffn<float> f({.dim = 4, .hidden = 6});
    CHECK_THROWS_WITH_AS(f.forward(nn::zeros<float>(5, 4), make_ctx(2, 3)), doctest::Contains("'x'"), kattn::error);
    CHECK_THROWS_WITH_AS(nn::ffn<float>({.dim = 4, .hidden = 0}), doctest::Contains("'hidden'"), kattn::error);
}

// ---------------------------------------------------------------- pooling, head

TEST_CASE("nn::mean_pooling: mean over valid tokens, gradient spread over valid rows only") {
    const index_t B = 3, L = 5, D = 4;
    const auto x = kt::randn2(B * L, D, 12);
    nn::mean_pooling<double> pool;
    const std::vector<index_t> lens{3, 5, 1};
    const auto ctx = make_ctx(B, L, lens);
    const auto y = pool.forward(x, ctx);
    for (index_t b = 0; b < B; ++b)
        for (index_t c = 0; c < D; ++c) {
            double s = 0;
            for (index_t t = 0; t < lens[b]; ++t) s += x(b * L + t, c);
            CHECK(y(b, c) == doctest::Approx(s / double(lens[b])).epsilon(1e-14));
        }
    const auto dy = kt::randn2(B, D, 13);
    const auto dx = pool.backward(dy);
    for (index_t b = 0; b < B; ++b)
        for (index_t t = 0; t < L; ++t)
            for (index_t c = 0; c < D; ++c) CHECK(dx(b * L + t, c) == (t < lens[b] ? dy(b, c) / double(lens[b]) : 0.0));
    auto r = kt::check_gradients([&](const kt::dtensor& xx) { return pool.forward(xx, ctx); },
                                 [&](const kt::dtensor& g) { return pool.backward(g); }, {}, x);
    CHECK(r.max_err_x < 1e-6);
    // No lengths: every token counts.
    const auto yall = pool.forward(x, make_ctx(B, L));
    double s = 0;
    for (index_t t = 0; t < L; ++t) s += x(L + t, 2);
    CHECK(yall(1, 2) == doctest::Approx(s / double(L)));
    CHECK_THROWS_WITH_AS(pool.forward(x, make_ctx(B, L, {3, 6, 1})), doctest::Contains("'context.lengths'"),
                         kattn::error);
    CHECK_THROWS_WITH_AS(pool.backward(kt::randn2(2, D, 1)), doctest::Contains("'dy'"), kattn::error);
}

TEST_CASE("nn::classifier_head: single linear and MLP, backward matches central differences") {
    const index_t B = 6, D = 10, C = 4;
    const auto p = kt::randn2(B, D, 14);
    const auto train = make_ctx(B, 7, {}, true, 8);
    {
        nn::classifier_head<double> h({.dim = D, .hidden = 0, .classes = C, .seed = 3});
        nn::parameter_list ps;
        h.collect(ps, "head");
        REQUIRE(ps.size() == 2);
        CHECK(ps[0].name == "head.fc.weight");
        auto r = kt::check_gradients([&](const kt::dtensor& xx) { return h.forward(xx, train); },
                                     [&](const kt::dtensor& g) { return h.backward(g, train); }, ps, p);
        CHECK(r.max_err_x < 1e-6);
        CHECK(r.max_err_p < 1e-6);
    }
    nn::classifier_head<double> h(
        {.dim = D, .hidden = 16, .classes = C, .activation = nn::activation_kind::gelu, .dropout = 0.3, .seed = 3});
    nn::parameter_list ps;
    h.collect(ps, "head");
    REQUIRE(ps.size() == 4);
    CHECK(ps[2].name == "head.fc2.weight");
    // Central-difference round-off on the smallest weight gradients (~1e-4) depends on the
    // dropout mask: up to ~2e-6 relative over masks (steps 0…29), hence 3e-6 here.
    auto r = kt::check_gradients([&](const kt::dtensor& xx) { return h.forward(xx, train); },
                                 [&](const kt::dtensor& g) { return h.backward(g, train); }, ps, p, 3e-6);
    CHECK(r.max_err_x < 3e-6);
    CHECK(r.max_err_p < 3e-6);
    const auto logits = h.forward(p, make_ctx(B, 7));
    CHECK(logits.shape()[0] == std::size_t(B));
    CHECK(logits.shape()[1] == std::size_t(C));
    CHECK_THROWS_WITH_AS(h.forward(kt::randn2(B + 1, D, 1), make_ctx(B, 7)), doctest::Contains("'pooled'"),
                         kattn::error);
    CHECK_THROWS_WITH_AS(nn::classifier_head<float>({.dim = 4, .classes = 0}), doctest::Contains("'classes'"),
                         kattn::error);
}
