// kattn/nn/ffn.hpp — the position-wise feed-forward block of a Transformer layer.
//
//   h = act(x·W₁ + b₁)             W₁ ∈ R^{dim × hidden}  (relu or exact gelu)
//   y = dropout(h)·W₂ + b₂          W₂ ∈ R^{hidden × dim}
// Linear layers as nn::linear (U(±1/√in) init) with seeds sub_seed(seed, 0), sub_seed(seed, 1);
// the dropout (on the hidden activations, as PyTorch's TransformerEncoderLayer) has seed
// sub_seed(seed, 2) and draws its mask from ctx.step. backward returns dx and accumulates the
// linear layers' gradients. Parameters "<prefix>.fc1.{weight,bias}", "<prefix>.fc2.{weight,bias}".
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

struct ffn_config {
    index_t dim = 0, hidden = 0;
    activation_kind activation = activation_kind::relu;
    double dropout = 0.1;
    std::uint64_t seed = 0;
};

template <class T = float>
class ffn {
public:
    ffn() = default;
    explicit ffn(const ffn_config& cfg) : cfg_(cfg) {
        detail::require(cfg.dim >= 1, "dim", ">= 1", cfg.dim);
        detail::require(cfg.hidden >= 1, "hidden", ">= 1", cfg.hidden);
        detail::require(cfg.dropout >= 0 && cfg.dropout < 1, "dropout", "a value in [0, 1)", cfg.dropout);
        fc1_ = linear<T>({.in = cfg.dim, .out = cfg.hidden, .seed = detail::sub_seed(cfg.seed, 0)});
        fc2_ = linear<T>({.in = cfg.hidden, .out = cfg.dim, .seed = detail::sub_seed(cfg.seed, 1)});
        act_ = activation_layer<T>(cfg.activation);
        drop_ = dropout<T>({.p = cfg.dropout, .seed = detail::sub_seed(cfg.seed, 2)});
    }

    index_t dim() const { return cfg_.dim; }
    index_t hidden() const { return cfg_.hidden; }
    linear<T>& fc1() { return fc1_; }
    linear<T>& fc2() { return fc2_; }
    const dropout<T>& hidden_dropout() const { return drop_; }

    /// y [B·L, dim] for x [B·L, dim]; caches what backward needs.
    tensor<T> forward(const tensor<T>& x, const context& ctx) {
        detail::check_rows("x", x, ctx, cfg_.dim);
        return fc2_.forward(drop_.forward(act_.forward(fc1_.forward(x, ctx), ctx), ctx), ctx);
    }

    /// dx for dy [B·L, dim] of the last forward; accumulates the parameter gradients.
    tensor<T> backward(const tensor<T>& dy, const context& ctx) {
        detail::check_rows("dy", dy, ctx, cfg_.dim);
        return fc1_.backward(act_.backward(drop_.backward(fc2_.backward(dy, ctx), ctx), ctx), ctx);
    }

    void collect(parameter_list& ps, const std::string& prefix) {
        fc1_.collect(ps, prefix + ".fc1");
        fc2_.collect(ps, prefix + ".fc2");
    }

private:
    ffn_config cfg_{};
    linear<T> fc1_, fc2_;
    activation_layer<T> act_;
    dropout<T> drop_;
};

}  // namespace kattn::nn
