// kattn/backends/warp_ops.cuh — the row-ops policy of one warp per row (nvcc only).
//
// The maps' row functions (features/*.hpp) and the chunked backend's row functors are
// written against the row-ops interface (linalg/row_ops.hpp). With `warp_ops`, the 32
// lanes of a warp evaluate one row together: element i of a row is lane i mod 32's, so a
// warp reads and writes 32 consecutive elements at a time (coalesced), where one thread
// per row would touch 32 rows' cache lines at once. cuda_system::launch_rows gives every
// row one warp and publishes this policy as its `row_ops`.
//
// Reductions are butterflies (__shfl_xor_sync) over the lanes' partial results, each lane
// first summing its own elements in index order: a fixed order, so results are the same on
// every run, and every lane ends with the same bits (each step adds the same two values,
// in either order). transform, transform2 and axpy end with __syncwarp(), so what one lane
// wrote is visible to the row's other lanes before they read it (maps reduce over outputs
// they have just transformed). Every lane must call every operation (no lane may leave a
// row early): row functions and functors branch on per-row values only.
#pragma once

#include <cuda_runtime.h>

#include "../core/config.hpp"

namespace kattn::detail {

struct warp_ops {
    static constexpr bool has_transform2 = true;
    static constexpr bool has_axpy = true;
    static constexpr index_t lanes = 32;
    static constexpr unsigned all_lanes = 0xffffffffu;

    __device__ static index_t lane() { return index_t(threadIdx.x & 31u); }
    __device__ static void sync() { __syncwarp(all_lanes); }

    template <class T>
    __device__ static T reduce_sum(T v) {
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(all_lanes, v, o);
        return v;
    }
    template <class T>
    __device__ static T reduce_max(T v) {
        for (int o = 16; o > 0; o >>= 1) {
            const T w = __shfl_xor_sync(all_lanes, v, o);
            v = w > v ? w : v;
        }
        return v;
    }

    template <class T, class F, class... In>
    __device__ static void transform(index_t n, T* out, F&& f, const In*... in) {
        sync();
        for (index_t i = lane(); i < n; i += lanes) out[i] = static_cast<T>(f(in[i]...));
        sync();
    }
    template <class T, class F, class... In>
    __device__ static void transform2(index_t n, T* a, T* b, F&& f, const In*... in) {
        sync();
        for (index_t i = lane(); i < n; i += lanes) {
            const auto r = f(in[i]...);
            a[i] = static_cast<T>(r.first);
            b[i] = static_cast<T>(r.second);
        }
        sync();
    }
    template <class T>
    __device__ static void axpy(index_t n, T a, const T* x, T* y) {
        sync();
        for (index_t i = lane(); i < n; i += lanes) y[i] += a * x[i];
        sync();
    }
    template <class T>
    __device__ static T sum(index_t n, const T* x) {
        sync();
        T s = 0;
        for (index_t i = lane(); i < n; i += lanes) s += x[i];
        return reduce_sum(s);
    }
    template <class T>
    __device__ static T max(index_t n, const T* x) {
        sync();
        T s = x[0];
        for (index_t i = lane(); i < n; i += lanes) s = x[i] > s ? x[i] : s;
        return reduce_max(s);
    }
    template <class T>
    __device__ static T dot(index_t n, const T* x, const T* y) {
        sync();
        T s = 0;
        for (index_t i = lane(); i < n; i += lanes) s += x[i] * y[i];
        return reduce_sum(s);
    }
};

}  // namespace kattn::detail
