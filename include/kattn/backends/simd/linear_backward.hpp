// kattn/backends/simd/linear_backward.hpp — tiled linear-attention backward pass.
//
// With G = ∂L/∂out, n_i = G_i/den_i, e_i = −(G_i·out_i)/den_i (0 where the guard clamped):
//   ∂Φ_Q = n Sᵀ + e zᵀ,  ∂S = Φ_Qᵀ n,  ∂z = Φ_Qᵀ e,  ∂Φ_K,j = ∂S v_j + ∂z,  ∂V = Φ_K ∂S,
// then the map's VJP per row gives ∂Q, ∂K, ∂Ω and ∂b. Non-causal: a key pass (S, z), a
// query pass (∂Q, ∂S, ∂z), a key pass (∂K, ∂V). Causal: a forward-direction pass per tile
// (intra-tile masked products plus the state) gives ∂Q and stores n, e and the running
// shifts (O(L·d_v), never L×F); a reverse pass carries the suffix sums (∂S, ∂z) for ∂K,
// ∂V. ∂Ω and ∂b are reduced over (head, segment) partials in a fixed order.
#pragma once

#include "../../core/warnings_push.hpp"  // GCC PR 105593: false -Wmaybe-uninitialized in AVX-512 intrinsics

#include <optional>
#include <string>
#include <vector>

#include "../../core/error.hpp"
#include "linear_forward.hpp"
#include "workspace.hpp"

namespace kattn::detail::simd_impl {

/// earlier ← earlier ⊕ later for suffix sums whose reference shift is the earliest
/// query's (later states have larger C, so the factor e^{C_early − C_late} ≤ 1).
template <class T>
void combine_suffix(key_state<T>& earlier, const key_state<T>& later) {
    if (later.empty) return;
    if (earlier.empty) {
        earlier = later;
        return;
    }
    earlier.add_scaled(later, std::exp(earlier.C - later.C));
}

template <class Map, class T, class Arch>
struct backward_kernels {
    using fwd = forward_kernels<Map, T, Arch>;
    using worker = tile_worker<Map, T, Arch>;
    using ops = simd_ops<Arch>;

    /// Per-item partial sums of the parameter gradients.
    struct param_grads {
        std::vector<T> d_omega, d_bias;
        param_grads(const spectral<Map, T>& sp) : d_omega(sz(sp.d * sp.P), T(0)), d_bias(sz(sp.m), T(0)) {}
    };

    /// n_r, e_r of one row from its numerator and raw denominator; returns e_r.
    static T row_upstream(const attention_problem<Map, T>& pb, const T* G, const T* num, T den_raw, T* nrow) {
        bool cl = false;
        const T den = guard_denominator<Map::is_positive>(den_raw, T(pb.eps), cl);
        const T inv = T(1) / den;
        T ge = 0;
        for (index_t c = 0; c < pb.dv; ++c) {
            nrow[c] = G[c] * inv;
            ge += G[c] * num[c] * inv;
        }
        return cl ? T(0) : -ge * inv;
    }

    /// Non-causal query pass over [i0, i1): ∂Q rows, and ∂S, ∂z, parameter partials.
    static void query_pass(worker& w, const attention_problem<Map, T>& pb, const attention_gradients<T>& g, index_t p,
                           index_t i0, index_t i1, const key_state<T>& st, const std::vector<T>& St, key_state<T>& dst,
                           param_grads& pg) {
        const auto& sp = w.sp;
        const index_t F = sp.F, dv = pb.dv;
        std::vector<T> num(sz(tile_rows * dv)), nb(sz(tile_rows * dv)), e(sz(tile_rows)), dph(sz(tile_rows * F));
        for (index_t i = i0; i < i1; i += tile_rows) {
            const index_t n = std::min(tile_rows, i1 - i);
            w.project(n, pb.q + (p * pb.q_len + i) * sp.d, true);
            w.activate(n, w.phi.data());
            gemm_nn<Arch>(n, dv, F, w.phi.data(), F, st.S.data(), dv, num.data(), dv, false);
            for (index_t r = 0; r < n; ++r)
                e[r] = row_upstream(pb, g.dout + (p * pb.q_len + i + r) * dv, &num[r * dv],
                                    ops::dot(F, &w.phi[r * F], st.z.data()), &nb[r * dv]);
            gemm_nn<Arch>(n, F, dv, nb.data(), dv, St.data(), F, dph.data(), F, false);
            for (index_t r = 0; r < n; ++r)
#pragma omp simd
                for (index_t f = 0; f < F; ++f) dph[r * F + f] += e[r] * st.z[f];
            dst.template add<Arch>(n, w.phi.data(), nb.data(), e.data(), w.state_scratch);
            w.vjp(n, w.phi.data(), dph.data(), pg.d_bias.data());
            w.input_grads(n, g.dq + (p * pb.q_len + i) * sp.d, pg.d_omega.data());
        }
    }

