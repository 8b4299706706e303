// kattn/attention/detail/softmax_kernels.hpp — raw-pointer kernels behind kattn::softmax_attention.
//
// One "problem" is one (batch, head) pair: Q [q_len, d], K [k_len, d], V [k_len, dv], all
// row-major contiguous. Each problem is processed start to finish by one thread in a fixed
// order, so results never depend on the number of threads. Vector primitives use
// xsimd::batch<T> of the architecture chosen by the compile flags (scalar fallback when xsimd
// finds none); their reduction order is fixed, hence deterministic for a given build.
#pragma once

// Before xsimd: GCC 12 reports PR 105593's false -W(maybe-)uninitialized at the intrinsic
// headers' lines, which take the diagnostic state of where they were first included.
#include "../../core/warnings_push.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <xsimd/xsimd.hpp>

#include "../../core/config.hpp"

#if !defined(XSIMD_NO_SUPPORTED_ARCHITECTURE)
#include "../../linalg/fused.hpp"
#include "../../linalg/gemm.hpp"
#endif

#if !defined(XSIMD_NO_SUPPORTED_ARCHITECTURE)
#define KATTN_SOFTMAX_USE_XSIMD 1
#else
#define KATTN_SOFTMAX_USE_XSIMD 0
#endif

namespace kattn::detail::softmax {

/// Queries per tile (forward) and keys per tile (forward and backward).
inline constexpr index_t block_q = 32;
inline constexpr index_t block_k = 64;

// ---------------------------------------------------------------- vector primitives

/// Σ a[i]·b[i].
template <class T>
inline T dot(const T* a, const T* b, index_t n) {
    index_t i = 0;
    T s = T(0);
#if KATTN_SOFTMAX_USE_XSIMD
    using B = xsimd::batch<T>;
    constexpr index_t W = static_cast<index_t>(B::size);
    if (n >= W) {
        B acc0(T(0)), acc1(T(0));
        for (; i + 2 * W <= n; i += 2 * W) {
            acc0 = fmadd(B::load_unaligned(a + i), B::load_unaligned(b + i), acc0);
            acc1 = fmadd(B::load_unaligned(a + i + W), B::load_unaligned(b + i + W), acc1);
        }
        for (; i + W <= n; i += W) acc0 = fmadd(B::load_unaligned(a + i), B::load_unaligned(b + i), acc0);
        s = xsimd::hadd(acc0 + acc1);
    }
#endif
    for (; i < n; ++i) s += a[i] * b[i];
    return s;
}

/// y += alpha·x.
template <class T>
inline void axpy(T alpha, const T* x, T* y, index_t n) {
    index_t i = 0;
#if KATTN_SOFTMAX_USE_XSIMD
    using B = xsimd::batch<T>;
    constexpr index_t W = static_cast<index_t>(B::size);
    const B a(alpha);
    for (; i + W <= n; i += W) fmadd(a, B::load_unaligned(x + i), B::load_unaligned(y + i)).store_unaligned(y + i);
#endif
    for (; i < n; ++i) y[i] += alpha * x[i];
}

/// y *= alpha.
template <class T>
inline void scal(T alpha, T* y, index_t n) {
    index_t i = 0;
#if KATTN_SOFTMAX_USE_XSIMD
    using B = xsimd::batch<T>;
    constexpr index_t W = static_cast<index_t>(B::size);
    const B a(alpha);
    for (; i + W <= n; i += W) (a * B::load_unaligned(y + i)).store_unaligned(y + i);
#endif
    for (; i < n; ++i) y[i] *= alpha;
}

/// s[j] ← exp(s[j] − shift); returns Σ s[j].
template <class T>
inline T exp_shift_sum(T* s, index_t n, T shift) {
    index_t i = 0;
    T sum = T(0);
#if KATTN_SOFTMAX_USE_XSIMD
    using B = xsimd::batch<T>;
    constexpr index_t W = static_cast<index_t>(B::size);
    if (n >= W) {
        const B sh(shift);
        B acc(T(0));
        for (; i + W <= n; i += W) {
            const B e = xsimd::exp(B::load_unaligned(s + i) - sh);
            e.store_unaligned(s + i);
            acc += e;
        }
        sum = xsimd::hadd(acc);
    }
#endif
    for (; i < n; ++i) {
        s[i] = std::exp(s[i] - shift);
        sum += s[i];
    }
    return sum;
}

// ---------------------------------------------------------------- one (batch, head) problem

template <class T>
struct problem {
    const T* q = nullptr;  // [q_len, d]
    const T* k = nullptr;  // [k_len, d]
    const T* v = nullptr;  // [k_len, dv]
    index_t q_len = 0;
    index_t k_len = 0;   // rows of k and v
    index_t n_keys = 0;  // valid keys: key_lengths[b] or k_len
    index_t d = 0, dv = 0;
    bool causal = false;
    T scale = T(1);

