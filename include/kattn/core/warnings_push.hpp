// kattn/core/warnings_push.hpp — silences GCC 12's false -W(maybe-)uninitialized warnings
// inside its AVX-512 intrinsics once element functions are inlined on xsimd batches
// (GCC PR 105593). Include at the top of a header's body, and core/warnings_pop.hpp at its
// end. Deliberately without an include guard: every include pushes once.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