    /// Non-causal key pass over valid keys [j0, j1): ∂K, ∂V rows from ∂S, ∂z.
    static void key_pass(worker& w, const attention_problem<Map, T>& pb, const attention_gradients<T>& g, index_t p,
                         index_t j0, index_t j1, T C, const key_state<T>& dst, const std::vector<T>& dSt,
                         param_grads& pg, const projection_cache<T>* pc, std::uint64_t* fp) {
        const auto& sp = w.sp;
        const index_t F = sp.F, dv = pb.dv;
        std::vector<T> dph(sz(tile_rows * F));
        for (index_t j = j0; j < j1; j += tile_rows) {
            const index_t n = std::min(tile_rows, j1 - j);
            const T* Vt = pb.v + (p * pb.k_len + j) * dv;
            if (pc)
                pc->load(p, j, n, w);  // the key-state pass's projection of these rows
            else
                w.project(n, pb.k + (p * pb.k_len + j) * sp.d, false);
            fingerprint_keys(pb, p, j, n, fp);
            w.activate(n, w.phi.data(), true, C);
            gemm_nn<Arch>(n, F, dv, Vt, dv, dSt.data(), F, dph.data(), F, false);
            for (index_t r = 0; r < n; ++r)
#pragma omp simd
                for (index_t f = 0; f < F; ++f) dph[r * F + f] += dst.z[f];
            gemm_nn<Arch>(n, dv, F, w.phi.data(), F, dst.S.data(), dv, g.dv + (p * pb.k_len + j) * dv, dv, false);
            w.vjp(n, w.phi.data(), dph.data(), pg.d_bias.data(), true, C);
            w.input_grads(n, g.dk + (p * pb.k_len + j) * sp.d, pg.d_omega.data());
        }
    }

    /// Buffers of the causal backward tiles.
    struct causal_bufs {
        typename fwd::causal_tile ct;
        std::vector<T> Bm, Vt, St, tmp, dph, dvb;
        causal_bufs(index_t F, index_t dv)
            : ct(F, dv),
              Bm(sz(tile_rows * tile_rows)),
              Vt(sz(tile_rows * dv)),
              St(sz(F * dv)),
              tmp(sz(tile_rows * F)),
              dph(sz(tile_rows * F)),
              dvb(sz(tile_rows * dv)) {}
    };

    /// What the reverse pass reads of a causal tile, kept from the forward-direction pass
    /// when pb.backward_cache_bytes allows (recomputed otherwise; the values are the same
    /// bits either way): query features, key features at their own shifts, the masked
    /// intra-tile scores, and the keys' scaled inputs, projections and own shifts. Token
    /// t of head p owns row p·L + t of every array (A: tile_rows entries per token).
    struct tile_cache {
        index_t L = 0, F = 0;
        T *phq, *phk, *A, *ck;
        projection_cache<T> keys;  ///< the keys' scaled inputs and projections

        /// Bytes a cache of these extents takes (saturating).
        static std::size_t bytes(const attention_problem<Map, T>& pb, const spectral<Map, T>& sp) {
            const double per_token = double(2 * sp.F + tile_rows + sp.d + sp.P + 1) * sizeof(T);
            const double all = per_token * double(pb.problems) * double(pb.q_len);
            return all >= 9e18 ? std::size_t(-1) : std::size_t(all);
        }
        tile_cache(const attention_problem<Map, T>& pb, const spectral<Map, T>& sp) : L(pb.q_len), F(sp.F) {
            const std::size_t rows = sz(pb.problems * pb.q_len);
            T* w = cache_workspace<T>(rows * sz(2 * F + tile_rows + sp.d + sp.P + 1));
            phq = w;
            phk = phq + rows * sz(F);
            A = phk + rows * sz(F);
            keys = {A + rows * sz(tile_rows), A + rows * sz(tile_rows + sp.d), L, sp.d, sp.P};
            ck = keys.u + rows * sz(sp.P);
        }
        std::size_t row(index_t p, index_t i) const { return sz(p * L + i); }

