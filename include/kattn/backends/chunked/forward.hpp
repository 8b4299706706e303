// kattn/backends/chunked/forward.hpp — the chunked forward pass over a system's primitives.
//
// Per head (problem), with φ at each row's own stabiliser shift and key shifts c_j:
//   projections   U = (s·X)·Ω for the query rows, then the key rows: one GEMM per row
//                 block of up to 65,536 rows (X and U exist for one block at a time)
//   features      φ and the shifts, one functor call per row (the maps' row functions);
//                 a system with launch_projected_rows does gather, projection and
//                 activation in one pass instead (cuda_system: X and U stay on chip)
//   references    the running maximum R of the key shifts (a blocked scan of exact maxima),
//                 block references E_b and query references C_i
//   non-causal    S = Φ_Kᵀ·(kw ⊙ [V, 1]) (F × (dv+1): the ones column gives z),
//                 O = Φ_Q·S, out = O[:dv] / guard(O[dv])
//   causal        chunks of 64: block states A_b = Φ_K,bᵀ(kw ⊙ [V, 1]_b); their exclusive
//                 prefix X_b (chunked/scans.hpp: segments, fixed order, no float scan
//                 primitive; a system with launch_chunk_states makes the states and
//                 the scan within segments in one pass); the inter part
//                 Φ_Q,b·X_b; the intra part (mask ⊙ Φ_Q,bΦ_K,bᵀ)·[V, 1]_b; each a batched GEMM
//                 over problems × blocks; out from e^{E_{b−1} − C_i}·inter + intra
// A system with launch_chunk_outputs makes the output stage (inter, intra, mask, out) in
// one pass over tiles of 64 query rows instead (output_tiles in kernels.hpp); one with
// launch_causal_single_pass makes the whole causal forward of a map without a stabiliser
// and Ω = I in one pass over the chunks (single_pass.hpp).
// Tail chunks are zero-padded to 64 tokens. Intermediates are in W (float for float and
// 16-bit inputs, double for double); no L × L buffer exists (the intra scores are L × 64).
#pragma once

#include <algorithm>

#include "kernels.hpp"
#include "scans.hpp"
#include "single_pass.hpp"
#include "system.hpp"

namespace kattn::backends {
/// The working precision of a chunked backend for inputs of type T: double for double,
/// float for float and the 16-bit types.
template <class T>
using work_t = std::conditional_t<std::is_same_v<T, double>, double, float>;
}  // namespace kattn::backends

