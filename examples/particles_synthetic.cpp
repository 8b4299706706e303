// The Coulomb particle paper's synthetic study (its appendix F.1), with kattn's Langevin
// particle sampler. docs/particles_synthetic.md describes the protocol and the results;
// scripts/plot_particles.py turns the CSV into docs/img/particles_synthetic.png.
//
// Data. x ∈ R^p, p = 5 by default, x ~ N(0, I_p);
//   ℓ(x) = 1.5 sin(πx₁) + 0.8x₂² − x₃x₄ + 0.5 sin(3x₅) + [p > 5] x_{6:p}ᵀw,  w ~ N(0, I/(p−5)),
// labels y = sign(ℓ(x) − median ℓ) ∈ {±1} (balanced). The clean inputs, labels, w and the
// train/test split are fixed by --data-seed (the paper's global seed 42); each job (σ, trial)
// adds Gaussian input noise x̃ = x + σε to train and test inputs and draws its own features.
//
// Methods (all with the same classifier, below):
//   rff         fixed random Fourier features: the trig map φ(x) = m^{-1/2}[cos Ωᵀx; sin Ωᵀx]
//               with m = D/2 frequencies ω ~ N(0, 2γ I) (σ_k = (2γ)^{-1/2}), D features;
//   langevin    the same initial frequencies moved by samplers::langevin<trig> on the
//   λ = 0, 0.5  alignment energy of the noisy training set (simplex / ±1 label coding, log
//               repulsion with strength λ), then frozen;
//   rbf         the exact Gaussian kernel exp(−γ‖x − x'‖²), the D → ∞ limit of rff.
// Classifier: ridge regression on ±1 targets, ŷ = sign(f(x)), no intercept:
//   features  w = (ΦᵀΦ + αI)⁻¹Φᵀy, f(x) = φ(x)ᵀw        (D × D solve)
//   kernel    c = (K + αI)⁻¹y,     f(x) = Σ_i c_i k(x_i, x)  (n × n solve)
// the same estimator (kernel ridge with K ≈ ΦΦᵀ), so rff → rbf as D → ∞ and the methods
// differ only in the kernel.
//
//   particles_synthetic [--quick] [--csv FILE] [--json FILE] [options]   (--help lists them)
#include <kattn/kattn.hpp>
#include <kattn/samplers/langevin.hpp>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numbers>
#include <string>
#include <vector>

namespace kf = kattn::features;
namespace ks = kattn::samplers;
using kattn::index_t;
using mat = xt::xtensor<double, 2>;

