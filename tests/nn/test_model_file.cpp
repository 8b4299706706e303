// Tests for kattn/nn/model_spec.hpp, model_factory.hpp, model_file.hpp and
// text_classifier.hpp: the factory builds exactly the models of the examples' former
// with_model (same seeds → same parameters and outputs); trained models of several kinds
// (a Coulomb kernel-<map> with phase A included) saved and loaded predict bitwise alike;
// damaged, tampered, truncated and other-version files are kattn::errors naming the file;
// the docs/encoder.md snippet ("Saving and loading a model").
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <unistd.h>
#include <functional>
#include <string>
#include <vector>

#include <kattn/core/random.hpp>
#include <kattn/io/zip.hpp>
#include <kattn/nn/data/text.hpp>
#include <kattn/nn/data/text_datasets.hpp>
#include <kattn/nn/model_factory.hpp>
#include <kattn/nn/text_classifier.hpp>

using namespace kattn;

namespace {

namespace fs = std::filesystem;

struct temp_dir {
    fs::path path;
    temp_dir() {
        path = fs::temp_directory_path() /
               ("kattn_model_file_" + std::to_string(::getpid()) + "_" + std::to_string(std::rand()));
        fs::create_directories(path);
    }
    ~temp_dir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
    std::string file(const std::string& name) const { return (path / name).string(); }
};

/// Sentences of 3…8 words over w0…w9; label "yes" (1) iff w5 occurs.
nn::labeled_texts text_task(index_t n, std::uint64_t seed) {
    nn::labeled_texts t;
    const random_stream rs(seed, streams::user + 9);
    std::uint64_t k = 0;
    for (index_t i = 0; i < n; ++i) {
        const index_t len = 3 + index_t(rs.uniform(k++) * 6);
        std::string s;
        int label = 0;
        for (index_t j = 0; j < len; ++j) {
            const int w = int(rs.uniform(k++) * 10) % 10;
            s += (j ? " W" : "W") + std::to_string(w);  // upper case: the vocabulary lower-cases
            label |= w == 5;
        }
        t.sentences.push_back(s);
        t.labels.push_back(label);
    }
    return t;
}

nn::dataset encode(const nn::labeled_texts& t, const nn::vocabulary& v, index_t max_length) {
    nn::dataset d;
    d.kind = nn::input_kind::tokens;
    d.num_classes = 2;
    d.max_length = max_length;
    for (const auto& s : t.sentences) d.texts.push_back(v.encode(s));
    d.labels = t.labels;
    return d;
}

nn::model_spec tiny(const std::string& kind) {
    nn::model_spec s;
    s.kind = kind;
    s.dim = 8;
    s.heads = 2;
    s.layers = 2;
    s.ffn_hidden = 12;
    s.head_hidden = 6;
    s.num_features = 8;
    s.fska_pairs = 4;
    s.align_samples = 64;
    s.align_steps = 5;
    s.max_length = 8;
    s.seed = 3;
    return s;
}

std::vector<double> values(const nn::parameter_list& ps) {
    std::vector<double> v;
    for (const auto& p : ps)
        for (index_t i = 0; i < p.size(); ++i) v.push_back(p.value_at(i));
    return v;
}

bool same_bits(const nn::tensor<float>& a, const nn::tensor<float>& b) {
    return a.shape() == b.shape() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

template <class Model>
nn::tensor<float> logits(Model& m, const nn::dataset& d) {
    std::vector<index_t> idx{0, 1, 2, 3, 4, 5};
    nn::context ctx;
    return m.forward(d.make_batch(idx), ctx);
}

/// The members of the archive at path, in order.
std::vector<std::pair<std::string, std::string>> members(const std::string& path) {
    const std::string bytes = kattn::detail::read_file(path, "path", 1 << 30);
    const kattn::detail::zip_archive zip(bytes, path);
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& m : zip.members()) out.emplace_back(m.name, std::string(zip.data(m)));
    return out;
}

void write_members(const std::string& path, const std::vector<std::pair<std::string, std::string>>& ms) {
    kattn::detail::zip_writer zip(path);
    for (const auto& [n, d] : ms) zip.add(n, d);
    kattn::detail::write_file_atomically(path, std::move(zip).finish());
}

/// The error message of load_model(path) ("" when it loads).
std::string load_error(const std::string& path) {
    try {
        (void)nn::load_model(path);
    } catch (const kattn::error& e) {
        return e.what();
    }
    return "";
}

/// Copies src to dst with member `name`'s data replaced by f(data) (nothing: member removed).
void edit(const std::string& src, const std::string& dst, const std::string& name,
          const std::function<std::string(std::string)>& f) {
    auto ms = members(src);
    std::vector<std::pair<std::string, std::string>> out;
    bool found = false;
    for (auto& [n, d] : ms) {
        if (n != name) {
            out.emplace_back(n, d);
            continue;
        }
        found = true;
        std::string r = f ? f(d) : std::string();
        if (f) out.emplace_back(n, r);
    }
    REQUIRE(found);
    write_members(dst, out);
}

std::string replace_line(std::string text, const std::string& key, const std::string& line) {
    const std::size_t at = text.find(key + "=");
    REQUIRE(at != std::string::npos);
    return text.replace(at, text.find('\n', at) - at, line);
}

}  // namespace

