// kattn/samplers/realnvp.hpp — a learned spectral density: a RealNVP normalising flow.
//
//   z ~ N(0, I_D),   ω = F_θ(z) = f_{K−1} ∘ … ∘ f_0(z)   (affine couplings; D = 2d for pairs)
//   log p_θ(ω) = log N(z; 0, I) − Σ_l Σ_{b_j=0} s_j^{(l)},   z = F_θ⁻¹(ω)
// A fresh flow is the identity (sample() then gives samplers::gaussian's Ω for the seed).
// There are no sampler parameters (params = no_sampler_params; an attention_config .sigma
// shorthand is rejected): the scale is learned. The flow owns parameters() and grads() for
// optim::adam: backward (reparameterised task gradient), log_prob_backward, fit (maximum
// likelihood), kl_to / kl_backward / train_kl (reverse KL to any spectral_density); it is a
// spectral_density itself (log_prob, log_prob_grad); save / load (.npz).
// Masks, initialisation, parameter layout, KL gradient: docs/samplers.md §2 (realnvp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <xtensor/xtensor.hpp>

#include "../core/config.hpp"
#include "../core/error.hpp"
#include "../core/random.hpp"
#include "../core/shape.hpp"
#include "../optim/adam.hpp"
#include "density.hpp"
#include "detail/coupling.hpp"
#include "../io/npz.hpp"
#include "sampler_params.hpp"

namespace kattn::samplers {

struct realnvp_config {
    index_t dim = 0;           ///< D ≥ 1 (2·head_dim for features::nonstationary)
    index_t layers = 3;        ///< K ≥ 1 coupling layers (FSKA: 3)
    index_t hidden = 0;        ///< H ≥ 1 hidden width of s and t; 0 → 2D (FSKA)
    double scale_bound = 0.0;  ///< α: 0 → s = ŝ (unbounded); α > 0 → s = α·tanh(ŝ)
    std::uint64_t seed = 0;    ///< initialisation seed (stream streams::init)
};

class realnvp {
public:
    static constexpr const char* name = "realnvp";
    using params = no_sampler_params;  ///< this sampler's parameters
    static constexpr bool is_random = true;

    explicit realnvp(const realnvp_config& cfg) : cfg_(cfg) {
        detail::require(cfg.dim >= 1, "dim", ">= 1", cfg.dim);
        detail::require(cfg.layers >= 1, "layers", ">= 1", cfg.layers);
        detail::require(cfg.hidden >= 0, "hidden", ">= 1 (or 0 for 2*dim)", cfg.hidden);
        detail::require(std::isfinite(cfg.scale_bound) && cfg.scale_bound >= 0, "scale_bound",
                        "a finite value >= 0 (0: unbounded scale)", cfg.scale_bound);
        if (cfg_.hidden == 0) cfg_.hidden = 2 * cfg.dim;
        L_ = detail::coupling_layout{cfg_.dim, cfg_.hidden};
        masks_.resize(static_cast<std::size_t>(cfg_.layers * cfg_.dim));
        for (index_t l = 0; l < cfg_.layers; ++l)
            for (index_t j = 0; j < cfg_.dim; ++j) masks_[l * cfg_.dim + j] = (j + l) % 2 == 0 ? 1 : 0;
        params_.assign(std::size_t(cfg_.layers * L_.size()), 0.0);
        grads_.assign(params_.size(), 0.0);
        const random_stream rng(cfg.seed, streams::init);
        const double bound = 1.0 / std::sqrt(double(cfg_.dim));
        for (index_t l = 0; l < cfg_.layers; ++l)
            for (int net = 0; net < 2; ++net)
                for (index_t i = L_.w1(net); i < L_.w2(net); ++i) {  // W1 and b1; W2, b2 stay 0
                    const index_t at = l * L_.size() + i;
                    params_[at] = bound * (2.0 * rng.uniform(std::uint64_t(at)) - 1.0);
                }
    }