namespace {

struct settings {
    index_t p = 5, n_train = 1000, n_test = 1000, features = 200, seeds = 10, steps = 1000;
    double noise_min = 0.01, noise_max = 1.0, gamma = 0.5, alpha = 1.0;
    int noise_points = 5;
    double eta = 0.05, beta = 100.0, lambda = 0.5, radius = 5.0, clip = 1.0, softening = 1e-3;
    index_t window = 100;
    double tolerance = 1e-4;
    std::uint64_t data_seed = 42;
    bool quick = false;
    std::string csv = "particles_synthetic.csv", json;
};

/// The fixed clean data set: inputs [n, p] and ±1 labels.
struct dataset {
    mat x;
    std::vector<int> y;  // ±1
};

dataset make_data(const settings& s) {
    const index_t n = s.n_train + s.n_test, p = s.p;
    const kattn::random_stream rs(s.data_seed, kattn::streams::data);
    dataset d;
    d.x = mat::from_shape({std::size_t(n), std::size_t(p)});
    for (index_t i = 0; i < n * p; ++i) d.x.data()[i] = rs.normal(std::uint64_t(i));
    std::vector<double> w(std::max<index_t>(p - 5, 0));
    for (std::size_t j = 0; j < w.size(); ++j)
        w[j] = rs.normal(std::uint64_t(n * p + index_t(j))) / std::sqrt(double(p - 5));
    std::vector<double> l(n);
    for (index_t i = 0; i < n; ++i) {
        const auto x = [&](index_t j) { return d.x(i, j - 1); };
        double v = 1.5 * std::sin(std::numbers::pi * x(1)) + 0.8 * x(2) * x(2) - x(3) * x(4) + 0.5 * std::sin(3 * x(5));
        for (index_t j = 5; j < p; ++j) v += d.x(i, j) * w[j - 5];
        l[i] = v;
    }
    std::vector<double> sorted = l;
    std::nth_element(sorted.begin(), sorted.begin() + n / 2, sorted.end());
    double med = sorted[n / 2];
    if (n % 2 == 0) med = 0.5 * (med + *std::max_element(sorted.begin(), sorted.begin() + n / 2));
    d.y.resize(n);
    for (index_t i = 0; i < n; ++i) d.y[i] = l[i] > med ? 1 : -1;
    return d;
}

/// Solves (A + αI) X = B in place for symmetric positive semi-definite A (n × n), B (n × k).
void ridge_solve(std::vector<double> A, index_t n, double alpha, std::vector<double>& B, index_t k) {
    for (index_t i = 0; i < n; ++i) A[i * n + i] += alpha;
    for (index_t j = 0; j < n; ++j) {  // Cholesky, lower triangle
        double s = A[j * n + j];
        for (index_t q = 0; q < j; ++q) s -= A[j * n + q] * A[j * n + q];
        const double ljj = std::sqrt(std::max(s, 1e-300));
        A[j * n + j] = ljj;
        for (index_t i = j + 1; i < n; ++i) {
            double t = A[i * n + j];
            for (index_t q = 0; q < j; ++q) t -= A[i * n + q] * A[j * n + q];
            A[i * n + j] = t / ljj;
        }
    }
    for (index_t c = 0; c < k; ++c) {
        for (index_t i = 0; i < n; ++i) {  // L z = b
            double t = B[i * k + c];
            for (index_t q = 0; q < i; ++q) t -= A[i * n + q] * B[q * k + c];
            B[i * k + c] = t / A[i * n + i];
        }
        for (index_t i = n - 1; i >= 0; --i) {  // Lᵀ x = z
            double t = B[i * k + c];
            for (index_t q = i + 1; q < n; ++q) t -= A[q * n + i] * B[q * k + c];
            B[i * k + c] = t / A[i * n + i];
        }
    }
}

struct scores {
    double accuracy = 0, f1 = 0;
};

scores score(const std::vector<double>& f, const std::vector<int>& y) {
    double tp = 0, fp = 0, fn = 0, ok = 0;
    for (std::size_t i = 0; i < f.size(); ++i) {
        const int pred = f[i] > 0 ? 1 : -1;
        ok += pred == y[i];
        tp += pred == 1 && y[i] == 1;
        fp += pred == 1 && y[i] == -1;
        fn += pred == -1 && y[i] == 1;
    }
    const double den = 2 * tp + fp + fn;  // F1 of the positive class, zero_division = 0
    return {ok / double(f.size()), den > 0 ? 2 * tp / den : 0.0};
}

/// Ridge regression on features: train rows [0, ntr), test rows after; returns test scores.
std::vector<double> ridge_features(const mat& phi_tr, const std::vector<int>& ytr, const mat& phi_te, double alpha) {
    const index_t n = phi_tr.shape()[0], F = phi_tr.shape()[1];
    std::vector<double> G(F * F, 0.0), w(F, 0.0);
    for (index_t i = 0; i < n; ++i)
        for (index_t a = 0; a < F; ++a) {
            const double fa = phi_tr(i, a);
            w[a] += fa * ytr[i];
            for (index_t b = 0; b <= a; ++b) G[a * F + b] += fa * phi_tr(i, b);
        }
    for (index_t a = 0; a < F; ++a)
        for (index_t b = 0; b < a; ++b) G[b * F + a] = G[a * F + b];
    ridge_solve(std::move(G), F, alpha, w, 1);
    std::vector<double> f(phi_te.shape()[0], 0.0);
    for (std::size_t i = 0; i < f.size(); ++i)
        for (index_t a = 0; a < F; ++a) f[i] += phi_te(i, a) * w[a];
    return f;
}

std::vector<double> ridge_kernel(const mat& xtr, const std::vector<int>& ytr, const mat& xte, double gamma,
                                 double alpha) {
    const index_t n = xtr.shape()[0], p = xtr.shape()[1], m = xte.shape()[0];
    auto k = [&](const mat& a, index_t i, const mat& b, index_t j) {
        double r2 = 0;
        for (index_t c = 0; c < p; ++c) r2 += (a(i, c) - b(j, c)) * (a(i, c) - b(j, c));
        return std::exp(-gamma * r2);
    };
    std::vector<double> K(n * n), c(ytr.begin(), ytr.end());
    for (index_t i = 0; i < n; ++i)
        for (index_t j = 0; j <= i; ++j) K[i * n + j] = K[j * n + i] = k(xtr, i, xtr, j);
    ridge_solve(std::move(K), n, alpha, c, 1);
    std::vector<double> f(m, 0.0);
    for (index_t i = 0; i < m; ++i)
        for (index_t j = 0; j < n; ++j) f[i] += c[j] * k(xte, i, xtr, j);
    return f;
}

const char* method_names[] = {"rff", "langevin_lambda0", "langevin_lambda0.5", "rbf_exact"};
constexpr int n_methods = 4;

struct result {
    int method;
    double sigma;
    index_t seed;
    scores sc;
    double kta = NAN, seconds = 0, omega_norm = NAN;  // mean ‖ω_k‖ of the final frequencies
    index_t steps = 0;
    bool converged = false;
};

double mean_norm(const mat& w) {
    double s = 0;
    for (std::size_t k = 0; k < w.shape()[0]; ++k) {
        double n2 = 0;
        for (std::size_t i = 0; i < w.shape()[1]; ++i) n2 += w(k, i) * w(k, i);
        s += std::sqrt(n2);
    }
    return s / double(w.shape()[0]);
}

using trig_lv = ks::langevin<kf::trig, kattn::backends::simd>;
template <class Sampler>
using trig_attn = kattn::linear_attention<kf::trig, Sampler, kattn::backends::reference, double>;

kattn::attention_config<> feature_config(const settings& s, std::uint64_t seed) {
    kattn::attention_config<> cfg;
    cfg.head_dim = s.p;
    cfg.value_dim = 1;
    cfg.num_features = s.features / 2;  // trig: D = 2m features from m frequencies
    cfg.seed = seed;
    cfg.sigma = 1.0 / std::sqrt(2.0 * s.gamma);
    return cfg;
}

/// One (σ, trial) job: every method on the same noisy data.
std::vector<result> run_job(const settings& s, const dataset& data, int sigma_index, double sigma, index_t trial) {
    const index_t n = s.n_train + s.n_test, p = s.p;
    const std::uint64_t job_seed = 1000003ull * std::uint64_t(sigma_index + 1) + std::uint64_t(trial);
    const kattn::random_stream noise(job_seed, kattn::streams::user + 1);
    mat xtr = mat::from_shape({std::size_t(s.n_train), std::size_t(p)});
    mat xte = mat::from_shape({std::size_t(s.n_test), std::size_t(p)});
    for (index_t i = 0; i < n; ++i)
        for (index_t j = 0; j < p; ++j) {
            const double v = data.x(i, j) + sigma * noise.normal(std::uint64_t(i * p + j));
            (i < s.n_train ? xtr(i, j) : xte(i - s.n_train, j)) = v;
        }
    std::vector<int> ytr(data.y.begin(), data.y.begin() + s.n_train), yte(data.y.begin() + s.n_train, data.y.end());
    std::vector<int> cls(s.n_train);
    for (index_t i = 0; i < s.n_train; ++i) cls[i] = ytr[i] > 0 ? 1 : 0;

    std::vector<result> out;
    const auto clock = [] { return std::chrono::steady_clock::now(); };
    const auto secs = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
    const kattn::attention_config cfg = feature_config(s, job_seed);
    const index_t m = cfg.num_features;

    {  // (a) fixed random Fourier features
        const auto t0 = clock();
        trig_attn<ks::gaussian> attn(cfg);
        const auto f = ridge_features(attn.features(xtr), ytr, attn.features(xte), s.alpha);
        result r{0, sigma, trial, score(f, yte)};
        r.seconds = secs(t0, clock());
        trig_lv probe(p, m, {}, job_seed, kattn::sampler_params{cfg.sigma});
        probe.set_data(xtr, cls);
        r.kta = probe.kta();  // same frequencies as attn
        r.omega_norm = mean_norm(probe.particles());
        out.push_back(r);
    }
    for (int variant = 0; variant < 2; ++variant) {  // (b), (c) Langevin particles
        const auto t0 = clock();
        ks::langevin_options o;
        o.step_size = s.eta;
        o.beta = s.beta;
        o.lambda = variant == 0 ? 0.0 : s.lambda;
        o.potential = ks::repulsion::log;
        o.softening = s.softening;
        o.radius = s.radius;
        o.gradient_clip = s.clip;
        o.labels = ks::label_coding::simplex;
        o.max_steps = s.steps;
        o.window = s.window;
        o.tolerance = s.tolerance;
        o.kta_interval = 0;
        trig_lv lv(p, m, o, job_seed, kattn::sampler_params{cfg.sigma});
        lv.set_data(xtr, cls);
        const auto h = lv.run();
        trig_attn<trig_lv> attn(cfg, lv);
        const auto f = ridge_features(attn.features(xtr), ytr, attn.features(xte), s.alpha);
        result r{1 + variant, sigma, trial, score(f, yte)};
        r.seconds = secs(t0, clock());
        r.kta = lv.kta();
        r.omega_norm = mean_norm(lv.particles());
        r.steps = h.steps();
        r.converged = h.converged;
        out.push_back(r);
    }
    {  // (d) exact RBF kernel ridge
        const auto t0 = clock();
        const auto f = ridge_kernel(xtr, ytr, xte, s.gamma, s.alpha);
        result r{3, sigma, trial, score(f, yte)};
        r.seconds = secs(t0, clock());
        out.push_back(r);
    }
    return out;
}

double mean(const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return v.empty() ? NAN : s / double(v.size());
}
double sd(const std::vector<double>& v) {
    if (v.size() < 2) return 0;
    const double m = mean(v);
    double s = 0;
    for (double x : v) s += (x - m) * (x - m);
    return std::sqrt(s / double(v.size() - 1));
}

}  // namespace

