// kattn/nn/checkpoint.hpp — save and restore a model's parameters as an uncompressed .npz.
//
//   save_checkpoint(path, ps, metadata)  one float64 array per parameter_view, named by the
//       view's name ("model.encoder.0.ffn.fc1.weight") with the view's shape, plus one 1-D float64 array per
//       metadata entry (e.g. "meta.step" → {1200}). Float views are widened to float64;
//       float → double → float is exact, so a round trip is bit-exact for float and double.
//       The archive is written to a unique temporary in the same directory, fsynced and
//       renamed onto `path` (io/file.hpp), so a failed or interrupted save leaves the previous
//       checkpoint intact and concurrent savers never share a temporary. Output is byte-deterministic.
//       np.load(path) reads it: {name: array}.
//   load_checkpoint(path, ps) → metadata  fills every view of ps from the array of the same
//       name; every other array of the file is returned as metadata (flattened, C order).
//       All arrays are read and checked before any view is written: on error ps is untouched.
// Errors (kattn::error naming the path and the array): unreadable or malformed file, a
// parameter missing from the file, a shape that differs, a parameter value that is NaN, ±Inf
// or (for a float view) outside float's range, duplicate or empty names, a metadata key
// equal to a parameter name. Metadata values are returned as stored (NaN included). Reading
// uses io/npz.hpp, which checks the whole archive, accepts np.savez output (zip64 records
// included) and rejects np.savez_compressed.
#pragma once

#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <string>
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

/// Throws unless every value read for view p is finite and, for a float view, within
/// float's range (a checkpoint holds float64 arrays; a float view narrows them).
inline void check_checkpoint_values(const std::string& path, const parameter_view& p, const std::vector<double>& v) {
    const double limit = p.is_double() ? std::numeric_limits<double>::max() : double(std::numeric_limits<float>::max());
    for (std::size_t i = 0; i < v.size(); ++i)
        if (!(std::abs(v[i]) <= limit))
            fail("path",
                 std::string("finite values") + (p.is_double() ? "" : " within float's range (|x| <= 3.4028235e38)") +
                     " for parameter '" + p.name + "'",
                 "'" + path + "' holding " + to_text(v[i]) + " at flat index " + std::to_string(i));
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
    kattn::detail::write_npz(path, arrays);  // atomic and durable (io/file.hpp)
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
        detail::check_checkpoint_values(path, p, values.back());
        names.insert(p.name);
    }
    checkpoint_metadata metadata;
    for (const auto& [name, shape] : reader.members())
        if (!names.count(name)) metadata[name] = reader.array(name, shape);
    for (std::size_t k = 0; k < ps.size(); ++k)
        for (index_t i = 0; i < ps[k].size(); ++i) ps[k].set_value(i, values[k][std::size_t(i)]);
    return metadata;
}

}  // namespace kattn::nn
