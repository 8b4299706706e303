// Sentence classification on SST-2 and Rotten Tomatoes (docs/encoder.md §3; docs/results.md).
//
// Word-level vocabulary from the training split (lower-cased, words seen at least twice),
// Embedding 128 + sinusoidal positions, 2 post-LN encoder layers (2 heads, FFN 256,
// dropout 0.1), masked mean pooling, MLP head (128 hidden, ReLU). Models (examples/common/experiment.hpp): the FSKA list (transformer,
// transformer-noqkv, fska, fska-learnable-v, performer) and the Coulomb pairs vanilla-<map>
// vs kernel-<map> for elu, softplus, softmax_features and favor (m = 256 per head; kernel-:
// Langevin phase A on the pooled layer inputs, then Ω frozen). Model selection (best epoch,
// early stopping) on the dev split by macro-F1; the test split is used once, at the end.
// SST-2: train/dev/test as shipped (test = the GLUE dev set). Rotten Tomatoes: a seeded
// 80/10/10 split (seed 42). Mean ± sd over the seeds.
// Your own labelled TSV/CSV (docs/encoder.md §4; any number of classes, the models get the
// class count of the data): --data-tsv FILE (one file, a seeded 80/10/10 split) or
// --train FILE --test FILE [--dev FILE] (separate files, one vocabulary and class mapping);
// columns: the first two (after a header line; --no-header: none), or --text-column /
// --label-column by header name; labels are names (any strings), classes in sorted order.
//
//   text_classification                  full run: both data sets, 3 seeds
//   text_classification --quick          a few minutes: 4,000 training sentences, 2 epochs, one seed
//   text_classification --datasets rt --models fska,transformer --seeds 3 --json out.json
//   text_classification --data-tsv data/text/examples/topics.tsv --models performer,fska
#include <CLI/CLI.hpp>
#include <omp.h>

#include <cstdio>
#include <filesystem>

#include <kattn/nn/data/labelled_splits.hpp>
#include <kattn/nn/data/text_datasets.hpp>

#include "common/experiment.hpp"
#include "common/ranks.hpp"

namespace nn = kattn::nn;
using kattn::index_t;

