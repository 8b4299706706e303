// kattn/core/warnings_push.hpp — silences GCC 12's false -W(maybe-)uninitialized warnings
// inside its AVX-512 intrinsics once element functions are inlined on xsimd batches
// (GCC PR 105593), and clang's -Wpass-failed notes on `omp simd` loops it leaves scalar.
// Include at the top of a header's body, and core/warnings_pop.hpp at its end.
// Deliberately without an include guard: every include pushes once.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
// clang: `#pragma omp simd` loops that the optimiser does not vectorise (below -O2 the loop
// vectoriser is off) are correct scalar loops, not something the user can act on.
#if defined(__clang__)
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wpass-failed"
#endif
// nvcc's front end: `#pragma GCC unroll` (for the host compiler) is "unrecognized" (1675).
#if defined(__NVCC__)
#pragma nv_diagnostic push
#pragma nv_diag_suppress 1675
#endif
