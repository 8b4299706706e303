// Tests for kattn/core/error.hpp: messages name the argument, the expectation and
// the actual value; kattn::error is a std::invalid_argument.
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>

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
