// kattn/io/npy.hpp — the NumPy .npy format for float64 arrays: a bounded header parser and
// the writer.
//
// A .npy is "\x93NUMPY", a version (1, 2 or 3), a little-endian header length (2 bytes in
// version 1, 4 bytes after), a Python dict literal padded with spaces and ended by '\n',
// then the data:
//     {'descr': '<f8', 'fortran_order': False, 'shape': (3, 5), }
// read_npy_f64 accepts exactly what it can use and checks it before anything is allocated:
// a header of at most 64 KiB that lies inside the member, the three keys once each and no
// others, dtype '<f8', a shape of at most 32 dimensions whose element count is computed
// without overflow, C order (or Fortran order for at most one dimension larger than 1),
// and a data length equal to count · 8 — no byte missing, none trailing. Values are
// decoded as little-endian IEEE doubles on any host. write_npy_f64 emits what NumPy
// writes (version 1, header padded so the data starts at a multiple of 64).
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "../core/error.hpp"

namespace kattn::detail {

/// The shape and the float64 values of a .npy member (C order).
struct npy_array {
    std::vector<std::size_t> shape;
    std::vector<double> data;
};

inline std::string npy_shape_text(const std::vector<std::size_t>& s) {
    std::string r = "[";
    for (std::size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
    return r + "]";
}

namespace npy {

inline constexpr std::size_t max_header = 64 * 1024;
inline constexpr std::size_t max_rank = 32;

/// A cursor over the header dict; every failure names the member through `bad`.
template <class Bad>
struct dict_parser {
    std::string_view h;
    std::size_t i = 0;
    Bad bad;

    void skip() {
        while (i < h.size() && (h[i] == ' ' || h[i] == '\t')) ++i;
    }
    bool eat(char c) {
        skip();
        if (i < h.size() && h[i] == c) return ++i, true;
        return false;
    }
    void expect(char c) {
        if (!eat(c)) bad(std::string("a .npy header with '") + c + "' at offset " + std::to_string(i));
    }
    std::string quoted() {
        skip();
        if (i >= h.size() || (h[i] != '\'' && h[i] != '"')) bad("a .npy header with a quoted string");
        const char q = h[i++];
        const std::size_t end = h.find(q, i);
        if (end == std::string_view::npos) bad("a .npy header with an unterminated string");
        std::string s(h.substr(i, end - i));
        i = end + 1;
        return s;
    }
    bool boolean() {
        skip();
        if (h.substr(i, 4) == "True") return i += 4, true;
        if (h.substr(i, 5) == "False") return i += 5, false;
        bad("a .npy header with True or False for 'fortran_order'");
        return false;  // not reached: bad throws
    }
    std::vector<std::size_t> shape() {
        expect('(');
        std::vector<std::size_t> s;
        while (!eat(')')) {
            skip();
            if (i >= h.size() || h[i] < '0' || h[i] > '9') bad("a .npy shape of non-negative integers");
            std::uint64_t v = 0;
            for (; i < h.size() && h[i] >= '0' && h[i] <= '9'; ++i) {
                if (v > (std::uint64_t(1) << 48)) bad("a .npy shape with a dimension below 2^48");
                v = 10 * v + std::uint64_t(h[i] - '0');
            }
            if (i < h.size() && h[i] == 'L') ++i;  // Python 2 long suffix
            if (s.size() == max_rank) bad("a .npy shape of at most 32 dimensions");
            s.push_back(static_cast<std::size_t>(v));
            if (!eat(',')) {
                expect(')');
                break;
            }
        }
        return s;
    }
};

}  // namespace npy

/// Parses the .npy image `bytes`; errors name `what` (e.g. "array 'enc.w' in 'model.npz'").
inline npy_array read_npy_f64(std::string_view bytes, const std::string& what) {
    auto bad = [&](const std::string& why) { fail("path", "valid float64 .npy data for " + what, why); };
    if (bytes.size() < 10 || bytes.substr(0, 6) != std::string_view("\x93NUMPY", 6)) bad("no .npy magic");
    const auto major = static_cast<unsigned char>(bytes[6]);
    if (major < 1 || major > 3) bad(".npy format version " + std::to_string(major));
    const std::size_t len_bytes = major == 1 ? 2 : 4, start = 8 + len_bytes;
    if (bytes.size() < start) bad("a truncated .npy header");
    std::uint64_t hlen = 0;
    for (std::size_t k = 0; k < len_bytes; ++k)
        hlen |= std::uint64_t(static_cast<unsigned char>(bytes[8 + k])) << (8 * k);
    if (hlen == 0 || hlen > npy::max_header) bad("a .npy header of " + std::to_string(hlen) + " bytes (1 to 65536)");
    if (hlen > bytes.size() - start) bad("a .npy header longer than the member");
    std::string_view h = bytes.substr(start, hlen);
    if (h.back() != '\n') bad("a .npy header not ended by a newline");
    h.remove_suffix(1);
    while (!h.empty() && (h.back() == ' ' || h.back() == '\t' || h.back() == '\n')) h.remove_suffix(1);

    npy::dict_parser<decltype(bad)> d{h, 0, bad};
    std::string descr;
    bool fortran = false, seen_descr = false, seen_order = false, seen_shape = false;
    npy_array out;
    d.expect('{');
    while (!d.eat('}')) {
        const std::string key = d.quoted();
        d.expect(':');
        bool* seen = key == "descr"           ? &seen_descr
                     : key == "fortran_order" ? &seen_order
                     : key == "shape"         ? &seen_shape
                                              : nullptr;
        if (!seen) bad("an unknown .npy header key '" + key + "'");
        if (*seen) bad("the .npy header key '" + key + "' twice");
        *seen = true;
        if (key == "descr")
            descr = d.quoted();
        else if (key == "fortran_order")
            fortran = d.boolean();
        else
            out.shape = d.shape();
        if (!d.eat(',')) {
            d.expect('}');
            break;
        }
    }
    d.skip();
    if (d.i != h.size()) bad("bytes after the .npy header dict");
    if (!seen_descr || !seen_order || !seen_shape) bad("a .npy header without 'descr', 'fortran_order' or 'shape'");
    if (descr != "<f8") bad("dtype '" + descr + "' (only float64, '<f8', is read)");

    std::uint64_t count = 1, large = 0;
    for (const auto e : out.shape) {
        if (e != 0 && count > (std::uint64_t(1) << 60) / e) bad("a .npy shape whose element count overflows");
        count *= e;
        large += e > 1;
    }
    if (fortran && large > 1) bad("Fortran order (C order expected)");
    const std::uint64_t data_bytes = bytes.size() - start - hlen;
    if (count > data_bytes / 8 || count * 8 != data_bytes)
        bad("shape " + npy_shape_text(out.shape) + " (" + std::to_string(count) + " values) with " +
            std::to_string(data_bytes) + " data bytes");
    out.data.resize(static_cast<std::size_t>(count));
    const char* p = bytes.data() + start + hlen;
    if constexpr (std::endian::native == std::endian::little) {
        if (count) std::memcpy(out.data.data(), p, static_cast<std::size_t>(count) * 8);
    } else {
        for (std::size_t i = 0; i < out.data.size(); ++i) {
            std::uint64_t u = 0;
            for (int k = 0; k < 8; ++k) u |= std::uint64_t(static_cast<unsigned char>(p[8 * i + k])) << (8 * k);
            out.data[i] = std::bit_cast<double>(u);
        }
    }
    return out;
}

/// The .npy image of a C-order float64 array (what np.save writes for it).
inline std::string write_npy_f64(const std::vector<std::size_t>& shape, const double* data, std::size_t count) {
    std::string dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (";
    for (std::size_t i = 0; i < shape.size(); ++i)
        dict += std::to_string(shape[i]) + (shape.size() == 1 ? "," : i + 1 < shape.size() ? ", " : "");
    dict += "), }";
    const std::size_t total = (10 + dict.size() + 1 + 63) / 64 * 64;  // magic + length + dict + '\n'
    dict.append(total - 10 - dict.size() - 1, ' ');
    dict += '\n';
    require(dict.size() < 0xFFFFu, "shape", "an array header below 64 KiB", shape.size());
    std::string out("\x93NUMPY\x01\x00", 8);
    out.push_back(static_cast<char>(dict.size() & 0xFFu));
    out.push_back(static_cast<char>(dict.size() >> 8));
    out += dict;
    const std::size_t at = out.size();
    out.resize(at + 8 * count);
    if constexpr (std::endian::native == std::endian::little) {
        if (count) std::memcpy(out.data() + at, data, 8 * count);
    } else {
        for (std::size_t i = 0; i < count; ++i) {
            const auto u = std::bit_cast<std::uint64_t>(data[i]);
            for (int k = 0; k < 8; ++k) out[at + 8 * i + k] = static_cast<char>((u >> (8 * k)) & 0xFFu);
        }
    }
    return out;
}

}  // namespace kattn::detail
