// kattn/linalg/gemm.hpp — small register-blocked matrix products (xsimd).
//
//   gemm<Arch>(M, N, K, A, a_rs, a_cs, B, ldb, C, ldc, accumulate)
//       C[i, j] (+)= Σ_k A[i·a_rs + k·a_cs] · B[k·ldb + j]
//
// B and C are row-major; A is addressed through two strides, so Aᵀ·B (a_rs = 1,
// a_cs = lda) and A·B (a_rs = lda, a_cs = 1) share one kernel. The micro-kernel keeps a
// block of C in registers (gemm_block_shape<Arch>: 8 rows × 2 batches, 6 × 4 with AVX-512's
// 32 registers), broadcasting A and streaming rows of B. Columns left of a whole block run
// in narrower panels (2 batches, then 1, then scalar); the rows left below the last whole
// block get one block of their own height (not one block per row, which would leave the
// FMA pipes waiting on two accumulators). The k-loop runs in order 0..K−1 for every element,
// so results are independent of blocking, instruction set (where it fuses multiply-adds)
// and thread count.
#pragma once

#include "../core/warnings_push.hpp"  // GCC PR 105593: false -Wmaybe-uninitialized in AVX-512 intrinsics

#include <algorithm>
#include <concepts>
#include <utility>

#include <xsimd/xsimd.hpp>

#include "../core/config.hpp"
#include "../core/detected.hpp"
#include "fused.hpp"

