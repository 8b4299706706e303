// Tests for kattn/nn/data/: the IDX reader (synthetic plain and gzip'd files, error cases),
// Fashion-MNIST (counts, class balance, pixel statistics), the TSV/line readers, the
// tokenizer and vocabulary (ordering, unknown words, save/load), SST-2 and Rotten Tomatoes
// (counts, labels, the seeded split) and dataset::make_batch (padding, truncation).
#include <doctest/doctest.h>

#include "error_text.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>
#include <zlib.h>

#include <kattn/nn/data/fashion_mnist.hpp>
#include <kattn/nn/data/idx.hpp>
#include <kattn/nn/data/text.hpp>
#include <kattn/nn/data/text_datasets.hpp>

using namespace kattn;
namespace fs = std::filesystem;

namespace {

/// A fresh temporary directory, removed with its contents at scope exit.
struct temp_dir {
    fs::path path;
    temp_dir() {
        path = fs::temp_directory_path() /
               ("kattn_test_data_" + std::to_string(::getpid()) + "_" + std::to_string(counter()++));
        fs::create_directories(path);
    }
    ~temp_dir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
    std::string file(const std::string& name) const { return (path / name).string(); }
    static int& counter() {
        static int c = 0;
        return c;
    }
};

void write_bytes(const std::string& path, const std::vector<unsigned char>& bytes, bool gzip) {
    if (gzip) {
        gzFile f = gzopen(path.c_str(), "wb");
        REQUIRE(f != nullptr);
        REQUIRE(gzwrite(f, bytes.data(), unsigned(bytes.size())) == int(bytes.size()));
        REQUIRE(gzclose(f) == Z_OK);
    } else {
        std::ofstream out(path, std::ios::binary);
        out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    }
}

std::vector<unsigned char> read_raw(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void put_u32(std::vector<unsigned char>& v, std::uint32_t x) {
    for (int s = 24; s >= 0; s -= 8) v.push_back(static_cast<unsigned char>(x >> s));
}

std::vector<unsigned char> idx_image_bytes(std::uint32_t count, std::uint32_t rows, std::uint32_t cols) {
    std::vector<unsigned char> v;
    put_u32(v, 2051);
    put_u32(v, count);
    put_u32(v, rows);
    put_u32(v, cols);
    for (std::uint32_t i = 0; i < count * rows * cols; ++i)
        v.push_back(static_cast<unsigned char>((i * 37 + 11) % 256));
    return v;
}

std::vector<unsigned char> idx_label_bytes(const std::vector<unsigned char>& labels) {
    std::vector<unsigned char> v;
    put_u32(v, 2049);
    put_u32(v, std::uint32_t(labels.size()));
    v.insert(v.end(), labels.begin(), labels.end());
    return v;
}

using kt::contains;
using kt::error_text;

/// The repository's data/ (data/README.md), found from this source file or the working
/// directory (the project root, or a build directory below it).
std::string data_dir() {
    const fs::path here = fs::path(__FILE__).parent_path();
    for (const fs::path& p : {here / "../../data", fs::path("data"), fs::path("../data")})
        if (fs::is_directory(p / "text")) return p.string();
    FAIL("the project data data/text not found (relative to the project root or its build directory)");
    return "";
}

const std::string fmnist_dir = "/usr/share/datasets/fashion-mnist";

/// Whether the Debian package's Fashion-MNIST files are installed; when they are not, the
/// test that needs them is skipped with a message (doctest has no run-time skip).
bool have_fashion_mnist() {
    for (const char* name : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
                             "t10k-labels-idx1-ubyte.gz"})
        if (!fs::is_regular_file(fmnist_dir + "/" + name)) {
            MESSAGE("SKIPPED: Fashion-MNIST is missing in " << fmnist_dir << " (no " << std::string(name)
                                                            << "): install the Debian package dataset-fashion-mnist");
            return false;
        }
    return true;
}

}  // namespace

