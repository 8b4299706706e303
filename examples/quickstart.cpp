// kattn quick start: the three policy axes (feature map × sampler × backend), and how
// close O(L) kernelized attention gets to exact O(L²) softmax attention as m grows.
#include <kattn/kattn.hpp>

#include <cstdio>

using tensor = xt::xtensor<float, 4>;

double rel_error(const tensor& a, const tensor& b) {
    return std::sqrt(xt::sum(xt::square(a - b))() / xt::sum(xt::square(b))());
}

template <class Map, class Sampler>  // the third axis, the backend, is simd (xsimd + OpenMP)
double favor_error(const tensor& q, const tensor& k, const tensor& v, const tensor& exact, kattn::index_t m) {
    kattn::linear_attention<Map, Sampler, kattn::backends::simd> attn(
        {.head_dim = 32, .value_dim = 32, .num_features = m, .seed = 42});
    return rel_error(attn(q, k, v, kattn::causal), exact);
}

int main() {
    const kattn::random_stream rng(7, kattn::streams::user);
    tensor q({2, 4, 1024, 32}), k(q.shape()), v(q.shape());  // [batch, heads, length, dim]
    for (std::size_t i = 0; i < q.size(); ++i) {
        q.data()[i] = float(0.5 * rng.normal(3 * i));
        k.data()[i] = float(0.5 * rng.normal(3 * i + 1));
        v.data()[i] = float(rng.normal(3 * i + 2));
    }
    const tensor exact = kattn::softmax_attention<float>()(q, k, v, kattn::causal);
    const tensor prefix_mean = xt::cumsum(v, 2) / xt::reshape_view(xt::arange<float>(1, 1025), {1, 1, 1024, 1});
    std::printf("causal attention, 2 x 4 heads x 1024 tokens, d = 32; relative error vs exact softmax\n");
    std::printf("uniform attention (prefix mean): %.4f\n", rel_error(prefix_mean, exact));
    std::printf("%6s %20s %20s\n", "m", "favor+orthogonal", "favor+iid gaussian");
    for (kattn::index_t m : {64, 256, 1024, 4096})
        std::printf("%6td %20.4f %20.4f\n", m,
                    favor_error<kattn::features::favor, kattn::samplers::orthogonal_gaussian>(q, k, v, exact, m),
                    favor_error<kattn::features::favor, kattn::samplers::gaussian>(q, k, v, exact, m));
}
