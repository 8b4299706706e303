// The backend contract (backends/problem.hpp, backends/execution_backend.hpp,
// docs/backends.md §1) is enough to write a backend: `quadratic` below uses only the
// public problem structs and the feature maps' public static members, and computes
// attention by an independent O(L²) algorithm (the full matrix of kernel weights,
// differentiated by hand). It must agree with the reference oracle on forward (non-causal,
// causal, key lengths), backward (dq, dk, dv, dΩ, db), features() and recurrent steps.
#include "../map_cases.hpp"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include <xtensor/xview.hpp>

namespace {

using kattn::index_t;
namespace kb = kattn::backends;
using row_ops = kattn::detail::scalar_ops;  // the feature maps' scalar row-ops policy

/// Denominator guard, written from docs/design.md §5: positive maps max(den, eps), signed
/// maps sign(den)·max(|den|, eps) with sign(0) = +1. `clamped`: the guard replaced den.
template <bool Positive>
double guard(double den, double eps, bool& clamped) {
    clamped = Positive ? !(den >= eps) : !(std::abs(den) >= eps);
    if (!clamped) return den;
    return (!Positive && den < 0) ? -eps : eps;
}

struct quadratic {
    static constexpr const char* name = "quadratic";

    /// Ω and b of one call in double, and the map evaluated on one row.
    template <class Map>
    struct spectral {
        index_t d, m, P, F;
        decltype(kb::spectral_view<Map, double>::params) params;  // opaque: handed to the map unchanged
        std::vector<double> omega, bias;

        template <class T>
        explicit spectral(const kb::spectral_view<Map, T>& s)
            : d(s.d),
              m(s.m),
              P(Map::projection_dim(s.m)),
              F(Map::feature_dim(s.m)),
              params(s.params),
              omega(s.omega, s.omega + s.d * P) {
            if (Map::uses_bias && s.bias) bias.assign(s.bias, s.bias + s.m);
        }
        const double* b() const { return bias.empty() ? nullptr : bias.data(); }

        /// x̃ = s·x_in, u = Ωᵀx̃, φ (with the map's row shift when `stabilise`); returns the shift.
        template <class T>
        double row(const T* x_in, double s, bool stabilise, double* x, double* u, double* phi) const {
            for (index_t i = 0; i < d; ++i) x[i] = s * double(x_in[i]);
            std::fill(u, u + P, 0.0);
            for (index_t i = 0; i < d; ++i)
                for (index_t p = 0; p < P; ++p) u[p] += omega[i * P + p] * x[i];
            double c = 0;
            if constexpr (Map::has_stabiliser)
                if (stabilise) c = Map::template row_shift<row_ops>(params, d, m, x, u, b());
            Map::template activate<row_ops>(params, d, m, x, u, b(), c, phi);
            return c;
        }

        /// Chain rule of one row: dx_in = s·(Ω du + direct), dΩ += x̃ duᵀ, db += the map's part.
        void row_vjp(const double* x, const double* u, double c, const double* phi, const double* dphi, double s,
                     double* dx_in, double* d_omega, double* d_bias) const {
            std::vector<double> du(P), direct(d, 0.0), work(std::max<index_t>(Map::workspace(m), 1));
            Map::template activate_vjp<row_ops>(params, d, m, x, u, b(), c, phi, dphi, du.data(), direct.data(), d_bias,
                                                work.data());
            for (index_t i = 0; i < d; ++i) {
                double acc = direct[i];
                for (index_t p = 0; p < P; ++p) {
                    acc += omega[i * P + p] * du[p];
                    d_omega[i * P + p] += x[i] * du[p];
                }
                dx_in[i] = s * acc;
            }
        }
    };

    /// One head: rows of q and valid keys, and the L × L weights a_ij = e^{c_j − C_i} φ(q_i)·φ(k_j)
    /// (0 where key j is invisible to query i), with the forward pass.
    template <class Map>
    struct head {
        index_t nq, nk, d, P, F, dv;
        std::vector<double> xq, uq, phq, cq, xk, uk, phk, ck, v, w, a, den, out;
        std::vector<char> clamped;

