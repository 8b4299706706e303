// kattn/backends/simd/linear_forward.hpp — tiled, fused linear-attention forward pass.
//
// Non-causal: keys are streamed tile by tile into (S, z) (projection → activation →
// Φᵀ[V, 1]); queries then stream through out = ΦS / Φz. Causal: the chunked algorithm —
// per tile, an intra-tile masked product (Φ_Q Φ_Kᵀ ⊙ mask)·V plus the inter-tile state
// from earlier tiles, then the tile's keys are added to the state. Only one tile of
// feature rows exists at a time. A single long head is split into a fixed number of
// segments whose partial states are combined in order (results independent of threads).
// fp32 running states are compensated (tile.hpp: double totals, float copies).
#pragma once

#include "../../core/warnings_push.hpp"  // GCC PR 105593: false -Wmaybe-uninitialized in AVX-512 intrinsics

#include <cstdint>
#include <limits>
#include <vector>

#include "../../core/fingerprint.hpp"
#include "../forward_state.hpp"
#include "tile.hpp"

namespace kattn::detail::simd_impl {

/// Adds the fingerprint of rows [j, j+n) of head p's k and v (forward_state::inputs).
template <class Map, class T>
void fingerprint_keys(const attention_problem<Map, T>& pb, index_t p, index_t j, index_t n, std::uint64_t* fp) {
    if (!fp || n <= 0) return;
    const index_t d = pb.spec.d;
    const auto row = std::uint64_t(p * pb.k_len + j);
    *fp += rows_fingerprint(pb.k + (p * pb.k_len + j) * d, n, d, row, 1) +
           rows_fingerprint(pb.v + (p * pb.k_len + j) * pb.dv, n, pb.dv, row, 2);
}

/// Sizes `out` for `count` key states of F × d_v (one forward call's; not yet kept).
template <class T>
void reserve_states(forward_state<T>& out, index_t count, index_t F, index_t dv) {
    out.clear();
    out.count = count;
    out.features = F;
    out.value_dim = dv;
    out.values.resize(sz(count) * sz(F * dv + F + 1));
    out.flags.resize(sz(count));
    if constexpr (key_state<T>::compensated) out.totals.resize(sz(count) * sz(F * dv + F));
}

/// Bytes reserve_states takes for `count` states of F × d_v (saturating).
template <class T>
std::size_t state_bytes(index_t count, index_t F, index_t dv) {
    const double per =
        double(F * dv + F + 1) * sizeof(T) + (key_state<T>::compensated ? double(F * dv + F) * sizeof(double) : 0.0);
    const double all = per * double(count);
    return all >= 9e18 ? std::size_t(-1) : std::size_t(all);
}

/// Writes key state i of a reserved forward_state, bit for bit.
template <class T>
void store_state(forward_state<T>& out, std::size_t i, const key_state<T>& st) {
    const index_t F = out.features, dv = out.value_dim;
    T* v = out.values.data() + i * sz(F * dv + F + 1);
    std::copy(st.S.begin(), st.S.end(), v);
    std::copy(st.z.begin(), st.z.end(), v + F * dv);
    v[F * dv + F] = st.C;
    out.flags[i] = st.empty ? 0 : 1;
    if constexpr (key_state<T>::compensated) {
        double* t = out.totals.data() + i * sz(F * dv + F);
        std::copy(st.Sd.begin(), st.Sd.end(), t);
        std::copy(st.zd.begin(), st.zd.end(), t + F * dv);
    }
}

/// Reads key state i (as store_state wrote it) into st (of the state's extents).
template <class T>
void load_state(const forward_state<T>& in, std::size_t i, key_state<T>& st) {
    const index_t F = in.features, dv = in.value_dim;
    const T* v = in.values.data() + i * sz(F * dv + F + 1);
    std::copy_n(v, F * dv, st.S.begin());
    std::copy_n(v + F * dv, F, st.z.begin());
    st.C = v[F * dv + F];
    st.empty = in.flags[i] == 0;
    if constexpr (key_state<T>::compensated) {
        const double* t = in.totals.data() + i * sz(F * dv + F);
        std::copy_n(t, F * dv, st.Sd.begin());
        std::copy_n(t + F * dv, F, st.zd.begin());
    }
}

/// Copies key states into a forward_state (S, z, C and, for fp32, the double totals).
template <class T>
void keep_states(const std::vector<key_state<T>>& st, index_t F, index_t dv, std::uint64_t fp, forward_state<T>& out) {
    reserve_states(out, index_t(st.size()), F, dv);
    for (std::size_t i = 0; i < st.size(); ++i) store_state(out, i, st[i]);
    out.inputs = fp;
    out.kept = true;
}

/// The key states a forward_state holds, bit for bit as keep_states saw them.
template <class T>
std::vector<key_state<T>> restore_states(const forward_state<T>& in) {
    std::vector<key_state<T>> st(sz(in.count), key_state<T>(in.features, in.value_dim));
    for (std::size_t i = 0; i < st.size(); ++i) load_state(in, i, st[i]);
    return st;
}

template <class Map, class T, class Arch>
struct forward_kernels {
    using worker = tile_worker<Map, T, Arch>;
    using ops = simd_ops<Arch>;

