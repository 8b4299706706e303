// kattn/nn/model_spec.hpp — everything needed to rebuild a sequence classifier: the
// attention kind by name, the sizes, the options and the seed, with their defaults in
// one place (the defaults of examples/common/experiment.hpp's model_options).
//
//   kind                 transformer, transformer-noqkv, uniform, performer, fska,
//                        fska-s<k> (fska with scale k), fska-signed, fska-learnable-v,
//                        qk-<map> (the map with learned Q/K/V projections and fixed random
//                        frequencies, as performer is for favor), vanilla-<map>, kernel-<map>,
//                        shrunk-<map> (Coulomb layers: Q = K = the input, no projections;
//                        <map>: a positive map of kattn::features::all; kernel- runs Coulomb
//                        phase A before training)
//   dim 64, heads 4, layers 2, ffn_hidden 256, head_hidden 0, dropout 0.1, pre_ln false,
//   num_features 64 (m per head: performer, qk, vanilla/kernel/shrunk), fska_pairs 64,
//   fska_kl_weight 1e-3, fska_scale 1 (s of fska and fska-learnable-v), temperature 1 (τ of
//   the map: qk-/vanilla-/kernel-/shrunk-<map> with a map that has one), input_scale 0 (the
//   map's default; else q, k are multiplied by it: qk- and Coulomb kinds), learn_input_scale
//   false (Coulomb kinds: one scale per head learned from there on), align_samples 1024,
//   align_steps 200 (phase A), max_length 64 (positions and truncation), classes 2, seed 1.
// check_model_spec(spec) throws kattn::error naming the field; spec_text(spec) and
// parse_model_spec(lines, label) are the key=value form used by model files
// (nn/model_file.hpp): every key once, integers and doubles range-checked, unknown keys and
// kinds rejected; temperature, input_scale and learn_input_scale are written only when they
// differ from their defaults and may be absent when read (files written before they
// existed). The factory that builds the model is nn/model_factory.hpp.
#pragma once

#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "../core/config.hpp"
#include "../core/error.hpp"
#include "../core/type_list.hpp"
#include "../features/all.hpp"
#include "detail/namespace.hpp"

