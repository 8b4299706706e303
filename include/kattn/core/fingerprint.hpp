// kattn/core/fingerprint.hpp — a cheap, order-independent hash of rows of numbers.
//
// Used to tie a forward pass's saved state to the inputs it was computed from: the forward
// hashes the rows of k and v while they are in cache for its own work, the backward hashes
// them again, and a mismatch means the inputs changed in between. A row's hash is
// Σ_c bits(x_c)·w_c over its bit patterns with distinct odd weights w_c (so any change of a
// single value changes it: multiplication by an odd number is invertible modulo 2⁶⁴), mixed
// with the row's identity; rows are combined by addition modulo 2⁶⁴, so any split of the
// rows over threads or segments gives the same total. Not cryptographic: it detects
// accidental reuse, not an adversary.
#pragma once

#include <bit>
#include <cstdint>
#include <type_traits>

#include "config.hpp"

namespace kattn::detail {

/// SplitMix64's finaliser: a bijective 64-bit mix.
constexpr std::uint64_t mix64(std::uint64_t x) {
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ULL;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

/// Hash contribution of n rows of width w (row r at x + r·w, with identity first_row + r)
/// under `tag` (callers hash different arrays under different tags). Sum contributions
/// (mod 2⁶⁴) to combine row ranges.
template <class T>
std::uint64_t rows_fingerprint(const T* x, index_t n, index_t w, std::uint64_t first_row, std::uint64_t tag) {
    static_assert(std::is_floating_point_v<T> || std::is_integral_v<T>, "rows_fingerprint: numbers only");
    using bits_t = std::conditional_t<sizeof(T) == 8, std::uint64_t, std::uint32_t>;
    std::uint64_t h = 0;
    for (index_t r = 0; r < n; ++r) {
        const T* row = x + r * w;
        std::uint64_t s = 0;
#pragma omp simd reduction(+ : s)
        for (index_t c = 0; c < w; ++c) {
            bits_t b;
            if constexpr (std::is_floating_point_v<T>)
                b = std::bit_cast<bits_t>(row[c]);
            else
                b = static_cast<bits_t>(row[c]);
            s += std::uint64_t(b) * (0x9E3779B97F4A7C15ULL * std::uint64_t(2 * c + 1) | 1ULL);
        }
        h += mix64(s ^ mix64((first_row + std::uint64_t(r)) * 0xD1B54A32D192ED03ULL + tag));
    }
    return h;
}

}  // namespace kattn::detail
