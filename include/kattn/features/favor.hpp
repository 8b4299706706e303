// kattn/features/favor.hpp — FAVOR+ positive random features (Choromanski et al.).
//
//   φ(x) = m^{-1/2} · exp(u − ‖x‖²/2 − c),   u = Ωᵀx,   dim φ = m
//
// Unbiased for the softmax kernel exp(xᵀy) when ω ~ N(0, I) and c = 0. Attention
// exp(qᵀk/√d) is obtained by scaling q and k by d^{-1/4} (attention_config::input_scale,
// which defaults to d^{-1/4} for this map). The stabiliser c cancels in the attention
// ratio: queries use their own row maximum, keys a running maximum over the keys seen
// so far (causal-safe: a large future key never changes earlier outputs).
// Default sampler: orthogonal_gaussian.
#pragma once

#include "../core/math.hpp"
#include "../fwd.hpp"
#include "map_base.hpp"

#include "../core/warnings_push.hpp"

namespace kattn::features {

struct favor : map_base {
    static constexpr const char* name = "favor";
    static constexpr bool is_positive = true;
    static constexpr bool has_stabiliser = true;
    static constexpr bool softmax_scaling = true;  // default input scale d^{-1/4}
    using default_sampler = samplers::orthogonal_gaussian;

    /// Row exponent maximum: c = max_l u_l − ‖x‖²/2.
    template <class Ops, class T>
    KATTN_HD static T row_shift(const params&, index_t d, index_t m, const T* x, const T* u, const T*) {
        return Ops::max(m, u) - T(0.5) * Ops::dot(d, x, x);
    }

    template <class Ops, class T>
    KATTN_HD static void activate(const params&, index_t d, index_t m, const T* x, const T* u, const T*, T shift,
                                  T* phi) {
        const T a = -T(0.5) * Ops::dot(d, x, x) - shift;
        const T c = T(1) / std::sqrt(T(m));
        Ops::transform(
            m, phi,
            [a, c](auto ui) {
                using V = decltype(ui);
                return V(c) * math::exp(ui + V(a));
            },
            u);
    }

    /// du_l = dφ_l φ_l;  dx −= (Σ_l dφ_l φ_l) x.
    template <class Ops, class T>
    KATTN_HD static void activate_vjp(const params&, index_t d, index_t m, const T* x, const T*, const T*, T,
                                      const T* phi, const T* dphi, T* du, T* dx, T*, T*) {
        Ops::transform(
            m, du, [](auto f, auto g) { return f * g; }, phi, dphi);
        const T g = Ops::dot(m, phi, dphi);
        for (index_t i = 0; i < d; ++i) dx[i] -= g * x[i];
    }
};

}  // namespace kattn::features

#include "../core/warnings_pop.hpp"