namespace kattn::nn {

/// A classifier's configuration (defaults: the header comment and docs/encoder.md).
struct model_spec {
    std::string kind = "transformer";
    index_t dim = 64;                ///< model width D
    index_t heads = 4;               ///< attention heads (a divisor of dim)
    index_t layers = 2;              ///< encoder layers
    index_t ffn_hidden = 256;        ///< FFN hidden width
    index_t head_hidden = 0;         ///< MLP head hidden width (0: one Linear)
    double dropout = 0.1;            ///< encoder and head dropout
    bool pre_ln = false;             ///< pre-LN encoder layers (default post-LN)
    index_t num_features = 64;       ///< m per head: performer, vanilla-/kernel-/shrunk-<map>
    index_t fska_pairs = 64;         ///< frequency pairs per FSKA head
    double fska_kl_weight = 1e-3;    ///< λ of FSKA's KL term
    double fska_scale = 1.0;         ///< s of φ⁺ for fska and fska-learnable-v (fska-s<k> sets k itself)
    double temperature = 1.0;        ///< τ of the map (qk-/Coulomb kinds whose map has one)
    double input_scale = 0.0;        ///< q, k multiplied by this before the map (qk-/Coulomb); 0: the map's default
    bool learn_input_scale = false;  ///< Coulomb kinds: learn the input scale per head (coulomb_config)
    index_t align_samples = 1024;    ///< Coulomb phase A: pooled training items
    index_t align_steps = 200;       ///< Coulomb phase A: Langevin steps per layer
    index_t max_length = 64;         ///< position table and truncation length (tokens)
    index_t classes = 2;
    std::uint64_t seed = 1;  ///< layer seeds: seed·1000 + 17·l + 1; input seed + 7
};

/// The families a kind names.
enum class attention_family { softmax, uniform, performer, fska, coulomb };

/// A kind, resolved: family and its variant options.
struct resolved_kind {
    attention_family family = attention_family::softmax;
    bool qkv = true;           ///< softmax: learned Q, K, V
    bool positive = true;      ///< fska: φ⁺ (false: signed)
    bool learnable_v = false;  ///< fska
    double scale = 1.0;        ///< fska: s
    bool align = false;        ///< coulomb: kernel- (phase A)
    bool shrunk = false;       ///< coulomb: shrunk-
    std::string map;           ///< coulomb, and performer with qk-<map>: the map's name
};

/// True if the positive map `name` has a temperature τ (its params have a `temperature`).
inline bool map_has_temperature(std::string_view name) {
    bool has = false;
    kattn::for_each_type<kattn::features::all>([&]<class Map>() {
        if constexpr (requires(typename Map::params p) { p.temperature; }) has = has || name == Map::name;
    });
    return has;
}

namespace detail {

/// The names of the Coulomb maps: positive maps of features::all (not positive<F> wrappers).
inline std::string coulomb_map_names() {
    std::string maps;
    kattn::for_each_type<kattn::features::all>([&]<class Map>() {
        if constexpr (Map::is_positive && !requires { typename Map::inner_map; })
            maps += (maps.empty() ? "" : ", ") + std::string(Map::name);
    });
    return maps;
}

inline bool is_coulomb_map(std::string_view name) {
    bool found = false;
    kattn::for_each_type<kattn::features::all>([&]<class Map>() {
        if constexpr (Map::is_positive && !requires { typename Map::inner_map; }) found = found || name == Map::name;
    });
    return found;
}

/// The value of a complete decimal number `s` (strtod syntax, no spaces), or false.
inline bool parse_double(std::string_view s, double& out) {
    if (s.empty() || s.size() > 64 || std::isspace(static_cast<unsigned char>(s[0]))) return false;
    const std::string t(s);
    char* end = nullptr;
    out = std::strtod(t.c_str(), &end);
    return end == t.c_str() + t.size() && std::isfinite(out);
}

}  // namespace detail

/// Resolves spec.kind (and fska_scale); throws kattn::error for an unknown kind.
inline resolved_kind resolve_kind(const model_spec& spec) {
    const std::string& k = spec.kind;
    resolved_kind r;
    r.scale = spec.fska_scale;
    auto starts = [&](std::string_view p) { return k.size() > p.size() && k.compare(0, p.size(), p) == 0; };
    if (k == "transformer" || k == "transformer-noqkv") {
        r.qkv = k == "transformer";
    } else if (k == "uniform") {
        r.family = attention_family::uniform;
    } else if (k == "performer") {
        r.family = attention_family::performer;
    } else if (starts("qk-")) {  // kernel_mha<map>: learned Q, K, V projections, fixed random Ω
        r.family = attention_family::performer;
        r.map = k.substr(3);
        if (!detail::is_coulomb_map(r.map))
            throw kattn::error("kattn: argument 'model': expected a map in {" + detail::coulomb_map_names() +
                               "} after 'qk-', got '" + r.map + "'");
    } else if (k == "fska" || k == "fska-signed" || k == "fska-learnable-v") {
        r.family = attention_family::fska;
        r.positive = k != "fska-signed";
        r.learnable_v = k == "fska-learnable-v";
    } else if (starts("fska-s") && std::isdigit(static_cast<unsigned char>(k[6]))) {
        r.family = attention_family::fska;
        double s = 0;
        detail::require(detail::parse_double(std::string_view(k).substr(6), s) && s > 0, "kind",
                        "fska-s<k> with k a positive number", "'" + k + "'");
        detail::require(spec.fska_scale == 1.0, "fska_scale",
                        "1 (the default) with kind '" + k + "', which sets the scale itself", spec.fska_scale);
        r.scale = s;
    } else if (starts("vanilla-") || starts("kernel-") || starts("shrunk-")) {
        r.family = attention_family::coulomb;
        r.align = starts("kernel-");
        r.shrunk = starts("shrunk-");
        r.map = k.substr(k.find('-') + 1);
        if (!detail::is_coulomb_map(r.map))
            throw kattn::error("kattn: argument 'model': expected a map in {" + detail::coulomb_map_names() +
                               "} after '" + k.substr(0, k.find('-') + 1) + "', got '" + r.map + "'");
    } else {
        throw kattn::error(
            "kattn: argument 'model': expected transformer, transformer-noqkv, uniform, performer, "
            "fska, fska-s<k>, fska-signed, fska-learnable-v, qk-<map>, vanilla-<map>, kernel-<map> or shrunk-<map>, "
            "got '" +
            k + "'");
    }
    return r;
}

/// True for kinds whose fit() runs Coulomb phase A first (kernel-<map>).
inline bool needs_alignment(const model_spec& spec) { return resolve_kind(spec).align; }

/// The bounds every field must satisfy (also those of a model file).
namespace spec_limits {
inline constexpr index_t max_dim = 1 << 14, max_layers = 1024, max_width = 1 << 20, max_length = 1 << 20,
                         max_classes = 1 << 20, max_align = index_t(1) << 30;
}

/// Throws kattn::error naming the first field out of range (and for an unknown kind).
inline void check_model_spec(const model_spec& s) {
    using namespace spec_limits;
    auto in = [](index_t v, index_t lo, index_t hi) { return v >= lo && v <= hi; };
    auto range = [](index_t lo, index_t hi) {
        return "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
    };
    detail::require(in(s.dim, 1, max_dim), "dim", range(1, max_dim), s.dim);
    detail::require(in(s.heads, 1, s.dim) && s.dim % s.heads == 0, "heads",
                    "a divisor of dim = " + std::to_string(s.dim), s.heads);
    detail::require(in(s.layers, 1, max_layers), "layers", range(1, max_layers), s.layers);
    detail::require(in(s.ffn_hidden, 1, max_width), "ffn_hidden", range(1, max_width), s.ffn_hidden);
    detail::require(in(s.head_hidden, 0, max_width), "head_hidden", range(0, max_width), s.head_hidden);
    detail::require(s.dropout >= 0 && s.dropout < 1, "dropout", "a value in [0, 1)", s.dropout);
    detail::require(in(s.num_features, 1, max_width), "num_features", range(1, max_width), s.num_features);
    detail::require(in(s.fska_pairs, 1, max_width), "fska_pairs", range(1, max_width), s.fska_pairs);
    detail::require(std::isfinite(s.fska_kl_weight) && s.fska_kl_weight >= 0, "fska_kl_weight", "a finite value >= 0",
                    s.fska_kl_weight);
    detail::require(std::isfinite(s.fska_scale) && s.fska_scale > 0, "fska_scale", "a finite value > 0", s.fska_scale);
    detail::require(std::isfinite(s.temperature) && s.temperature > 0, "temperature", "a finite value > 0",
                    s.temperature);
    detail::require(std::isfinite(s.input_scale) && s.input_scale >= 0, "input_scale",
                    "a finite value >= 0 (0: the map's default)", s.input_scale);
    detail::require(in(s.align_samples, 2, max_align), "align_samples", range(2, max_align), s.align_samples);
    detail::require(in(s.align_steps, 1, max_align), "align_steps", range(1, max_align), s.align_steps);
    detail::require(in(s.max_length, 1, spec_limits::max_length), "max_length", range(1, spec_limits::max_length),
                    s.max_length);
    detail::require(in(s.classes, 2, max_classes), "classes", range(2, max_classes), s.classes);
    const resolved_kind r = resolve_kind(s);
    if (r.map.empty()) {  // only qk-<map> and the Coulomb kinds pass these to a map
        const std::string why = " with kind '" + s.kind + "' (only qk-<map> and the Coulomb kinds take it)";
        detail::require(s.temperature == 1.0, "temperature", "1 (the default)" + why, s.temperature);
        detail::require(s.input_scale == 0.0, "input_scale", "0 (the default)" + why, s.input_scale);
    }
    if (r.family != attention_family::coulomb)
        detail::require(!s.learn_input_scale, "learn_input_scale",
                        "false (the default) with kind '" + s.kind + "' (only the Coulomb kinds learn it)",
                        std::string("true"));
    if (!r.map.empty() && !map_has_temperature(r.map))
        detail::require(s.temperature == 1.0, "temperature",
                        "1 (the default) with the map '" + r.map + "', which has no temperature", s.temperature);
}

/// The key=value lines of spec (one per field, in declaration order; temperature,
/// input_scale and learn_input_scale only when not the default; doubles round-trip exactly).
inline std::string spec_text(const model_spec& s) {
    auto num = [](double v) {
        char buf[40];
        std::snprintf(buf, sizeof buf, "%.17g", v);
        return std::string(buf);
    };
    auto i = [](auto v) { return std::to_string(v); };
    return "kind=" + s.kind + "\ndim=" + i(s.dim) + "\nheads=" + i(s.heads) + "\nlayers=" + i(s.layers) +
           "\nffn_hidden=" + i(s.ffn_hidden) + "\nhead_hidden=" + i(s.head_hidden) + "\ndropout=" + num(s.dropout) +
           "\npre_ln=" + i(int(s.pre_ln)) + "\nnum_features=" + i(s.num_features) + "\nfska_pairs=" + i(s.fska_pairs) +
           "\nfska_kl_weight=" + num(s.fska_kl_weight) + "\nfska_scale=" + num(s.fska_scale) +
           (s.temperature != 1.0 ? "\ntemperature=" + num(s.temperature) : std::string()) +
           (s.input_scale != 0.0 ? "\ninput_scale=" + num(s.input_scale) : std::string()) +
           (s.learn_input_scale ? "\nlearn_input_scale=1" : "") + "\nalign_samples=" + i(s.align_samples) +
           "\nalign_steps=" + i(s.align_steps) + "\nmax_length=" + i(s.max_length) + "\nclasses=" + i(s.classes) +
           "\nseed=" + i(s.seed) + "\n";
}

/// The spec of the key=value pairs `kv` (every field once, nothing else: the caller takes
/// its own keys out first); errors name `label` (the file and member) and the key.
inline model_spec parse_model_spec(std::map<std::string, std::string> kv, const std::string& label) {
    auto bad = [&](const std::string& expected, const std::string& got) {
        detail::fail("path", expected, label + " (" + got + ")");
    };
    auto take = [&](const std::string& key) {
        const auto it = kv.find(key);
        if (it == kv.end()) bad("a model specification with the key '" + key + "'", "missing");
        std::string v = it->second;
        kv.erase(it);
        return v;
    };
    auto integer = [&](const std::string& key, std::uint64_t hi) {
        const std::string v = take(key);
        std::uint64_t x = 0;
        bool ok = !v.empty() && v.size() <= 20;
        for (char c : v) {
            if (!ok || c < '0' || c > '9' || x > (UINT64_MAX - std::uint64_t(c - '0')) / 10) {
                ok = false;
                break;
            }
            x = x * 10 + std::uint64_t(c - '0');
        }
        if (!ok || x > hi) bad("'" + key + "' a decimal integer in [0, " + std::to_string(hi) + "]", "'" + v + "'");
        return x;
    };
    auto real = [&](const std::string& key) {
        const std::string v = take(key);
        double x = 0;
        if (!detail::parse_double(v, x)) bad("'" + key + "' a finite decimal number", "'" + v + "'");
        return x;
    };
    constexpr auto imax = std::uint64_t(INT64_MAX);
    model_spec s;
    s.kind = take("kind");
    s.dim = index_t(integer("dim", imax));
    s.heads = index_t(integer("heads", imax));
    s.layers = index_t(integer("layers", imax));
    s.ffn_hidden = index_t(integer("ffn_hidden", imax));
    s.head_hidden = index_t(integer("head_hidden", imax));
    s.dropout = real("dropout");
    s.pre_ln = integer("pre_ln", 1) == 1;
    s.num_features = index_t(integer("num_features", imax));
    s.fska_pairs = index_t(integer("fska_pairs", imax));
    s.fska_kl_weight = real("fska_kl_weight");
    s.fska_scale = real("fska_scale");
    if (kv.contains("temperature")) s.temperature = real("temperature");  // optional: see the file comment
    if (kv.contains("input_scale")) s.input_scale = real("input_scale");
    if (kv.contains("learn_input_scale")) s.learn_input_scale = integer("learn_input_scale", 1) == 1;
    s.align_samples = index_t(integer("align_samples", imax));
    s.align_steps = index_t(integer("align_steps", imax));
    s.max_length = index_t(integer("max_length", imax));
    s.classes = index_t(integer("classes", imax));
    s.seed = integer("seed", UINT64_MAX);
    if (!kv.empty()) bad("a model specification with known keys only", "unknown key '" + kv.begin()->first + "'");
    try {
        check_model_spec(s);
    } catch (const kattn::error& e) {
        bad("a valid model specification", e.what());
    }
    return s;
}

}  // namespace kattn::nn
