// kattn/backends/thrust/forward.hpp — forward stages of the Thrust backend: shifts, chunk states, outputs.
//
// Causal attention runs in chunks of 64 tokens: chunk-local states at the chunk's running
// maximum E_b, an in-order scan over chunks, and the intra-chunk part from masked score rows.
#pragma once

#include "common.hpp"
#include "features.hpp"

namespace kattn::detail::thrust_impl {

/// Per head: R[j] = max(c_0 … c_j) over the key shifts (padding has −∞), and per key
/// block the block's reference E_b = R[min(block end, nk) − 1].
template <class W>
struct key_running_max {
    geometry g;
    const W* ck;  ///< H·Lk key shifts
    W* R;         ///< H·Lk
    W* E;         ///< H·nb
    KATTN_HD void operator()(index_t h) const {
        W run = neg_inf<W>();
        for (index_t j = 0; j < g.Lk; ++j) {
            const W c = ck[h * g.Lk + j];
            run = c > run ? c : run;
            R[h * g.Lk + j] = run;
        }
        for (index_t b = 0; b < g.nb; ++b) {
            const index_t end = (b + 1) * g.block < g.Lk ? (b + 1) * g.block : g.Lk;
            E[h * g.nb + b] = R[h * g.Lk + (end - 1)];
        }
    }
};

/// Query reference C_i (causal: running max through key min(i, nk−1); else all valid
/// keys) and key weights kw_j = e^{c_j − E_{block(j)}} (0 for padding).
template <class Map, class W>
struct shift_refs {
    geometry g;
    const W* ck;
    const W* R;
    const W* E;
    W* Cq;  ///< H·Lq
    W* kw;  ///< H·Lk
    KATTN_HD void operator()(index_t r) const {
        if (r < g.q_rows()) {
            const index_t h = r / g.Lq, i = r % g.Lq, last = g.nk[h] - 1;
            Cq[r] = R[h * g.Lk + (g.causal && i < last ? i : last)];
        } else {
            const index_t kr = r - g.q_rows(), h = kr / g.Lk, j = kr % g.Lk;
            kw[kr] = j < g.nk[h] ? rescale<Map>(ck[kr], E[h * g.nb + j / g.block]) : W(0);
        }
    }
};

/// Value entry v1_j[c] of the augmented [V, 1] (c = dv is the column of ones).
template <class W, class T>
KATTN_HD inline W v1(const T* v, index_t dv, index_t row, index_t c) {
    return c < dv ? W(v[row * dv + c]) : W(1);
}

/// Block states A[h, b, f, c] = Σ_{j ∈ block b, j < nk} kw_j φ̃_j[f] v1_j[c] (in token order).
template <class W, class T>
struct key_block_state {
    geometry g;
    index_t F;
    const W* phk;  ///< H·Lk × F
    const W* kw;
    const T* v;
    W* A;  ///< H·nb × F × dv1
    KATTN_HD void operator()(index_t idx) const {
        const index_t c = idx % g.dv1, f = (idx / g.dv1) % F, hb = idx / (g.dv1 * F);
        const index_t h = hb / g.nb, b = hb % g.nb, nk = g.nk[h];
        const index_t j0 = b * g.block, j1e = (b + 1) * g.block < g.Lk ? (b + 1) * g.block : g.Lk;
        const index_t j1 = j1e < nk ? j1e : nk;
        W acc = W(0);
        for (index_t j = j0; j < j1; ++j) {
            const index_t row = h * g.Lk + j;
            const W a = kw[row] * phk[row * F + f];
            acc += a * v1<W>(v, g.dv, row, c);
        }
        A[idx] = acc;
    }
};

/// Causal prefix over blocks, in place: P_b = e^{E_{b−1} − E_b} P_{b−1} + A_b.
template <class Map, class W>
struct block_prefix {
    geometry g;
    index_t F;
    const W* E;
    W* A;
    KATTN_HD void operator()(index_t idx) const {  // idx over H × F × dv1
        const index_t fc = idx % (F * g.dv1), h = idx / (F * g.dv1);
        W run = W(0);
        for (index_t b = 0; b < g.nb; ++b) {
            W* a = A + (h * g.nb + b) * F * g.dv1 + fc;
            if (b > 0) run *= rescale<Map>(E[h * g.nb + b - 1], E[h * g.nb + b]);
            run += *a;
            *a = run;
        }
    }
};

/// Causal intra-chunk rows: for query i and slot t (key j = chunk(i)·64 + t, j ≤ i, j < nk):
/// Wt = e^{c_j − C_i}, K = Wt·⟨φ_q,i, φ̃_j⟩; and, with ñ given, M = Wt·⟨v1_j, ñ_i⟩.
template <class Map, class W, class T>
struct intra_scores {
    geometry g;
    index_t F;
    const W* phq;
    const W* phk;
    const W* ck;
    const W* Cq;
    const T* v;
    const W* nt;  ///< H·Lq × dv1 or nullptr (forward)
    W* K;         ///< H·Lq × chunk
    W* M;         ///< H·Lq × chunk or nullptr
    KATTN_HD void operator()(index_t idx) const {
        const index_t t = idx % chunk, r = idx / chunk, h = r / g.Lq, i = r % g.Lq;
        const index_t j = (i / chunk) * chunk + t;
        if (j > i || j >= g.nk[h]) {
            K[idx] = W(0);
            if (M) M[idx] = W(0);
            return;
        }
        const index_t kr = h * g.Lk + j;
        const W w = rescale<Map>(ck[kr], Cq[r]);
        if (!nt) {
            W dot = W(0);
            for (index_t f = 0; f < F; ++f) dot += phq[r * F + f] * phk[kr * F + f];
            K[idx] = w * dot;
        } else {
            W dot = W(0);
            for (index_t c = 0; c < g.dv1; ++c) dot += v1<W>(v, g.dv, kr, c) * nt[r * g.dv1 + c];
            M[idx] = w * dot;
        }
    }
};

/// Column c of the state query r sees, contracted with a row vector y over F:
/// Σ_f y[f] S_i[f, c]  (S_i = e^{E_{b−1} − C_i} P_{b−1} + intra part when causal).
template <class Map, class W, class T>
KATTN_HD inline W state_apply(const geometry& g, index_t F, const W* y, const W* S, const W* E, const W* Cq, const W* K,
                              const T* v, index_t r, index_t c) {
    const index_t h = r / g.Lq, i = r % g.Lq;
    W acc = W(0);
    if (!g.causal) {
        const W* s = S + h * F * g.dv1;
        for (index_t f = 0; f < F; ++f) acc += y[f] * s[f * g.dv1 + c];
        return acc;
    }
    const index_t b = i / chunk;
    if (b > 0) {
        const W* s = S + (h * g.nb + b - 1) * F * g.dv1;
        for (index_t f = 0; f < F; ++f) acc += y[f] * s[f * g.dv1 + c];
        acc *= rescale<Map>(E[h * g.nb + b - 1], Cq[r]);
    }
    const index_t j0 = b * chunk;
    for (index_t t = 0; t < chunk && j0 + t <= i && j0 + t < g.Lk; ++t)
        acc += K[r * chunk + t] * v1<W>(v, g.dv, h * g.Lk + j0 + t, c);
    return acc;
}

/// out_i = φ_q,i S_i / guard(φ_q,i z_i), per query row; keeps den and the clamped flag.
template <class Map, class W, class T>
struct emit_rows {
    geometry g;
    index_t F;
    W eps;
    const W* phq;
    const W* S;
    const W* E;
    const W* Cq;
    const W* K;
    const T* v;
    W* out;  ///< H·Lq × dv
    W* den;
    int* clamped;
    KATTN_HD void operator()(index_t r) const {
        const W* y = phq + r * F;
        bool cl = false;
        const W dn = guard_denominator<Map::is_positive>(state_apply<Map>(g, F, y, S, E, Cq, K, v, r, g.dv), eps, cl);
        for (index_t c = 0; c < g.dv; ++c) out[r * g.dv + c] = state_apply<Map>(g, F, y, S, E, Cq, K, v, r, c) / dn;
        if (den) den[r] = dn;
        if (clamped) clamped[r] = cl ? 1 : 0;
    }
};

/// Everything the forward pass leaves on the device (the backward pass reuses it).
template <class Map, class W, class T>
struct forward_state {
    device_spectral<Map, W> spec;
    geometry g;
    W scale;
    ::thrust::device_vector<T> q, k, v;
    ::thrust::device_vector<index_t> nk;
    ::thrust::device_vector<W> ws, phi, shift, R, E, Cq, kw, S, K, out, den;
    ::thrust::device_vector<int> clamped;