    // ---- shape and parameters -------------------------------------------------------------
    index_t dim() const { return cfg_.dim; }
    index_t layers() const { return cfg_.layers; }
    index_t hidden() const { return cfg_.hidden; }
    double scale_bound() const { return cfg_.scale_bound; }
    const realnvp_config& config() const { return cfg_; }
    /// Mask of layer l: mask(l)[j] = 1 for the dims passed through (and conditioned on).
    std::span<const unsigned char> mask(index_t l) const {
        detail::require(l >= 0 && l < cfg_.layers, "l", "a layer in [0, layers)", l);
        return {masks_.data() + l * cfg_.dim, std::size_t(cfg_.dim)};
    }

    /// Number of parameters: K · 2 · (2HD + H + D).
    index_t num_params() const { return index_t(params_.size()); }
    /// All weights and biases as one flat vector (layout in detail/coupling.hpp).
    std::span<double> parameters() { return params_; }
    std::span<const double> parameters() const { return params_; }
    /// Gradient buffer the backward functions accumulate into (same layout as parameters()).
    std::span<double> grads() { return grads_; }
    std::span<const double> grads() const { return grads_; }
    void zero_grad() { std::fill(grads_.begin(), grads_.end(), 0.0); }

    // ---- sampling -------------------------------------------------------------------------
    /// The base noise sample() uses for (count, seed): z[k, i] = normal(k·D + i) of
    /// random_stream(seed, streams::omega).
    xt::xtensor<double, 2> noise(index_t count, std::uint64_t seed) const {
        detail::require(count >= 1, "count", ">= 1", count);
        xt::xtensor<double, 2> z = xt::xtensor<double, 2>::from_shape({std::size_t(count), std::size_t(cfg_.dim)});
        const random_stream rng(seed, streams::omega);
        for (std::size_t j = 0; j < z.size(); ++j) z.data()[j] = rng.normal(j);
        return z;
    }

    /// kattn::spectral_sampler: out[k·dim + i] = F_θ(z_k)_i with z = noise(count, seed),
    /// computed in double and cast to T. dim must equal the flow's D. `params` is empty
    /// (no_sampler_params), as for samplers::gmm: the scale is learned by the flow.
    template <class T>
    void sample(const params& /*p*/, index_t dim, index_t count, std::uint64_t seed, T* out) const {
        static_assert(std::is_floating_point_v<T>, "realnvp::sample: T must be floating point");
        detail::check_sampler_shape(dim, count, out);
        detail::require(dim == cfg_.dim, "dim",
                        "the flow's dimension " + std::to_string(cfg_.dim) + " (2*head_dim for paired maps)", dim);
        const xt::xtensor<double, 2> w = forward(noise(count, seed));
        for (std::size_t j = 0; j < w.size(); ++j) out[j] = static_cast<T>(w.data()[j]);
    }

