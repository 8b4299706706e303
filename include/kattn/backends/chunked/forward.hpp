// kattn/backends/chunked/forward.hpp — the chunked forward pass over a system's primitives.
//
// Per head (problem), with φ at each row's own stabiliser shift and key shifts c_j:
//   projections   U = (s·X)·Ω for all query rows, then all key rows: one GEMM each
//   features      φ and the shifts, one functor call per row (the maps' row functions)
//   references    the running maximum R of the key shifts (a blocked scan of exact maxima),
//                 block references E_b and query references C_i
//   non-causal    S = Φ_Kᵀ·(kw ⊙ [V, 1]) (F × (dv+1): the ones column gives z),
//                 O = Φ_Q·S, out = O[:dv] / guard(O[dv])
//   causal        chunks of 64: block states A_b = Φ_K,bᵀ(kw ⊙ [V, 1]_b); their exclusive
//                 prefix X_b in block order (fixed, no float scan primitive); the inter part
//                 Φ_Q,b·X_b; the intra part (mask ⊙ Φ_Q,bΦ_K,bᵀ)·[V, 1]_b; each a batched GEMM
//                 over problems × blocks; out from e^{E_{b−1} − C_i}·inter + intra
// Tail chunks are zero-padded to 64 tokens. Intermediates are in W (float for float and
// 16-bit inputs, double for double); no L × L buffer exists (the intra scores are L × 64).
#pragma once

#include <algorithm>

#include "kernels.hpp"
#include "system.hpp"

namespace kattn::backends {
/// The working precision of a chunked backend for inputs of type T: double for double,
/// float for float and the 16-bit types.
template <class T>
using work_t = std::conditional_t<std::is_same_v<T, double>, double, float>;
}  // namespace kattn::backends

namespace kattn::detail::chunked_impl {

/// Where φ of one side lands: features and (keys) shifts, in system memory.
template <class System, class W>
struct feature_block {
    typename System::template buffer<W> phi, shift;
};

/// φ (and the stabiliser shifts) of every row of x, padded to Lp rows per problem.
template <class Map, class W, class System, class T>
feature_block<System, W> row_features(const System& sys, const spectral<Map, W>& sp, const geometry& g,
                                      const backends::strided_view<const T>& x, index_t Lp, bool keys, bool stabilise,
                                      W scale) {
    const index_t rows = g.problems * Lp;
    feature_block<System, W> out{sys.template make_buffer<W>(rows * g.F), sys.template make_buffer<W>(rows)};
    auto X = sys.template make_buffer<W>(rows * g.d);
    auto U = sys.template make_buffer<W>(rows * g.P);
    sys.launch(rows, gather_rows<T, W>{x, Lp, g.heads, scale, X.data()});
    sys.gemm(false, false, rows, g.P, g.d, X.data(), g.d, 0, sp.omega, g.P, 0, U.data(), g.P, 0, index_t(1));
    sys.launch(rows, activate_rows<Map, W>{sp, g, Lp, x.len, keys, stabilise, X.data(), U.data(), out.phi.data(),
                                           out.shift.data()});
    return out;
}

/// The forward pass; see the file comment. Views and geometry are checked by the caller.
template <class Map, class W, class System, class T>
void forward(const System& sys, const spectral<Map, W>& sp, const geometry& g, const backends::strided_view<const T>& q,
             const backends::strided_view<const T>& k, const backends::strided_view<const T>& v,
             const backends::strided_view<T>& out, W scale, W eps) {
    if (g.problems == 0 || g.Lq == 0) return;
    const index_t F = g.F, dv1 = g.dv1, n = g.problems;
    const auto fq = row_features<Map, W>(sys, sp, g, q, g.Lqp, false, true, scale);
    const auto fk = row_features<Map, W>(sys, sp, g, k, g.Lkp, true, true, scale);
    const W* phq = fq.phi.data();
    const W* phk = fk.phi.data();
    const W* ck = fk.shift.data();

    auto R = sys.template make_buffer<W>(n * g.Lkp);
    auto E = sys.template make_buffer<W>(n * g.nb);
    auto Cq = sys.template make_buffer<W>(n * g.Lqp);
    {
        auto M = sys.template make_buffer<W>(n * g.nm);
        sys.launch(n * g.nm, block_max<W>{g, ck, R.data(), M.data()});
        sys.launch(n, block_max_prefix<W>{g, M.data()});
        sys.launch(n * g.Lkp, finish_max<W>{g, M.data(), R.data()});
    }
    sys.launch(n * (g.nb + g.Lqp), references<W>{g, R.data(), E.data(), Cq.data()});

    const index_t blk = g.block();
    auto V1w = sys.template make_buffer<W>(n * g.Lkp * dv1);
    auto V1 = sys.template make_buffer<W>(g.causal ? n * g.Lkp * dv1 : 0);
    sys.launch(n * g.Lkp, value_rows<Map, T, W>{g, v, ck, E.data(), V1w.data(), g.causal ? V1.data() : nullptr});
    // Block states (causal) or the one state per head: F × (dv + 1).
    auto A = sys.template make_buffer<W>(n * g.nb * F * dv1);
    sys.gemm(true, false, F, dv1, blk, phk, F, blk * F, V1w.data(), dv1, blk * dv1, A.data(), dv1, F * dv1, n * g.nb);

    auto O = sys.template make_buffer<W>(n * g.Lqp * dv1);
    if (!g.causal) {
        sys.gemm(false, false, g.Lqp, dv1, F, phq, F, g.Lqp * F, A.data(), dv1, F * dv1, O.data(), dv1, g.Lqp * dv1, n);
        sys.launch(n * g.Lq, emit_rows<Map, T, W>{g, eps, O.data(), nullptr, E.data(), Cq.data(), out});
        return;
    }
    const index_t C = chunk, nc = n * g.nb;
    sys.launch(n * F * dv1, exclusive_prefix<Map, W>{g, E.data(), A.data()});
    sys.gemm(false, false, C, dv1, F, phq, F, C * F, A.data(), dv1, F * dv1, O.data(), dv1, C * dv1, nc);
    auto K = sys.template make_buffer<W>(n * g.Lqp * C);
    sys.gemm(false, true, C, C, F, phq, F, C * F, phk, F, C * F, K.data(), C, C * C, nc);
    sys.launch(n * g.Lqp * C, mask_scores<Map, W>{g, ck, Cq.data(), K.data()});
    auto Oa = sys.template make_buffer<W>(n * g.Lqp * dv1);
    sys.gemm(false, false, C, dv1, C, K.data(), C, C * C, V1.data(), dv1, C * dv1, Oa.data(), dv1, C * dv1, nc);
    sys.launch(n * g.Lq, emit_rows<Map, T, W>{g, eps, O.data(), Oa.data(), E.data(), Cq.data(), out});
}

/// φ(s·x) of x's rows without stabiliser (the exact map), into phi (rows × F, system memory).
template <class Map, class W, class System, class T>
void features(const System& sys, const spectral<Map, W>& sp, const geometry& g,
              const backends::strided_view<const T>& x, W scale, W* phi) {
    const auto fb = row_features<Map, W>(sys, sp, g, x, x.len, false, false, scale);
    const index_t n = g.problems * x.len * g.F;
    sys.launch(n, copy_into<W>{fb.phi.data(), phi});
}

}  // namespace kattn::detail::chunked_impl
