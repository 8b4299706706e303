// simd backend: agreement with the reference oracle for every map × mask × pass, and
// bitwise thread-count determinism (including the segmented single-sequence path).
#include <omp.h>

#include "../support.hpp"

namespace {

using namespace kattn;

template <class Map, class T, class Backend>
using attn = linear_attention<Map, typename Map::default_sampler, Backend, T>;

struct case_result {
    xt::xtensor<double, 4> out, dq, dk, dv;
    xt::xtensor<double, 2> d_omega;
    xt::xtensor<double, 1> d_bias;
};

template <class Map, class T, class Backend>
case_result run_case(index_t B, index_t H, index_t L, bool causal, bool padded) {
    // Signed maps use a wider kernel (σ = 3) so that denominators stay away from zero.
    const attention_config cfg{
        .head_dim = 8, .value_dim = 5, .num_features = 16, .seed = 3, .sigma = Map::is_positive ? 1.0 : 3.0};
    const attn<Map, T, Backend> a(cfg);
    const auto sb = std::size_t(B), sh = std::size_t(H), sl = std::size_t(L);
    const auto q = kt::randn<T, 4>({sb, sh, sl, 8}, 1, 0.5), k = kt::randn<T, 4>({sb, sh, sl, 8}, 2, 0.5);
    const auto v = kt::randn<T, 4>({sb, sh, sl, 5}, 3), G = kt::randn<T, 4>({sb, sh, sl, 5}, 4);
    std::vector<index_t> lens(sb);
    for (index_t b = 0; b < B; ++b) lens[std::size_t(b)] = padded ? std::max<index_t>(1, L - 3 * b - 1) : L;
    const key_lengths kl(lens);
    const auto out = causal ? a(q, k, v, kattn::causal, kl) : a(q, k, v, kl);
    const auto g = causal ? a.backward(q, k, v, G, kattn::causal, kl) : a.backward(q, k, v, G, kl);
    return {xt::cast<double>(out),  xt::cast<double>(g.dq),      xt::cast<double>(g.dk),
            xt::cast<double>(g.dv), xt::cast<double>(g.d_omega), xt::cast<double>(g.d_bias)};
}

template <class Map, class T>
void compare(index_t B, index_t H, index_t L, bool causal, bool padded, double tol) {
    INFO(Map::name, " L=", L, " causal=", causal, " padded=", padded, " T=", sizeof(T) == 4 ? "float" : "double");
    const auto r = run_case<Map, T, backends::reference>(B, H, L, causal, padded);
    const auto s = run_case<Map, T, backends::simd>(B, H, L, causal, padded);
    CHECK(kt::rel_err(s.out, r.out) < tol);
    CHECK(kt::rel_err(s.dv, r.dv) < tol);
    if (L == 1) return;  // a single token: out = v, so dq = dk = dΩ = 0 up to rounding
    CHECK(kt::rel_err(s.dq, r.dq) < tol);
    CHECK(kt::rel_err(s.dk, r.dk) < tol);
    CHECK(kt::rel_err(s.d_omega, r.d_omega) < tol);
    if (r.d_bias.size()) CHECK(kt::rel_err(s.d_bias, r.d_bias) < tol);
}

}  // namespace

TEST_CASE_TEMPLATE_DEFINE("simd backend equals the reference backend", Map, kt_simd_every_map) {
    // L = 2100 with one head exercises the segmented single-sequence path (2 segments);
    // 1, 7, 64, 150 cover partial and exact tiles.
    for (index_t L : {1, 7, 64, 150, 2100})
        for (bool causal : {false, true})
            for (bool padded : {false, true}) {
                const index_t B = L > 1000 ? 1 : 2, H = L > 1000 ? 1 : 3;
                compare<Map, double>(B, H, L, causal, padded, 1e-10);
                compare<Map, float>(B, H, L, causal, padded, Map::is_positive ? 1e-4 : 5e-4);
            }
}
TEST_CASE_TEMPLATE_APPLY(kt_simd_every_map, kattn::type_list_apply_t<std::tuple, kattn::features::all>);

TEST_CASE("simd features equal the reference features") {
    const attention_config cfg{.head_dim = 16, .value_dim = 4, .num_features = 64, .seed = 9};
    const auto x = kt::randn<float, 2>({150, 16}, 5, 0.5);
    const auto ps = attn<features::favor, float, backends::simd>(cfg).features(x);
    const auto pr = attn<features::favor, float, backends::reference>(cfg).features(x);
    CHECK(kt::rel_err(ps, pr) < 1e-5);
    const auto ts = attn<features::nonstationary, float, backends::simd>(cfg).features(x);
    const auto tr = attn<features::nonstationary, float, backends::reference>(cfg).features(x);
    CHECK(kt::rel_err(ts, tr) < 1e-5);
}

TEST_CASE_TEMPLATE("simd results are bitwise identical for 1 and 2 threads", Map, features::favor, features::trig,
                   features::elu) {
    const int saved = omp_get_max_threads();
    for (auto [B, H, L] : {std::tuple<index_t, index_t, index_t>{1, 1, 3000}, {2, 3, 200}})
        for (bool causal : {false, true}) {
            omp_set_num_threads(1);
            const auto a = run_case<Map, float, backends::simd>(B, H, L, causal, true);
            omp_set_num_threads(2);
            const auto b = run_case<Map, float, backends::simd>(B, H, L, causal, true);
            INFO(Map::name, " L=", L, " causal=", causal);
            CHECK(a.out == b.out);
            CHECK(a.dq == b.dq);
            CHECK(a.dk == b.dk);
            CHECK(a.dv == b.dv);
            CHECK(a.d_omega == b.d_omega);
        }
    omp_set_num_threads(saved);
}
