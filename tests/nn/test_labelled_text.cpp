// Tests for kattn/nn/data/labelled_text.hpp and labelled_splits.hpp (issue 15): TSV and CSV
// (RFC 4180 quoting: separators, doubled quotes and line breaks inside quotes, CRLF), header
// or not, columns by name and by position, named and integer labels, 6 classes, the class
// orders (sorted, first appearance, caller-given), every loader error naming the file and
// the line, make_text_dataset / build_vocabulary, and the splits (one mapping across files,
// the seeded split of one file).
#include <doctest/doctest.h>

#include "scratch_dir.hpp"

#include "error_text.hpp"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <kattn/nn/data/labelled_splits.hpp>
#include <kattn/nn/data/labelled_text.hpp>
#include <kattn/nn/data/text_datasets.hpp>

using namespace kattn;
namespace fs = std::filesystem;

namespace {

using scratch = kt::scratch_dir;

using kt::contains;
using kt::error_text;

/// The error of reading `bytes` as file `name` with `o`: it must name the file and `line`.
std::string load_error(const scratch& dir, const std::string& name, const std::string& bytes,
                       const nn::labelled_text_options& o, int line) {
    const std::string p = dir.write(name, bytes);
    const std::string e = error_text([&] { nn::read_labelled_text(p, o); });
    CAPTURE(bytes);
    CAPTURE(e);
    CHECK(contains(e, "argument 'path'"));
    CHECK(contains(e, "'" + p + "' line " + std::to_string(line) + ":"));
    return e;
}

}  // namespace

TEST_CASE("nn::read_labelled_text: TSV with a header, columns by name, named labels in sorted order") {
    scratch dir;
    // label first, an extra id column, CRLF line ends, a BOM, a blank line, quotes are text
    const std::string p = dir.write("reviews.tsv",
                                    "\xEF\xBB\xBFid\ttopic\ttext\r\n"
                                    "1\tsports\tThe \"match\" ended late\r\n"
                                    "2\tpolitics\tparliament voted\r\n"
                                    "\r\n"
                                    "3\tsports\t  a goal  \r\n"
                                    "4\t science \tan atom, a cell\r\n");
    const nn::labelled_data d = nn::read_labelled_text(p, {.text_column = "text", .label_column = "topic"});
    CHECK(d.texts ==
          std::vector<std::string>{"The \"match\" ended late", "parliament voted", "  a goal  ", "an atom, a cell"});
    CHECK(d.label_names == std::vector<std::string>{"politics", "science", "sports"});  // byte-wise sorted
    CHECK(d.labels == std::vector<int>{2, 0, 2, 1});
    CHECK(d.lines == std::vector<index_t>{2, 3, 5, 6});
    CHECK(d.num_classes() == 3);
    CHECK(d.size() == 4);
    // the same file with positions instead of names, and first-appearance order
    const auto f =
        nn::read_labelled_text(p, {.text_index = 2, .label_index = 1, .order = nn::label_order::first_appearance});
    CHECK(f.texts == d.texts);
    CHECK(f.label_names == std::vector<std::string>{"sports", "politics", "science"});
    CHECK(f.labels == std::vector<int>{0, 1, 0, 2});
}

TEST_CASE("nn::read_labelled_text: TSV without a header, by position; SST-2's own file reads the same") {
    scratch dir;
    const std::string p = dir.write("plain.tsv", "good film\tpos\nbad film\tneg\nfine\tpos");  // no final newline
    const auto d = nn::read_labelled_text(p, {.header = false});
    CHECK(d.texts == std::vector<std::string>{"good film", "bad film", "fine"});
    CHECK(d.label_names == std::vector<std::string>{"neg", "pos"});
    CHECK(d.labels == std::vector<int>{1, 0, 1});
    CHECK(d.lines == std::vector<index_t>{1, 2, 3});
    // an SST-2 style file (header sentence<TAB>label, integer labels) agrees with read_tsv
    const std::string sst = dir.write("sst.tsv", "sentence\tlabel\nit 's a charming journey \t1\na mess \t0\n");
    const auto a = nn::read_labelled_text(
        sst, {.text_column = "sentence", .label_column = "label", .labels = nn::label_type::integers});
    const auto b = nn::read_tsv(sst);
    CHECK(a.texts == b.sentences);
    CHECK(a.labels == b.labels);
    CHECK(a.label_names == std::vector<std::string>{"0", "1"});
}

