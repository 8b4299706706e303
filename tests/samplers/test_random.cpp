// Tests for kattn/core/random.hpp: determinism, independence of seeds and streams,
// moments, and known answers against a direct r123::Philox4x32 call.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <algorithm>
#include <vector>

#include <Random123/philox.h>

#include <kattn/core/random.hpp>

namespace {

// Sample moments of n draws of f(i), i = 0..n-1.
template <class F>
std::vector<double> central_moments(F f, std::uint64_t n) {
    double s1 = 0.0;
    std::vector<double> x(static_cast<std::size_t>(n));
    for (std::uint64_t i = 0; i < n; ++i) {
        x[i] = f(i);
        s1 += x[i];
    }
    const double mean = s1 / static_cast<double>(n);
    double m2 = 0.0, m4 = 0.0;
    for (double v : x) {
        const double d = v - mean;
        m2 += d * d;
        m4 += d * d * d * d;
    }
    return {mean, m2 / static_cast<double>(n), m4 / static_cast<double>(n)};
}

}  // namespace

TEST_CASE("random_stream: Philox4x32-10 known-answer vectors (Random123 kat_vectors)") {
    // philox4x32 10, ctr = 0, key = 0 → 6627e8d5 e169c58d bc57ac4c 9b00dbd8
    const kattn::random_stream zero(0, 0);
    CHECK(zero.bits(0) == 0x6627e8d5u);
    CHECK(zero.bits(1) == 0xe169c58du);
    CHECK(zero.bits(2) == 0xbc57ac4cu);
    CHECK(zero.bits(3) == 0x9b00dbd8u);
    // philox4x32 10, ctr = ffffffff×4, key = ffffffff×2 → 408f276d 41c83b0e a20bc7c6 6d5451fd
    const kattn::random_stream ones(~std::uint64_t{0}, ~std::uint64_t{0});
    const auto x = ones.block(~std::uint64_t{0});
    CHECK(x.v[0] == 0x408f276du);
    CHECK(x.v[1] == 0x41c83b0eu);
    CHECK(x.v[2] == 0xa20bc7c6u);
    CHECK(x.v[3] == 0x6d5451fdu);
}

TEST_CASE("random_stream: reproduces a direct r123::Philox4x32 call bit-for-bit") {
    const std::uint64_t seed = 0x0123456789abcdefull;
    const std::uint64_t stream = 0xfedcba9876543210ull;
    const kattn::random_stream rng(seed, stream);
    r123::Philox4x32 philox;
    const r123::Philox4x32::key_type key = {{0x89abcdefu, 0x01234567u}};
    for (std::uint64_t j :
         {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{12345}, std::uint64_t{0x1'0000'0002ull}}) {
        const r123::Philox4x32::ctr_type ctr = {
            {static_cast<std::uint32_t>(j), static_cast<std::uint32_t>(j >> 32), 0x76543210u, 0xfedcba98u}};
        const auto x = philox(ctr, key);
        for (unsigned w = 0; w < 4; ++w) CHECK(rng.bits(4 * j + w) == x.v[w]);
        // uniform(2j), uniform(2j+1) from the 64-bit words x1:x0 and x3:x2
        const std::uint64_t w0 = (std::uint64_t{x.v[1]} << 32) | x.v[0];
        const std::uint64_t w1 = (std::uint64_t{x.v[3]} << 32) | x.v[2];
        CHECK(rng.bits64(2 * j) == w0);
        CHECK(rng.bits64(2 * j + 1) == w1);
        const double u1 = static_cast<double>(w0 >> 11) * 0x1p-53;
        const double u2 = static_cast<double>(w1 >> 11) * 0x1p-53;
        CHECK(rng.uniform(2 * j) == u1);
        CHECK(rng.uniform(2 * j + 1) == u2);
        // Box–Muller from the same call
        const double r = std::sqrt(-2.0 * std::log(u1));
        const double t = 6.283185307179586 * u2;
        CHECK(rng.normal(2 * j) == r * std::cos(t));
        CHECK(rng.normal(2 * j + 1) == r * std::sin(t));
    }
}

