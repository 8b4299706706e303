// kattn/backends/simd/passes.hpp — the simd backend's forward and backward entry points.
//
// They choose the algorithm for a problem: packed documents (packed.hpp) when the problem
// has cu_seqlens, the unpacked passes (linear_forward.hpp, linear_backward.hpp) otherwise.
// backends::simd and the kernel library (src/simd_kernels.cpp) both call these, so a
// dispatched program and a header-only one run the same code. A packed problem takes no
// slice link (kattn::dist runs its documents' edges unpacked).
#pragma once

#include "../../core/error.hpp"
#include "packed.hpp"

namespace kattn::detail::simd_impl {

template <class Map, class T, class Arch>
void run_forward(const attention_problem<Map, T>& pb, T* out, const slice_link<T>* link = nullptr,
                 forward_state<T>* keep = nullptr) {
    if (!pb.cu_seqlens) return linear_forward<Map, T, Arch>(pb, out, link, keep);
    require(!link, "cu_seqlens", "a packed problem without a slice link", std::string("a slice link"));
    packed_forward<Map, T, Arch>(pb, out, keep);
}

template <class Map, class T, class Arch>
void run_backward(const attention_problem<Map, T>& pb, const attention_gradients<T>& g,
                  const slice_link<T>* link = nullptr, const forward_state<T>* saved = nullptr) {
    if (!pb.cu_seqlens) return linear_backward<Map, T, Arch>(pb, g, link, saved);
    require(!link, "cu_seqlens", "a packed problem without a slice link", std::string("a slice link"));
    packed_backward<Map, T, Arch>(pb, g, saved);
}

}  // namespace kattn::detail::simd_impl
