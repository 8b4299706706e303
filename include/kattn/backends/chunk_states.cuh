// kattn/backends/chunk_states.cuh — causal block states and the first step of their scan,
// in one kernel (nvcc only).
//
// The causal chunked forward (chunked/forward.hpp, prefix_states) needs the exclusive
// prefixes X_b of the block states A_b = Φ_K,bᵀ·V1w_b, and the backward the reverse
// suffixes of its cotangent states D_b = Φ_Q,bᵀ·ñf_b. As a batched product and then the
// scan's first step, every block state (F × dv1 floats per block of 64 rows) goes to
// device memory, comes back to be scanned and goes out again. This kernel scans each state
// as it is made (segment_states, chunked/scans.hpp): a thread block takes one (problem,
// segment, tile of 64 state rows) and its warps take pairs of 16-row tiles × one 16-column
// tile each. Per block b of the segment, in the steps' order (prefix: first to last;
// suffix: last to first), a warp
//   1. makes its part of A_b on tensor cores (WMMA m16n16k8, Φ read transposed as a
//      column-major operand, inputs rounded to TF32, FP32 accumulation) over the 64 rows;
//   2. sets run = step.begin(run), stores step.stored(run) as b's slot, then run =
//      step.next(run, A_b), element by element in the accumulator fragments (a step is
//      the same for every element: prefix_step, suffix_step);
// and after the segment stores run as the segment's total. The last dv1 mod 16 columns go
// through the same path with the values staged, zero-padded, in the warp's shared memory,
// and the results copied out from it. Every output has one writer and a fixed order of
// operations: the same bits on every run. cuda_system::launch_chunk_states runs it when
// fused_states is set (float, non-exact products, F a multiple of 16, dv1 of 4, compute
// capability 8.0 or newer).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "../core/config.hpp"
#include "tf32_tiles.cuh"

