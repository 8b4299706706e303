// kattn/backends/simd/bf16_forward.hpp — the non-causal forward on bf16 tensors, with the
// tile products on AMX (gemm_amx.hpp: bf16 operands, float sums).
//
// Same algorithm as linear_forward.hpp's non-causal pass — key states per (head, segment),
// merged in a fixed order, then the queries — with the three products in bf16:
//   projection   u = x · (scale·Ω)        x: the bf16 rows as given; Ω rounded once per call
//   key state    Sᵀ += Vᵀ · Φ_K           Φ_K rounded per tile; V as given
//   output       num = Φ_Q · S            Φ_Q rounded per tile; S rounded once per head
// The activations (Map::activate, the stabiliser), z = Σ φ(k), the denominators φ(q)ᵀz and
// the state's running sums stay float (compensated in double as in tile.hpp). The state
// holds Sᵀ (d_v × F, padded): the key product then reads V by columns, the small operand.
// Operands are padded to AMX's tiles (16 rows, 32 bf16 of k) with zeros. Results do not
// depend on the thread count.
#pragma once

#include "../../core/warnings_push.hpp"  // GCC PR 105593: false -Wmaybe-uninitialized in AVX-512 intrinsics

#include <bit>
#include <cstdint>
#include <vector>

#include "../../linalg/gemm_amx.hpp"
#include "tile.hpp"

namespace kattn::detail::simd_impl {

#if KATTN_BF16_KERNELS

/// n rounded up to a multiple of q.
constexpr index_t round_up(index_t n, index_t q) { return (n + q - 1) / q * q; }

/// Per-thread bf16 buffers beside a float tile_worker (which holds xs, u, φ and the shifts).
/// Padded extents: dk (d, the projection's k: 32s), Pn (P: 16s), Fk (F: 32s), dvn (d_v: 16s).
template <class Map, class Arch>
struct bf16_tile {
    using worker = tile_worker<Map, float, Arch>;
    using ops = simd_ops<Arch>;
    worker w;
    index_t dk, Pn, Fk, dvn;
    std::vector<bf16> xb, phb;            ///< a tile's inputs (64 × dk), query features (64 × Fk)
    std::vector<std::uint32_t> pk;        ///< Φ_K pairs over rows (32 × Fk)
    std::vector<std::uint32_t> pv;        ///< Vᵀ pairs (dvn × 32)
    std::vector<float> un, prod, colsum;  ///< padded projections; a product's result; z's tile part

    bf16_tile(const spectral<Map, float>& sp, index_t dv)
        : w(sp),
          dk(round_up(sp.d, 32)),
          Pn(round_up(sp.P, 16)),
          Fk(round_up(sp.F, 32)),
          dvn(round_up(dv, 16)),
          xb(sz(tile_rows * dk)),
          phb(sz(tile_rows * Fk)),
          pk(sz(tile_rows / 2 * Fk)),
          pv(sz(dvn * tile_rows / 2)),
          un(Pn == sp.P ? 0 : sz(tile_rows * Pn)),
          prod(sz(std::max(tile_rows, dvn) * std::max(Fk, dvn))),
          colsum(sz(Fk)) {}

