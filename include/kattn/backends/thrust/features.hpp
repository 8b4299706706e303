// kattn/backends/thrust/features.hpp — φ of the query and key rows (one functor call per row).
#pragma once

#include "../../features/feature_map.hpp"
#include "common.hpp"

namespace kattn::detail::thrust_impl {

/// φ of one row: x·scale → workspace, u = Ωᵀx → workspace, shift, φ. Rows are query rows
/// [0, nq_rows) from xq and key rows from xk; key rows at j ≥ nk[h] are padding (φ = 0,
/// shift = −∞). `nk == nullptr`: every row valid.
template <class Map, class W, class T>
struct feature_rows {
    dspec<Map, W> s;
    const T* xq;
    const T* xk;
    index_t nq_rows, Lk;
    const index_t* nk;
    W scale;
    bool stabilise;
    W* ws;     ///< rows × (d + P): scaled x, then u
    W* phi;    ///< rows × F
    W* shift;  ///< rows, or nullptr

    KATTN_HD void operator()(index_t r) const {
        const index_t d = s.d, P = s.P;
        W* x = ws + r * (d + P);
        W* u = x + d;
        W* ph = phi + r * s.F;
        const T* src;
        if (r < nq_rows) {
            src = xq + r * d;
        } else {
            const index_t kr = r - nq_rows, h = kr / Lk, j = kr % Lk;
            if (nk != nullptr && j >= nk[h]) {
                for (index_t i = 0; i < d + P; ++i) x[i] = W(0);
                for (index_t f = 0; f < s.F; ++f) ph[f] = W(0);
                if (shift) shift[r] = neg_inf<W>();
                return;
            }
            src = xk + kr * d;
        }
        for (index_t i = 0; i < d; ++i) x[i] = scale * W(src[i]);
        for (index_t p = 0; p < P; ++p) u[p] = W(0);
        for (index_t i = 0; i < d; ++i)
            for (index_t p = 0; p < P; ++p) u[p] += x[i] * s.omega[i * P + p];
        W c = W(0);
        if constexpr (Map::has_stabiliser)
            if (stabilise) {
                c = activate_own_shift<Map, scalar_ops>(s.params, d, s.m, x, u, s.bias, ph);
                if (shift) shift[r] = c;
                return;
            }
        Map::template activate<scalar_ops>(s.params, d, s.m, x, u, s.bias, c, ph);
        if (shift) shift[r] = c;
    }
};

}  // namespace kattn::detail::thrust_impl
