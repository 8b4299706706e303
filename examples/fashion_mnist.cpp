// FSKA's ablation on Fashion-MNIST (docs/encoder.md §3; docs/results.md).
//
// Each 28×28 image is cut into 7×7 patches (16 tokens; --patch rows: 28 row tokens), embedded
// by a Linear layer with sinusoidal positions, encoded by 2 post-LN layers (d = 64, 4 heads,
// FFN 256, dropout 0.1), mean-pooled and classified. Models (examples/common/experiment.hpp):
// transformer, transformer-noqkv, uniform (control), fska, fska-s4, fska-signed,
// fska-learnable-v, performer, kernel-softplus (Coulomb, phase A + B). The last 5,000
// training images (after a seeded shuffle) are the dev split for model selection; the test
// split is the official 10,000.
//
//   fashion_mnist                      full run (10 epochs, 1 seed)
//   fashion_mnist --quick              a few minutes: 6,000 training images, 2 epochs
//   fashion_mnist --models fska,transformer --epochs 5 --json out.json
//   fashion_mnist --transductive       the authors' protocol (see transductive.hpp)
//   fashion_mnist --pixels             pixel-level: 784 tokens per image (1×1 patches: a learned
//                                      intensity embedding x·w + b plus positions), the analogue
//                                      of Long Range Arena's Image task
#include <CLI/CLI.hpp>
#include <omp.h>

#include <cstdio>
#include <numeric>

#include <kattn/nn/data/fashion_mnist.hpp>
#include <kattn/nn/data/text_datasets.hpp>

#include "common/experiment.hpp"
#include "common/map_options.hpp"
#include "common/ranks.hpp"
#include "common/transductive.hpp"

namespace nn = kattn::nn;
using kattn::index_t;

int main(int argc, char** argv) {
    experiment::ranks world(argc, argv);  // mpirun -np N …: data-parallel (common/ranks.hpp)
    CLI::App app{"kattn: FSKA ablation on Fashion-MNIST"};
    bool quick = false, transductive = false, pixels = false;
    std::string json, models_arg, seed_list, patch = "7x7", directory = "/usr/share/datasets/fashion-mnist";
    index_t epochs = 0, train_limit = 0, batch = 128, seeds_n = 1, threads = 0;
    double lr = 1e-3;
    experiment::model_options mo;
    mo.kernel_features = 64;
    app.add_flag("--quick", quick, "a few minutes: 6,000 training images, 2 epochs, one seed");
    app.add_option("--json", json, "write one record per model here");
    app.add_option("--models", models_arg, "comma-separated model names (default: the ablation list)");
    app.add_option("--epochs", epochs, "training epochs (default 10; quick 2)")->check(CLI::PositiveNumber);
    app.add_option("--train-limit", train_limit, "use the first N training images (0: all)");
    app.add_option("--batch", batch, "mini-batch size")->check(CLI::PositiveNumber);
    app.add_option("--lr", lr, "peak learning rate (AdamW, 5% warm-up, cosine decay)")->check(CLI::PositiveNumber);
    app.add_option("--seeds", seeds_n, "seeds per model: seeds 1 … N")->check(CLI::PositiveNumber);
    app.add_option("--seed-list", seed_list, "run exactly these seeds (e.g. 2,3), overriding --seeds");
    app.add_option("--dim", mo.dim, "model width d")->check(CLI::PositiveNumber);
    app.add_option("--heads", mo.heads, "attention heads")->check(CLI::PositiveNumber);
    app.add_option("--pairs", mo.fska_pairs, "FSKA frequency pairs per head")->check(CLI::PositiveNumber);
    app.add_option("--features", mo.kernel_features, "features per head of performer / vanilla / kernel models");
    experiment::add_map_options(app, mo);
    auto* patch_option = app.add_option("--patch", patch, "patch shape HxW dividing 28x28, or 'rows'");
    app.add_flag("--pixels", pixels, "pixel-level sequences: 784 tokens per image (--patch 1x1)")
        ->excludes(patch_option);
    app.add_option("--data", directory, "directory with the four gzip'd IDX files");
    app.add_option("--threads", threads, "OpenMP threads (0: default)");
    app.add_flag("--transductive", transductive,
                 "the authors' protocol: one image = one token, the training subset is one sequence");
    CLI11_PARSE(app, argc, argv);
    if (threads > 0) omp_set_num_threads(int(threads));

    try {
        const auto seeds = experiment::seed_list(seed_list, seeds_n);
        if (transductive) return experiment::run_transductive(directory, quick, json, models_arg, epochs, seeds);

        nn::fashion_mnist_options fo;
        fo.directory = directory;
        auto data = nn::load_fashion_mnist(fo);
        const index_t limit = train_limit > 0 ? train_limit : quick ? 6000 : 0;
        // Seeded dev split: shuffle the training set, hold out the last 5,000 (quick: 10%).
        const auto perm = nn::split_permutation(data.train.size(), 42);
        const index_t n_all = limit > 0 ? std::min(limit, data.train.size()) : data.train.size();
        const index_t n_dev = quick || limit > 0 ? n_all / 10 : 5000;
        std::vector<index_t> tr(perm.begin(), perm.begin() + (n_all - n_dev)),
            dv(perm.begin() + (n_all - n_dev), perm.begin() + n_all);
        const nn::dataset train = data.train.subset(tr), dev = data.train.subset(dv);
        const nn::dataset test = quick ? data.test.subset([&] {
            std::vector<index_t> t(2000);
            std::iota(t.begin(), t.end(), index_t(0));
            return t;
        }())
                                       : data.test;

        index_t ph = 7, pw = 7;
        if (pixels) patch = "1x1";
        if (patch == "rows")
            ph = 1, pw = 28;
        else if (std::sscanf(patch.c_str(), "%ldx%ld", &ph, &pw) != 2)
            throw kattn::error("kattn: argument '--patch': expected HxW or 'rows', got '" + patch + "'");

        std::vector<std::string> models{"transformer", "transformer-noqkv", "uniform",   "fska",           "fska-s4",
                                        "fska-signed", "fska-learnable-v",  "performer", "kernel-softplus"};
        if (!models_arg.empty()) models = experiment::split_list(models_arg);
        nn::trainer_config tcfg = experiment::trainer_settings(epochs > 0 ? epochs : quick ? 2 : 10, batch, lr);
        tcfg.batch_size = world.per_rank_batch(batch);
        if (world.root())
            std::printf(
                "Fashion-MNIST: %ld train / %ld dev / %ld test images, %s patches, d = %ld, %ld heads, %ld epochs\n",
                long(train.size()), long(dev.size()), long(test.size()), patch.c_str(), long(mo.dim), long(mo.heads),
                long(tcfg.epochs));
        const std::function<nn::patch_input<float>(std::uint64_t)> make_input = [&](std::uint64_t seed) {
            return nn::patch_input<float>({.patch_height = ph, .patch_width = pw, .dim = mo.dim, .seed = seed + 7});
        };
        std::vector<experiment::record> records;
        experiment::run_models<nn::patch_input<float>>(models, "fashion-mnist", {&train, &dev, &test}, mo, tcfg, seeds,
                                                       make_input, world.comm(), json, records);
    } catch (const kattn::error& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
    return 0;
}
