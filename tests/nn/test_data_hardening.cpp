// Hostile-input tests for kattn/nn/data/ (issue 13): IDX headers whose dimensions overflow
// or exceed the bound, payloads that are short or long, bytes after the gzip stream,
// concatenated gzip members, a gzip bomb; a directory or an oversized file given to every
// reader; the vocabulary file's header, end marker and checksum (truncation at every byte,
// a flipped byte) and its atomic save (a failing write leaves the previous file intact).
#include <doctest/doctest.h>

#include "scratch_dir.hpp"

#include <sys/resource.h>
#include <unistd.h>
#include <zlib.h>

#include <csignal>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <typeinfo>
#include <vector>

#include <kattn/nn/data/fashion_mnist.hpp>
#include <kattn/nn/data/idx.hpp>
#include <kattn/nn/data/text.hpp>
#include <kattn/nn/data/text_datasets.hpp>

using namespace kattn;
namespace fs = std::filesystem;

namespace {

using bytes = std::vector<unsigned char>;

using scratch_dir = kt::scratch_dir;

void put_u32(bytes& v, std::uint32_t x) {
    for (int s = 24; s >= 0; s -= 8) v.push_back(static_cast<unsigned char>(x >> s));
}

bytes image_header(std::uint32_t count, std::uint32_t rows, std::uint32_t cols, std::uint32_t magic = 2051) {
    bytes v;
    put_u32(v, magic);
    put_u32(v, count);
    put_u32(v, rows);
    put_u32(v, cols);
    return v;
}

bytes images(std::uint32_t count, std::uint32_t rows, std::uint32_t cols) {
    bytes v = image_header(count, rows, cols);
    for (std::uint32_t i = 0; i < count * rows * cols; ++i) v.push_back(static_cast<unsigned char>(i * 7 + 1));
    return v;
}

/// One complete gzip member holding `data`.
bytes gzip(const bytes& data) {
    z_stream z{};
    REQUIRE(deflateInit2(&z, 6, Z_DEFLATED, 16 + 15, 8, Z_DEFAULT_STRATEGY) == Z_OK);
    bytes out(deflateBound(&z, uLong(data.size())) + 64);
    z.next_in = const_cast<Bytef*>(data.data());
    z.avail_in = uInt(data.size());
    z.next_out = out.data();
    z.avail_out = uInt(out.size());
    REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
    out.resize(z.total_out);
    deflateEnd(&z);
    return out;
}

void write(const std::string& path, const bytes& b) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
    REQUIRE(out.good());
}

void write(const std::string& path, const std::string& s) { write(path, bytes(s.begin(), s.end())); }

std::string read_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// f() must throw kattn::error (not another exception, not nothing) whose message contains
/// every fragment.
void expect_error(const std::function<void()>& f, std::initializer_list<std::string> fragments) {
    std::string msg;
    try {
        f();
        FAIL_CHECK("no exception (expected kattn::error)");
        return;
    } catch (const kattn::error& e) {
        msg = e.what();
    } catch (const std::exception& e) {
        FAIL_CHECK("expected kattn::error, got " << std::string(typeid(e).name()) << ": " << std::string(e.what()));
        return;
    }
    INFO("message: " << msg);
    for (const std::string& part : fragments) CHECK(msg.find(part) != std::string::npos);
}

}  // namespace

