// kattn/backends/warp_ops.cuh — the row-ops policy of one warp per row (nvcc only).
//
// The maps' row functions (features/*.hpp) and the chunked backend's row functors are
// written against the row-ops interface (linalg/row_ops.hpp). With `warp_ops`, the 32
// lanes of a warp evaluate one row together: element i of a row is lane i mod 32's, so a
// warp reads and writes 32 consecutive elements at a time (coalesced), where one thread
// per row would touch 32 rows' cache lines at once. cuda_system::launch_rows gives every
// row one warp and publishes this policy as its `row_ops`.
//
// Float rows whose pointers are all 16-byte aligned and whose length is a multiple of 4
// move as float4: lane j then takes elements 4j … 4j + 3 of every 128 (one 16-byte load
// or store per lane per step where there would be four of 4 bytes, and four independent
// evaluations of f in flight). Other rows, and other element types, go element by
// element. Which way a row goes depends only on its length and addresses, so a call's
// results are the same on every run.
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

#include <cstdint>
#include <type_traits>

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

    /// Whether a row of n elements at these pointers moves as float4 (header): every
    /// element type float, n a multiple of 4, every pointer 16-byte aligned.
    template <class... T>
    __host__ __device__ static bool quads(index_t n, const T*... p) {
        if constexpr (!(std::is_same_v<std::remove_cv_t<T>, float> && ...)) {
            return false;
        } else {
            return n % 4 == 0 && ((reinterpret_cast<std::uintptr_t>(p) % 16 == 0) && ...);
        }
    }

    template <class T, class F, class... In>
    __device__ static void transform(index_t n, T* out, F&& f, const In*... in) {
        sync();
        if constexpr (std::is_same_v<T, float> && (std::is_same_v<In, float> && ...)) {
            if (quads(n, out, in...)) {
                float4* o = reinterpret_cast<float4*>(out);
                for (int j = int(lane()); j < int(n / 4); j += 32) o[j] = map4(f, quad(in, j)...);
                sync();
                return;
            }
        }
        for (index_t i = lane(); i < n; i += lanes) out[i] = static_cast<T>(f(in[i]...));
        sync();
    }
    template <class T, class F, class... In>
    __device__ static void transform2(index_t n, T* a, T* b, F&& f, const In*... in) {
        sync();
        if constexpr (std::is_same_v<T, float> && (std::is_same_v<In, float> && ...)) {
            if (quads(n, a, b, in...)) {
                float4* a4 = reinterpret_cast<float4*>(a);
                float4* b4 = reinterpret_cast<float4*>(b);
                for (int j = int(lane()); j < int(n / 4); j += 32) {
                    float4 ra, rb;
                    map4_2(ra, rb, f, quad(in, j)...);
                    a4[j] = ra;
                    b4[j] = rb;
                }
                sync();
                return;
            }
        }
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
        if constexpr (std::is_same_v<T, float>) {
            if (quads(n, x, y)) {
                float4* y4 = reinterpret_cast<float4*>(y);
                for (int j = int(lane()); j < int(n / 4); j += 32) {
                    const float4 v = quad(x, j);
                    float4 w = y4[j];
                    w.x += a * v.x;
                    w.y += a * v.y;
                    w.z += a * v.z;
                    w.w += a * v.w;
                    y4[j] = w;
                }
                sync();
                return;
            }
        }
        for (index_t i = lane(); i < n; i += lanes) y[i] += a * x[i];
        sync();
    }
    template <class T>
    __device__ static T sum(index_t n, const T* x) {
        sync();
        T s = 0;
        if constexpr (std::is_same_v<T, float>) {
            if (quads(n, x)) {
                for (int j = int(lane()); j < int(n / 4); j += 32) {
                    const float4 v = quad(x, j);
                    s += v.x;
                    s += v.y;
                    s += v.z;
                    s += v.w;
                }
                return reduce_sum(s);
            }
        }
        for (index_t i = lane(); i < n; i += lanes) s += x[i];
        return reduce_sum(s);
    }
    template <class T>
    __device__ static T max(index_t n, const T* x) {
        sync();
        T s = x[0];
        if constexpr (std::is_same_v<T, float>) {
            if (quads(n, x)) {
                for (int j = int(lane()); j < int(n / 4); j += 32) {
                    const float4 v = quad(x, j);
                    s = v.x > s ? v.x : s;
                    s = v.y > s ? v.y : s;
                    s = v.z > s ? v.z : s;
                    s = v.w > s ? v.w : s;
                }
                return reduce_max(s);
            }
        }
        for (index_t i = lane(); i < n; i += lanes) s = x[i] > s ? x[i] : s;
        return reduce_max(s);
    }
    template <class T>
    __device__ static T dot(index_t n, const T* x, const T* y) {
        sync();
        T s = 0;
        if constexpr (std::is_same_v<T, float>) {
            if (quads(n, x, y)) {
                for (int j = int(lane()); j < int(n / 4); j += 32) {
                    const float4 u = quad(x, j), v = quad(y, j);
                    s += u.x * v.x;
                    s += u.y * v.y;
                    s += u.z * v.z;
                    s += u.w * v.w;
                }
                return reduce_sum(s);
            }
        }
        for (index_t i = lane(); i < n; i += lanes) s += x[i] * y[i];
        return reduce_sum(s);
    }

private:
    /// Elements 4j … 4j + 3 of a row that quads() accepted.
    __device__ static float4 quad(const float* p, int j) { return reinterpret_cast<const float4*>(p)[j]; }
    template <class F, class... V>
    __device__ static float4 map4(F& f, const V&... v) {
        return float4{float(f(v.x...)), float(f(v.y...)), float(f(v.z...)), float(f(v.w...))};
    }
    template <class F, class... V>
    __device__ static void map4_2(float4& a, float4& b, F& f, const V&... v) {
        const auto rx = f(v.x...), ry = f(v.y...), rz = f(v.z...), rw = f(v.w...);
        a = float4{float(rx.first), float(ry.first), float(rz.first), float(rw.first)};
        b = float4{float(rx.second), float(ry.second), float(rz.second), float(rw.second)};
    }
};

}  // namespace kattn::detail