TEST_CASE("random_stream: to_unit_open never returns 0 or 1 and is exact") {
    using kattn::detail::to_unit_open;
    CHECK(to_unit_open(0) == 0x1p-54);
    CHECK(to_unit_open((std::uint64_t{1} << 11) - 1) == 0x1p-54);
    CHECK(to_unit_open(std::uint64_t{1} << 11) == 0x1p-53);
    CHECK(to_unit_open(~std::uint64_t{0}) == 1.0 - 0x1p-53);
    CHECK(to_unit_open(~std::uint64_t{0}) < 1.0);
    CHECK(to_unit_open(std::uint64_t{1} << 63) == 0.5);
}

TEST_CASE("random_stream: deterministic; seeds and streams give different numbers") {
    const kattn::random_stream a(42, kattn::streams::omega);
    const kattn::random_stream a2(42, kattn::streams::omega);
    const kattn::random_stream other_seed(43, kattn::streams::omega);
    const kattn::random_stream other_stream(42, kattn::streams::bias);
    const kattn::random_stream high_seed(42 + (std::uint64_t{1} << 32), kattn::streams::omega);
    const kattn::random_stream high_stream(42, kattn::streams::omega + (std::uint64_t{1} << 32));
    int same_seed = 0, same_stream = 0, same_hseed = 0, same_hstream = 0;
    for (std::uint64_t i = 0; i < 1000; ++i) {
        CHECK(a.normal(i) == a2.normal(i));
        CHECK(a.uniform(i) == a2.uniform(i));
        // order of evaluation does not matter (stateless)
        CHECK(a.normal(999 - i) == a2.normal(999 - i));
        same_seed += a.bits(i) == other_seed.bits(i);
        same_stream += a.bits(i) == other_stream.bits(i);
        same_hseed += a.bits(i) == high_seed.bits(i);
        same_hstream += a.bits(i) == high_stream.bits(i);
    }
    CHECK(same_seed <= 1);
    CHECK(same_stream <= 1);
    CHECK(same_hseed <= 1);
    CHECK(same_hstream <= 1);
    // distinct indices differ
    CHECK(a.normal(0) != a.normal(1));
    CHECK(a.uniform(0) != a.uniform(1));
}

TEST_CASE("random_stream: uniform moments (1e6 draws, within 5 standard errors)") {
    const kattn::random_stream rng(7, kattn::streams::omega);
    const std::uint64_t n = 1'000'000;
    double lo = 1.0, hi = 0.0;
    const auto m = central_moments(
        [&](std::uint64_t i) {
            const double u = rng.uniform(i);
            lo = std::min(lo, u);
            hi = std::max(hi, u);
            return u;
        },
        n);
    const double sn = std::sqrt(static_cast<double>(n));
    CHECK(lo > 0.0);
    CHECK(hi < 1.0);
    CHECK(std::abs(m[0] - 0.5) < 5.0 * std::sqrt(1.0 / 12.0) / sn);
    CHECK(std::abs(m[1] - 1.0 / 12.0) < 5.0 * std::sqrt(1.0 / 180.0) / sn);
}

TEST_CASE("random_stream: normal mean/var/kurtosis (1e6 draws, within 5 standard errors)") {
    const kattn::random_stream rng(11, kattn::streams::norms);
    const std::uint64_t n = 1'000'000;
    const auto m = central_moments([&](std::uint64_t i) { return rng.normal(i); }, n);
    const double sn = std::sqrt(static_cast<double>(n));
    CHECK(std::abs(m[0]) < 5.0 / sn);
    CHECK(std::abs(m[1] - 1.0) < 5.0 * std::sqrt(2.0) / sn);
    // E z^4 = 3, Var z^4 = 105 - 9 = 96
    CHECK(std::abs(m[2] - 3.0) < 5.0 * std::sqrt(96.0) / sn);
    // even/odd halves are uncorrelated (cos and sin of one call)
    double c = 0.0;
    for (std::uint64_t j = 0; j < n / 2; ++j) c += rng.normal(2 * j) * rng.normal(2 * j + 1);
    CHECK(std::abs(c / static_cast<double>(n / 2)) < 5.0 / std::sqrt(static_cast<double>(n / 2)));
}
