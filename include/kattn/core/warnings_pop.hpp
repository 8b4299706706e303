// kattn/core/warnings_pop.hpp — restores the warnings core/warnings_push.hpp silenced.
// Deliberately without an include guard: every include pops once.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#if defined(__clang__)
#pragma clang diagnostic pop
#endif
#if defined(__NVCC__)
#pragma nv_diagnostic pop
#endif
