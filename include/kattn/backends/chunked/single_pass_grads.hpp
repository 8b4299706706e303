// kattn/backends/chunked/single_pass_grads.hpp — the causal backward in single passes over
// the chunks, for a system that runs them as kernels (cuda_system::launch_single_pass_grads).
//
// For a map without a stabiliser and Ω = I, with the output cotangent of query row i
//   ñ_i = [G_i / den_i, −⟨G_i, out_i⟩ / den_i]   (dv + 1 columns; the last 0 where the guard clamped)
// and v'_j = [v_j, 1], the gradients with respect to the features and values are
//   dφ_q,i = Σ_{j ≤ i} ⟨ñ_i, v'_j⟩ φ_k,j = S'_b·ñ_i + Σ_{j ≤ i in b} M_ij φ_k,j
//   dφ_k,j = Σ_{i ≥ j} ⟨ñ_i, v'_j⟩ φ_q,i = T_b·v'_j + Σ_{i ≥ j in b} M_ij φ_q,i
//   dv_j   = Σ_{i ≥ j} ⟨φ_q,i, φ_k,j⟩ ñ_i[0, dv) = T_bᵀ φ_k,j + Σ_{i ≥ j in b} A_ij ñ_i[0, dv)
// with M = ñ·v'ᵀ and A = Φ_QΦ_Kᵀ masked to j ≤ i within chunk b, S'_b = Σ_{j before b} φ_k,j v'_jᵀ
// (a forward walk over the chunks) and T_b = Σ_{i after b} φ_q,i ñ_iᵀ (a reverse walk).
// Each feature of dφ_q is a sum over j and the columns of ñ and v', so a thread block that
// owns a group of fw features keeps those rows of S' on chip (ñ and v' whole, M computed by
// every group) and writes its features of dφ_q exactly: no partial sums leave the block.
// dφ_k is the same with T in a reverse walk. dv is a sum over the features instead, so its own reverse
// walk splits the value columns into groups of cw: each block keeps all F rows of its
// columns of T and writes its columns of dv exactly. The maps' row VJPs then read dφ as it
// is (single_pass_vjp_inputs rebuilds φ). For an element-wise map (φ_l a function of u_l
// alone: detail::elementwise_features) with no dΩ and no db asked for, a block of a dφ walk
// holds all that its features' VJP needs (u_l = scale·x_l with Ω = I), so it finishes it:
//   dx_l = scale · ∂φ_l/∂u_l · dφ_l
// and writes its columns of dq or dk (single_pass_grads_job::fused): no dφ buffer and no
// row VJPs. The numerators and denominators come from the forward's single pass run again
// (single_pass_job::numerators), the cotangents from single_pass_cotangents. The kernels:
// backends/causal_single_pass_grads.cuh.
#pragma once

#include "../../core/config.hpp"
#include "../../core/math.hpp"
#include "../../features/feature_map.hpp"
#include "../strided_view.hpp"
#include "kernels.hpp"
#include "single_pass.hpp"

