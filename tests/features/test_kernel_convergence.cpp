// Monte-Carlo convergence of every random feature map to its closed-form kernel
// (docs/feature_maps.md §2, "unbiased for"; docs/samplers.md, gmm closed-form kernels):
//   trig + gaussian(σ)              → exp(−‖x−y‖²/2σ²)
//   favor, favor_hyperbolic          → exp(xᵀy)         (ω ~ N(0, I), input_scale = 1)
//   nonstationary + gaussian(σ) on R^{2d} (one mixture component, μ = 0, S = σ⁻²I)
//       → ¼ Σ_{v∈V} exp(−½σ⁻²‖v‖²) = ½[exp(−‖x−y‖²/2σ²) + exp(−(‖x‖²+‖y‖²)/2σ²)]
//   relu (ω ~ N(0, I))               → ‖x‖‖y‖(sin θ + (π − θ) cos θ)/(2π), the order-1
//                                      arc-cosine kernel (Cho & Saul), θ = ∠(x, y)
// The estimate is features(x)·features(y). Checks: the error is unbiased (mean over seeds
// within 3 standard errors of 0), RMSE·√m is roughly constant over m = 64 … 16384, and
// orthogonal frequencies beat iid ones for favor.
#include "map_cases.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numbers>
#include <vector>

