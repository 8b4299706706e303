// kattn/backends/chunked/backward.hpp — the chunked backward pass over a system's primitives.
//
// The forward pass is recomputed (chunked/forward.hpp: forward_pass), then, with the output
// cotangent ñ_i = [G_i / den_i, −⟨G_i, out_i⟩ / den_i] (0 where the guard clamped) and
// its inter-chunk scaling ñf_i = f_i·ñ_i:
//   non-causal   dΦ_Q = ñf·Sᵀ;  D = Φ_Qᵀ·ñf;  dΦ_K = (kw ⊙ [V, 1])·Dᵀ;  dV = kw ⊙ (Φ_K·D)
//   causal       per chunk b: dΦ_Q,b = ñf_b·X_bᵀ + M_b·Φ_K,b with M = mask ⊙ w ⊙ (ñ·[V, 1]ᵀ);
//                D_b = Φ_Q,bᵀ·ñf_b and its exclusive suffix T_b = D_{b+1} + e^{E_b − E_{b+1}}·T_{b+1}
//                in reverse block order; dΦ_K,b = M_bᵀ·Φ_Q,b + (kw ⊙ [V, 1]_b)·T_bᵀ;
//                dV_b = kw ⊙ (Φ_K,b·T_b) + K_bᵀ·ñ_b
// then, per row block of up to 65,536 rows (queries, then keys), X and U = X·Ω recomputed
// as in the forward, the maps' row VJPs (dφ → du, dx, db per row), dx += du·Ωᵀ, and
// dΩ += X_blockᵀ·dU_block, db += 1ᵀ·dB_block as products (vjp_stage). Every sum has a
// fixed order. Where the system runs them (single_pass_grads_widths: maps without a
// stabiliser, Ω = I, causal, not packed), dΦ and dV come instead from three walks over the
// chunks (single_pass_grads.hpp), and the same row VJPs follow.
#pragma once

#include "forward.hpp"
#include "kernels.hpp"
#include "scans.hpp"
#include "single_pass_grads.hpp"