    /// Adds keys [j0, j1) of head p (all valid) to st; keeps their projections in `pc`
    /// and adds the rows' fingerprint to `fp` when given.
    static void accumulate_keys(worker& w, const attention_problem<Map, T>& pb, index_t p, index_t j0, index_t j1,
                                key_state<T>& st, const projection_cache<T>* pc = nullptr,
                                std::uint64_t* fp = nullptr) {
        const auto& sp = w.sp;
        const T* K = pb.k + p * pb.k_len * sp.d;
        const T* Vv = pb.v + p * pb.k_len * pb.dv;
        for (index_t j = j0; j < j1; j += tile_rows) {
            const index_t n = std::min(tile_rows, j1 - j);
            w.project(n, K + j * sp.d, true);
            fingerprint_keys(pb, p, j, n, fp);
            if (pc) pc->save(p, j, n, w);
            if constexpr (Map::has_stabiliser) {
                T tmax = w.shift[0];
                for (index_t r = 1; r < n; ++r) tmax = std::max(tmax, w.shift[r]);
                st.raise_to(st.empty ? tmax : std::max(st.C, tmax));
            }
            w.activate(n, w.phi.data(), true, st.C);
            st.template add<Arch>(n, w.phi.data(), Vv + j * pb.dv, nullptr, w.state_scratch);
        }
    }

    /// out_i = φ(q_i)ᵀS / guard(φ(q_i)ᵀz) for queries [i0, i1), a tile of rows at a time;
    /// `num` is scratch for the tile's numerators.
    static void emit(worker& w, const attention_problem<Map, T>& pb, index_t p, index_t i0, index_t i1,
                     const key_state<T>& st, T* out, std::vector<T>& num) {
        const auto& sp = w.sp;
        const T* Q = pb.q + p * pb.q_len * sp.d;
        T* O = out + p * pb.q_len * pb.dv;
        num.resize(sz(tile_rows * pb.dv));
        for (index_t i = i0; i < i1; i += tile_rows) {
            const index_t n = std::min(tile_rows, i1 - i);
            w.project(n, Q + i * sp.d, true);
            w.activate(n, w.phi.data());
            gemm_nn<Arch>(n, pb.dv, sp.F, w.phi.data(), sp.F, st.S.data(), pb.dv, num.data(), pb.dv, false);
            for (index_t r = 0; r < n; ++r) {
                bool cl = false;
                const T den =
                    guard_denominator<Map::is_positive>(ops::dot(sp.F, &w.phi[r * sp.F], st.z.data()), T(pb.eps), cl);
                const T inv = T(1) / den;
#pragma omp simd
                for (index_t c = 0; c < pb.dv; ++c) O[(i + r) * pb.dv + c] = num[r * pb.dv + c] * inv;
            }
        }
    }

