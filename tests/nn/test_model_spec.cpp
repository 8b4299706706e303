// nn::model_spec's map options: temperature τ and input_scale reach the operator of every
// layer and head that the factory builds (qk-<map> and the Coulomb kinds), the kinds without
// a map of their own and the maps without τ reject them by name, and model files carry them
// as optional keys (written only when not the defaults, so older files keep loading).
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <sstream>
#include <string>

#include <kattn/nn/model_factory.hpp>

using namespace kattn;

namespace {

nn::model_spec small(const std::string& kind) {
    return {.kind = kind, .dim = 16, .heads = 2, .layers = 2, .ffn_hidden = 16, .num_features = 8, .max_length = 8};
}

/// Calls f(op) for the linear_attention operator of every layer and head of spec's model.
template <class F>
void for_each_operator(const nn::model_spec& spec, F&& f) {
    nn::with_text_model(spec, 10, [&](auto& model) {
        auto& enc = model.encoder_stack();
        for (index_t l = 0; l < spec.layers; ++l) {
            auto& a = enc.layer(l).attention();
            if constexpr (requires { a.attention(index_t(0)); }) {  // Coulomb: one operator per head
                for (index_t h = 0; h < spec.heads; ++h) f(a.attention(h));
            } else if constexpr (requires { a.attention(); }) {  // kernel_mha: one operator, all heads
                f(a.attention());
            } else {
                FAIL("no feature-map operator in kind " << spec.kind);
            }
        }
    });
}

std::map<std::string, std::string> key_values(const std::string& text) {
    std::map<std::string, std::string> kv;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        const auto eq = line.find('=');
        REQUIRE(eq != std::string::npos);
        kv[line.substr(0, eq)] = line.substr(eq + 1);
    }
    return kv;
}

}  // namespace

TEST_CASE("nn::model_spec: temperature and input_scale reach every layer's map") {
    const double dh = 8;  // dim / heads
    struct expect {
        const char* kind;
        double temperature, input_scale, scale_used, tau_used;
    };
    for (const expect e :
         {expect{"kernel-softmax_features", 0.25, 0.7, 0.7, 0.25}, expect{"shrunk-sigmoid2", 3.0, 0.0, 1.0, 3.0},
          expect{"vanilla-favor", 1.0, 2.0, 2.0, -1}, expect{"kernel-favor", 1.0, 0.0, std::pow(dh, -0.25), -1},
          expect{"qk-softplus", 0.5, 1.5, 1.5, 0.5}, expect{"qk-elu", 1.0, 0.0, 1.0, 1.0}}) {
        CAPTURE(e.kind);
        nn::model_spec s = small(e.kind);
        s.temperature = e.temperature;
        s.input_scale = e.input_scale;
        nn::check_model_spec(s);
        int operators = 0;
        for_each_operator(s, [&](const auto& op) {
            ++operators;
            CHECK(double(op.input_scale()) == doctest::Approx(e.scale_used).epsilon(1e-7));
            if constexpr (requires { op.config().feature.temperature; })
                CHECK(op.config().feature.temperature == e.tau_used);
            else
                CHECK(e.tau_used == -1);  // the map has no τ
        });
        const bool per_head = std::string(e.kind).starts_with("qk-") == false;
        CHECK(operators == int(s.layers * (per_head ? s.heads : 1)));
    }
}

