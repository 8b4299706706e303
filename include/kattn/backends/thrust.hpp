// kattn/backends/thrust.hpp — the Thrust execution backend (CUDA GPUs, or any Thrust
// device system: THRUST_DEVICE_SYSTEM_OMP runs the very same code path on CPU threads).
//
//   kattn::backends::thrust<Policy = decltype(thrust::device), Work = double>
//
// Every feature map and operator mode runs with no per-map code: the per-row math is the
// maps' own `row_shift` / `activate` / `activate_vjp` called with `detail::scalar_ops`
// inside Thrust functors (`KATTN_HD`, i.e. __host__ __device__ under nvcc), one row per
// functor call, the row's workspace a per-row slice of a device buffer.
//
// Transfers. The operator API takes host xtensor containers, so each primitive call copies
// its inputs (q, k, v, dout, Ω, b, key lengths; the recurrent state for `step`) into
// `thrust::device_vector`s once, runs every stage on the device, and copies each result
// back once at the end. There are no other host/device copies: no copy inside a loop, no
// hidden synchronising read of a device value. (With the OMP or CPP device system the
// "device" is host memory and the copies are memcpys.)
//
// Memory. Unlike the simd backend, this backend materialises, per call, the L × F
// feature matrices of all heads, the rows' projections, and (causal) the chunk states
// (H · ⌈L/64⌉ · F · (dv+1) values) in device memory: simple and parallel, at the cost of
// O(H·L·(F + d + P)) bytes. Non-causal state S = Φ_Kᵀ[V, 1] is one (F × (dv+1)) block
// per head.
//
// Precision and semantics: those of the reference backend. Inputs are widened to `Work`
// (double by default, like the reference) on entry and every intermediate is in `Work`;
// results are rounded to T once on exit. `Work = float` halves memory and is much faster
// on GPUs with few FP64 units, at float accuracy. Stabiliser (maps with has_stabiliser):
// a query uses its own row shift c_q; key j enters with weight e^{c_j − C_i}, C_i the
// running maximum of the key shifts query i can see (all valid keys; keys j ≤ i when
// causal), so future keys never affect earlier outputs. Causal attention is computed in
// chunks of 64 tokens: chunk-local states at the chunk's own running maximum E_b, an
// in-order scan over chunks rescaling by e^{E_{b−1} − E_b}, and the intra-chunk part
// from the masked 64-wide score rows (exactly the reference's running-maximum rescaling,
// rearranged). Denominator guard: detail::guard_denominator, as the reference. Gradients
// treat the shifts as constants; causal backward uses the mirrored suffix scan over chunks.
//
// Determinism. One functor call per output element (or per row), each summing in a fixed
// order that depends on the problem only: results are bitwise identical for any thread
// count or GPU launch configuration. Ω and b are drawn on the host by the sampler (same
// seed → bit-identical Ω on every backend); this backend only reads them.
//
// Policy: the Thrust execution policy the algorithms run with; it must be able to
// dereference `thrust::device_vector` memory (thrust::device, thrust::cuda::par(_nosync)
// with a stream, or thrust::omp::par when the device system is OMP). `step` (recurrent
// decoding) keeps the state on the host (the operator's `state`), so it copies the state
// in and out on every token: correct, but decoding throughput wants a device-resident
// state (not provided yet).
#pragma once

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include <thrust/copy.h>
#include <thrust/device_vector.h>
#include <thrust/execution_policy.h>
#include <thrust/fill.h>
#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>

#include "../core/concepts.hpp"
#include "../core/math.hpp"
#include "../core/row_ops.hpp"
#include "problem.hpp"

