// kattn/backends/simd.hpp — the vectorised, multi-threaded CPU backend.
//
// xsimd batches for every element-wise step (exp, sin, cos, … via kattn::math on
// batches), register-blocked tile products, OpenMP over batch×heads and, for a single
// long sequence, over fixed token segments. Feature rows exist only one tile
// (simd_impl::tile_rows tokens) at a time. Products are in the input precision T; the
// running states of fp32 problems (causal prefix sums, backward suffix sums, key totals)
// are compensated: each tile's float contribution is added to double totals, so their
// error does not grow with the sequence length (simd/tile.hpp).
// Results are bitwise identical for any thread count: the work split and every
// reduction order depend on the problem only.
//
// The instruction set is chosen at run time when the program is built with
// KATTN_SIMD_DISPATCH and linked with the kernel library libkattn_simd (what the `kattn`
// Meson and pkg-config dependencies do; simd/dispatch.hpp): AVX-512 or AVX2+FMA, whichever
// the CPU runs. Otherwise, and for maps outside features::all, it is xsimd's default
// architecture for the compile flags (`-march=native` in kattn's own tests and benchmarks;
// SSE2 for a plain x86-64 build).
// `step` (recurrent decoding) forwards to the reference backend: one token at a time has
// nothing to tile. forward/backward also take a forward_state (saves_forward_state): the
// forward's key states carried to the backward; and packed documents (packs_sequences,
// simd/packed.hpp).
#pragma once

#include "simd/passes.hpp"  // first: brings in xsimd with GCC PR 105593 warnings silenced
#include "simd/bf16_forward.hpp"
#include "simd/dispatch.hpp"
#include "reference.hpp"

#include <cstddef>
#include <string_view>
#include <type_traits>

#include <xsimd/xsimd.hpp>

namespace kattn::detail {

/// The kernel library's table in use in this process, or nullptr: the program's own kernels.
inline const simd_dispatch::kernel_table* simd_active_table() {
#ifdef KATTN_SIMD_DISPATCH
    return simd_dispatch::active();
#else
    return nullptr;
#endif
}

/// The table for calls of (Map, T): the active one where the library covers them.
template <class Map, class T>
inline const simd_dispatch::kernel_table* simd_table() {
    if constexpr (simd_dispatch::covered<Map, T>) return simd_active_table();
    return nullptr;
}

/// simd's GEMM policy: the dispatched kernel where there is one, else simd_gemm<Arch>.
template <class Arch>
struct simd_dispatch_gemm {
    template <class T>
    static void run(index_t M, index_t N, index_t K, const T* A, index_t a_rs, index_t a_cs, const T* B, index_t ldb,
                    T* C, index_t ldc, bool accumulate) {
        if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>)
            if (const auto* t = simd_active_table())
                return t->template gemm<T>()(M, N, K, A, a_rs, a_cs, B, ldb, C, ldc, accumulate);
        gemm<Arch>(M, N, K, A, a_rs, a_cs, B, ldb, C, ldc, accumulate);
    }
};

}  // namespace kattn::detail

namespace kattn::backends {

struct simd {
    static constexpr const char* name = "simd";
    /// forward/backward take packed documents (attention_problem::cu_seqlens; simd/packed.hpp).
    static constexpr bool packs_sequences = true;
    using arch = xsimd::default_arch;
    using row_ops = detail::simd_ops<arch>;
    using gemm = detail::simd_dispatch_gemm<arch>;

    /// The instruction set the kernels run with in this process: xsimd's name of the
    /// dispatched architecture ("avx512bw", "fma3+avx2"), or of the compiled one.
    static std::string_view isa() {
        if (const auto* t = detail::simd_active_table()) return t->arch;
        return arch::name();
    }
    /// True when the kernels of features::all run from the kernel library (simd/dispatch.hpp).
    static bool dispatched() { return detail::simd_active_table() != nullptr; }
    /// Chooses the instruction set for the whole process: "avx512", "avx2" or "baseline"
    /// (the program's own kernels). A kattn::error names `isa` when the CPU cannot run it,
    /// or when the program is not built for dispatch and `isa` is not "baseline".
    static void select_isa(std::string_view isa) {
#ifdef KATTN_SIMD_DISPATCH
        kattn::detail::simd_dispatch::select(isa);
#else
        if (isa != "baseline")
            kattn::detail::fail("isa", "baseline (this program is built without KATTN_SIMD_DISPATCH)",
                                std::string(isa));
#endif
    }

