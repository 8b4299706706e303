// kattn/io/npz.hpp — minimal NumPy .npz reader/writer for parameter files.
//
// xtensor 0.24 (Debian 12) writes and reads single .npy arrays (xt::dump_npy, and
// xt::detail::load_npy_file) but has no .npz support, and kattn is header-only without
// zlib. An .npz is a zip archive of "<name>.npy" members; np.savez stores them
// uncompressed, so a "stored" (method 0) zip is all that is needed:
//   write_npz  writes method-0 members with CRC-32 and a fixed 1980-01-01 timestamp
//              (byte-identical output for identical arrays); np.load reads it.
//   npz_reader reads method-0 members, including the zip64 extra fields and records
//              numpy's writer emits (np.savez opens every member with force_zip64);
//              deflated members (np.savez_compressed) are rejected with a clear error.
// Every failure throws kattn::error naming the file, the array and what was expected.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <exception>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <xtensor/xadapt.hpp>
#include <xtensor/xnpy.hpp>
#include <xtensor/xtensor.hpp>

#include "../core/config.hpp"
#include "../core/error.hpp"

namespace kattn::detail {

inline std::uint32_t crc32(const char* data, std::size_t n) {
    static const std::array<std::uint32_t, 256> table = [] {
        std::array<std::uint32_t, 256> t{};
        for (std::uint32_t i = 0; i < 256; ++i) {
            std::uint32_t c = i;
            for (int k = 0; k < 8; ++k) c = (c & 1u) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            t[i] = c;
        }
        return t;
    }();
    std::uint32_t c = 0xFFFFFFFFu;
    for (std::size_t i = 0; i < n; ++i) c = table[(c ^ static_cast<unsigned char>(data[i])) & 0xFFu] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

inline void put_le(std::string& s, std::uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xFFu));
}

inline std::uint64_t get_le(const std::string& s, std::size_t pos, int bytes) {
    std::uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= std::uint64_t(static_cast<unsigned char>(s[pos + i])) << (8 * i);
    return v;
}

[[noreturn]] inline void npz_fail(const std::string& path, const std::string& expected, const std::string& got) {
    fail("path", expected, "'" + path + "' (" + got + ")");
}

/// Writes the named arrays (name without ".npy" → C-order float64 data and shape) to an
/// uncompressed .npz at `path`.
struct npz_array {
    std::string name;
    std::vector<std::size_t> shape;
    std::vector<double> data;
};

inline void write_npz(const std::string& path, const std::vector<npz_array>& arrays) {
    std::string zip, central;
    for (const auto& a : arrays) {
        xt::xarray<double> x = xt::adapt(a.data, a.shape);
        const std::string npy = xt::dump_npy(x);
        const std::string name = a.name + ".npy";
        const std::uint32_t crc = crc32(npy.data(), npy.size());
        const std::uint64_t offset = zip.size();
        require(npy.size() < 0xFFFFFFFFu && offset < 0xFFFFFFFFu, "path", "parameter arrays below 4 GiB in total",
                "'" + path + "'");
        // local file header
        put_le(zip, 0x04034b50u, 4);
        put_le(zip, 20, 2);                          // version needed
        put_le(zip, 0, 2);                           // flags
        put_le(zip, 0, 2);                           // method: stored
        put_le(zip, 0, 2);                           // time 00:00:00
        put_le(zip, (0u << 9) | (1u << 5) | 1u, 2);  // date 1980-01-01
        put_le(zip, crc, 4);
        put_le(zip, npy.size(), 4);
        put_le(zip, npy.size(), 4);
        put_le(zip, name.size(), 2);
        put_le(zip, 0, 2);
        zip += name;
        zip += npy;
        // central directory record
        put_le(central, 0x02014b50u, 4);
        put_le(central, 20, 2);  // version made by
        put_le(central, 20, 2);  // version needed
        put_le(central, 0, 2);
        put_le(central, 0, 2);
        put_le(central, 0, 2);
        put_le(central, (0u << 9) | (1u << 5) | 1u, 2);
        put_le(central, crc, 4);
        put_le(central, npy.size(), 4);
        put_le(central, npy.size(), 4);
        put_le(central, name.size(), 2);
        put_le(central, 0, 2);  // extra
        put_le(central, 0, 2);  // comment
        put_le(central, 0, 2);  // disk
        put_le(central, 0, 2);  // internal attributes
        put_le(central, 0, 4);  // external attributes
        put_le(central, offset, 4);
        central += name;
    }
    const std::uint64_t cd_offset = zip.size();
    zip += central;
    put_le(zip, 0x06054b50u, 4);
    put_le(zip, 0, 2);
    put_le(zip, 0, 2);
    put_le(zip, arrays.size(), 2);
    put_le(zip, arrays.size(), 2);
    put_le(zip, central.size(), 4);
    put_le(zip, cd_offset, 4);
    put_le(zip, 0, 2);

    std::ofstream os(path, std::ios::binary | std::ios::trunc);
    if (!os) npz_fail(path, "a writable file", "cannot open for writing");
    os.write(zip.data(), static_cast<std::streamsize>(zip.size()));
    os.close();
    if (!os) npz_fail(path, "a writable file", "write failed");
}

/// Reads an .npz archive's directory; array(name, shape) returns a member's float64 data.
class npz_reader {
public:
    explicit npz_reader(std::string path) : path_(std::move(path)) {
        std::ifstream is(path_, std::ios::binary);
        if (!is) npz_fail(path_, "a readable .npz file", "cannot open");
        bytes_.assign(std::istreambuf_iterator<char>(is), std::istreambuf_iterator<char>());
        parse_directory();
    }

