// Tests for kattn/nn/attention/{fska,coulomb}.hpp: finite-difference gradients (inputs,
// output/value projections and RealNVP flow parameters), the draw schedule (fresh per step in
// training, fixed in evaluation), the orthogonal value projection, the KL regulariser, the
// frozen Coulomb frequencies and phase-A alignment raising the kernel-target alignment.
#include <doctest/doctest.h>

#include <cmath>
#include <optional>

#include <kattn/features/elu.hpp>
#include <kattn/features/favor.hpp>
#include <kattn/features/porf_softplus.hpp>
#include <kattn/nn/attention/coulomb.hpp>
#include <kattn/nn/attention/fska.hpp>

#include "gradcheck.hpp"

using namespace kattn;
using kt::dtensor;

namespace {

nn::context ctx_of(bool training, std::uint64_t step) {
    nn::context c;
    c.batch = 2;
    c.length = 5;
    c.lengths = {5, 3};
    c.training = training;
    c.step = step;
    return c;
}

/// Moves a fresh flow (identity, last layers zero) to a generic point so its gradients are non-zero.
void perturb_flows(nn::parameter_list& ps) {
    const random_stream rs(5, streams::user + 1);
    std::uint64_t k = 0;
    for (auto& p : ps)
        if (p.is_double() && p.name.find("flow") != std::string::npos)
            for (auto& v : p.value64) v += 0.1 * rs.normal(k++);
}

}  // namespace

TEST_CASE("nn::fska_attention: backward matches central differences (x, flows, V, output)") {
    const auto ctx = ctx_of(true, 7);
    for (bool positive : {true, false})
        for (bool learnable_v : {false, true})
            for (bool shared : {false, true}) {
                INFO("positive " << positive << " learnable_v " << learnable_v << " shared " << shared);
                nn::fska_attention<double> layer({.dim = 8,
                                                  .heads = 2,
                                                  .num_pairs = 6,
                                                  .flow_layers = 2,
                                                  .positive = positive,
                                                  .scale = 2.0,
                                                  .learnable_v = learnable_v,
                                                  .shared_flow = shared,
                                                  .seed = 3});
                nn::parameter_list ps;
                layer.collect(ps, "fska");
                CHECK(ps.size() == std::size_t((shared ? 1 : 2) + (learnable_v ? 1 : 0) + 2));
                CHECK(ps[0].name == (shared ? "fska.flow" : "fska.flow0"));
                CHECK(!ps[0].decay);
                perturb_flows(ps);
                // h = 4e-5: some flow gradients are ~1e-6 of a loss of size 1, where the
                // rounding noise of a smaller h (~1e-16/h absolute) would dominate
                const auto r = kt::check_gradients([&](const dtensor& x) { return layer.forward(x, ctx); },
                                                   [&](const dtensor& g) { return layer.backward(g, ctx); }, ps,
                                                   kt::randn2(10, 8, 4, 0.7), 1e-5, 40, 4e-5);
                CHECK(r.max_err_x < 1e-5);
                CHECK(r.max_err_p < 1e-5);
            }
}

TEST_CASE("nn::fska_attention: Ω comes from the flow — fresh per training step, fixed in evaluation") {
    nn::fska_attention<double> layer({.dim = 8, .heads = 2, .num_pairs = 4, .seed = 1});
    CHECK(layer.name() == "fska");
    const dtensor x = kt::randn2(10, 8, 2);
    auto omega_after = [&](bool training, std::uint64_t step) {
        layer.forward(x, ctx_of(training, step));
        return std::pair{xt::xtensor<double, 2>(layer.omega(0)), xt::xtensor<double, 2>(layer.omega(1))};
    };
    const auto t1 = omega_after(true, 1), t1b = omega_after(true, 1), t2 = omega_after(true, 2);
    const auto e1 = omega_after(false, 1), e2 = omega_after(false, 2);
    CHECK(t1.first == t1b.first);
    CHECK(t1.first != t2.first);
    CHECK(t1.first != t1.second);  // heads draw independently
    CHECK(e1.first == e2.first);
    CHECK(e1.first != t1.first);
    // layout: Ω(i, k) = ω₁ₖ,i, Ω(i, m + k) = ω₂ₖ,i of the flow sample of that draw
    const auto w = layer.flow(1).forward(layer.flow(1).noise(4, layer.draw_seed(ctx_of(false, 0), 1)));
    for (int k = 0; k < 4; ++k)
        for (int i = 0; i < 4; ++i) {
            CHECK(e1.second(i, k) == w(k, i));
            CHECK(e1.second(i, 4 + k) == w(k, 4 + i));
        }
}

