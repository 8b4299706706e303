// kattn/nn/head.hpp — the classification head on pooled representations.
//
//   hidden > 0:  logits = dropout(act(p·W₁ + b₁))·W₂ + b₂   W₁ ∈ R^{dim × hidden}, W₂ ∈ R^{hidden × classes}
//   hidden = 0:  logits = p·W + b                            W ∈ R^{dim × classes}
// p = pooled [B, dim] → logits [B, classes]. Linear layers as nn::linear with seeds
// sub_seed(seed, 0), sub_seed(seed, 1); dropout seed sub_seed(seed, 2), mask keyed by ctx.step.
// Parameters "<prefix>.fc1.{weight,bias}", "<prefix>.fc2.{weight,bias}" (hidden > 0) or
// "<prefix>.fc.{weight,bias}" (hidden = 0).
#pragma once

#include <cstdint>
#include <string>

#include "activation.hpp"
#include "detail/seed.hpp"
#include "dropout.hpp"
#include "linear.hpp"
#include "parameter.hpp"
#include "tensor.hpp"

namespace kattn::nn {

struct classifier_head_config {
    index_t dim = 0;
    index_t hidden = 0;  ///< 0: a single Linear(dim → classes)
    index_t classes = 0;
    activation_kind activation = activation_kind::relu;
    double dropout = 0.1;
    std::uint64_t seed = 0;
};

template <class T = float>
class classifier_head {
public:
    classifier_head() = default;
    explicit classifier_head(const classifier_head_config& cfg) : cfg_(cfg) {
        detail::require(cfg.dim >= 1, "dim", ">= 1", cfg.dim);
        detail::require(cfg.hidden >= 0, "hidden", ">= 0 (0: a single linear layer)", cfg.hidden);
        detail::require(cfg.classes >= 1, "classes", ">= 1", cfg.classes);
        detail::require(cfg.dropout >= 0 && cfg.dropout < 1, "dropout", "a value in [0, 1)", cfg.dropout);
        const index_t first_out = cfg.hidden > 0 ? cfg.hidden : cfg.classes;
        fc1_ = linear<T>({.in = cfg.dim, .out = first_out, .seed = detail::sub_seed(cfg.seed, 0)});
        if (cfg.hidden > 0) {
            fc2_ = linear<T>({.in = cfg.hidden, .out = cfg.classes, .seed = detail::sub_seed(cfg.seed, 1)});
            act_ = activation_layer<T>(cfg.activation);
            drop_ = dropout<T>({.p = cfg.dropout, .seed = detail::sub_seed(cfg.seed, 2)});
        }
    }

    index_t dim() const { return cfg_.dim; }
    index_t classes() const { return cfg_.classes; }

    /// logits [B, classes] for pooled [B = ctx.batch, dim].
    tensor<T> forward(const tensor<T>& pooled, const context& ctx) {
        check("pooled", pooled, ctx, cfg_.dim);
        if (cfg_.hidden == 0) return fc1_.forward(pooled, ctx);
        return fc2_.forward(drop_.forward(act_.forward(fc1_.forward(pooled, ctx), ctx), ctx), ctx);
    }

    /// d pooled for dlogits [B, classes] of the last forward; accumulates gradients.
    tensor<T> backward(const tensor<T>& dy, const context& ctx) {
        check("dy", dy, ctx, cfg_.classes);
        if (cfg_.hidden == 0) return fc1_.backward(dy, ctx);
        return fc1_.backward(act_.backward(drop_.backward(fc2_.backward(dy, ctx), ctx), ctx), ctx);
    }

    void collect(parameter_list& ps, const std::string& prefix) {
        if (cfg_.hidden == 0) {
            fc1_.collect(ps, prefix + ".fc");
            return;
        }
        fc1_.collect(ps, prefix + ".fc1");
        fc2_.collect(ps, prefix + ".fc2");
    }

private:
    static void check(std::string_view arg, const tensor<T>& x, const context& ctx, index_t width) {
        detail::require(x.dimension() == 2 && index_t(x.shape()[0]) == ctx.batch && index_t(x.shape()[1]) == width, arg,
                        "shape [batch = " + std::to_string(ctx.batch) + ", " + std::to_string(width) + "]",
                        detail::shape_text(x.shape()));
    }

    classifier_head_config cfg_{};
    linear<T> fc1_, fc2_;
    activation_layer<T> act_;
    dropout<T> drop_;
};

}  // namespace kattn::nn
