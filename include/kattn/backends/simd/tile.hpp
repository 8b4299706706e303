// kattn/backends/simd/tile.hpp — per-thread tile workspace and the tile primitives the
// simd backend composes: project, activate, contract into (S, z), merge states.
//
// A tile is at most `tile_rows` tokens; its feature rows (tile_rows × F) are the only
// feature buffer ever materialised. Stabilised maps (favor) carry a log-scale C with
// every state: the state holds Σ_j φ(k_j)·e^{−C} v_jᵀ, so merging two states rescales
// the one with the smaller C by e^{C_small − C_large} ≤ 1 (never overflows).
#pragma once

#include "../../core/warnings_push.hpp"  // GCC PR 105593: false -Wmaybe-uninitialized in AVX-512 intrinsics

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "../../linalg/row_ops.hpp"
#include "../problem.hpp"
#include "../split.hpp"
#include "../../linalg/gemm.hpp"
#include "../../linalg/simd_row_ops.hpp"

namespace kattn::detail::simd_impl {

inline constexpr index_t tile_rows = 64;

/// Extent as a container size.
constexpr std::size_t sz(index_t n) { return static_cast<std::size_t>(n); }

/// Linear-attention key state (S, z) at log-scale C; `empty` until a key is added.
template <class T>
struct key_state {
    std::vector<T> S, z;
    T C = 0;
    bool empty = true;

    key_state(index_t F, index_t dv) : S(sz(F * dv), T(0)), z(sz(F), T(0)) {}

    void rescale(T r) {
        for (auto& s : S) s *= r;
        for (auto& s : z) s *= r;
    }
    /// Moves the reference shift to C_new ≥ C.
    void raise_to(T C_new) {
        if (!empty && C_new > C) rescale(std::exp(C - C_new));
        C = C_new;
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
        const T r = std::exp(o.C - Cn);
        for (std::size_t i = 0; i < S.size(); ++i) S[i] += r * o.S[i];
        for (std::size_t i = 0; i < z.size(); ++i) z[i] += r * o.z[i];
    }
};

/// Spectral parameters of one call plus Ωᵀ (P × d) for the input gradients.
template <class Map, class T>
struct spectral {
    spectral_view<Map, T> view;
    index_t d, m, P, F;
    std::vector<T> omega_t;
    T scale;

    static spectral make(const spectral_view<Map, T>& v, T scale, bool need_transpose) {
        spectral s{v, v.d, v.m, Map::projection_dim(v.m), Map::feature_dim(v.m), {}, scale};
        if (need_transpose) {
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
    std::vector<T> xs, u, phi, shift, work, du, dxd;

    explicit tile_worker(const spectral<Map, T>& s)
        : sp(s),
          xs(sz(tile_rows * s.d)),
          u(sz(tile_rows * s.P)),
          phi(sz(tile_rows * s.F)),
          shift(sz(tile_rows)),
          work(sz(std::max<index_t>(1, Map::workspace(s.m)))),
          du(sz(tile_rows * s.P)),
          dxd(sz(tile_rows * s.d)) {}

    const T* bias() const { return sp.view.bias; }

    /// xs = scale·x, u = xs·Ω for n rows; when `own_shift`, shift[r] = the row's own
    /// stabiliser (0 for maps without one).
    void project(index_t n, const T* x, bool own_shift) {
        const index_t d = sp.d;
        for (index_t i = 0; i < n * d; ++i) xs[i] = sp.scale * x[i];
        gemm_nn<Arch>(n, sp.P, d, xs.data(), d, sp.view.omega, sp.P, u.data(), sp.P, false);
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
        gemm_nn<Arch>(n, sp.d, sp.P, du.data(), sp.P, sp.omega_t.data(), sp.d, dxd.data(), sp.d, true);
        for (index_t i = 0; i < n * sp.d; ++i) dx[i] = sp.scale * dxd[i];
        gemm_tn<Arch>(sp.d, sp.P, n, xs.data(), sp.d, du.data(), sp.P, d_omega, sp.P, true);
    }
};

/// S += Φᵀ V, z += Φᵀ 1 for n rows.
template <class Arch, class T>
void contract(index_t n, index_t F, index_t dv, const T* phi, const T* v, T* S, T* z) {
    gemm_tn<Arch>(F, dv, n, phi, F, v, dv, S, dv, true);
    for (index_t r = 0; r < n; ++r)
        for (index_t f = 0; f < F; ++f) z[f] += phi[r * F + f];
}

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
