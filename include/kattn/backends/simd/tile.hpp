// kattn/backends/simd/tile.hpp — per-thread tile workspace and the tile primitives the
// simd backend composes: project, activate, contract into (S, z), merge states.
//
// A tile is at most `tile_rows` tokens; its feature rows (tile_rows × F) are the only
// feature buffer ever materialised. Stabilised maps (favor) carry a log-scale C with
// every state: the state holds Σ_j φ(k_j)·e^{−C} v_jᵀ, so merging two states rescales
// the one with the smaller C by e^{C_small − C_large} ≤ 1 (never overflows).
//
// fp32 states are compensated: a float state keeps its running totals S, z in double and
// a float copy (what the tile products read). Each tile's contribution is formed in float
// over ≤ tile_rows rows, then added to the double totals and the copy refreshed, so the
// rounding error of a prefix sum over L tokens stays at a few ε instead of growing ~L·ε
// (causal prefix sums, backward suffix sums, segment totals). fp64 states accumulate in
// place as before.
//
// Ω = I (samplers::identity, P = d; detail::omega_is_identity) skips the projection and
// its transpose in the input gradients: u = xs and dx gets du itself, the values the
// products would give (elu, softplus, sigmoid² … with the identity sampler spend no
// time on Ω).
#pragma once

#include "../../core/warnings_push.hpp"  // GCC PR 105593: false -Wmaybe-uninitialized in AVX-512 intrinsics

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "../../features/omega_layout.hpp"
#include "../../linalg/row_ops.hpp"
#include "../problem.hpp"
#include "../split.hpp"
#include "../../linalg/gemm.hpp"
#include "../../linalg/simd_row_ops.hpp"
#include "../../linalg/transpose.hpp"

namespace kattn::detail::simd_impl {

inline constexpr index_t tile_rows = 64;

/// Extent as a container size.
constexpr std::size_t sz(index_t n) { return static_cast<std::size_t>(n); }

/// Linear-attention state (S, z) at log-scale C; `empty` until a row is added. S and z
/// are read by the kernels; they change only through add / add_scaled / rescale / assign,
/// which keep the double totals of a compensated (float) state in step.
template <class T>
struct key_state {
    static constexpr bool compensated = std::is_same_v<T, float>;
    std::vector<T> S, z;
    std::vector<double> Sd, zd;  ///< compensated: the running totals (S, z are their roundings)
    T C = 0;
    bool empty = true;

    key_state(index_t F, index_t dv)
        : S(sz(F * dv), T(0)), z(sz(F), T(0)), Sd(compensated ? sz(F * dv) : 0), zd(compensated ? sz(F) : 0) {}
    /// Back to the empty state (keeps the storage).
    void clear() {
        std::fill(S.begin(), S.end(), T(0));
        std::fill(z.begin(), z.end(), T(0));
        std::fill(Sd.begin(), Sd.end(), 0.0);
        std::fill(zd.begin(), zd.end(), 0.0);
        C = 0;
        empty = true;
    }

