// chunked backend: the precision of its float products (float_gemm), on the host system's
// emulation of the GPU formats.
//
// - The rounding itself agrees with independent implementations: kattn::bf16's conversion
//   (BF16), the compiler's _Float16 (FP16, normal, subnormal and overflowing values) and a
//   frexp/ldexp formula (TF32), on a million values and on hand-picked ties.
// - For favor, elu and trig, causal and not, forward and backward: the relative error
//   against the double reference grows with the format (FP32 < TF32 ≈ FP16 < BF16) and
//   stays within the bounds docs/cuda_backend.md states per precision.
// - 16-bit inputs, outputs and gradients (kattn::bf16 on the host; __nv_bfloat16 with BF16
//   products and __half with FP16 products on a GPU) stay within the same bounds plus the
//   final rounding.
// - The operator's bf16-tensor call on a chunked backend runs BF16 products: the same bits
//   as device_forward on a system set to float_gemm::bf16, not those of exact products.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../tensors.hpp"
#include "backend_cases.hpp"
#include "precision_cases.hpp"

#include <kattn/attention/linear_attention.hpp>
#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <kattn/backends/cuda.cuh>
#else
#include <kattn/backends/chunked.hpp>
#endif
#include <kattn/backends/reference.hpp>
#include <kattn/core/bfloat16.hpp>
#include <kattn/features/elu.hpp>
#include <kattn/features/favor.hpp>
#include <kattn/features/relu.hpp>
#include <kattn/features/trig.hpp>

namespace kt_chunked_precision {
#if defined(__CUDACC__)
using backend = kattn::backends::cuda;
#else
using backend = kattn::backends::chunked<kattn::backends::host_system>;
#endif
}  // namespace kt_chunked_precision

#if !defined(__CUDACC__)  // the host system's emulation of the GPU formats
namespace {

using namespace kattn;
using host_chunked = backends::chunked<backends::host_system>;
using backends::float_gemm;
using kt_chunked_precision::bound;

/// x rounded to nearest-even at `bits` stored mantissa bits, by frexp/ldexp (no bit tricks).
float round_by_formula(float x, int bits) {
    if (x == 0 || !std::isfinite(x)) return x;
    int e = 0;
    const double m = std::frexp(double(x), &e);  // x = m·2^e, 0.5 ≤ |m| < 1
    return float(std::ldexp(std::nearbyint(std::ldexp(m, bits + 1)), e - bits - 1));
}

std::vector<float> wide_random_floats(std::size_t n, std::uint32_t seed) {
    std::mt19937 gen(seed);
    std::uniform_int_distribution<std::uint32_t> bits;
    std::vector<float> out;
    out.reserve(n);
    while (out.size() < n) {
        const std::uint32_t u = bits(gen);
        float x;
        std::memcpy(&x, &u, sizeof x);
        if (std::isfinite(x)) out.push_back(x);
    }
    return out;
}

/// Relative errors (Frobenius) of out, dq, dk, dv against the double reference.
struct errors {
    double out = 0, dq = 0, dk = 0, dv = 0;
    double max() const { return std::max({out, dq, dk, dv}); }
};

template <class Map>
errors product_errors(float_gemm precision, bool causal) {
    const index_t B = 1, H = 2, L = 150, d = 8, dv = 5;
    const auto cfg = kt::case_config<Map>();
    const kt::attn<Map, double, backends::reference> ref(cfg);
    const kt::attn<Map, float, host_chunked> op(cfg);
    const auto q = kt::randn<double, 4>({1, 2, 150, 8}, 1, 0.5), k = kt::randn<double, 4>({1, 2, 150, 8}, 2, 0.5);
    const auto v = kt::randn<double, 4>({1, 2, 150, 5}, 3), G = kt::randn<double, 4>({1, 2, 150, 5}, 4);
    const auto narrow = [](const xt::xtensor<double, 4>& x) { return std::vector<float>(x.begin(), x.end()); };
    const auto qf = narrow(q), kf = narrow(k), vf = narrow(v), Gf = narrow(G);
    backends::host_system sys{};
    sys.float_math = precision;
    const backends::device_parameters<Map, float, backends::host_system> params(sys, op.spectral());
    const backends::device_options o{causal, nullptr, double(op.input_scale()), 1e-6};
    std::vector<float> out(vf.size()), dq(qf.size()), dk(kf.size()), dvv(vf.size());
    const auto in = [&](const std::vector<float>& x, index_t dim) {
        return backends::head_major<const float>(x.data(), B, H, L, dim);
    };
    host_chunked::device_forward(sys, params, in(qf, d), in(kf, d), in(vf, dv),
                                 backends::head_major(out.data(), B, H, L, dv), o);
    host_chunked::device_backward(
        sys, params, in(qf, d), in(kf, d), in(vf, dv), in(Gf, dv), backends::head_major(dq.data(), B, H, L, d),
        backends::head_major(dk.data(), B, H, L, d), backends::head_major(dvv.data(), B, H, L, dv),
        static_cast<float*>(nullptr), static_cast<float*>(nullptr), o);
    const auto r = causal ? ref(q, k, v, kattn::causal) : ref(q, k, v);
    const auto g = causal ? ref.backward(q, k, v, G, kattn::causal) : ref.backward(q, k, v, G);
    return {kt::rel_err(out, r), kt::rel_err(dq, g.dq), kt::rel_err(dk, g.dk), kt::rel_err(dvv, g.dv)};
}

std::string sci(double x) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2e", x);
    return buf;
}

