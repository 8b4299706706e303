// kattn/nn/classifier.hpp — a sequence classifier: input → encoder → pooling → head.
//
//   x = Input.embed(batch)                 (token_input or patch_input, with positions)
//   h = Encoder_N(x)                       (encoder_layer<Attention> × N)
//   p = masked mean over the valid tokens of each sequence
//   logits = Head(p)                        (Linear, or Linear–act–Dropout–Linear)
// forward(batch, ctx) → logits [B, C]; backward(dlogits, ctx) accumulates every gradient;
// regularization(ctx) adds the attention layers' loss terms (FSKA's λ·KL) and their
// gradients; align(data, …) runs phase A of the Coulomb protocol for attention layers that
// support it (each layer's particles on the mean-pooled inputs of that layer).
// The model is the reference for embedding kattn's attention in a network: every piece is
// a plain layer with forward/backward, no tape.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "data/dataset.hpp"
#include "encoder.hpp"
#include "head.hpp"
#include "input.hpp"
#include "pooling.hpp"

namespace kattn::nn {

struct classifier_config {
    encoder_config encoder{};
    index_t classes = 2;
    index_t head_hidden = 0;  ///< 0: a single Linear head
    std::uint64_t seed = 0;
};

template <class Input, class Attention, class T = float>
class sequence_classifier {
public:
    using input_type = Input;
    using attention_type = Attention;
    using value_type = T;

    sequence_classifier(const classifier_config& cfg, Input input, const std::function<Attention(index_t)>& make)
        : cfg_(cfg),
          input_(std::move(input)),
          enc_(cfg.encoder, make),
          head_({.dim = cfg.encoder.dim,
                 .hidden = cfg.head_hidden,
                 .classes = cfg.classes,
                 .activation = cfg.encoder.activation,
                 .dropout = cfg.encoder.dropout,
                 .seed = detail::sub_seed(cfg.seed, 7)}) {}

    const classifier_config& config() const { return cfg_; }
    /// The number of output classes C (classifier_config::classes): logits are [B, C].
    index_t classes() const { return cfg_.classes; }
    encoder<Attention, T>& encoder_stack() { return enc_; }
    Input& input() { return input_; }

    /// Logits [B, C] of the batch; ctx.training / ctx.step must be set by the caller.
    tensor<T> forward(const batch& b, context& ctx) {
        const tensor<T> x = input_.embed(b, ctx);
        const tensor<T> h = enc_.forward(x, ctx);
        return head_.forward(pool_.forward(h, ctx), ctx);
    }

    void backward(const tensor<T>& dlogits, const context& ctx) {
        const tensor<T> dh = pool_.backward(head_.backward(dlogits, ctx), ctx);
        input_.backward(enc_.backward(dh, ctx), ctx);
    }

    double regularization(const context& ctx) { return enc_.regularization(ctx); }

    void collect(parameter_list& ps, const std::string& prefix = "model") {
        input_.collect(ps, prefix + ".input");
        enc_.collect(ps, prefix + ".encoder");
        head_.collect(ps, prefix + ".head");
    }
    parameter_list parameters() {
        parameter_list ps;
        collect(ps);
        return ps;
    }

    /// Mean attention entropy over layers (and batch, heads, valid queries) for batch b,
    /// evaluation mode. NaN when the attention layer does not report it.
    double attention_entropy(const batch& b) {
        if constexpr (has_attention_entropy<Attention, T>) {
            context ctx;
            tensor<T> h = input_.embed(b, ctx);
            double s = 0;
            for (index_t l = 0; l < enc_.size(); ++l) {
                auto& layer = enc_.layer(l);
                s += layer.attention().attention_entropy(layer.attention_input(h), ctx);
                h = layer.forward(h, ctx);
            }
            return s / double(enc_.size());
        } else {
            return std::numeric_limits<double>::quiet_NaN();
        }
    }

    /// Coulomb phase A: for each layer l in order, the mean-pooled attention inputs of
    /// `samples` items of `data` (the first ones) and their labels drive the layer's
    /// alignment for `steps` Langevin steps. Returns the per-layer reports.
    template <class A = Attention>
    requires has_alignment<A, T>
    auto align(const dataset& data, index_t samples, index_t steps, index_t batch_size = 256) {
        detail::require(samples >= 2, "samples", ">= 2", samples);
        const index_t n = std::min(samples, data.size());
        std::vector<decltype(enc_.layer(0).attention().align(std::declval<const tensor<T>&>(), std::span<const int>(),
                                                             index_t(0)))>
            reports;
        std::vector<int> labels(data.labels.begin(), data.labels.begin() + n);
        for (index_t l = 0; l < enc_.size(); ++l) {
            tensor<T> pooled = zeros<T>(n, cfg_.encoder.dim);
            for (index_t s = 0; s < n; s += batch_size) {
                const index_t nb = std::min(batch_size, n - s);
                std::vector<index_t> idx(static_cast<std::size_t>(nb));
                std::iota(idx.begin(), idx.end(), s);
                const batch b = data.make_batch(idx);
                context ctx;
                const tensor<T> x = enc_.forward_until(input_.embed(b, ctx), ctx, l);
                const tensor<T> a = enc_.layer(l).attention_input(x);
                mean_pooling<T> pool;
                const tensor<T> p = pool.forward(a, ctx);
                std::copy(p.begin(), p.end(), pooled.data() + s * cfg_.encoder.dim);
            }
            reports.push_back(enc_.layer(l).attention().align(pooled, labels, steps));
        }
        return reports;
    }

private:
    classifier_config cfg_;
    Input input_;
    encoder<Attention, T> enc_;
    mean_pooling<T> pool_;
    classifier_head<T> head_;
};

}  // namespace kattn::nn
