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

#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>

#include "../../core/config.hpp"
#include "../../core/error.hpp"

namespace kattn::detail {

/// The largest product of extents an operator accepts (entries of one buffer).
inline constexpr index_t max_extent = index_t(1) << 48;

/// The product of `factors` (each ≥ 0), or kattn::error("argument '<arg>': expected <what>
/// at most 2^48, got a × b × …") when it exceeds max_extent. Never overflows.
inline index_t checked_extent(std::string_view arg, std::string_view what, std::initializer_list<index_t> factors) {
    bool ok = true, zero = false;
    for (const index_t f : factors) {
        ok = ok && f >= 0;
        zero = zero || f == 0;
    }
    index_t p = 1;
    if (ok && !zero)
        for (const index_t f : factors) {
            if (p > max_extent / f) {  // p·f > max_extent, tested without forming p·f
                ok = false;
                break;
            }
            p *= f;
        }
    if (ok) return zero ? 0 : p;
    std::string got;
    for (const index_t f : factors) got += (got.empty() ? "" : " x ") + to_text(f);
    fail(arg, std::string(what) + " at most 2^48 entries (overflow-checked)", got);
}

/// The same for the factors given one by one: checked_extent(arg, what, a, b, …). The
/// operators call this form: nvcc's front end (CUDA 13) rewrites a braced list passed as an
/// argument into a comma expression, so `{a, b}` arguments do not survive a .cu build.
template <class... I>
requires(sizeof...(I) >= 1 && (std::is_integral_v<I> && ...)) index_t
    checked_extent(std::string_view arg, std::string_view what, I... factors) {
    const index_t list[] = {index_t(factors)...};
    return checked_extent(arg, what, std::initializer_list<index_t>(list, list + sizeof...(I)));
}

}  // namespace kattn::detail