namespace kattn::detail::chunked_impl {

/// φ of one side's rows and their stabiliser shifts, in system memory.
template <class System, class W>
struct feature_block {
    typename System::template buffer<W> phi, shift;
};

/// U = X·Ω for the nr rows of a row block (X, U: nr × d, nr × P).
template <class Map, class W, class System>
void project_rows(const System& sys, const spectral<Map, W>& sp, const geometry& g, const W* X, W* U, index_t nr) {
    sys.gemm(false, false, nr, g.P, g.d, X, g.d, 0, sp.omega, g.P, 0, U, g.P, 0, index_t(1));
}

/// S[e] = Σ_k part[k·n + e] over `slabs` partial states of n elements, in slab order.
template <class W>
struct sum_slabs {
    const W* part;  ///< problems × slabs × n
    index_t slabs, n;
    W* S;  ///< problems × n
    KATTN_HD void operator()(index_t idx) const {
        const W* src = part + (idx / n) * slabs * n + idx % n;
        W s = W(0);
        for (index_t k = 0; k < slabs; ++k) s += src[k * n];
        S[idx] = s;
    }
};

/// Rows per slab of a state product over K rows: a divisor of K near K/32 when K ≥ 8,192,
/// otherwise 0 (one product).
inline index_t state_slab(index_t K) {
    if (K < 8192) return 0;
    for (index_t s = (K + 31) / 32; s <= K / 4; ++s)
        if (K % s == 0) return s;
    return 0;
}

/// S_p = Φ_pᵀ·Y_p for each problem p (Φ_p: K × F, Y_p: K × dv1, S_p: F × dv1). A product
/// with a long K and a small output keeps few thread blocks busy, so when K is long it runs
/// as one batched product over slabs of state_slab(K) rows, whose partial states are then
/// summed in slab order (a fixed order: the same bits on every run).
template <class W, class System>
void state_product(const System& sys, index_t F, index_t dv1, index_t K, const W* Phi, const W* Y, W* S,
                   index_t problems) {
    const index_t slab = state_slab(K);
    if (slab == 0) {
        sys.gemm(true, false, F, dv1, K, Phi, F, K * F, Y, dv1, K * dv1, S, dv1, F * dv1, problems);
        return;
    }
    const index_t slabs = K / slab, n = F * dv1;
    auto part = sys.template make_buffer<W>(problems * slabs * n);
    sys.gemm(true, false, F, dv1, slab, Phi, F, slab * F, Y, dv1, slab * dv1, part.data(), dv1, n, problems * slabs);
    sys.launch(problems * n, sum_slabs<W>{part.data(), slabs, n, S});
}

/// Whether the system makes the causal block states and their prefixes within segments in
/// one pass (launch_chunk_states, a capability with a default: no).
template <class W, class System>
bool fused_states(const System& sys, const geometry& g) {
    if constexpr (requires { sys.template fuses_chunk_states<W>(g.F, g.dv1); })
        return sys.template fuses_chunk_states<W>(g.F, g.dv1);
    else
        return false;
}

/// Step 1 of a chunk scan with the block states' products: A_b = Φ_bᵀ·Y_b for every block
/// (phi: problems·nb·64 × F, Y: problems·nb·64 × dv1), scanned within segments as `steps`
/// say into A (each block's value) and T (each segment's total): in one pass where the
/// system can (segment_states), otherwise the batched product, then `in_segments` (the
/// scan's own step 1 over A, with the same steps).
template <class W, class System, class Steps, class InSegments>
void scan_block_states(const System& sys, const geometry& g, const Steps& steps, const W* phi, const W* Y, W* A, W* T,
                       const InSegments& in_segments) {
    const segments sg = segments_of(g);
    if (fused_states<W>(sys, g)) {
        if constexpr (requires { sys.template fuses_chunk_states<W>(g.F, g.dv1); })
            sys.launch_chunk_states(segment_states<W>{g.problems, g.nb, g.F, g.dv1, sg, phi, Y, A, T}, steps);
        return;
    }
    state_product(sys, g.F, g.dv1, chunk, phi, Y, A, g.problems * g.nb);
    sys.launch(g.problems * g.F * g.dv1 * sg.count, in_segments);
}

/// Causal: the exclusive prefixes X_b of the block states A_b = Φ_K,bᵀ·V1w_b, into A
/// (problems × nb × F × dv1): the scan's step 1 with the products (scan_block_states),
/// then its steps 2 and 3 (chunked/scans.hpp).
template <class Map, class W, class System>
void prefix_states(const System& sys, const geometry& g, const W* E, const W* phk, const W* V1w, W* A) {
    const segments sg = segments_of(g);
    auto T = sys.template make_buffer<W>(g.problems * g.F * g.dv1 * sg.count);
    const prefix_steps<Map, W> steps{g, E};
    scan_block_states(sys, g, steps, phk, V1w, A, T.data(), prefix_in_segments<Map, W>{g, sg, steps, A, T.data()});
    finish_prefix<Map, W>(sys, g, E, T.data(), A);
}

/// φ (and the stabiliser shifts) of every row of x, padded to Lp rows per problem: in one
/// pass where the system can (launch_projected_rows: X and U never leave the chip),
/// otherwise in row blocks: gather X, project U = X·Ω, activate (X and U exist for one block).
/// With Ω = I, a row block is one pass of gather_activate_rows, u = x.
template <class Map, class W, class System, class T>
feature_block<System, W> row_features(const System& sys, const spectral<Map, W>& sp, const geometry& g,
                                      const backends::strided_view<const T>& x, index_t Lp, bool keys, bool stabilise,
                                      W scale) {
    const index_t rows = g.problems * Lp, blk = std::min(rows, row_block);
    feature_block<System, W> out{sys.template make_buffer<W>(rows * g.F), sys.template make_buffer<W>(rows)};
    using ops = system_row_ops<System>;
    const gather_rows<T, W, ops> gather{g, x, Lp, scale, nullptr, 0};
    const activate_rows<Map, W, ops> act{
        sp, g, Lp, x.len, keys, stabilise, nullptr, nullptr, out.phi.data(), out.shift.data(), 0};
    if (sp.identity) {  // u = x: one pass per row block, no product
        auto X = sys.template make_buffer<W>(blk * g.d);
        for (index_t r0 = 0; r0 < rows; r0 += blk) {
            gather_activate_rows<T, Map, W, ops> ga{gather, act, X.data()};
            ga.gather.first = ga.act.first = r0;
            detail::launch_rows(sys, std::min(blk, rows - r0), ga);
        }
        return out;
    }
    if constexpr (requires { sys.launch_projected_rows(rows, g.d, g.P, sp.omega, gather, act); })
        if (sys.launch_projected_rows(rows, g.d, g.P, sp.omega, gather, act)) return out;
    auto X = sys.template make_buffer<W>(blk * g.d);
    auto U = sys.template make_buffer<W>(blk * g.P);
    for (index_t r0 = 0; r0 < rows; r0 += blk) {
        const index_t nr = std::min(blk, rows - r0);
        auto gb = gather;
        gb.X = X.data();
        gb.first = r0;
        auto ab = act;
        ab.X = X.data();
        ab.U = U.data();
        ab.first = r0;
        detail::launch_rows(sys, nr, gb);
        project_rows(sys, sp, g, X.data(), U.data(), nr);
        detail::launch_rows(sys, nr, ab);
    }
    return out;
}

/// Everything a forward pass computes before its outputs (a backward pass reuses it).
template <class Map, class W, class System>
struct forward_pass {
    template <class T>
    using view = backends::strided_view<const T>;
    using buffer = typename System::template buffer<W>;

