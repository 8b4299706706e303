// kattn/backends/thrust/common.hpp — shared pieces of the Thrust backend: extents, device buffers, launches.
//
// Rows: the H·Lq query rows come first, then the H·Lk key rows, in every row-indexed
// buffer. Every functor sums in a fixed order, so results do not depend on the launch.
#pragma once

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include <thrust/copy.h>
#include <thrust/device_vector.h>
#include <thrust/execution_policy.h>
#include <thrust/fill.h>
#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>

#include "../../core/math.hpp"
#include "../../linalg/row_ops.hpp"
#include "../../features/feature_map.hpp"
#include "../problem.hpp"
#include "../shift_rescale.hpp"

namespace kattn::detail::thrust_impl {

/// Causal chunk length (tokens). Fixed: results must not depend on anything but the problem.
inline constexpr index_t chunk = 64;

/// Spectral parameters on the device, in the working precision.
template <class Map, class W>
struct dspec {
    const W* omega = nullptr;  ///< d × P
    const W* bias = nullptr;   ///< m or nullptr
    index_t d = 0, m = 0, P = 0, F = 0;
    map_params_t<Map> params{};
};

/// Extents of one attention call. Rows: the H·Lq query rows come first, then the H·Lk
/// key rows, in every row-indexed buffer (features, shifts, workspaces, gradients).
struct geometry {
    index_t H = 0, Lq = 0, Lk = 0, dv = 0, dv1 = 0;
    index_t nb = 1;     ///< key blocks per head: ⌈L/chunk⌉ when causal, 1 otherwise
    index_t block = 0;  ///< tokens per key block: chunk when causal, Lk otherwise
    bool causal = false;
    const index_t* nk = nullptr;  ///< valid keys per head (device)

    KATTN_HD index_t q_rows() const { return H * Lq; }
    KATTN_HD index_t rows() const { return H * (Lq + Lk); }
};

/// dst[i] = To(src[i]).
template <class To, class From>
struct cast_to {
    const From* src;
    To* dst;
    KATTN_HD void operator()(index_t i) const { dst[i] = To(src[i]); }
};

template <class V>
auto raw(V& v) {
    return ::thrust::raw_pointer_cast(v.data());
}

template <class Policy, class Fn>
void launch(index_t n, const Fn& fn) {
    if (n > 0) ::thrust::for_each_n(Policy{}, ::thrust::counting_iterator<index_t>(0), n, fn);
}

/// Host range → new device vector (one copy).
template <class T>
::thrust::device_vector<T> upload(const T* p, index_t n) {
    return ::thrust::device_vector<T>(p, p + n);
}

/// n device values in W at src → host T (cast on the device when T ≠ W, then one copy).
template <class Policy, class T, class W>
void download(const W* src, index_t n, T* dst) {
    if (n <= 0) return;
    if constexpr (std::is_same_v<T, W>) {
        const auto p = ::thrust::device_pointer_cast(src);
        ::thrust::copy(p, p + n, dst);
    } else {
        ::thrust::device_vector<T> tmp(static_cast<std::size_t>(n));
        launch<Policy>(n, cast_to<T, W>{src, raw(tmp)});
        ::thrust::copy(tmp.begin(), tmp.end(), dst);
    }
}

/// Ω and b widened to W on the device.
template <class Map, class W>
struct device_spectral {
    ::thrust::device_vector<W> omega, bias;
    dspec<Map, W> view;
    template <class T>
    explicit device_spectral(const spectral_view<Map, T>& sv) {
        const index_t P = Map::projection_dim(sv.m);
        std::vector<W> o(sv.omega, sv.omega + sv.d * P);
        omega = ::thrust::device_vector<W>(o.begin(), o.end());
        if (sv.bias) {
            std::vector<W> b(sv.bias, sv.bias + sv.m);
            bias = ::thrust::device_vector<W>(b.begin(), b.end());
        }
        view =
            dspec<Map, W>{raw(omega), sv.bias ? raw(bias) : nullptr, sv.d, sv.m, P, Map::feature_dim(sv.m), sv.params};
    }
};

}  // namespace kattn::detail::thrust_impl
