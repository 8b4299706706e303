// Tests for kattn/optim/adam.hpp: the update against hand-computed trajectories (Adam,
// AdamW, AMSGrad; reference values from an independent scalar implementation of the
// PyTorch formulas), convergence on a quadratic in double and float, state errors.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include <kattn/optim/adam.hpp>

namespace {

using kattn::optim::adam;
using kattn::optim::adam_config;

template <class F>
std::string error_message(F f) {
    try {
        f();
    } catch (const kattn::error& e) {
        return e.what();
    }
    return "<no kattn::error thrown>";
}

void check_trajectory(const adam_config& cfg, std::vector<double> p, const std::vector<std::vector<double>>& g,
                      const std::vector<std::vector<double>>& want) {
    adam opt(cfg);
    for (std::size_t t = 0; t < g.size(); ++t) {
        opt.step(p, g[t]);
        CHECK(opt.steps() == std::int64_t(t + 1));
        for (std::size_t i = 0; i < p.size(); ++i) {
            INFO("step ", t + 1, " entry ", i);
            CHECK(p[i] == doctest::Approx(want[t][i]).epsilon(1e-14));
        }
    }
}

}  // namespace

TEST_CASE("adam: first step is lr * g / (|g| + eps) (bias correction)") {
    adam opt({.lr = 0.1});
    std::vector<double> p{1.0, -2.0, 0.5};
    const std::vector<double> g{0.5, -1.0, 2.0};
    opt.step(p, g);
    CHECK(p[0] == doctest::Approx(1.0 - 0.1 * 0.5 / (0.5 + 1e-8)).epsilon(1e-15));
    CHECK(p[1] == doctest::Approx(-2.0 + 0.1 * 1.0 / (1.0 + 1e-8)).epsilon(1e-15));
    CHECK(p[2] == doctest::Approx(0.5 - 0.1 * 2.0 / (2.0 + 1e-8)).epsilon(1e-15));
}

TEST_CASE("adam: hand-computed 3-step trajectories (Adam, AdamW, AMSGrad)") {
    const std::vector<std::vector<double>> g{{0.5, -1.0, 2.0}, {0.25, -0.5, -1.0}, {-0.5, 0.1, 0.0}};
    SUBCASE("Adam") {
        check_trajectory({.lr = 0.1}, {1.0, -2.0, 0.5}, g,
                         {{0.90000000199999997, -1.900000001, 0.40000000050000001},
                          {0.80678204047746238, -1.8067820382981612, 0.37336629670243154},
                          {0.79570373360109425, -1.7407073991618922, 0.35277836650344163}});
    }
    SUBCASE("AdamW (decoupled weight decay 0.1)") {
        check_trajectory({.lr = 0.1, .weight_decay = 0.1}, {1.0, -2.0, 0.5}, g,
                         {{0.89000000199999996, -1.880000001, 0.3950000005},
                          {0.78788204045746235, -1.7679820382881613, 0.36441629669743153},
                          {0.76892491317651956, -1.6842275787690106, 0.34018420353146728}});
    }
    SUBCASE("AMSGrad differs from Adam once v decreases (beta2 = 0.5)") {
        const std::vector<std::vector<double>> g2{{2.0, 1.0}, {0.1, 1.0}, {0.1, -1.0}};
        check_trajectory({.lr = 0.1, .beta2 = 0.5, .amsgrad = true}, {1.0, -2.0}, g2,
                         {{0.90000000049999995, -2.099999999},
                          {0.83876275730542049, -2.199999998},
                          {0.79458554474682352, -2.2261992597306275}});
        check_trajectory({.lr = 0.1, .beta2 = 0.5}, {1.0, -2.0}, g2,
                         {{0.90000000049999995, -2.099999999},
                          {0.81361315868813255, -2.199999998},
                          {0.72591402940569405, -2.2261992597306275}});
    }
}

