// examples/thrust_attention.cu — kernelized attention on a GPU with the Thrust backend
// (built with -Dcuda=enabled). The backend is the third policy of linear_attention: the
// same operator, the same Ω (drawn on the host from the seed), a different executor.
//
// Inputs and results are host xtensor containers; each call copies its inputs to the
// device once and its results back once (docs/thrust_backend.md).
#include <cmath>
#include <cstdio>

#include <kattn/fwd.hpp>
#include <kattn/attention/linear_attention.hpp>
#include <kattn/backends/reference.hpp>
#include <kattn/backends/thrust.hpp>
#include <kattn/core/random.hpp>
#include <kattn/features/favor.hpp>
#include <kattn/samplers/orthogonal_gaussian.hpp>

using tensor = xt::xtensor<float, 4>;

template <class Backend>
using favor_attention =
    kattn::linear_attention<kattn::features::favor, kattn::samplers::orthogonal_gaussian, Backend, float>;

template <class A>
double max_rel(const A& a, const A& b) {
    double num = 0, den = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        num = std::fmax(num, std::fabs(double(a.data()[i]) - double(b.data()[i])));
        den = std::fmax(den, std::fabs(double(b.data()[i])));
    }
    return num / den;
}

int main() {
    const kattn::attention_config cfg{.head_dim = 64, .value_dim = 64, .num_features = 256, .seed = 42};
    const favor_attention<kattn::backends::thrust<>> gpu(cfg);   // thrust::device, double inside
    const favor_attention<kattn::backends::reference> cpu(cfg);  // the scalar oracle

    const kattn::random_stream rng(7, kattn::streams::user);
    tensor q({2, 4, 512, 64}), k(q.shape()), v(q.shape()), g(q.shape());  // [batch, heads, length, dim]
    for (std::size_t i = 0; i < q.size(); ++i) {
        q.data()[i] = float(rng.normal(4 * i));
        k.data()[i] = float(rng.normal(4 * i + 1));
        v.data()[i] = float(rng.normal(4 * i + 2));
        g.data()[i] = float(rng.normal(4 * i + 3));
    }
    const tensor out_gpu = gpu(q, k, v, kattn::causal);
    const tensor out_cpu = cpu(q, k, v, kattn::causal);
    const auto grad_gpu = gpu.backward(q, k, v, g, kattn::causal);
    const auto grad_cpu = cpu.backward(q, k, v, g, kattn::causal);
    std::printf("causal favor attention, 2 x 4 heads x 512 tokens, d = 64, m = 256\n");
    std::printf("thrust (GPU) vs reference (CPU), max relative difference:\n");
    std::printf("  out     %.3g\n", max_rel(out_gpu, out_cpu));
    std::printf("  dq      %.3g\n", max_rel(grad_gpu.dq, grad_cpu.dq));
    std::printf("  dk      %.3g\n", max_rel(grad_gpu.dk, grad_cpu.dk));
    std::printf("  dv      %.3g\n", max_rel(grad_gpu.dv, grad_cpu.dv));
    std::printf("  d_omega %.3g\n", max_rel(grad_gpu.d_omega, grad_cpu.d_omega));
    return 0;
}
