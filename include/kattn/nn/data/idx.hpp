// kattn/nn/data/idx.hpp — readers for IDX files (the MNIST / Fashion-MNIST format), gzip'd or plain.
//
// An IDX file is a big-endian header followed by raw bytes:
//   images (magic 2051 = 0x00000803): u32 magic, u32 count, u32 rows, u32 cols, then
//                                      count·rows·cols unsigned bytes (row-major, image by image)
//   labels (magic 2049 = 0x00000801): u32 magic, u32 count, then count unsigned bytes
// The magic is two zero bytes, the dtype (only 0x08 = unsigned byte is read) and the rank
// (3 for images, 1 for labels); each part is checked and reported separately.
// A file starting with the gzip magic 1f 8b is one gzip member (RFC 1952) and is inflated;
// any other file is read as plain IDX. Files are hostile until checked:
//   - the file is read through detail::read_file (a directory, a missing file or a file
//     above the bound is a kattn::error), its size bounded by max_bytes plus header and gzip overhead;
//   - rows, cols ≤ 2^24 and rows·cols ≤ 2^24; count·rows·cols (overflow-checked) ≤ max_bytes
//     (default idx_max_bytes = 2 GiB);
//   - the data are exactly as long as the header says: a short file is "truncated", one
//     extra byte is "trailing bytes";
//   - gzip: the stream must be intact (CRC-32 and length trailer checked by zlib) and the
//     file must end with it: bytes after it and a second (concatenated) member are errors.
//     Inflating stops at the first byte beyond the declared size, and the output buffer
//     grows with what actually comes out, so a gzip bomb allocates at most the declared
//     size (+1 byte) and a lying header at most what the stream really holds.
// Every error is a kattn::error naming the path and what was expected. Link with -lz.
#pragma once

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <zlib.h>

#include "../../core/config.hpp"
#include "../../io/file.hpp"
#include "../detail/namespace.hpp"

namespace kattn::nn {

/// The default bound on an IDX file's data bytes (count·rows·cols, or count for labels).
inline constexpr std::uint64_t idx_max_bytes = std::uint64_t{1} << 31;

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
inline constexpr std::uint64_t idx_max_side = std::uint64_t{1} << 24;

inline std::string hex_byte(unsigned b) {
    const char* digits = "0123456789abcdef";
    return std::string("0x") + digits[(b >> 4) & 15] + digits[b & 15];
}

inline std::uint32_t big_endian_u32(const std::uint8_t* b) {
    return (std::uint32_t(b[0]) << 24) | (std::uint32_t(b[1]) << 16) | (std::uint32_t(b[2]) << 8) | std::uint32_t(b[3]);
}

/// a·b, or false when it does not fit in 64 bits.
inline bool checked_mul(std::uint64_t a, std::uint64_t b, std::uint64_t& out) {
    if (a != 0 && b > UINT64_MAX / a) return false;
    out = a * b;
    return true;
}

/// The decoded bytes of an IDX file, produced on demand: the file itself (plain) or the
/// output of inflating its single gzip member, never more than asked for.
class idx_source {
public:
    idx_source(const std::string& path, std::string_view kind, std::uint64_t max_file_bytes) : path_(path) {
        file_ = read_file(path, "path", max_file_bytes, "a readable IDX " + std::string(kind));
        gzip_ = file_.size() >= 2 && std::uint8_t(file_[0]) == 0x1f && std::uint8_t(file_[1]) == 0x8b;
        what_ = (gzip_ ? "gzip'd IDX " : "IDX ") + std::string(kind);
        if (gzip_) {
            if (inflateInit2(&z_, 16 + MAX_WBITS) != Z_OK) bad("an IDX file zlib can inflate", "out of memory");
            z_open_ = true;
        }
    }
    idx_source(const idx_source&) = delete;
    idx_source& operator=(const idx_source&) = delete;
    ~idx_source() {
        if (z_open_) inflateEnd(&z_);
    }

    const std::string& what() const { return what_; }

    /// Throws kattn::error("argument 'path': expected <expected>, got '<path>' (<why>)").
    [[noreturn]] void bad(std::string_view expected, const std::string& why) const {
        fail("path", expected, "'" + path_ + "' (" + why + ")");
    }