int main(int argc, char** argv) {
    experiment::ranks world(argc, argv);  // mpirun -np N …: data-parallel (common/ranks.hpp)
    CLI::App app{"kattn: sentence classification (SST-2, Rotten Tomatoes) with kernel attention"};
    bool quick = false;
    std::string json, models_arg, seed_list, datasets_arg = "sst2,rt", data_dir = "data/text";
    index_t epochs = 0, seeds_n = 0, batch = 64, threads = 0, max_length = 64, train_limit = 0, patience = 3;
    double lr = 1e-3, weight_decay = 1e-4;
    index_t min_freq = 2;
    std::string data_tsv, train_file, dev_file, test_file, text_column, label_column;
    std::uint64_t split_seed = 42;
    bool no_header = false;
    experiment::model_options mo;
    mo.dim = 128;
    mo.heads = 2;
    mo.kernel_features = 256;
    mo.head_hidden = 128;  // the MLP head of docs/results.md §2
    app.add_flag("--quick", quick, "a few minutes: 4,000 training sentences, 2 epochs, one seed");
    app.add_option("--json", json, "write one record per model and data set here");
    app.add_option("--models", models_arg, "comma-separated model names (default: the full list)");
    app.add_option("--datasets", datasets_arg, "comma-separated: sst2, rt");
    app.add_option("--data", data_dir, "directory holding sst2/ and rt-polarity/");
    auto* tsv_opt = app.add_option(
        "--data-tsv", data_tsv, "your labelled TSV/CSV file (instead of --datasets), split 80/10/10 by --split-seed");
    auto* train_opt =
        app.add_option("--train", train_file, "your labelled training file (instead of --datasets)")->excludes(tsv_opt);
    app.add_option("--dev", dev_file, "with --train: the dev file (model selection; none: the last epoch)")
        ->needs(train_opt);
    auto* test_opt = app.add_option("--test", test_file, "with --train: the test file")->needs(train_opt);
    train_opt->needs(test_opt);
    app.add_option("--split-seed", split_seed, "--data-tsv: the seed of the train/dev/test split");
    app.add_option("--text-column", text_column, "your files: the text column's header name (default: column 1)");
    app.add_option("--label-column", label_column, "your files: the label column's header name (default: column 2)");
    app.add_flag("--no-header", no_header, "your files have no header line (columns: text, then label)");
    app.add_option("--epochs", epochs, "maximum epochs (default 10; quick 2)")->check(CLI::PositiveNumber);
    app.add_option("--patience", patience, "early stopping: epochs without a better dev macro-F1 (0: off)");
    app.add_option("--seeds", seeds_n, "seeds per model (default 3; quick 1): seeds 1 … N")->check(CLI::PositiveNumber);
    app.add_option("--seed-list", seed_list, "run exactly these seeds (e.g. 2,3), overriding --seeds");
    app.add_option("--batch", batch, "mini-batch size")->check(CLI::PositiveNumber);
    app.add_option("--lr", lr, "peak learning rate (AdamW, 5% warm-up, cosine decay)")->check(CLI::PositiveNumber);
    app.add_option("--max-length", max_length, "truncate sentences to this many tokens")->check(CLI::PositiveNumber);
    app.add_option("--train-limit", train_limit, "use the first N training sentences (0: all)");
    app.add_option("--pairs", mo.fska_pairs, "FSKA frequency pairs per head")->check(CLI::PositiveNumber);
    app.add_option("--features", mo.kernel_features, "features per head of performer / vanilla / kernel models");
    app.add_option("--align-steps", mo.align_steps, "Coulomb phase A: Langevin steps per layer");
    app.add_option("--weight-decay", weight_decay, "AdamW decoupled weight decay");
    app.add_option("--dropout", mo.dropout, "dropout of the encoder and head");
    app.add_option("--head-hidden", mo.head_hidden, "hidden width of the MLP head (0: one Linear)");
    app.add_option("--min-freq", min_freq, "vocabulary: minimum training-set frequency of a word");
    app.add_option("--dim", mo.dim, "model width d")->check(CLI::PositiveNumber);
    app.add_option("--threads", threads, "OpenMP threads (0: default)");
    CLI11_PARSE(app, argc, argv);
    if (threads > 0) omp_set_num_threads(int(threads));

    std::vector<std::string> models{"transformer",
                                    "transformer-noqkv",
                                    "fska",
                                    "fska-learnable-v",
                                    "performer",
                                    "vanilla-elu",
                                    "kernel-elu",
                                    "vanilla-softplus",
                                    "kernel-softplus",
                                    "vanilla-softmax_features",
                                    "kernel-softmax_features",
                                    "vanilla-favor",
                                    "kernel-favor"};
    if (!models_arg.empty()) models = experiment::split_list(models_arg);
    if (quick) mo.align_steps = std::min<index_t>(mo.align_steps, 50), mo.align_samples = 512;
    const index_t n_seeds = seeds_n > 0 ? seeds_n : quick ? 1 : 3;
    nn::trainer_config tcfg{.epochs = epochs > 0 ? epochs
                                      : quick    ? 2
                                                 : 10,
                            .batch_size = batch,
                            .lr = lr,
                            .weight_decay = weight_decay,
                            .warmup_fraction = 0.05,
                            .clip = 1.0,
                            .patience = patience,
                            .select = nn::selection_metric::macro_f1};
    std::vector<experiment::record> records;
    try {
        tcfg.batch_size = world.per_rank_batch(batch);
        const auto seeds = experiment::seed_list(seed_list, n_seeds);
        const bool own = !data_tsv.empty() || !train_file.empty();
        for (const auto& ds : own ? std::vector<std::string>{"own"} : experiment::split_list(datasets_arg)) {
            nn::text_options to{.max_length = max_length,
                                .min_freq = min_freq,
                                .limit_train = train_limit > 0 ? train_limit
                                               : quick         ? 4000
                                                               : 0};
            nn::text_splits data;
            std::string name;
            if (own) {  // docs/encoder.md §4: one vocabulary and class mapping for all three splits
                const nn::labelled_text_options read{
                    .header = !no_header, .text_column = text_column, .label_column = label_column};
                const std::string file = data_tsv.empty() ? train_file : data_tsv;
                nn::labelled_splits own_data = data_tsv.empty()
                                                   ? nn::load_labelled_splits(train_file, dev_file, test_file, read, to)
                                                   : nn::split_labelled_text(data_tsv, {.seed = split_seed}, read, to);
                if (world.root()) {
                    std::printf("%s: %ld classes:", file.c_str(), long(own_data.num_classes()));
                    for (const auto& label : own_data.label_names) std::printf(" %s", label.c_str());
                    if (!data_tsv.empty()) std::printf(" (80/10/10 split, seed %llu)", (unsigned long long)split_seed);
                    std::printf("\n");
                }
                data = std::move(own_data);  // the splits and vocabulary; each dataset knows its class count
                name = std::filesystem::path(file).stem().string();
            } else if (ds == "sst2") {
                data = nn::load_sst2(data_dir + "/sst2", to);
                name = "sst2";
            } else if (ds == "rt") {
                data = nn::load_rotten_tomatoes(data_dir + "/rt-polarity", to, 42);
                name = "rotten-tomatoes";
            } else {
                throw kattn::error("kattn: argument '--datasets': expected sst2 or rt, got '" + ds + "'");
            }
            if (world.root())
                std::printf("%s: %ld train / %ld dev / %ld test sentences, vocabulary %ld, max length %ld\n",
                            name.c_str(), long(data.train.size()), long(data.dev.size()), long(data.test.size()),
                            long(data.vocab.size()), long(max_length));
            const index_t vocab = data.vocab.size();
            const std::function<nn::token_input<float>(std::uint64_t)> make_input = [&](std::uint64_t seed) {
                return nn::token_input<float>(
                    {.vocab = vocab, .dim = mo.dim, .max_length = max_length, .seed = seed + 7});
            };
            experiment::run_models<nn::token_input<float>>(
                models, name, {&data.train, data.dev.size() > 0 ? &data.dev : nullptr, &data.test}, mo, tcfg, seeds,
                make_input, world.comm(), json, records);
        }
    } catch (const kattn::error& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
    return 0;
}
