// kattn/nn/checkpoint.hpp — save and restore a model's parameters as an uncompressed .npz.
//
//   save_checkpoint(path, ps, metadata)  one float64 array per parameter_view, named by the
//       view's name ("model.encoder.0.ffn.fc1.weight") with the view's shape, plus one 1-D float64 array per
//       metadata entry (e.g. "meta.step" → {1200}). Float views are widened to float64;
//       float → double → float is exact, so a round trip is bit-exact for float and double.
//       The archive is written to "<path>.tmp" and renamed onto `path`, so an interrupted
//       save never leaves a half-written checkpoint behind. Output is byte-deterministic.
//       np.load(path) reads it: {name: array}.
//   load_checkpoint(path, ps) → metadata  fills every view of ps from the array of the same
//       name; every other array of the file is returned as metadata (flattened, C order).
//       All arrays are read and checked before any view is written: on error ps is untouched.
// Errors (kattn::error naming the path and the array): unreadable or malformed file, a
// parameter missing from the file, a shape that differs, duplicate or empty names, a
// metadata key equal to a parameter name. Reading uses io/npz.hpp, which
// accepts np.savez output (zip64 records included) and rejects np.savez_compressed.
#pragma once

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <system_error>
#include <vector>

#include "../io/npz.hpp"
#include "detail/namespace.hpp"
#include "parameter.hpp"

