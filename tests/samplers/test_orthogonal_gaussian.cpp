// Tests for kattn/samplers/orthogonal_gaussian.hpp: exact orthogonality within a block,
// chi / fixed norms, the QR sign fix (docs/samplers.md), unbiasedness of positive random
// features, determinism, argument errors.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <algorithm>
#include <vector>

#include <kattn/samplers/orthogonal_gaussian.hpp>

namespace {

using kattn::index_t;
using kattn::orthogonal_norms;
using kattn::sampler_params;
using kattn::samplers::orthogonal_gaussian;

template <class T>
std::vector<T> draw(const sampler_params& p, index_t dim, index_t count, std::uint64_t seed) {
    std::vector<T> out(static_cast<std::size_t>(dim * count));
    orthogonal_gaussian::sample(p, dim, count, seed, out.data());
    return out;
}

double dot(const double* a, const double* b, index_t n) {
    double s = 0.0;
    for (index_t i = 0; i < n; ++i) s += a[i] * b[i];
    return s;
}

}  // namespace

TEST_CASE("orthogonal_gaussian: traits") {
    static_assert(orthogonal_gaussian::is_random);
    CHECK(std::string(orthogonal_gaussian::name) == "orthogonal_gaussian");
}

TEST_CASE("orthogonal_gaussian: vectors within a block are orthogonal to 1e-12") {
    for (index_t dim : {1, 2, 7, 16, 64}) {
        const index_t count = 2 * dim + dim / 2 + 1;  // two full blocks and a partial one
        const auto w = draw<double>({0.7}, dim, count, 31 + static_cast<std::uint64_t>(dim));
        double worst = 0.0, across = 0.0;
        for (index_t a = 0; a < count; ++a) {
            for (index_t b = a + 1; b < count; ++b) {
                const double* wa = &w[static_cast<std::size_t>(a * dim)];
                const double* wb = &w[static_cast<std::size_t>(b * dim)];
                const double c = dot(wa, wb, dim) / std::sqrt(dot(wa, wa, dim) * dot(wb, wb, dim));
                if (a / dim == b / dim) {
                    worst = std::max(worst, std::abs(c));
                } else {
                    across = std::max(across, std::abs(c));
                }
            }
        }
        CAPTURE(dim);
        CHECK(worst < 1e-12);
        if (dim > 1) CHECK(across > 1e-3);  // different blocks are independent, not orthogonal
    }
}

TEST_CASE("orthogonal_gaussian: the unit directions are an orthogonal matrix (Q^T Q = I)") {
    const index_t dim = 32;
    std::vector<double> q(static_cast<std::size_t>(dim * dim));
    kattn::detail::orthogonal_block(77, 3, dim, q.data());
    for (index_t a = 0; a < dim; ++a) {
        for (index_t b = 0; b < dim; ++b) {
            double rows = 0.0, cols = 0.0;
            for (index_t i = 0; i < dim; ++i) {
                rows += q[a * dim + i] * q[b * dim + i];
                cols += q[i * dim + a] * q[i * dim + b];
            }
            CHECK(std::abs(rows - (a == b ? 1.0 : 0.0)) < 1e-13);
            CHECK(std::abs(cols - (a == b ? 1.0 : 0.0)) < 1e-13);
        }
    }
}

TEST_CASE("orthogonal_gaussian: chi norms, mean norm^2 = dim / sigma^2") {
    const index_t dim = 8, count = 8 * 5000;
    const double sigma = 1.5;
    const auto w = draw<double>({sigma, orthogonal_norms::chi}, dim, count, 4);
    double s = 0.0, s2 = 0.0;
    for (index_t k = 0; k < count; ++k) {
        const double* wk = &w[static_cast<std::size_t>(k * dim)];
        const double n2 = dot(wk, wk, dim) * sigma * sigma;  // chi²(dim)
        s += n2;
        s2 += n2 * n2;
    }
    const double mean = s / count;
    const double var = s2 / count - mean * mean;
    CHECK(std::abs(mean - dim) < 5.0 * std::sqrt(2.0 * dim / count));
    CHECK(std::abs(var - 2.0 * dim) < 0.1 * 2.0 * dim);
    // the norm of vector k is that of the documented Gaussian vector on stream norms
    const kattn::random_stream nr(4, kattn::streams::norms);
    for (index_t k : {index_t{0}, index_t{9}, count - 1}) {
        double z2 = 0.0;
        for (index_t j = 0; j < dim; ++j) {
            const double z = nr.normal(static_cast<std::uint64_t>(k * dim + j));
            z2 += z * z;
        }
        const double* wk = &w[static_cast<std::size_t>(k * dim)];
        CHECK(std::sqrt(dot(wk, wk, dim)) == doctest::Approx(std::sqrt(z2) / sigma).epsilon(1e-13));
    }
}