    void rescale(T r) {
        if constexpr (compensated) {
            const double rd = r;
#pragma omp simd
            for (std::size_t i = 0; i < S.size(); ++i) S[i] = static_cast<T>(Sd[i] *= rd);
            for (std::size_t i = 0; i < z.size(); ++i) z[i] = static_cast<T>(zd[i] *= rd);
        } else {
            for (auto& s : S) s *= r;
            for (auto& s : z) s *= r;
        }
    }
    /// Moves the reference shift to C_new ≥ C.
    void raise_to(T C_new) {
        if (!empty && C_new > C) rescale(std::exp(C - C_new));
        C = C_new;
    }
    /// S += Φᵀ V, z += Φᵀ w (w = 1 when nullptr) for n rows of Φ (n × F) and V (n × dv).
    /// `scratch` (any size) holds a compensated state's tile contribution.
    template <class Arch>
    void add(index_t n, const T* phi, const T* V, const T* w, std::vector<T>& scratch) {
        const index_t F = index_t(z.size()), dv = F ? index_t(S.size()) / F : 0;
        if constexpr (compensated) {
            scratch.resize(S.size() + z.size());
            T* dS = scratch.data();
            T* dz = dS + S.size();
            gemm_tn<Arch>(F, dv, n, phi, F, V, dv, dS, dv, false);
            std::fill_n(dz, F, T(0));
            row_sums(n, F, phi, w, dz);
            add_contribution(dS, dz);
        } else {
            gemm_tn<Arch>(F, dv, n, phi, F, V, dv, S.data(), dv, true);
            row_sums(n, F, phi, w, z.data());
        }
        empty = false;
    }
    /// S += dS, z += dz: a tile's contribution (add's, or the bf16 forward's products).
    void add_contribution(const T* dS, const T* dz) {
        if constexpr (compensated) {
#pragma omp simd
            for (std::size_t i = 0; i < S.size(); ++i) S[i] = static_cast<T>(Sd[i] += double(dS[i]));
            for (std::size_t i = 0; i < z.size(); ++i) z[i] = static_cast<T>(zd[i] += double(dz[i]));
        } else {
            for (std::size_t i = 0; i < S.size(); ++i) S[i] += dS[i];
            for (std::size_t i = 0; i < z.size(); ++i) z[i] += dz[i];
        }
        empty = false;
    }
    /// this += r · o (both at this state's shift after the caller's choice of r).
    void add_scaled(const key_state& o, T r) {
        if constexpr (compensated) {
            const double rd = r;
#pragma omp simd
            for (std::size_t i = 0; i < S.size(); ++i) S[i] = static_cast<T>(Sd[i] += rd * o.Sd[i]);
            for (std::size_t i = 0; i < z.size(); ++i) z[i] = static_cast<T>(zd[i] += rd * o.zd[i]);
        } else {
            for (std::size_t i = 0; i < S.size(); ++i) S[i] += r * o.S[i];
            for (std::size_t i = 0; i < z.size(); ++i) z[i] += r * o.z[i];
        }
    }
    /// Sets S, z from outside data (a split link's exchange), a non-empty state at C.
    void assign(const T* S_new, const T* z_new, T C_new) {
        std::copy_n(S_new, S.size(), S.begin());
        std::copy_n(z_new, z.size(), z.begin());
        if constexpr (compensated) {
            std::copy(S.begin(), S.end(), Sd.begin());
            std::copy(z.begin(), z.end(), zd.begin());
        }
        C = C_new;
        empty = false;
    }
    /// this ← this ⊕ other (fixed order: this first).
    void merge(const key_state& o) {
        if (o.empty) return;
        if (empty) {
            *this = o;
            return;
        }
        const T Cn = std::max(C, o.C);
        raise_to(Cn);
        add_scaled(o, std::exp(o.C - Cn));
    }

private:
    /// acc[f] += Σ_r Φ[r][f] · w[r] (w = 1 when nullptr).
    static void row_sums(index_t n, index_t F, const T* phi, const T* w, T* acc) {
        for (index_t r = 0; r < n; ++r) {
            const T wr = w ? w[r] : T(1);
#pragma omp simd
            for (index_t f = 0; f < F; ++f) acc[f] += phi[r * F + f] * wr;
        }
    }
};

/// Spectral parameters of one call plus Ωᵀ (P × d) for the input gradients, and whether
/// Ω is the identity (then neither Ω nor Ωᵀ is used).
template <class Map, class T>
struct spectral {
    spectral_view<Map, T> view;
    index_t d, m, P, F;
    std::vector<T> omega_t;
    T scale;
    bool identity = false;

    static spectral make(const spectral_view<Map, T>& v, T scale, bool need_transpose) {
        spectral s{v, v.d, v.m, Map::projection_dim(v.m), Map::feature_dim(v.m), {}, scale};
        s.identity = detail::omega_is_identity(s.d, s.P, v.omega);
        if (need_transpose && !s.identity) {
            s.omega_t.resize(sz(s.P * s.d));
            transpose(s.d, s.P, v.omega, s.P, s.omega_t.data(), s.d);
        }
        return s;
    }
};

/// Per-thread buffers for one tile of rows and the map's activation.
template <class Map, class T, class Arch>
struct tile_worker {
    using ops = simd_ops<Arch>;
    const spectral<Map, T>& sp;
    std::vector<T> omega_panels;  ///< Ω packed for the projection (gemm_packed_b)
    std::vector<T> xs, u, phi, shift, work, du, dxd;
    std::vector<T> state_scratch;  ///< a compensated state's tile contribution (key_state::add)

    explicit tile_worker(const spectral<Map, T>& s)
        : sp(s),
          omega_panels(s.identity ? 0 : sz(s.d * s.P)),
          xs(sz(tile_rows * s.d)),
          u(sz(tile_rows * s.P)),
          phi(sz(tile_rows * s.F)),
          shift(sz(tile_rows)),
          work(sz(std::max<index_t>(1, Map::workspace(s.m)))),
          du(sz(tile_rows * s.P)),
          dxd(sz(tile_rows * s.d)) {
        if (!s.identity) pack_b_panels<Arch>(s.d, s.P, s.view.omega, s.P, omega_panels.data());
    }

