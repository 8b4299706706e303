// kattn/nn/embedding.hpp — a token embedding table.
//
//   E ∈ R^{vocab × dim}, init E ~ N(0, 1) (PyTorch's nn.Embedding default)
//   forward: y[r, :] = scale · E[ids[r], :]         (scale e.g. √dim; default 1)
//   backward: dE[ids[r], :] += scale · dy[r, :]     (no dx: ids are not differentiable)
// With padding_index p ≥ 0 the row E[p] is zero at construction and never receives
// gradient, so an optimiser leaves it at zero (PyTorch's padding_idx); padding ids embed
// to zero whatever that row holds. Parameter:
// "<prefix>.weight" (weight decay applies, as with PyTorch's AdamW over all parameters).
// forward(ids) / backward(dy), or the uniform forward(ids, ctx) / backward(dy, ctx)
// (nn/layer.hpp; ctx ignored).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "parameter.hpp"
#include "tensor.hpp"

namespace kattn::nn {

struct embedding_config {
    index_t vocab = 0, dim = 0;
    index_t padding_index = -1;  ///< row kept at zero; -1: none
    double scale = 1.0;          ///< output multiplier (e.g. √dim)
    std::uint64_t seed = 0;
};

template <class T = float>
class embedding {
public:
    embedding() = default;
    explicit embedding(const embedding_config& cfg) : cfg_(cfg) {
        detail::require(cfg.vocab >= 1, "vocab", ">= 1", cfg.vocab);
        detail::require(cfg.dim >= 1, "dim", ">= 1", cfg.dim);
        detail::require(cfg.padding_index >= -1 && cfg.padding_index < cfg.vocab, "padding_index",
                        "-1 or a value in [0, vocab = " + std::to_string(cfg.vocab) + ")", cfg.padding_index);
        detail::require(std::isfinite(cfg.scale), "scale", "a finite value", cfg.scale);
        w_ = parameter<T>({std::size_t(cfg.vocab), std::size_t(cfg.dim)});
        w_.init_normal(1.0, cfg.seed, streams::init);
        if (cfg.padding_index >= 0) std::fill_n(w_.value.begin() + cfg.padding_index * cfg.dim, cfg.dim, T(0));
    }

    index_t vocab() const { return cfg_.vocab; }
    index_t dim() const { return cfg_.dim; }
    index_t padding_index() const { return cfg_.padding_index; }
    double scale() const { return cfg_.scale; }
    parameter<T>& weight() { return w_; }
    const parameter<T>& weight() const { return w_; }

    /// y [n, dim] for n = ids.size() (no cache).
    tensor<T> apply(std::span<const std::int32_t> ids) const {
        for (std::size_t r = 0; r < ids.size(); ++r)
            if (ids[r] < 0 || ids[r] >= cfg_.vocab)
                detail::fail("ids", "values in [0, vocab = " + std::to_string(cfg_.vocab) + ")",
                             std::to_string(ids[r]) + " at position " + std::to_string(r));
        const index_t n = index_t(ids.size()), d = cfg_.dim;
        tensor<T> y = tensor<T>::from_shape({std::size_t(n), std::size_t(d)});
        const T s = T(cfg_.scale);
        const T* w = w_.data();
        T* o = y.data();
#pragma omp parallel for schedule(static) if (n * d > 65536)
        for (index_t r = 0; r < n; ++r) {
            const T* src = w + index_t(ids[r]) * d;
            if (ids[r] == cfg_.padding_index)
                for (index_t c = 0; c < d; ++c) o[r * d + c] = T(0);
            else
                for (index_t c = 0; c < d; ++c) o[r * d + c] = s * src[c];
        }
        return y;
    }

    /// Forward with the ids kept for backward.
    tensor<T> forward(std::span<const std::int32_t> ids) {
        tensor<T> y = apply(ids);
        ids_.assign(ids.begin(), ids.end());
        return y;
    }

    /// The uniform call (nn/layer.hpp): the same as forward(ids); the context is ignored.
    tensor<T> forward(std::span<const std::int32_t> ids, const context&) { return forward(ids); }

    /// Accumulates dE for dy [n, dim] of the last forward (rows in order: deterministic).
    void backward(const tensor<T>& dy) {
        const index_t n = index_t(ids_.size()), d = cfg_.dim;
        detail::require(dy.dimension() == 2 && index_t(dy.shape()[0]) == n && index_t(dy.shape()[1]) == d, "dy",
                        "shape [" + std::to_string(n) + ", " + std::to_string(d) + "] (the last output)",
                        detail::shape_text(dy.shape()));
        const T s = T(cfg_.scale);
        for (index_t r = 0; r < n; ++r) {
            const index_t id = ids_[std::size_t(r)];
            if (id == cfg_.padding_index) continue;
            T* g = w_.grad.data() + id * d;
            for (index_t c = 0; c < d; ++c) g[c] += s * dy(r, c);
        }
    }

    /// The same as backward(dy) (void: ids have no gradient); the context is ignored.
    void backward(const tensor<T>& dy, const context&) { backward(dy); }

    void collect(parameter_list& ps, const std::string& prefix) { ps.push_back(view(prefix + ".weight", w_, true)); }

private:
    embedding_config cfg_{};
    parameter<T> w_;
    std::vector<std::int32_t> ids_;
};

}  // namespace kattn::nn
