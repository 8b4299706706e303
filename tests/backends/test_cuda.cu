// tests/backends/test_cuda.cu — the chunked backend's tests (test_chunked.cpp,
// test_chunked_workspace.cpp and the GPU part of test_chunked_precision.cpp), and the
// causal single pass's cases (cuda_single_pass_cases.hpp), compiled by nvcc with
// backends::cuda: every primitive runs on the GPU (cuBLAS products, the functors as
// kernels). Same sources as the host build (kattn_tests, backends::chunked<host_system>).
// Without a usable GPU the program prints why and exits with 77 (Meson: SKIP).
#include "require_gpu.hpp"
#include "test_chunked.cpp"
#include "test_chunked_workspace.cpp"
#include "test_chunked_precision.cpp"
#include "cuda_single_pass_cases.hpp"

namespace {
const bool kattn_gpu_present = kt::require_gpu("kattn_cuda_tests");
}  // namespace