TEST_CASE("nn::with_text_model builds the models of the examples' former with_model exactly") {
    // The former examples/common/experiment.hpp construction, spelled out per family.
    const nn::model_spec base = tiny("transformer");
    const nn::classifier_config cfg{.encoder = {.dim = base.dim,
                                                .layers = base.layers,
                                                .ffn_hidden = base.ffn_hidden,
                                                .dropout = base.dropout,
                                                .pre_ln = base.pre_ln,
                                                .seed = base.seed},
                                    .classes = base.classes,
                                    .head_hidden = base.head_hidden,
                                    .seed = base.seed};
    const std::uint64_t seed = base.seed;
    auto layer_seed = [seed](index_t l) { return seed * 1000 + 17 * std::uint64_t(l) + 1; };
    const index_t vocab = 12;
    auto input = [&] {
        return nn::token_input<float>(
            {.vocab = vocab, .dim = base.dim, .max_length = base.max_length, .seed = seed + 7});
    };
    const nn::vocabulary v = nn::vocabulary::build(text_task(40, 1).sentences);
    REQUIRE(v.size() == vocab);
    const nn::dataset d = encode(text_task(40, 1), v, base.max_length);

    auto compare = [&](const std::string& kind, auto make_attention, bool align) {
        CAPTURE(kind);
        using A = decltype(make_attention(index_t(0)));
        using L = nn::sequence_classifier<nn::token_input<float>, A>;
        L legacy(cfg, input(), make_attention);
        nn::model_spec s = base;
        s.kind = kind;
        CHECK(nn::needs_alignment(s) == align);
        bool called = false;
        nn::with_text_model(s, vocab, [&](auto& m) {
            if constexpr (std::is_same_v<std::decay_t<decltype(m)>, L>) {
                called = true;
                CHECK(values(m.parameters()) == values(legacy.parameters()));
                if constexpr (nn::has_alignment<A, float>) {
                    if (align) {  // phase A from the same state moves Ω alike
                        m.align(d, s.align_samples, s.align_steps);
                        legacy.align(d, s.align_samples, s.align_steps);
                    }
                }
                CHECK(same_bits(logits(m, d), logits(legacy, d)));
            }
        });
        CHECK(called);
        // The type-erased classifier holds the same model.
        nn::text_classifier clf(s, v, {"no", "yes"});
        CHECK(values(clf.parameters()) == values(legacy.parameters()));
    };
    for (const std::string k : {"transformer", "transformer-noqkv"})
        compare(
            k,
            [&, qkv = k == "transformer"](index_t l) {
                return nn::softmax_mha<float>(
                    {.dim = base.dim, .heads = base.heads, .qkv = qkv, .seed = layer_seed(l)});
            },
            false);
    compare(
        "uniform", [&](index_t l) { return nn::uniform_attention<float>({.dim = base.dim, .seed = layer_seed(l)}); },
        false);
    compare(
        "performer",
        [&](index_t l) {
            return nn::performer<float>(
                {.dim = base.dim, .heads = base.heads, .num_features = base.num_features, .seed = layer_seed(l)});
        },
        false);
    compare(
        "qk-softplus",
        [&](index_t l) {
            return nn::kernel_mha<features::softplus, samplers::gaussian, float>(
                {.dim = base.dim, .heads = base.heads, .num_features = base.num_features, .seed = layer_seed(l)});
        },
        false);
    auto fska = [&](double s, bool positive, bool learnable_v) {
        return [=, &base](index_t l) {
            return nn::fska_attention<float>({.dim = base.dim,
                                              .heads = base.heads,
                                              .num_pairs = base.fska_pairs,
                                              .kl_weight = base.fska_kl_weight,
                                              .positive = positive,
                                              .scale = s,
                                              .learnable_v = learnable_v,
                                              .seed = layer_seed(l)});
        };
    };
    compare("fska", fska(1.0, true, false), false);
    compare("fska-s4", fska(4.0, true, false), false);
    compare("fska-signed", fska(1.0, false, false), false);
    compare("fska-learnable-v", fska(1.0, true, true), false);
    auto coulomb = [&]<class Map>(bool shrunk) {
        nn::coulomb_config c{.dim = base.dim, .heads = base.heads, .num_features = base.num_features};
        if (shrunk) c.sigma = std::sqrt(double(base.dim / base.heads)) / c.langevin.radius;
        return [=](index_t l) {
            nn::coulomb_config cl = c;
            cl.seed = layer_seed(l);
            return nn::coulomb_attention<Map, float>(cl);
        };
    };
    compare("vanilla-elu", coulomb.template operator()<features::elu>(false), false);
    compare("kernel-favor", coulomb.template operator()<features::favor>(false), true);
    compare("shrunk-softplus", coulomb.template operator()<features::softplus>(true), false);
}

