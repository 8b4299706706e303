// Tests for kattn/samplers/gmm.hpp: sample moments and component frequencies (diagonal,
// full, symmetric, NGSM), log_prob normalisation by quadrature and its gradient,
// reparameterisation gradients (sample_backward) against finite differences, Monte-Carlo
// convergence of trig / nonstationary features to the closed-form kernels, NGSM
// cross-covariance, determinism and argument errors.
#include "support.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <kattn/samplers/gmm.hpp>
#if __has_include(<kattn/samplers/density.hpp>)
#include <kattn/samplers/density.hpp>
#define KATTN_TEST_HAS_DENSITY 1
#endif

namespace {

using kattn::index_t;
namespace ks = kattn::samplers;
namespace kf = kattn::features;
using vec = std::vector<double>;
using mat = std::vector<std::vector<double>>;

// ---- fixtures -------------------------------------------------------------------------------

/// Parameters of a test mixture, kept independently of the library (for expected moments).
struct spec {
    vec weights;  // unnormalised
    mat means;    // [Q][D]
    mat chol;     // [Q][D*D] lower, row-major (diagonal mixtures: diag(sqrt(var)))
    bool diagonal = true;
    bool symmetric = false;
    index_t dim() const { return index_t(means[0].size()); }
    ks::gmm make() const {
        if (!diagonal) return ks::gmm::full(weights, means, chol, symmetric);
        mat var(means.size(), vec(means[0].size()));
        const std::size_t D = means[0].size();
        for (std::size_t c = 0; c < var.size(); ++c)
            for (std::size_t i = 0; i < D; ++i) var[c][i] = chol[c][i * D + i] * chol[c][i * D + i];
        return ks::gmm::diagonal(weights, means, var, symmetric);
    }
};

mat diag_chol(const mat& var) {
    mat L;
    for (const auto& v : var) {
        const std::size_t D = v.size();
        vec l(D * D, 0.0);
        for (std::size_t i = 0; i < D; ++i) l[i * D + i] = std::sqrt(v[i]);
        L.push_back(l);
    }
    return L;
}

spec diag_spec(bool symmetric = false) {
    return {{2, 5, 3},
            {{1.0, -0.5, 0.2}, {-0.8, 0.3, 1.2}, {0.1, 1.5, -1.0}},
            diag_chol({{0.3, 0.8, 0.5}, {0.6, 0.2, 0.4}, {1.0, 0.5, 0.25}}),
            true,
            symmetric};
}

spec full_spec(bool symmetric = false) {
    return {{0.35, 0.65},
            {{0.7, -0.4, 0.9}, {-0.6, 1.1, 0.2}},
            {{0.8, 0, 0, 0.3, 0.6, 0, -0.2, 0.25, 0.7}, {0.5, 0, 0, -0.4, 0.9, 0, 0.35, -0.1, 0.45}},
            false,
            symmetric};
}

/// NGSM spec with d = 2 (D = 4), two components with correlations 0.6 and −0.4.
std::vector<ks::ngsm_component> ngsm_components() {
    return {{0.4, {0.9, -0.5}, {0.3, 0.8}, {0.4, 0.7}, {0.6, 0.3}, 0.6},
            {0.6, {-0.4, 0.6}, {1.0, -0.7}, {0.5, 0.3}, {0.8, 0.5}, -0.4}};
}

/// The NGSM's covariance from its definition: per dimension [[s1, ρ√(s1 s2)], [·, s2]].
spec ngsm_spec() {
    spec s;
    s.diagonal = false;
    for (const auto& k : ngsm_components()) {
        const std::size_t d = k.mean1.size(), D = 2 * d;
        s.weights.push_back(k.weight);
        vec m(k.mean1);
        m.insert(m.end(), k.mean2.begin(), k.mean2.end());
        s.means.push_back(m);
        vec L(D * D, 0.0);
        for (std::size_t i = 0; i < d; ++i) {
            L[i * D + i] = std::sqrt(k.var1[i]);
            L[(d + i) * D + i] = k.rho * std::sqrt(k.var2[i]);
            L[(d + i) * D + d + i] = std::sqrt(1 - k.rho * k.rho) * std::sqrt(k.var2[i]);
        }
        s.chol.push_back(L);
    }
    return s;
}

std::vector<double> draw(const ks::gmm& g, index_t count, std::uint64_t seed) {
    std::vector<double> out(std::size_t(g.dim() * count));
    g.sample(kattn::sampler_params{}, g.dim(), count, seed, out.data());
    return out;
}

// ---- moments --------------------------------------------------------------------------------

/// Checks mean, covariance and component frequencies of 2e5 draws against the spec, each
/// within 5 standard errors (estimated from the draws).
void check_moments(const spec& s, std::uint64_t seed) {
    const ks::gmm g = s.make();
    const index_t Q = index_t(s.weights.size()), D = s.dim(), n = 200'000;
    const auto w = draw(g, n, seed);
    double wsum = 0;
    for (double v : s.weights) wsum += v;

    // Expected mean and second moment: Σ π (μ, S + μμᵀ); per-dimension sign flips zero the
    // mean and every off-diagonal second moment.
    vec mean(D, 0.0), second(std::size_t(D * D), 0.0);
    for (index_t c = 0; c < Q; ++c) {
        const double p = s.weights[c] / wsum;
        const auto& mu = s.means[c];
        const auto& L = s.chol[c];
        for (index_t a = 0; a < D; ++a) {
            if (!s.symmetric) mean[a] += p * mu[a];
            for (index_t b = 0; b < D; ++b) {
                if (s.symmetric && a != b) continue;
                double S = 0;
                for (index_t j = 0; j < D; ++j) S += L[a * D + j] * L[b * D + j];
                second[a * D + b] += p * (S + mu[a] * mu[b]);
            }
        }
    }
    vec m(D, 0.0);
    for (index_t k = 0; k < n; ++k)
        for (index_t a = 0; a < D; ++a) m[a] += w[k * D + a];
    for (auto& v : m) v /= double(n);
    for (index_t a = 0; a < D; ++a) {
        double var = 0;
        for (index_t k = 0; k < n; ++k) var += (w[k * D + a] - m[a]) * (w[k * D + a] - m[a]);
        var /= double(n - 1);
        INFO("mean of dim ", a, ": ", m[a], " expected ", mean[a]);
        CHECK(std::abs(m[a] - mean[a]) < 5 * std::sqrt(var / double(n)));
    }
    for (index_t a = 0; a < D; ++a)
        for (index_t b = a; b < D; ++b) {
            double c1 = 0, c2 = 0;
            for (index_t k = 0; k < n; ++k) {
                const double t = (w[k * D + a] - m[a]) * (w[k * D + b] - m[b]);
                c1 += t;
                c2 += t * t;
            }
            c1 /= double(n);
            const double se = std::sqrt((c2 / double(n) - c1 * c1) / double(n));
            const double want = second[a * D + b] - mean[a] * mean[b];
            INFO("cov(", a, ", ", b, ") = ", c1, " expected ", want, " se ", se);
            CHECK(std::abs(c1 - want) < 5 * se);
        }

    // Component frequencies from the draws sample() used, and sample() == sample_with_noise().
    const auto nz = g.draw_noise(n, seed);
    std::vector<double> again(w.size());
    g.sample_with_noise(nz, again.data());
    CHECK(again == w);
    for (index_t c = 0; c < Q; ++c) {
        const double p = s.weights[c] / wsum;
        const double f = double(std::count(nz.component.begin(), nz.component.end(), c)) / double(n);
        INFO("component ", c, " frequency ", f, " expected ", p);
        CHECK(std::abs(f - p) < 5 * std::sqrt(p * (1 - p) / double(n)));
    }
}

// ---- quadrature -----------------------------------------------------------------------------

double integrate_1d(const ks::gmm& g, double lo, double hi, double h) {
    const index_t n = index_t(std::llround((hi - lo) / h));
    double s = 0;
    for (index_t i = 0; i <= n; ++i) {
        const double x = lo + double(i) * h;
        s += (i == 0 || i == n ? 0.5 : 1.0) * std::exp(g.log_prob(&x));
    }
    return s * h;
}

double integrate_2d(const ks::gmm& g, double lo, double hi, double h) {
    const index_t n = index_t(std::llround((hi - lo) / h));
    double s = 0;
    for (index_t i = 0; i <= n; ++i)
        for (index_t j = 0; j <= n; ++j) {
            const double x[2] = {lo + double(i) * h, lo + double(j) * h};
            const double wt = (i == 0 || i == n ? 0.5 : 1.0) * (j == 0 || j == n ? 0.5 : 1.0);
            s += wt * std::exp(g.log_prob(x));
        }
    return s * h * h;
}

// ---- Monte-Carlo kernel convergence ---------------------------------------------------------

struct pairs_t {
    xt::xtensor<double, 2> x, y;
};

pairs_t make_pairs(std::size_t n, std::size_t d, std::uint64_t seed) {
    pairs_t p{kt::randn<double, 2>({n, d}, seed), kt::randn<double, 2>({n, d}, seed + 1)};
    for (auto* t : {&p.x, &p.y})
        for (std::size_t r = 0; r < n; ++r) {
            double s = 0;
            for (std::size_t i = 0; i < d; ++i) s += (*t)(r, i) * (*t)(r, i);
            const double target = 0.6 + 0.3 * double(r % 3);  // 0.6, 0.9, 1.2
            for (std::size_t i = 0; i < d; ++i) (*t)(r, i) *= target / std::sqrt(s);
        }
    return p;
}

using kernel_fn = std::function<double(const double*, const double*)>;

/// est[m index][seed][pair]: features(x)·features(y) of linear_attention<Map, gmm>.
template <class Map>
std::vector<std::vector<vec>> estimates(const ks::gmm& g, const std::vector<index_t>& ms, int seeds, const pairs_t& p) {
    using op_t = kattn::linear_attention<Map, ks::gmm, kattn::backends::reference, double>;
    const std::size_t d = p.x.shape()[1], n = p.x.shape()[0];
    std::vector<std::vector<vec>> est;
    for (index_t m : ms) {
        std::vector<vec> em;
        for (int s = 0; s < seeds; ++s) {
            kattn::attention_config cfg{.head_dim = index_t(d),
                                        .value_dim = 1,
                                        .num_features = Map::uses_pairs ? 2 * m : m,
                                        .seed = std::uint64_t(7919 * m + s)};
            const op_t op(cfg, g);
            const auto fx = op.features(p.x), fy = op.features(p.y);
            vec e(n);
            for (std::size_t r = 0; r < n; ++r) {
                double v = 0;
                for (std::size_t f = 0; f < fx.shape()[1]; ++f) v += fx(r, f) * fy(r, f);
                e[r] = v;
            }
            em.push_back(e);
        }
        est.push_back(em);
    }
    return est;
}

/// Unbiased (mean error within 3 standard errors for every m and pair) and RMSE·√m
/// roughly constant for m = 64 … 4096. Returns the estimates for further checks.
template <class Map>
std::vector<std::vector<vec>> check_convergence(const char* what, const ks::gmm& g, const pairs_t& p,
                                                const kernel_fn& k) {
    const std::vector<index_t> ms{64, 256, 1024, 4096};
    const int seeds = 12;
    const auto est = estimates<Map>(g, ms, seeds, p);
    const std::size_t n = p.x.shape()[0];
    INFO(what);
    std::vector<double> scaled;
    std::string table;
    for (std::size_t mi = 0; mi < ms.size(); ++mi) {
        double ss = 0;
        for (std::size_t r = 0; r < n; ++r) {
            const double truth = k(&p.x(r, 0), &p.y(r, 0));
            double mean = 0, var = 0;
            for (int s = 0; s < seeds; ++s) mean += est[mi][s][r] - truth;
            mean /= seeds;
            for (int s = 0; s < seeds; ++s) {
                const double e = est[mi][s][r] - truth;
                var += (e - mean) * (e - mean);
                ss += e * e;
            }
            const double se = std::sqrt(var / (seeds - 1) / seeds);
            INFO("m = ", ms[mi], ", pair ", r, ": kernel ", truth, ", mean error ", mean, ", se ", se);
            CHECK(se > 0);
            CHECK(std::abs(mean) <= 3 * se);
        }
        scaled.push_back(std::sqrt(ss / double(seeds * n)) * std::sqrt(double(ms[mi])));
        table += " m=" + std::to_string(ms[mi]) + ": " + std::to_string(scaled.back());
    }
    const double lo = *std::min_element(scaled.begin(), scaled.end());
    const double hi = *std::max_element(scaled.begin(), scaled.end());
    INFO("RMSE*sqrt(m):", table);
    CHECK(lo > 0);
    CHECK(hi / lo < 2.5);
    return est;
}

/// Whether the estimates at the largest m reject kernel k: some pair's mean is > 6 se away.
bool rejects(const std::vector<vec>& est, const pairs_t& p, const kernel_fn& k) {
    bool any = false;
    for (std::size_t r = 0; r < p.x.shape()[0]; ++r) {
        const double truth = k(&p.x(r, 0), &p.y(r, 0));
        double mean = 0, var = 0;
        for (const auto& e : est) mean += e[r];
        mean /= double(est.size());
        for (const auto& e : est) var += (e[r] - mean) * (e[r] - mean);
        const double se = std::sqrt(var / double(est.size() - 1) / double(est.size()));
        any = any || std::abs(mean - truth) > 6 * se;
    }
    return any;
}

/// E cos(ωᵀv) of a (non-symmetric) mixture spec, written out independently.
double spec_expected_cos(const spec& s, const double* v) {
    const index_t D = s.dim();
    double wsum = 0, k = 0;
    for (double w : s.weights) wsum += w;
    for (std::size_t c = 0; c < s.weights.size(); ++c) {
        double dot = 0, quad = 0;
        for (index_t i = 0; i < D; ++i) dot += s.means[c][i] * v[i];
        for (index_t j = 0; j < D; ++j) {
            double t = 0;
            for (index_t i = 0; i < D; ++i) t += s.chol[c][i * D + j] * v[i];
            quad += t * t;
        }
        k += s.weights[c] / wsum * std::cos(dot) * std::exp(-0.5 * quad);
    }
    return k;
}

}  // namespace