TEST_CASE("nn::model_spec: temperature and input_scale are checked by name") {
    auto bad = [](auto change, const char* what, const char* also) {
        nn::model_spec t = small("kernel-softplus");
        change(t);
        CHECK_THROWS_WITH_AS(nn::check_model_spec(t), doctest::Contains(what), kattn::error);
        CHECK_THROWS_WITH_AS(nn::check_model_spec(t), doctest::Contains(also), kattn::error);
    };
    bad([](auto& t) { t.temperature = 0; }, "'temperature'", "> 0");
    bad([](auto& t) { t.temperature = std::nan(""); }, "'temperature'", "finite");
    bad([](auto& t) { t.input_scale = -1; }, "'input_scale'", ">= 0");
    bad([](auto& t) { t.input_scale = INFINITY; }, "'input_scale'", "finite");
    bad([](auto& t) { t.kind = "kernel-favor", t.temperature = 2; }, "'temperature'", "'favor', which has no");
    bad([](auto& t) { t.kind = "qk-cos2", t.temperature = 2; }, "'temperature'", "'cos2'");
    for (const char* kind : {"transformer", "performer", "fska", "uniform"}) {
        CAPTURE(kind);
        bad([&](auto& t) { t.kind = kind, t.temperature = 2; }, "'temperature'", kind);
        bad([&](auto& t) { t.kind = kind, t.input_scale = 2; }, "'input_scale'", kind);
    }
    bad([](auto& t) { t.kind = "qk-softplus", t.learn_input_scale = true; }, "'learn_input_scale'", "qk-softplus");
    bad([](auto& t) { t.kind = "performer", t.learn_input_scale = true; }, "'learn_input_scale'", "Coulomb");
    nn::model_spec ok = small("kernel-favor");
    ok.input_scale = 0.3;  // favor has no τ but takes an input scale
    CHECK_NOTHROW(nn::check_model_spec(ok));
}

TEST_CASE("nn::model_spec: the file keys temperature and input_scale are optional") {
    const nn::model_spec d = small("kernel-softplus");
    const std::string plain = nn::spec_text(d);
    CHECK(plain.find("temperature") == std::string::npos);  // defaults: the text of older files
    CHECK(plain.find("input_scale") == std::string::npos);
    const nn::model_spec back = nn::parse_model_spec(key_values(plain), "m");
    CHECK((back.temperature == 1.0 && back.input_scale == 0.0));

    nn::model_spec s = d;
    s.temperature = 0.1 + 0.2;  // not a short decimal: must round-trip exactly
    s.input_scale = 1.0 / 3.0;
    s.learn_input_scale = true;
    const auto kv = key_values(nn::spec_text(s));
    REQUIRE(kv.contains("temperature"));
    REQUIRE(kv.contains("input_scale"));
    REQUIRE(kv.contains("learn_input_scale"));
    const nn::model_spec r = nn::parse_model_spec(kv, "m");
    CHECK(r.temperature == s.temperature);
    CHECK(r.input_scale == s.input_scale);
    CHECK(r.learn_input_scale);
    CHECK(nn::spec_text(r) == nn::spec_text(s));

    auto rejects = [](std::map<std::string, std::string> kv, const char* what) {
        CHECK_THROWS_WITH_AS(nn::parse_model_spec(std::move(kv), "model.txt"), doctest::Contains(what), kattn::error);
    };
    auto with = [&](const char* key, const char* value) {
        auto m = kv;
        m[key] = value;
        return m;
    };
    rejects(with("temperature", "abc"), "'temperature' a finite decimal number");
    rejects(with("input_scale", "-2"), "input_scale");
    rejects(with("temperature", "0"), "temperature");
    rejects(with("learn_input_scale", "2"), "'learn_input_scale' a decimal integer in [0, 1]");
    auto t = with("temperature", "2");
    t["kind"] = "performer";
    rejects(t, "'temperature'");
}

TEST_CASE("nn::model_spec: learn_input_scale gives every Coulomb layer a learned scale per head") {
    nn::model_spec s = small("vanilla-favor");
    s.input_scale = 0.9;
    s.learn_input_scale = true;
    nn::with_text_model(s, 10, [&](auto& model) {
        auto& enc = model.encoder_stack();
        if constexpr (requires { enc.layer(0).attention().input_scale(index_t(0)); }) {
            for (index_t l = 0; l < s.layers; ++l)
                for (index_t h = 0; h < s.heads; ++h) CHECK(enc.layer(l).attention().input_scale(h) == 0.9f);
            nn::parameter_list ps;
            model.collect(ps, "m");
            int scales = 0;
            for (const auto& p : ps) scales += p.name.ends_with(".log_scale") && p.size() == s.heads;
            CHECK(scales == int(s.layers));
        } else {
            FAIL("vanilla-favor did not build Coulomb layers");
        }
    });
}
