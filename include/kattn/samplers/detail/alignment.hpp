// kattn/samplers/detail/alignment.hpp — energies of the Langevin particle sampler
// (internals of samplers::langevin), on raw row-major double arrays:
//   alignment_features  Φ (n × F): the exact map (shift 0) of the rows x_i under Ω (d × P)
//   alignment_energy    V = −1/(n(n−1)) Σ_{i≠j} T_ij φ_iᵀφ_j, T_ij = a·[c_i = c_j] + b, and
//                       ∂V/∂Ω in O(n·d·P), via class sums S_c = Σ_{i∈c} φ_i and the map's VJP
//   centred_kta         A = ⟨HKH, HYH⟩_F / (‖HKH‖_F ‖HYH‖_F) through the F × F Gram, linear in n
//   repulsion_energy    W = 1/(N(N−1)) Σ_{k≠l} g(ω_k − ω_l) (Riesz, Coulomb or log) and ∂W/∂ω
// The row-ops policy Ops (scalar_ops, or simd_ops) evaluates the map. Sums over rows run in
// chunks fixed by n, so results are bit-identical for any number of OpenMP threads.
// Derivations: docs/samplers.md §2 (langevin, "Evaluating the energy").
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "../../core/config.hpp"
#include "../../linalg/row_ops.hpp"
#include "../../features/feature_map.hpp"

