// kattn/linalg/row_ops.hpp — the scalar row-operation policy.
//
// Feature maps are written against a small "row ops" interface so that one definition
// serves the scalar reference backend and the vectorised simd backend:
//   Ops::transform(n, out, f, in...)   out[i] = f(in[i]...), f generic over scalar/batch
//   Ops::sum(n, x), Ops::max(n, x), Ops::dot(n, x, y)   row reductions in a fixed order
// `scalar_ops` calls f with scalars; `simd_ops<Arch>` (linalg/simd_row_ops.hpp) with
// xsimd batches and a scalar tail.
#pragma once

#include "../core/config.hpp"
#include "../core/detected.hpp"

namespace kattn::detail {

struct scalar_ops {
    template <class T, class F, class... In>
    KATTN_HD static void transform(index_t n, T* out, F&& f, const In*... in) {
        for (index_t i = 0; i < n; ++i) out[i] = static_cast<T>(f(in[i]...));
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

template <class P>
using row_ops_member = typename P::row_ops;

/// The row operations a policy (an execution backend) publishes as `row_ops`; scalar_ops
/// when it publishes none. Samplers evaluate rows with their backend's choice through this.
template <class P>
using row_ops_of = detected_or_t<scalar_ops, row_ops_member, P>;

}  // namespace kattn::detail
