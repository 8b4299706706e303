// kattn/optim/adam.hpp — Adam / AdamW on flat parameter buffers.
//
//   t ← t + 1
//   p ← p − lr·wd·p                                 (decoupled weight decay, AdamW; wd = 0: Adam)
//   m ← β₁m + (1 − β₁)g,   v ← β₂v + (1 − β₂)g²
//   v̂max ← max(v̂max, v)                             (amsgrad only; v is replaced by v̂max below)
//   p ← p − lr · (m / (1 − β₁ᵗ)) / (√(v / (1 − β₂ᵗ)) + ε)
//
// The same update as PyTorch's torch.optim.AdamW (and Adam with weight_decay = 0).
// Moments are kept in double whatever the parameter type; they are sized at the first
// step, and a later step with a different buffer size throws kattn::error (one
// optimiser per parameter buffer; reset() forgets the state). set_lr() changes the
// learning rate between steps (schedules: warm-up, cosine decay).
#pragma once

#include "../core/warnings_push.hpp"  // GCC PR 105593: false -Wmaybe-uninitialized in AVX-512 intrinsics

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <xsimd/xsimd.hpp>

#include "../core/config.hpp"
#include "../core/error.hpp"

namespace kattn::optim {

struct adam_config {
    double lr = 1e-3;           ///< learning rate, finite and ≥ 0
    double beta1 = 0.9;         ///< first-moment decay, in [0, 1)
    double beta2 = 0.999;       ///< second-moment decay, in [0, 1)
    double eps = 1e-8;          ///< denominator guard, > 0
    double weight_decay = 0.0;  ///< decoupled (AdamW) decay, ≥ 0
    bool amsgrad = false;       ///< use the running maximum of v (Reddi et al., 2018)
};

class adam {
public:
    using config_type = adam_config;

    explicit adam(const adam_config& cfg = {}) : cfg_(cfg) {
        detail::require(std::isfinite(cfg.lr) && cfg.lr >= 0, "lr", "a finite value >= 0", cfg.lr);
        detail::require(cfg.beta1 >= 0 && cfg.beta1 < 1, "beta1", "a value in [0, 1)", cfg.beta1);
        detail::require(cfg.beta2 >= 0 && cfg.beta2 < 1, "beta2", "a value in [0, 1)", cfg.beta2);
        detail::require(std::isfinite(cfg.eps) && cfg.eps > 0, "eps", "a finite value > 0", cfg.eps);
        detail::require(std::isfinite(cfg.weight_decay) && cfg.weight_decay >= 0, "weight_decay", "a finite value >= 0",
                        cfg.weight_decay);
    }

    /// One update of `params` from `grads` (same size; the size of the first step).
    void step(std::span<double> params, std::span<const double> grads) { update(params, grads); }
    void step(std::span<float> params, std::span<const float> grads) { update(params, grads); }

    void set_lr(double lr) {
        detail::require(std::isfinite(lr) && lr >= 0, "lr", "a finite value >= 0", lr);
        cfg_.lr = lr;
    }
    double lr() const { return cfg_.lr; }
    const adam_config& config() const { return cfg_; }
    /// Number of steps taken since construction or reset().
    std::int64_t steps() const { return t_; }
    /// Size of the parameter buffer the state belongs to (0 before the first step).
    index_t size() const { return static_cast<index_t>(m_.size()); }
    /// Forgets moments and the step counter (the next step may use a new size).
    void reset() {
        t_ = 0;
        m_.clear();
        v_.clear();
        vmax_.clear();
    }
    /// First and second moments (read-only; for tests and checkpoints).
    const std::vector<double>& first_moment() const { return m_; }
    const std::vector<double>& second_moment() const { return v_; }
    /// Running maximum of v (amsgrad; empty otherwise).
    const std::vector<double>& max_second_moment() const { return vmax_; }
    /// Replaces the state by a saved one (resuming from a checkpoint): `steps` updates taken
    /// and the moments they left (all of one size; vmax only with amsgrad). steps = 0 with
    /// empty moments is the fresh state. The next step continues exactly as the saved run.
    void set_state(std::int64_t steps, std::vector<double> m, std::vector<double> v, std::vector<double> vmax = {}) {
        detail::require(steps >= 0, "steps", ">= 0", steps);
        detail::require(v.size() == m.size(), "v", "as many values as m (" + std::to_string(m.size()) + ")", v.size());
        detail::require(vmax.size() == (cfg_.amsgrad ? m.size() : 0), "vmax",
                        cfg_.amsgrad ? "as many values as m (amsgrad)" : "no values (amsgrad is off)", vmax.size());
        detail::require((steps == 0) == m.empty(), "m", steps == 0 ? "no values at step 0" : "the moments of a step",
                        m.size());
        t_ = steps;
        m_ = std::move(m);
        v_ = std::move(v);
        vmax_ = std::move(vmax);
    }

private:
    /// x[k] ← √x[k] for k < n; correctly rounded, as std::sqrt (whose errno handling keeps
    /// compilers from vectorising it).
    static void sqrt_inplace(double* x, std::size_t n) {
        using batch = xsimd::batch<double>;
        constexpr std::size_t w = batch::size;
        std::size_t k = 0;
        for (; k + w <= n; k += w) xsimd::sqrt(batch::load_unaligned(x + k)).store_unaligned(x + k);
        for (; k < n; ++k) x[k] = std::sqrt(x[k]);
    }