// ---- traits --------------------------------------------------------------------------------

TEST_CASE("gmm: traits and concepts") {
    static_assert(kattn::spectral_sampler<ks::gmm>);
    static_assert(kattn::spectral_sampler_traits<ks::gmm>::is_random);
    static_assert(!kattn::spectral_sampler_traits<ks::gmm>::is_orthogonal);
#ifdef KATTN_TEST_HAS_DENSITY
    static_assert(kattn::spectral_density<ks::gmm>);
#endif
    CHECK(std::string(ks::gmm::name) == "gmm");
    const auto g = diag_spec().make();
    CHECK(g.dim() == 3);
    CHECK(g.num_components() == 3);
    CHECK(g.is_diagonal());
    CHECK(g.weights()[1] == doctest::Approx(0.5));  // normalised from {2, 5, 3}
    CHECK(!full_spec().make().is_diagonal());
}

// ---- sampling --------------------------------------------------------------------------------

TEST_CASE("gmm: sample moments and component frequencies match the parameters" * doctest::test_suite("scale")) {
    SUBCASE("diagonal") { check_moments(diag_spec(), 11); }
    SUBCASE("full") { check_moments(full_spec(), 12); }
    SUBCASE("symmetric diagonal (per-dimension signs: zero mean, zero cross moments)") {
        check_moments(diag_spec(true), 13);
    }
    SUBCASE("symmetric full") { check_moments(full_spec(true), 14); }
    SUBCASE("NGSM with correlated blocks") { check_moments(ngsm_spec(), 15); }
}

