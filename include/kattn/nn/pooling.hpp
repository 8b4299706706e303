// kattn/nn/pooling.hpp — masked mean pooling of token representations.
//
//   y[b, :] = (1/n_b) Σ_{t < n_b} x[b·L + t, :]        n_b = ctx.valid(b) (all L when
//                                                       ctx.lengths is empty)
//   dx[b·L + t, :] = dy[b, :] / n_b for t < n_b, 0 for padded tokens t ≥ n_b
// [B·L, D] → [B, D]. Sums in double. No parameters. backward(dy) or the uniform
// backward(dy, ctx) (nn/layer.hpp).
#pragma once

#include <string>
#include <vector>

#include "parameter.hpp"
#include "tensor.hpp"

namespace kattn::nn {

template <class T = float>
class mean_pooling {
public:
    /// y [B, D] for x [B·L, D]; keeps the sequence structure for backward.
    tensor<T> forward(const tensor<T>& x, const context& ctx) {
        detail::check_context(ctx);
        detail::check_rows("x", x, ctx);
        const index_t B = ctx.batch, L = ctx.length, D = index_t(x.shape()[1]);
        batch_ = B;
        length_ = L;
        width_ = D;
        valid_.resize(std::size_t(B));
        for (index_t b = 0; b < B; ++b) valid_[std::size_t(b)] = ctx.valid(b);
        tensor<T> y = tensor<T>::from_shape({std::size_t(B), std::size_t(D)});
        const T* xs = x.data();
#pragma omp parallel for schedule(static) if (B * L * D > 65536)
        for (index_t b = 0; b < B; ++b) {
            const index_t n = valid_[std::size_t(b)];
            for (index_t c = 0; c < D; ++c) {
                double s = 0;
                for (index_t t = 0; t < n; ++t) s += double(xs[(b * L + t) * D + c]);
                y(b, c) = T(s / double(n));
            }
        }
        return y;
    }

    /// dx [B·L, D] for dy [B, D] of the last forward.
    tensor<T> backward(const tensor<T>& dy) const {
        detail::require(dy.dimension() == 2 && index_t(dy.shape()[0]) == batch_ && index_t(dy.shape()[1]) == width_,
                        "dy",
                        "shape [" + std::to_string(batch_) + ", " + std::to_string(width_) + "] (the last output)",
                        detail::shape_text(dy.shape()));
        tensor<T> dx = zeros<T>(batch_ * length_, width_);
        for (index_t b = 0; b < batch_; ++b) {
            const index_t n = valid_[std::size_t(b)];
            for (index_t t = 0; t < n; ++t)
                for (index_t c = 0; c < width_; ++c) dx(b * length_ + t, c) = T(double(dy(b, c)) / double(n));
        }
        return dx;
    }

    /// The uniform call (nn/layer.hpp): the same as backward(dy), with the structure of the
    /// last forward (the context is not consulted).
    tensor<T> backward(const tensor<T>& dy, const context&) const { return backward(dy); }

    /// No parameters.
    void collect(parameter_list&, const std::string&) {}

private:
    index_t batch_ = 0, length_ = 0, width_ = 0;
    std::vector<index_t> valid_;
};

}  // namespace kattn::nn
