// kattn/samplers/gmm.hpp — Gaussian-mixture spectral density and sampler, incl. FSKA's NGSM.
//
//   p(ω) = Σ_c π_c N(ω; μ_c, L_c L_cᵀ) over R^D (D = d, or 2d for paired maps), with diagonal
//   or full (Cholesky) covariances, optionally `symmetric` (a random sign per dimension).
// The instance carries the mixture; there are no sampler parameters (params =
// no_sampler_params; an attention_config .sigma shorthand is rejected):
//   linear_attention<features::trig, samplers::gmm> attn(cfg, samplers::gmm::diagonal(…));
// Members: sample (reparameterised, seed-deterministic; dim must equal D); draw_noise,
// sample_with_noise, sample_backward (pathwise ∂L/∂μ_c, ∂L/∂L_c); log_prob, log_prob_grad (a
// kattn::spectral_density); expected_cos, stationary_kernel, nonstationary_kernel (closed
// form); ngsm(…). Symmetric full-covariance mixtures: log_prob and the kernels need
// D ≤ max_enumerated_dim (16). Formulas and conventions: docs/samplers.md §2 (gmm).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include <xtensor/xtensor.hpp>

#include "../core/config.hpp"
#include "../core/error.hpp"
#include "../core/random.hpp"
#include "sampler_params.hpp"

namespace kattn::samplers {

/// The randomness behind `count` draws of a gmm: component indices, Gaussian noise and
/// signs (all +1 unless symmetric). noise and sign are count × dim, row-major.
struct gmm_draws {
    index_t count = 0, dim = 0;
    std::vector<index_t> component;  ///< c_k
    std::vector<double> noise;       ///< ε_k
    std::vector<double> sign;        ///< σ_k ∈ {±1}
};

/// ∂L/∂(parameters) of a gmm from ∂L/∂ω (sample_backward), summed over the draws.
struct gmm_gradients {
    std::vector<double> mean;   ///< Q × D: ∂L/∂μ_ci
    std::vector<double> scale;  ///< Q × D: ∂L/∂L_c,ii (diagonal: ∂L/∂√s_ci)
    std::vector<double> log_var;  ///< Q × D: ∂L/∂log(L_c,ii²) = ½ L_c,ii ∂L/∂L_c,ii (diagonal: ∂L/∂log s_ci)
    std::vector<double> cholesky;  ///< Q × D × D (full only, else empty): ∂L/∂L_c,ij for j ≤ i, 0 above
    std::vector<index_t> count;    ///< Q: draws that chose component c
};

/// One explicit NGSM component (see the header comment).
struct ngsm_component {
    double weight = 1.0;
    std::vector<double> mean1, mean2;  ///< μ₁, μ₂ ∈ R^d
    std::vector<double> var1, var2;    ///< s₁, s₂ ∈ R^d, > 0
    double rho = 0.0;                  ///< correlation of ω₁_i and ω₂_i, in (−1, 1)
};

/// Initialisation of a random NGSM (gmm::ngsm(d, Q, seed, options)).
struct ngsm_options {
    double mean_scale = 1.0;  ///< means ~ N(0, mean_scale²); finite, ≥ 0
    double variance = 1.0;    ///< every s₁_qi, s₂_qi; finite, > 0
    double rho = 0.0;         ///< every ρ_q; in (−1, 1)
    bool symmetric = false;   ///< per-dimension random signs (see the header comment)
};

struct gmm {
    static constexpr bool is_random = true;
    static constexpr const char* name = "gmm";
    using params = no_sampler_params;  ///< this sampler's parameters
    /// Largest D for which a symmetric full-covariance mixture's log_prob and kernels
    /// enumerate the 2^D sign patterns.
    static constexpr index_t max_enumerated_dim = 16;

    using draws = gmm_draws;
    using gradients = gmm_gradients;

    // ---- construction ------------------------------------------------------------------

