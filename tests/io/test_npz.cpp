// Tests for kattn/io (file.hpp, zip.hpp, npy.hpp, npz.hpp): the readers hold against hostile
// bytes (each crafted archive below once read out of bounds, allocated without bound or
// loaded garbage), agree with NumPy's own writer, and saves are atomic and durable.
#include <doctest/doctest.h>

#include "error_text.hpp"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <sys/stat.h>
#include <vector>

#include <kattn/io/npz.hpp>

using kattn::detail::npz_array;
using kattn::detail::npz_reader;

namespace {

std::string hex_bytes(const char* hex) {
    std::string out;
    for (const char* p = hex; p[0] && p[1]; p += 2) out.push_back(char(std::stoi(std::string(p, 2), nullptr, 16)));
    return out;
}

/// np.savez(b, w=np.arange(6.0).reshape(2, 3) * 0.5, s=np.array([1e300, -2.5])) with NumPy
/// 1.24.2 (Debian 12's python3-numpy): zip64 extra fields in the local headers (force_zip64).
const std::string numpy_npz = hex_bytes(
    "504b0304140000000000000021003c1103c9b0000000b000000005001400772e6e707901001000b000000000000000b00000"
    "0000000000934e554d5059010076007b276465736372273a20273c6638272c2027666f727472616e5f6f72646572273a2046"
    "616c73652c20277368617065273a2028322c2033292c207d2020202020202020202020202020202020202020202020202020"
    "20202020202020202020202020202020202020202020202020202020202020200a0000000000000000000000000000e03f00"
    "0000000000f03f000000000000f83f00000000000000400000000000000440504b0304140000000000000021008326713190"
    "0000009000000005001400732e6e70790100100090000000000000009000000000000000934e554d5059010076007b276465"
    "736372273a20273c6638272c2027666f727472616e5f6f72646572273a2046616c73652c20277368617065273a2028322c29"
    "2c207d2020202020202020202020202020202020202020202020202020202020202020202020202020202020202020202020"
    "202020202020202020202020200a9c7500883ce4377e00000000000004c0504b01021403140000000000000021003c1103c9"
    "b0000000b0000000050000000000000000000000800100000000772e6e7079504b0102140314000000000000002100832671"
    "3190000000900000000500000000000000000000008001e7000000732e6e7079504b0506000000000200020066000000ae01"
    "00000000");

using kt::contains;
using kt::error_text;

std::string read_error(const std::string& bytes) {
    return error_text([&] { (void)npz_reader::from_bytes(bytes, "crafted.npz"); });
}

void put(std::string& s, std::size_t at, std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) s[at + std::size_t(i)] = char((v >> (8 * i)) & 0xFFu);
}

std::string temp_path(const std::string& name) {
    return (std::filesystem::temp_directory_path() / ("kattn_test_io_" + name)).string();
}

std::string slurp(const std::string& path) {
    std::ifstream is(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(is), std::istreambuf_iterator<char>()};
}

/// A zip64 archive of one stored member, laid out as NumPy writes large archives: the EOCD
/// saturated, then a zip64 locator and record; the central record keeps its offset in a
/// zip64 extra field. Returns the image and the positions of the fields the tests forge.
struct zip64_image {
    std::string bytes;
    std::size_t locator_offset = 0, record_cd_offset = 0, extra_offset = 0, extra_len = 0;
};

