// kattn/nn/dropout.hpp — inverted dropout with counter-based, step-keyed masks.
//
// In training (ctx.training, p > 0), element i (flat row-major index, see below) of x is
//   y_i = x_i · m_i,   m_i = 1/(1 − p) if u_i ≥ p else 0,   u_i = w_i · 2⁻³²
// with w_i a 32-bit word of a SplitMix64 hash (mix64: nn/detail/seed.hpp):
//   key   = mix64(step_seed(seed, ctx.step) ^ mix64(stream))
//   h_j   = mix64(key + j·0x9E3779B97F4A7C15)           (SplitMix64's output j from state key)
//   w_2j  = h_j mod 2³²,   w_2j+1 = ⌊h_j / 2³²⌋          (two uniforms per 64-bit hash)
// i.e. m_i = 0 iff w_i < ⌈p·2³²⌉ (integer compare). So E[y] = x (up to p's 2⁻³² rounding),
// and the mask is a pure function of (seed, step, stream, i): identical for any thread count
// and reproducible per step. At evaluation, or with p = 0, y = x. backward multiplies dy by
// the mask of the last forward. Layers that hold several dropouts give each its own seed
// (detail::sub_seed). No parameters. backward(dy) or backward(dy, ctx) (nn/layer.hpp).
// A data-parallel shard (ctx.batch_offset = o > 0 sequences of the whole batch before it)
// indexes its elements as the whole batch would: i = (o·length + row)·width + col for token
// rows (x of ctx.rows() rows), i = (o + row)·width + col for pooled rows (x of ctx.batch
// rows); with o = 0 that is the flat index. So the shards of a batch padded to one length
// draw exactly the whole batch's mask (nn/data_parallel.hpp).
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "detail/seed.hpp"
#include "parameter.hpp"
#include "tensor.hpp"

namespace kattn::nn {

/// Stream id of dropout masks (an id of kattn's reserved range, not used by kattn::streams).
inline constexpr std::uint64_t dropout_stream = 16;

namespace detail {

/// The hash state of a dropout mask (see the header comment).
constexpr std::uint64_t dropout_key(std::uint64_t seed, std::uint64_t step, std::uint64_t stream) noexcept {
    return mix64(step_seed(seed, step) ^ mix64(stream));
}

/// w_i of the header comment: word i of the mask stream with state key.
constexpr std::uint32_t dropout_word(std::uint64_t key, std::uint64_t i) noexcept {
    const std::uint64_t h = mix64(key + (i / 2) * 0x9E3779B97F4A7C15ull);
    return std::uint32_t(i % 2 == 0 ? h : h >> 32);
}

/// ⌈p·2³²⌉: element i is dropped iff dropout_word(key, i) < threshold.
inline std::uint64_t dropout_threshold(double p) { return std::uint64_t(std::ceil(std::ldexp(p, 32))); }

/// w_{i0}, …, w_{i0+n−1} into w (any i0).
inline void dropout_words(std::uint64_t key, std::uint64_t i0, std::size_t n, std::uint32_t* w) {
    if (n > 0 && i0 % 2 != 0) {  // an odd start: its word is the high half of hash i0/2
        *w++ = dropout_word(key, i0++);
        --n;
    }
    constexpr std::size_t chunk = 512;
    std::uint64_t h[chunk / 2];
    for (std::size_t c = 0; c < n; c += chunk) {
        const std::size_t nc = std::min(chunk, n - c), pairs = (nc + 1) / 2;
        const std::uint64_t j0 = (i0 + c) / 2;
        for (std::size_t j = 0; j < pairs; ++j) {
            std::uint64_t z = key + (j0 + j) * 0x9E3779B97F4A7C15ull + 0x9E3779B97F4A7C15ull;
            z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
            z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
            h[j] = z ^ (z >> 31);
        }
        if constexpr (std::endian::native == std::endian::little) {
            std::memcpy(w + c, h, nc * sizeof(std::uint32_t));
        } else {
            for (std::size_t k = 0; k < nc; ++k) w[c + k] = std::uint32_t(k % 2 == 0 ? h[k / 2] : h[k / 2] >> 32);
        }
    }
}

}  // namespace detail

struct dropout_config {
    double p = 0.0;  ///< drop probability in [0, 1)
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
        tensor<T> y = tensor<T>::from_shape({shape_[0], shape_[1]});
        run(x.data(), y.data(), ctx);
        return y;
    }