    /// One past the last key row i may attend to.
    index_t key_end(index_t i) const { return causal ? std::min(i + 1, n_keys) : n_keys; }
};

/// Online-softmax forward. Writes out [q_len, dv] and, if lse is non-null, the per-row
/// log-sum-exp of the scaled scores. srow is scratch of block_k values.
/// Returns false if a score was not finite (overflow of scale·q·k in T, or non-finite input).
template <class T>
bool forward_rows(const problem<T>& p, T* out, T* lse, T* srow) {
    constexpr T neg_inf = -std::numeric_limits<T>::infinity();
    const index_t d = p.d, dv = p.dv;
    bool ok = true;
    T m[block_q], l[block_q];
    for (index_t i0 = 0; i0 < p.q_len; i0 += block_q) {
        const index_t i1 = std::min(i0 + block_q, p.q_len);
        for (index_t i = i0; i < i1; ++i) {
            m[i - i0] = neg_inf;
            l[i - i0] = T(0);
            std::fill(out + i * dv, out + (i + 1) * dv, T(0));
        }
        const index_t jmax = p.key_end(i1 - 1);  // key_end is non-decreasing in i
        for (index_t j0 = 0; j0 < jmax; j0 += block_k) {
            const index_t j1 = std::min(j0 + block_k, jmax);
            for (index_t i = i0; i < i1; ++i) {
                const index_t je = std::min(j1, p.key_end(i));
                if (je <= j0) continue;
                const index_t n = je - j0;
                const T* qi = p.q + i * d;
                T bm = neg_inf;
                for (index_t j = 0; j < n; ++j) {
                    srow[j] = p.scale * dot(qi, p.k + (j0 + j) * d, d);
                    bm = std::max(bm, srow[j]);
                }
                if (!std::isfinite(bm)) ok = false;
                T& mi = m[i - i0];
                T& li = l[i - i0];
                T* oi = out + i * dv;
                if (bm > mi) {  // rescale the running sums to the new maximum
                    const T alpha = std::exp(mi - bm);
                    li *= alpha;
                    scal(alpha, oi, dv);
                    mi = bm;
                }
                li += exp_shift_sum(srow, n, mi);
                for (index_t j = 0; j < n; ++j) axpy(srow[j], p.v + (j0 + j) * dv, oi, dv);
            }
        }
        for (index_t i = i0; i < i1; ++i) {
            scal(T(1) / l[i - i0], out + i * dv, dv);
            if (lse) lse[i] = m[i - i0] + std::log(l[i - i0]);
        }
    }
    return ok;
}

/// Flash-attention style backward. out/lse are the forward results for this problem,
/// drow is scratch of q_len values (D_i = dout_i·out_i), srow scratch of block_k values.
/// Writes dq [q_len, d], dk [k_len, d], dv [k_len, dv] (overwritten, padded keys get 0).
template <class T>
void backward_rows(const problem<T>& p, const T* dout, const T* out, const T* lse, T* drow, T* srow, T* dq, T* dk,
                   T* dvv) {
    const index_t d = p.d, dv = p.dv;
    for (index_t i = 0; i < p.q_len; ++i) drow[i] = dot(dout + i * dv, out + i * dv, dv);
    std::fill(dq, dq + p.q_len * d, T(0));
    std::fill(dk, dk + p.k_len * d, T(0));
    std::fill(dvv, dvv + p.k_len * dv, T(0));
    for (index_t j0 = 0; j0 < p.n_keys; j0 += block_k) {
        const index_t j1 = std::min(j0 + block_k, p.n_keys);
        for (index_t i = p.causal ? j0 : 0; i < p.q_len; ++i) {
            const index_t je = std::min(j1, p.key_end(i));
            if (je <= j0) continue;
            const index_t n = je - j0;
            const T* qi = p.q + i * d;
            const T* gi = dout + i * dv;
            T* dqi = dq + i * d;
            for (index_t j = 0; j < n; ++j) srow[j] = p.scale * dot(qi, p.k + (j0 + j) * d, d);
            exp_shift_sum(srow, n, lse[i]);  // srow = P_ij
            for (index_t j = 0; j < n; ++j) {
                const index_t jj = j0 + j;
                const T pij = srow[j];
                axpy(pij, gi, dvv + jj * dv, dv);
                const T dp = dot(gi, p.v + jj * dv, dv);
                const T ds = p.scale * pij * (dp - drow[i]);
                axpy(ds, p.k + jj * d, dqi, d);
                axpy(ds, qi, dk + jj * d, d);
            }
        }
    }
}

#if KATTN_SOFTMAX_USE_XSIMD
// ---------------------------------------------------------------- tiled kernels (GEMM tiles)
//
// Blocks of tile × tile scores are products of register-blocked GEMM tiles
// (linalg/gemm.hpp): S = Q_I K_Jᵀ, O_I += P V_J, and in the backward dV_J += Pᵀ dO_I,
// dP = dO_I V_Jᵀ, dQ_I += dS K_J, dK_J += dSᵀ Q_I. Query and key blocks are aligned, so
// every processed row has at least one unmasked key in every processed block.

inline constexpr index_t tile = 64;

template <class T>
using gemm_arch = xsimd::default_arch;

/// Scores of query block [i0, i0+nq) against key block [j0, j0+nk): S = scale·Q Kᵀ with the
/// causal mask (−inf above the diagonal). kt is Kᵀ (d × k_len).
template <class T>
void block_scores(const problem<T>& p, const T* kt, index_t i0, index_t nq, index_t j0, index_t nk, T* S) {
    gemm_nn<gemm_arch<T>>(nq, nk, p.d, p.q + i0 * p.d, p.d, kt + j0, p.k_len, S, tile, false);
    constexpr T neg_inf = -std::numeric_limits<T>::infinity();
    for (index_t r = 0; r < nq; ++r) {
        T* row = S + r * tile;
        const index_t je = p.key_end(i0 + r) - j0;  // ≥ 1 for aligned blocks
        scal(p.scale, row, std::min(nk, je));
        for (index_t c = std::max<index_t>(je, 0); c < nk; ++c) row[c] = neg_inf;
    }
}

template <class T>
bool forward_tiled(const problem<T>& p, T* out, T* lse) {
    const index_t d = p.d, dv = p.dv;
    std::vector<T> kt(static_cast<std::size_t>(d * p.k_len)), S(static_cast<std::size_t>(tile * tile));
    transpose(p.k_len, d, p.k, d, kt.data(), p.k_len);
    T m[tile], l[tile];
    bool ok = true;
    for (index_t i0 = 0; i0 < p.q_len; i0 += tile) {
        const index_t nq = std::min(tile, p.q_len - i0);
        std::fill(out + i0 * dv, out + (i0 + nq) * dv, T(0));
        std::fill(m, m + tile, -std::numeric_limits<T>::infinity());
        std::fill(l, l + tile, T(0));
        const index_t jmax = p.key_end(i0 + nq - 1);
        for (index_t j0 = 0; j0 < jmax; j0 += tile) {
            const index_t nk = std::min(tile, jmax - j0);
            block_scores(p, kt.data(), i0, nq, j0, nk, S.data());
            for (index_t r = 0; r < nq; ++r) {
                T* row = S.data() + r * tile;
                T bm = row[0];
                for (index_t c = 1; c < nk; ++c) bm = std::max(bm, row[c]);
                if (!std::isfinite(bm)) ok = false;
                if (bm > m[r]) {
                    const T alpha = std::exp(m[r] - bm);
                    l[r] *= alpha;
                    scal(alpha, out + (i0 + r) * dv, dv);
                    m[r] = bm;
                }
                l[r] += exp_shift_sum(row, nk, m[r]);  // masked entries: exp(−inf) = 0
            }
            gemm_nn<gemm_arch<T>>(nq, dv, nk, S.data(), tile, p.v + j0 * dv, dv, out + i0 * dv, dv, true);
        }
        for (index_t r = 0; r < nq; ++r) {
            scal(T(1) / l[r], out + (i0 + r) * dv, dv);
            if (lse) lse[i0 + r] = m[r] + std::log(l[r]);
        }
    }
    return ok;
}

template <class T>
void backward_tiled(const problem<T>& p, const T* dout, const T* out, const T* lse, T* drow, T* dq, T* dk, T* dvv) {
    const index_t d = p.d, dv = p.dv;
    for (index_t i = 0; i < p.q_len; ++i) drow[i] = dot(dout + i * dv, out + i * dv, dv);
    std::fill(dq, dq + p.q_len * d, T(0));
    std::fill(dk, dk + p.k_len * d, T(0));
    std::fill(dvv, dvv + p.k_len * dv, T(0));
    std::vector<T> kt(static_cast<std::size_t>(d * p.k_len)), vt(static_cast<std::size_t>(dv * tile)),
        P(static_cast<std::size_t>(tile * tile)), dP(static_cast<std::size_t>(tile * tile));
    transpose(p.k_len, d, p.k, d, kt.data(), p.k_len);
    for (index_t j0 = 0; j0 < p.n_keys; j0 += tile) {
        const index_t nk = std::min(tile, p.n_keys - j0);
        transpose(nk, dv, p.v + j0 * dv, dv, vt.data(), tile);
        for (index_t i0 = p.causal ? (j0 / tile) * tile : 0; i0 < p.q_len; i0 += tile) {
            const index_t nq = std::min(tile, p.q_len - i0);
            block_scores(p, kt.data(), i0, nq, j0, nk, P.data());
            for (index_t r = 0; r < nq; ++r) exp_shift_sum(P.data() + r * tile, nk, lse[i0 + r]);  // P_ij
            // dV_J += Pᵀ dO_I;  dP = dO_I V_Jᵀ;  dS = scale·P ⊙ (dP − D_i)
            gemm_tn<gemm_arch<T>>(nk, dv, nq, P.data(), tile, dout + i0 * dv, dv, dvv + j0 * dv, dv, true);
            gemm_nn<gemm_arch<T>>(nq, nk, dv, dout + i0 * dv, dv, vt.data(), tile, dP.data(), tile, false);
            for (index_t r = 0; r < nq; ++r) {
                const T Di = drow[i0 + r];
                T* pr = P.data() + r * tile;
                const T* dpr = dP.data() + r * tile;
                for (index_t c = 0; c < nk; ++c) pr[c] = p.scale * pr[c] * (dpr[c] - Di);
            }
            // dQ_I += dS K_J;  dK_J += dSᵀ Q_I
            gemm_nn<gemm_arch<T>>(nq, d, nk, P.data(), tile, p.k + j0 * d, d, dq + i0 * d, d, true);
            gemm_tn<gemm_arch<T>>(nk, d, nq, P.data(), tile, p.q + i0 * d, d, dk + j0 * d, d, true);
        }
    }
}
#endif

/// Forward of one problem (tiled GEMM kernels when xsimd has an architecture).
template <class T>
bool forward(const problem<T>& p, T* out, T* lse, T* srow) {
#if KATTN_SOFTMAX_USE_XSIMD
    (void)srow;
    return forward_tiled(p, out, lse);
#else
    return forward_rows(p, out, lse, srow);
#endif
}

/// Backward of one problem (see backward_rows for the contract).
template <class T>
void backward(const problem<T>& p, const T* dout, const T* out, const T* lse, T* drow, T* srow, T* dq, T* dk, T* dvv) {
#if KATTN_SOFTMAX_USE_XSIMD
    (void)srow;
    backward_tiled(p, dout, out, lse, drow, dq, dk, dvv);
#else
    backward_rows(p, dout, out, lse, drow, srow, dq, dk, dvv);
#endif
}

}  // namespace kattn::detail::softmax

#include "../../core/warnings_pop.hpp"
