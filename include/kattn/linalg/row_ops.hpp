// kattn/linalg/row_ops.hpp — the scalar row-operation policy.
//
// Feature maps are written against a small "row ops" interface so that one definition
// serves the scalar reference backend and the vectorised simd backend:
//   Ops::transform(n, out, f, in...)   out[i] = f(in[i]...), f generic over scalar/batch
//   Ops::transform2(n, a, b, f, in...) {a[i], b[i]} = f(in[i]...) (f returns math::two):
//                                      two outputs from one pass (optional; transform2<Ops>
//                                      below falls back to two transforms)
//   Ops::sum(n, x), Ops::max(n, x), Ops::dot(n, x, y)   row reductions in a fixed order
// `scalar_ops` calls f with scalars; `simd_ops<Arch>` (linalg/simd_row_ops.hpp) with
// xsimd batches and a scalar tail.
#pragma once

#include "../core/config.hpp"
#include "../core/detected.hpp"
#include "../core/math.hpp"

namespace kattn::detail {

struct scalar_ops {
    static constexpr bool has_transform2 = true;

    template <class T, class F, class... In>
    KATTN_HD static void transform(index_t n, T* out, F&& f, const In*... in) {
        for (index_t i = 0; i < n; ++i) out[i] = static_cast<T>(f(in[i]...));
    }
    template <class T, class F, class... In>
    KATTN_HD static void transform2(index_t n, T* a, T* b, F&& f, const In*... in) {
        for (index_t i = 0; i < n; ++i) {
            const auto r = f(in[i]...);
            a[i] = static_cast<T>(r.first);
            b[i] = static_cast<T>(r.second);
        }
    }
    template <class T>
    KATTN_HD static T sum(index_t n, const T* x) {
        T s = 0;
        for (index_t i = 0; i < n; ++i) s += x[i];
        return s;
    }
    template <class T>
    KATTN_HD static T max(index_t n, const T* x) {
        T s = x[0];
        for (index_t i = 1; i < n; ++i) s = x[i] > s ? x[i] : s;
        return s;
    }
    template <class T>
    KATTN_HD static T dot(index_t n, const T* x, const T* y) {
        T s = 0;
        for (index_t i = 0; i < n; ++i) s += x[i] * y[i];
        return s;
    }
};

/// Capability trait: the row-ops policy computes two outputs in one pass (transform2).
/// Policies written before transform2 existed (without the flag) keep working.
template <class Ops>
concept has_transform2 = requires {
    requires Ops::has_transform2;
};

/// {a[i], b[i]} = f(in[i]...): Ops::transform2 when the policy has it, otherwise two
/// transforms (each evaluating f and keeping one half).
template <class Ops, class T, class F, class... In>
KATTN_HD void transform2(index_t n, T* a, T* b, F&& f, const In*... in) {
    if constexpr (has_transform2<Ops>) {
        Ops::transform2(n, a, b, f, in...);
    } else {
        Ops::transform(
            n, a, [&f](auto... x) { return f(x...).first; }, in...);
        Ops::transform(
            n, b, [&f](auto... x) { return f(x...).second; }, in...);
    }
}

template <class P>
using row_ops_member = typename P::row_ops;

/// The row operations a policy (an execution backend) publishes as `row_ops`; scalar_ops
/// when it publishes none. Samplers evaluate rows with their backend's choice through this.
template <class P>
using row_ops_of = detected_or_t<scalar_ops, row_ops_member, P>;

}  // namespace kattn::detail