    template <class Policy>
    void run(const attention_problem<Map, T>& pb) {
        const index_t H = pb.problems, F = spec.view.F, d = spec.view.d, P = spec.view.P;
        std::vector<index_t> lens(static_cast<std::size_t>(H));
        for (index_t h = 0; h < H; ++h) lens[std::size_t(h)] = pb.valid_keys(h);
        nk = ::thrust::device_vector<index_t>(lens.begin(), lens.end());
        q = upload(pb.q, H * pb.q_len * d);
        k = upload(pb.k, H * pb.k_len * d);
        v = upload(pb.v, H * pb.k_len * pb.dv);
        scale = W(pb.input_scale);

        g.H = H;
        g.Lq = pb.q_len;
        g.Lk = pb.k_len;
        g.dv = pb.dv;
        g.dv1 = pb.dv + 1;
        g.causal = pb.causal;
        g.block = pb.causal ? chunk : pb.k_len;
        g.nb = pb.causal ? (pb.k_len + chunk - 1) / chunk : 1;
        g.nk = raw(nk);
        const index_t rows = g.rows(), qr = g.q_rows();
        auto sz = [](index_t n) { return static_cast<std::size_t>(n); };

        ws.resize(sz(rows * (d + P)));
        phi.resize(sz(rows * F));
        shift.resize(sz(rows));
        launch<Policy>(rows, feature_rows<Map, W, T>{spec.view, raw(q), raw(k), qr, g.Lk, raw(nk), scale, true, raw(ws),
                                                     raw(phi), raw(shift)});
        const W* ck = raw(shift) + qr;
        R.resize(sz(H * g.Lk));
        E.resize(sz(H * g.nb));
        launch<Policy>(H, key_running_max<W>{g, ck, raw(R), raw(E)});
        Cq.resize(sz(qr));
        kw.resize(sz(H * g.Lk));
        launch<Policy>(rows, shift_refs<Map, W>{g, ck, raw(R), raw(E), raw(Cq), raw(kw)});

        const W* phq = raw(phi);
        const W* phk = raw(phi) + qr * F;
        S.resize(sz(H * g.nb * F * g.dv1));
        launch<Policy>(H * g.nb * F * g.dv1, key_block_state<W, T>{g, F, phk, raw(kw), raw(v), raw(S)});
        if (g.causal) {
            launch<Policy>(H * F * g.dv1, block_prefix<Map, W>{g, F, raw(E), raw(S)});
            K.resize(sz(qr * chunk));
            launch<Policy>(qr * chunk,
                           intra_scores<Map, W, T>{g, F, phq, phk, ck, raw(Cq), raw(v), nullptr, raw(K), nullptr});
        }
        out.resize(sz(qr * g.dv));
        den.resize(sz(qr));
        clamped.resize(sz(qr));
        launch<Policy>(qr, emit_rows<Map, W, T>{g, F, W(pb.eps), phq, raw(S), raw(E), raw(Cq),
                                                g.causal ? raw(K) : nullptr, raw(v), raw(out), raw(den), raw(clamped)});
    }

    template <class Policy>
    explicit forward_state(const attention_problem<Map, T>& pb, Policy) : spec(pb.spec) {
        run<Policy>(pb);
    }
};

}  // namespace kattn::detail::thrust_impl
