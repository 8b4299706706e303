// kattn/backends/chunked/step.hpp — one recurrent decoding token over a system's primitives.
//
// The recurrent state (S: F × dv, z: F, the key reference C and the step count per
// problem, in double, as the reference backend keeps it) lives in system memory. φ of the
// new key and query rows comes from the same gather + GEMM + activation as the forward
// pass; then, per problem, C' = max(C, c_k) (c_k on the first step), S and z are rescaled
// by e^{C − C'} and receive e^{c_k − C'}·φ_k [v, 1]ᵀ, and out = φ_q·S / guard(φ_q·z).
// Every element has one writer and sums in a fixed order.
#pragma once

#include <cmath>

#include "forward.hpp"
#include "kernels.hpp"

namespace kattn::detail::chunked_impl {

/// Per problem: the new reference C' and the factors e^{C − C'} (old state) and
/// e^{c_k − C'} (new key), into fac[2p], fac[2p + 1]; advances C and the step count.
template <class Map, class W>
struct step_reference {
    const W* ck;
    double* C;
    index_t* steps;
    double* fac;
    KATTN_HD void operator()(index_t p) const {
        const double c = double(ck[p]);
        const double Cn = steps[p] == 0 ? c : (C[p] > c ? C[p] : c);
        fac[2 * p] = steps[p] > 0 && Cn > C[p] ? math::exp(C[p] - Cn) : 1.0;
        fac[2 * p + 1] = Map::has_stabiliser ? math::exp(c - Cn) : 1.0;
        C[p] = Cn;
        ++steps[p];
    }
};

/// Per (p, f, c), c ≤ dv (c = dv: z): S ← fac_old·S + fac_new·φ_k[f]·v[c].
template <class T, class W>
struct step_state {
    geometry g;
    backends::strided_view<const T> v;
    const W* phk;
    const double* fac;
    double* S;
    double* z;
    KATTN_HD void operator()(index_t idx) const {
        const index_t w = g.dv + 1, c = idx % w, f = (idx / w) % g.F, p = idx / (w * g.F);
        const double add = fac[2 * p + 1] * double(phk[p * g.F + f]);
        double* s = c < g.dv ? S + (p * g.F + f) * g.dv + c : z + p * g.F + f;
        const double val = c < g.dv ? double(static_cast<W>(v.row(p / g.heads, p % g.heads, 0)[c])) : 1.0;
        *s = fac[2 * p] * *s + add * val;
    }
};

/// Per (p, c < dv): out = φ_q·S[:, c] / guard(φ_q·z).
template <class Map, class T, class W>
struct step_output {
    geometry g;
    double eps;
    const W* phq;
    const double* S;
    const double* z;
    backends::strided_view<T> out;
    KATTN_HD void operator()(index_t idx) const {
        const index_t c = idx % g.dv, p = idx / g.dv;
        double den = 0, acc = 0;
        for (index_t f = 0; f < g.F; ++f) {
            const double ph = double(phq[p * g.F + f]);
            den += ph * z[p * g.F + f];
            acc += ph * S[(p * g.F + f) * g.dv + c];
        }
        bool clamped = false;
        den = guard_denominator<Map::is_positive>(den, eps, clamped);
        out.row(p / g.heads, p % g.heads, 0)[c] = static_cast<T>(acc / den);
    }
};

/// The step; state arrays in system memory: S (problems × F × dv), z (problems × F),
/// C and steps (problems). q, k: [B, H, 1, d]; v, out: [B, H, 1, dv].
template <class Map, class W, class System, class T>
void step(const System& sys, const spectral<Map, W>& sp, const geometry& g, const backends::recurrent_state_view& st,
          const backends::strided_view<const T>& q, const backends::strided_view<const T>& k,
          const backends::strided_view<const T>& v, const backends::strided_view<T>& out, W scale, double eps) {
    const index_t n = g.problems;
    if (n == 0) return;
    const auto fk = row_features<Map, W>(sys, sp, g, k, 1, true, true, scale);
    const auto fq = row_features<Map, W>(sys, sp, g, q, 1, false, true, scale);
    auto fac = sys.template make_buffer<double>(2 * n);
    sys.launch(n, step_reference<Map, W>{fk.shift.data(), st.C, st.steps, fac.data()});
    sys.launch(n * g.F * (g.dv + 1), step_state<T, W>{g, v, fk.phi.data(), fac.data(), st.S, st.z});
    sys.launch(n * g.dv, step_output<Map, T, W>{g, eps, fq.phi.data(), st.S, st.z, out});
}

}  // namespace kattn::detail::chunked_impl
