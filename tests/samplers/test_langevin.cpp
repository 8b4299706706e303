// samplers::langevin — the Coulomb particle sampler (docs/samplers.md).
//
// Energies against the naive O(n²) / O(N²) formulas, gradients against central finite
// differences (double), the dynamics' properties (monotone descent without noise, repulsion
// keeps particles apart, projection, stopping rule, reproducibility), the centred KTA against
// an explicit n × n computation, the external-gradient step, the operator integration and
// the error messages.
#include "support.hpp"

#include <kattn/features/porf_softplus.hpp>
#include <kattn/samplers/langevin.hpp>
#include <kattn/samplers/orthogonal_gaussian.hpp>

#include <algorithm>
#include <limits>
#include <vector>

namespace {

using kattn::index_t;
namespace kf = kattn::features;
namespace ks = kattn::samplers;
using mat = xt::xtensor<double, 2>;

constexpr index_t n_rows = 14, d_in = 3, n_part = 6, n_cls = 3;

mat data_x(std::uint64_t seed, double sd = 0.7) { return kt::randn<double, 2>({n_rows, d_in}, seed, sd); }

std::vector<int> data_labels() {
    std::vector<int> y(n_rows);
    for (index_t i = 0; i < n_rows; ++i) y[i] = int((i * 7 + 3) % n_cls);
    return y;
}

/// φ(x_i) of every row through linear_attention<Map, langevin<Map>, reference> (an
/// independent path: the operator pulls Ω through sample() and draws b from the seed).
template <class Map>
mat operator_features(const ks::langevin<Map>& lv, const mat& x, std::uint64_t seed) {
    kattn::attention_config cfg;
    cfg.head_dim = d_in;
    cfg.value_dim = 1;
    cfg.num_features = kattn::feature_map_traits<Map>::uses_pairs ? 2 * lv.num_particles() : lv.num_particles();
    cfg.seed = seed;
    cfg.input_scale = 1.0;
    const auto& fp = lv.options().features;
    cfg.temperature = fp.temperature;
    cfg.floor = fp.floor;
    cfg.scale = fp.scale;
    cfg.renormalize = fp.renormalize;
    kattn::linear_attention<Map, ks::langevin<Map>, kattn::backends::reference, double> attn(cfg, lv);
    return attn.features(x);
}

/// −1/(n(n−1)) Σ_{i≠j} T_ij φ_iᵀφ_j with T = a[c_i = c_j] + b, summed pair by pair.
double naive_alignment(const mat& phi, const std::vector<int>& y, double a, double b) {
    const index_t n = phi.shape()[0], F = phi.shape()[1];
    double s = 0;
    for (index_t i = 0; i < n; ++i)
        for (index_t j = 0; j < n; ++j) {
            if (i == j) continue;
            double k = 0;
            for (index_t f = 0; f < F; ++f) k += phi(i, f) * phi(j, f);
            s += (a * (y[i] == y[j] ? 1.0 : 0.0) + b) * k;
        }
    return -s / (double(n) * double(n - 1));
}

/// Central differences of f over every entry of the particles.
template <class Map, class F>
mat fd_gradient(ks::langevin<Map>& lv, F&& f, double h = 1e-6) {
    mat w = lv.particles();
    mat g = mat::from_shape(w.shape());
    for (std::size_t j = 0; j < w.size(); ++j) {
        const double w0 = w.data()[j];
        w.data()[j] = w0 + h;
        lv.set_particles(w);
        const double fp = f();
        w.data()[j] = w0 - h;
        lv.set_particles(w);
        const double fm = f();
        w.data()[j] = w0;
        g.data()[j] = (fp - fm) / (2 * h);
    }
    lv.set_particles(w);
    return g;
}

template <class Map>
void check_alignment(ks::label_coding coding, kattn::feature_params fp = {}) {
    INFO("map ", Map::name, ", coding ", int(coding));
    const std::uint64_t seed = 17;
    ks::langevin_options o;
    o.features = fp;
    o.labels = coding;
    ks::langevin<Map> lv(d_in, n_part, o, seed, kattn::sampler_params{1.3});
    const mat x = data_x(5);
    const auto y = data_labels();
    lv.set_data(x, y);
    const double a = coding == ks::label_coding::simplex ? double(n_cls) / (n_cls - 1) : 1.0;
    const double b = coding == ks::label_coding::simplex ? -1.0 / (n_cls - 1) : 0.0;
    const double naive = naive_alignment(operator_features(lv, x, seed), y, a, b);
    mat grad;
    const double fast = lv.alignment_energy(&grad);
    CHECK(std::abs(naive) > 1e-6);
    CHECK(fast == doctest::Approx(naive).epsilon(1e-12));
    const mat fd = fd_gradient(lv, [&] { return lv.alignment_energy(); });
    INFO("analytic vs fd rel err");
    CHECK(kt::rel_err(grad, fd) < 1e-6);
    double gmax = 0;
    for (double v : grad) gmax = std::max(gmax, std::abs(v));
    CHECK(gmax > 1e-6);
}

/// KTA from the explicit n × n matrices: ⟨HKH, HYH⟩ / (‖HKH‖ ‖HYH‖).
double naive_kta(const mat& phi, const std::vector<int>& y, index_t C) {
    const index_t n = phi.shape()[0], F = phi.shape()[1];
    mat K = mat::from_shape({std::size_t(n), std::size_t(n)}), Y = K;
    for (index_t i = 0; i < n; ++i)
        for (index_t j = 0; j < n; ++j) {
            double k = 0;
            for (index_t f = 0; f < F; ++f) k += phi(i, f) * phi(j, f);
            K(i, j) = k;
            Y(i, j) = y[i] == y[j] ? 1.0 : 0.0;
        }
    (void)C;
    auto centre = [n](const mat& M) {
        mat R = M;
        std::vector<double> rm(n, 0.0), cm(n, 0.0);
        double all = 0;
        for (index_t i = 0; i < n; ++i)
            for (index_t j = 0; j < n; ++j) {
                rm[i] += M(i, j) / n;
                cm[j] += M(i, j) / n;
                all += M(i, j) / (double(n) * n);
            }
        for (index_t i = 0; i < n; ++i)
            for (index_t j = 0; j < n; ++j) R(i, j) = M(i, j) - rm[i] - cm[j] + all;
        return R;
    };
    const mat Kc = centre(K), Yc = centre(Y);
    double num = 0, kk = 0, yy = 0;
    for (std::size_t i = 0; i < Kc.size(); ++i) {
        num += Kc.data()[i] * Yc.data()[i];
        kk += Kc.data()[i] * Kc.data()[i];
        yy += Yc.data()[i] * Yc.data()[i];
    }
    return num / std::sqrt(kk * yy);
}

}  // namespace

