// Tests for kattn/samplers/realnvp.hpp (and the spectral_density concept): identity at
// initialisation, invertibility, log-determinant against a finite-difference Jacobian,
// every gradient against central differences, maximum-likelihood fit to a mixture,
// reverse-KL training, .npz files, determinism, and use as linear_attention's sampler.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numbers>
#include <string>
#include <vector>

#include <xtensor/xtensor.hpp>
#include <xtensor/xview.hpp>

#include <kattn/fwd.hpp>
#include <kattn/attention/linear_attention.hpp>
#include <kattn/backends/reference.hpp>
#include <kattn/concepts.hpp>
#include <kattn/core/random.hpp>
#include <kattn/features/nonstationary.hpp>
#include <kattn/samplers/density.hpp>
#include <kattn/samplers/gaussian.hpp>
#include <kattn/samplers/realnvp.hpp>
#if __has_include(<kattn/samplers/gmm.hpp>)
#include <kattn/samplers/gmm.hpp>
#define KATTN_TEST_HAVE_GMM 1
#endif

namespace {

using kattn::index_t;
using kattn::samplers::realnvp;
using kattn::samplers::realnvp_config;

template <class F>
std::string error_message(F f) {
    try {
        f();
    } catch (const kattn::error& e) {
        return e.what();
    }
    return "<no kattn::error thrown>";
}

/// Adds N(0, sd²) noise to every parameter (the zero-initialised last layers included).
void perturb(realnvp& f, double sd, std::uint64_t seed) {
    const kattn::random_stream rs(seed, kattn::streams::user + 21);
    auto p = f.parameters();
    for (std::size_t i = 0; i < p.size(); ++i) p[i] += sd * rs.normal(i);
}

xt::xtensor<double, 2> randn(std::size_t n, std::size_t D, std::uint64_t seed, double sd = 1.0) {
    xt::xtensor<double, 2> x = xt::xtensor<double, 2>::from_shape({n, D});
    const kattn::random_stream rs(seed, kattn::streams::user + 22);
    for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = sd * rs.normal(i);
    return x;
}

/// A diagonal Gaussian mixture over R^D written for the tests (a spectral_density).
struct diag_mixture {
    std::vector<double> w;                // K weights
    std::vector<std::vector<double>> mu;  // K × D
    std::vector<std::vector<double>> sd;  // K × D
    index_t dim() const { return index_t(mu[0].size()); }
    double component(std::size_t k, const double* x, double* g) const {
        double lp = std::log(w[k]);
        for (index_t i = 0; i < dim(); ++i) {
            const double r = (x[i] - mu[k][i]) / sd[k][i];
            lp += -0.5 * r * r - std::log(sd[k][i]) - 0.5 * std::log(2 * std::numbers::pi);
            if (g) g[i] = -r / sd[k][i];
        }
        return lp;
    }
    double log_prob(const double* x) const {
        double m = -INFINITY;
        std::vector<double> lp(w.size());
        for (std::size_t k = 0; k < w.size(); ++k) m = std::max(m, lp[k] = component(k, x, nullptr));
        double s = 0;
        for (double v : lp) s += std::exp(v - m);
        return m + std::log(s);
    }
    void log_prob_grad(const double* x, double* g) const {
        const double l = log_prob(x);
        std::vector<double> gk(static_cast<std::size_t>(dim()));
        std::fill(g, g + dim(), 0.0);
        for (std::size_t k = 0; k < w.size(); ++k) {
            const double r = std::exp(component(k, x, gk.data()) - l);
            for (index_t i = 0; i < dim(); ++i) g[i] += r * gk[i];
        }
    }
    xt::xtensor<double, 2> sample(std::size_t n, std::uint64_t seed) const {
        const auto D = std::size_t(dim());
        xt::xtensor<double, 2> x = xt::xtensor<double, 2>::from_shape({n, D});
        const kattn::random_stream u(seed, kattn::streams::user + 23), z(seed, kattn::streams::user + 24);
        for (std::size_t r = 0; r < n; ++r) {
            double c = u.uniform(r), acc = 0;
            std::size_t k = 0;
            while (k + 1 < w.size() && c >= (acc += w[k])) ++k;
            for (std::size_t i = 0; i < D; ++i) x(r, i) = mu[k][i] + sd[k][i] * z.normal(r * D + i);
        }
        return x;
    }
};

/// NGSM-like mixture for d = 2 (D = 4 = (ω₁, ω₂)): two components, unequal weights.
diag_mixture test_mixture() {
    return {{0.6, 0.4}, {{1.0, 0.5, -1.0, 0.5}, {-1.0, -0.5, 1.0, -0.5}}, {{0.5, 0.6, 0.5, 0.7}, {0.7, 0.5, 0.6, 0.5}}};
}

/// Largest |a − b| relative to max |b| (plus an absolute floor).
double max_rel(const std::vector<double>& a, const std::vector<double>& b, double floor = 1e-8) {
    double num = 0, den = floor;
    for (std::size_t i = 0; i < a.size(); ++i) {
        num = std::max(num, std::abs(a[i] - b[i]));
        den = std::max(den, std::abs(b[i]));
    }
    return num / den;
}

/// Central differences of f() with respect to every parameter of the flow.
template <class F>
std::vector<double> fd_params(realnvp& flow, F f, double h = 1e-6) {
    auto p = flow.parameters();
    std::vector<double> g(p.size());
    for (std::size_t i = 0; i < p.size(); ++i) {
        const double p0 = p[i];
        p[i] = p0 + h;
        const double fp = f();
        p[i] = p0 - h;
        const double fm = f();
        p[i] = p0;
        g[i] = (fp - fm) / (2 * h);
    }
    return g;
}

double det(std::vector<double> a, index_t n) {  // LU with partial pivoting
    double d = 1;
    for (index_t c = 0; c < n; ++c) {
        index_t piv = c;
        for (index_t r = c + 1; r < n; ++r)
            if (std::abs(a[r * n + c]) > std::abs(a[piv * n + c])) piv = r;
        if (piv != c) {
            for (index_t k = 0; k < n; ++k) std::swap(a[c * n + k], a[piv * n + k]);
            d = -d;
        }
        d *= a[c * n + c];
        for (index_t r = c + 1; r < n; ++r) {
            const double m = a[r * n + c] / a[c * n + c];
            for (index_t k = c; k < n; ++k) a[r * n + k] -= m * a[c * n + k];
        }
    }
    return d;
}

std::string temp_path(const std::string& name) {
    return (std::filesystem::temp_directory_path() / ("kattn_test_realnvp_" + name)).string();
}

}  // namespace

