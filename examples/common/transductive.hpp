// examples/common/transductive.hpp — the FSKA authors' Fashion-MNIST protocol (docs/results.md, "The authors' transductive protocol").
//
// Every image is ONE token of 784 pixels; Linear(784, d) embeds it (no positions: the set is
// unordered). A subset of training images (3,000; --quick 1,000) and test images (1,000;
// quick 500) form a single sequence; the encoder (2 layers) lets every image attend to
// every other, a Linear head classifies each token, and the loss is the cross-entropy over
// the training tokens only: full batch, one AdamW step per epoch. Test tokens are in the
// sequence (transductive) but their labels never enter the loss. It shows how to build a
// network from kattn::nn layers by hand: linear → encoder<Attention> → linear, with the
// regulariser of FSKA added to the loss.
#pragma once

#include <chrono>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include <xtensor/xview.hpp>

#include <kattn/nn/data/fashion_mnist.hpp>

#include "experiment.hpp"

namespace experiment {

template <class Attention>
outcome run_transductive_net(const nn::dataset& seq, index_t n_train, index_t epochs, const model_options& mo,
                             std::uint64_t seed, const std::function<Attention(index_t)>& make) {
    const index_t N = seq.size(), P = seq.item_size, D = mo.dim;
    nn::linear<float> embed({.in = P, .out = D, .seed = seed + 1});
    nn::encoder<Attention> enc(
        {.dim = D, .layers = mo.layers, .ffn_hidden = mo.ffn_hidden, .dropout = mo.dropout, .seed = seed + 2}, make);
    nn::linear<float> head({.in = D, .out = seq.num_classes, .seed = seed + 3});
    nn::parameter_list ps;
    embed.collect(ps, "embed");
    enc.collect(ps, "encoder");
    head.collect(ps, "head");
    nn::adamw opt({.lr = 1e-3, .weight_decay = 1e-4});
    nn::tensor<float> x = nn::tensor<float>::from_shape({std::size_t(N), std::size_t(P)});
    std::copy(seq.pixels.begin(), seq.pixels.end(), x.data());
    const std::vector<int> train_labels(seq.labels.begin(), seq.labels.begin() + n_train);
    const auto t0 = std::chrono::steady_clock::now();
    for (index_t e = 0; e < epochs; ++e) {
        nn::context ctx{.batch = 1, .length = N, .training = true, .step = std::uint64_t(e)};
        const nn::tensor<float> logits = head.forward(enc.forward(embed.forward(x), ctx));
        const nn::tensor<float> train_logits = xt::view(logits, xt::range(0, n_train), xt::all());
        const auto ce = nn::cross_entropy(train_logits, train_labels);
        nn::tensor<float> dlogits = nn::zeros<float>(N, seq.num_classes);
        xt::view(dlogits, xt::range(0, n_train), xt::all()) = ce.dlogits;
        nn::zero_grad(ps);
        embed.backward(enc.backward(head.backward(dlogits), ctx));
        enc.regularization(ctx);
        nn::clip_grad_norm(ps, 1.0);
        opt.step(ps);
    }
    outcome r;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.params = nn::count(ps);
    nn::context ctx{.batch = 1, .length = N};
    const nn::tensor<float> logits = head.apply(enc.forward(embed.apply(x), ctx));
    const nn::tensor<float> test_logits = xt::view(logits, xt::range(n_train, N), xt::all());
    const std::vector<int> test_labels(seq.labels.begin() + n_train, seq.labels.end());
    const auto ce = nn::cross_entropy(test_logits, test_labels);
    const auto m = nn::evaluate_metrics(ce.probs, test_labels);
    r.accuracy = m.accuracy;
    r.macro_f1 = m.macro_f1;
    r.ece = m.ece;
    return r;
}

inline int run_transductive(const std::string& directory, bool quick, const std::string& json,
                            const std::string& models_arg, index_t epochs, const std::vector<std::uint64_t>& seeds) {
    nn::fashion_mnist_options fo;
    fo.directory = directory;
    const auto data = nn::load_fashion_mnist(fo);
    const index_t n_train = quick ? 1000 : 3000, n_test = quick ? 500 : 1000;
    const index_t E = epochs > 0 ? epochs : quick ? 60 : 200;
    std::vector<index_t> idx_train(static_cast<std::size_t>(n_train)), idx_test(static_cast<std::size_t>(n_test));
    std::iota(idx_train.begin(), idx_train.end(), index_t(0));
    std::iota(idx_test.begin(), idx_test.end(), index_t(0));
    nn::dataset seq = data.train.subset(idx_train);
    const nn::dataset te = data.test.subset(idx_test);
    seq.pixels.insert(seq.pixels.end(), te.pixels.begin(), te.pixels.end());
    seq.labels.insert(seq.labels.end(), te.labels.begin(), te.labels.end());
    model_options mo;
    mo.dim = 64;
    mo.heads = 4;
    std::vector<std::string> models{"transformer", "transformer-noqkv", "fska", "fska-signed", "fska-learnable-v"};
    if (!models_arg.empty()) models = split_list(models_arg);
    std::printf("Fashion-MNIST, transductive: one sequence of %ld training + %ld test images, %ld full-batch steps\n",
                long(n_train), long(n_test), long(E));
    std::vector<record> records;
    for (const auto& name : models) {
        std::vector<outcome> os;
        for (const std::uint64_t seed : seeds) {
            auto ls = [seed](index_t l) { return seed * 1000 + 17 * std::uint64_t(l) + 1; };
            outcome r;
            if (name == "transformer" || name == "transformer-noqkv") {
                const bool qkv = name == "transformer";
                r = run_transductive_net<nn::softmax_mha<float>>(seq, n_train, E, mo, seed, [&](index_t l) {
                    return nn::softmax_mha<float>({.dim = mo.dim, .heads = mo.heads, .qkv = qkv, .seed = ls(l)});
                });
            } else if (name.rfind("fska", 0) == 0) {
                const bool positive = name != "fska-signed", learn_v = name == "fska-learnable-v";
                const double scale =
                    name.rfind("fska-s", 0) == 0 && name != "fska-signed" ? std::stod(name.substr(6)) : 1.0;
                r = run_transductive_net<nn::fska_attention<float>>(seq, n_train, E, mo, seed, [&](index_t l) {
                    return nn::fska_attention<float>({.dim = mo.dim,
                                                      .heads = mo.heads,
                                                      .num_pairs = mo.fska_pairs,
                                                      .positive = positive,
                                                      .scale = scale,
                                                      .learnable_v = learn_v,
                                                      .seed = ls(l)});
                });
            } else {
                throw kattn::error(
                    "kattn: argument '--models': expected transformer, transformer-noqkv, fska, "
                    "fska-s<k>, fska-signed or fska-learnable-v with --transductive, got '" +
                    name + "'");
            }
            std::fprintf(stderr, "%s seed %llu: accuracy %.4f (%.0f s)\n", name.c_str(),
                         static_cast<unsigned long long>(seed), r.accuracy, r.seconds);
            r.epochs = double(E);
            r.seed = seed;
            os.push_back(r);
        }
        records.push_back(aggregate(name, "fashion-mnist-transductive", os));
        print_table(records);
        if (!json.empty()) write_json(json, records);
    }
    return 0;
}

}  // namespace experiment
