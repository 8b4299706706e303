// kattn/nn/data/text_datasets.hpp — SST-2 and Rotten Tomatoes as kattn::nn token datasets.
//
// Both loaders return train/dev/test datasets of kind tokens, 2 classes, texts stored as
// unpadded token ids (dataset::make_batch truncates to max_length and pads with id 0), and
// the vocabulary, which is built from the training split only (after limit_train), so
// dev/test words unseen in training map to "<unk>".
//
// SST-2 (GLUE; `directory` holds train.tsv, dev.tsv, test.tsv with header sentence<TAB>label):
//   the three files as they are; labels must be 0 or 1.
// Rotten Tomatoes (Pang & Lee 2005; rt-polarity.pos, rt-polarity.neg, one sentence a line):
//   there is no official split. All sentences, pos (label 1) first then neg (label 0), get
//   indices 0..n−1; a Fisher–Yates shuffle
//       for i = n−1 … 1:  j = min(i, ⌊u·(i+1)⌋),  u = random_stream(split_seed, streams::data).uniform(draw++),
//                         swap(order[i], order[j])          (draw starts at 0)
//   permutes them (exact integer/double arithmetic: identical on every platform), and
//       n_train = ⌊8n/10⌋, n_dev = ⌊n/10⌋, n_test = n − n_train − n_dev
//   consecutive pieces of the shuffled order form train, dev, test; each keeps the shuffled
//   order. For n = 10,662: 8,529 / 1,066 / 1,067. Report the seed (default 42) with results.
// limit_train > 0 keeps the first N training items (of the file order for SST-2, of the
// shuffled order for Rotten Tomatoes); dev and test are never limited. Each file is read
// whole, at most max_file_bytes (default text_max_bytes = 256 MiB); a missing file, a
// directory in its place or a larger file is a kattn::error naming the path.
// The builders both loaders use, public for any texts (nn/data/labelled_splits.hpp uses them):
//   build_vocabulary(texts, options)   vocabulary::build(texts, min_freq, max_vocab, lowercase)
//   make_text_dataset(texts, labels, vocab, max_length, name, num_classes)   a token dataset:
//       item i = vocab.encode(texts[i]) (tokenize, unknown words → <unk>), unpadded; labels
//       in [0, num_classes), num_classes ≥ 1.
#pragma once

#include <cstdint>
#include <filesystem>
#include <numeric>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../../core/random.hpp"
#include "dataset.hpp"
#include "text.hpp"