    /// xs = scale·x (float), u = x·(scale·Ω) from the pairs `omega` (dk/2 × Pn), and each
    /// row's own shift.
    void project(index_t n, const bf16* x, const std::uint32_t* omega) {
        const auto& sp = w.sp;
        const index_t d = sp.d, M = round_up(n, 16);
        for (index_t r = 0; r < n; ++r) {
            std::copy_n(x + r * d, d, xb.data() + r * dk);
            std::fill(xb.data() + r * dk + d, xb.data() + (r + 1) * dk, bf16{});
            const bf16* xr = x + r * d;
            float* xs = &w.xs[sz(r * d)];
#pragma omp simd
            for (index_t c = 0; c < d; ++c) xs[c] = sp.scale * std::bit_cast<float>(std::uint32_t(xr[c].bits) << 16);
        }
        if (un.empty()) {
            gemm_amx(M, Pn, dk / 32, xb.data(), dk, omega, Pn, w.u.data(), sp.P, false);
        } else {
            gemm_amx(M, Pn, dk / 32, xb.data(), dk, omega, Pn, un.data(), Pn, false);
            for (index_t r = 0; r < n; ++r) std::copy_n(un.data() + r * Pn, sp.P, w.u.data() + r * sp.P);
        }
        for (index_t r = 0; r < n; ++r) {
            float c = 0;
            if constexpr (Map::has_stabiliser)
                c = Map::template row_shift<ops>(sp.view.params, d, sp.m, &w.xs[sz(r * d)], &w.u[sz(r * sp.P)],
                                                 w.bias());
            w.shift[sz(r)] = c;
        }
    }
};

/// Key tiles summed in float (AMX's accumulator) before they join a state's double totals.
inline constexpr index_t bf16_tiles_per_flush = 8;

/// Sᵀ, z of keys [j0, j1) of head p (all valid) added to st (S: Sᵀ, dvn × Fk). Up to
/// bf16_tiles_per_flush tiles are summed in float in t.prod before they join the state.
template <class Map, class Arch>
void bf16_accumulate_keys(bf16_tile<Map, Arch>& t, const attention_problem<Map, float>& pb, const bf16* K,
                          const bf16* V, const std::uint32_t* omega, index_t j0, index_t j1, key_state<float>& st) {
    const auto& sp = t.w.sp;
    const index_t F = sp.F, dv = pb.dv;
    index_t pending = 0;
    const auto flush = [&] {
        if (pending > 0) st.add_contribution(t.prod.data(), t.colsum.data());
        pending = 0;
    };
    for (index_t j = j0; j < j1; j += tile_rows) {
        const index_t n = std::min(tile_rows, j1 - j), kp = round_up(n, 32) / 2;
        t.project(n, K + j * sp.d, omega);
        if constexpr (Map::has_stabiliser) {
            float tmax = t.w.shift[0];
            for (index_t r = 1; r < n; ++r) tmax = std::max(tmax, t.w.shift[sz(r)]);
            const float Cn = st.empty && pending == 0 ? tmax : std::max(st.C, tmax);
            if (Cn > st.C) flush();  // the pending tiles were weighted at the old shift
            st.raise_to(Cn);
        }
        t.w.activate(n, t.w.phi.data(), true, st.C);
        pack_pair_rows(n, F, t.w.phi.data(), F, t.pk.data(), t.Fk, kp);
        pair_columns(n, dv, V + j * dv, dv, t.pv.data(), kp, t.dvn);
        // pv is read as dvn bf16 rows of 2·kp (a row's pairs are consecutive k).
        gemm_amx(t.dvn, t.Fk, kp / 16, reinterpret_cast<const bf16*>(t.pv.data()), 2 * kp, t.pk.data(), t.Fk,
                 t.prod.data(), t.Fk, pending > 0);
        if (pending == 0) std::fill(t.colsum.begin(), t.colsum.end(), 0.0f);
        for (index_t r = 0; r < n; ++r) {
            const float* ph = &t.w.phi[sz(r * F)];
#pragma omp simd
            for (index_t f = 0; f < F; ++f) t.colsum[sz(f)] += ph[f];
        }
        if (++pending == bf16_tiles_per_flush) flush();
    }
    flush();
}

/// The non-causal forward of a problem without packed documents or slice link, on bf16
/// q, k, v, out. Needs bf16_amx_supported().
template <class Map, class Arch>
void linear_forward_bf16(const attention_problem<Map, float>& pb, const bf16_forward_io& io) {
    const auto sp = spectral<Map, float>::make(pb.spec, pb.input_scale, false);
    const index_t F = sp.F, dv = pb.dv, d = sp.d;
    const index_t dk = round_up(d, 32), Pn = round_up(sp.P, 16), Fk = round_up(F, 32), dvn = round_up(dv, 16);
    const index_t nseg = segments_for(pb.problems, std::max(pb.q_len, pb.k_len));
    const index_t items = pb.problems * nseg;
    // scale·Ω as pairs over d, zero-padded to dk × Pn.
    std::vector<float> omega(sz(d * sp.P));
    for (index_t i = 0; i < d * sp.P; ++i) omega[sz(i)] = sp.scale * sp.view.omega[i];
    std::vector<std::uint32_t> om(sz(dk / 2 * Pn));
    pack_pair_rows(d, sp.P, omega.data(), sp.P, om.data(), Pn, dk / 2);

    // Key states as Sᵀ (dvn × Fk) and z (Fk).
    std::vector<key_state<float>> states(sz(items), key_state<float>(Fk, dvn));
#pragma omp parallel
    {
        bf16_tile<Map, Arch> t(sp, dv);
#pragma omp for schedule(dynamic, 1)
        for (index_t it = 0; it < items; ++it) {
            const index_t p = it / nseg, s = it % nseg, nk = pb.valid_keys(p);
            const index_t a = std::min(nk, split_point(pb.k_len, nseg, s)),
                          b = std::min(nk, split_point(pb.k_len, nseg, s + 1));
            bf16_accumulate_keys(t, pb, io.k + p * pb.k_len * d, io.v + p * pb.k_len * dv, om.data(), a, b,
                                 states[sz(it)]);
        }
    }
    for (index_t p = 0; p < pb.problems; ++p)
        for (index_t s = 1; s < nseg; ++s) states[sz(p * nseg)].merge(states[sz(p * nseg + s)]);

    // S (Fk × dvn) of every head as pairs over F.
    std::vector<std::uint32_t> sb(sz(pb.problems * Fk / 2 * dvn));
#pragma omp parallel
    {
        std::vector<float> S(sz(Fk * dvn));
#pragma omp for schedule(dynamic, 1)
        for (index_t p = 0; p < pb.problems; ++p) {
            transpose(dvn, Fk, states[sz(p * nseg)].S.data(), Fk, S.data(), dvn);
            pack_pair_rows(Fk, dvn, S.data(), dvn, sb.data() + p * (Fk / 2) * dvn, dvn, Fk / 2);
        }
    }
#pragma omp parallel
    {
        bf16_tile<Map, Arch> t(sp, dv);
        std::vector<float> inv(sz(tile_rows));
#pragma omp for schedule(dynamic, 1)
        for (index_t it = 0; it < items; ++it) {
            const index_t p = it / nseg, s = it % nseg;
            const key_state<float>& st = states[sz(p * nseg)];
            const bf16* Q = io.q + p * pb.q_len * d;
            bf16* O = io.out + p * pb.q_len * dv;
            const index_t i1 = split_point(pb.q_len, nseg, s + 1);
            for (index_t i = split_point(pb.q_len, nseg, s); i < i1; i += tile_rows) {
                const index_t n = std::min(tile_rows, i1 - i);
                t.project(n, Q + i * d, om.data());
                t.w.activate(n, t.w.phi.data());
                pack_rows(n, F, t.w.phi.data(), F, t.phb.data(), Fk);
                gemm_amx(round_up(n, 16), dvn, Fk / 32, t.phb.data(), Fk, sb.data() + p * (Fk / 2) * dvn, dvn,
                         t.prod.data(), dvn, false);
                for (index_t r = 0; r < n; ++r) {
                    bool cl = false;
                    const float den = guard_denominator<Map::is_positive>(
                        simd_ops<Arch>::dot(F, &t.w.phi[sz(r * F)], st.z.data()), float(pb.eps), cl);
                    inv[sz(r)] = 1.0f / den;
                }
                narrow_scaled_rows(n, dv, t.prod.data(), dvn, inv.data(), O + i * dv, dv);
            }
        }
    }
}

#endif  // KATTN_BF16_KERNELS

/// Runs the bf16 forward when this build and CPU can (bf16_amx_supported()) and the problem
/// is one it covers (non-causal, no packed documents); returns false otherwise.
template <class Map, class Arch>
bool run_forward_bf16(const attention_problem<Map, float>& pb, const bf16_forward_io& io) {
#if KATTN_BF16_KERNELS
    if (!bf16_amx_supported() || pb.causal || pb.cu_seqlens) return false;
    linear_forward_bf16<Map, Arch>(pb, io);
    return true;
#else
    (void)pb;
    (void)io;
    return false;
#endif
}

}  // namespace kattn::detail::simd_impl

#include "../../core/warnings_pop.hpp"