int main(int argc, char** argv) {
    settings s;
    CLI::App app{"Coulomb particle paper, synthetic study (F.1): fixed RFF vs Langevin particles vs exact RBF"};
    app.add_flag("--quick", s.quick, "2 seeds, 3 noise levels, 300 Langevin steps");
    app.add_option("--p", s.p, "input dimension (>= 5)")->check(CLI::Range(5, 1000));
    app.add_option("--n-train", s.n_train, "training points")->check(CLI::Range(10, 100000));
    app.add_option("--n-test", s.n_test, "test points")->check(CLI::Range(10, 100000));
    app.add_option("--features", s.features, "feature budget D (even; m = D/2 frequencies)")
        ->check(CLI::Range(2, 100000));
    app.add_option("--seeds", s.seeds, "trials per noise level")->check(CLI::Range(1, 1000));
    app.add_option("--noise-min", s.noise_min, "smallest input-noise sd")->check(CLI::PositiveNumber);
    app.add_option("--noise-max", s.noise_max, "largest input-noise sd")->check(CLI::PositiveNumber);
    app.add_option("--noise-points", s.noise_points, "noise levels (log grid)")->check(CLI::Range(1, 100));
    app.add_option("--gamma", s.gamma, "RBF gamma of rbf and the initial frequencies (omega ~ N(0, 2 gamma I))");
    app.add_option("--alpha", s.alpha, "ridge regulariser of every classifier")->check(CLI::PositiveNumber);
    app.add_option("--steps", s.steps, "Langevin iteration cap")->check(CLI::Range(1, 1000000));
    app.add_option("--eta", s.eta, "Langevin step size")->check(CLI::PositiveNumber);
    app.add_option("--beta", s.beta, "inverse temperature")->check(CLI::PositiveNumber);
    app.add_option("--lambda", s.lambda, "repulsion strength of the second Langevin variant");
    app.add_option("--radius", s.radius, "particle norm bound R")->check(CLI::PositiveNumber);
    app.add_option("--clip", s.clip, "per-particle gradient clip")->check(CLI::PositiveNumber);
    app.add_option("--window", s.window, "stopping-rule window")->check(CLI::Range(1, 1000000));
    app.add_option("--tolerance", s.tolerance, "stopping-rule relative tolerance");
    app.add_option("--data-seed", s.data_seed, "seed of the clean data, labels and split");
    app.add_option("--csv", s.csv, "per-run results (CSV)");
    app.add_option("--json", s.json, "summary (JSON; optional)");
    CLI11_PARSE(app, argc, argv);
    if (s.features % 2 != 0) {
        std::fprintf(stderr, "--features must be even (trig: D = 2m)\n");
        return 2;
    }
    if (s.quick) {
        s.seeds = std::min<index_t>(s.seeds, 2);
        s.noise_points = std::min(s.noise_points, 3);
        s.steps = std::min<index_t>(s.steps, 300);
    }

    std::vector<double> sigmas(s.noise_points);
    for (int i = 0; i < s.noise_points; ++i)
        sigmas[i] = s.noise_points == 1
                        ? s.noise_min
                        : s.noise_min * std::pow(s.noise_max / s.noise_min, double(i) / (s.noise_points - 1));
    const dataset data = make_data(s);
    std::printf("synthetic F.1: p = %ld, n_train = %ld, n_test = %ld, D = %ld (m = %ld frequencies), %ld seeds\n",
                long(s.p), long(s.n_train), long(s.n_test), long(s.features), long(s.features / 2), long(s.seeds));
    std::printf(
        "langevin: eta = %g, beta = %g, lambda in {0, %g}, log repulsion eps = %g, R = %g, clip = %g, "
        "cap %ld steps, window %ld, tol %g; ridge alpha = %g, gamma = %g\n",
        s.eta, s.beta, s.lambda, s.softening, s.radius, s.clip, long(s.steps), long(s.window), s.tolerance, s.alpha,
        s.gamma);

    const index_t jobs = index_t(sigmas.size()) * s.seeds;
    std::vector<std::vector<result>> res(jobs);
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel for schedule(dynamic, 1)
    for (index_t j = 0; j < jobs; ++j) {
        const int si = int(j / s.seeds);
        res[j] = run_job(s, data, si, sigmas[si], j % s.seeds);
    }
    const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    std::ofstream csv(s.csv);
    csv << "method,sigma,seed,accuracy,f1,kta_train,mean_omega_norm,langevin_steps,converged,seconds\n";
    for (const auto& job : res)
        for (const auto& r : job)
            csv << method_names[r.method] << ',' << r.sigma << ',' << r.seed << ',' << r.sc.accuracy << ',' << r.sc.f1
                << ',' << r.kta << ',' << r.omega_norm << ',' << r.steps << ',' << int(r.converged) << ',' << r.seconds
                << '\n';

    nlohmann::json summary;
    std::printf("\n%-8s %-20s %-17s %-17s %-8s %-7s %-9s %s\n", "sigma", "method", "accuracy", "F1", "KTA", "|w|",
                "steps", "conv");
    for (std::size_t si = 0; si < sigmas.size(); ++si) {
        for (int mth = 0; mth < n_methods; ++mth) {
            std::vector<double> acc, f1, kta, steps, wn;
            double conv = 0;
            for (index_t t = 0; t < s.seeds; ++t)
                for (const auto& r : res[si * s.seeds + t])
                    if (r.method == mth) {
                        acc.push_back(r.sc.accuracy);
                        f1.push_back(r.sc.f1);
                        kta.push_back(r.kta);
                        wn.push_back(r.omega_norm);
                        steps.push_back(double(r.steps));
                        conv += r.converged;
                    }
            char ktxt[32] = "-", stxt[32] = "-", ctxt[32] = "-", wtxt[32] = "-";
            if (mth < 3) {
                std::snprintf(ktxt, sizeof ktxt, "%.3f", mean(kta));
                std::snprintf(wtxt, sizeof wtxt, "%.2f", mean(wn));
            }
            if (mth == 1 || mth == 2) {
                std::snprintf(stxt, sizeof stxt, "%.0f", mean(steps));
                std::snprintf(ctxt, sizeof ctxt, "%.0f/%ld", conv, long(s.seeds));
            }
            std::printf("%-8.3g %-20s %.4f ± %.4f   %.4f ± %.4f   %-8s %-7s %-9s %s\n", sigmas[si], method_names[mth],
                        mean(acc), sd(acc), mean(f1), sd(f1), ktxt, wtxt, stxt, ctxt);
            summary["results"].push_back({{"sigma", sigmas[si]},
                                          {"method", method_names[mth]},
                                          {"accuracy_mean", mean(acc)},
                                          {"accuracy_sd", sd(acc)},
                                          {"f1_mean", mean(f1)},
                                          {"f1_sd", sd(f1)}});
        }
    }
    std::printf("\n%ld jobs in %.1f s; per-run results in %s\n", long(jobs), total, s.csv.c_str());
    if (!s.json.empty()) {
        summary["settings"] = {
            {"p", s.p},           {"n_train", s.n_train}, {"n_test", s.n_test}, {"features", s.features},
            {"seeds", s.seeds},   {"steps", s.steps},     {"eta", s.eta},       {"beta", s.beta},
            {"lambda", s.lambda}, {"radius", s.radius},   {"clip", s.clip},     {"alpha", s.alpha},
            {"gamma", s.gamma}};
        std::ofstream(s.json) << summary.dump(2) << '\n';
    }
    return 0;
}
