// Vector-Jacobian products of every feature map against central finite differences
// (docs/feature_maps.md §1, §9: every map provides its VJP with respect to x and to (Ω, b), checked
// against central finite differences in double precision).
//
// Map level: L(x, Ω, b) = ⟨dφ, φ(x; Ωᵀx, b, shift)⟩ with a fixed shift; the VJP gives
//   ∂L/∂x = Ω du + dx_direct,   ∂L/∂Ω = x duᵀ,   ∂L/∂b = db.
// Operator level: L = Σ out ⊙ G through linear_attention<…, reference, double>, perturbing
// Ω with set_omega and b with set_bias; backward()'s d_omega and d_bias must match.
#include "map_cases.hpp"

#include <algorithm>
#include <vector>

namespace {

using kattn::index_t;
using ops = kattn::detail::scalar_ops;

std::vector<double> rand_vec(std::size_t n, std::uint64_t seed, double sd) {
    const kattn::random_stream rs(seed, kattn::streams::user + 21);
    std::vector<double> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = sd * rs.normal(i);
    return v;
}

/// max |a − b| / max |b|, with a guard that b is not trivially zero.
double vec_rel_err(const std::vector<double>& a, const std::vector<double>& b) {
    REQUIRE(a.size() == b.size());
    double num = 0, den = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        num = std::max(num, std::abs(a[i] - b[i]));
        den = std::max(den, std::abs(b[i]));
    }
    CHECK(den > 1e-8);  // the gradient is not trivially zero
    return num / (den + 1e-300);
}

/// One map-level problem: fixed x, Ω (d × P row-major), b, shift and upstream dφ.
template <class Map>
struct map_problem {
    kattn::map_params_t<Map> p;
    index_t d, m, P, F;
    std::vector<double> x, omega, b, dphi;
    double shift;

    std::vector<double> project(const std::vector<double>& xx, const std::vector<double>& om) const {
        std::vector<double> u(P, 0.0);
        for (index_t i = 0; i < d; ++i)
            for (index_t q = 0; q < P; ++q) u[q] += xx[i] * om[i * P + q];
        return u;
    }
    std::vector<double> phi(const std::vector<double>& xx, const std::vector<double>& om,
                            const std::vector<double>& bb) const {
        const auto u = project(xx, om);
        std::vector<double> f(F);
        Map::template activate<ops>(p, d, m, xx.data(), u.data(), Map::uses_bias ? bb.data() : nullptr, shift,
                                    f.data());
        return f;
    }
    double loss(const std::vector<double>& xx, const std::vector<double>& om, const std::vector<double>& bb) const {
        const auto f = phi(xx, om, bb);
        double s = 0;
        for (index_t i = 0; i < F; ++i) s += dphi[i] * f[i];
        return s;
    }
};

template <class C>
void check_map_vjp(std::uint64_t seed) {
    using Map = typename C::map;
    map_problem<Map> pr;
    pr.p = kt::cases::params<C>();
    pr.d = 5;
    pr.m = 4;
    pr.P = Map::projection_dim(pr.m);
    pr.F = Map::feature_dim(pr.m);
    pr.x = rand_vec(pr.d, seed, 0.6);
    pr.omega = rand_vec(pr.d * pr.P, seed + 1, 1.0);
    pr.b = rand_vec(pr.m, seed + 2, 0.5);
    pr.dphi = rand_vec(pr.F, seed + 3, 1.0);
    pr.shift = Map::has_stabiliser ? 0.3 : 0.0;
    const index_t d = pr.d, m = pr.m, P = pr.P;

    // Analytic VJP.
    const auto u = pr.project(pr.x, pr.omega);
    const auto f = pr.phi(pr.x, pr.omega, pr.b);
    std::vector<double> du(P, 0.0), dx(d, 0.0), db(m, 0.0), work(std::max<index_t>(1, Map::workspace(m)), 0.0);
    Map::template activate_vjp<ops>(pr.p, d, m, pr.x.data(), u.data(), Map::uses_bias ? pr.b.data() : nullptr, pr.shift,
                                    f.data(), pr.dphi.data(), du.data(), dx.data(),
                                    Map::uses_bias ? db.data() : nullptr, work.data());
    std::vector<double> gx(d), gomega(d * P);
    for (index_t i = 0; i < d; ++i) {
        double acc = dx[i];
        for (index_t q = 0; q < P; ++q) {
            acc += pr.omega[i * P + q] * du[q];
            gomega[i * P + q] = pr.x[i] * du[q];
        }
        gx[i] = acc;
    }

    // Central differences, h = 1e-6.
    const double h = 1e-6;
    auto fd = [&](std::vector<double>& param, std::size_t i) {
        const double keep = param[i];
        param[i] = keep + h;
        const double lp = pr.loss(pr.x, pr.omega, pr.b);
        param[i] = keep - h;
        const double lm = pr.loss(pr.x, pr.omega, pr.b);
        param[i] = keep;
        return (lp - lm) / (2 * h);
    };
    std::vector<double> nx(d), nomega(d * P), nb(m);
    for (index_t i = 0; i < d; ++i) nx[i] = fd(pr.x, i);
    for (index_t i = 0; i < d * P; ++i) nomega[i] = fd(pr.omega, i);
    for (index_t i = 0; i < m; ++i) nb[i] = fd(pr.b, i);

    INFO("map ", C::name, ", seed ", seed);
    CHECK(vec_rel_err(gx, nx) < 1e-6);
    CHECK(vec_rel_err(gomega, nomega) < 1e-6);
    if constexpr (Map::uses_bias) {
        CHECK(vec_rel_err(db, nb) < 1e-6);
    } else {
        // The map ignores b: its finite difference is zero and db must be left untouched.
        for (index_t i = 0; i < m; ++i) CHECK(nb[i] == 0.0);
        for (index_t i = 0; i < m; ++i) CHECK(db[i] == 0.0);
    }
}

}  // namespace

