// Tests for kattn/nn/linear.hpp: forward against a naive product, backward against
// finite differences, thread-count independence and shape errors; the weight-gradient
// product (nn/detail/matmul.hpp) against a naive sum.
#include <doctest/doctest.h>

#include <omp.h>

#include <cmath>
#include <vector>

#include <kattn/nn/detail/matmul.hpp>
#include <kattn/nn/linear.hpp>

#include "gradcheck.hpp"

using namespace kattn;

TEST_CASE("nn::linear: forward equals the naive product x·W + b") {
    nn::linear<double> lin({.in = 37, .out = 19, .seed = 3});
    const auto x = kt::randn2(70, 37, 1);
    const auto y = lin.apply(x);
    double worst = 0;
    for (int r = 0; r < 70; ++r)
        for (int c = 0; c < 19; ++c) {
            double s = lin.bias().value[c];
            for (int i = 0; i < 37; ++i) s += x(r, i) * lin.weight().value[i * 19 + c];
            worst = std::max(worst, std::abs(s - y(r, c)));
        }
    CHECK(worst < 1e-12);
    // PyTorch's default init bound 1/sqrt(in)
    for (double w : lin.weight().value) CHECK(std::abs(w) <= 1.0 / std::sqrt(37.0));
}

TEST_CASE("nn::linear: backward matches central differences") {
    for (bool bias : {true, false}) {
        nn::linear<double> lin({.in = 23, .out = 17, .bias = bias, .seed = 5});
        nn::parameter_list ps;
        lin.collect(ps, "lin");
        CHECK(ps.size() == (bias ? 2u : 1u));
        auto r = kt::check_gradients([&](const kt::dtensor& x) { return lin.forward(x); },
                                     [&](const kt::dtensor& g) { return lin.backward(g); }, ps, kt::randn2(130, 23, 2));
        CHECK(r.max_err_x < 1e-6);
        CHECK(r.max_err_p < 1e-6);
    }
}

TEST_CASE("nn::linear: float results are bitwise identical on 1 and 2 threads") {
    nn::linear<float> lin({.in = 64, .out = 48, .seed = 9});
    nn::tensor<float> x = nn::tensor<float>::from_shape({300, 64});
    for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = float(std::sin(0.37 * double(i)));
    nn::tensor<float> g = nn::tensor<float>::from_shape({300, 48});
    for (std::size_t i = 0; i < g.size(); ++i) g.data()[i] = float(std::cos(0.11 * double(i)));
    auto run = [&](int threads) {
        omp_set_num_threads(threads);
        nn::parameter_list ps;
        lin.collect(ps, "l");
        nn::zero_grad(ps);
        auto y = lin.forward(x);
        auto dx = lin.backward(g);
        std::vector<float> all(y.begin(), y.end());
        all.insert(all.end(), dx.begin(), dx.end());
        all.insert(all.end(), lin.weight().grad.begin(), lin.weight().grad.end());
        return all;
    };
    const int saved = omp_get_max_threads();
    const auto a = run(1), b = run(2);
    omp_set_num_threads(saved);
    CHECK(a == b);
}

TEST_CASE("nn::detail::matmul_tn: dW (+)= xᵀ·dy equals the naive sum across its k chunks and row blocks") {
    // n around multiples of the k chunk (tails), in around the row-block sizes, both modes.
    const kattn::index_t kc = nn::detail::matmul_tn_k_chunk;
    for (kattn::index_t n : {kattn::index_t(0), kattn::index_t(1), kc - 1, kc, kc + 1, 3 * kc + 5})
        for (kattn::index_t in : {3, 70})
            for (kattn::index_t out : {5, 40})
                for (bool accumulate : {false, true}) {
                    std::vector<float> x(std::size_t(n * in)), dy(std::size_t(n * out)), dW(std::size_t(in * out));
                    for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(std::sin(0.3 * double(i) + 0.1));
                    for (std::size_t i = 0; i < dy.size(); ++i) dy[i] = float(std::cos(0.7 * double(i)));
                    for (std::size_t i = 0; i < dW.size(); ++i) dW[i] = float(i % 7) - 3.0f;
                    const std::vector<float> before = dW;
                    nn::detail::matmul_tn<float>(n, in, out, x.data(), dy.data(), dW.data(), accumulate);
                    for (kattn::index_t i = 0; i < in; ++i)
                        for (kattn::index_t o = 0; o < out; ++o) {
                            double s = accumulate ? double(before[std::size_t(i * out + o)]) : 0.0;
                            for (kattn::index_t k = 0; k < n; ++k)
                                s += double(x[std::size_t(k * in + i)]) * double(dy[std::size_t(k * out + o)]);
                            REQUIRE(double(dW[std::size_t(i * out + o)]) == doctest::Approx(s).epsilon(1e-5).scale(1));
                        }
                }
}

TEST_CASE("nn::linear: bad shapes and sizes throw kattn::error naming the argument") {
    CHECK_THROWS_WITH_AS(nn::linear<float>({.in = 0, .out = 3}), doctest::Contains("'in'"), kattn::error);
    nn::linear<float> lin({.in = 4, .out = 3});
    CHECK_THROWS_WITH_AS(lin.apply(nn::zeros<float>(2, 5)), doctest::Contains("'x'"), kattn::error);
    lin.forward(nn::zeros<float>(2, 4));
    CHECK_THROWS_WITH_AS(lin.backward(nn::zeros<float>(3, 3)), doctest::Contains("'dy'"), kattn::error);
}
