// tests/features/row_values.hpp — rows for the feature-map tests that call the maps' row
// functions directly: normal values from a counter-based stream of their own, and bitwise
// comparison of rows.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include <kattn/core/random.hpp>

namespace kt::rows {

/// n values sd·N(0, 1) from stream `stream` (offset from streams::user) at `seed`.
template <class T>
std::vector<T> normal_values(std::size_t n, std::uint64_t seed, double sd, std::uint64_t stream) {
    const kattn::random_stream rs(seed, kattn::streams::user + stream);
    std::vector<T> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = T(sd * rs.normal(i));
    return v;
}

/// Whether n values at a and at b have the same bits.
template <class T>
bool same_bits(const T* a, const T* b, std::size_t n) {
    return std::memcmp(a, b, n * sizeof(T)) == 0;
}

}  // namespace kt::rows
