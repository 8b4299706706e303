// kattn/core/error.hpp — the one exception type kattn throws for bad input.
//
// Every message names the argument, what was expected and what came, e.g.
//   kattn: argument 'q': expected rank 2 or 4, got rank 3
// `detail::require` and `detail::fail` build such messages; `detail::check_finite`
// scans an input for NaN/Inf at the API boundary.
#pragma once

#include <cmath>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

#include "config.hpp"

namespace kattn {

/// Thrown for invalid arguments (bad shapes, non-finite values, bad options) and
/// for unreadable or malformed files. Derives from std::invalid_argument so that
/// generic handlers catch it.
class error : public std::invalid_argument {
public:
    using std::invalid_argument::invalid_argument;
};

namespace detail {

template <class T>
std::string to_text(const T& value) {
    std::ostringstream os;
    os << value;
    return os.str();
}

/// Throws kattn::error("kattn: argument '<arg>': expected <expected>, got <got>").
template <class Got>
[[noreturn]] void fail(std::string_view arg, std::string_view expected, const Got& got) {
    std::string msg = "kattn: argument '";
    msg += arg;
    msg += "': expected ";
    msg += expected;
    msg += ", got ";
    msg += to_text(got);
    throw error(msg);
}

template <class Got>
void require(bool ok, std::string_view arg, std::string_view expected, const Got& got) {
    if (!ok) fail(arg, expected, got);
}

/// Throws if any of the n values at p (with stride) is NaN or infinite.
template <class T>
void check_finite(std::string_view arg, const T* p, index_t n) {
    for (index_t i = 0; i < n; ++i) {
        if (!std::isfinite(static_cast<double>(p[i]))) {
            fail(arg, "finite values", to_text(p[i]) + " at flat index " + to_text(i));
        }
    }
}

}  // namespace detail
}  // namespace kattn
