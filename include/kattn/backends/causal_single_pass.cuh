// kattn/backends/causal_single_pass.cuh — the causal forward in one kernel (nvcc only).
//
// For maps without a stabiliser and Ω = I (chunked/single_pass.hpp says why that is
// enough), each thread block owns one head and one group of cw value columns, and walks
// the head's chunks of 64 tokens in order with the running state S (F × cw) and z (F) in
// shared memory. Per chunk:
//   1. every warp gathers its query and key rows a few at a time (their loads in flight
//      together), builds their φ (the job's row functions, warp_ops) into the tiles Φ_Q
//      and Φ_K, and loads its value rows into V;
//   2. the scores Φ_QΦ_Kᵀ (64 × 64) on tensor cores (WMMA m16n16k8, inputs rounded to
//      TF32, FP32 accumulation), masked to j ≤ i; den_i = Σ_j scores_ij + φ_q,i·z in FP32;
//   3. the numerators Φ_Q·S + scores·V in one accumulator per 16 × 16 tile, stored over
//      Φ_Q, and every warp writes its rows' outputs (job.emit);
//   4. S += Φ_Kᵀ·V on tensor cores (each warp loads its state tiles, adds, stores them
//      back) and z += the column sums of Φ_K in FP32.
// No scratch in device memory; q, k and v are read once per column group and out written
// once. Every output has one writer and a fixed order of operations: the same bits on every
// run. cuda_system::launch_causal_single_pass runs it when single_pass is set (float work,
// non-exact products, F a multiple of 16, a device of compute capability 8.0 or newer, the
// tiles within a block's shared memory).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "../core/config.hpp"
#include "single_pass_plan.hpp"
#include "tf32_tiles.cuh"
#include "warp_ops.cuh"

