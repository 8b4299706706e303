// kattn/attention/detail/output.hpp — checks of caller-owned result tensors.
//
// forward_into(out, …) writes into a tensor the caller allocated; backward_into(g, …) into
// gradients the caller keeps between steps. Both need the result's shape and memory that
// no input occupies (a kernel reads an input after it has written part of the result, so
// an aliased call would read its own output). check_output throws when `out` has another
// shape; shape_output resizes it instead. Both throw when its memory overlaps an input's.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "../../core/error.hpp"
#include "../../core/shape.hpp"

namespace kattn::detail {

/// True when [a, a + na) and [b, b + nb) share an element (std::less: a total order on
/// pointers into different objects).
template <class T>
bool ranges_overlap(const T* a, std::size_t na, const T* b, std::size_t nb) {
    if (na == 0 || nb == 0) return false;
    const std::less<const T*> lt;
    return lt(a, b + nb) && lt(b, a + na);
}

/// Throws kattn::error naming `arg` when out's memory overlaps one of the N inputs.
template <class Tensor, class T, std::size_t N>
void check_output_memory(std::string_view arg, const Tensor& out, const std::array<const T*, N>& inputs,
                         const std::array<std::size_t, N>& sizes) {
    for (std::size_t i = 0; i < N; ++i)
        require(!ranges_overlap<T>(out.data(), out.size(), inputs[i], sizes[i]), arg,
                "memory of its own, not shared with an input",
                std::string("a tensor that overlaps input ") + std::to_string(i + 1) + " of the call");
}

/// Throws unless `out` has shape `want` and memory no input shares.
template <class Tensor, class Shape, class T, std::size_t N>
void check_output(std::string_view arg, const Tensor& out, const Shape& want, const std::array<const T*, N>& inputs,
                  const std::array<std::size_t, N>& sizes) {
    require(std::equal(want.begin(), want.end(), out.shape().begin(), out.shape().end()), arg,
            "the result's shape " + shape_text(want), shape_text(out.shape()));
    check_output_memory(arg, out, inputs, sizes);
}

/// Resizes `out` to `want` unless it has that shape already (then its memory is kept),
/// and throws when its memory overlaps an input's.
template <class Tensor, class Shape, class T, std::size_t N>
void shape_output(std::string_view arg, Tensor& out, const Shape& want, const std::array<const T*, N>& inputs,
                  const std::array<std::size_t, N>& sizes) {
    if (!std::equal(want.begin(), want.end(), out.shape().begin(), out.shape().end())) {
        typename Tensor::shape_type s;
        std::copy(want.begin(), want.end(), s.begin());
        out.resize(s);
    }
    check_output_memory(arg, out, inputs, sizes);
}

}  // namespace kattn::detail
