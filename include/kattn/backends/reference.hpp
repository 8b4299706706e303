// kattn/backends/reference.hpp — the scalar oracle backend.
//
// Straightforward loops, every intermediate in double (inputs are widened on entry,
// results rounded once on exit), one head after another: slow, simple and the
// reference every other backend is tested against. It materialises the L × F feature
// matrices of one head, which the optimised backends never do.
//
// Stabiliser (maps with has_stabiliser, i.e. favor): a query row uses its own shift
// c_q; key j gets φ̃_j = φ(k_j)·e^{-c_j} with its own c_j and enters the state with
// weight e^{c_j − C}, where C is the maximum c over the keys the query can see (all
// valid keys, or keys j ≤ i when causal: a running maximum, so future keys never
// affect earlier outputs). All shifts cancel exactly in the attention ratio, so
// gradients treat them as constants.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "execution_backend.hpp"
#include "../linalg/gemm.hpp"
#include "../linalg/row_ops.hpp"
#include "problem.hpp"

namespace kattn::backends {

struct reference {
    static constexpr const char* name = "reference";
    using row_ops = detail::scalar_ops;
    using gemm = detail::scalar_gemm;

    /// Spectral parameters widened to double once per call.
    template <class Map>
    struct head_params {
        index_t d, m, P, F;
        map_params_t<Map> params;
        std::vector<double> omega, bias;

        template <class T>
        explicit head_params(const backends::spectral_view<Map, T>& s)
            : d(s.d),
              m(s.m),
              P(Map::projection_dim(s.m)),
              F(Map::feature_dim(s.m)),
              params(s.params),
              omega(s.omega, s.omega + s.d * Map::projection_dim(s.m)) {
            if (s.bias) bias.assign(s.bias, s.bias + s.m);
        }
        const double* b() const { return bias.empty() ? nullptr : bias.data(); }

        /// u = Ωᵀ x for one row.
        void project(const double* x, double* u) const {
            for (index_t p = 0; p < P; ++p) u[p] = 0;
            for (index_t i = 0; i < d; ++i)
                for (index_t p = 0; p < P; ++p) u[p] += x[i] * omega[i * P + p];
        }
        /// φ of one row with the given shift; returns the shift used (row_shift when
        /// `stabilise`, else 0).
        double activate(const double* x, double* u, double* phi, bool stabilise) const {
            project(x, u);
            double c = 0;
            if constexpr (Map::has_stabiliser)
                if (stabilise) c = Map::template row_shift<detail::scalar_ops>(params, d, m, x, u, b());
            Map::template activate<detail::scalar_ops>(params, d, m, x, u, b(), c, phi);
            return c;
        }
        /// VJP of one row: adds Ω du + direct term (times scale) to dx, x duᵀ to dΩ, db.
        void vjp(const double* x, double c, const double* phi, const double* dphi, double* dx, double scale,
                 double* d_omega, double* d_bias, std::vector<double>& work) const {
            work.assign(static_cast<std::size_t>(2 * P + d + Map::workspace(m)), 0.0);
            double* u = work.data();
            double* du = u + P;
            double* dxd = du + P;
            project(x, u);
            Map::template activate_vjp<detail::scalar_ops>(params, d, m, x, u, b(), c, phi, dphi, du, dxd, d_bias,
                                                           dxd + d);
            for (index_t i = 0; i < d; ++i) {
                double acc = dxd[i];
                for (index_t p = 0; p < P; ++p) {
                    acc += omega[i * P + p] * du[p];
                    d_omega[i * P + p] += x[i] * du[p];
                }
                dx[i] += scale * acc;
            }
        }
    };

    template <class Map, class T>
    static void features(const backends::feature_problem<Map, T>& pb) {
        const head_params<Map> hp(pb.spec);
        std::vector<double> x(hp.d), u(hp.P), phi(hp.F);
        for (index_t r = 0; r < pb.n; ++r) {
            for (index_t i = 0; i < hp.d; ++i) x[i] = double(pb.input_scale) * pb.x[r * hp.d + i];
            hp.activate(x.data(), u.data(), phi.data(), false);
            for (index_t f = 0; f < hp.F; ++f) pb.phi[r * hp.F + f] = static_cast<T>(phi[f]);
        }
    }

    /// Features and shifts of one head's queries and valid keys, widened to double.
    template <class Map>
    struct head_state {
        index_t nq, nk, d, dv, F;
        std::vector<double> xq, xk, v, phq, phk, cq, ck;