TEST_CASE("nn::read_idx_images / read_idx_labels: synthetic files, plain and gzip'd") {
    temp_dir tmp;
    const auto img = idx_image_bytes(3, 2, 5);
    const std::vector<unsigned char> lab = {7, 0, 255, 3};
    for (bool gz : {false, true}) {
        CAPTURE(gz);
        const std::string ip = tmp.file(gz ? "img.gz" : "img"), lp = tmp.file(gz ? "lab.gz" : "lab");
        write_bytes(ip, img, gz);
        write_bytes(lp, idx_label_bytes(lab), gz);
        const nn::idx_images r = nn::read_idx_images(ip);
        CHECK(r.count == 3);
        CHECK(r.rows == 2);
        CHECK(r.cols == 5);
        REQUIRE(r.pixels.size() == 30u);
        for (std::size_t i = 0; i < 30; ++i) CHECK(r.pixels[i] == img[16 + i]);
        CHECK(nn::read_idx_labels(lp) == std::vector<int>{7, 0, 255, 3});
    }
    // an empty (count 0) file is valid
    write_bytes(tmp.file("empty.gz"), idx_label_bytes({}), true);
    CHECK(nn::read_idx_labels(tmp.file("empty.gz")).empty());
}

TEST_CASE("nn::read_idx_images: errors name the path and what was expected") {
    temp_dir tmp;
    const auto img = idx_image_bytes(4, 3, 3);
    for (bool gz : {false, true}) {
        CAPTURE(gz);
        // wrong magic: a label file given to the image reader and vice versa
        const std::string lp = tmp.file("labels"), ip = tmp.file("images");
        write_bytes(lp, idx_label_bytes({1, 2}), gz);
        write_bytes(ip, img, gz);
        std::string e = error_text([&] { nn::read_idx_images(lp); });
        CHECK(contains(e, "argument 'path'"));
        CHECK(contains(e, "magic 2051"));
        CHECK(contains(e, "'" + lp + "' (magic 2049: dtype 0x08 (unsigned byte), rank 1)"));
        e = error_text([&] { nn::read_idx_labels(ip); });
        CHECK(contains(e, "magic 2049"));
        CHECK(contains(e, "'" + ip + "' (magic 2051: dtype 0x08 (unsigned byte), rank 3)"));
        // truncated pixel data (one byte short) and truncated header
        const std::string tp = tmp.file("trunc");
        write_bytes(tp, std::vector<unsigned char>(img.begin(), img.end() - 1), gz);
        e = error_text([&] { nn::read_idx_images(tp); });
        CHECK(contains(e, tp));
        CHECK(contains(e, "truncated: only 35 bytes of pixel data"));
        CHECK(contains(e, "36 bytes"));
        write_bytes(tp, std::vector<unsigned char>(img.begin(), img.begin() + 10), gz);
        e = error_text([&] { nn::read_idx_images(tp); });
        CHECK(contains(e, tp));
        CHECK(contains(e, "truncated"));
        // a header announcing far more images than present: truncated, not bad_alloc; beyond
        // the 2 GiB bound: rejected before reading the data
        auto huge = img;
        huge[5] = 0x10;
        write_bytes(tp, huge, gz);
        CHECK(contains(error_text([&] { nn::read_idx_images(tp); }), "truncated"));
        huge[4] = 0x7f;
        write_bytes(tp, huge, gz);
        CHECK(contains(error_text([&] { nn::read_idx_images(tp); }), "above the limit"));
        // trailing bytes after the data
        auto longer = img;
        longer.push_back(0);
        write_bytes(tp, longer, gz);
        e = error_text([&] { nn::read_idx_images(tp); });
        CHECK(contains(e, tp));
        CHECK(contains(e, "trailing bytes"));
        // zero rows
        write_bytes(tp, idx_image_bytes(2, 0, 3), gz);
        CHECK(contains(error_text([&] { nn::read_idx_images(tp); }), "rows"));
    }
    // a damaged gzip stream (cut in the middle of the compressed data)
    const std::string gp = tmp.file("big.gz");
    write_bytes(gp, idx_image_bytes(50, 28, 28), true);
    auto raw = read_raw(gp);
    raw.resize(raw.size() / 2);
    write_bytes(gp, raw, false);
    std::string e = error_text([&] { nn::read_idx_images(gp); });
    CHECK(contains(e, gp));
    CHECK(!e.empty());
    // a missing file
    const std::string mp = tmp.file("nope.gz");
    e = error_text([&] { nn::read_idx_labels(mp); });
    CHECK(contains(e, "'" + mp + "'"));
    CHECK(contains(e, "cannot open"));
}

