// kattn/backends/shared_tiles.hpp — the leading dimension of the tensor-core kernels' shared
// tiles (tf32_tiles.cuh), in plain C++ so that host code can lay their shared memory out.
//   tile_ld(n)   for a tile of n columns (n a multiple of 4): four floats of padding spread
//                a column's rows over the banks and keep every 16-row tile 32-byte aligned,
//                as load_matrix_sync and store_matrix_sync need
#pragma once

#include "../core/config.hpp"

namespace kattn::detail {

KATTN_HD constexpr int tile_ld(int n) { return n + 4; }

}  // namespace kattn::detail
