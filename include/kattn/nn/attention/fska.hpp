// kattn/nn/attention/fska.hpp — FSKA attention: nonstationary spectral features whose
// frequency pairs come from a per-head RealNVP flow.
//
//   head h: Q_h = K_h = x[:, h·dh : (h+1)·dh] (no projection), V = x·W_V (fixed orthogonal)
//   Ω_h: m pairs (ω₁ₖ, ω₂ₖ) = F_θh(z_k), z ~ N(0, I_{2dh}) (fresh per training step)
//   φ_ns(x) = (4m)^{-1/2}[cos Ω₁ᵀx + cos Ω₂ᵀx ; sin Ω₁ᵀx + sin Ω₂ᵀx],  φ = ELU(s·φ_ns) + 1 or φ_ns
//   y = concat_h(o_h)·W_O + b_O,   regularization(ctx) = λ·Σ_h KL(p_θh ‖ p_NGSM)
// fska_attention<T, Backend>(fska_config): forward, backward (dΩ goes through the flow:
// flow.backward(z, dω)), regularization, attention_entropy, collect ("<prefix>.flow{h}",
// ".out.*", ".v.weight" if learnable_v). Details (evaluation draws, why s = 1 is nearly
// uniform): docs/encoder.md §3.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "../../attention/linear_attention.hpp"
#include "../../features/nonstationary.hpp"
#include "../../features/positive.hpp"
#include "../../samplers/gmm.hpp"
#include "../../samplers/realnvp.hpp"
#include "../linear.hpp"
#include "../parameter.hpp"
#include "../tensor.hpp"
#include "detail/heads.hpp"

namespace kattn::nn {

struct fska_config {
    index_t dim = 0;               ///< D, model width
    index_t heads = 1;             ///< H, a divisor of D
    index_t num_pairs = 64;        ///< m frequency pairs per head (feature dimension 2m)
    index_t flow_layers = 3;       ///< RealNVP coupling layers
    index_t flow_hidden = 0;       ///< hidden width of s, t; 0 → 2·D_flow = 4·dh
    index_t ngsm_components = 10;  ///< Q of the NGSM prior
    double kl_weight = 1e-3;       ///< λ
    index_t kl_samples = 64;       ///< Monte-Carlo draws of the KL estimate
    bool positive = true;          ///< φ⁺ = ELU(s·φ_ns) + 1; false: signed φ_ns
    double scale = 1.0;            ///< s of φ⁺
    bool learnable_v = false;      ///< W_V trainable (initialised orthogonal)
    bool shared_flow = false;      ///< one flow for every head
    bool causal = false;           ///< query i attends to keys j ≤ i only
    std::uint64_t seed = 0;
};

template <class T = float, class Backend = backends::simd>
class fska_attention {
public:
    /// Dense layers on the backend's matrix products.
    using linear_type = linear<T, kattn::detail::gemm_of<Backend>>;
    using positive_op = linear_attention<features::positive<features::nonstationary>, samplers::realnvp, Backend, T>;
    using signed_op = linear_attention<features::nonstationary, samplers::realnvp, Backend, T>;