    /// Diagonal covariances: weights [Q], means [Q][D], variances [Q][D].
    static gmm diagonal(const std::vector<double>& weights, const std::vector<std::vector<double>>& means,
                        const std::vector<std::vector<double>>& variances, bool symmetric = false) {
        gmm g;
        g.init_common(weights, means, symmetric);
        g.diag_ = true;
        detail::require(variances.size() == std::size_t(g.Q_), "covariances",
                        std::to_string(g.Q_) + " rows of variances (one per component)", variances.size());
        g.var_.resize(std::size_t(g.Q_ * g.D_));
        for (index_t c = 0; c < g.Q_; ++c) {
            const auto& v = variances[std::size_t(c)];
            detail::require(v.size() == std::size_t(g.D_), "covariances",
                            std::to_string(g.D_) + " variances in row " + std::to_string(c), v.size());
            for (index_t i = 0; i < g.D_; ++i) {
                const double s = v[std::size_t(i)];
                detail::require(
                    std::isfinite(s) && s > 0.0, "covariances",
                    "finite variances > 0 (component " + std::to_string(c) + ", dim " + std::to_string(i) + ")", s);
                g.var_[std::size_t(c * g.D_ + i)] = s;
            }
        }
        g.finish();
        return g;
    }

    /// Diagonal covariances from xtensor expressions: weights [Q], means [Q, D], variances [Q, D].
    template <class E1, class E2, class E3>
    static gmm diagonal(const xt::xexpression<E1>& weights, const xt::xexpression<E2>& means,
                        const xt::xexpression<E3>& variances, bool symmetric = false) {
        const xt::xtensor<double, 1> w = weights.derived_cast();
        const xt::xtensor<double, 2> m = means.derived_cast();
        const xt::xtensor<double, 2> v = variances.derived_cast();
        return diagonal(to_vector(w), to_rows(m), to_rows(v, "covariances"), symmetric);
    }

    /// Full covariances: weights [Q], means [Q][D], cholesky [Q][D·D] (row-major lower
    /// factors L_c with a positive diagonal and zeros above it).
    static gmm full(const std::vector<double>& weights, const std::vector<std::vector<double>>& means,
                    const std::vector<std::vector<double>>& cholesky, bool symmetric = false) {
        gmm g;
        g.init_common(weights, means, symmetric);
        g.diag_ = false;
        const index_t D = g.D_;
        detail::require(cholesky.size() == std::size_t(g.Q_), "cholesky",
                        std::to_string(g.Q_) + " factors (one per component)", cholesky.size());
        g.chol_.resize(std::size_t(g.Q_ * D * D));
        for (index_t c = 0; c < g.Q_; ++c) {
            const auto& L = cholesky[std::size_t(c)];
            detail::require(L.size() == std::size_t(D * D), "cholesky",
                            std::to_string(D * D) + " entries (a " + std::to_string(D) + "x" + std::to_string(D) +
                                " row-major factor) for component " + std::to_string(c),
                            L.size());
            for (index_t i = 0; i < D; ++i)
                for (index_t j = 0; j < D; ++j) {
                    const double v = L[std::size_t(i * D + j)];
                    const std::string at = " (component " + std::to_string(c) + ", entry " + std::to_string(i) + "," +
                                           std::to_string(j) + ")";
                    detail::require(std::isfinite(v), "cholesky", "finite entries" + at, v);
                    if (j > i)
                        detail::require(v == 0.0, "cholesky", "a lower-triangular factor: 0 above the diagonal" + at,
                                        v);
                    if (j == i) detail::require(v > 0.0, "cholesky", "a positive diagonal" + at, v);
                    g.chol_[std::size_t((c * D + i) * D + j)] = v;
                }
        }
        g.finish();
        return g;
    }

    /// Full covariances from xtensor expressions: weights [Q], means [Q, D], cholesky [Q, D, D].
    template <class E1, class E2, class E3>
    static gmm full(const xt::xexpression<E1>& weights, const xt::xexpression<E2>& means,
                    const xt::xexpression<E3>& cholesky, bool symmetric = false) {
        const xt::xtensor<double, 1> w = weights.derived_cast();
        const xt::xtensor<double, 2> m = means.derived_cast();
        const xt::xtensor<double, 3> L = cholesky.derived_cast();
        std::vector<std::vector<double>> rows(L.shape()[0]);
        const std::size_t per = L.shape()[1] * L.shape()[2];
        detail::require(L.shape()[1] == L.shape()[2], "cholesky", "shape [Q, D, D]",
                        "[" + std::to_string(L.shape()[0]) + ", " + std::to_string(L.shape()[1]) + ", " +
                            std::to_string(L.shape()[2]) + "]");
        for (std::size_t c = 0; c < rows.size(); ++c) rows[c].assign(L.data() + c * per, L.data() + (c + 1) * per);
        return full(to_vector(w), to_rows(m), rows, symmetric);
    }

