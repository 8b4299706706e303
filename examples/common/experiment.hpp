// examples/common/experiment.hpp — the model zoo and the run/aggregate loop shared by
// examples/fashion_mnist, examples/text_classification and examples/listops.
//
// A model is named by a string (the papers' vocabulary):
//   transformer            softmax attention with learned Q, K, V
//   transformer-noqkv      softmax attention on x itself (Q = K = V = x)
//   uniform                constant features: every key weighted equally (control)
//   performer              favor + orthogonal frequencies, learned W_Q, W_K, W_V
//   fska                   FSKA: flow-sampled nonstationary features, φ⁺ = ELU(s·φ)+1, fixed V
//   fska-s<k>              FSKA with the positive transform's scale s = k (e.g. fska-s4)
//   fska-signed            FSKA with direct signed features (no positive transform)
//   fska-learnable-v       FSKA with a trainable value projection
//   vanilla-<map>          Q = K = x per head, random frozen Ω (map: any positive map of the
//                          registry kattn::features::all, e.g. elu, softplus, favor, relu)
//   kernel-<map>           the same with Ω from Langevin particles (Coulomb phase A, then B)
//   shrunk-<map>           vanilla with ω ~ N(0, σ⁻²I), σ = √d_h / R: ‖ω‖ ≈ R = 1.5, the scale that
//                          phase A's projection gives, without the alignment (control)
// The models are built by the library's factory (kattn/nn/model_factory.hpp) from the
// nn::model_spec that spec_of(name, options, classes, seed) gives: same name and seed, same model.
// run_model trains one model per seed with nn::trainer, evaluates the test split and
// returns a record {model, dataset, seeds, accuracy ± sd, macro-F1 ± sd, ece, params,
// seconds, attention entropy}.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <kattn/nn/classifier.hpp>
#include <kattn/nn/model_factory.hpp>
#include <kattn/nn/model_spec.hpp>
#include <kattn/nn/trainer.hpp>

namespace experiment {

using kattn::index_t;
namespace nn = kattn::nn;

/// The options of the examples' models; the defaults are nn::model_spec's (docs/encoder.md).
struct model_options {
    index_t dim = nn::model_spec{}.dim, heads = nn::model_spec{}.heads, layers = nn::model_spec{}.layers,
            ffn_hidden = nn::model_spec{}.ffn_hidden, head_hidden = nn::model_spec{}.head_hidden;
    double dropout = nn::model_spec{}.dropout;
    bool pre_ln = nn::model_spec{}.pre_ln;
    index_t fska_pairs = nn::model_spec{}.fska_pairs;  ///< m pairs per FSKA head
    double fska_kl_weight = nn::model_spec{}.fska_kl_weight;
    index_t kernel_features = nn::model_spec{}.num_features;  ///< m per head for performer / vanilla / kernel models
    index_t align_samples = nn::model_spec{}.align_samples;   ///< Coulomb phase A: pooled items
    index_t align_steps = nn::model_spec{}.align_steps;       ///< Coulomb phase A: Langevin steps per layer
    double temperature = nn::model_spec{}.temperature;        ///< τ of the map (qk- and Coulomb kinds)
    double input_scale = nn::model_spec{}.input_scale;        ///< 0: the map's default (qk- and Coulomb kinds)
    bool learn_input_scale = nn::model_spec{}.learn_input_scale;  ///< Coulomb kinds: learned per head
};

/// One seed's outcome.
struct outcome {
    std::uint64_t seed = 0;
    double accuracy = 0, macro_f1 = 0, ece = 0, seconds = 0, entropy = std::nan(""), epochs = 0;
    long long params = 0;
    double kta_before = std::nan(""), kta_after = std::nan("");
    std::vector<std::vector<double>> input_scales;  ///< learned s_h per layer (learn_input_scale)

