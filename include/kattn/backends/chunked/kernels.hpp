// kattn/backends/chunked/kernels.hpp — the per-element functors of the chunked algorithm.
//
// Every functor writes only the outputs of its own index and sums in a fixed order, so a
// system may run the indices in any order and concurrency (system.hpp). The row functors
// (one index per row) take the system's row-ops policy Ops and split a row's elements
// over its lanes (c = Ops::lane(), +Ops::lanes): one thread per row with scalar_ops, a
// warp per row with warp_ops (launch_rows), whose accesses then coalesce. Internal buffers
// are head-major: problem p = b·heads + h owns rows [p·Lp, (p+1)·Lp) of every row buffer,
// with lengths padded to whole chunks when causal (padding rows are written as zeros,
// key shifts as −∞). The algorithm that calls them: chunked/forward.hpp.
#pragma once

#include <cmath>

#include "../../core/config.hpp"
#include "../../core/math.hpp"
#include "../../features/feature_map.hpp"
#include "../../linalg/row_ops.hpp"
#include "../problem.hpp"
#include "../shift_rescale.hpp"
#include "../strided_view.hpp"

namespace kattn::detail::chunked_impl {

/// Tokens per causal chunk, and per block of the running-maximum scan.
inline constexpr index_t chunk = 64;

/// Rows whose scaled inputs X and projections U = X·Ω exist at once: φ is built, and the
/// maps' VJPs run, in row blocks of this size, so X and U never span a whole sequence
/// (each block's projection is still one large product).
inline constexpr index_t row_block = index_t(1) << 16;

/// Columns of the augmented value rows [v, 1, 0, …]: dv + 1 rounded up to a multiple of 4,
/// so that every row and every batch of them starts 16 bytes apart (float), which cuBLAS's
/// vectorised kernels need; the padding columns are zero and take part in no result.
KATTN_HD inline index_t value_columns(index_t dv) { return (dv + 1 + 3) / 4 * 4; }

/// Extents of one call. Lqp, Lkp: lengths padded to whole chunks when causal or packed.
/// Packed documents: every document starts a new chunk, so chunks never cross documents;
/// the chunk tables (system memory, nb entries shared by every head) say where each chunk's
/// rows come from.
struct geometry {
    index_t heads = 1, problems = 0, Lq = 0, Lk = 0, Lqp = 0, Lkp = 0;
    index_t d = 0, m = 0, P = 0, F = 0, dv = 0;
    index_t dv1 = 0;  ///< value_columns(dv): [v, 1] and zero padding
    index_t nb = 1;   ///< key blocks per head: Lkp / chunk when causal or packed, else 1
    index_t nm = 1;   ///< blocks of the running-maximum scan: ⌈Lkp / chunk⌉
    bool causal = false;
    const index_t* key_lengths = nullptr;  ///< per batch entry (system memory), or nullptr
    const index_t* chunk_token = nullptr;  ///< packed: first token of chunk c, or nullptr
    const index_t* chunk_len = nullptr;    ///< packed: tokens in chunk c (1 … 64)
    const index_t* doc_first = nullptr;    ///< packed: first chunk of chunk c's document
    const index_t* doc_last = nullptr;     ///< packed: last chunk of chunk c's document