TEST_CASE("adam: float parameters follow the double trajectory (state kept in double)") {
    adam od({.lr = 0.05}), of({.lr = 0.05});
    std::vector<double> pd{0.3, -0.7};
    std::vector<float> pf{0.3f, -0.7f};
    for (int t = 0; t < 5; ++t) {
        const std::vector<double> gd{2 * pd[0] - 1, 4 * pd[1]};
        const std::vector<float> gf{float(gd[0]), float(gd[1])};
        od.step(pd, gd);
        of.step(pf, gf);
    }
    CHECK(double(pf[0]) == doctest::Approx(pd[0]).epsilon(1e-6));
    CHECK(double(pf[1]) == doctest::Approx(pd[1]).epsilon(1e-6));
}

TEST_CASE("adam: minimises an ill-conditioned quadratic, set_lr schedules") {
    // f(p) = Σ a_i (p_i − c_i)², a_i from 0.01 to 100.
    const int n = 10;
    std::vector<double> a(n), c(n), p(n, 0.0), g(n);
    for (int i = 0; i < n; ++i) {
        a[i] = std::pow(10.0, -2.0 + 4.0 * i / (n - 1));
        c[i] = std::sin(1.0 + i);
    }
    adam opt({.lr = 0.05});
    const int steps = 3000;
    for (int t = 0; t < steps; ++t) {
        opt.set_lr(0.05 * 0.5 * (1 + std::cos(M_PI * t / steps)) + 1e-4);  // cosine decay
        for (int i = 0; i < n; ++i) g[i] = 2 * a[i] * (p[i] - c[i]);
        opt.step(p, g);
    }
    CHECK(opt.lr() == doctest::Approx(1e-4 + 0.05 * 0.5 * (1 + std::cos(M_PI * (steps - 1) / steps))));
    double err = 0;
    for (int i = 0; i < n; ++i) err = std::max(err, std::abs(p[i] - c[i]));
    CHECK(err < 1e-3);

    std::vector<float> pf(n, 0.0f), gf(n);
    adam of({.lr = 0.02});
    for (int t = 0; t < 3000; ++t) {
        for (int i = 0; i < n; ++i) gf[i] = float(2 * a[i] * (pf[i] - c[i]));
        of.step(pf, gf);
    }
    double errf = 0;
    for (int i = 0; i < n; ++i) errf = std::max(errf, std::abs(double(pf[i]) - c[i]));
    CHECK(errf < 1e-2);
}

TEST_CASE("adam: weight decay alone shrinks parameters geometrically") {
    adam opt({.lr = 0.1, .weight_decay = 0.5});
    std::vector<double> p{2.0, -4.0}, g{0.0, 0.0};
    for (int t = 0; t < 3; ++t) opt.step(p, g);
    CHECK(p[0] == doctest::Approx(2.0 * std::pow(0.95, 3)));
    CHECK(p[1] == doctest::Approx(-4.0 * std::pow(0.95, 3)));
}

TEST_CASE("adam: errors name the argument; reset forgets the state") {
    adam opt;
    std::vector<double> p(3, 0.0), g(2, 0.0);
    CHECK(error_message([&] { opt.step(p, g); }).find("'grads'") != std::string::npos);
    g.assign(3, 1.0);
    opt.step(p, g);
    CHECK(opt.size() == 3);
    std::vector<double> p4(4, 0.0), g4(4, 1.0);
    const std::string msg = error_message([&] { opt.step(p4, g4); });
    CHECK(msg.find("'params'") != std::string::npos);
    CHECK(msg.find("(3)") != std::string::npos);
    opt.reset();
    CHECK(opt.steps() == 0);
    opt.step(p4, g4);
    CHECK(opt.size() == 4);
    CHECK(error_message([] { adam({.lr = -1}); }).find("'lr'") != std::string::npos);
    CHECK(error_message([] { adam({.beta1 = 1.0}); }).find("'beta1'") != std::string::npos);
    CHECK(error_message([] { adam({.beta2 = -0.1}); }).find("'beta2'") != std::string::npos);
    CHECK(error_message([] { adam({.eps = 0}); }).find("'eps'") != std::string::npos);
    CHECK(error_message([] { adam({.weight_decay = -1}); }).find("'weight_decay'") != std::string::npos);
    CHECK(error_message([&] { opt.set_lr(NAN); }).find("'lr'") != std::string::npos);
}