    feature_block<System, W> fq, fk;
    buffer R, E, Cq, V1w, V1, A, O, K, Oa;

    /// Runs everything up to O (and, causal, K and Oa). A: the block states; causal: their
    /// exclusive prefixes X_b. K: the masked, weighted intra-chunk scores. Without
    /// `outputs`, it stops at the states: O, K and Oa are neither allocated nor computed
    /// (a system's launch_chunk_outputs makes them on chip).
    template <class T>
    forward_pass(const System& sys, const spectral<Map, W>& sp, const geometry& g, const view<T>& q, const view<T>& k,
                 const view<T>& v, W scale, bool outputs = true)
        : fq(row_features<Map, W>(sys, sp, g, q, g.Lqp, false, true, scale)),
          fk(row_features<Map, W>(sys, sp, g, k, g.Lkp, true, true, scale)),
          R(sys.template make_buffer<W>(g.problems * g.Lkp)),
          E(sys.template make_buffer<W>(g.problems * g.nb)),
          Cq(sys.template make_buffer<W>(g.problems * g.Lqp)),
          V1w(sys.template make_buffer<W>(g.problems * g.Lkp * g.dv1)),
          V1(sys.template make_buffer<W>(g.causal ? g.problems * g.Lkp * g.dv1 : 0)),
          A(sys.template make_buffer<W>(g.problems * g.nb * g.F * g.dv1)),
          O(sys.template make_buffer<W>(outputs ? g.problems * g.Lqp * g.dv1 : 0)),
          K(sys.template make_buffer<W>(outputs && g.causal ? g.problems * g.Lqp * chunk : 0)),
          Oa(sys.template make_buffer<W>(outputs && g.causal ? g.problems * g.Lqp * g.dv1 : 0)) {
        const index_t F = g.F, dv1 = g.dv1, n = g.problems;
        const W* phq = fq.phi.data();
        const W* phk = fk.phi.data();
        const W* ck = fk.shift.data();
        {
            auto M = sys.template make_buffer<W>(n * g.nm);
            sys.launch(n * g.nm, block_max<W>{g, ck, R.data(), M.data()});
            sys.launch(n, block_max_prefix<W>{g, M.data()});
            sys.launch(n * g.Lkp, finish_max<W>{g, M.data(), R.data()});
        }
        sys.launch(n * (g.nb + g.Lqp), references<W>{g, R.data(), E.data(), Cq.data()});
        const index_t blk = g.block();
        detail::launch_rows(sys, n * g.Lkp,
                            value_rows<Map, T, W, system_row_ops<System>>{g, v, ck, E.data(), V1w.data(),
                                                                          g.causal ? V1.data() : nullptr});
        // Causal: the block states' exclusive prefixes. Otherwise the one state per head
        // (or, packed, per block): F × (dv + 1).
        if (g.causal)
            prefix_states<Map, W>(sys, g, E.data(), phk, V1w.data(), A.data());
        else
            state_product(sys, F, dv1, blk, phk, V1w.data(), A.data(), n * g.nb);
        if (!g.causal && !g.packed()) {
            if (!outputs) return;
            sys.gemm(false, false, g.Lqp, dv1, F, phq, F, g.Lqp * F, A.data(), dv1, F * dv1, O.data(), dv1, g.Lqp * dv1,
                     n);
            return;
        }
        const index_t C = chunk, nc = n * g.nb;
        if (!g.causal)  // packed documents: each block holds its whole document's state
            sys.launch(n * F * dv1, document_states<Map, W>{g, E.data(), A.data()});
        if (!outputs) return;
        sys.gemm(false, false, C, dv1, F, phq, F, C * F, A.data(), dv1, F * dv1, O.data(), dv1, C * dv1, nc);
        if (!g.causal) return;
        sys.gemm(false, true, C, C, F, phq, F, C * F, phk, F, C * F, K.data(), C, C * C, nc);
        sys.launch(n * g.Lqp * C, mask_scores<Map, W>{g, ck, Cq.data(), K.data()});
        sys.gemm(false, false, C, dv1, C, K.data(), C, C * C, V1.data(), dv1, C * dv1, Oa.data(), dv1, C * dv1, nc);
    }
};

/// Whether the system makes a forward pass's outputs from the states in one pass per tile
/// of 64 query rows (launch_chunk_outputs, a capability with a default: no). Lqp must be
/// whole tiles (always when causal or packed).
template <class W, class System>
bool tiled_outputs(const System& sys, const geometry& g) {
    if constexpr (requires { sys.template fuses_chunk_outputs<W>(g.F, g.dv1); })
        return g.Lqp % chunk == 0 && sys.template fuses_chunk_outputs<W>(g.F, g.dv1);
    else
        return false;
}

/// The value columns per block where the system runs this causal forward in one pass over
/// the chunks (launch_causal_single_pass, a capability with a default: no), else 0: maps
/// without a stabiliser, Ω = I, causal, not packed.
template <class Map, class W, class System>
index_t single_pass_columns(const System& sys, const spectral<Map, W>& sp, const geometry& g) {
    if constexpr (!Map::has_stabiliser &&
                  requires { sys.template single_pass_columns<W>(g.problems, g.d, g.F, g.dv); }) {
        if (!g.causal || g.packed() || !sp.identity || g.Lq != g.Lk) return 0;
        return sys.template single_pass_columns<W>(g.problems, g.d, g.F, g.dv);
    } else {
        return 0;
    }
}

/// The forward pass; see the file comment. Views and geometry are checked by the caller.
/// The output stage (inter and intra products, mask, out rows) runs as the three products
/// and two row passes above, or, where the system can, as one pass over tiles of 64 query
/// rows whose scores and numerators never leave the chip (output_tiles).
template <class Map, class W, class System, class T>
void forward(const System& sys, const spectral<Map, W>& sp, const geometry& g, const backends::strided_view<const T>& q,
             const backends::strided_view<const T>& k, const backends::strided_view<const T>& v,
             const backends::strided_view<T>& out, W scale, W eps) {
    if (g.problems == 0 || g.Lq == 0) return;
    if constexpr (!Map::has_stabiliser &&
                  requires { sys.template single_pass_columns<W>(g.problems, g.d, g.F, g.dv); }) {
        if (const index_t cw = single_pass_columns<Map, W>(sys, sp, g); cw > 0) {
            sys.launch_causal_single_pass(
                single_pass_job<Map, T, W, system_row_ops<System>>{g, sp, q, k, v, out, scale, eps, cw});
            return;
        }
    }
    const bool tiled = tiled_outputs<W>(sys, g);
    const forward_pass<Map, W, System> fp(sys, sp, g, q, k, v, scale, !tiled);
    const emit_rows<Map, T, W, system_row_ops<System>> emit{
        g, eps, fp.O.data(), g.causal ? fp.Oa.data() : nullptr, fp.E.data(), fp.Cq.data(), out};
    if (tiled) {
        if constexpr (requires { sys.template fuses_chunk_outputs<W>(g.F, g.dv1); }) {
            output_tiles<W> t;
            t.per_problem = g.Lqp / chunk;
            t.count = g.problems * t.per_problem;
            t.F = g.F;
            t.dv1 = g.dv1;
            t.phq = fp.fq.phi.data();
            t.A = fp.A.data();
            t.shared_state = !g.causal && !g.packed();
            if (g.causal) {
                t.phk = fp.fk.phi.data();
                t.V1 = fp.V1.data();
            }
            sys.launch_chunk_outputs(t, mask_scores<Map, W>{g, fp.fk.shift.data(), fp.Cq.data(), nullptr}, emit);
        }
        return;
    }
    detail::launch_rows(sys, g.problems * g.Lqp, emit);
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
