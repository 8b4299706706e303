// libFuzzer target: the labelled TSV/CSV readers (include/kattn/nn/data/labelled_text.hpp,
// labelled_splits.hpp). The last two bytes choose the labelled_text_options (format, header,
// columns by name or position, names or integer labels, class order, given class names,
// delimiter, a small max_bytes) and the text_options; max_classes is the default 65,536 when the
// input's size is a multiple of 8, else 64 (a file with integer label 60000 makes 60,001 class
// names that every later file rechecks: that path stays covered without slowing every run). The whole input goes to
// read_labelled_text and split_labelled_text; split at NUL bytes into up to three parts, it
// is the train, dev and test file of load_labelled_splits.
// Asserts: only kattn::error is thrown, and what is returned is consistent: texts, labels and
// lines of equal length, lines increasing from 1, class ids in [0, C), given class names kept,
// every text holding a non-whitespace byte, token ids inside the vocabulary.
#include <kattn/nn/data/labelled_splits.hpp>

#include "fuzz_common.hpp"

namespace {

using namespace kattn_fuzz;

kattn::nn::labelled_text_options read_options(unsigned b, unsigned c, std::size_t size) {
    using namespace kattn::nn;
    labelled_text_options o;
    if (size % 8 != 0) o.max_classes = 64;
    o.format = c % 3 == 0 ? text_format::automatic : c % 3 == 1 ? text_format::tsv : text_format::csv;
    o.header = !((c >> 2) & 1u);
    switch ((c >> 3) % 4) {
        case 1:
            o.text_column = "sentence", o.label_column = "label";
            break;
        case 2:
            o.text_column = "text", o.label_column = "missing";
            break;
        case 3:
            o.label_column = "label";
            break;
        default:
            break;
    }
    const int idx[4][2] = {{0, 1}, {1, 0}, {0, 0}, {2, 5}};
    o.text_index = idx[(c >> 5) % 4][0];
    o.label_index = idx[(c >> 5) % 4][1];
    o.labels = b & 1u ? label_type::integers : label_type::names;
    o.order = (b >> 1) & 1u ? label_order::first_appearance : label_order::sorted;
    if ((b >> 2) & 1u)
        o.label_names = o.labels == label_type::names ? std::vector<std::string>{"neg", "pos"}
                                                      : std::vector<std::string>{"a", "b", "c"};
    const char delimiters[4] = {0, ';', '|', ' '};
    o.delimiter = delimiters[(b >> 3) % 4];
    if ((b >> 5) & 1u) o.max_bytes = 64;
    return o;
}

void check_data(const kattn::nn::labelled_data& d, const kattn::nn::labelled_text_options& o) {
    if (d.texts.size() != d.labels.size() || d.lines.size() != d.labels.size())
        finding("read_labelled_text: texts, labels and lines differ in number");
    if (!o.label_names.empty() && d.label_names != o.label_names)
        finding("read_labelled_text: the given label_names were not kept");
    for (std::size_t i = 0; i < d.labels.size(); ++i) {
        if (d.labels[i] < 0 || d.labels[i] >= d.num_classes()) finding("read_labelled_text: a class id outside [0, C)");
        if (d.lines[i] < 1 || (i > 0 && d.lines[i] <= d.lines[i - 1]))
            finding("read_labelled_text: record lines not increasing from 1");
        bool text = false;
        for (char ch : d.texts[i]) text = text || !kattn::nn::detail::is_space(ch);
        if (!text) finding("read_labelled_text: a text without a non-whitespace byte");
    }
}

void check_dataset(const kattn::nn::dataset& d, const kattn::nn::labelled_splits& s) {
    if (d.texts.size() != d.labels.size()) finding(d.name + ": texts and labels differ in number");
    if (d.num_classes != s.num_classes()) finding(d.name + ": num_classes differs from the label names'");
    for (int l : d.labels)
        if (l < 0 || l >= s.num_classes()) finding(d.name + ": a label outside [0, C)");
    for (const auto& t : d.texts)
        for (auto id : t)
            if (id < 1 || id >= s.vocab.size()) finding(d.name + ": a token id outside [1, vocabulary size)");
}

void check_splits(const kattn::nn::labelled_splits& s) {
    check_dataset(s.train, s);
    check_dataset(s.dev, s);
    check_dataset(s.test, s);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    const unsigned b = size ? data[size - 1] : 0u, c = size > 1 ? data[size - 2] : 0u;
    const kattn::nn::labelled_text_options o = read_options(b, c, size);
    kattn::nn::text_options t;
    t.max_length = 1 + b % 16;
    t.min_freq = 1 + ((c >> 7) & 1u);
    t.limit_train = (b >> 6) & 1u ? 1 : 0;

    memfile& whole = input_file(0);
    whole.assign(bytes);
    expect_kattn_error([&] { check_data(kattn::nn::read_labelled_text(whole.path(), o), o); });
    expect_kattn_error([&] {
        const kattn::nn::split_options split{.train = (b >> 7) & 1u ? 1.0 : 0.8, .dev = 0.1, .seed = b};
        check_splits(kattn::nn::split_labelled_text(whole.path(), split, o, t));
    });

    const auto parts = split_into_input_files(bytes);
    expect_kattn_error([&] {
        check_splits(kattn::nn::load_labelled_splits(input_file(0).path(), input_file(1).path(),
                                                     parts[2].empty() ? std::string() : input_file(2).path(), o, t));
    });
    return 0;
}
