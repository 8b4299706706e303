// bench/bench_encoder.cpp — time of one training step of a kattn::nn encoder classifier.
//
// A benchmark, not a test: nothing here asserts on timing. For each configuration and model
// it builds the nn::sequence_classifier that examples/common/experiment.hpp builds for that
// model name, feeds it one seeded random batch, and times the step nn::trainer takes per
// batch (trainer.hpp, fit()):
//
//   ctx = {training, step};  logits = model.forward(batch, ctx)
//   ce = cross_entropy(logits, labels, label smoothing 0)
//   zero_grad; model.backward(ce.dlogits, ctx); reg = model.regularization(ctx) (FSKA's λ·KL)
//   clip_grad_norm(1.0); lr = warmup_cosine(step); AdamW(lr, weight decay 1e-4) step
//   predictions(ce.probs) (the trainer's accuracy count)
//
// The batch is built once, before timing (the trainer's make_batch gather is not timed; the
// PyTorch peer does not time its data either). Each step uses a new ctx.step, so dropout
// masks and FSKA's flow draws change per step as in training. Reported: the median of
// --repeats timed steps after --warmup untimed ones, the minimum, and tokens/s = tokens of
// the batch (B·L: every token is valid here) / median.
//
// Configurations:
//   fashion  128 images 28×28 → 7×7 patches (16 tokens, nn::patch_input), d = 64, 4 heads,
//            2 post-LN layers, FFN 256, dropout 0.1, 10 classes
//   sst2     64 sentences of 32 tokens (all valid, ids uniform in [2, vocab)), vocab 15,000,
//            Embedding + sinusoidal positions (nn::token_input), d = 128, 2 heads, 2 post-LN
//            layers, FFN 256, dropout 0.1, 2 classes
//   lra      Long Range Arena's efficiency model (its byte-level text classifier): 8 sequences
//            of 1,024 bytes (--batch, --lengths), vocab 256, d = 256, 4 heads, 4 post-LN layers,
//            FFN 1024, dropout 0.1, 2 classes. Its models come from the library's factory
//            (nn::with_model, kattn/nn/model_factory.hpp), so any model kind the examples
//            accept runs here: transformer, performer, fska, vanilla-<map>, kernel-<map>, ...
//            (kernel-<map> times the same step as vanilla-<map>: phase A is not a step).
// Models of fashion and sst2 (experiment.hpp's defaults):
//   transformer  nn::softmax_mha with Q/K/V projections
//   fska         nn::fska_attention: 64 pairs per head, positive (s = 1), per-head RealNVP
//                flows (3 couplings, hidden 2·D_flow), NGSM prior with 10 components,
//                λ = 1e-3 with 64 KL samples per flow per step
//   performer    nn::performer: favor + orthogonal Ω with num_features = 64 (Ω: dh × 64,
//                shared by the heads, so 64 features per head), learned Q/K/V
//
// Memory: base_rss_bytes is the process's resident set before the case's batch and model
// are built, peak_rss_bytes its high-water mark (VmHWM) after the timed steps; their difference
// is what the case added at its peak. The high-water mark is the process's, so run one case
// per process when memory matters (bench/lra_efficiency does).
//
// JSON (--json): {impl: "kattn", cpu, date, warmup, repeats, records: [{impl, config, model,
// threads, step_seconds, step_seconds_min, step_seconds_max, tokens_per_second, samples,
// params, first_loss, base_rss_bytes, peak_rss_bytes, …}]}, the layout of
// bench/peers/torch_encoder.py's output; bench/encoder_vs_torch and bench/lra_efficiency join
// the two.
//
// usage: bench_encoder [--threads 1,2] [--configs fashion,sst2,lra] [--models transformer,fska,performer]
//                      [--lengths 1024,4096] [--batch B] [--warmup 3] [--repeats 10] [--json FILE]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <functional>
#include <iostream>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include <omp.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <kattn/nn/attention/fska.hpp>
#include <kattn/nn/attention/kernel_mha.hpp>
#include <kattn/nn/attention/softmax_mha.hpp>
#include <kattn/nn/classifier.hpp>
#include <kattn/nn/model_factory.hpp>
#include <kattn/nn/trainer.hpp>

#include "comma_list.hpp"
#include "procfs.hpp"