TEST_CASE("gmm: draws follow the documented formula") {
    const auto s = full_spec(true);
    const auto g = s.make();
    const index_t count = 7, D = 3;
    const auto w = draw(g, count, 99);
    const kattn::random_stream cs(99, kattn::streams::component), ns(99, kattn::streams::omega),
        bs(99, kattn::streams::bias);
    for (index_t k = 0; k < count; ++k) {
        const index_t c = cs.uniform(k) < 0.35 ? 0 : 1;
        for (index_t i = 0; i < D; ++i) {
            double v = s.means[c][i];
            for (index_t j = 0; j <= i; ++j) v += s.chol[c][i * D + j] * ns.normal(k * D + j);
            if (bs.bits(k * D + i) & 1u) v = -v;
            CHECK(w[k * D + i] == doctest::Approx(v).epsilon(1e-14));
        }
    }
}

TEST_CASE("gmm: same seed gives the same samples; float is the cast of double; sigma is ignored") {
    const auto g = full_spec(true).make();
    const auto a = draw(g, 100, 5), b = draw(g, 100, 5), c = draw(g, 100, 6);
    CHECK(a == b);
    CHECK(a != c);
    std::vector<float> f(a.size());
    g.sample(kattn::sampler_params{}, 3, 100, 5, f.data());
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(f[i] == static_cast<float>(a[i]));
    std::vector<double> s(a.size());
    g.sample(kattn::sampler_params{0.25}, 3, 100, 5, s.data());
    CHECK(s == a);
    // A copy carries the same parameters.
    const ks::gmm copy = g;
    CHECK(draw(copy, 100, 5) == a);
}

