// A row's φ at its own stabiliser shift in one call (detail::activate_own_shift, which the
// chunked and Thrust backends use) gives the bits of row_shift followed by activate, for
// every map with a stabiliser, in float and double: rows of moderate and large norm, a
// zero row, and a row whose projections tie at the maximum. favor and favor_hyperbolic
// provide the one-pass member; the test fails if its signature stops matching (the
// generic two-call path would then be taken silently).
#include "map_cases.hpp"
#include "row_values.hpp"

#include <vector>

namespace {

using kattn::index_t;
using ops = kattn::detail::scalar_ops;

constexpr std::uint64_t stream = 23;  ///< this file's random stream (kt::rows::normal_values)

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
    return a.size() == b.size() && kt::rows::same_bits(a.data(), b.data(), a.size());
}

template <class Map, class T>
void check_rows() {
    const index_t d = 13, m = 24, P = Map::projection_dim(m), F = Map::feature_dim(m);
    const auto p = kt::cases::params<kt::cases::map_case<Map>>();
    const auto omega = kt::rows::normal_values<T>(std::size_t(d * P), 5, 1.0, stream);
    const auto b = kt::rows::normal_values<T>(std::size_t(m), 6, 0.5, stream);
    const T* bias = Map::uses_bias ? b.data() : nullptr;
    for (const double sd : {0.3, 1.0, 4.0, 0.0, -1.0}) {  // −1: projections that tie
        INFO("row sd ", sd);
        std::vector<T> x = sd >= 0 ? kt::rows::normal_values<T>(std::size_t(d), 7, sd, stream)
                                   : std::vector<T>(std::size_t(d), T(0.5));
        std::vector<T> u(std::size_t(P), T(0));
        for (index_t i = 0; i < d; ++i)
            for (index_t q = 0; q < P; ++q) u[std::size_t(q)] += x[std::size_t(i)] * omega[std::size_t(i * P + q)];
        if (sd < 0)
            for (index_t q = 0; q < P; q += 2) u[std::size_t(q)] = T(1.25);
        std::vector<T> phi_two(static_cast<std::size_t>(F)), phi_one(static_cast<std::size_t>(F));
        const T c_two = Map::template row_shift<ops>(p, d, m, x.data(), u.data(), bias);
        Map::template activate<ops>(p, d, m, x.data(), u.data(), bias, c_two, phi_two.data());
        const T c_one = kattn::detail::activate_own_shift<Map, ops>(p, d, m, x.data(), u.data(), bias, phi_one.data());
        CHECK(kt::rows::same_bits(&c_one, &c_two, 1));
        CHECK(same_bits(phi_one, phi_two));
        bool positive = true;
        for (const T f : phi_one) positive = positive && f > T(0);
        CHECK(positive);  // not trivially equal: both rows hold real features
    }
}

template <class Map>
constexpr bool has_one_pass = requires(const kattn::map_params_t<Map>& p, const double* c, double* o) {
    Map::template activate_own_shift<ops>(p, index_t(1), index_t(1), c, c, c, o);
};

}  // namespace

TEST_CASE_TEMPLATE_DEFINE("activate_own_shift gives the bits of row_shift then activate", C, kt_own_shift_case) {
    using Map = typename C::map;
    if constexpr (Map::has_stabiliser) {
        check_rows<Map, double>();
        check_rows<Map, float>();
    }
}
TEST_CASE_TEMPLATE_APPLY(kt_own_shift_case, kt::cases::all_cases);

TEST_CASE("favor and favor_hyperbolic compute their own shift in one pass") {
    CHECK(has_one_pass<kattn::features::favor>);
    CHECK(has_one_pass<kattn::features::favor_hyperbolic>);
    CHECK_FALSE(has_one_pass<kattn::features::elu>);
}
