// kattn/nn/layer_norm.hpp — layer normalisation over the last dimension (Ba et al., 2016).
//
// Per row x ∈ R^D:
//   μ = (1/D)Σ x_c,   σ² = (1/D)Σ (x_c − μ)²  (biased, as PyTorch),   ρ = 1/√(σ² + ε)
//   x̂ = (x − μ)·ρ,    y = γ ⊙ x̂ + β           (γ = 1, β = 0 at construction)
// Exact backward, with g = dy ⊙ γ:
//   dx = ρ · (g − mean(g) − x̂ · mean(g ⊙ x̂)),   dγ += Σ_rows dy ⊙ x̂,   dβ += Σ_rows dy
// Row statistics are accumulated in double. Parameters "<prefix>.weight" (γ) and
// "<prefix>.bias" (β), both without weight decay. forward(x) / backward(dy), or the uniform
// forward(x, ctx) / backward(dy, ctx) (nn/layer.hpp; ctx ignored).
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "parameter.hpp"
#include "tensor.hpp"

namespace kattn::nn {

struct layer_norm_config {
    index_t dim = 0;
    double eps = 1e-5;
};

template <class T = float>
class layer_norm {
public:
    layer_norm() = default;
    explicit layer_norm(const layer_norm_config& cfg) : cfg_(cfg) {
        detail::require(cfg.dim >= 1, "dim", ">= 1", cfg.dim);
        detail::require(std::isfinite(cfg.eps) && cfg.eps > 0, "eps", "a finite value > 0", cfg.eps);
        gamma_ = parameter<T>({std::size_t(cfg.dim)});
        beta_ = parameter<T>({std::size_t(cfg.dim)});
        std::fill(gamma_.value.begin(), gamma_.value.end(), T(1));
    }

    index_t dim() const { return cfg_.dim; }
    parameter<T>& weight() { return gamma_; }
    parameter<T>& bias() { return beta_; }

    /// y for x [n, dim] (no cache).
    tensor<T> apply(const tensor<T>& x) const {
        tensor<T> xhat;
        std::vector<T> rstd;
        return run(x, xhat, rstd);
    }

    /// Forward with x̂ and ρ kept for backward.
    tensor<T> forward(const tensor<T>& x) { return run(x, xhat_, rstd_); }
    /// The uniform call (nn/layer.hpp): the same; the context is ignored.
    tensor<T> forward(const tensor<T>& x, const context&) { return forward(x); }

    /// dx for dy [n, dim] of the last forward; accumulates dγ, dβ.
    tensor<T> backward(const tensor<T>& dy) {
        const index_t n = index_t(xhat_.shape()[0]), D = cfg_.dim;
        detail::require(dy.dimension() == 2 && index_t(dy.shape()[0]) == n && index_t(dy.shape()[1]) == D, "dy",
                        "shape [" + std::to_string(n) + ", " + std::to_string(D) + "] (the last output)",
                        detail::shape_text(dy.shape()));
        tensor<T> dx = tensor<T>::from_shape({std::size_t(n), std::size_t(D)});
        const T* g = gamma_.data();
        const T* xh = xhat_.data();
        const T* d = dy.data();
        T* o = dx.data();
#pragma omp parallel for schedule(static) if (n * D > 65536)
        for (index_t r = 0; r < n; ++r) {
            double s1 = 0, s2 = 0;
            for (index_t c = 0; c < D; ++c) {
                const double gc = double(d[r * D + c]) * double(g[c]);
                s1 += gc;
                s2 += gc * double(xh[r * D + c]);
            }
            const double m1 = s1 / double(D), m2 = s2 / double(D), rho = double(rstd_[std::size_t(r)]);
            for (index_t c = 0; c < D; ++c) {
                const double gc = double(d[r * D + c]) * double(g[c]);
                o[r * D + c] = T(rho * (gc - m1 - double(xh[r * D + c]) * m2));
            }
        }
        // Parameter gradients: fixed row order (bitwise independent of the thread count).
        for (index_t r = 0; r < n; ++r)
            for (index_t c = 0; c < D; ++c) {
                gamma_.grad[c] += d[r * D + c] * xh[r * D + c];
                beta_.grad[c] += d[r * D + c];
            }
        return dx;
    }

    /// The same as backward(dy); the context is ignored.
    tensor<T> backward(const tensor<T>& dy, const context&) { return backward(dy); }

    void collect(parameter_list& ps, const std::string& prefix) {
        ps.push_back(view(prefix + ".weight", gamma_, false));
        ps.push_back(view(prefix + ".bias", beta_, false));
    }

private:
    tensor<T> run(const tensor<T>& x, tensor<T>& xhat, std::vector<T>& rstd) const {
        detail::require(x.dimension() == 2 && index_t(x.shape()[1]) == cfg_.dim, "x",
                        "shape [n, dim = " + std::to_string(cfg_.dim) + "]", detail::shape_text(x.shape()));
        const index_t n = index_t(x.shape()[0]), D = cfg_.dim;
        xhat = tensor<T>::from_shape({std::size_t(n), std::size_t(D)});
        rstd.assign(std::size_t(n), T(0));
        tensor<T> y = tensor<T>::from_shape({std::size_t(n), std::size_t(D)});
        const T* xs = x.data();
        const T* g = gamma_.data();
        const T* b = beta_.data();
        T* xh = xhat.data();
        T* o = y.data();
#pragma omp parallel for schedule(static) if (n * D > 65536)
        for (index_t r = 0; r < n; ++r) {
            double mu = 0;
            for (index_t c = 0; c < D; ++c) mu += double(xs[r * D + c]);
            mu /= double(D);
            double var = 0;
            for (index_t c = 0; c < D; ++c) {
                const double e = double(xs[r * D + c]) - mu;
                var += e * e;
            }
            var /= double(D);
            const double rho = 1.0 / std::sqrt(var + cfg_.eps);
            rstd[std::size_t(r)] = T(rho);
            for (index_t c = 0; c < D; ++c) {
                const T h = T((double(xs[r * D + c]) - mu) * rho);
                xh[r * D + c] = h;
                o[r * D + c] = g[c] * h + b[c];
            }
        }
        return y;
    }

    layer_norm_config cfg_{};
    parameter<T> gamma_, beta_;
    tensor<T> xhat_;
    std::vector<T> rstd_;
};

}  // namespace kattn::nn
