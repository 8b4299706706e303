// kattn/backends/thrust/step.hpp — one recurrent decoding step per head (the reference's step, state in double).
#pragma once

#include "common.hpp"

namespace kattn::detail::thrust_impl {

/// One recurrent step of one head, exactly the reference's `step` (state in double).
template <class Map, class W, class T>
struct step_heads {
    dspec<Map, W> s;
    index_t dv;
    W scale;
    double eps;
    const T* q;
    const T* k;
    const T* v;
    double* S;
    double* z;
    double* C;
    index_t* steps;
    W* ws;  ///< per head: x, u (d + P), φ_k, φ_q (F each)
    T* out;
    KATTN_HD void operator()(index_t h) const {
        const index_t d = s.d, P = s.P, F = s.F;
        W* x = ws + h * (d + P + 2 * F);
        W* u = x + d;
        W* phk = u + P;
        W* phq = phk + F;
        auto act = [&](const T* src, W* ph) {
            for (index_t i = 0; i < d; ++i) x[i] = scale * W(src[i]);
            for (index_t p = 0; p < P; ++p) u[p] = W(0);
            for (index_t i = 0; i < d; ++i)
                for (index_t p = 0; p < P; ++p) u[p] += x[i] * s.omega[i * P + p];
            W c = W(0);
            if constexpr (Map::has_stabiliser) c = Map::template row_shift<scalar_ops>(s.params, d, s.m, x, u, s.bias);
            Map::template activate<scalar_ops>(s.params, d, s.m, x, u, s.bias, c, ph);
            return double(c);
        };
        double* Sh = S + h * F * dv;
        double* zh = z + h * F;
        const double ck = act(k + h * d, phk);
        const double Cn = steps[h] == 0 ? ck : (C[h] < ck ? ck : C[h]);
        if (steps[h] > 0 && Cn > C[h]) {
            const double r = ::exp(C[h] - Cn);
            for (index_t f = 0; f < F * dv; ++f) Sh[f] *= r;
            for (index_t f = 0; f < F; ++f) zh[f] *= r;
        }
        C[h] = Cn;
        ++steps[h];
        const double w = ::exp(ck - Cn);
        for (index_t f = 0; f < F; ++f) {
            zh[f] += w * double(phk[f]);
            for (index_t c = 0; c < dv; ++c) Sh[f * dv + c] += w * double(phk[f]) * double(v[h * dv + c]);
        }
        act(q + h * d, phq);
        double dn = 0;
        for (index_t f = 0; f < F; ++f) dn += double(phq[f]) * zh[f];
        bool cl = false;
        dn = guard_denominator<Map::is_positive>(dn, eps, cl);
        for (index_t c = 0; c < dv; ++c) {
            double acc = 0;
            for (index_t f = 0; f < F; ++f) acc += double(phq[f]) * Sh[f * dv + c];
            out[h * dv + c] = static_cast<T>(acc / dn);
        }
    }
};

}  // namespace kattn::detail::thrust_impl
