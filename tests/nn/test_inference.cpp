// Tests for kattn/nn/inference.hpp and the class-count check of nn::trainer (issue 15):
// predict_proba / predict / evaluate without a trainer equal trainer::evaluate bit for bit;
// predicting raw strings equals predicting their encoded dataset; 1 and 2 OpenMP threads
// agree; a dataset whose num_classes differs from the model's is refused by fit, evaluate
// and nn::evaluate; and an end-to-end run on a labelled TSV file (load, train, evaluate,
// save, reload, predict new strings) — the code of docs/encoder.md "Your own labelled data".
#include <doctest/doctest.h>

#include "scratch_dir.hpp"

#include "error_text.hpp"

#include <omp.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <kattn/core/random.hpp>
#include <kattn/nn/attention/softmax_mha.hpp>
#include <kattn/nn/checkpoint.hpp>
#include <kattn/nn/classifier.hpp>
#include <kattn/nn/data/labelled_splits.hpp>
#include <kattn/nn/inference.hpp>
#include <kattn/nn/trainer.hpp>

using namespace kattn;
namespace fs = std::filesystem;

namespace {

using scratch = kt::scratch_dir;

using kt::contains;
using kt::error_text;

const std::vector<std::string> topic_names = {"politics", "science", "sports"};
const std::vector<std::vector<std::string>> topic_words = {{"parliament", "election", "minister", "vote"},
                                                           {"atom", "cell", "theory", "experiment"},
                                                           {"match", "goal", "team", "coach"}};
const std::vector<std::string> filler = {"the", "a",  "today", "news", "report", "big",  "new",  "of",
                                         "and", "on", "this",  "week", "people", "said", "more", "story"};

/// A synthetic 3-class labelled TSV (header text<TAB>topic): each sentence is 3–8 filler
/// words with one or two words of its topic among them.
std::string topic_tsv(int n, std::uint64_t seed) {
    const random_stream rs(seed, streams::user + 9);
    std::uint64_t k = 0;
    auto pick = [&](std::size_t size) { return std::size_t(rs.uniform(k++) * double(size)) % size; };
    std::string out = "text\ttopic\n";
    for (int i = 0; i < n; ++i) {
        const std::size_t c = pick(3), len = 3 + pick(6), keys = 1 + pick(2);
        std::vector<std::string> words;
        for (std::size_t j = 0; j < len; ++j) words.push_back(filler[pick(filler.size())]);
        for (std::size_t j = 0; j < keys; ++j) words[pick(words.size())] = topic_words[c][pick(4)];
        for (std::size_t j = 0; j < words.size(); ++j) out += (j ? " " : "") + words[j];
        out += "\t" + topic_names[c] + "\n";
    }
    return out;
}

void write(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

// ---- the code of docs/encoder.md "Your own labelled data" (sizes smaller, paths in scratch) ----
using model_t = nn::sequence_classifier<nn::token_input<float>, nn::softmax_mha<float>, float>;
constexpr index_t D = 16, max_len = 32;

model_t make_model(index_t vocab, index_t classes) {
    return model_t({.encoder = {.dim = D, .layers = 1, .ffn_hidden = 32, .dropout = 0.1, .seed = 1},
                    .classes = classes,
                    .seed = 1},
                   nn::token_input<float>({.vocab = vocab, .dim = D, .max_length = max_len, .seed = 1}), [](index_t l) {
                       return nn::softmax_mha<float>({.dim = D, .heads = 2, .seed = 10 + std::uint64_t(l)});
                   });
}

/// Trains on dir/{train,dev,test}.tsv, saves and reloads; returns the test report and the
/// restored model's predictions of `texts`.
struct doc_result {
    nn::labelled_splits data;
    nn::evaluation_report test;
    std::vector<int> predicted;
};
doc_result doc_example(const scratch& dir, const std::vector<std::string>& texts) {
    const std::vector<std::string> topics = {"politics", "science", "sports"};  // class k = topics[k]
    const nn::labelled_splits data = nn::load_labelled_splits(
        dir.file("train.tsv"), dir.file("dev.tsv"), dir.file("test.tsv"),
        {.text_column = "text", .label_column = "topic", .label_names = topics}, {.max_length = max_len});
    model_t model = make_model(data.vocab.size(), data.num_classes());
    nn::trainer tr(model, {.epochs = 12, .batch_size = 16, .lr = 3e-3, .seed = 7, .progress = false});
    tr.fit(data.train, &data.dev);  // ends with the best dev parameters
    const nn::evaluation_report test = nn::evaluate(model, data.test);
    data.vocab.save(dir.file("vocab.txt"));
    nn::save_checkpoint(dir.file("model.npz"), tr.parameters());

    // later: rebuild with the same configuration and seeds, load, predict raw strings
    const nn::vocabulary vocab = nn::vocabulary::load(dir.file("vocab.txt"));
    model_t restored = make_model(vocab.size(), index_t(topics.size()));
    nn::parameter_list ps = restored.parameters();
    nn::load_checkpoint(dir.file("model.npz"), ps);
    const std::vector<int> y = nn::predict(restored, texts, vocab, max_len);  // class ids: topics[y[i]]
    return {data, test, y};
}

}  // namespace

TEST_CASE("nn inference: train on a labelled TSV, evaluate, save, reload, predict new strings") {
    scratch dir;
    write(dir.file("train.tsv"), topic_tsv(300, 1));
    write(dir.file("dev.tsv"), topic_tsv(60, 2));
    write(dir.file("test.tsv"), topic_tsv(90, 3));
    // new sentences: unseen filler words ("<unk>"), capitals (lower-cased like the training texts)
    const std::vector<std::string> texts = {"Yesterday the MINISTER spoke", "an unusual experiment",
                                            "what a goal by the team",      "vote now",
                                            "the cell of the atom",         "coach said more"};
    const std::vector<int> truth = {0, 1, 2, 0, 1, 2};
    const doc_result r = doc_example(dir, texts);
    CHECK(r.data.label_names == topic_names);
    CHECK(r.data.train.num_classes == 3);
    CHECK(r.test.classes == 3);
    CHECK(r.test.metrics.accuracy > 0.9);  // chance: 1/3
    CHECK(r.test.metrics.macro_f1 > 0.9);
    CHECK(r.predicted == truth);
    // the report is consistent: confusion rows are the true classes, diagonal = hits
    index_t total = 0, hits = 0;
    for (index_t y = 0; y < 3; ++y)
        for (index_t p = 0; p < 3; ++p) {
            total += r.test.confusion(std::size_t(y), std::size_t(p));
            if (y == p) hits += r.test.confusion(std::size_t(y), std::size_t(p));
        }
    CHECK(total == r.data.test.size());
    CHECK(double(hits) / double(total) == r.test.metrics.accuracy);
    for (index_t i = 0; i < r.data.test.size(); ++i) {
        const float* row = r.test.probs.data() + i * 3;
        CHECK(r.test.predictions[std::size_t(i)] == int(std::max_element(row, row + 3) - row));
        CHECK(double(row[0]) + row[1] + row[2] == doctest::Approx(1.0).epsilon(1e-6));
    }
}

TEST_CASE("nn::evaluate and predict equal trainer::evaluate; strings equal their dataset; 1 = 2 threads") {
    scratch dir;
    write(dir.file("all.tsv"), topic_tsv(200, 4));
    const nn::labelled_splits data = nn::split_labelled_text(dir.file("all.tsv"), {.train = 0.7, .dev = 0.0},
                                                             {.text_column = "text", .label_column = "topic"},
                                                             {.max_length = 6});  // some texts are truncated
    model_t model = make_model(data.vocab.size(), data.num_classes());
    nn::trainer tr(model, {.epochs = 2, .batch_size = 16, .eval_batch_size = 7, .seed = 3, .progress = false});
    tr.fit(data.train);
    const nn::evaluation_result want = tr.evaluate(data.test);
    const nn::evaluation_report got = nn::evaluate(model, data.test, 7);
    CHECK(got.probs == want.probs);  // bitwise
    CHECK(got.metrics.accuracy == want.metrics.accuracy);
    CHECK(got.metrics.macro_f1 == want.metrics.macro_f1);
    CHECK(got.metrics.log_loss == want.metrics.log_loss);
    CHECK(got.metrics.ece == want.metrics.ece);
    CHECK(got.metrics.brier == want.metrics.brier);
    const auto cm = nn::confusion_matrix(std::span<const float>(want.probs), 3, std::span<const int>(data.test.labels));
    CHECK(got.confusion == cm);
    // predict_proba on the dataset, on its raw strings, on one batch
    const nn::tensor<float> p = nn::predict_proba(model, data.test, 7);
    REQUIRE(p.shape()[0] == std::size_t(data.test.size()));
    REQUIRE(p.shape()[1] == 3);
    CHECK(std::vector<float>(p.begin(), p.end()) == want.probs);
    const nn::labelled_data raw =
        nn::read_labelled_text(dir.file("all.tsv"), {.text_column = "text", .label_column = "topic"});
    // the test part's strings, in the split's order
    const std::vector<index_t> order = nn::split_permutation(raw.size(), 42);
    std::vector<std::string> texts;
    for (index_t r = 140; r < raw.size(); ++r) texts.push_back(raw.texts[std::size_t(order[std::size_t(r)])]);
    REQUIRE(index_t(texts.size()) == data.test.size());
    const nn::tensor<float> ps = nn::predict_proba(model, texts, data.vocab, 6, 7);
    CHECK(ps == p);
    CHECK(nn::predict(model, texts, data.vocab, 6, 7) == got.predictions);
    CHECK(nn::predict(model, data.test, 7) == got.predictions);
    const std::vector<index_t> idx = {3, 0, 5};
    const nn::tensor<float> pb = nn::predict_proba(model, data.test.make_batch(idx));
    for (std::size_t r = 0; r < 3; ++r)
        for (std::size_t c = 0; c < 3; ++c) CHECK(pb(r, c) == p(std::size_t(idx[r]), c));
    CHECK(nn::predict(model, data.test.make_batch(idx)) ==
          std::vector<int>{got.predictions[3], got.predictions[0], got.predictions[5]});
    // another batch size changes the padding, not the predictions
    CHECK(nn::predict(model, data.test, 1) == got.predictions);
    // 1 and 2 OpenMP threads: bitwise the same probabilities
    const int before = omp_get_max_threads();
    omp_set_num_threads(1);
    const nn::tensor<float> one = nn::predict_proba(model, texts, data.vocab, 6, 7);
    omp_set_num_threads(2);
    const nn::tensor<float> two = nn::predict_proba(model, texts, data.vocab, 6, 7);
    omp_set_num_threads(before);
    CHECK(one == two);
    CHECK(one == p);
    // no strings: P [0, C]
    const nn::tensor<float> none = nn::predict_proba(model, std::vector<std::string>{}, data.vocab, 6);
    CHECK(none.shape()[0] == 0);
    CHECK(none.shape()[1] == 3);
    CHECK(nn::predict(model, std::vector<std::string>{}, data.vocab, 6).empty());
}

TEST_CASE("nn::trainer, nn::evaluate: a dataset's num_classes must equal the model's classes") {
    scratch dir;
    std::string tsv = "text\tlabel\n";
    for (int i = 0; i < 24; ++i) tsv += "word" + std::to_string(i % 6) + " x\t" + std::to_string(i % 6) + "\n";
    write(dir.file("six.tsv"), tsv);
    const nn::labelled_splits six =
        nn::load_labelled_splits(dir.file("six.tsv"), "", "", {.labels = nn::label_type::integers});
    REQUIRE(six.train.num_classes == 6);
    model_t wrong = make_model(six.vocab.size(), 3);
    CHECK(wrong.classes() == 3);
    nn::trainer tr(wrong, {.epochs = 1, .progress = false});
    for (const std::string& e : {error_text([&] { tr.fit(six.train); }), error_text([&] { tr.evaluate(six.train); }),
                                 error_text([&] { nn::evaluate(wrong, six.train); }),
                                 error_text([&] { nn::predict_proba(wrong, six.train); })}) {
        CAPTURE(e);
        CHECK(contains(e, "data set '" + dir.file("six.tsv") + "' with num_classes = 6"));
        CHECK(contains(e, "model's 3 classes"));
    }
    nn::dataset dev = six.train;
    dev.name = "my dev";
    model_t right = make_model(six.vocab.size(), 6);
    nn::trainer ok(right, {.epochs = 1, .progress = false});
    dev.num_classes = 2;
    CHECK(contains(error_text([&] { ok.fit(six.train, &dev); }), "argument 'dev'"));
    CHECK(contains(error_text([&] { ok.fit(six.train, &dev); }), "'my dev' with num_classes = 2"));
    dev.num_classes = 0;  // unknown: not checked
    CHECK_NOTHROW(ok.fit(six.train, &dev));
    CHECK(nn::evaluate(right, six.train).classes == 6);
    // other argument errors
    CHECK(contains(error_text([&] { nn::evaluate(right, six.train, 0); }), "'batch_size'"));
    CHECK(contains(error_text([&] { nn::evaluate(right, nn::dataset{}); }), "'data'"));
    const std::vector<std::string> texts = {"word1 x"};
    CHECK(contains(error_text([&] { nn::predict(right, texts, six.vocab, 0); }), "'max_length'"));
}
