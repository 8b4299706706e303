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
// The chains compute a ← a·b + c with b < 1, a contraction towards a fixed point, so the
// values stay finite for any number of iterations; the final sum is returned and
// printed, so the compiler cannot drop the loop (and, without -ffast-math, cannot
// reassociate it).
#pragma once

#include <algorithm>
#include <chrono>

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

/// The FMA peak of `threads` threads (each runs the loop; the wall time of the slowest
/// counts): iterations calibrated so one run lasts at least `min_seconds`, best of `runs`.
template <class Arch = xsimd::default_arch>
fma_peak measure_fma_peak(int threads, double min_seconds = 0.25, int runs = 3) {
    using clock = std::chrono::steady_clock;
    constexpr double lanes = double(xsimd::batch<float, Arch>::size);
    auto run = [&](long iters, float& sum) {
        float total = 0;
        const auto t0 = clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : total)
        total += detail::fma_loop<Arch>(iters, 1.0f + 0.01f * float(omp_get_thread_num()));
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

}  // namespace kattn_bench
