// kattn/nn/model_file.hpp — the one-file format of nn::text_classifier (save / load_model).
//
// A stored (uncompressed) zip archive, written atomically and durably (io/file.hpp):
//   model.txt       key=value lines, each ending in '\n':
//                     format=kattn-text-classifier
//                     version=1
//                     the 17 keys of model_spec (spec_text: kind, dim, heads, ... seed)
//                     lowercase=0|1   (the vocabulary's case mapping)
//                     aligned=0|1     (Coulomb phase A has run: kernel-<map> only)
//                   format and version first; every other key exactly once, in any order.
//   vocabulary.txt  the vocabulary file, version 2 (nn/data/text.hpp)
//   labels.txt      one label name per line (classes lines, distinct, non-empty)
//   <name>.npy      one float64 array per parameter, named as in checkpoints
//                   ("model.encoder.0.attn.q.weight"), and per piece of state that the
//                   seeds do not reproduce: "state.encoder.<l>.attn.omega<h>" (Coulomb Ω_h)
// np.load(path) reads the arrays. Reading (read_model_file) checks the archive, every
// member's CRC-32, method and name (unknown members are errors), the format and version
// (another version: an error naming both), the spec (parse_model_spec), the vocabulary and
// the labels; text_classifier::load_model then checks each array's shape and values.
// Every failure is a kattn::error naming the file.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "../io/file.hpp"
#include "../io/npy.hpp"
#include "../io/npz.hpp"
#include "../io/zip.hpp"
#include "data/text.hpp"
#include "model_spec.hpp"

