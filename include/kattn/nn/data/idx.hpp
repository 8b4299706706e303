// kattn/nn/data/idx.hpp — readers for IDX files (the MNIST / Fashion-MNIST format), gzip'd or plain.
//
// An IDX file is a big-endian header followed by raw bytes:
//   images (magic 2051 = 0x00000803): u32 magic, u32 count, u32 rows, u32 cols, then
//                                      count·rows·cols unsigned bytes (row-major, image by image)
//   labels (magic 2049 = 0x00000801): u32 magic, u32 count, then count unsigned bytes
// Files are read through zlib's gzopen/gzread, which decompresses .gz files and reads
// uncompressed files unchanged, so both forms are accepted. The reader checks the magic
// number, that the data are exactly as long as the header says (a truncated file or
// trailing bytes are errors) and that the gzip stream is intact. Every error is a
// kattn::error naming the path and what was expected. Link with -lz.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include <zlib.h>

#include "../../core/config.hpp"
#include "../detail/namespace.hpp"

namespace kattn::nn {

/// `count` grey-scale images of rows × cols bytes, pixels [count·rows·cols] row-major.
struct idx_images {
    index_t count = 0;
    index_t rows = 0;
    index_t cols = 0;
    std::vector<std::uint8_t> pixels;
};

namespace detail {

inline constexpr std::uint32_t idx_image_magic = 2051;
inline constexpr std::uint32_t idx_label_magic = 2049;

/// An open gzFile (closed on destruction) with exact-length reads.
class gz_reader {
public:
    gz_reader(const std::string& path, std::string_view what) : path_(path), what_(what) {
        errno = 0;
        file_ = gzopen(path.c_str(), "rb");
        if (file_ == nullptr) {
            const int e = errno;
            fail("path", "a readable " + what_,
                 "'" + path + "' (cannot open: " +
                     (e != 0 ? std::string(std::strerror(e)) : std::string("out of memory")) + ")");
        }
        gzbuffer(file_, 1u << 17);
    }
    gz_reader(const gz_reader&) = delete;
    gz_reader& operator=(const gz_reader&) = delete;
    ~gz_reader() {
        if (file_ != nullptr) gzclose(file_);
    }

    /// Reads up to n bytes into p; returns the number read (fewer only at end of data).
    std::size_t read_some(void* p, std::size_t n) {
        auto* out = static_cast<unsigned char*>(p);
        std::size_t done = 0;
        while (done < n) {
            const std::size_t chunk = std::min<std::size_t>(n - done, std::size_t{1} << 30);
            const int got = gzread(file_, out + done, static_cast<unsigned>(chunk));
            if (got < 0) {
                int code = 0;
                const char* msg = gzerror(file_, &code);
                fail("path", "an intact " + what_,
                     "'" + path_ + "' (read error: " + std::string(msg ? msg : "?") + ")");
            }
            if (got == 0) break;
            done += std::size_t(got);
        }
        return done;
    }

    /// Reads exactly n bytes of `part`, or throws naming the path and the shortfall.
    void read_exact(void* p, std::size_t n, std::string_view part) {
        const std::size_t got = read_some(p, n);
        if (got != n)
            fail("path", "a complete " + what_ + " (" + std::to_string(n) + " bytes of " + std::string(part) + ")",
                 "'" + path_ + "' (truncated: only " + std::to_string(got) + " bytes of " + std::string(part) + ")");
    }

    std::uint32_t read_u32(std::string_view part) {
        unsigned char b[4];
        read_exact(b, 4, part);
        return (std::uint32_t(b[0]) << 24) | (std::uint32_t(b[1]) << 16) | (std::uint32_t(b[2]) << 8) |
               std::uint32_t(b[3]);
    }

    /// Reads exactly n bytes of `part` into a new vector, growing it in 16 MiB steps so that
    /// a corrupt header announcing a huge count fails as "truncated", not as bad_alloc.
    std::vector<std::uint8_t> read_bytes(std::size_t n, std::string_view part) {
        std::vector<std::uint8_t> v;
        constexpr std::size_t step = std::size_t{1} << 24;
        while (v.size() < n) {
            const std::size_t old = v.size();
            const std::size_t want = std::min(step, n - old);
            v.resize(old + want);
            const std::size_t got = read_some(v.data() + old, want);
            if (got != want)
                fail("path", "a complete " + what_ + " (" + std::to_string(n) + " bytes of " + std::string(part) + ")",
                     "'" + path_ + "' (truncated: only " + std::to_string(old + got) + " bytes of " +
                         std::string(part) + ")");
        }
        return v;
    }

    /// Throws unless the data end here.
    void expect_end(std::size_t data_bytes) {
        unsigned char extra[64];
        const std::size_t more = read_some(extra, sizeof extra);
        if (more != 0)
            fail("path", "a " + what_ + " that ends after its " + std::to_string(data_bytes) + " data bytes",
                 "'" + path_ + "' (trailing bytes after the data)");
    }

private:
    gzFile file_ = nullptr;
    std::string path_;
    std::string what_;
};

/// Reads and checks the magic number; `kind` is e.g. "IDX image file".
inline void read_idx_magic(gz_reader& in, const std::string& path, std::uint32_t magic, std::string_view kind) {
    unsigned char b[4];
    const std::size_t got = in.read_some(b, 4);
    const std::string expected = "a gzip'd IDX " + std::string(kind) + " (magic " + std::to_string(magic) + ")";
    if (got != 4) fail("path", expected, "'" + path + "' (only " + std::to_string(got) + " bytes)");
    const std::uint32_t m =
        (std::uint32_t(b[0]) << 24) | (std::uint32_t(b[1]) << 16) | (std::uint32_t(b[2]) << 8) | std::uint32_t(b[3]);
    if (m != magic) fail("path", expected, "'" + path + "' (magic " + std::to_string(m) + ")");
}

}  // namespace detail

/// Reads an IDX image file (magic 2051), gzip'd or plain.
inline idx_images read_idx_images(const std::string& path) {
    detail::gz_reader in(path, "gzip'd IDX image file");
    detail::read_idx_magic(in, path, detail::idx_image_magic, "image file");
    idx_images img;
    img.count = index_t(in.read_u32("header"));
    img.rows = index_t(in.read_u32("header"));
    img.cols = index_t(in.read_u32("header"));
    detail::require(img.rows >= 1 && img.cols >= 1 && img.rows * img.cols <= (index_t{1} << 24), "path",
                    "an IDX image file with 1 <= rows·cols <= 2^24",
                    "'" + path + "' (" + std::to_string(img.rows) + " x " + std::to_string(img.cols) + ")");
    const std::size_t n = std::size_t(img.count) * std::size_t(img.rows) * std::size_t(img.cols);
    img.pixels = in.read_bytes(n, "pixel data");
    in.expect_end(n);
    return img;
}

/// Reads an IDX label file (magic 2049), gzip'd or plain: one byte (0..255) per item.
inline std::vector<int> read_idx_labels(const std::string& path) {
    detail::gz_reader in(path, "gzip'd IDX label file");
    detail::read_idx_magic(in, path, detail::idx_label_magic, "label file");
    const std::size_t n = in.read_u32("header");
    const std::vector<std::uint8_t> raw = in.read_bytes(n, "label data");
    in.expect_end(n);
    return std::vector<int>(raw.begin(), raw.end());
}

}  // namespace kattn::nn