// ---- density ---------------------------------------------------------------------------------

TEST_CASE("gmm: log_prob integrates to 1 (1-D quadrature, 1e-6)") {
    const vec w{1, 2, 1.5};
    const mat mu{{-1.5}, {0.3}, {2.0}}, var{{0.3}, {1.0}, {0.05}};
    mat L;
    for (const auto& v : var) L.push_back({std::sqrt(v[0])});
    const ks::gmm variants[] = {ks::gmm::diagonal(w, mu, var), ks::gmm::full(w, mu, L),
                                ks::gmm::diagonal(w, mu, var, true), ks::gmm::full(w, mu, L, true)};
    const char* names[] = {"diagonal", "full", "symmetric diagonal", "symmetric full"};
    for (int v = 0; v < 4; ++v) {
        const double integral = integrate_1d(variants[v], -12.0, 12.0, 1e-3);
        INFO(names[v], ": integral ", integral);
        CHECK(std::abs(integral - 1.0) < 1e-6);
    }
}

TEST_CASE("gmm: log_prob integrates to 1 (2-D quadrature, 1e-4)") {
    const vec w{0.3, 0.7};
    const mat mu{{1.0, -0.8}, {-1.2, 0.5}}, var{{0.5, 0.9}, {1.2, 0.4}};
    const mat L{{0.8, 0.0, -0.5, 0.6}, {0.7, 0.0, 0.4, 0.9}};
    const ks::gmm variants[] = {ks::gmm::diagonal(w, mu, var), ks::gmm::full(w, mu, L),
                                ks::gmm::diagonal(w, mu, var, true), ks::gmm::full(w, mu, L, true)};
    const char* names[] = {"diagonal", "full", "symmetric diagonal", "symmetric full"};
    for (int v = 0; v < 4; ++v) {
        const double integral = integrate_2d(variants[v], -10.0, 10.0, 0.04);
        INFO(names[v], ": integral ", integral);
        CHECK(std::abs(integral - 1.0) < 1e-4);
    }
}

TEST_CASE("gmm: log_prob equals the written-out density") {
    // Full, one component, D = 2: S = L Lᵀ, log N written with the 2x2 inverse.
    const double l00 = 0.8, l10 = -0.5, l11 = 0.6, m0 = 0.3, m1 = -0.2;
    const auto g = ks::gmm::full({1.0}, {{m0, m1}}, {{l00, 0, l10, l11}});
    const double s00 = l00 * l00, s01 = l00 * l10, s11 = l10 * l10 + l11 * l11, det = s00 * s11 - s01 * s01;
    const double w[2] = {0.9, 0.4}, r0 = w[0] - m0, r1 = w[1] - m1;
    const double q = (s11 * r0 * r0 - 2 * s01 * r0 * r1 + s00 * r1 * r1) / det;
    CHECK(g.log_prob(w) == doctest::Approx(-0.5 * q - 0.5 * std::log(det) - std::log(2 * M_PI)).epsilon(1e-13));

    // Symmetric diagonal (closed per-dimension product) = enumeration over the 2^D signs
    // (the same mixture given as a symmetric full-covariance one).
    const auto s = diag_spec(true);
    const auto gd = s.make();
    auto sf = s;
    sf.diagonal = false;
    const auto gf = sf.make();
    const auto pts = kt::randn<double, 2>({5, 3}, 77, 1.2);
    for (std::size_t r = 0; r < 5; ++r)
        CHECK(gd.log_prob(&pts(r, 0)) == doctest::Approx(gf.log_prob(&pts(r, 0))).epsilon(1e-12));

    // Far in the tail: finite (log-sum-exp), no underflow to -inf.
    const double far[3] = {60.0, -80.0, 45.0};
    CHECK(std::isfinite(gd.log_prob(far)));
    CHECK(std::isfinite(full_spec().make().log_prob(far)));
}