namespace kattn::detail::thrust_impl {

/// Causal chunk length (tokens). Fixed: results must not depend on anything but the problem.
inline constexpr index_t chunk = 64;

template <class W>
KATTN_HD inline W neg_inf() {
    return -W(HUGE_VAL);
}

/// e^{a − b} with e^{−∞ − b} = 0 (a key or chunk that does not exist); 1 for maps without
/// a stabiliser (all shifts are 0).
template <class Map, class W>
KATTN_HD inline W rescale(W a, W b) {
    if constexpr (!Map::has_stabiliser) {
        return W(1);
    } else {
        return a == neg_inf<W>() ? W(0) : math::exp(a - b);
    }
}

/// Spectral parameters on the device, in the working precision.
template <class W>
struct dspec {
    const W* omega = nullptr;  ///< d × P
    const W* bias = nullptr;   ///< m or nullptr
    index_t d = 0, m = 0, P = 0, F = 0;
    feature_params params{};
};

/// Extents of one attention call. Rows: the H·Lq query rows come first, then the H·Lk
/// key rows, in every row-indexed buffer (features, shifts, workspaces, gradients).
struct geometry {
    index_t H = 0, Lq = 0, Lk = 0, dv = 0, dv1 = 0;
    index_t nb = 1;     ///< key blocks per head: ⌈L/chunk⌉ when causal, 1 otherwise
    index_t block = 0;  ///< tokens per key block: chunk when causal, Lk otherwise
    bool causal = false;
    const index_t* nk = nullptr;  ///< valid keys per head (device)

    KATTN_HD index_t q_rows() const { return H * Lq; }
    KATTN_HD index_t rows() const { return H * (Lq + Lk); }
};

// ---------------------------------------------------------------------------------------
// Stage functors. Each is called once per index by thrust::for_each_n.
// ---------------------------------------------------------------------------------------

/// φ of one row: x·scale → workspace, u = Ωᵀx → workspace, shift, φ. Rows are query rows
/// [0, nq_rows) from xq and key rows from xk; key rows at j ≥ nk[h] are padding (φ = 0,
/// shift = −∞). `nk == nullptr`: every row valid.
template <class Map, class W, class T>
struct feature_rows {
    dspec<W> s;
    const T* xq;
    const T* xk;
    index_t nq_rows, Lk;
    const index_t* nk;
    W scale;
    bool stabilise;
    W* ws;     ///< rows × (d + P): scaled x, then u
    W* phi;    ///< rows × F
    W* shift;  ///< rows, or nullptr

    KATTN_HD void operator()(index_t r) const {
        const index_t d = s.d, P = s.P;
        W* x = ws + r * (d + P);
        W* u = x + d;
        W* ph = phi + r * s.F;
        const T* src;
        if (r < nq_rows) {
            src = xq + r * d;
        } else {
            const index_t kr = r - nq_rows, h = kr / Lk, j = kr % Lk;
            if (nk != nullptr && j >= nk[h]) {
                for (index_t i = 0; i < d + P; ++i) x[i] = W(0);
                for (index_t f = 0; f < s.F; ++f) ph[f] = W(0);
                if (shift) shift[r] = neg_inf<W>();
                return;
            }
            src = xk + kr * d;
        }
        for (index_t i = 0; i < d; ++i) x[i] = scale * W(src[i]);
        for (index_t p = 0; p < P; ++p) u[p] = W(0);
        for (index_t i = 0; i < d; ++i)
            for (index_t p = 0; p < P; ++p) u[p] += x[i] * s.omega[i * P + p];
        W c = W(0);
        if constexpr (Map::has_stabiliser)
            if (stabilise) c = Map::template row_shift<scalar_ops>(s.params, d, s.m, x, u, s.bias);
        Map::template activate<scalar_ops>(s.params, d, s.m, x, u, s.bias, c, ph);
        if (shift) shift[r] = c;
    }
};

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
KATTN_HD inline W state_apply(const geometry& g, index_t F, const W* y, const W* S, const W* E, const W* Cq,
                              const W* K, const T* v, index_t r, index_t c) {
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
            run = run * rescale<Map>(E[h * g.nb + b], E[h * g.nb + b + 1]) +
                  B[(h * g.nb + b + 1) * F * g.dv1 + fc];
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
    W* dphk;  ///< H·Lk × F
    W* dvv;   ///< H·Lk × dv
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
                    if (is_f) acc += M[r * chunk + t] * phq[r * F + col];
                    else acc += K[r * chunk + t] * nt[r * g.dv1 + (col - F)];
                }
            }
        }
        if (is_f) dphk[kr * F + col] = acc;
        else dvv[kr * g.dv + (col - F)] = acc;
    }
};

