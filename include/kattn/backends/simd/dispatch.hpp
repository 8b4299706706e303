// kattn/backends/simd/dispatch.hpp — run-time choice of the simd backend's instruction set.
//
// kattn is header-only, so its simd kernels are compiled with the flags of the program
// that includes them: a plain `-O2` build gets SSE2. The optional kernel library
// `libkattn_simd` (built by kattn's Meson project; src/simd_kernels.cpp) holds the same
// kernels compiled twice, for x86-64-v3 (AVX2 + FMA) and x86-64-v4 (AVX-512), for every
// map of features::all in float and double. A program compiled with KATTN_SIMD_DISPATCH
// defined (the `kattn` Meson and pkg-config dependencies define it and link the library)
// asks the CPU once per process which it can run and routes backends::simd's primitives
// there; maps outside the registry, and CPUs without AVX2, use the program's own
// compiled kernels ("baseline").
//
//   KATTN_SIMD_ISA=avx512|avx2|baseline   caps the choice (read once, on first use)
//   backends::simd::isa()                 the instruction set in use ("avx512bw", …)
//   backends::simd::select_isa("avx2")    chooses it (tests, benchmarks)
//
// The table's layout is checked: the library and the header must come from the same kattn.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>

#include "../../core/config.hpp"
#include "../../core/error.hpp"
#include "../../core/type_list.hpp"
#include "../../features/all.hpp"
#include "../forward_state.hpp"
#include "../problem.hpp"
#include "../split.hpp"

namespace kattn::detail::simd_dispatch {

/// The primitives of one map and precision, compiled for one instruction set.
template <class Map, class T>
struct map_kernels {
    void (*features)(const feature_problem<Map, T>&) = nullptr;
    void (*forward)(const attention_problem<Map, T>&, T*) = nullptr;
    void (*forward_link)(const attention_problem<Map, T>&, T*, const slice_link<T>&) = nullptr;
    void (*forward_keep)(const attention_problem<Map, T>&, T*, forward_state<T>&) = nullptr;
    void (*backward)(const attention_problem<Map, T>&, const attention_gradients<T>&) = nullptr;
    void (*backward_link)(const attention_problem<Map, T>&, const attention_gradients<T>&,
                          const slice_link<T>&) = nullptr;
    void (*backward_saved)(const attention_problem<Map, T>&, const attention_gradients<T>&,
                           const forward_state<T>&) = nullptr;
    bool (*forward_bf16)(const attention_problem<Map, T>&, const bf16_forward_io&) = nullptr;  ///< float only
};

template <class T>
using gemm_kernel = void (*)(index_t, index_t, index_t, const T*, index_t, index_t, const T*, index_t, T*, index_t,
                             bool);

template <class T, class L>
struct maps_table;
template <class T, class... Ms>
struct maps_table<T, type_list<Ms...>> {
    using type = std::tuple<map_kernels<Ms, T>...>;
};

/// Maps the kernel library covers: the registry.
using covered_maps = features::all;

template <class Map, class L>
struct contains;
template <class Map, class... Ms>
struct contains<Map, type_list<Ms...>> : std::bool_constant<(std::is_same_v<Map, Ms> || ...)> {};

/// True when calls for (Map, T) can be dispatched.
template <class Map, class T>
inline constexpr bool covered = contains<Map, covered_maps>::value &&
                                (std::is_same_v<T, float> || std::is_same_v<T, double>);

/// One instruction set's kernels (what the library's entry points return).
struct kernel_table {
    std::size_t layout = 0;          ///< sizeof(kernel_table) in the library; checked against the header's
    int version = 0;                 ///< KATTN_VERSION_MAJOR·10000 + MINOR·100 + PATCH of the library
    std::size_t problem_layout = 0;  ///< the library's problem_layout (the contract's structs)
    const char* arch = "";           ///< xsimd's name of the architecture ("avx512bw", "fma3+avx2")
    typename maps_table<float, covered_maps>::type maps_f;
    typename maps_table<double, covered_maps>::type maps_d;
    gemm_kernel<float> gemm_f = nullptr;
    gemm_kernel<double> gemm_d = nullptr;
    std::size_t (*workspace_bytes)() = nullptr;
    void (*release_workspace)() = nullptr;