TEST_CASE("langevin: alignment energy and gradient match the O(n^2) formula and finite differences") {
    for (auto c : {ks::label_coding::one_hot, ks::label_coding::simplex}) {
        check_alignment<kf::favor>(c);
        check_alignment<kf::softplus>(c, kattn::feature_params{0.8, 1e-6, 1.0, true});
        check_alignment<kf::cos2>(c);  // bias held fixed (drawn from the seed)
        check_alignment<kf::trig>(c);
        check_alignment<kf::elu>(c, kattn::feature_params{1.2, 1e-6, 1.0, true});
        check_alignment<kf::sigmoid2>(c);
        check_alignment<kf::softmax_features>(c);
        check_alignment<kf::nonstationary>(c);  // pairs: particles of dimension 2d
        check_alignment<kf::positive<kf::trig>>(c);
    }
}

TEST_CASE("langevin: the simd backend agrees with the scalar one") {
    ks::langevin_options o;
    o.labels = ks::label_coding::simplex;
    o.step_size = 0.05;
    o.beta = 100.0;
    o.lambda = 0.1;
    ks::langevin<kf::trig> a(d_in, 11, o, 3);
    ks::langevin<kf::trig, kattn::backends::simd> b(d_in, 11, o, 3);
    a.set_data(data_x(2), data_labels());
    b.set_data(data_x(2), data_labels());
    mat ga, gb;
    CHECK(b.alignment_energy(&gb) == doctest::Approx(a.alignment_energy(&ga)).epsilon(1e-12));
    CHECK(kt::rel_err(gb, ga) < 1e-12);
    a.run(10);
    b.run(10);
    CHECK(kt::rel_err(b.particles(), a.particles()) < 1e-10);
}

