// kattn/features/favor.hpp — FAVOR+ positive random features (Choromanski et al.).
//
//   φ(x) = m^{-1/2} · exp(u − ‖x‖²/2 − c),   u = Ωᵀx,   dim φ = m
//
// Unbiased for the softmax kernel exp(xᵀy) when ω ~ N(0, I) and c = 0. Attention
// exp(qᵀk/√d) is obtained by scaling q and k by d^{-1/4} (attention_config::input_scale,
// which defaults to d^{-1/4} for this map). The stabiliser c cancels in the attention
// ratio: queries use their own row maximum, keys a running maximum over the keys seen
// so far (causal-safe: a large future key never changes earlier outputs).
//
// Large norms: ‖x‖²/2 can be far larger than every u_l (entries of x ~ 1e5 give ~1e10),
// so c and ‖x‖²/2 are huge and nearly equal. The exponent is therefore never formed as
// u_l + (−‖x‖²/2 − c) (that difference cancels to a garbage row constant in float and
// overflows exp); it is (u_l − max u) + (e − c) with e = max u − ‖x‖²/2 computed exactly
// as in row_shift, so a row's own shift gives exponents ≤ 0 exactly, and a common
// shift c ≥ e (the running key maximum) only rescales the row by e^{e − c} ≤ 1.
// Default sampler: orthogonal_gaussian.
#pragma once

#include "../core/math.hpp"
#include "../fwd.hpp"
#include "../linalg/row_ops.hpp"
#include "map_base.hpp"

#include "../core/warnings_push.hpp"

namespace kattn::features {

struct favor : map_base {
    static constexpr const char* name = "favor";
    static constexpr bool is_positive = true;
    static constexpr bool has_stabiliser = true;
    static constexpr bool softmax_scaling = true;  // default input scale d^{-1/4}
    using default_sampler = samplers::orthogonal_gaussian;

    /// Row exponent maximum e = max_l u_l − ‖x‖²/2 given max_l u_l (one expression, shared
    /// by row_shift and activate so that the two round identically).
    template <class Ops, class T>
    KATTN_HD static T exponent_max(index_t d, const T* x, T umax) {
        return umax - T(0.5) * Ops::dot(d, x, x);
    }

    /// φ_l = m^{-1/2} exp((u_l − umax) + a).
    template <class Ops, class T>
    KATTN_HD static void exponentials(index_t m, const T* u, T umax, T a, T* phi) {
        const T c = T(1) / std::sqrt(T(m));
        Ops::transform(
            m, phi,
            [a, c, umax](auto ui) {
                using V = decltype(ui);
                return V(c) * math::exp((ui - V(umax)) + V(a));
            },
            u);
    }

    /// Row exponent maximum: c = max_l u_l − ‖x‖²/2.
    template <class Ops, class T>
    KATTN_HD static T row_shift(const params&, index_t d, index_t m, const T* x, const T* u, const T*) {
        return exponent_max<Ops>(d, x, Ops::max(m, u));
    }

    /// φ_l = m^{-1/2} exp((u_l − max u) + (e − shift)): no cancellation of ‖x‖²/2 (header).
    template <class Ops, class T>
    KATTN_HD static void activate(const params&, index_t d, index_t m, const T* x, const T* u, const T*, T shift,
                                  T* phi) {
        const T umax = Ops::max(m, u);
        exponentials<Ops>(m, u, umax, exponent_max<Ops>(d, x, umax) - shift, phi);
    }

    /// φ at the row's own shift c = row_shift(…), returning c: the bits of row_shift then
    /// activate(c), with the row's maximum and ‖x‖² computed once.
    template <class Ops, class T>
    KATTN_HD static T activate_own_shift(const params&, index_t d, index_t m, const T* x, const T* u, const T*,
                                         T* phi) {
        const T umax = Ops::max(m, u);
        const T e = exponent_max<Ops>(d, x, umax);
        exponentials<Ops>(m, u, umax, e - e, phi);
        return e;
    }

    /// du_l = dφ_l φ_l;  dx −= (Σ_l dφ_l φ_l) x.
    template <class Ops, class T>
    KATTN_HD static void activate_vjp(const params&, index_t d, index_t m, const T* x, const T*, const T*, T,
                                      const T* phi, const T* dphi, T* du, T* dx, T*, T*) {
        Ops::transform(
            m, du, [](auto f, auto g) { return f * g; }, phi, dphi);
        const T g = Ops::dot(m, phi, dphi);
        detail::axpy<Ops>(d, -g, x, dx);
    }
};

}  // namespace kattn::features

#include "../core/warnings_pop.hpp"
