// kattn/nn/attention/kernel_mha.hpp — multi-head kernelized attention with learned Q/K/V
// projections and fixed random frequencies ("vanilla" feature maps; Performer).
//
//   Q = x·W_Q + b_Q, K = x·W_K + b_K, V = x·W_V + b_V   (nn::linear D → D), dh = D / H
//   o_h,i = Σ_{j valid} φ(q_h,i)ᵀφ(k_h,j) v_h,j / Σ_{j valid} φ(q_h,i)ᵀφ(k_h,j)
//   y = concat_h(o_h)·W_O + b_O
// with φ = Map under one kattn::linear_attention<Map, Sampler, Backend, T> operator:
// Ω (dh × num_features) is drawn once from `Sampler` with a seed derived from config.seed,
// is shared by all heads and is not trained (backward ignores d_omega); set_omega replaces it.
// Feature-map and sampler options (temperature, floor, scale, renormalize, sigma, norms,
// input_scale, eps) come from config.attention; its head_dim, value_dim, num_features and
// seed are set by the layer. Performer = kernel_mha<features::favor,
// samplers::orthogonal_gaussian> (favor scales q, k by dh^{-1/4}: softmax attention
// exp(qᵀk/√dh)). Parameters: "<prefix>.{q,k,v,out}.{weight,bias}".
// attention_entropy uses a_ij ∝ |φ(q_i)ᵀφ(k_j)| (the absolute value only matters for signed maps).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "../../attention/linear_attention.hpp"
#include "../../features/favor.hpp"
#include "../../samplers/orthogonal_gaussian.hpp"
#include "../linear.hpp"
#include "../parameter.hpp"
#include "../tensor.hpp"
#include "detail/heads.hpp"

namespace kattn::nn {

struct kernel_mha_config {
    index_t dim = 0;             ///< D, model width
    index_t heads = 1;           ///< H, a divisor of D
    index_t num_features = 256;  ///< columns of Ω
    bool causal = false;         ///< query i attends to keys j ≤ i only
    std::uint64_t seed = 0;      ///< projections and Ω
    /// The map's and sampler's parameters and the operator options (input_scale, eps, ...);
    /// head_dim, value_dim, num_features and seed are the layer's (dim / heads,
    /// num_features, a seed derived from `seed`): leave them 0 here.
    kattn::attention_config<> attention{};
};

template <class Map, class Sampler = typename Map::default_sampler, class T = float, class Backend = backends::simd>
class kernel_mha {
public:
    /// Dense layers on the backend's matrix products.
    using linear_type = linear<T, kattn::detail::gemm_of<Backend>>;
    using operator_type = linear_attention<Map, Sampler, Backend, T>;

    explicit kernel_mha(const kernel_mha_config& cfg) : cfg_(cfg), op_(make_config(cfg)) {
        const index_t D = cfg.dim;
        wq_ = linear_type({.in = D, .out = D, .seed = detail::derive_seed(cfg.seed, 0)});
        wk_ = linear_type({.in = D, .out = D, .seed = detail::derive_seed(cfg.seed, 1)});
        wv_ = linear_type({.in = D, .out = D, .seed = detail::derive_seed(cfg.seed, 2)});
        wo_ = linear_type({.in = D, .out = D, .seed = detail::derive_seed(cfg.seed, 3)});
        if constexpr (std::is_same_v<Map, features::favor> && std::is_same_v<Sampler, samplers::orthogonal_gaussian>)
            name_ = "performer";
        else
            name_ = std::string("kernel-") + Map::name;
    }

    const kernel_mha_config& config() const { return cfg_; }
    std::string_view name() const { return name_; }
    const operator_type& attention() const { return op_; }
    linear_type& output() { return wo_; }
    /// Replaces Ω [dh, num_features] (shared by all heads).
    void set_omega(const xt::xtensor<T, 2>& omega) { op_.set_omega(omega); }
    const xt::xtensor<T, 2>& omega() const { return op_.omega(); }

    tensor<T> forward(const tensor<T>& x, const context& ctx) {
        detail::check_context(ctx);
        detail::check_rows("x", x, ctx, cfg_.dim);
        ctx_ = ctx;
        lens_ = detail::key_counts(ctx);
        qh_ = detail::to_heads(wq_.forward(x), ctx, cfg_.heads, dh_);
        kh_ = detail::to_heads(wk_.forward(x), ctx, cfg_.heads, dh_);
        vh_ = detail::to_heads(wv_.forward(x), ctx, cfg_.heads, dh_);
        cached_ = true;
        return wo_.forward(detail::from_heads(detail::attend(op_, qh_, kh_, vh_, cfg_.causal, lens_, saved_)));
    }

    tensor<T> backward(const tensor<T>& dy, const context& ctx) {
        detail::require_cache(cached_, "kernel_mha");
        detail::check_rows("dy", dy, ctx, cfg_.dim);
        const auto dout = detail::to_heads(wo_.backward(dy), ctx_, cfg_.heads, dh_);
        const auto g = detail::attend_backward(op_, qh_, kh_, vh_, dout, cfg_.causal, lens_, saved_);
        tensor<T> dx = wq_.backward(detail::from_heads(g.dq));
        dx += wk_.backward(detail::from_heads(g.dk));
        dx += wv_.backward(detail::from_heads(g.dv));
        return dx;
    }

    void collect(parameter_list& ps, const std::string& prefix) {
        wq_.collect(ps, prefix + ".q");
        wk_.collect(ps, prefix + ".k");
        wv_.collect(ps, prefix + ".v");
        wo_.collect(ps, prefix + ".out");
    }

    double attention_entropy(const tensor<T>& x, const context& ctx) const {
        detail::check_context(ctx);
        detail::check_rows("x", x, ctx, cfg_.dim);
        const tensor<T> q = wq_.apply(x), k = wk_.apply(x);
        std::vector<xt::xtensor<T, 2>> pq, pk;  // per (b, h): features [L, F]
        for (index_t b = 0; b < ctx.batch; ++b)
            for (index_t h = 0; h < cfg_.heads; ++h) {
                pq.push_back(op_.features(detail::sequence_head(q, ctx, b, h, dh_)));
                pk.push_back(op_.features(detail::sequence_head(k, ctx, b, h, dh_)));
            }
        return detail::mean_attention_entropy(ctx, cfg_.heads, cfg_.causal,
                                              [&](index_t b, index_t h, index_t i, index_t n, double* w) {
                                                  const auto p = std::size_t(b * cfg_.heads + h);
                                                  detail::kernel_row(&pq[p](i, 0), pk[p], n, w);
                                              });
    }

private:
    typename operator_type::config_type make_config(const kernel_mha_config& cfg) {
        dh_ = detail::head_dim_of(cfg.dim, cfg.heads);
        kattn::attention_config<> a = cfg.attention;
        a.head_dim = dh_;
        a.value_dim = dh_;
        a.num_features = cfg.num_features;
        a.seed = detail::derive_seed(cfg.seed, 4);
        return a;
    }

    kernel_mha_config cfg_;
    index_t dh_ = 0;
    operator_type op_;
    linear_type wq_, wk_, wv_, wo_;
    std::string name_;
    context ctx_{};
    std::vector<index_t> lens_;
    xt::xtensor<T, 4> qh_, kh_, vh_;
    typename operator_type::saved_state saved_;  ///< the forward's key states, reused by backward
    bool cached_ = false;
};

/// Performer: favor features with orthogonal random frequencies and learned Q/K/V.
template <class T = float, class Backend = backends::simd>
using performer = kernel_mha<features::favor, samplers::orthogonal_gaussian, T, Backend>;

}  // namespace kattn::nn