TEST_CASE("nn::fska_attention: W_V is orthogonal and frozen unless learnable_v") {
    nn::fska_attention<double> layer({.dim = 12, .heads = 3, .num_pairs = 4, .seed = 8});
    const auto& W = layer.value().weight().value;
    double worst = 0;
    for (int a = 0; a < 12; ++a)
        for (int b = 0; b < 12; ++b) {
            double s = 0;
            for (int r = 0; r < 12; ++r) s += W[r * 12 + a] * W[r * 12 + b];
            worst = std::max(worst, std::abs(s - (a == b ? 1.0 : 0.0)));
        }
    CHECK(worst < 1e-12);
    nn::parameter_list ps;
    layer.collect(ps, "f");
    for (const auto& p : ps) CHECK(p.name.find(".v.") == std::string::npos);
    nn::fska_attention<double> lv({.dim = 12, .heads = 3, .num_pairs = 4, .learnable_v = true, .seed = 8});
    CHECK(lv.value().weight().value == W);  // same initialisation
}

TEST_CASE("nn::fska_attention: regularization = λ·Σ KL(p_θ ‖ NGSM), its gradient matches finite differences") {
    nn::fska_attention<double> layer({.dim = 8,
                                      .heads = 2,
                                      .num_pairs = 4,
                                      .flow_layers = 2,
                                      .ngsm_components = 3,
                                      .kl_weight = 0.01,
                                      .kl_samples = 16,
                                      .seed = 2});
    nn::parameter_list ps;
    layer.collect(ps, "f");
    perturb_flows(ps);
    const auto ctx = ctx_of(true, 3);
    nn::zero_grad(ps);
    const double r = layer.regularization(ctx);
    CHECK(std::isfinite(r));
    CHECK(layer.prior().dim() == 8);
    // the value is λ·Σ_h KL_h(step) (an independent kl_to on the same noise); deterministic
    // in the step, fresh per step
    double kl = 0;
    for (index_t h = 0; h < 2; ++h)
        kl += layer.flow(h).kl_to(layer.prior(), 16,
                                  nn::detail::step_seed(nn::detail::derive_seed(2, 400 + std::uint64_t(h)), 3));
    CHECK(r == doctest::Approx(0.01 * kl).epsilon(1e-12));
    CHECK(layer.regularization(ctx) == doctest::Approx(r).epsilon(1e-14));
    CHECK(layer.regularization(ctx_of(true, 4)) != doctest::Approx(r).epsilon(1e-6));
    nn::zero_grad(ps);
    layer.regularization(ctx);
    std::vector<std::vector<double>> analytic;
    for (auto& p : ps) analytic.emplace_back(p.grad64.begin(), p.grad64.end());
    const double h = 1e-6;
    double worst = 0;
    int probes = 0;
    for (std::size_t k = 0; k < ps.size(); ++k) {
        auto& p = ps[k];
        if (!p.is_double()) continue;
        for (index_t i = 0; i < p.size(); i += std::max<index_t>(1, p.size() / 25), ++probes) {
            const double v0 = p.value_at(i), a = analytic[k][std::size_t(i)];
            p.set_value(i, v0 + h);
            const double lp = layer.regularization(ctx);
            p.set_value(i, v0 - h);
            const double lm = layer.regularization(ctx);
            p.set_value(i, v0);
            const double n = (lp - lm) / (2 * h);
            worst = std::max(worst, std::abs(a - n) / std::max({1e-7, std::abs(a), std::abs(n)}));
        }
    }
    CHECK(probes >= 40);
    CHECK(worst < 1e-5);
}

TEST_CASE("nn::coulomb_attention: backward matches finite differences and never changes Ω") {
    const auto ctx = ctx_of(true, 1);
    nn::coulomb_attention<features::elu, double> elu({.dim = 8, .heads = 2, .num_features = 12, .seed = 5});
    nn::coulomb_attention<features::favor, double> fav(
        {.dim = 8, .heads = 2, .num_features = 12, .causal = true, .seed = 6});
    CHECK(elu.name() == "coulomb-elu");
    auto check = [&](auto& layer) {
        const xt::xtensor<double, 2> om0 = layer.omega(0), om1 = layer.omega(1);
        nn::parameter_list ps;
        layer.collect(ps, "c");
        CHECK(ps.size() == 4u);  // v and out: Ω is not a parameter
        const auto r = kt::check_gradients([&](const dtensor& x) { return layer.forward(x, ctx); },
                                           [&](const dtensor& g) { return layer.backward(g, ctx); }, ps,
                                           kt::randn2(10, 8, 6), 1e-5);
        CHECK(r.max_err_x < 1e-5);
        CHECK(r.max_err_p < 1e-5);
        CHECK(layer.omega(0) == om0);
        CHECK(layer.omega(1) == om1);
    };
    check(elu);
    check(fav);
    nn::coulomb_attention<features::porf_softplus, double> porf({.dim = 8, .heads = 2, .num_features = 12, .seed = 7});
    check(porf);
}

