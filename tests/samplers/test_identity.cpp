// Tests for kattn/samplers/identity.hpp: Ω = I, deterministic, argument errors; and
// detail::omega_is_identity, by which backends skip their products with such an Ω.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include <kattn/features/omega_layout.hpp>
#include <kattn/samplers/identity.hpp>

using kattn::index_t;

TEST_CASE("identity: traits") {
    static_assert(!kattn::samplers::identity::is_random);
    CHECK(std::string(kattn::samplers::identity::name) == "identity");
}

TEST_CASE("identity: writes the unit vectors, independent of seed and sigma") {
    for (index_t d : {1, 2, 5, 16}) {
        std::vector<float> a(static_cast<std::size_t>(d * d), -7.0f);
        std::vector<double> b(static_cast<std::size_t>(d * d), -7.0);
        kattn::samplers::identity::sample(kattn::sampler_params{}, d, d, 1, a.data());
        kattn::samplers::identity::sample(kattn::sampler_params{3.0}, d, d, 99, b.data());
        for (index_t k = 0; k < d; ++k) {
            for (index_t i = 0; i < d; ++i) {
                CHECK(a[static_cast<std::size_t>(k * d + i)] == (k == i ? 1.0f : 0.0f));
                CHECK(b[static_cast<std::size_t>(k * d + i)] == (k == i ? 1.0 : 0.0));
            }
        }
    }
}

TEST_CASE("identity: bad arguments throw kattn::error naming the argument") {
    std::vector<double> out(64);
    auto msg = [&](index_t dim, index_t count, double* p) -> std::string {
        try {
            kattn::samplers::identity::sample(kattn::sampler_params{}, dim, count, 0, p);
        } catch (const kattn::error& e) {
            return e.what();
        }
        return "";
    };
    const std::string m = msg(4, 5, out.data());
    CHECK(m.find("'num_features'") != std::string::npos);
    CHECK(m.find("== head_dim (identity sampler)") != std::string::npos);
    CHECK(m.find("got 5") != std::string::npos);
    CHECK(msg(4, 3, out.data()).find("'num_features'") != std::string::npos);
    CHECK(msg(0, 0, out.data()).find("'dim'") != std::string::npos);
    CHECK(msg(4, 4, nullptr).find("'out'") != std::string::npos);
    CHECK(msg(4, 4, out.data()).empty());
}

TEST_CASE("omega_is_identity: what the sampler writes, and nothing else") {
    for (index_t d : {1, 2, 8}) {
        std::vector<double> w(static_cast<std::size_t>(d * d));
        kattn::samplers::identity::sample(kattn::sampler_params{}, d, d, 0, w.data());
        CHECK(kattn::detail::omega_is_identity(d, d, w.data()));
        // Any one entry changed, however little: not the identity.
        for (std::size_t e = 0; e < w.size(); ++e) {
            auto c = w;
            c[e] += 1.0 / double(1ull << 40);
            CHECK_FALSE(kattn::detail::omega_is_identity(d, d, c.data()));
        }
    }
    std::vector<float> wide(2 * 4 * 4, 0.0f);  // d = 4, P = 8: the identity in its first columns
    for (index_t i = 0; i < 4; ++i) wide[static_cast<std::size_t>(i * 8 + i)] = 1.0f;
    CHECK_FALSE(kattn::detail::omega_is_identity(index_t(4), index_t(8), wide.data()));
    CHECK_FALSE(kattn::detail::omega_is_identity(index_t(4), index_t(4), static_cast<const float*>(nullptr)));
}
