// kattn/backends/causal_single_pass_grads.cuh — the causal backward's two walks over the
// chunks (nvcc only).
//
// chunked/single_pass_grads.hpp gives the formulas. Each thread block owns one head and one
// group of cw columns of the cotangents ñ and of v' = [v, 1]; the tiles of a chunk of 64
// tokens are built by the warps from the job's rows (a few rows' loads in flight at a
// time), every product runs on tensor cores (WMMA m16n16k8, TF32 inputs, FP32 accumulation)
// and every sum has one writer and a fixed order: the same bits on every run.
//   single_pass_dq_kernel, chunks in order, S' (F × cw) on chip; per chunk:
//     M = mask(Ñ·V'ᵀ); the group's share of dΦ_Q = Ñ·S'ᵀ + M·Φ_K; S' += Φ_Kᵀ·V'
//   single_pass_dkv_kernel, chunks in reverse order, T (F × cw) on chip; per chunk:
//     A = mask(Φ_QΦ_Kᵀ), M = mask(Ñ·V'ᵀ); the group's share of dΦ_K = Mᵀ·Φ_Q + V'·Tᵀ;
//     dV's columns = Aᵀ·Ñ + Φ_K·T; T += Φ_Qᵀ·Ñ
// The shares of dΦ go straight from the accumulators to device memory (rows of F floats);
// dV's columns through shared memory to the job's rows. cuda_system::launch_single_pass_grads
// runs both where single_pass_grads_width answers a width.
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

/// Step 1 of both walks: the chunk's tiles from the job's rows (Φ_Q only when phq is set).
template <class Job>
__device__ void build_tiles(const Job& job, const typename Job::head_rows& hr, index_t t0, index_t c0,
                            const single_pass_grads_layout& lay, float* phq, float* phk, float* nt, float* vt,
                            float* stage) {
    constexpr int warps = single_pass_threads / 32;
    phi_tiles(job.rows, hr, t0, lay.ldx, lay.ldf, phq, phk, stage);
    row_batches([&](int i, int n) {
        job.cotangents(hr, t0 + i, warps, n, c0, nt + i * lay.ldc, warps * lay.ldc);
        job.values(hr, t0 + i, warps, n, c0, vt + i * lay.ldc, warps * lay.ldc);
    });
}

/// M = Ñ·V'ᵀ (and, with phq set, A = Φ_QΦ_Kᵀ), both masked to j ≤ i. Ends synced.
__device__ inline void scores(const single_pass_grads_layout& lay, int F, int cw, const float* phq, const float* phk,
                              const float* nt, const float* vt, float* A, float* M) {
    namespace wmma = nvcuda::wmma;
    constexpr int C = 64, RT = C / 16, warps = single_pass_threads / 32;
    const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
    const int jobs = (phq ? 2 : 1) * RT * RT;
    for (int t = warp; t < jobs; t += warps) {
        const bool m = t < RT * RT;
        const int rt = (t % (RT * RT)) / RT, kt = t % RT;
        f32_acc acc;
        wmma::fill_fragment(acc, 0.0f);
        const float* a = m ? nt + rt * 16 * lay.ldc : phq + rt * 16 * lay.ldf;
        const float* b = m ? vt + kt * 16 * lay.ldc : phk + kt * 16 * lay.ldf;
        const int ld = m ? lay.ldc : lay.ldf;
        mma_tf32_a_bt(acc, a, ld, b, ld, m ? cw : F);
        wmma::store_matrix_sync((m ? M : A) + rt * 16 * lay.lds + kt * 16, acc, unsigned(lay.lds), wmma::mem_row_major);
    }
    __syncthreads();
    for (int i = warp; i < C; i += warps)
        for (int j = lane; j < C; j += 32)
            if (j > i) {
                M[i * lay.lds + j] = 0.0f;
                if (phq) A[i * lay.lds + j] = 0.0f;
            }
    __syncthreads();
}

/// state += Xᵀ·Y for the chunk's tiles X (64 × F, ld ldf) and Y (64 × cw, ld ldc), each
/// warp loading its 16 × 16 state tiles as accumulators. No sync.
__device__ inline void add_state(const single_pass_grads_layout& lay, int F, int cw, const float* X, const float* Y,
                                 float* state) {
    namespace wmma = nvcuda::wmma;
    constexpr int C = 64, warps = single_pass_threads / 32;
    const int warp = int(threadIdx.x) / 32, ct_n = cw / 16, ft_n = F / 16;
    for (int t = warp; t < ft_n * ct_n; t += warps) {
        const int ft = t / ct_n, ct = t % ct_n;
        f32_acc acc;
        wmma::load_matrix_sync(acc, state + ft * 16 * lay.ldc + ct * 16, unsigned(lay.ldc), wmma::mem_row_major);
        mma_tf32_at_b(acc, X + ft * 16, lay.ldf, Y + ct * 16, lay.ldc, C);
        wmma::store_matrix_sync(state + ft * 16 * lay.ldc + ct * 16, acc, unsigned(lay.ldc), wmma::mem_row_major);
    }
}

}  // namespace single_pass_detail
#endif

