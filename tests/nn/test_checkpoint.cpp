// Tests for kattn/nn/checkpoint.hpp: bit-exact round trips of float and double views and
// of metadata, byte-deterministic files, and errors that name the path and the array
// (missing array, wrong shape, missing file, bad names), leaving the parameters untouched.
#include <doctest/doctest.h>

#include "error_text.hpp"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>

#include <kattn/core/random.hpp>
#include <kattn/nn/checkpoint.hpp>

using namespace kattn;

namespace {

std::string temp_path(const std::string& name) {
    return (std::filesystem::temp_directory_path() / ("kattn_test_ckpt_" + name + ".npz")).string();
}

using kt::contains;
using kt::error_text;

std::string file_bytes(const std::string& path) {
    std::ifstream is(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(is), std::istreambuf_iterator<char>()};
}

struct model {
    nn::parameter<float> w{{3, 5}}, b{{5}};
    nn::parameter<double> flow{{2, 2, 4}};
    nn::parameter_list views() { return {nn::view("enc.w", w), nn::view("enc.b", b, false), nn::view("flow.s", flow)}; }
    void randomise(std::uint64_t seed) {
        w.init_normal(1.0, seed, 1);
        b.init_normal(1e-3, seed, 2);
        flow.init_normal(1.0, seed, 3);
        // values whose float64 detour must still be exact
        w.value[0] = std::numeric_limits<float>::denorm_min();
        w.value[1] = std::numeric_limits<float>::max();
        w.value[2] = -0.0f;
        w.value[3] = 0.1f;
        flow.value[0] = std::numeric_limits<double>::denorm_min();
        flow.value[1] = 0.1;
        flow.value[2] = -std::numeric_limits<double>::max();
    }
};

}  // namespace

TEST_CASE("nn::checkpoint: float and double views round-trip bit-exactly, with metadata") {
    const std::string path = temp_path("roundtrip");
    model a, b;
    a.randomise(7);
    b.randomise(8);
    const nn::checkpoint_metadata meta = {{"meta.step", {1200}}, {"meta.lr_history", {1e-3, 5e-4, 0.1}}};
    nn::save_checkpoint(path, a.views(), meta);
    CHECK_FALSE(std::filesystem::exists(path + ".tmp"));

    auto vb = b.views();
    const auto got = nn::load_checkpoint(path, vb);
    CHECK(std::memcmp(a.w.value.data(), b.w.value.data(), a.w.value.size() * sizeof(float)) == 0);
    CHECK(std::memcmp(a.b.value.data(), b.b.value.data(), a.b.value.size() * sizeof(float)) == 0);
    CHECK(std::memcmp(a.flow.value.data(), b.flow.value.data(), a.flow.value.size() * sizeof(double)) == 0);
    CHECK(std::signbit(b.w.value[2]));
    CHECK(got == meta);

    // the archive holds float64 arrays of the views' shapes (independent reader)
    const kattn::detail::npz_reader r(path);
    CHECK(r.array("enc.w", {3, 5})[4] == double(a.w.value[4]));
    CHECK(r.array("flow.s", {2, 2, 4}).size() == 16u);
    CHECK(r.array("meta.step", {1})[0] == 1200.0);

    // byte-deterministic: saving the same state twice gives the same file
    const std::string first = file_bytes(path);
    nn::save_checkpoint(path, a.views(), meta);
    CHECK(file_bytes(path) == first);

    // without metadata the returned map is empty
    nn::save_checkpoint(path, a.views());
    auto vb2 = b.views();
    CHECK(nn::load_checkpoint(path, vb2).empty());
    std::filesystem::remove(path);
}