TEST_CASE("realnvp: concepts, traits, parameter count, masks") {
    static_assert(kattn::spectral_sampler<realnvp>);
    static_assert(kattn::spectral_density<realnvp>);
    static_assert(kattn::spectral_density<diag_mixture>);
    static_assert(!kattn::spectral_density<kattn::samplers::gaussian>);
    static_assert(realnvp::is_random);
    CHECK(std::string(realnvp::name) == "realnvp");
    const realnvp f({.dim = 6, .layers = 3});
    CHECK(f.hidden() == 12);  // default 2D
    CHECK(f.num_params() == 3 * 2 * (2 * 12 * 6 + 12 + 6));
    CHECK(f.grads().size() == f.parameters().size());
    for (index_t l = 0; l < 3; ++l)
        for (index_t j = 0; j < 6; ++j) CHECK(f.mask(l)[j] == ((j + l) % 2 == 0 ? 1 : 0));
}

TEST_CASE("realnvp: a fresh flow is the identity with log-determinant 0") {
    const realnvp f({.dim = 4, .layers = 3, .hidden = 6, .seed = 3});
    const auto z = randn(50, 4, 1);
    const auto w = f.forward(z);
    CHECK(w == z);
    CHECK(f.inverse(w) == z);
    const auto ld = f.log_det(z);
    for (double v : ld) CHECK(v == 0.0);
    const auto lp = f.log_prob(z);
    for (std::size_t i = 0; i < 50; ++i) {
        double q = 0;
        for (std::size_t j = 0; j < 4; ++j) q += z(i, j) * z(i, j);
        CHECK(lp(i) == doctest::Approx(-0.5 * q - 2 * std::log(2 * std::numbers::pi)).epsilon(1e-14));
    }
    // the first Linear is initialised (not zero), the last is zero
    int nonzero = 0;
    for (double p : f.parameters()) nonzero += p != 0.0;
    CHECK(nonzero == 3 * 2 * (6 * 4 + 6));
}

