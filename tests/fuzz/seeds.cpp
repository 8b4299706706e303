// tests/fuzz/seeds.cpp — writes the seed corpora of the libFuzzer targets (docs/fuzzing.md).
//
//   kattn_fuzz_seeds <root> [<stamp>]
// creates <root>/seeds/<target>/ (the seeds, rewritten on every run), <root>/corpus/<target>/
// (the fuzzer's growing working corpus, kept) and <root>/artifacts/<target>/ (crash inputs).
// Seeds come from kattn's own writers (write_npz, save_checkpoint, realnvp::save,
// vocabulary::save), a small zip writer for what kattn does not write (np.savez's zip64
// records, other dtypes, Fortran order, .npy v2 headers, deflated members), zlib for the
// gzip'd IDX files, plus edge cases (truncated, trailing bytes, empty files).
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <xtensor/xarray.hpp>
#include <xtensor/xnpy.hpp>

#include <kattn/io/npz.hpp>
#include <kattn/nn/data/text.hpp>
#include <kattn/samplers/realnvp.hpp>

#include "fuzz_model.hpp"

namespace {

namespace fs = std::filesystem;
using kattn::detail::put_le;

fs::path root;

std::string read(const fs::path& p) {
    std::ifstream is(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(is), std::istreambuf_iterator<char>()};
}

void write(const std::string& target, const std::string& name, const std::string& bytes) {
    std::ofstream os(root / "seeds" / target / name, std::ios::binary | std::ios::trunc);
    os.write(bytes.data(), std::streamsize(bytes.size()));
    if (!os) {
        std::cerr << "kattn_fuzz_seeds: cannot write " << (root / "seeds" / target / name) << "\n";
        std::exit(1);
    }
}

/// The bytes a kattn writer produced at a temporary path.
template <class F>
std::string via_file(F&& f) {
    const fs::path p = root / "seeds" / "tmp.bin";
    f(p.string());
    std::string b = read(p);
    fs::remove(p);
    return b;
}

// ---- a small zip writer (stored or "deflated"-labelled members, optional zip64 records) ----

struct member {
    std::string name, data;
    int method = 0;
};

std::string zip(const std::vector<member>& members, bool zip64) {
    std::string out, central;
    for (const member& m : members) {
        const std::uint32_t crc = kattn::detail::crc32(m.data.data(), m.data.size());
        const std::uint64_t offset = out.size();
        std::string extra;
        if (zip64) {
            put_le(extra, 0x0001, 2);
            put_le(extra, 16, 2);
            put_le(extra, m.data.size(), 8);
            put_le(extra, m.data.size(), 8);
        }
        put_le(out, 0x04034b50u, 4);
        put_le(out, zip64 ? 45 : 20, 2);
        put_le(out, 0, 2);
        put_le(out, std::uint64_t(m.method), 2);
        put_le(out, 0, 2);
        put_le(out, 33, 2);
        put_le(out, crc, 4);
        put_le(out, zip64 ? 0xFFFFFFFFu : m.data.size(), 4);
        put_le(out, zip64 ? 0xFFFFFFFFu : m.data.size(), 4);
        put_le(out, m.name.size(), 2);
        put_le(out, extra.size(), 2);
        out += m.name + extra + m.data;
        std::string cextra;
        if (zip64) {  // numpy's order: usize, csize, offset (each only when its field is 0xFFFFFFFF)
            put_le(cextra, 0x0001, 2);
            put_le(cextra, 24, 2);
            put_le(cextra, m.data.size(), 8);
            put_le(cextra, m.data.size(), 8);
            put_le(cextra, offset, 8);
        }
        put_le(central, 0x02014b50u, 4);
        put_le(central, zip64 ? 45 : 20, 2);
        put_le(central, zip64 ? 45 : 20, 2);
        put_le(central, 0, 2);
        put_le(central, std::uint64_t(m.method), 2);
        put_le(central, 0, 2);
        put_le(central, 33, 2);
        put_le(central, crc, 4);
        put_le(central, zip64 ? 0xFFFFFFFFu : m.data.size(), 4);
        put_le(central, zip64 ? 0xFFFFFFFFu : m.data.size(), 4);
        put_le(central, m.name.size(), 2);
        put_le(central, cextra.size(), 2);
        put_le(central, 0, 2);
        put_le(central, 0, 2);
        put_le(central, 0, 2);
        put_le(central, 0, 4);
        put_le(central, zip64 ? 0xFFFFFFFFu : offset, 4);
        central += m.name + cextra;
    }
    const std::uint64_t cd = out.size();
    out += central;
    if (zip64) {
        const std::uint64_t z = out.size();
        put_le(out, 0x06064b50u, 4);
        put_le(out, 44, 8);
        put_le(out, 45, 2);
        put_le(out, 45, 2);
        put_le(out, 0, 4);
        put_le(out, 0, 4);
        put_le(out, members.size(), 8);
        put_le(out, members.size(), 8);
        put_le(out, central.size(), 8);
        put_le(out, cd, 8);
        put_le(out, 0x07064b50u, 4);
        put_le(out, 0, 4);
        put_le(out, z, 8);
        put_le(out, 1, 4);
    }
    put_le(out, 0x06054b50u, 4);
    put_le(out, 0, 2);
    put_le(out, 0, 2);
    put_le(out, zip64 ? 0xFFFFu : members.size(), 2);
    put_le(out, zip64 ? 0xFFFFu : members.size(), 2);
    put_le(out, zip64 ? 0xFFFFFFFFu : central.size(), 4);
    put_le(out, zip64 ? 0xFFFFFFFFu : cd, 4);
    put_le(out, 0, 2);
    return out;
}

template <class T>
std::string npy(std::vector<std::size_t> shape, double start = 0.5) {
    xt::xarray<T> a = xt::xarray<T>::from_shape(shape);
    for (std::size_t i = 0; i < a.size(); ++i) a.data()[i] = T(start + 0.25 * double(i));
    return xt::dump_npy(a);
}

std::string replace(std::string s, const std::string& from, const std::string& to) {
    const std::size_t p = s.find(from);
    if (p != std::string::npos) s.replace(p, from.size(), to);
    return s;
}

/// The same .npy with a version 2 header (4-byte header length).
std::string npy_v2(const std::string& v1) {
    const std::size_t hlen =
        std::size_t(static_cast<unsigned char>(v1[8])) | std::size_t(static_cast<unsigned char>(v1[9])) << 8;
    std::string out = "\x93NUMPY";
    out += '\x02';
    out += '\x00';
    put_le(out, hlen, 4);
    return out + v1.substr(10);
}

void npz_family_seeds() {
    std::vector<std::string> files;
    files.push_back(via_file([](const std::string& p) {
        kattn::detail::write_npz(p, {{"a", {2, 3}, {1, 2, 3, 4, 5, 6}}, {"scalar", {}, {7}}, {"empty", {0}, {}}});
    }));
    files.push_back(via_file([](const std::string& p) { kattn::detail::write_npz(p, {}); }));
    files.push_back(via_file([](const std::string& p) {
        kattn_fuzz::model m;
        m.w.init_normal(1.0, 3, 1);
        m.b.init_normal(1.0, 3, 2);
        m.flow.init_normal(1.0, 3, 3);
        kattn::nn::save_checkpoint(p, m.views(), {{"meta.step", {1200}}, {"meta.lr", {1e-3, 2e-3}}});
    }));
    files.push_back(via_file([](const std::string& p) {  // enc.b missing, enc.w of the wrong shape
        kattn::nn::parameter<float> w{{5, 3}};
        kattn::nn::parameter<double> flow{{2, 2, 4}};
        kattn::nn::save_checkpoint(p, {kattn::nn::view("enc.w", w), kattn::nn::view("flow.s", flow)});
    }));
    files.push_back(via_file([](const std::string& p) { kattn::samplers::realnvp({.dim = 2, .layers = 1}).save(p); }));
    files.push_back(via_file([](const std::string& p) {
        kattn::samplers::realnvp({.dim = 3, .layers = 2, .hidden = 4, .scale_bound = 0.5, .seed = 7}).save(p);
    }));
    const std::string f8 = npy<double>({2, 2});
    files.push_back(zip({{"a.npy", f8}, {"b.npy", npy<double>({3})}}, true));  // np.savez's zip64 records
    files.push_back(zip({{"config.npy", npy<double>({4}, 1.0)}}, true));
    files.push_back(zip({{"f4.npy", npy<float>({2, 2})}, {"i8.npy", npy<std::int64_t>({3})}}, false));
    files.push_back(zip({{"fortran.npy", replace(f8, "'fortran_order': False", "'fortran_order': True")}}, false));
    files.push_back(zip({{"v2.npy", npy_v2(f8)}}, false));
    files.push_back(zip({{"deflated.npy", f8, 8}}, false));
    files.push_back(zip({{"noext", f8}, {"a.npy", f8.substr(0, 20)}}, false));
    std::string corrupt = zip({{"a.npy", f8}}, false);
    corrupt[40] ^= 0x55;  // CRC mismatch
    files.push_back(corrupt);
    files.push_back(files[0].substr(0, files[0].size() / 2));  // truncated
    files.push_back(std::string(22, '\0'));
    for (const char* target : {"npz", "checkpoint", "realnvp"})
        for (std::size_t i = 0; i < files.size(); ++i) write(target, "seed" + std::to_string(i) + ".npz", files[i]);
}

// ---- IDX ------------------------------------------------------------------------------------

std::string be32(std::uint32_t v) {
    return {char(v >> 24), char((v >> 16) & 0xFF), char((v >> 8) & 0xFF), char(v & 0xFF)};
}

std::string gzip(const std::string& raw) {
    return via_file([&](const std::string& p) {
        gzFile g = gzopen(p.c_str(), "wb");
        if (!raw.empty()) gzwrite(g, raw.data(), unsigned(raw.size()));
        gzclose(g);
    });
}

void idx_seeds() {
    std::string images = be32(2051) + be32(2) + be32(3) + be32(4), labels = be32(2049) + be32(5);
    for (int i = 0; i < 24; ++i) images += char(i * 10);
    for (int i = 0; i < 5; ++i) labels += char(i);
    const std::vector<std::pair<std::string, std::string>> raw = {
        {"images", images},
        {"labels", labels},
        {"images-truncated", images.substr(0, images.size() - 5)},
        {"labels-trailing", labels + "xx"},
        {"header-only", be32(2051) + be32(0) + be32(1) + be32(1)},
        {"labels-empty", be32(2049) + be32(0)},
        {"huge-count", be32(2051) + be32(0xFFFFFFFFu) + be32(28) + be32(28) + "abc"},
        {"empty", ""},
    };
    for (const auto& [name, bytes] : raw) {
        write("idx", name + ".idx", bytes);
        write("idx", name + ".idx.gz", gzip(bytes));
    }
    const std::string gz = gzip(images);
    write("idx", "gz-truncated.gz", gz.substr(0, gz.size() - 6));
    write("idx", "gz-two-members.gz", gzip(labels.substr(0, 4)) + gzip(labels.substr(4)));
}

// ---- text -----------------------------------------------------------------------------------

void text_seeds() {
    const std::string tsv = "sentence\tlabel\nA Good film\t1\nbad , very bad\t0\nfine\t1\n";
    write("text", "sst2.tsv", tsv);
    write("text", "crlf.tsv", "sentence\tlabel\r\nok\t0\r\nwith\ttab\t1\r\n");
    write("text", "bad-label.tsv", "sentence\tlabel\nx\t2\ny\t-1\nz\n");
    write("text", "three-splits", tsv + '\0' + "sentence\tlabel\ngood\t1\n" + '\0' + "sentence\tlabel\nbad\t0\n");
    write("text", "rotten", "a good film\nfine acting\nsuperb\n" + std::string(1, '\0') + "bad\nawful plot\nmeh\n");
    write("text", "latin1", "sentence\tlabel\ncaf\xe9 cr\xe8me\t1\n\xff\xfe\t0\n");
    write("text", "vocab-dup", "<pad>\n<unk>\nword\nword\n");
    write("text", "empty", "");
    const std::vector<std::string> texts = {"a good film", "A bad film", "good good acting"};
    write("text", "vocab", via_file([&](const std::string& p) { kattn::nn::vocabulary::build(texts).save(p); }));
    write("text", "vocab-capped",
          via_file([&](const std::string& p) { kattn::nn::vocabulary::build(texts, 1, 4, false).save(p); }));
}

void labelled_text_seeds() {
    // The last two bytes of each seed choose the options (tests/fuzz/fuzz_labelled_text.cpp).
    const std::vector<std::pair<std::string, std::string>> files = {
        {"tsv-names", "sentence\tlabel\na good film\tpos\nbad\tneg\n\nfine\tpos\n" + std::string("\x08\x00", 2)},
        {"tsv-integers", "text\tlabel\nok\t0\nwell\t2\n" + std::string("\x01\x01", 2)},
        {"csv-quoted", "sentence,label\n\"a, \"\"quoted\"\" text\",pos\n\"multi\nline\",neg\nplain,pos\n\x02\x08"},
        {"csv-bom-crlf", "\xef\xbb\xbfsentence,label\r\nx,1\r\ny,0\r\n\x02\x01"},
        {"no-header", "good\tpos\nbad\tneg\n\x04\x00"},
        {"three-files", "sentence\tlabel\na\tpos\nb\tneg\n" + std::string(1, '\0') + "sentence\tlabel\nc\tpos\n" +
                            std::string(1, '\0') + "sentence\tlabel\nd\tneg\n\x08\x00"},
        {"unterminated", "sentence,label\n\"open,pos\n\x02\x08"},
        {"semicolons", "sentence;label\nx;neg\ny;pos\n\x08\x01"},
        {"empty", ""},
    };
    for (const auto& [name, bytes] : files) write("labelled_text", name, bytes);
}

// ---- attention ------------------------------------------------------------------------------

void attention_seeds() {
    std::uint32_t s = 2024;
    auto next = [&] { return s = s * 1664525u + 1013904223u, char(s >> 24); };
    for (int k = 0; k < 64; ++k) {
        std::string b;
        b += char(k);  // operator, type and backend
        const std::size_t n = 16 + std::size_t(k % 8) * 96;
        for (std::size_t i = 0; i < n; ++i) b += next();
        // mostly small values: clear the class byte of most value pairs
        for (std::size_t i = 9; i + 1 < b.size(); i += 2)
            if (k % 3 != 0 || (i / 2) % 5) b[i] = char((unsigned char)(b[i]) % 16);
        write("attention", "seed" + std::to_string(k), b);
    }
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::cerr << "usage: kattn_fuzz_seeds <root> [<stamp>]\n";
        return 2;
    }
    root = argv[1];
    const char* targets[] = {"npz", "checkpoint", "realnvp", "idx", "text", "labelled_text", "attention"};
    for (const char* t : targets) {
        fs::remove_all(root / "seeds" / t);
        for (const char* part : {"seeds", "corpus", "artifacts"}) fs::create_directories(root / part / t);
    }
    npz_family_seeds();
    idx_seeds();
    text_seeds();
    labelled_text_seeds();
    attention_seeds();
    if (argc > 2) std::ofstream(argv[2]) << "kattn fuzz seeds in " << (root / "seeds").string() << "\n";
    return 0;
}