        /// Keeps tile [i, i+n) of head p as causal_scores left it.
        void save(index_t p, index_t i, index_t n, index_t nvalid, const worker& wq, const worker& wk,
                  const typename fwd::causal_tile& ct) {
            const std::size_t r = row(p, i);
            std::copy_n(wq.phi.begin(), n * F, phq + r * F);
            std::copy_n(ct.phk.begin(), nvalid * F, phk + r * F);
            std::copy_n(ct.A.begin(), n * nvalid, A + r * tile_rows);
            keys.save(p, i, n, wk);
            std::copy_n(wk.shift.begin(), n, ck + r);
        }
        /// Restores what causal_scores(…, known_Ci) would compute; returns nvalid. The
        /// features and scores are used in place (pointers into the cache).
        index_t load(const attention_problem<Map, T>& pb, index_t p, index_t i, index_t n, worker& wk,
                     typename fwd::causal_tile& ct, const T* known_Ci, T*& phq_out, T*& phk_out, T*& A_out) {
            const std::size_t r = row(p, i);
            const index_t nvalid = std::clamp<index_t>(pb.valid_keys(p) - i, 0, n);
            keys.load(p, i, n, wk);
            std::copy_n(ck + r, n, wk.shift.begin());
            std::copy_n(ck + r, n, ct.ck.begin());
            std::copy_n(known_Ci, n, ct.Ci.begin());
            phq_out = phq + r * F;
            phk_out = phk + r * F;
            A_out = A + r * tile_rows;
            return nvalid;
        }
    };

    /// Bm[r][c] = [c ≤ r]·w_rc·(n_r·v_c + e_r), w_rc = e^{c_c − C_r}.
    static void intra_upstream(causal_bufs& b, const attention_problem<Map, T>& pb, index_t p, index_t i, index_t n,
                               index_t nvalid, const T* nb, const T* e) {
        if (nvalid == 0) return;
        const index_t dv = pb.dv;
        transpose_simd<Arch>(nvalid, dv, pb.v + (p * pb.k_len + i) * dv, dv, b.Vt.data(), nvalid);
        // Row r needs columns c ≤ r only (mask_row clears the rest).
        gemm_lower<Arch>(n, nvalid, dv, nb, dv, 1, b.Vt.data(), nvalid, b.Bm.data(), nvalid, false);
        for (index_t r = 0; r < n; ++r) {
            T* row = &b.Bm[r * nvalid];
            const T er = e[r];
            ops::transform(
                std::min(r + 1, nvalid), row,
                [er](auto x) {
                    using V = decltype(x);
                    return x + V(er);
                },
                row);
            fwd::mask_row(row, r, nvalid, b.ct.ck.data(), b.ct.Ci[r]);
        }
    }

