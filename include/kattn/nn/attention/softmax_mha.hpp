// kattn/nn/attention/softmax_mha.hpp — multi-head exact softmax attention (the Transformer
// baseline), with or without Q/K/V projections.
//
//   qkv = true:   Q = x·W_Q + b_Q, K = x·W_K + b_K, V = x·W_V + b_V   (nn::linear D → D)
//   qkv = false:  Q = K = V = x                                         ("without QKV")
//   head h uses columns [h·dh, (h+1)·dh), dh = D / H:
//     o_h,i = Σ_{j valid} softmax_j(q_h,i·k_h,j / √dh) v_h,j      (kattn::softmax_attention)
//   y = concat_h(o_h)·W_O + b_O                                       (nn::linear D → D)
// Valid keys: j < ctx.lengths[b] (and j ≤ i with config.causal). backward: the operator's
// exact dq, dk, dv, then the projections' backward (dx = dq·W_Qᵀ + dk·W_Kᵀ + dv·W_Vᵀ, or
// dq + dk + dv without projections). Parameters: "<prefix>.{q,k,v,out}.{weight,bias}".
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

#include "../../attention/softmax_attention.hpp"
#include "../linear.hpp"
#include "../parameter.hpp"
#include "../tensor.hpp"
#include "detail/heads.hpp"

namespace kattn::nn {

struct softmax_mha_config {
    index_t dim = 0;         ///< D, model width
    index_t heads = 1;       ///< H, a divisor of D
    bool qkv = true;         ///< learned Q/K/V projections
    bool causal = false;     ///< query i attends to keys j ≤ i only
    std::uint64_t seed = 0;  ///< initialisation of the projections
};

template <class T = float>
class softmax_mha {
public:
    explicit softmax_mha(const softmax_mha_config& cfg) : cfg_(cfg) {
        dh_ = detail::head_dim_of(cfg.dim, cfg.heads);
        const index_t D = cfg.dim;
        if (cfg.qkv) {
            wq_ = linear<T>({.in = D, .out = D, .seed = detail::derive_seed(cfg.seed, 0)});
            wk_ = linear<T>({.in = D, .out = D, .seed = detail::derive_seed(cfg.seed, 1)});
            wv_ = linear<T>({.in = D, .out = D, .seed = detail::derive_seed(cfg.seed, 2)});
        }
        wo_ = linear<T>({.in = D, .out = D, .seed = detail::derive_seed(cfg.seed, 3)});
    }

    const softmax_mha_config& config() const { return cfg_; }
    std::string_view name() const { return cfg_.qkv ? "softmax" : "softmax-noqkv"; }
    linear<T>& output() { return wo_; }

    tensor<T> forward(const tensor<T>& x, const context& ctx) {
        detail::check_context(ctx);
        detail::check_rows("x", x, ctx, cfg_.dim);
        ctx_ = ctx;
        lens_ = detail::key_counts(ctx);
        const index_t H = cfg_.heads;
        if (cfg_.qkv) {
            qh_ = detail::to_heads(wq_.forward(x), ctx, H, dh_);
            kh_ = detail::to_heads(wk_.forward(x), ctx, H, dh_);
            vh_ = detail::to_heads(wv_.forward(x), ctx, H, dh_);
        } else {
            qh_ = detail::to_heads(x, ctx, H, dh_);
            kh_ = qh_;
            vh_ = qh_;
        }
        cached_ = true;
        return wo_.forward(detail::from_heads(detail::attend(op_, qh_, kh_, vh_, cfg_.causal, lens_)));
    }

    tensor<T> backward(const tensor<T>& dy, const context& ctx) {
        detail::require_cache(cached_, "softmax_mha");
        detail::check_rows("dy", dy, ctx, cfg_.dim);
        const tensor<T> dyo = wo_.backward(dy);
        const auto dout = detail::to_heads(dyo, ctx_, cfg_.heads, dh_);
        const auto g = detail::attend_backward(op_, qh_, kh_, vh_, dout, cfg_.causal, lens_);
        const tensor<T> dq = detail::from_heads(g.dq), dk = detail::from_heads(g.dk), dv = detail::from_heads(g.dv);
        if (!cfg_.qkv) return tensor<T>(dq + dk + dv);
        tensor<T> dx = wq_.backward(dq);
        dx += wk_.backward(dk);
        dx += wv_.backward(dv);
        return dx;
    }

    void collect(parameter_list& ps, const std::string& prefix) {
        if (cfg_.qkv) {
            wq_.collect(ps, prefix + ".q");
            wk_.collect(ps, prefix + ".k");
            wv_.collect(ps, prefix + ".v");
        }
        wo_.collect(ps, prefix + ".out");
    }

    /// Mean entropy of the softmax rows over valid keys (see detail::mean_attention_entropy).
    double attention_entropy(const tensor<T>& x, const context& ctx) const {
        detail::check_context(ctx);
        detail::check_rows("x", x, ctx, cfg_.dim);
        const tensor<T> q = cfg_.qkv ? wq_.apply(x) : x, k = cfg_.qkv ? wk_.apply(x) : x;
        const double scale = 1.0 / std::sqrt(double(dh_));
        const index_t L = ctx.length;
        return detail::mean_attention_entropy(
            ctx, cfg_.heads, cfg_.causal, [&](index_t b, index_t h, index_t i, index_t n, double* w) {
                double mx = -INFINITY;
                for (index_t j = 0; j < n; ++j) {
                    double s = 0;
                    for (index_t c = 0; c < dh_; ++c)
                        s += double(q(b * L + i, h * dh_ + c)) * double(k(b * L + j, h * dh_ + c));
                    w[j] = scale * s;
                    mx = std::max(mx, w[j]);
                }
                for (index_t j = 0; j < n; ++j) w[j] = std::exp(w[j] - mx);
            });
    }

private:
    softmax_mha_config cfg_;
    index_t dh_ = 0;
    softmax_attention<T> op_{};
    linear<T> wq_, wk_, wv_, wo_;
    context ctx_{};
    std::vector<index_t> lens_;
    xt::xtensor<T, 4> qh_, kh_, vh_;
    bool cached_ = false;
};

}  // namespace kattn::nn