namespace {

using kattn::index_t;
namespace kf = kattn::features;
namespace ks = kattn::samplers;

constexpr std::size_t kDim = 4;

/// Fixed input pairs: x and y with norms ≈ 0.7 (moderate, docs/feature_maps.md §7 on favor's error).
struct pairs_t {
    xt::xtensor<double, 2> x, y;
};

pairs_t make_pairs(std::size_t n, std::size_t d, std::uint64_t seed) {
    pairs_t p{kt::randn<double, 2>({n, d}, seed), kt::randn<double, 2>({n, d}, seed + 1)};
    for (auto* t : {&p.x, &p.y})
        for (std::size_t r = 0; r < n; ++r) {
            double s = 0;
            for (std::size_t i = 0; i < d; ++i) s += (*t)(r, i) * (*t)(r, i);
            const double target = 0.55 + 0.15 * double(r % 3);  // 0.55, 0.7, 0.85
            for (std::size_t i = 0; i < d; ++i) (*t)(r, i) *= target / std::sqrt(s);
        }
    return p;
}

double sqdist(const double* a, const double* b, std::size_t d) {
    double s = 0;
    for (std::size_t i = 0; i < d; ++i) s += (a[i] - b[i]) * (a[i] - b[i]);
    return s;
}
double dot(const double* a, const double* b, std::size_t d) {
    double s = 0;
    for (std::size_t i = 0; i < d; ++i) s += a[i] * b[i];
    return s;
}

using kernel_fn = std::function<double(const double*, const double*, std::size_t)>;

/// Kernel estimates φ(x_r)·φ(y_r) of an operator for every pair r.
template <class Op>
std::vector<double> estimates(const Op& op, const pairs_t& p) {
    const auto fx = op.features(p.x), fy = op.features(p.y);
    std::vector<double> e(p.x.shape()[0]);
    for (std::size_t r = 0; r < e.size(); ++r) {
        double s = 0;
        for (std::size_t f = 0; f < fx.shape()[1]; ++f) s += fx(r, f) * fy(r, f);
        e[r] = s;
    }
    return e;
}

/// errors[m index][seed][pair] of estimate − closed form.
template <class Map, class Sampler>
std::vector<std::vector<std::vector<double>>> errors(const std::vector<index_t>& ms, int seeds, double sigma,
                                                     const pairs_t& p, const kernel_fn& k) {
    using op_t = kattn::linear_attention<Map, Sampler, kattn::backends::reference, double>;
    const std::size_t d = p.x.shape()[1], n = p.x.shape()[0];
    std::vector<std::vector<std::vector<double>>> err;
    for (index_t m : ms) {
        std::vector<std::vector<double>> em;
        for (int s = 0; s < seeds; ++s) {
            kattn::attention_config cfg{.head_dim = index_t(d),
                                        .value_dim = 1,
                                        .num_features = Map::uses_pairs ? 2 * m : m,
                                        .seed = std::uint64_t(1000 * m + s)};
            cfg.sigma = sigma;
            cfg.input_scale = 1.0;
            const op_t op(cfg);
            const auto est = estimates(op, p);
            std::vector<double> e(n);
            for (std::size_t r = 0; r < n; ++r) e[r] = est[r] - k(&p.x(r, 0), &p.y(r, 0), d);
            em.push_back(std::move(e));
        }
        err.push_back(std::move(em));
    }
    return err;
}

/// RMSE over seeds and pairs.
double rmse(const std::vector<std::vector<double>>& em) {
    double s = 0;
    std::size_t n = 0;
    for (const auto& e : em)
        for (double v : e) {
            s += v * v;
            ++n;
        }
    return std::sqrt(s / double(n));
}

/// Unbiasedness: for every m and pair, |mean error over seeds| ≤ 3 standard errors.
void check_unbiased(const std::vector<index_t>& ms, int seeds, std::size_t pairs,
                    const std::vector<std::vector<std::vector<double>>>& err) {
    for (std::size_t mi = 0; mi < ms.size(); ++mi)
        for (std::size_t r = 0; r < pairs; ++r) {
            double mean = 0, var = 0;
            for (int s = 0; s < seeds; ++s) mean += err[mi][s][r];
            mean /= seeds;
            for (int s = 0; s < seeds; ++s) var += (err[mi][s][r] - mean) * (err[mi][s][r] - mean);
            var /= (seeds - 1);
            const double se = std::sqrt(var / seeds);
            INFO("m = ", ms[mi], ", pair ", r, ": mean error ", mean, ", standard error ", se);
            CHECK(se > 0);
            CHECK(std::abs(mean) <= 3 * se);
        }
}

/// check_bias: the 12-seed unbiasedness test per m (maps whose error is heavy-tailed, relu,
/// are tested for bias with more seeds separately).
template <class Map, class Sampler>
void check_convergence(const char* what, double sigma, const kernel_fn& k, bool check_bias = true) {
    const std::vector<index_t> ms{64, 256, 1024, 4096, 16384};
    const int seeds = 12;
    const auto p = make_pairs(3, kDim, 4242);
    const auto err = errors<Map, Sampler>(ms, seeds, sigma, p, k);
    INFO(what, ", sigma = ", sigma);

    if (check_bias) check_unbiased(ms, seeds, p.x.shape()[0], err);

    // Monte-Carlo rate: RMSE·√m roughly constant.
    std::vector<double> scaled;
    std::string table;
    for (std::size_t mi = 0; mi < ms.size(); ++mi) {
        scaled.push_back(rmse(err[mi]) * std::sqrt(double(ms[mi])));
        table += " m=" + std::to_string(ms[mi]) + ": " + std::to_string(scaled.back());
    }
    const double lo = *std::min_element(scaled.begin(), scaled.end());
    const double hi = *std::max_element(scaled.begin(), scaled.end());
    INFO("RMSE*sqrt(m):", table);
    CHECK(lo > 0);
    CHECK(hi / lo < 2.5);
    // RMSE at the largest m is far below RMSE at the smallest (≈ 1/16 for m^{-1/2}).
    CHECK(rmse(err.back()) < rmse(err.front()) / 6);
}

double rbf(const double* x, const double* y, std::size_t d, double sigma) {
    return std::exp(-sqdist(x, y, d) / (2 * sigma * sigma));
}
double softmax_kernel(const double* x, const double* y, std::size_t d) { return std::exp(dot(x, y, d)); }
/// E relu(ωᵀx) relu(ωᵀy), ω ~ N(0, I): the first-order arc-cosine kernel.
double arccos1_kernel(const double* x, const double* y, std::size_t d) {
    const double nx = std::sqrt(dot(x, x, d)), ny = std::sqrt(dot(y, y, d));
    const double c = std::clamp(dot(x, y, d) / (nx * ny), -1.0, 1.0), t = std::acos(c);
    return nx * ny * (std::sin(t) + (std::numbers::pi - t) * c) / (2 * std::numbers::pi);
}
/// docs/samplers.md's gmm mixture formula with one component, μ = 0, S = σ⁻²I over R^{2d}.
double nonstationary_kernel(const double* x, const double* y, std::size_t d, double sigma) {
    const double is2 = 1 / (sigma * sigma);
    // V = {(x−y, 0), (0, x−y), (x, −y), (−y, x)}: ‖v‖² = ‖x−y‖², ‖x−y‖², ‖x‖²+‖y‖², ‖x‖²+‖y‖².
    const double a = sqdist(x, y, d), b = dot(x, x, d) + dot(y, y, d);
    return 0.25 * (2 * std::exp(-0.5 * is2 * a) + 2 * std::exp(-0.5 * is2 * b));
}

}  // namespace

