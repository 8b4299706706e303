// kattn/nn/data/labelled_splits.hpp — train/dev/test token datasets from your own labelled
// TSV or CSV files, in one call.
//
//   load_labelled_splits(train_path, dev_path, test_path, read, text)   three files
//   split_labelled_text(path, split, read, text)                        one file, seeded split
// Both return labelled_splits: train, dev, test (nn::dataset, kind tokens, num_classes = C),
// vocab and label_names (class k's name; C = label_names.size()). It derives from
// text_splits, so it goes wherever load_sst2's result goes.
//   read  how to read each file (columns, labels, format): labelled_text_options,
//         nn/data/labelled_text.hpp. Each file is read with at most min(read.max_bytes,
//         text.max_file_bytes) bytes.
//   text  max_length, min_freq, max_vocab, lowercase, limit_train (text_options, as load_sst2).
// Classes. load_labelled_splits reads the training file first; its label_names (read.label_names
// when given, else derived from the training file as read.order says) are passed to the dev
// and test files, so all three share one mapping and a label missing from training is an error
// naming the dev or test file and line (give read.label_names to allow it).
// split_labelled_text reads the whole file (classes from all its records), permutes the records
// with split_permutation(n, split.seed) (the Fisher–Yates shuffle of load_rotten_tomatoes), and
// takes n_train = ⌊split.train·n⌋ and n_dev = ⌊split.dev·n⌋ (both computed as ⌊f·n + 1e-9⌋, so
// 0.29·100 = 29), test the rest; each part keeps the shuffled order. Report the seed with results.
// Then, as load_sst2: limit_train > 0 keeps the first N training records, the vocabulary is
// built from the training texts only (build_vocabulary), and every part is encoded by
// make_text_dataset with the same vocabulary. An empty dev_path or test_path gives an empty
// dataset (size 0, num_classes = C): pass &dev to trainer::fit only when it is not empty.
// Dataset names: the file path, "<path> (train)" etc. for split_labelled_text.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "dataset.hpp"
#include "labelled_text.hpp"
#include "text_datasets.hpp"

namespace kattn::nn {

/// Train/dev/test token datasets, the training vocabulary and the class names.
struct labelled_splits : text_splits {
    std::vector<std::string> label_names;  ///< label_names[k]: the name of class k

    index_t num_classes() const { return index_t(label_names.size()); }
};

/// Fractions of one file's records for split_labelled_text; test gets the rest.
struct split_options {
    double train = 0.8;
    double dev = 0.1;
    std::uint64_t seed = 42;  ///< split_permutation's seed
};

namespace detail {

inline labelled_splits encode_labelled_splits(labelled_data train, const labelled_data& dev, const labelled_data& test,
                                              const text_options& o, const std::array<std::string, 3>& names) {
    if (o.limit_train > 0 && o.limit_train < train.size()) {
        train.texts.resize(std::size_t(o.limit_train));
        train.labels.resize(std::size_t(o.limit_train));
        train.lines.resize(std::size_t(o.limit_train));
    }
    labelled_splits s;
    s.label_names = train.label_names;
    const index_t C = index_t(s.label_names.size());
    s.vocab = build_vocabulary(train.texts, o);
    s.train = make_text_dataset(train.texts, train.labels, s.vocab, o.max_length, names[0], C);
    s.dev = make_text_dataset(dev.texts, dev.labels, s.vocab, o.max_length, names[1], C);
    s.test = make_text_dataset(test.texts, test.labels, s.vocab, o.max_length, names[2], C);
    return s;
}

inline labelled_text_options bounded(labelled_text_options read, const text_options& text) {
    read.max_bytes = std::min(read.max_bytes, text.max_file_bytes);
    return read;
}

/// ⌊f·n⌋, robust to f·n landing just below an integer (0.8·10).
inline index_t split_count(double f, index_t n) { return index_t(std::floor(f * double(n) + 1e-9)); }

}  // namespace detail

/// Three labelled files → train/dev/test token datasets sharing one vocabulary and one class
/// mapping (see the header comment). An empty dev_path / test_path gives an empty dataset.
inline labelled_splits load_labelled_splits(const std::string& train_path, const std::string& dev_path,
                                            const std::string& test_path, const labelled_text_options& read = {},
                                            const text_options& text = {}) {
    detail::check_text_options(text);
    detail::require(!train_path.empty(), "train_path", "the path of the training file", "an empty path");
    labelled_text_options o = detail::bounded(read, text);
    labelled_data train = read_labelled_text(train_path, o);
    o.label_names = train.label_names;  // dev and test use the training file's classes
    labelled_data dev, test;
    dev.label_names = test.label_names = train.label_names;
    if (!dev_path.empty()) dev = read_labelled_text(dev_path, o);
    if (!test_path.empty()) test = read_labelled_text(test_path, o);
    return detail::encode_labelled_splits(std::move(train), dev, test, text, {train_path, dev_path, test_path});
}

/// One labelled file → a seeded train/dev/test split (see the header comment).
inline labelled_splits split_labelled_text(const std::string& path, const split_options& split = {},
                                           const labelled_text_options& read = {}, const text_options& text = {}) {
    detail::check_text_options(text);
    detail::require(split.train > 0 && split.train <= 1, "split.train", "a fraction in (0, 1]", split.train);
    detail::require(split.dev >= 0 && split.dev < 1, "split.dev", "a fraction in [0, 1)", split.dev);
    detail::require(split.train + split.dev <= 1 + 1e-12, "split.dev", "at most 1 - split.train", split.dev);
    labelled_data all = read_labelled_text(path, detail::bounded(read, text));
    const index_t n = all.size();
    const index_t n_train = detail::split_count(split.train, n);
    const index_t n_dev = std::min(detail::split_count(split.dev, n), n - n_train);
    detail::require(
        n_train >= 1, "split.train",
        "a fraction that leaves at least one training record of the " + std::to_string(n) + " in '" + path + "'",
        split.train);
    const std::vector<index_t> order = split_permutation(n, split.seed);
    labelled_data parts[3];
    for (labelled_data& p : parts) p.label_names = all.label_names;
    for (index_t r = 0; r < n; ++r) {
        labelled_data& p = parts[r < n_train ? 0 : (r < n_train + n_dev ? 1 : 2)];
        const std::size_t i = std::size_t(order[std::size_t(r)]);
        p.texts.push_back(std::move(all.texts[i]));
        p.labels.push_back(all.labels[i]);
        p.lines.push_back(all.lines[i]);
    }
    return detail::encode_labelled_splits(std::move(parts[0]), parts[1], parts[2], text,
                                          {path + " (train)", path + " (dev)", path + " (test)"});
}

}  // namespace kattn::nn