    /// The same, in place on a temporary (no copy).
    tensor<T> forward(tensor<T>&& x, const context& ctx) {
        shape_ = {x.shape()[0], x.shape()[1]};
        if (!active(ctx)) {
            mask_.clear();
            return std::move(x);
        }
        run(x.data(), x.data(), ctx);
        return std::move(x);
    }

    /// dy ⊙ m with the mask of the last forward (dy after an identity pass).
    tensor<T> backward(const tensor<T>& dy) const {
        detail::require(dy.dimension() == 2 && dy.shape()[0] == shape_[0] && dy.shape()[1] == shape_[1], "dy",
                        "shape " + detail::shape_text(shape_) + " (the last output)", detail::shape_text(dy.shape()));
        if (mask_.empty()) return dy;
        tensor<T> dx = dy;
        apply_mask(dx);
        return dx;
    }

    /// The same, in place on a temporary.
    tensor<T> backward(tensor<T>&& dy) const {
        detail::require(dy.dimension() == 2 && dy.shape()[0] == shape_[0] && dy.shape()[1] == shape_[1], "dy",
                        "shape " + detail::shape_text(shape_) + " (the last output)", detail::shape_text(dy.shape()));
        if (!mask_.empty()) apply_mask(dy);
        return std::move(dy);
    }

    /// The uniform calls (nn/layer.hpp): the same as backward(dy); the mask is the last
    /// forward's, so the context is ignored.
    tensor<T> backward(const tensor<T>& dy, const context&) const { return backward(dy); }
    tensor<T> backward(tensor<T>&& dy, const context&) const { return backward(std::move(dy)); }

    /// No parameters.
    void collect(parameter_list&, const std::string&) {}

private:
    void apply_mask(tensor<T>& d) const {
        T* o = d.data();
        const T* m = mask_.data();
        const index_t n = index_t(d.size());
        for (index_t i = 0; i < n; ++i) o[i] *= m[i];
    }

    /// Index of this x's first element in the whole batch (header comment).
    std::uint64_t offset(const context& ctx) const {
        if (ctx.batch_offset == 0) return 0;
        detail::require(ctx.batch_offset > 0, "context.batch_offset", ">= 0", ctx.batch_offset);
        const index_t rows = index_t(shape_[0]), width = index_t(shape_[1]);
        if (rows == ctx.rows()) return std::uint64_t(ctx.batch_offset * ctx.length * width);
        detail::require(rows == ctx.batch, "x",
                        "[batch*length = " + std::to_string(ctx.rows()) + "] or [batch = " + std::to_string(ctx.batch) +
                            "] rows (a shard with context.batch_offset > 0)",
                        rows);
        return std::uint64_t(ctx.batch_offset * width);
    }

    /// m = the mask of ctx, o = x ⊙ m (o may be x).
    void run(const T* xs, T* o, const context& ctx) {
        const index_t n = index_t(shape_[0] * shape_[1]);
        mask_.resize(std::size_t(n));
        const std::uint64_t key = detail::dropout_key(cfg_.seed, ctx.step, cfg_.stream);
        const std::uint64_t first = offset(ctx);
        const std::uint64_t thr = detail::dropout_threshold(cfg_.p);
        const T keep = T(1.0 / (1.0 - cfg_.p));
        T* m = mask_.data();
        constexpr index_t block = 2048;  // even: every block starts a hash pair
        const index_t blocks = (n + block - 1) / block;
#pragma omp parallel for schedule(static) if (n > 16384)
        for (index_t b = 0; b < blocks; ++b) {
            const index_t i0 = b * block, nb = std::min(block, n - i0);
            std::uint32_t w[block];
            detail::dropout_words(key, first + std::uint64_t(i0), std::size_t(nb), w);
            for (index_t k = 0; k < nb; ++k) {
                const T mk = std::uint64_t(w[k]) >= thr ? keep : T(0);
                m[i0 + k] = mk;
                o[i0 + k] = xs[i0 + k] * mk;
            }
        }
    }

    dropout_config cfg_{};
    std::vector<T> mask_;
    std::array<std::size_t, 2> shape_{0, 0};
};

}  // namespace kattn::nn
