// tests/backends/test_thrust.cu — the Thrust backend tests compiled by nvcc: the device
// system is CUDA, so every stage runs on the GPU. Same source as the OpenMP build
// (kattn_thrust_tests); comparisons with the simd backend are host-only there.
// Without a usable GPU the program prints why and exits with 77 (Meson: SKIP).
#include "require_gpu.hpp"
#include "test_thrust.cpp"

namespace {
const bool kattn_gpu_present = kt::require_gpu("kattn_thrust_cuda_tests");
}  // namespace
