// kattn/backends/causal_single_pass_grads.cuh — the causal backward's three walks over the
// chunks (nvcc only).
//
// chunked/single_pass_grads.hpp gives the formulas. The tiles of a chunk of 64 tokens are
// built by the warps from the job's rows (a few rows' loads in flight at a time), every
// product runs on tensor cores (WMMA m16n16k8, TF32 inputs, FP32 accumulation) and every
// sum has one writer and a fixed order: the same bits on every run.
//   single_pass_dphi_kernel<false>: dφ_Q. Each block owns one head and a group of fw
//     features; chunks in order, the group's rows of S' (fw × (dv + 1)) on chip; per chunk:
//     M = mask_{j ≤ i}(Ñ·V'ᵀ); dΦ_Q's features = M·Φ_K + Ñ·S'ᵀ; S' += Φ_Kᵀ·V'.
//   single_pass_dphi_kernel<true>: dφ_K, the same with the roles of Ñ and V' swapped;
//     chunks in reverse order, T's rows on chip: M' = mask_{i ≥ j}(V'·Ñᵀ);
//     dΦ_K's features = M'·Φ_Q + V'·Tᵀ; T += Φ_Qᵀ·Ñ.
//     Fused (job.fused: element-wise maps, no parameter gradients), each tile of dφ goes
//     through the warp's 16 × 16 of shared memory and its lanes write dq or dk of its
//     elements (the map's VJP of each, job.emit_input_grad) instead of dφ.
//   single_pass_dv_kernel: dV. Each block owns one head and a group of cw value columns;
//     chunks in reverse order, T's columns (F × cw) on chip; per chunk:
//     A = mask_{j ≤ i}(Φ_QΦ_Kᵀ); dV's columns = Aᵀ·Ñ + Φ_K·T; T += Φ_Qᵀ·Ñ.
// Every block of the dφ walks holds ñ and v' whole and computes M itself, so its features
// of dφ are complete when it writes them (straight from the accumulators to device memory,
// rows of F floats): nothing is summed across blocks. dV's columns go through shared
// memory to the job's rows. cuda_system::launch_single_pass_grads runs the three where
// single_pass_grads_plan answers widths.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "../core/config.hpp"
#include "causal_single_pass.cuh"
#include "single_pass_plan.hpp"
#include "tf32_tiles.cuh"
#include "warp_ops.cuh"

namespace kattn::detail {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
// The walks' shared steps (device code for compute capability 8.0 and newer only, as the
// TF32 fragments are).
namespace single_pass_detail {

/// S = X·Yᵀ (64 × 64, depth K) masked: j ≤ i kept (lower) or i ≤ j kept (upper), for row i
/// and column j. Ends synced.
__device__ inline void masked_product(const float* X, int ldx, const float* Y, int ldy, int K, float* S, int lds,
                                      bool upper) {
    namespace wmma = nvcuda::wmma;
    constexpr int C = 64, RT = C / 16, warps = single_pass_threads / 32;
    const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
    for (int t = warp; t < RT * RT; t += warps) {
        const int rt = t / RT, kt = t % RT;
        f32_acc acc;
        wmma::fill_fragment(acc, 0.0f);
        mma_tf32_a_bt(acc, X + rt * 16 * ldx, ldx, Y + kt * 16 * ldy, ldy, K);
        wmma::store_matrix_sync(S + rt * 16 * lds + kt * 16, acc, unsigned(lds), wmma::mem_row_major);
    }
    __syncthreads();
    for (int i = warp; i < C; i += warps)
        for (int j = lane; j < C; j += 32)
            if (upper ? j < i : j > i) S[i * lds + j] = 0.0f;
    __syncthreads();
}
}  // namespace single_pass_detail
#endif

/// dφ_Q's walk (Keys = false) or dφ_K's (Keys = true): each block's features of dφ for
/// every row of its head (see the file comment).
template <bool Keys, class Job>
__global__ void __launch_bounds__(single_pass_threads, 1) single_pass_dphi_kernel(Job job) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    namespace wmma = nvcuda::wmma;
    namespace sd = single_pass_detail;
    constexpr int C = 64, RT = C / 16, warps = single_pass_threads / 32;
    extern __shared__ __align__(128) float single_pass_grads_smem[];
    const int F = int(job.g().F), fw = int(job.fw), wn = single_pass_whole_columns(job.g().dv);
    const single_pass_dphi_layout lay(int(job.g().d), F, fw, wn);
    float* sm = single_pass_grads_smem;
    float *phi = sm + lay.phi, *nt = sm + lay.nt, *vt = sm + lay.vt, *M = sm + lay.M, *S = sm + lay.state;
    // X·stateᵀ and stateᵀ's update from Y: (Ñ, V') for the queries, (V', Ñ) for the keys.
    const float* X = Keys ? vt : nt;
    const float* Y = Keys ? nt : vt;
    const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
    float* stage = sm + lay.stage + warp * single_pass_stage_rows * lay.ldx;
    float* tile = sm + lay.tiles + warp * 256;
    const index_t groups = job.feature_groups(), nc = job.chunks();
    for (index_t bj = blockIdx.x; bj < job.feature_jobs(); bj += gridDim.x) {
        const index_t p = bj / groups, grp = bj % groups;
        const int f0 = int(grp) * fw, fn = F - f0 < fw ? F - f0 : fw, ft_n = fn / 16;
        const auto hr = job.head(p);
        for (int e = int(threadIdx.x); e < fw * lay.ldn; e += int(blockDim.x)) S[e] = 0.0f;
        __syncthreads();
        for (index_t s = 0; s < nc; ++s) {
            const index_t t0 = (Keys ? nc - 1 - s : s) * C;
            // Φ of the other side's rows (keys for dφ_Q, queries for dφ_K), ñ and v' whole.
            sd::phi_tiles(job.rows, hr, t0, lay.ldx, lay.ldf, Keys ? phi : nullptr, Keys ? nullptr : phi, stage);
            sd::row_batches([&](int i, int n) {
                job.cotangents(hr, t0 + i, warps, n, 0, wn, nt + i * lay.ldn, warps * lay.ldn);
                job.values(hr, t0 + i, warps, n, wn, vt + i * lay.ldn, warps * lay.ldn);
            });
            __syncthreads();
            sd::masked_product(X, lay.ldn, Y, lay.ldn, wn, M, lay.lds, Keys);
            for (int t = warp; t < RT * ft_n; t += warps) {
                const int rt = t / ft_n, ft = t % ft_n;
                f32_acc acc;
                wmma::fill_fragment(acc, 0.0f);
                mma_tf32_rows(acc, M + rt * 16 * lay.lds, lay.lds, phi + f0 + ft * 16, lay.ldf, C);
                mma_tf32_a_bt(acc, X + rt * 16 * lay.ldn, lay.ldn, S + ft * 16 * lay.ldn, lay.ldn, wn);
                if (job.fused) {
                    wmma::store_matrix_sync(tile, acc, 16u, wmma::mem_row_major);
                    __syncwarp();
                    for (int e = lane; e < 256; e += 32)
                        job.emit_input_grad(hr, t0 + rt * 16 + e / 16, Keys, f0 + ft * 16 + e % 16, tile[e]);
                    __syncwarp();
                } else {
                    wmma::store_matrix_sync(job.dphi(Keys, p, t0 + rt * 16) + f0 + ft * 16, acc, unsigned(F),
                                            wmma::mem_row_major);
                }
            }
            __syncthreads();
            sd::add_state(fn, wn, phi + f0, lay.ldf, Y, lay.ldn, S, lay.ldn);
            __syncthreads();
        }
    }
#else
    (void)job;
#endif
}