TEST_CASE_TEMPLATE_DEFINE("feature map VJP matches central finite differences (x, omega, bias)", C, kt_vjp_case_1) {
    for (std::uint64_t seed : {11u, 12u, 13u}) check_map_vjp<C>(seed);
}
TEST_CASE_TEMPLATE_APPLY(kt_vjp_case_1, kt::cases::all_cases);

TEST_CASE_TEMPLATE_DEFINE("feature map VJP accumulates into dx and db instead of overwriting", C, kt_vjp_case_2) {
    // The reference backend sums the direct x term and db over rows: the VJP must add.
    using Map = typename C::map;
    const auto p = kt::cases::params<C>();
    const index_t d = 5, m = 4, P = Map::projection_dim(m), F = Map::feature_dim(m);
    const auto x = rand_vec(d, 5, 0.6), omega = rand_vec(d * P, 6, 1.0), b = rand_vec(m, 7, 0.5),
               dphi = rand_vec(F, 8, 1.0);
    std::vector<double> u(P, 0.0), f(F);
    for (index_t i = 0; i < d; ++i)
        for (index_t q = 0; q < P; ++q) u[q] += x[i] * omega[i * P + q];
    const double shift = Map::has_stabiliser ? 0.3 : 0.0;
    Map::template activate<ops>(p, d, m, x.data(), u.data(), b.data(), shift, f.data());
    std::vector<double> work(std::max<index_t>(1, Map::workspace(m)));
    std::vector<double> du0(P), dx0(d, 0.0), db0(m, 0.0), du1(P), dx1(d, 1.5), db1(m, -2.0);
    Map::template activate_vjp<ops>(p, d, m, x.data(), u.data(), b.data(), shift, f.data(), dphi.data(), du0.data(),
                                    dx0.data(), db0.data(), work.data());
    Map::template activate_vjp<ops>(p, d, m, x.data(), u.data(), b.data(), shift, f.data(), dphi.data(), du1.data(),
                                    dx1.data(), db1.data(), work.data());
    INFO("map ", C::name);
    for (index_t q = 0; q < P; ++q) CHECK(du1[q] == doctest::Approx(du0[q]).epsilon(1e-14));
    for (index_t i = 0; i < d; ++i) CHECK(dx1[i] - 1.5 == doctest::Approx(dx0[i]).epsilon(1e-12));
    for (index_t i = 0; i < m; ++i) CHECK(db1[i] + 2.0 == doctest::Approx(db0[i]).epsilon(1e-12));
}
TEST_CASE_TEMPLATE_APPLY(kt_vjp_case_2, kt::cases::all_cases);

// ---- operator level ---------------------------------------------------------------------