TEST_CASE("langevin: repulsion energy and gradient for riesz, coulomb and log") {
    const std::uint64_t seed = 3;
    for (auto pot : {ks::repulsion::riesz, ks::repulsion::coulomb, ks::repulsion::log}) {
        for (index_t d : {index_t(2), index_t(3), index_t(5)}) {
            INFO("potential ", int(pot), ", d ", d);
            ks::langevin_options o;
            o.potential = pot;
            o.riesz_s = 1.5;
            o.lambda = 0.7;
            o.softening = 0.05;
            ks::langevin<kf::trig> lv(d, 7, o, seed);
            // naive Σ_{k≠l} over ordered pairs
            const mat w = lv.particles();
            const double s = pot == ks::repulsion::riesz ? 1.5 : double(d - 2);
            const bool use_log = pot == ks::repulsion::log || (pot == ks::repulsion::coulomb && d == 2);
            double W = 0, md = std::numeric_limits<double>::infinity();
            for (index_t k = 0; k < 7; ++k)
                for (index_t l = 0; l < 7; ++l) {
                    if (k == l) continue;
                    double r2 = 0;
                    for (index_t i = 0; i < d; ++i) r2 += (w(k, i) - w(l, i)) * (w(k, i) - w(l, i));
                    md = std::min(md, std::sqrt(r2));
                    const double q = r2 + 0.05 * 0.05;
                    W += use_log ? -0.5 * std::log(q) : std::pow(q, -s / 2);
                }
            W *= 0.7 / (7.0 * 6.0);
            mat grad;
            CHECK(lv.repulsion_energy(&grad) == doctest::Approx(W).epsilon(1e-12));
            CHECK(lv.min_distance() == doctest::Approx(md).epsilon(1e-12));
            const mat fd = fd_gradient(lv, [&] { return lv.repulsion_energy(); });
            CHECK(kt::rel_err(grad, fd) < 1e-6);
        }
    }
}

TEST_CASE("langevin: centred kernel-target alignment equals the explicit n x n computation") {
    const mat x = data_x(9);
    const auto y = data_labels();
    ks::langevin<kf::softplus> a(d_in, n_part, {}, 4);
    a.set_data(x, y);
    CHECK(a.kta() == doctest::Approx(naive_kta(operator_features(a, x, 4), y, n_cls)).epsilon(1e-10));
    ks::langevin<kf::trig> b(d_in, n_part, {}, 4);
    b.set_data(x, y);
    CHECK(b.kta() == doctest::Approx(naive_kta(operator_features(b, x, 4), y, n_cls)).epsilon(1e-10));
    // the history records it at every kta_interval-th step
    const auto r = b.step();
    CHECK(r.kta ==
          doctest::Approx(naive_kta(operator_features(ks::langevin<kf::trig>(d_in, n_part, {}, 4), x, 4), y, n_cls))
              .epsilon(1e-10));
}

TEST_CASE("langevin: without noise or repulsion the energy decreases monotonically") {
    for (auto coding : {ks::label_coding::one_hot, ks::label_coding::simplex}) {
        ks::langevin_options o;
        o.step_size = 0.02;
        o.labels = coding;
        ks::langevin<kf::trig> lv(d_in, 16, o, 11);
        lv.set_data(data_x(2), data_labels());
        const auto h = lv.run(150);
        REQUIRE(h.steps() == 150);
        for (index_t t = 1; t < h.steps(); ++t) CHECK(h.energy[t] <= h.energy[t - 1] + 1e-15);
        CHECK(h.energy.back() < h.energy.front());
        CHECK(lv.evaluate().energy <= h.energy.back());
        for (index_t t = 0; t < h.steps(); ++t) CHECK(h.repulsion[t] == 0.0);
    }
}

TEST_CASE("langevin: repulsion keeps the particles further apart than lambda = 0") {
    // One-hot labels with the trig map: V is minimised by collapsing every ω to 0 (K ≡ 1).
    auto final_min_distance = [](double lambda) {
        ks::langevin_options o;
        o.step_size = 0.05;
        o.lambda = lambda;
        o.potential = ks::repulsion::log;
        o.softening = 1e-3;
        ks::langevin<kf::trig> lv(d_in, 12, o, 21);
        lv.set_data(data_x(8, 1.0), data_labels());
        lv.run(300);
        return lv.min_distance();
    };
    const double free = final_min_distance(0.0), repelled = final_min_distance(0.5);
    INFO("min distance: lambda = 0 ", free, ", lambda = 0.5 ", repelled);
    CHECK(repelled > 2 * free);
}

