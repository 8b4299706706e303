// A tiny program that consumes kattn the way users do: it includes the umbrella
// header only, and is built by tests/consumer/run.sh through three routes
// (Meson subproject, pkg-config, CMake find_package). It checks one real property:
// with identical keys, causal linear attention is the running mean of the values.
#include <kattn/kattn.hpp>

#include <cmath>
#include <cstdio>

int main() {
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
        std::printf("kattn %d.%d.%d consumer ok (%s)\n", KATTN_VERSION_MAJOR, KATTN_VERSION_MINOR, KATTN_VERSION_PATCH,
                    e.what());
        return 0;
    }
    std::fprintf(stderr, "bad value shape did not throw kattn::error\n");
    return 1;
}
