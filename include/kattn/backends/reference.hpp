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
#include "split.hpp"

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
    /// running maximum C of their shifts (w_j = e^{c_j − C}); rescaled when C grows. It
    /// may start from the state of keys outside the slice (split contract, split.hpp).
    template <class Map>
    struct running_keys {
        const head_state<Map>& hs;
        std::vector<double> S, z;
        double C = -std::numeric_limits<double>::infinity();

        running_keys(const head_state<Map>& h, const double* S0 = nullptr, const double* z0 = nullptr,
                     double C0 = -std::numeric_limits<double>::infinity())
            : hs(h), S(h.F * h.dv, 0.0), z(h.F, 0.0) {
            if (S0 && std::isfinite(C0)) {
                S.assign(S0, S0 + h.F * h.dv);
                z.assign(z0, z0 + h.F);
                C = C0;
            }
        }

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

    /// States of every head in double (S, z, C per head; C = −∞: empty).
    struct state_block {
        index_t F = 0, dv = 0;
        std::vector<double> S, z, C;
        state_block(index_t problems, index_t F_, index_t dv_)
            : F(F_),
              dv(dv_),
              S(problems * F_ * dv_, 0.0),
              z(problems * F_, 0.0),
              C(problems, -std::numeric_limits<double>::infinity()) {}
        const double* Sp(index_t p) const { return S.data() + p * F * dv; }
        const double* zp(index_t p) const { return z.data() + p * F; }
    };

    /// Sends the heads' own totals (in T) through `exchange`; returns the others' part.
    template <class T>
    static state_block exchange_states(const typename backends::slice_link<T>::exchange& exchange,
                                       const state_block& own, index_t problems) {
        const index_t F = own.F, dv = own.dv;
        std::vector<T> oS(own.S.begin(), own.S.end()), oz(own.z.begin(), own.z.end()), oC(own.C.begin(), own.C.end());
        std::vector<T> xS(oS.size()), xz(oz.size()), xC(oC.size());
        exchange(backends::slice_states<const T>{oS.data(), oz.data(), oC.data()},
                 backends::slice_states<T>{xS.data(), xz.data(), xC.data()});
        state_block others(problems, F, dv);
        for (std::size_t i = 0; i < xS.size(); ++i) others.S[i] = double(xS[i]);
        for (std::size_t i = 0; i < xz.size(); ++i) others.z[i] = double(xz[i]);
        for (std::size_t i = 0; i < xC.size(); ++i) others.C[i] = double(xC[i]);
        return others;
    }

    /// Heads' features, and (with a link) the state of the keys outside the slice.
    template <class Map, class T>
    static std::vector<head_state<Map>> prepare(const head_params<Map>& hp,
                                                const backends::attention_problem<Map, T>& pb,
                                                const backends::slice_link<T>* link, state_block& carry) {
        std::vector<head_state<Map>> hs;
        hs.reserve(pb.problems);
        for (index_t p = 0; p < pb.problems; ++p) hs.emplace_back(hp, pb, p);
        if (link) {
            state_block own(pb.problems, hp.F, pb.dv);
            for (index_t p = 0; p < pb.problems; ++p) {
                running_keys<Map> rk(hs[p]);
                for (index_t j = 0; j < hs[p].nk; ++j) rk.add(j);
                std::copy(rk.S.begin(), rk.S.end(), own.S.begin() + p * hp.F * pb.dv);
                std::copy(rk.z.begin(), rk.z.end(), own.z.begin() + p * hp.F);
                own.C[p] = rk.C;
            }
            carry = exchange_states<T>(link->keys, own, pb.problems);
        }
        return hs;
    }

    /// Forward pass of one head in double, its keys' state starting from the carried
    /// state (head p of `carry`). Fills out (nq × dv), den (nq, guarded), clamped
    /// flags, and the reference shift C_i each query saw.
    template <class Map>
    static void head_forward(const head_state<Map>& hs, bool causal, double eps, const state_block& carry, index_t p,
                             std::vector<double>& out, std::vector<double>& den, std::vector<char>& clamped,
                             std::vector<double>& Cq) {
        const index_t F = hs.F, dv = hs.dv;
        running_keys<Map> rk(hs, carry.Sp(p), carry.zp(p), carry.C[p]);
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
        forward_impl<Map, T>(pb, out, nullptr);
    }
    /// Forward pass of a slice of a split sequence (split.hpp).
    template <class Map, class T>
    static void forward(const backends::attention_problem<Map, T>& pb, T* out, const backends::slice_link<T>& link) {
        forward_impl(pb, out, &link);
    }

    template <class Map, class T>
    static void backward(const backends::attention_problem<Map, T>& pb, const backends::attention_gradients<T>& g) {
        backward_impl<Map, T>(pb, g, nullptr);
    }
    /// Backward pass of a slice of a split sequence (split.hpp).
    template <class Map, class T>
    static void backward(const backends::attention_problem<Map, T>& pb, const backends::attention_gradients<T>& g,
                         const backends::slice_link<T>& link) {
        backward_impl(pb, g, &link);
    }

    template <class Map, class T>
    static void forward_impl(const backends::attention_problem<Map, T>& pb, T* out,
                             const backends::slice_link<T>* link) {
        const head_params<Map> hp(pb.spec);
        state_block carry(pb.problems, hp.F, pb.dv);
        const auto hs = prepare(hp, pb, link, carry);
        std::vector<double> o, den, Cq;
        std::vector<char> cl;
        for (index_t p = 0; p < pb.problems; ++p) {
            head_forward(hs[p], pb.causal, pb.eps, carry, p, o, den, cl, Cq);
            for (index_t i = 0; i < pb.q_len * pb.dv; ++i) out[p * pb.q_len * pb.dv + i] = static_cast<T>(o[i]);
        }
    }

    /// What the key side of one head's backward needs from its query side.
    struct query_side {
        std::vector<double> n, e, Cq, dphq;
    };

    template <class Map, class T>
    static void backward_impl(const backends::attention_problem<Map, T>& pb, const backends::attention_gradients<T>& g,
                              const backends::slice_link<T>* link) {
        const head_params<Map> hp(pb.spec);
        const index_t d = hp.d, F = hp.F, dv = pb.dv, P = hp.P, m = hp.m;
        std::vector<double> d_omega(d * P, 0.0), d_bias(m, 0.0), work;
        const double scale = double(pb.input_scale);
        state_block carry(pb.problems, F, dv);
        const auto hs = prepare(hp, pb, link, carry);
        std::vector<query_side> qs(pb.problems);
        state_block own_q(pb.problems, F, dv);
        for (index_t p = 0; p < pb.problems; ++p) {
            std::vector<double> o, den;
            std::vector<char> cl;
            auto& Q = qs[p];
            head_forward(hs[p], pb.causal, pb.eps, carry, p, o, den, cl, Q.Cq);
            const index_t nq = hs[p].nq;
            // n_i = G_i / den_i, e_i = −(G_i·out_i)/den_i (0 where the guard clamped).
            Q.n.resize(nq * dv);
            Q.e.resize(nq);
            for (index_t i = 0; i < nq; ++i) {
                double ge = 0;
                for (index_t c = 0; c < dv; ++c) {
                    const double gi = g.dout[p * nq * dv + i * dv + c];
                    Q.n[i * dv + c] = gi / den[i];
                    ge += gi * o[i * dv + c];
                }
                Q.e[i] = cl[i] ? 0.0 : -ge / den[i];
            }
            // Query side: dΦ_Q,i = S_i n_i + z_i e_i with the state query i saw
            // (recomputed in the forward direction).
            Q.dphq.assign(nq * F, 0.0);
            running_keys<Map> rk(hs[p], carry.Sp(p), carry.zp(p), carry.C[p]);
            auto grad_q = [&](index_t i) {
                for (index_t f = 0; f < F; ++f) {
                    double acc = rk.z[f] * Q.e[i];
                    for (index_t c = 0; c < dv; ++c) acc += rk.S[f * dv + c] * Q.n[i * dv + c];
                    Q.dphq[i * F + f] = acc;
                }
            };
            if (!pb.causal) {
                for (index_t j = 0; j < hs[p].nk; ++j) rk.add(j);
                for (index_t i = 0; i < nq; ++i) grad_q(i);
            } else {
                for (index_t i = 0; i < nq; ++i) {
                    if (i < hs[p].nk) rk.add(i);
                    grad_q(i);
                }
            }
            // The slice's query totals at its first query's shift (split contract).
            if (link && nq > 0) {
                own_q.C[p] = Q.Cq[0];
                for (index_t i = 0; i < nq; ++i) {
                    const double w = std::exp(Q.Cq[0] - Q.Cq[i]);
                    for (index_t f = 0; f < F; ++f) {
                        const double a = w * hs[p].phq[i * F + f];
                        own_q.z[p * F + f] += a * Q.e[i];
                        for (index_t c = 0; c < dv; ++c) own_q.S[(p * F + f) * dv + c] += a * Q.n[i * dv + c];
                    }
                }
            }
        }
        state_block carry_q(pb.problems, F, dv);
        if (link) carry_q = exchange_states<T>(link->queries, own_q, pb.problems);
        for (index_t p = 0; p < pb.problems; ++p) {
            const auto& H = hs[p];
            const auto& Q = qs[p];
            const index_t nq = H.nq, nk = H.nk;
            std::vector<double> dphk(nk * F, 0.0), dvv(nk * dv, 0.0);
            // Key side: D = Σ_{i sees j} e^{C_ref − C_i} φ_q,i n_iᵀ, dz likewise, starting from
            // the queries outside the slice; dφ̃_j = e^{c_j − C_ref}(D v_j + dz),
            // dv_j = e^{c_j − C_ref} Dᵀ φ̃_j.
            {
                std::vector<double> D(carry_q.Sp(p), carry_q.Sp(p) + F * dv), dz(carry_q.zp(p), carry_q.zp(p) + F);
                double Cref = carry_q.C[p];
                auto move_ref = [&](double Cn) {  // Cn ≤ Cref: the factor is ≤ 1
                    if (std::isfinite(Cref) && Cn != Cref) {
                        const double r = std::exp(Cn - Cref);
                        for (auto& s : D) s *= r;
                        for (auto& s : dz) s *= r;
                    }
                    Cref = Cn;
                };
                auto add_query = [&](index_t i) {
                    for (index_t f = 0; f < F; ++f) {
                        const double a = H.phq[i * F + f];
                        dz[f] += a * Q.e[i];
                        for (index_t c = 0; c < dv; ++c) D[f * dv + c] += a * Q.n[i * dv + c];
                    }
                };
                auto grad_k = [&](index_t j) {
                    const double w = std::exp(H.ck[j] - Cref);
                    for (index_t f = 0; f < F; ++f) {
                        double acc = dz[f];
                        for (index_t c = 0; c < dv; ++c) acc += D[f * dv + c] * H.v[j * dv + c];
                        dphk[j * F + f] = w * acc;
                    }
                    for (index_t c = 0; c < dv; ++c) {
                        double acc = 0;
                        for (index_t f = 0; f < F; ++f) acc += D[f * dv + c] * H.phk[j * F + f];
                        dvv[j * dv + c] = w * acc;
                    }
                };
                if (!pb.causal) {
                    if (nq > 0) move_ref(Q.Cq[0]);  // one common C in non-causal mode
                    for (index_t i = 0; i < nq; ++i) add_query(i);
                    for (index_t j = 0; j < nk; ++j) grad_k(j);
                } else {
                    for (index_t i = nq - 1; i >= 0; --i) {
                        move_ref(Q.Cq[i]);  // C is non-decreasing in i
                        add_query(i);
                        if (i < nk) grad_k(i);
                    }
                }
            }
            // Feature-map VJPs: rows of q and k (scaled inputs), into dq, dk, dΩ, db.
            std::vector<double> dx(d);
            for (index_t i = 0; i < nq; ++i) {
                std::fill(dx.begin(), dx.end(), 0.0);
                hp.vjp(&H.xq[i * d], H.cq[i], &H.phq[i * F], &Q.dphq[i * F], dx.data(), scale, d_omega.data(),
                       d_bias.data(), work);
                for (index_t c = 0; c < d; ++c) g.dq[p * nq * d + i * d + c] = static_cast<T>(dx[c]);
            }
            for (index_t j = 0; j < pb.k_len; ++j) {
                std::fill(dx.begin(), dx.end(), 0.0);
                if (j < nk)
                    hp.vjp(&H.xk[j * d], H.ck[j], &H.phk[j * F], &dphk[j * F], dx.data(), scale, d_omega.data(),
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
