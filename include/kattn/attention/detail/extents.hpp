// kattn/attention/detail/extents.hpp — overflow-checked size arithmetic for the operators.
//
// Buffer sizes (d·num_features for Ω, F·d_v per head for the states, batch·heads, …) are
// products of user-supplied extents. `detail::checked_extent` forms such a product without
// ever overflowing (no signed-overflow UB) and throws kattn::error naming the argument when
// it exceeds `max_extent` = 2^48 entries — far beyond any allocatable buffer, and low
// enough that the backends' own small factors (a tile of 64 rows, 2 for paired maps,
// sizeof(double)) can never overflow index_t or std::size_t afterwards. Operators call
// it before allocating anything.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>

#include "../../core/config.hpp"
#include "../../core/error.hpp"

namespace kattn::detail {

/// The largest product of extents an operator accepts (entries of one buffer).
inline constexpr index_t max_extent = index_t(1) << 48;

/// The product of the n factors at f (each ≥ 0), or kattn::error("argument '<arg>': expected
/// <what> at most 2^48, got a x b x …") when it exceeds max_extent. Never overflows.
inline index_t checked_extent(std::string_view arg, std::string_view what, const index_t* f, std::size_t n) {
    bool ok = true, zero = false;
    for (std::size_t i = 0; i < n; ++i) {
        ok = ok && f[i] >= 0;
        zero = zero || f[i] == 0;
    }
    index_t p = 1;
    if (ok && !zero)
        for (std::size_t i = 0; i < n; ++i) {
            if (p > max_extent / f[i]) {  // p·f > max_extent, tested without forming p·f
                ok = false;
                break;
            }
            p *= f[i];
        }
    if (ok) return zero ? 0 : p;
    std::string got;
    for (std::size_t i = 0; i < n; ++i) got += (got.empty() ? "" : " x ") + to_text(f[i]);
    fail(arg, std::string(what) + " at most 2^48 entries (overflow-checked)", got);
}

/// The same for a braced list: checked_extent(arg, what, {a, b, …}).
inline index_t checked_extent(std::string_view arg, std::string_view what, std::initializer_list<index_t> factors) {
    return checked_extent(arg, what, factors.begin(), factors.size());
}

/// The same for the factors given one by one: checked_extent(arg, what, a, b, …). The
/// operators call this form: nvcc's front end (CUDA 13) rewrote braced-list arguments into
/// comma expressions, so `{a, b}` arguments did not survive a .cu build.
template <class... I>
requires(sizeof...(I) >= 1 && (std::is_integral_v<I> && ...)) index_t
    checked_extent(std::string_view arg, std::string_view what, I... factors) {
    const index_t list[] = {index_t(factors)...};
    return checked_extent(arg, what, list, sizeof...(I));
}

}  // namespace kattn::detail