/// Feature-map VJP of one row: du (P), db (m), and dx = scale·(direct term + Ω du).
/// Buffer row layout: du (P) | direct dx (d) | map workspace | db (m, maps with a bias).
template <class Map, class W>
struct vjp_rows {
    dspec<W> s;
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
        Map::template activate_vjp<scalar_ops>(s.params, d, s.m, x, u, s.bias, shift[r], phi + r * s.F,
                                               dphi + r * s.F, du, dxd, db, work);
        for (index_t i = 0; i < d; ++i) {
            W acc = dxd[i];
            for (index_t p = 0; p < P; ++p) acc += s.omega[i * P + p] * du[p];
            dx[r * d + i] = scale * acc;
        }
    }
};

/// dΩ[i, p] = Σ_rows x[i] du[p] and db[l] = Σ_rows db_row[l], summed head by head, query
/// rows then valid key rows (the reference's order).
template <class W>
struct spectral_grads {
    dspec<W> s;
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
            if (is_bias) acc += buf[r * stride + db_offset + p];
            else acc += ws[r * (s.d + s.P) + i] * buf[r * stride + p];
        };
        for (index_t h = 0; h < g.H; ++h) {
            for (index_t q = 0; q < g.Lq; ++q) add(h * g.Lq + q);
            for (index_t j = 0; j < g.nk[h]; ++j) add(g.q_rows() + h * g.Lk + j);
        }
        d_omega[idx] = acc;
    }
};

/// dst[i] = To(src[i]).
template <class To, class From>
struct cast_to {
    const From* src;
    To* dst;
    KATTN_HD void operator()(index_t i) const { dst[i] = To(src[i]); }
};

/// One recurrent step of one head, exactly the reference's `step` (state in double).
template <class Map, class W, class T>
struct step_heads {
    dspec<W> s;
    index_t dv;
    W scale;
    double eps;
    const T* q;
    const T* k;
    const T* v;
    double* S;
    double* z;
    double* C;
    index_t* steps;
    W* ws;  ///< per head: x, u (d + P), φ_k, φ_q (F each)
    T* out;
    KATTN_HD void operator()(index_t h) const {
        const index_t d = s.d, P = s.P, F = s.F;
        W* x = ws + h * (d + P + 2 * F);
        W* u = x + d;
        W* phk = u + P;
        W* phq = phk + F;
        auto act = [&](const T* src, W* ph) {
            for (index_t i = 0; i < d; ++i) x[i] = scale * W(src[i]);
            for (index_t p = 0; p < P; ++p) u[p] = W(0);
            for (index_t i = 0; i < d; ++i)
                for (index_t p = 0; p < P; ++p) u[p] += x[i] * s.omega[i * P + p];
            W c = W(0);
            if constexpr (Map::has_stabiliser) c = Map::template row_shift<scalar_ops>(s.params, d, s.m, x, u, s.bias);
            Map::template activate<scalar_ops>(s.params, d, s.m, x, u, s.bias, c, ph);
            return double(c);
        };
        double* Sh = S + h * F * dv;
        double* zh = z + h * F;
        const double ck = act(k + h * d, phk);
        const double Cn = steps[h] == 0 ? ck : (C[h] < ck ? ck : C[h]);
        if (steps[h] > 0 && Cn > C[h]) {
            const double r = ::exp(C[h] - Cn);
            for (index_t f = 0; f < F * dv; ++f) Sh[f] *= r;
            for (index_t f = 0; f < F; ++f) zh[f] *= r;
        }
        C[h] = Cn;
        ++steps[h];
        const double w = ::exp(ck - Cn);
        for (index_t f = 0; f < F; ++f) {
            zh[f] += w * double(phk[f]);
            for (index_t c = 0; c < dv; ++c) Sh[f * dv + c] += w * double(phk[f]) * double(v[h * dv + c]);
        }
        act(q + h * d, phq);
        double dn = 0;
        for (index_t f = 0; f < F; ++f) dn += double(phq[f]) * zh[f];
        bool cl = false;
        dn = guard_denominator<Map::is_positive>(dn, eps, cl);
        for (index_t c = 0; c < dv; ++c) {
            double acc = 0;
            for (index_t f = 0; f < F; ++f) acc += double(phq[f]) * Sh[f * dv + c];
            out[h * dv + c] = static_cast<T>(acc / dn);
        }
    }
};

