// kattn/nn/encoder.hpp — a Transformer encoder whose attention is a policy.
//
//   post-LN (default, as in FSKA and the original Transformer):
//       h = LN₁(x + Dropout(Attn(x)))          y = LN₂(h + Dropout(FFN(h)))
//   pre-LN:
//       h = x + Dropout(Attn(LN₁(x)))          y = h + Dropout(FFN(LN₂(h)))
//
// `Attention` is any layer with forward(x, ctx) → [B·L, D], backward(dy, ctx) → dx,
// collect(ps, prefix) and name() (the concept nn::attention_layer, nn/layer.hpp):
// nn::softmax_mha, nn::kernel_mha<Map, Sampler> (Performer), nn::fska_attention,
// nn::coulomb_attention<Map>, or a user's own. Optional capabilities,
// detected with requires-expressions (has_regularization, has_attention_entropy,
// has_alignment): a loss term `regularization(ctx)` (FSKA's KL to the NGSM prior), the mean
// attention entropy, and Coulomb's phase A `align(pooled, labels, steps)`.
// The encoder builds its attention layers with a factory `make(layer_index)`, so each layer
// gets its own seed. Parameter names: "<prefix>.<l>.attn…", ".ln1", ".ffn", ".ln2".
#pragma once

#include <concepts>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "detail/seed.hpp"
#include "dropout.hpp"
#include "ffn.hpp"
#include "layer_norm.hpp"
#include "parameter.hpp"
#include "tensor.hpp"

namespace kattn::nn {

/// Layers with a loss term (FSKA's λ·KL): returns it and accumulates its gradient.
template <class A>
concept has_regularization = requires(A& a, const context& ctx) {
    { a.regularization(ctx) } -> std::convertible_to<double>;
};
/// Layers that report their mean attention entropy.
template <class A, class T>
concept has_attention_entropy = requires(const A& a, const tensor<T>& x, const context& ctx) {
    { a.attention_entropy(x, ctx) } -> std::convertible_to<double>;
};
/// Layers with a phase-A alignment of their frequencies (Coulomb particles).
template <class A, class T>
concept has_alignment = requires(A& a, const tensor<T>& x, std::span<const int> y, index_t steps) {
    a.align(x, y, steps);
};

struct encoder_config {
    index_t dim = 0;           ///< D
    index_t layers = 2;        ///< N encoder layers
    index_t ffn_hidden = 256;  ///< FFN width
    activation_kind activation = activation_kind::relu;
    double dropout = 0.1;  ///< residual and FFN dropout
    bool pre_ln = false;   ///< pre-LN instead of post-LN
    std::uint64_t seed = 0;
};

template <class Attention, class T = float>
class encoder_layer {
public:
    encoder_layer(const encoder_config& cfg, Attention attn, std::uint64_t seed)
        : attn_(std::move(attn)),
          ln1_({.dim = cfg.dim}),
          ln2_({.dim = cfg.dim}),
          ffn_({.dim = cfg.dim,
                .hidden = cfg.ffn_hidden,
                .activation = cfg.activation,
                .dropout = cfg.dropout,
                .seed = detail::sub_seed(seed, 1)}),
          drop1_({.p = cfg.dropout, .seed = detail::sub_seed(seed, 2)}),
          drop2_({.p = cfg.dropout, .seed = detail::sub_seed(seed, 3)}),
          pre_ln_(cfg.pre_ln) {}

    tensor<T> forward(const tensor<T>& x, const context& ctx) {
        if (pre_ln_) {
            tensor<T> h = x + drop1_.forward(attn_.forward(ln1_.forward(x, ctx), ctx), ctx);
            return h + drop2_.forward(ffn_.forward(ln2_.forward(h, ctx), ctx), ctx);
        }
        tensor<T> h = ln1_.forward(x + drop1_.forward(attn_.forward(x, ctx), ctx), ctx);
        return ln2_.forward(h + drop2_.forward(ffn_.forward(h, ctx), ctx), ctx);
    }