    // ---- density ------------------------------------------------------------------------
    /// ω = F_θ(z) for the rows of z [n, D], computed in T.
    template <class T>
    xt::xtensor<T, 2> forward(const xt::xtensor<T, 2>& z) const {
        check_rows("z", z);
        xt::xtensor<T, 2> w = xt::xtensor<T, 2>::from_shape(z.shape());
        run<T>(false, z.data(), w.data(), index_t(z.shape()[0]), nullptr);
        return w;
    }
    /// z = F_θ⁻¹(ω) for the rows of ω [n, D], computed in T.
    template <class T>
    xt::xtensor<T, 2> inverse(const xt::xtensor<T, 2>& w) const {
        check_rows("omega", w);
        xt::xtensor<T, 2> z = xt::xtensor<T, 2>::from_shape(w.shape());
        run<T>(true, w.data(), z.data(), index_t(w.shape()[0]), nullptr);
        return z;
    }
    /// log|det ∂F_θ(z)/∂z| for the rows of z.
    template <class T>
    xt::xtensor<T, 1> log_det(const xt::xtensor<T, 2>& z) const {
        check_rows("z", z);
        xt::xtensor<T, 2> w = xt::xtensor<T, 2>::from_shape(z.shape());
        xt::xtensor<T, 1> ld = xt::xtensor<T, 1>::from_shape({z.shape()[0]});
        run<T>(false, z.data(), w.data(), index_t(z.shape()[0]), ld.data());
        return ld;
    }
    /// log p_θ(ω) for the rows of ω (inverse pass).
    template <class T>
    xt::xtensor<T, 1> log_prob(const xt::xtensor<T, 2>& w) const {
        check_rows("omega", w);
        const index_t n = index_t(w.shape()[0]), D = cfg_.dim;
        xt::xtensor<T, 2> z = xt::xtensor<T, 2>::from_shape(w.shape());
        xt::xtensor<T, 1> lp = xt::xtensor<T, 1>::from_shape({std::size_t(n)});
        run<T>(true, w.data(), z.data(), n, lp.data());
        for (index_t i = 0; i < n; ++i) lp(i) = log_normal(z.data() + i * D) - lp(i);
        return lp;
    }
    /// kattn::spectral_density: log p_θ(w) for the D values at w.
    double log_prob(const double* w) const {
        std::vector<double> z(static_cast<std::size_t>(cfg_.dim));
        double ld = 0;
        run<double>(true, w, z.data(), 1, &ld);
        return log_normal(z.data()) - ld;
    }
    /// kattn::spectral_density: g = ∇_w log p_θ(w).
    void log_prob_grad(const double* w, double* g) const {
        pass_cache c;
        std::vector<double> z(static_cast<std::size_t>(cfg_.dim));
        run<double>(true, w, z.data(), 1, nullptr, &c);
        std::vector<double> gz(z.size());
        for (std::size_t i = 0; i < z.size(); ++i) gz[i] = -z[i];
        const double g_ld = -1.0;
        std::vector<double> scratch(params_.size(), 0.0);  // parameter gradient, discarded
        backprop(true, c, gz.data(), &g_ld, g, scratch.data());
    }

    // ---- gradients ----------------------------------------------------------------------
    /// For ω = F_θ(z) (rows of z [n, D]) and dω = ∂L/∂ω [n, D], accumulates ∂L/∂θ into
    /// grads(). With d_logdet [n], L may also depend on log|det J_F(z_i)| (∂L/∂ that, per
    /// sample). Use noise(count, seed) to recover the z of sample(…, seed, …).
    void backward(const xt::xtensor<double, 2>& z, const xt::xtensor<double, 2>& d_omega) {
        backward_impl(z, d_omega, nullptr);
    }
    void backward(const xt::xtensor<double, 2>& z, const xt::xtensor<double, 2>& d_omega,
                  const xt::xtensor<double, 1>& d_logdet) {
        detail::require(d_logdet.size() == z.shape()[0], "d_logdet",
                        "one value per row of z (" + std::to_string(z.shape()[0]) + ")", d_logdet.size());
        backward_impl(z, d_omega, d_logdet.data());
    }

    /// Accumulates scale · ∂/∂θ Σ_i log p_θ(ω_i) into grads() and returns Σ_i log p_θ(ω_i).
    /// (Maximum likelihood: scale = −1/n gives the gradient of the mean NLL.)
    double log_prob_backward(const xt::xtensor<double, 2>& w, double scale = 1.0) {
        check_rows("omega", w);
        return log_prob_backward_rows(w.data(), index_t(w.shape()[0]), scale);
    }

