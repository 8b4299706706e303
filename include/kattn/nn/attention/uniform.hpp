// kattn/nn/attention/uniform.hpp — the uniform-attention control: constant features.
//
//   v = x·W_V,   o_i = (1/n_b) Σ_{j < n_b} v_j   (every query of sequence b, n_b valid keys),
//   y = o·W_O + b_O
// This is linear attention with a constant feature map (φ ≡ 1): every key gets the same
// weight, so the layer mixes tokens but cannot select among them. It is the floor a kernel
// must beat to show that its similarity matters (FSKA with s = 1 is almost exactly this:
// docs/encoder.md §3). Attention entropy is log n_b by construction.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

#include "../linear.hpp"
#include "../parameter.hpp"
#include "../tensor.hpp"
#include "detail/heads.hpp"

namespace kattn::nn {

struct uniform_attention_config {
    index_t dim = 0;         ///< D, model width
    std::uint64_t seed = 0;  ///< initialisation of W_V, W_O
};

template <class T = float>
class uniform_attention {
public:
    explicit uniform_attention(const uniform_attention_config& cfg)
        : cfg_(cfg),
          wv_({.in = cfg.dim, .out = cfg.dim, .seed = detail::derive_seed(cfg.seed, 2)}),
          wo_({.in = cfg.dim, .out = cfg.dim, .seed = detail::derive_seed(cfg.seed, 3)}) {}

    std::string_view name() const { return "uniform"; }

    tensor<T> forward(const tensor<T>& x, const context& ctx) {
        detail::check_context(ctx);
        detail::check_rows("x", x, ctx, cfg_.dim);
        ctx_ = ctx;
        cached_ = true;
        const tensor<T> v = wv_.forward(x);
        tensor<T> o = zeros<T>(ctx.rows(), cfg_.dim);
        const index_t D = cfg_.dim, L = ctx.length;
        for (index_t b = 0; b < ctx.batch; ++b) {
            const index_t n = ctx.valid(b);
            std::vector<T> mean(std::size_t(D), T(0));
            for (index_t j = 0; j < n; ++j)
                for (index_t c = 0; c < D; ++c) mean[c] += v(b * L + j, c);
            for (index_t c = 0; c < D; ++c) mean[c] /= T(n);
            for (index_t i = 0; i < L; ++i) std::copy(mean.begin(), mean.end(), o.data() + (b * L + i) * D);
        }
        return wo_.forward(o);
    }

    tensor<T> backward(const tensor<T>& dy, const context& ctx) {
        detail::require_cache(cached_, "uniform_attention");
        detail::check_rows("dy", dy, ctx, cfg_.dim);
        const tensor<T> dout = wo_.backward(dy);
        tensor<T> dv = zeros<T>(ctx_.rows(), cfg_.dim);
        const index_t D = cfg_.dim, L = ctx_.length;
        for (index_t b = 0; b < ctx_.batch; ++b) {
            const index_t n = ctx_.valid(b);
            std::vector<T> s(std::size_t(D), T(0));
            for (index_t i = 0; i < L; ++i)
                for (index_t c = 0; c < D; ++c) s[c] += dout(b * L + i, c);
            for (index_t j = 0; j < n; ++j)
                for (index_t c = 0; c < D; ++c) dv(b * L + j, c) = s[c] / T(n);
        }
        return wv_.backward(dv);
    }

    void collect(parameter_list& ps, const std::string& prefix) {
        wv_.collect(ps, prefix + ".v");
        wo_.collect(ps, prefix + ".out");
    }

    /// Mean over sequences and valid queries of log n_b (the weights are exactly 1/n_b).
    double attention_entropy(const tensor<T>& x, const context& ctx) const {
        detail::check_context(ctx);
        detail::check_rows("x", x, ctx, cfg_.dim);
        double s = 0;
        index_t q = 0;
        for (index_t b = 0; b < ctx.batch; ++b) {
            s += double(ctx.valid(b)) * std::log(double(ctx.valid(b)));
            q += ctx.valid(b);
        }
        return s / double(q);
    }

private:
    uniform_attention_config cfg_;
    linear<T> wv_, wo_;
    context ctx_;
    bool cached_ = false;
};

}  // namespace kattn::nn