TEST_CASE("nn::read_labelled_text: CSV with RFC 4180 quoting") {
    scratch dir;
    const std::string csv =
        "text,label,note\r\n"
        "\"plain, with a comma\",a,x\r\n"
        "\"she said \"\"hi\"\"\",b,\r\n"        // doubled quotes; an empty last field
        "\"two\nlines, \"\"quoted\"\"\",c,y\n"  // a line break inside quotes
        "unquoted \"inner\" quote,a,\"z\"\n"    // a quote inside an unquoted field is text
        "\n"
        "\"\"\"\",b,\"\"\n"  // a field that is one quote; an empty quoted field
        "last,\"c\"";        // no final newline, a quoted label
    const std::string p = dir.write("data.csv", csv);
    const auto d = nn::read_labelled_text(p);  // automatic: csv by the extension
    CHECK(d.texts == std::vector<std::string>{"plain, with a comma", "she said \"hi\"", "two\nlines, \"quoted\"",
                                              "unquoted \"inner\" quote", "\"", "last"});
    CHECK(d.label_names == std::vector<std::string>{"a", "b", "c"});
    CHECK(d.labels == std::vector<int>{0, 1, 2, 0, 1, 2});
    CHECK(d.lines == std::vector<index_t>{2, 3, 4, 6, 8, 9});  // the record after a 2-line field starts on 6
    // the same bytes under another name need format = csv; read as TSV they are one column
    const std::string q = dir.write("data.txt", csv);
    const auto e =
        nn::read_labelled_text(q, {.format = nn::text_format::csv, .text_column = "text", .label_column = "label"});
    CHECK(e.texts == d.texts);
    CHECK(e.labels == d.labels);
    CHECK(contains(error_text([&] { nn::read_labelled_text(q); }), "line 1:"));  // tsv: no label column
    // another delimiter, CSV quoting kept
    const std::string s = dir.write("semi.csv", "label;text\nx;\"a;b\"\ny;c\n");
    const auto f = nn::read_labelled_text(s, {.text_index = 1, .label_index = 0, .delimiter = ';'});
    CHECK(f.texts == std::vector<std::string>{"a;b", "c"});
    CHECK(f.labels == std::vector<int>{0, 1});
}

TEST_CASE("nn::read_labelled_text: six classes, integer and named labels, caller-given names") {
    scratch dir;
    std::string ints = "text\tlabel\n", names = "text\tlabel\n";
    const std::vector<std::string> classes = {"zeta", "alpha", "delta", "beta", "epsilon", "gamma"};
    for (int i = 0; i < 30; ++i) {
        const int c = (i * 7) % 6;
        ints += "item " + std::to_string(i) + "\t" + std::to_string(c) + "\n";
        names += "item " + std::to_string(i) + "\t" + classes[std::size_t(c)] + "\n";
    }
    const auto a = nn::read_labelled_text(dir.write("ints.tsv", ints), {.labels = nn::label_type::integers});
    CHECK(a.num_classes() == 6);
    CHECK(a.label_names == std::vector<std::string>{"0", "1", "2", "3", "4", "5"});
    for (int i = 0; i < 30; ++i) CHECK(a.labels[std::size_t(i)] == (i * 7) % 6);
    // named: sorted, first appearance, or the caller's order — each a bijection to the names
    const std::string np = dir.write("names.tsv", names);
    const auto sorted = nn::read_labelled_text(np);
    const auto first = nn::read_labelled_text(np, {.order = nn::label_order::first_appearance});
    const auto given = nn::read_labelled_text(np, {.label_names = classes});
    CHECK(sorted.label_names == std::vector<std::string>{"alpha", "beta", "delta", "epsilon", "gamma", "zeta"});
    CHECK(given.label_names == classes);
    for (int i = 0; i < 30; ++i) {
        const std::string& truth = classes[std::size_t((i * 7) % 6)];
        CHECK(sorted.label_names[std::size_t(sorted.labels[std::size_t(i)])] == truth);
        CHECK(first.label_names[std::size_t(first.labels[std::size_t(i)])] == truth);
        CHECK(given.labels[std::size_t(i)] == (i * 7) % 6);  // the caller's index
    }
    CHECK(first.label_names.front() == "zeta");  // item 0 has class 0 = "zeta"
    // integer labels with caller-given names: the names of the ids
    const auto b = nn::read_labelled_text(dir.write("ints2.tsv", ints),
                                          {.labels = nn::label_type::integers, .label_names = classes});
    CHECK(b.labels == a.labels);
    CHECK(b.label_names == classes);
    // caller-given names may include classes the file lacks (a dev file without class 5)
    const auto c = nn::read_labelled_text(dir.write("few.tsv", "text\tlabel\nx\talpha\n"), {.label_names = classes});
    CHECK(c.num_classes() == 6);
    CHECK(c.labels == std::vector<int>{1});
}