TEST_CASE("langevin: the projection keeps every particle inside the radius") {
    ks::langevin_options o;
    o.step_size = 0.5;
    o.beta = 5.0;  // large noise pushes particles out
    o.radius = 0.6;
    o.lambda = 1.0;
    ks::langevin<kf::favor> lv(d_in, 10, o, 5);
    lv.set_data(data_x(3, 0.5), data_labels());
    for (int s = 0; s < 20; ++s) {
        lv.step();
        const mat w = lv.particles();
        for (index_t k = 0; k < 10; ++k) {
            double n2 = 0;
            for (index_t i = 0; i < d_in; ++i) n2 += w(k, i) * w(k, i);
            CHECK(std::sqrt(n2) <= 0.6 * (1 + 1e-12));
        }
    }
}

TEST_CASE("langevin: gradient clipping caps each particle's drift") {
    ks::langevin_options o;
    o.step_size = 0.1;
    o.gradient_clip = 1e-3;
    ks::langevin<kf::trig> lv(d_in, 8, o, 5);
    lv.set_data(data_x(3), data_labels());
    const auto r = lv.step();
    CHECK(r.max_move <= 0.1 * 1e-3 * (1 + 1e-12));
    CHECK(r.max_move > 0.0);
}

TEST_CASE("langevin: the windowed energy stopping rule fires on a converged run") {
    ks::langevin_options o;
    o.step_size = 0.3;
    o.labels = ks::label_coding::simplex;
    o.window = 20;
    o.tolerance = 1e-4;
    o.max_steps = 5000;
    o.kta_interval = 0;
    ks::langevin<kf::trig> lv(d_in, 8, o, 2);
    lv.set_data(data_x(4), data_labels());
    const auto h = lv.run();
    CHECK(h.converged);
    CHECK(h.steps() < 5000);
    CHECK(h.steps() >= 40);
    INFO("steps until the rule fired: ", h.steps());
    CHECK(lv.converged());
    CHECK(std::isnan(h.kta.front()));
    // with noise and β small the max-move rule of the paper could never fire, ours still can
    ks::langevin_options n = o;
    n.beta = 1e4;
    n.tolerance = 1e-2;
    ks::langevin<kf::trig> noisy(d_in, 8, n, 2);
    noisy.set_data(data_x(4), data_labels());
    const auto hn = noisy.run();
    CHECK(hn.converged);
    CHECK(*std::min_element(hn.max_move.begin(), hn.max_move.end()) > 1e-6);
}

TEST_CASE("langevin: the same seed gives the same trajectory; another seed does not") {
    ks::langevin_options o;
    o.step_size = 0.05;
    o.beta = 50.0;
    o.lambda = 0.1;
    o.radius = 1.5;
    o.gradient_clip = 10.0;
    auto trajectory = [&](std::uint64_t seed) {
        ks::langevin<kf::cos2> lv(d_in, 9, o, seed);
        lv.set_data(data_x(6), data_labels());
        std::vector<double> all;
        for (int s = 0; s < 25; ++s) {
            const auto r = lv.step();
            all.push_back(r.energy);
            const mat w = lv.particles();
            all.insert(all.end(), w.begin(), w.end());
        }
        return all;
    };
    const auto a = trajectory(8), b = trajectory(8), c = trajectory(9);
    CHECK(a == b);
    CHECK(a != c);
}

TEST_CASE("langevin: an external gradient equal to the alignment gradient reproduces step()") {
    ks::langevin_options o;
    o.step_size = 0.03;
    o.beta = 200.0;
    o.lambda = 0.2;
    ks::langevin<kf::nonstationary> a(d_in, 5, o, 12), b(d_in, 5, o, 12);
    const mat x = data_x(1);
    a.set_data(x, data_labels());
    b.set_data(x, data_labels());
    for (int s = 0; s < 5; ++s) {
        const auto ra = a.step();
        // ∂V/∂Ω in Ω's layout [d, P] (pairs: columns k and N + k) from the particle layout
        mat gp;
        const double v = b.alignment_energy(&gp);
        mat go = xt::zeros<double>({std::size_t(d_in), std::size_t(10)});
        for (index_t k = 0; k < 5; ++k)
            for (index_t i = 0; i < d_in; ++i) {
                go(i, k) = gp(k, i);
                go(i, 5 + k) = gp(k, d_in + i);
            }
        const auto rb = b.step(go, v);
        CHECK(ra.energy == doctest::Approx(rb.energy).epsilon(1e-12));
        CHECK(kt::rel_err(b.particles(), a.particles()) < 1e-12);
    }
    // the model-level energy flows into the history; unknown energy is NaN
    const auto r = b.step(mat(xt::zeros<double>({std::size_t(d_in), std::size_t(10)})));
    CHECK(std::isnan(r.energy));
    CHECK(!b.converged());
}