        template <class T>
        head_state(const head_params<Map>& hp, const backends::attention_problem<Map, T>& pb, index_t p)
            : nq(pb.q_len), nk(pb.valid_keys(p)), d(hp.d), dv(pb.dv), F(hp.F) {
            const double s = double(pb.input_scale);
            xq.resize(nq * d);
            xk.resize(nk * d);
            v.resize(nk * dv);
            for (index_t i = 0; i < nq * d; ++i) xq[i] = s * pb.q[p * pb.q_len * d + i];
            for (index_t i = 0; i < nk * d; ++i) xk[i] = s * pb.k[p * pb.k_len * d + i];
            for (index_t i = 0; i < nk * dv; ++i) v[i] = pb.v[p * pb.k_len * dv + i];
            phq.resize(nq * F);
            phk.resize(nk * F);
            cq.resize(nq);
            ck.resize(nk);
            std::vector<double> u(hp.P);
            for (index_t i = 0; i < nq; ++i) cq[i] = hp.activate(&xq[i * d], u.data(), &phq[i * F], true);
            for (index_t j = 0; j < nk; ++j) ck[j] = hp.activate(&xk[j * d], u.data(), &phk[j * F], true);
        }
    };

    /// Key state S = Σ_j w_j φ̃_j v_jᵀ, z = Σ_j w_j φ̃_j of the keys added so far, at the
    /// running maximum C of their shifts (w_j = e^{c_j − C}); rescaled when C grows.
    template <class Map>
    struct running_keys {
        const head_state<Map>& hs;
        std::vector<double> S, z;
        double C = -std::numeric_limits<double>::infinity();

        explicit running_keys(const head_state<Map>& h) : hs(h), S(h.F * h.dv, 0.0), z(h.F, 0.0) {}

        void add(index_t j) {
            const index_t F = hs.F, dv = hs.dv;
            const double Cn = std::max(C, hs.ck[j]);
            if (Cn > C && std::isfinite(C)) {
                const double r = std::exp(C - Cn);
                for (auto& s : S) s *= r;
                for (auto& s : z) s *= r;
            }
            C = Cn;
            const double w = std::exp(hs.ck[j] - C);
            for (index_t f = 0; f < F; ++f) {
                const double a = w * hs.phk[j * F + f];
                z[f] += a;
                for (index_t c = 0; c < dv; ++c) S[f * dv + c] += a * hs.v[j * dv + c];
            }
        }
    };

    /// Forward pass of one head in double. Fills out (nq × dv), den (nq, guarded),
    /// clamped flags, and the reference shift C_i each query saw.
    template <class Map>
    static void head_forward(const head_state<Map>& hs, bool causal, double eps, std::vector<double>& out,
                             std::vector<double>& den, std::vector<char>& clamped, std::vector<double>& Cq) {
        const index_t F = hs.F, dv = hs.dv;
        running_keys<Map> rk(hs);
        auto& S = rk.S;
        auto& z = rk.z;
        auto& C = rk.C;
        out.assign(hs.nq * dv, 0.0);
        den.assign(hs.nq, 0.0);
        clamped.assign(hs.nq, 0);
        Cq.assign(hs.nq, 0.0);
        auto add_key = [&](index_t j) { rk.add(j); };
        auto emit = [&](index_t i) {
            const double* ph = &hs.phq[i * F];
            double dn = 0;
            for (index_t f = 0; f < F; ++f) dn += ph[f] * z[f];
            bool cl = false;
            dn = detail::guard_denominator<Map::is_positive>(dn, eps, cl);
            den[i] = dn;
            clamped[i] = cl;
            Cq[i] = C;
            for (index_t c = 0; c < dv; ++c) {
                double acc = 0;
                for (index_t f = 0; f < F; ++f) acc += ph[f] * S[f * dv + c];
                out[i * dv + c] = acc / dn;
            }
        };
        if (!causal) {
            for (index_t j = 0; j < hs.nk; ++j) add_key(j);
            for (index_t i = 0; i < hs.nq; ++i) emit(i);
        } else {
            for (index_t i = 0; i < hs.nq; ++i) {
                if (i < hs.nk) add_key(i);
                emit(i);
            }
        }
    }