TEST_CASE("nn::read_labelled_text: every file defect names the file and the line") {
    scratch dir;
    const nn::labelled_text_options named{.text_column = "text", .label_column = "label"};
    // empty file (or blank lines only)
    CHECK(contains(load_error(dir, "empty.tsv", "", {}, 1), "an empty file"));
    CHECK(contains(load_error(dir, "blank.tsv", "\n\r\n\n", {}, 1), "an empty file"));
    // only a header
    CHECK(contains(load_error(dir, "header.tsv", "text\tlabel\n", {}, 1), "nothing after it"));
    // a header without the chosen column (by name; by position)
    std::string e = load_error(dir, "nocol.tsv", "text\tclass\nhi\tx\n", named, 1);
    CHECK(contains(e, "label column 'label'"));
    CHECK(contains(e, "'class'"));
    CHECK(contains(load_error(dir, "narrow.tsv", "text\tlabel\nhi\tx\n", {.label_index = 3}, 1), "position 3"));
    // a record with too few fields
    e = load_error(dir, "short.tsv", "text\tlabel\nok\ta\nno label here\nok\tb\n", {}, 3);
    CHECK(contains(e, "at least 2 fields"));
    CHECK(contains(e, "1 field(s)"));
    CHECK(contains(load_error(dir, "short.csv", "a,b\nx,y\nz\n", {}, 3), "at least 2 fields separated by ','"));
    // an empty text, an empty label
    CHECK(contains(load_error(dir, "notext.tsv", "text\tlabel\nok\ta\n  \tb\n", {}, 3), "an empty text"));
    CHECK(contains(load_error(dir, "nolabel.csv", "text,label\nok,a\nfine, \n", {}, 3), "an empty label"));
    // an unknown label with caller-given names
    e = load_error(dir, "unknown.tsv", "text\tlabel\nok\tpos\nhm\tneutral\n", {.label_names = {"neg", "pos"}}, 3);
    CHECK(contains(e, "unknown label 'neutral'"));
    CHECK(contains(e, "'neg', 'pos'"));
    CHECK(contains(load_error(dir, "unknown_int.tsv", "text\tlabel\nok\t1\nhm\t2\n",
                              {.labels = nn::label_type::integers, .label_names = {"neg", "pos"}}, 3),
                   "unknown label 2"));
    // bad integer labels
    for (const std::string bad : {"-1", "1.0", "two", "1234567890", "0x1"}) {
        CAPTURE(bad);
        CHECK(contains(load_error(dir, "bad_int.tsv", "text\tlabel\nok\t0\nhm\t" + bad + "\n",
                                  {.labels = nn::label_type::integers}, 3),
                       "an integer label"));
    }
    // class counts are bounded (fuzz finding: label 999999999 made a billion class names)
    CHECK(contains(
        load_error(dir, "huge_int.tsv", "text\tlabel\nok\t0\nhm\t999999999\n", {.labels = nn::label_type::integers}, 3),
        "below max_classes = 65536"));
    CHECK(contains(load_error(dir, "many.tsv", "text\tlabel\nok\ta\nhm\tb\nno\tc\n", {.max_classes = 2}, 4),
                   "at most max_classes = 2 distinct labels"));
    CHECK(contains(load_error(dir, "int999.tsv", "text\tlabel\nok\t999\n",
                              {.labels = nn::label_type::integers, .max_classes = 999}, 2),
                   "below max_classes = 999"));
    CHECK(nn::read_labelled_text((dir.path / "int999.tsv").string(),
                                 {.labels = nn::label_type::integers, .max_classes = 1000})
              .num_classes() == 1000);
    // CSV: an unterminated quoted field (named by the line it opens on), junk after a closing quote
    CHECK(contains(load_error(dir, "open.csv", "text,label\nok,a\n\"never\nclosed,b\n", {}, 3), "never closed"));
    CHECK(contains(load_error(dir, "junk.csv", "text,label\n\"a\"x,b\n", {}, 2), "after a closing '\"'"));
    // a record after a quoted line break is counted by its physical line
    CHECK(contains(load_error(dir, "later.csv", "text,label\n\"a\nb\",x\nshort\n", {}, 4), "at least 2 fields"));
}

