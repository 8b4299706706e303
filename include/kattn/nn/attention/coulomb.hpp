// kattn/nn/attention/coulomb.hpp — kernel attention whose frequencies are Coulomb/Riesz
// particles aligned to the labels by projected Langevin dynamics (phase A), then frozen
// while the rest of the model trains (phase B).
//
//   head h: Q_h = K_h = x[:, h·dh : (h+1)·dh], V = x·W_V + b_V (learned), φ_h = Map with Ω_h
//   o_h,i = Σ_j φ_h(q_i)ᵀφ_h(k_j) v_h,j / Σ_j φ_h(q_i)ᵀφ_h(k_j),   y = concat_h(o_h)·W_O + b_O
// coulomb_attention<Map, T, Backend>(coulomb_config), Map a positive map. Ω_h starts as the
// particles of a samplers::langevin<Map>; backward never changes it. align(pooled, labels,
// steps) runs at most `steps` Langevin steps per head on the mean-pooled inputs, installs
// the particles as Ω_h and returns the kernel-target alignment before and after; without it
// the layer is the "vanilla" random-feature model. Parameters: "<prefix>.{v,out}.{weight,bias}";
// Ω_h is state, not a parameter: omega(h) / set_omega(h, Ω) read and restore it.
// learn_input_scale: Q_h = K_h = s_h·x[:, head h] with s_h = exp(ℓ_h) learned per head
// (parameter "<prefix>.log_scale", [H], no weight decay, starting at the map's input scale);
// the map's sharpness, which decides whether the attention can select tokens at all.
// Details: docs/encoder.md §3 (Coulomb) and §5 (two phases).
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "../../attention/linear_attention.hpp"
#include "../../samplers/langevin.hpp"
#include "../linear.hpp"
#include "../parameter.hpp"
#include "../tensor.hpp"
#include "detail/heads.hpp"

namespace kattn::nn {

struct coulomb_config {
    index_t dim = 0;             ///< D, model width
    index_t heads = 1;           ///< H, a divisor of D
    index_t num_features = 256;  ///< m, columns of Ω per head
    bool causal = false;         ///< query i attends to keys j ≤ i only
    std::uint64_t seed = 0;
    double temperature = 1.0;  ///< τ of the map
    double floor = 1e-6;       ///< floor of the map
    bool renormalize = true;   ///< ℓ1 renormalisation of the map
    double sigma = 1.0;        ///< initial particles ~ N(0, σ⁻²I)
    /// Q = K = the input times this before the map (default: the map's, d_h^{-1/4} for favor, else 1).
    std::optional<double> input_scale{};
    /// Learn one input scale per head (as its logarithm, from input_scale or the map's default).
    bool learn_input_scale = false;
    /// Phase A dynamics (published: η = 2e-3, β = 50, λ = 1e-3, R = 1.5, clip 10; Coulomb
    /// potential, replaced by the log potential when the particle dimension is < 3).
    samplers::langevin_options langevin{.step_size = 2e-3,
                                        .beta = 50.0,
                                        .lambda = 1e-3,
                                        .potential = samplers::repulsion::coulomb,
                                        .radius = 1.5,
                                        .gradient_clip = 10.0};
};

/// Per-head kernel-target alignment of one align() call.
struct alignment_report {
    std::vector<double> kta_before, kta_after;
    std::vector<index_t> steps;  ///< Langevin steps taken per head
};

template <class Map, class T = float, class Backend = backends::simd>
class coulomb_attention {
public:
    /// Dense layers on the backend's matrix products.
    using linear_type = linear<T, kattn::detail::gemm_of<Backend>>;
    using sampler_type = samplers::langevin<Map, backends::reference>;
    using operator_type = linear_attention<Map, sampler_type, Backend, T>;

