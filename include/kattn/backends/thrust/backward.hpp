// kattn/backends/thrust/backward.hpp — backward stages of the Thrust backend: cotangents, suffix scan, map VJPs.
#pragma once

#include "common.hpp"
#include "forward.hpp"

namespace kattn::detail::thrust_impl {

/// ñ_i = [G_i / den_i, e_i], e_i = −⟨G_i, out_i⟩ / den_i (0 where the guard clamped).
template <class W, class T>
struct output_cotangent {
    geometry g;
    const T* G;
    const W* out;
    const W* den;
    const int* clamped;
    W* nt;  ///< H·Lq × dv1
    KATTN_HD void operator()(index_t r) const {
        W ge = W(0);
        for (index_t c = 0; c < g.dv; ++c) {
            const W gi = W(G[r * g.dv + c]);
            nt[r * g.dv1 + c] = gi / den[r];
            ge += gi * out[r * g.dv + c];
        }
        nt[r * g.dv1 + g.dv] = clamped[r] ? W(0) : -ge / den[r];
    }
};

/// dφ_q,i[f] = Σ_c S_i[f, c] ñ_i[c]  (causal: e^{E_{b−1} − C_i} P_{b−1} ñ_i + Σ_t M[i, t] φ̃_{j(t)}).
template <class Map, class W>
struct query_feature_grad {
    geometry g;
    index_t F;
    const W* S;
    const W* E;
    const W* Cq;
    const W* M;
    const W* phk;
    const W* nt;
    W* dphq;
    KATTN_HD void operator()(index_t idx) const {
        const index_t f = idx % F, r = idx / F, h = r / g.Lq, i = r % g.Lq;
        const W* n = nt + r * g.dv1;
        W acc = W(0);
        if (!g.causal) {
            const W* s = S + (h * F + f) * g.dv1;
            for (index_t c = 0; c < g.dv1; ++c) acc += s[c] * n[c];
        } else {
            const index_t b = i / chunk;
            if (b > 0) {
                const W* s = S + ((h * g.nb + b - 1) * F + f) * g.dv1;
                for (index_t c = 0; c < g.dv1; ++c) acc += s[c] * n[c];
                acc *= rescale<Map>(E[h * g.nb + b - 1], Cq[r]);
            }
            const index_t j0 = b * chunk;
            for (index_t t = 0; t < chunk && j0 + t <= i && j0 + t < g.Lk; ++t)
                acc += M[r * chunk + t] * phk[(h * g.Lk + j0 + t) * F + f];
        }
        dphq[idx] = acc;
    }
};

/// Query block sums B[h, b, f, c] = Σ_{i ∈ block b} e^{E_{b−1} − C_i} φ_q,i[f] ñ_i[c]
/// (non-causal: one block, factor 1).
template <class Map, class W>
struct query_block_state {
    geometry g;
    index_t F;
    const W* phq;
    const W* nt;
    const W* E;
    const W* Cq;
    W* B;
    KATTN_HD void operator()(index_t idx) const {
        const index_t c = idx % g.dv1, f = (idx / g.dv1) % F, hb = idx / (g.dv1 * F);
        const index_t h = hb / g.nb, b = hb % g.nb;
        const index_t i0 = g.causal ? b * chunk : 0;
        const index_t i1 = g.causal ? ((b + 1) * chunk < g.Lq ? (b + 1) * chunk : g.Lq) : g.Lq;
        W acc = W(0);
        if (!g.causal) {
            for (index_t i = i0; i < i1; ++i) {
                const index_t r = h * g.Lq + i;
                acc += phq[r * F + f] * nt[r * g.dv1 + c];
            }
        } else if (b > 0) {
            const W Ep = E[h * g.nb + b - 1];
            for (index_t i = i0; i < i1; ++i) {
                const index_t r = h * g.Lq + i;
                acc += rescale<Map>(Ep, Cq[r]) * phq[r * F + f] * nt[r * g.dv1 + c];
            }
        }
        B[idx] = acc;
    }
};

/// Causal suffix over blocks: D_b = e^{E_b − E_{b+1}} D_{b+1} + B_{b+1}, D_{nb−1} = 0.
template <class Map, class W>
struct block_suffix {
    geometry g;
    index_t F;
    const W* E;
    const W* B;
    W* D;
    KATTN_HD void operator()(index_t idx) const {  // idx over H × F × dv1
        const index_t fc = idx % (F * g.dv1), h = idx / (F * g.dv1);
        W run = W(0);
        D[(h * g.nb + g.nb - 1) * F * g.dv1 + fc] = run;
        for (index_t b = g.nb - 2; b >= 0; --b) {
            run = run * rescale<Map>(E[h * g.nb + b], E[h * g.nb + b + 1]) + B[(h * g.nb + b + 1) * F * g.dv1 + fc];
            D[(h * g.nb + b) * F * g.dv1 + fc] = run;
        }
    }
};

/// Key side: dφ̃_j[f] = kw_j Σ_c D_b[f, c] v1_j[c] + Σ_{i ∈ block, i ≥ j} M[i, t_j] φ_q,i[f];
/// dv_j[c] = kw_j Σ_f D_b[f, c] φ̃_j[f] + Σ_{i ∈ block, i ≥ j} K[i, t_j] n_i[c]. Padding: 0.
template <class W, class T>
struct key_grads {
    geometry g;
    index_t F;
    const W* D;
    const W* kw;
    const W* phq;
    const W* phk;
    const W* K;
    const W* M;
    const W* nt;
    const T* v;
    W* dphk;                                       ///< H·Lk × F
    W* dvv;                                        ///< H·Lk × dv
    KATTN_HD void operator()(index_t idx) const {  // idx over H·Lk × (F + dv)
        const index_t w = F + g.dv, col = idx % w, kr = idx / w, h = kr / g.Lk, j = kr % g.Lk;
        const bool is_f = col < F;
        W acc = W(0);
        if (j < g.nk[h]) {
            const index_t b = g.causal ? j / chunk : 0;
            const W* Db = D + (h * g.nb + b) * F * g.dv1;
            if (is_f) {
                for (index_t c = 0; c < g.dv1; ++c) acc += Db[col * g.dv1 + c] * v1<W>(v, g.dv, kr, c);
            } else {
                for (index_t f = 0; f < F; ++f) acc += Db[f * g.dv1 + (col - F)] * phk[kr * F + f];
            }
            acc *= kw[kr];
            if (g.causal) {
                const index_t t = j % chunk, i1 = (b + 1) * chunk < g.Lq ? (b + 1) * chunk : g.Lq;
                for (index_t i = j; i < i1; ++i) {
                    const index_t r = h * g.Lq + i;
                    if (is_f)
                        acc += M[r * chunk + t] * phq[r * F + col];
                    else
                        acc += K[r * chunk + t] * nt[r * g.dv1 + (col - F)];
                }
            }
        }
        if (is_f)
            dphk[kr * F + col] = acc;
        else
            dvv[kr * g.dv + (col - F)] = acc;
    }
};

/// Feature-map VJP of one row: du (P), db (m), and dx = scale·(direct term + Ω du).
/// Buffer row layout: du (P) | direct dx (d) | map workspace | db (m, maps with a bias).
template <class Map, class W>
struct vjp_rows {
    dspec<Map, W> s;
    geometry g;
    index_t stride, ws_size;
    W scale;
    const W* ws;  ///< rows × (d + P): scaled x, u
    const W* phi;
    const W* shift;
    const W* dphi;
    W* buf;  ///< rows × stride
    W* dx;   ///< rows × d
    KATTN_HD void operator()(index_t r) const {
        const index_t d = s.d, P = s.P;
        W* du = buf + r * stride;
        W* dxd = du + P;
        W* work = dxd + d;
        W* db = Map::uses_bias ? work + ws_size : nullptr;
        for (index_t i = 0; i < stride; ++i) du[i] = W(0);
        bool valid = true;
        if (r >= g.q_rows()) {
            const index_t kr = r - g.q_rows();
            valid = kr % g.Lk < g.nk[kr / g.Lk];
        }
        if (!valid) {
            for (index_t i = 0; i < d; ++i) dx[r * d + i] = W(0);
            return;
        }
        const W* x = ws + r * (d + P);
        const W* u = x + d;
        Map::template activate_vjp<scalar_ops>(s.params, d, s.m, x, u, s.bias, shift[r], phi + r * s.F, dphi + r * s.F,
                                               du, dxd, db, work);
        for (index_t i = 0; i < d; ++i) {
            W acc = dxd[i];
            for (index_t p = 0; p < P; ++p) acc += s.omega[i * P + p] * du[p];
            dx[r * d + i] = scale * acc;
        }
    }
};

/// dΩ[i, p] = Σ_rows x[i] du[p] and db[l] = Σ_rows db_row[l], summed head by head, query
/// rows then valid key rows (the reference's order).
template <class Map, class W>
struct spectral_grads {
    dspec<Map, W> s;
    geometry g;
    index_t stride, db_offset;
    const W* ws;
    const W* buf;
    W* d_omega;  ///< d × P, then m entries of d_bias
    KATTN_HD void operator()(index_t idx) const {
        const index_t dP = s.d * s.P;
        const bool is_bias = idx >= dP;
        const index_t i = is_bias ? 0 : idx / s.P, p = is_bias ? idx - dP : idx % s.P;
        W acc = W(0);
        auto add = [&](index_t r) {
            if (is_bias)
                acc += buf[r * stride + db_offset + p];
            else
                acc += ws[r * (s.d + s.P) + i] * buf[r * stride + p];
        };
        for (index_t h = 0; h < g.H; ++h) {
            for (index_t q = 0; q < g.Lq; ++q) add(h * g.Lq + q);
            for (index_t j = 0; j < g.nk[h]; ++j) add(g.q_rows() + h * g.Lk + j);
        }
        d_omega[idx] = acc;
    }
};

}  // namespace kattn::detail::thrust_impl