TEST_CASE("nn::load_fashion_mnist: counts, class balance, pixel statistics, normalisation") {
    if (!have_fashion_mnist()) return;
    const auto raw = nn::load_fashion_mnist({.normalize = false});
    CHECK(raw.train.size() == 60000);
    CHECK(raw.test.size() == 10000);
    for (const nn::dataset* d : {&raw.train, &raw.test}) {
        CHECK(d->kind == nn::input_kind::pixels);
        CHECK(d->item_size == 784);
        CHECK(d->num_classes == 10);
        CHECK(d->pixels.size() == std::size_t(d->size()) * 784);
    }
    std::vector<int> hist_train(10, 0), hist_test(10, 0);
    for (int l : raw.train.labels) ++hist_train[std::size_t(l)];
    for (int l : raw.test.labels) ++hist_test[std::size_t(l)];
    CHECK(hist_train == std::vector<int>(10, 6000));
    CHECK(hist_test == std::vector<int>(10, 1000));
    // pixels are p/255: in [0, 1], on the 1/255 grid, with 0 and 1 both present; the mean and sd
    // of the training pixels are the constants used for normalisation
    double s = 0, s2 = 0, lo = 1, hi = 0, grid_err = 0;
    for (float x : raw.train.pixels) {
        s += x;
        s2 += double(x) * x;
        lo = std::min(lo, double(x));
        hi = std::max(hi, double(x));
        grid_err = std::max(grid_err, std::abs(x * 255.0 - std::round(x * 255.0)));
    }
    const double n = double(raw.train.pixels.size());
    const double mean = s / n, sd = std::sqrt(s2 / n - mean * mean);
    CHECK(lo == 0.0);
    CHECK(hi == 1.0);
    CHECK(grid_err < 1e-4);
    CHECK(mean == doctest::Approx(nn::fashion_mnist_mean).epsilon(1e-3));
    CHECK(sd == doctest::Approx(nn::fashion_mnist_sd).epsilon(1e-3));
    // normalised + limited: the first N items, each pixel (p/255 − 0.2860)/0.3530
    const auto z = nn::load_fashion_mnist({.limit_train = 500, .limit_test = 20});
    CHECK(z.train.size() == 500);
    CHECK(z.test.size() == 20);
    CHECK(std::equal(z.train.labels.begin(), z.train.labels.end(), raw.train.labels.begin()));
    CHECK(std::equal(z.test.labels.begin(), z.test.labels.end(), raw.test.labels.begin()));
    double worst = 0;
    for (std::size_t i = 0; i < z.train.pixels.size(); ++i)
        worst = std::max(worst, std::abs(z.train.pixels[i] - (raw.train.pixels[i] - 0.2860) / 0.3530));
    CHECK(worst < 1e-6);
    // a pixel batch is a copy of the items' pixels in the given order
    const std::vector<index_t> idx = {4, 0, 499};
    const auto b = z.train.make_batch(idx);
    CHECK(b.kind == nn::input_kind::pixels);
    CHECK(b.size == 3);
    CHECK(b.item_size == 784);
    CHECK(std::equal(b.pixels.begin() + 784, b.pixels.begin() + 1568, z.train.pixels.begin()));
    CHECK(std::equal(b.pixels.begin() + 1568, b.pixels.end(), z.train.pixels.begin() + 499 * 784));
    CHECK(b.labels == std::vector<int>{z.train.labels[4], z.train.labels[0], z.train.labels[499]});
}

TEST_CASE("nn::load_fashion_mnist: a missing directory names the file and the Debian package") {
    const std::string e = error_text([] { nn::load_fashion_mnist({.directory = "/nonexistent/fm"}); });
    CHECK(contains(e, "/nonexistent/fm/train-images-idx3-ubyte.gz"));
    CHECK(contains(e, "dataset-fashion-mnist"));
    CHECK(contains(error_text([] { nn::load_fashion_mnist({.limit_train = -1}); }), "limit_train"));
}

