// kattn/nn/parameter.hpp — trainable parameters and the flat list an optimiser walks.
//
//   parameter<T>     owns value and grad (same size) and a shape; layers hold these
//   parameter_view   what a layer exposes: a name ("layers.0.ffn.w1"), the shape and
//                    spans of value and grad, float or double (RealNVP flows keep their
//                    parameters in double), and whether weight decay applies
//   parameter_list   std::vector<parameter_view>; zero_grad, grad_norm, clip_grad_norm
// Layers append their views with `collect(list, prefix)`; names are unique within a model
// and are the keys of checkpoints (nn/checkpoint.hpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <span>
#include <string>
#include <vector>

#include "../core/config.hpp"
#include "../core/error.hpp"
#include "../core/random.hpp"
#include "detail/namespace.hpp"

namespace kattn::nn {

template <class T = float>
struct parameter {
    std::vector<std::size_t> shape;
    std::vector<T> value, grad;

    parameter() = default;
    explicit parameter(std::vector<std::size_t> s) : shape(std::move(s)) {
        std::size_t n = 1;
        for (auto e : shape) n *= e;
        value.assign(n, T(0));
        grad.assign(n, T(0));
    }
    index_t size() const { return index_t(value.size()); }
    T* data() { return value.data(); }
    const T* data() const { return value.data(); }

    /// U(−bound, bound) from random_stream(seed, stream): entry i from uniform(i).
    void init_uniform(double bound, std::uint64_t seed, std::uint64_t stream = streams::init) {
        const random_stream rs(seed, stream);
        for (std::size_t i = 0; i < value.size(); ++i) value[i] = T(bound * (2.0 * rs.uniform(i) - 1.0));
    }
    /// N(0, sd²) from random_stream(seed, stream).
    void init_normal(double sd, std::uint64_t seed, std::uint64_t stream = streams::init) {
        const random_stream rs(seed, stream);
        for (std::size_t i = 0; i < value.size(); ++i) value[i] = T(sd * rs.normal(i));
    }
};

struct parameter_view {
    std::string name;
    std::vector<std::size_t> shape;
    std::span<float> value{}, grad{};       ///< float parameters
    std::span<double> value64{}, grad64{};  ///< double parameters (exactly one pair is set)
    bool decay = true;                      ///< AdamW weight decay applies

    bool is_double() const { return !value64.empty(); }
    index_t size() const { return index_t(is_double() ? value64.size() : value.size()); }
    double value_at(index_t i) const { return is_double() ? value64[i] : double(value[i]); }
    double grad_at(index_t i) const { return is_double() ? grad64[i] : double(grad[i]); }
    void set_value(index_t i, double v) {
        if (is_double())
            value64[i] = v;
        else
            value[i] = float(v);
    }
    void scale_grad(double s) {
        if (is_double())
            for (auto& g : grad64) g *= s;
        else
            for (auto& g : grad) g = float(double(g) * s);
    }
    void zero_grad() {
        std::fill(grad.begin(), grad.end(), 0.0f);
        std::fill(grad64.begin(), grad64.end(), 0.0);
    }
};

using parameter_list = std::vector<parameter_view>;

/// View of a float or double parameter<T>.
template <class T>
parameter_view view(std::string name, parameter<T>& p, bool decay = true) {
    parameter_view v;
    v.name = std::move(name);
    v.shape = p.shape;
    v.decay = decay;
    if constexpr (std::is_same_v<T, double>) {
        v.value64 = p.value;
        v.grad64 = p.grad;
    } else {
        static_assert(std::is_same_v<T, float>, "kattn::nn::parameter: T must be float or double");
        v.value = p.value;
        v.grad = p.grad;
    }
    return v;
}

inline void zero_grad(parameter_list& ps) {
    for (auto& p : ps) p.zero_grad();
}

/// Total parameter count.
inline index_t count(const parameter_list& ps) {
    index_t n = 0;
    for (const auto& p : ps) n += p.size();
    return n;
}

namespace detail {
/// Adds g_i² to lane i mod 8 of acc (double; a fixed order, so vectorisable and deterministic).
template <class T>
void add_squares(std::span<const T> g, double (&acc)[8]) {
    const std::size_t n = g.size(), n8 = n - n % 8;
    for (std::size_t i = 0; i < n8; i += 8)
        for (std::size_t l = 0; l < 8; ++l) {
            const double x = double(g[i + l]);
            acc[l] += x * x;
        }
    for (std::size_t i = n8; i < n; ++i) {
        const double x = double(g[i]);
        acc[i - n8] += x * x;
    }
}
}  // namespace detail

/// ‖g‖₂ over every parameter (accumulated in double: eight partial sums over the flat
/// index of each view, in a fixed order, added at the end).
inline double grad_norm(const parameter_list& ps) {
    double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (const auto& p : ps) {
        if (p.is_double())
            detail::add_squares<double>(p.grad64, acc);
        else
            detail::add_squares<float>(p.grad, acc);
    }
    const double s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    return std::sqrt(s);
}

/// Scales all gradients by min(1, max_norm/‖g‖) (PyTorch's clip_grad_norm_); returns ‖g‖
/// before clipping. A non-finite norm throws: training diverged.
inline double clip_grad_norm(parameter_list& ps, double max_norm) {
    detail::require(std::isfinite(max_norm) && max_norm > 0, "max_norm", "a finite value > 0", max_norm);
    const double n = grad_norm(ps);
    if (!std::isfinite(n)) detail::fail("gradients", "finite values (training diverged: lower the learning rate)", n);
    if (n > max_norm) {
        const double s = max_norm / (n + 1e-6);
        for (auto& p : ps) p.scale_grad(s);
    }
    return n;
}

}  // namespace kattn::nn