        template <class T>
        head(const spectral<Map>& sp, const kb::attention_problem<Map, T>& pb, index_t p)
            : nq(pb.q_len),
              nk(pb.valid_keys(p)),
              d(sp.d),
              P(sp.P),
              F(sp.F),
              dv(pb.dv),
              xq(nq * d),
              uq(nq * P),
              phq(nq * F),
              cq(nq),
              xk(nk * d),
              uk(nk * P),
              phk(nk * F),
              ck(nk),
              v(nk * dv),
              w(nq * nk, 0.0),
              a(nq * nk, 0.0),
              den(nq),
              out(nq * dv, 0.0),
              clamped(nq) {
            const double s = double(pb.input_scale);
            for (index_t i = 0; i < nq; ++i)
                cq[i] = sp.row(pb.q + (p * nq + i) * d, s, true, &xq[i * d], &uq[i * P], &phq[i * F]);
            for (index_t j = 0; j < nk; ++j)
                ck[j] = sp.row(pb.k + (p * pb.k_len + j) * d, s, true, &xk[j * d], &uk[j * P], &phk[j * F]);
            for (index_t j = 0; j < nk * dv; ++j) v[j] = double(pb.v[p * pb.k_len * dv + j]);
            for (index_t i = 0; i < nq; ++i) {
                const index_t seen = pb.causal ? std::min(nk, i + 1) : nk;  // keys j < seen
                const double Ci = seen ? *std::max_element(ck.begin(), ck.begin() + seen) : 0.0;
                double dn = 0;
                for (index_t j = 0; j < seen; ++j) {
                    double dot = 0;
                    for (index_t f = 0; f < F; ++f) dot += phq[i * F + f] * phk[j * F + f];
                    w[i * nk + j] = std::exp(ck[j] - Ci);
                    a[i * nk + j] = w[i * nk + j] * dot;
                    dn += a[i * nk + j];
                    for (index_t c = 0; c < dv; ++c) out[i * dv + c] += a[i * nk + j] * v[j * dv + c];
                }
                bool cl = false;
                den[i] = guard<Map::is_positive>(dn, pb.eps, cl);
                clamped[i] = cl;
                for (index_t c = 0; c < dv; ++c) out[i * dv + c] /= den[i];
            }
        }
    };

    template <class Map, class T>
    static void features(const kb::feature_problem<Map, T>& pb) {
        const spectral<Map> sp(pb.spec);
        std::vector<double> x(sp.d), u(sp.P), phi(sp.F);
        for (index_t r = 0; r < pb.n; ++r) {
            sp.row(pb.x + r * sp.d, double(pb.input_scale), false, x.data(), u.data(), phi.data());
            for (index_t f = 0; f < sp.F; ++f) pb.phi[r * sp.F + f] = T(phi[f]);
        }
    }

    template <class Map, class T>
    static void forward(const kb::attention_problem<Map, T>& pb, T* out) {
        const spectral<Map> sp(pb.spec);
        for (index_t p = 0; p < pb.problems; ++p) {
            const head<Map> h(sp, pb, p);
            for (index_t i = 0; i < pb.q_len * pb.dv; ++i) out[p * pb.q_len * pb.dv + i] = T(h.out[i]);
        }
    }