TEST_CASE("nn::read_labelled_text: bad options and unreadable paths") {
    scratch dir;
    const std::string p = dir.write("ok.tsv", "text\tlabel\nhi\ta\n");
    auto arg = [&](const nn::labelled_text_options& o, const std::string& name) {
        const std::string e = error_text([&] { nn::read_labelled_text(p, o); });
        CAPTURE(e);
        CHECK(contains(e, "argument '" + name + "'"));
    };
    arg({.header = false, .text_column = "text"}, "text_column");
    arg({.text_index = -1}, "text_index");
    arg({.text_index = 1, .label_index = 1}, "label_column");
    arg({.label_names = {"a", "a"}}, "label_names");
    arg({.label_names = {"a", ""}}, "label_names");
    arg({.label_names = {"a", "b "}}, "label_names");
    arg({.label_names = {"\tb", "a"}}, "label_names");
    CHECK(contains(error_text([&] { nn::read_labelled_text(p, {.label_names = {"x", "y", "z", "y"}}); }), "'y' twice"));
    arg({.delimiter = '"'}, "delimiter");
    arg({.max_bytes = 4}, "path");  // larger than the bound
    const std::string missing = (dir.path / "missing.tsv").string();
    CHECK(contains(error_text([&] { nn::read_labelled_text(missing); }), "'" + missing + "'"));
    CHECK(contains(error_text([&] { nn::read_labelled_text(dir.path.string()); }), "a directory"));
}

TEST_CASE("nn::make_text_dataset and build_vocabulary: the encoding load_sst2 uses, any class count") {
    const std::vector<std::string> texts = {"The cat sat", "the dog", "a cat and a dog", "zebra"};
    const std::vector<int> labels = {0, 4, 2, 5};
    const nn::vocabulary v = nn::build_vocabulary(texts, {.min_freq = 2});
    CHECK(v.size() == 2 + 4);  // the, cat, dog, a (each seen twice); "zebra" etc. are <unk>
    const nn::dataset d = nn::make_text_dataset(texts, labels, v, 2, "toy", 6);
    CHECK(d.name == "toy");
    CHECK(d.num_classes == 6);
    CHECK(d.kind == nn::input_kind::tokens);
    CHECK(d.max_length == 2);
    CHECK(d.labels == labels);
    for (std::size_t i = 0; i < texts.size(); ++i) CHECK(d.texts[i] == v.encode(texts[i]));  // unpadded, untruncated
    CHECK(d.texts[3] == std::vector<std::int32_t>{nn::vocabulary::unk_id});
    const std::vector<index_t> idx = {2};
    CHECK(d.make_batch(idx).length == 2);  // truncated when batched
    // encode_texts (load_sst2's) is make_text_dataset with 2 classes
    const nn::dataset e = nn::detail::encode_texts("two", {.sentences = texts, .labels = {0, 1, 1, 0}}, v, 8);
    CHECK(e.num_classes == 2);
    CHECK(e.texts == d.texts);
    CHECK(contains(error_text([&] { nn::make_text_dataset(texts, labels, v, 8, "x", 5); }), "'labels'"));
    CHECK(contains(error_text([&] { nn::make_text_dataset(texts, labels, v, 0, "x", 6); }), "'max_length'"));
    CHECK(contains(error_text([&] { nn::make_text_dataset(texts, std::vector<int>{0}, v, 8, "x", 6); }), "'labels'"));
}