TEST_CASE("realnvp: inverse(forward(z)) = z after a random perturbation (double 1e-12, float 1e-5)") {
    for (double alpha : {0.0, 2.0}) {
        CAPTURE(alpha);
        realnvp f({.dim = 6, .layers = 4, .hidden = 8, .scale_bound = alpha, .seed = 11});
        perturb(f, 0.15, 5);
        const auto z = randn(200, 6, 2);
        const auto w = f.forward(z);
        CHECK(xt::amax(xt::abs(w - z))() > 0.1);  // the flow is far from the identity
        CHECK(xt::amax(xt::abs(f.inverse(w) - z))() < 1e-12);
        const xt::xtensor<float, 2> zf = xt::cast<float>(z);
        const auto wf = f.forward(zf);
        CHECK(xt::amax(xt::abs(xt::cast<double>(wf) - w))() < 1e-4);
        CHECK(xt::amax(xt::abs(f.inverse(wf) - zf))() < 1e-5);
        // log p_θ(F(z)) = log N(z) − log|det J(z)|
        const auto lp = f.log_prob(w);
        const auto ld = f.log_det(z);
        for (std::size_t i = 0; i < 200; ++i) {
            double q = 0;
            for (std::size_t j = 0; j < 6; ++j) q += z(i, j) * z(i, j);
            CHECK(lp(i) == doctest::Approx(-0.5 * q - 3 * std::log(2 * std::numbers::pi) - ld(i)).epsilon(1e-12));
        }
    }
}

TEST_CASE("realnvp: log|det J| matches the finite-difference Jacobian determinant (D = 4)") {
    for (double alpha : {0.0, 1.5}) {
        CAPTURE(alpha);
        realnvp f({.dim = 4, .layers = 3, .hidden = 8, .scale_bound = alpha, .seed = 2});
        perturb(f, 0.4, 9);
        const auto z = randn(5, 4, 3);
        const auto ld = f.log_det(z);
        for (std::size_t s = 0; s < 5; ++s) {
            std::vector<double> J(16);
            const double h = 1e-6;
            for (std::size_t c = 0; c < 4; ++c) {
                xt::xtensor<double, 2> zp = xt::view(z, xt::range(s, s + 1), xt::all()), zm = zp;
                zp(0, c) += h;
                zm(0, c) -= h;
                const auto wp = f.forward(zp), wm = f.forward(zm);
                for (std::size_t r = 0; r < 4; ++r) J[r * 4 + c] = (wp(0, r) - wm(0, r)) / (2 * h);
            }
            const double dJ = det(J, 4);
            CHECK(dJ > 0);  // affine couplings have positive Jacobian determinants
            CHECK(std::log(std::abs(dJ)) == doctest::Approx(ld(s)).epsilon(1e-7));
        }
        CHECK(xt::amax(xt::abs(ld))() > 0.1);
    }
}

TEST_CASE("realnvp: backward (∂L/∂ω, ∂L/∂logdet → ∂L/∂θ) matches central differences") {
    for (double alpha : {0.0, 2.0}) {
        CAPTURE(alpha);
        realnvp f({.dim = 4, .layers = 3, .hidden = 5, .scale_bound = alpha, .seed = 7});
        perturb(f, 0.3, 13);
        const auto z = randn(3, 4, 4);
        const auto c = randn(3, 4, 5);  // L = Σ c ⊙ F(z) + Σ e_i logdet_i
        const xt::xtensor<double, 1> e = {0.7, -0.3, 1.1};
        auto loss = [&] {
            const auto w = f.forward(z);
            const auto ld = f.log_det(z);
            double L = 0;
            for (std::size_t i = 0; i < w.size(); ++i) L += c.data()[i] * w.data()[i];
            for (std::size_t i = 0; i < 3; ++i) L += e(i) * ld(i);
            return L;
        };
        f.zero_grad();
        f.backward(z, c, e);
        const std::vector<double> g(f.grads().begin(), f.grads().end());
        const auto fd = fd_params(f, loss);
        CHECK(max_rel(g, fd) < 1e-6);
        // without d_logdet, and accumulation: two calls double the gradient
        f.zero_grad();
        f.backward(z, c);
        f.backward(z, c);
        auto loss_w = [&] {
            const auto w = f.forward(z);
            double L = 0;
            for (std::size_t i = 0; i < w.size(); ++i) L += 2 * c.data()[i] * w.data()[i];
            return L;
        };
        const std::vector<double> g2(f.grads().begin(), f.grads().end());
        CHECK(max_rel(g2, fd_params(f, loss_w)) < 1e-6);
    }
}

