// tests/tensors.hpp — seeded random tensors and the relative error, for every test
// (includes nothing of kattn but its random streams, so nvcc builds may use it too).
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>

#include <xtensor/xtensor.hpp>

#include <kattn/core/random.hpp>

namespace kt {

/// Tensor of the given shape with N(0, sd²) entries from a Philox stream.
template <class T, std::size_t R>
xt::xtensor<T, R> randn(const std::array<std::size_t, R>& shape, std::uint64_t seed, double sd = 1.0) {
    xt::xtensor<T, R> x = xt::xtensor<T, R>::from_shape(shape);
    const kattn::random_stream rs(seed, kattn::streams::user + 11);
    for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = static_cast<T>(sd * rs.normal(i));
    return x;
}

/// Largest |a − b| / (max |b| + tiny) over all entries (any containers with size() and
/// data()); infinite where an entry of either is not finite (std::max would pass a NaN over).
template <class A, class B>
double rel_err(const A& a, const B& b) {
    REQUIRE(a.size() == b.size());
    double num = 0, den = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        const double x = double(a.data()[i]), y = double(b.data()[i]);
        if (!std::isfinite(x) || !std::isfinite(y)) return std::numeric_limits<double>::infinity();
        num = std::max(num, std::abs(x - y));
        den = std::max(den, std::abs(y));
    }
    return num / (den + 1e-300);
}

/// rel_err per chunk of `chunk` tokens of every head, the largest, for data laid out
/// [heads, L, w] (row-major, any containers with size() and data(); heads = size / (L·w)),
/// each chunk relative to its own largest entry. Causal gradients fall off with the
/// denominators along the sequence, so an error confined to late tokens, or to the terms
/// that cross chunks, stays far below the first tokens' entries that rel_err divides by.
/// A chunk whose largest entry is under `floor` times the largest of all is held to
/// rel_err's standard instead (relative to the largest of all): its true values may be zero
/// up to rounding (a head whose only key is its first), and rounding is not compared with
/// rounding. With floor 0, a chunk whose reference is all zero (keys beyond the key
/// lengths) must be zero. A non-finite entry fails.
template <class A, class B>
double chunk_rel_err(const A& a, const B& b, std::size_t L, std::size_t w, std::size_t chunk = 64, double floor = 0) {
    REQUIRE(a.size() == b.size());
    REQUIRE(L * w > 0);
    REQUIRE(b.size() % (L * w) == 0);
    double all = 0;
    for (std::size_t i = 0; i < b.size(); ++i) all = std::max(all, std::abs(double(b.data()[i])));
    double worst = 0;
    for (std::size_t h = 0; h < b.size() / (L * w); ++h)
        for (std::size_t l0 = 0; l0 < L; l0 += chunk) {
            double num = 0, den = 0;
            for (std::size_t i = (h * L + l0) * w; i < (h * L + std::min(l0 + chunk, L)) * w; ++i) {
                const double x = double(a.data()[i]), y = double(b.data()[i]);
                if (!std::isfinite(x) || !std::isfinite(y)) return std::numeric_limits<double>::infinity();
                num = std::max(num, std::abs(x - y));
                den = std::max(den, std::abs(y));
            }
            if (den < floor * all) den = all;
            worst = std::max(worst, den > 0 ? num / den : num > 0 ? 1.0 : 0.0);
        }
    return worst;
}

}  // namespace kt
