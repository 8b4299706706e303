// Your own model from kattn::nn layers (docs/encoder.md §6): embedding + positions → one Performer block
// (post-LN: attention, FFN) → mean pooling → Linear head, trained by nn::trainer on a labelled TSV, saved
// (<out>.npz, .vocab.txt, .labels.txt), reloaded into a fresh model, used on new strings. --check (a test):
// exit 1 unless the reloaded model predicts as the trained one and test accuracy >= 0.8.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <fstream>

#include <kattn/nn/attention/kernel_mha.hpp>
#include <kattn/nn/checkpoint.hpp>
#include <kattn/nn/data/labelled_splits.hpp>
#include <kattn/nn/ffn.hpp>
#include <kattn/nn/inference.hpp>
#include <kattn/nn/input.hpp>
#include <kattn/nn/layer_norm.hpp>
#include <kattn/nn/linear.hpp>
#include <kattn/nn/pooling.hpp>
#include <kattn/nn/trainer.hpp>

using namespace kattn;
using tensor = nn::tensor<float>;
constexpr index_t D = 32, max_len = 32;

// nn::trainer and nn/inference.hpp need forward(batch, ctx) → logits, backward(dlogits, ctx) and collect(ps,
// prefix); each layer offers forward(x, ctx), backward(dy, ctx) and collect(ps, prefix) (nn/layer.hpp).
struct topic_model {
    nn::token_input<float> input;
    nn::performer<float> attn{{.dim = D, .heads = 2, .num_features = 32, .seed = 2}};  // Ω from the seed
    nn::layer_norm<float> ln1{{.dim = D}}, ln2{{.dim = D}};
    nn::ffn<float> ffn{{.dim = D, .hidden = 64, .dropout = 0.1, .seed = 3}};
    nn::mean_pooling<float> pool;
    nn::linear<float> head;

    topic_model(index_t vocab, index_t classes)  // same arguments, same seeds: the same model
        : input({.vocab = vocab, .dim = D, .max_length = max_len, .seed = 1}),
          head({.in = D, .out = classes, .seed = 4}) {}
    index_t classes() const { return head.out(); }  // optional: checks the data sets' class counts

    tensor forward(const nn::batch& b, nn::context& ctx) {
        const tensor x = input.embed(b, ctx);                         // sets ctx.batch, length, lengths
        const tensor h = ln1.forward(x + attn.forward(x, ctx), ctx);  // h = LN1(x + A(x))
        const tensor y = ln2.forward(h + ffn.forward(h, ctx), ctx);   // y = LN2(h + FFN(h))
        return head.forward(pool.forward(y, ctx), ctx);               // mean over the valid tokens
    }
    void backward(const tensor& dlogits, const nn::context& ctx) {  // the reverse order
        const tensor dy = ln2.backward(pool.backward(head.backward(dlogits, ctx), ctx), ctx);
        const tensor dh = ln1.backward(tensor(dy + ffn.backward(dy, ctx)), ctx);
        input.backward(tensor(dh + attn.backward(dh, ctx)), ctx);
    }
    void collect(nn::parameter_list& ps, const std::string& p) {
        input.collect(ps, p + ".input"), attn.collect(ps, p + ".attn"), ln1.collect(ps, p + ".ln1");
        ffn.collect(ps, p + ".ffn"), ln2.collect(ps, p + ".ln2"), head.collect(ps, p + ".head");
    }
};

int main(int argc, char** argv) {
    CLI::App app{"kattn: your own model (one Performer block) on a labelled TSV"};
    std::string path = "data/text/examples/topics.tsv", out = "custom_model";
    bool check = false;
    app.add_option("--data", path, "labelled TSV, header text<TAB>label");
    app.add_option("--out", out, "prefix of the saved files");
    app.add_flag("--check", check, "exit 1 unless reloaded = trained and test accuracy >= 0.8");
    CLI11_PARSE(app, argc, argv);
    try {  // one file, a seeded 80/10/10 split, the vocabulary from the training part
        const nn::labelled_splits data = nn::split_labelled_text(
            path, {.seed = 42}, {.text_column = "text", .label_column = "label"}, {.max_length = max_len});
        topic_model model(data.vocab.size(), data.num_classes());
        nn::trainer tr(model, {.epochs = 10, .batch_size = 16, .lr = 3e-3, .warmup_fraction = 0.1, .seed = 7});
        tr.fit(data.train, &data.dev);  // ends with the best dev epoch's parameters
        const nn::evaluation_report test = nn::evaluate(model, data.test);
        std::printf("%s: %td classes, test accuracy %.4f, macro-F1 %.4f\n", path.c_str(), data.num_classes(),
                    test.metrics.accuracy, test.metrics.macro_f1);
        nn::save_checkpoint(out + ".npz", tr.parameters());  // names "model.attn.q.weight", …
        data.vocab.save(out + ".vocab.txt");
        for (std::ofstream f(out + ".labels.txt"); const auto& name : data.label_names) f << name << '\n';

        // Later, elsewhere: vocabulary, labels, a fresh model of the same shape and seeds, parameters.
        const nn::vocabulary vocab = nn::vocabulary::load(out + ".vocab.txt");
        std::vector<std::string> labels;
        std::ifstream labels_file(out + ".labels.txt");
        for (std::string line; std::getline(labels_file, line);) labels.push_back(line);
        topic_model restored(vocab.size(), index_t(labels.size()));
        nn::parameter_list ps;
        restored.collect(ps, "model");  // the trainer's prefix
        nn::load_checkpoint(out + ".npz", ps);
        const std::vector<std::string> texts = {"a late goal by the striker", "the telescope saw a new galaxy",
                                                "the minister lost the vote", "tomato soup with garlic bread"};
        const std::vector<int> y = nn::predict(restored, texts, vocab, max_len);  // class ids
        for (std::size_t i = 0; i < texts.size(); ++i)
            std::printf("%-48s -> %s\n", texts[i].c_str(), labels[y[i]].c_str());
        const bool same = nn::predict_proba(restored, data.test) == nn::predict_proba(model, data.test);
        std::printf("reloaded model predicts as the trained one: %s\n", same ? "yes" : "NO");
        if (check && (!same || labels != data.label_names || test.metrics.accuracy < 0.8)) return 1;
    } catch (const kattn::error& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
}
