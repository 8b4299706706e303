// kattn/backends/strided_view.hpp — a four-dimensional strided view of memory the caller
// owns: [batch, heads, len, dim] addressed through element strides, dim contiguous.
//
//   head_major(p, B, H, L, d)   a dense [B, H, L, d] tensor (the xtensor API's layout)
//   token_major(p, B, L, H, d)  a dense [B, L, H, d] tensor (FlashAttention's and FLA's)
//   strided_view<T>{p, B, H, L, d, batch_stride, head_stride, len_stride}  anything else
//
// The device-resident calls of the chunked backends (backends/chunked.hpp) take their
// q, k, v and out as such views: on a CUDA system the pointers are device pointers and
// nothing is copied between host and device. Checked by check_view (kattn::error naming
// the argument): extents ≥ 0, a non-null pointer when the view is not empty, strides ≥ 0.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "../core/config.hpp"
#include "../core/error.hpp"

namespace kattn::backends {

template <class T>
struct strided_view {
    T* data = nullptr;
    index_t batch = 0, heads = 0, len = 0, dim = 0;
    index_t batch_stride = 0, head_stride = 0, len_stride = 0;  ///< in elements; dim's stride is 1

    /// First element of row (b, h, l).
    KATTN_HD T* row(index_t b, index_t h, index_t l) const {
        return data + b * batch_stride + h * head_stride + l * len_stride;
    }
    KATTN_HD index_t rows() const { return batch * heads * len; }
    /// The same view, read-only.
    template <class U = T>
    requires(!std::is_const_v<U>) KATTN_HD operator strided_view<const U>() const {
        return {data, batch, heads, len, dim, batch_stride, head_stride, len_stride};
    }
};

/// A dense [B, H, L, d] tensor at p.
template <class T>
strided_view<T> head_major(T* p, index_t B, index_t H, index_t L, index_t d) {
    return {p, B, H, L, d, H * L * d, L * d, d};
}

/// A dense [B, L, H, d] tensor at p, seen as [B, H, L, d].
template <class T>
strided_view<T> token_major(T* p, index_t B, index_t L, index_t H, index_t d) {
    return {p, B, H, L, d, L * H * d, d, H * d};
}

}  // namespace kattn::backends

namespace kattn::detail {

/// Throws a kattn::error naming `name` unless v is a well-formed view.
template <class T>
void check_view(const backends::strided_view<T>& v, const char* name) {
    const auto say = [&](const std::string& what, const std::string& got) {
        throw kattn::error(std::string("kattn: argument '") + name + "': expected " + what + ", got " + got);
    };
    if (v.batch < 0 || v.heads < 0 || v.len < 0 || v.dim < 0)
        say("non-negative extents", "[" + std::to_string(v.batch) + ", " + std::to_string(v.heads) + ", " +
                                        std::to_string(v.len) + ", " + std::to_string(v.dim) + "]");
    if (v.batch_stride < 0 || v.head_stride < 0 || v.len_stride < 0)
        say("non-negative strides", "(" + std::to_string(v.batch_stride) + ", " + std::to_string(v.head_stride) + ", " +
                                        std::to_string(v.len_stride) + ")");
    if (v.data == nullptr && v.rows() > 0 && v.dim > 0) say("a non-null pointer", "nullptr");
}

/// One past the last element a view addresses, as a byte address (0 for an empty view).
template <class T>
std::uintptr_t view_end(const backends::strided_view<T>& v) {
    if (v.rows() == 0 || v.dim == 0) return 0;
    const index_t last =
        (v.batch - 1) * v.batch_stride + (v.heads - 1) * v.head_stride + (v.len - 1) * v.len_stride + v.dim;
    return reinterpret_cast<std::uintptr_t>(v.data + last);
}

/// True when the address ranges [first, last] of a and b intersect (a conservative
/// overlap test: interleaved but disjoint views count as overlapping).
template <class A, class B>
bool views_may_overlap(const backends::strided_view<A>& a, const backends::strided_view<B>& b) {
    const auto ea = view_end(a), eb = view_end(b);
    if (ea == 0 || eb == 0) return false;
    const auto sa = reinterpret_cast<std::uintptr_t>(a.data), sb = reinterpret_cast<std::uintptr_t>(b.data);
    return sa < eb && sb < ea;
}

}  // namespace kattn::detail