zip64_image make_zip64(const std::string& name, const std::string& data) {
    using kattn::detail::put_le;
    zip64_image z;
    std::string& b = z.bytes;
    const std::uint32_t crc = kattn::detail::crc32(data.data(), data.size());
    put_le(b, 0x04034b50u, 4);
    for (std::uint64_t v : {20u, 0u, 0u, 0u, 33u}) put_le(b, v, 2);
    put_le(b, crc, 4);
    put_le(b, data.size(), 4);
    put_le(b, data.size(), 4);
    put_le(b, name.size(), 2);
    put_le(b, 0, 2);
    b += name + data;
    const std::size_t cd = b.size();
    put_le(b, 0x02014b50u, 4);
    for (std::uint64_t v : {45u, 45u, 0u, 0u, 0u, 33u}) put_le(b, v, 2);
    put_le(b, crc, 4);
    put_le(b, data.size(), 4);
    put_le(b, data.size(), 4);
    put_le(b, name.size(), 2);
    put_le(b, 12, 2);  // extra: id 1, 8 bytes (offset)
    for (int k = 0; k < 4; ++k) put_le(b, 0, 2);
    put_le(b, 0, 2);
    put_le(b, 0xFFFFFFFFu, 4);  // offset: in the zip64 extra field
    b += name;
    z.extra_offset = b.size();
    put_le(b, 1, 2);
    z.extra_len = b.size();
    put_le(b, 8, 2);
    put_le(b, 0, 8);
    const std::size_t cd_size = b.size() - cd, rec = b.size();
    put_le(b, 0x06064b50u, 4);
    put_le(b, 44, 8);
    put_le(b, 45, 2);
    put_le(b, 45, 2);
    put_le(b, 0, 4);
    put_le(b, 0, 4);
    put_le(b, 1, 8);
    put_le(b, 1, 8);
    put_le(b, cd_size, 8);
    z.record_cd_offset = b.size();
    put_le(b, cd, 8);
    put_le(b, 0x07064b50u, 4);
    put_le(b, 0, 4);
    z.locator_offset = b.size();
    put_le(b, rec, 8);
    put_le(b, 1, 4);
    put_le(b, 0x06054b50u, 4);
    for (std::uint64_t v : {0u, 0u, 0xFFFFu, 0xFFFFu}) put_le(b, v, 2);
    put_le(b, 0xFFFFFFFFu, 4);
    put_le(b, 0xFFFFFFFFu, 4);
    put_le(b, 0, 2);
    return z;
}

const std::string small_npy = kattn::detail::write_npy_f64({3}, std::vector<double>{1, 2, 3}.data(), 3);

/// An .npy image with the given header dict text (padded as NumPy pads) and data bytes.
std::string npy_with(const std::string& dict, const std::string& data, int version = 1) {
    std::string h = dict;
    while ((10 + h.size() + 1) % 64) h += ' ';
    h += '\n';
    std::string out("\x93NUMPY", 6);
    out.push_back(char(version));
    out.push_back(0);
    kattn::detail::put_le(out, h.size(), version == 1 ? 2 : 4);
    return out + h + data;
}

std::string one_member_npz(const std::string& name, const std::string& npy) {
    kattn::detail::zip_writer w("t");
    w.add(name, npy);
    return std::move(w).finish();
}

}  // namespace

TEST_CASE("io/npz: NumPy's np.savez output (zip64 extra fields) reads exactly") {
    const npz_reader r = npz_reader::from_bytes(numpy_npz, "numpy.npz");
    CHECK(r.members().size() == 2);
    CHECK(r.array("w", {2, 3}) == std::vector<double>{0, 0.5, 1, 1.5, 2, 2.5});
    CHECK(r.array("s", {2}) == std::vector<double>{1e300, -2.5});
    // kattn's writer round-trips the same arrays, and its zip64 form reads too
    const auto image = kattn::detail::npz_image("x", {{"w", {2, 3}, {0, 0.5, 1, 1.5, 2, 2.5}}});
    CHECK(npz_reader::from_bytes(image, "x").array("w", {2, 3}) == std::vector<double>{0, 0.5, 1, 1.5, 2, 2.5});
    CHECK(npz_reader::from_bytes(make_zip64("a.npy", small_npy).bytes, "z").array("a", {3}) ==
          std::vector<double>{1, 2, 3});
}

TEST_CASE("io/npz: forged zip64 offsets and extra fields are rejected without reading out of bounds") {
    const auto good = make_zip64("a.npy", small_npy);
    SUBCASE("zip64 locator pointing near 2^64 (z + 56 wrapped)") {
        auto z = good;
        put(z.bytes, z.locator_offset, 0xFFFFFFFFFFFFFFF0ull, 8);
        CHECK(contains(read_error(z.bytes), "zip64 end-of-central-directory"));
    }
    SUBCASE("zip64 record's directory offset near 2^64") {
        auto z = good;
        put(z.bytes, z.record_cd_offset, 0xFFFFFFFFFFFFFFF8ull, 8);
        CHECK(contains(read_error(z.bytes), "central directory"));
    }
    SUBCASE("local-header offset in the zip64 extra field near 2^64 (offset + 30 wrapped)") {
        auto z = good;
        put(z.bytes, z.extra_offset + 4, 0xFFFFFFFFFFFFFFF0ull, 8);
        CHECK(contains(read_error(z.bytes), "local header"));
    }
    SUBCASE("an extra field whose length runs past the record and the file") {
        auto z = good;
        put(z.bytes, z.extra_len, 0xFFF0u, 2);
        CHECK(contains(read_error(z.bytes), "extra field"));
    }
    SUBCASE("a saturated offset with no zip64 extra field") {
        auto z = good;
        put(z.bytes, z.extra_offset, 0x7075u, 2);  // another extra id: the offset stays unknown
        CHECK(contains(read_error(z.bytes), "zip64 extra field"));
    }
}

