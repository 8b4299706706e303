// libFuzzer target: the text readers (include/kattn/nn/data/text.hpp, text_datasets.hpp).
// The whole input is given to read_lines, read_tsv and vocabulary::load (lowercase on and
// off). Split at NUL bytes into up to three parts, it is also SST-2's train/dev/test.tsv and
// Rotten Tomatoes' rt-polarity.pos/neg: a private directory holds symbolic links with those
// names to this process's memfiles. The last byte chooses the text_options.
// Asserts: only kattn::error is thrown, and what is returned is consistent: as many labels as
// sentences, SST-2 labels 0 or 1, token ids inside the vocabulary, "<pad>" never produced.
#include <cstdlib>
#include <filesystem>

#include <kattn/nn/data/text_datasets.hpp>

#include "fuzz_common.hpp"

namespace {

using namespace kattn_fuzz;
namespace fs = std::filesystem;

/// A temporary directory of links {train,dev,test}.tsv and rt-polarity.{pos,neg} → memfiles.
struct link_dir {
    fs::path dir;
    link_dir() {
        std::string tmpl = (fs::temp_directory_path() / "kattn-fuzz-text-XXXXXX").string();
        if (::mkdtemp(tmpl.data()) == nullptr) {
            std::perror("mkdtemp");
            std::abort();
        }
        dir = tmpl;
        const char* names[5] = {"train.tsv", "dev.tsv", "test.tsv", "rt-polarity.pos", "rt-polarity.neg"};
        const int files[5] = {0, 1, 2, 0, 1};
        for (int k = 0; k < 5; ++k) fs::create_symlink(input_file(files[k]).path(), dir / names[k]);
    }
    ~link_dir() {
        std::error_code ec;
        fs::remove_all(dir, ec);
    }
};

void check_dataset(const kattn::nn::dataset& d, const kattn::nn::vocabulary& v, bool binary) {
    if (d.texts.size() != d.labels.size()) finding(d.name + ": texts and labels differ in number");
    for (int l : d.labels)
        if (l < 0 || (binary && l > 1)) finding(d.name + ": a label outside 0..1");
    for (const auto& t : d.texts)
        for (auto id : t)
            if (id < 1 || id >= v.size()) finding(d.name + ": a token id outside [1, vocabulary size)");
}

void check_splits(const kattn::nn::text_splits& s) {
    if (s.vocab.size() < 2 || s.vocab.word(0) != "<pad>" || s.vocab.word(1) != "<unk>")
        finding("a vocabulary without <pad>, <unk>");
    check_dataset(s.train, s.vocab, true);
    check_dataset(s.dev, s.vocab, true);
    check_dataset(s.test, s.vocab, true);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static link_dir links;
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    memfile& whole = input_file(0);
    whole.assign(bytes);

    std::vector<std::string> lines;
    expect_kattn_error([&] { lines = kattn::nn::read_lines(whole.path()); });
    expect_kattn_error([&] {
        const kattn::nn::labeled_texts t = kattn::nn::read_tsv(whole.path());
        if (t.sentences.size() != t.labels.size()) finding("read_tsv: sentences and labels differ in number");
        for (int l : t.labels)
            if (l < 0) finding("read_tsv: a negative label");
    });
    for (bool lowercase : {true, false}) {
        expect_kattn_error([&] {
            const kattn::nn::vocabulary v = kattn::nn::vocabulary::load(whole.path(), lowercase);
            if (v.size() < 2 || v.word(0) != "<pad>" || v.word(1) != "<unk>")
                finding("vocabulary::load: no <pad>, <unk>");
            for (const std::string& line : lines)
                for (auto id : v.encode(line))
                    if (id < 1 || id >= v.size()) finding("vocabulary::encode: an id outside [1, size)");
        });
    }

    // The parts for the directory readers.
    split_into_input_files(bytes);
    const unsigned last = size ? data[size - 1] : 0u;
    kattn::nn::text_options o;
    o.max_length = 1 + last % 16;
    o.min_freq = 1 + ((last >> 4) & 1u);
    o.max_vocab = (last >> 5) & 1u ? 0 : 2 + last % 8;
    o.lowercase = (last >> 6) & 1u;
    o.limit_train = (last >> 7) & 1u ? 2 : 0;
    expect_kattn_error([&] { check_splits(kattn::nn::load_sst2(links.dir.string(), o)); });
    expect_kattn_error([&] { check_splits(kattn::nn::load_rotten_tomatoes(links.dir.string(), o, last)); });
    return 0;
}
