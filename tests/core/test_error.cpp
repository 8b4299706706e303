// Tests for kattn/core/error.hpp: messages name the argument, the expectation and
// the actual value; kattn::error is a std::invalid_argument; check_finite reports the
// first non-finite value.
#include <doctest/doctest.h>

#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <omp.h>

#include <kattn/core/error.hpp>

TEST_CASE("detail::require throws kattn::error naming argument, expectation and value") {
    bool thrown = false;
    try {
        kattn::detail::require(false, "q", "rank 4", 3);
    } catch (const kattn::error& e) {
        thrown = true;
        const std::string msg = e.what();
        CHECK(msg.find("'q'") != std::string::npos);
        CHECK(msg.find("rank 4") != std::string::npos);
        CHECK(msg.find("3") != std::string::npos);
    }
    CHECK(thrown);
}

TEST_CASE("detail::require does not throw when the condition holds") {
    CHECK_NOTHROW(kattn::detail::require(true, "q", "rank 4", 4));
}

TEST_CASE("kattn::error is catchable as std::invalid_argument") {
    CHECK_THROWS_AS(kattn::detail::require(false, "k", "length > 0", 0), std::invalid_argument);
    CHECK_THROWS_AS(kattn::detail::fail("v", "finite values", "nan"), std::invalid_argument);
    CHECK_THROWS_AS(kattn::detail::require(false, "k", "length > 0", 0), kattn::error);
}

TEST_CASE_TEMPLATE("detail::check_finite names the first NaN/Inf of a large input on any thread count", T, float,
                   double, kattn::bf16) {
    // 2^20 values: the block scan runs in a parallel region; every thread count must report
    // the lowest offending index, not the one a thread happened to see first.
    const kattn::index_t n = kattn::index_t(1) << 20;
    std::vector<T> x(std::size_t(n), T(1.5f));
    const int default_threads = omp_get_max_threads();
    const auto message = [&](int threads) {
        omp_set_num_threads(threads);
        std::string text;
        try {
            kattn::detail::check_finite("x", x.data(), n);
        } catch (const kattn::error& e) {
            text = e.what();
        }
        omp_set_num_threads(default_threads);
        return text;
    };
    CHECK(message(1).empty());
    CHECK(message(2).empty());
    x[std::size_t(n - 3)] = T(std::numeric_limits<float>::infinity());  // in the last thread's range
    for (int threads : {1, 2, 3})
        CHECK(message(threads).find("at flat index " + std::to_string(n - 3)) != std::string::npos);
    x[700'001] = T(std::numeric_limits<float>::quiet_NaN());
    x[700'000] = T(-std::numeric_limits<float>::infinity());
    for (int threads : {1, 2, 3}) {
        const auto text = message(threads);
        CHECK(text.find("argument 'x'") != std::string::npos);
        CHECK(text.find("at flat index 700000") != std::string::npos);
    }
    x[5] = T(std::numeric_limits<float>::quiet_NaN());  // in the first block
    for (int threads : {1, 2, 3}) CHECK(message(threads).find("at flat index 5") != std::string::npos);
}
