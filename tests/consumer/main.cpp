// A tiny program that consumes kattn the way users do: it includes the umbrella
// header only, and is built by tests/consumer/run.sh through three routes
// (Meson subproject, pkg-config, CMake find_package). It checks one real property:
// with identical keys, causal linear attention is the running mean of the values.
#include <kattn/kattn.hpp>

#include <cmath>
#include <cstdio>
#include <string>

int main() {
#ifdef KATTN_SIMD_DISPATCH
    // The dependency links the kernel library: on a CPU with AVX2 the kernels come from it,
    // although this program is compiled without -march.
    if (kattn::detail::simd_dispatch::cpu_runs("avx2") && !kattn::backends::simd::dispatched()) {
        std::fprintf(stderr, "built with KATTN_SIMD_DISPATCH on an AVX2 CPU, but the kernels are not dispatched\n");
        return 1;
    }
#endif
    using attn_t =
        kattn::linear_attention<kattn::features::favor, kattn::samplers::orthogonal_gaussian, kattn::backends::simd>;
    attn_t attn({.head_dim = 8, .value_dim = 4, .num_features = 32, .seed = 42});
    xt::xtensor<float, 2> q = xt::ones<float>({5, 8}), k = q, v = xt::zeros<float>({5, 4});
    for (std::size_t j = 0; j < 5; ++j) v(j, j % 4) = float(j + 1);
    const xt::xtensor<float, 2> out = attn(q, k, v, kattn::causal);
    // identical keys: causal attention is the running mean of v
    for (std::size_t i = 0; i < 5; ++i)
        for (std::size_t c = 0; c < 4; ++c) {
            float mean = 0;
            for (std::size_t j = 0; j <= i; ++j) mean += v(j, c) / float(i + 1);
            if (std::abs(out(i, c) - mean) > 1e-5f) {
                std::fprintf(stderr, "unexpected output %g at (%zu, %zu), expected %g\n", double(out(i, c)), i, c,
                             double(mean));
                return 1;
            }
        }
    try {
        attn(q, k, xt::xtensor<float, 2>(xt::zeros<float>({5, 3})));
    } catch (const kattn::error& e) {
        std::printf("kattn %d.%d.%d consumer ok, simd kernels: %s (%s); %s\n", KATTN_VERSION_MAJOR, KATTN_VERSION_MINOR,
                    KATTN_VERSION_PATCH, std::string(kattn::backends::simd::isa()).c_str(),
                    kattn::backends::simd::dispatched() ? "dispatched" : "compiled", e.what());
        return 0;
    }
    std::fprintf(stderr, "bad value shape did not throw kattn::error\n");
    return 1;
}
