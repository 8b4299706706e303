// Tests for kattn::nn's training parts: cross_entropy (value against the naive formula,
// gradient against finite differences), warmup_cosine (closed-form values) and adamw
// (one and two steps against hand-computed AdamW updates, decay flags, list checks).
#include <doctest/doctest.h>

#include <cmath>
#include <numbers>
#include <vector>

#include <kattn/nn/loss.hpp>
#include <kattn/nn/optimizer.hpp>
#include <kattn/nn/schedule.hpp>

#include "gradcheck.hpp"

using namespace kattn;

namespace {
/// Naive (unstabilised) smoothed cross-entropy of one row, PyTorch's definition.
double naive_ce(const kt::dtensor& z, int b, int y, double eps) {
    const int C = int(z.shape()[1]);
    double s = 0;
    for (int c = 0; c < C; ++c) s += std::exp(z(b, c));
    double nll_y = -std::log(std::exp(z(b, y)) / s), nll_all = 0;
    for (int c = 0; c < C; ++c) nll_all += -std::log(std::exp(z(b, c)) / s);
    return (1 - eps) * nll_y + eps / C * nll_all;
}
}  // namespace

TEST_CASE("nn::cross_entropy: value against the naive formula, softmax rows, stability") {
    const auto z = kt::randn2(7, 5, 21, 2.0);
    const std::vector<int> y{0, 4, 2, 2, 1, 3, 0};
    for (double eps : {0.0, 0.1, 1.0}) {
        const auto r = nn::cross_entropy(z, std::span<const int>(y), eps);
        double ref = 0;
        for (int b = 0; b < 7; ++b) ref += naive_ce(z, b, y[b], eps);
        CHECK(r.loss == doctest::Approx(ref / 7).epsilon(1e-13));
        for (int b = 0; b < 7; ++b) {
            double s = 0;
            for (int c = 0; c < 5; ++c) s += r.probs(b, c);
            CHECK(s == doctest::Approx(1.0).epsilon(1e-14));
        }
    }
    // Uniform logits: loss = log C for any smoothing.
    const auto flat = nn::zeros<double>(3, 10);
    const std::vector<int> y3{1, 9, 0};
    CHECK(nn::cross_entropy(flat, std::span<const int>(y3), 0.2).loss == doctest::Approx(std::log(10.0)));
    // Shift invariance with huge logits (the naive formula would overflow).
    auto big = z;
    for (auto& v : big) v += 1000.0;
    const auto rb = nn::cross_entropy(big, std::span<const int>(y), 0.1);
    CHECK(std::isfinite(rb.loss));
    CHECK(rb.loss == doctest::Approx(nn::cross_entropy(z, std::span<const int>(y), 0.1).loss).epsilon(1e-10));
    // Float logits work as well.
    nn::tensor<float> zf = nn::zeros<float>(2, 3);
    const std::vector<int> y2{0, 2};
    CHECK(nn::cross_entropy(zf, std::span<const int>(y2)).loss == doctest::Approx(std::log(3.0)).epsilon(1e-6));
}

TEST_CASE("nn::cross_entropy: dlogits is the gradient of the mean loss") {
    const auto z = kt::randn2(6, 4, 22, 1.5);
    const std::vector<int> y{3, 0, 1, 1, 2, 0};
    for (double eps : {0.0, 0.15}) {
        const auto r = nn::cross_entropy(z, std::span<const int>(y), eps);
        const double h = 1e-6;
        double worst = 0;
        for (std::size_t i = 0; i < z.size(); ++i) {
            auto zp = z, zm = z;
            zp.data()[i] += h;
            zm.data()[i] -= h;
            const double fd = (nn::cross_entropy(zp, std::span<const int>(y), eps).loss -
                               nn::cross_entropy(zm, std::span<const int>(y), eps).loss) /
                              (2 * h);
            worst = std::max(worst, std::abs(fd - r.dlogits.data()[i]));
        }
        CHECK(worst < 1e-8);
    }
}