    template <class Map, class T>
    static void features(const backends::feature_problem<Map, T>& pb) {
        if (const auto* t = detail::simd_table<Map, T>()) return t->template of<Map, T>().features(pb);
        detail::simd_impl::features<Map, T, arch>(pb);
    }

    template <class Map, class T>
    static void forward(const backends::attention_problem<Map, T>& pb, T* out) {
        if (const auto* t = detail::simd_table<Map, T>()) return t->template of<Map, T>().forward(pb, out);
        detail::simd_impl::run_forward<Map, T, arch>(pb, out);
    }

    template <class Map, class T>
    static void backward(const backends::attention_problem<Map, T>& pb, const backends::attention_gradients<T>& g) {
        if (const auto* t = detail::simd_table<Map, T>()) return t->template of<Map, T>().backward(pb, g);
        detail::simd_impl::run_backward<Map, T, arch>(pb, g);
    }

    /// A slice of a split sequence (backends/split.hpp): the slice's states are exchanged
    /// through `link` once per call, between the passes that need them.
    template <class Map, class T>
    static void forward(const backends::attention_problem<Map, T>& pb, T* out, const backends::slice_link<T>& link) {
        if (const auto* t = detail::simd_table<Map, T>()) return t->template of<Map, T>().forward_link(pb, out, link);
        detail::simd_impl::run_forward<Map, T, arch>(pb, out, &link);
    }
    template <class Map, class T>
    static void backward(const backends::attention_problem<Map, T>& pb, const backends::attention_gradients<T>& g,
                         const backends::slice_link<T>& link) {
        if (const auto* t = detail::simd_table<Map, T>()) return t->template of<Map, T>().backward_link(pb, g, link);
        detail::simd_impl::run_backward<Map, T, arch>(pb, g, &link);
    }

    /// Forward that keeps what the backward needs (backends/forward_state.hpp): the heads'
    /// key states (non-causal) or the segments' starting states (causal), so that the
    /// backward skips its pass over the keys; the gradients are the same bits either way.
    template <class Map, class T>
    static void forward(const backends::attention_problem<Map, T>& pb, T* out, backends::forward_state<T>& keep) {
        if (const auto* t = detail::simd_table<Map, T>()) return t->template of<Map, T>().forward_keep(pb, out, keep);
        detail::simd_impl::run_forward<Map, T, arch>(pb, out, nullptr, &keep);
    }
    template <class Map, class T>
    static void backward(const backends::attention_problem<Map, T>& pb, const backends::attention_gradients<T>& g,
                         const backends::forward_state<T>& saved) {
        if (const auto* t = detail::simd_table<Map, T>()) return t->template of<Map, T>().backward_saved(pb, g, saved);
        detail::simd_impl::run_backward<Map, T, arch>(pb, g, nullptr, &saved);
    }

    /// The non-causal forward on bf16 tensors with AMX tile products (simd/bf16_forward.hpp);
    /// false (nothing written) where the CPU or OS gives no AMX-BF16 or the problem is causal
    /// or packed.
    template <class Map>
    static bool forward_bf16(const backends::attention_problem<Map, float>& pb, const backends::bf16_forward_io& io) {
        if (const auto* t = detail::simd_table<Map, float>()) return t->template of<Map, float>().forward_bf16(pb, io);
        return detail::simd_impl::run_forward_bf16<Map, arch>(pb, io);
    }

    /// Bytes of backward cache the calling thread keeps for its next backward call
    /// (attention_config::backward_cache_bytes; docs/backends.md §3).
    static std::size_t workspace_bytes() {
        if (const auto* t = detail::simd_active_table()) return t->workspace_bytes() + own_workspace_bytes();
        return own_workspace_bytes();
    }
    /// Frees the calling thread's backward cache (the next backward allocates it again).
    static void release_workspace() {
        if (const auto* t = detail::simd_active_table()) t->release_workspace();
        detail::simd_impl::cache_storage<float>::of_this_thread() = {};
        detail::simd_impl::cache_storage<double>::of_this_thread() = {};
    }

private:
    static std::size_t own_workspace_bytes() {
        return detail::simd_impl::cache_storage<float>::of_this_thread().cap * sizeof(float) +
               detail::simd_impl::cache_storage<double>::of_this_thread().cap * sizeof(double);
    }

public:
    /// One decoding token: the reference backend's step (explicit fallback).
    template <class Map, class T>
    static void step(const backends::step_problem<Map, T>& sp) {
        reference::step<Map>(sp);
    }
};

}  // namespace kattn::backends