    template <class Map, class T>
    static void backward(const kb::attention_problem<Map, T>& pb, const kb::attention_gradients<T>& g) {
        const spectral<Map> sp(pb.spec);
        const index_t d = sp.d, P = sp.P, F = sp.F, dv = pb.dv, m = sp.m;
        const double s = double(pb.input_scale);
        std::vector<double> d_omega(d * P, 0.0), d_bias(std::max<index_t>(m, 1), 0.0), dx(d);
        double* db = Map::uses_bias ? d_bias.data() : nullptr;
        for (index_t p = 0; p < pb.problems; ++p) {
            const head<Map> h(sp, pb, p);
            const index_t nq = h.nq, nk = h.nk;
            // out_i = N_i / den_i: ∂/∂N_i = G_i / den_i, ∂/∂den_i = −G_i·out_i / den_i (0 if clamped);
            // ∂a_ij = n_i·v_j + e_i;  a_ij = w_ij φq_i·φk_j with w_ij constant.
            std::vector<double> n(nq * dv), e(nq), dphq(nq * F, 0.0), dphk(nk * F, 0.0), dvv(nk * dv, 0.0);
            for (index_t i = 0; i < nq; ++i) {
                double go = 0;
                for (index_t c = 0; c < dv; ++c) {
                    const double gi = double(g.dout[(p * nq + i) * dv + c]);
                    n[i * dv + c] = gi / h.den[i];
                    go += gi * h.out[i * dv + c];
                }
                e[i] = h.clamped[i] ? 0.0 : -go / h.den[i];
            }
            for (index_t i = 0; i < nq; ++i)
                for (index_t j = 0; j < nk; ++j) {
                    if (h.w[i * nk + j] == 0.0) continue;  // invisible (or a weight that underflowed)
                    double da = e[i];
                    for (index_t c = 0; c < dv; ++c) {
                        da += n[i * dv + c] * h.v[j * dv + c];
                        dvv[j * dv + c] += h.a[i * nk + j] * n[i * dv + c];
                    }
                    const double dw = da * h.w[i * nk + j];
                    for (index_t f = 0; f < F; ++f) {
                        dphq[i * F + f] += dw * h.phk[j * F + f];
                        dphk[j * F + f] += dw * h.phq[i * F + f];
                    }
                }
            for (index_t i = 0; i < nq; ++i) {
                sp.row_vjp(&h.xq[i * d], &h.uq[i * P], h.cq[i], &h.phq[i * F], &dphq[i * F], s, dx.data(),
                           d_omega.data(), db);
                for (index_t c = 0; c < d; ++c) g.dq[(p * nq + i) * d + c] = T(dx[c]);
            }
            for (index_t j = 0; j < pb.k_len; ++j) {
                std::fill(dx.begin(), dx.end(), 0.0);
                if (j < nk)
                    sp.row_vjp(&h.xk[j * d], &h.uk[j * P], h.ck[j], &h.phk[j * F], &dphk[j * F], s, dx.data(),
                               d_omega.data(), db);
                for (index_t c = 0; c < d; ++c) g.dk[(p * pb.k_len + j) * d + c] = T(dx[c]);
                for (index_t c = 0; c < dv; ++c) g.dv[(p * pb.k_len + j) * dv + c] = T(j < nk ? dvv[j * dv + c] : 0.0);
            }
        }
        if (g.d_omega) std::transform(d_omega.begin(), d_omega.end(), g.d_omega, [](double x) { return T(x); });
        if (g.d_bias && db) std::transform(d_bias.begin(), d_bias.begin() + m, g.d_bias, [](double x) { return T(x); });
    }

