// kattn/nn/input.hpp — input policies of nn::sequence_classifier: a batch → token vectors.
//
//   token_input   ids → Embedding(vocab, D, padding 0) · scale + sinusoidal positions;
//                 lengths from the batch (padded keys are masked downstream)
//   patch_input   images [B, H·W] → patches (ph × pw, raster order) → Linear(ph·pw, D)
//                 + sinusoidal positions; 7×7 patches of a 28×28 image give 16 tokens,
//                 1×28 patches (rows) give 28
// embed(batch, ctx) fills ctx.batch/length/lengths and returns [B·L, D]; backward(dx)
// accumulates the embedding gradients.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "data/dataset.hpp"
#include "detail/seed.hpp"
#include "embedding.hpp"
#include "parameter.hpp"
#include "patch_embedding.hpp"
#include "positional.hpp"
#include "tensor.hpp"

namespace kattn::nn {

struct token_input_config {
    index_t vocab = 0, dim = 0;
    index_t max_length = 128;  ///< longest sequence (position table)
    bool scale_by_sqrt_dim = false;
    std::uint64_t seed = 0;
};

template <class T = float>
class token_input {
public:
    explicit token_input(const token_input_config& cfg)
        : emb_({.vocab = cfg.vocab,
                .dim = cfg.dim,
                .padding_index = 0,
                .scale = cfg.scale_by_sqrt_dim ? std::sqrt(double(cfg.dim)) : 1.0,
                .seed = cfg.seed}),
          pos_({.dim = cfg.dim, .max_length = cfg.max_length}) {}

    tensor<T> embed(const batch& b, context& ctx) {
        detail::require(b.kind == input_kind::tokens, "batch", "a batch of token ids (text)", "a batch of pixels");
        ctx.batch = b.size;
        ctx.length = b.length;
        ctx.lengths = b.lengths;
        return pos_.forward(emb_.forward(b.tokens, ctx), ctx);
    }
    void backward(const tensor<T>& dx, const context& ctx) { emb_.backward(dx, ctx); }
    void collect(parameter_list& ps, const std::string& prefix) { emb_.collect(ps, prefix + ".embedding"); }

private:
    embedding<T> emb_;
    sinusoidal_positions<T> pos_;
};

struct patch_input_config {
    index_t image_height = 28, image_width = 28;
    index_t patch_height = 7, patch_width = 7;
    index_t dim = 0;
    std::uint64_t seed = 0;
};

template <class T = float>
class patch_input {
public:
    explicit patch_input(const patch_input_config& cfg)
        : patch_({.image_height = cfg.image_height,
                  .image_width = cfg.image_width,
                  .patch_height = cfg.patch_height,
                  .patch_width = cfg.patch_width,
                  .dim = cfg.dim,
                  .seed = cfg.seed}),
          pos_({.dim = cfg.dim, .max_length = patch_.tokens()}) {}

    index_t tokens() const { return patch_.tokens(); }

    tensor<T> embed(const batch& b, context& ctx) {
        detail::require(b.kind == input_kind::pixels, "batch", "a batch of images (pixels)", "a batch of token ids");
        ctx.batch = b.size;
        ctx.length = patch_.tokens();
        ctx.lengths.clear();
        tensor<T> images = tensor<T>::from_shape({std::size_t(b.size), std::size_t(b.item_size)});
        std::copy(b.pixels.begin(), b.pixels.end(), images.data());
        return pos_.forward(patch_.forward(images, ctx), ctx);
    }
    void backward(const tensor<T>& dx, const context& ctx) { patch_.backward(dx, ctx); }
    void collect(parameter_list& ps, const std::string& prefix) { patch_.collect(ps, prefix + ".patch"); }

private:
    patch_embedding<T> patch_;
    sinusoidal_positions<T> pos_;
};

}  // namespace kattn::nn