namespace kattn::detail::chunked_impl {

/// Nt = ñ and Nf = f·ñ of query row r (zeros for padding rows).
template <class Map, class T, class W, class Ops = scalar_ops>
struct cotangent_rows {
    geometry g;
    W eps;
    const W* O;
    const W* Oa;
    const W* E;
    const W* Cq;
    backends::strided_view<const T> dout;
    W* Nt;
    W* Nf;
    KATTN_HD void operator()(index_t r) const {
        const index_t p = r / g.Lqp, i = r % g.Lqp, tok = g.token(i, g.Lq);
        W* nt = Nt + r * g.dv1;
        W* nf = Nf + r * g.dv1;
        if (tok < 0) {
            for (index_t c = Ops::lane(); c < g.dv1; c += Ops::lanes) nt[c] = nf[c] = W(0);
            return;
        }
        const W f = inter_factor<Map>(g, E, Cq, p, i, r);
        bool clamped = false;
        const W den = guard_denominator<Map::is_positive>(numerator(g, O, Oa, r, f, g.dv), eps, clamped);
        const T* G = dout.row(p / g.heads, p % g.heads, tok);
        W ge = W(0);
        for (index_t c = Ops::lane(); c < g.dv; c += Ops::lanes) {
            const W gc = static_cast<W>(G[c]);
            const W t = gc / den;
            nt[c] = t;
            nf[c] = f == W(0) ? W(0) : f * t;
            ge += gc * (numerator(g, O, Oa, r, f, c) / den);
        }
        ge = Ops::reduce_sum(ge);
        if (Ops::lane() == 0) {
            const W t = clamped ? W(0) : -ge / den;
            nt[g.dv] = t;
            nf[g.dv] = f == W(0) ? W(0) : f * t;
        }
        for (index_t c = g.dv + 1 + Ops::lane(); c < g.dv1; c += Ops::lanes) nt[c] = nf[c] = W(0);
    }
};

/// Packed, non-causal: D_b → T_b = e^{E_b − E_last}·Σ_{b' in doc} D_{b'}, in place, per
/// (p, f, c): every key of a document sees every query of it through S_doc.
template <class Map, class W>
struct document_cotangents {
    geometry g;
    const W* E;
    W* D;
    KATTN_HD void operator()(index_t idx) const {
        const index_t n = g.F * g.dv1, p = idx / n, fc = idx % n;
        for (index_t b0 = 0; b0 < g.nb; b0 = g.doc_last[b0] + 1) {
            const index_t b1 = g.doc_last[b0];
            W sum = W(0);
            for (index_t b = b0; b <= b1; ++b) sum += D[(p * g.nb + b) * n + fc];
            for (index_t b = b0; b <= b1; ++b)
                D[(p * g.nb + b) * n + fc] = rescale<Map>(E[p * g.nb + b], E[p * g.nb + b1]) * sum;
        }
    }
};

/// dv_j = kw_j·Pk_j[0, dv) (+ Vi_j when causal); zero for keys beyond the key lengths.
template <class Map, class T, class W, class Ops = scalar_ops>
struct value_grads {
    geometry g;
    const W* ck;
    const W* E;
    const W* Pk;
    const W* Vi;  ///< or nullptr
    backends::strided_view<T> dv;
    KATTN_HD void operator()(index_t r) const {  // r: padded key row
        const index_t p = r / g.Lkp, j = r % g.Lkp, tok = g.token(j, g.Lk);
        if (tok < 0) return;
        T* dst = dv.row(p / g.heads, p % g.heads, tok);
        if (tok >= g.keys(p)) {
            for (index_t c = Ops::lane(); c < g.dv; c += Ops::lanes) dst[c] = static_cast<T>(W(0));
            return;
        }
        const W kw = rescale<Map>(ck[r], E[p * g.nb + j / g.block()]);
        for (index_t c = Ops::lane(); c < g.dv; c += Ops::lanes)
            dst[c] = static_cast<T>(kw * Pk[r * g.dv1 + c] + (Vi ? Vi[r * g.dv1 + c] : W(0)));
    }
};

/// The map's VJP of row r: dφ → du (P), the direct dx (d) and db (m); zeros for padding.
template <class Map, class W, class Ops = scalar_ops>
struct vjp_rows {
    spectral<Map, W> s;
    geometry g;
    index_t Lp, L;
    bool keys;
    const W* X;  ///< the row block's scaled inputs and projections
    const W* U;
    const W* phi;  ///< every row's φ, shift and dφ
    const W* shift;
    const W* dphi;
    W* dU;  ///< the row block's outputs
    W* dX;
    W* dB;    ///< block rows × m, or nullptr
    W* work;  ///< block rows × Map::workspace(m)
    index_t first = 0;
    index_t phi_first = 0;  ///< the row that phi, shift (nullptr: 0) and dphi start at
    KATTN_HD void operator()(index_t i) const {
        const index_t r = first + i, p = r / Lp, tok = g.token(r % Lp, L), ws = Map::workspace(g.m);
        const index_t rf = r - phi_first;
        W* du = dU + i * g.P;
        W* dx = dX + i * g.d;
        W* db = dB ? dB + i * g.m : nullptr;
        W* wk = work + i * ws;
        for (index_t c = Ops::lane(); c < g.P; c += Ops::lanes) du[c] = W(0);
        for (index_t c = Ops::lane(); c < g.d; c += Ops::lanes) dx[c] = W(0);
        if (db)
            for (index_t c = Ops::lane(); c < g.m; c += Ops::lanes) db[c] = W(0);
        for (index_t c = Ops::lane(); c < ws; c += Ops::lanes) wk[c] = W(0);
        Ops::sync();
        if (tok < 0 || (keys && tok >= g.keys(p))) return;
        Map::template activate_vjp<Ops>(s.params, g.d, g.m, X + i * g.d, U + i * g.P, s.bias, shift ? shift[rf] : W(0),
                                        phi + rf * g.F, dphi + rf * g.F, du, dx, db, wk);
    }
};

/// dst(b, h, token) = scale·dX[i] for every padded row r = first + i = p·Lp + l of a row
/// block that holds a token.
template <class T, class W, class Ops = scalar_ops>
struct scatter_rows {
    geometry g;
    backends::strided_view<T> dst;
    index_t Lp;
    W scale;
    const W* dX;
    index_t first = 0;
    KATTN_HD void operator()(index_t i) const {
        const index_t r = first + i, p = r / Lp, tok = g.token(r % Lp, dst.len);
        if (tok < 0) return;
        T* out = dst.row(p / g.heads, p % g.heads, tok);
        const W* src = dX + i * dst.dim;
        for (index_t c = Ops::lane(); c < dst.dim; c += Ops::lanes) out[c] = static_cast<T>(scale * src[c]);
    }
};

template <class W>
struct fill_value {
    W* dst;
    W value;
    KATTN_HD void operator()(index_t i) const { dst[i] = value; }
};

/// dst[i] += src[i] (Ω = I: the input gradient's dU·Ωᵀ term is dU).
template <class W>
struct add_values {
    const W* src;
    W* dst;
    KATTN_HD void operator()(index_t i) const { dst[i] += src[i]; }
};

/// Where the gradients go (system memory): dq, dk, dv as views; dΩ (d × P) and db (m)
/// overwritten with the sum over every head, or nullptr when not wanted.
template <class T, class W>
struct gradient_views {
    backends::strided_view<T> dq, dk, dv;
    W* d_omega = nullptr;
    W* d_bias = nullptr;
};

/// Where the row VJPs of a row block read φ, the shifts (nullptr: 0) and dφ: rows from
/// phi_first on.
template <class W>
struct vjp_features {
    const W* phi;
    const W* shift;
    const W* dphi;
    index_t phi_first;
};

/// The maps' VJPs per row block (X and U recomputed as in the forward), dx += du·Ωᵀ, and
/// dΩ += Xᵀ·dU, db += 1ᵀ·dB accumulated block by block in the order the sides run. With
/// Ω = I, U is X and dx += du.
template <class Map, class W, class System, class T>
struct vjp_stage {
    using buffer = typename System::template buffer<W>;
    const System& sys;
    const spectral<Map, W>& sp;
    const geometry& g;
    const gradient_views<T, W>& out;
    W scale;
    index_t m, blk;
    bool want_bias, first_block = true;
    buffer X, U, dU, dB, dX, work, ones;

