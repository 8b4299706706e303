// kattn/linalg/row_ops.hpp — the scalar row-operation policy.
//
// Feature maps are written against a small "row ops" interface so that one definition
// serves the scalar reference backend and the vectorised simd backend:
//   Ops::transform(n, out, f, in...)   out[i] = f(in[i]...), f generic over scalar/batch
//   Ops::transform2(n, a, b, f, in...) {a[i], b[i]} = f(in[i]...) (f returns math::two):
//                                      two outputs from one pass (optional; transform2<Ops>
//                                      below falls back to two transforms)
//   Ops::sum(n, x), Ops::max(n, x), Ops::dot(n, x, y)   row reductions in a fixed order
//   Ops::axpy(n, a, x, y)              y[i] += a·x[i] (optional; axpy<Ops> below falls back
//                                      to a scalar loop)
// Policies that split one row over several threads (backends/warp_ops.cuh) also give
// `lanes`, `lane()`, `sync()` and `reduce_sum(v)`; scalar_ops gives the one-lane versions,
// so row functors written with them (backends/chunked/kernels.hpp) serve both.
// `scalar_ops` calls f with scalars; `simd_ops<Arch>` (linalg/simd_row_ops.hpp) with
// xsimd batches and a scalar tail.
#pragma once

#include "../core/config.hpp"
#include "../core/detected.hpp"
#include "../core/math.hpp"

namespace kattn::detail {

struct scalar_ops {
    static constexpr bool has_transform2 = true;
    /// One thread per row: lane 0 of 1, nothing to synchronise or combine.
    static constexpr index_t lanes = 1;
    KATTN_HD static constexpr index_t lane() { return 0; }
    KATTN_HD static void sync() {}
    template <class T>
    KATTN_HD static T reduce_sum(T v) {
        return v;
    }

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

/// Capability trait: the row-ops policy updates y += a·x itself (axpy).
template <class Ops>
concept has_axpy = requires {
    requires Ops::has_axpy;
};

/// y[i] += a·x[i]: Ops::axpy when the policy has it, otherwise a scalar loop. The maps' row
/// functions use it for updates of their outputs, which a policy that splits a row over
/// several threads must not run on every thread.
template <class Ops, class T>
KATTN_HD void axpy(index_t n, T a, const T* x, T* y) {
    if constexpr (has_axpy<Ops>) {
        Ops::axpy(n, a, x, y);
    } else {
        for (index_t i = 0; i < n; ++i) y[i] += a * x[i];
    }
}

template <class P>
using row_ops_member = typename P::row_ops;

/// The row operations a policy (an execution backend) publishes as `row_ops`; scalar_ops
/// when it publishes none. Samplers evaluate rows with their backend's choice through this.
template <class P>
using row_ops_of = detected_or_t<scalar_ops, row_ops_member, P>;

}  // namespace kattn::detail