TEST_CASE("gmm: log_prob_grad matches central finite differences") {
    const spec specs[] = {diag_spec(), full_spec(), diag_spec(true), full_spec(true), ngsm_spec()};
    for (const auto& s : specs) {
        const auto g = s.make();
        const index_t D = g.dim();
        const auto pts = kt::randn<double, 2>({4, std::size_t(D)}, 31, 1.0);
        for (std::size_t r = 0; r < 4; ++r) {
            vec x(&pts(r, 0), &pts(r, 0) + D), grad(D);
            g.log_prob_grad(x.data(), grad.data());
            for (index_t i = 0; i < D; ++i) {
                const double h = 1e-5, x0 = x[i];
                x[i] = x0 + h;
                const double fp = g.log_prob(x.data());
                x[i] = x0 - h;
                const double fm = g.log_prob(x.data());
                x[i] = x0;
                INFO("diag ", s.diagonal, " symmetric ", s.symmetric, " point ", r, " dim ", i);
                CHECK(grad[i] == doctest::Approx((fp - fm) / (2 * h)).epsilon(1e-6).scale(1.0));
            }
        }
    }
}

// ---- reparameterisation gradients --------------------------------------------------------------

TEST_CASE("gmm: sample_backward matches finite differences of a loss of the sampled omegas") {
    const index_t count = 60;
    const std::uint64_t seed = 2718;
    for (const auto& s0 : {diag_spec(), full_spec(), diag_spec(true), full_spec(true)}) {
        const index_t Q = index_t(s0.weights.size()), D = s0.dim();
        const auto a = kt::randn<double, 1>({std::size_t(count * D)}, 4, 1.0);
        // L(Ω) = Σ a_ki sin(ω_ki), ∂L/∂ω_ki = a_ki cos(ω_ki).
        auto loss = [&](const spec& s) {
            const auto w = draw(s.make(), count, seed);
            double l = 0;
            for (std::size_t j = 0; j < w.size(); ++j) l += a(j) * std::sin(w[j]);
            return l;
        };
        const auto g = s0.make();
        const auto w = draw(g, count, seed);
        vec gw(w.size());
        for (std::size_t j = 0; j < w.size(); ++j) gw[j] = a(j) * std::cos(w[j]);
        const auto grad = g.sample_backward(kattn::sampler_params{}, D, count, seed, gw.data());
        REQUIRE(grad.mean.size() == std::size_t(Q * D));
        index_t total = 0;
        for (index_t c : grad.count) total += c;
        CHECK(total == count);
        const double h = 1e-6;
        INFO("diag ", s0.diagonal, " symmetric ", s0.symmetric);
        for (index_t c = 0; c < Q; ++c) {
            for (index_t i = 0; i < D; ++i) {
                spec sp = s0, sm = s0;
                sp.means[c][i] += h;
                sm.means[c][i] -= h;
                CHECK(grad.mean[c * D + i] ==
                      doctest::Approx((loss(sp) - loss(sm)) / (2 * h)).epsilon(1e-6).scale(1.0));
                for (index_t j = 0; j <= i; ++j) {
                    if (s0.diagonal && j != i) continue;
                    sp = s0;
                    sm = s0;
                    sp.chol[c][i * D + j] += h;
                    sm.chol[c][i * D + j] -= h;
                    const double fd = (loss(sp) - loss(sm)) / (2 * h);
                    const double an =
                        s0.diagonal || j == i ? grad.scale[c * D + i] : grad.cholesky[(c * D + i) * D + j];
                    CHECK(an == doctest::Approx(fd).epsilon(1e-6).scale(1.0));
                    if (!s0.diagonal)
                        CHECK(grad.cholesky[(c * D + i) * D + j] == doctest::Approx(fd).epsilon(1e-6).scale(1.0));
                }
                // log-variance: L_ii = exp(½ log s) perturbed multiplicatively.
                sp = s0;
                sm = s0;
                sp.chol[c][i * D + i] *= std::exp(0.5 * h);
                sm.chol[c][i * D + i] *= std::exp(-0.5 * h);
                CHECK(grad.log_var[c * D + i] ==
                      doctest::Approx((loss(sp) - loss(sm)) / (2 * h)).epsilon(1e-6).scale(1.0));
            }
        }
        if (s0.diagonal) CHECK(grad.cholesky.empty());
    }
}

// ---- closed-form kernels via the feature maps -------------------------------------------------

