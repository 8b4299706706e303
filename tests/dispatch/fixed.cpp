// tests/dispatch/fixed.cpp — the dispatch test's reference: cases.hpp compiled as a
// program built for one instruction set would compile it (-march=x86-64-v3 or -v4, no
// KATTN_SIMD_DISPATCH), in a shared library that exports its two entry points only
// (fixed.map), so that nothing compiled here replaces the test program's own code.
#include "cases.hpp"

#if !defined(KATTN_FIXED_ENTRY) || !defined(KATTN_FIXED_ARCH)
#error "KATTN_FIXED_ENTRY and KATTN_FIXED_ARCH must name the entry points (tests/meson.build defines them)"
#endif
#ifdef KATTN_SIMD_DISPATCH
#error "the fixed-ISA reference must be built without KATTN_SIMD_DISPATCH"
#endif

/// Runs every case with the kernels compiled for this library's flags.
extern "C" __attribute__((visibility("default"))) void KATTN_FIXED_ENTRY(kt_dispatch::results* out) {
    *out = kt_dispatch::run_all();
}

/// xsimd's name of the architecture those kernels use.
extern "C" __attribute__((visibility("default"))) const char* KATTN_FIXED_ARCH() { return xsimd::default_arch::name(); }