    /// NGSM from explicit components over the stacked pair (ω₁, ω₂) ∈ R^{2d}.
    static gmm ngsm(const std::vector<ngsm_component>& components, bool symmetric = false) {
        detail::require(!components.empty(), "components", "at least one NGSM component", 0);
        const std::size_t d = components[0].mean1.size();
        detail::require(d >= 1, "means", "mean1 of dimension d >= 1", d);
        bool correlated = false;
        std::vector<double> w;
        std::vector<std::vector<double>> mu, var;
        for (std::size_t q = 0; q < components.size(); ++q) {
            const auto& k = components[q];
            const std::string at = " (component " + std::to_string(q) + ")";
            detail::require(k.mean1.size() == d && k.mean2.size() == d, "means",
                            "mean1 and mean2 of size d = " + std::to_string(d) + at,
                            std::to_string(k.mean1.size()) + " and " + std::to_string(k.mean2.size()));
            detail::require(k.var1.size() == d && k.var2.size() == d, "covariances",
                            "var1 and var2 of size d = " + std::to_string(d) + at,
                            std::to_string(k.var1.size()) + " and " + std::to_string(k.var2.size()));
            detail::require(std::isfinite(k.rho) && k.rho > -1.0 && k.rho < 1.0, "rho", "a value in (-1, 1)" + at,
                            k.rho);
            correlated = correlated || k.rho != 0.0;
            w.push_back(k.weight);
            std::vector<double> m(k.mean1), v(k.var1);
            m.insert(m.end(), k.mean2.begin(), k.mean2.end());
            v.insert(v.end(), k.var2.begin(), k.var2.end());
            mu.push_back(std::move(m));
            var.push_back(std::move(v));
        }
        if (!correlated) return diagonal(w, mu, var, symmetric);
        // Validate the variances (named 'covariances') before taking square roots.
        (void)diagonal(w, mu, var, false);
        const index_t dd = index_t(d), D = 2 * dd;
        std::vector<std::vector<double>> chol(components.size(), std::vector<double>(std::size_t(D * D), 0.0));
        for (std::size_t q = 0; q < components.size(); ++q) {
            const auto& k = components[q];
            auto& L = chol[q];
            for (index_t i = 0; i < dd; ++i) {
                const double a = std::sqrt(k.var1[std::size_t(i)]), b = std::sqrt(k.var2[std::size_t(i)]);
                L[std::size_t(i * D + i)] = a;
                L[std::size_t((dd + i) * D + i)] = k.rho * b;
                L[std::size_t((dd + i) * D + dd + i)] = std::sqrt(1.0 - k.rho * k.rho) * b;
            }
        }
        return full(w, mu, chol, symmetric);
    }

    /// A random NGSM over R^{2d} with Q components (see the header comment).
    static gmm ngsm(index_t d, index_t num_components, std::uint64_t seed, const ngsm_options& opt = {}) {
        detail::require(d >= 1, "d", ">= 1", d);
        detail::require(num_components >= 1, "num_components", ">= 1", num_components);
        detail::require(std::isfinite(opt.mean_scale) && opt.mean_scale >= 0.0, "mean_scale", "a finite value >= 0",
                        opt.mean_scale);
        detail::require(std::isfinite(opt.variance) && opt.variance > 0.0, "variance", "a finite value > 0",
                        opt.variance);
        detail::require(std::isfinite(opt.rho) && opt.rho > -1.0 && opt.rho < 1.0, "rho", "a value in (-1, 1)",
                        opt.rho);
        const random_stream rng(seed, streams::init);
        std::vector<ngsm_component> comps(static_cast<std::size_t>(num_components));
        for (index_t q = 0; q < num_components; ++q) {
            auto& k = comps[std::size_t(q)];
            k.weight = 1.0 / double(num_components);
            k.rho = opt.rho;
            k.var1.assign(std::size_t(d), opt.variance);
            k.var2.assign(std::size_t(d), opt.variance);
            k.mean1.resize(std::size_t(d));
            k.mean2.resize(std::size_t(d));
            for (index_t i = 0; i < d; ++i) {
                k.mean1[std::size_t(i)] = opt.mean_scale * rng.normal(std::uint64_t(q * 2 * d + i));
                k.mean2[std::size_t(i)] = opt.mean_scale * rng.normal(std::uint64_t(q * 2 * d + d + i));
            }
        }
        return ngsm(comps, opt.symmetric);
    }

    // ---- parameters --------------------------------------------------------------------

