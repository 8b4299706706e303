// kattn/nn/linear.hpp — a dense layer y = x·W + b.
//
//   W ∈ R^{in × out} (row-major; the transpose of PyTorch's Linear.weight), b ∈ R^{out}
//   init: W, b ~ U(−1/√in, 1/√in) (PyTorch's default), or Xavier/orthogonal via set_weight
//   backward: dx = dy·Wᵀ, dW += xᵀ·dy, db += Σ_rows dy
// The layer keeps a copy of its last input for backward. forward(x) / backward(dy) or the
// uniform forward(x, ctx) / backward(dy, ctx) (nn/layer.hpp; ctx ignored). Parameters: "<prefix>.weight",
// "<prefix>.bias" (bias excluded from weight decay). A frozen layer (trainable = false)
// still propagates dx but exposes no parameters.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include "detail/matmul.hpp"
#include "parameter.hpp"
#include "tensor.hpp"

namespace kattn::nn {

struct linear_config {
    index_t in = 0, out = 0;
    bool bias = true;
    bool trainable = true;
    std::uint64_t seed = 0;
};

/// Gemm: the matrix-product policy (linalg/gemm.hpp); attention layers pass their
/// backend's, execution_backend_traits<Backend>::gemm.
template <class T = float, class Gemm = kattn::detail::simd_gemm<>>
class linear {
public:
    linear() = default;
    explicit linear(const linear_config& cfg) : cfg_(cfg) {
        detail::require(cfg.in >= 1, "in", ">= 1", cfg.in);
        detail::require(cfg.out >= 1, "out", ">= 1", cfg.out);
        w_ = parameter<T>({std::size_t(cfg.in), std::size_t(cfg.out)});
        const double bound = 1.0 / std::sqrt(double(cfg.in));
        w_.init_uniform(bound, cfg.seed, streams::init);
        if (cfg.bias) {
            b_ = parameter<T>({std::size_t(cfg.out)});
            b_.init_uniform(bound, cfg.seed, streams::init + 1);
        }
    }

    index_t in() const { return cfg_.in; }
    index_t out() const { return cfg_.out; }
    parameter<T>& weight() { return w_; }
    const parameter<T>& weight() const { return w_; }
    parameter<T>& bias() { return b_; }
    bool has_bias() const { return cfg_.bias; }
    void set_trainable(bool t) { cfg_.trainable = t; }
    bool trainable() const { return cfg_.trainable; }

    /// y = x·W + b for x [n, in] (no cache: evaluation and composite layers).
    tensor<T> apply(const tensor<T>& x) const {
        detail::require(x.dimension() == 2 && index_t(x.shape()[1]) == cfg_.in, "x",
                        "shape [n, in = " + std::to_string(cfg_.in) + "]", detail::shape_text(x.shape()));
        const index_t n = index_t(x.shape()[0]);
        tensor<T> y = tensor<T>::from_shape({std::size_t(n), std::size_t(cfg_.out)});
        if (cfg_.bias)
            for (index_t r = 0; r < n; ++r) std::copy(b_.value.begin(), b_.value.end(), y.data() + r * cfg_.out);
        detail::matmul<T, Gemm>(n, cfg_.in, cfg_.out, x.data(), w_.data(), y.data(), cfg_.bias);
        return y;
    }

    /// Forward with the input kept for backward.
    tensor<T> forward(const tensor<T>& x) {
        tensor<T> y = apply(x);
        x_ = x;
        return y;
    }

    /// The same for a temporary x (kept without a copy).
    tensor<T> forward(tensor<T>&& x) {
        tensor<T> y = apply(x);
        x_ = std::move(x);
        return y;
    }

    /// The uniform calls (nn/layer.hpp): the same as forward(x); the context is ignored.
    tensor<T> forward(const tensor<T>& x, const context&) { return forward(x); }
    tensor<T> forward(tensor<T>&& x, const context&) { return forward(std::move(x)); }

    /// dx for dy [n, out] of the last forward; accumulates dW, db when trainable.
    tensor<T> backward(const tensor<T>& dy) {
        const index_t n = index_t(x_.shape()[0]);
        detail::require(dy.dimension() == 2 && index_t(dy.shape()[0]) == n && index_t(dy.shape()[1]) == cfg_.out, "dy",
                        "shape [" + std::to_string(n) + ", " + std::to_string(cfg_.out) + "] (the last output)",
                        detail::shape_text(dy.shape()));
        if (cfg_.trainable) {
            detail::matmul_tn<T, Gemm>(n, cfg_.in, cfg_.out, x_.data(), dy.data(), w_.grad.data(), true);
            if (cfg_.bias)
                for (index_t r = 0; r < n; ++r)
                    for (index_t c = 0; c < cfg_.out; ++c) b_.grad[c] += dy(r, c);
        }
        tensor<T> dx = tensor<T>::from_shape({std::size_t(n), std::size_t(cfg_.in)});
        detail::matmul_bt<T, Gemm>(n, cfg_.in, cfg_.out, dy.data(), w_.data(), dx.data(), false);
        return dx;
    }

    /// The same as backward(dy); the context is ignored.
    tensor<T> backward(const tensor<T>& dy, const context&) { return backward(dy); }

    void collect(parameter_list& ps, const std::string& prefix) {
        if (!cfg_.trainable) return;
        ps.push_back(view(prefix + ".weight", w_, true));
        if (cfg_.bias) ps.push_back(view(prefix + ".bias", b_, false));
    }

private:
    linear_config cfg_{};
    parameter<T> w_, b_;
    tensor<T> x_;
};

}  // namespace kattn::nn
