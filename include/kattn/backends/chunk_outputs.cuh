// kattn/backends/chunk_outputs.cuh — a forward pass's output stage in one kernel (nvcc only).
//
// After the states exist, the chunked forward (chunked/forward.hpp) makes its outputs with
// three batched products and two passes over memory: O = Φ_Q·S, the intra-chunk scores
// Φ_QΦ_Kᵀ, their mask, Oa = scores·[V, 1], then the out rows. Scores, O and Oa each go to
// device memory and come back. This kernel keeps them in shared memory: each thread block
// takes tiles of 64 query rows (output_tiles, chunked/kernels.hpp) and
//   1. causal: the 64 × 64 scores on tensor cores (WMMA m16n16k8, inputs rounded to
//      TF32, FP32 accumulation), then mask.apply on each (the mask_scores functor);
//   2. O (and, causal, Oa) on tensor cores for the value columns in whole tiles of 16, and
//      as plain FP32 dot products for the last dv1 mod 16 columns (the ones column that
//      gives the denominator is among them when dv is a multiple of 16);
//   3. every warp hands its rows to emit.apply (the emit_rows functor, warp_ops).
// Φ_Q, Φ_K, the states and V are read from device memory (through L1 and L2). Every output
// is written by one warp or thread in a fixed order: the same bits on every run.
// cuda_system::launch_chunk_outputs runs it when fused_outputs is set (float, non-exact
// products, F a multiple of 8, compute capability 8.0 or newer, the tiles within a block's
// shared memory).
#pragma once

#include <cuda_runtime.h>

#include <climits>
#include <cstddef>

#include "../core/config.hpp"
#include "tf32_tiles.cuh"

namespace kattn::detail {

/// Query rows per tile (the causal chunk) and threads per block of the output kernel.
inline constexpr int output_tile_rows = 64;
inline constexpr int output_threads = 256;

/// The shapes the kernel takes: F (the features, its products' depth) a multiple of 8,
/// dv1 (the value columns) a multiple of 4 (whole WMMA steps, 16-byte rows), both
/// positive and within int indexing of a tile.
inline bool chunk_outputs_shape(index_t F, index_t dv1) {
    return F > 0 && F % 8 == 0 && F <= index_t(INT_MAX / 64) && dv1 > 0 && dv1 % 4 == 0 && dv1 <= 65536;
}

/// Shared memory of one block: O (and, with the intra part, Oa and the scores).
inline std::size_t output_shared_bytes(int dv1, bool intra) {
    const std::size_t rows = output_tile_rows, o = std::size_t(tile_ld(dv1));
    return sizeof(float) * rows * (intra ? 2 * o + std::size_t(tile_ld(output_tile_rows)) : o);
}

template <class Tiles, class Mask, class Emit>
__global__ void __launch_bounds__(output_threads) chunk_outputs_kernel(Tiles t, Mask mask, Emit emit) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    namespace wmma = nvcuda::wmma;
    constexpr int C = output_tile_rows, RT = C / 16;
    extern __shared__ __align__(128) float output_smem[];
    const int F = int(t.F), dv1 = int(t.dv1), ldo = tile_ld(dv1), lds = tile_ld(C);
    const bool intra = t.intra();
    float* os = output_smem;    // O: C × ldo
    float* oas = os + C * ldo;  // Oa: C × ldo (intra)
    float* ss = oas + C * ldo;  // scores: C × lds (intra)
    const int warp = int(threadIdx.x) / 32, warps = int(blockDim.x) / 32;
    const int wide_tiles = dv1 / 16, wide = wide_tiles * 16;
    for (index_t ti = blockIdx.x; ti < t.count; ti += gridDim.x) {
        const float* q = t.phq + ti * C * F;
        const float* A = t.state(ti);
        const float* V = intra ? t.V1 + ti * C * dv1 : nullptr;
        if (intra) {
            // Scores: each job is one column tile of 16 keys and two row tiles of queries.
            const float* k = t.phk + ti * C * F;
            for (int job = warp; job < RT * RT / 2; job += warps) {
                const int ct = job % RT, rt0 = (job / RT) * 2;
                f32_acc acc[2];
                wmma::fill_fragment(acc[0], 0.0f);
                wmma::fill_fragment(acc[1], 0.0f);
                for (int f = 0; f < F; f += 8) {
                    tf32_bt b;
                    load_tf32(b, k + index_t(ct * 16) * F + f, F);
                    for (int r = 0; r < 2; ++r) {
                        tf32_a a;
                        load_tf32(a, q + index_t((rt0 + r) * 16) * F + f, F);
                        wmma::mma_sync(acc[r], a, b, acc[r]);
                    }
                }
                for (int r = 0; r < 2; ++r)
                    wmma::store_matrix_sync(ss + (rt0 + r) * 16 * lds + ct * 16, acc[r], unsigned(lds),
                                            wmma::mem_row_major);
            }
            __syncthreads();
            for (int e = int(threadIdx.x); e < C * C; e += int(blockDim.x)) {
                const int i = e / C, j = e % C;
                ss[i * lds + j] = mask.apply((ti * C + i) * C + j, ss[i * lds + j]);
            }
            __syncthreads();
        }
        // O and Oa in whole column tiles: job c < wide_tiles is O's column tile c (a sum
        // over the F features), job wide_tiles + c is Oa's (over the 64 keys); each job
        // covers the four row tiles, so a loaded column fragment serves four products.
        const int jobs = wide_tiles * (intra ? 2 : 1);
        for (int job = warp; job < jobs; job += warps) {
            const bool inter = job < wide_tiles;
            const int ct = inter ? job : job - wide_tiles;
            f32_acc acc[RT];
            for (int r = 0; r < RT; ++r) wmma::fill_fragment(acc[r], 0.0f);
            const int K = inter ? F : C;
            for (int kk = 0; kk < K; kk += 8) {
                tf32_b b;
                load_tf32(b, (inter ? A : V) + index_t(kk) * dv1 + ct * 16, dv1);
                for (int r = 0; r < RT; ++r) {
                    tf32_a a;
                    if (inter)
                        load_tf32(a, q + index_t(r * 16) * F + kk, F);
                    else
                        load_tf32(a, ss + r * 16 * lds + kk, lds);
                    wmma::mma_sync(acc[r], a, b, acc[r]);
                }
            }
            float* dst = inter ? os : oas;
            for (int r = 0; r < RT; ++r)
                wmma::store_matrix_sync(dst + r * 16 * ldo + ct * 16, acc[r], unsigned(ldo), wmma::mem_row_major);
        }
        // The last dv1 mod 16 columns: one thread per (row, column), FP32 dot products.
        const int tail = dv1 - wide;
        for (int e = int(threadIdx.x); e < C * tail; e += int(blockDim.x)) {
            const int i = e / tail, c = wide + e % tail;
            float s = 0.0f;
            for (int f = 0; f < F; ++f) s += q[index_t(i) * F + f] * A[index_t(f) * dv1 + c];
            os[i * ldo + c] = s;
            if (intra) {
                float sa = 0.0f;
                for (int j = 0; j < C; ++j) sa += ss[i * lds + j] * V[index_t(j) * dv1 + c];
                oas[i * ldo + c] = sa;
            }
        }
        __syncthreads();
        for (int i = warp; i < C; i += warps) emit.apply(ti * C + i, os + i * ldo, intra ? oas + i * ldo : nullptr);
        __syncthreads();
    }
#else
    (void)t, (void)mask, (void)emit;
#endif
}

}  // namespace kattn::detail