    KATTN_HD bool packed() const { return chunk_token != nullptr; }
    KATTN_HD index_t keys(index_t p) const { return key_lengths ? key_lengths[p / heads] : Lk; }
    KATTN_HD index_t block() const { return causal || packed() ? chunk : Lkp; }
    /// The token that padded row l of a problem holds (len: the unpadded length), or −1.
    KATTN_HD index_t token(index_t l, index_t len) const {
        if (!packed()) return l < len ? l : -1;
        const index_t c = l / chunk, t = l % chunk;
        return t < chunk_len[c] ? chunk_token[c] + t : -1;
    }
    /// Whether padded key row j of problem p is a key that exists.
    KATTN_HD bool key_valid(index_t p, index_t j) const {
        const index_t tok = token(j, Lk);
        return tok >= 0 && tok < keys(p);
    }
    /// Whether block b starts a sequence (a document, or the whole sequence).
    KATTN_HD bool starts_sequence(index_t b) const { return packed() ? doc_first[b] == b : b == 0; }
};

/// Map parameters in the working precision, in system memory.
template <class Map, class W>
struct spectral {
    const W* omega = nullptr;  ///< d × P
    const W* bias = nullptr;   ///< m, or nullptr
    map_params_t<Map> params{};
    /// Ω = I (detail::omega_is_identity): u = x, and no product with Ω or Ωᵀ is made.
    bool identity = false;
};

/// X[i] = scale · x(b, h, token) for row r = first + i = p·Lp + l (zeros for padding
/// rows): X holds the rows of one row block.
template <class T, class W, class Ops = scalar_ops>
struct gather_rows {
    geometry g;
    backends::strided_view<const T> x;
    index_t Lp;
    W scale;
    W* X;
    index_t first = 0;
    KATTN_HD void operator()(index_t i) const { load(i, X + i * x.dim); }
    /// Row first + i into dst (x.dim elements).
    KATTN_HD void load(index_t i, W* dst) const {
        const index_t r = first + i, p = r / Lp, d = x.dim, tok = g.token(r % Lp, x.len);
        if (tok < 0) {
            for (index_t c = Ops::lane(); c < d; c += Ops::lanes) dst[c] = W(0);
            return;
        }
        const T* src = x.row(p / g.heads, p % g.heads, tok);
        for (index_t c = Ops::lane(); c < d; c += Ops::lanes) dst[c] = scale * static_cast<W>(src[c]);
    }
};

/// φ of row r = first + i from its scaled input X[i] and projection U[i] = X[i]·Ω (X and
/// U: one row block), with the row's own stabiliser shift when `stabilise`. Rows l ≥ L
/// (and, for keys, l ≥ the valid keys) are zero, with shift −∞ for keys.
template <class Map, class W, class Ops = scalar_ops>
struct activate_rows {
    spectral<Map, W> s;
    geometry g;
    index_t Lp, L;
    bool keys, stabilise;
    const W* X;
    const W* U;
    W* phi;
    W* shift;  ///< or nullptr
    index_t first = 0;
    KATTN_HD void operator()(index_t i) const { apply(i, X + i * g.d, U + i * g.P); }
    /// φ of row first + i from its scaled input x and projection u (wherever they are held).
    KATTN_HD void apply(index_t i, const W* x, const W* u) const {
        const index_t r = first + i, p = r / Lp, l = r % Lp, tok = g.token(l, L);
        W* ph = phi + r * g.F;
        if (tok < 0 || (keys && tok >= g.keys(p))) {
            for (index_t f = Ops::lane(); f < g.F; f += Ops::lanes) ph[f] = W(0);
            if (shift && Ops::lane() == 0) shift[r] = keys ? neg_inf<W>() : W(0);
            return;
        }
        W c = W(0);
        if constexpr (Map::has_stabiliser)
            if (stabilise) {  // row_shift then activate, the row's reductions made once
                c = activate_own_shift<Map, Ops>(s.params, g.d, g.m, x, u, s.bias, ph);
                if (shift && Ops::lane() == 0) shift[r] = c;
                return;
            }
        Map::template activate<Ops>(s.params, g.d, g.m, x, u, s.bias, c, ph);
        if (shift && Ops::lane() == 0) shift[r] = c;
    }
};

/// Ω = I: φ of row first + i with u = x (no projection): the row is gathered into X[i] and
/// activated from there by the same thread or warp.
template <class T, class Map, class W, class Ops = scalar_ops>
struct gather_activate_rows {
    gather_rows<T, W, Ops> gather;
    activate_rows<Map, W, Ops> act;
    W* X;  ///< block rows × d
    KATTN_HD void operator()(index_t i) const {
        W* x = X + i * gather.x.dim;
        gather.load(i, x);
        Ops::sync();
        act.apply(i, x, x);
    }
};

/// Running maximum of the key shifts, step 1: within each scan block, R[j] = max of the
/// block's shifts through j; M[block] = the block's maximum.
template <class W>
struct block_max {
    geometry g;
    const W* ck;
    W* R;
    W* M;
    KATTN_HD void operator()(index_t idx) const {
        const index_t p = idx / g.nm, c = idx % g.nm;
        const index_t j0 = c * chunk, j1 = (c + 1) * chunk < g.Lkp ? (c + 1) * chunk : g.Lkp;
        W run = neg_inf<W>();
        for (index_t j = j0; j < j1; ++j) {
            const W v = ck[p * g.Lkp + j];
            run = v > run ? v : run;
            R[p * g.Lkp + j] = run;
        }
        M[idx] = run;
    }
};

/// Step 2, per problem: M[c] becomes the maximum over the blocks before c (exclusive)
/// within c's sequence (packed: its document).
template <class W>
struct block_max_prefix {
    geometry g;
    W* M;
    KATTN_HD void operator()(index_t p) const {
        W run = neg_inf<W>();
        for (index_t c = 0; c < g.nm; ++c) {
            if (g.packed() && g.starts_sequence(c)) run = neg_inf<W>();
            const W v = M[p * g.nm + c];
            M[p * g.nm + c] = run;
            run = v > run ? v : run;
        }
    }
};

/// Step 3: R[j] = max(R[j], M[block(j)]): the running maximum through key j. Maxima are
/// exact, so the three steps give the sequential scan's values.
template <class W>
struct finish_max {
    geometry g;
    const W* M;
    W* R;
    KATTN_HD void operator()(index_t idx) const {
        const index_t p = idx / g.Lkp, j = idx % g.Lkp;
        const W a = M[p * g.nm + j / chunk], b = R[idx];
        R[idx] = a > b ? a : b;
    }
};

/// References: E[p, b] = the running maximum at the end of key block b (padding included:
/// its shifts are −∞); Cq[p, i] = the running maximum through key min(i, nk − 1) when
/// causal, through the last valid key otherwise (packed: of i's document).
template <class W>
struct references {
    geometry g;
    const W* R;
    W* E;   ///< problems × nb
    W* Cq;  ///< problems × Lqp
    KATTN_HD void operator()(index_t idx) const {
        const index_t ne = g.problems * g.nb;
        if (idx < ne) {
            const index_t p = idx / g.nb, b = idx % g.nb;
            const index_t end = (b + 1) * g.block() < g.Lkp ? (b + 1) * g.block() : g.Lkp;
            E[idx] = R[p * g.Lkp + end - 1];
            return;
        }
        const index_t r = idx - ne, p = r / g.Lqp, i = r % g.Lqp;
        if (g.token(i, g.Lq) < 0) {
            Cq[r] = W(0);
        } else if (g.packed()) {  // no key lengths; q and k rows coincide
            Cq[r] = g.causal ? R[p * g.Lkp + i] : R[p * g.Lkp + (g.doc_last[i / chunk] + 1) * chunk - 1];
        } else {
            const index_t last = g.keys(p) - 1;
            Cq[r] = R[p * g.Lkp + (g.causal && i < last ? i : last)];
        }
    }
};

/// The augmented values [v_j, 1] of key row r: V1w = kw_j·[v_j, 1] with
/// kw_j = e^{c_j − E_{block(j)}} (the block state's weights) and, when V1 is not null,
/// the unweighted V1 = [v_j, 1] (the intra-chunk product's); zeros for padding.
template <class Map, class T, class W, class Ops = scalar_ops>
struct value_rows {
    geometry g;
    backends::strided_view<const T> v;
    const W* ck;
    const W* E;
    W* V1w;
    W* V1;  ///< or nullptr
    KATTN_HD void operator()(index_t r) const {
        const index_t p = r / g.Lkp, j = r % g.Lkp;
        const bool valid = g.key_valid(p, j);
        const W kw = valid ? rescale<Map>(ck[r], E[p * g.nb + j / g.block()]) : W(0);
        const T* src = valid ? v.row(p / g.heads, p % g.heads, g.token(j, g.Lk)) : nullptr;
        for (index_t c = Ops::lane(); c < g.dv1; c += Ops::lanes) {
            const W val = !valid ? W(0) : c < g.dv ? static_cast<W>(src[c]) : c == g.dv ? W(1) : W(0);
            V1w[r * g.dv1 + c] = kw * val;
            if (V1) V1[r * g.dv1 + c] = val;
        }
    }
};

/// Intra-chunk scores K[i, t] = ⟨φ_q,i, φ_k,j⟩ (j = chunk(i)·64 + t, from the product)
/// masked to j ≤ i, j < nk, and weighted by e^{c_j − C_i}.
template <class Map, class W>
struct mask_scores {
    geometry g;
    const W* ck;
    const W* Cq;
    W* K;  ///< problems·Lqp × chunk
    KATTN_HD void operator()(index_t idx) const { K[idx] = apply(idx, K[idx]); }
    /// The masked, weighted score idx = r·64 + t from its product value s (wherever the
    /// scores are held).
    KATTN_HD W apply(index_t idx, W s) const {
        const index_t t = idx % chunk, r = idx / chunk, p = r / g.Lqp, i = r % g.Lqp;
        const index_t j = (i / chunk) * chunk + t;
        if (j > i || g.token(i, g.Lq) < 0 || !g.key_valid(p, j)) return W(0);
        return s * rescale<Map>(ck[p * g.Lkp + j], Cq[r]);
    }
};

/// The factor of query row r's inter-chunk part: e^{E_{b−1} − C_i} when causal (0 in the
/// first chunk, whose O is zero), e^{E − C_i} (= 1) otherwise.
template <class Map, class W>
KATTN_HD inline W inter_factor(const geometry& g, const W* E, const W* Cq, index_t p, index_t i, index_t r) {
    if (!g.causal) return g.packed() ? W(1) : rescale<Map>(E[p], Cq[r]);  // packed: S at the document's E = C_i
    const index_t b = i / chunk;
    return g.starts_sequence(b) ? W(0) : rescale<Map>(E[p * g.nb + b - 1], Cq[r]);
}

/// Column c of a query row's numerator from its rows o and oa: f·o (+ oa when causal).
template <class W>
KATTN_HD inline W numerator(const W* o, const W* oa, W f, index_t c) {
    const W inter = f == W(0) ? W(0) : f * o[c];
    return oa ? inter + oa[c] : inter;
}

/// Column c of query row r's numerator: f·O (+ Oa when causal).
template <class W>
KATTN_HD inline W numerator(const geometry& g, const W* O, const W* Oa, index_t r, W f, index_t c) {
    return numerator(O + r * g.dv1, Oa ? Oa + r * g.dv1 : nullptr, f, c);
}

/// out_i = n_i[0, dv) / guard(n_i[dv]) with n_i = e^{E − C_i}·O_i (+ Oa_i when causal:
/// O is then the inter-chunk part at reference E_{b−1}, and zero in the first chunk).
template <class Map, class T, class W, class Ops = scalar_ops>
struct emit_rows {
    geometry g;
    W eps;
    const W* O;
    const W* Oa;  ///< causal only
    const W* E;
    const W* Cq;
    backends::strided_view<T> out;
    KATTN_HD void operator()(index_t r) const {  // r: padded query row
        apply(r, O + r * g.dv1, Oa ? Oa + r * g.dv1 : nullptr);
    }
    /// Query row r's output from its numerator rows o (and oa when causal), wherever they
    /// are held (O and Oa are not read).
    KATTN_HD void apply(index_t r, const W* o, const W* oa) const {
        const index_t p = r / g.Lqp, i = r % g.Lqp, tok = g.token(i, g.Lq);
        if (tok < 0) return;
        const W f = inter_factor<Map>(g, E, Cq, p, i, r);
        bool clamped = false;
        const W den = guard_denominator<Map::is_positive>(numerator(o, oa, f, g.dv), eps, clamped);
        T* dst = out.row(p / g.heads, p % g.heads, tok);
        for (index_t c = Ops::lane(); c < g.dv; c += Ops::lanes) dst[c] = static_cast<T>(numerator(o, oa, f, c) / den);
    }
};

/// The output stage of a forward pass as tiles of 64 query rows, for a system that runs it
/// in one pass (launch_chunk_outputs): tile t holds padded query rows [64t, 64t + 64) of
/// every problem in turn (Lqp is a multiple of 64). Per tile, with ⟂ the mask:
///   O  = Φ_Q,t·state(t)                      (64 × dv1; state: F × dv1)
///   Oa = mask(Φ_Q,t·Φ_K,tᵀ)·V1_t             (causal only: phk and V1 set)
///   out rows = emit.apply(r, O_r, Oa_r)
/// state(t) is the head's one state (non-causal, one block per head) or block t's state
/// (causal: the exclusive prefix X_b; packed: the document's state).
template <class W>
struct output_tiles {
    static constexpr index_t rows = chunk;  ///< query rows per tile
    index_t count = 0;                      ///< tiles: problems · Lqp / 64
    index_t per_problem = 0;                ///< Lqp / 64
    index_t F = 0, dv1 = 0;
    const W* phq = nullptr;  ///< problems·Lqp × F
    const W* A = nullptr;    ///< the states, F × dv1 each
    bool shared_state = false;
    const W* phk = nullptr;  ///< causal: problems·Lkp × F (Lkp = Lqp); else nullptr
    const W* V1 = nullptr;   ///< causal: the unweighted [v, 1] rows, problems·Lkp × dv1
    KATTN_HD bool intra() const { return phk != nullptr; }
    KATTN_HD const W* state(index_t t) const { return A + (shared_state ? t / per_problem : t) * F * dv1; }
};

}  // namespace kattn::detail::chunked_impl

namespace kattn::detail::chunked_impl {

/// Packed, non-causal: every block of a document gets the document's state, in place, per
/// (p, f, c): S_doc = Σ_{b in doc} e^{E_b − E_last} A_b at the document's reference E_last.
template <class Map, class W>
struct document_states {
    geometry g;
    const W* E;
    W* A;
    KATTN_HD void operator()(index_t idx) const {
        const index_t n = g.F * g.dv1, p = idx / n, fc = idx % n;
        for (index_t b0 = 0; b0 < g.nb; b0 = g.doc_last[b0] + 1) {
            const index_t b1 = g.doc_last[b0];
            W run = W(0);
            for (index_t b = b0; b <= b1; ++b)
                run = (b == b0 ? W(0) : rescale<Map>(E[p * g.nb + b - 1], E[p * g.nb + b]) * run) +
                      A[(p * g.nb + b) * n + fc];
            for (index_t b = b0; b <= b1; ++b) A[(p * g.nb + b) * n + fc] = run;
        }
    }
};

}  // namespace kattn::detail::chunked_impl