TEST_CASE("nn::model_spec: defaults, checks and the kinds") {
    const nn::model_spec s;
    CHECK(s.kind == "transformer");
    CHECK((s.dim == 64 && s.heads == 4 && s.layers == 2 && s.ffn_hidden == 256 && s.head_hidden == 0));
    CHECK((s.dropout == 0.1 && !s.pre_ln && s.num_features == 64 && s.fska_pairs == 64));
    CHECK((s.fska_kl_weight == 1e-3 && s.fska_scale == 1.0 && s.align_samples == 1024 && s.align_steps == 200));
    CHECK((s.max_length == 64 && s.classes == 2 && s.seed == 1));
    auto bad = [](auto change, const char* what) {
        nn::model_spec t;
        change(t);
        CHECK_THROWS_WITH_AS(nn::check_model_spec(t), doctest::Contains(what), kattn::error);
    };
    bad([](auto& t) { t.heads = 3; }, "'heads'");
    bad([](auto& t) { t.dropout = 1.0; }, "'dropout'");
    bad([](auto& t) { t.classes = 1; }, "'classes'");
    bad([](auto& t) { t.fska_scale = std::nan(""); }, "'fska_scale'");
    bad([](auto& t) { t.kind = "kernel-nope"; }, "'nope'");
    bad([](auto& t) { t.kind = "fska-s4x"; }, "fska-s4x");
    bad([](auto& t) { t.kind = "fska-s4", t.fska_scale = 2; }, "'fska_scale'");
    bad([](auto& t) { t.kind = "softmax"; }, "'softmax'");
    bad([](auto& t) { t.kind = "qk-trig"; }, "after 'qk-', got 'trig'");  // qk- takes the positive maps
    nn::model_spec k;
    k.kind = "fska-s2.5";
    CHECK(nn::resolve_kind(k).scale == 2.5);
    k.kind = "kernel-relu";
    CHECK(nn::needs_alignment(k));
    k.kind = "shrunk-relu";
    CHECK(!nn::needs_alignment(k));
}