namespace {

template <class Op, class... Mask>
double op_loss(const Op& op, const xt::xtensor<double, 4>& q, const xt::xtensor<double, 4>& k,
               const xt::xtensor<double, 4>& v, const xt::xtensor<double, 4>& G, Mask... mask) {
    const auto out = op(q, k, v, mask...);
    double s = 0;
    for (std::size_t i = 0; i < out.size(); ++i) s += out.data()[i] * G.data()[i];
    return s;
}

template <class C, class... Mask>
void check_operator_spectral_grad(Mask... mask) {
    using T = double;
    constexpr bool causal = (std::is_same_v<Mask, kattn::causal_t> || ...);
    const index_t d = 5, dv = 3, nf = 6;
    const std::size_t B = 2, H = 2, Lq = 4, Lk = causal ? 4 : 6;
    auto op = kt::cases::make_op<C, T>(d, dv, nf, 77);
    const double sd = C::map::is_positive ? 0.5 : 0.3;
    const auto q = kt::randn<T, 4>({B, H, Lq, std::size_t(d)}, 1, sd);
    const auto k = kt::randn<T, 4>({B, H, Lk, std::size_t(d)}, 2, sd);
    const auto v = kt::randn<T, 4>({B, H, Lk, std::size_t(dv)}, 3);
    const auto G = kt::randn<T, 4>({B, H, Lq, std::size_t(dv)}, 4);

    const auto g = op.backward(q, k, v, G, mask...);
    const double h = 1e-6;

    // d_omega
    auto omega = op.omega();
    xt::xtensor<double, 2> fd_omega = xt::zeros_like(omega);
    for (std::size_t i = 0; i < omega.size(); ++i) {
        auto o2 = op;
        auto w = omega;
        w.data()[i] += h;
        o2.set_omega(w);
        const double lp = op_loss(o2, q, k, v, G, mask...);
        w.data()[i] -= 2 * h;
        o2.set_omega(w);
        const double lm = op_loss(o2, q, k, v, G, mask...);
        fd_omega.data()[i] = (lp - lm) / (2 * h);
    }
    INFO("map ", C::name, causal ? " (causal)" : " (non-causal)");
    REQUIRE(g.d_omega.shape() == omega.shape());
    CHECK(xt::amax(xt::abs(fd_omega))() > 1e-8);
    CHECK(kt::rel_err(g.d_omega, fd_omega) < 1e-6);

    // d_bias
    if constexpr (C::map::uses_bias) {
        auto bias = op.bias();
        xt::xtensor<double, 1> fd_bias = xt::zeros_like(bias);
        for (std::size_t i = 0; i < bias.size(); ++i) {
            auto o2 = op;
            auto b2 = bias;
            b2(i) += h;
            o2.set_bias(b2);
            const double lp = op_loss(o2, q, k, v, G, mask...);
            b2(i) -= 2 * h;
            o2.set_bias(b2);
            const double lm = op_loss(o2, q, k, v, G, mask...);
            fd_bias(i) = (lp - lm) / (2 * h);
        }
        REQUIRE(g.d_bias.size() == bias.size());
        CHECK(xt::amax(xt::abs(fd_bias))() > 1e-8);
        CHECK(kt::rel_err(g.d_bias, fd_bias) < 1e-6);
    } else {
        CHECK(g.d_bias.size() == 0);
    }
}

}  // namespace

TEST_CASE_TEMPLATE_DEFINE("linear_attention backward: d_omega and d_bias match finite differences", C, kt_vjp_case_3) {
    if constexpr (!C::operator_enabled) {
        FAIL_CHECK("linear_attention<", C::name, ", ", C::sampler::name,
                   "> does not compile: the sampler does not declare is_orthogonal");
    } else {
        const std::array<index_t, 2> lengths{6, 3};
        SUBCASE("non-causal, padded keys, q_len != k_len") {
            check_operator_spectral_grad<C>(kattn::key_lengths(lengths));
        }
        SUBCASE("causal") { check_operator_spectral_grad<C>(kattn::causal); }
    }
}
TEST_CASE_TEMPLATE_APPLY(kt_vjp_case_3, kt::cases::all_cases);

namespace {
/// A row-ops policy written before transform2 existed: the maps must fall back to two
/// transforms (detail::transform2) and give the same values.
struct ops_without_transform2 {
    template <class T, class F, class... In>
    static void transform(index_t n, T* out, F&& f, const In*... in) {
        ops::transform(n, out, f, in...);
    }
    template <class T>
    static T sum(index_t n, const T* x) {
        return ops::sum(n, x);
    }
    template <class T>
    static T max(index_t n, const T* x) {
        return ops::max(n, x);
    }
    template <class T>
    static T dot(index_t n, const T* x, const T* y) {
        return ops::dot(n, x, y);
    }
};
static_assert(kattn::detail::has_transform2<ops>);
static_assert(!kattn::detail::has_transform2<ops_without_transform2>);
}  // namespace

TEST_CASE_TEMPLATE_DEFINE("feature maps give the same rows through a row-ops policy without transform2", C,
                          kt_vjp_case_4) {
    using Map = typename C::map;
    const auto p = kt::cases::params<C>();
    const index_t d = 5, m = 4, P = Map::projection_dim(m), F = Map::feature_dim(m);
    const auto x = rand_vec(d, 15, 0.6), omega = rand_vec(d * P, 16, 1.0), b = rand_vec(m, 17, 0.5);
    std::vector<double> u(P, 0.0), f0(F), f1(F, -7.0);
    for (index_t i = 0; i < d; ++i)
        for (index_t q = 0; q < P; ++q) u[q] += x[i] * omega[i * P + q];
    const double shift = Map::has_stabiliser ? 0.3 : 0.0;
    Map::template activate<ops>(p, d, m, x.data(), u.data(), b.data(), shift, f0.data());
    Map::template activate<ops_without_transform2>(p, d, m, x.data(), u.data(), b.data(), shift, f1.data());
    INFO("map ", C::name);
    CHECK(f0 == f1);
}
TEST_CASE_TEMPLATE_APPLY(kt_vjp_case_4, kt::cases::all_cases);