TEST_CASE("nn::coulomb_attention: a learned input scale per head") {
    const auto ctx = ctx_of(true, 1);
    const dtensor x = kt::randn2(10, 8, 16);
    auto check = [&]<class Map>(bool causal, std::optional<double> s0, double expect0) {
        CAPTURE(Map::name);
        nn::coulomb_config c{.dim = 8, .heads = 2, .num_features = 12, .causal = causal, .seed = 8};
        c.input_scale = s0;
        nn::coulomb_attention<Map, double> fixed(c);
        c.learn_input_scale = true;
        nn::coulomb_attention<Map, double> learned(c);
        nn::parameter_list ps;
        learned.collect(ps, "c");
        REQUIRE(ps.size() == 5u);
        CHECK(ps.back().name == "c.log_scale");
        CHECK(!ps.back().decay);
        CHECK(ps.back().value64[0] == doctest::Approx(std::log(expect0)).epsilon(1e-15));
        CHECK(learned.input_scale(1) == doctest::Approx(expect0).epsilon(1e-15));
        CHECK(learned.attention(0).input_scale() == 1.0);  // the scale is applied before the operator
        // At its starting value the learned scale is the fixed layer, to rounding.
        const dtensor y0 = fixed.forward(x, ctx), y1 = learned.forward(x, ctx);
        double worst = 0;
        for (std::size_t i = 0; i < y0.size(); ++i) worst = std::max(worst, std::abs(y0.data()[i] - y1.data()[i]));
        CHECK(worst < 1e-12);
        // Away from it the layer changes, and ∂/∂ℓ_h agrees with finite differences.
        ps.back().value64[0] += 0.3;
        ps.back().value64[1] -= 0.2;
        const dtensor y2 = learned.forward(x, ctx);
        double moved = 0;
        for (std::size_t i = 0; i < y0.size(); ++i) moved = std::max(moved, std::abs(y2.data()[i] - y1.data()[i]));
        CHECK(moved > 1e-3);
        const auto r = kt::check_gradients([&](const dtensor& in) { return learned.forward(in, ctx); },
                                           [&](const dtensor& g) { return learned.backward(g, ctx); }, ps, x, 1e-4);
        CHECK(r.max_err_x < 1e-4);  // central differences, h = 1e-6: entries near 1e-5 keep ~1e-5 noise
        CHECK(r.max_err_p < 1e-4);
    };
    check.template operator()<features::favor>(false, std::nullopt, std::pow(4.0, -0.25));  // d_h = 4
    check.template operator()<features::favor>(true, 0.8, 0.8);
    check.template operator()<features::elu>(true, std::nullopt, 1.0);
}

TEST_CASE("nn::coulomb_attention: align() raises the kernel-target alignment and installs the particles") {
    // two classes separated along a direction present in both heads' slices
    const index_t n = 60, D = 8;
    dtensor pooled = kt::randn2(n, D, 12, 0.6);
    std::vector<int> labels(n);
    for (index_t i = 0; i < n; ++i) {
        labels[i] = int(i % 2);
        for (index_t c = 0; c < D; ++c) pooled(i, c) += (labels[i] ? 0.8 : -0.8) * (c % 2 ? 1.0 : 0.5);
    }
    nn::coulomb_config cfg{.dim = D, .heads = 2, .num_features = 32, .seed = 9};
    cfg.langevin.step_size = 0.05;
    cfg.langevin.radius = 3.0;
    nn::coulomb_attention<features::elu, double> layer(cfg), vanilla(cfg);
    const auto rep = layer.align(pooled, labels, 150);
    REQUIRE(rep.kta_before.size() == 2u);
    for (int h = 0; h < 2; ++h) {
        MESSAGE("head " << h << ": KTA " << rep.kta_before[h] << " -> " << rep.kta_after[h] << " in " << rep.steps[h]
                        << " steps");
        CHECK(rep.kta_after[h] > rep.kta_before[h] + 0.02);
        // the operator now uses the particles; the vanilla layer keeps its random draw
        const auto om = layer.particles(h).omega();
        for (std::size_t i = 0; i < om.size(); ++i) CHECK(layer.omega(h).data()[i] == om.data()[i]);
        CHECK(vanilla.omega(h) != layer.omega(h));
        double maxnorm = 0;
        const auto p = layer.particles(h).particles();
        for (std::size_t k = 0; k < p.shape()[0]; ++k) {
            double s = 0;
            for (std::size_t i = 0; i < p.shape()[1]; ++i) s += p(k, i) * p(k, i);
            maxnorm = std::max(maxnorm, std::sqrt(s));
        }
        CHECK(maxnorm <= 3.0 + 1e-9);
    }
    CHECK_THROWS_WITH_AS(layer.align(nn::zeros<double>(4, 7), std::vector<int>(4, 0), 3), doctest::Contains("'pooled'"),
                         kattn::error);
}
