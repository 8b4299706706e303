// Tests for kattn/samplers/gaussian.hpp: moments and covariance of Ω, determinism,
// float = cast of double, argument errors.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <kattn/core/random.hpp>
#include <kattn/samplers/gaussian.hpp>

namespace {

using kattn::index_t;

template <class T>
std::vector<T> draw(const kattn::sampler_params& p, index_t dim, index_t count, std::uint64_t seed) {
    std::vector<T> out(static_cast<std::size_t>(dim * count));
    kattn::samplers::gaussian::sample(p, dim, count, seed, out.data());
    return out;
}

template <class F>
std::string error_message(F f) {
    try {
        f();
    } catch (const kattn::error& e) {
        return e.what();
    }
    return "<no kattn::error thrown>";
}

}  // namespace

TEST_CASE("gaussian: traits") {
    static_assert(kattn::samplers::gaussian::is_random);
    CHECK(std::string(kattn::samplers::gaussian::name) == "gaussian");
}

TEST_CASE("gaussian: entries follow the documented formula") {
    const kattn::sampler_params p{0.5};
    const auto w = draw<double>(p, 3, 5, 99);
    const kattn::random_stream rng(99, kattn::streams::omega);
    for (std::size_t j = 0; j < w.size(); ++j) CHECK(w[j] == rng.normal(j) / 0.5);
}

TEST_CASE("gaussian: moments of the entries are those of N(0, sigma^-2)") {
    const double sigma = 0.5;
    const index_t dim = 8, count = 50'000;  // 4e5 entries
    const auto w = draw<double>({sigma}, dim, count, 2024);
    const double n = static_cast<double>(w.size());
    double s1 = 0.0, s2 = 0.0, s4 = 0.0;
    for (double v : w) s1 += v;
    const double mean = s1 / n;
    for (double v : w) {
        s2 += (v - mean) * (v - mean);
        s4 += std::pow(v - mean, 4);
    }
    const double var = 1.0 / (sigma * sigma);
    const double sn = std::sqrt(n);
    CHECK(std::abs(mean) < 5.0 * std::sqrt(var) / sn);
    CHECK(std::abs(s2 / n - var) < 5.0 * std::sqrt(2.0) * var / sn);
    CHECK(std::abs(s4 / n / (var * var) - 3.0) < 5.0 * std::sqrt(96.0) / sn);
}

TEST_CASE("gaussian: covariance E[w w^T] = sigma^-2 I") {
    const double sigma = 2.0;
    const index_t dim = 6, count = 40'000;
    const auto w = draw<double>({sigma}, dim, count, 5);
    const double var = 1.0 / (sigma * sigma);
    const double sn = std::sqrt(static_cast<double>(count));
    for (index_t a = 0; a < dim; ++a) {
        for (index_t b = 0; b < dim; ++b) {
            double c = 0.0;
            for (index_t k = 0; k < count; ++k) c += w[k * dim + a] * w[k * dim + b];
            c /= static_cast<double>(count);
            if (a == b) {
                CHECK(std::abs(c - var) < 5.0 * std::sqrt(2.0) * var / sn);
            } else {
                CHECK(std::abs(c) < 5.0 * var / sn);
            }
        }
    }
}

TEST_CASE("gaussian: deterministic, seed-dependent, float = cast of double") {
    const kattn::sampler_params p{1.3};
    const auto a = draw<double>(p, 7, 11, 123);
    const auto b = draw<double>(p, 7, 11, 123);
    const auto c = draw<double>(p, 7, 11, 124);
    const auto f = draw<float>(p, 7, 11, 123);
    CHECK(a == b);
    int same = 0;
    for (std::size_t j = 0; j < a.size(); ++j) {
        same += a[j] == c[j];
        CHECK(f[j] == static_cast<float>(a[j]));
    }
    CHECK(same == 0);
    // fewer features is a prefix of more features (same dim)
    const auto shorter = draw<double>(p, 7, 4, 123);
    for (std::size_t j = 0; j < shorter.size(); ++j) CHECK(shorter[j] == a[j]);
}

TEST_CASE("gaussian: bad arguments throw kattn::error naming the argument") {
    std::vector<double> out(64);
    auto call = [&](double sigma, index_t dim, index_t count, double* ptr) {
        return error_message(
            [&] { kattn::samplers::gaussian::sample(kattn::sampler_params{sigma}, dim, count, 1, ptr); });
    };
    for (double bad : {0.0, -1.0, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
        CHECK(call(bad, 4, 4, out.data()).find("'sigma'") != std::string::npos);
    }
    CHECK(call(1.0, 0, 4, out.data()).find("'dim'") != std::string::npos);
    CHECK(call(1.0, -3, 4, out.data()).find("'dim'") != std::string::npos);
    CHECK(call(1.0, 4, 0, out.data()).find("'num_features'") != std::string::npos);
    CHECK(call(1.0, 4, -1, out.data()).find("'num_features'") != std::string::npos);
    CHECK(call(1.0, std::numeric_limits<index_t>::max() / 2, 4, out.data()).find("'num_features'") !=
          std::string::npos);
    CHECK(call(1.0, 4, 4, nullptr).find("'out'") != std::string::npos);
    CHECK_THROWS_AS(kattn::samplers::gaussian::sample(kattn::sampler_params{0.0}, 4, 4, 1, out.data()),
                    std::invalid_argument);
    CHECK(call(1.0, 4, 4, out.data()) == "<no kattn::error thrown>");
}