// ---------------------------------------------------------------------------------------
// Host-side driver.
// ---------------------------------------------------------------------------------------

template <class V>
auto raw(V& v) {
    return ::thrust::raw_pointer_cast(v.data());
}

template <class Policy, class Fn>
void launch(index_t n, const Fn& fn) {
    if (n > 0) ::thrust::for_each_n(Policy{}, ::thrust::counting_iterator<index_t>(0), n, fn);
}

/// Host range → new device vector (one copy).
template <class T>
::thrust::device_vector<T> upload(const T* p, index_t n) {
    return ::thrust::device_vector<T>(p, p + n);
}

/// n device values in W at src → host T (cast on the device when T ≠ W, then one copy).
template <class Policy, class T, class W>
void download(const W* src, index_t n, T* dst) {
    if (n <= 0) return;
    if constexpr (std::is_same_v<T, W>) {
        const auto p = ::thrust::device_pointer_cast(src);
        ::thrust::copy(p, p + n, dst);
    } else {
        ::thrust::device_vector<T> tmp(static_cast<std::size_t>(n));
        launch<Policy>(n, cast_to<T, W>{src, raw(tmp)});
        ::thrust::copy(tmp.begin(), tmp.end(), dst);
    }
}

/// Ω and b widened to W on the device.
template <class Map, class W>
struct device_spectral {
    ::thrust::device_vector<W> omega, bias;
    dspec<W> view;
    template <class T>
    explicit device_spectral(const spectral_view<T>& sv) {
        const index_t P = Map::projection_dim(sv.m);
        std::vector<W> o(sv.omega, sv.omega + sv.d * P);
        omega = ::thrust::device_vector<W>(o.begin(), o.end());
        if (sv.bias) {
            std::vector<W> b(sv.bias, sv.bias + sv.m);
            bias = ::thrust::device_vector<W>(b.begin(), b.end());
        }
        view = dspec<W>{raw(omega), sv.bias ? raw(bias) : nullptr, sv.d, sv.m, P, Map::feature_dim(sv.m), sv.params};
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
    void run(const attention_problem<T>& pb) {
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
        launch<Policy>(rows, feature_rows<Map, W, T>{spec.view, raw(q), raw(k), qr, g.Lk, raw(nk), scale, true,
                                                      raw(ws), raw(phi), raw(shift)});
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
            launch<Policy>(qr * chunk, intra_scores<Map, W, T>{g, F, phq, phk, ck, raw(Cq), raw(v), nullptr, raw(K),
                                                                nullptr});
        }
        out.resize(sz(qr * g.dv));
        den.resize(sz(qr));
        clamped.resize(sz(qr));
        launch<Policy>(qr, emit_rows<Map, W, T>{g, F, W(pb.eps), phq, raw(S), raw(E), raw(Cq),
                                                 g.causal ? raw(K) : nullptr, raw(v), raw(out), raw(den),
                                                 raw(clamped)});
    }

    template <class Policy>
    explicit forward_state(const attention_problem<T>& pb, Policy) : spec(pb.spec) {
        run<Policy>(pb);
    }
};

}  // namespace kattn::detail::thrust_impl

namespace kattn::backends {

/// Thrust backend; see the file comment. `Policy` is the type of a Thrust execution
/// policy object (default: that of `thrust::device`), `Work` the working precision.
template <class Policy = std::remove_cv_t<std::remove_reference_t<decltype(::thrust::device)>>, class Work = double>
struct thrust {
    static constexpr const char* name = "thrust";
    struct backend_tag {};
    using policy_type = Policy;
    using work_type = Work;