TEST_CASE("nn::read_idx_images: overflowing or oversized dimensions, missing and extra pixel data") {
    scratch_dir tmp;
    const std::string p = tmp.file("img");
    for (bool gz : {false, true}) {
        CAPTURE(gz);
        auto put = [&](const bytes& b) { write(p, gz ? gzip(b) : b); };
        // the 16-byte file of the report: 16 images of 3,221,225,472² pixels, no pixel data
        // (rows·cols overflows 64 bits to a "small" value)
        put(image_header(16, 0xC0000000u, 0xC0000000u));
        expect_error([&] { nn::read_idx_images(p); }, {"argument 'path'", "'" + p + "'", "3221225472"});
        // each dimension ≤ 2^24 but the product is not
        put(image_header(1, 1u << 13, 1u << 12));
        expect_error([&] { nn::read_idx_images(p); }, {"'" + p + "'", "rows·cols"});
        put(image_header(1, 0xFFFFFFFFu, 1));
        expect_error([&] { nn::read_idx_images(p); }, {"'" + p + "'", "4294967295"});
        // count·rows·cols above the size bound (default 2^31 bytes): rejected before reading
        put(image_header(0xFFFFFFFFu, 4096, 4096));
        expect_error([&] { nn::read_idx_images(p); }, {"'" + p + "'", "limit"});
        // a caller's smaller bound
        put(images(3, 2, 5));
        CHECK(nn::read_idx_images(p, 30).pixels.size() == 30u);
        expect_error([&] { nn::read_idx_images(p, 29); }, {"'" + p + "'", "30", "29"});
        // a count within the bound but no pixel data: truncated, nothing allocated for it
        put(image_header(1000000, 28, 28));
        expect_error([&] { nn::read_idx_images(p); }, {"'" + p + "'", "truncated"});
        // exactly one byte too many / too few
        bytes b = images(2, 3, 4);
        b.push_back(9);
        put(b);
        expect_error([&] { nn::read_idx_images(p); }, {"'" + p + "'", "trailing bytes"});
        b.resize(b.size() - 2);
        put(b);
        expect_error([&] { nn::read_idx_images(p); }, {"'" + p + "'", "truncated"});
    }
}

TEST_CASE("nn::read_idx_images / read_idx_labels: magic, dtype and rank are checked separately") {
    scratch_dir tmp;
    const std::string p = tmp.file("x");
    // float32 (0x0D) images of rank 3
    write(p, image_header(1, 1, 1, 0x00000D03u));
    expect_error([&] { nn::read_idx_images(p); }, {"'" + p + "'", "dtype 0x0d", "0x08"});
    // unsigned bytes of rank 2 given to the image reader
    write(p, image_header(1, 1, 1, 0x00000802u));
    expect_error([&] { nn::read_idx_images(p); }, {"'" + p + "'", "rank 2", "rank 3"});
    // nonzero leading bytes (not an IDX file at all)
    write(p, std::string("GIF89a..........."));
    expect_error([&] { nn::read_idx_labels(p); }, {"'" + p + "'", "not an IDX file"});
    // a label file announcing 2^32 − 1 labels with none present
    bytes lab;
    put_u32(lab, 2049);
    put_u32(lab, 0xFFFFFFFFu);
    write(p, lab);
    expect_error([&] { nn::read_idx_labels(p); }, {"'" + p + "'", "limit"});
    write(p, gzip(lab));
    expect_error([&] { nn::read_idx_labels(p); }, {"'" + p + "'", "limit"});
    // too short for a header
    write(p, bytes{0, 0, 8});
    expect_error([&] { nn::read_idx_labels(p); }, {"'" + p + "'", "truncated"});
    write(p, bytes{});
    expect_error([&] { nn::read_idx_labels(p); }, {"'" + p + "'"});
}

TEST_CASE("nn::read_idx_images: bytes after the gzip stream, concatenated members, a gzip bomb") {
    scratch_dir tmp;
    const std::string p = tmp.file("img.gz");
    const bytes img = images(3, 4, 4);
    bytes g = gzip(img);
    write(p, g);
    CHECK(nn::read_idx_images(p).pixels.size() == 48u);
    // garbage after the stream (zlib's gzread silently ignores it)
    for (const std::string& junk : {std::string("garbage"), std::string(1, '\0'), std::string(512, '\0')}) {
        CAPTURE(junk.size());
        bytes h = g;
        h.insert(h.end(), junk.begin(), junk.end());
        write(p, h);
        expect_error([&] { nn::read_idx_images(p); }, {"'" + p + "'", "after the end of the gzip stream"});
    }
    // two gzip members that together hold a valid file (gzread would join them)
    const bytes first(img.begin(), img.begin() + 30), second(img.begin() + 30, img.end());
    bytes two = gzip(first);
    const bytes g2 = gzip(second);
    two.insert(two.end(), g2.begin(), g2.end());
    write(p, two);
    expect_error([&] { nn::read_idx_images(p); }, {"'" + p + "'", "gzip member"});
    // a gzip stream cut inside its 8-byte trailer, and one with a wrong CRC
    write(p, bytes(g.begin(), g.end() - 3));
    expect_error([&] { nn::read_idx_images(p); }, {"'" + p + "'"});
    bytes bad_crc = g;
    bad_crc[bad_crc.size() - 8] ^= 0x55;
    write(p, bad_crc);
    expect_error([&] { nn::read_idx_images(p); }, {"'" + p + "'", "gzip"});
    // a bomb: 16 declared pixels followed by 64 MiB of zeros (64 KiB compressed); inflating
    // stops at the first byte beyond the declared size
    bytes bomb = image_header(1, 4, 4);
    bomb.resize(bomb.size() + (std::size_t{64} << 20), 0);
    write(p, gzip(bomb));
    CHECK(fs::file_size(p) < (std::size_t{1} << 20));
    expect_error([&] { nn::read_idx_images(p); }, {"'" + p + "'", "trailing bytes"});
}