    const T* bias() const { return sp.view.bias; }

    /// xs = scale·x, u = xs·Ω for n rows; when `own_shift`, shift[r] = the row's own
    /// stabiliser (0 for maps without one).
    void project(index_t n, const T* x, bool own_shift) {
        const index_t d = sp.d;
#pragma omp simd
        for (index_t i = 0; i < n * d; ++i) xs[i] = sp.scale * x[i];
        if (sp.identity)
            std::copy_n(xs.data(), n * d, u.data());
        else
            gemm_packed_b<Arch>(n, sp.P, d, xs.data(), d, 1, omega_panels.data(), u.data(), sp.P, false);
        for (index_t r = 0; r < n; ++r) {
            T c = 0;
            if constexpr (Map::has_stabiliser)
                if (own_shift)
                    c = Map::template row_shift<ops>(sp.view.params, d, sp.m, &xs[r * d], &u[r * sp.P], bias());
            shift[r] = c;
        }
    }
    /// phi rows from the projected rows with shift[r] (or `common` when use_common).
    void activate(index_t n, T* out, bool use_common = false, T common = 0) {
        for (index_t r = 0; r < n; ++r)
            Map::template activate<ops>(sp.view.params, sp.d, sp.m, &xs[r * sp.d], &u[r * sp.P], bias(),
                                        use_common ? common : shift[r], &out[r * sp.F]);
    }
    /// Row VJPs: du, dxd from dphi; accumulates db. Shifts as used in activate.
    void vjp(index_t n, const T* ph, const T* dph, T* db, bool use_common = false, T common = 0) {
        std::fill(dxd.begin(), dxd.begin() + n * sp.d, T(0));
        for (index_t r = 0; r < n; ++r)
            Map::template activate_vjp<ops>(sp.view.params, sp.d, sp.m, &xs[r * sp.d], &u[r * sp.P], bias(),
                                            use_common ? common : shift[r], &ph[r * sp.F], &dph[r * sp.F],
                                            &du[r * sp.P], &dxd[r * sp.d], db, work.data());
    }
    /// dx (n × d) = scale·(du·Ωᵀ + dxd);  dΩ += xsᵀ du.
    void input_grads(index_t n, T* dx, T* d_omega) {
        if (sp.identity) {
#pragma omp simd
            for (index_t i = 0; i < n * sp.d; ++i) dxd[i] += du[i];
        } else {
            gemm_nn<Arch>(n, sp.d, sp.P, du.data(), sp.P, sp.omega_t.data(), sp.d, dxd.data(), sp.d, true);
        }
#pragma omp simd
        for (index_t i = 0; i < n * sp.d; ++i) dx[i] = sp.scale * dxd[i];
        gemm_tn<Arch>(sp.d, sp.P, n, xs.data(), sp.d, du.data(), sp.P, d_omega, sp.P, true);
    }
};

/// Scaled inputs and projections (xs, u) of every key row, kept by a key-state pass for a
/// later pass over the same keys (the non-causal backward's key pass), which then skips
/// its projection: u = xs·Ω is the same product either way, so the results are the same
/// bits. Row j of head p is row p·rows_per_head + j.
template <class T>
struct projection_cache {
    T* xs = nullptr;  ///< rows × d
    T* u = nullptr;   ///< rows × P
    index_t rows_per_head = 0, d = 0, P = 0;

    template <class W>
    void save(index_t p, index_t j, index_t n, const W& w) const {
        const index_t r = p * rows_per_head + j;
        std::copy_n(w.xs.begin(), n * d, xs + r * d);
        std::copy_n(w.u.begin(), n * P, u + r * P);
    }
    template <class W>
    void load(index_t p, index_t j, index_t n, W& w) const {
        const index_t r = p * rows_per_head + j;
        std::copy_n(xs + r * d, n * d, w.xs.begin());
        std::copy_n(u + r * P, n * P, w.u.begin());
    }
};

/// Fixed, thread-count-independent split of [0, n) into `parts` contiguous ranges whose
/// boundaries are multiples of tile_rows.
inline index_t split_point(index_t n, index_t parts, index_t s) {
    const index_t tiles = (n + tile_rows - 1) / tile_rows;
    return std::min(n, (tiles * s / parts) * tile_rows);
}

/// Number of segments a single head's sequence is split into for parallelism: a function
/// of the problem only (never of the thread count), so results are reproducible.
inline index_t segments_for(index_t problems, index_t length) {
    if (problems >= 4) return 1;
    return std::clamp<index_t>(length / 1024, 1, 8);
}

}  // namespace kattn::detail::simd_impl

#include "../../core/warnings_pop.hpp"
