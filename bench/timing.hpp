// bench/timing.hpp — the median wall time of repeated calls, after one warm-up call.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

namespace kattn_bench {

/// Median seconds of `repeats` calls of f() (≥ 1), after one untimed call.
template <class F>
double median_seconds(F&& f, int repeats) {
    f();
    std::vector<double> t;
    for (int r = 0; r < repeats; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        f();
        t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

}  // namespace kattn_bench
