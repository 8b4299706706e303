// tests/backends/cuda_emulation/mma.h — nvcuda::wmma for the emulator (emulator.hpp): the
// TF32 m16n16k8 shapes the kernels use. Every lane holds the whole tile (so num_elements is
// the tile's size, and element-wise loops over x[] see every element); lane 0 alone stores.
// Accumulators load from memory too (with a layout, as in CUDA). Loads and stores check the hardware's rules: a 256-bit aligned pointer and a leading
// dimension that is a multiple of 16 bytes; a violation counts in cuda_emulation::faults().
// __float_to_tf32 rounds to 10 mantissa bits, to nearest with ties away from zero (cvt.rna).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "emulator.hpp"

namespace nvcuda::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
namespace precision {
struct tf32 {};
}  // namespace precision
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {
    static constexpr int rows = std::is_same_v<Use, matrix_b> ? K : M;
    static constexpr int cols = std::is_same_v<Use, matrix_a> ? K : N;
    static constexpr int num_elements = rows * cols;
    float x[num_elements];
};

namespace detail {
inline bool well_placed(const float* p, unsigned ld) {
    const bool ok = reinterpret_cast<std::uintptr_t>(p) % 32 == 0 && ld % 4 == 0;
    if (!ok) ++cuda_emulation::faults();
    return ok;
}
}  // namespace detail

template <class Use, int M, int N, int K, class T, class Layout>
void load_matrix_sync(fragment<Use, M, N, K, T, Layout>& f, const float* p, unsigned ld) {
    using F = fragment<Use, M, N, K, T, Layout>;
    if (!detail::well_placed(p, ld)) return;
    for (int i = 0; i < F::rows; ++i)
        for (int j = 0; j < F::cols; ++j)
            f.x[i * F::cols + j] = std::is_same_v<Layout, col_major> ? p[j * ld + i] : p[i * ld + j];
}

/// An accumulator from memory, row- or column-major (the kernels that add to a stored tile).
template <int M, int N, int K, class T>
void load_matrix_sync(fragment<accumulator, M, N, K, T>& f, const float* p, unsigned ld, layout_t layout) {
    if (!detail::well_placed(p, ld)) return;
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) f.x[i * N + j] = layout == mem_row_major ? p[i * ld + j] : p[j * ld + i];
}

template <int M, int N, int K, class T>
void store_matrix_sync(float* p, const fragment<accumulator, M, N, K, T>& f, unsigned ld, layout_t layout) {
    if (!detail::well_placed(p, ld) || threadIdx.x % 32 != 0) return;
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) (layout == mem_row_major ? p[i * ld + j] : p[j * ld + i]) = f.x[i * N + j];
}

template <class Use, int M, int N, int K, class T, class Layout>
void fill_fragment(fragment<Use, M, N, K, T, Layout>& f, float v) {
    for (float& e : f.x) e = v;
}

template <int M, int N, int K, class T, class LA, class LB>
void mma_sync(fragment<accumulator, M, N, K, float>& d, const fragment<matrix_a, M, N, K, T, LA>& a,
              const fragment<matrix_b, M, N, K, T, LB>& b, const fragment<accumulator, M, N, K, float>& c) {
    float out[M * N];
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            float acc = c.x[i * N + j];
            for (int k = 0; k < K; ++k) acc = std::fma(a.x[i * K + k], b.x[k * N + j], acc);
            out[i * N + j] = acc;
        }
    std::memcpy(d.x, out, sizeof out);
}

inline float __float_to_tf32(float v) {
    if (!std::isfinite(v)) return v;
    std::uint32_t u;
    std::memcpy(&u, &v, 4);
    u = (u + 0x1000u) & 0xffffe000u;
    std::memcpy(&v, &u, 4);
    return v;
}

}  // namespace nvcuda::wmma