namespace kattn::detail {

/// Rows [begin, end) of chunk c when n rows are split into `chunks` fixed chunks.
inline index_t chunk_begin(index_t n, index_t chunks, index_t c) { return (n * c) / chunks; }
inline index_t alignment_chunks(index_t n) { return std::max<index_t>(1, std::min<index_t>(n, 32)); }

/// Features of n rows: U = XΩ (n × P) and Φ (n × F), both row-major.
template <class Map, class Ops = scalar_ops>
void alignment_features(const map_params_t<Map>& p, index_t d, index_t m, const double* omega, const double* b,
                        const double* x, index_t n, double* U, double* phi) {
    const index_t P = Map::projection_dim(m), F = Map::feature_dim(m);
#pragma omp parallel for schedule(static)
    for (index_t i = 0; i < n; ++i) {
        double* u = U + i * P;
        const double* xi = x + i * d;
        for (index_t q = 0; q < P; ++q) u[q] = 0.0;
        for (index_t k = 0; k < d; ++k) {
            const double xk = xi[k];
            const double* row = omega + k * P;
            for (index_t q = 0; q < P; ++q) u[q] += xk * row[q];
        }
        Map::template activate<Ops>(p, d, m, xi, u, b, 0.0, phi + i * F);
    }
}

/// Class sums S_c (C × F) and the total S (F) of the feature rows, in row order.
inline void class_sums(const double* phi, index_t n, index_t F, const int* labels, index_t C, std::vector<double>& Sc,
                       std::vector<double>& S, std::vector<double>& counts) {
    Sc.assign(static_cast<std::size_t>(C * F), 0.0);
    S.assign(static_cast<std::size_t>(F), 0.0);
    counts.assign(static_cast<std::size_t>(C), 0.0);
    for (index_t i = 0; i < n; ++i) {
        double* s = Sc.data() + labels[i] * F;
        const double* f = phi + i * F;
        for (index_t q = 0; q < F; ++q) {
            s[q] += f[q];
            S[q] += f[q];
        }
        counts[labels[i]] += 1.0;
    }
}

/// Alignment energy term V (see the header) of precomputed features; adds ∂V/∂Ω (d × P)
/// into d_omega when it is non-null. a, b: the target kernel T_ij = a[c_i = c_j] + b.
template <class Map, class Ops = scalar_ops>
double alignment_energy(const map_params_t<Map>& p, index_t d, index_t m, const double* bias, const double* x,
                        const int* labels, index_t n, index_t C, double a, double b, const double* U, const double* phi,
                        double* d_omega) {
    const index_t P = Map::projection_dim(m), F = Map::feature_dim(m);
    std::vector<double> Sc, S, counts;
    class_sums(phi, n, F, labels, C, Sc, S, counts);
    double diag = 0.0, within = 0.0, total = 0.0;
    for (index_t i = 0; i < n; ++i) {
        const double* f = phi + i * F;
        double s = 0.0;
        for (index_t q = 0; q < F; ++q) s += f[q] * f[q];
        diag += s;
    }
    for (index_t c = 0; c < C; ++c)
        for (index_t q = 0; q < F; ++q) within += Sc[c * F + q] * Sc[c * F + q];
    for (index_t q = 0; q < F; ++q) total += S[q] * S[q];
    const double norm = 1.0 / (double(n) * double(n - 1));
    const double energy = -norm * (a * (within - diag) + b * (total - diag));
    if (d_omega == nullptr) return energy;

    const index_t chunks = alignment_chunks(n);
    std::vector<double> partial(static_cast<std::size_t>(chunks * d * P), 0.0);
    const double g = -2.0 * norm;
#pragma omp parallel for schedule(static)
    for (index_t c = 0; c < chunks; ++c) {
        std::vector<double> dphi(F), du(P), dx(d), db(std::max<index_t>(m, 1)),
            work(std::max<index_t>(Map::workspace(m), 1));
        double* dO = partial.data() + c * d * P;
        for (index_t i = chunk_begin(n, chunks, c); i < chunk_begin(n, chunks, c + 1); ++i) {
            const double* f = phi + i * F;
            const double* sc = Sc.data() + labels[i] * F;
            for (index_t q = 0; q < F; ++q) dphi[q] = g * (a * (sc[q] - f[q]) + b * (S[q] - f[q]));
            std::fill(dx.begin(), dx.end(), 0.0);
            std::fill(db.begin(), db.end(), 0.0);
            const double* xi = x + i * d;
            Map::template activate_vjp<Ops>(p, d, m, xi, U + i * P, bias, 0.0, f, dphi.data(), du.data(), dx.data(),
                                            Map::uses_bias ? db.data() : nullptr, work.data());
            for (index_t k = 0; k < d; ++k) {
                const double xk = xi[k];
                double* row = dO + k * P;
                for (index_t q = 0; q < P; ++q) row[q] += xk * du[q];
            }
        }
    }
    for (index_t c = 0; c < chunks; ++c)
        for (index_t j = 0; j < d * P; ++j) d_omega[j] += partial[c * d * P + j];
    return energy;
}

/// Centred kernel-target alignment of the features Φ (n × F) and one-hot labels; 0 when
/// either centred Gram matrix vanishes (constant features or a single class).
inline double centred_kta(const double* phi, index_t n, index_t F, const int* labels, index_t C) {
    std::vector<double> Sc, S, counts;
    class_sums(phi, n, F, labels, C, Sc, S, counts);
    std::vector<double> mu(F);
    for (index_t q = 0; q < F; ++q) mu[q] = S[q] / double(n);
    // ⟨HKH, HYH⟩ = Σ_c ‖S_c − n_c μ‖².
    double num = 0.0;
    for (index_t c = 0; c < C; ++c)
        for (index_t q = 0; q < F; ++q) {
            const double v = Sc[c * F + q] - counts[c] * mu[q];
            num += v * v;
        }
    // ‖HYH‖² = Σ_{c,c'} (n_c δ_cc' − n_c n_c'/n)².
    double yy = 0.0;
    for (index_t c = 0; c < C; ++c)
        for (index_t e = 0; e < C; ++e) {
            const double v = (c == e ? counts[c] : 0.0) - counts[c] * counts[e] / double(n);
            yy += v * v;
        }
    // ‖HKH‖² = ‖ΦcᵀΦc‖²_F, from the centred columns (F × n, column-major copy).
    std::vector<double> cols(static_cast<std::size_t>(F * n));
    for (index_t i = 0; i < n; ++i)
        for (index_t q = 0; q < F; ++q) cols[q * n + i] = phi[i * F + q] - mu[q];
    std::vector<double> rowsum(F, 0.0);
#pragma omp parallel for schedule(dynamic, 4)
    for (index_t q = 0; q < F; ++q) {
        const double* cq = cols.data() + q * n;
        double acc = 0.0;
        for (index_t r = q; r < F; ++r) {
            const double* cr = cols.data() + r * n;
            double g = 0.0;
            for (index_t i = 0; i < n; ++i) g += cq[i] * cr[i];
            acc += (r == q ? 1.0 : 2.0) * g * g;
        }
        rowsum[q] = acc;
    }
    double kk = 0.0;
    for (index_t q = 0; q < F; ++q) kk += rowsum[q];
    if (!(kk > 0.0) || !(yy > 0.0)) return 0.0;
    return num / (std::sqrt(kk) * std::sqrt(yy));
}

/// Repulsion potential kinds (see samplers::repulsion).
enum class repulsion_kernel { riesz, log };

/// W = 1/(N(N−1)) Σ_{k≠l} g(ω_k − ω_l) of N particles of dimension D (row-major); adds
/// scale·∂W/∂ω into grad (N × D) when non-null; writes the minimum pairwise distance
/// (unsoftened; +∞ for N = 1). W = 0 for N = 1.
inline double repulsion_energy(const double* w, index_t N, index_t D, repulsion_kernel kind, double s, double eps,
                               double scale, double* grad, double& min_dist) {
    min_dist = std::numeric_limits<double>::infinity();
    if (N < 2) return 0.0;
    const double norm = 1.0 / (double(N) * double(N - 1));
    const double e2 = eps * eps;
    std::vector<double> part(N, 0.0), mind(N, std::numeric_limits<double>::infinity());
#pragma omp parallel for schedule(dynamic, 8)
    for (index_t k = 0; k < N; ++k) {
        const double* wk = w + k * D;
        double* gk = grad ? grad + k * D : nullptr;
        double e = 0.0, md = std::numeric_limits<double>::infinity();
        for (index_t l = 0; l < N; ++l) {
            if (l == k) continue;
            const double* wl = w + l * D;
            double r2 = 0.0;
            for (index_t i = 0; i < D; ++i) r2 += (wk[i] - wl[i]) * (wk[i] - wl[i]);
            const double q = r2 + e2;
            double gval, dcoef;  // g and the factor c in ∇g(r) = c·r
            if (kind == repulsion_kernel::riesz) {
                gval = std::pow(q, -0.5 * s);
                dcoef = -s * gval / q;
            } else {
                gval = -0.5 * std::log(q);
                dcoef = -1.0 / q;
            }
            if (l > k) {
                e += gval;
                md = std::min(md, r2);
            }
            if (gk)
                for (index_t i = 0; i < D; ++i) gk[i] += scale * 2.0 * norm * dcoef * (wk[i] - wl[i]);
        }
        part[k] = e;
        mind[k] = md;
    }
    double W = 0.0;
    for (index_t k = 0; k < N; ++k) {
        W += part[k];
        min_dist = std::min(min_dist, mind[k]);
    }
    min_dist = std::sqrt(min_dist);
    return 2.0 * norm * W;
}

}  // namespace kattn::detail