    /// φ(s·x) of n rows, without stabiliser.
    template <class Map, class T>
    static void features(const detail::feature_problem<T>& pb) {
        namespace ti = detail::thrust_impl;
        using W = Work;
        const ti::device_spectral<Map, W> sp(pb.spec);
        const index_t d = sp.view.d, P = sp.view.P, F = sp.view.F;
        const auto x = ti::upload(pb.x, pb.n * d);
        ::thrust::device_vector<W> ws(static_cast<std::size_t>(pb.n * (d + P))), phi(static_cast<std::size_t>(pb.n * F));
        ti::launch<Policy>(pb.n, ti::feature_rows<Map, W, T>{sp.view, ti::raw(x), nullptr, pb.n, 1, nullptr,
                                                             W(pb.input_scale), false, ti::raw(ws), ti::raw(phi),
                                                             nullptr});
        ti::download<Policy>(ti::raw(phi), pb.n * F, pb.phi);
    }

    template <class Map, class T>
    static void forward(const detail::attention_problem<T>& pb, T* out) {
        namespace ti = detail::thrust_impl;
        const ti::forward_state<Map, Work, T> fs(pb, Policy{});
        ti::download<Policy>(ti::raw(fs.out), pb.problems * pb.q_len * pb.dv, out);
    }

    template <class Map, class T>
    static void backward(const detail::attention_problem<T>& pb, const detail::attention_gradients<T>& grads) {
        namespace ti = detail::thrust_impl;
        using W = Work;
        ti::forward_state<Map, W, T> fs(pb, Policy{});
        const ti::geometry& g = fs.g;
        const auto& sv = fs.spec.view;
        const index_t F = sv.F, d = sv.d, P = sv.P, m = sv.m, H = g.H, qr = g.q_rows(), rows = g.rows();
        auto sz = [](index_t n) { return static_cast<std::size_t>(n); };
        const W* phq = ti::raw(fs.phi);
        const W* phk = phq + qr * F;

        const auto G = ti::upload(grads.dout, qr * g.dv);
        ::thrust::device_vector<W> nt(sz(qr * g.dv1));
        ti::launch<Policy>(qr, ti::output_cotangent<W, T>{g, ti::raw(G), ti::raw(fs.out), ti::raw(fs.den),
                                                          ti::raw(fs.clamped), ti::raw(nt)});
        ::thrust::device_vector<W> M;
        if (g.causal) {
            M.resize(sz(qr * ti::chunk));
            ti::launch<Policy>(qr * ti::chunk,
                               ti::intra_scores<Map, W, T>{g, F, phq, phk, ti::raw(fs.shift) + qr, ti::raw(fs.Cq),
                                                           ti::raw(fs.v), ti::raw(nt), ti::raw(fs.K), ti::raw(M)});
        }
        const W* Mp = g.causal ? ti::raw(M) : nullptr;
        const W* Kp = g.causal ? ti::raw(fs.K) : nullptr;

        ::thrust::device_vector<W> dphi(sz(rows * F));
        ti::launch<Policy>(qr * F, ti::query_feature_grad<Map, W>{g, F, ti::raw(fs.S), ti::raw(fs.E), ti::raw(fs.Cq),
                                                                  Mp, phk, ti::raw(nt), ti::raw(dphi)});
        ::thrust::device_vector<W> B(sz(H * g.nb * F * g.dv1));
        ti::launch<Policy>(H * g.nb * F * g.dv1, ti::query_block_state<Map, W>{g, F, phq, ti::raw(nt), ti::raw(fs.E),
                                                                               ti::raw(fs.Cq), ti::raw(B)});
        ::thrust::device_vector<W> Dsuf;
        const W* D = ti::raw(B);  // non-causal: D = Σ_i φ_q,i ñ_iᵀ
        if (g.causal) {
            Dsuf.resize(B.size());
            ti::launch<Policy>(H * F * g.dv1, ti::block_suffix<Map, W>{g, F, ti::raw(fs.E), ti::raw(B), ti::raw(Dsuf)});
            D = ti::raw(Dsuf);
        }
        ::thrust::device_vector<W> dvv(sz(H * g.Lk * g.dv));
        ti::launch<Policy>(H * g.Lk * (F + g.dv),
                           ti::key_grads<W, T>{g, F, D, ti::raw(fs.kw), phq, phk, Kp, Mp, ti::raw(nt), ti::raw(fs.v),
                                               ti::raw(dphi) + qr * F, ti::raw(dvv)});

        const index_t wsz = Map::workspace(m), stride = P + d + wsz + (Map::uses_bias ? m : 0);
        ::thrust::device_vector<W> buf(sz(rows * stride)), dx(sz(rows * d));
        ti::launch<Policy>(rows, ti::vjp_rows<Map, W>{sv, g, stride, wsz, fs.scale, ti::raw(fs.ws), ti::raw(fs.phi),
                                                      ti::raw(fs.shift), ti::raw(dphi), ti::raw(buf), ti::raw(dx)});
        const index_t nspec = d * P + (Map::uses_bias ? m : 0);
        ::thrust::device_vector<W> dsp(sz(nspec));
        ti::launch<Policy>(nspec, ti::spectral_grads<W>{sv, g, stride, P + d + wsz, ti::raw(fs.ws), ti::raw(buf),
                                                        ti::raw(dsp)});

        // Results back: one copy per output.
        ti::download<Policy>(ti::raw(dx), qr * d, grads.dq);
        ti::download<Policy>(ti::raw(dx) + qr * d, H * g.Lk * d, grads.dk);
        ti::download<Policy>(ti::raw(dvv), H * g.Lk * g.dv, grads.dv);
        if (grads.d_omega || grads.d_bias) {
            std::vector<W> hs(sz(nspec));
            ::thrust::copy(dsp.begin(), dsp.end(), hs.begin());
            if (grads.d_omega)
                for (index_t i = 0; i < d * P; ++i) grads.d_omega[i] = static_cast<T>(hs[sz(i)]);
            if (grads.d_bias && Map::uses_bias)
                for (index_t i = 0; i < m; ++i) grads.d_bias[i] = static_cast<T>(hs[sz(d * P + i)]);
        }
    }