    index_t dim() const { return D_; }
    index_t num_components() const { return Q_; }
    bool is_diagonal() const { return diag_; }
    bool symmetric() const { return symmetric_; }
    /// π (normalised), [Q].
    const std::vector<double>& weights() const { return w_; }
    /// μ, [Q × D] row-major.
    const std::vector<double>& means() const { return mu_; }
    /// Diagonal mixtures: the variances s, [Q × D]; full ones: diag(S_c) per component.
    std::vector<double> variances() const {
        if (diag_) return var_;
        std::vector<double> v(std::size_t(Q_ * D_), 0.0);
        for (index_t c = 0; c < Q_; ++c)
            for (index_t i = 0; i < D_; ++i) {
                double s = 0.0;
                for (index_t j = 0; j <= i; ++j) s += L(c, i, j) * L(c, i, j);
                v[std::size_t(c * D_ + i)] = s;
            }
        return v;
    }
    /// L_c for every component, [Q × D × D] row-major (diagonal mixtures: diag(√s_c)).
    std::vector<double> cholesky() const {
        if (!diag_) return chol_;
        std::vector<double> L(std::size_t(Q_ * D_ * D_), 0.0);
        for (index_t c = 0; c < Q_; ++c)
            for (index_t i = 0; i < D_; ++i) L[std::size_t((c * D_ + i) * D_ + i)] = sd_[std::size_t(c * D_ + i)];
        return L;
    }

    // ---- sampling ----------------------------------------------------------------------

    /// Writes `count` vectors of dimension `dim` (= D): out[k*dim + i] = ω_ki (docs/samplers.md,
    /// gmm sampling). `params` is empty (no_sampler_params). Throws kattn::error for
    /// dim != D ('dim'), count < 1 ('num_features') or a null `out`.
    template <class T>
    void sample(const params& /*p*/, index_t dim, index_t count, std::uint64_t seed, T* out) const {
        static_assert(std::is_floating_point_v<T>, "gmm::sample: T must be floating point");
        check_dim(dim);
        detail::check_sampler_shape(dim, count, out);
        std::vector<double> eps(static_cast<std::size_t>(D_)), sgn(eps), w(eps);
        for (index_t k = 0; k < count; ++k) {
            const index_t c = draw_one(seed, k, eps.data(), sgn.data());
            transform(c, eps.data(), sgn.data(), w.data());
            for (index_t i = 0; i < D_; ++i) out[k * D_ + i] = static_cast<T>(w[std::size_t(i)]);
        }
    }

    /// The component choices, noise and signs that sample(…, count, seed, …) uses.
    draws draw_noise(index_t count, std::uint64_t seed) const {
        detail::require(count >= 1, "num_features", ">= 1", count);
        draws r;
        r.count = count;
        r.dim = D_;
        r.component.resize(std::size_t(count));
        r.noise.resize(std::size_t(count * D_));
        r.sign.resize(std::size_t(count * D_));
        for (index_t k = 0; k < count; ++k)
            r.component[std::size_t(k)] = draw_one(seed, k, r.noise.data() + k * D_, r.sign.data() + k * D_);
        return r;
    }

    /// ω_k = σ_k ⊙ (μ_{c_k} + L_{c_k} ε_k) for given draws: out[k*D + i]. Equals sample()
    /// with the seed the draws came from.
    template <class T>
    void sample_with_noise(const draws& n, T* out) const {
        static_assert(std::is_floating_point_v<T>, "gmm::sample_with_noise: T must be floating point");
        check_draws(n);
        detail::require(out != nullptr, "out", "a non-null output pointer", "nullptr");
        std::vector<double> w(static_cast<std::size_t>(D_));
        for (index_t k = 0; k < n.count; ++k) {
            transform(n.component[std::size_t(k)], n.noise.data() + k * D_, n.sign.data() + k * D_, w.data());
            for (index_t i = 0; i < D_; ++i) out[k * D_ + i] = static_cast<T>(w[std::size_t(i)]);
        }
    }