    const std::string& path() const { return path_; }
    bool contains(const std::string& name) const { return members_.count(name + ".npy") != 0; }

    /// The member "<name>.npy" as C-order float64 of exactly `shape`.
    std::vector<double> array(const std::string& name, const std::vector<std::size_t>& shape) const {
        auto bad_member = [&](const std::string& expected, const std::string& got) {
            fail("path", "array '" + name + "' with " + expected, "'" + path_ + "' holding " + got);
        };
        const auto it = members_.find(name + ".npy");
        if (it == members_.end()) fail("path", "an .npz holding array '" + name + "'", "'" + path_ + "' (missing)");
        const member& m = it->second;
        if (m.method != 0)
            bad_member("an uncompressed member (np.savez; np.savez_compressed is not supported)",
                       "compression method " + std::to_string(m.method));
        const std::string npy = bytes_.substr(m.data, m.size);
        if (crc32(npy.data(), npy.size()) != m.crc) bad_member("a member whose CRC-32 matches", "a corrupt member");
        std::istringstream is(npy);
        std::vector<double> out;
        std::vector<std::size_t> got_shape;
        try {
            auto f = xt::detail::load_npy_file(is);
            if (!is) bad_member("complete .npy data", "a truncated member");
            if (f.m_typestring != "<f8") bad_member("dtype float64 ('<f8')", "'" + f.m_typestring + "'");
            got_shape = f.m_shape;
            if (got_shape == shape) {
                if (f.m_fortran_order && shape.size() > 1) bad_member("C order", "Fortran order");
                out.resize(f.n_bytes() / sizeof(double));
                std::memcpy(out.data(), f.ptr(), out.size() * sizeof(double));
            }
        } catch (const kattn::error&) {
            throw;
        } catch (const std::exception& e) {
            bad_member("valid .npy data", std::string("a parse error: ") + e.what());
        }
        if (got_shape != shape) bad_member("shape " + shape_text(shape), shape_text(got_shape));
        return out;
    }

    static std::string shape_text(const std::vector<std::size_t>& s) {
        std::string r = "[";
        for (std::size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
        return r + "]";
    }

private:
    struct member {
        std::uint64_t method = 0, crc = 0, size = 0, data = 0;
    };

    void bad(const std::string& why) const { npz_fail(path_, "a .npz (zip) archive", why); }

    void parse_directory() {
        const std::string& b = bytes_;
        if (b.size() < 22) bad("too short to be a zip archive");
        std::size_t eocd = std::string::npos;
        const std::size_t lowest = b.size() > 22 + 65535 ? b.size() - 22 - 65535 : 0;
        for (std::size_t p = b.size() - 22 + 1; p-- > lowest;) {
            if (get_le(b, p, 4) == 0x06054b50u) {
                eocd = p;
                break;
            }
        }
        if (eocd == std::string::npos) bad("no zip end-of-central-directory record");
        std::uint64_t count = get_le(b, eocd + 10, 2), cd = get_le(b, eocd + 16, 4);
        if ((count == 0xFFFFu || cd == 0xFFFFFFFFu) && eocd >= 20 && get_le(b, eocd - 20, 4) == 0x07064b50u) {
            const std::uint64_t z = get_le(b, eocd - 20 + 8, 8);  // zip64 end-of-central-directory record
            if (z + 56 > b.size() || get_le(b, z, 4) != 0x06064b50u) bad("a corrupt zip64 directory");
            count = get_le(b, z + 32, 8);
            cd = get_le(b, z + 48, 8);
        }
        std::uint64_t p = cd;
        for (std::uint64_t k = 0; k < count; ++k) {
            if (p + 46 > b.size() || get_le(b, p, 4) != 0x02014b50u) bad("a corrupt central directory");
            member m;
            m.method = get_le(b, p + 10, 2);
            m.crc = get_le(b, p + 16, 4);
            std::uint64_t csize = get_le(b, p + 20, 4), usize = get_le(b, p + 24, 4);
            const std::uint64_t nlen = get_le(b, p + 28, 2), elen = get_le(b, p + 30, 2), clen = get_le(b, p + 32, 2);
            std::uint64_t offset = get_le(b, p + 42, 4);
            if (p + 46 + nlen + elen + clen > b.size()) bad("a corrupt central directory");
            const std::string name = b.substr(p + 46, nlen);
            // zip64 extended information: the 0xFFFFFFFF fields, in the order usize, csize, offset
            for (std::uint64_t e = p + 46 + nlen; e + 4 <= p + 46 + nlen + elen;) {
                const std::uint64_t id = get_le(b, e, 2), len = get_le(b, e + 2, 2);
                if (id == 0x0001) {
                    std::uint64_t q = e + 4;
                    if (usize == 0xFFFFFFFFu && q + 8 <= e + 4 + len) usize = get_le(b, q, 8), q += 8;
                    if (csize == 0xFFFFFFFFu && q + 8 <= e + 4 + len) csize = get_le(b, q, 8), q += 8;
                    if (offset == 0xFFFFFFFFu && q + 8 <= e + 4 + len) offset = get_le(b, q, 8);
                }
                e += 4 + len;
            }
            if (offset + 30 > b.size() || get_le(b, offset, 4) != 0x04034b50u) bad("a corrupt local header");
            m.data = offset + 30 + get_le(b, offset + 26, 2) + get_le(b, offset + 28, 2);
            m.size = csize;
            if (m.data + m.size > b.size()) bad("a truncated member '" + name + "'");
            members_[name] = m;
            p += 46 + nlen + elen + clen;
        }
    }

    std::string path_;
    std::string bytes_;
    std::map<std::string, member> members_;
};

}  // namespace kattn::detail
