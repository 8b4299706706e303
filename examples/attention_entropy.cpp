// How sharp is FSKA attention? Attention entropy of positive<nonstationary> versus the
// scale s of φ⁺ = ELU(s·φ) + 1, with favor (the softmax approximation) and exact softmax
// attention for comparison. docs/feature_maps.md shows the output.
//
// Setup: d = 32, num_features = 128 (m = 64 pairs, F = 128), L = 256 tokens, Ω from the
// gaussian sampler (seed 42). Queries and keys are independent with iid entries, in two
// conventions: x ~ N(0, 1/d) (unit-variance entries scaled by 1/√d, so ‖x‖ ≈ 1) and
// x ~ N(0, 1) (unscaled, ‖x‖ ≈ √d). For every query row i the explicit weights
//   A_ij = φ(q_i)·φ(k_j) / Σ_j φ(q_i)·φ(k_j)   (features() of the operator)
// give the normalised entropy H_i / log L (1 = uniform) and the ratio max_j A_ij / min_j A_ij;
// the table prints their means over the rows. s = 128 and 1024 show the large-s limit:
// φ⁺/s → max(φ, 0) as s → ∞, so the sharpness saturates.
// Individual headers (kattn/kattn.hpp includes everything): samplers and maps first,
// then the backend, then the operator.
#include <kattn/core/random.hpp>
#include <kattn/samplers/gaussian.hpp>
#include <kattn/samplers/orthogonal_gaussian.hpp>
#include <kattn/features/favor.hpp>
#include <kattn/features/nonstationary.hpp>
#include <kattn/features/positive.hpp>
#include <kattn/backends/simd.hpp>
#include <kattn/attention/linear_attention.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

namespace kf = kattn::features;
namespace ks = kattn::samplers;
using mat = xt::xtensor<double, 2>;

constexpr kattn::index_t d = 32, L = 256, num_features = 128;

struct sharpness {
    double entropy = 0, ratio = 0;
};

/// Mean normalised entropy and max/min ratio of the rows of a positive weight matrix W
/// (rows are normalised here).
sharpness measure(const mat& W) {
    sharpness s;
    for (kattn::index_t i = 0; i < L; ++i) {
        double sum = 0, mx = 0, mn = INFINITY, h = 0;
        for (kattn::index_t j = 0; j < L; ++j) sum += W(i, j);
        for (kattn::index_t j = 0; j < L; ++j) {
            const double a = W(i, j) / sum;
            if (a > 0) h -= a * std::log(a);
            mx = std::max(mx, a);
            mn = std::min(mn, a);
        }
        s.entropy += h / std::log(double(L)) / L;
        s.ratio += mx / mn / L;
    }
    return s;
}

/// W_ij = φ(q_i)·φ(k_j) from the operator's exact feature map.
template <class Attn>
mat kernel_weights(const Attn& attn, const mat& q, const mat& k) {
    const mat pq = attn.features(q), pk = attn.features(k);
    mat W = mat::from_shape({std::size_t(L), std::size_t(L)});
    for (kattn::index_t i = 0; i < L; ++i)
        for (kattn::index_t j = 0; j < L; ++j) {
            double s = 0;
            for (std::size_t f = 0; f < pq.shape()[1]; ++f) s += pq(i, f) * pk(j, f);
            W(i, j) = s;
        }
    return W;
}

/// Exact softmax weights exp(q_i·k_j/√d − max), the target favor approximates.
mat softmax_weights(const mat& q, const mat& k) {
    mat W = mat::from_shape({std::size_t(L), std::size_t(L)});
    for (kattn::index_t i = 0; i < L; ++i) {
        double mx = -INFINITY;
        for (kattn::index_t j = 0; j < L; ++j) {
            double s = 0;
            for (kattn::index_t c = 0; c < d; ++c) s += q(i, c) * k(j, c);
            W(i, j) = s / std::sqrt(double(d));
            mx = std::max(mx, W(i, j));
        }
        for (kattn::index_t j = 0; j < L; ++j) W(i, j) = std::exp(W(i, j) - mx);
    }
    return W;
}

mat inputs(std::uint64_t stream, double sd) {
    const kattn::random_stream rng(7, kattn::streams::user + stream);
    mat x = mat::from_shape({std::size_t(L), std::size_t(d)});
    for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = sd * rng.normal(i);
    return x;
}

int main() {
    const double sds[2] = {1 / std::sqrt(double(d)), 1.0};
    mat q[2], k[2];
    for (int c = 0; c < 2; ++c) q[c] = inputs(0, sds[c]), k[c] = inputs(1, sds[c]);

    std::printf("d = %td, num_features = %td (m = %td pairs), L = %td, independent q and k, seed 42\n", d, num_features,
                num_features / 2, L);
    std::printf("mean over query rows of H/log L (1 = uniform) and of max_j A_ij / min_j A_ij\n\n");
    std::printf("%-34s | %-23s | %-23s\n", "", "x ~ N(0, 1/d) (scaled)", "x ~ N(0, 1) (unscaled)");
    std::printf("%-34s | %10s %12s | %10s %12s\n", "map", "H/log L", "max/min", "H/log L", "max/min");
    auto row = [](const char* name, sharpness a, sharpness b) {
        std::printf("%-34s | %10.5f %12.4g | %10.5f %12.4g\n", name, a.entropy, a.ratio, b.entropy, b.ratio);
    };

    using fska = kattn::linear_attention<kf::positive<kf::nonstationary>, ks::gaussian, kattn::backends::simd, double>;
    for (double s : {0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 128.0, 1024.0}) {
        fska attn({.head_dim = d, .value_dim = d, .num_features = num_features, .seed = 42, .scale = s});
        char name[64];
        std::snprintf(name, sizeof name, "positive<nonstationary>, s = %g", s);
        row(name, measure(kernel_weights(attn, q[0], k[0])), measure(kernel_weights(attn, q[1], k[1])));
    }

    // favor with its default input scale d^{-1/4}: approximates softmax(q·k/√d).
    using favor = kattn::linear_attention<kf::favor, ks::orthogonal_gaussian, kattn::backends::simd, double>;
    favor fav({.head_dim = d, .value_dim = d, .num_features = num_features, .seed = 42});
    row("favor (orthogonal, m = 128)", measure(kernel_weights(fav, q[0], k[0])),
        measure(kernel_weights(fav, q[1], k[1])));
    row("exact softmax(q.k/sqrt(d))", measure(softmax_weights(q[0], k[0])), measure(softmax_weights(q[1], k[1])));
    row("uniform", sharpness{1.0, 1.0}, sharpness{1.0, 1.0});

    // Sanity check: the explicit weights reproduce the O(L) operator (s = 4, unscaled inputs).
    fska attn({.head_dim = d, .value_dim = d, .num_features = num_features, .seed = 42, .scale = 4.0});
    const mat v = inputs(2, 1.0);
    const mat W = kernel_weights(attn, q[1], k[1]);
    const mat out = attn(q[1], k[1], v);
    double err = 0;
    for (kattn::index_t i = 0; i < L; ++i) {
        double sum = 0;
        for (kattn::index_t j = 0; j < L; ++j) sum += W(i, j);
        for (kattn::index_t c = 0; c < d; ++c) {
            double o = 0;
            for (kattn::index_t j = 0; j < L; ++j) o += W(i, j) * v(j, c);
            err = std::max(err, std::abs(o / sum - out(i, c)));
        }
    }
    std::printf("\ncheck: max |explicit A·V − linear_attention(q, k, v)| = %.2e\n", err);
}