TEST_CASE("realnvp: maximum-likelihood gradient and ∇_ω log p match central differences") {
    for (double alpha : {0.0, 2.0}) {
        CAPTURE(alpha);
        realnvp f({.dim = 4, .layers = 3, .hidden = 5, .scale_bound = alpha, .seed = 8});
        perturb(f, 0.3, 17);
        const auto w = randn(4, 4, 6, 1.3);
        auto total = [&] { return xt::sum(f.log_prob(w))(); };
        f.zero_grad();
        const double lp = f.log_prob_backward(w, 0.5);
        CHECK(lp == doctest::Approx(total()).epsilon(1e-14));
        std::vector<double> g(f.grads().begin(), f.grads().end());
        for (double& v : g) v *= 2;  // scale 0.5
        CHECK(max_rel(g, fd_params(f, total)) < 1e-6);
        // ∇_ω log p_θ(ω) (the flow as a spectral_density)
        for (std::size_t s = 0; s < 4; ++s) {
            std::vector<double> x(w.data() + s * 4, w.data() + s * 4 + 4), gw(4), fd(4);
            CHECK(f.log_prob(x.data()) == doctest::Approx(f.log_prob(w)(s)).epsilon(1e-14));
            f.log_prob_grad(x.data(), gw.data());
            for (std::size_t i = 0; i < 4; ++i) {
                auto xp = x, xm = x;
                xp[i] += 1e-6;
                xm[i] -= 1e-6;
                fd[i] = (f.log_prob(xp.data()) - f.log_prob(xm.data())) / 2e-6;
            }
            CHECK(max_rel(gw, fd) < 1e-6);
        }
    }
}

TEST_CASE("realnvp: reverse-KL gradient (fixed noise) matches central differences") {
    const diag_mixture prior = test_mixture();
    for (double alpha : {0.0, 2.0}) {
        CAPTURE(alpha);
        realnvp f({.dim = 4, .layers = 3, .hidden = 5, .scale_bound = alpha, .seed = 9});
        perturb(f, 0.3, 19);
        auto kl = [&] { return f.kl_to(prior, 16, 77); };
        f.zero_grad();
        const double est = f.kl_backward(prior, 16, 77, 1.0);
        CHECK(est == doctest::Approx(kl()).epsilon(1e-14));
        const std::vector<double> g(f.grads().begin(), f.grads().end());
        CHECK(max_rel(g, fd_params(f, kl)) < 1e-6);
    }
    // a flow as the prior: KL(p ‖ p) = 0 exactly for the same flow
    realnvp f({.dim = 4, .layers = 2, .seed = 1});
    perturb(f, 0.3, 3);
    CHECK(std::abs(f.kl_to(f, 64, 5)) < 1e-12);
}

TEST_CASE("realnvp: maximum likelihood on a 2-component mixture (D = 4) reaches the true NLL within 0.1 nats" *
          doctest::test_suite("scale")) {
    const diag_mixture target = test_mixture();
    const auto train = target.sample(8000, 1);
    const auto held = target.sample(4000, 2);
    double true_nll = 0;
    for (std::size_t i = 0; i < 4000; ++i) true_nll -= target.log_prob(held.data() + i * 4);
    true_nll /= 4000;
    realnvp f({.dim = 4, .layers = 4, .hidden = 8, .scale_bound = 2.0, .seed = 4});
    const double nll0 = -xt::mean(f.log_prob(held))();
    const auto hist = f.fit(train, 200, 256, kattn::optim::adam_config{.lr = 5e-3}, 3);
    const double nll = -xt::mean(f.log_prob(held))();
    INFO("true NLL ", true_nll, ", flow held-out NLL ", nll0, " -> ", nll, ", train NLL ", hist.front(), " -> ",
         hist.back());
    CHECK(hist.size() == 200);
    CHECK(hist.back() < hist.front());
    CHECK(nll < true_nll + 0.1);
    CHECK(nll > true_nll - 0.1);  // held-out: cannot beat the true density by much
}