TEST_CASE("orthogonal_gaussian: fixed norms are all sqrt(dim) / sigma") {
    const index_t dim = 12, count = 30;
    const double sigma = 0.8;
    const auto w = draw<double>({sigma, orthogonal_norms::fixed}, dim, count, 8);
    for (index_t k = 0; k < count; ++k) {
        const double* wk = &w[static_cast<std::size_t>(k * dim)];
        CHECK(std::sqrt(dot(wk, wk, dim)) ==
              doctest::Approx(std::sqrt(static_cast<double>(dim)) / sigma).epsilon(1e-13));
    }
}

TEST_CASE("orthogonal_gaussian: sign fix — directions are Haar (first coordinate has mean 0)") {
    // Over many independent blocks, every row's first coordinate Q'[r][0] has mean 0 and
    // variance 1/dim. Without the sign fix, Householder's Q[0][0] = -|G00|/‖G[:,0]‖ < 0.
    const index_t dim = 6;
    const std::uint64_t blocks = 20'000;
    std::vector<double> q(static_cast<std::size_t>(dim * dim));
    std::vector<double> sum(static_cast<std::size_t>(dim), 0.0);
    double unfixed_row0 = 0.0;
    for (std::uint64_t b = 0; b < blocks; ++b) {
        // alternate between "many seeds" and "many blocks of one seed"
        const std::uint64_t seed = (b % 2 == 0) ? 1000 + b : 17;
        kattn::detail::orthogonal_block(seed, b, dim, q.data());
        for (index_t r = 0; r < dim; ++r) sum[static_cast<std::size_t>(r)] += q[r * dim];
        kattn::detail::orthogonal_block(seed, b, dim, q.data(), /*sign_fix=*/false);
        unfixed_row0 += q[0];
    }
    const double se = 1.0 / std::sqrt(static_cast<double>(dim) * static_cast<double>(blocks));
    for (index_t r = 0; r < dim; ++r) {
        CAPTURE(r);
        CHECK(std::abs(sum[static_cast<std::size_t>(r)] / blocks) < 5.0 * se);
    }
    // the pitfall is real: the unfixed first row is biased far beyond the noise
    CHECK(unfixed_row0 / blocks < -20.0 * se);
}

TEST_CASE("orthogonal_gaussian: E[w w^T] = sigma^-2 I") {
    const index_t dim = 4, count = 4 * 10'000;
    const double sigma = 0.5;
    const auto w = draw<double>({sigma}, dim, count, 12);
    const double var = 1.0 / (sigma * sigma);
    const double sn = std::sqrt(static_cast<double>(count));
    for (index_t a = 0; a < dim; ++a) {
        for (index_t b = 0; b < dim; ++b) {
            double c = 0.0;
            for (index_t k = 0; k < count; ++k) c += w[k * dim + a] * w[k * dim + b];
            c /= static_cast<double>(count);
            CAPTURE(a);
            CAPTURE(b);
            CHECK(std::abs(c - (a == b ? var : 0.0)) < 5.0 * std::sqrt(2.0) * var / sn);
        }
    }
}