    /// One decoding step for every head (see reference::step). The state lives on the
    /// host: it is copied in and out once per call.
    template <class Map, class T>
    static void step(const detail::spectral_view<T>& spec, index_t problems, index_t dv, T input_scale, double eps,
                     const detail::recurrent_state_view& st, const T* q, const T* k, const T* v, T* out) {
        namespace ti = detail::thrust_impl;
        using W = Work;
        const ti::device_spectral<Map, W> sp(spec);
        const index_t d = sp.view.d, P = sp.view.P, F = sp.view.F;
        auto S = ti::upload(st.S, problems * F * dv);
        auto z = ti::upload(st.z, problems * F);
        auto C = ti::upload(st.C, problems);
        auto steps = ti::upload(st.steps, problems);
        const auto dq = ti::upload(q, problems * d), dk = ti::upload(k, problems * d), dvv = ti::upload(v, problems * dv);
        ::thrust::device_vector<W> ws(static_cast<std::size_t>(problems * (d + P + 2 * F)));
        ::thrust::device_vector<T> o(static_cast<std::size_t>(problems * dv));
        ti::launch<Policy>(problems, ti::step_heads<Map, W, T>{sp.view, dv, W(input_scale), eps, ti::raw(dq),
                                                               ti::raw(dk), ti::raw(dvv), ti::raw(S), ti::raw(z),
                                                               ti::raw(C), ti::raw(steps), ti::raw(ws), ti::raw(o)});
        ::thrust::copy(S.begin(), S.end(), st.S);
        ::thrust::copy(z.begin(), z.end(), st.z);
        ::thrust::copy(C.begin(), C.end(), st.C);
        ::thrust::copy(steps.begin(), steps.end(), st.steps);
        ::thrust::copy(o.begin(), o.end(), out);
    }
};

}  // namespace kattn::backends