    /// Appends decoded bytes to `out` until it holds `want` bytes or the data end.
    void fill(std::vector<std::uint8_t>& out, std::size_t want) {
        if (!gzip_) {
            const std::size_t end = std::min(want, file_.size());
            if (out.size() < end)
                out.insert(out.end(), file_.begin() + std::ptrdiff_t(out.size()), file_.begin() + std::ptrdiff_t(end));
            return;
        }
        while (out.size() < want && !ended_) {
            const std::size_t old = out.size();
            // grow with the output (doubling, from 1 MiB), never past `want`
            const std::size_t grow = std::min(want - old, std::max<std::size_t>(old, std::size_t{1} << 20));
            out.resize(old + grow);
            if (z_.avail_in == 0 && in_pos_ < file_.size()) {
                const std::size_t chunk = std::min<std::size_t>(file_.size() - in_pos_, UINT_MAX);
                z_.next_in = reinterpret_cast<Bytef*>(file_.data() + in_pos_);
                z_.avail_in = uInt(chunk);
                in_pos_ += chunk;
            }
            z_.next_out = out.data() + old;
            z_.avail_out = uInt(std::min<std::size_t>(grow, UINT_MAX));
            const int rc = inflate(&z_, Z_NO_FLUSH);
            const std::size_t produced = std::size_t(z_.next_out - (out.data() + old));
            out.resize(old + produced);
            if (rc == Z_STREAM_END) {
                ended_ = true;
                check_nothing_follows();
            } else if (rc == Z_BUF_ERROR) {  // no progress possible: the input ran out mid-stream
                bad("an intact " + what_, "the gzip stream is cut short (truncated file)");
            } else if (rc != Z_OK) {
                bad("an intact " + what_, std::string("damaged gzip stream: ") +
                                              (z_.msg != nullptr ? z_.msg : "zlib error " + std::to_string(rc)));
            }
        }
    }

private:
    void check_nothing_follows() const {
        const std::size_t rest = z_.avail_in + (file_.size() - in_pos_);
        if (rest == 0) return;
        const std::size_t at = file_.size() - rest;
        if (rest >= 2 && std::uint8_t(file_[at]) == 0x1f && std::uint8_t(file_[at + 1]) == 0x8b)
            bad("a " + what_ + " of one gzip member",
                "a second gzip member at byte " + std::to_string(at) + "; concatenated gzip streams are not supported");
        bad("a " + what_ + " that ends with its gzip stream",
            std::to_string(rest) + " bytes after the end of the gzip stream at byte " + std::to_string(at));
    }