    // ---- maximum likelihood -------------------------------------------------------------
    /// Fits θ to samples [N, D] by maximum likelihood: `epochs` passes over a shuffled
    /// copy (random_stream(seed, streams::data)), mini-batches of `batch` rows, one Adam
    /// step per batch. Returns the mean NLL (nats per sample) of every epoch, averaged over
    /// its batches during training.
    std::vector<double> fit(const xt::xtensor<double, 2>& samples, index_t epochs, index_t batch,
                            const optim::adam_config& opt, std::uint64_t seed) {
        check_rows("samples", samples);
        detail::require(epochs >= 1, "epochs", ">= 1", epochs);
        detail::require(batch >= 1, "batch", ">= 1", batch);
        const index_t N = index_t(samples.shape()[0]), D = cfg_.dim;
        optim::adam adam(opt);
        const random_stream rng(seed, streams::data);
        std::uint64_t draw = 0;
        std::vector<index_t> perm(std::size_t(N), 0);
        for (index_t i = 0; i < N; ++i) perm[i] = i;
        std::vector<double> rows(static_cast<std::size_t>(std::min(batch, N) * D));
        std::vector<double> history;
        for (index_t e = 0; e < epochs; ++e) {
            for (index_t i = N - 1; i > 0; --i) {  // Fisher–Yates
                const auto j = index_t(rng.uniform(draw++) * double(i + 1));
                std::swap(perm[i], perm[std::min(j, i)]);
            }
            double total = 0;
            for (index_t start = 0; start < N; start += batch) {
                const index_t nb = std::min(batch, N - start);
                for (index_t r = 0; r < nb; ++r)
                    std::copy_n(samples.data() + perm[start + r] * D, D, rows.data() + r * D);
                zero_grad();
                const double lp = log_prob_backward_rows(rows.data(), nb, -1.0 / double(nb));
                if (!std::isfinite(lp))
                    detail::fail("lr", "a learning rate at which maximum likelihood stays finite (or scale_bound > 0)",
                                 "a non-finite NLL in epoch " + std::to_string(e));
                total -= lp;
                adam.step(std::span<double>(params_), std::span<const double>(grads_));
            }
            history.push_back(total / double(N));
        }
        zero_grad();
        return history;
    }
    std::vector<double> fit(const xt::xtensor<double, 2>& samples, index_t epochs, index_t batch, double lr,
                            std::uint64_t seed) {
        return fit(samples, epochs, batch, optim::adam_config{.lr = lr}, seed);
    }

    // ---- reverse KL to a prior --------------------------------------------------------------
    /// KL(p_θ ‖ prior) ≈ (1/n) Σ_s [log p_θ(ω_s) − log prior(ω_s)], ω_s = F_θ(z_s), z = noise(n, seed).
    template <spectral_density P>
    double kl_to(const P& prior, index_t n_samples, std::uint64_t seed) const {
        check_prior(prior);
        const xt::xtensor<double, 2> z = noise(n_samples, seed);
        xt::xtensor<double, 2> w = xt::xtensor<double, 2>::from_shape(z.shape());
        std::vector<double> ld(static_cast<std::size_t>(n_samples));
        run<double>(false, z.data(), w.data(), n_samples, ld.data());
        double kl = 0;
        for (index_t s = 0; s < n_samples; ++s) {
            const double* ws = w.data() + s * cfg_.dim;
            kl += log_normal(z.data() + s * cfg_.dim) - ld[s] - double(prior.log_prob(ws));
        }
        return kl / double(n_samples);
    }

    /// Accumulates scale · ∇_θ kl_to(prior, n_samples, seed) into grads() (pathwise, the
    /// noise held fixed) and returns the estimate.
    template <spectral_density P>
    double kl_backward(const P& prior, index_t n_samples, std::uint64_t seed, double scale = 1.0) {
        check_prior(prior);
        const index_t D = cfg_.dim;
        const xt::xtensor<double, 2> z = noise(n_samples, seed);
        xt::xtensor<double, 2> w = xt::xtensor<double, 2>::from_shape(z.shape());
        pass_cache c;
        std::vector<double> ld(static_cast<std::size_t>(n_samples));
        run<double>(false, z.data(), w.data(), n_samples, ld.data(), &c);
        std::vector<double> gw(w.size()), gld(std::size_t(n_samples), -scale / double(n_samples));
        double kl = 0;
        for (index_t s = 0; s < n_samples; ++s) {
            const double* ws = w.data() + s * D;
            double* gs = gw.data() + s * D;
            kl += log_normal(z.data() + s * D) - ld[s] - double(prior.log_prob(ws));
            std::fill(gs, gs + D, 0.0);
            prior.log_prob_grad(ws, gs);
            for (index_t i = 0; i < D; ++i) gs[i] *= -scale / double(n_samples);
        }
        std::vector<double> gz(z.size());
        backprop(false, c, gw.data(), gld.data(), gz.data(), grads_.data());
        return kl / double(n_samples);
    }