namespace kattn::detail {

// The steps of a chunk that both single passes (and the backward's walks,
// causal_single_pass_grads.cuh) take alike.
namespace single_pass_detail {

/// f(i, n) for each of the calling warp's batches of a chunk's rows: n rows (at most
/// single_pass_stage_rows), the first row i, then i + warps, … (warp w takes rows w, w + warps, …).
template <class F>
__device__ void row_batches(F&& f) {
    constexpr int warps = single_pass_threads / 32, rows_per_warp = 64 / warps;
    const int warp = int(threadIdx.x) / 32;
    for (int r0 = 0; r0 < rows_per_warp; r0 += single_pass_stage_rows)
        f(warp + r0 * warps, rows_per_warp - r0 < single_pass_stage_rows ? rows_per_warp - r0 : single_pass_stage_rows);
}

/// Φ_Q and Φ_K of the chunk from token t0 on (each where its tile is set): each warp gathers
/// a batch of its rows (their loads in flight together) into its stage (leading dimension
/// ldx), then activates them one by one into the tile (leading dimension ldf). Rows has the
/// row functions of single_pass_job (gather, activate).
template <class Rows, class HeadRows>
__device__ void phi_tiles(const Rows& rows, const HeadRows& hr, index_t t0, int ldx, int ldf, float* phq, float* phk,
                          float* stage) {
    constexpr int warps = single_pass_threads / 32;
    for (int side = phq ? 0 : 1; side < (phk ? 2 : 1); ++side) {
        float* tile = side == 0 ? phq : phk;
        row_batches([&](int i0, int n) {
            rows.gather(hr, t0 + i0, warps, n, side == 1, stage, ldx);
            __syncwarp();
            for (int r = 0; r < n; ++r)
                rows.activate(hr, t0 + i0 + r * warps, side == 1, stage + r * ldx, tile + (i0 + r * warps) * ldf);
        });
    }
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
/// state += Xᵀ·Y for the chunk's tiles X (64 × rows) and Y (64 × cols), rows and cols
/// multiples of 16, each warp loading its 16 × 16 state tiles as accumulators. No sync.
__device__ inline void add_state(int rows, int cols, const float* X, int ldx, const float* Y, int ldy, float* state,
                                 int ld) {
    namespace wmma = nvcuda::wmma;
    constexpr int C = 64, warps = single_pass_threads / 32;
    const int warp = int(threadIdx.x) / 32, ct_n = cols / 16, rt_n = rows / 16;
    for (int t = warp; t < rt_n * ct_n; t += warps) {
        const int rt = t / ct_n, ct = t % ct_n;
        f32_acc acc;
        wmma::load_matrix_sync(acc, state + rt * 16 * ld + ct * 16, unsigned(ld), wmma::mem_row_major);
        mma_tf32_at_b(acc, X + rt * 16, ldx, Y + ct * 16, ldy, C);
        wmma::store_matrix_sync(state + rt * 16 * ld + ct * 16, acc, unsigned(ld), wmma::mem_row_major);
    }
}
#endif

}  // namespace single_pass_detail

template <class Job>
__global__ void __launch_bounds__(single_pass_threads, 2) causal_single_pass_kernel(Job job) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    namespace wmma = nvcuda::wmma;
    constexpr int C = 64, RT = C / 16, warps_c = single_pass_threads / 32;
    constexpr int max_jobs = RT * (single_pass_max_cw / 16) / warps_c;
    static_assert(Job::batch == single_pass_stage_rows, "causal_single_pass_kernel: the job's batch is the stage's");
    extern __shared__ __align__(128) float single_pass_smem[];
    const int F = int(job.g.F), cw = int(job.cw);
    const single_pass_layout lay(int(job.g.d), F, cw);
    float* phq = single_pass_smem + lay.phq;
    float* phk = single_pass_smem + lay.phk;
    float* sc = single_pass_smem + lay.sc;
    float* vt = single_pass_smem + lay.vt;
    float* S = single_pass_smem + lay.S;
    float* z = single_pass_smem + lay.z;
    float* den = single_pass_smem + lay.den;
    const int warp = int(threadIdx.x) / 32, warps = warps_c, lane = int(threadIdx.x) % 32;
    float* stage = single_pass_smem + lay.stage + warp * single_pass_stage_rows * lay.ldx;
    const int ct_n = cw / 16;
    const index_t groups = job.groups(), nc = job.chunks();
    for (index_t bj = blockIdx.x; bj < job.jobs(); bj += gridDim.x) {
        const index_t p = bj / groups, c0 = (bj % groups) * cw;
        const auto hr = job.head(p);
        for (int e = int(threadIdx.x); e < F * lay.ldc; e += int(blockDim.x)) S[e] = 0.0f;
        for (int e = int(threadIdx.x); e < F; e += int(blockDim.x)) z[e] = 0.0f;
        __syncthreads();
        for (index_t b = 0; b < nc; ++b) {
            const index_t t0 = b * C;
            // 1. The chunk's rows: Φ_Q, Φ_K and V.
            single_pass_detail::phi_tiles(job, hr, t0, lay.ldx, lay.ldf, phq, phk, stage);
            single_pass_detail::row_batches(
                [&](int i, int n) { job.values(hr, t0 + i, warps, n, c0, vt + i * lay.ldc, warps * lay.ldc); });
            __syncthreads();
            // 2. Scores, one 16 × 16 tile per job; then the mask and the denominators.
            for (int t = warp; t < RT * RT; t += warps) {
                const int rt = t / RT, kt = t % RT;
                f32_acc acc;
                wmma::fill_fragment(acc, 0.0f);
                mma_tf32_a_bt(acc, phq + rt * 16 * lay.ldf, lay.ldf, phk + kt * 16 * lay.ldf, lay.ldf, F);
                wmma::store_matrix_sync(sc + rt * 16 * lay.lds + kt * 16, acc, unsigned(lay.lds), wmma::mem_row_major);
            }
            __syncthreads();
            for (int i = warp; i < C; i += warps) {
                float* row = sc + i * lay.lds;
                for (int j = lane; j < C; j += 32)
                    if (j > i) row[j] = 0.0f;
                __syncwarp();
                float s = 0.0f, qz = 0.0f;
                for (int j = lane; j < C; j += 32) s += row[j];
                for (int f = lane; f < F; f += 32) qz += phq[i * lay.ldf + f] * z[f];
                s = warp_ops::reduce_sum(s);
                qz = warp_ops::reduce_sum(qz);
                if (lane == 0) den[i] = qz + s;
            }
            __syncthreads();
            // 3. Numerators Φ_Q·S + scores·V, kept in registers until every warp has read Φ_Q
            //    (job u of a warp: tile warp + u·warps; unrolled, so num stays in registers).
            f32_acc num[max_jobs];
#pragma unroll
            for (int u = 0; u < max_jobs; ++u) {
                const int t = warp + u * warps_c;
                if (t >= RT * ct_n) break;
                const int rt = t / ct_n, ct = t % ct_n;
                wmma::fill_fragment(num[u], 0.0f);
                mma_tf32_rows(num[u], phq + rt * 16 * lay.ldf, lay.ldf, S + ct * 16, lay.ldc, F);
                mma_tf32_rows(num[u], sc + rt * 16 * lay.lds, lay.lds, vt + ct * 16, lay.ldc, C);
            }
            __syncthreads();
#pragma unroll
            for (int u = 0; u < max_jobs; ++u) {
                const int t = warp + u * warps_c;
                if (t >= RT * ct_n) break;
                const int rt = t / ct_n, ct = t % ct_n;
                wmma::store_matrix_sync(phq + rt * 16 * lay.ldc + ct * 16, num[u], unsigned(lay.ldc),
                                        wmma::mem_row_major);
            }
            __syncthreads();
            for (int i = warp; i < C; i += warps) job.emit(hr, t0 + i, c0, phq + i * lay.ldc, den[i]);
            // 4. The state: S += Φ_Kᵀ·V per 16 × 16 tile of S, z += Φ_K's column sums.
            single_pass_detail::add_state(F, cw, phk, lay.ldf, vt, lay.ldc, S, lay.ldc);
            for (int f = int(threadIdx.x); f < F; f += int(blockDim.x)) {
                float s = z[f];
                for (int j = 0; j < C; ++j) s += phk[j * lay.ldf + f];
                z[f] = s;
            }
            __syncthreads();
        }
    }
#else
    (void)job;
#endif
}

}  // namespace kattn::detail