namespace kattn::nn {

struct text_options {
    index_t max_length = 64;  ///< truncation length in tokens (≤ token_input's max_length: docs/encoder.md §8)
    index_t min_freq = 1;     ///< words seen fewer times in train are "<unk>"
    index_t max_vocab = 0;    ///< cap on the vocabulary size, specials included (0 = none)
    bool lowercase = true;
    index_t limit_train = 0;                        ///< keep the first N training items (0 = all)
    std::uint64_t max_file_bytes = text_max_bytes;  ///< bound on each file's size (a larger file is an error)
};

/// Train/dev/test token datasets and the training vocabulary.
struct text_splits {
    dataset train, dev, test;
    vocabulary vocab;
};

/// The vocabulary of `texts` (the training texts) with the options' min_freq, max_vocab
/// and lowercase (see vocabulary::build).
inline vocabulary build_vocabulary(std::span<const std::string> texts, const text_options& options = {}) {
    return vocabulary::build(texts, options.min_freq, options.max_vocab, options.lowercase);
}

/// A token dataset: item i is vocab.encode(texts[i]) (unpadded; make_batch truncates to
/// max_length), labelled labels[i] ∈ [0, num_classes).
inline dataset make_text_dataset(std::span<const std::string> texts, std::span<const int> labels,
                                 const vocabulary& vocab, index_t max_length, std::string name, index_t num_classes) {
    detail::require(max_length >= 1, "max_length", ">= 1", max_length);
    detail::require(num_classes >= 1, "num_classes", ">= 1", num_classes);
    detail::require(labels.size() == texts.size(), "labels",
                    "one label per text (" + std::to_string(texts.size()) + ")", labels.size());
    for (std::size_t i = 0; i < labels.size(); ++i)
        if (labels[i] < 0 || labels[i] >= num_classes)
            detail::fail("labels", "values in [0, num_classes = " + std::to_string(num_classes) + ")",
                         std::to_string(labels[i]) + " at item " + std::to_string(i));
    dataset d;
    d.name = std::move(name);
    d.kind = input_kind::tokens;
    d.num_classes = num_classes;
    d.max_length = max_length;
    d.labels.assign(labels.begin(), labels.end());
    d.texts.reserve(texts.size());
    for (const std::string& s : texts) d.texts.push_back(vocab.encode(s));
    return d;
}

namespace detail {

inline std::string text_data_file(const std::string& directory, std::string_view name, std::string_view what) {
    const std::string path = (std::filesystem::path(directory) / name).string();
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    if (!std::filesystem::is_regular_file(status))
        fail("directory", "the " + std::string(what) + " file '" + path + "'",
             std::filesystem::is_directory(status)
                 ? "a directory, not a file"
                 : (std::filesystem::exists(status) ? "not a regular file" : "no such file"));
    return path;
}

inline void check_text_options(const text_options& o) {
    require(o.max_length >= 1, "max_length", ">= 1", o.max_length);
    require(o.min_freq >= 1, "min_freq", ">= 1", o.min_freq);
    require(o.max_vocab == 0 || o.max_vocab >= 2, "max_vocab", "0 (unlimited) or >= 2", o.max_vocab);
    require(o.limit_train >= 0, "limit_train", ">= 0 (0 = all)", o.limit_train);
}

/// A two-class token dataset of `t` (make_text_dataset with num_classes = 2).
inline dataset encode_texts(std::string name, const labeled_texts& t, const vocabulary& v, index_t max_length) {
    return make_text_dataset(t.sentences, t.labels, v, max_length, std::move(name), 2);
}

inline void limit_texts(labeled_texts& t, index_t limit) {
    if (limit > 0 && limit < index_t(t.sentences.size())) {
        t.sentences.resize(std::size_t(limit));
        t.labels.resize(std::size_t(limit));
    }
}

inline text_splits make_text_splits(const std::string& name, labeled_texts train, const labeled_texts& dev,
                                    const labeled_texts& test, const text_options& o) {
    limit_texts(train, o.limit_train);
    text_splits s;
    s.vocab = build_vocabulary(train.sentences, o);
    s.train = encode_texts(name + "/train", train, s.vocab, o.max_length);
    s.dev = encode_texts(name + "/dev", dev, s.vocab, o.max_length);
    s.test = encode_texts(name + "/test", test, s.vocab, o.max_length);
    return s;
}

}  // namespace detail

/// SST-2 from `directory`/{train,dev,test}.tsv (see the header comment).
inline text_splits load_sst2(const std::string& directory = "data/text/sst2", const text_options& options = {}) {
    detail::check_text_options(options);
    labeled_texts parts[3];
    const char* names[3] = {"train.tsv", "dev.tsv", "test.tsv"};
    for (int k = 0; k < 3; ++k) {
        const std::string path = detail::text_data_file(directory, names[k], "SST-2");
        parts[k] = read_tsv(path, options.max_file_bytes);
        for (std::size_t i = 0; i < parts[k].labels.size(); ++i)
            if (parts[k].labels[i] > 1)
                detail::fail(
                    "path", "SST-2 labels 0 or 1",
                    "'" + path + "' line " + std::to_string(i + 2) + ": label " + std::to_string(parts[k].labels[i]));
    }
    return detail::make_text_splits("sst2", std::move(parts[0]), parts[1], parts[2], options);
}

/// The seeded split permutation of n items used by load_rotten_tomatoes (Fisher–Yates).
inline std::vector<index_t> split_permutation(index_t n, std::uint64_t split_seed) {
    std::vector<index_t> order(std::size_t(std::max<index_t>(n, 0)));
    std::iota(order.begin(), order.end(), index_t{0});
    const random_stream rs(split_seed, streams::data);
    std::uint64_t draw = 0;
    for (index_t i = n - 1; i >= 1; --i) {
        const index_t j = std::min(i, index_t(rs.uniform(draw++) * double(i + 1)));
        std::swap(order[std::size_t(i)], order[std::size_t(j)]);
    }
    return order;
}

/// Rotten Tomatoes from `directory`/rt-polarity.{pos,neg}, split 80/10/10 by `split_seed`
/// (see the header comment).
inline text_splits load_rotten_tomatoes(const std::string& directory = "data/text/rt-polarity",
                                        const text_options& options = {}, std::uint64_t split_seed = 42) {
    detail::check_text_options(options);
    labeled_texts all;
    for (int label : {1, 0}) {
        const std::string path =
            detail::text_data_file(directory, label == 1 ? "rt-polarity.pos" : "rt-polarity.neg", "Rotten Tomatoes");
        for (std::string& s : read_lines(path, options.max_file_bytes)) {
            all.sentences.push_back(std::move(s));
            all.labels.push_back(label);
        }
    }
    const index_t n = index_t(all.labels.size());
    detail::require(n >= 3, "directory", "at least 3 Rotten Tomatoes sentences in '" + directory + "'", n);
    const std::vector<index_t> order = split_permutation(n, split_seed);
    const index_t n_train = n * 8 / 10, n_dev = n / 10;
    labeled_texts parts[3];
    for (index_t r = 0; r < n; ++r) {
        const int k = r < n_train ? 0 : (r < n_train + n_dev ? 1 : 2);
        const std::size_t i = std::size_t(order[std::size_t(r)]);
        parts[k].sentences.push_back(std::move(all.sentences[i]));
        parts[k].labels.push_back(all.labels[i]);
    }
    return detail::make_text_splits("rt-polarity", std::move(parts[0]), parts[1], parts[2], options);
}

}  // namespace kattn::nn
