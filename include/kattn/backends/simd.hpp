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
// The instruction set is xsimd's default architecture for the compile flags
// (`-march=native` in kattn's own tests and benchmarks; SSE2 baseline otherwise).
// `step` (recurrent decoding) forwards to the reference backend: one token at a time has
// nothing to tile. forward/backward also take a forward_state (saves_forward_state): the
// forward's key states carried to the backward.
#pragma once

#include "simd/linear_backward.hpp"  // first: brings in xsimd with GCC PR 105593 warnings silenced
#include "simd/linear_forward.hpp"
#include "reference.hpp"

#include <cstddef>

#include <xsimd/xsimd.hpp>

namespace kattn::backends {

struct simd {
    static constexpr const char* name = "simd";
    using arch = xsimd::default_arch;
    using row_ops = detail::simd_ops<arch>;
    using gemm = detail::simd_gemm<arch>;

    template <class Map, class T>
    static void features(const backends::feature_problem<Map, T>& pb) {
        namespace si = detail::simd_impl;
        const auto sp = si::spectral<Map, T>::make(pb.spec, pb.input_scale, false);
        const index_t tiles = (pb.n + si::tile_rows - 1) / si::tile_rows;
#pragma omp parallel
        {
            si::tile_worker<Map, T, arch> w(sp);
#pragma omp for schedule(dynamic, 1)
            for (index_t t = 0; t < tiles; ++t) {
                const index_t r0 = t * si::tile_rows, n = std::min(si::tile_rows, pb.n - r0);
                w.project(n, pb.x + r0 * sp.d, false);
                w.activate(n, pb.phi + r0 * sp.F);
            }
        }
    }

    template <class Map, class T>
    static void forward(const backends::attention_problem<Map, T>& pb, T* out) {
        detail::simd_impl::linear_forward<Map, T, arch>(pb, out);
    }

    template <class Map, class T>
    static void backward(const backends::attention_problem<Map, T>& pb, const backends::attention_gradients<T>& g) {
        detail::simd_impl::linear_backward<Map, T, arch>(pb, g);
    }

    /// A slice of a split sequence (backends/split.hpp): the slice's states are exchanged
    /// through `link` once per call, between the passes that need them.
    template <class Map, class T>
    static void forward(const backends::attention_problem<Map, T>& pb, T* out, const backends::slice_link<T>& link) {
        detail::simd_impl::linear_forward<Map, T, arch>(pb, out, &link);
    }
    template <class Map, class T>
    static void backward(const backends::attention_problem<Map, T>& pb, const backends::attention_gradients<T>& g,
                         const backends::slice_link<T>& link) {
        detail::simd_impl::linear_backward<Map, T, arch>(pb, g, &link);
    }

    /// Forward that keeps what the backward needs (backends/forward_state.hpp): the heads'
    /// key states (non-causal) or the segments' starting states (causal), so that the
    /// backward skips its pass over the keys; the gradients are the same bits either way.
    template <class Map, class T>
    static void forward(const backends::attention_problem<Map, T>& pb, T* out, backends::forward_state<T>& keep) {
        detail::simd_impl::linear_forward<Map, T, arch>(pb, out, nullptr, &keep);
    }
    template <class Map, class T>
    static void backward(const backends::attention_problem<Map, T>& pb, const backends::attention_gradients<T>& g,
                         const backends::forward_state<T>& saved) {
        detail::simd_impl::linear_backward<Map, T, arch>(pb, g, nullptr, &saved);
    }

    /// Bytes of backward cache the calling thread keeps for its next backward call
    /// (attention_config::backward_cache_bytes; docs/backends.md §3).
    static std::size_t workspace_bytes() {
        return detail::simd_impl::cache_storage<float>::of_this_thread().cap * sizeof(float) +
               detail::simd_impl::cache_storage<double>::of_this_thread().cap * sizeof(double);
    }
    /// Frees the calling thread's backward cache (the next backward allocates it again).
    static void release_workspace() {
        detail::simd_impl::cache_storage<float>::of_this_thread() = {};
        detail::simd_impl::cache_storage<double>::of_this_thread() = {};
    }

    /// One decoding token: the reference backend's step (explicit fallback).
    template <class Map, class T>
    static void step(const backends::step_problem<Map, T>& sp) {
        reference::step<Map>(sp);
    }
};

}  // namespace kattn::backends
