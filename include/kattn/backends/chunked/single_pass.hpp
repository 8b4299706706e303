// kattn/backends/chunked/single_pass.hpp — the causal forward in one pass over the chunks,
// for a system that runs it as one kernel (cuda_system::launch_causal_single_pass).
//
// For a map without a stabiliser (every shift 0, every rescale factor 1) and Ω = I
// (u = x: φ needs no product), chunk b of a head's causal forward needs only its own rows
// and the running state of the chunks before it:
//   S_b = Σ_{j < 64b} φ_k,j v_jᵀ,   z_b = Σ_{j < 64b} φ_k,j,
//   out_i = (φ_q,i·S_b + Σ_{j ≤ i in b} ⟨φ_q,i, φ_k,j⟩ v_j) / guard(φ_q,i·z_b + Σ_{j ≤ i in b} ⟨φ_q,i, φ_k,j⟩).
// A thread block that owns one head and one group of `cw` value columns walks the chunks
// in order with S (F × cw) and z on chip, as flash-linear-attention's fused_chunk does, so
// neither φ nor a state goes through device memory: the call reads q, k and v and writes
// out, and needs no scratch. Every group of a head recomputes φ, the scores and z (the
// price of more blocks than heads). This header holds the row work of that kernel,
// written for the system's row-ops policy: φ of a row with the maps' row functions (the
// same calls as activate_rows, so φ has the multi-pass path's bits), a row of values, a
// row of output. The kernel: backends/causal_single_pass.cuh.
#pragma once

#include "../../core/config.hpp"
#include "../../core/math.hpp"
#include "../strided_view.hpp"
#include "kernels.hpp"

namespace kattn::detail::chunked_impl {

/// One causal forward call for the single-pass kernel. Tokens are not packed, the key
/// lengths may be (padded keys have φ = 0 and v = 0), Lq = Lk.
template <class Map, class T, class W, class Ops>
struct single_pass_job {
    static_assert(!Map::has_stabiliser, "single_pass_job: maps without a stabiliser only (every rescale is 1)");
    using work = W;
    geometry g;
    spectral<Map, W> s;  ///< s.identity: u = x
    backends::strided_view<const T> q, k, v;
    backends::strided_view<T> out;
    W scale, eps;
    index_t cw = 16;  ///< value columns per block (a multiple of 16)

    /// Column groups per head, and thread blocks' jobs: problems × groups.
    KATTN_HD index_t groups() const { return (g.dv + cw - 1) / cw; }
    KATTN_HD index_t jobs() const { return g.problems * groups(); }
    /// Chunks per head (the last one may be partial).
    KATTN_HD index_t chunks() const { return (g.Lq + chunk - 1) / chunk; }

    /// φ of token l of problem p (keys: of k, zero beyond the valid keys; queries: of q,
    /// zero beyond Lq) into dst (F elements): the scaled row gathered into stage (d
    /// elements, the caller's), then the map's activate with u = x, as activate_rows does.
    KATTN_HD void features(index_t p, index_t l, bool keys, W* stage, W* dst) const {
        const auto& x = keys ? k : q;
        const bool valid = l < g.Lq && (!keys || l < g.keys(p));
        if (!valid) {
            for (index_t f = Ops::lane(); f < g.F; f += Ops::lanes) dst[f] = W(0);
            Ops::sync();
            return;
        }
        const T* src = x.row(p / g.heads, p % g.heads, l);
        for (index_t c = Ops::lane(); c < g.d; c += Ops::lanes) stage[c] = scale * static_cast<W>(src[c]);
        Ops::sync();
        Map::template activate<Ops>(s.params, g.d, g.m, stage, stage, s.bias, W(0), dst);
        Ops::sync();
    }

    /// Columns [c0, c0 + cw) of value row j of problem p into dst: zero beyond dv and for
    /// keys that do not exist.
    KATTN_HD void values(index_t p, index_t j, index_t c0, W* dst) const {
        const bool valid = j < g.Lq && j < g.keys(p);
        const T* src = valid ? v.row(p / g.heads, p % g.heads, j) : nullptr;
        for (index_t c = Ops::lane(); c < cw; c += Ops::lanes)
            dst[c] = valid && c0 + c < g.dv ? static_cast<W>(src[c0 + c]) : W(0);
        Ops::sync();
    }

    /// Output row i of problem p, columns [c0, min(c0 + cw, dv)): numerator o / guard(den).
    KATTN_HD void emit(index_t p, index_t i, index_t c0, const W* o, W den) const {
        if (i >= g.Lq) return;
        bool clamped = false;
        const W dg = guard_denominator<Map::is_positive>(den, eps, clamped);
        T* dst = out.row(p / g.heads, p % g.heads, i);
        const index_t n = g.dv - c0 < cw ? g.dv - c0 : cw;
        for (index_t c = Ops::lane(); c < n; c += Ops::lanes) dst[c0 + c] = static_cast<T>(o[c] / dg);
    }
};

}  // namespace kattn::detail::chunked_impl