namespace kattn::detail::chunked_impl {

/// ñ of query row r (problems × Lqp rows of dv1: dv + 1 columns and zero padding) from its
/// numerator row (numerators, the denominator in column dv) and the output cotangent;
/// zeros for rows beyond Lq.
template <class Map, class T, class W, class Ops>
struct single_pass_cotangents {
    geometry g;
    W eps;
    const W* numerators;
    backends::strided_view<const T> dout;
    W* Nt;
    KATTN_HD void operator()(index_t r) const {
        const index_t p = r / g.Lqp, i = r % g.Lqp;
        W* nt = Nt + r * g.dv1;
        if (i >= g.Lq) {
            for (index_t c = Ops::lane(); c < g.dv1; c += Ops::lanes) nt[c] = W(0);
            return;
        }
        const W* o = numerators + r * g.dv1;
        bool clamped = false;
        const W den = guard_denominator<Map::is_positive>(o[g.dv], eps, clamped);
        const T* G = dout.row(p / g.heads, p % g.heads, i);
        W ge = W(0);
        for (index_t c = Ops::lane(); c < g.dv; c += Ops::lanes) {
            const W gc = static_cast<W>(G[c]);
            nt[c] = gc / den;
            ge += gc * (o[c] / den);
        }
        ge = Ops::reduce_sum(ge);
        if (Ops::lane() == 0) nt[g.dv] = clamped ? W(0) : -ge / den;
        for (index_t c = g.dv + 1 + Ops::lane(); c < g.dv1; c += Ops::lanes) nt[c] = W(0);
    }
};

/// One causal backward call for the gradient kernels: the row work of the three walks.
template <class Map, class T, class W, class Ops>
struct single_pass_grads_job {
    using work = W;
    using rows_job = single_pass_job<Map, T, W, Ops>;
    using head_rows = typename rows_job::head_rows;
    static constexpr int batch = rows_job::batch;
    rows_job rows;  ///< φ rows (its cw and out are not used)
    const W* Nt;    ///< problems × Lqp rows of ñ (dv1 columns)
    W* dphi_q;      ///< problems × Lqp rows of dφ_q (F columns)
    W* dphi_k;      ///< the same for dφ_k
    backends::strided_view<T> dv;
    index_t fw = 16;  ///< features per block of the dφ walks (a multiple of 16)
    index_t cw = 16;  ///< value columns per block of dV's walk (a multiple of 16)
    /// Set (element-wise maps, no parameter gradients): the dφ walks finish the VJP and write
    /// dq and dk here (emit_input_grad); dphi_q and dphi_k are not used.
    bool fused = false;
    backends::strided_view<T> dq{}, dk{};

    KATTN_HD const geometry& g() const { return rows.g; }
    /// Feature groups per head of the dφ walks, value-column groups per head of dV's walk.
    KATTN_HD index_t feature_groups() const { return (rows.g.F + fw - 1) / fw; }
    KATTN_HD index_t value_groups() const { return (rows.g.dv + cw - 1) / cw; }
    /// Blocks' work of the dφ walks and of dV's walk: (head, group) pairs.
    KATTN_HD index_t feature_jobs() const { return rows.g.problems * feature_groups(); }
    KATTN_HD index_t value_jobs() const { return rows.g.problems * value_groups(); }
    KATTN_HD index_t chunks() const { return rows.chunks(); }
    KATTN_HD head_rows head(index_t p) const { return rows.head(p); }

    /// Columns [c0, c0 + width) of ñ for rows i0, i0 + step, … (n ≤ batch) into dst rows ld
    /// apart (zero beyond column dv). No sync.
    KATTN_HD void cotangents(const head_rows& hr, index_t i0, index_t step, int n, index_t c0, index_t width, W* dst,
                             index_t ld) const {
        const geometry& gg = rows.g;
        const W* src[batch];
        for (int r = 0; r < batch; ++r) src[r] = r < n ? Nt + (hr.p * gg.Lqp + i0 + r * step) * gg.dv1 : nullptr;
        for (index_t c = Ops::lane(); c < width; c += Ops::lanes) {
            W val[batch];
            for (int r = 0; r < batch; ++r) val[r] = src[r] && c0 + c <= gg.dv ? src[r][c0 + c] : W(0);
            for (int r = 0; r < n; ++r) dst[r * ld + c] = val[r];
        }
    }

    /// Columns [0, width) of v'_j = [v_j, 1] for keys j0, j0 + step, … (n ≤ batch) into dst
    /// rows ld apart: zero beyond column dv and for keys that do not exist. No sync.
    KATTN_HD void values(const head_rows& hr, index_t j0, index_t step, int n, index_t width, W* dst,
                         index_t ld) const {
        const geometry& gg = rows.g;
        const T* src[batch];
        for (int r = 0; r < batch; ++r) {
            const index_t j = j0 + r * step;
            src[r] = r < n && rows.valid(hr, j, true) ? rows.v.row(hr.b, hr.h, j) : nullptr;
        }
        for (index_t c = Ops::lane(); c < width; c += Ops::lanes) {
            W val[batch];
            for (int r = 0; r < batch; ++r)
                val[r] = !src[r] ? W(0) : c < gg.dv ? static_cast<W>(src[r][c]) : c == gg.dv ? W(1) : W(0);
            for (int r = 0; r < n; ++r) dst[r * ld + c] = val[r];
        }
    }