TEST_CASE("orthogonal_gaussian: positive random features are unbiased along the first axis") {
    // x = e_0, ‖x‖ = 1: E exp(wᵀx − ‖x‖²/2) = 1 for w ~ N(0, I). Row 0 of each block is
    // the row that the missing sign fix biases (to 2Φ(−1) ≈ 0.32); blocks are independent.
    const index_t dim = 4;
    const index_t blocks = 25'000;
    const auto w = draw<double>({1.0}, dim, dim * blocks, 2718);
    auto mean_and_se = [](const std::vector<double>& v) {
        double s = 0.0, s2 = 0.0;
        for (double x : v) s += x;
        const double m = s / v.size();
        for (double x : v) s2 += (x - m) * (x - m);
        return std::pair<double, double>{m, std::sqrt(s2 / (v.size() - 1) / v.size())};
    };
    std::vector<double> row0, all;
    for (index_t k = 0; k < dim * blocks; ++k) {
        const double f = std::exp(w[static_cast<std::size_t>(k * dim)] - 0.5);
        all.push_back(f);
        if (k % dim == 0) row0.push_back(f);
    }
    const auto r0 = mean_and_se(row0);
    const auto ra = mean_and_se(all);
    const double m0 = r0.first, se0 = r0.second, ma = ra.first, sea = ra.second;
    CAPTURE(m0);
    CAPTURE(ma);
    CHECK(std::abs(m0 - 1.0) < 3.0 * se0);
    CHECK(std::abs(ma - 1.0) < 3.0 * sea);

    // Without the sign fix (same Gaussians, same chi norms) row 0 is strongly biased.
    const kattn::random_stream nr(2718, kattn::streams::norms);
    std::vector<double> q(static_cast<std::size_t>(dim * dim));
    std::vector<double> unfixed;
    for (index_t b = 0; b < blocks; ++b) {
        kattn::detail::orthogonal_block(2718, static_cast<std::uint64_t>(b), dim, q.data(), false);
        double z2 = 0.0;
        for (index_t j = 0; j < dim; ++j) {
            const double z = nr.normal(static_cast<std::uint64_t>(b * dim * dim + j));
            z2 += z * z;
        }
        unfixed.push_back(std::exp(q[0] * std::sqrt(z2) - 0.5));
    }
    const auto ru = mean_and_se(unfixed);
    const double mu = ru.first, seu = ru.second;
    CAPTURE(mu);
    CHECK(std::abs(mu - 2.0 * 0.15865525393145707) < 5.0 * seu);  // 2Φ(−1)
}

TEST_CASE("orthogonal_gaussian: deterministic, float = cast of double, prefix-stable") {
    const sampler_params p{0.9};
    const auto a = draw<double>(p, 5, 13, 42);
    const auto b = draw<double>(p, 5, 13, 42);
    const auto c = draw<double>(p, 5, 13, 43);
    const auto f = draw<float>(p, 5, 13, 42);
    CHECK(a == b);
    int same = 0;
    for (std::size_t j = 0; j < a.size(); ++j) {
        same += a[j] == c[j];
        CHECK(f[j] == static_cast<float>(a[j]));
    }
    CHECK(same == 0);
    const auto shorter = draw<double>(p, 5, 7, 42);
    for (std::size_t j = 0; j < shorter.size(); ++j) CHECK(shorter[j] == a[j]);
}

TEST_CASE("orthogonal_gaussian: dim = 1 gives ±chi(1)/sigma") {
    const auto w = draw<double>({2.0}, 1, 1000, 6);
    int neg = 0;
    const kattn::random_stream nr(6, kattn::streams::norms);
    for (std::size_t k = 0; k < w.size(); ++k) {
        CHECK(std::abs(w[k]) == doctest::Approx(std::abs(nr.normal(k)) / 2.0).epsilon(1e-15));
        neg += w[k] < 0.0;
    }
    CHECK(neg > 400);
    CHECK(neg < 600);
}

TEST_CASE("orthogonal_gaussian: bad arguments throw kattn::error naming the argument") {
    std::vector<double> out(64);
    auto msg = [&](sampler_params p, index_t dim, index_t count, double* ptr) -> std::string {
        try {
            orthogonal_gaussian::sample(p, dim, count, 1, ptr);
        } catch (const kattn::error& e) {
            return e.what();
        }
        return "";
    };
    for (double bad : {0.0, -2.0, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
        CHECK(msg({bad}, 4, 4, out.data()).find("'sigma'") != std::string::npos);
    }
    CHECK(msg({}, 0, 4, out.data()).find("'dim'") != std::string::npos);
    CHECK(msg({}, 4, 0, out.data()).find("'num_features'") != std::string::npos);
    CHECK(msg({}, 4, -2, out.data()).find("'num_features'") != std::string::npos);
    CHECK(msg({}, 4, 4, nullptr).find("'out'") != std::string::npos);
    CHECK(msg({1.0, static_cast<orthogonal_norms>(7)}, 4, 4, out.data()).find("'norms'") != std::string::npos);
    CHECK(msg({}, 4, 4, out.data()).empty());
}