    /// Minimises KL(p_θ ‖ prior) with Adam: step k uses fresh noise seed + k. Returns the
    /// KL estimate of every step (before its update).
    template <spectral_density P>
    std::vector<double> train_kl(const P& prior, index_t steps, index_t n_samples, const optim::adam_config& opt,
                                 std::uint64_t seed) {
        detail::require(steps >= 1, "steps", ">= 1", steps);
        optim::adam adam(opt);
        std::vector<double> history;
        for (index_t k = 0; k < steps; ++k) {
            zero_grad();
            const double kl = kl_backward(prior, n_samples, seed + std::uint64_t(k));
            if (!std::isfinite(kl))
                detail::fail("lr", "a learning rate at which the KL stays finite (or scale_bound > 0)",
                             "a non-finite KL at step " + std::to_string(k));
            history.push_back(kl);
            adam.step(std::span<double>(params_), std::span<const double>(grads_));
        }
        zero_grad();
        return history;
    }
    template <spectral_density P>
    std::vector<double> train_kl(const P& prior, index_t steps, index_t n_samples = 256, double lr = 1e-3,
                                 std::uint64_t seed = 0) {
        return train_kl(prior, steps, n_samples, optim::adam_config{.lr = lr}, seed);
    }

    // ---- files ----------------------------------------------------------------------------
    /// Writes config and parameters to an uncompressed .npz at path.
    void save(const std::string& path) const {
        std::vector<detail::npz_array> arrays;
        arrays.push_back(
            {"config", {4}, {double(cfg_.dim), double(cfg_.layers), double(cfg_.hidden), cfg_.scale_bound}});
        for (index_t l = 0; l < cfg_.layers; ++l)
            for (int net = 0; net < 2; ++net)
                for (const auto& [suffix, off, shape] : blocks(net)) {
                    const double* p = params_.data() + l * L_.size() + off;
                    std::size_t n = 1;
                    for (auto e : shape) n *= e;
                    arrays.push_back({array_name(l, net, suffix), shape, std::vector<double>(p, p + n)});
                }
        detail::write_npz(path, arrays);
    }

    /// Reads a flow written by save(). Throws kattn::error naming the path for a missing
    /// or unreadable file, a missing array, a wrong dtype or shape, or a bad config.
    static realnvp load(const std::string& path) {
        const detail::npz_reader in(path);
        const std::vector<double> c = in.array("config", {4});
        auto whole = [&](double v, const char* what) {
            if (!(std::isfinite(v) && v >= 1 && v == std::floor(v) && v < 1e9))
                detail::fail("path", std::string("config ") + what + " to be an integer >= 1",
                             "'" + path + "' holding " + detail::to_text(v));
            return index_t(v);
        };
        realnvp_config cfg{whole(c[0], "dim"), whole(c[1], "layers"), whole(c[2], "hidden"), c[3], 0};
        if (!(std::isfinite(cfg.scale_bound) && cfg.scale_bound >= 0))
            detail::fail("path", "config scale_bound to be finite and >= 0",
                         "'" + path + "' holding " + detail::to_text(cfg.scale_bound));
        realnvp flow(cfg);
        for (index_t l = 0; l < cfg.layers; ++l)
            for (int net = 0; net < 2; ++net)
                for (const auto& [suffix, off, shape] : flow.blocks(net)) {
                    const std::vector<double> v = in.array(array_name(l, net, suffix), shape);
                    detail::check_finite(("array '" + array_name(l, net, suffix) + "' in '" + path + "'").c_str(),
                                         v.data(), index_t(v.size()));
                    std::copy(v.begin(), v.end(), flow.params_.begin() + l * flow.L_.size() + off);
                }
        return flow;
    }

private:
    struct block {
        const char* suffix;
        index_t offset;
        std::vector<std::size_t> shape;
    };
    std::vector<block> blocks(int net) const {
        const auto D = std::size_t(cfg_.dim), H = std::size_t(cfg_.hidden);
        return {
            {"w1", L_.w1(net), {H, D}}, {"b1", L_.b1(net), {H}}, {"w2", L_.w2(net), {D, H}}, {"b2", L_.b2(net), {D}}};
    }
    static std::string array_name(index_t l, int net, const char* suffix) {
        return "layer" + std::to_string(l) + (net == 0 ? "_s_" : "_t_") + suffix;
    }

