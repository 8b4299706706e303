// bench/comma_list.hpp — the benchmarks' list options ("--L 1024,4096"): split on commas.
#pragma once

#include <sstream>
#include <string>
#include <vector>

namespace bench_cli {

/// The non-empty comma-separated items of s, in order.
inline std::vector<std::string> split(const std::string& s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    for (std::string item; std::getline(ss, item, ',');)
        if (!item.empty()) out.push_back(item);
    return out;
}

}  // namespace bench_cli