TEST_CASE("gmm: trig features converge to stationary_kernel at rate m^-1/2") {
    const auto p = make_pairs(3, 3, 4242);
    for (const auto& s : {diag_spec(), full_spec()}) {
        const auto g = s.make();
        const auto k = [&](const double* x, const double* y) { return g.stationary_kernel(x, y, 3); };
        // The library's closed form equals the independently written Σ π cos(μᵀτ) exp(−½τᵀSτ).
        for (std::size_t r = 0; r < 3; ++r) {
            double t[3];
            for (int i = 0; i < 3; ++i) t[i] = p.x(r, i) - p.y(r, i);
            CHECK(k(&p.x(r, 0), &p.y(r, 0)) == doctest::Approx(spec_expected_cos(s, t)).epsilon(1e-13));
        }
        check_convergence<kf::trig>(s.diagonal ? "trig / diagonal gmm" : "trig / full gmm", g, p, k);
    }
}

TEST_CASE("gmm: symmetric (per-dimension signs) gives the product-of-cosines kernel, not the whole-vector one") {
    const auto p = make_pairs(3, 3, 5151);
    const auto s = diag_spec(true);
    const auto g = s.make();
    const auto k = [&](const double* x, const double* y) { return g.stationary_kernel(x, y, 3); };
    // Written out: Σ π Π_i cos(μ_i τ_i) exp(−½ s_i τ_i²).
    for (std::size_t r = 0; r < 3; ++r) {
        double want = 0;
        for (std::size_t c = 0; c < 3; ++c) {
            double prod = 0.1 * s.weights[c];
            for (std::size_t i = 0; i < 3; ++i) {
                const double t = p.x(r, i) - p.y(r, i), sd = s.chol[c][i * 3 + i];
                prod *= std::cos(s.means[c][i] * t) * std::exp(-0.5 * sd * sd * t * t);
            }
            want += prod;
        }
        CHECK(k(&p.x(r, 0), &p.y(r, 0)) == doctest::Approx(want).epsilon(1e-13));
    }
    const auto est = check_convergence<kf::trig>("trig / symmetric diagonal gmm", g, p, k);
    // Flipping whole vectors leaves E cos(ωᵀτ) = Σ π cos(μᵀτ) exp(−½τᵀSτ): a different kernel,
    // which the per-dimension estimates reject.
    const auto whole = [&](const double* x, const double* y) {
        double t[3];
        for (int i = 0; i < 3; ++i) t[i] = x[i] - y[i];
        return spec_expected_cos(s, t);
    };
    CHECK(rejects(est.back(), p, whole));

    // Symmetric full covariances (2^D enumeration) converge too.
    const auto gf = full_spec(true).make();
    check_convergence<kf::trig>("trig / symmetric full gmm", gf, p,
                                [&](const double* x, const double* y) { return gf.stationary_kernel(x, y, 3); });
}

TEST_CASE("gmm: nonstationary features with an NGSM converge to nonstationary_kernel at rate m^-1/2") {
    const std::size_t d = 2;
    const auto p = make_pairs(3, d, 6262);
    const auto g = ks::gmm::ngsm(ngsm_components());
    REQUIRE(g.dim() == 4);
    REQUIRE(!g.is_diagonal());
    const auto s = ngsm_spec();
    const auto k = [&](const double* x, const double* y) { return g.nonstationary_kernel(x, y, index_t(d)); };
    // docs/samplers.md (gmm closed-form kernels): ¼ Σ_{v∈V} cos(μᵀv) exp(−½vᵀSv), V = {(x−y, 0), (0, x−y), (x, −y), (−y, x)}.
    auto design = [&](const double* x, const double* y, bool wrong_sign) {
        double v[4][4];
        for (std::size_t i = 0; i < d; ++i) {
            v[0][i] = x[i] - y[i], v[0][d + i] = 0;
            v[1][i] = 0, v[1][d + i] = x[i] - y[i];
            v[2][i] = x[i], v[2][d + i] = wrong_sign ? y[i] : -y[i];
            v[3][i] = wrong_sign ? y[i] : -y[i], v[3][d + i] = x[i];
        }
        double r = 0;
        for (auto& vv : v) r += spec_expected_cos(s, vv);
        return 0.25 * r;
    };
    for (std::size_t r = 0; r < 3; ++r)
        CHECK(k(&p.x(r, 0), &p.y(r, 0)) == doctest::Approx(design(&p.x(r, 0), &p.y(r, 0), false)).epsilon(1e-13));
    const auto est = check_convergence<kf::nonstationary>("nonstationary / NGSM", g, p, k);
    // The estimates reject the variant with ω_aᵀx + ω_bᵀy in the cross terms, so the test
    // tells the two derivations apart.
    CHECK(rejects(est.back(), p, [&](const double* x, const double* y) { return design(x, y, true); }));
    // Genuinely nonstationary: shifting x and y together changes the kernel.
    const double x[2] = {0.3, -0.2}, y[2] = {0.1, 0.4}, x2[2] = {0.8, 0.3}, y2[2] = {0.6, 0.9};
    CHECK(k(x, y) != doctest::Approx(k(x2, y2)));
}

// ---- NGSM ------------------------------------------------------------------------------------