template <class Map>
void check_precision_ladder() {
    for (bool causal : {false, true}) {
        INFO(std::string(Map::name), " causal=", causal);
        const errors e32 = product_errors<Map>(float_gemm::fp32, causal);
        const errors etf = product_errors<Map>(float_gemm::tf32, causal);
        const errors e16 = product_errors<Map>(float_gemm::fp16, causal);
        const errors ebf = product_errors<Map>(float_gemm::bf16, causal);
        const std::string summary = std::string(Map::name) + (causal ? " causal" : " non-causal") +
                                    ": max relative error fp32 " + sci(e32.max()) + ", tf32 " + sci(etf.max()) +
                                    ", fp16 " + sci(e16.max()) + ", bf16 " + sci(ebf.max());
        MESSAGE(summary);
        constexpr bool jumps = kt::derivative_jumps<Map>;
        CHECK(e32.max() < bound(float_gemm::fp32, jumps));
        CHECK(etf.max() < bound(float_gemm::tf32, jumps));
        CHECK(e16.max() < bound(float_gemm::fp16, jumps));
        CHECK(ebf.max() < bound(float_gemm::bf16, jumps));
        // The format is applied: each coarser one is measurably worse than exact FP32,
        // and BF16's 8-bit significand is worse than the 11-bit ones.
        CHECK(etf.max() > 10 * e32.max());
        CHECK(e16.max() > 10 * e32.max());
        CHECK(ebf.max() > 2 * etf.max());
        CHECK(ebf.max() > 2 * e16.max());
    }
}

}  // namespace

TEST_CASE("chunked products: the host system's TF32, BF16 and FP16 rounding agree with independent ones") {
    const auto xs = wide_random_floats(1000000, 7);
    std::size_t bf16_bad = 0, tf32_bad = 0;
    for (float x : xs) {
        const float b = kattn::detail::round_to(float_gemm::bf16, x);
        if (std::isfinite(b) && b != float(bf16(x))) ++bf16_bad;
        const float t = kattn::detail::round_to(float_gemm::tf32, x);
        // Normal values (the formula rounds relative to the leading bit, which a
        // subnormal's fixed quantum does not).
        if (std::isfinite(t) && std::fabs(x) >= 0x1p-126f && t != round_by_formula(x, 10)) ++tf32_bad;
    }
    CHECK(bf16_bad == 0);
    CHECK(tf32_bad == 0);
    // Ties go to the even significand: 1 + 2^-8 is halfway between two BF16 values.
    CHECK(kattn::detail::round_to(float_gemm::bf16, 1.0f + 0x1p-8f) == 1.0f);
    CHECK(kattn::detail::round_to(float_gemm::bf16, 1.0f + 3 * 0x1p-8f) == 1.0f + 0x1p-6f);
    CHECK(kattn::detail::round_to(float_gemm::tf32, 1.0f + 0x1p-11f) == 1.0f);
    CHECK(kattn::detail::round_to(float_gemm::tf32, 1.0f + 3 * 0x1p-11f) == 1.0f + 0x1p-9f);
    CHECK(kattn::detail::round_to(float_gemm::fp32, 1.0f + 0x1p-23f) == 1.0f + 0x1p-23f);
    // FP16's range: 65504 is the largest finite value, 65520 the first that overflows.
    CHECK(kattn::detail::round_to(float_gemm::fp16, 65519.f) == 65504.f);
    CHECK(std::isinf(kattn::detail::round_to(float_gemm::fp16, 65520.f)));
    CHECK(std::isinf(kattn::detail::round_to(float_gemm::fp16, -1e6f)));
    CHECK(kattn::detail::round_to(float_gemm::fp16, 0x1p-25f) == 0.f);  // half the smallest subnormal: to even
    CHECK(kattn::detail::round_to(float_gemm::fp16, 0x1p-24f * 1.5f) == 0x1p-23f);
#ifdef __FLT16_MAX__
    std::size_t fp16_bad = 0;
    for (float x : xs) {
        const float h = kattn::detail::round_to(float_gemm::fp16, x);
        if (h != float(static_cast<_Float16>(x))) ++fp16_bad;
    }
    CHECK(fp16_bad == 0);
    // Values in FP16's range, where the mantissa (not the overflow) decides.
    std::mt19937 gen(3);
    std::uniform_real_distribution<float> u(-70000.f, 70000.f), small(-1e-4f, 1e-4f);
    for (int i = 0; i < 200000; ++i) {
        const float a = u(gen), b = small(gen);
        if (kattn::detail::round_to(float_gemm::fp16, a) != float(static_cast<_Float16>(a))) ++fp16_bad;
        if (kattn::detail::round_to(float_gemm::fp16, b) != float(static_cast<_Float16>(b))) ++fp16_bad;
    }
    CHECK(fp16_bad == 0);
#endif
}