    /// Buffers of one causal tile: key features, intra-tile scores, numerators.
    struct causal_tile {
        std::vector<T> phk, kt, A, num, tmp, ck, Ci;
        causal_tile(index_t F, index_t dv)
            : phk(sz(tile_rows * F)),
              kt(sz(tile_rows * F)),
              A(sz(tile_rows * tile_rows)),
              num(sz(tile_rows * dv)),
              tmp(sz(tile_rows * dv)),
              ck(sz(tile_rows)),
              Ci(sz(tile_rows)) {}
    };

    /// Computes the causal tile [i, i+n) of head p: key features (own shifts) into
    /// ct.phk, the running shifts ct.Ci, query features into wq.phi, and the masked,
    /// weighted intra-tile score matrix ct.A (n × nvalid). Returns nvalid.
    /// When `known_Ci` is given (backward recomputation) the running shifts are read
    /// from it instead of being derived from st; `fp` gains the valid keys' fingerprint.
    static index_t causal_scores(worker& wq, worker& wk, causal_tile& ct, const attention_problem<Map, T>& pb,
                                 index_t p, index_t i, index_t n, const key_state<T>& st, const T* known_Ci = nullptr,
                                 std::uint64_t* fp = nullptr) {
        const auto& sp = wq.sp;
        const index_t nvalid = std::clamp<index_t>(pb.valid_keys(p) - i, 0, n);
        wk.project(n, pb.k + (p * pb.k_len + i) * sp.d, true);
        fingerprint_keys(pb, p, i, nvalid, fp);
        wk.activate(nvalid, ct.phk.data());
        T Cr = st.empty ? -std::numeric_limits<T>::infinity() : st.C;
        for (index_t r = 0; r < n; ++r) {
            ct.ck[r] = wk.shift[r];
            if constexpr (Map::has_stabiliser)
                if (r < nvalid) Cr = std::max(Cr, ct.ck[r]);
            ct.Ci[r] = known_Ci ? known_Ci[r] : Map::has_stabiliser ? Cr : T(0);
        }
        wq.project(n, pb.q + (p * pb.q_len + i) * sp.d, true);
        wq.activate(n, wq.phi.data());
        if (nvalid > 0) {
            transpose_simd<Arch>(nvalid, sp.F, ct.phk.data(), sp.F, ct.kt.data(), nvalid);
            // Row r needs columns c ≤ r only (mask_row clears the rest).
            gemm_lower<Arch>(n, nvalid, sp.F, wq.phi.data(), sp.F, 1, ct.kt.data(), nvalid, ct.A.data(), nvalid, false);
            for (index_t r = 0; r < n; ++r) mask_row(&ct.A[r * nvalid], r, nvalid, ct.ck.data(), ct.Ci[r]);
        }
        return nvalid;
    }

    /// Causal mask and stabiliser weights of one row of intra-tile scores:
    /// a_c ← a_c · e^{c_c − C_r} for c ≤ r (vectorised), 0 for c > r.
    static void mask_row(T* a, index_t r, index_t nvalid, const T* ck, T Cr) {
        const index_t nr = std::min(r + 1, nvalid);
        if constexpr (Map::has_stabiliser)
            ops::transform(
                nr, a,
                [Cr](auto x, auto c) {
                    using V = decltype(x);
                    return x * math::exp(c - V(Cr));
                },
                a, ck);
        std::fill(a + nr, a + nvalid, T(0));
    }

    /// Inter-tile factor e^{C_state − C_i} for query row r.
    static T state_factor(const key_state<T>& st, const causal_tile& ct, index_t r) {
        if constexpr (Map::has_stabiliser)
            return std::exp(st.C - ct.Ci[r]);
        else
            return T(1);
    }

