// kattn/nn/attention/detail/heads.hpp — code shared by the attention layers of kattn::nn.
//
//   key_counts(ctx)            valid keys per sequence (ctx.lengths, or `length` for all)
//   derive_seed(seed, k)       sub-seed k of a layer seed (nn::detail::sub_seed)
//   to_heads / head_slice      activations [B·L, ld] → [B, H, L, dh] (all heads / head h alone)
//   from_heads                 [B, H, L, dh] → [B·L, H·dh]
//   attend / attend_backward   an operator call with key lengths, causal or not; with a
//                              saved state, the forward keeps what the backward reuses
//   orthogonal_matrix(D, s)    a Haar-orthogonal D×D matrix (Householder QR of a seeded
//                              Gaussian with the sign fix Q·diag(sign(diag R)))
//   pairs_to_omega             flow samples w [m, 2d] (row k = (ω₁ₖ, ω₂ₖ)) → Ω [d, 2m]:
//                              Ω(i, k) = w(k, i), Ω(i, m + k) = w(k, d + i)
//   omega_to_pairs             the transpose map for gradients dΩ [d, 2m] → dw [m, 2d]
//   self_heads_forward /       the per-head loop of the layers with Q = K = the head's slice
//   self_heads_backward        of x (FSKA, Coulomb): one operator per head, reached through
//                              a callback with_op(h, f) → f(op)
//   mean_attention_entropy     mean over (batch, head, valid query i) of
//                              −Σ_j a_ij log a_ij, a_ij = w_ij / Σ_j w_ij over the valid keys j
//                              (j < length_b, and j ≤ i when causal), from a row callback
//                              that writes the unnormalised weights w_ij ≥ 0
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <xtensor/xtensor.hpp>

#include "../../../attention/options.hpp"
#include "../../../attention/saved_state.hpp"
#include "../../../core/random.hpp"
#include "../../../features/omega_layout.hpp"
#include "../../../samplers/orthogonal_gaussian.hpp"
#include "../../detail/seed.hpp"
#include "../../tensor.hpp"

namespace kattn::nn::detail {

/// Valid key counts, one per sequence.
inline std::vector<index_t> key_counts(const context& ctx) {
    std::vector<index_t> n(std::size_t(ctx.batch), ctx.length);
    if (ctx.padded()) std::copy(ctx.lengths.begin(), ctx.lengths.end(), n.begin());
    return n;
}

/// Independent sub-seed k of a layer seed.
inline std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t k) { return sub_seed(seed, k); }

/// Throws unless dim ≥ 1, heads ≥ 1 and heads divides dim; returns dh = dim / heads.
inline index_t head_dim_of(index_t dim, index_t heads) {
    require(dim >= 1, "dim", ">= 1", dim);
    require(heads >= 1, "heads", ">= 1", heads);
    require(dim % heads == 0, "heads", "a divisor of dim = " + std::to_string(dim), heads);
    return dim / heads;
}

template <class T>
xt::xtensor<T, 4> to_heads(const tensor<T>& x, const context& ctx, index_t H, index_t dh) {
    return split_heads(x.data(), index_t(x.shape()[1]), ctx.batch, ctx.length, H, dh);
}

/// Head h of x alone, as [B, 1, L, dh].
template <class T>
xt::xtensor<T, 4> head_slice(const tensor<T>& x, const context& ctx, index_t h, index_t dh) {
    return split_heads(x.data(), index_t(x.shape()[1]), ctx.batch, ctx.length, 1, dh, h * dh);
}

template <class T>
tensor<T> from_heads(const xt::xtensor<T, 4>& y) {
    const index_t rows = index_t(y.shape()[0] * y.shape()[2]), width = index_t(y.shape()[1] * y.shape()[3]);
    tensor<T> out = zeros<T>(rows, width);
    merge_heads(y, out.data(), width);
    return out;
}

template <class Op, class C>
C attend(const Op& op, const C& q, const C& k, const C& v, bool causal, const std::vector<index_t>& lens) {
    const key_lengths kl(lens);
    return causal ? op(q, k, v, kattn::causal, kl) : op(q, k, v, kl);
}

template <class Op, class C>
auto attend_backward(const Op& op, const C& q, const C& k, const C& v, const C& dout, bool causal,
                     const std::vector<index_t>& lens) {
    const key_lengths kl(lens);
    return causal ? op.backward(q, k, v, dout, kattn::causal, kl) : op.backward(q, k, v, dout, kl);
}

/// attend, filling `saved` (kattn::saved_state) for attend_backward.
template <class Op, class C, class Saved>
C attend(const Op& op, const C& q, const C& k, const C& v, bool causal, const std::vector<index_t>& lens,
         Saved& saved) {
    const key_lengths kl(lens);
    return causal ? op(q, k, v, kattn::causal, kl, saved) : op(q, k, v, kl, saved);
}

/// attend_backward with the state attend(…, saved) kept.
template <class Op, class C, class Saved>
auto attend_backward(const Op& op, const C& q, const C& k, const C& v, const C& dout, bool causal,
                     const std::vector<index_t>& lens, const Saved& saved) {
    const key_lengths kl(lens);
    return causal ? op.backward(q, k, v, dout, kattn::causal, kl, saved) : op.backward(q, k, v, dout, kl, saved);
}

/// Row-major D×D orthogonal matrix (columns and rows orthonormal).
inline std::vector<double> orthogonal_matrix(index_t D, std::uint64_t seed) {
    std::vector<double> q(std::size_t(D * D));
    kattn::detail::orthogonal_block(seed, 0, D, q.data(), true);
    return q;
}