TEST_CASE("nn::read_lines / read_tsv: CRLF, header and malformed lines") {
    temp_dir tmp;
    const std::string p = tmp.file("a.tsv");
    std::ofstream(p, std::ios::binary) << "sentence\tlabel\r\na b\t1\r\nc\t\td\t0\n\t3\n";
    const auto t = nn::read_tsv(p);
    CHECK(t.sentences == std::vector<std::string>{"a b", "c\t\td", ""});
    CHECK(t.labels == std::vector<int>{1, 0, 3});
    CHECK(nn::read_lines(p).size() == 4u);
    std::ofstream(p, std::ios::binary) << "x\ny";
    CHECK(nn::read_lines(p) == std::vector<std::string>{"x", "y"});
    // header missing
    std::string e = error_text([&] { nn::read_tsv(p); });
    CHECK(contains(e, p));
    CHECK(contains(e, "header"));
    // malformed lines: no tab, non-integer label, empty label; the message names the line
    for (const char* bad : {"no tab here", "words\tpositive", "words\t", "words\t-1", ""}) {
        CAPTURE(bad);
        std::ofstream(p, std::ios::binary) << "sentence\tlabel\nfine\t0\n" << bad << "\nfine\t1\n";
        e = error_text([&] { nn::read_tsv(p); });
        CHECK(contains(e, "'" + p + "' line 3"));
    }
    e = error_text([&] { nn::read_lines(tmp.file("missing.txt")); });
    CHECK(contains(e, tmp.file("missing.txt")));
    // Latin-1 and UTF-8 bytes pass through unchanged; only ASCII letters are lower-cased
    const std::string latin1 = "Caf\xe9 \xc9t\xc9", utf8 = "Caf\xc3\xa9";
    CHECK(nn::tokenize(latin1) == std::vector<std::string>{"caf\xe9", "\xc9t\xc9"});
    CHECK(nn::tokenize(utf8, false) == std::vector<std::string>{utf8});
    CHECK(nn::tokenize(" \t A  b\r\n\vC\f ") == std::vector<std::string>{"a", "b", "c"});
    CHECK(nn::tokenize("   ").empty());
}

TEST_CASE("nn::vocabulary: ordering, min_freq, max_size, unknown words, save/load") {
    const std::vector<std::string> texts = {"b a c a B a", "C d <unk> <pad>", "e"};
    const auto v = nn::vocabulary::build(texts);
    // counts: a 3, b 2, c 2, d 1, e 1 → by count, ties lexicographic; specials not counted
    const std::vector<std::string> expect = {"<pad>", "<unk>", "a", "b", "c", "d", "e"};
    REQUIRE(v.size() == 7);
    for (index_t i = 0; i < 7; ++i) CHECK(v.word(i) == expect[std::size_t(i)]);
    CHECK(v.id("a") == 2);
    CHECK(v.id("A") == nn::vocabulary::unk_id);  // id() is exact; encode() lower-cases
    CHECK(v.encode("A zzz <pad> B <unk> e") == std::vector<std::int32_t>{2, 1, 1, 3, 1, 6});
    CHECK(v.encode("").empty());
    CHECK(nn::vocabulary::build(texts, 2).size() == 5);  // a b c
    CHECK(nn::vocabulary::build(texts, 1, 4).word(3) == "b");
    CHECK(nn::vocabulary::build(texts, 1, 4).size() == 4);
    const auto cased = nn::vocabulary::build(texts, 1, 0, false);
    CHECK(cased.id("B") != nn::vocabulary::unk_id);
    CHECK(cased.encode("B") != cased.encode("b"));
    CHECK(contains(error_text([&] { (void)v.word(7); }), "argument 'id'"));
    CHECK(contains(error_text([&] { nn::vocabulary::build(texts, 0); }), "min_freq"));
    CHECK(contains(error_text([&] { nn::vocabulary::build(texts, 1, 1); }), "max_size"));

    temp_dir tmp;
    const std::string p = tmp.file("vocab.txt");
    v.save(p);
    const auto w = nn::vocabulary::load(p);
    REQUIRE(w.size() == v.size());
    for (index_t i = 0; i < v.size(); ++i) CHECK(w.word(i) == v.word(i));
    CHECK(w.encode("A zzz B e") == v.encode("A zzz B e"));
    std::ofstream(p, std::ios::binary) << "<pad>\n<unk>\nx\ny\nx\n";
    CHECK(contains(error_text([&] { nn::vocabulary::load(p); }), "line 5"));
    std::ofstream(p, std::ios::binary) << "<unk>\n<pad>\nx\n";
    CHECK(contains(error_text([&] { nn::vocabulary::load(p); }), "'<pad>' and '<unk>'"));
    std::ofstream(p, std::ios::binary) << "<pad>\n<unk>\n\n";
    CHECK(contains(error_text([&] { nn::vocabulary::load(p); }), "line 3"));
    CHECK(contains(error_text([&] { nn::vocabulary::load(tmp.file("none")); }), tmp.file("none")));
    CHECK(contains(error_text([&] { v.save(tmp.file("no/such/dir/v.txt")); }), "no/such/dir/v.txt"));
}

