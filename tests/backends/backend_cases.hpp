// tests/backends/backend_cases.hpp — the cases every device-style backend is checked on
// against the reference: one attention forward and backward per map × mask, with padding
// that crosses the 64-token chunk boundaries (the Thrust and chunked/CUDA backends'
// tests; nvcc-safe: it includes only the operator and xtensor).
#pragma once

#include <algorithm>
#include <type_traits>
#include <vector>

#include <xtensor/xtensor.hpp>

#include <kattn/attention/linear_attention.hpp>
#include <kattn/features/relu.hpp>
#include <kattn/samplers/identity.hpp>

#include "../tensors.hpp"

namespace kt {

template <class Map, class T, class Backend>
using attn = kattn::linear_attention<Map, typename Map::default_sampler, Backend, T>;

/// Outputs and gradients of one case, widened to double.
struct case_result {
    xt::xtensor<double, 4> out, dq, dk, dv;
    xt::xtensor<double, 2> d_omega;
    xt::xtensor<double, 1> d_bias;
};

template <class Map>
kattn::attention_config<> case_config() {
    // Signed maps use a wider kernel (σ = 3) so that denominators stay away from zero.
    return kattn::attention_config<>{
        .head_dim = 8, .value_dim = 5, .num_features = 16, .seed = 3, .sigma = Map::is_positive ? 1.0 : 3.0};
}

/// Padding: batch 0 keeps L − 1 keys, batch 1 about a quarter (whole causal chunks of
/// padding), so the masks cross the 64-token chunk boundaries.
inline std::vector<kattn::index_t> case_lengths(kattn::index_t B, kattn::index_t L, bool padded) {
    std::vector<kattn::index_t> lens(static_cast<std::size_t>(B));
    for (kattn::index_t b = 0; b < B; ++b)
        lens[std::size_t(b)] = !padded      ? L
                               : b % 2 == 0 ? std::max<kattn::index_t>(1, L - 1)
                                            : std::max<kattn::index_t>(1, L / 4);
    return lens;
}

/// Forward and backward of operator a (head_dim d) on a [B, H, L] problem (dv = 5) with
/// optional padding.
template <class T, class A>
case_result run_with(const A& a, kattn::index_t B, kattn::index_t H, kattn::index_t L, bool causal, bool padded,
                     kattn::index_t d = 8) {
    const auto sb = std::size_t(B), sh = std::size_t(H), sl = std::size_t(L), sd = std::size_t(d);
    const auto q = randn<T, 4>({sb, sh, sl, sd}, 1, 0.5), k = randn<T, 4>({sb, sh, sl, sd}, 2, 0.5);
    const auto v = randn<T, 4>({sb, sh, sl, 5}, 3), G = randn<T, 4>({sb, sh, sl, 5}, 4);
    const auto lens = case_lengths(B, L, padded);
    const kattn::key_lengths kl(lens);
    const auto out = causal ? a(q, k, v, kattn::causal, kl) : a(q, k, v, kl);
    const auto g = causal ? a.backward(q, k, v, G, kattn::causal, kl) : a.backward(q, k, v, G, kl);
    return {xt::cast<double>(out),  xt::cast<double>(g.dq),      xt::cast<double>(g.dk),
            xt::cast<double>(g.dv), xt::cast<double>(g.d_omega), xt::cast<double>(g.d_bias)};
}

/// Forward and backward of a [B, H, L] problem (d = 8, dv = 5) with optional padding.
template <class Map, class T, class Backend>
case_result run_case(kattn::index_t B, kattn::index_t H, kattn::index_t L, bool causal, bool padded) {
    return run_with<T>(attn<Map, T, Backend>(case_config<Map>()), B, H, L, causal, padded);
}

/// The same with Ω = I: Map with the identity sampler, num_features = head_dim = d, which
/// backends run without products with Ω. With `nudge`, one entry off Ω's diagonal is
/// 2^-40 instead of 0: no longer the identity, so the products run, for values that differ
/// from Ω = I's by rounding only.
template <class Map, class T, class Backend>
case_result run_identity_case(kattn::index_t B, kattn::index_t H, kattn::index_t L, bool causal, bool padded,
                              bool nudge = false, kattn::index_t d = 8) {
    auto cfg = case_config<Map>();
    cfg.head_dim = cfg.num_features = d;
    kattn::linear_attention<Map, kattn::samplers::identity, Backend, T> a(cfg);
    if (nudge) {
        auto omega = a.omega();
        omega(0, 1) = T(1.0 / (1ull << 40));
        a.set_omega(omega);
    }
    return run_with<T>(a, B, H, L, causal, padded, d);
}

/// Token t of every head of a [B, H, L, w] tensor, as [B, H, w] (a decoding step's input).
template <class T>
xt::xtensor<T, 3> token_at(const xt::xtensor<T, 4>& x, kattn::index_t t) {
    const auto& s = x.shape();
    xt::xtensor<T, 3> r = xt::xtensor<T, 3>::from_shape({s[0], s[1], s[3]});
    for (std::size_t b = 0; b < s[0]; ++b)
        for (std::size_t h = 0; h < s[1]; ++h)
            for (std::size_t c = 0; c < s[3]; ++c) r(b, h, c) = x(b, h, std::size_t(t), c);
    return r;
}

/// Maps whose derivative jumps (relu's at u = 0): rounding the projections' inputs (TF32,
/// 16-bit products) moves some u across the jump and flips whole terms of the gradients,
/// so their gradients' error is not bounded by the rounding alone.
template <class Map>
inline constexpr bool derivative_jumps = std::is_same_v<Map, kattn::features::relu>;

/// chunk_rel_err of [B, H, L, w] tensors (any with shape() and data()).
template <class A, class B>
double chunk_rel_err_4d(const A& a, const B& b, double floor = 0) {
    REQUIRE(a.shape() == b.shape());
    return chunk_rel_err(a, b, b.shape()[2], b.shape()[3], 64, floor);
}

/// check_close's floor for chunk_rel_err: chunks whose largest entry is under 1 % of the
/// tensor's largest are compared relative to the tensor's largest.
inline constexpr double chunk_floor = 1e-2;

/// Every output within tol of the reference's, the gradients through the feature map (dq,
/// dk, dΩ, db) within grad_tol (default: tol). Per-token results are compared chunk by chunk
/// (64 tokens of a head, each relative to its own largest entry: chunk_rel_err), so an
/// error confined to late tokens shows (floor: chunk_rel_err's; 1 gives rel_err's whole-tensor
/// standard); dΩ and db relative to their largest entry.
inline void check_close(const case_result& s, const case_result& r, kattn::index_t L, double tol, double grad_tol = -1,
                        double floor = chunk_floor) {
    if (grad_tol < 0) grad_tol = tol;
    CHECK(chunk_rel_err_4d(s.out, r.out, floor) < tol);
    CHECK(chunk_rel_err_4d(s.dv, r.dv, floor) < tol);
    if (L == 1) return;  // a single token: out = v, so dq = dk = dΩ = 0 up to rounding
    CHECK(chunk_rel_err_4d(s.dq, r.dq, floor) < grad_tol);
    CHECK(chunk_rel_err_4d(s.dk, r.dk, floor) < grad_tol);
    CHECK(rel_err(s.d_omega, r.d_omega) < grad_tol);
    if (r.d_bias.size()) CHECK(rel_err(s.d_bias, r.d_bias) < grad_tol);
}

}  // namespace kt