TEST_CASE("nn data readers: a directory or an oversized file is a kattn::error naming the path") {
    scratch_dir tmp;
    const std::string d = tmp.file("a_directory");
    fs::create_directories(d);
    expect_error([&] { nn::read_lines(d); }, {"'" + d + "'", "directory"});
    expect_error([&] { nn::read_tsv(d); }, {"'" + d + "'", "directory"});
    expect_error([&] { nn::vocabulary::load(d); }, {"'" + d + "'", "directory"});
    expect_error([&] { nn::read_idx_images(d); }, {"'" + d + "'", "directory"});
    expect_error([&] { nn::read_idx_labels(d); }, {"'" + d + "'", "directory"});
    expect_error([&] { nn::vocabulary().save(d); }, {"'" + d + "'", "directory"});
    // the data-set loaders, with one of their files replaced by a directory
    const std::string sst = tmp.file("sst2");
    fs::create_directories(sst + "/train.tsv");
    write(sst + "/dev.tsv", std::string("sentence\tlabel\na\t0\n"));
    write(sst + "/test.tsv", std::string("sentence\tlabel\na\t0\n"));
    expect_error([&] { nn::load_sst2(sst); }, {sst + "/train.tsv", "directory"});
    const std::string rt = tmp.file("rt");
    fs::create_directories(rt + "/rt-polarity.pos");
    write(rt + "/rt-polarity.neg", std::string("a\nb\nc\n"));
    expect_error([&] { nn::load_rotten_tomatoes(rt); }, {rt + "/rt-polarity.pos", "directory"});
    const std::string fm = tmp.file("fm");
    for (const char* name : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
                             "t10k-labels-idx1-ubyte.gz"})
        fs::create_directories(fm + "/" + name);
    expect_error([&] { nn::load_fashion_mnist({.directory = fm}); }, {fm + "/train-images-idx3-ubyte.gz", "directory"});
    // size bounds: a caller's limit, and the default limit's presence
    const std::string f = tmp.file("lines.txt");
    write(f, std::string("sentence\tlabel\nabc\t1\n"));
    CHECK(nn::read_lines(f, 21).size() == 2u);
    expect_error([&] { nn::read_lines(f, 20); }, {"'" + f + "'", "21 bytes", "limit of 20"});
    expect_error([&] { nn::read_tsv(f, 20); }, {"'" + f + "'", "limit of 20"});
    CHECK(nn::text_max_bytes >= (std::uint64_t{64} << 20));
}