TEST_CASE("realnvp: reverse-KL training towards a mixture prior lowers the KL estimate") {
    const diag_mixture prior = test_mixture();
    realnvp f({.dim = 4, .layers = 4, .hidden = 8, .scale_bound = 2.0, .seed = 6});
    const auto hist = f.train_kl(prior, 300, 128, 1e-2, 100);
    CHECK(hist.size() == 300);
    double first = 0, last = 0;
    for (int i = 0; i < 20; ++i) first += hist[i] / 20, last += hist[280 + i] / 20;
    INFO("KL first window ", first, ", last window ", last);
    CHECK(last < 0.5 * first);
    const realnvp untrained({.dim = 4, .layers = 4, .hidden = 8, .scale_bound = 2.0, .seed = 6});
    CHECK(f.kl_to(prior, 4096, 999) < 0.5 * untrained.kl_to(prior, 4096, 999));
    // grads are left zeroed
    for (double g : f.grads()) CHECK(g == 0.0);
}

TEST_CASE("realnvp: sampling is deterministic, reparameterised, float = cast of double") {
    realnvp f({.dim = 6, .layers = 3, .seed = 1});
    perturb(f, 0.3, 2);
    const kattn::sampler_params sp{};
    std::vector<double> a(6 * 10), b(6 * 10), c(6 * 10);
    std::vector<float> af(6 * 10);
    f.sample(sp, 6, 10, 42, a.data());
    f.sample(sp, 6, 10, 42, b.data());
    f.sample(sp, 6, 10, 43, c.data());
    f.sample(sp, 6, 10, 42, af.data());
    CHECK(a == b);
    CHECK(a != c);
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(af[i] == float(a[i]));
    const auto w = f.forward(f.noise(10, 42));
    CHECK(std::equal(a.begin(), a.end(), w.data()));
    // a copy samples identically; a different init seed does not
    const realnvp g = f;
    g.sample(sp, 6, 10, 42, b.data());
    CHECK(a == b);
}

TEST_CASE("realnvp: an identity flow reproduces samplers::gaussian's Omega exactly in linear_attention") {
    using kattn::backends::reference;
    using kattn::features::nonstationary;
    const kattn::attention_config cfg{.head_dim = 3, .value_dim = 2, .num_features = 8, .seed = 5};
    realnvp flow({.dim = 6, .layers = 3, .seed = 1});
    kattn::linear_attention<nonstationary, realnvp, reference, double> a_flow(cfg, flow);
    kattn::linear_attention<nonstationary, kattn::samplers::gaussian, reference, double> a_gauss(cfg);
    CHECK(a_flow.omega() == a_gauss.omega());
    std::vector<double> g(6 * 4);
    kattn::samplers::gaussian::sample(kattn::sampler_params{}, 6, 4, 5, g.data());
    std::vector<double> w(6 * 4);
    flow.sample(kattn::sampler_params{}, 6, 4, 5, w.data());
    CHECK(g == w);

    // a trained (perturbed) flow: Ω columns are the flow's pairs (ω₁ in [0, m), ω₂ in [m, 2m))
    perturb(flow, 0.3, 8);
    kattn::linear_attention<nonstationary, realnvp, reference, double> attn(cfg, flow);
    flow.sample(kattn::sampler_params{}, 6, 4, 5, w.data());
    for (index_t k = 0; k < 4; ++k)
        for (index_t i = 0; i < 3; ++i) {
            CHECK(attn.omega()(i, k) == w[k * 6 + i]);
            CHECK(attn.omega()(i, 4 + k) == w[k * 6 + 3 + i]);
        }
    CHECK(attn.omega() != a_gauss.omega());

    // chain rule: attention loss → ∂L/∂Ω → flow.backward → ∂L/∂θ, against central differences
    xt::xtensor<double, 2> q = randn(5, 3, 30), k = randn(5, 3, 31), v = randn(5, 2, 32), dout = randn(5, 2, 33);
    auto loss = [&] {
        kattn::linear_attention<nonstationary, realnvp, reference, double> at(cfg, flow);
        return xt::sum(at(q, k, v) * dout)();
    };
    kattn::linear_attention<nonstationary, realnvp, reference, double> at(cfg, flow);
    const auto grads = at.backward(q, k, v, dout);
    xt::xtensor<double, 2> d_omega = xt::zeros<double>({4, 6});  // [count, D] layout of sample()
    for (index_t kk = 0; kk < 4; ++kk)
        for (index_t i = 0; i < 3; ++i) {
            d_omega(kk, i) = grads.d_omega(i, kk);
            d_omega(kk, 3 + i) = grads.d_omega(i, 4 + kk);
        }
    flow.zero_grad();
    flow.backward(flow.noise(4, cfg.seed), d_omega);
    const std::vector<double> gth(flow.grads().begin(), flow.grads().end());
    CHECK(max_rel(gth, fd_params(flow, loss)) < 1e-5);
}