    template <class T>
    void update(std::span<T> p, std::span<const T> g) {
        detail::require(g.size() == p.size(), "grads", "as many values as params (" + std::to_string(p.size()) + ")",
                        g.size());
        if (t_ == 0 && m_.empty()) {
            m_.assign(p.size(), 0.0);
            v_.assign(p.size(), 0.0);
            if (cfg_.amsgrad) vmax_.assign(p.size(), 0.0);
        }
        detail::require(p.size() == m_.size(), "params",
                        "the size of the first step's buffer (" + std::to_string(m_.size()) + ")", p.size());
        ++t_;
        const double b1 = cfg_.beta1, b2 = cfg_.beta2, lr = cfg_.lr, eps = cfg_.eps;
        const double c1 = 1.0 - std::pow(b1, double(t_)), c2 = 1.0 - std::pow(b2, double(t_));
        const double decay = 1.0 - lr * cfg_.weight_decay;
        const double sc2 = 1.0 / std::sqrt(c2);
        const double ob1 = 1.0 - b1, ob2 = 1.0 - b2;
        const bool ams = cfg_.amsgrad;
        // Chunks of `chunk` elements in three branch-free (vectorisable) passes: moments, √v,
        // update. Every element's arithmetic is the scalar formula's, so results do not
        // depend on the chunking or the thread count.
        constexpr std::size_t chunk = 512;
        const std::size_t n = p.size(), chunks = (n + chunk - 1) / chunk;
        T* const pp = p.data();
        const T* const gp = g.data();
        double* const mp = m_.data();
        double* const vp = v_.data();
        double* const xp = ams ? vmax_.data() : nullptr;
#pragma omp parallel for schedule(static) if (n > 262144)
        for (std::size_t c = 0; c < chunks; ++c) {
            const std::size_t i0 = c * chunk, nc = std::min(chunk, n - i0);
            alignas(64) double den[chunk];
            T* const pc = pp + i0;
            const T* const gc = gp + i0;
            double* const mc = mp + i0;
            double* const vc = vp + i0;
            for (std::size_t k = 0; k < nc; ++k) {
                const double gi = static_cast<double>(gc[k]);
                mc[k] = b1 * mc[k] + ob1 * gi;
                const double vi = b2 * vc[k] + ob2 * gi * gi;
                vc[k] = vi;
                den[k] = vi;
            }
            if (ams) {
                double* const xc = xp + i0;
                for (std::size_t k = 0; k < nc; ++k) den[k] = xc[k] = std::max(xc[k], den[k]);
            }
            sqrt_inplace(den, nc);
            for (std::size_t k = 0; k < nc; ++k) {
                const double pi = static_cast<double>(pc[k]) * decay;
                pc[k] = static_cast<T>(pi - lr * (mc[k] / c1) / (den[k] * sc2 + eps));
            }
        }
    }

    adam_config cfg_;
    std::int64_t t_ = 0;
    std::vector<double> m_, v_, vmax_;
};

}  // namespace kattn::optim

#include "../core/warnings_pop.hpp"