    template <class Map, class T>
    const map_kernels<Map, T>& of() const {
        if constexpr (std::is_same_v<T, float>)
            return std::get<map_kernels<Map, float>>(maps_f);
        else
            return std::get<map_kernels<Map, double>>(maps_d);
    }
    template <class T>
    gemm_kernel<T> gemm() const {
        if constexpr (std::is_same_v<T, float>)
            return gemm_f;
        else
            return gemm_d;
    }
};

/// A digest of the contract structs' layout the kernels read (problem.hpp, forward_state.hpp).
inline constexpr std::size_t problem_layout = sizeof(attention_problem<features::favor, double>) * 1000000 +
                                              sizeof(attention_gradients<double>) * 1000 +
                                              sizeof(forward_state<double>);

inline constexpr int library_version = KATTN_VERSION_MAJOR * 10000 + KATTN_VERSION_MINOR * 100 + KATTN_VERSION_PATCH;

}  // namespace kattn::detail::simd_dispatch

#ifdef KATTN_SIMD_DISPATCH
// The kernel library's entry points (libkattn_simd; its only exported symbols).
extern "C" const kattn::detail::simd_dispatch::kernel_table* kattn_simd_kernels_x86_64_v3();
extern "C" const kattn::detail::simd_dispatch::kernel_table* kattn_simd_kernels_x86_64_v4();

namespace kattn::detail::simd_dispatch {

/// The library's table for "avx512" or "avx2" (nullptr otherwise), checked against this header.
inline const kernel_table* library_table(std::string_view isa) {
    const kernel_table* t = nullptr;
    if (isa == "avx512") t = kattn_simd_kernels_x86_64_v4();
    if (isa == "avx2") t = kattn_simd_kernels_x86_64_v3();
    if (t &&
        (t->layout != sizeof(kernel_table) || t->version != library_version || t->problem_layout != problem_layout))
        fail("libkattn_simd",
             "the kernel library of the same kattn version as the headers (" + std::to_string(library_version) + ")",
             "version " + std::to_string(t->version));
    return t;
}

inline bool cpu_runs(std::string_view isa) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    const bool v3 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi2") &&
                    __builtin_cpu_supports("f16c");
    if (isa == "avx2") return v3;
    if (isa == "avx512")
        return v3 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512cd");
#endif
    return isa == "baseline";
}

/// The table for `isa` ("avx512", "avx2"; nullptr for "baseline"); a kattn::error naming
/// `what` when the name is unknown or the CPU cannot run it.
inline const kernel_table* table_for(std::string_view isa, std::string_view what) {
    if (isa != "avx512" && isa != "avx2" && isa != "baseline")
        fail(what, "one of avx512, avx2, baseline", std::string(isa));
    if (!cpu_runs(isa)) fail(what, "an instruction set this CPU supports", std::string(isa));
    return library_table(isa);
}

/// The best the CPU runs, capped by KATTN_SIMD_ISA.
inline const kernel_table* default_table() {
    const char* env = std::getenv("KATTN_SIMD_ISA");
    if (env && *env) return table_for(env, "KATTN_SIMD_ISA (environment)");
    for (std::string_view isa : {"avx512", "avx2"})
        if (cpu_runs(isa)) return library_table(isa);
    return nullptr;
}

struct selection {
    std::atomic<const kernel_table*> table{nullptr};
    std::atomic<bool> chosen{false};
};
inline selection& current() {
    static selection s;
    return s;
}

/// The table in use (nullptr: the program's own kernels). Chosen on the first call.
inline const kernel_table* active() {
    selection& s = current();
    if (!s.chosen.load(std::memory_order_acquire)) {
        static const kernel_table* const initial = default_table();  // thread-safe, once
        const kernel_table* expected = nullptr;
        s.table.compare_exchange_strong(expected, initial, std::memory_order_acq_rel);
        s.chosen.store(true, std::memory_order_release);
    }
    return s.table.load(std::memory_order_acquire);
}

inline void select(std::string_view isa) {
    selection& s = current();
    s.table.store(table_for(isa, "isa"), std::memory_order_release);
    s.chosen.store(true, std::memory_order_release);
}

}  // namespace kattn::detail::simd_dispatch
#endif  // KATTN_SIMD_DISPATCH