    /// dφ (queries or keys) of rows [i, …) of problem p: F per row.
    KATTN_HD W* dphi(bool keys, index_t p, index_t i) const {
        const geometry& gg = rows.g;
        return (keys ? dphi_k : dphi_q) + (p * gg.Lqp + i) * gg.F;
    }

    /// Fused: dq (queries) or dk (keys) of token l, feature f, from its dφ: the map's VJP of
    /// that one element at u = scale·x (Ω = I), times scale; zero for a padded key, nothing
    /// for a row past the sequence. One thread per element, no sync.
    KATTN_HD void emit_input_grad(const head_rows& hr, index_t l, bool keys, index_t f, W dphi) const {
        if constexpr (requires(const map_params_t<Map>& mp) { Map::elementwise(mp); }) {
            if (l >= rows.g.Lq) return;
            T* dst = (keys ? dk : dq).row(hr.b, hr.h, l) + f;
            if (!rows.valid(hr, l, keys)) {
                *dst = static_cast<T>(W(0));
                return;
            }
            const W u = rows.scale * static_cast<W>((keys ? rows.k : rows.q).row(hr.b, hr.h, l)[f]);
            const W* b = rows.s.bias ? rows.s.bias + f : nullptr;
            constexpr index_t ws = Map::workspace(1);
            W phi = W(0), du = W(0), dx = W(0), work[ws > 0 ? ws : 1] = {};
            Map::template activate<scalar_ops>(rows.s.params, 1, 1, &u, &u, b, W(0), &phi);
            Map::template activate_vjp<scalar_ops>(rows.s.params, 1, 1, &u, &u, b, W(0), &phi, &dphi, &du, &dx,
                                                   static_cast<W*>(nullptr), work);
            *dst = static_cast<T>(rows.scale * du);
        }
    }

    /// dv of key j, columns [c0, min(c0 + cw, dv)), from the block's row.
    KATTN_HD void emit_values(const head_rows& hr, index_t j, index_t c0, const W* row) const {
        const geometry& gg = rows.g;
        if (j >= gg.Lk || c0 >= gg.dv) return;
        T* dst = dv.row(hr.b, hr.h, j);
        const index_t n = gg.dv - c0 < cw ? gg.dv - c0 : cw;
        for (index_t c = Ops::lane(); c < n; c += Ops::lanes) dst[c0 + c] = static_cast<T>(row[c]);
    }
};

/// For the row VJPs of a row block (first + i, i < rows of the block): φ of the block's
/// scaled input rows X as the forward's single pass makes it (zero for rows without
/// features); dφ is read where the walks wrote it.
template <class Map, class W, class Ops>
struct single_pass_vjp_inputs {
    spectral<Map, W> s;
    geometry g;
    index_t Lp, L;
    bool keys;
    const W* X;
    W* phi;  ///< the block's rows
    index_t first = 0;
    KATTN_HD void operator()(index_t i) const {
        const index_t r = first + i, p = r / Lp, tok = g.token(r % Lp, L), F = g.F;
        W* ph = phi + i * F;
        if (tok < 0 || (keys && tok >= g.keys(p)))
            for (index_t f = Ops::lane(); f < F; f += Ops::lanes) ph[f] = W(0);
        else
            Map::template activate<Ops>(s.params, g.d, g.m, X + i * g.d, X + i * g.d, s.bias, W(0), ph);
    }
};

}  // namespace kattn::detail::chunked_impl