    /// Adds the tile's valid keys (features at own shifts in ct.phk) to st.
    static void causal_update(const attention_problem<Map, T>& pb, index_t p, index_t i, index_t nvalid, index_t F,
                              causal_tile& ct, key_state<T>& st, std::vector<T>& scratch) {
        if (nvalid == 0) return;
        if constexpr (Map::has_stabiliser) {
            const T Cn = ct.Ci[nvalid - 1];
            st.raise_to(Cn);
            for (index_t r = 0; r < nvalid; ++r) {
                const T w = std::exp(ct.ck[r] - Cn);
#pragma omp simd
                for (index_t f = 0; f < F; ++f) ct.phk[r * F + f] *= w;
            }
        }
        st.template add<Arch>(nvalid, ct.phk.data(), pb.v + (p * pb.k_len + i) * pb.dv, nullptr, scratch);
    }

    /// Causal attention for positions [i0, i1) of head p, starting from st (the keys
    /// before i0), which is advanced to include the keys of the range.
    static void causal(worker& wq, worker& wk, const attention_problem<Map, T>& pb, index_t p, index_t i0, index_t i1,
                       key_state<T>& st, T* out, std::uint64_t* fp = nullptr) {
        const auto& sp = wq.sp;
        const index_t F = sp.F, dv = pb.dv;
        causal_tile ct(F, dv);
        T* O = out + p * pb.q_len * dv;
        for (index_t i = i0; i < i1; i += tile_rows) {
            const index_t n = std::min(tile_rows, i1 - i);
            const index_t nvalid = causal_scores(wq, wk, ct, pb, p, i, n, st, nullptr, fp);
            std::fill(ct.num.begin(), ct.num.end(), T(0));
            if (nvalid > 0)
                gemm_lower_a<Arch>(n, dv, nvalid, ct.A.data(), nvalid, 1, pb.v + (p * pb.k_len + i) * dv, dv,
                                   ct.num.data(), dv, false);
            if (!st.empty) gemm_nn<Arch>(n, dv, F, wq.phi.data(), F, st.S.data(), dv, ct.tmp.data(), dv, false);
            for (index_t r = 0; r < n; ++r) {
                T den = 0;
                for (index_t c = 0; c < nvalid; ++c) den += ct.A[r * nvalid + c];
                if (!st.empty) {
                    const T f = state_factor(st, ct, r);
                    den += f * ops::dot(F, &wq.phi[r * F], st.z.data());
#pragma omp simd
                    for (index_t c = 0; c < dv; ++c) ct.num[r * dv + c] += f * ct.tmp[r * dv + c];
                }
                bool cl = false;
                den = guard_denominator<Map::is_positive>(den, T(pb.eps), cl);
                const T inv = T(1) / den;
#pragma omp simd
                for (index_t c = 0; c < dv; ++c) O[(i + r) * dv + c] = ct.num[r * dv + c] * inv;
            }
            causal_update(pb, p, i, nvalid, F, ct, st, wk.state_scratch);
        }
    }
};

/// Key states of every (head, segment): segment s of head p covers the valid keys in
/// [split(s), split(s+1)) of the split of `length`. `fp`, when given, gains the keys'
/// fingerprint.
template <class Map, class T, class Arch>
std::vector<key_state<T>> segment_key_states(const spectral<Map, T>& sp, const attention_problem<Map, T>& pb,
                                             index_t nseg, index_t length, const projection_cache<T>* pc = nullptr,
                                             std::uint64_t* fp = nullptr) {
    using K = forward_kernels<Map, T, Arch>;
    const index_t items = pb.problems * nseg;
    std::vector<key_state<T>> states(sz(items), key_state<T>(sp.F, pb.dv));
    std::vector<std::uint64_t> fps(fp ? sz(items) : 0, 0);
#pragma omp parallel
    {
        tile_worker<Map, T, Arch> w(sp);
#pragma omp for schedule(dynamic, 1)
        for (index_t it = 0; it < items; ++it) {
            const index_t p = it / nseg, s = it % nseg, nk = pb.valid_keys(p);
            const index_t a = std::min(nk, split_point(length, nseg, s)),
                          b = std::min(nk, split_point(length, nseg, s + 1));
            K::accumulate_keys(w, pb, p, a, b, states[sz(it)], pc, fp ? &fps[sz(it)] : nullptr);
        }
    }
    for (const auto h : fps) *fp += h;
    return states;
}

/// The heads' key states `own[p·stride]` sent through a split link's exchange (split.hpp);
/// returns the others' states, one per head.
template <class T>
std::vector<key_state<T>> exchange_states(const typename slice_link<T>::exchange& exchange,
                                          const std::vector<key_state<T>>& own, index_t problems, index_t stride,
                                          index_t F, index_t dv) {
    std::vector<T> oS(sz(problems * F * dv)), oz(sz(problems * F)), oC(sz(problems));
    for (index_t p = 0; p < problems; ++p) {
        const auto& st = own[sz(p * stride)];
        std::copy(st.S.begin(), st.S.end(), oS.begin() + p * F * dv);
        std::copy(st.z.begin(), st.z.end(), oz.begin() + p * F);
        oC[sz(p)] = st.empty ? empty_shift<T>() : st.C;
    }
    std::vector<T> xS(oS.size()), xz(oz.size()), xC(oC.size());
    exchange(slice_states<const T>{oS.data(), oz.data(), oC.data()}, slice_states<T>{xS.data(), xz.data(), xC.data()});
    std::vector<key_state<T>> others(sz(problems), key_state<T>(F, dv));
    for (index_t p = 0; p < problems; ++p) {
        if (xC[sz(p)] == empty_shift<T>()) continue;
        others[sz(p)].assign(xS.data() + p * F * dv, xz.data() + p * F, xC[sz(p)]);
    }
    return others;
}

/// Causal segments: segment s of every head starts from the merged key states of its
/// segments < s, after the keys of earlier slices when `link` (empty otherwise).
template <class Map, class T, class Arch>
std::vector<key_state<T>> causal_initial_states(const spectral<Map, T>& sp, const attention_problem<Map, T>& pb,
                                                index_t nseg, const slice_link<T>* link) {
    std::vector<key_state<T>> init(sz(pb.problems * nseg), key_state<T>(sp.F, pb.dv));
    if (nseg == 1 && !link) return init;
    const auto totals = segment_key_states<Map, T, Arch>(sp, pb, nseg, pb.k_len);
    if (link) {
        std::vector<key_state<T>> own(sz(pb.problems), key_state<T>(sp.F, pb.dv));
        for (index_t p = 0; p < pb.problems; ++p)
            for (index_t s = 0; s < nseg; ++s) own[sz(p)].merge(totals[sz(p * nseg + s)]);
        const auto carry = exchange_states<T>(link->keys, own, pb.problems, 1, sp.F, pb.dv);
        for (index_t p = 0; p < pb.problems; ++p) init[sz(p * nseg)] = carry[sz(p)];
    }
    for (index_t p = 0; p < pb.problems; ++p)
        for (index_t s = 1; s < nseg; ++s) {
            init[sz(p * nseg + s)] = init[sz(p * nseg + s - 1)];
            init[sz(p * nseg + s)].merge(totals[sz(p * nseg + s - 1)]);
        }
    return init;
}

/// Non-causal: the key state of every head (at states[p·nseg]), all segments merged,
/// after the keys of the other slices when `link`; the keys' projections go to `pc`
/// when given.
template <class Map, class T, class Arch>
std::vector<key_state<T>> full_key_states(const spectral<Map, T>& sp, const attention_problem<Map, T>& pb, index_t nseg,
                                          const slice_link<T>* link, const projection_cache<T>* pc = nullptr,
                                          std::uint64_t* fp = nullptr) {
    auto states = segment_key_states<Map, T, Arch>(sp, pb, nseg, pb.k_len, pc, fp);
    for (index_t p = 0; p < pb.problems; ++p)
        for (index_t s = 1; s < nseg; ++s) states[sz(p * nseg)].merge(states[sz(p * nseg + s)]);
    if (link) {
        const auto carry = exchange_states<T>(link->keys, states, pb.problems, nseg, sp.F, pb.dv);
        for (index_t p = 0; p < pb.problems; ++p) {
            key_state<T> all = carry[sz(p)];
            all.merge(states[sz(p * nseg)]);
            states[sz(p * nseg)] = std::move(all);
        }
    }
    return states;
}

/// φ of pb.n rows (the exact map), one tile per task.
template <class Map, class T, class Arch>
void features(const feature_problem<Map, T>& pb) {
    const auto sp = spectral<Map, T>::make(pb.spec, pb.input_scale, false);
    const index_t tiles = (pb.n + tile_rows - 1) / tile_rows;
#pragma omp parallel
    {
        tile_worker<Map, T, Arch> w(sp);
#pragma omp for schedule(dynamic, 1)
        for (index_t t = 0; t < tiles; ++t) {
            const index_t r0 = t * tile_rows, n = std::min(tile_rows, pb.n - r0);
            w.project(n, pb.x + r0 * sp.d, false);
            w.activate(n, pb.phi + r0 * sp.F);
        }
    }
}

/// The forward pass. With `keep`, also fills it for linear_backward: the key state of
/// every head (non-causal) or the state every segment starts from (causal), and the
/// fingerprint of the keys and values they came from.
template <class Map, class T, class Arch>
void linear_forward(const attention_problem<Map, T>& pb, T* out, const slice_link<T>* link = nullptr,
                    forward_state<T>* keep = nullptr) {
    using K = forward_kernels<Map, T, Arch>;
    const auto sp = spectral<Map, T>::make(pb.spec, pb.input_scale, false);
    const index_t nseg = segments_for(pb.problems, std::max(pb.q_len, pb.k_len));
    const index_t items = pb.problems * nseg;
    std::uint64_t fp = 0;
    if (!pb.causal) {
        const auto states = full_key_states<Map, T, Arch>(sp, pb, nseg, link, nullptr, keep ? &fp : nullptr);
        if (keep) keep_states(states, sp.F, pb.dv, fp, *keep);
#pragma omp parallel
        {
            tile_worker<Map, T, Arch> w(sp);
            std::vector<T> num;
#pragma omp for schedule(dynamic, 1)
            for (index_t it = 0; it < items; ++it) {
                const index_t p = it / nseg, s = it % nseg;
                K::emit(w, pb, p, split_point(pb.q_len, nseg, s), split_point(pb.q_len, nseg, s + 1),
                        states[sz(p * nseg)], out, num);
            }
        }
        return;
    }
    auto init = causal_initial_states<Map, T, Arch>(sp, pb, nseg, link);
    if (keep) keep_states(init, sp.F, pb.dv, 0, *keep);
    std::vector<std::uint64_t> fps(keep ? sz(items) : 0, 0);
#pragma omp parallel
    {
        tile_worker<Map, T, Arch> wq(sp), wk(sp);
#pragma omp for schedule(dynamic, 1)
        for (index_t it = 0; it < items; ++it) {
            const index_t p = it / nseg, s = it % nseg;
            K::causal(wq, wk, pb, p, split_point(pb.q_len, nseg, s), split_point(pb.q_len, nseg, s + 1), init[sz(it)],
                      out, keep ? &fps[sz(it)] : nullptr);
        }
    }
    if (keep)
        for (const auto h : fps) keep->inputs += h;
}

}  // namespace kattn::detail::simd_impl

#include "../../core/warnings_pop.hpp"
