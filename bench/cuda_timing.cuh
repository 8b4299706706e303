// bench/cuda_timing.cuh — what the CUDA benchmarks share (nvcc only): error checks, event
// timing, device buffers freed on every exit, a device fill, the copy-bandwidth ceiling.
//
//   cuda_bench::check(e, what)            throws std::runtime_error naming `what`
//   cuda_bench::time_median(R, f, s)      median seconds of R calls of f after one warm-up,
//                                         timed with CUDA events on stream s
//   cuda_bench::device_allocations        cudaMalloc'd buffers, freed by its destructor
//   cuda_bench::owned_stream              a non-blocking stream of its own (graph capture
//                                         needs one other than the legacy default)
//   cuda_bench::hash_fill<T>{p, seed, sd} a device functor: p[i] ≈ uniform in ±sd, a hash of
//                                         (seed, i), so inputs are the same on every run
//   cuda_bench::copy_bandwidth(R)         device-to-device copy of 1 GiB, read + write GB/s
//   cuda_bench::current_device(prop)      the current device's properties; false if none
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include <kattn/core/config.hpp>

namespace cuda_bench {

inline void check(cudaError_t e, const char* what) {
    if (e != cudaSuccess) throw std::runtime_error(std::string("bench: ") + what + ": " + cudaGetErrorString(e));
}

/// The current device's properties into prop; false when there is no CUDA device.
inline bool current_device(cudaDeviceProp& prop) {
    int dev = 0;
    return cudaGetDevice(&dev) == cudaSuccess && cudaGetDeviceProperties(&prop, dev) == cudaSuccess;
}

/// Median seconds of `repeats` calls of f after one warm-up, timed with events on `stream`.
template <class F>
double time_median(long repeats, F&& f, cudaStream_t stream = nullptr) {
    cudaEvent_t a, b;
    check(cudaEventCreate(&a), "cudaEventCreate");
    check(cudaEventCreate(&b), "cudaEventCreate");
    f();
    check(cudaDeviceSynchronize(), "warm-up");
    std::vector<double> t;
    for (long r = 0; r < repeats; ++r) {
        check(cudaEventRecord(a, stream), "cudaEventRecord");
        f();
        check(cudaEventRecord(b, stream), "cudaEventRecord");
        check(cudaEventSynchronize(b), "cudaEventSynchronize");
        float ms = 0;
        check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
        t.push_back(ms * 1e-3);
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

/// Device buffers of one benchmark case, freed when the case ends (also by an exception).
struct device_allocations {
    std::vector<void*> held;
    device_allocations() = default;
    device_allocations(const device_allocations&) = delete;
    device_allocations& operator=(const device_allocations&) = delete;
    ~device_allocations() {
        for (void* p : held) cudaFree(p);
    }
    template <class T>
    T* get(std::size_t count, const char* what) {
        void* p = nullptr;
        check(cudaMalloc(&p, count * sizeof(T)), what);
        held.push_back(p);
        return static_cast<T*>(p);
    }
};

/// A non-blocking stream, destroyed with the object.
struct owned_stream {
    cudaStream_t s = nullptr;
    owned_stream() { check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate"); }
    owned_stream(const owned_stream&) = delete;
    owned_stream& operator=(const owned_stream&) = delete;
    ~owned_stream() { cudaStreamDestroy(s); }
};

/// Fills n device elements of T with a cheap hash of (seed, i) scaled to about ±sd.
template <class T>
struct hash_fill {
    T* p;
    std::uint64_t seed;
    float sd;
    __device__ void operator()(kattn::index_t i) const {
        std::uint64_t z = (seed + 1) * 0x9E3779B97F4A7C15ull + std::uint64_t(i) * 0xBF58476D1CE4E5B9ull;
        z ^= z >> 31;
        z *= 0x94D049BB133111EBull;
        z ^= z >> 29;
        const float u = float(z >> 40) / float(1ull << 24);  // [0, 1)
        p[i] = static_cast<T>(sd * (2.f * u - 1.f));
    }
};

/// Device-to-device copy bandwidth (read + write), GB/s.
inline double copy_bandwidth(long repeats) {
    const std::size_t bytes = std::size_t(1) << 30;
    device_allocations mem;
    void* a = mem.get<char>(bytes, "cudaMalloc (copy)");
    void* b = mem.get<char>(bytes, "cudaMalloc (copy)");
    check(cudaMemset(a, 1, bytes), "cudaMemset");
    const double s = time_median(repeats, [&] { cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, nullptr); });
    return 2.0 * double(bytes) / s * 1e-9;
}

}  // namespace cuda_bench