namespace kattn::nn {

inline constexpr std::string_view model_file_format = "kattn-text-classifier";
inline constexpr int model_file_version = 1;

/// What a model file holds, parsed and checked (arrays by name, without ".npy").
struct model_file_contents {
    model_spec spec;
    vocabulary vocab;
    std::vector<std::string> labels;
    bool aligned = false;
    std::map<std::string, kattn::detail::npy_array> arrays;
};

namespace detail {

inline constexpr std::size_t model_text_max_bytes = 1 << 16;  ///< model.txt
inline constexpr std::size_t label_max_bytes = 256;           ///< one label name

[[noreturn]] inline void model_file_fail(const std::string& path, const std::string& expected, const std::string& why) {
    fail("path", expected, "'" + path + "' (" + why + ")");
}

/// Throws unless `labels` are `classes` distinct non-empty names without control characters.
inline void check_label_names(const std::vector<std::string>& labels, index_t classes, const std::string& where) {
    require(index_t(labels.size()) == classes, "label_names",
            "one name per class (" + std::to_string(classes) + ")" + where, labels.size());
    std::set<std::string> seen;
    for (const std::string& l : labels) {
        bool ok = !l.empty() && l.size() <= label_max_bytes;
        for (const char c : l) ok = ok && static_cast<unsigned char>(c) >= 0x20 && c != 0x7f;
        require(ok, "label_names", "non-empty names of at most 256 bytes without control characters" + where,
                quoted_excerpt(l));
        require(seen.insert(l).second, "label_names", "distinct names" + where, quoted_excerpt(l, " twice"));
    }
}

/// The key=value lines of model.txt.
inline std::string model_text(const model_spec& spec, bool lowercase, bool aligned) {
    return "format=" + std::string(model_file_format) + "\nversion=" + std::to_string(model_file_version) + "\n" +
           spec_text(spec) + "lowercase=" + std::to_string(int(lowercase)) +
           "\naligned=" + std::to_string(int(aligned)) + "\n";
}

/// The archive image: the three text members, then the arrays in order.
inline std::string model_file_image(const std::string& path, const model_spec& spec, const vocabulary& vocab,
                                    const std::vector<std::string>& labels, bool aligned,
                                    const std::vector<kattn::detail::npz_array>& arrays) {
    kattn::detail::zip_writer zip(path);
    zip.add("model.txt", model_text(spec, vocab.lowercase(), aligned));
    zip.add("vocabulary.txt", vocab.to_string());
    std::string l;
    for (const auto& name : labels) (l += name) += '\n';
    zip.add("labels.txt", l);
    for (const auto& a : arrays)
        zip.add(a.name + ".npy", kattn::detail::write_npy_f64(a.shape, a.data.data(), a.data.size()));
    return std::move(zip).finish();
}

/// The lines of a text member: '\n'-terminated, no '\r'.
inline std::vector<std::string> member_lines(const std::string& path, std::string_view member, std::string_view text) {
    const std::string what = "a member '" + std::string(member) + "' of '\\n'-terminated lines";
    if (text.empty() || text.back() != '\n')
        model_file_fail(path, what, "member '" + std::string(member) + "' truncated");
    if (text.find('\r') != std::string_view::npos || text.find('\0') != std::string_view::npos)
        model_file_fail(path, what, "member '" + std::string(member) + "' holds a carriage return or NUL byte");
    return split_lines(std::string(text), false);
}

/// Parses model.txt into contents (spec, lowercase, aligned).
inline void parse_model_text(const std::string& path, std::string_view text, model_file_contents& out) {
    if (text.size() > model_text_max_bytes)
        model_file_fail(path, "a member 'model.txt' of at most 65536 bytes", std::to_string(text.size()) + " bytes");
    const std::vector<std::string> lines = member_lines(path, "model.txt", text);
    const std::string format_line = "format=" + std::string(model_file_format);
    if (lines[0] != format_line)
        model_file_fail(path, "a kattn model file whose model.txt starts with '" + format_line + "'",
                        "first line '" + excerpt(lines[0]) + "'");
    const std::string version = lines.size() > 1 && lines[1].rfind("version=", 0) == 0 ? lines[1].substr(8) : "";
    if (version != std::to_string(model_file_version))
        model_file_fail(path,
                        "a " + std::string(model_file_format) + " file of version " +
                            std::to_string(model_file_version) + " (the version this build reads)",
                        lines.size() > 1 && lines[1].rfind("version=", 0) == 0
                            ? "version " + excerpt(version)
                            : "no version line: '" + (lines.size() > 1 ? excerpt(lines[1]) : std::string()) + "'");
    std::map<std::string, std::string> kv;
    for (std::size_t k = 2; k < lines.size(); ++k) {
        const std::size_t eq = lines[k].find('=');
        if (eq == 0 || eq == std::string::npos)
            model_file_fail(path, "key=value lines in model.txt",
                            "line " + std::to_string(k + 1) + ": '" + excerpt(lines[k]) + "'");
        const std::string key = lines[k].substr(0, eq);
        if (!kv.emplace(key, lines[k].substr(eq + 1)).second || key == "format" || key == "version")
            model_file_fail(path, "each key of model.txt once",
                            "line " + std::to_string(k + 1) + ": '" + key + "' again");
    }
    auto flag = [&](const std::string& key) {
        const auto it = kv.find(key);
        if (it == kv.end()) model_file_fail(path, "a model.txt with the key '" + key + "'", "missing");
        if (it->second != "0" && it->second != "1")
            model_file_fail(path, "'" + key + "' 0 or 1 in model.txt", "'" + excerpt(it->second) + "'");
        const bool v = it->second == "1";
        kv.erase(it);
        return v;
    };
    const bool lowercase = flag("lowercase");
    out.aligned = flag("aligned");
    out.spec = parse_model_spec(std::move(kv), "'" + path + "', member model.txt");
    if (out.aligned && !needs_alignment(out.spec))
        model_file_fail(path, "aligned=0 for kind '" + out.spec.kind + "' (only kernel-<map> is aligned)", "aligned=1");
    out.vocab = vocabulary(lowercase);  // replaced by the vocabulary member
}

/// Reads and checks the model file at `path` (at most max_bytes); see the header comment.
inline model_file_contents read_model_file(const std::string& path, std::uint64_t max_bytes) {
    const std::string bytes = read_file(path, "path", max_bytes, "a readable kattn model file");
    const kattn::detail::zip_archive zip(bytes, path);
    auto text = [&](const std::string& name) {
        const auto* m = zip.find(name);
        if (!m) model_file_fail(path, "a kattn model file with the member '" + name + "'", "missing");
        return zip.data(*m);
    };
    for (const auto& m : zip.members()) {
        const bool known = m.name == "model.txt" || m.name == "vocabulary.txt" || m.name == "labels.txt" ||
                           (m.name.size() > 4 && m.name.compare(m.name.size() - 4, 4, ".npy") == 0);
        if (!known)
            model_file_fail(path, "members model.txt, vocabulary.txt, labels.txt and *.npy", "member '" + m.name + "'");
        if (m.method != 0) model_file_fail(path, "stored (uncompressed) members", "member '" + m.name + "' compressed");
        const std::string_view d = zip.data(m);
        if (kattn::detail::crc32(d.data(), d.size()) != m.crc)
            model_file_fail(path, "members whose CRC-32 matches", "member '" + m.name + "' corrupt");
    }
    model_file_contents out;
    parse_model_text(path, text("model.txt"), out);
    out.vocab = vocabulary::from_string(std::string(text("vocabulary.txt")), path + ", member vocabulary.txt",
                                        out.vocab.lowercase());
    const std::string_view l = text("labels.txt");
    if (l.size() > std::size_t(out.spec.classes) * (label_max_bytes + 1))
        model_file_fail(path, "a labels.txt of " + std::to_string(out.spec.classes) + " names",
                        std::to_string(l.size()) + " bytes");
    out.labels = member_lines(path, "labels.txt", l);
    try {
        check_label_names(out.labels, out.spec.classes, "");
    } catch (const kattn::error& e) {
        model_file_fail(path, "valid label names in labels.txt", e.what());
    }
    for (const auto& m : zip.members()) {
        if (m.name.size() <= 4 || m.name.compare(m.name.size() - 4, 4, ".npy") != 0) continue;
        const std::string name = m.name.substr(0, m.name.size() - 4);
        out.arrays.emplace(name, kattn::detail::read_npy_f64(zip.data(m), "array '" + name + "' in '" + path + "'"));
    }
    return out;
}

/// A bound on the values the model of spec allocates (parameters, frequencies, position
/// table, frozen layers), so that a small file cannot make load_model allocate without limit.
inline double model_values_bound(const model_spec& s, index_t vocab) {
    const double D = double(s.dim), F = double(s.ffn_hidden), M = double(std::max(s.num_features, 2 * s.fska_pairs));
    return double(vocab) * D + double(s.max_length) * D +
           double(s.layers) * (64 * D * D + 2 * D * F + 4 * D * M + 16 * D) + (D + 1) * double(s.head_hidden) +
           (std::max(D, double(s.head_hidden)) + 1) * double(s.classes);
}

}  // namespace detail
}  // namespace kattn::nn