namespace {

using kattn::index_t;
using kattn_bench::cpu_model;
using kattn_bench::proc_status_bytes;
using kattn_bench::utc_now;
namespace nn = kattn::nn;
using clock_type = std::chrono::steady_clock;

struct options {
    std::vector<int> threads{0};
    std::vector<std::string> configs{"fashion", "sst2"};
    std::vector<std::string> models{"transformer", "fska", "performer"};
    std::vector<index_t> lengths;  ///< token configs: sequence lengths to run (empty: the config's)
    index_t batch = 0;             ///< 0: the config's batch size
    int warmup = 3, repeats = 10;
    std::uint64_t seed = 1;
    std::string json_file;
};

/// One benchmark configuration (the model's shape and its batch).
struct config {
    std::string name;
    bool images = false;
    bool factory = false;  ///< models from nn::with_model (any kind) instead of run_model's three
    index_t batch = 0, length = 0, dim = 0, heads = 0, layers = 2, ffn = 256, classes = 2, vocab = 0;
    double dropout = 0.1;
};

const std::vector<config>& config_table() {
    static const std::vector<config> t{
        {.name = "fashion", .images = true, .batch = 128, .length = 16, .dim = 64, .heads = 4, .classes = 10},
        {.name = "sst2",
         .images = false,
         .batch = 64,
         .length = 32,
         .dim = 128,
         .heads = 2,
         .classes = 2,
         .vocab = 15000},
        {.name = "lra",
         .images = false,
         .factory = true,
         .batch = 8,
         .length = 1024,
         .dim = 256,
         .heads = 4,
         .layers = 4,
         .ffn = 1024,
         .classes = 2,
         .vocab = 256},
    };
    return t;
}

/// A seeded random batch: pixels U(0, 1) or token ids uniform in [2, vocab), labels uniform.
nn::batch random_batch(const config& c, std::uint64_t seed) {
    const kattn::random_stream rs(seed, kattn::streams::user + 11);
    std::uint64_t k = 0;
    nn::batch b;
    b.size = c.batch;
    if (c.images) {
        b.kind = nn::input_kind::pixels;
        b.item_size = 28 * 28;
        b.pixels.resize(std::size_t(b.size * b.item_size));
        for (auto& p : b.pixels) p = float(rs.uniform(k++));
    } else {
        b.kind = nn::input_kind::tokens;
        b.length = c.length;
        b.tokens.resize(std::size_t(b.size * b.length));
        for (auto& t : b.tokens) t = std::int32_t(2 + index_t(rs.uniform(k++) * double(c.vocab - 2)) % (c.vocab - 2));
        b.lengths.assign(std::size_t(b.size), c.length);
    }
    b.labels.resize(std::size_t(b.size));
    for (auto& y : b.labels) y = int(index_t(rs.uniform(k++) * double(c.classes)) % c.classes);
    return b;
}

struct result {
    std::string config, model;
    int threads = 0, warmup = 0, repeats = 0;
    double step_seconds = NAN, step_seconds_min = NAN, step_seconds_max = NAN, tokens_per_second = NAN,
           first_loss = NAN;
    long long params = 0, base_rss_bytes = -1, peak_rss_bytes = -1;
    std::vector<double> samples;
};

/// Times nn::trainer's per-batch step on `model` (see the header comment).
template <class Model>
result time_steps(Model& model, const nn::batch& b, const options& o) {
    nn::parameter_list params;
    model.collect(params, "model");
    const int total = o.warmup + o.repeats;
    // The trainer's schedule for a run of `total` steps with 5% warm-up (examples' setting).
    const nn::warmup_cosine sched({.base_lr = 1e-3,
                                   .warmup_steps = std::int64_t(std::llround(0.05 * double(total))),
                                   .total_steps = total,
                                   .min_lr = 0.0});
    nn::adamw opt({.lr = 1e-3, .weight_decay = 1e-4});
    result r;
    r.params = nn::count(params);
    long correct = 0;
    for (int s = 0; s < total; ++s) {
        const auto t0 = clock_type::now();
        nn::context ctx;
        ctx.training = true;
        ctx.step = std::uint64_t(s);
        const auto logits = model.forward(b, ctx);
        const auto ce = nn::cross_entropy(logits, b.labels, 0.0);
        nn::zero_grad(params);
        model.backward(ce.dlogits, ctx);
        double reg = 0;
        if constexpr (requires { model.regularization(ctx); }) reg = model.regularization(ctx);
        nn::clip_grad_norm(params, 1.0);
        opt.set_lr(sched.lr(s));
        opt.step(params);
        const auto pred = nn::predictions(ce.probs);
        for (index_t i = 0; i < b.size; ++i) correct += pred[std::size_t(i)] == b.labels[std::size_t(i)];
        const double dt = std::chrono::duration<double>(clock_type::now() - t0).count();
        if (s == 0) r.first_loss = ce.loss + reg;
        if (s >= o.warmup) r.samples.push_back(dt);
    }
    (void)correct;
    std::vector<double> v = r.samples;
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    r.step_seconds = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    r.step_seconds_min = v.front();
    r.step_seconds_max = v.back();
    return r;
}

/// Builds model `name` for configuration c as experiment::with_model does (same seeds
/// scheme) and times it.
template <class Input>
result run_model(const std::string& name, const config& c, Input input, const nn::batch& b, const options& o) {
    const std::uint64_t seed = o.seed;
    const nn::classifier_config cfg{
        .encoder = {.dim = c.dim, .layers = c.layers, .ffn_hidden = c.ffn, .dropout = c.dropout, .seed = seed},
        .classes = c.classes,
        .seed = seed};
    auto layer_seed = [seed](index_t l) { return seed * 1000 + 17 * std::uint64_t(l) + 1; };
    auto build = [&](auto make_attention) {
        using A = decltype(make_attention(index_t(0)));
        nn::sequence_classifier<Input, A> model(cfg, input, make_attention);
        return time_steps(model, b, o);
    };
    if (name == "transformer")
        return build([&](index_t l) {
            return nn::softmax_mha<float>({.dim = c.dim, .heads = c.heads, .qkv = true, .seed = layer_seed(l)});
        });
    if (name == "fska")
        return build([&](index_t l) {
            return nn::fska_attention<float>({.dim = c.dim,
                                              .heads = c.heads,
                                              .num_pairs = 64,
                                              .flow_layers = 3,
                                              .flow_hidden = 0,
                                              .ngsm_components = 10,
                                              .kl_weight = 1e-3,
                                              .kl_samples = 64,
                                              .positive = true,
                                              .scale = 1.0,
                                              .seed = layer_seed(l)});
        });
    if (name == "performer")
        return build([&](index_t l) {
            return nn::performer<float>({.dim = c.dim, .heads = c.heads, .num_features = 64, .seed = layer_seed(l)});
        });
    throw std::invalid_argument("unknown model '" + name + "' (expected transformer, fska or performer)");
}

/// Builds model `name` (any kind of nn::model_spec) for configuration c through the library's
/// factory, with the examples' seeds scheme, and times it.
result run_factory_model(const std::string& name, const config& c, const nn::batch& b, const options& o) {
    const nn::model_spec spec{.kind = name,
                              .dim = c.dim,
                              .heads = c.heads,
                              .layers = c.layers,
                              .ffn_hidden = c.ffn,
                              .dropout = c.dropout,
                              .max_length = c.length,
                              .classes = c.classes,
                              .seed = o.seed};
    result r;
    nn::with_text_model(spec, c.vocab, [&](auto& model) { r = time_steps(model, b, o); });
    return r;
}

result run_case(const std::string& model, const config& c, const options& o) {
    const long long base = proc_status_bytes("VmRSS");
    const nn::batch b = random_batch(c, o.seed);
    result r;
    if (c.factory)
        r = run_factory_model(model, c, b, o);
    else if (c.images)
        r = run_model(model, c,
                      nn::patch_input<float>({.patch_height = 7, .patch_width = 7, .dim = c.dim, .seed = o.seed + 7}),
                      b, o);
    else
        r = run_model(
            model, c,
            nn::token_input<float>({.vocab = c.vocab, .dim = c.dim, .max_length = c.length, .seed = o.seed + 7}), b, o);
    r.base_rss_bytes = base;
    r.peak_rss_bytes = proc_status_bytes("VmHWM");
    return r;
}

using bench_cli::split;

}  // namespace