TEST_CASE("nn::load_labelled_splits: one vocabulary from train, one class mapping for all files") {
    scratch dir;
    const std::string train = dir.write("train.tsv",
                                        "text\tlabel\nred apple\tfruit\nbig car\tcar\nsour lime\tfruit\n"
                                        "fast car\tcar\ngreen pear\tveg\n");
    // dev lists the classes in another order and holds a word training never saw
    const std::string dev = dir.write("dev.tsv", "text\tlabel\nred car\tveg\nunseenword apple\tcar\n");
    const std::string test = dir.write("test.tsv", "text\tlabel\nbig lime\tfruit\n");
    const nn::labelled_splits s = nn::load_labelled_splits(train, dev, test, {}, {.max_length = 16});
    CHECK(s.label_names == std::vector<std::string>{"car", "fruit", "veg"});
    CHECK(s.num_classes() == 3);
    for (const nn::dataset* d : {&s.train, &s.dev, &s.test}) CHECK(d->num_classes == 3);
    CHECK(s.train.labels == std::vector<int>{1, 0, 1, 0, 2});
    CHECK(s.dev.labels == std::vector<int>{2, 0});  // by name, not by position in the dev file
    CHECK(s.test.labels == std::vector<int>{1});
    CHECK(s.train.name == train);
    CHECK(!s.vocab.contains("unseenword"));
    CHECK(s.dev.texts[1][0] == nn::vocabulary::unk_id);
    CHECK(s.dev.texts[1][1] == s.vocab.id("apple"));
    // a class missing from training: an error naming the dev file and line
    const std::string dev2 = dir.write("dev2.tsv", "text\tlabel\nok\tcar\nhm\tboat\n");
    const std::string e = error_text([&] { nn::load_labelled_splits(train, dev2, test); });
    CHECK(contains(e, "'" + dev2 + "' line 3: unknown label 'boat'"));
    // ... unless the caller names all classes
    const auto g = nn::load_labelled_splits(train, dev2, "", {.label_names = {"boat", "car", "fruit", "veg"}});
    CHECK(g.num_classes() == 4);
    CHECK(g.dev.labels == std::vector<int>{1, 0});
    CHECK(g.train.num_classes == 4);
    // an empty test path: an empty dataset of the same classes; limit_train
    CHECK(g.test.size() == 0);
    CHECK(g.test.num_classes == 4);
    const auto l = nn::load_labelled_splits(train, "", "", {}, {.limit_train = 2});
    CHECK(l.train.size() == 2);
    CHECK(!l.vocab.contains("lime"));  // the vocabulary of the kept training texts only
    CHECK(
        contains(error_text([&] { nn::load_labelled_splits(train, "", "", {}, {.max_length = 0}); }), "'max_length'"));
}

TEST_CASE("nn::split_labelled_text: the seeded split partitions the file") {
    scratch dir;
    std::string tsv = "text\tlabel\n";
    for (int i = 0; i < 10; ++i) tsv += "word" + std::to_string(i) + "\t" + (i % 3 == 0 ? "a" : "b") + "\n";
    const std::string p = dir.write("all.tsv", tsv);
    const nn::labelled_splits s = nn::split_labelled_text(p, {.train = 0.8, .dev = 0.1, .seed = 5});
    CHECK(s.train.size() == 8);
    CHECK(s.dev.size() == 1);
    CHECK(s.test.size() == 1);
    CHECK(s.label_names == std::vector<std::string>{"a", "b"});
    CHECK(nn::detail::split_count(0.29, 100) == 29);  // 0.29·100 = 28.999999999999996 in double
    // the parts follow split_permutation(10, seed) and together hold every record once
    const std::vector<index_t> order = nn::split_permutation(10, 5);
    std::vector<index_t> seen;
    const nn::dataset* parts[3] = {&s.train, &s.dev, &s.test};
    index_t r = 0;
    for (const nn::dataset* d : parts)
        for (index_t k = 0; k < d->size(); ++k, ++r) {
            const index_t i = order[std::size_t(r)];
            CHECK(d->labels[std::size_t(k)] == (i % 3 == 0 ? 0 : 1));
            if (d == &s.train) CHECK(d->texts[std::size_t(k)][0] == s.vocab.id("word" + std::to_string(i)));
            seen.push_back(i);
        }
    std::sort(seen.begin(), seen.end());
    CHECK(seen == std::vector<index_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
    CHECK(s.train.name == p + " (train)");
    // the same seed gives the same split, another seed another one
    const auto again = nn::split_labelled_text(p, {.seed = 5});
    const auto other = nn::split_labelled_text(p, {.seed = 6});
    CHECK(again.train.texts == s.train.texts);
    CHECK(other.train.labels.size() == 8);
    CHECK(nn::split_permutation(10, 6) != order);
    // fractions: dev 0 leaves test the rest; a bad fraction is named
    const auto no_dev = nn::split_labelled_text(p, {.train = 0.5, .dev = 0.0});
    CHECK(no_dev.dev.size() == 0);
    CHECK(no_dev.test.size() == 5);
    CHECK(contains(error_text([&] { nn::split_labelled_text(p, {.train = 0.0}); }), "'split.train'"));
    CHECK(contains(error_text([&] { nn::split_labelled_text(p, {.train = 0.8, .dev = 0.5}); }), "'split.dev'"));
}
