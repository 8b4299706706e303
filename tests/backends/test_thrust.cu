// tests/backends/test_thrust.cu — the Thrust backend tests compiled by nvcc: the device
// system is CUDA, so every stage runs on the GPU. Same source as the OpenMP build
// (kattn_thrust_tests); comparisons with the simd backend are host-only there.
// Without a usable GPU the program prints why and exits with 77 (Meson: SKIP).
#include <cstdio>
#include <cstdlib>

#include <cuda_runtime.h>

#include "test_thrust.cpp"

namespace {
const bool kattn_gpu_present = [] {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        std::fprintf(stderr, "kattn_thrust_cuda_tests: SKIP, no CUDA device (%s)\n",
                     e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        std::exit(77);
    }
    return true;
}();
}  // namespace