TEST_CASE_TEMPLATE("chunked products: error against the double reference per product format", Map,
                   kattn::features::favor, kattn::features::elu, kattn::features::trig, kattn::features::relu) {
    check_precision_ladder<Map>();
}
#endif  // !__CUDACC__

TEST_CASE("chunked backend: the operator's bf16-tensor forward runs BF16 products") {
    using namespace kattn;
    using kattn::backends::float_gemm;
    using Map = features::favor;
    const auto cfg = kt::case_config<Map>();
    const kt::attn<Map, float, kt_chunked_precision::backend> op(cfg);
    const index_t B = 2, H = 2, L = 90, d = 8, dv = 5;
    const auto round = [](const xt::xtensor<float, 4>& x) {
        xt::xtensor<bf16, 4> r = xt::xtensor<bf16, 4>::from_shape(x.shape());
        std::transform(x.begin(), x.end(), r.begin(), [](float f) { return bf16(f); });
        return r;
    };
    const auto q = round(kt::randn<float, 4>({2, 2, 90, 8}, 1, 0.5)),
               k = round(kt::randn<float, 4>({2, 2, 90, 8}, 2, 0.5));
    const auto v = round(kt::randn<float, 4>({2, 2, 90, 5}, 3));
    for (bool causal : {false, true}) {
        INFO("causal=", causal);
        const auto got = causal ? op(q, k, v, kattn::causal) : op(q, k, v);
        const auto direct = [&](float_gemm p) {
            using system_t = kt_chunked_precision::backend::system_type;
            system_t sys{};
            sys.float_math = p;
            const backends::device_parameters<Map, float, system_t> params(sys, op.spectral());
            const auto qs = sys.mirror(q.data(), index_t(q.size())), ks = sys.mirror(k.data(), index_t(k.size())),
                       vs = sys.mirror(v.data(), index_t(v.size()));
            auto os = sys.template make_buffer<bf16>(B * H * L * dv);
            kt_chunked_precision::backend::device_forward(
                sys, params, backends::head_major(qs.get(), B, H, L, d), backends::head_major(ks.get(), B, H, L, d),
                backends::head_major(vs.get(), B, H, L, dv), backends::head_major(os.data(), B, H, L, dv),
                {causal, nullptr, double(op.input_scale()), 1e-6});
            std::vector<bf16> out(std::size_t(B * H * L * dv));
            sys.to_host(out.data(), os.data(), B * H * L * dv);
            return out;
        };
        const auto same = [&](const std::vector<bf16>& w) {
            return std::equal(w.begin(), w.end(), got.begin(), [](bf16 a, bf16 b) { return a.bits == b.bits; });
        };
        CHECK(same(direct(float_gemm::bf16)));
        CHECK_FALSE(same(direct(float_gemm::fp32)));
    }
}

TEST_CASE("chunked backend: 16-bit inputs, outputs and products stay within the documented bounds") {
    using kattn::backends::float_gemm;
#if defined(__CUDACC__)
    SUBCASE("__nv_bfloat16 with BF16 products") {
        kt_chunked_precision::check_sixteen_bit<kt_chunked_precision::backend, __nv_bfloat16>(float_gemm::bf16, 0x1p-8);
    }
    SUBCASE("__half with FP16 products") {
        kt_chunked_precision::check_sixteen_bit<kt_chunked_precision::backend, __half>(float_gemm::fp16, 0x1p-11);
    }
#else
    SUBCASE("kattn::bf16 with BF16 products") {
        kt_chunked_precision::check_sixteen_bit<kt_chunked_precision::backend, kattn::bf16>(float_gemm::bf16, 0x1p-8);
    }
    SUBCASE("kattn::bf16 with FP16 products") {
        kt_chunked_precision::check_sixteen_bit<kt_chunked_precision::backend, kattn::bf16>(float_gemm::fp16, 0x1p-8);
    }
#endif
}