    explicit fska_attention(const fska_config& cfg)
        : cfg_(cfg), dh_(detail::head_dim_of(cfg.dim, cfg.heads)), prior_(make_prior(cfg, dh_)) {
        detail::require(cfg.num_pairs >= 1, "num_pairs", ">= 1", cfg.num_pairs);
        detail::require(cfg.kl_samples >= 1, "kl_samples", ">= 1", cfg.kl_samples);
        detail::require(std::isfinite(cfg.kl_weight) && cfg.kl_weight >= 0, "kl_weight", "a finite value >= 0",
                        cfg.kl_weight);
        const index_t D = cfg.dim, H = cfg.heads, nflows = cfg.shared_flow ? 1 : H;
        for (index_t f = 0; f < nflows; ++f)
            flows_.emplace_back(samplers::realnvp_config{.dim = 2 * dh_,
                                                         .layers = cfg.flow_layers,
                                                         .hidden = cfg.flow_hidden,
                                                         .seed = detail::derive_seed(cfg.seed, 100 + f)});
        typename positive_op::config_type ap{
            .head_dim = dh_, .value_dim = dh_, .num_features = 2 * cfg.num_pairs, .feature = {.scale = cfg.scale}};
        typename signed_op::config_type as{.head_dim = dh_, .value_dim = dh_, .num_features = 2 * cfg.num_pairs};
        for (index_t h = 0; h < H; ++h) {
            ap.seed = as.seed = eval_seed(h);
            if (cfg.positive)
                pos_.emplace_back(ap, flow(h));
            else
                sgn_.emplace_back(as, flow(h));
        }
        z_.resize(std::size_t(H));
        wv_ = linear_type({.in = D, .out = D, .bias = false, .trainable = cfg.learnable_v});
        const std::vector<double> q = detail::orthogonal_matrix(D, detail::derive_seed(cfg.seed, 1));
        for (std::size_t i = 0; i < q.size(); ++i) wv_.weight().value[i] = T(q[i]);
        wo_ = linear_type({.in = D, .out = D, .seed = detail::derive_seed(cfg.seed, 2)});
        name_ = cfg.positive ? "fska" : "fska-signed";
    }

    const fska_config& config() const { return cfg_; }
    std::string_view name() const { return name_; }
    index_t head_dim() const { return dh_; }
    samplers::realnvp& flow(index_t h) { return flows_[std::size_t(cfg_.shared_flow ? 0 : h)]; }
    const samplers::realnvp& flow(index_t h) const { return flows_[std::size_t(cfg_.shared_flow ? 0 : h)]; }
    const samplers::gmm& prior() const { return prior_; }
    linear_type& value() { return wv_; }
    linear_type& output() { return wo_; }
    /// Ω [dh, 2m] of head h in the last forward.
    const xt::xtensor<T, 2>& omega(index_t h) const {
        return cfg_.positive ? pos_[std::size_t(h)].omega() : sgn_[std::size_t(h)].omega();
    }

    /// Seed of head h's flow noise for a pass: fresh per step in training, fixed in evaluation.
    std::uint64_t draw_seed(const context& ctx, index_t h) const {
        return ctx.training ? detail::step_seed(detail::derive_seed(cfg_.seed, 200 + h), ctx.step) : eval_seed(h);
    }

    tensor<T> forward(const tensor<T>& x, const context& ctx) {
        detail::check_context(ctx);
        detail::check_rows("x", x, ctx, cfg_.dim);
        ctx_ = ctx;
        lens_ = detail::key_counts(ctx);
        x_ = x;
        v_ = wv_.forward(x);
        for (index_t h = 0; h < cfg_.heads; ++h) {
            z_[std::size_t(h)] = flow(h).noise(cfg_.num_pairs, draw_seed(ctx, h));
            const auto om = detail::pairs_to_omega<T>(flow(h).forward(z_[std::size_t(h)]), dh_);
            visit(h, [&](auto& op) { op.set_omega(om); });
        }
        cached_ = true;
        return wo_.forward(detail::self_heads_forward(
            x, v_, ctx, cfg_.heads, dh_, cfg_.causal, lens_, [this](index_t h, auto&& f) { visit(h, f); }, saved_));
    }

    tensor<T> backward(const tensor<T>& dy, const context& ctx) {
        detail::require_cache(cached_, "fska_attention");
        detail::check_rows("dy", dy, ctx, cfg_.dim);
        const tensor<T> dyo = wo_.backward(dy);
        tensor<T> dv;
        tensor<T> dx = detail::self_heads_backward(
            x_, v_, dyo, ctx_, cfg_.heads, dh_, cfg_.causal, lens_, dv, [this](index_t h, auto&& f) { visit(h, f); },
            [this](index_t h, const auto& g) {
                flow(h).backward(z_[std::size_t(h)], detail::omega_to_pairs(g.d_omega));
            },
            saved_);
        dx += wv_.backward(dv);
        return dx;
    }

