// kattn/nn/tensor.hpp — activations, the forward context and head reshapes of kattn::nn.
//
// Every layer of kattn::nn maps row-major activations `tensor<T>` = xt::xtensor<T, 2> of
// shape [batch·length, width] to the same kind: row r = b·length + t is token t of
// sequence b. What a layer needs to know about that structure travels in a `context`:
//   batch, length   the sequence structure of the rows
//   lengths         valid tokens of each sequence (empty: all `length`); keys past the
//                   length are excluded from attention, pooling ignores them
//   training        dropout active, FSKA draws fresh frequencies
//   step            the optimiser step: with a layer's own seed it keys every random draw
//                   of that step (dropout masks, reparameterised frequencies), so a run is
//                   reproducible on any thread count
//   batch_offset    sequences of the whole mini-batch before this one when the batch is a
//                   data-parallel shard (nn/data_parallel.hpp): dropout keys its masks by
//                   the position in the whole batch, so N shards draw one batch's masks
// Layers cache what their backward needs during forward: one forward, then at most one
// backward, per layer instance (no tape).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <xtensor/xtensor.hpp>

#include "../core/config.hpp"
#include "../core/error.hpp"
#include "../core/shape.hpp"
#include "detail/namespace.hpp"

namespace kattn::nn {

template <class T = float>
using tensor = xt::xtensor<T, 2>;

struct context {
    index_t batch = 1;               ///< sequences in the mini-batch
    index_t length = 1;              ///< tokens per sequence (rows = batch·length)
    std::vector<index_t> lengths{};  ///< valid tokens per sequence; empty: all valid
    bool training = false;           ///< dropout on, fresh FSKA draws
    std::uint64_t step = 0;          ///< optimiser step: keys the random draws of this pass
    index_t batch_offset = 0;        ///< first sequence's index in the whole batch (data-parallel shard)

    index_t rows() const { return batch * length; }
    /// Valid tokens of sequence b.
    index_t valid(index_t b) const { return lengths.empty() ? length : lengths[std::size_t(b)]; }
    bool padded() const { return !lengths.empty(); }
};

/// Zero tensor [rows, cols].
template <class T>
tensor<T> zeros(index_t rows, index_t cols) {
    tensor<T> t = tensor<T>::from_shape({std::size_t(rows), std::size_t(cols)});
    t.fill(T(0));
    return t;
}

namespace detail {

/// Throws unless x is [ctx.rows(), width] (width < 0: any).
template <class T>
void check_rows(std::string_view arg, const tensor<T>& x, const context& ctx, index_t width = -1) {
    const bool ok = index_t(x.shape()[0]) == ctx.rows() && (width < 0 || index_t(x.shape()[1]) == width);
    if (!ok)
        kattn::detail::fail(arg,
                            "shape [batch*length = " + std::to_string(ctx.rows()) + ", " +
                                (width < 0 ? std::string("width") : std::to_string(width)) + "]",
                            kattn::detail::shape_text(x.shape()));
}

/// Throws unless the context is consistent (lengths in [1, length], one per sequence).
inline void check_context(const context& ctx) {
    kattn::detail::require(ctx.batch >= 1, "context.batch", ">= 1", ctx.batch);
    kattn::detail::require(ctx.length >= 1, "context.length", ">= 1", ctx.length);
    if (ctx.padded()) {
        kattn::detail::require(index_t(ctx.lengths.size()) == ctx.batch, "context.lengths",
                               "one length per sequence (" + std::to_string(ctx.batch) + ")", ctx.lengths.size());
        for (index_t b = 0; b < ctx.batch; ++b)
            kattn::detail::require(ctx.lengths[b] >= 1 && ctx.lengths[b] <= ctx.length, "context.lengths",
                                   "values in [1, length = " + std::to_string(ctx.length) + "]", ctx.lengths[b]);
    }
}

/// Columns [h·dh, (h+1)·dh) of the rows of x [B·L, ld] → heads layout [B, H, L, dh], for every h.
template <class T>
xt::xtensor<T, 4> split_heads(const T* x, index_t ld, index_t B, index_t L, index_t H, index_t dh, index_t col0 = 0) {
    xt::xtensor<T, 4> out =
        xt::xtensor<T, 4>::from_shape({std::size_t(B), std::size_t(H), std::size_t(L), std::size_t(dh)});
    T* o = out.data();
    for (index_t b = 0; b < B; ++b)
        for (index_t h = 0; h < H; ++h)
            for (index_t t = 0; t < L; ++t) {
                const T* src = x + (b * L + t) * ld + col0 + h * dh;
                T* dst = o + ((b * H + h) * L + t) * dh;
                for (index_t c = 0; c < dh; ++c) dst[c] = src[c];
            }
    return out;
}

/// Inverse of split_heads: y[B·L, ld] columns col0 + [h·dh, (h+1)·dh) (+)= x[b, h, t, :].
template <class T>
void merge_heads(const xt::xtensor<T, 4>& x, T* y, index_t ld, index_t col0 = 0, bool accumulate = false) {
    const index_t B = index_t(x.shape()[0]), H = index_t(x.shape()[1]), L = index_t(x.shape()[2]),
                  dh = index_t(x.shape()[3]);
    const T* s = x.data();
    for (index_t b = 0; b < B; ++b)
        for (index_t h = 0; h < H; ++h)
            for (index_t t = 0; t < L; ++t) {
                const T* src = s + ((b * H + h) * L + t) * dh;
                T* dst = y + (b * L + t) * ld + col0 + h * dh;
                for (index_t c = 0; c < dh; ++c) dst[c] = accumulate ? dst[c] + src[c] : src[c];
            }
}

}  // namespace detail
}  // namespace kattn::nn
