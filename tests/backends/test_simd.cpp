// simd backend: agreement with the reference oracle for every map × mask × pass, and
// bitwise thread-count determinism (including the segmented single-sequence path); Ω = I,
// which runs without products with Ω.
#include <omp.h>

#include <string>

#include "../support.hpp"
#include "backend_cases.hpp"

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
case_result run_case(index_t B, index_t H, index_t L, bool causal, bool padded,
                     std::size_t cache_bytes = attention_config<>{}.backward_cache_bytes) {
    // Signed maps use a wider kernel (σ = 3) so that denominators stay away from zero.
    attention_config cfg{
        .head_dim = 8, .value_dim = 5, .num_features = 16, .seed = 3, .sigma = Map::is_positive ? 1.0 : 3.0};
    cfg.backward_cache_bytes = cache_bytes;
    const attn<Map, T, Backend> a(cfg);
    const kt::small_problem<T> pr(B, H, L, padded);
    const auto &q = pr.q, &k = pr.k, &v = pr.v, &G = pr.G;
    const key_lengths kl(pr.lens);
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

TEST_CASE_TEMPLATE("simd backend with Ω = I (no products with Ω) equals the reference", Map, features::elu,
                   features::favor, features::softmax_features) {
    for (index_t L : {7, 150})
        for (bool causal : {false, true})
            for (bool padded : {false, true}) {
                INFO(std::string(Map::name), " L=", L, " causal=", causal, " padded=", padded);
                kt::check_close(kt::run_identity_case<Map, double, backends::simd>(2, 3, L, causal, padded),
                                kt::run_identity_case<Map, double, backends::reference>(2, 3, L, causal, padded), L,
                                1e-10);
                const auto f = kt::run_identity_case<Map, float, backends::simd>(2, 3, L, causal, padded);
                kt::check_close(f, kt::run_identity_case<Map, float, backends::reference>(2, 3, L, causal, padded), L,
                                1e-4);
                // Ω nudged off the identity: the products run, and change only the rounding.
                kt::check_close(f, kt::run_identity_case<Map, float, backends::simd>(2, 3, L, causal, padded, true), L,
                                1e-5);
            }
}

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

TEST_CASE_TEMPLATE("simd backward: kept tiles and recomputed tiles give the same bits", Map, features::favor,
                   features::trig, features::elu, features::nonstationary, features::softmax_features) {
    // backward_cache_bytes = 0 recomputes what the later passes need (causal: the reverse
    // pass's tiles; non-causal: the key pass's projections); the default keeps it.
    // L = 3000 on one head takes the segmented path (suffix totals between segments).
    for (auto [B, H, L] : {std::tuple<index_t, index_t, index_t>{1, 1, 3000}, {2, 3, 150}, {1, 2, 7}})
        for (bool causal : {true, false})
            for (bool padded : {false, true}) {
                INFO(Map::name, " L=", L, " causal=", causal, " padded=", padded);
                const auto kept = run_case<Map, float, backends::simd>(B, H, L, causal, padded);
                const auto redo = run_case<Map, float, backends::simd>(B, H, L, causal, padded, 0);
                CHECK(kept.dq == redo.dq);
                CHECK(kept.dk == redo.dk);
                CHECK(kept.dv == redo.dv);
                CHECK(kept.d_omega == redo.d_omega);
                CHECK(kept.d_bias == redo.d_bias);
                const auto kd = run_case<Map, double, backends::simd>(B, H, L, causal, padded);
                const auto rd = run_case<Map, double, backends::simd>(B, H, L, causal, padded, 0);
                CHECK(kd.dk == rd.dk);
                CHECK(kd.d_omega == rd.d_omega);
            }
}

TEST_CASE_TEMPLATE("transpose_simd and gemm_lower match their plain forms", T, float, double) {
    using arch = backends::simd::arch;
    for (auto [rows, cols] : {std::pair<index_t, index_t>{64, 256}, {256, 64}, {13, 29}, {8, 8}, {3, 1}, {0, 5}}) {
        const auto src = kt::randn<T, 2>({std::size_t(rows), std::size_t(cols + 3)}, 7);
        std::vector<T> a(std::size_t(cols * (rows + 2)), T(-1)), b(a);
        kattn::detail::transpose_simd<arch>(rows, cols, src.data(), cols + 3, a.data(), rows + 2);
        for (index_t i = 0; i < rows; ++i)
            for (index_t j = 0; j < cols; ++j) b[std::size_t(j * (rows + 2) + i)] = src(std::size_t(i), std::size_t(j));
        INFO(rows, " x ", cols);
        CHECK(a == b);  // padding columns untouched (-1) in both
    }
    for (index_t n : {64, 37, 9, 1}) {
        const index_t K = 19;
        const auto A = kt::randn<T, 2>({std::size_t(n), std::size_t(K)}, 8),
                   B = kt::randn<T, 2>({std::size_t(K), std::size_t(n)}, 9);
        std::vector<T> full(std::size_t(n * n)), low(std::size_t(n * n), T(0));
        kattn::detail::gemm<arch>(n, n, K, A.data(), K, 1, B.data(), n, full.data(), n, false);
        kattn::detail::gemm_lower<arch>(n, n, K, A.data(), K, 1, B.data(), n, low.data(), n, false);
        bool same = true;
        for (index_t i = 0; i < n; ++i)
            for (index_t j = 0; j <= i; ++j) same = same && low[std::size_t(i * n + j)] == full[std::size_t(i * n + j)];
        INFO("n = ", n);
        CHECK(same);
    }
}

namespace {

/// gemm<Arch> against a double-precision sum over every row count up to 17 (every remainder
/// of a register block of up to 8 rows, over two blocks; the same counts on every
/// instruction set, so that their results can be compared), column counts around the vector widths (8 and 16
/// floats) and through every column panel (4, 2 and 1 vectors, then scalars: 112, 117),
/// and both layouts of A, plain and accumulating. Returns the results whose columns
/// are whole vectors on every instruction set, for the bitwise comparison between them.
template <class Arch, class T>
std::vector<std::vector<T>> check_gemm_shapes(const char* isa) {
    static_assert(kattn::detail::gemm_block_shape<Arch>::rows <= 8);
    std::vector<std::vector<T>> results;
    for (index_t M = 1; M <= 17; ++M)
        for (index_t N : {1, 7, 8, 15, 16, 19, 35, 64, 112, 117})
            for (index_t K : {1, 7, 40})
                for (bool transposed : {false, true})
                    for (bool accumulate : {false, true}) {
                        const auto A = kt::randn<T, 2>({std::size_t(M * K), 1}, std::size_t(M * 131 + K)),
                                   B = kt::randn<T, 2>({std::size_t(K * N), 1}, std::size_t(N * 17 + K));
                        const auto C0 = kt::randn<T, 2>({std::size_t(M * N), 1}, 99);
                        std::vector<T> C(C0.begin(), C0.end());
                        const index_t a_rs = transposed ? 1 : K, a_cs = transposed ? M : 1;
                        kattn::detail::gemm<Arch>(M, N, K, A.data(), a_rs, a_cs, B.data(), N, C.data(), N, accumulate);
                        // B packed into gemm's column panels: the same products, the same bits.
                        std::vector<T> Bp(std::size_t(K * N)), Cp(C0.begin(), C0.end());
                        kattn::detail::pack_b_panels<Arch>(K, N, B.data(), N, Bp.data());
                        kattn::detail::gemm_packed_b<Arch>(M, N, K, A.data(), a_rs, a_cs, Bp.data(), Cp.data(), N,
                                                           accumulate);
                        CHECK(Cp == C);
                        double worst = 0;
                        for (index_t i = 0; i < M; ++i)
                            for (index_t j = 0; j < N; ++j) {
                                double ref = accumulate ? double(C0(std::size_t(i * N + j), 0)) : 0.0,
                                       mag = std::abs(ref);
                                for (index_t k = 0; k < K; ++k) {
                                    const double p = double(A(std::size_t(i * a_rs + k * a_cs), 0)) *
                                                     double(B(std::size_t(k * N + j), 0));
                                    ref += p;
                                    mag += std::abs(p);
                                }
                                worst =
                                    std::max(worst, std::abs(double(C[std::size_t(i * N + j)]) - ref) / (mag + 1e-300));
                            }
                        INFO(isa, ": M = ", M, ", N = ", N, ", K = ", K, ", transposed A = ", transposed,
                             ", accumulate = ", accumulate);
                        CHECK(worst <= double(K + 1) * std::numeric_limits<T>::epsilon());
                        if (N % 16 == 0) results.push_back(std::move(C));
                    }
    return results;
}

}  // namespace

TEST_CASE_TEMPLATE("gemm: every register-block remainder, on every instruction set the CPU runs", T, float, double) {
    // Blocks of 8 rows, then one block of the rows left over; AVX-512 and AVX2 both fuse every
    // multiply-add in k order, so their bits agree.
    const auto cpu = xsimd::available_architectures();
    std::vector<std::vector<T>> avx512, avx2;
#if XSIMD_WITH_AVX512BW
    if (cpu.avx512bw) avx512 = check_gemm_shapes<xsimd::avx512bw, T>("avx512");
#endif
#if XSIMD_WITH_FMA3_AVX2
    if (cpu.fma3_avx2) avx2 = check_gemm_shapes<xsimd::fma3<xsimd::avx2>, T>("avx2");
#endif
#if XSIMD_WITH_SSE2
    if (cpu.sse2) (void)check_gemm_shapes<xsimd::sse2, T>("sse2");
#endif
    (void)cpu;
    if (!avx512.empty() && !avx2.empty()) CHECK(avx512 == avx2);
    (void)check_gemm_shapes<backends::simd::arch, T>("the backend's");
}

TEST_CASE("simd backward cache: kept per thread within the budget, released on request") {
    backends::simd::release_workspace();
    CHECK(backends::simd::workspace_bytes() == 0);
    run_case<features::favor, float, backends::simd>(1, 2, 150, true, false);
    const std::size_t kept = backends::simd::workspace_bytes();
    // (2F + 64 + d + P + 1) floats per token and head: F = P = 16, d = 8.
    CHECK(kept == std::size_t(2 * 150) * (2 * 16 + 64 + 8 + 16 + 1) * sizeof(float));
    run_case<features::favor, float, backends::simd>(1, 2, 7, true, false);  // smaller: reused, not shrunk
    CHECK(backends::simd::workspace_bytes() == kept);
    backends::simd::release_workspace();
    CHECK(backends::simd::workspace_bytes() == 0);
    run_case<features::favor, float, backends::simd>(1, 2, 150, true, false, 0);  // budget 0: nothing kept
    CHECK(backends::simd::workspace_bytes() == 0);
}