    /// λ·Σ_flows KL(p_θ ‖ p_NGSM) (Monte-Carlo, noise keyed by ctx.step); accumulates its
    /// gradient into the flows' grads.
    double regularization(const context& ctx) {
        double r = 0;
        for (std::size_t f = 0; f < flows_.size(); ++f) {
            const std::uint64_t s = detail::step_seed(detail::derive_seed(cfg_.seed, 400 + f), ctx.step);
            r += cfg_.kl_weight * flows_[f].kl_backward(prior_, cfg_.kl_samples, s, cfg_.kl_weight);
        }
        return r;
    }

    void collect(parameter_list& ps, const std::string& prefix) {
        for (std::size_t f = 0; f < flows_.size(); ++f) {
            parameter_view v;
            v.name = prefix + (cfg_.shared_flow ? std::string(".flow") : ".flow" + std::to_string(f));
            v.shape = {std::size_t(flows_[f].num_params())};
            v.value64 = flows_[f].parameters();
            v.grad64 = flows_[f].grads();
            v.decay = false;
            ps.push_back(std::move(v));
        }
        wv_.collect(ps, prefix + ".v");
        wo_.collect(ps, prefix + ".out");
    }

    /// Mean attention entropy with the frequencies ctx selects (see draw_seed); a_ij ∝
    /// |φ(x_i)ᵀφ(x_j)| (the absolute value matters only for the signed variant).
    double attention_entropy(const tensor<T>& x, const context& ctx) const {
        detail::check_context(ctx);
        detail::check_rows("x", x, ctx, cfg_.dim);
        std::vector<xt::xtensor<T, 2>> phi;  // per (b, h)
        for (index_t b = 0; b < ctx.batch; ++b)
            for (index_t h = 0; h < cfg_.heads; ++h) {
                const auto om =
                    detail::pairs_to_omega<T>(flow(h).forward(flow(h).noise(cfg_.num_pairs, draw_seed(ctx, h))), dh_);
                const auto xs = detail::sequence_head(x, ctx, b, h, dh_);
                if (cfg_.positive) {
                    positive_op op = pos_[std::size_t(h)];
                    op.set_omega(om);
                    phi.push_back(op.features(xs));
                } else {
                    signed_op op = sgn_[std::size_t(h)];
                    op.set_omega(om);
                    phi.push_back(op.features(xs));
                }
            }
        return detail::mean_attention_entropy(ctx, cfg_.heads, cfg_.causal,
                                              [&](index_t b, index_t h, index_t i, index_t n, double* w) {
                                                  const auto& p = phi[std::size_t(b * cfg_.heads + h)];
                                                  detail::kernel_row(&p(i, 0), p, n, w);
                                              });
    }

private:
    static samplers::gmm make_prior(const fska_config& cfg, index_t dh) {
        detail::require(cfg.ngsm_components >= 1, "ngsm_components", ">= 1", cfg.ngsm_components);
        return samplers::gmm::ngsm(dh, cfg.ngsm_components, detail::derive_seed(cfg.seed, 3));
    }
    std::uint64_t eval_seed(index_t h) const { return detail::derive_seed(cfg_.seed, 300 + h); }

    template <class F>
    void visit(index_t h, F&& f) {
        if (cfg_.positive)
            f(pos_[std::size_t(h)]);
        else
            f(sgn_[std::size_t(h)]);
    }

    fska_config cfg_;
    index_t dh_ = 0;
    samplers::gmm prior_;
    std::vector<samplers::realnvp> flows_;
    std::vector<positive_op> pos_;
    std::vector<signed_op> sgn_;
    linear_type wv_, wo_;
    std::string name_;
    context ctx_{};
    std::vector<index_t> lens_;
    tensor<T> x_, v_;
    std::vector<kattn::saved_state<T>> saved_;  ///< per head: the forward's key states, reused by backward
    std::vector<xt::xtensor<double, 2>> z_;
    bool cached_ = false;
};

}  // namespace kattn::nn