TEST_CASE("langevin: linear_attention takes its frequencies from the particles") {
    ks::langevin<kf::softplus> lv(4, 16, {}, 31);
    kattn::attention_config cfg;
    cfg.head_dim = 4;
    cfg.value_dim = 2;
    cfg.num_features = 16;
    cfg.seed = 31;
    kattn::linear_attention<kf::softplus, ks::langevin<kf::softplus>, kattn::backends::reference, double> attn(cfg, lv);
    CHECK(kt::rel_err(attn.omega(), lv.omega()) == 0.0);
    // the initial particles are the gaussian sampler's draw for the same seed
    kattn::linear_attention<kf::softplus, ks::gaussian, kattn::backends::reference, double> g(cfg);
    CHECK(kt::rel_err(g.omega(), lv.omega()) == 0.0);
    static_assert(kattn::spectral_sampler<ks::langevin<kf::softplus>>);
    static_assert(!kattn::spectral_sampler_traits<ks::langevin<kf::softplus>>::is_random);
}

TEST_CASE("langevin: porf_softplus particles start as the orthogonal sampler's blocks") {
    // PORF: the map is defined with orthogonal frequencies; the particles start from
    // orthogonal_gaussian's draw for the same seed (rows within a block of d orthogonal),
    // then move freely.
    const kattn::index_t d = 4, N = 10;
    ks::langevin<kf::porf_softplus> lv(d, N, {}, 23);
    kattn::attention_config cfg;
    cfg.head_dim = d;
    cfg.value_dim = 2;
    cfg.num_features = N;
    cfg.seed = 23;
    kattn::linear_attention<kf::porf_softplus, ks::orthogonal_gaussian, kattn::backends::reference, double> o(cfg);
    CHECK(kt::rel_err(o.omega(), lv.omega()) == 0.0);
    const auto om = lv.omega();  // d x N: column k = ω_k
    for (kattn::index_t a = 0; a < N; ++a)
        for (kattn::index_t b = a + 1; b < N && b / d == a / d; ++b) {
            double dot = 0, na = 0, nb = 0;
            for (kattn::index_t i = 0; i < d; ++i) {
                dot += om(i, a) * om(i, b);
                na += om(i, a) * om(i, a);
                nb += om(i, b) * om(i, b);
            }
            CHECK(std::abs(dot) < 1e-12 * std::sqrt(na * nb));
        }
    // the softplus map keeps the gaussian start: PORF-ness comes from the map's trait alone
    ks::langevin<kf::softplus> sp(d, N, {}, 23);
    CHECK(kt::rel_err(sp.omega(), lv.omega()) > 1e-3);
    static_assert(kattn::spectral_sampler_traits<ks::langevin<kf::porf_softplus>>::orthogonal_init);
    static_assert(!kattn::spectral_sampler_traits<ks::langevin<kf::softplus>>::orthogonal_init);
    // linear_attention accepts the particles (its static_assert asks for orthogonal frequencies)
    kattn::linear_attention<kf::porf_softplus, ks::langevin<kf::porf_softplus>, kattn::backends::reference, double>
        attn(cfg, lv);
    CHECK(kt::rel_err(attn.omega(), lv.omega()) == 0.0);
}