TEST_CASE("nn::load_sst2: counts, labels, vocabulary from train only") {
    const std::string dir = data_dir() + "/text/sst2";
    const auto s = nn::load_sst2(dir, {.max_length = 128});
    CHECK(s.train.size() == 60614);
    CHECK(s.dev.size() == 6735);
    CHECK(s.test.size() == 872);
    for (const nn::dataset* d : {&s.train, &s.dev, &s.test}) {
        CHECK(d->kind == nn::input_kind::tokens);
        CHECK(d->num_classes == 2);
        CHECK(d->max_length == 128);
        CHECK(d->texts.size() == d->labels.size());
        for (int l : d->labels) REQUIRE((l == 0 || l == 1));
        for (const auto& t : d->texts)
            for (std::int32_t id : t) REQUIRE((id >= 1 && id < s.vocab.size()));  // never 0 (padding)
    }
    // the vocabulary is exactly the training words, ordered by (count desc, word asc)
    const auto raw = nn::read_tsv(dir + "/train.tsv");
    std::map<std::string, index_t> counts;
    for (const auto& sent : raw.sentences)
        for (const auto& w : nn::tokenize(sent)) ++counts[w];
    REQUIRE(s.vocab.size() == index_t(counts.size()) + 2);
    for (index_t i = 3; i < s.vocab.size(); ++i) {
        const index_t a = counts[s.vocab.word(i - 1)], b = counts[s.vocab.word(i)];
        REQUIRE((a > b || (a == b && s.vocab.word(i - 1) < s.vocab.word(i))));
    }
    // train decodes back to its tokens with no unknowns; dev/test have some unknowns
    for (std::size_t i = 0; i < 200; ++i) {
        const auto toks = nn::tokenize(raw.sentences[i]);
        REQUIRE(toks.size() == s.train.texts[i].size());
        for (std::size_t k = 0; k < toks.size(); ++k) CHECK(s.vocab.word(s.train.texts[i][k]) == toks[k]);
    }
    CHECK(s.train.labels == raw.labels);
    index_t unk = 0;
    for (const auto& t : s.test.texts) unk += std::count(t.begin(), t.end(), nn::vocabulary::unk_id);
    CHECK(unk > 0);
    // limit_train and min_freq shrink the vocabulary built from the kept training items
    const auto small = nn::load_sst2(dir, {.min_freq = 2, .limit_train = 1000});
    CHECK(small.train.size() == 1000);
    CHECK(small.dev.size() == 6735);
    CHECK(small.vocab.size() < s.vocab.size());
    CHECK(small.train.max_length == 64);
    const std::string e = error_text([] { nn::load_sst2("/nonexistent/sst2"); });
    CHECK(contains(e, "/nonexistent/sst2/train.tsv"));
    CHECK(contains(error_text([&] { nn::load_sst2(dir, {.max_length = 0}); }), "max_length"));
}

