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
// written for the system's row-ops policy: rows of inputs and of values gathered a few at a
// time, φ of a row with the maps' row functions (the same calls as activate_rows, so φ has
// the multi-pass path's bits), a row of output. The kernel: backends/causal_single_pass.cuh.
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
    /// Where set (the backward's recomputation), the raw numerator rows go here instead of
    /// out: problems × Lqp rows of dv1, the denominator in column dv.
    W* numerators = nullptr;

    /// Column groups per head, and thread blocks' jobs: problems × groups.
    KATTN_HD index_t groups() const { return (g.dv + cw - 1) / cw; }
    KATTN_HD index_t jobs() const { return g.problems * groups(); }
    /// Chunks per head (the last one may be partial).
    KATTN_HD index_t chunks() const { return (g.Lq + chunk - 1) / chunk; }

    /// Rows a call of gather or values takes at once (their loads are all issued before
    /// any is stored, so a warp waits for memory once per batch, not once per row).
    static constexpr int batch = 4;

    /// What the rows of problem p share, worked out once per thread block: its batch entry
    /// and head, and its valid keys.
    struct head_rows {
        index_t b, h, nk, p;
    };
    KATTN_HD head_rows head(index_t p) const { return {p / g.heads, p % g.heads, g.keys(p), p}; }
    /// Whether token l has features (keys: one of the valid keys).
    KATTN_HD bool valid(const head_rows& hr, index_t l, bool keys) const { return l < g.Lq && (!keys || l < hr.nk); }

    /// The scaled input rows of tokens l0, l0 + step, … (n ≤ batch of them; keys: of k,
    /// queries: of q) into stage rows ld apart (d elements each; zero for rows without
    /// features). No sync: the caller syncs before reading them.
    KATTN_HD void gather(const head_rows& hr, index_t l0, index_t step, int n, bool keys, W* stage, index_t ld) const {
        const auto& x = keys ? k : q;
        const T* src[batch];
        for (int r = 0; r < batch; ++r) {
            const index_t l = l0 + r * step;
            src[r] = r < n && valid(hr, l, keys) ? x.row(hr.b, hr.h, l) : nullptr;
        }
        for (index_t c = Ops::lane(); c < g.d; c += Ops::lanes) {
            W val[batch];
            for (int r = 0; r < batch; ++r) val[r] = src[r] ? scale * static_cast<W>(src[r][c]) : W(0);
            for (int r = 0; r < n; ++r) stage[r * ld + c] = val[r];
        }
    }

    /// φ of token l from its gathered row x (gather, then a sync) into dst (F
    /// elements): the map's activate with u = x, as activate_rows does; zero for a row
    /// without features.
    KATTN_HD void activate(const head_rows& hr, index_t l, bool keys, const W* x, W* dst) const {
        if (!valid(hr, l, keys)) {
            for (index_t f = Ops::lane(); f < g.F; f += Ops::lanes) dst[f] = W(0);
        } else {
            Map::template activate<Ops>(s.params, g.d, g.m, x, x, s.bias, W(0), dst);
        }
        Ops::sync();
    }

    /// Columns [c0, c0 + cw) of the value rows of tokens j0, j0 + step, … (n ≤ batch) into
    /// dst rows ld apart: zero beyond dv and for keys that do not exist. No sync.
    KATTN_HD void values(const head_rows& hr, index_t j0, index_t step, int n, index_t c0, W* dst, index_t ld) const {
        const T* src[batch];
        for (int r = 0; r < batch; ++r) {
            const index_t j = j0 + r * step;
            src[r] = r < n && valid(hr, j, true) ? v.row(hr.b, hr.h, j) : nullptr;
        }
        for (index_t c = Ops::lane(); c < cw; c += Ops::lanes) {
            W val[batch];
            for (int r = 0; r < batch; ++r) val[r] = src[r] && c0 + c < g.dv ? static_cast<W>(src[r][c0 + c]) : W(0);
            for (int r = 0; r < n; ++r) dst[r * ld + c] = val[r];
        }
    }

    /// Output row i, columns [c0, min(c0 + cw, dv)): numerator o / guard(den); or, with
    /// numerators set, o and (group 0) den as they are.
    KATTN_HD void emit(const head_rows& hr, index_t i, index_t c0, const W* o, W den) const {
        if (i >= g.Lq) return;
        if (numerators) {
            W* row = numerators + (hr.p * g.Lqp + i) * g.dv1;
            const index_t n = g.dv - c0 < cw ? g.dv - c0 : cw;
            for (index_t c = Ops::lane(); c < n; c += Ops::lanes) row[c0 + c] = o[c];
            if (c0 == 0 && Ops::lane() == 0) row[g.dv] = den;
            return;
        }
        bool clamped = false;
        const W dg = guard_denominator<Map::is_positive>(den, eps, clamped);
        T* dst = out.row(hr.b, hr.h, i);
        const index_t n = g.dv - c0 < cw ? g.dv - c0 : cw;
        for (index_t c = Ops::lane(); c < n; c += Ops::lanes) dst[c0 + c] = static_cast<T>(o[c] / dg);
    }
};

}  // namespace kattn::detail::chunked_impl