TEST_CASE("realnvp: save/load round-trips exactly; bad files throw kattn::error naming the path") {
    realnvp f({.dim = 4, .layers = 3, .hidden = 7, .scale_bound = 1.5, .seed = 3});
    perturb(f, 0.3, 4);
    const std::string path = temp_path("ok.npz");
    f.save(path);
    const realnvp g = realnvp::load(path);
    CHECK(g.dim() == 4);
    CHECK(g.layers() == 3);
    CHECK(g.hidden() == 7);
    CHECK(g.scale_bound() == 1.5);
    CHECK(std::equal(f.parameters().begin(), f.parameters().end(), g.parameters().begin(), g.parameters().end()));
    const auto z = randn(20, 4, 1);
    CHECK(f.forward(z) == g.forward(z));
    // saving is deterministic (fixed timestamps)
    const std::string path2 = temp_path("ok2.npz");
    g.save(path2);
    auto slurp = [](const std::string& p) {
        std::ifstream is(p, std::ios::binary);
        return std::string(std::istreambuf_iterator<char>(is), std::istreambuf_iterator<char>());
    };
    CHECK(slurp(path) == slurp(path2));

    const std::string missing = temp_path("does_not_exist.npz");
    std::remove(missing.c_str());
    auto expect = [](const std::string& msg, std::initializer_list<std::string> parts) {
        INFO(msg);
        for (const auto& p : parts) CHECK(msg.find(p) != std::string::npos);
    };
    expect(error_message([&] { (void)realnvp::load(missing); }), {missing, "cannot open"});

    const std::string garbage = temp_path("garbage.npz");
    std::ofstream(garbage, std::ios::binary) << "this is not a zip archive at all, just text";
    expect(error_message([&] { (void)realnvp::load(garbage); }), {garbage, "zip"});

    // a valid archive lacking a layer's arrays
    const std::string partial = temp_path("partial.npz");
    kattn::detail::write_npz(partial, {{"config", {4}, {4, 3, 7, 1.5}}});
    expect(error_message([&] { (void)realnvp::load(partial); }), {partial, "layer0_s_w1", "missing"});

    // a wrong shape: rewrite the good file's arrays with one transposed
    {
        std::vector<kattn::detail::npz_array> arrays{{"config", {4}, {4, 3, 7, 1.5}}};
        const kattn::detail::npz_reader in(path);
        for (int l = 0; l < 3; ++l)
            for (const char* net : {"s", "t"})
                for (const char* part : {"w1", "b1", "w2", "b2"}) {
                    const std::string name = "layer" + std::to_string(l) + "_" + net + "_" + part;
                    std::vector<std::size_t> shape;
                    if (part == std::string("w1"))
                        shape = {7, 4};
                    else if (part == std::string("b1"))
                        shape = {7};
                    else if (part == std::string("w2"))
                        shape = {4, 7};
                    else
                        shape = {4};
                    auto data = in.array(name, shape);
                    if (l == 1 && net == std::string("t") && part == std::string("w2")) shape = {7, 4};
                    arrays.push_back({name, shape, data});
                }
        const std::string wrong = temp_path("wrong_shape.npz");
        kattn::detail::write_npz(wrong, arrays);
        expect(error_message([&] { (void)realnvp::load(wrong); }), {wrong, "layer1_t_w2", "[4, 7]", "[7, 4]"});
        std::remove(wrong.c_str());
    }
    // a bad config
    const std::string badcfg = temp_path("badcfg.npz");
    kattn::detail::write_npz(badcfg, {{"config", {4}, {4.5, 3, 7, 0}}});
    expect(error_message([&] { (void)realnvp::load(badcfg); }), {badcfg, "dim"});
    kattn::detail::write_npz(badcfg, {{"config", {3}, {4, 3, 7}}});
    expect(error_message([&] { (void)realnvp::load(badcfg); }), {badcfg, "config", "[4]", "[3]"});
    // unwritable path
    expect(error_message([&] { f.save("/nonexistent_dir_kattn/x.npz"); }), {"/nonexistent_dir_kattn/x.npz"});
    for (const auto& p : {path, path2, garbage, partial, badcfg}) std::remove(p.c_str());
}