TEST_CASE("nn::text_classifier: save and load_model give bitwise the same predictions") {
    temp_dir dir;
    const auto train_t = text_task(300, 1), dev_t = text_task(80, 2);
    const nn::vocabulary vocab = nn::vocabulary::build(train_t.sentences);
    const nn::dataset train = encode(train_t, vocab, 8), dev = encode(dev_t, vocab, 8);
    std::vector<std::string> probe = dev_t.sentences;
    probe.push_back("w5 unseen words W5");
    probe.push_back("");
    // vanilla-softplus carries the optional keys: τ, an input scale and learned scales per head.
    auto spec_for = [](const std::string& kind) {
        nn::model_spec s = tiny(kind);
        if (kind == "vanilla-softplus") s.temperature = 0.5, s.input_scale = 1.25, s.learn_input_scale = true;
        return s;
    };
    for (const std::string kind : {"transformer", "performer", "fska", "kernel-elu", "vanilla-softplus"}) {
        CAPTURE(kind);
        nn::text_classifier clf(spec_for(kind), vocab, {"no", "yes"});
        const auto before = clf.predict_proba(probe);
        const auto fit =
            clf.fit(train, &dev, {.epochs = 2, .batch_size = 16, .lr = 3e-3, .seed = 1, .progress = false});
        CHECK(fit.training.history.size() == 2);
        CHECK(clf.aligned() == (kind == "kernel-elu"));
        CHECK(fit.alignment.size() == (kind == "kernel-elu" ? 2u : 0u));
        const auto p = clf.predict_proba(probe);
        REQUIRE(p.shape()[0] == probe.size());
        REQUIRE(p.shape()[1] == 2);
        CHECK(!same_bits(p, before));  // training changed the model
        const std::string path = dir.file(kind + ".kattn");
        clf.save(path);
        nn::text_classifier back = nn::load_model(path);
        CHECK(back.spec().kind == kind);
        CHECK(back.spec().seed == 3);
        CHECK(nn::spec_text(back.spec()) == nn::spec_text(clf.spec()));
        CHECK(back.label_names() == std::vector<std::string>{"no", "yes"});
        CHECK(back.vocab().to_string() == vocab.to_string());
        CHECK(back.aligned() == clf.aligned());
        CHECK(values(back.parameters()) == values(clf.parameters()));
        CHECK(same_bits(back.predict_proba(probe), p));
        CHECK(same_bits(back.predict_proba(probe, 7), clf.predict_proba(probe, 7)));
        CHECK(back.predict(probe) == clf.predict(probe));
        CHECK(back.predict_names(probe) == clf.predict_names(probe));
        const auto ev = back.evaluate(dev), ev0 = clf.evaluate(dev);
        CHECK(ev.probs == ev0.probs);
        CHECK(ev.metrics.accuracy == ev0.metrics.accuracy);
        CHECK(fit.training.history[1].train_loss < fit.training.history[0].train_loss);
        // trainer::evaluate gives the same numbers.
        clf.visit([&](auto& m) {
            nn::trainer tr(m, {.progress = false});
            CHECK(tr.evaluate(dev).probs == ev0.probs);
        });
        if (kind == "kernel-elu") {
            // Phase A moved Ω away from the seeds' Ω, and the file carries the moved Ω.
            // (One visit per classifier: a visit instantiates its function for every kind.)
            nn::text_classifier fresh(tiny(kind), vocab, {"no", "yes"});
            auto omegas = [](nn::text_classifier& c) {
                using M = nn::text_model<nn::coulomb_attention<features::elu, float>>;
                std::vector<xt::xtensor<float, 2>> o;
                c.visit([&](auto& m) {
                    if constexpr (std::is_same_v<std::decay_t<decltype(m)>, M>)
                        for (index_t l = 0; l < 2; ++l)
                            for (index_t h = 0; h < 2; ++h)
                                o.push_back(m.encoder_stack().layer(l).attention().omega(h));
                });
                return o;
            };
            const auto o = omegas(clf), ob = omegas(back), of = omegas(fresh);
            REQUIRE(o.size() == 4);
            const bool restored = o == ob, moved = o != of;
            CHECK(moved);
            CHECK(restored);
            bool has_omega = false;
            for (const auto& [n, d] : members(path)) has_omega = has_omega || n == "state.encoder.1.attn.omega1.npy";
            CHECK(has_omega);
            // A loaded aligned model trains on without running phase A again.
            CHECK(back.fit(train, nullptr, {.epochs = 1, .batch_size = 32, .progress = false}).alignment.empty());
        }
    }
}

