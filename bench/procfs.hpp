// bench/procfs.hpp — a process's memory as Linux reports it, for the benchmarks' memory columns.
//
// proc_status_bytes reads one field of /proc/self/status ("VmRSS": resident now, "VmHWM":
// the resident high-water mark) and returns bytes, or -1 where the file or field is missing
// (not Linux, or a sandbox that hides /proc). reset_peak_rss writes "5" to
// /proc/self/clear_refs, which resets VmHWM to the current RSS, so a peak read after one
// benchmark case is that case's peak rather than the whole process's. cpu_model names the
// CPU (/proc/cpuinfo's "model name") and utc_now stamps a record, for the JSON headers.
#pragma once

#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

namespace kattn_bench {

/// A field of /proc/self/status in bytes ("VmRSS", "VmHWM"); -1 where it cannot be read.
inline long long proc_status_bytes(std::string_view field) {
    std::ifstream f("/proc/self/status");
    const std::string key = std::string(field) + ":";
    std::string line;
    while (std::getline(f, line))
        if (line.rfind(key, 0) == 0) {
            std::istringstream in(line.substr(key.size()));
            long long kib = -1;
            in >> kib;  // "NNN kB"
            return in && kib >= 0 ? kib * 1024 : -1;
        }
    return -1;
}

/// Resets this process's peak-RSS counter (VmHWM) to its current RSS; false where the kernel
/// refuses (then VmHWM stays the process-wide peak).
inline bool reset_peak_rss() {
    std::ofstream f("/proc/self/clear_refs");
    if (!f) return false;
    f << "5";
    f.flush();
    return bool(f);
}

/// /proc/cpuinfo's first "model name", or "unknown".
inline std::string cpu_model() {
    std::ifstream f("/proc/cpuinfo");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind("model name", 0) == 0) {
            const auto c = line.find(':');
            if (c != std::string::npos) return line.substr(line.find_first_not_of(" \t", c + 1));
        }
    return "unknown";
}

/// The current time, ISO 8601 in UTC ("2026-12-03T06:15:00Z").
inline std::string utc_now() {
    char buf[32];
    const std::time_t t = std::time(nullptr);
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
    return buf;
}

}  // namespace kattn_bench