TEST_CASE("realnvp: argument errors name the argument") {
    CHECK(error_message([] { realnvp({.dim = 0}); }).find("'dim'") != std::string::npos);
    CHECK(error_message([] { realnvp({.dim = 2, .layers = 0}); }).find("'layers'") != std::string::npos);
    CHECK(error_message([] { realnvp({.dim = 2, .hidden = -1}); }).find("'hidden'") != std::string::npos);
    CHECK(error_message([] { realnvp({.dim = 2, .scale_bound = -1}); }).find("'scale_bound'") != std::string::npos);
    realnvp f({.dim = 4});
    std::vector<double> out(12);
    const std::string m = error_message([&] { f.sample(kattn::sampler_params{}, 3, 4, 0, out.data()); });
    CHECK(m.find("'dim'") != std::string::npos);
    CHECK(m.find("4") != std::string::npos);
    CHECK(error_message([&] { (void)f.forward(randn(3, 5, 1)); }).find("'z'") != std::string::npos);
    CHECK(error_message([&] { (void)f.log_prob(randn(3, 3, 1)); }).find("'omega'") != std::string::npos);
    auto bad = randn(3, 4, 1);
    bad(1, 2) = NAN;
    CHECK(error_message([&] { (void)f.inverse(bad); }).find("'omega'") != std::string::npos);
    CHECK(error_message([&] { f.backward(randn(3, 4, 1), randn(2, 4, 1)); }).find("'d_omega'") != std::string::npos);
    CHECK(error_message([&] { (void)f.fit(randn(10, 4, 1), 0, 4, 1e-3, 0); }).find("'epochs'") != std::string::npos);
    const diag_mixture wrong_dim{{1.0}, {{0.0, 0.0}}, {{1.0, 1.0}}};
    CHECK(error_message([&] { (void)f.kl_to(wrong_dim, 8, 0); }).find("'prior'") != std::string::npos);
}

#ifdef KATTN_TEST_HAVE_GMM
TEST_CASE("realnvp: KL regulariser towards the NGSM prior (samplers::gmm)") {
    static_assert(kattn::spectral_density<kattn::samplers::gmm>);
    const auto prior = kattn::samplers::gmm::ngsm(2, 3, 7);  // d = 2: D = 4, Q = 3
    realnvp f({.dim = 4, .layers = 3, .hidden = 5, .scale_bound = 2.0, .seed = 9});
    perturb(f, 0.3, 19);
    auto kl = [&] { return f.kl_to(prior, 16, 77); };
    f.zero_grad();
    (void)f.kl_backward(prior, 16, 77);
    const std::vector<double> g(f.grads().begin(), f.grads().end());
    CHECK(max_rel(g, fd_params(f, kl)) < 1e-6);
    const auto hist = f.train_kl(prior, 200, 128, 1e-2, 1);
    double first = 0, last = 0;
    for (int i = 0; i < 20; ++i) first += hist[i] / 20, last += hist[180 + i] / 20;
    INFO("NGSM KL first window ", first, ", last window ", last);
    CHECK(last < first);
}
#endif
