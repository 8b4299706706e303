// detail::elementwise_features: a map that says it is element-wise under its parameters gives,
// for every contiguous slice of a row (m = the slice's width, x = the slice of u), the bits
// of that slice of the whole row's φ, du and db, and no direct x term. The CUDA backend's
// fused causal backward relies on it (each element's VJP on its own). Checked for every map
// of the registry, with renormalisation on and off where the map has it; maps that are not
// element-wise (sums over the features, m in the formula, pairs, stabilisers) must say no.
#include "map_cases.hpp"
#include "row_values.hpp"

#include <utility>
#include <vector>

namespace {

using kattn::index_t;
using ops = kattn::detail::scalar_ops;

constexpr std::uint64_t stream = 29;  ///< this file's random stream (kt::rows::normal_values)

/// φ, du, dx and db of one row of m features (d = m: x = u, as with Ω = I).
template <class Map, class T>
struct row_vjp {
    std::vector<T> phi, du, dx, db;
    row_vjp(const kattn::map_params_t<Map>& p, index_t m, const T* u, const T* b, const T* dphi)
        : phi(std::size_t(m)), du(std::size_t(m)), dx(std::size_t(m)), db(std::size_t(m)) {
        std::vector<T> work(std::size_t(Map::workspace(m)) + 1);
        Map::template activate<ops>(p, m, m, u, u, b, T(0), phi.data());
        Map::template activate_vjp<ops>(p, m, m, u, u, b, T(0), phi.data(), dphi, du.data(), dx.data(),
                                        Map::uses_bias ? db.data() : nullptr, work.data());
    }
};

template <class Map, class T>
void check_slices(const kattn::map_params_t<Map>& p) {
    const index_t m = 24;
    const auto u = kt::rows::normal_values<T>(std::size_t(m), 1, 1.5, stream);
    const auto b = kt::rows::normal_values<T>(std::size_t(m), 2, 0.7, stream);
    const auto dphi = kt::rows::normal_values<T>(std::size_t(m), 3, 1.0, stream);
    const T* bias = Map::uses_bias ? b.data() : nullptr;
    const row_vjp<Map, T> whole(p, m, u.data(), bias, dphi.data());
    bool moves = false;
    for (index_t l = 0; l < m; ++l) {
        CHECK(whole.dx[std::size_t(l)] == T(0));  // no direct x term
        moves = moves || whole.du[std::size_t(l)] != T(0);
    }
    CHECK(moves);  // not trivially equal: the row has a gradient
    // One feature (as the fused backward takes them), a few widths, the row's ends.
    for (const auto [a, w] : {std::pair<index_t, index_t>{0, 1}, {23, 1}, {7, 1}, {3, 4}, {5, 11}, {16, 8}}) {
        INFO("slice [", a, ", ", a + w, ")");
        const row_vjp<Map, T> part(p, w, u.data() + a, bias ? bias + a : nullptr, dphi.data() + a);
        CHECK(kt::rows::same_bits(part.phi.data(), whole.phi.data() + a, std::size_t(w)));
        CHECK(kt::rows::same_bits(part.du.data(), whole.du.data() + a, std::size_t(w)));
        if (Map::uses_bias) CHECK(kt::rows::same_bits(part.db.data(), whole.db.data() + a, std::size_t(w)));
    }
}

template <class Map>
void check_params(const kattn::map_params_t<Map>& p) {
    if (!kattn::detail::elementwise_features<Map>(p)) return;
    check_slices<Map, double>(p);
    check_slices<Map, float>(p);
}

}  // namespace

TEST_CASE_TEMPLATE_DEFINE("element-wise maps: a slice of a row has the bits of the row's slice", C,
                          kt_elementwise_case) {
    using Map = typename C::map;
    auto p = kt::cases::params<C>();
    check_params<Map>(p);
    // Renormalisation couples the features: with it on, no map is element-wise.
    if (kattn::detail::assign_parameter(p, kattn::detail::field::renormalize, true))
        CHECK_FALSE(kattn::detail::elementwise_features<Map>(p));
    if (kattn::detail::assign_parameter(p, kattn::detail::field::renormalize, false)) check_params<Map>(p);
}
TEST_CASE_TEMPLATE_APPLY(kt_elementwise_case, kt::cases::all_cases);

TEST_CASE("element-wise maps: which maps say so") {
    namespace kf = kattn::features;
    kf::tempered_params plain;
    plain.renormalize = false;
    CHECK(kattn::detail::elementwise_features<kf::elu>(plain));
    CHECK(kattn::detail::elementwise_features<kf::softplus>(plain));
    CHECK(kattn::detail::elementwise_features<kf::sigmoid2>(plain));
    kf::cos2::params c;
    c.renormalize = false;
    CHECK(kattn::detail::elementwise_features<kf::cos2>(c));
    // relu scales by m^{-1/2}; the others sum over features, use pairs or a stabiliser.
    CHECK_FALSE(kattn::detail::elementwise_features<kf::relu>({}));
    CHECK_FALSE(kattn::detail::elementwise_features<kf::favor>({}));
    CHECK_FALSE(kattn::detail::elementwise_features<kf::softmax_features>({}));
    CHECK_FALSE(kattn::detail::elementwise_features<kf::trig>({}));
    CHECK_FALSE(kattn::detail::elementwise_features<kf::porf_softplus>({}));
}
