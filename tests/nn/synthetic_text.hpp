// tests/nn/synthetic_text.hpp — a seeded toy text task and parameter helpers shared by the
// data-parallel tests (tests/nn/test_data_parallel.cpp with simulated ranks, and
// tests/dist/test_data_parallel.cpp under mpirun).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <kattn/core/random.hpp>
#include <kattn/nn/data/dataset.hpp>
#include <kattn/nn/parameter.hpp>
#include <kattn/nn/tensor.hpp>

namespace kt {

/// n sentences over a vocabulary of 20 (ids 1…19), lengths 1…11 (max_length 9: some are
/// truncated); label 1 when most tokens are ≥ 10.
inline kattn::nn::dataset text_data(kattn::index_t n, std::uint64_t seed) {
    kattn::nn::dataset d;
    d.name = "synthetic";
    d.kind = kattn::nn::input_kind::tokens;
    d.num_classes = 2;
    d.max_length = 9;
    const kattn::random_stream rs(seed, kattn::streams::user + 5);
    std::uint64_t k = 0;
    for (kattn::index_t i = 0; i < n; ++i) {
        const auto len = 1 + std::size_t(rs.uniform(k++) * 11);
        std::vector<std::int32_t> t(len);
        int high = 0;
        for (auto& v : t) high += (v = 1 + std::int32_t(rs.uniform(k++) * 19)) >= 10;
        d.texts.push_back(t);
        d.labels.push_back(2 * high > int(len) ? 1 : 0);
    }
    return d;
}

/// Every parameter value, in list order.
inline std::vector<double> values(const kattn::nn::parameter_list& ps) {
    std::vector<double> v;
    for (const auto& p : ps)
        for (kattn::index_t i = 0; i < p.size(); ++i) v.push_back(p.value_at(i));
    return v;
}

/// max |a − b| / max |b| (∞ for different sizes).
inline double rel_diff(const std::vector<double>& a, const std::vector<double>& b) {
    if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
    double num = 0, den = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        num = std::max(num, std::abs(a[i] - b[i]));
        den = std::max(den, std::abs(b[i]));
    }
    return num / den;
}

/// A model that fails in the training forward of step `crash_at` (a simulated crash).
template <class Model>
struct crashing {
    Model& m;
    std::uint64_t crash_at;
    template <class Batch>
    auto forward(const Batch& b, kattn::nn::context& ctx) {
        if (ctx.training && ctx.step == crash_at) throw std::runtime_error("simulated crash");
        return m.forward(b, ctx);
    }
    template <class Grad>
    void backward(const Grad& d, const kattn::nn::context& ctx) {
        m.backward(d, ctx);
    }
    void collect(kattn::nn::parameter_list& ps, const std::string& prefix) { m.collect(ps, prefix); }
};

}  // namespace kt
