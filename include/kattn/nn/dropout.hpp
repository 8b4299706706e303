// kattn/nn/dropout.hpp — inverted dropout with counter-based, step-keyed masks.
//
// In training (ctx.training, p > 0), element i (flat row-major index) of x is
//   y_i = x_i · m_i,   m_i = 1/(1 − p) if u_i ≥ p else 0,
//   u_i = random_stream(seed ^ mix64(ctx.step), stream).uniform(i)
// so E[y] = x, and the mask is a pure function of (seed, step, stream, i): identical for
// any thread count and reproducible per step (mix64: nn/detail/seed.hpp). At evaluation,
// or with p = 0, y = x. backward multiplies dy by the mask of the last forward.
// Layers that hold several dropouts give each its own seed (detail::sub_seed).
// No parameters.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "../core/random.hpp"
#include "detail/seed.hpp"
#include "tensor.hpp"

namespace kattn::nn {

/// Stream id of dropout masks (an id of kattn's reserved range, not used by kattn::streams).
inline constexpr std::uint64_t dropout_stream = 16;

struct dropout_config {
    double p = 0.0;                          ///< drop probability in [0, 1)
    std::uint64_t seed = 0;
    std::uint64_t stream = dropout_stream;
};

template <class T = float>
class dropout {
public:
    dropout() = default;
    explicit dropout(const dropout_config& cfg) : cfg_(cfg) {
        detail::require(cfg.p >= 0 && cfg.p < 1, "p", "a value in [0, 1)", cfg.p);
    }

    double p() const { return cfg_.p; }
    /// Whether a forward in this context drops anything.
    bool active(const context& ctx) const { return ctx.training && cfg_.p > 0; }
    /// The multipliers m of the last active forward (empty after an identity pass).
    const std::vector<T>& mask() const { return mask_; }

    /// x ⊙ m (training) or x (evaluation); any shape.
    tensor<T> forward(const tensor<T>& x, const context& ctx) {
        shape_ = {x.shape()[0], x.shape()[1]};
        if (!active(ctx)) {
            mask_.clear();
            return x;
        }
        const index_t n = index_t(x.size());
        mask_.resize(std::size_t(n));
        const random_stream rs(detail::step_seed(cfg_.seed, ctx.step), cfg_.stream);
        const double p = cfg_.p;
        const T keep = T(1.0 / (1.0 - p));
        tensor<T> y = tensor<T>::from_shape({shape_[0], shape_[1]});
        const T* xs = x.data();
        T* o = y.data();
        T* m = mask_.data();
        // One Philox block serves uniform(2j) and uniform(2j + 1) (random.hpp's bits64).
        const index_t pairs = (n + 1) / 2;
#pragma omp parallel for schedule(static) if (n > 16384)
        for (index_t j = 0; j < pairs; ++j) {
            const auto blk = rs.block(std::uint64_t(j));
            for (index_t k = 0; k < 2 && 2 * j + k < n; ++k) {
                const index_t i = 2 * j + k;
                const std::uint64_t w = (std::uint64_t(blk.v[2 * k + 1]) << 32) | blk.v[2 * k];
                m[i] = kattn::detail::to_unit_open(w) >= p ? keep : T(0);
                o[i] = xs[i] * m[i];
            }
        }
        return y;
    }

    /// dy ⊙ m with the mask of the last forward (dy after an identity pass).
    tensor<T> backward(const tensor<T>& dy) const {
        detail::require(dy.dimension() == 2 && dy.shape()[0] == shape_[0] && dy.shape()[1] == shape_[1], "dy",
                        "shape " + detail::shape_text(shape_) + " (the last output)", detail::shape_text(dy.shape()));
        if (mask_.empty()) return dy;
        tensor<T> dx = dy;
        T* o = dx.data();
        const index_t n = index_t(dx.size());
        for (index_t i = 0; i < n; ++i) o[i] *= mask_[std::size_t(i)];
        return dx;
    }

private:
    dropout_config cfg_{};
    std::vector<T> mask_;
    std::array<std::size_t, 2> shape_{0, 0};
};

}  // namespace kattn::nn