    explicit coulomb_attention(const coulomb_config& cfg) : cfg_(cfg), dh_(detail::head_dim_of(cfg.dim, cfg.heads)) {
        static_assert(Map::is_positive, "kattn::nn::coulomb_attention: Map must be a positive feature map");
        detail::require(cfg.num_features >= 1, "num_features", ">= 1", cfg.num_features);
        using traits = feature_map_traits<Map>;
        // One configuration per head, shared by the operator and its particles: the map's
        // parameters (those of coulomb_config the map has) and the initial sigma.
        kattn::attention_config<> g{.head_dim = dh_, .value_dim = dh_, .num_features = cfg.num_features};
        g.temperature = cfg.temperature;
        g.floor = cfg.floor;
        g.renormalize = cfg.renormalize;
        g.sigma = cfg.sigma;
        g.input_scale = cfg.input_scale;
        // A learned scale multiplies the head's inputs before the operator, which then keeps 1.
        const double s0 = cfg.input_scale                            ? *cfg.input_scale
                          : feature_map_traits<Map>::softmax_scaling ? std::pow(double(dh_), -0.25)
                                                                     : 1.0;
        if (cfg.learn_input_scale) g.input_scale = 1.0;
        typename operator_type::config_type a = g;
        samplers::langevin_options opt = cfg.langevin;
        if (opt.potential == samplers::repulsion::coulomb && traits::frequency_dim(dh_) < 3)
            opt.potential = samplers::repulsion::log;
        for (index_t h = 0; h < cfg.heads; ++h) {
            a.seed = detail::derive_seed(cfg.seed, 100 + h);
            particles_.emplace_back(a, opt);
            ops_.emplace_back(a, particles_.back());
        }
        wv_ = linear_type({.in = cfg.dim, .out = cfg.dim, .seed = detail::derive_seed(cfg.seed, 1)});
        wo_ = linear_type({.in = cfg.dim, .out = cfg.dim, .seed = detail::derive_seed(cfg.seed, 2)});
        name_ = std::string("coulomb-") + Map::name;
        if (cfg.learn_input_scale) {
            detail::require(std::isfinite(s0) && s0 > 0, "input_scale", "a finite value > 0", s0);
            log_scale_ = parameter<T>({std::size_t(cfg.heads)});
            for (auto& l : log_scale_.value) l = T(std::log(s0));
        }
    }

    const coulomb_config& config() const { return cfg_; }
    std::string_view name() const { return name_; }
    index_t head_dim() const { return dh_; }
    const operator_type& attention(index_t h) const { return ops_[std::size_t(h)]; }
    const sampler_type& particles(index_t h) const { return particles_[std::size_t(h)]; }
    /// Ω_h, the frequencies head h uses (phase A moves them; save them with the parameters).
    const xt::xtensor<T, 2>& omega(index_t h) const { return ops_[std::size_t(h)].omega(); }
    /// Replaces Ω_h (e.g. aligned frequencies read back from a model file): shape and
    /// finiteness are checked; the Langevin particles (used only by a later align) are not changed.
    void set_omega(index_t h, const xt::xtensor<T, 2>& omega) {
        detail::require(h >= 0 && h < cfg_.heads, "h", "a head in [0, " + std::to_string(cfg_.heads) + ")", h);
        ops_[std::size_t(h)].set_omega(omega);
    }
    /// s_h, the factor of head h's inputs before its map (learned or fixed).
    T input_scale(index_t h) const {
        return cfg_.learn_input_scale ? std::exp(log_scale_.value[std::size_t(h)]) : ops_[std::size_t(h)].input_scale();
    }
    linear_type& value() { return wv_; }
    linear_type& output() { return wo_; }

    /// Phase A (see the header comment): pooled [n, D], labels[i] in [0, C).
    alignment_report align(const tensor<T>& pooled, std::span<const int> labels, index_t steps) {
        detail::require(pooled.dimension() == 2 && index_t(pooled.shape()[1]) == cfg_.dim && pooled.shape()[0] >= 2,
                        "pooled", "shape [n >= 2, dim = " + std::to_string(cfg_.dim) + "]",
                        detail::shape_text(pooled.shape()));
        detail::require(steps >= 1, "steps", ">= 1", steps);
        const index_t n = index_t(pooled.shape()[0]);
        alignment_report rep;
        for (index_t h = 0; h < cfg_.heads; ++h) {
            auto& lv = particles_[std::size_t(h)];
            auto& op = ops_[std::size_t(h)];
            xt::xtensor<double, 2> p = xt::xtensor<double, 2>::from_shape({std::size_t(n), std::size_t(dh_)});
            const double s = double(input_scale(h));
            for (index_t i = 0; i < n; ++i)
                for (index_t c = 0; c < dh_; ++c) p(i, c) = s * double(pooled(i, h * dh_ + c));
            lv.set_data(p, labels);
            rep.kta_before.push_back(lv.kta());
            rep.steps.push_back(lv.run(steps).steps());
            rep.kta_after.push_back(lv.kta());
            const xt::xtensor<double, 2> om = lv.omega();
            xt::xtensor<T, 2> omt = xt::xtensor<T, 2>::from_shape(om.shape());
            for (std::size_t i = 0; i < om.size(); ++i) omt.data()[i] = T(om.data()[i]);
            op.set_omega(omt);
        }
        return rep;
    }