    /// Reparameterisation gradients from grad_omega[k*D + i] = ∂L/∂ω_ki of the draws `n`:
    ///   ∂L/∂μ_ci = Σ_{k: c_k = c} σ_ki g_ki,  ∂L/∂L_c,ij = Σ_{k: c_k = c} σ_ki g_ki ε_kj (j ≤ i).
    gradients sample_backward(const draws& n, const double* grad_omega) const {
        check_draws(n);
        detail::require(grad_omega != nullptr, "grad_omega", "a non-null pointer", "nullptr");
        detail::check_finite("grad_omega", grad_omega, n.count * D_);
        gradients g;
        g.mean.assign(std::size_t(Q_ * D_), 0.0);
        g.scale.assign(std::size_t(Q_ * D_), 0.0);
        g.log_var.assign(std::size_t(Q_ * D_), 0.0);
        g.count.assign(std::size_t(Q_), 0);
        if (!diag_) g.cholesky.assign(std::size_t(Q_ * D_ * D_), 0.0);
        for (index_t k = 0; k < n.count; ++k) {
            const index_t c = n.component[std::size_t(k)];
            const double* e = n.noise.data() + k * D_;
            const double* s = n.sign.data() + k * D_;
            const double* gk = grad_omega + k * D_;
            ++g.count[std::size_t(c)];
            for (index_t i = 0; i < D_; ++i) {
                const double h = s[i] * gk[i];
                g.mean[std::size_t(c * D_ + i)] += h;
                if (diag_) {
                    g.scale[std::size_t(c * D_ + i)] += h * e[i];
                } else {
                    for (index_t j = 0; j <= i; ++j) g.cholesky[std::size_t((c * D_ + i) * D_ + j)] += h * e[j];
                }
            }
        }
        for (index_t c = 0; c < Q_; ++c)
            for (index_t i = 0; i < D_; ++i) {
                const std::size_t ci = std::size_t(c * D_ + i);
                if (!diag_) g.scale[ci] = g.cholesky[std::size_t((c * D_ + i) * D_ + i)];
                g.log_var[ci] = 0.5 * Ldiag(c, i) * g.scale[ci];
            }
        return g;
    }

    /// sample_backward for the draws of sample(p, dim, count, seed, …).
    gradients sample_backward(const params& /*p*/, index_t dim, index_t count, std::uint64_t seed,
                              const double* grad_omega) const {
        check_dim(dim);
        return sample_backward(draw_noise(count, seed), grad_omega);
    }

    // ---- density -----------------------------------------------------------------------

    /// log p(w) for the D values at w (log-sum-exp over components; see the header comment
    /// for the symmetric density). Throws for non-finite w ('w') and for symmetric
    /// full-covariance mixtures with D > max_enumerated_dim ('symmetric').
    double log_prob(const double* w) const { return density(w, nullptr); }

    /// Writes ∇_w log p(w) into g[0..D).
    void log_prob_grad(const double* w, double* g) const {
        detail::require(g != nullptr, "g", "a non-null pointer", "nullptr");
        (void)density(w, g);
    }

    // ---- closed-form kernels -----------------------------------------------------------

    /// E_{ω~p} cos(ωᵀv) for the D values at v (the stationary kernel at τ = v).
    double expected_cos(const double* v) const {
        detail::require(v != nullptr, "v", "a non-null pointer", "nullptr");
        if (symmetric_ && !diag_) check_enumerable();
        double total = 0.0;
        std::vector<double> sv(static_cast<std::size_t>(D_));
        for (index_t c = 0; c < Q_; ++c) {
            double kc = 0.0;
            if (symmetric_ && diag_) {
                kc = 1.0;
                for (index_t i = 0; i < D_; ++i) {
                    const std::size_t ci = std::size_t(c * D_ + i);
                    kc *= std::cos(mu_[ci] * v[i]) * std::exp(-0.5 * var_[ci] * v[i] * v[i]);
                }
            } else if (symmetric_) {
                // 2^{-D} Σ_s over sign patterns; s and −s give the same term, so fix s_0 = +1.
                const std::uint64_t half = std::uint64_t{1} << (D_ - 1);
                for (std::uint64_t mask = 0; mask < half; ++mask) {
                    for (index_t i = 0; i < D_; ++i) sv[std::size_t(i)] = sign_of(mask, i) * v[i];
                    kc += cos_term(c, sv.data());
                }
                kc /= double(half);
            } else {
                kc = cos_term(c, v);
            }
            total += w_[std::size_t(c)] * kc;
        }
        return total;
    }

    /// k(x, y) = E cos(ωᵀ(x − y)), the kernel trig features estimate; requires d = D ('d').
    double stationary_kernel(const double* x, const double* y, index_t d) const {
        detail::require(d == D_, "d", "the mixture's dim " + std::to_string(D_) + " (stationary kernel)", d);
        detail::require(x != nullptr && y != nullptr, "x", "non-null x and y", "nullptr");
        std::vector<double> t(static_cast<std::size_t>(d));
        for (index_t i = 0; i < d; ++i) t[std::size_t(i)] = x[i] - y[i];
        return expected_cos(t.data());
    }

