// kattn/core/config.hpp — configuration switches shared by every header.
//
// KATTN_HD marks functions that run on the host and, under nvcc, on the device.
// CCCL 3 does not define __host__/__device__ for a plain host compiler, so kattn
// uses its own macro instead of relying on Thrust's.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define KATTN_HD __host__ __device__
#else
#define KATTN_HD
#endif

#define KATTN_VERSION_MAJOR 0
#define KATTN_VERSION_MINOR 1
#define KATTN_VERSION_PATCH 0

namespace kattn {

/// Signed index type used for every extent and loop counter.
using index_t = std::ptrdiff_t;

}  // namespace kattn
