// tests/fuzz/fuzz_common.hpp — shared pieces of kattn's libFuzzer targets (docs/fuzzing.md).
//
//   memfile           an in-memory file (memfd_create, once per process) that holds the current
//                     input; its path "/proc/self/fd/<n>" is what the readers are given, so an
//                     execution never touches the disk
//   expect_kattn_error(f)  runs f(); a kattn::error is the expected outcome for bad input, any
//                     other exception is a finding: it is printed and the process traps
//   finding(what)     prints and traps (libFuzzer saves the input as a crash-* artifact)
//   npz_listing       the member names and .npy shapes visible in the bytes of an .npz,
//                     found by a scan independent of the reader under test
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>
#include <typeinfo>
#include <vector>

#include <kattn/core/error.hpp>

namespace kattn_fuzz {

[[noreturn]] inline void finding(const std::string& what) {
    std::fprintf(stderr, "kattn fuzz finding: %s\n", what.c_str());
    std::fflush(stderr);
    __builtin_trap();
}

/// Runs f(); returns true when it completed, false when it threw kattn::error.
template <class F>
bool expect_kattn_error(F&& f) {
    try {
        f();
        return true;
    } catch (const kattn::error&) {
        return false;
    } catch (const std::exception& e) {
        finding(std::string("an exception other than kattn::error: ") + typeid(e).name() + ": " + e.what());
    } catch (...) {
        finding("a non-std exception");
    }
}

/// An anonymous in-memory file; assign() replaces its content.
class memfile {
public:
    explicit memfile(const char* name) {
        fd_ = ::memfd_create(name, MFD_CLOEXEC);
        if (fd_ < 0) {
            std::perror("memfd_create");
            std::abort();
        }
        path_ = "/proc/self/fd/" + std::to_string(fd_);
    }
    memfile(const memfile&) = delete;
    memfile& operator=(const memfile&) = delete;
    ~memfile() { ::close(fd_); }

    void assign(const void* data, std::size_t n) {
        if (::ftruncate(fd_, static_cast<off_t>(n)) != 0) {
            std::perror("ftruncate");
            std::abort();
        }
        const auto* p = static_cast<const char*>(data);
        for (std::size_t done = 0; done < n;) {
            const ssize_t w = ::pwrite(fd_, p + done, n - done, static_cast<off_t>(done));
            if (w <= 0) {
                std::perror("pwrite");
                std::abort();
            }
            done += static_cast<std::size_t>(w);
        }
    }
    void assign(std::string_view s) { assign(s.data(), s.size()); }
    const std::string& path() const { return path_; }

private:
    int fd_ = -1;
    std::string path_;
};

/// The k-th memfile of this process (created on first use).
inline memfile& input_file(int k = 0) {
    static memfile files[3] = {memfile("kattn-fuzz-0"), memfile("kattn-fuzz-1"), memfile("kattn-fuzz-2")};
    return files[k];
}

inline std::uint64_t le(std::string_view b, std::size_t pos, int bytes) {
    std::uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= std::uint64_t(static_cast<unsigned char>(b[pos + i])) << (8 * i);
    return v;
}

/// What an .npz's bytes appear to hold: every central-directory name (signature PK\1\2
/// anywhere in the bytes) and every shape of an .npy header ("'shape': (…)"), bounded.
struct npz_listing {
    std::vector<std::string> names;
    std::vector<std::vector<std::size_t>> shapes;
};

inline npz_listing list_npz(std::string_view b, std::size_t max_names = 16, std::size_t max_shapes = 4) {
    npz_listing out;
    for (std::size_t p = 0; p + 46 <= b.size() && out.names.size() < max_names; ++p) {
        if (le(b, p, 4) != 0x02014b50u) continue;
        const std::size_t nlen = le(b, p + 28, 2);
        if (p + 46 + nlen <= b.size()) out.names.emplace_back(b.substr(p + 46, nlen));
    }
    for (std::size_t p = b.find("'shape'"); p != std::string_view::npos && out.shapes.size() < max_shapes;
         p = b.find("'shape'", p + 1)) {
        const std::size_t open = b.find('(', p);
        if (open == std::string_view::npos || open > p + 16) continue;
        std::vector<std::size_t> shape;
        bool ok = true;
        std::size_t q = open + 1;
        for (; q < b.size() && b[q] != ')' && shape.size() <= 8; ++q) {
            if (b[q] >= '0' && b[q] <= '9') {
                std::size_t v = 0;
                while (q < b.size() && b[q] >= '0' && b[q] <= '9') {
                    v = v < (std::size_t{1} << 40) ? 10 * v + std::size_t(b[q] - '0') : v;
                    ++q;
                }
                shape.push_back(v);
                --q;
            } else if (b[q] != ',' && b[q] != ' ' && b[q] != 'L') {
                ok = false;
                break;
            }
        }
        if (ok && q < b.size()) out.shapes.push_back(std::move(shape));
    }
    return out;
}

/// The input cut at its first two NUL bytes into three parts (missing parts are empty),
/// written to input_file(0), (1) and (2): the files of the directory readers.
inline std::array<std::string_view, 3> split_into_input_files(std::string_view bytes) {
    std::array<std::string_view, 3> parts;
    std::string_view rest = bytes;
    for (int k = 0; k < 3; ++k) {
        const std::size_t nul = k < 2 ? rest.find('\0') : std::string_view::npos;
        parts[k] = rest.substr(0, nul);
        rest = nul == std::string_view::npos ? std::string_view() : rest.substr(nul + 1);
    }
    for (int k = 0; k < 3; ++k) input_file(k).assign(parts[k]);
    return parts;
}

}  // namespace kattn_fuzz