TEST_CASE("nn::load_rotten_tomatoes: seeded 80/10/10 split, disjoint, reproducible") {
    const std::string dir = data_dir() + "/text/rt-polarity";
    const auto r = nn::load_rotten_tomatoes(dir);
    CHECK(r.train.size() == 8529);
    CHECK(r.dev.size() == 1066);
    CHECK(r.test.size() == 1067);
    CHECK(r.train.size() + r.dev.size() + r.test.size() == 10662);
    // the split is the documented permutation: a bijection of 0..n−1
    const auto order = nn::split_permutation(10662, 42);
    std::vector<index_t> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    std::vector<index_t> iota(10662);
    std::iota(iota.begin(), iota.end(), index_t{0});
    CHECK(sorted == iota);
    CHECK(order != iota);
    // pinned values (platform-independent: exact arithmetic on Philox bits)
    CHECK(nn::split_permutation(10, 42) == std::vector<index_t>{7, 0, 2, 6, 4, 5, 1, 9, 3, 8});
    CHECK(std::vector<index_t>(order.begin(), order.begin() + 5) == std::vector<index_t>{6661, 4780, 9715, 5888, 6104});
    CHECK(nn::split_permutation(1, 42) == std::vector<index_t>{0});
    CHECK(nn::split_permutation(0, 42).empty());
    CHECK(nn::split_permutation(10662, 7) != order);
    // each split item is the pos/neg line at its permuted index (pos first, label 1)
    std::vector<std::string> all = nn::read_lines(dir + "/rt-polarity.pos");
    const std::size_t n_pos = all.size();
    for (auto& l : nn::read_lines(dir + "/rt-polarity.neg")) all.push_back(l);
    REQUIRE(all.size() == 10662u);
    const nn::dataset* parts[3] = {&r.train, &r.dev, &r.test};
    std::size_t row = 0, pos_train = 0;
    for (const nn::dataset* d : parts)
        for (index_t i = 0; i < d->size(); ++i, ++row) {
            const std::size_t src = std::size_t(order[row]);
            REQUIRE(d->labels[std::size_t(i)] == (src < n_pos ? 1 : 0));
            REQUIRE(d->texts[std::size_t(i)] == r.vocab.encode(all[src]));
            if (d == &r.train) pos_train += src < n_pos;
        }
    CHECK(double(pos_train) / 8529.0 == doctest::Approx(0.5).epsilon(0.05));
    // the vocabulary comes from the training split only
    std::set<std::string> train_words;
    for (std::size_t k = 0; k < 8529; ++k)
        for (const auto& w : nn::tokenize(all[std::size_t(order[k])])) train_words.insert(w);
    CHECK(r.vocab.size() == index_t(train_words.size()) + 2);
    // same seed → same split; another seed → another split
    const auto again = nn::load_rotten_tomatoes(dir);
    CHECK(again.train.texts == r.train.texts);
    CHECK(again.test.labels == r.test.labels);
    const auto other = nn::load_rotten_tomatoes(dir, {}, 43);
    CHECK(other.train.texts != r.train.texts);
    const std::string e = error_text([] { nn::load_rotten_tomatoes("/nonexistent/rt"); });
    CHECK(contains(e, "/nonexistent/rt/rt-polarity.pos"));
}

TEST_CASE("nn::dataset::make_batch: text padding to the longest item, truncation to max_length") {
    nn::dataset d;
    d.kind = nn::input_kind::tokens;
    d.num_classes = 2;
    d.max_length = 5;
    d.texts = {{4, 5, 6}, {2, 3, 4, 5, 6, 7, 8}, {}, {9}};
    d.labels = {0, 1, 1, 0};
    const std::vector<index_t> a = {0, 3};
    const auto b = d.make_batch(a);
    CHECK(b.length == 3);
    CHECK(b.tokens == std::vector<std::int32_t>{4, 5, 6, 9, 0, 0});
    CHECK(b.lengths == std::vector<index_t>{3, 1});
    CHECK(b.labels == std::vector<int>{0, 0});
    const std::vector<index_t> c = {2, 1, 0};
    const auto t = d.make_batch(c);
    CHECK(t.length == 5);  // the long item is cut to max_length
    CHECK(t.tokens == std::vector<std::int32_t>{0, 0, 0, 0, 0, 2, 3, 4, 5, 6, 4, 5, 6, 0, 0});
    CHECK(t.lengths == std::vector<index_t>{1, 5, 3});  // the empty text keeps one padding token
    CHECK(t.labels == std::vector<int>{1, 1, 0});
    const std::vector<index_t> bad = {4};
    CHECK(contains(error_text([&] { d.make_batch(bad); }), "indices"));
}