    tensor<T> backward(const tensor<T>& dy, const context& ctx) {
        if (pre_ln_) {
            tensor<T> dh = dy + ln2_.backward(ffn_.backward(drop2_.backward(dy, ctx), ctx), ctx);
            return dh + ln1_.backward(attn_.backward(drop1_.backward(dh, ctx), ctx), ctx);
        }
        const tensor<T> ds = ln2_.backward(dy, ctx);  // d(h + drop(ffn(h)))
        tensor<T> dh = ds + ffn_.backward(drop2_.backward(ds, ctx), ctx);
        const tensor<T> dr = ln1_.backward(dh, ctx);  // d(x + drop(attn(x)))
        return dr + attn_.backward(drop1_.backward(dr, ctx), ctx);
    }

    void collect(parameter_list& ps, const std::string& prefix) {
        attn_.collect(ps, prefix + ".attn");
        ln1_.collect(ps, prefix + ".ln1");
        ffn_.collect(ps, prefix + ".ffn");
        ln2_.collect(ps, prefix + ".ln2");
    }

    Attention& attention() { return attn_; }
    const Attention& attention() const { return attn_; }

    /// The input the attention sees for x (pre-LN: LN₁(x)); no cache is touched.
    tensor<T> attention_input(const tensor<T>& x) const { return pre_ln_ ? ln1_.apply(x) : x; }

private:
    Attention attn_;
    layer_norm<T> ln1_, ln2_;
    ffn<T> ffn_;
    dropout<T> drop1_, drop2_;
    bool pre_ln_ = false;
};

template <class Attention, class T = float>
class encoder {
public:
    using attention_type = Attention;
    using layer_type = encoder_layer<Attention, T>;

    /// make(l) builds layer l's attention (give each its own seed).
    encoder(const encoder_config& cfg, const std::function<Attention(index_t)>& make) : cfg_(cfg) {
        detail::require(cfg.dim >= 1, "dim", ">= 1", cfg.dim);
        detail::require(cfg.layers >= 1, "layers", ">= 1", cfg.layers);
        detail::require(cfg.ffn_hidden >= 1, "ffn_hidden", ">= 1", cfg.ffn_hidden);
        detail::require(cfg.dropout >= 0 && cfg.dropout < 1, "dropout", "a value in [0, 1)", cfg.dropout);
        layers_.reserve(std::size_t(cfg.layers));
        for (index_t l = 0; l < cfg.layers; ++l)
            layers_.emplace_back(cfg, make(l), detail::sub_seed(cfg.seed, std::uint64_t(100 + l)));
    }

    const encoder_config& config() const { return cfg_; }
    index_t size() const { return index_t(layers_.size()); }
    layer_type& layer(index_t l) { return layers_[std::size_t(l)]; }
    const layer_type& layer(index_t l) const { return layers_[std::size_t(l)]; }

    tensor<T> forward(const tensor<T>& x, const context& ctx) {
        detail::check_context(ctx);
        detail::check_rows("x", x, ctx, cfg_.dim);
        tensor<T> h = x;
        for (auto& l : layers_) h = l.forward(h, ctx);
        return h;
    }

    /// Forward through layers [0, upto) only (inputs of layer `upto`).
    tensor<T> forward_until(const tensor<T>& x, const context& ctx, index_t upto) {
        tensor<T> h = x;
        for (index_t l = 0; l < upto; ++l) h = layers_[std::size_t(l)].forward(h, ctx);
        return h;
    }

    tensor<T> backward(const tensor<T>& dy, const context& ctx) {
        tensor<T> d = dy;
        for (auto it = layers_.rbegin(); it != layers_.rend(); ++it) d = it->backward(d, ctx);
        return d;
    }

    void collect(parameter_list& ps, const std::string& prefix) {
        for (index_t l = 0; l < size(); ++l) layers_[std::size_t(l)].collect(ps, prefix + "." + std::to_string(l));
    }

    /// Σ over layers of their loss terms (0 without any); accumulates their gradients.
    double regularization(const context& ctx) {
        double r = 0;
        if constexpr (has_regularization<Attention>)
            for (auto& l : layers_) r += l.attention().regularization(ctx);
        return r;
    }

private:
    encoder_config cfg_;
    std::vector<layer_type> layers_;
};

}  // namespace kattn::nn