    template <class Map, class T>
    static void forward(const backends::attention_problem<Map, T>& pb, T* out) {
        const head_params<Map> hp(pb.spec);
        std::vector<double> o, den, Cq;
        std::vector<char> cl;
        for (index_t p = 0; p < pb.problems; ++p) {
            const head_state<Map> hs(hp, pb, p);
            head_forward(hs, pb.causal, pb.eps, o, den, cl, Cq);
            for (index_t i = 0; i < pb.q_len * pb.dv; ++i) out[p * pb.q_len * pb.dv + i] = static_cast<T>(o[i]);
        }
    }

    template <class Map, class T>
    static void backward(const backends::attention_problem<Map, T>& pb, const backends::attention_gradients<T>& g) {
        const head_params<Map> hp(pb.spec);
        const index_t d = hp.d, F = hp.F, dv = pb.dv, P = hp.P, m = hp.m;
        std::vector<double> d_omega(d * P, 0.0), d_bias(m, 0.0), o, den, Cq, work;
        std::vector<char> cl;
        const double scale = double(pb.input_scale);
        for (index_t p = 0; p < pb.problems; ++p) {
            const head_state<Map> hs(hp, pb, p);
            head_forward(hs, pb.causal, pb.eps, o, den, cl, Cq);
            const index_t nq = hs.nq, nk = hs.nk;
            // n_i = G_i / den_i, e_i = −(G_i·out_i)/den_i (0 where the guard clamped).
            std::vector<double> n(nq * dv), e(nq);
            for (index_t i = 0; i < nq; ++i) {
                double ge = 0;
                for (index_t c = 0; c < dv; ++c) {
                    const double gi = g.dout[p * nq * dv + i * dv + c];
                    n[i * dv + c] = gi / den[i];
                    ge += gi * o[i * dv + c];
                }
                e[i] = cl[i] ? 0.0 : -ge / den[i];
            }
            std::vector<double> dphq(nq * F, 0.0), dphk(nk * F, 0.0), dvv(nk * dv, 0.0);
            // Query side: dΦ_Q,i = S_i n_i + z_i e_i with the state query i saw
            // (recomputed in the forward direction).
            {
                running_keys<Map> rk(hs);
                const auto& S = rk.S;
                const auto& z = rk.z;
                auto add_key = [&](index_t j) { rk.add(j); };
                auto grad_q = [&](index_t i) {
                    for (index_t f = 0; f < F; ++f) {
                        double acc = z[f] * e[i];
                        for (index_t c = 0; c < dv; ++c) acc += S[f * dv + c] * n[i * dv + c];
                        dphq[i * F + f] = acc;
                    }
                };
                if (!pb.causal) {
                    for (index_t j = 0; j < nk; ++j) add_key(j);
                    for (index_t i = 0; i < nq; ++i) grad_q(i);
                } else {
                    for (index_t i = 0; i < nq; ++i) {
                        if (i < nk) add_key(i);
                        grad_q(i);
                    }
                }
            }
            // Key side: D = Σ_{i sees j} e^{C_ref − C_i} φ_q,i n_iᵀ, dz likewise;
            // dφ̃_j = e^{c_j − C_ref}(D v_j + dz), dv_j = e^{c_j − C_ref} Dᵀ φ̃_j.
            {
                std::vector<double> D(F * dv, 0.0), dz(F, 0.0);
                auto add_query = [&](index_t i, double w) {
                    for (index_t f = 0; f < F; ++f) {
                        const double a = w * hs.phq[i * F + f];
                        dz[f] += a * e[i];
                        for (index_t c = 0; c < dv; ++c) D[f * dv + c] += a * n[i * dv + c];
                    }
                };
                auto grad_k = [&](index_t j, double Cref) {
                    const double w = std::exp(hs.ck[j] - Cref);
                    for (index_t f = 0; f < F; ++f) {
                        double acc = dz[f];
                        for (index_t c = 0; c < dv; ++c) acc += D[f * dv + c] * hs.v[j * dv + c];
                        dphk[j * F + f] = w * acc;
                    }
                    for (index_t c = 0; c < dv; ++c) {
                        double acc = 0;
                        for (index_t f = 0; f < F; ++f) acc += D[f * dv + c] * hs.phk[j * F + f];
                        dvv[j * dv + c] = w * acc;
                    }
                };
                if (!pb.causal) {
                    const double Cref = nq ? Cq[0] : 0.0;  // one common C in non-causal mode
                    for (index_t i = 0; i < nq; ++i) add_query(i, 1.0);
                    for (index_t j = 0; j < nk; ++j) grad_k(j, Cref);
                } else {
                    double Cref = 0;
                    for (index_t i = nq - 1; i >= 0; --i) {
                        if (i == nq - 1) Cref = Cq[i];
                        const double r = std::exp(Cq[i] - Cref);  // ≤ 1: C is non-decreasing in i
                        if (r != 1.0) {
                            for (auto& s : D) s *= r;
                            for (auto& s : dz) s *= r;
                        }
                        Cref = Cq[i];
                        add_query(i, 1.0);
                        if (i < nk) grad_k(i, Cref);
                    }
                }
            }
            // Feature-map VJPs: rows of q and k (scaled inputs), into dq, dk, dΩ, db.
            std::vector<double> dx(d);
            for (index_t i = 0; i < nq; ++i) {
                std::fill(dx.begin(), dx.end(), 0.0);
                hp.vjp(&hs.xq[i * d], hs.cq[i], &hs.phq[i * F], &dphq[i * F], dx.data(), scale, d_omega.data(),
                       d_bias.data(), work);
                for (index_t c = 0; c < d; ++c) g.dq[p * nq * d + i * d + c] = static_cast<T>(dx[c]);
            }
            for (index_t j = 0; j < pb.k_len; ++j) {
                std::fill(dx.begin(), dx.end(), 0.0);
                if (j < nk)
                    hp.vjp(&hs.xk[j * d], hs.ck[j], &hs.phk[j * F], &dphk[j * F], dx.data(), scale, d_omega.data(),
                           d_bias.data(), work);
                for (index_t c = 0; c < d; ++c) g.dk[p * pb.k_len * d + j * d + c] = static_cast<T>(dx[c]);
                for (index_t c = 0; c < dv; ++c)
                    g.dv[p * pb.k_len * dv + j * dv + c] = static_cast<T>(j < nk ? dvv[j * dv + c] : 0.0);
            }
        }
        if (g.d_omega)
            for (index_t i = 0; i < d * P; ++i) g.d_omega[i] = static_cast<T>(d_omega[i]);
        if (g.d_bias)
            for (index_t i = 0; i < m; ++i) g.d_bias[i] = static_cast<T>(d_bias[i]);
    }