    /// k(x, y) = ¼ Σ_{v∈V} E cos(ωᵀv), V = {(x−y, 0), (0, x−y), (x, −y), (−y, x)}, the kernel
    /// nonstationary (pair) features estimate; requires 2d = D ('d').
    double nonstationary_kernel(const double* x, const double* y, index_t d) const {
        detail::require(2 * d == D_, "d",
                        "half the mixture's dim, " + std::to_string(D_) + "/2 (nonstationary kernel over pairs)", d);
        detail::require(x != nullptr && y != nullptr, "x", "non-null x and y", "nullptr");
        std::vector<double> v(static_cast<std::size_t>(D_));
        double k = 0.0;
        for (int which = 0; which < 4; ++which) {
            for (index_t i = 0; i < d; ++i) {
                double a = 0.0, b = 0.0;
                switch (which) {
                    case 0:
                        a = x[i] - y[i];
                        b = 0.0;
                        break;  // ω₁ᵀx − ω₁ᵀy
                    case 1:
                        a = 0.0;
                        b = x[i] - y[i];
                        break;  // ω₂ᵀx − ω₂ᵀy
                    case 2:
                        a = x[i];
                        b = -y[i];
                        break;  // ω₁ᵀx − ω₂ᵀy
                    default:
                        a = -y[i];
                        b = x[i];
                        break;  // ω₂ᵀx − ω₁ᵀy
                }
                v[std::size_t(i)] = a;
                v[std::size_t(d + i)] = b;
            }
            k += expected_cos(v.data());
        }
        return 0.25 * k;
    }

private:
    gmm() = default;

    static std::vector<double> to_vector(const xt::xtensor<double, 1>& t) { return {t.begin(), t.end()}; }
    static std::vector<std::vector<double>> to_rows(const xt::xtensor<double, 2>& t, const char* = "means") {
        std::vector<std::vector<double>> r(t.shape()[0]);
        for (std::size_t c = 0; c < r.size(); ++c)
            r[c].assign(t.data() + c * t.shape()[1], t.data() + (c + 1) * t.shape()[1]);
        return r;
    }

    void init_common(const std::vector<double>& weights, const std::vector<std::vector<double>>& means,
                     bool symmetric) {
        detail::require(!weights.empty(), "weights", "at least one mixture weight", 0);
        Q_ = index_t(weights.size());
        double sum = 0.0;
        for (std::size_t c = 0; c < weights.size(); ++c) {
            detail::require(std::isfinite(weights[c]) && weights[c] > 0.0, "weights",
                            "finite weights > 0 (component " + std::to_string(c) + ")", weights[c]);
            sum += weights[c];
        }
        detail::require(std::isfinite(sum), "weights", "a finite sum", sum);
        w_.resize(weights.size());
        for (std::size_t c = 0; c < weights.size(); ++c) w_[c] = weights[c] / sum;
        detail::require(means.size() == weights.size(), "means", std::to_string(Q_) + " mean vectors (one per weight)",
                        means.size());
        D_ = index_t(means[0].size());
        detail::require(D_ >= 1, "means", "mean vectors of dimension >= 1", D_);
        mu_.resize(std::size_t(Q_ * D_));
        for (index_t c = 0; c < Q_; ++c) {
            const auto& m = means[std::size_t(c)];
            detail::require(index_t(m.size()) == D_, "means",
                            "every mean of dimension " + std::to_string(D_) + " (component " + std::to_string(c) + ")",
                            m.size());
            for (index_t i = 0; i < D_; ++i) {
                detail::require(std::isfinite(m[std::size_t(i)]), "means",
                                "finite values (component " + std::to_string(c) + ", dim " + std::to_string(i) + ")",
                                m[std::size_t(i)]);
                mu_[std::size_t(c * D_ + i)] = m[std::size_t(i)];
            }
        }
        symmetric_ = symmetric;
    }

