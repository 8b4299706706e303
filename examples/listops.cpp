// ListOps, Long Range Arena's long-sequence task, with kattn::nn encoders (docs/results.md).
//
// The data are generated here, seeded, the way LRA's script builds them (kattn/nn/data/
// listops.hpp): nested MIN / MAX / MED / SM expressions over digits, 500 < length < 2000
// tokens, 96,000 / 2,000 / 2,000 train / dev / test expressions, the value 0 … 9 as the
// class. Nothing is downloaded. Each expression's tokens are embedded (16 ids) with
// sinusoidal positions, encoded, mean-pooled and classified.
// Model size: d = 64, 4 heads, 2 layers, FFN 128 by default (LRA's own ListOps models are
// larger: d = 512, 8 heads, 6 layers, FFN 2048; on 2 CPU cores that size would take days).
// Models (examples/common/experiment.hpp): transformer (softmax), performer (favor),
// kernel-softplus and kernel-elu (Coulomb particles), fska.
//
//   listops                               full run (LRA's data, 5 epochs, 1 seed)
//   listops --quick                       a few minutes: 2,000 / 200 / 200 expressions of
//                                         500 … 1,000 tokens, 2 epochs
//   listops --models performer,fska --train-size 20000 --json out.json
#include <CLI/CLI.hpp>
#include <omp.h>

#include <chrono>
#include <cstdio>

#include <kattn/nn/data/listops.hpp>

#include "common/experiment.hpp"
#include "common/map_options.hpp"
#include "common/ranks.hpp"

namespace nn = kattn::nn;
using kattn::index_t;

int main(int argc, char** argv) {
    experiment::ranks world(argc, argv);  // mpirun -np N …: data-parallel (common/ranks.hpp)
    CLI::App app{"kattn: ListOps (Long Range Arena) with kattn::nn encoders"};
    bool quick = false;
    std::string json, models_arg, seed_list;
    index_t epochs = 0, batch = 32, seeds_n = 1, threads = 0, train_size = 0, eval_size = 0, min_length = 0,
            max_length = 0;
    std::uint64_t data_seed = 0;
    double lr = 1e-3;
    experiment::model_options mo;
    mo.dim = 64;
    mo.heads = 4;
    mo.layers = 2;
    mo.ffn_hidden = 128;
    mo.kernel_features = 64;
    app.add_flag("--quick", quick, "a few minutes: 2,000 / 200 / 200 expressions of 500-1,000 tokens, 2 epochs");
    app.add_option("--json", json, "write one record per model here");
    app.add_option("--models", models_arg,
                   "comma-separated model names (default: transformer,performer,kernel-softplus,kernel-elu,fska)");
    app.add_option("--epochs", epochs, "training epochs (default 5; quick 2)")->check(CLI::PositiveNumber);
    app.add_option("--train-size", train_size, "training expressions (default LRA's 96,000; quick 2,000)");
    app.add_option("--eval-size", eval_size, "dev and test expressions each (default LRA's 2,000; quick 200)");
    app.add_option("--min-length", min_length, "lengths exceed this (default 500)");
    app.add_option("--max-length", max_length, "lengths stay below this (default 2,000; quick 1,000)");
    app.add_option("--data-seed", data_seed, "seed of the generated data (default 0)");
    app.add_option("--batch", batch, "mini-batch size")->check(CLI::PositiveNumber);
    app.add_option("--lr", lr, "peak learning rate (AdamW, 5% warm-up, cosine decay)")->check(CLI::PositiveNumber);
    app.add_option("--seeds", seeds_n, "seeds per model: seeds 1 … N")->check(CLI::PositiveNumber);
    app.add_option("--seed-list", seed_list, "run exactly these seeds (e.g. 2,3), overriding --seeds");
    app.add_option("--dim", mo.dim, "model width d")->check(CLI::PositiveNumber);
    app.add_option("--heads", mo.heads, "attention heads")->check(CLI::PositiveNumber);
    app.add_option("--layers", mo.layers, "encoder layers")->check(CLI::PositiveNumber);
    app.add_option("--ffn", mo.ffn_hidden, "feed-forward width")->check(CLI::PositiveNumber);
    app.add_option("--pairs", mo.fska_pairs, "FSKA frequency pairs per head")->check(CLI::PositiveNumber);
    app.add_option("--features", mo.kernel_features, "features per head of performer / vanilla / kernel models");
    experiment::add_map_options(app, mo);
    app.add_option("--threads", threads, "OpenMP threads (0: default)");
    CLI11_PARSE(app, argc, argv);
    if (threads > 0) omp_set_num_threads(int(threads));

    try {
        const auto seeds = experiment::seed_list(seed_list, seeds_n);
        nn::listops_options lo;
        lo.num_train = train_size > 0 ? train_size : quick ? 2000 : lo.num_train;
        lo.num_dev = lo.num_test = eval_size > 0 ? eval_size : quick ? 200 : lo.num_dev;
        if (min_length > 0) lo.min_length = min_length;
        lo.max_length = max_length > 0 ? max_length : quick ? 1000 : lo.max_length;
        lo.seed = data_seed;
        const auto t0 = std::chrono::steady_clock::now();
        const nn::listops_splits data = nn::make_listops(lo);
        const double gen_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

        std::vector<std::string> models{"transformer", "performer", "kernel-softplus", "kernel-elu", "fska"};
        if (!models_arg.empty()) models = experiment::split_list(models_arg);
        nn::trainer_config tcfg = experiment::trainer_settings(epochs > 0 ? epochs : quick ? 2 : 5, batch, lr);
        tcfg.batch_size = world.per_rank_batch(batch);
        if (world.root()) {
            index_t tokens = 0;
            for (const auto& t : data.train.texts) tokens += index_t(t.size());
            std::printf(
                "ListOps: %ld train / %ld dev / %ld test expressions of %ld < length < %ld tokens (train mean %.0f), "
                "generated in %.1f s from %llu trees; d = %ld, %ld heads, %ld layers, FFN %ld, %ld epochs\n",
                long(data.train.size()), long(data.dev.size()), long(data.test.size()), long(lo.min_length),
                long(lo.max_length), data.train.size() ? double(tokens) / double(data.train.size()) : 0.0, gen_s,
                static_cast<unsigned long long>(data.attempts), long(mo.dim), long(mo.heads), long(mo.layers),
                long(mo.ffn_hidden), long(tcfg.epochs));
        }
        const std::function<nn::token_input<float>(std::uint64_t)> make_input = [&](std::uint64_t seed) {
            return nn::token_input<float>(
                {.vocab = nn::listops_vocab_size, .dim = mo.dim, .max_length = lo.max_length, .seed = seed + 7});
        };
        std::vector<experiment::record> records;
        experiment::run_models<nn::token_input<float>>(models, "listops", {&data.train, &data.dev, &data.test}, mo,
                                                       tcfg, seeds, make_input, world.comm(), json, records);
    } catch (const kattn::error& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
    return 0;
}