TEST_CASE("nn::load_model: damaged, tampered and other-version files are errors naming the file") {
    temp_dir dir;
    const auto train_t = text_task(60, 1);
    const nn::vocabulary vocab = nn::vocabulary::build(train_t.sentences);
    nn::text_classifier clf(tiny("kernel-elu"), vocab, {"no", "yes"});
    clf.fit(encode(train_t, vocab, 8), nullptr, {.epochs = 1, .batch_size = 16, .progress = false});
    const std::string good = dir.file("good.kattn"), bad = dir.file("bad.kattn");
    clf.save(good);
    REQUIRE(load_error(good).empty());
    const auto ms = members(good);
    REQUIRE(ms.size() >= 4);
    CHECK(ms[0].first == "model.txt");
    CHECK(ms[1].first == "vocabulary.txt");
    CHECK(ms[2].first == "labels.txt");
    CHECK(ms[0].second.rfind("format=kattn-text-classifier\nversion=1\nkind=kernel-elu\n", 0) == 0);
    auto expect = [&](const std::vector<std::string>& parts) {
        const std::string e = load_error(bad);
        CAPTURE(e);
        REQUIRE(!e.empty());
        CHECK(e.find(bad) != std::string::npos);
        for (const auto& p : parts) CHECK(e.find(p) != std::string::npos);
    };
    auto spec_edit = [&](const std::string& key, const std::string& line) {
        edit(good, bad, "model.txt", [&](std::string t) { return replace_line(t, key, line); });
    };
    SUBCASE("another version") {
        spec_edit("version", "version=2");
        expect({"version 2", "version 1 (the version this build reads)"});
    }
    SUBCASE("another format") {
        spec_edit("format", "format=something-else");
        expect({"format=kattn-text-classifier"});
    }
    SUBCASE("an unknown kind") {
        spec_edit("kind", "kind=bogus");
        expect({"'bogus'"});
    }
    SUBCASE("an unknown key") {
        edit(good, bad, "model.txt", [](std::string t) { return t + "colour=blue\n"; });
        expect({"unknown key 'colour'"});
    }
    SUBCASE("a key twice") {
        edit(good, bad, "model.txt", [](std::string t) { return t + "dim=8\n"; });
        expect({"'dim' again"});
    }
    SUBCASE("a key missing") {
        spec_edit("seed", "");
        expect({"key=value"});
    }
    SUBCASE("values out of range") {
        spec_edit("heads", "heads=3");
        expect({"'heads'"});
        spec_edit("dim", "dim=99999999999999999999999");
        expect({"'dim'"});
        spec_edit("dropout", "dropout=nan");
        expect({"'dropout'"});
        spec_edit("aligned", "aligned=2");
        expect({"'aligned'"});
    }
    SUBCASE("a consistent but different spec") {
        spec_edit("dim", "dim=16");
        expect({"shape"});
        spec_edit("layers", "layers=3");
        expect({"missing", "model.encoder.2"});
        spec_edit("seed", "seed=4");  // loads: parameters and Ω come from the file, not the seed
        CHECK(load_error(bad).empty());
    }
    SUBCASE("a spec that would allocate far more than the file holds") {
        spec_edit("max_length", "max_length=1000000");
        spec_edit("dim", "dim=16384");
        expect({"implies"});
    }
    SUBCASE("missing members") {
        for (const std::string m : {"vocabulary.txt", "labels.txt", "model.txt", "model.head.fc1.weight.npy",
                                    "state.encoder.0.attn.omega1.npy"}) {
            CAPTURE(m);
            edit(good, bad, m, nullptr);
            expect({m.substr(0, m.size() - 4)});
        }
    }
    SUBCASE("an unexpected member or array") {
        auto extra = ms;
        extra.emplace_back("notes.txt", "hello\n");
        write_members(bad, extra);
        expect({"'notes.txt'"});
        extra.back() = {"model.extra.npy", ms.back().second};
        write_members(bad, extra);
        expect({"unexpected array 'model.extra'"});
    }
    SUBCASE("bad labels and vocabulary") {
        edit(good, bad, "labels.txt", [](std::string) { return std::string("no\nno\n"); });
        expect({"distinct"});
        edit(good, bad, "labels.txt", [](std::string) { return std::string("no\n"); });
        expect({"label"});
        edit(good, bad, "vocabulary.txt", [](std::string t) { return t.substr(0, t.size() / 2); });
        expect({"vocabulary.txt"});
    }
    SUBCASE("non-finite and out-of-range parameters and frequencies") {
        for (const std::string m : {"model.encoder.0.ffn.fc1.weight.npy", "state.encoder.1.attn.omega0.npy"}) {
            CAPTURE(m);
            bool found = false;
            for (const auto& [n, d] : ms) found = found || n == m;
            REQUIRE(found);
            edit(good, bad, m, [](std::string d) {
                const double x = std::nan("");
                std::memcpy(d.data() + d.size() - 8, &x, 8);
                return d;
            });
            expect({"finite", m.substr(0, m.size() - 4)});
            edit(good, bad, m, [](std::string d) {
                const double x = 1e300;
                std::memcpy(d.data() + d.size() - 8, &x, 8);
                return d;
            });
            expect({"float's range"});
        }
    }
    SUBCASE("a truncated file") {
        const std::string bytes = kattn::detail::read_file(good, "path", 1 << 30);
        for (const std::size_t n : {std::size_t(0), std::size_t(10), bytes.size() / 2, bytes.size() - 1}) {
            kattn::detail::write_file_atomically(bad, std::string_view(bytes).substr(0, n));
            expect({});
        }
    }
    SUBCASE("a tampered byte (the CRC-32 no longer matches)") {
        std::string bytes = kattn::detail::read_file(good, "path", 1 << 30);
        const std::size_t at = bytes.find("dim=8");
        REQUIRE(at != std::string::npos);
        bytes[at + 4] = '9';
        kattn::detail::write_file_atomically(bad, bytes);
        expect({"model.txt", "CRC-32"});
    }
    SUBCASE("a missing file or a directory") {
        CHECK(load_error(dir.file("none.kattn")).find("none.kattn") != std::string::npos);
        CHECK(load_error(dir.path.string()).find("directory") != std::string::npos);
    }
    SUBCASE("a save into a missing directory leaves nothing and throws") {
        CHECK_THROWS_AS(clf.save(dir.file("no/such/dir.kattn")), kattn::error);
    }
}

