// kattn/samplers/orthogonal_gaussian.hpp — orthogonal random features (ORF).
//
// Frequencies come in blocks of d = dim mutually orthogonal vectors (Yu et al. 2016; FAVOR+):
// block b is Q' = Q·diag(sign(diag R)) from the Householder QR of a seeded d × d Gaussian
// G_b = QR (the sign fix makes Q' Haar-distributed; without it positive-feature estimates
// are biased), and out[k·d + i] = Q'_b[r][i] · s_k / σ for k = b·d + r < count.
// params = orthogonal_gaussian_params: σ and params::norms, s_k chi(d)-distributed
// (orthogonal_norms::chi: each ω is marginally exactly N(0, σ⁻²I)) or √d (fixed).
// Computed in double (a float result is its cast), independent of platform and thread
// count; cost O(⌈m/d⌉·d³). Stream indices and details: docs/samplers.md §2.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "../core/config.hpp"
#include "../core/error.hpp"
#include "../core/random.hpp"
#include "sampler_params.hpp"

namespace kattn {
namespace detail {

/// Writes the orthogonal factor of a Householder QR of the n×n row-major matrix `a`
/// (a is overwritten with R in its upper triangle) into `q` (row-major n×n).
/// With sign_fix, column j of Q is multiplied by sign(R_jj) so that diag(R) ≥ 0; this
/// is the Haar-uniform choice. sign_fix = false exists only to test the pitfall.
inline void householder_q(double* a, index_t n, double* q, bool sign_fix = true) {
    std::vector<double> v(static_cast<std::size_t>(n) * static_cast<std::size_t>(n), 0.0);
    std::vector<double> beta(static_cast<std::size_t>(n), 0.0);
    auto A = [&](index_t r, index_t c) -> double& { return a[r * n + c]; };
    auto V = [&](index_t k, index_t r) -> double& { return v[static_cast<std::size_t>(k * n + r)]; };

    for (index_t k = 0; k + 1 < n; ++k) {
        double norm2 = 0.0;
        for (index_t r = k; r < n; ++r) norm2 += A(r, k) * A(r, k);
        if (norm2 == 0.0) continue;  // H_k = I
        const double norm = std::sqrt(norm2);
        const double alpha = A(k, k) >= 0.0 ? -norm : norm;
        double vnorm2 = 0.0;
        for (index_t r = k; r < n; ++r) {
            V(k, r) = A(r, k) - (r == k ? alpha : 0.0);
            vnorm2 += V(k, r) * V(k, r);
        }
        if (vnorm2 == 0.0) continue;
        beta[static_cast<std::size_t>(k)] = 2.0 / vnorm2;
        const double bk = beta[static_cast<std::size_t>(k)];
        for (index_t c = k; c < n; ++c) {
            double s = 0.0;
            for (index_t r = k; r < n; ++r) s += V(k, r) * A(r, c);
            s *= bk;
            for (index_t r = k; r < n; ++r) A(r, c) -= s * V(k, r);
        }
    }

    // Q = H_0 H_1 … H_{n-2}, accumulated backwards onto the identity.
    for (index_t r = 0; r < n; ++r)
        for (index_t c = 0; c < n; ++c) q[r * n + c] = (r == c) ? 1.0 : 0.0;
    for (index_t k = n - 2; k >= 0; --k) {
        const double bk = beta[static_cast<std::size_t>(k)];
        if (bk == 0.0) continue;
        for (index_t c = 0; c < n; ++c) {
            double s = 0.0;
            for (index_t r = k; r < n; ++r) s += V(k, r) * q[r * n + c];
            s *= bk;
            for (index_t r = k; r < n; ++r) q[r * n + c] -= s * V(k, r);
        }
    }

    if (sign_fix) {
        for (index_t j = 0; j < n; ++j) {
            if (A(j, j) < 0.0) {
                for (index_t r = 0; r < n; ++r) q[r * n + j] = -q[r * n + j];
            }
        }
    }
}

/// The (sign-corrected unless sign_fix = false) Haar-orthogonal block b for `seed`,
/// before norm scaling: q is row-major dim×dim, its rows are unit directions.
inline void orthogonal_block(std::uint64_t seed, std::uint64_t b, index_t dim, double* q, bool sign_fix = true) {
    const random_stream rng(seed, streams::omega);
    const std::uint64_t nn = static_cast<std::uint64_t>(dim) * static_cast<std::uint64_t>(dim);
    std::vector<double> g(static_cast<std::size_t>(nn));
    for (std::uint64_t j = 0; j < nn; ++j) g[static_cast<std::size_t>(j)] = rng.normal(b * nn + j);
    householder_q(g.data(), dim, q, sign_fix);
}

}  // namespace detail

namespace samplers {

struct orthogonal_gaussian {
    static constexpr bool is_orthogonal = true;  // rows within a block are exactly orthogonal
    static constexpr bool is_random = true;
    static constexpr const char* name = "orthogonal_gaussian";
    using params = orthogonal_gaussian_params;  ///< this sampler's parameters

    /// Writes `count` frequency vectors of dimension `dim`:
    /// out[k*dim + i] = component i of vector k (see the header comment for the exact
    /// construction). Throws kattn::error for sigma not finite and > 0, dim < 1,
    /// count < 1 ('num_features') or a null `out`.
    template <class T>
    static void sample(const params& p, index_t dim, index_t count, std::uint64_t seed, T* out) {
        static_assert(std::is_floating_point_v<T>, "orthogonal_gaussian::sample: T must be floating point");
        detail::check_sigma(p.sigma);
        detail::check_sampler_shape(dim, count, out);
        detail::require(p.norms == orthogonal_norms::chi || p.norms == orthogonal_norms::fixed, "norms",
                        "orthogonal_norms::chi or orthogonal_norms::fixed", static_cast<int>(p.norms));

        const random_stream norm_rng(seed, streams::norms);
        const double fixed_norm = std::sqrt(static_cast<double>(dim));
        const index_t blocks = (count + dim - 1) / dim;
        std::vector<double> q(static_cast<std::size_t>(dim) * static_cast<std::size_t>(dim));
        for (index_t b = 0; b < blocks; ++b) {
            detail::orthogonal_block(seed, static_cast<std::uint64_t>(b), dim, q.data());
            for (index_t r = 0; r < dim; ++r) {
                const index_t k = b * dim + r;
                if (k >= count) break;
                double s = fixed_norm;
                if (p.norms == orthogonal_norms::chi) {
                    double s2 = 0.0;
                    for (index_t j = 0; j < dim; ++j) {
                        const double z = norm_rng.normal(static_cast<std::uint64_t>(k * dim + j));
                        s2 += z * z;
                    }
                    s = std::sqrt(s2);
                }
                for (index_t i = 0; i < dim; ++i) {
                    out[k * dim + i] = static_cast<T>((q[static_cast<std::size_t>(r * dim + i)] * s) / p.sigma);
                }
            }
        }
    }
};

}  // namespace samplers
}  // namespace kattn