    using pass_cache = detail::coupling_cache;

    template <class T>
    T log_normal(const T* z) const {
        T q = 0;
        for (index_t i = 0; i < cfg_.dim; ++i) q += z[i] * z[i];
        return T(-0.5) * q - T(0.5 * double(cfg_.dim) * std::log(2.0 * std::numbers::pi));
    }

    template <class T>
    void check_rows(const char* arg, const xt::xtensor<T, 2>& x) const {
        detail::require(x.shape()[0] >= 1 && index_t(x.shape()[1]) == cfg_.dim, arg,
                        "shape [n >= 1, " + std::to_string(cfg_.dim) + "]", detail::shape_text(x.shape()));
        detail::check_finite(arg, x.data(), index_t(x.size()));
    }
    template <class P>
    void check_prior(const P& prior) const {
        detail::require(index_t(prior.dim()) == cfg_.dim, "prior", "a density of dimension " + std::to_string(cfg_.dim),
                        index_t(prior.dim()));
    }

    /// All layers over n rows in T (detail::coupling_stack_run); float runs on a float copy
    /// of the parameters.
    template <class T>
    void run(bool inverse, const T* in, T* out, index_t n, T* logdet, pass_cache* cache = nullptr) const {
        if constexpr (std::is_same_v<T, double>) {
            detail::coupling_stack_run<double>(L_, cfg_.layers, params_.data(), masks_.data(), cfg_.scale_bound,
                                               inverse, in, out, n, logdet, cache);
        } else {
            const std::vector<T> P(params_.begin(), params_.end());
            detail::coupling_stack_run<T>(L_, cfg_.layers, P.data(), masks_.data(), static_cast<T>(cfg_.scale_bound),
                                          inverse, in, out, n, logdet, nullptr);
        }
    }
    void backprop(bool inverse, const pass_cache& c, const double* g_out, const double* g_ld, double* g_in,
                  double* G) const {
        detail::coupling_stack_backward(L_, cfg_.layers, params_.data(), masks_.data(), cfg_.scale_bound, inverse, c,
                                        g_out, g_ld, g_in, G);
    }

    void backward_impl(const xt::xtensor<double, 2>& z, const xt::xtensor<double, 2>& d_omega, const double* d_ld) {
        check_rows("z", z);
        detail::require(d_omega.shape() == z.shape(), "d_omega", "the shape of z " + detail::shape_text(z.shape()),
                        detail::shape_text(d_omega.shape()));
        detail::check_finite("d_omega", d_omega.data(), index_t(d_omega.size()));
        const index_t n = index_t(z.shape()[0]);
        pass_cache c;
        std::vector<double> w(z.size()), gz(z.size());
        run<double>(false, z.data(), w.data(), n, nullptr, &c);
        backprop(false, c, d_omega.data(), d_ld, gz.data(), grads_.data());
    }

    double log_prob_backward_rows(const double* w, index_t n, double scale) {
        const index_t D = cfg_.dim;
        pass_cache c;
        std::vector<double> z(static_cast<std::size_t>(n * D)), ld(static_cast<std::size_t>(n)), gz(z.size()),
            gw(z.size());
        run<double>(true, w, z.data(), n, ld.data(), &c);
        double total = 0;
        for (index_t i = 0; i < n; ++i) {
            total += log_normal(z.data() + i * D) - ld[i];
            for (index_t j = 0; j < D; ++j) gz[i * D + j] = -scale * z[i * D + j];
        }
        const std::vector<double> gld(std::size_t(n), -scale);
        backprop(true, c, gz.data(), gld.data(), gw.data(), grads_.data());
        return total;
    }

    realnvp_config cfg_;
    detail::coupling_layout L_;
    std::vector<unsigned char> masks_;
    std::vector<double> params_, grads_;
};

}  // namespace kattn::samplers
