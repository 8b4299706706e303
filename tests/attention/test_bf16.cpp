// bf16 tensors: the kattn::bf16 type's rounding, the AVX512-BF16 tile products and packing,
// and linear_attention's bf16 forward against the double reference of the same (rounded)
// inputs, on every map; the float path it falls back to; threads; errors.
#include <omp.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <limits>
#include <random>

#include <kattn/linalg/gemm_amx.hpp>

#include "../error_text.hpp"
#include "../support.hpp"

namespace {

using namespace kattn;

/// The bf16 nearest to x by exhaustive comparison in double (ties to the even bit pattern).
std::uint16_t nearest_bf16(float x) {
    const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
    const auto down = std::uint16_t(u >> 16), up = std::uint16_t(down + 1);
    const double a = float(bf16::from_bits(down)), b = float(bf16::from_bits(up));
    // Past the largest finite bf16 the upper candidate is inf: use its would-be value 2^128.
    const double bv = std::isinf(b) ? std::copysign(std::ldexp(1.0, 128), b) : b;
    const double da = std::abs(double(x) - a), db = std::abs(double(x) - bv);
    if (da < db) return down;
    if (db < da) return up;
    return (down & 1) ? up : down;
}

template <class Map>
using attn = linear_attention<Map, typename Map::default_sampler, backends::simd, float>;
template <class Map>
using ref_attn = linear_attention<Map, typename Map::default_sampler, backends::reference, double>;

template <class Map>
attention_config<Map, typename Map::default_sampler> config(index_t d, index_t dv, index_t m) {
    return {.head_dim = d, .value_dim = dv, .num_features = m, .seed = 5, .sigma = Map::is_positive ? 1.0 : 3.0};
}

/// max |a − b| / max |b|.
double scaled_error(const xt::xtensor<float, 4>& a, const xt::xtensor<double, 4>& b) {
    double e = 0, s = 0;
    for (std::size_t i = 0; i < b.size(); ++i) {
        e = std::max(e, std::abs(double(a.data()[i]) - b.data()[i]));
        s = std::max(s, std::abs(b.data()[i]));
    }
    return e / s;
}

bool same_bits(const xt::xtensor<bf16, 4>& a, const xt::xtensor<bf16, 4>& b) {
    if (a.shape() != b.shape()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (a.data()[i].bits != b.data()[i].bits) return false;
    return true;
}

}  // namespace

TEST_CASE("bf16: every pattern widens and rounds back to itself; floats round to nearest, ties to even") {
    for (std::uint32_t b = 0; b < 65536; ++b) {
        const auto h = bf16::from_bits(std::uint16_t(b));
        const float f = h;
        if (std::isnan(f)) {
            CHECK(std::isnan(float(bf16(f))));
            continue;
        }
        REQUIRE(bf16(f).bits == h.bits);
    }
    std::mt19937 g(7);
    std::uniform_int_distribution<std::uint32_t> bits;
    for (int i = 0; i < 200000; ++i) {
        const float x = std::bit_cast<float>(bits(g));
        if (std::isnan(x)) continue;
        REQUIRE(bf16(x).bits == nearest_bf16(x));
    }
    // Exact ties: 1 + 2^-8 lies halfway between 1 and 1 + 2^-7 (goes to 1, the even one);
    // 1 + 3·2^-8 goes up to 1 + 2^-6.
    CHECK(float(bf16(1.0f + 0x1p-8f)) == 1.0f);
    CHECK(float(bf16(1.0f + 3 * 0x1p-8f)) == 1.0f + 0x1p-6f);
    CHECK(std::isinf(float(bf16(FLT_MAX))));
    CHECK(float(bf16(-0.0f)) == 0.0f);
    CHECK(std::signbit(float(bf16(-0.0f))));
    CHECK(std::isnan(float(bf16(std::numeric_limits<float>::quiet_NaN()))));
    CHECK(std::isnan(float(bf16(std::bit_cast<float>(0x7f800001u)))));  // a NaN whose payload rounding would give inf
}

TEST_CASE("bf16 tile products on AMX: every block shape against a double sum of the rounded operands") {
    if (!detail::bf16_amx_supported()) {
        MESSAGE("no AMX-BF16 here; the bf16 operators run the float path (tested below)");
        return;
    }
#if KATTN_BF16_KERNELS
    std::mt19937 g(3);
    std::normal_distribution<float> nd;
    // M, N: one or two tiles per block and the mixed edges; K: one and three k-tiles, filled
    // from fewer rows (the packing's zeros).
    for (index_t M : {16, 32, 48, 64})
        for (index_t N : {16, 32, 48, 80})
            for (index_t K : {5, 32, 70})
                for (bool acc : {false, true}) {
                    INFO("M=", M, " N=", N, " K=", K, " accumulate=", acc);
                    const index_t Kp = (K + 31) / 32 * 32, ldb = N + 16;  // a B stride wider than N
                    std::vector<float> A(std::size_t(M * K)), B(std::size_t(K * N)), C(std::size_t(M * N));
                    for (auto& x : A) x = nd(g);
                    for (auto& x : B) x = nd(g);
                    for (auto& x : C) x = nd(g);
                    const auto C0 = C;
                    std::vector<bf16> Ar(std::size_t(M * Kp));
                    detail::pack_rows(M, K, A.data(), K, Ar.data(), Kp);
                    std::vector<std::uint32_t> Bp(std::size_t(Kp / 2 * ldb), 0xffffffffu);
                    detail::pack_pair_rows(K, N, B.data(), N, Bp.data(), ldb, Kp / 2);
                    // pair_columns of the rounded Bᵀ gives the same words, transposed.
                    std::vector<bf16> Br(std::size_t(K * N));
                    for (std::size_t i = 0; i < Br.size(); ++i) Br[i] = bf16(B[i]);
                    std::vector<std::uint32_t> Bt(std::size_t((N + 16) * Kp / 2), 0xffffffffu);
                    detail::pair_columns(K, N, Br.data(), N, Bt.data(), Kp / 2, N + 16);
                    for (index_t p = 0; p < Kp / 2; ++p)
                        for (index_t j = 0; j < N + 16; ++j) {
                            const std::uint32_t want = j < N ? Bp[std::size_t(p * ldb + j)] : 0u;
                            REQUIRE(Bt[std::size_t(j * Kp / 2 + p)] == want);
                            if (j >= N) REQUIRE(Bp[std::size_t(p * ldb + j)] == 0u);  // padded columns
                        }
                    detail::gemm_amx(M, N, Kp / 32, Ar.data(), Kp, Bp.data(), ldb, C.data(), N, acc);
                    for (index_t i = 0; i < M; ++i)
                        for (index_t j = 0; j < N; ++j) {
                            double s = acc ? C0[std::size_t(i * N + j)] : 0.0, a = std::abs(s);
                            for (index_t k = 0; k < K; ++k) {
                                const double t = double(float(bf16(A[std::size_t(i * K + k)]))) *
                                                 float(bf16(B[std::size_t(k * N + j)]));
                                s += t;
                                a += std::abs(t);
                            }
                            REQUIRE(std::abs(C[std::size_t(i * N + j)] - s) <= double(K + 2) * 0x1p-24 * a);
                        }
                }
#endif
}

TEST_CASE_TEMPLATE_DEFINE("bf16 forward: the double reference of the rounded inputs, every map", Map, kt_bf16_maps) {
    // d odd (a zero pair), m odd where the map allows (an odd feature count); two segments.
    struct shape {
        index_t B, H, L, d, dv, m;
    };
    const index_t m_odd = feature_map_traits<Map>::uses_pairs ? 14 : 13;
    for (const auto s : {shape{2, 3, 70, 8, 5, 16}, shape{1, 1, 2100, 7, 9, m_odd}})
        for (bool padded : {false, true}) {
            INFO(Map::name, " L=", s.L, " d=", s.d, " m=", s.m, " padded=", padded);
            const auto a = attn<Map>(config<Map>(s.d, s.dv, s.m));
            const auto r = ref_attn<Map>(config<Map>(s.d, s.dv, s.m));
            const auto sb = std::size_t(s.B), sh = std::size_t(s.H), sl = std::size_t(s.L);
            const auto q = to_bf16(kt::randn<float, 4>({sb, sh, sl, std::size_t(s.d)}, 1, 0.5));
            const auto k = to_bf16(kt::randn<float, 4>({sb, sh, sl, std::size_t(s.d)}, 2, 0.5));
            const auto v = to_bf16(kt::randn<float, 4>({sb, sh, sl, std::size_t(s.dv)}, 3));
            std::vector<index_t> lens(sb, s.L);
            if (padded) lens[0] = s.L / 2 + 1;
            const auto out = padded ? a(q, k, v, key_lengths{lens}) : a(q, k, v);
            const xt::xtensor<double, 4> qd = xt::cast<double>(to_float(q)), kd = xt::cast<double>(to_float(k)),
                                         vd = xt::cast<double>(to_float(v));
            const auto want = padded ? r(qd, kd, vd, key_lengths{lens}) : r(qd, kd, vd);
            const double e = scaled_error(to_float(out), want);
            // Ω, Φ and S are rounded to bf16 (relative 2^-9 each), the output once more.
            CHECK(e < 1.5e-2);  // measured 0.3–1.0 %
            // The float path on the same inputs is the finer answer; bf16 stays near it.
            const auto wide = padded ? a(to_float(q), to_float(k), to_float(v), key_lengths{lens})
                                     : a(to_float(q), to_float(k), to_float(v));
            CHECK(scaled_error(wide, want) < 1e-4);
        }
}
TEST_CASE_TEMPLATE_APPLY(kt_bf16_maps, kattn::type_list_apply_t<std::tuple, kattn::features::all>);

TEST_CASE("bf16 tensors: causal forwards, other backends and the backward run the float path") {
    const auto cfg = config<features::favor>(8, 5, 16);
    const auto q = to_bf16(kt::randn<float, 4>({2, 2, 150, 8}, 1, 0.5));
    const auto k = to_bf16(kt::randn<float, 4>({2, 2, 150, 8}, 2, 0.5));
    const auto v = to_bf16(kt::randn<float, 4>({2, 2, 150, 5}, 3));
    const attn<features::favor> a(cfg);
    CHECK(same_bits(a(q, k, v, kattn::causal), to_bf16(a(to_float(q), to_float(k), to_float(v), kattn::causal))));
    const linear_attention<features::favor, samplers::orthogonal_gaussian, backends::reference, float> r(cfg);
    CHECK(same_bits(r(q, k, v), to_bf16(r(to_float(q), to_float(k), to_float(v)))));
    // The backward of bf16 tensors is the float backward of the widened tensors.
    const auto G = to_bf16(kt::randn<float, 4>({2, 2, 150, 5}, 4));
    for (bool causal : {false, true}) {
        const auto gb = causal ? a.backward(q, k, v, G, kattn::causal) : a.backward(q, k, v, G);
        const auto gf = causal ? a.backward(to_float(q), to_float(k), to_float(v), to_float(G), kattn::causal)
                               : a.backward(to_float(q), to_float(k), to_float(v), to_float(G));
        CHECK(gb.dq == gf.dq);
        CHECK(gb.dk == gf.dk);
        CHECK(gb.dv == gf.dv);
        CHECK(gb.d_omega == gf.d_omega);
    }
    // The simd kernels agree with the reference's float path within bf16's rounding.
    double e = 0;
    const auto so = to_float(a(q, k, v)), ro = to_float(r(q, k, v));
    for (std::size_t i = 0; i < so.size(); ++i) e = std::max(e, double(std::abs(so.data()[i] - ro.data()[i])));
    CHECK(e < 2e-2);
}

TEST_CASE("bf16 forward: the same bits on 1 and 2 threads") {
    const attn<features::favor> a(config<features::favor>(64, 64, 256));
    const auto q = to_bf16(kt::randn<float, 4>({1, 2, 3000, 64}, 1, 0.3));
    const auto k = to_bf16(kt::randn<float, 4>({1, 2, 3000, 64}, 2, 0.3));
    const auto v = to_bf16(kt::randn<float, 4>({1, 2, 3000, 64}, 3));
    const int before = omp_get_max_threads();
    omp_set_num_threads(1);
    const auto one = a(q, k, v);
    omp_set_num_threads(2);
    const auto two = a(q, k, v);
    omp_set_num_threads(before);
    CHECK(same_bits(one, two));
}

TEST_CASE("bf16 forward: bad shapes and non-finite inputs are errors naming the argument") {
    const attn<features::favor> a(config<features::favor>(8, 5, 16));
    const auto q = to_bf16(kt::randn<float, 4>({1, 2, 10, 8}, 1));
    const auto v = to_bf16(kt::randn<float, 4>({1, 2, 10, 5}, 3));
    const auto bad = to_bf16(kt::randn<float, 4>({1, 2, 10, 7}, 2));
    CHECK(kt::contains(kt::error_text([&] { (void)a(q, bad, v); }), "argument 'k'"));
    auto nan = q;
    nan.data()[17] = bf16(std::numeric_limits<float>::infinity());
    CHECK(kt::contains(kt::error_text([&] { (void)a(nan, q, v); }), "argument 'q': expected finite values"));
}