TEST_CASE("io/npz: duplicate names, trailing bytes, overlaps and bad signatures are rejected") {
    const std::string one = one_member_npz("a.npy", small_npy);
    CHECK(read_error(one).empty());
    {
        kattn::detail::zip_writer w("t");
        w.add("a.npy", small_npy);
        w.add("a.npy", small_npy);
        CHECK(contains(read_error(std::move(w).finish()), "'a.npy' twice"));
    }
    CHECK(contains(read_error(one + "x"), "bytes after the end-of-central-directory"));
    CHECK(contains(read_error("junk" + one), "central directory"));
    std::string bad_local = one;
    bad_local[0] = 'Q';
    CHECK(contains(read_error(bad_local), "local header"));
    std::string renamed = one;
    renamed[30] = 'b';  // the local name differs from the directory's
    CHECK(contains(read_error(renamed), "does not match"));
    std::string corrupt = one;
    corrupt[30 + 5 + 70] ^= 1;  // a data byte
    CHECK(contains(read_error(corrupt), "CRC-32"));
    CHECK(contains(read_error(one_member_npz("a.txt", small_npy)), "not an .npy"));
    CHECK(contains(read_error(std::string(21, '\0')), "too short"));
}

TEST_CASE("io/npy: headers are parsed and bounded before anything is allocated") {
    auto err = [](const std::string& npy) { return read_error(one_member_npz("a.npy", npy)); };
    const std::string d3(24, '\0');
    CHECK(err(npy_with("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }", d3)).empty());
    SUBCASE("a 1 GiB header length in a small member (was handed to xtensor and allocated)") {
        std::string npy = small_npy;
        put(npy, 8, 0x40000000u, 4);
        npy[6] = 2;
        CHECK(contains(err(npy), "header of 1073741824 bytes"));
    }
    SUBCASE("a header of length 0 (was back() on an empty string)") {
        std::string npy = small_npy.substr(0, 10);
        put(npy, 8, 0, 2);
        CHECK(contains(err(npy), "header of 0 bytes"));
    }
    SUBCASE("a huge declared shape is refused before allocation") {
        CHECK(contains(
            err(npy_with("{'descr': '<f8', 'fortran_order': False, 'shape': (1099511627776, 1099511627776), }", d3)),
            "overflows"));
        CHECK(contains(err(npy_with("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296,), }", d3)),
                       "data bytes"));
    }
    SUBCASE("a shape whose product wraps (was loaded as one element)") {
        // 3 * 0xAAAAAAAAAAAAAAAB = 1 (mod 2^64)
        CHECK(contains(err(npy_with("{'descr': '<f8', 'fortran_order': False, 'shape': (3, 12297829382473034411), }",
                                    std::string(8, '\0'))),
                       "2^48"));
        CHECK(contains(err(npy_with("{'descr': '<f8', 'fortran_order': False, 'shape': (65536, 65536, 65536, 65536), }",
                                    std::string(8, '\0'))),
                       "overflows"));
    }
    SUBCASE("missing, trailing and surplus bytes, keys and dtypes") {
        CHECK(contains(err(npy_with("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }", d3 + "x")),
                       "data bytes"));
        CHECK(contains(err(npy_with("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }", d3.substr(1))),
                       "data bytes"));
        CHECK(contains(err(npy_with("{'descr': '<f8', 'descr': '<f8', 'fortran_order': False, 'shape': (3,), }", d3)),
                       "twice"));
        CHECK(
            contains(err(npy_with("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), 'x': 1}", d3)), "unknown"));
        CHECK(contains(err(npy_with("{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }", d3)), "'<f4'"));
        CHECK(err(npy_with("{'descr': '<f8', 'fortran_order': True, 'shape': (3, 1), }", d3)).empty());
        CHECK(
            contains(err(npy_with("{'descr': '<f8', 'fortran_order': True, 'shape': (3, 2), }", d3 + d3)), "Fortran"));
        CHECK(contains(err(npy_with("{'descr': '<f8', 'fortran_order': False}", d3)), "without"));
        CHECK(contains(err(npy_with("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), } x", d3)), "after"));
        CHECK(contains(err(npy_with("{'descr': '<f8', 'fortran_order': Nope, 'shape': (3,), }", d3)), "True or False"));
        CHECK(contains(err(npy_with("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }", d3, 7)), "version 7"));
        std::string no_newline = small_npy;
        no_newline[small_npy.size() - 24 - 1] = ' ';
        CHECK(contains(err(no_newline), "newline"));
    }
}

