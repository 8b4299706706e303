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

}  // namespace kt
