// kattn/nn/positional.hpp — fixed sinusoidal position encodings (Vaswani et al., 2017).
//
//   PE[t, 2i]   = sin(t / 10000^{2i/D})
//   PE[t, 2i+1] = cos(t / 10000^{2i/D})          t = 0 … max_length−1, D = dim
// (odd D: the last column is a sine). forward adds PE[t] to row r = b·L + t of x
// [B·L, D]; backward is the identity. The table is computed once, in double.
// No parameters. backward(dy) or the uniform backward(dy, ctx) (nn/layer.hpp).
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "parameter.hpp"
#include "tensor.hpp"

namespace kattn::nn {

struct positional_config {
    index_t dim = 0;
    index_t max_length = 0;
};

template <class T = float>
class sinusoidal_positions {
public:
    sinusoidal_positions() = default;
    explicit sinusoidal_positions(const positional_config& cfg) : cfg_(cfg) {
        detail::require(cfg.dim >= 1, "dim", ">= 1", cfg.dim);
        detail::require(cfg.max_length >= 1, "max_length", ">= 1", cfg.max_length);
        table_ = tensor<T>::from_shape({std::size_t(cfg.max_length), std::size_t(cfg.dim)});
        for (index_t t = 0; t < cfg.max_length; ++t)
            for (index_t c = 0; c < cfg.dim; ++c) {
                const index_t two_i = c - c % 2;
                const double angle = double(t) / std::pow(10000.0, double(two_i) / double(cfg.dim));
                table_(t, c) = T(c % 2 == 0 ? std::sin(angle) : std::cos(angle));
            }
    }

    index_t dim() const { return cfg_.dim; }
    index_t max_length() const { return cfg_.max_length; }
    /// PE [max_length, dim].
    const tensor<T>& table() const { return table_; }

    /// x + PE[t] for row b·L + t.
    tensor<T> forward(const tensor<T>& x, const context& ctx) const {
        detail::check_context(ctx);
        detail::require(ctx.length <= cfg_.max_length, "context.length",
                        "<= max_length = " + std::to_string(cfg_.max_length), ctx.length);
        detail::check_rows("x", x, ctx, cfg_.dim);
        tensor<T> y = x;
        const index_t L = ctx.length, D = cfg_.dim;
        T* o = y.data();
        const T* pe = table_.data();
#pragma omp parallel for schedule(static) if (ctx.rows() * D > 65536)
        for (index_t r = 0; r < ctx.rows(); ++r) {
            const T* p = pe + (r % L) * D;
            for (index_t c = 0; c < D; ++c) o[r * D + c] += p[c];
        }
        return y;
    }

    /// The identity: dx = dy.
    tensor<T> backward(const tensor<T>& dy) const { return dy; }
    /// The uniform call (nn/layer.hpp): the same; the context is ignored.
    tensor<T> backward(const tensor<T>& dy, const context&) const { return dy; }

    /// No parameters.
    void collect(parameter_list&, const std::string&) {}

private:
    positional_config cfg_{};
    tensor<T> table_;
};

}  // namespace kattn::nn