TEST_CASE("trig with gaussian frequencies converges to the RBF kernel at rate m^-1/2" * doctest::test_suite("scale")) {
    for (double sigma : {1.0, 2.0})
        check_convergence<kf::trig, ks::gaussian>(
            "trig/gaussian", sigma,
            [sigma](const double* x, const double* y, std::size_t d) { return rbf(x, y, d, sigma); });
}

TEST_CASE("favor converges to exp(x.y) at rate m^-1/2 (gaussian and orthogonal frequencies)" *
          doctest::test_suite("scale")) {
    check_convergence<kf::favor, ks::gaussian>("favor/gaussian", 1.0, softmax_kernel);
    check_convergence<kf::favor, ks::orthogonal_gaussian>("favor/orthogonal_gaussian", 1.0, softmax_kernel);
}

TEST_CASE("favor_hyperbolic converges to exp(x.y) at rate m^-1/2 (gaussian and orthogonal frequencies)" *
          doctest::test_suite("scale")) {
    check_convergence<kf::favor_hyperbolic, ks::gaussian>("favor_hyperbolic/gaussian", 1.0, softmax_kernel);
    check_convergence<kf::favor_hyperbolic, ks::orthogonal_gaussian>("favor_hyperbolic/orthogonal_gaussian", 1.0,
                                                                     softmax_kernel);
}

TEST_CASE("relu converges to the arc-cosine kernel at rate m^-1/2 (gaussian and orthogonal frequencies)" *
          doctest::test_suite("scale")) {
    // The product relu(ωᵀx)·relu(ωᵀy) is heavy-tailed, so 12 seeds give a poor standard
    // error: the rate is checked over m = 64 … 16384, the bias with 400 seeds at m = 64.
    check_convergence<kf::relu, ks::gaussian>("relu/gaussian", 1.0, arccos1_kernel, false);
    check_convergence<kf::relu, ks::orthogonal_gaussian>("relu/orthogonal_gaussian", 1.0, arccos1_kernel, false);
    const auto p = make_pairs(3, kDim, 4242);
    check_unbiased({64}, 400, 3, errors<kf::relu, ks::gaussian>({64}, 400, 1.0, p, arccos1_kernel));
    check_unbiased({64}, 400, 3, errors<kf::relu, ks::orthogonal_gaussian>({64}, 400, 1.0, p, arccos1_kernel));
    // The closed form at θ = 0 is ‖x‖²/2 = E relu(ωᵀx)².
    const double x[3] = {0.3, -0.4, 1.2};
    CHECK(arccos1_kernel(x, x, 3) == doctest::Approx(0.5 * dot(x, x, 3)).epsilon(1e-14));
}

TEST_CASE("nonstationary with gaussian pairs converges to the closed-form mixture kernel at rate m^-1/2" *
          doctest::test_suite("scale")) {
    for (double sigma : {1.0, 2.0})
        check_convergence<kf::nonstationary, ks::gaussian>(
            "nonstationary/gaussian", sigma,
            [sigma](const double* x, const double* y, std::size_t d) { return nonstationary_kernel(x, y, d, sigma); });
}

TEST_CASE("the nonstationary kernel depends on x and y, not only on x - y") {
    // Sanity check of the closed form used above: shifting both inputs changes it.
    const double x[2] = {0.3, -0.2}, y[2] = {0.1, 0.4}, x2[2] = {0.8, 0.3}, y2[2] = {0.6, 0.9};
    CHECK(nonstationary_kernel(x, y, 2, 1.0) != doctest::Approx(nonstationary_kernel(x2, y2, 2, 1.0)));
    CHECK(rbf(x, y, 2, 1.0) == doctest::Approx(rbf(x2, y2, 2, 1.0)));
}

TEST_CASE("orthogonal frequencies give a lower favor kernel error than iid ones (d = 16, m = 4d)") {
    const std::size_t d = 16;
    const index_t m = 4 * index_t(d);
    const int seeds = 256;
    const auto p = make_pairs(4, d, 777);
    const auto iid = errors<kf::favor, ks::gaussian>({m}, seeds, 1.0, p, softmax_kernel);
    const auto ort = errors<kf::favor, ks::orthogonal_gaussian>({m}, seeds, 1.0, p, softmax_kernel);
    const double r_iid = rmse(iid[0]), r_ort = rmse(ort[0]);
    INFO("RMSE iid ", r_iid, ", orthogonal ", r_ort);
    CHECK(r_ort < r_iid);
}
