// kattn/nn/activation.hpp — element-wise activations and their derivatives.
//
//   relu(x) = max(x, 0),                  relu'(x) = [x > 0]
//   gelu(x) = x·Φ(x) = ½x(1 + erf(x/√2))  (exact erf form: PyTorch's default GELU)
//   gelu'(x) = Φ(x) + x·φ(x),             φ(x) = e^{−x²/2}/√(2π)
// `activation_kind` selects one at run time; `activation_layer<T>` applies it to a tensor,
// keeps its input, and backward returns dy ⊙ f'(x). gelu is evaluated in double, stored as
// T; relu is exact in T (max(x, 0) and dy·[x > 0] round identically in any precision).
// The uniform forward(x, ctx) / backward(dy, ctx) / collect (nn/layer.hpp) ignore ctx.
#pragma once

#include <cmath>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "parameter.hpp"
#include "tensor.hpp"

namespace kattn::nn {

enum class activation_kind { relu, gelu };

struct relu {
    static double value(double x) { return x > 0 ? x : 0.0; }
    static double derivative(double x) { return x > 0 ? 1.0 : 0.0; }
};

struct gelu {
    static double value(double x) { return 0.5 * x * (1.0 + std::erf(x * 0.70710678118654752440)); }
    static double derivative(double x) {
        const double cdf = 0.5 * (1.0 + std::erf(x * 0.70710678118654752440));
        const double pdf = 0.39894228040143267794 * std::exp(-0.5 * x * x);
        return cdf + x * pdf;
    }
};

/// "relu" or "gelu".
inline std::string_view activation_name(activation_kind k) { return k == activation_kind::relu ? "relu" : "gelu"; }

/// The kind named "relu" or "gelu" (kattn::error otherwise).
inline activation_kind parse_activation(std::string_view name) {
    if (name == "relu") return activation_kind::relu;
    if (name == "gelu") return activation_kind::gelu;
    detail::fail("activation", "\"relu\" or \"gelu\"", std::string(name));
}

template <class T = float>
class activation_layer {
public:
    activation_layer() = default;
    explicit activation_layer(activation_kind k) : kind_(k) {}

    activation_kind kind() const { return kind_; }

    /// f(x) element-wise (no cache).
    tensor<T> apply(const tensor<T>& x) const {
        tensor<T> y = tensor<T>::from_shape({x.shape()[0], x.shape()[1]});
        if (kind_ == activation_kind::relu)
            map<relu>(x, y, false);
        else
            map<gelu>(x, y, false);
        return y;
    }

    /// f(x) with x kept for backward.
    tensor<T> forward(const tensor<T>& x) {
        x_ = x;
        return apply(x);
    }

    /// The same for a temporary x (kept without a copy).
    tensor<T> forward(tensor<T>&& x) {
        x_ = std::move(x);
        return apply(x_);
    }

    /// The uniform calls (nn/layer.hpp): the same as forward(x); the context is ignored.
    tensor<T> forward(const tensor<T>& x, const context&) { return forward(x); }
    tensor<T> forward(tensor<T>&& x, const context&) { return forward(std::move(x)); }

    /// dy ⊙ f'(x) for the x of the last forward.
    tensor<T> backward(const tensor<T>& dy) const {
        detail::require(dy.dimension() == 2 && dy.shape() == x_.shape(), "dy",
                        "shape " + detail::shape_text(x_.shape()) + " (the last output)",
                        detail::shape_text(dy.shape()));
        tensor<T> dx = dy;
        if (kind_ == activation_kind::relu)
            map<relu>(x_, dx, true);
        else
            map<gelu>(x_, dx, true);
        return dx;
    }

    /// The same, in place on a temporary dy.
    tensor<T> backward(tensor<T>&& dy) const {
        detail::require(dy.dimension() == 2 && dy.shape() == x_.shape(), "dy",
                        "shape " + detail::shape_text(x_.shape()) + " (the last output)",
                        detail::shape_text(dy.shape()));
        if (kind_ == activation_kind::relu)
            map<relu>(x_, dy, true);
        else
            map<gelu>(x_, dy, true);
        return std::move(dy);
    }

    /// The same as backward(dy); the context is ignored.
    tensor<T> backward(const tensor<T>& dy, const context&) const { return backward(dy); }
    tensor<T> backward(tensor<T>&& dy, const context&) const { return backward(std::move(dy)); }

    /// No parameters.
    void collect(parameter_list&, const std::string&) {}

private:
    /// out = f(x), or out ⊙= f'(x) when derivative.
    template <class F>
    static void map(const tensor<T>& x, tensor<T>& out, bool derivative) {
        const index_t n = index_t(x.size());
        const T* xs = x.data();
        T* o = out.data();
        if constexpr (std::is_same_v<F, relu>) {
            // Branch-free and in T (exact: the double evaluation rounds to the same values).
            if (derivative) {
#pragma omp parallel for schedule(static) if (n > 65536)
                for (index_t i = 0; i < n; ++i) o[i] = o[i] * (xs[i] > T(0) ? T(1) : T(0));
            } else {
#pragma omp parallel for schedule(static) if (n > 65536)
                for (index_t i = 0; i < n; ++i) o[i] = xs[i] > T(0) ? xs[i] : T(0);
            }
        } else if (derivative) {
#pragma omp parallel for schedule(static) if (n > 16384)
            for (index_t i = 0; i < n; ++i) o[i] = T(double(o[i]) * F::derivative(double(xs[i])));
        } else {
#pragma omp parallel for schedule(static) if (n > 16384)
            for (index_t i = 0; i < n; ++i) o[i] = T(F::value(double(xs[i])));
        }
    }

    activation_kind kind_ = activation_kind::relu;
    tensor<T> x_;
};

}  // namespace kattn::nn
