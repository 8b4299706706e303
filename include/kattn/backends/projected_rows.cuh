// kattn/backends/projected_rows.cuh — gather, project and activate rows in one kernel (nvcc only).
//
// Building φ as three passes (gather X, the product U = X·Ω, the maps' row functions on U)
// writes and reads X and U through device memory: at d = 64, m = 256 that traffic is five
// times φ's own. This kernel keeps both in shared memory instead. Each thread block takes
// tiles of rows (32 by default, below):
//   1. every warp gathers rows into the tile X_s (gather.load(r, x): one warp per row);
//   2. U_s = X_s·Ω on tensor cores (WMMA m16n16k8, inputs rounded to TF32, FP32
//      accumulation), each warp owning column tiles of 16 and every row tile;
//   3. every warp applies the map's row functions to its rows (act.apply(r, x, u)), which
//      write φ and the shift to device memory.
// The functors are the chunked backend's gather_rows and activate_rows written for
// warp_ops, so no map has a kernel of its own. Every output is written by one warp in a
// fixed order: the same bits on every run. cuda_system::launch_projected_rows chooses it
// (float, non-exact products, d a multiple of 8, P of 16, a device of compute capability
// 8.0 or newer, the tiles within the shared memory a block may have) and otherwise reports
// that the three passes are to be run.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "../core/config.hpp"
#include "tf32_tiles.cuh"

namespace kattn::detail {

/// The tile geometry of the projected-rows kernel: Rows rows per tile (whole 16-row WMMA
/// tiles), Threads threads per block (whole warps), and MinBlocks, the blocks per
/// multiprocessor its __launch_bounds__ ask the compiler to fit (a register cap; 1: none).
template <int Rows, int Threads, int MinBlocks = 1>
struct projected_geometry {
    static_assert(Rows > 0 && Rows % 16 == 0 && Rows <= 256, "projected_geometry: Rows must be 16, 32, … 256");
    static_assert(Threads > 0 && Threads % 32 == 0 && Threads <= 1024,
                  "projected_geometry: Threads must be a multiple of 32, at most 1024");
    static_assert(MinBlocks >= 1 && MinBlocks * Threads <= 2048,
                  "projected_geometry: MinBlocks blocks of Threads must fit a multiprocessor (2,048 threads)");
    static constexpr int rows = Rows, threads = Threads, min_blocks = MinBlocks;
};
/// What cuda_system launches: 32 rows, 256 threads, 64 registers (4 blocks of 256 threads
/// per multiprocessor; bench_cuda_phi measures the others).
using default_projected_geometry = projected_geometry<32, 256, 4>;
inline constexpr int projected_tile_rows = default_projected_geometry::rows;
inline constexpr int projected_threads = default_projected_geometry::threads;

/// The shapes the kernel takes: d a multiple of 8 and P of 16 (whole WMMA steps and
/// column tiles), at most 4,096 each, Ω (d × P) 32-byte aligned for the fragment loads.
inline bool projected_rows_shape(index_t d, index_t P, const float* omega) {
    return d > 0 && d % 8 == 0 && P > 0 && P % 16 == 0 && d <= 4096 && P <= 4096 &&
           reinterpret_cast<std::uintptr_t>(omega) % 32 == 0;
}

/// Shared memory of one block for inputs of d columns and projections of P columns: the
/// input tile and the projection tile, of `rows` rows each.
inline std::size_t projected_shared_bytes(int d, int P, int rows = projected_tile_rows) {
    return sizeof(float) * std::size_t(rows) * std::size_t(tile_ld(d) + tile_ld(P));
}

template <class Gather, class Act, class Geometry = default_projected_geometry>
__global__ void __launch_bounds__(Geometry::threads, Geometry::min_blocks)
    projected_rows_kernel(index_t n, int d, int P, const float* __restrict__ omega, Gather gather, Act act) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    namespace wmma = nvcuda::wmma;
    constexpr int R = Geometry::rows, row_tiles = R / 16;
    extern __shared__ __align__(128) float projected_smem[];
    const int ldx = tile_ld(d), ldu = tile_ld(P);
    float* xs = projected_smem;
    float* us = xs + R * ldx;
    const int warp = int(threadIdx.x) / 32, warps = int(blockDim.x) / 32, lane = int(threadIdx.x) % 32;
    for (index_t r0 = index_t(blockIdx.x) * R; r0 < n; r0 += index_t(gridDim.x) * R) {
        for (int i = warp; i < R; i += warps) {
            if (r0 + i < n) {
                gather.load(r0 + i, xs + i * ldx);
            } else {
                for (int c = lane; c < d; c += 32) xs[i * ldx + c] = 0.0f;
            }
        }
        __syncthreads();
        for (int tc = warp; tc < P / 16; tc += warps) {
            f32_acc acc[row_tiles];
            for (int t = 0; t < row_tiles; ++t) wmma::fill_fragment(acc[t], 0.0f);
            for (int k = 0; k < d; k += 8) {
                tf32_b b;
                load_tf32(b, omega + index_t(k) * P + tc * 16, P);
                for (int t = 0; t < row_tiles; ++t) {
                    tf32_a a;
                    load_tf32(a, xs + t * 16 * ldx + k, ldx);
                    wmma::mma_sync(acc[t], a, b, acc[t]);
                }
            }
            for (int t = 0; t < row_tiles; ++t)
                wmma::store_matrix_sync(us + t * 16 * ldu + tc * 16, acc[t], unsigned(ldu), wmma::mem_row_major);
        }
        __syncthreads();
        for (int i = warp; i < R; i += warps)
            if (r0 + i < n) act.apply(r0 + i, xs + i * ldx, us + i * ldu);
        __syncthreads();
    }
#else
    (void)n, (void)d, (void)P, (void)omega, (void)gather, (void)act;
#endif
}

}  // namespace kattn::detail