    vjp_stage(const System& s, const spectral<Map, W>& spec, const geometry& gg, const gradient_views<T, W>& o, W sc,
              index_t rows)
        : sys(s),
          sp(spec),
          g(gg),
          out(o),
          scale(sc),
          m(Map::uses_bias ? gg.m : 0),
          blk(std::min(rows, row_block)),
          want_bias(o.d_bias && m > 0),
          X(s.template make_buffer<W>(blk * gg.d)),
          U(s.template make_buffer<W>(spec.identity ? 0 : blk * gg.P)),
          dU(s.template make_buffer<W>(blk * gg.P)),
          dB(s.template make_buffer<W>(blk * m)),
          dX(s.template make_buffer<W>(blk * gg.d)),
          work(s.template make_buffer<W>(blk * Map::workspace(gg.m))),
          ones(s.template make_buffer<W>(want_bias ? blk : 0)) {
        if (want_bias) sys.launch(blk, fill_value<W>{ones.data(), W(1)});
    }

    /// One side's rows (x: queries or keys, into dst); features(r0, rows, X) gives the row
    /// block's vjp_features once X holds its scaled inputs.
    template <class Features>
    void run(const backends::strided_view<const T>& x, index_t Lp, index_t L, bool keys,
             const backends::strided_view<T>& dst, const Features& features) {
        const index_t rows = g.problems * Lp;
        for (index_t r0 = 0; r0 < rows; r0 += blk) {
            const index_t nr = std::min(blk, rows - r0);
            detail::launch_rows(sys, nr, gather_rows<T, W, system_row_ops<System>>{g, x, Lp, scale, X.data(), r0});
            if (!sp.identity) project_rows(sys, sp, g, X.data(), U.data(), nr);
            const vjp_features<W> f = features(r0, nr, static_cast<const W*>(X.data()));
            detail::launch_rows(
                sys, nr,
                vjp_rows<Map, W, system_row_ops<System>>{
                    sp, g, Lp, L, keys, X.data(), sp.identity ? X.data() : U.data(), f.phi, f.shift, f.dphi, dU.data(),
                    dX.data(), m ? dB.data() : nullptr, work.data(), r0, f.phi_first});
            if (sp.identity)  // dU·Iᵀ = dU
                sys.launch(nr * g.d, add_values<W>{dU.data(), dX.data()});
            else
                sys.gemm(false, true, nr, g.d, g.P, dU.data(), g.P, 0, sp.omega, g.P, 0, dX.data(), g.d, 0, index_t(1),
                         true);
            detail::launch_rows(sys, nr, scatter_rows<T, W, system_row_ops<System>>{g, dst, Lp, scale, dX.data(), r0});
            if (out.d_omega)
                sys.gemm(true, false, g.d, g.P, nr, X.data(), g.d, 0, dU.data(), g.P, 0, out.d_omega, g.P, 0,
                         index_t(1), !first_block);
            if (want_bias)
                sys.gemm(false, false, 1, m, nr, ones.data(), nr, 0, dB.data(), m, 0, out.d_bias, m, 0, index_t(1),
                         !first_block);
            first_block = false;
        }
    }
};

/// The causal backward in single passes over the chunks (single_pass_grads.hpp) where the
/// system runs them and the forward's single pass (maps without a stabiliser, Ω = I, not
/// packed, Lq = Lk); false, having done nothing, where not. An element-wise map with
/// neither dΩ nor db asked for has its VJP finished in the dφ walks (no dφ buffers, no
/// row VJPs).
template <class Map, class W, class System, class T>
bool single_pass_backward(const System& sys, const spectral<Map, W>& sp, const geometry& g,
                          const backends::strided_view<const T>& q, const backends::strided_view<const T>& k,
                          const backends::strided_view<const T>& v, const backends::strided_view<const T>& dout,
                          const gradient_views<T, W>& out, W scale, W eps) {
    if constexpr (Map::has_stabiliser ||
                  !requires { sys.template single_pass_grads_widths<W>(g.problems, g.d, g.F, g.dv); }) {
        return false;
    } else {
        const index_t cw = single_pass_columns<Map, W>(sys, sp, g);
        if (cw == 0) return false;
        const auto widths = sys.template single_pass_grads_widths<W>(g.problems, g.d, g.F, g.dv);
        if (!widths) return false;
        using Ops = system_row_ops<System>;
        const index_t qr = g.problems * g.Lqp, F = g.F;
        // The forward again, its numerators and denominators kept; then ñ.
        auto O = sys.template make_buffer<W>(qr * g.dv1);
        single_pass_job<Map, T, W, Ops> fwd{g, sp, q, k, v, {}, scale, eps, cw};
        fwd.numerators = O.data();
        sys.launch_causal_single_pass(fwd);
        auto Nt = sys.template make_buffer<W>(qr * g.dv1);
        detail::launch_rows(sys, qr, single_pass_cotangents<Map, T, W, Ops>{g, eps, O.data(), dout, Nt.data()});
        O = sys.template make_buffer<W>(0);
        // The three walks: dΦ_Q, dΦ_K (or, fused, dq and dk) and dV.
        const bool fused =
            elementwise_features<Map>(sp.params) && !out.d_omega && !(out.d_bias && Map::uses_bias && g.m > 0);
        auto dphi_q = sys.template make_buffer<W>(fused ? 0 : qr * F);
        auto dphi_k = sys.template make_buffer<W>(fused ? 0 : qr * F);
        single_pass_grads_job<Map, T, W, Ops> job{fwd,    Nt.data(),       dphi_q.data(), dphi_k.data(),
                                                  out.dv, widths.features, widths.values};
        if (fused) {
            job.fused = true;
            job.dq = out.dq;
            job.dk = out.dk;
        }
        sys.launch_single_pass_grads(job);
        if (fused) return true;
        Nt = sys.template make_buffer<W>(0);
        // The row VJPs, φ made again from the rows, dφ read where the walks wrote it.
        vjp_stage<Map, W, System, T> st(sys, sp, g, out, scale, qr);
        auto phi = sys.template make_buffer<W>(st.blk * F);
        const auto side = [&](const W* dphi, index_t L, bool keys) {
            return [&, dphi, L, keys](index_t r0, index_t nr, const W* X) {
                detail::launch_rows(sys, nr,
                                    single_pass_vjp_inputs<Map, W, Ops>{sp, g, g.Lqp, L, keys, X, phi.data(), r0});
                return vjp_features<W>{phi.data(), nullptr, dphi + r0 * F, r0};
            };
        };
        st.run(q, g.Lqp, g.Lq, false, out.dq, side(dphi_q.data(), g.Lq, false));
        st.run(k, g.Lkp, g.Lk, true, out.dk, side(dphi_k.data(), g.Lk, true));
        return true;
    }
}

/// The backward pass; see the file comment. Views and geometry are checked by the caller.
template <class Map, class W, class System, class T>
void backward(const System& sys, const spectral<Map, W>& sp, const geometry& g,
              const backends::strided_view<const T>& q, const backends::strided_view<const T>& k,
              const backends::strided_view<const T>& v, const backends::strided_view<const T>& dout,
              const gradient_views<T, W>& out, W scale, W eps) {
    if (g.problems == 0) return;
    if (single_pass_backward<Map, W>(sys, sp, g, q, k, v, dout, out, scale, eps)) return;
    forward_pass<Map, W, System> fp(sys, sp, g, q, k, v, scale);
    const index_t F = g.F, dv1 = g.dv1, n = g.problems, qr = n * g.Lqp, kr = n * g.Lkp;
    const W* phq = fp.fq.phi.data();
    const W* phk = fp.fk.phi.data();
    const W* ck = fp.fk.shift.data();
    const W* A = fp.A.data();
    auto Nt = sys.template make_buffer<W>(qr * dv1);
    auto Nf = sys.template make_buffer<W>(qr * dv1);
    detail::launch_rows(
        sys, qr,
        cotangent_rows<Map, T, W, system_row_ops<System>>{g, eps, fp.O.data(), g.causal ? fp.Oa.data() : nullptr,
                                                          fp.E.data(), fp.Cq.data(), dout, Nt.data(), Nf.data()});
    // The numerators and the running maxima are not read again.
    for (auto* b : {&fp.O, &fp.Oa, &fp.R}) *b = sys.template make_buffer<W>(0);
    auto dPhq = sys.template make_buffer<W>(qr * F);
    auto dPhk = sys.template make_buffer<W>(kr * F);
    auto D = sys.template make_buffer<W>(n * g.nb * F * dv1);
    auto Pk = sys.template make_buffer<W>(kr * dv1);
    if (!g.causal && !g.packed()) {
        const index_t Lq = g.Lqp, Lk = g.Lkp;
        sys.gemm(false, true, Lq, F, dv1, Nf.data(), dv1, Lq * dv1, A, dv1, F * dv1, dPhq.data(), F, Lq * F, n);
        state_product(sys, F, dv1, Lq, phq, Nf.data(), D.data(), n);
        sys.gemm(false, true, Lk, F, dv1, fp.V1w.data(), dv1, Lk * dv1, D.data(), dv1, F * dv1, dPhk.data(), F, Lk * F,
                 n);
        sys.gemm(false, false, Lk, dv1, F, phk, F, Lk * F, D.data(), dv1, F * dv1, Pk.data(), dv1, Lk * dv1, n);
        detail::launch_rows(
            sys, kr, value_grads<Map, T, W, system_row_ops<System>>{g, ck, fp.E.data(), Pk.data(), nullptr, out.dv});
    } else if (!g.causal) {  // packed documents, non-causal: blocks of 64 with document states
        const index_t C = chunk, nc = n * g.nb;
        sys.gemm(false, true, C, F, dv1, Nf.data(), dv1, C * dv1, A, dv1, F * dv1, dPhq.data(), F, C * F, nc);
        sys.gemm(true, false, F, dv1, C, phq, F, C * F, Nf.data(), dv1, C * dv1, D.data(), dv1, F * dv1, nc);
        sys.launch(n * F * dv1, document_cotangents<Map, W>{g, fp.E.data(), D.data()});
        sys.gemm(false, true, C, F, dv1, fp.V1w.data(), dv1, C * dv1, D.data(), dv1, F * dv1, dPhk.data(), F, C * F,
                 nc);
        sys.gemm(false, false, C, dv1, F, phk, F, C * F, D.data(), dv1, F * dv1, Pk.data(), dv1, C * dv1, nc);
        detail::launch_rows(
            sys, kr, value_grads<Map, T, W, system_row_ops<System>>{g, ck, fp.E.data(), Pk.data(), nullptr, out.dv});
    } else {
        const index_t C = chunk, nc = n * g.nb;
        auto M = sys.template make_buffer<W>(qr * C);
        sys.gemm(false, true, C, F, dv1, Nf.data(), dv1, C * dv1, A, dv1, F * dv1, dPhq.data(), F, C * F, nc);
        sys.gemm(false, true, C, C, dv1, Nt.data(), dv1, C * dv1, fp.V1.data(), dv1, C * dv1, M.data(), C, C * C, nc);
        sys.launch(qr * C, mask_scores<Map, W>{g, ck, fp.Cq.data(), M.data()});
        sys.gemm(false, false, C, F, C, M.data(), C, C * C, phk, F, C * F, dPhq.data(), F, C * F, nc, true);
        {  // D_b = Φ_Q,bᵀ·ñf_b and their reverse suffixes
            const segments sg = segments_of(g);
            auto totals = sys.template make_buffer<W>(n * F * dv1 * sg.count);
            const suffix_steps<Map, W> steps{g, fp.E.data()};
            scan_block_states(sys, g, steps, phq, Nf.data(), D.data(), totals.data(),
                              suffix_in_segments<Map, W>{g, sg, steps, D.data(), totals.data()});
            finish_suffix<Map, W>(sys, g, fp.E.data(), totals.data(), D.data());
        }
        sys.gemm(true, false, C, F, C, M.data(), C, C * C, phq, F, C * F, dPhk.data(), F, C * F, nc);
        sys.gemm(false, true, C, F, dv1, fp.V1w.data(), dv1, C * dv1, D.data(), dv1, F * dv1, dPhk.data(), F, C * F, nc,
                 true);
        sys.gemm(false, false, C, dv1, F, phk, F, C * F, D.data(), dv1, F * dv1, Pk.data(), dv1, C * dv1, nc);
        auto Vi = sys.template make_buffer<W>(kr * dv1);
        sys.gemm(true, false, C, dv1, C, fp.K.data(), C, C * C, Nt.data(), dv1, C * dv1, Vi.data(), dv1, C * dv1, nc);
        detail::launch_rows(
            sys, kr, value_grads<Map, T, W, system_row_ops<System>>{g, ck, fp.E.data(), Pk.data(), Vi.data(), out.dv});
    }

    // Only φ, the shifts and dφ are read from here on: the rest goes back first.
    for (auto* b : {&fp.E, &fp.Cq, &fp.V1w, &fp.V1, &fp.A, &fp.K, &Nt, &Nf, &D, &Pk})
        *b = sys.template make_buffer<W>(0);
    vjp_stage<Map, W, System, T> st(sys, sp, g, out, scale, std::max(qr, kr));
    const auto rows_of = [](const feature_block<System, W>& fb, const W* dphi) {
        return [&fb, dphi](index_t, index_t, const W*) {
            return vjp_features<W>{fb.phi.data(), fb.shift.data(), dphi, 0};
        };
    };
    st.run(q, g.Lqp, g.Lq, false, out.dq, rows_of(fp.fq, dPhq.data()));
    st.run(k, g.Lkp, g.Lk, true, out.dk, rows_of(fp.fk, dPhk.data()));
}

}  // namespace kattn::detail::chunked_impl