TEST_CASE("io/npz: every truncation and every single-byte change is an error or reads the same arrays") {
    const auto image = kattn::detail::npz_image("x", {{"w", {2, 3}, {0, 0.5, 1, 1.5, 2, 2.5}}, {"b", {2}, {7, -1}}});
    for (std::size_t n = 0; n < image.size(); ++n) {
        INFO("prefix of " << n << " bytes");
        CHECK_FALSE(read_error(image.substr(0, n)).empty());
    }
    int accepted = 0;
    for (std::size_t i = 0; i < image.size(); ++i) {
        std::string z = image;
        z[i] = char(z[i] ^ 0x5A);
        try {
            const auto r = npz_reader::from_bytes(z, "x");
            INFO("byte " << i << " changed and accepted");
            CHECK(r.array("w", {2, 3}) == std::vector<double>{0, 0.5, 1, 1.5, 2, 2.5});
            CHECK(r.array("b", {2}) == std::vector<double>{7, -1});
            ++accepted;
        } catch (const kattn::error&) {}
    }
    // only the fields nothing depends on may change unnoticed: per member the versions, the
    // local flags, times, dates and file attributes (23 bytes)
    CHECK(accepted <= 46);
}

TEST_CASE("io/file: a directory as path, a missing file and a size limit give kattn::error") {
    const auto dir = std::filesystem::temp_directory_path();
    CHECK(contains(error_text([&] { npz_reader r(dir.string()); }), "a directory"));
    CHECK(contains(error_text([&] { npz_reader r((dir / "kattn_no_such.npz").string()); }), "no such file"));
    CHECK(contains(error_text([&] { kattn::detail::write_npz(dir.string(), {}); }), "a directory"));
    const std::string p = temp_path("limit.npz");
    kattn::detail::write_npz(p, {{"w", {3}, {1, 2, 3}}});
    CHECK(contains(error_text([&] { npz_reader r(p, 100); }), "above the limit of 100"));
    CHECK(npz_reader(p).array("w", {3}) == std::vector<double>{1, 2, 3});
    std::filesystem::remove(p);
}

TEST_CASE("io/file: saves are atomic: a failed save keeps the old file, no temporary is left") {
    const std::string p = temp_path("atomic.npz");
    kattn::detail::write_npz(p, {{"w", {3}, {1, 2, 3}}});
    ::chmod(p.c_str(), 0640);
    const std::string before = slurp(p);
    // a failing save: the array data does not match its shape (checked before any byte is written)
    CHECK_FALSE(error_text([&] { kattn::detail::write_npz(p, {{"w", {4}, {1, 2, 3}}}); }).empty());
    CHECK(slurp(p) == before);
    kattn::detail::write_npz(p, {{"w", {2}, {5, 6}}});
    CHECK(npz_reader(p).array("w", {2}) == std::vector<double>{5, 6});
    struct stat st {};
    REQUIRE(::stat(p.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0640);  // the replaced file's permissions are kept
    int leftovers = 0;
    for (const auto& e : std::filesystem::directory_iterator(std::filesystem::temp_directory_path()))
        leftovers += e.path().filename().string().rfind(".kattn_test_io_atomic.npz.", 0) == 0;
    CHECK(leftovers == 0);
    CHECK(contains(error_text([&] { kattn::detail::write_file_atomically("/nonexistent_dir_kattn/x", "y"); }),
                   "does not exist"));
    std::filesystem::remove(p);
}