    /// Causal forward-direction pass over [i0, i1): stores n, e, C_i; ∂Q rows; and (when
    /// `totals`) the segment's query sums at the reference shift of its first query.
    static void causal_query_pass(worker& wq, worker& wk, causal_bufs& b, const attention_problem<Map, T>& pb,
                                  const attention_gradients<T>& g, index_t p, index_t i0, index_t i1, key_state<T>& st,
                                  T* nb_all, T* e_all, T* C_all, key_state<T>* totals, param_grads& pg,
                                  tile_cache* cache, std::uint64_t* fp) {
        const auto& sp = wq.sp;
        const index_t F = sp.F, dv = pb.dv;
        auto& ct = b.ct;
        for (index_t i = i0; i < i1; i += tile_rows) {
            const index_t n = std::min(tile_rows, i1 - i);
            const index_t nvalid = fwd::causal_scores(wq, wk, ct, pb, p, i, n, st, nullptr, fp);
            if (cache) cache->save(p, i, n, nvalid, wq, wk, ct);
            T* nb = nb_all + i * dv;
            T* e = e_all + i;
            std::fill(ct.num.begin(), ct.num.end(), T(0));
            if (nvalid > 0)
                gemm_lower_a<Arch>(n, dv, nvalid, ct.A.data(), nvalid, 1, pb.v + (p * pb.k_len + i) * dv, dv,
                                   ct.num.data(), dv, false);
            if (!st.empty) gemm_nn<Arch>(n, dv, F, wq.phi.data(), F, st.S.data(), dv, ct.tmp.data(), dv, false);
            for (index_t r = 0; r < n; ++r) {
                T den = 0;
                for (index_t c = 0; c < nvalid; ++c) den += ct.A[r * nvalid + c];
                if (!st.empty) {
                    const T f = fwd::state_factor(st, ct, r);
                    den += f * ops::dot(F, &wq.phi[r * F], st.z.data());
#pragma omp simd
                    for (index_t c = 0; c < dv; ++c) ct.num[r * dv + c] += f * ct.tmp[r * dv + c];
                }
                e[r] = row_upstream(pb, g.dout + (p * pb.q_len + i + r) * dv, &ct.num[r * dv], den, &nb[r * dv]);
                C_all[i + r] = ct.Ci[r];
            }
            // ∂Φ_Q = Bm Φ̂_K + f·(n Sᵀ + e zᵀ)
            intra_upstream(b, pb, p, i, n, nvalid, nb, e);
            std::fill(b.dph.begin(), b.dph.end(), T(0));
            if (nvalid > 0) gemm_nn<Arch>(n, F, nvalid, b.Bm.data(), nvalid, ct.phk.data(), F, b.dph.data(), F, false);
            if (!st.empty) {
                transpose_simd<Arch>(F, dv, st.S.data(), dv, b.St.data(), F);
                gemm_nn<Arch>(n, F, dv, nb, dv, b.St.data(), F, b.tmp.data(), F, false);
                for (index_t r = 0; r < n; ++r) {
                    const T f = fwd::state_factor(st, ct, r);
#pragma omp simd
                    for (index_t fi = 0; fi < F; ++fi) b.dph[r * F + fi] += f * (b.tmp[r * F + fi] + e[r] * st.z[fi]);
                }
            }
            wq.vjp(n, wq.phi.data(), b.dph.data(), pg.d_bias.data());
            wq.input_grads(n, g.dq + (p * pb.q_len + i) * sp.d, pg.d_omega.data());
            if (totals) {
                if (totals->empty) totals->C = C_all[i0];
                add_query_rows(wq.phi.data(), n, F, nb, e, &C_all[i], *totals, wq.state_scratch);
            }
            fwd::causal_update(pb, p, i, nvalid, F, ct, st, wk.state_scratch);
        }
    }

    /// D += Σ_r e^{C_D − C_r} φ_q,r n_rᵀ, dz likewise (scales the rows of ph in place).
    static void add_query_rows(T* ph, index_t n, index_t F, const T* nb, const T* e, const T* C, key_state<T>& D,
                               std::vector<T>& scratch) {
        if constexpr (Map::has_stabiliser)
            for (index_t r = 0; r < n; ++r) {
                const T h = std::exp(D.C - C[r]);
#pragma omp simd
                for (index_t f = 0; f < F; ++f) ph[r * F + f] *= h;
            }
        D.template add<Arch>(n, ph, nb, e, scratch);
    }