namespace kattn::detail {

/// Threads per block of the states kernel, and state rows per block (four 16-row tiles).
inline constexpr int states_threads = 256;
inline constexpr int states_tile_rows = 64;

/// Shared memory of one block: per warp, 8 × 16 staged values and a 16 × 16 tile out (rows
/// of tile_ld(16) floats).
inline constexpr int states_stage_floats = 24 * tile_ld(16);
inline constexpr std::size_t states_shared_bytes =
    sizeof(float) * std::size_t(states_threads / 32) * states_stage_floats;

/// The shapes the kernel takes: F (the state's rows) a multiple of 16, dv1 (its columns) a
/// multiple of 4 (16-byte rows for the fragment stores), both within int indexing.
inline bool chunk_states_shape(index_t F, index_t dv1) {
    return F > 0 && F % 16 == 0 && F <= 65536 && dv1 > 0 && dv1 % 4 == 0 && dv1 <= 65536;
}

/// Thread blocks of one call: (problem, segment) jobs × tiles of 64 state rows.
template <class Job>
KATTN_HD index_t chunk_states_blocks(const Job& job) {
    return job.jobs() * ((job.F + states_tile_rows - 1) / states_tile_rows);
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
/// Stores fragment f at dst (leading dimension ld): directly for a whole column tile, else
/// through the warp's stage (16 × tile_ld(16)), of which the first `cols` columns are copied.
__device__ inline void store_state_tile(float* dst, int ld, const f32_acc& f, int cols, float* stage) {
    if (cols == 16) {
        nvcuda::wmma::store_matrix_sync(dst, f, unsigned(ld), nvcuda::wmma::mem_row_major);
        return;
    }
    constexpr int ls = tile_ld(16);
    __syncwarp();
    nvcuda::wmma::store_matrix_sync(stage, f, unsigned(ls), nvcuda::wmma::mem_row_major);
    __syncwarp();
    for (int e = int(threadIdx.x % 32); e < 16 * cols; e += 32)
        dst[(e / cols) * ld + e % cols] = stage[(e / cols) * ls + e % cols];
}
#endif

template <class Job, class Steps>
__global__ void __launch_bounds__(states_threads) chunk_states_kernel(Job job, Steps steps) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    namespace wmma = nvcuda::wmma;
    constexpr int C = 64, ls = tile_ld(16);
    extern __shared__ __align__(128) float states_smem[];
    const int F = int(job.F), dv1 = int(job.dv1);
    const int warp = int(threadIdx.x) / 32, warps = int(blockDim.x) / 32, lane = int(threadIdx.x) % 32;
    float* stage_v = states_smem + warp * states_stage_floats;  // 8 keys × the staged columns
    float* stage_out = stage_v + 8 * ls;                        // one 16-row tile out
    const int wide_tiles = dv1 / 16, tail = dv1 - wide_tiles * 16, col_tiles = wide_tiles + (tail > 0 ? 1 : 0);
    const int ftiles = (F + states_tile_rows - 1) / states_tile_rows;
    const index_t n = index_t(F) * dv1, blocks = chunk_states_blocks(job);
    for (index_t bj = blockIdx.x; bj < blocks; bj += gridDim.x) {
        const index_t ps = bj / ftiles, p = ps / job.sg.count, s = ps % job.sg.count;
        const int f0 = int(bj % ftiles) * states_tile_rows;
        const int rt = (F - f0) / 16 < 4 ? (F - f0) / 16 : 4, pairs = (rt + 1) / 2;
        const index_t b0 = job.sg.first(s), b1 = job.sg.last(s, job.nb);
        for (int w = warp; w < col_tiles * pairs; w += warps) {
            const int ct = w % col_tiles, r0 = (w / col_tiles) * 2, nr = rt - r0 < 2 ? rt - r0 : 2;
            const int c0 = ct * 16, cols = ct < wide_tiles ? 16 : tail;
            f32_acc run[2], acc[2], out;
            for (int r = 0; r < 2; ++r) wmma::fill_fragment(run[r], 0.0f);
            for (index_t i = 0; i <= b1 - b0; ++i) {
                const index_t b = Steps::reverse ? b1 - i : b0 + i, pb = p * job.nb + b;
                const float* K = job.phi + pb * C * F;
                const float* V = job.Y + pb * C * dv1;
                for (int r = 0; r < 2; ++r) wmma::fill_fragment(acc[r], 0.0f);
                for (int j = 0; j < C; j += 8) {
                    tf32_b bv;
                    if (cols == 16) {
                        load_tf32(bv, V + index_t(j) * dv1 + c0, dv1);
                    } else {
                        __syncwarp();
                        for (int e = lane; e < 8 * 16; e += 32) {
                            const int jj = e / 16, c = e % 16;
                            stage_v[jj * ls + c] = c < cols ? V[index_t(j + jj) * dv1 + c0 + c] : 0.0f;
                        }
                        __syncwarp();
                        load_tf32(bv, stage_v, ls);
                    }
                    for (int r = 0; r < nr; ++r) {
                        tf32_at ak;
                        load_tf32(ak, K + index_t(j) * F + f0 + (r0 + r) * 16, F);
                        wmma::mma_sync(acc[r], ak, bv, acc[r]);
                    }
                }
                const auto st = steps.at(p, b, b - b0);
                for (int r = 0; r < nr; ++r) {
                    for (int e = 0; e < run[r].num_elements; ++e) run[r].x[e] = st.begin(run[r].x[e]);
                    for (int e = 0; e < out.num_elements; ++e) out.x[e] = st.stored(run[r].x[e]);
                    store_state_tile(job.A + pb * n + index_t(f0 + (r0 + r) * 16) * dv1 + c0, dv1, out, cols,
                                     stage_out);
                    for (int e = 0; e < run[r].num_elements; ++e) run[r].x[e] = st.next(run[r].x[e], acc[r].x[e]);
                }
            }
            for (int r = 0; r < nr; ++r)
                store_state_tile(job.T + ps * n + index_t(f0 + (r0 + r) * 16) * dv1 + c0, dv1, run[r], cols, stage_out);
        }
    }
#else
    (void)job, (void)steps;
#endif
}

}  // namespace kattn::detail
