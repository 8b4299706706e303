// src/simd_kernels.cpp — the kernel library libkattn_simd (backends/simd/dispatch.hpp).
//
// Compiled once per instruction set, with that set's flags (meson.build: -march=x86-64-v3
// or -march=x86-64-v4) and KATTN_KERNELS_ENTRY naming the entry point. It instantiates the
// simd backend's primitives for every map of features::all in float and double, with
// xsimd's default architecture for those flags, and returns them as one table. The shared
// library exports the entry points only (src/simd_kernels.map): everything else,
// including the standard library code compiled here with these flags, stays inside it, so
// a program's own copies are never replaced by instructions its CPU may lack.
#include <kattn/backends/simd/bf16_forward.hpp>
#include <kattn/backends/simd/dispatch.hpp>
#include <kattn/backends/simd/passes.hpp>
#include <kattn/backends/simd/tile.hpp>
#include <kattn/linalg/gemm.hpp>

#include <type_traits>

#include <xsimd/xsimd.hpp>

#ifndef KATTN_KERNELS_ENTRY
#error "KATTN_KERNELS_ENTRY must name the entry point (meson.build defines it)"
#endif
#ifdef KATTN_SIMD_DISPATCH
#error "the kernel library is the dispatch target: build it without KATTN_SIMD_DISPATCH"
#endif

namespace {

namespace kd = kattn::detail;
namespace si = kattn::detail::simd_impl;
using arch = xsimd::default_arch;
using kattn::index_t;

template <class Map, class T>
kd::simd_dispatch::map_kernels<Map, T> kernels_of() {
    kd::simd_dispatch::map_kernels<Map, T> k;
    k.features = &si::features<Map, T, arch>;
    k.forward = [](const kd::attention_problem<Map, T>& pb, T* out) { si::run_forward<Map, T, arch>(pb, out); };
    k.forward_link = [](const kd::attention_problem<Map, T>& pb, T* out, const kd::slice_link<T>& link) {
        si::run_forward<Map, T, arch>(pb, out, &link);
    };
    k.forward_keep = [](const kd::attention_problem<Map, T>& pb, T* out, kd::forward_state<T>& keep) {
        si::run_forward<Map, T, arch>(pb, out, nullptr, &keep);
    };
    k.backward = [](const kd::attention_problem<Map, T>& pb, const kd::attention_gradients<T>& g) {
        si::run_backward<Map, T, arch>(pb, g);
    };
    k.backward_link = [](const kd::attention_problem<Map, T>& pb, const kd::attention_gradients<T>& g,
                         const kd::slice_link<T>& link) { si::run_backward<Map, T, arch>(pb, g, &link); };
    k.backward_saved = [](const kd::attention_problem<Map, T>& pb, const kd::attention_gradients<T>& g,
                          const kd::forward_state<T>& saved) {
        si::run_backward<Map, T, arch>(pb, g, nullptr, &saved);
    };
    if constexpr (std::is_same_v<T, float>)
        k.forward_bf16 = [](const kd::attention_problem<Map, T>& pb, const kd::bf16_forward_io& io) {
            return si::run_forward_bf16<Map, arch>(pb, io);
        };
    return k;
}

template <class T, class... Ms>
void fill(std::tuple<kd::simd_dispatch::map_kernels<Ms, T>...>& maps) {
    ((std::get<kd::simd_dispatch::map_kernels<Ms, T>>(maps) = kernels_of<Ms, T>()), ...);
}

template <class T>
void gemm(index_t M, index_t N, index_t K, const T* A, index_t a_rs, index_t a_cs, const T* B, index_t ldb, T* C,
          index_t ldc, bool accumulate) {
    kd::gemm<arch>(M, N, K, A, a_rs, a_cs, B, ldb, C, ldc, accumulate);
}

kd::simd_dispatch::kernel_table make_table() {
    kd::simd_dispatch::kernel_table t;
    t.layout = sizeof(kd::simd_dispatch::kernel_table);
    t.version = kd::simd_dispatch::library_version;
    t.problem_layout = kd::simd_dispatch::problem_layout;
    t.arch = arch::name();
    fill<float>(t.maps_f);
    fill<double>(t.maps_d);
    t.gemm_f = &gemm<float>;
    t.gemm_d = &gemm<double>;
    t.workspace_bytes = [] {
        return si::cache_storage<float>::of_this_thread().cap * sizeof(float) +
               si::cache_storage<double>::of_this_thread().cap * sizeof(double);
    };
    t.release_workspace = [] {
        si::cache_storage<float>::of_this_thread() = {};
        si::cache_storage<double>::of_this_thread() = {};
    };
    return t;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const kattn::detail::simd_dispatch::kernel_table*
KATTN_KERNELS_ENTRY() {
    static const kattn::detail::simd_dispatch::kernel_table table = make_table();
    return &table;
}