TEST_CASE("nn::text_classifier: argument checks") {
    const nn::vocabulary vocab = nn::vocabulary::build(text_task(20, 1).sentences);
    CHECK_THROWS_WITH_AS(nn::text_classifier(tiny("fska"), vocab, {"a"}), doctest::Contains("label_names"),
                         kattn::error);
    CHECK_THROWS_WITH_AS(nn::text_classifier(tiny("fska"), vocab, {"a", "a"}), doctest::Contains("distinct"),
                         kattn::error);
    CHECK_THROWS_WITH_AS(nn::text_classifier(tiny("fska"), vocab, {"a", "b\nc"}), doctest::Contains("control"),
                         kattn::error);
    nn::text_classifier clf(tiny("uniform"), vocab, {"a", "b"});
    nn::dataset d = encode(text_task(10, 2), vocab, 8);
    d.texts[3][0] = std::int32_t(vocab.size());
    CHECK_THROWS_WITH_AS(clf.evaluate(d), doctest::Contains("token ids"), kattn::error);
    d.num_classes = 3;
    CHECK_THROWS_WITH_AS(clf.fit(d), doctest::Contains("2 classes"), kattn::error);
    CHECK(clf.predict_proba(std::vector<std::string>{}).shape()[0] == 0);
}

// docs/encoder.md, "Saving and loading a model": the snippet, compiled and run.
TEST_CASE("docs/encoder.md: saving and loading a model") {
    temp_dir dir;
    const auto texts = text_task(200, 5);
    const std::string path = dir.file("sentiment.kattn");
    // --- docs snippet begins ---
    nn::vocabulary vocab = nn::vocabulary::build(texts.sentences);
    nn::dataset train = nn::make_text_dataset(texts.sentences, texts.labels, vocab, 8, "train", 2);

    nn::model_spec spec;  // every field has a default (docs/encoder.md, the table)
    spec.kind = "kernel-elu";
    spec.dim = 16;
    spec.max_length = 8;
    nn::text_classifier clf(spec, vocab, {"negative", "positive"});
    clf.fit(train, nullptr, {.epochs = 2, .batch_size = 32, .progress = false});  // phase A, then training
    clf.save(path);  // one file: spec, vocabulary, labels, parameters, aligned Ω

    nn::text_classifier back = nn::load_model(path);  // nothing restated
    const std::vector<std::string> reviews{"w5 w1 w2", "w0 w1 w2"};
    const auto probs = back.predict_proba(reviews);  // [2, 2]
    const auto names = back.predict_names(reviews);  // e.g. {"positive", "negative"}
    // --- docs snippet ends ---
    CHECK(same_bits(probs, clf.predict_proba(reviews)));
    CHECK(names == clf.predict_names(reviews));
}