    std::string path_, what_, file_;
    bool gzip_ = false, z_open_ = false, ended_ = false;
    z_stream z_{};
    std::size_t in_pos_ = 0;
};

/// The data bytes of the IDX file at `path` with this magic (its last byte is the rank);
/// `dims` receives the header's dimensions (count first). `check_dims(source, dims)` checks
/// them beyond the bound max_bytes on their product, which read_idx checks.
template <class CheckDims>
std::vector<std::uint8_t> read_idx(const std::string& path, std::string_view kind, std::uint32_t magic,
                                   std::string_view data_name, std::uint64_t max_bytes,
                                   std::vector<std::uint64_t>& dims, CheckDims&& check_dims) {
    const unsigned rank = magic & 0xffu;
    const std::size_t header = 4 + 4 * std::size_t(rank);
    // the file: the data, the header and (gzip) deflate's worst-case overhead and the gzip
    // framing; saturated, since max_bytes may be UINT64_MAX (no bound but the file's size)
    const std::uint64_t slack = max_bytes / 256 + header + 4096;
    const std::uint64_t max_file = max_bytes > UINT64_MAX - slack ? UINT64_MAX : max_bytes + slack;
    idx_source in(path, kind, max_file);
    const std::string expected_magic = "an IDX " + std::string(kind) + " (magic " + std::to_string(magic) +
                                       ": two zero bytes, dtype 0x08 = unsigned byte, rank " + std::to_string(rank) +
                                       ")";
    std::vector<std::uint8_t> out;
    in.fill(out, 4);
    if (out.size() < 4) in.bad(expected_magic, "truncated: only " + std::to_string(out.size()) + " bytes");
    if (out[0] != 0 || out[1] != 0)
        in.bad(expected_magic, "not an IDX file: first bytes " + hex_byte(out[0]) + " " + hex_byte(out[1]));
    const std::uint32_t m = big_endian_u32(out.data());
    if (m != magic) {
        static constexpr const char* dtypes[] = {"unsigned byte", "signed byte", "?",      "int16",
                                                 "int32",         "float32",     "float64"};
        const unsigned t = out[2];
        const std::string dtype =
            hex_byte(t) + (t >= 0x08 && t <= 0x0e ? std::string(" (") + dtypes[t - 0x08] + ")" : "");
        in.bad(expected_magic, "magic " + std::to_string(m) + ": dtype " + dtype + ", rank " + std::to_string(out[3]));
    }
    in.fill(out, header);
    if (out.size() < header)
        in.bad("a complete " + in.what() + " (" + std::to_string(header) + " bytes of header)",
               "truncated: only " + std::to_string(out.size()) + " bytes of header");
    dims.clear();
    for (unsigned k = 0; k < rank; ++k) dims.push_back(big_endian_u32(out.data() + 4 + 4 * k));
    check_dims(in, dims);
    std::uint64_t n = 1;
    bool fits = true;
    std::string product;
    for (std::uint64_t d : dims) {
        fits = fits && checked_mul(n, d, n);
        product += (product.empty() ? "" : " x ") + std::to_string(d);
    }
    if (!fits || n > max_bytes)
        in.bad("an " + in.what() + " of at most " + std::to_string(max_bytes) + " data bytes (the max_bytes limit)",
               product + (fits ? " = " + std::to_string(n) : std::string(" (overflows 64 bits)")) +
                   " bytes, above the limit");
    const std::size_t total = header + std::size_t(n);
    in.fill(out, total + 1);  // one byte more than declared tells "trailing bytes" from "exact"
    if (out.size() < total)
        in.bad("a complete " + in.what() + " (" + std::to_string(n) + " bytes of " + std::string(data_name) + ")",
               "truncated: only " + std::to_string(out.size() - header) + " bytes of " + std::string(data_name));
    if (out.size() > total)
        in.bad("a " + in.what() + " that ends after its " + std::to_string(n) + " data bytes",
               "trailing bytes after the data");
    out.erase(out.begin(), out.begin() + std::ptrdiff_t(header));
    return out;
}

}  // namespace detail

/// Reads an IDX image file (magic 2051), gzip'd or plain, of at most max_bytes pixels.
inline idx_images read_idx_images(const std::string& path, std::uint64_t max_bytes = idx_max_bytes) {
    std::vector<std::uint64_t> dims;
    auto check = [&](detail::idx_source& in, const std::vector<std::uint64_t>& d) {
        const std::uint64_t s = detail::idx_max_side;
        if (d[1] < 1 || d[2] < 1 || d[1] > s || d[2] > s || d[1] * d[2] > s)
            in.bad("an " + in.what() + " with 1 <= rows, cols and rows·cols <= 2^24",
                   std::to_string(d[1]) + " x " + std::to_string(d[2]));
    };
    idx_images img;
    img.pixels = detail::read_idx(path, "image file", detail::idx_image_magic, "pixel data", max_bytes, dims, check);
    img.count = index_t(dims[0]);
    img.rows = index_t(dims[1]);
    img.cols = index_t(dims[2]);
    return img;
}

/// Reads an IDX label file (magic 2049), gzip'd or plain: one byte (0..255) per item, at
/// most max_bytes items.
inline std::vector<int> read_idx_labels(const std::string& path, std::uint64_t max_bytes = idx_max_bytes) {
    std::vector<std::uint64_t> dims;
    const std::vector<std::uint8_t> raw = detail::read_idx(path, "label file", detail::idx_label_magic, "label data",
                                                           max_bytes, dims, [](auto&, const auto&) {});
    return std::vector<int>(raw.begin(), raw.end());
}

}  // namespace kattn::nn