namespace kattn::nn {

/// Extra arrays stored next to the parameters (training step, learning rate, metrics ...).
using checkpoint_metadata = std::map<std::string, std::vector<double>>;

namespace detail {

/// Throws unless the view names are non-empty and unique and each size matches its shape.
inline void check_checkpoint_views(const std::string& path, const parameter_list& ps) {
    std::set<std::string> seen;
    for (const auto& p : ps) {
        require(!p.name.empty(), "parameters", "named views (checkpoint '" + path + "')", "an empty name");
        require(seen.insert(p.name).second, "parameters", "unique names (checkpoint '" + path + "')",
                "'" + p.name + "' twice");
        std::size_t n = 1;
        for (auto e : p.shape) n *= e;
        require(index_t(n) == p.size(), "parameters",
                "'" + p.name + "' of " + std::to_string(n) + " values (shape " + shape_text(p.shape) + ")",
                std::to_string(p.size()) + " values");
    }
}

/// Names (without ".npy") and shapes of the members of an .npz already validated by
/// npz_reader (which checks the directory); reads the shape from each .npy header.
inline std::vector<std::pair<std::string, std::vector<std::size_t>>> npz_members(const std::string& path) {
    std::ifstream is(path, std::ios::binary);
    const std::string b((std::istreambuf_iterator<char>(is)), std::istreambuf_iterator<char>());
    auto bad = [&](const std::string& what) { npz_fail(path, "a readable .npz archive", what); };
    if (b.size() < 22) bad("too short");
    std::size_t eocd = std::string::npos;
    const std::size_t lowest = b.size() > 22 + 65535 ? b.size() - 22 - 65535 : 0;
    for (std::size_t p = b.size() - 22 + 1; p-- > lowest;)
        if (get_le(b, p, 4) == 0x06054b50u) {
            eocd = p;
            break;
        }
    if (eocd == std::string::npos) bad("no end-of-central-directory record");
    std::uint64_t count = get_le(b, eocd + 10, 2), cd = get_le(b, eocd + 16, 4);
    if ((count == 0xFFFFu || cd == 0xFFFFFFFFu) && eocd >= 20 && get_le(b, eocd - 20, 4) == 0x07064b50u) {
        const std::uint64_t z = get_le(b, eocd - 20 + 8, 8);
        if (z + 56 > b.size()) bad("a corrupt zip64 directory");
        count = get_le(b, z + 32, 8);
        cd = get_le(b, z + 48, 8);
    }
    std::vector<std::pair<std::string, std::vector<std::size_t>>> out;
    for (std::uint64_t k = 0, p = cd; k < count; ++k) {
        if (p + 46 > b.size()) bad("a corrupt central directory");
        const std::uint64_t nlen = get_le(b, p + 28, 2), elen = get_le(b, p + 30, 2), clen = get_le(b, p + 32, 2);
        if (p + 46 + nlen + elen + clen > b.size()) bad("a corrupt central directory");
        std::uint64_t offset = get_le(b, p + 42, 4);
        const std::uint64_t usize = get_le(b, p + 24, 4), csize = get_le(b, p + 20, 4);
        for (std::uint64_t e = p + 46 + nlen; e + 4 <= p + 46 + nlen + elen;) {  // zip64 extra
            const std::uint64_t id = get_le(b, e, 2), len = get_le(b, e + 2, 2);
            if (id == 0x0001) {
                const std::uint64_t skip = 8 * ((usize == 0xFFFFFFFFu) + (csize == 0xFFFFFFFFu));
                if (offset == 0xFFFFFFFFu && e + 4 + skip + 8 <= e + 4 + len) offset = get_le(b, e + 4 + skip, 8);
            }
            e += 4 + len;
        }
        std::string name = b.substr(p + 46, nlen);
        p += 46 + nlen + elen + clen;
        if (name.size() < 4 || name.compare(name.size() - 4, 4, ".npy") != 0) continue;
        name.resize(name.size() - 4);
        // .npy header: "\x93NUMPY", major, minor, header length (2 bytes v1, 4 bytes v2+), dict
        if (offset + 30 > b.size()) bad("a corrupt local header of '" + name + "'");
        const std::uint64_t d = offset + 30 + get_le(b, offset + 26, 2) + get_le(b, offset + 28, 2);
        if (d + 12 > b.size() || b.compare(d, 6, "\x93NUMPY") != 0) bad("a member '" + name + "' without .npy magic");
        const bool v1 = static_cast<unsigned char>(b[d + 6]) == 1;
        const std::uint64_t hlen = get_le(b, d + 8, v1 ? 2 : 4), h0 = d + (v1 ? 10 : 12);
        if (h0 + hlen > b.size()) bad("a truncated .npy header in '" + name + "'");
        const std::string header = b.substr(h0, hlen);
        const std::size_t s = header.find("'shape'"), open = header.find('(', s), close = header.find(')', open);
        if (s == std::string::npos || open == std::string::npos || close == std::string::npos)
            bad("a .npy header without a shape in '" + name + "'");
        std::vector<std::size_t> shape;
        for (std::size_t q = open + 1; q < close;) {
            if (header[q] >= '0' && header[q] <= '9') {
                std::size_t v = 0;
                while (q < close && header[q] >= '0' && header[q] <= '9') v = 10 * v + std::size_t(header[q++] - '0');
                shape.push_back(v);
            } else if (header[q] == ',' || header[q] == ' ' || header[q] == 'L') {
                ++q;
            } else {
                bad("an unreadable .npy shape in '" + name + "'");
            }
        }
        out.emplace_back(std::move(name), std::move(shape));
    }
    return out;
}

}  // namespace detail

/// Writes every view of ps (and the metadata arrays) to the .npz at `path` (see above).
inline void save_checkpoint(const std::string& path, const parameter_list& ps,
                            const checkpoint_metadata& metadata = {}) {
    detail::check_checkpoint_views(path, ps);
    std::set<std::string> names;
    for (const auto& p : ps) names.insert(p.name);
    std::vector<kattn::detail::npz_array> arrays;
    arrays.reserve(ps.size() + metadata.size());
    for (const auto& p : ps) {
        kattn::detail::npz_array a{p.name, p.shape, std::vector<double>(std::size_t(p.size()))};
        for (index_t i = 0; i < p.size(); ++i) a.data[std::size_t(i)] = p.value_at(i);
        arrays.push_back(std::move(a));
    }
    for (const auto& [key, values] : metadata) {
        detail::require(!key.empty(), "metadata", "non-empty keys (checkpoint '" + path + "')", "an empty key");
        detail::require(!names.count(key), "metadata",
                        "keys distinct from the parameter names (checkpoint '" + path + "')", "'" + key + "'");
        arrays.push_back({key, {values.size()}, values});
    }
    const std::string tmp = path + ".tmp";
    kattn::detail::write_npz(tmp, arrays);
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) {
        std::filesystem::remove(tmp, ec);
        detail::fail("path", "a writable checkpoint location", "'" + path + "' (rename failed)");
    }
}

/// Fills every view of ps from the checkpoint at `path`; returns the other arrays.
inline checkpoint_metadata load_checkpoint(const std::string& path, parameter_list& ps) {
    detail::check_checkpoint_views(path, ps);
    const kattn::detail::npz_reader reader(path);
    std::vector<std::vector<double>> values;
    values.reserve(ps.size());
    std::set<std::string> names;
    for (const auto& p : ps) {
        if (!reader.contains(p.name))
            detail::fail("path",
                         "a checkpoint holding parameter '" + p.name + "' of shape " + detail::shape_text(p.shape),
                         "'" + path + "' (missing)");
        values.push_back(reader.array(p.name, p.shape));  // throws naming path, array and shapes
        names.insert(p.name);
    }
    checkpoint_metadata metadata;
    for (const auto& [name, shape] : detail::npz_members(path))
        if (!names.count(name)) metadata[name] = reader.array(name, shape);
    for (std::size_t k = 0; k < ps.size(); ++k)
        for (index_t i = 0; i < ps[k].size(); ++i) ps[k].set_value(i, values[k][std::size_t(i)]);
    return metadata;
}

}  // namespace kattn::nn