    tensor<T> forward(const tensor<T>& x, const context& ctx) {
        detail::check_context(ctx);
        detail::check_rows("x", x, ctx, cfg_.dim);
        ctx_ = ctx;
        lens_ = detail::key_counts(ctx);
        x_ = scaled(x);
        v_ = wv_.forward(x);
        cached_ = true;
        return wo_.forward(
            detail::self_heads_forward(x_, v_, ctx, cfg_.heads, dh_, cfg_.causal, lens_, with_op(), saved_));
    }

    tensor<T> backward(const tensor<T>& dy, const context& ctx) {
        detail::require_cache(cached_, "coulomb_attention");
        detail::check_rows("dy", dy, ctx, cfg_.dim);
        const tensor<T> dyo = wo_.backward(dy);
        tensor<T> dv;
        tensor<T> dx = detail::self_heads_backward(
            x_, v_, dyo, ctx_, cfg_.heads, dh_, cfg_.causal, lens_, dv, with_op(), [](index_t, const auto&) {},
            saved_);                   // Ω frozen
        if (cfg_.learn_input_scale) {  // dx is ∂L/∂(s_h x): ∂L/∂ℓ_h = Σ s_h x·dx, ∂L/∂x = s_h dx
            const index_t rows = index_t(dx.shape()[0]);
            for (index_t h = 0; h < cfg_.heads; ++h) {
                const T sh = input_scale(h);
                double acc = 0;
                for (index_t r = 0; r < rows; ++r)
                    for (index_t c = h * dh_; c < (h + 1) * dh_; ++c) {
                        acc += double(x_(r, c)) * double(dx(r, c));
                        dx(r, c) *= sh;
                    }
                log_scale_.grad[std::size_t(h)] += T(acc);
            }
        }
        dx += wv_.backward(dv);
        return dx;
    }

    void collect(parameter_list& ps, const std::string& prefix) {
        wv_.collect(ps, prefix + ".v");
        wo_.collect(ps, prefix + ".out");
        if (cfg_.learn_input_scale) ps.push_back(view(prefix + ".log_scale", log_scale_, false));
    }

    /// Mean attention entropy, a_ij ∝ φ_h(x_i)ᵀφ_h(x_j).
    double attention_entropy(const tensor<T>& x, const context& ctx) const {
        detail::check_context(ctx);
        detail::check_rows("x", x, ctx, cfg_.dim);
        std::vector<xt::xtensor<T, 2>> phi;
        const tensor<T> xs = scaled(x);
        for (index_t b = 0; b < ctx.batch; ++b)
            for (index_t h = 0; h < cfg_.heads; ++h)
                phi.push_back(ops_[std::size_t(h)].features(detail::sequence_head(xs, ctx, b, h, dh_)));
        return detail::mean_attention_entropy(ctx, cfg_.heads, cfg_.causal,
                                              [&](index_t b, index_t h, index_t i, index_t n, double* w) {
                                                  const auto& p = phi[std::size_t(b * cfg_.heads + h)];
                                                  detail::kernel_row(&p(i, 0), p, n, w);
                                              });
    }

private:
    /// x with head h's columns times s_h when the scales are learned (else x itself).
    tensor<T> scaled(const tensor<T>& x) const {
        tensor<T> xs = x;
        if (cfg_.learn_input_scale)
            for (index_t h = 0; h < cfg_.heads; ++h) {
                const T sh = input_scale(h);
                for (std::size_t r = 0; r < xs.shape()[0]; ++r)
                    for (index_t c = h * dh_; c < (h + 1) * dh_; ++c) xs(r, std::size_t(c)) *= sh;
            }
        return xs;
    }

    auto with_op() {
        return [this](index_t h, auto&& f) { f(ops_[std::size_t(h)]); };
    }

    coulomb_config cfg_;
    index_t dh_ = 0;
    std::vector<sampler_type> particles_;
    std::vector<operator_type> ops_;
    linear_type wv_, wo_;
    parameter<T> log_scale_;  ///< ℓ_h = log s_h (learn_input_scale)
    std::string name_;
    context ctx_{};
    std::vector<index_t> lens_;
    tensor<T> x_, v_;
    std::vector<kattn::saved_state<T>> saved_;  ///< per head: the forward's key states, reused by backward
    bool cached_ = false;
};

}  // namespace kattn::nn
