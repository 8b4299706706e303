// kattn/io/npz.hpp — NumPy .npz files of float64 arrays: a strict reader and a durable writer.
//
// An .npz is a zip archive of "<name>.npy" members. np.savez stores them uncompressed, so
// kattn reads and writes stored (method 0) members only, with its own checked parsers
// (io/zip.hpp for the container, io/npy.hpp for each array) and no link dependency:
//   write_npz(path, arrays)  a stored zip with CRC-32s and a fixed 1980-01-01 timestamp
//       (byte-identical output for identical arrays), written with write_file_atomically
//       (io/file.hpp): a failed save leaves the previous file as it was. np.load reads it.
//   npz_reader(path)  reads the file (at most max_bytes, 16 GiB by default), checks the
//       whole directory and every member's CRC-32 and .npy header up front; np.savez output
//       (zip64 records included) is accepted, np.savez_compressed is rejected with a clear
//       error, and so is any member that is not a float64 .npy. npz_reader::from_bytes reads
//       an image already in memory.
//   array(name, shape)  the member "<name>.npy" as C-order float64 of exactly `shape`.
// Every failure throws kattn::error naming the file, the array and what was expected.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "../core/config.hpp"
#include "../core/error.hpp"
#include "file.hpp"
#include "npy.hpp"
#include "zip.hpp"

namespace kattn::detail {

[[noreturn]] inline void npz_fail(const std::string& path, const std::string& expected, const std::string& got) {
    fail("path", expected, "'" + path + "' (" + got + ")");
}

/// A named C-order float64 array of an .npz (name without ".npy").
struct npz_array {
    std::string name;
    std::vector<std::size_t> shape;
    std::vector<double> data;
};

/// The .npz image of `arrays` (what write_npz stores).
inline std::string npz_image(const std::string& path, const std::vector<npz_array>& arrays) {
    zip_writer zip(path);
    for (const auto& a : arrays) {
        std::uint64_t n = 1;
        for (const auto e : a.shape) n *= e;
        require(n == a.data.size(), "arrays", "data matching the shape of '" + a.name + "' (" + path + ")",
                std::to_string(a.data.size()) + " values for shape " + npy_shape_text(a.shape));
        zip.add(a.name + ".npy", write_npy_f64(a.shape, a.data.data(), a.data.size()));
    }
    return std::move(zip).finish();
}

/// Writes the arrays to an uncompressed .npz at `path`, atomically and durably.
inline void write_npz(const std::string& path, const std::vector<npz_array>& arrays) {
    write_file_atomically(path, npz_image(path, arrays));
}

/// Reads and checks an .npz archive; array(name, shape) returns a member's float64 data.
class npz_reader {
public:
    static constexpr std::uint64_t default_max_bytes = std::uint64_t(16) << 30;

    explicit npz_reader(std::string path, std::uint64_t max_bytes = default_max_bytes)
        : path_(std::move(path)), bytes_(read_file(path_, "path", max_bytes, "a readable .npz file")) {
        parse();
    }

    /// Reads the .npz image `bytes`; `label` names it in errors.
    static npz_reader from_bytes(std::string bytes, std::string label) {
        return npz_reader(std::move(bytes), std::move(label), 0);
    }

    const std::string& path() const { return path_; }
    bool contains(const std::string& name) const { return arrays_.count(name) != 0; }

    /// Names (without ".npy") and shapes of every array, in directory order.
    const std::vector<std::pair<std::string, std::vector<std::size_t>>>& members() const { return order_; }

    /// The member "<name>.npy" as C-order float64 of exactly `shape`.
    const std::vector<double>& array(const std::string& name, const std::vector<std::size_t>& shape) const {
        const auto it = arrays_.find(name);
        if (it == arrays_.end()) npz_fail(path_, "an .npz holding array '" + name + "'", "missing");
        if (it->second.shape != shape)
            fail("path", "array '" + name + "' with shape " + npy_shape_text(shape),
                 "'" + path_ + "' holding " + npy_shape_text(it->second.shape));
        return it->second.data;
    }

    static std::string shape_text(const std::vector<std::size_t>& s) { return npy_shape_text(s); }

private:
    npz_reader(std::string bytes, std::string label, int) : path_(std::move(label)), bytes_(std::move(bytes)) {
        parse();
    }

    void parse() {
        const zip_archive zip(bytes_, path_);
        for (const auto& m : zip.members()) {
            if (m.name.size() < 5 || m.name.compare(m.name.size() - 4, 4, ".npy") != 0)
                zip.bad("a member '" + m.name + "' that is not an .npy array");
            const std::string name = m.name.substr(0, m.name.size() - 4);
            const std::string what = "array '" + name + "' in '" + path_ + "'";
            if (m.method != 0)
                fail("path", "an uncompressed " + what + " (np.savez; np.savez_compressed is not supported)",
                     "compression method " + std::to_string(m.method));
            const std::string_view data = zip.data(m);
            if (crc32(data.data(), data.size()) != m.crc)
                fail("path", what + " whose CRC-32 matches", "a corrupt member");
            npy_array a = read_npy_f64(data, what);
            order_.emplace_back(name, a.shape);
            arrays_.emplace(name, std::move(a));
        }
        std::string().swap(bytes_);  // every array is decoded: the image is no longer needed
    }

    std::string path_;
    std::string bytes_;
    std::map<std::string, npy_array> arrays_;
    std::vector<std::pair<std::string, std::vector<std::size_t>>> order_;
};

}  // namespace kattn::detail