template <class T>
xt::xtensor<T, 2> pairs_to_omega(const xt::xtensor<double, 2>& w, index_t d) {
    const index_t m = index_t(w.shape()[0]);
    xt::xtensor<T, 2> om = xt::xtensor<T, 2>::from_shape({std::size_t(d), std::size_t(2 * m)});
    kattn::detail::frequencies_to_omega<true>(d, m, w.data(), om.data());
    return om;
}

template <class T>
xt::xtensor<double, 2> omega_to_pairs(const xt::xtensor<T, 2>& d_omega) {
    const index_t d = index_t(d_omega.shape()[0]), m = index_t(d_omega.shape()[1]) / 2;
    xt::xtensor<double, 2> dw = xt::xtensor<double, 2>::from_shape({std::size_t(m), std::size_t(2 * d)});
    kattn::detail::omega_to_frequencies<true>(d, m, d_omega.data(), dw.data());
    return dw;
}

/// row(b, h, i, n, w) writes w[0..n) ≥ 0 for the n valid keys of query i of (b, h).
template <class Row>
double mean_attention_entropy(const context& ctx, index_t H, bool causal, Row&& row) {
    double total = 0;
    index_t count = 0;
    std::vector<double> w(std::size_t(ctx.length));
    for (index_t b = 0; b < ctx.batch; ++b) {
        const index_t len = ctx.valid(b);
        for (index_t h = 0; h < H; ++h)
            for (index_t i = 0; i < len; ++i) {
                const index_t n = causal ? std::min(i + 1, len) : len;
                row(b, h, i, n, w.data());
                double s = 0;
                for (index_t j = 0; j < n; ++j) s += w[j];
                double e = 0;
                for (index_t j = 0; j < n; ++j)
                    if (w[j] > 0) {
                        const double a = w[j] / s;
                        e -= a * std::log(a);
                    }
                total += e;
                ++count;
            }
    }
    return total / double(count);
}

/// Unnormalised kernel weights w_j = |φ_q · φ_k,j| for rows j < n of phi_k [L, F].
template <class T>
void kernel_row(const T* phi_q, const xt::xtensor<T, 2>& phi_k, index_t n, double* w) {
    const index_t F = index_t(phi_k.shape()[1]);
    for (index_t j = 0; j < n; ++j) {
        double s = 0;
        for (index_t f = 0; f < F; ++f) s += double(phi_q[f]) * double(phi_k(j, f));
        w[j] = std::abs(s);
    }
}

/// Rows [b·L, (b+1)·L) of head h of x as an [L, dh] matrix.
template <class T>
xt::xtensor<T, 2> sequence_head(const tensor<T>& x, const context& ctx, index_t b, index_t h, index_t dh,
                                T scale = T(1)) {
    xt::xtensor<T, 2> s = xt::xtensor<T, 2>::from_shape({std::size_t(ctx.length), std::size_t(dh)});
    for (index_t t = 0; t < ctx.length; ++t)
        for (index_t c = 0; c < dh; ++c) s(t, c) = scale * x(b * ctx.length + t, h * dh + c);
    return s;
}

/// Throws unless a forward pass preceded a backward pass.
inline void require_cache(bool has, std::string_view layer) {
    if (!has) fail("dy", std::string("a preceding forward() of this ") + std::string(layer) + " layer", "none");
}

/// y[:, h·dh:(h+1)·dh] = attention_h(x_h, x_h, v_h) for every head h; with_op(h, f) calls
/// f(operator of head h). saved[h] keeps head h's state for self_heads_backward.
template <class T, class WithOp>
tensor<T> self_heads_forward(const tensor<T>& x, const tensor<T>& v, const context& ctx, index_t heads, index_t dh,
                             bool causal, const std::vector<index_t>& lens, WithOp&& with_op,
                             std::vector<kattn::saved_state<T>>& saved) {
    const index_t D = heads * dh;
    tensor<T> y = zeros<T>(ctx.rows(), D);
    saved.resize(std::size_t(heads));
    for (index_t h = 0; h < heads; ++h) {
        const auto xh = head_slice(x, ctx, h, dh), vh = head_slice(v, ctx, h, dh);
        with_op(h, [&](auto& op) {
            merge_heads(attend(op, xh, xh, vh, causal, lens, saved[std::size_t(h)]), y.data(), D, h * dh);
        });
    }
    return y;
}

/// Backward of self_heads_forward for dout [B·L, D]: returns dx (∂q + ∂k of every head) and
/// writes dv; on_grad(h, g) receives each head's operator gradients (for ∂Ω).
template <class T, class WithOp, class OnGrad>
tensor<T> self_heads_backward(const tensor<T>& x, const tensor<T>& v, const tensor<T>& dout, const context& ctx,
                              index_t heads, index_t dh, bool causal, const std::vector<index_t>& lens, tensor<T>& dv,
                              WithOp&& with_op, OnGrad&& on_grad, const std::vector<kattn::saved_state<T>>& saved) {
    const index_t D = heads * dh;
    tensor<T> dx = zeros<T>(ctx.rows(), D);
    dv = zeros<T>(ctx.rows(), D);
    for (index_t h = 0; h < heads; ++h) {
        const auto xh = head_slice(x, ctx, h, dh), vh = head_slice(v, ctx, h, dh);
        const auto dh_out = head_slice(dout, ctx, h, dh);
        with_op(h, [&](auto& op) {
            const auto g = attend_backward(op, xh, xh, vh, dh_out, causal, lens, saved.at(std::size_t(h)));
            merge_heads(g.dq, dx.data(), D, h * dh, true);
            merge_heads(g.dk, dx.data(), D, h * dh, true);
            merge_heads(g.dv, dv.data(), D, h * dh, false);
            on_grad(h, g);
        });
    }
    return dx;
}

}  // namespace kattn::nn::detail