namespace kattn::detail {

/// MR × (NV batches) register block of C: C[i0.., j0..] (+)= Σ_k a(i, k) B[k, j].
template <class Arch, class T, int MR, int NV>
inline void gemm_block(index_t K, const T* A, index_t a_rs, index_t a_cs, const T* B, index_t ldb, T* C, index_t ldc,
                       bool accumulate) {
    using V = xsimd::batch<T, Arch>;
    constexpr index_t W = V::size;
    V acc[MR][NV];
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
        for (int h = 0; h < NV; ++h) acc[r][h] = V(T(0));
    for (index_t k = 0; k < K; ++k) {
        V b[NV];
#pragma GCC unroll 4
        for (int h = 0; h < NV; ++h) b[h] = V::load_unaligned(B + k * ldb + h * W);
#pragma GCC unroll 16
        for (int r = 0; r < MR; ++r) {
            const V x(A[r * a_rs + k * a_cs]);
#pragma GCC unroll 4
            for (int h = 0; h < NV; ++h) acc[r][h] = fmadd(x, b[h], acc[r][h]);
        }
    }
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
        for (int h = 0; h < NV; ++h) {
            T* c = C + r * ldc + h * W;
            (accumulate ? acc[r][h] + V::load_unaligned(c) : acc[r][h]).store_unaligned(c);
        }
}

/// Scalar fallback for the column tail: C[i, j] (+)= Σ_k a(i, k) B[k, j].
template <class T>
inline void gemm_scalar(index_t M, index_t N, index_t K, const T* A, index_t a_rs, index_t a_cs, const T* B,
                        index_t ldb, T* C, index_t ldc, bool accumulate) {
    for (index_t i = 0; i < M; ++i)
        for (index_t j = 0; j < N; ++j) {
            T s = 0;
            for (index_t k = 0; k < K; ++k) s += A[i * a_rs + k * a_cs] * B[k * ldb + j];
            T& c = C[i * ldc + j];
            c = accumulate ? c + s : s;
        }
}

/// Register-block shape of gemm<Arch>: `rows` rows of C × `vectors` batches of B's columns.
/// 8 × 2 (16 accumulators) by default: with AVX2's 16 registers it spills three accumulators,
/// yet on an AMD EPYC (Zen 4) neither 6 × 2 nor 5 × 2 was faster. AVX-512's 32 registers hold
/// 6 × 4 (24 accumulators, 4 rows of B, 1 broadcast): on an Intel Xeon (Sapphire Rapids
/// class) it ran the attention tile products 5–13 % faster than 8 × 2; on the Zen 4, which
/// splits 512-bit FMAs in two, no shape clearly won (bench/bench_gemm --blocks times others).
template <class Arch>
struct gemm_block_shape {
    static constexpr int rows = 8, vectors = 2;
};
template <class Arch>
requires std::derived_from<Arch, xsimd::avx512f>
struct gemm_block_shape<Arch> {
    static constexpr int rows = 6, vectors = 4;
};

/// The `rows` (< MR) rows left below the last whole block, as one block of that height.
template <class Arch, class T, int NV, int... R>
inline void gemm_block_rest(std::integer_sequence<int, R...>, index_t rows, index_t K, const T* A, index_t a_rs,
                            index_t a_cs, const T* B, index_t ldb, T* C, index_t ldc, bool accumulate) {
    (void)((rows == R + 1 ? (gemm_block<Arch, T, R + 1, NV>(K, A, a_rs, a_cs, B, ldb, C, ldc, accumulate), true)
                          : false) ||
           ...);
}

/// Rows [0, M) of one column panel of NV batches: blocks of MR rows, then one block of
/// the rows left over.
template <class Arch, class T, int MR, int NV>
inline void gemm_panel(index_t M, index_t K, const T* A, index_t a_rs, index_t a_cs, const T* B, index_t ldb, T* C,
                       index_t ldc, bool accumulate) {
    index_t i = 0;
    for (; i + MR <= M; i += MR)
        gemm_block<Arch, T, MR, NV>(K, A + i * a_rs, a_rs, a_cs, B, ldb, C + i * ldc, ldc, accumulate);
    if (i < M)
        gemm_block_rest<Arch, T, NV>(std::make_integer_sequence<int, MR - 1>{}, M - i, K, A + i * a_rs, a_rs, a_cs, B,
                                     ldb, C + i * ldc, ldc, accumulate);
}

/// Calls panel(j, nv) for the column panels of an N-column C, left to right: panels of NV
/// batches, then at most one of 2 and one of 1 batch (nv = 0: the scalar tail from j).
template <index_t W, int NV, class Panel>
inline void for_each_panel(index_t N, Panel&& panel) {
    index_t j = 0;
    for (; j + NV * W <= N; j += NV * W) panel(j, std::integral_constant<int, NV>{});
    if constexpr (NV > 2)
        for (; j + 2 * W <= N; j += 2 * W) panel(j, std::integral_constant<int, 2>{});
    if constexpr (NV > 1)
        for (; j + W <= N; j += W) panel(j, std::integral_constant<int, 1>{});
    if (j < N) panel(j, std::integral_constant<int, 0>{});
}

/// C (+)= A·B. MR × NV, the register block, is a parameter for bench/bench_gemm; every
/// shape gives the same bits.
template <class Arch, class T, int MR = gemm_block_shape<Arch>::rows, int NV = gemm_block_shape<Arch>::vectors>
void gemm(index_t M, index_t N, index_t K, const T* A, index_t a_rs, index_t a_cs, const T* B, index_t ldb, T* C,
          index_t ldc, bool accumulate) {
    constexpr index_t W = xsimd::batch<T, Arch>::size;
    // Column panels outermost: a panel of B (K × NV·W) stays in L1 while every row block of
    // A streams past it.
    for_each_panel<W, NV>(N, [&](index_t j, auto nv) {
        if constexpr (decltype(nv)::value == 0)
            gemm_scalar(M, N - j, K, A, a_rs, a_cs, B + j, ldb, C + j, ldc, accumulate);
        else
            gemm_panel<Arch, T, MR, decltype(nv)::value>(M, K, A, a_rs, a_cs, B + j, ldb, C + j, ldc, accumulate);
    });
}

/// Width of the column panel gemm<Arch> runs from column j of an N-column C (see
/// for_each_panel: nv batches, or the scalar tail when nv = 0).
template <index_t W>
constexpr index_t panel_width(index_t N, index_t j, int nv) {
    return nv == 0 ? N - j : nv * W;
}

/// B (K × N, row-major, leading dimension ldb) copied into Bp (K·N) as the column panels
/// gemm<Arch> walks, each K × width and contiguous, for gemm_packed_b. With a long row stride
/// (ldb of 256 floats = 1 KiB) the K rows of one panel fall into a few L1 sets and evict
/// each other while the row blocks of A stream past; packed, they are consecutive lines.
/// (NV, the block's width in batches, is a parameter for bench/bench_gemm.)
template <class Arch, class T, int NV = gemm_block_shape<Arch>::vectors>
void pack_b_panels(index_t K, index_t N, const T* B, index_t ldb, T* Bp) {
    constexpr index_t W = xsimd::batch<T, Arch>::size;
    for_each_panel<W, NV>(N, [&](index_t j, auto nv) {
        const index_t w = panel_width<W>(N, j, decltype(nv)::value);
        for (index_t k = 0; k < K; ++k) std::copy_n(B + k * ldb + j, w, Bp + j * K + k * w);
    });
}

/// C (+)= A·B with B packed by pack_b_panels<Arch>: the same products in the same k order as
/// gemm<Arch>, so the same bits. (MR × NV, the register block, is a parameter for
/// bench/bench_gemm; B must have been packed with the same NV.)
template <class Arch, class T, int MR = gemm_block_shape<Arch>::rows, int NV = gemm_block_shape<Arch>::vectors>
void gemm_packed_b(index_t M, index_t N, index_t K, const T* A, index_t a_rs, index_t a_cs, const T* Bp, T* C,
                   index_t ldc, bool accumulate) {
    constexpr index_t W = xsimd::batch<T, Arch>::size;
    for_each_panel<W, NV>(N, [&](index_t j, auto nv) {
        constexpr int vecs = decltype(nv)::value;
        const index_t w = panel_width<W>(N, j, vecs);
        if constexpr (vecs == 0)
            gemm_scalar(M, w, K, A, a_rs, a_cs, Bp + j * K, w, C + j, ldc, accumulate);
        else
            gemm_panel<Arch, T, MR, vecs>(M, K, A, a_rs, a_cs, Bp + j * K, w, C + j, ldc, accumulate);
    });
}

/// C = A·B (row-major A with leading dimension lda).
template <class Arch, class T>
void gemm_nn(index_t M, index_t N, index_t K, const T* A, index_t lda, const T* B, index_t ldb, T* C, index_t ldc,
             bool accumulate) {
    gemm<Arch>(M, N, K, A, lda, 1, B, ldb, C, ldc, accumulate);
}

/// C = Aᵀ·B where A is stored K × M row-major with leading dimension lda.
template <class Arch, class T>
void gemm_tn(index_t M, index_t N, index_t K, const T* A, index_t lda, const T* B, index_t ldb, T* C, index_t ldc,
             bool accumulate) {
    gemm<Arch>(M, N, K, A, 1, lda, B, ldb, C, ldc, accumulate);
}

/// C (+)= A·B for a lower-triangular use of C: only the entries C[i, j] with j ≤ i, rounded
/// up to whole batches, are written (entries above the diagonal may be left as they were or
/// hold partial products; the caller masks them). Every entry it writes is bitwise what gemm
/// writes (same k order).
template <class Arch, class T>
void gemm_lower(index_t M, index_t N, index_t K, const T* A, index_t a_rs, index_t a_cs, const T* B, index_t ldb, T* C,
                index_t ldc, bool accumulate) {
    constexpr index_t W = xsimd::batch<T, Arch>::size;
    constexpr index_t MR = gemm_block_shape<Arch>::rows;
    // Row blocks outermost: block [i, i + rows) needs the columns j < i + rows only, in whole
    // batches (a 64 × 64 float tile with AVX-512's 6-row blocks: 65 % of the full product).
    for (index_t i = 0; i < M; i += MR) {
        const index_t rows = std::min(MR, M - i), cols = std::min(N, (i + rows + W - 1) / W * W);
        gemm<Arch>(rows, cols, K, A + i * a_rs, a_rs, a_cs, B, ldb, C + i * ldc, ldc, accumulate);
    }
}

/// C (+)= A·B for a lower-triangular A (A[i, k] = 0 for k > i, as the masked intra-tile
/// scores): each block of MR rows runs k over [0, min(K, i + MR)) only. The skipped terms
/// are exact zeros, so for finite B every entry equals gemm's.
template <class Arch, class T>
void gemm_lower_a(index_t M, index_t N, index_t K, const T* A, index_t a_rs, index_t a_cs, const T* B, index_t ldb,
                  T* C, index_t ldc, bool accumulate) {
    constexpr index_t MR = gemm_block_shape<Arch>::rows;
    for (index_t i = 0; i < M; i += MR)
        gemm<Arch>(std::min(MR, M - i), N, std::min(K, i + MR), A + i * a_rs, a_rs, a_cs, B, ldb, C + i * ldc, ldc,
                   accumulate);
}

/// dst (cols × rows) = srcᵀ for a rows × cols row-major src. Blocks of 16 × 16 keep the
/// strided side of the copy within a few cache lines (a plain double loop writes one
/// element per cache line of dst).
template <class T>
void transpose(index_t rows, index_t cols, const T* src, index_t lds, T* dst, index_t ldd) {
    constexpr index_t B = 16;
    for (index_t i0 = 0; i0 < rows; i0 += B) {
        const index_t i1 = std::min(rows, i0 + B);
        for (index_t j0 = 0; j0 < cols; j0 += B) {
            const index_t j1 = std::min(cols, j0 + B);
            for (index_t j = j0; j < j1; ++j)
                for (index_t i = i0; i < i1; ++i) dst[j * ldd + i] = src[i * lds + j];
        }
    }
}

/// GEMM policies, published by execution backends as `execution_backend_traits<B>::gemm`:
/// `G::template run<T>(M, N, K, A, a_rs, a_cs, B, ldb, C, ldc, accumulate)` computes
/// C[i, j] (+)= Σ_k A[i·a_rs + k·a_cs] · B[k·ldb + j] with k in order 0..K−1.
struct scalar_gemm {
    template <class T>
    static void run(index_t M, index_t N, index_t K, const T* A, index_t a_rs, index_t a_cs, const T* B, index_t ldb,
                    T* C, index_t ldc, bool accumulate) {
        gemm_scalar(M, N, K, A, a_rs, a_cs, B, ldb, C, ldc, accumulate);
    }
};

template <class Arch = xsimd::default_arch>
struct simd_gemm {
    template <class T>
    static void run(index_t M, index_t N, index_t K, const T* A, index_t a_rs, index_t a_cs, const T* B, index_t ldb,
                    T* C, index_t ldc, bool accumulate) {
        gemm<Arch>(M, N, K, A, a_rs, a_cs, B, ldb, C, ldc, accumulate);
    }
};

template <class P>
using gemm_member = typename P::gemm;

/// The GEMM policy a policy (an execution backend) publishes as `gemm`; scalar_gemm when
/// it publishes none.
template <class P>
using gemm_of = detected_or_t<scalar_gemm, gemm_member, P>;

}  // namespace kattn::detail

#include "../core/warnings_pop.hpp"