    /// Causal reverse pass over [i0, i1), starting from the suffix sums D of later
    /// positions: ∂K, ∂V rows and parameter partials.
    static void causal_key_pass(worker& wq, worker& wk, causal_bufs& b, const attention_problem<Map, T>& pb,
                                const attention_gradients<T>& g, index_t p, index_t i0, index_t i1, key_state<T>& D,
                                const T* nb_all, const T* e_all, const T* C_all, param_grads& pg, tile_cache* cache) {
        const auto& sp = wq.sp;
        const index_t F = sp.F, dv = pb.dv, d = sp.d;
        auto& ct = b.ct;
        if (i1 <= i0) return;
        const key_state<T> none(0, 0);
        const index_t last = i0 + ((i1 - i0 - 1) / tile_rows) * tile_rows;
        for (index_t i = last; i >= i0; i -= tile_rows) {
            const index_t n = std::min(tile_rows, i1 - i);
            // The tile's query features, key features and masked scores: kept by the
            // forward-direction pass, or recomputed into the workers' buffers.
            T *phq = wq.phi.data(), *phk = ct.phk.data(), *A = ct.A.data();
            const index_t nvalid = cache ? cache->load(pb, p, i, n, wk, ct, C_all + i, phq, phk, A)
                                         : fwd::causal_scores(wq, wk, ct, pb, p, i, n, none, C_all + i);
            const T* nb = nb_all + i * dv;
            const T* e = e_all + i;
            intra_upstream(b, pb, p, i, n, nvalid, nb, e);
            if (nvalid > 0) {
                gemm_tn<Arch>(nvalid, F, n, b.Bm.data(), nvalid, phq, F, b.dph.data(), F, false);
                gemm_tn<Arch>(nvalid, dv, n, A, nvalid, nb, dv, b.dvb.data(), dv, false);
                if (!D.empty) {
                    transpose_simd<Arch>(F, dv, D.S.data(), dv, b.St.data(), F);
                    gemm_nn<Arch>(nvalid, F, dv, pb.v + (p * pb.k_len + i) * dv, dv, b.St.data(), F, b.tmp.data(), F,
                                  false);
                    gemm_nn<Arch>(nvalid, dv, F, phk, F, D.S.data(), dv, ct.tmp.data(), dv, false);
                    for (index_t c = 0; c < nvalid; ++c) {
                        T gc = 1;
                        if constexpr (Map::has_stabiliser) gc = std::exp(ct.ck[c] - D.C);
#pragma omp simd
                        for (index_t f = 0; f < F; ++f) b.dph[c * F + f] += gc * (b.tmp[c * F + f] + D.z[f]);
#pragma omp simd
                        for (index_t k = 0; k < dv; ++k) b.dvb[c * dv + k] += gc * ct.tmp[c * dv + k];
                    }
                }
                wk.vjp(nvalid, phk, b.dph.data(), pg.d_bias.data());
                wk.input_grads(nvalid, g.dk + (p * pb.k_len + i) * d, pg.d_omega.data());
                std::copy_n(b.dvb.data(), nvalid * dv, g.dv + (p * pb.k_len + i) * dv);
            }
            for (index_t r = nvalid; r < n; ++r) {
                std::fill_n(g.dk + (p * pb.k_len + i + r) * d, d, T(0));
                std::fill_n(g.dv + (p * pb.k_len + i + r) * dv, dv, T(0));
            }
            // Move D's reference to this tile's first query and add the tile's queries.
            if constexpr (Map::has_stabiliser) {
                if (!D.empty && C_all[i] != D.C) D.rescale(std::exp(C_all[i] - D.C));
                D.C = C_all[i];
            }
            add_query_rows(phq, n, F, nb, e, C_all + i, D, wq.state_scratch);
        }
    }
};

/// Throws unless the fingerprint of the keys and values the backward saw equals the one
/// the forward kept (the saved state belongs to other inputs).
inline void check_saved_inputs(std::uint64_t kept, const std::vector<std::uint64_t>& seen) {
    std::uint64_t h = 0;
    for (const auto x : seen) h += x;
    require(h == kept, "saved", "the state kept by a forward pass of these k and v",
            std::string("a state from other inputs (k or v changed since that forward pass)"));
}

/// Throws unless `saved` holds `items` key states of F × d_v kept by a forward pass.
template <class T>
void check_saved_extents(const forward_state<T>& saved, index_t items, index_t F, index_t dv) {
    require(saved.kept && saved.count == items && saved.features == F && saved.value_dim == dv, "saved",
            "a state kept by the forward pass of this problem (" + std::to_string(items) + " key states of " +
                std::to_string(F) + " x " + std::to_string(dv) + ")",
            saved.kept ? std::to_string(saved.count) + " key states of " + std::to_string(saved.features) + " x " +
                             std::to_string(saved.value_dim)
                       : std::string("an empty state"));
}

/// The backward pass. With `saved` (filled by linear_forward(…, keep) on the same problem)
/// the key states come from it instead of a pass over the keys; the gradients are the same
/// bits either way.
template <class Map, class T, class Arch>
void linear_backward(const attention_problem<Map, T>& pb, const attention_gradients<T>& g,
                     const slice_link<T>* link = nullptr, const forward_state<T>* saved = nullptr) {
    using K = backward_kernels<Map, T, Arch>;
    using pgrads = typename K::param_grads;
    const auto sp = spectral<Map, T>::make(pb.spec, pb.input_scale, true);
    const index_t nseg = segments_for(pb.problems, std::max(pb.q_len, pb.k_len));
    const index_t items = pb.problems * nseg, F = sp.F, dv = pb.dv;
    const std::size_t n_items = static_cast<std::size_t>(items);
    std::vector<pgrads> qpart(n_items, pgrads{sp}), kpart(n_items, pgrads{sp});
    auto seg = [&](index_t len, index_t s) { return split_point(len, nseg, s); };
    if (saved) check_saved_extents(*saved, items, F, dv);
    std::vector<std::uint64_t> seen(saved ? n_items : 0, 0);

    if (!pb.causal) {
        // The key pass reuses the key-state pass's projections when they fit the budget
        // (no key-state pass when the forward's states are given).
        projection_cache<T> kp{nullptr, nullptr, pb.k_len, sp.d, sp.P};
        const double kp_bytes = double(pb.problems) * double(pb.k_len) * double(sp.d + sp.P) * sizeof(T);
        if (!saved && kp_bytes <= double(pb.backward_cache_bytes)) {
            kp.xs = cache_workspace<T>(sz(pb.problems * pb.k_len * (sp.d + sp.P)));
            kp.u = kp.xs + pb.problems * pb.k_len * sp.d;
        }
        const projection_cache<T>* kpc = kp.xs ? &kp : nullptr;
        const auto st = saved ? restore_states(*saved) : full_key_states<Map, T, Arch>(sp, pb, nseg, link, kpc);
        std::vector<key_state<T>> dst(sz(items), key_state<T>(F, dv));
        std::vector<std::vector<T>> St(sz(pb.problems), std::vector<T>(sz(F * dv)));
        for (index_t p = 0; p < pb.problems; ++p)
            transpose_simd<Arch>(F, dv, st[sz(p * nseg)].S.data(), dv, St[sz(p)].data(), F);
#pragma omp parallel
        {
            tile_worker<Map, T, Arch> w(sp);
#pragma omp for schedule(dynamic, 1)
            for (index_t it = 0; it < items; ++it) {
                const index_t p = it / nseg, s = it % nseg;
                K::query_pass(w, pb, g, p, seg(pb.q_len, s), seg(pb.q_len, s + 1), st[sz(p * nseg)], St[sz(p)],
                              dst[sz(it)], qpart[sz(it)]);
            }
        }
        for (index_t p = 0; p < pb.problems; ++p) {
            auto& h = dst[sz(p * nseg)];
            for (index_t s = 1; s < nseg; ++s) h.add_scaled(dst[sz(p * nseg + s)], T(1));
            // Every query saw the one common shift of the full key state.
            h.C = st[sz(p * nseg)].C;
            h.empty = pb.q_len == 0;
        }
        if (link) {
            // Queries of the other slices see these keys too (split.hpp).
            const auto carry = exchange_states<T>(link->queries, dst, pb.problems, nseg, F, dv);
            for (index_t p = 0; p < pb.problems; ++p) combine_suffix(dst[sz(p * nseg)], carry[sz(p)]);
        }
        for (index_t p = 0; p < pb.problems; ++p)
            transpose_simd<Arch>(F, dv, dst[sz(p * nseg)].S.data(), dv, St[sz(p)].data(), F);
#pragma omp parallel
        {
            tile_worker<Map, T, Arch> w(sp);
#pragma omp for schedule(dynamic, 1)
            for (index_t it = 0; it < items; ++it) {
                const index_t p = it / nseg, s = it % nseg, nk = pb.valid_keys(p);
                const index_t a = std::min(nk, seg(pb.k_len, s)), b = std::min(nk, seg(pb.k_len, s + 1));
                K::key_pass(w, pb, g, p, a, b, st[sz(p * nseg)].C, dst[sz(p * nseg)], St[sz(p)], kpart[sz(it)], kpc,
                            saved ? &seen[sz(it)] : nullptr);
                // padded keys get zero gradients
                const index_t pa = std::max(nk, seg(pb.k_len, s)), pbnd = seg(pb.k_len, s + 1);
                for (index_t j = pa; j < pbnd; ++j) {
                    std::fill_n(g.dk + (p * pb.k_len + j) * sp.d, sp.d, T(0));
                    std::fill_n(g.dv + (p * pb.k_len + j) * dv, dv, T(0));
                }
            }
        }
        if (saved) check_saved_inputs(saved->inputs, seen);
    } else {
        // Pass 0: the key state each segment starts from (kept by the forward, or rebuilt).
        auto init = saved ? restore_states(*saved) : causal_initial_states<Map, T, Arch>(sp, pb, nseg, link);
        std::vector<T> nb_all(sz(pb.problems * pb.q_len * dv)), e_all(sz(pb.problems * pb.q_len)),
            C_all(sz(pb.problems * pb.q_len));
        const bool totals = nseg > 1 || link;
        std::vector<key_state<T>> qtot(sz(items), key_state<T>(totals ? F : 0, totals ? dv : 0));
        std::optional<typename K::tile_cache> cache;
        if (K::tile_cache::bytes(pb, sp) <= pb.backward_cache_bytes) cache.emplace(pb, sp);
        auto* cache_ptr = cache ? &*cache : nullptr;
        // Pass 1: forward direction (∂Q, n, e, C).
#pragma omp parallel
        {
            tile_worker<Map, T, Arch> wq(sp), wk(sp);
            typename K::causal_bufs b(F, dv);
#pragma omp for schedule(dynamic, 1)
            for (index_t it = 0; it < items; ++it) {
                const index_t p = it / nseg, s = it % nseg;
                const index_t off = p * pb.q_len;
                K::causal_query_pass(wq, wk, b, pb, g, p, seg(pb.q_len, s), seg(pb.q_len, s + 1), init[sz(it)],
                                     nb_all.data() + off * dv, e_all.data() + off, C_all.data() + off,
                                     totals ? &qtot[sz(it)] : nullptr, qpart[sz(it)], cache_ptr,
                                     saved ? &seen[sz(it)] : nullptr);
            }
        }
        if (saved) check_saved_inputs(saved->inputs, seen);
        // Suffix sums: segment s starts its reverse pass from the queries of segments > s
        // (and of later slices when `link`).
        std::vector<key_state<T>> D(sz(items), key_state<T>(F, dv));
        if (link) {
            std::vector<key_state<T>> own(sz(pb.problems), key_state<T>(F, dv));
            for (index_t p = 0; p < pb.problems; ++p)
                for (index_t s = 0; s < nseg; ++s) combine_suffix(own[sz(p)], qtot[sz(p * nseg + s)]);
            const auto carry = exchange_states<T>(link->queries, own, pb.problems, 1, F, dv);
            for (index_t p = 0; p < pb.problems; ++p) D[sz(p * nseg + nseg - 1)] = carry[sz(p)];
        }
        for (index_t p = 0; p < pb.problems; ++p)
            for (index_t s = nseg - 2; s >= 0; --s) {
                key_state<T> acc = qtot[sz(p * nseg + s + 1)];
                combine_suffix(acc, D[sz(p * nseg + s + 1)]);
                D[sz(p * nseg + s)] = acc;
            }
            // Pass 2: reverse (∂K, ∂V).
#pragma omp parallel
        {
            tile_worker<Map, T, Arch> wq(sp), wk(sp);
            typename K::causal_bufs b(F, dv);
#pragma omp for schedule(dynamic, 1)
            for (index_t it = 0; it < items; ++it) {
                const index_t p = it / nseg, s = it % nseg;
                const index_t off = p * pb.q_len;
                K::causal_key_pass(wq, wk, b, pb, g, p, seg(pb.q_len, s), seg(pb.q_len, s + 1), D[sz(it)],
                                   nb_all.data() + off * dv, e_all.data() + off, C_all.data() + off, kpart[sz(it)],
                                   cache_ptr);
            }
        }
    }
    // Fixed-order reduction of the parameter gradients.
    const index_t no = sp.d * sp.P;
    if (g.d_omega) std::fill_n(g.d_omega, no, T(0));
    if (g.d_bias) std::fill_n(g.d_bias, sp.m, T(0));
    for (index_t it = 0; it < items; ++it)
        for (const auto* part : {&qpart[sz(it)], &kpart[sz(it)]}) {
            if (g.d_omega)
                for (index_t i = 0; i < no; ++i) g.d_omega[i] += part->d_omega[sz(i)];
            if (g.d_bias)
                for (index_t i = 0; i < sp.m; ++i) g.d_bias[i] += part->d_bias[sz(i)];
        }
}

}  // namespace kattn::detail::simd_impl

#include "../../core/warnings_pop.hpp"
