// kattn/nn/patch_embedding.hpp — images cut into patches, each patch a token.
//
// An image of H × W pixels (row-major, one row of `images` per image) is cut into
// L = (H/ph)·(W/pw) non-overlapping ph × pw patches in raster order (patch (i, j) is token
// i·(W/pw) + j); each patch, flattened row-major to ph·pw values, is mapped by one shared
//   token = Linear(ph·pw → dim)(patch)            (nn::linear: W, b ~ U(±1/√(ph·pw)))
// so images [B, H·W] → tokens [B·L, dim]. Rows as tokens: ph = 1, pw = W; pixels as
// tokens: ph = pw = 1; the whole image as one token: ph = H, pw = W.
// backward accumulates the linear layer's gradients (pixels need no gradient); forward and
// backward also take the (ignored) context: the uniform calls of nn/layer.hpp.
// Parameters: "<prefix>.weight", "<prefix>.bias".
#pragma once

#include <cstdint>
#include <string>

#include "linear.hpp"
#include "parameter.hpp"
#include "tensor.hpp"

namespace kattn::nn {

struct patch_embedding_config {
    index_t image_height = 0, image_width = 0;
    index_t patch_height = 0, patch_width = 0;
    index_t dim = 0;
    std::uint64_t seed = 0;
};

template <class T = float>
class patch_embedding {
public:
    patch_embedding() = default;
    explicit patch_embedding(const patch_embedding_config& cfg) : cfg_(cfg) {
        detail::require(cfg.image_height >= 1, "image_height", ">= 1", cfg.image_height);
        detail::require(cfg.image_width >= 1, "image_width", ">= 1", cfg.image_width);
        detail::require(cfg.patch_height >= 1 && cfg.image_height % cfg.patch_height == 0, "patch_height",
                        "a divisor of image_height = " + std::to_string(cfg.image_height), cfg.patch_height);
        detail::require(cfg.patch_width >= 1 && cfg.image_width % cfg.patch_width == 0, "patch_width",
                        "a divisor of image_width = " + std::to_string(cfg.image_width), cfg.patch_width);
        detail::require(cfg.dim >= 1, "dim", ">= 1", cfg.dim);
        lin_ = linear<T>({.in = patch_size(), .out = cfg.dim, .seed = cfg.seed});
    }

    /// Tokens per image L.
    index_t tokens() const { return (cfg_.image_height / cfg_.patch_height) * (cfg_.image_width / cfg_.patch_width); }
    /// Values per patch ph·pw.
    index_t patch_size() const { return cfg_.patch_height * cfg_.patch_width; }
    index_t pixels() const { return cfg_.image_height * cfg_.image_width; }
    index_t dim() const { return cfg_.dim; }
    linear<T>& projection() { return lin_; }

    /// Patches [B·L, ph·pw] of images [B, H·W].
    tensor<T> patches(const tensor<T>& images) const {
        detail::require(images.dimension() == 2 && index_t(images.shape()[1]) == pixels() && images.shape()[0] >= 1,
                        "images", "shape [batch >= 1, H*W = " + std::to_string(pixels()) + "]",
                        detail::shape_text(images.shape()));
        const index_t B = index_t(images.shape()[0]), L = tokens(), P = patch_size();
        const index_t ph = cfg_.patch_height, pw = cfg_.patch_width, W = cfg_.image_width;
        const index_t per_row = W / pw;
        tensor<T> p = tensor<T>::from_shape({std::size_t(B * L), std::size_t(P)});
        const T* src = images.data();
        T* dst = p.data();
#pragma omp parallel for schedule(static) if (B * L * P > 65536)
        for (index_t b = 0; b < B; ++b)
            for (index_t t = 0; t < L; ++t) {
                const index_t i0 = (t / per_row) * ph, j0 = (t % per_row) * pw;
                T* o = dst + (b * L + t) * P;
                for (index_t i = 0; i < ph; ++i)
                    for (index_t j = 0; j < pw; ++j) o[i * pw + j] = src[b * pixels() + (i0 + i) * W + j0 + j];
            }
        return p;
    }

    /// Tokens [B·L, dim] (no cache).
    tensor<T> apply(const tensor<T>& images) const { return lin_.apply(patches(images)); }

    /// Forward with the patches kept for backward.
    tensor<T> forward(const tensor<T>& images) { return lin_.forward(patches(images)); }
    /// The uniform call (nn/layer.hpp): the same; the context is ignored.
    tensor<T> forward(const tensor<T>& images, const context&) { return forward(images); }

    /// Accumulates the projection's gradients for dy [B·L, dim] of the last forward.
    void backward(const tensor<T>& dy) { lin_.backward(dy); }
    /// The same (void: pixels get no gradient); the context is ignored.
    void backward(const tensor<T>& dy, const context&) { backward(dy); }

    void collect(parameter_list& ps, const std::string& prefix) { lin_.collect(ps, prefix); }

private:
    patch_embedding_config cfg_{};
    linear<T> lin_;
};

}  // namespace kattn::nn
