// bench/fma_peak.hpp — the CPU's physical fused-multiply-add ceiling, measured in the run.
//
// Each thread runs a loop of fused multiply-adds on independent register accumulators
// (xsimd batches of the architecture the benchmark is compiled for: AVX-512 with
// -march=native on an AVX-512 machine), touching no memory. Twelve chains cover the
// FMA latency × issue width of current x86 cores (4 cycles × 2 pipes) and fit in 16
// vector registers with the two constants, so the loop is throughput-bound: it is the
// most floating-point work per second the cores can do, the ceiling that kattn's
// GFLOP/s is reported against (OpenBLAS SGEMM is reported beside it; on some CPUs it
// reaches well under this peak). An FMA counts as 2 FLOPs per lane.
//
// measure_fma_peak_isa runs the loop at a named instruction set (AVX-512 or AVX2+FMA, with
// function-level target attributes) for a benchmark built without -march whose kernels
// run at that set from the kattn kernel library.
//
// The chains compute a ← a·b + c with b < 1, a contraction towards a fixed point, so the
// values stay finite for any number of iterations; the final sum is returned and
// printed, so the compiler cannot drop the loop (and, without -ffast-math, cannot
// reassociate it).
#pragma once

#include <algorithm>
#include <chrono>
#include <string_view>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include <omp.h>

#include <xsimd/xsimd.hpp>

namespace kattn_bench {

struct fma_peak {
    int threads = 0;
    double gflops = 0;   ///< the best of the timed runs
    double seconds = 0;  ///< duration of that run
    double flops = 0;    ///< FLOPs of one run (all threads)
    float checksum = 0;  ///< the chains' final sum (printed so that the work is observable)
};

namespace detail {

inline constexpr int fma_chains = 12;

/// `iters` rounds of fma_chains independent FMAs on one batch each; returns their sum.
template <class Arch>
[[gnu::noinline]] float fma_loop(long iters, float seed) {
    using V = xsimd::batch<float, Arch>;
    V a[fma_chains];
#pragma GCC unroll 12
    for (int j = 0; j < fma_chains; ++j) a[j] = V(seed + 1e-3f * float(j));
    const V b(0.999999f), c(1e-7f);
    for (long it = 0; it < iters; ++it) {
#pragma GCC unroll 12
        for (int j = 0; j < fma_chains; ++j) a[j] = xsimd::fma(a[j], b, c);
    }
    V s = a[0];
    for (int j = 1; j < fma_chains; ++j) s += a[j];
    return xsimd::hadd(s);
}

}  // namespace detail

/// The FMA peak of `threads` threads running loop(iters, seed) with `lanes` floats per
/// FMA (each thread runs the loop; the wall time of the slowest counts): iterations
/// calibrated so one run lasts at least `min_seconds`, best of `runs`.
inline fma_peak measure_fma_peak_with(float (*loop)(long, float), double lanes, int threads, double min_seconds,
                                      int runs) {
    using clock = std::chrono::steady_clock;
    auto run = [&](long iters, float& sum) {
        float total = 0;
        const auto t0 = clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : total)
        total += loop(iters, 1.0f + 0.01f * float(omp_get_thread_num()));
        const double s = std::chrono::duration<double>(clock::now() - t0).count();
        sum = total;
        return s;
    };
    float sum = 0;
    long iters = 1 << 16;
    while (run(iters, sum) < min_seconds / 4 && iters < (1L << 40)) iters *= 4;  // calibrate
    iters = long(double(iters) * std::max(1.0, min_seconds / std::max(1e-9, run(iters, sum))));
    fma_peak best;
    best.threads = threads;
    best.flops = 2.0 * lanes * detail::fma_chains * double(iters) * threads;
    for (int r = 0; r < runs; ++r) {
        const double s = run(iters, sum);
        const double g = best.flops / s * 1e-9;
        if (g > best.gflops) {
            best.gflops = g;
            best.seconds = s;
            best.checksum = sum;
        }
    }
    return best;
}

/// The FMA peak with the registers of Arch (default: what the benchmark is compiled for).
template <class Arch = xsimd::default_arch>
fma_peak measure_fma_peak(int threads, double min_seconds = 0.25, int runs = 3) {
    return measure_fma_peak_with(&detail::fma_loop<Arch>, double(xsimd::batch<float, Arch>::size), threads, min_seconds,
                                 runs);
}

#if defined(__x86_64__) && defined(__GNUC__)
namespace detail {

// The same loop at a fixed instruction set, for a benchmark compiled without it (plain -O2)
// whose kernels run from the kattn kernel library at that set: function-level target
// attributes, so the code exists only in these functions and runs only when called.
[[gnu::target("avx512f"), gnu::noinline]] inline float fma_loop_avx512(long iters, float seed) {
    __m512 a[fma_chains];
#pragma GCC unroll 12
    for (int j = 0; j < fma_chains; ++j) a[j] = _mm512_set1_ps(seed + 1e-3f * float(j));
    const __m512 b = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
    for (long it = 0; it < iters; ++it) {
#pragma GCC unroll 12
        for (int j = 0; j < fma_chains; ++j) a[j] = _mm512_fmadd_ps(a[j], b, c);
    }
    __m512 s = a[0];
    for (int j = 1; j < fma_chains; ++j) s = _mm512_add_ps(s, a[j]);
    return _mm512_reduce_add_ps(s);
}

[[gnu::target("avx2,fma"), gnu::noinline]] inline float fma_loop_avx2(long iters, float seed) {
    __m256 a[fma_chains];
#pragma GCC unroll 12
    for (int j = 0; j < fma_chains; ++j) a[j] = _mm256_set1_ps(seed + 1e-3f * float(j));
    const __m256 b = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
    for (long it = 0; it < iters; ++it) {
#pragma GCC unroll 12
        for (int j = 0; j < fma_chains; ++j) a[j] = _mm256_fmadd_ps(a[j], b, c);
    }
    __m256 s = a[0];
    for (int j = 1; j < fma_chains; ++j) s = _mm256_add_ps(s, a[j]);
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, s);
    float total = 0;
    for (float x : lanes) total += x;
    return total;
}

}  // namespace detail

/// The FMA peak at the instruction set `isa` names (kattn::backends::simd::isa(): a name
/// starting "avx512", one containing "avx2"), whatever the benchmark is compiled for;
/// any other name: the compiled one's.
inline fma_peak measure_fma_peak_isa(std::string_view isa, int threads, double min_seconds = 0.25, int runs = 3) {
    if (isa.starts_with("avx512"))
        return measure_fma_peak_with(&detail::fma_loop_avx512, 16, threads, min_seconds, runs);
    if (isa.find("avx2") != std::string_view::npos)
        return measure_fma_peak_with(&detail::fma_loop_avx2, 8, threads, min_seconds, runs);
    return measure_fma_peak(threads, min_seconds, runs);
}
#else
inline fma_peak measure_fma_peak_isa(std::string_view, int threads, double min_seconds = 0.25, int runs = 3) {
    return measure_fma_peak(threads, min_seconds, runs);
}
#endif

}  // namespace kattn_bench