TEST_CASE("nn::vocabulary file: header, end marker and checksum detect truncation and damage") {
    scratch_dir tmp;
    const std::vector<std::string> texts = {"the cat sat on the mat", "a dog"};
    const auto v = nn::vocabulary::build(texts);
    const std::string p = tmp.file("vocab.txt");
    v.save(p);
    const std::string file = read_text(p);
    INFO("file: " << file);
    // the documented layout
    const std::string head = "kattn vocabulary 2 " + std::to_string(v.size()) + "\n";
    REQUIRE(file.substr(0, head.size()) == head);
    CHECK(file.substr(head.size(), 12) == "<pad>\n<unk>\n");
    const std::size_t end_line = file.rfind("\nend ") + 1;
    CHECK(file.substr(end_line, 4 + std::to_string(v.size()).size() + 7) ==
          "end " + std::to_string(v.size()) + " crc32 ");
    CHECK(file.size() == end_line + 4 + std::to_string(v.size()).size() + 7 + 8 + 1);
    CHECK(file.back() == '\n');
    const auto w = nn::vocabulary::load(p);
    REQUIRE(w.size() == v.size());
    for (index_t i = 0; i < v.size(); ++i) CHECK(w.word(i) == v.word(i));
    // a cut at every byte (line boundaries included) is an error naming the path
    const std::string q = tmp.file("cut.txt");
    for (std::size_t n = 0; n < file.size(); ++n) {
        CAPTURE(n);
        write(q, file.substr(0, n));
        expect_error([&] { nn::vocabulary::load(q); }, {"'" + q + "'"});
    }
    // one changed byte in a token, a token line removed, a line added, bytes appended
    std::string flipped = file;
    flipped[head.size() + 13] ^= 0x01;
    write(q, flipped);
    expect_error([&] { nn::vocabulary::load(q); }, {"'" + q + "'", "checksum"});
    std::string removed = file;
    removed.erase(head.size() + 12, removed.find('\n', head.size() + 12) + 1 - (head.size() + 12));
    write(q, removed);
    expect_error([&] { nn::vocabulary::load(q); }, {"'" + q + "'"});
    std::string added = file;
    added.insert(end_line, "extra\n");
    write(q, added);
    expect_error([&] { nn::vocabulary::load(q); }, {"'" + q + "'"});
    write(q, file + "x");
    expect_error([&] { nn::vocabulary::load(q); }, {"'" + q + "'"});
    write(q, file + "\n");
    expect_error([&] { nn::vocabulary::load(q); }, {"'" + q + "'"});
    // a huge or malformed declared count: an error, no allocation
    write(q, std::string("kattn vocabulary 2 99999999999999999999999\n<pad>\n<unk>\n"));
    expect_error([&] { nn::vocabulary::load(q); }, {"'" + q + "'", "header"});
    write(q, std::string("kattn vocabulary 2 2147483647\n<pad>\n<unk>\n"));
    expect_error([&] { nn::vocabulary::load(q); }, {"'" + q + "'"});
    write(q, std::string("kattn vocabulary 3 2\n<pad>\n<unk>\nend 2 crc32 00000000\n"));
    expect_error([&] { nn::vocabulary::load(q); }, {"'" + q + "'", "version"});
    // the previous format (one token per line, no header) still loads
    write(q, std::string("<pad>\n<unk>\nx\ny\n"));
    const auto legacy = nn::vocabulary::load(q);
    CHECK(legacy.size() == 4);
    CHECK(legacy.id("y") == 3);
    // an empty vocabulary (the specials only) round-trips
    nn::vocabulary().save(q);
    CHECK(nn::vocabulary::load(q).size() == 2);
}

TEST_CASE("nn::vocabulary::save: a failing write leaves the previous file intact") {
    scratch_dir tmp;
    const std::string p = tmp.file("vocab.txt");
    const auto small = nn::vocabulary::build(std::vector<std::string>{"x y"});
    small.save(p);
    const std::string before = read_text(p);
    std::vector<std::string> many;
    for (int i = 0; i < 200; ++i) many.push_back("word" + std::to_string(i));
    const auto big = nn::vocabulary::build(many);
    // a write that fails part-way: the file-size limit makes write(2) fail with EFBIG
    // (effective for root too); SIGXFSZ is ignored meanwhile
    rlimit old{};
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &old) == 0);
    rlimit lim = old;
    lim.rlim_cur = 256;
    auto* previous = std::signal(SIGXFSZ, SIG_IGN);
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &lim) == 0);
    bool threw_kattn = false;
    std::string msg;
    try {
        big.save(p);
    } catch (const kattn::error& e) {
        threw_kattn = true;
        msg = e.what();
    } catch (...) {}
    ::setrlimit(RLIMIT_FSIZE, &old);
    std::signal(SIGXFSZ, previous);
    CHECK(threw_kattn);
    CHECK(msg.find("'" + p + "'") != std::string::npos);
    CHECK(read_text(p) == before);
    CHECK(nn::vocabulary::load(p).size() == small.size());
    // no temporary left behind
    std::size_t entries = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(tmp.path)) ++entries;
    CHECK(entries == 1u);
    // a path in a missing directory: an error naming it, nothing created
    const std::string missing = tmp.file("no/such/dir/v.txt");
    expect_error([&] { big.save(missing); }, {"'" + missing + "'"});
    CHECK(!fs::exists(tmp.file("no")));
    // a successful save replaces the file
    big.save(p);
    CHECK(nn::vocabulary::load(p).size() == big.size());
}