TEST_CASE("gmm: NGSM blocks have the documented cross-covariance rho*sqrt(s1*s2)") {
    const vec s1{0.5, 1.0, 2.0}, s2{1.5, 0.4, 1.0};
    const double rho = 0.7;
    const auto g = ks::gmm::ngsm({{1.0, {0.2, -0.3, 0.5}, {-0.1, 0.4, 0.0}, s1, s2, rho}});
    const index_t d = 3, D = 6, n = 200'000;
    // The Cholesky factor has exactly the documented non-zeros.
    const auto L = g.cholesky();
    for (index_t i = 0; i < D; ++i)
        for (index_t j = 0; j < D; ++j) {
            double want = 0;
            if (i == j)
                want = i < d ? std::sqrt(s1[i]) : std::sqrt(1 - rho * rho) * std::sqrt(s2[i - d]);
            else if (i == j + d)
                want = rho * std::sqrt(s2[j]);
            CHECK(L[i * D + j] == doctest::Approx(want).epsilon(1e-15));
        }
    const auto w = draw(g, n, 808);
    vec m(D, 0.0);
    for (index_t k = 0; k < n; ++k)
        for (index_t a = 0; a < D; ++a) m[a] += w[k * D + a] / double(n);
    for (index_t i = 0; i < d; ++i)
        for (index_t j = 0; j < d; ++j) {
            double c1 = 0, c2 = 0;
            for (index_t k = 0; k < n; ++k) {
                const double t = (w[k * D + i] - m[i]) * (w[k * D + d + j] - m[d + j]);
                c1 += t;
                c2 += t * t;
            }
            c1 /= double(n);
            const double se = std::sqrt((c2 / double(n) - c1 * c1) / double(n));
            const double want = i == j ? rho * std::sqrt(s1[i] * s2[i]) : 0.0;
            INFO("cov(w1_", i, ", w2_", j, ") = ", c1, " expected ", want);
            CHECK(std::abs(c1 - want) < 5 * se);
        }
}

TEST_CASE("gmm: random NGSM factory") {
    const auto g = ks::gmm::ngsm(4, 10, 123);
    CHECK(g.dim() == 8);
    CHECK(g.num_components() == 10);
    CHECK(g.is_diagonal());  // rho = 0
    for (double w : g.weights()) CHECK(w == doctest::Approx(0.1));
    const kattn::random_stream rs(123, kattn::streams::init);
    for (index_t j = 0; j < 80; ++j) CHECK(g.means()[j] == rs.normal(j));
    for (double v : g.variances()) CHECK(v == 1.0);
    const auto h = ks::gmm::ngsm(4, 10, 123, {.mean_scale = 0.5, .variance = 0.25, .rho = -0.3});
    CHECK(!h.is_diagonal());
    CHECK(h.means()[5] == 0.5 * g.means()[5]);
    for (double v : h.variances()) CHECK(v == doctest::Approx(0.25));
    CHECK(ks::gmm::ngsm(4, 10, 123).means() == g.means());
    CHECK(ks::gmm::ngsm(4, 10, 124).means() != g.means());
    // Usable as the density of a 2d-dimensional pair and as a sampler of pairs.
    const vec w(8, 0.1);
    CHECK(std::isfinite(h.log_prob(w.data())));
    const auto sym = ks::gmm::ngsm(2, 3, 9, {.rho = 0.5, .symmetric = true});
    CHECK(sym.symmetric());
    CHECK(std::isfinite(sym.log_prob(w.data())));  // D = 4 ≤ 16: enumerated
}

TEST_CASE("gmm: xtensor construction equals std::vector construction") {
    const auto s = full_spec();
    xt::xtensor<double, 1> w = {0.35, 0.65};
    xt::xtensor<double, 2> mu = {{0.7, -0.4, 0.9}, {-0.6, 1.1, 0.2}};
    xt::xtensor<double, 3> L = xt::zeros<double>({2, 3, 3});
    for (std::size_t c = 0; c < 2; ++c) std::copy(s.chol[c].begin(), s.chol[c].end(), L.data() + c * 9);
    CHECK(draw(ks::gmm::full(w, mu, L), 50, 3) == draw(s.make(), 50, 3));
    xt::xtensor<double, 2> var = {{0.3, 0.8, 0.5}, {0.6, 0.2, 0.4}};
    xt::xtensor<float, 1> wf = {0.35f, 0.65f};
    const auto gd = ks::gmm::diagonal(wf, mu, var);
    CHECK(gd.variances()[4] == 0.2);
    CHECK(gd.weights()[0] == doctest::Approx(0.35).epsilon(1e-7));
}

// ---- errors ----------------------------------------------------------------------------------

