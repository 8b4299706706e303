// kattn/linalg/simd_row_ops.hpp — the vectorised row-operation policy.
//
// `simd_ops<Arch>` implements the row-ops interface of linalg/row_ops.hpp with xsimd
// batches: the body runs on full batches (unaligned loads/stores), the tail on scalars
// through the same generic lambda. Reductions accumulate lane-wise, then add the lanes
// (xsimd::hadd) and the tail: a fixed order that depends only on n, so results do not
// depend on the thread count.
#pragma once

#include "../core/warnings_push.hpp"  // GCC PR 105593: false -Wmaybe-uninitialized in AVX-512 intrinsics

#include <xsimd/xsimd.hpp>

#include "../core/config.hpp"
#include "batch_math.hpp"
#include "fused.hpp"

namespace kattn::detail {

template <class Arch = xsimd::default_arch>
struct simd_ops {
    template <class T>
    using batch = xsimd::batch<T, Arch>;
    static constexpr bool has_transform2 = true;

    template <class T, class F, class... In>
    static void transform(index_t n, T* out, F&& f, const In*... in) {
        constexpr index_t W = batch<T>::size;
        index_t i = 0;
        for (; i + W <= n; i += W) f(batch<T>::load_unaligned(in + i)...).store_unaligned(out + i);
        for (; i < n; ++i) out[i] = static_cast<T>(f(in[i]...));
    }
    template <class T, class F, class... In>
    static void transform2(index_t n, T* a, T* b, F&& f, const In*... in) {
        constexpr index_t W = batch<T>::size;
        index_t i = 0;
        for (; i + W <= n; i += W) {
            const auto r = f(batch<T>::load_unaligned(in + i)...);
            r.first.store_unaligned(a + i);
            r.second.store_unaligned(b + i);
        }
        for (; i < n; ++i) {
            const auto r = f(in[i]...);
            a[i] = static_cast<T>(r.first);
            b[i] = static_cast<T>(r.second);
        }
    }
    template <class T>
    static T sum(index_t n, const T* x) {
        constexpr index_t W = batch<T>::size;
        batch<T> acc(T(0));
        index_t i = 0;
        for (; i + W <= n; i += W) acc += batch<T>::load_unaligned(x + i);
        T s = xsimd::hadd(acc);
        for (; i < n; ++i) s += x[i];
        return s;
    }
    template <class T>
    static T max(index_t n, const T* x) {
        constexpr index_t W = batch<T>::size;
        index_t i = 0;
        T s = x[0];
        if (n >= W) {
            batch<T> acc = batch<T>::load_unaligned(x);
            for (i = W; i + W <= n; i += W) acc = xsimd::max(acc, batch<T>::load_unaligned(x + i));
            alignas(64) T lanes[W];
            acc.store_unaligned(lanes);
            s = lanes[0];
            for (index_t l = 1; l < W; ++l) s = lanes[l] > s ? lanes[l] : s;
        }
        for (; i < n; ++i) s = x[i] > s ? x[i] : s;
        return s;
    }
    template <class T>
    static T dot(index_t n, const T* x, const T* y) {
        constexpr index_t W = batch<T>::size;
        batch<T> acc(T(0));
        index_t i = 0;
        for (; i + W <= n; i += W) acc = fmadd(batch<T>::load_unaligned(x + i), batch<T>::load_unaligned(y + i), acc);
        T s = xsimd::hadd(acc);
        for (; i < n; ++i) s += x[i] * y[i];
        return s;
    }
};

}  // namespace kattn::detail

#include "../core/warnings_pop.hpp"