    /// The state holds S = Σ_t e^{c_t − C} φ̃(k_t) v_tᵀ and z = Σ_t e^{c_t − C} φ̃(k_t) at the
    /// maximum key shift C so far (C = the first key's shift at step 0).
    template <class Map, class T>
    static void step(const kb::step_problem<Map, T>& sp) {
        const spectral<Map> spec(sp.spec);
        const index_t d = spec.d, F = spec.F, dv = sp.dv;
        const double s = double(sp.input_scale);
        std::vector<double> x(d), u(spec.P), phk(F), phq(F);
        for (index_t p = 0; p < sp.problems; ++p) {
            double* S = sp.state.S + p * F * dv;
            double* z = sp.state.z + p * F;
            double& C = sp.state.C[p];
            const double ck = spec.row(sp.k + p * d, s, true, x.data(), u.data(), phk.data());
            if (sp.state.steps[p] == 0 || ck > C) {
                const double r = sp.state.steps[p] == 0 ? 0.0 : std::exp(C - ck);
                for (index_t i = 0; i < F * dv; ++i) S[i] *= r;
                for (index_t f = 0; f < F; ++f) z[f] *= r;
                C = ck;
            }
            ++sp.state.steps[p];
            const double wk = std::exp(ck - C);
            for (index_t f = 0; f < F; ++f) {
                z[f] += wk * phk[f];
                for (index_t c = 0; c < dv; ++c) S[f * dv + c] += wk * phk[f] * double(sp.v[p * dv + c]);
            }
            spec.row(sp.q + p * d, s, true, x.data(), u.data(), phq.data());
            double dn = 0;
            for (index_t f = 0; f < F; ++f) dn += phq[f] * z[f];
            bool cl = false;
            dn = guard<Map::is_positive>(dn, sp.eps, cl);
            for (index_t c = 0; c < dv; ++c) {
                double num = 0;
                for (index_t f = 0; f < F; ++f) num += phq[f] * S[f * dv + c];
                sp.out[p * dv + c] = T(num / dn);
            }
        }
    }
};

// ---- the concept -------------------------------------------------------------------------------

static_assert(kattn::execution_backend<quadratic>);
static_assert(std::is_same_v<kattn::execution_backend_traits<quadratic>::row_ops, kattn::detail::scalar_ops>);
static_assert(std::is_same_v<kattn::execution_backend_traits<quadratic>::gemm, kattn::detail::scalar_gemm>);

/// Three of the four primitives: not a backend.
struct no_step {
    static constexpr const char* name = "no_step";
    template <class Map, class T>
    static void features(const kb::feature_problem<Map, T>&);
    template <class Map, class T>
    static void forward(const kb::attention_problem<Map, T>&, T*);
    template <class Map, class T>
    static void backward(const kb::attention_problem<Map, T>&, const kb::attention_gradients<T>&);
};
static_assert(!kattn::execution_backend<no_step>);

/// The pre-0.2 ten-argument `step` does not satisfy the contract either.
struct old_step : no_step {
    template <class Map, class T>
    static void step(const kb::spectral_view<Map, T>&, index_t, index_t, T, double, const kb::recurrent_state_view&,
                     const T*, const T*, const T*, T*);
};
static_assert(!kattn::execution_backend<old_step>);
static_assert(kattn::execution_backend<kb::reference> && kattn::execution_backend<kb::simd>);

// ---- agreement with the reference oracle ---------------------------------------------------------

constexpr double tol = 1e-10;
constexpr std::size_t kB = 2, kH = 2, kD = 6, kDv = 4;

template <class C, class Backend>
using op_t = kattn::linear_attention<typename C::map, typename C::sampler, Backend, double>;

template <class C, class Backend>
op_t<C, Backend> make_op() {
    auto cfg = kt::cases::make_config<C>(index_t(kD), index_t(kDv), 12, 21);
    if (!C::map::is_positive) cfg.sigma = 3.0;  // a wide kernel keeps signed denominators away from 0
    op_t<C, Backend> op(cfg);
    if constexpr (C::map::uses_bias) op.set_bias(kt::randn<double, 1>({op.bias().size()}, 77, 0.5));
    return op;
}

/// q, k, v, dout of [kB, kH, L, ·]; one large key per sequence (the stabiliser must rescale).
struct inputs {
    xt::xtensor<double, 4> q, k, v, g;
    inputs(std::size_t Lq, std::size_t Lk, std::uint64_t seed)
        : q(kt::randn<double, 4>({kB, kH, Lq, kD}, seed, 0.7)),
          k(kt::randn<double, 4>({kB, kH, Lk, kD}, seed + 1, 0.7)),
          v(kt::randn<double, 4>({kB, kH, Lk, kDv}, seed + 2)),
          g(kt::randn<double, 4>({kB, kH, Lq, kDv}, seed + 3)) {
        for (std::size_t b = 0; b < kB; ++b)
            for (std::size_t i = 0; i < kD; ++i) k(b, 1, 2, i) *= 4.0;
    }
};

template <class C>
void compare(const inputs& x, bool causal, const std::vector<index_t>* lengths) {
    const auto ref = make_op<C, kb::reference>();
    const auto quad = make_op<C, quadratic>();
    REQUIRE(quad.omega() == ref.omega());
    auto fwd = [&](const auto& op) {
        if (lengths) {
            const kattn::key_lengths kl(*lengths);
            return causal ? op(x.q, x.k, x.v, kattn::causal, kl) : op(x.q, x.k, x.v, kl);
        }
        return causal ? op(x.q, x.k, x.v, kattn::causal) : op(x.q, x.k, x.v);
    };
    auto bwd = [&](const auto& op) {
        if (lengths) {
            const kattn::key_lengths kl(*lengths);
            return causal ? op.backward(x.q, x.k, x.v, x.g, kattn::causal, kl) : op.backward(x.q, x.k, x.v, x.g, kl);
        }
        return causal ? op.backward(x.q, x.k, x.v, x.g, kattn::causal) : op.backward(x.q, x.k, x.v, x.g);
    };
    CHECK(kt::rel_err(fwd(quad), fwd(ref)) < tol);
    const auto gq = bwd(quad), gr = bwd(ref);
    CHECK(kt::rel_err(gq.dq, gr.dq) < tol);
    CHECK(kt::rel_err(gq.dk, gr.dk) < tol);
    CHECK(kt::rel_err(gq.dv, gr.dv) < tol);
    CHECK(kt::rel_err(gq.d_omega, gr.d_omega) < tol);
    REQUIRE(gq.d_bias.size() == gr.d_bias.size());
    if (gr.d_bias.size()) CHECK(kt::rel_err(gq.d_bias, gr.d_bias) < tol);
}

}  // namespace