TEST_CASE("nn::checkpoint: a missing array, a wrong shape and a missing file name what failed") {
    const std::string path = temp_path("errors");
    model a;
    a.randomise(3);
    nn::save_checkpoint(path, a.views());

    // a parameter the file does not hold; the other parameters stay untouched
    model b;
    b.randomise(4);
    const std::vector<float> before = b.w.value;
    nn::parameter<float> extra({4});
    auto vs = b.views();
    vs.push_back(nn::view("head.extra", extra));
    const std::string e1 = error_text([&] { nn::load_checkpoint(path, vs); });
    CHECK(contains(e1, "head.extra"));
    CHECK(contains(e1, path));
    CHECK(contains(e1, "missing"));
    CHECK(b.w.value == before);

    // same name, different shape
    nn::parameter<float> w_t({5, 3});
    nn::parameter_list wrong = {nn::view("enc.w", w_t)};
    const std::string e2 = error_text([&] { nn::load_checkpoint(path, wrong); });
    CHECK(contains(e2, "enc.w"));
    CHECK(contains(e2, path));
    CHECK(contains(e2, "[5, 3]"));
    CHECK(contains(e2, "[3, 5]"));

    // missing file
    const std::string nowhere = temp_path("does_not_exist");
    std::filesystem::remove(nowhere);
    auto va = a.views();
    CHECK(contains(error_text([&] { nn::load_checkpoint(nowhere, va); }), nowhere));

    // a file that is not an .npz
    const std::string junk = temp_path("junk");
    std::ofstream(junk) << "not a zip archive at all, just some text";
    CHECK(contains(error_text([&] { nn::load_checkpoint(junk, va); }), junk));
    std::filesystem::remove(junk);

    // a directory that does not exist
    CHECK_THROWS_AS(nn::save_checkpoint("/nonexistent_dir_kattn/x.npz", a.views()), kattn::error);
    std::filesystem::remove(path);
}

TEST_CASE("nn::checkpoint: duplicate names and clashing metadata keys are rejected") {
    const std::string path = temp_path("names");
    nn::parameter<float> p({2}), q({2});
    CHECK_THROWS_WITH_AS(nn::save_checkpoint(path, {nn::view("x", p), nn::view("x", q)}),
                         doctest::Contains("'x' twice"), kattn::error);
    CHECK_THROWS_WITH_AS(nn::save_checkpoint(path, {nn::view("", p)}), doctest::Contains("empty name"), kattn::error);
    CHECK_THROWS_WITH_AS(nn::save_checkpoint(path, {nn::view("x", p)}, {{"x", {1.0}}}), doctest::Contains("'x'"),
                         kattn::error);
    CHECK_FALSE(std::filesystem::exists(path));
}

TEST_CASE("nn::checkpoint: NaN, ±Inf and values beyond float's range are rejected, the views untouched") {
    const std::string path = temp_path("nonfinite");
    const double huge = 1e39;  // finite in double, overflows a float view
    for (const double bad : {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                             -std::numeric_limits<double>::infinity(), huge}) {
        CAPTURE(bad);
        kattn::detail::write_npz(path, {{"enc.w", {3, 5}, std::vector<double>(15, 0.5)},
                                        {"enc.b", {5}, {1, 2, bad, 4, 5}},
                                        {"flow.s", {2, 2, 4}, std::vector<double>(16, 0.25)}});
        model m;
        m.randomise(9);
        const std::vector<float> before = m.b.value;
        auto vs = m.views();
        const std::string e = error_text([&] { nn::load_checkpoint(path, vs); });
        CHECK(contains(e, "enc.b"));
        CHECK(contains(e, path));
        CHECK(contains(e, "flat index 2"));
        CHECK(m.b.value == before);
    }
    // a double view accepts 1e39 but not a NaN
    kattn::detail::write_npz(path, {{"flow.s", {2, 2, 4}, std::vector<double>(16, 1e39)}});
    nn::parameter<double> flow({2, 2, 4});
    nn::parameter_list only = {nn::view("flow.s", flow)};
    CHECK(error_text([&] { nn::load_checkpoint(path, only); }).empty());
    CHECK(flow.value[3] == 1e39);
    std::vector<double> with_nan(16, 0.0);
    with_nan[7] = std::numeric_limits<double>::quiet_NaN();
    kattn::detail::write_npz(path, {{"flow.s", {2, 2, 4}, with_nan}});
    CHECK(contains(error_text([&] { nn::load_checkpoint(path, only); }), "flat index 7"));
    std::filesystem::remove(path);
}

TEST_CASE("nn::checkpoint: a failed save keeps the previous checkpoint; a directory as path is a kattn::error") {
    const std::string path = temp_path("keep");
    model a;
    a.randomise(5);
    nn::save_checkpoint(path, a.views());
    const std::string before = file_bytes(path);
    model b;
    b.randomise(6);
    // the metadata key clashes with a parameter: the save fails, the old file stays
    CHECK_THROWS_AS(nn::save_checkpoint(path, b.views(), {{"enc.w", {1}}}), kattn::error);
    CHECK(file_bytes(path) == before);
    const auto dir = std::filesystem::temp_directory_path().string();
    auto vs = a.views();
    CHECK(contains(error_text([&] { nn::load_checkpoint(dir, vs); }), "a directory"));
    CHECK(contains(error_text([&] { nn::save_checkpoint(dir, a.views()); }), "a directory"));
    std::filesystem::remove(path);
}