TEST_CASE("nn::cross_entropy: bad labels and arguments throw kattn::error") {
    const auto z = kt::randn2(2, 3, 1);
    const std::vector<int> hi{0, 3}, neg{-1, 0}, short_{0};
    CHECK_THROWS_WITH_AS(nn::cross_entropy(z, std::span<const int>(hi)), doctest::Contains("'labels'"), kattn::error);
    CHECK_THROWS_WITH_AS(nn::cross_entropy(z, std::span<const int>(neg)), doctest::Contains("-1"), kattn::error);
    CHECK_THROWS_WITH_AS(nn::cross_entropy(z, std::span<const int>(short_)), doctest::Contains("'labels'"),
                         kattn::error);
    const std::vector<int> ok{0, 1};
    CHECK_THROWS_WITH_AS(nn::cross_entropy(z, std::span<const int>(ok), 1.5), doctest::Contains("'label_smoothing'"),
                         kattn::error);
    auto bad = z;
    bad(1, 1) = std::nan("");
    CHECK_THROWS_WITH_AS(nn::cross_entropy(bad, std::span<const int>(ok)), doctest::Contains("'logits'"), kattn::error);
}

TEST_CASE("nn::warmup_cosine: closed-form values") {
    const double base = 1e-3, mn = 1e-5;
    const nn::warmup_cosine s({.base_lr = base, .warmup_steps = 10, .total_steps = 110, .min_lr = mn});
    CHECK(s.lr(0) == doctest::Approx(base / 10).epsilon(1e-15));
    CHECK(s.lr(4) == doctest::Approx(base * 5 / 10).epsilon(1e-15));
    CHECK(s.lr(9) == doctest::Approx(base).epsilon(1e-15));
    CHECK(s.lr(10) == doctest::Approx(base).epsilon(1e-15));
    CHECK(s.lr(35) == doctest::Approx(mn + (base - mn) * 0.5 * (1 + std::cos(std::numbers::pi / 4))).epsilon(1e-14));
    CHECK(s.lr(60) == doctest::Approx(mn + (base - mn) * 0.5).epsilon(1e-14));
    CHECK(s.lr(109) ==
          doctest::Approx(mn + (base - mn) * 0.5 * (1 + std::cos(std::numbers::pi * 0.99))).epsilon(1e-13));
    CHECK(s.lr(110) == mn);
    CHECK(s(5000) == mn);
    for (std::int64_t t = 0; t < 9; ++t) CHECK(s.lr(t + 1) > s.lr(t));
    for (std::int64_t t = 10; t < 110; ++t) CHECK(s.lr(t + 1) < s.lr(t));
    const nn::warmup_cosine nowarm({.base_lr = 0.1, .warmup_steps = 0, .total_steps = 4});
    CHECK(nowarm.lr(0) == doctest::Approx(0.1));
    CHECK(nowarm.lr(2) == doctest::Approx(0.05));
    CHECK(nowarm.lr(4) == 0.0);
    CHECK_THROWS_WITH_AS(nn::warmup_cosine({.base_lr = 1, .warmup_steps = 5, .total_steps = 4}),
                         doctest::Contains("'total_steps'"), kattn::error);
    CHECK_THROWS_WITH_AS(nn::warmup_cosine({.base_lr = 1, .total_steps = 4, .min_lr = 2}),
                         doctest::Contains("'min_lr'"), kattn::error);
    CHECK_THROWS_WITH_AS(s.lr(-1), doctest::Contains("'step'"), kattn::error);
}

