// kattn/features/favor_hyperbolic.hpp — FAVOR+ with hyperbolic (±u) features.
//
//   φ(x) = (2m)^{-1/2} · exp(−‖x‖²/2 − c) · [exp(u) ; exp(−u)],   dim φ = 2m
//
// Also unbiased for exp(xᵀy), with lower variance than `favor` for the same m when
// |xᵀy| is large. Stabiliser c as for favor (row max of |u| − ‖x‖²/2), and like favor
// the exponents are formed as (±u_l − max|u|) + (e − c), e = max|u| − ‖x‖²/2, so that
// ‖x‖²/2 never cancels against c (finite results at large input norms).
#pragma once

#include "../core/math.hpp"
#include "../fwd.hpp"
#include "../linalg/row_ops.hpp"
#include "map_base.hpp"

#include "../core/warnings_push.hpp"

namespace kattn::features {

struct favor_hyperbolic : map_base {
    static constexpr const char* name = "favor_hyperbolic";
    static constexpr bool is_positive = true;
    static constexpr bool has_stabiliser = true;
    static constexpr bool softmax_scaling = true;
    using default_sampler = samplers::orthogonal_gaussian;

    KATTN_HD static constexpr index_t feature_dim(index_t m) { return 2 * m; }

    template <class T>
    KATTN_HD static T abs_max(index_t m, const T* u) {
        T mx = std::abs(u[0]);
        for (index_t l = 1; l < m; ++l) mx = std::abs(u[l]) > mx ? std::abs(u[l]) : mx;
        return mx;
    }

    template <class Ops, class T>
    KATTN_HD static T row_shift(const params&, index_t d, index_t m, const T* x, const T* u, const T*) {
        return abs_max(m, u) - T(0.5) * Ops::dot(d, x, x);
    }

    /// max_l |u_l| through the row ops, with phi[0, m) as scratch (it is overwritten next):
    /// the same value as abs_max (a maximum is exact), without every lane of a row walking
    /// the whole row.
    template <class Ops, class T>
    KATTN_HD static T abs_max_into(index_t m, const T* u, T* scratch) {
        Ops::transform(
            m, scratch, [](auto ui) { return math::abs(ui); }, u);
        return Ops::max(m, scratch);
    }

    template <class Ops, class T>
    KATTN_HD static void activate(const params&, index_t d, index_t m, const T* x, const T* u, const T*, T shift,
                                  T* phi) {
        const T mx = abs_max_into<Ops>(m, u, phi);
        exponentials<Ops>(m, u, mx, (mx - T(0.5) * Ops::dot(d, x, x)) - shift, phi);  // rounds as row_shift does
    }

    /// φ at the row's own shift c = row_shift(…), returning c: the bits of row_shift then
    /// activate(c), with max |u| and ‖x‖² computed once.
    template <class Ops, class T>
    KATTN_HD static T activate_own_shift(const params&, index_t d, index_t m, const T* x, const T* u, const T*,
                                         T* phi) {
        const T mx = abs_max_into<Ops>(m, u, phi);
        const T e = mx - T(0.5) * Ops::dot(d, x, x);
        exponentials<Ops>(m, u, mx, e - e, phi);
        return e;
    }

    /// φ⁺_l = (2m)^{-1/2} exp((u_l − mx) + a), φ⁻_l = (2m)^{-1/2} exp((−u_l − mx) + a).
    template <class Ops, class T>
    KATTN_HD static void exponentials(index_t m, const T* u, T mx, T a, T* phi) {
        const T c = T(1) / std::sqrt(T(2 * m));
        Ops::transform(
            m, phi,
            [a, c, mx](auto ui) {
                using V = decltype(ui);
                return V(c) * math::exp((ui - V(mx)) + V(a));
            },
            u);
        Ops::transform(
            m, phi + m,
            [a, c, mx](auto ui) {
                using V = decltype(ui);
                return V(c) * math::exp((-ui - V(mx)) + V(a));
            },
            u);
    }

    /// du_l = dφ⁺_l φ⁺_l − dφ⁻_l φ⁻_l;  dx −= ⟨dφ, φ⟩ x.
    template <class Ops, class T>
    KATTN_HD static void activate_vjp(const params&, index_t d, index_t m, const T* x, const T*, const T*, T,
                                      const T* phi, const T* dphi, T* du, T* dx, T*, T*) {
        Ops::transform(
            m, du, [](auto fp, auto gp, auto fm, auto gm) { return fp * gp - fm * gm; }, phi, dphi, phi + m, dphi + m);
        const T g = Ops::dot(2 * m, phi, dphi);
        detail::axpy<Ops>(d, -g, x, dx);
    }
};

}  // namespace kattn::features

#include "../core/warnings_pop.hpp"