TEST_CASE("gmm: bad inputs throw kattn::error naming the argument") {
    using kt::check_error;
    const mat mu{{0.0, 1.0}}, var{{1.0, 1.0}};
    check_error([&] { ks::gmm::diagonal({}, {}, {}); }, {"'weights'"});
    check_error([&] { ks::gmm::diagonal({-1.0}, mu, var); }, {"'weights'", "> 0"});
    check_error([&] { ks::gmm::diagonal({NAN}, mu, var); }, {"'weights'"});
    check_error([&] { ks::gmm::diagonal({1.0, 1.0}, mu, var); }, {"'means'", "2 mean vectors"});
    check_error([&] { ks::gmm::diagonal({1.0}, {{}}, {{}}); }, {"'means'", ">= 1"});
    check_error(
        [&] {
            ks::gmm::diagonal({1.0, 1.0}, {{0.0, 1.0}, {1.0}}, {{1.0, 1.0}, {1.0}});
        },
        {"'means'", "dimension 2"});
    check_error([&] { ks::gmm::diagonal({1.0}, {{0.0, INFINITY}}, var); }, {"'means'", "finite"});
    check_error([&] { ks::gmm::diagonal({1.0}, mu, {{1.0, 0.0}}); }, {"'covariances'", "> 0"});
    check_error([&] { ks::gmm::diagonal({1.0}, mu, {{1.0}}); }, {"'covariances'"});
    check_error([&] { ks::gmm::diagonal({1.0}, mu, {}); }, {"'covariances'"});
    check_error([&] { ks::gmm::full({1.0}, mu, {{1.0, 0.0, 0.5, -1.0}}); }, {"'cholesky'", "positive diagonal"});
    check_error([&] { ks::gmm::full({1.0}, mu, {{1.0, 0.2, 0.5, 1.0}}); }, {"'cholesky'", "lower-triangular"});
    check_error([&] { ks::gmm::full({1.0}, mu, {{1.0, 0.0, 1.0}}); }, {"'cholesky'", "4 entries"});
    check_error([&] { ks::gmm::full({1.0}, mu, {{1.0, 0.0, NAN, 1.0}}); }, {"'cholesky'", "finite"});
    check_error([&] { ks::gmm::full({1.0}, mu, {}); }, {"'cholesky'"});

    const auto g = ks::gmm::diagonal({1.0}, mu, var);
    std::vector<double> out(10);
    check_error([&] { g.sample(kattn::sampler_params{}, 3, 2, 0, out.data()); }, {"'dim'", "2", "got 3"});
    check_error([&] { g.sample(kattn::sampler_params{}, 2, 0, 0, out.data()); }, {"'num_features'"});
    check_error([&] { g.sample<double>(kattn::sampler_params{}, 2, 2, 0, nullptr); }, {"'out'"});
    const double x[4] = {0, 1, 2, 3};
    check_error([&] { (void)g.stationary_kernel(x, x, 3); }, {"'d'"});
    check_error([&] { (void)g.nonstationary_kernel(x, x, 2); }, {"'d'"});
    const double bad[2] = {0.0, NAN};
    check_error([&] { (void)g.log_prob(bad); }, {"'w'", "finite"});
    check_error([&] { (void)g.log_prob(nullptr); }, {"'w'"});
    auto nz = g.draw_noise(4, 1);
    nz.component[2] = 5;
    std::vector<double> gw(8, 1.0);
    check_error([&] { (void)g.sample_backward(nz, gw.data()); }, {"'draws'"});
    check_error([&] { (void)g.sample_backward(g.draw_noise(4, 1), nullptr); }, {"'grad_omega'"});

    // A symmetric full-covariance mixture above 16 dimensions samples, but its density and
    // kernels (2^D sign patterns) refuse.
    const auto big = ks::gmm::ngsm(9, 1, 0, {.rho = 0.3, .symmetric = true});
    std::vector<double> wbig(18 * 4, 0.0);  // 4 vectors of dimension 18
    CHECK_NOTHROW(big.sample(kattn::sampler_params{}, 18, 4, 0, wbig.data()));
    check_error([&] { (void)big.log_prob(wbig.data()); }, {"'symmetric'", "16"});
    check_error([&] { (void)big.expected_cos(wbig.data()); }, {"'symmetric'"});

    // NGSM factories.
    check_error([&] { ks::gmm::ngsm(0, 2, 0); }, {"'d'"});
    check_error([&] { ks::gmm::ngsm(2, 0, 0); }, {"'num_components'"});
    check_error([&] { ks::gmm::ngsm(2, 2, 0, {.rho = 1.0}); }, {"'rho'"});
    check_error([&] { ks::gmm::ngsm(2, 2, 0, {.variance = 0.0}); }, {"'variance'"});
    check_error([&] { ks::gmm::ngsm(2, 2, 0, {.mean_scale = -1.0}); }, {"'mean_scale'"});
    check_error([&] { ks::gmm::ngsm(std::vector<ks::ngsm_component>{}); }, {"'components'"});
    check_error([&] { ks::gmm::ngsm({{1.0, {0.0}, {0.0, 1.0}, {1.0}, {1.0}, 0.0}}); }, {"'means'"});
    check_error([&] { ks::gmm::ngsm({{1.0, {0.0}, {0.0}, {1.0}, {-1.0}, 0.5}}); }, {"'covariances'"});
    check_error([&] { ks::gmm::ngsm({{1.0, {0.0}, {0.0}, {1.0}, {1.0}, -1.5}}); }, {"'rho'"});
    check_error([&] { ks::gmm::ngsm({{0.0, {0.0}, {0.0}, {1.0}, {1.0}, 0.5}}); }, {"'weights'"});

    // Operators reject a mixture of the wrong dimension through the sampler.
    kattn::attention_config cfg{.head_dim = 3, .value_dim = 1, .num_features = 8, .seed = 1};
    check_error([&] { kattn::linear_attention<kf::trig, ks::gmm, kattn::backends::reference, double> op(cfg, g); },
                {"'dim'"});
}
