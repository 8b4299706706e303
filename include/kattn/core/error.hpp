// kattn/core/error.hpp — the one exception type kattn throws for bad input.
//
// Every message names the argument, what was expected and what came, e.g.
//   kattn: argument 'q': expected rank 2 or 4, got rank 3
// `detail::require` and `detail::fail` build such messages; `detail::check_finite`
// scans an input for NaN/Inf at the API boundary.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

#include "bfloat16.hpp"
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
    auto scan = [&](index_t i0, index_t i1) {
        for (index_t i = i0; i < i1; ++i) {
            if (!std::isfinite(static_cast<double>(p[i]))) {
                fail(arg, "finite values", to_text(p[i]) + " at flat index " + to_text(i));
            }
        }
    };
    if constexpr (std::is_same_v<T, bf16> ||
                  ((std::is_same_v<T, float> || std::is_same_v<T, double>)&&std::numeric_limits<T>::is_iec559)) {
        // Branch-free (vectorisable) test per block: all exponent bits set ⟺ Inf or NaN;
        // a flagged block is rescanned to report the first offending value.
        using U = std::conditional_t<sizeof(T) == 2, std::uint16_t,
                                     std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>>;
        constexpr U exp_mask = sizeof(T) == 2 ? U(0x7F80u) : sizeof(T) == 4 ? U(0x7F800000u) : U(0x7FF0000000000000ull);
        constexpr index_t block = 1024;
        const index_t blocks = (n + block - 1) / block;
        const auto flagged = [&](index_t b) {
            const index_t i0 = b * block, i1 = std::min(n, i0 + block);
            U bad = 0;
            for (index_t i = i0; i < i1; ++i) {
                U u;
                std::memcpy(&u, p + i, sizeof(U));
                bad |= U((u & exp_mask) == exp_mask);
            }
            return bad != 0;
        };
        // Large inputs are scanned by the threads of a parallel region (the scan is bound
        // by memory bandwidth, and the kernels after it run in parallel too); the error
        // names the first offending value whichever thread saw it.
        index_t first_bad = blocks;
#pragma omp parallel for schedule(static) reduction(min : first_bad) if (blocks >= 256)
        for (index_t b = 0; b < blocks; ++b)
            if (b < first_bad && flagged(b)) first_bad = b;
        if (first_bad < blocks) scan(first_bad * block, std::min(n, (first_bad + 1) * block));
    } else {
        scan(0, n);
    }
}

}  // namespace detail
}  // namespace kattn