    /// Derived quantities: cumulative weights, log weights, standard deviations, log dets.
    void finish() {
        cdf_.resize(std::size_t(Q_));
        logw_.resize(std::size_t(Q_));
        logdet_.assign(std::size_t(Q_), 0.0);
        double acc = 0.0;
        for (index_t c = 0; c < Q_; ++c) {
            acc += w_[std::size_t(c)];
            cdf_[std::size_t(c)] = acc;
            logw_[std::size_t(c)] = std::log(w_[std::size_t(c)]);
        }
        cdf_.back() = 1.0;
        if (diag_) {
            sd_.resize(var_.size());
            for (std::size_t j = 0; j < var_.size(); ++j) sd_[j] = std::sqrt(var_[j]);
        }
        for (index_t c = 0; c < Q_; ++c)
            for (index_t i = 0; i < D_; ++i) logdet_[std::size_t(c)] += std::log(Ldiag(c, i));
    }

    double L(index_t c, index_t i, index_t j) const { return chol_[std::size_t((c * D_ + i) * D_ + j)]; }
    double Ldiag(index_t c, index_t i) const { return diag_ ? sd_[std::size_t(c * D_ + i)] : L(c, i, i); }
    static double sign_of(std::uint64_t mask, index_t i) { return ((mask >> i) & 1u) ? -1.0 : 1.0; }

    void check_dim(index_t dim) const {
        detail::require(dim == D_, "dim",
                        "the mixture's dimension " + std::to_string(D_) + " (head_dim, or 2*head_dim for paired maps)",
                        dim);
    }
    void check_draws(const draws& n) const {
        detail::require(n.dim == D_ && n.count >= 1 && n.component.size() == std::size_t(n.count) &&
                            n.noise.size() == std::size_t(n.count * D_) && n.sign.size() == std::size_t(n.count * D_),
                        "draws", "draws of dimension " + std::to_string(D_) + " from draw_noise()",
                        "dim " + std::to_string(n.dim) + ", count " + std::to_string(n.count));
        for (index_t c : n.component) detail::require(c >= 0 && c < Q_, "draws", "component indices in [0, Q)", c);
    }
    void check_enumerable() const {
        detail::require(D_ <= max_enumerated_dim, "symmetric",
                        "diagonal covariances or dim <= 16 for the density/kernels of a symmetric mixture "
                        "(2^dim sign patterns are enumerated)",
                        "full covariances with dim " + std::to_string(D_));
    }

    /// Draws component, noise and signs of vector k; returns the component.
    index_t draw_one(std::uint64_t seed, index_t k, double* eps, double* sgn) const {
        const random_stream cs(seed, streams::component), ns(seed, streams::omega), bs(seed, streams::bias);
        const double u = cs.uniform(std::uint64_t(k));
        index_t c = index_t(std::upper_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin());
        if (c >= Q_) c = Q_ - 1;
        for (index_t i = 0; i < D_; ++i) {
            const std::uint64_t j = std::uint64_t(k) * std::uint64_t(D_) + std::uint64_t(i);
            eps[i] = ns.normal(j);
            sgn[i] = (symmetric_ && (bs.bits(j) & 1u)) ? -1.0 : 1.0;
        }
        return c;
    }

    /// w = sgn ⊙ (μ_c + L_c eps).
    void transform(index_t c, const double* eps, const double* sgn, double* w) const {
        for (index_t i = 0; i < D_; ++i) {
            double v = mu_[std::size_t(c * D_ + i)];
            if (diag_)
                v += sd_[std::size_t(c * D_ + i)] * eps[i];
            else
                for (index_t j = 0; j <= i; ++j) v += L(c, i, j) * eps[j];
            w[i] = sgn[i] * v;
        }
    }

    /// cos(μ_cᵀv) exp(−½ vᵀS_c v).
    double cos_term(index_t c, const double* v) const {
        double dotmu = 0.0, quad = 0.0;
        for (index_t i = 0; i < D_; ++i) dotmu += mu_[std::size_t(c * D_ + i)] * v[i];
        if (diag_) {
            for (index_t i = 0; i < D_; ++i) quad += var_[std::size_t(c * D_ + i)] * v[i] * v[i];
        } else {
            for (index_t j = 0; j < D_; ++j) {  // (L_cᵀ v)_j = Σ_{i ≥ j} L_ij v_i
                double t = 0.0;
                for (index_t i = j; i < D_; ++i) t += L(c, i, j) * v[i];
                quad += t * t;
            }
        }
        return std::cos(dotmu) * std::exp(-0.5 * quad);
    }

