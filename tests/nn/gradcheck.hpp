// tests/nn/gradcheck.hpp — central finite differences for kattn::nn layers (double).
//
// check_gradients(fwd, bwd, params, x): with a fixed random upstream g, the scalar
// L = Σ g ⊙ fwd(x) is differentiated numerically with respect to (up to `probes`) entries
// of x and of every parameter, and compared with bwd(g) and the accumulated grads.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include <kattn/core/random.hpp>
#include <kattn/nn/parameter.hpp>
#include <kattn/nn/tensor.hpp>

namespace kt {

using dtensor = kattn::nn::tensor<double>;

inline dtensor randn2(std::size_t r, std::size_t c, std::uint64_t seed, double sd = 1.0) {
    dtensor x = dtensor::from_shape({r, c});
    const kattn::random_stream rs(seed, kattn::streams::user + 23);
    for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = sd * rs.normal(i);
    return x;
}

struct gradcheck_result {
    double max_err_x = 0, max_err_p = 0;
};

/// fwd: x → y (caches for backward); bwd: dy → dx (accumulates parameter grads).
/// Relative error per entry: |a − n| / max(1e-6·scale, |a|, |n|) with scale the largest |n|.
inline gradcheck_result check_gradients(const std::function<dtensor(const dtensor&)>& fwd,
                                        const std::function<dtensor(const dtensor&)>& bwd,
                                        kattn::nn::parameter_list params, dtensor x, double tol = 1e-6, int probes = 40,
                                        double h = 1e-6, bool check_x = true) {
    const dtensor y0 = fwd(x);
    const dtensor g = randn2(y0.shape()[0], y0.shape()[1], 991);
    auto loss = [&](const dtensor& xx) {
        const dtensor y = fwd(xx);
        double s = 0;
        for (std::size_t i = 0; i < y.size(); ++i) s += g.data()[i] * y.data()[i];
        return s;
    };
    kattn::nn::zero_grad(params);
    fwd(x);
    const dtensor dx = bwd(g);
    // Copy the analytic parameter gradients before the FD passes (which may re-run fwd only).
    std::vector<std::vector<double>> pg;
    for (auto& p : params) {
        std::vector<double> v(std::size_t(p.size()));
        for (kattn::index_t i = 0; i < p.size(); ++i) v[i] = p.grad_at(i);
        pg.push_back(std::move(v));
    }
    gradcheck_result res;
    auto cmp = [&](double a, double n, double& worst, const std::string& what) {
        const double err = std::abs(a - n) / std::max({1e-7, std::abs(a), std::abs(n)});
        if (err > tol) {
            INFO(what << ": analytic " << a << " numeric " << n);
            CHECK(err <= tol);
        }
        worst = std::max(worst, err);
    };
    if (check_x) {
        REQUIRE(dx.shape() == x.shape());
        const std::size_t step = std::max<std::size_t>(1, x.size() / std::size_t(probes));
        for (std::size_t i = 0; i < x.size(); i += step) {
            dtensor xp = x, xm = x;
            xp.data()[i] += h;
            xm.data()[i] -= h;
            cmp(dx.data()[i], (loss(xp) - loss(xm)) / (2 * h), res.max_err_x, "dx[" + std::to_string(i) + "]");
        }
    }
    for (std::size_t k = 0; k < params.size(); ++k) {
        auto& p = params[k];
        const kattn::index_t step = std::max<kattn::index_t>(1, p.size() / probes);
        for (kattn::index_t i = 0; i < p.size(); i += step) {
            const double v0 = p.value_at(i);
            p.set_value(i, v0 + h);
            const double lp = loss(x);
            p.set_value(i, v0 - h);
            const double lm = loss(x);
            p.set_value(i, v0);
            cmp(pg[k][i], (lp - lm) / (2 * h), res.max_err_p, p.name + "[" + std::to_string(i) + "]");
        }
    }
    fwd(x);  // leave the layer's cache consistent with x
    return res;
}

}  // namespace kt