TEST_CASE("langevin: bad inputs throw kattn::error naming the argument") {
    using L = ks::langevin<kf::trig>;
    auto with = [](auto f) {
        ks::langevin_options o;
        f(o);
        return o;
    };
    kt::check_error([] { L(0, 4); }, {"input_dim"});
    kt::check_error([] { L(3, 0); }, {"num_particles"});
    kt::check_error([&] { L(3, 4, with([](auto& o) { o.step_size = 0; })); }, {"step_size"});
    kt::check_error([&] { L(3, 4, with([](auto& o) { o.beta = std::nan(""); })); }, {"beta"});
    kt::check_error([&] { L(3, 4, with([](auto& o) { o.beta = -1; })); }, {"beta"});
    kt::check_error([&] { L(3, 4, with([](auto& o) { o.lambda = -0.1; })); }, {"lambda"});
    kt::check_error(
        [&] {
            L(3, 4, with([](auto& o) {
                  o.potential = ks::repulsion::riesz;
                  o.riesz_s = 0;
              }));
        },
        {"riesz_s"});
    kt::check_error([&] { L(1, 4, with([](auto& o) { o.potential = ks::repulsion::coulomb; })); }, {"potential"});
    kt::check_error([&] { L(3, 4, with([](auto& o) { o.softening = 0; })); }, {"softening"});
    kt::check_error([&] { L(3, 4, with([](auto& o) { o.radius = 0; })); }, {"radius"});
    kt::check_error([&] { L(3, 4, with([](auto& o) { o.gradient_clip = -1; })); }, {"gradient_clip"});
    kt::check_error([&] { L(3, 4, with([](auto& o) { o.window = 0; })); }, {"window"});
    kt::check_error([&] { L(3, 4, with([](auto& o) { o.max_steps = 0; })); }, {"max_steps"});
    kt::check_error([&] { L(3, 4, with([](auto& o) { o.tolerance = -1; })); }, {"tolerance"});
    kt::check_error([&] { L(3, 4, with([](auto& o) { o.features.temperature = 0; })); }, {"temperature"});
    kt::check_error([] { L(3, mat(xt::zeros<double>({4, 2}))); }, {"particles", "[4, 2]"});
    kt::check_error(
        [] {
            mat w = xt::zeros<double>({4, 3});
            w(1, 1) = std::nan("");
            L(3, w);
        },
        {"particles", "finite"});

    L lv(3, 4, {}, 1);
    kt::check_error([&] { lv.step(); }, {"x", "set_data"});
    kt::check_error([&] { lv.set_data(mat(xt::zeros<double>({5, 2})), std::vector<int>(5, 0)); }, {"x", "[5, 2]"});
    kt::check_error([&] { lv.set_data(mat(xt::zeros<double>({5, 3})), std::vector<int>(4, 0)); }, {"labels"});
    kt::check_error(
        [&] {
            lv.set_data(mat(xt::zeros<double>({5, 3})), std::vector<int>{0, 1, -1, 0, 1});
        },
        {"labels", ">= 0"});
    kt::check_error(
        [&] {
            lv.set_data(mat(xt::zeros<double>({5, 3})), std::vector<int>{0, 1, 3, 0, 1}, 2);
        },
        {"labels", "num_classes"});
    kt::check_error(
        [] {
            L s(
                3, 4,
                [] {
                    ks::langevin_options o;
                    o.labels = ks::label_coding::simplex;
                    return o;
                }(),
                1);
            s.set_data(mat(xt::zeros<double>({5, 3})), std::vector<int>(5, 0));
        },
        {"num_classes", ">= 2"});
    kt::check_error(
        [&] {
            mat x = xt::zeros<double>({5, 3});
            x(2, 0) = INFINITY;
            lv.set_data(x, std::vector<int>(5, 0));
        },
        {"x", "finite"});
    std::vector<double> out(100);
    kt::check_error([&] { lv.sample<double>({}, 3, 5, 0, out.data()); }, {"num_features", "N = 4"});
    kt::check_error([&] { lv.sample<double>({}, 2, 4, 0, out.data()); }, {"dim", "3"});
    kt::check_error([&] { lv.step(mat(xt::zeros<double>({4, 3}))); }, {"external_grad", "[3, 4]"});
    kt::check_error([&] { lv.set_bias(std::vector<double>(4, 0.0)); }, {"bias"});
    // an operator whose num_features differs from the particle count
    kattn::attention_config cfg;
    cfg.head_dim = 3;
    cfg.value_dim = 1;
    cfg.num_features = 5;
    kt::check_error([&] { kattn::linear_attention<kf::trig, L, kattn::backends::reference, double>(cfg, lv); },
                    {"num_features", "N = 4"});
}