TEST_CASE_TEMPLATE("a backend written from the contract alone (quadratic) equals the reference backend", C,
                   kt::cases::favor, kt::cases::favor_hyperbolic, kt::cases::trig, kt::cases::elu,
                   kt::cases::nonstationary, kt::cases::positive_nonstationary, kt::cases::cos2) {
    INFO(C::name);
    const std::vector<index_t> lengths{9, 4};
    SUBCASE("non-causal") { compare<C>(inputs(9, 9, 1), false, nullptr); }
    SUBCASE("non-causal, q_len != k_len") { compare<C>(inputs(5, 9, 11), false, nullptr); }
    SUBCASE("causal") { compare<C>(inputs(9, 9, 21), true, nullptr); }
    SUBCASE("key lengths") { compare<C>(inputs(7, 9, 31), false, &lengths); }
    SUBCASE("causal + key lengths") { compare<C>(inputs(9, 9, 41), true, &lengths); }
    SUBCASE("features()") {
        const auto x = kt::randn<double, 2>({13, kD}, 51, 0.7);
        CHECK(kt::rel_err(make_op<C, quadratic>().features(x), make_op<C, kb::reference>().features(x)) < tol);
    }
    SUBCASE("decoding steps") {
        const auto ref = make_op<C, kb::reference>();
        const auto quad = make_op<C, quadratic>();
        const inputs x(6, 6, 61);
        auto sr = ref.initial_state(kB, kH), sq = quad.initial_state(kB, kH);
        for (std::size_t t = 0; t < 6; ++t) {
            INFO("step ", t);
            xt::xtensor<double, 3> qt = xt::view(x.q, xt::all(), xt::all(), t, xt::all());
            xt::xtensor<double, 3> kt_ = xt::view(x.k, xt::all(), xt::all(), t, xt::all());
            xt::xtensor<double, 3> vt = xt::view(x.v, xt::all(), xt::all(), t, xt::all());
            CHECK(kt::rel_err(quad.step(sq, qt, kt_, vt), ref.step(sr, qt, kt_, vt)) < tol);
            // The state itself follows the documented convention (S, z at the running maximum C).
            CHECK(kt::rel_err(sq.S, sr.S) < tol);
            CHECK(kt::rel_err(sq.z, sr.z) < tol);
            CHECK(kt::rel_err(sq.C, sr.C) < tol);
            CHECK(sq.steps == sr.steps);
        }
        // And the steps reproduce the quadratic backend's own causal forward at the last token.
        const auto full = quad(x.q, x.k, x.v, kattn::causal);
        auto s2 = quad.initial_state(kB, kH);
        xt::xtensor<double, 3> last;
        for (std::size_t t = 0; t < 6; ++t) {
            xt::xtensor<double, 3> qt = xt::view(x.q, xt::all(), xt::all(), t, xt::all());
            xt::xtensor<double, 3> kt_ = xt::view(x.k, xt::all(), xt::all(), t, xt::all());
            xt::xtensor<double, 3> vt = xt::view(x.v, xt::all(), xt::all(), t, xt::all());
            last = quad.step(s2, qt, kt_, vt);
        }
        xt::xtensor<double, 3> want = xt::view(full, xt::all(), xt::all(), 5, xt::all());
        CHECK(kt::rel_err(last, want) < tol);
    }
}
