// tests/backends/require_gpu.hpp — for the nvcc-built test programs: without a usable
// CUDA device the program says why and exits with 77, which Meson reports as SKIP.
#pragma once

#include <cstdio>
#include <cstdlib>

#include <cuda_runtime.h>

namespace kt {

/// Exits with 77 unless a CUDA device is usable; `program` names the test program.
inline bool require_gpu(const char* program) {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        std::fprintf(stderr, "%s: SKIP, no CUDA device (%s)\n", program,
                     e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        std::exit(77);
    }
    return true;
}

}  // namespace kt