/// The forward walk: each group's share of dΦ_Q (see the file comment).
template <class Job>
__global__ void __launch_bounds__(single_pass_threads, 2) single_pass_dq_kernel(Job job) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    namespace wmma = nvcuda::wmma;
    namespace sd = single_pass_detail;
    constexpr int C = 64, RT = C / 16, warps = single_pass_threads / 32;
    extern __shared__ __align__(128) float single_pass_grads_smem[];
    const int F = int(job.g().F), cw = int(job.cw), ft_n = F / 16;
    const single_pass_grads_layout lay(int(job.g().d), F, cw, false);
    float* sm = single_pass_grads_smem;
    float *phk = sm + lay.phk, *nt = sm + lay.nt, *vt = sm + lay.vt, *M = sm + lay.M, *S = sm + lay.state;
    const int warp = int(threadIdx.x) / 32;
    float* stage = sm + lay.stage + warp * single_pass_stage_rows * lay.ldx;
    const index_t groups = job.groups(), nc = job.chunks();
    for (index_t bj = blockIdx.x; bj < job.jobs(); bj += gridDim.x) {
        const index_t p = bj / groups, grp = bj % groups, c0 = grp * cw;
        const auto hr = job.head(p);
        for (int e = int(threadIdx.x); e < F * lay.ldc; e += int(blockDim.x)) S[e] = 0.0f;
        __syncthreads();
        for (index_t b = 0; b < nc; ++b) {
            const index_t t0 = b * C;
            sd::build_tiles(job, hr, t0, c0, lay, nullptr, phk, nt, vt, stage);
            __syncthreads();
            sd::scores(lay, F, cw, nullptr, phk, nt, vt, nullptr, M);
            for (int t = warp; t < RT * ft_n; t += warps) {
                const int rt = t / ft_n, ft = t % ft_n;
                f32_acc acc;
                wmma::fill_fragment(acc, 0.0f);
                mma_tf32_a_bt(acc, nt + rt * 16 * lay.ldc, lay.ldc, S + ft * 16 * lay.ldc, lay.ldc, cw);  // Ñ·S'ᵀ
                mma_tf32_rows(acc, M + rt * 16 * lay.lds, lay.lds, phk + ft * 16, lay.ldf, C);
                wmma::store_matrix_sync(job.share(false, grp, p, t0 + rt * 16) + ft * 16, acc, unsigned(F),
                                        wmma::mem_row_major);
            }
            __syncthreads();
            sd::add_state(lay, F, cw, phk, vt, S);
            __syncthreads();
        }
    }
#else
    (void)job;
#endif
}

/// The reverse walk: each group's share of dΦ_K and dV's columns (see the file comment).
template <class Job>
__global__ void __launch_bounds__(single_pass_threads, 1) single_pass_dkv_kernel(Job job) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    namespace wmma = nvcuda::wmma;
    namespace sd = single_pass_detail;
    constexpr int C = 64, RT = C / 16, warps_c = single_pass_threads / 32;
    constexpr int max_jobs = RT * (single_pass_max_cw / 16) / warps_c;
    extern __shared__ __align__(128) float single_pass_grads_smem[];
    const int F = int(job.g().F), cw = int(job.cw), ft_n = F / 16, ct_n = cw / 16;
    const single_pass_grads_layout lay(int(job.g().d), F, cw, true);
    float* sm = single_pass_grads_smem;
    float *phq = sm + lay.phq, *phk = sm + lay.phk, *nt = sm + lay.nt, *vt = sm + lay.vt;
    float *A = sm + lay.A, *M = sm + lay.M, *T = sm + lay.state;
    const int warp = int(threadIdx.x) / 32, warps = warps_c;
    float* stage = sm + lay.stage + warp * single_pass_stage_rows * lay.ldx;
    const index_t groups = job.groups(), nc = job.chunks();
    for (index_t bj = blockIdx.x; bj < job.jobs(); bj += gridDim.x) {
        const index_t p = bj / groups, grp = bj % groups, c0 = grp * cw;
        const auto hr = job.head(p);
        for (int e = int(threadIdx.x); e < F * lay.ldc; e += int(blockDim.x)) T[e] = 0.0f;
        __syncthreads();
        for (index_t b = nc - 1; b >= 0; --b) {
            const index_t t0 = b * C;
            sd::build_tiles(job, hr, t0, c0, lay, phq, phk, nt, vt, stage);
            __syncthreads();
            sd::scores(lay, F, cw, phq, phk, nt, vt, A, M);
            // The group's share of dΦ_K = Mᵀ·Φ_Q + V'·Tᵀ, straight to device memory.
            for (int t = warp; t < RT * ft_n; t += warps) {
                const int jt = t / ft_n, ft = t % ft_n;
                f32_acc acc;
                wmma::fill_fragment(acc, 0.0f);
                mma_tf32_at_b(acc, M + jt * 16, lay.lds, phq + ft * 16, lay.ldf, C);
                mma_tf32_a_bt(acc, vt + jt * 16 * lay.ldc, lay.ldc, T + ft * 16 * lay.ldc, lay.ldc, cw);
                wmma::store_matrix_sync(job.share(true, grp, p, t0 + jt * 16) + ft * 16, acc, unsigned(F),
                                        wmma::mem_row_major);
            }
            // dV's columns = Aᵀ·Ñ + Φ_K·T, kept in registers until every warp is done with V'.
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
#pragma unroll
            for (int u = 0; u < max_jobs; ++u) {
                const int t = warp + u * warps_c;
                if (t >= RT * ct_n) break;
                const int jt = t / ct_n, ct = t % ct_n;
                wmma::store_matrix_sync(vt + jt * 16 * lay.ldc + ct * 16, dvt[u], unsigned(lay.ldc),
                                        wmma::mem_row_major);
            }
            sd::add_state(lay, F, cw, phq, nt, T);  // T is not read again in this chunk
            __syncthreads();
            for (int j = warp; j < C; j += warps) job.emit_values(hr, t0 + j, c0, vt + j * lay.ldc);
            __syncthreads();
        }
    }
#else
    (void)job;
#endif
}

}  // namespace kattn::detail