    /// One decoding step for every head: adds (k_t, v_t) to the state, then attends q_t.
    /// q, k: [problems, d]; v, out: [problems, dv]. Equals the causal forward token by token.
    template <class Map, class T>
    static void step(const backends::step_problem<Map, T>& sp) {
        const auto& st = sp.state;
        const index_t problems = sp.problems, dv = sp.dv;
        const T input_scale = sp.input_scale;
        const double eps = sp.eps;
        const T *q = sp.q, *k = sp.k, *v = sp.v;
        T* out = sp.out;
        const head_params<Map> hp(sp.spec);
        const index_t d = hp.d, F = hp.F;
        std::vector<double> x(d), u(hp.P), phq(F), phk(F);
        for (index_t p = 0; p < problems; ++p) {
            double* S = st.S + p * F * dv;
            double* z = st.z + p * F;
            for (index_t i = 0; i < d; ++i) x[i] = double(input_scale) * k[p * d + i];
            const double ck = hp.activate(x.data(), u.data(), phk.data(), true);
            double& C = st.C[p];
            const double Cn = st.steps[p] == 0 ? ck : std::max(C, ck);
            if (st.steps[p] > 0 && Cn > C) {
                const double r = std::exp(C - Cn);
                for (index_t f = 0; f < F * dv; ++f) S[f] *= r;
                for (index_t f = 0; f < F; ++f) z[f] *= r;
            }
            C = Cn;
            ++st.steps[p];
            const double w = std::exp(ck - C);
            for (index_t f = 0; f < F; ++f) {
                z[f] += w * phk[f];
                for (index_t c = 0; c < dv; ++c) S[f * dv + c] += w * phk[f] * double(v[p * dv + c]);
            }
            for (index_t i = 0; i < d; ++i) x[i] = double(input_scale) * q[p * d + i];
            hp.activate(x.data(), u.data(), phq.data(), true);
            double dn = 0;
            for (index_t f = 0; f < F; ++f) dn += phq[f] * z[f];
            bool cl = false;
            dn = detail::guard_denominator<Map::is_positive>(dn, eps, cl);
            for (index_t c = 0; c < dv; ++c) {
                double acc = 0;
                for (index_t f = 0; f < F; ++f) acc += phq[f] * S[f * dv + c];
                out[p * dv + c] = static_cast<T>(acc / dn);
            }
        }
    }
};

}  // namespace kattn::backends