    nlohmann::json json() const {
        nlohmann::json j{{"seed", seed}, {"accuracy", accuracy}, {"macro_f1", macro_f1},
                         {"ece", ece},   {"seconds", seconds},   {"epochs", epochs}};
        if (!input_scales.empty()) j["input_scales"] = input_scales;
        if (std::isfinite(entropy)) j["attention_entropy"] = entropy;
        if (std::isfinite(kta_before)) j["kta_before"] = kta_before, j["kta_after"] = kta_after;
        return j;
    }
};

/// One model on one data set: mean ± sd over the seeds, and each seed's outcome in `runs`
/// (scripts/results_table.py --merge pools the runs of records written by separate processes).
struct record {
    std::string model, dataset;
    int seeds = 0;
    double accuracy = 0, accuracy_sd = 0, macro_f1 = 0, macro_f1_sd = 0, ece = 0;
    long long params = 0;
    double seconds = 0, entropy = std::nan(""), epochs = 0, kta_before = std::nan(""), kta_after = std::nan("");
    double temperature = 1.0, input_scale = 0.0;  ///< the map's options, recorded when not the defaults
    bool learn_input_scale = false;
    std::vector<outcome> runs;

    nlohmann::json json() const {
        nlohmann::json j{{"model", model},
                         {"dataset", dataset},
                         {"seeds", seeds},
                         {"accuracy", accuracy},
                         {"accuracy_sd", accuracy_sd},
                         {"macro_f1", macro_f1},
                         {"macro_f1_sd", macro_f1_sd},
                         {"ece", ece},
                         {"params", params},
                         {"seconds", seconds},
                         {"epochs", epochs}};
        if (std::isfinite(entropy)) j["attention_entropy"] = entropy;
        if (std::isfinite(kta_before)) j["kta_before"] = kta_before, j["kta_after"] = kta_after;
        if (temperature != 1.0) j["temperature"] = temperature;
        if (input_scale != 0.0) j["input_scale"] = input_scale;
        if (learn_input_scale) j["learn_input_scale"] = true;
        j["runs"] = nlohmann::json::array();
        for (const auto& o : runs) j["runs"].push_back(o.json());
        return j;
    }
};

struct splits {
    const nn::dataset* train = nullptr;
    const nn::dataset* dev = nullptr;
    const nn::dataset* test = nullptr;
};

/// Trains and evaluates one built model.
template <class Model>
outcome train_and_test(Model& model, const splits& data, nn::trainer_config tcfg, const model_options& mo, bool align,
                       nn::communicator_ref comm = {}) {
    outcome out;
    const auto t0 = std::chrono::steady_clock::now();
    if constexpr (requires { model.align(*data.train, index_t(2), index_t(1)); }) {
        if (align) {
            const auto reports = model.align(*data.train, mo.align_samples, mo.align_steps);
            double b = 0, a = 0;
            int n = 0;
            for (const auto& layer : reports)
                for (std::size_t h = 0; h < layer.kta_before.size(); ++h) {
                    b += layer.kta_before[h];
                    a += layer.kta_after[h];
                    ++n;
                }
            out.kta_before = b / n;
            out.kta_after = a / n;
        }
    }
    nn::trainer tr(model, tcfg, comm);  // data-parallel over comm's ranks (one process: empty)
    out.params = kattn::nn::count(tr.parameters());
    const auto fit = tr.fit(*data.train, data.dev);
    out.epochs = double(fit.history.size());
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const auto ev = tr.evaluate(*data.test);
    out.accuracy = ev.metrics.accuracy;
    out.macro_f1 = ev.metrics.macro_f1;
    out.ece = ev.metrics.ece;
    std::vector<index_t> idx;
    for (index_t i = 0; i < std::min<index_t>(256, data.test->size()); ++i) idx.push_back(i);
    out.entropy = model.attention_entropy(data.test->make_batch(idx));
    if constexpr (requires { model.encoder_stack().layer(0).attention().input_scale(index_t(0)); })
        if (mo.learn_input_scale)
            for (index_t l = 0; l < mo.layers; ++l) {
                out.input_scales.emplace_back();
                for (index_t h = 0; h < mo.heads; ++h)
                    out.input_scales.back().push_back(
                        double(model.encoder_stack().layer(l).attention().input_scale(h)));
            }
    return out;
}

/// The library's model_spec for `name` with these options (nn/model_spec.hpp).
inline nn::model_spec spec_of(const std::string& name, const model_options& mo, index_t classes, std::uint64_t seed) {
    nn::model_spec s;
    s.kind = name;
    s.dim = mo.dim;
    s.heads = mo.heads;
    s.layers = mo.layers;
    s.ffn_hidden = mo.ffn_hidden;
    s.head_hidden = mo.head_hidden;
    s.dropout = mo.dropout;
    s.pre_ln = mo.pre_ln;
    s.num_features = mo.kernel_features;
    s.fska_pairs = mo.fska_pairs;
    s.fska_kl_weight = mo.fska_kl_weight;
    s.align_samples = mo.align_samples;
    s.align_steps = mo.align_steps;
    s.temperature = mo.temperature;
    s.input_scale = mo.input_scale;
    s.learn_input_scale = mo.learn_input_scale;
    s.classes = classes;
    s.seed = seed;
    return s;
}

/// Builds model `name` with input policy Input (from make_input(seed)) and calls f(model, align)
/// (the factory of nn/model_factory.hpp; align: kernel-<map>, Coulomb phase A first).
template <class Input, class F>
void with_model(const std::string& name, const model_options& mo, index_t classes, std::uint64_t seed,
                const std::function<Input(std::uint64_t)>& make_input, F&& f) {
    const nn::model_spec spec = spec_of(name, mo, classes, seed);
    const bool align = nn::needs_alignment(spec);  // checks the kind before the input is built
    nn::with_model(spec, make_input(seed), [&](auto& model) { f(model, align); });
}

inline double mean(const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return v.empty() ? std::nan("") : s / double(v.size());
}
/// Sample standard deviation (n − 1); 0 for one value.
inline double sd(const std::vector<double>& v) {
    if (v.size() < 2) return 0.0;
    const double m = mean(v);
    double s = 0;
    for (double x : v) s += (x - m) * (x - m);
    return std::sqrt(s / double(v.size() - 1));
}

/// "a,b,c" → {"a", "b", "c"} (command-line lists).
inline std::vector<std::string> split_list(const std::string& s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    for (std::string m; std::getline(ss, m, ',');) out.push_back(m);
    return out;
}

/// The seeds to run: `list` ("4,5"; distinct, so mean ± sd is over different runs) when given, else 1 … n. Seeds are independent, so one
/// protocol can be split over processes (--seed-list) and pooled with results_table.py --merge.
inline std::vector<std::uint64_t> seed_list(const std::string& list, index_t n) {
    std::vector<std::uint64_t> seeds;
    for (const auto& s : split_list(list)) {
        std::size_t used = 0;
        unsigned long long v = 0;
        try {
            v = std::stoull(s, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (used != s.size() || s.empty() || v == 0 || std::find(seeds.begin(), seeds.end(), v) != seeds.end())
            throw kattn::error(
                "kattn: argument '--seed-list': expected distinct comma-separated positive integers, "
                "got '" +
                list + "'");
        seeds.push_back(v);
    }
    if (seeds.empty())
        for (index_t s = 0; s < n; ++s) seeds.push_back(std::uint64_t(s + 1));
    return seeds;
}

/// Mean ± sd over the seeds' outcomes.
inline record aggregate(const std::string& model, const std::string& dataset, const std::vector<outcome>& os) {
    auto col = [&](double outcome::*f) {
        std::vector<double> v;
        for (const auto& o : os) v.push_back(o.*f);
        return v;
    };
    record r;
    r.model = model;
    r.dataset = dataset;
    r.seeds = int(os.size());
    r.accuracy = mean(col(&outcome::accuracy));
    r.accuracy_sd = sd(col(&outcome::accuracy));
    r.macro_f1 = mean(col(&outcome::macro_f1));
    r.macro_f1_sd = sd(col(&outcome::macro_f1));
    r.ece = mean(col(&outcome::ece));
    r.params = os.empty() ? 0 : os.back().params;
    r.seconds = mean(col(&outcome::seconds));
    r.entropy = mean(col(&outcome::entropy));
    r.epochs = mean(col(&outcome::epochs));
    r.kta_before = mean(col(&outcome::kta_before));
    r.kta_after = mean(col(&outcome::kta_after));
    r.runs = os;
    return r;
}

/// Trains `name` once per seed and aggregates.
template <class Input>
record run_model(const std::string& name, const std::string& dataset_name, const splits& data, const model_options& mo,
                 nn::trainer_config tcfg, const std::vector<std::uint64_t>& seeds,
                 const std::function<Input(std::uint64_t)>& make_input, nn::communicator_ref comm = {}) {
    std::vector<outcome> os;
    for (const auto seed : seeds) {
        tcfg.seed = seed;
        tcfg.label = name + " s" + std::to_string(seed) + " ";
        with_model<Input>(name, mo, data.train->num_classes, seed, make_input, [&](auto& model, bool align) {
            outcome o = train_and_test(model, data, tcfg, mo, align, comm);
            o.seed = seed;
            os.push_back(o);
            if (comm.rank() == 0)
                std::fprintf(stderr, "%s seed %llu: accuracy %.4f macro-F1 %.4f ECE %.4f (%.0f s, %g epochs)\n",
                             name.c_str(), static_cast<unsigned long long>(seed), o.accuracy, o.macro_f1, o.ece,
                             o.seconds, o.epochs);
        });
    }
    record r = aggregate(name, dataset_name, os);
    r.temperature = mo.temperature;
    r.input_scale = mo.input_scale;
    r.learn_input_scale = mo.learn_input_scale;
    return r;
}

/// The examples' trainer settings: `epochs`, mini-batches of `batch`, AdamW at peak `lr` with
/// weight decay 1e-4, 5 % warm-up then cosine decay, gradients clipped to norm 1.
inline nn::trainer_config trainer_settings(index_t epochs, index_t batch, double lr) {
    return {
        .epochs = epochs, .batch_size = batch, .lr = lr, .weight_decay = 1e-4, .warmup_fraction = 0.05, .clip = 1.0};
}

/// The table printed by the examples.
inline void print_table(const std::vector<record>& rs, std::FILE* out = stdout) {
    std::fprintf(out, "\n%-22s %-14s %5s %16s %16s %7s %9s %8s %8s\n", "model", "dataset", "seeds", "accuracy",
                 "macro-F1", "ECE", "params", "seconds", "entropy");
    for (const auto& r : rs)
        std::fprintf(out, "%-22s %-14s %5d %8.4f ± %.4f %8.4f ± %.4f %7.4f %9lld %8.0f %8.3f\n", r.model.c_str(),
                     r.dataset.c_str(), r.seeds, r.accuracy, r.accuracy_sd, r.macro_f1, r.macro_f1_sd, r.ece, r.params,
                     r.seconds, r.entropy);
    std::fflush(out);
}

inline void write_json(const std::string& path, const std::vector<record>& rs) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& r : rs) j.push_back(r.json());
    std::FILE* f = std::fopen(path.c_str(), "w");
    if (!f) throw kattn::error("kattn: argument '--json': expected a writable path, got '" + path + "'");
    const std::string s = j.dump(2) + "\n";
    std::fwrite(s.data(), 1, s.size(), f);
    std::fclose(f);
}

/// run_model for each of `models`, appending to `records`; after each model, rank 0 prints
/// the table and rewrites `json` (when not empty), so an interrupted run keeps what finished.
template <class Input>
void run_models(const std::vector<std::string>& models, const std::string& dataset_name, const splits& data,
                const model_options& mo, const nn::trainer_config& tcfg, const std::vector<std::uint64_t>& seeds,
                const std::function<Input(std::uint64_t)>& make_input, nn::communicator_ref comm,
                const std::string& json, std::vector<record>& records) {
    for (const auto& m : models) {
        records.push_back(run_model<Input>(m, dataset_name, data, mo, tcfg, seeds, make_input, comm));
        if (comm.rank() != 0) continue;
        print_table(records);
        if (!json.empty()) write_json(json, records);
    }
}

}  // namespace experiment