int main(int argc, char** argv) {
    options o;
    CLI::App app{"kattn::nn training-step benchmark: transformer, FSKA and Performer encoder classifiers"};
    std::string threads_arg, configs_arg, models_arg;
    app.add_option("--threads", threads_arg, "OpenMP thread count(s), comma-separated; 0 = all (default: all)");
    app.add_option("--configs", configs_arg, "comma-separated configurations: fashion,sst2 (default both)");
    app.add_option("--models", models_arg,
                   "comma-separated models: transformer,fska,performer (default); lra: any model kind");
    std::string lengths_arg;
    app.add_option("--lengths", lengths_arg, "token configs: comma-separated sequence lengths (default: the config's)");
    app.add_option("--batch", o.batch, "batch size (default: the config's)")->check(CLI::NonNegativeNumber);
    app.add_option("--warmup", o.warmup, "untimed steps before timing (default 3)")->check(CLI::NonNegativeNumber);
    app.add_option("--repeats", o.repeats, "timed steps; the median is reported (default 10)")
        ->check(CLI::PositiveNumber);
    app.add_option("--seed", o.seed, "seed of the models and the random batch");
    app.add_option("--json", o.json_file, "write the records as JSON to this file");
    CLI11_PARSE(app, argc, argv);

    const int all_threads = omp_get_max_threads();
    try {
        if (!threads_arg.empty()) {
            o.threads.clear();
            for (const auto& t : split(threads_arg)) o.threads.push_back(std::stoi(t));
        }
        if (!configs_arg.empty()) o.configs = split(configs_arg);
        if (!models_arg.empty()) o.models = split(models_arg);
        for (const auto& l : split(lengths_arg)) o.lengths.push_back(std::stoll(l));
    } catch (const std::exception& e) {
        std::cerr << "bench_encoder: " << e.what() << "\n";
        return 2;
    }
    for (auto& t : o.threads) {
        if (t < 0) return std::cerr << "bench_encoder: --threads must be >= 0\n", 2;
        if (t == 0) t = all_threads;
    }
    std::vector<config> cfgs;
    for (const auto& n : o.configs) {
        const auto it =
            std::find_if(config_table().begin(), config_table().end(), [&](const config& c) { return c.name == n; });
        if (it == config_table().end()) return std::cerr << "bench_encoder: unknown config '" << n << "'\n", 2;
        config c = *it;
        if (o.batch > 0) c.batch = o.batch;
        if (o.lengths.empty() || c.images) {
            cfgs.push_back(c);
            continue;
        }
        for (const index_t l : o.lengths) {
            if (l < 1) return std::cerr << "bench_encoder: --lengths must be >= 1\n", 2;
            c.length = l;
            cfgs.push_back(c);
        }
    }

    std::printf("# kattn bench_encoder  %s\n# cpu: %s, %d logical CPUs\n", utc_now().c_str(), cpu_model().c_str(),
                omp_get_num_procs());
    std::printf("# one nn::trainer step (forward, CE, backward, KL, clip, AdamW); median of %d after %d warm-up\n\n",
                o.repeats, o.warmup);
    std::printf("%-8s %-16s %6s %7s %9s %12s %12s %12s %10s %9s\n", "config", "model", "L", "threads", "params",
                "step_ms", "min_ms", "tokens/s", "loss0", "peak_MiB");
    nlohmann::json out = nlohmann::json::array();
    for (int threads : o.threads) {
        omp_set_num_threads(threads);
        for (const auto& c : cfgs)
            for (const auto& m : o.models) {
                result r;
                try {
                    r = run_case(m, c, o);
                } catch (const std::exception& e) {
                    std::cerr << "bench_encoder: " << e.what() << "\n";
                    return 2;
                }
                r.config = c.name;
                r.model = m;
                r.threads = threads;
                r.warmup = o.warmup;
                r.repeats = o.repeats;
                const double tokens = double(c.batch * c.length);
                r.tokens_per_second = tokens / r.step_seconds;
                std::printf("%-8s %-16s %6lld %7d %9lld %12.2f %12.2f %12.0f %10.4f %9.0f\n", c.name.c_str(), m.c_str(),
                            static_cast<long long>(c.length), threads, r.params, 1e3 * r.step_seconds,
                            1e3 * r.step_seconds_min, r.tokens_per_second, r.first_loss,
                            double(r.peak_rss_bytes) / (1024.0 * 1024.0));
                std::fflush(stdout);
                out.push_back({{"impl", "kattn"},
                               {"config", r.config},
                               {"model", r.model},
                               {"threads", r.threads},
                               {"step_seconds", r.step_seconds},
                               {"step_seconds_min", r.step_seconds_min},
                               {"step_seconds_max", r.step_seconds_max},
                               {"tokens_per_second", r.tokens_per_second},
                               {"samples", r.samples},
                               {"warmup", r.warmup},
                               {"repeats", r.repeats},
                               {"batch", c.batch},
                               {"length", c.length},
                               {"dim", c.dim},
                               {"heads", c.heads},
                               {"params", r.params},
                               {"first_loss", r.first_loss},
                               {"layers", c.layers},
                               {"ffn", c.ffn},
                               {"base_rss_bytes", r.base_rss_bytes},
                               {"peak_rss_bytes", r.peak_rss_bytes}});
            }
    }
    if (!o.json_file.empty()) {
        std::ofstream f(o.json_file);
        if (!f) return std::cerr << "bench_encoder: cannot write '" << o.json_file << "'\n", 2;
        const nlohmann::json doc{{"impl", "kattn"},    {"cpu", cpu_model()},   {"date", utc_now()},
                                 {"warmup", o.warmup}, {"repeats", o.repeats}, {"records", out}};
        f << doc.dump(2) << "\n";
    }
    return 0;
}
