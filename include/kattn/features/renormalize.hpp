// kattn/features/renormalize.hpp — the ℓ1 re-normalisation of positive features and its VJP.
//
//   renorm(v) = √m · v / Σᵢ vᵢ        (elu, softplus, sigmoid2, cos2 when params.renormalize)
// Written over a row-ops policy, like the maps that use it.
#pragma once

#include <cmath>

#include "../core/config.hpp"

namespace kattn::detail {

/// y = √m · v / Σv in place; returns Σv. Requires Σv > 0 (guaranteed by floor > 0 or
/// positive activations).
template <class Ops, class T>
KATTN_HD T renormalize(index_t m, T* v) {
    const T s = Ops::sum(m, v);
    const T c = std::sqrt(T(m)) / s;
    Ops::transform(
        m, v, [c](auto vi) { return vi * decltype(vi)(c); }, v);
    return s;
}

/// VJP of y = √m v / s, s = Σv: dv = (√m / s)(dy − ⟨dy, y⟩ / √m), written into dv.
template <class Ops, class T>
KATTN_HD void renormalize_vjp(index_t m, T s, const T* y, const T* dy, T* dv) {
    const T rm = std::sqrt(T(m));
    const T g = Ops::dot(m, dy, y) / rm;
    const T c = rm / s;
    Ops::transform(
        m, dv,
        [c, g](auto d) {
            using V = decltype(d);
            return V(c) * (d - V(g));
        },
        dy);
}

/// The gradient reaching the unnormalised features v = act(in…) of φ = renorm(v) (or φ = v
/// when `renorm` is off): dφ itself, or the renorm VJP, written into `work` after v is
/// recomputed there (Σv cannot be recovered from φ). `act` is the map's own activation,
/// the one its `activate` applies.
template <class Ops, class T, class Act, class... In>
KATTN_HD const T* unnormalised_upstream(bool renorm, index_t m, const T* phi, const T* dphi, T* work, Act act,
                                        const In*... in) {
    if (!renorm) return dphi;
    Ops::transform(m, work, act, in...);
    renormalize_vjp<Ops>(m, Ops::sum(m, work), phi, dphi, work);
    return work;
}

}  // namespace kattn::detail