    /// log N(w; μ_c, S_c) and, if g, its gradient −S_c⁻¹(w − μ_c). z, y: D scratch.
    double log_normal(index_t c, const double* w, double* g, double* z) const {
        constexpr double log_2pi = 1.8378770664093453;
        double q = 0.0;
        if (diag_) {
            for (index_t i = 0; i < D_; ++i) {
                const std::size_t ci = std::size_t(c * D_ + i);
                const double r = w[i] - mu_[ci];
                q += r * r / var_[ci];
                if (g) g[i] = -r / var_[ci];
            }
        } else {
            for (index_t i = 0; i < D_; ++i) {  // z = L⁻¹ (w − μ)
                double r = w[i] - mu_[std::size_t(c * D_ + i)];
                for (index_t j = 0; j < i; ++j) r -= L(c, i, j) * z[j];
                z[i] = r / L(c, i, i);
                q += z[i] * z[i];
            }
            if (g) {
                for (index_t i = D_ - 1; i >= 0; --i) {  // Lᵀ y = z, g = −y
                    double r = z[i];
                    for (index_t j = i + 1; j < D_; ++j) r -= L(c, j, i) * (-g[j]);
                    g[i] = -r / L(c, i, i);
                }
            }
        }
        return -0.5 * q - logdet_[std::size_t(c)] - 0.5 * double(D_) * log_2pi;
    }

    /// Streaming log-sum-exp of the terms (ℓ_t, ∇ℓ_t); writes ∇ log p into grad if non-null.
    double density(const double* w, double* grad) const {
        detail::require(w != nullptr, "w", "a non-null pointer", "nullptr");
        detail::check_finite("w", w, D_);
        if (symmetric_ && !diag_) check_enumerable();
        constexpr double log_2pi = 1.8378770664093453;
        const std::size_t D = std::size_t(D_);
        std::vector<double> gt(D), z(D), sw(D), G(D, 0.0);
        double m = -std::numeric_limits<double>::infinity(), S = 0.0;
        auto accumulate = [&](double l) {
            if (l > m) {
                const double r = std::isfinite(m) ? std::exp(m - l) : 0.0;
                S *= r;
                if (grad)
                    for (std::size_t i = 0; i < D; ++i) G[i] *= r;
                m = l;
            }
            const double e = std::exp(l - m);
            S += e;
            if (grad)
                for (std::size_t i = 0; i < D; ++i) G[i] += e * gt[i];
        };
        double* gp = grad ? gt.data() : nullptr;
        for (index_t c = 0; c < Q_; ++c) {
            if (!symmetric_) {
                accumulate(logw_[std::size_t(c)] + log_normal(c, w, gp, z.data()));
            } else if (diag_) {
                // ½[N(w; μ, s) + N(w; −μ, s)] = (2πs)^{-½} exp(−(w² + μ²)/2s) cosh(wμ/s)
                double l = logw_[std::size_t(c)];
                for (index_t i = 0; i < D_; ++i) {
                    const std::size_t ci = std::size_t(c * D_ + i);
                    const double s = var_[ci], mu = mu_[ci], a = w[i] * mu / s, aa = std::abs(a);
                    l += -0.5 * (w[i] * w[i] + mu * mu) / s - 0.5 * (log_2pi + std::log(s)) + aa +
                         std::log1p(std::exp(-2.0 * aa)) - std::log(2.0);
                    if (grad) gt[std::size_t(i)] = -w[i] / s + std::tanh(a) * mu / s;
                }
                accumulate(l);
            } else {
                const std::uint64_t patterns = std::uint64_t{1} << D_;
                const double lc = logw_[std::size_t(c)] - double(D_) * std::log(2.0);
                for (std::uint64_t mask = 0; mask < patterns; ++mask) {
                    for (index_t i = 0; i < D_; ++i) sw[std::size_t(i)] = sign_of(mask, i) * w[i];
                    const double l = lc + log_normal(c, sw.data(), gp, z.data());
                    if (grad)
                        for (index_t i = 0; i < D_; ++i) gt[std::size_t(i)] *= sign_of(mask, i);
                    accumulate(l);
                }
            }
        }
        if (grad)
            for (std::size_t i = 0; i < D; ++i) grad[i] = G[i] / S;
        return m + std::log(S);
    }

    index_t Q_ = 0, D_ = 0;
    bool diag_ = true, symmetric_ = false;
    std::vector<double> w_, logw_, cdf_, mu_, var_, sd_, chol_, logdet_;
};

}  // namespace kattn::samplers