TEST_CASE("nn::adamw: two steps against hand-computed AdamW updates, float and double views") {
    nn::parameter<float> w({2, 3});
    nn::parameter<double> b({3});
    for (int i = 0; i < 6; ++i) w.value[i] = float(0.5 - 0.2 * i);
    for (int i = 0; i < 3; ++i) b.value[i] = 0.3 * i - 0.1;
    nn::parameter_list ps{nn::view("w", w, true), nn::view("b", b, false)};
    const double lr = 0.01, b1 = 0.8, b2 = 0.95, eps = 1e-6, wd = 0.1;
    nn::adamw opt({.lr = lr, .beta1 = b1, .beta2 = b2, .eps = eps, .weight_decay = wd});
    // Hand AdamW in double (float parameters are rounded after each step).
    std::vector<double> pw(w.value.begin(), w.value.end()), pb(b.value.begin(), b.value.end());
    std::vector<double> mw(6, 0), vw(6, 0), mb(3, 0), vb(3, 0);
    auto hand = [&](std::vector<double>& p, std::vector<double>& m, std::vector<double>& v, const auto& g, double decay,
                    int t, double rate, bool round) {
        for (std::size_t i = 0; i < p.size(); ++i) {
            p[i] *= 1 - rate * decay;
            m[i] = b1 * m[i] + (1 - b1) * g[i];
            v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
            const double mh = m[i] / (1 - std::pow(b1, t)), vh = v[i] / (1 - std::pow(b2, t));
            p[i] -= rate * mh / (std::sqrt(vh) + eps);
            if (round) p[i] = double(float(p[i]));
        }
    };
    for (int t = 1; t <= 2; ++t) {
        for (int i = 0; i < 6; ++i) w.grad[i] = float(std::sin(1.0 + i * t));
        for (int i = 0; i < 3; ++i) b.grad[i] = std::cos(2.0 * i + t);
        const double rate = t == 1 ? lr : lr / 2;
        if (t == 2) opt.set_lr(rate);
        std::vector<double> gw(w.grad.begin(), w.grad.end());
        hand(pw, mw, vw, gw, wd, t, rate, true);
        hand(pb, mb, vb, b.grad, 0.0, t, rate, false);
        opt.step(ps);
        for (int i = 0; i < 6; ++i) CHECK(double(w.value[i]) == doctest::Approx(pw[i]).epsilon(1e-6));
        for (int i = 0; i < 3; ++i) CHECK(b.value[i] == doctest::Approx(pb[i]).epsilon(1e-14));
    }
    CHECK(opt.steps() == 2);
    CHECK(opt.lr() == doctest::Approx(lr / 2));
    // First step closed form: m̂ = g, v̂ = g², so p₁ = p₀(1 − lr·wd) − lr·g/(|g| + ε).
    nn::parameter<double> q({1});
    q.value[0] = 2.0;
    q.grad[0] = -0.5;
    nn::parameter_list qs{nn::view("q", q)};
    nn::adamw one({.lr = 0.1, .eps = 1e-8, .weight_decay = 0.01});
    one.step(qs);
    CHECK(q.value[0] == doctest::Approx(2.0 * (1 - 0.001) + 0.1 * 0.5 / (0.5 + 1e-8)).epsilon(1e-14));
}

TEST_CASE("nn::adamw: weight decay only on decay views; list changes throw") {
    nn::parameter<float> a({4}), c({4});
    for (int i = 0; i < 4; ++i) a.value[i] = c.value[i] = float(1 + i);
    nn::parameter_list ps{nn::view("a", a, true), nn::view("c", c, false)};
    nn::adamw opt({.lr = 0.1, .weight_decay = 0.5});
    opt.step(ps);  // zero gradients: only decay acts
    for (int i = 0; i < 4; ++i) {
        CHECK(a.value[i] == doctest::Approx(float(1 + i) * (1 - 0.05)).epsilon(1e-6));
        CHECK(c.value[i] == float(1 + i));
    }
    REQUIRE(opt.states().size() == 2);
    CHECK(opt.states()[0].config().weight_decay == 0.5);
    CHECK(opt.states()[1].config().weight_decay == 0.0);
    nn::parameter<float> extra({2});
    auto more = ps;
    more.push_back(nn::view("extra", extra));
    CHECK_THROWS_WITH_AS(opt.step(more), doctest::Contains("'params'"), kattn::error);
    nn::parameter_list swapped{ps[1], ps[0]};
    CHECK_THROWS_WITH_AS(opt.step(swapped), doctest::Contains("'params'"), kattn::error);
    CHECK(opt.steps() == 1);
    CHECK_THROWS_WITH_AS(nn::adamw({.beta1 = 1.0}), doctest::Contains("'beta1'"), kattn::error);
    CHECK_THROWS_WITH_AS(opt.set_lr(-1), doctest::Contains("'lr'"), kattn::error);
}