/// dV's walk: each block's columns of dV for every key of its head (see the file comment).
template <class Job>
__global__ void __launch_bounds__(single_pass_threads, 1) single_pass_dv_kernel(Job job) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    namespace wmma = nvcuda::wmma;
    namespace sd = single_pass_detail;
    constexpr int C = 64, RT = C / 16, warps_c = single_pass_threads / 32;
    constexpr int max_jobs = RT * (single_pass_max_cw / 16) / warps_c;
    extern __shared__ __align__(128) float single_pass_grads_smem[];
    const int F = int(job.g().F), cw = int(job.cw), ct_n = cw / 16;
    const single_pass_dv_layout lay(int(job.g().d), F, cw);
    float* sm = single_pass_grads_smem;
    float *phq = sm + lay.phq, *phk = sm + lay.phk, *nt = sm + lay.nt, *A = sm + lay.A, *T = sm + lay.state;
    const int warp = int(threadIdx.x) / 32, warps = warps_c;
    float* stage = sm + lay.stage + warp * single_pass_stage_rows * lay.ldx;
    const index_t groups = job.value_groups(), nc = job.chunks();
    for (index_t bj = blockIdx.x; bj < job.value_jobs(); bj += gridDim.x) {
        const index_t p = bj / groups, grp = bj % groups, c0 = grp * cw;
        const auto hr = job.head(p);
        for (int e = int(threadIdx.x); e < F * lay.ldc; e += int(blockDim.x)) T[e] = 0.0f;
        __syncthreads();
        for (index_t b = nc - 1; b >= 0; --b) {
            const index_t t0 = b * C;
            sd::phi_tiles(job.rows, hr, t0, lay.ldx, lay.ldf, phq, phk, stage);
            sd::row_batches(
                [&](int i, int n) { job.cotangents(hr, t0 + i, warps, n, c0, cw, nt + i * lay.ldc, warps * lay.ldc); });
            __syncthreads();
            sd::masked_product(phq, lay.ldf, phk, lay.ldf, F, A, lay.lds, false);
            // dV's columns = Aᵀ·Ñ + Φ_K·T, kept in registers until T has taken in Ñ.
            f32_acc dvt[max_jobs];
#pragma unroll
            for (int u = 0; u < max_jobs; ++u) {
                const int t = warp + u * warps_c;
                if (t >= RT * ct_n) break;
                const int jt = t / ct_n, ct = t % ct_n;
                wmma::fill_fragment(dvt[u], 0.0f);
                mma_tf32_at_b(dvt[u], A + jt * 16, lay.lds, nt + ct * 16, lay.ldc, C);
                mma_tf32_rows(dvt[u], phk + jt * 16 * lay.ldf, lay.ldf, T + ct * 16, lay.ldc, F);
            }
            __syncthreads();
            sd::add_state(F, cw, phq, lay.ldf, nt, lay.ldc, T, lay.ldc);
            __syncthreads();
#pragma unroll
            for (int u = 0; u < max_jobs; ++u) {
                const int t = warp + u * warps_c;
                if (t >= RT * ct_n) break;
                const int jt = t / ct_n, ct = t % ct_n;
                wmma::store_matrix_sync(nt + jt * 16 * lay.ldc + ct * 16, dvt[u], unsigned(lay.ldc),
                                        wmma::mem_row_major);
            }
            __syncthreads();
            for (int j = warp; j < C; j += warps) job.emit_values(hr, t0 + j, c0, nt + j * lay.ldc);
            __syncthreads();
        }
    }
#else
    (void)job;
#endif
}

}  // namespace kattn::detail
