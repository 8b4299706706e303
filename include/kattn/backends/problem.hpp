// kattn/backends/problem.hpp — the backend contract's data: what an operator hands a backend.
//
// Operators validate xtensor arguments at the API edge, then call the four primitives of
// an execution backend (backends/execution_backend.hpp) with these plain structs:
// contiguous row-major buffers, extents, the spectral parameters and the options. A
// problem is `problems = batch·heads` independent heads; head p belongs to batch entry
// p / heads (key lengths are per batch entry). Writing a backend: docs/backends.md.
#pragma once

#include <cstddef>

#include "../core/bfloat16.hpp"
#include "../core/config.hpp"
#include "../features/feature_map.hpp"

namespace kattn::backends {

/// Spectral parameters and the map's hyper-parameters of one operator.
template <class Map, class T>
struct spectral_view {
    const T* omega = nullptr;    ///< d × P row-major, P = projection_dim(m)
    const T* bias = nullptr;     ///< m entries, or nullptr when the map has no bias
    index_t d = 0;               ///< input (head) dimension
    index_t m = 0;               ///< the maps' m: num_features, or num_features/2 pairs for paired maps
    map_params_t<Map> params{};  ///< Map::params
};

/// φ of n rows of x (n × d) into phi (n × F), without stabiliser (the exact map).
template <class Map, class T>
struct feature_problem {
    spectral_view<Map, T> spec;
    const T* x = nullptr;
    T* phi = nullptr;
    index_t n = 0;
    T input_scale = 1;
};

/// Linear attention over `problems` heads; q: [problems, q_len, d], k: [problems,
/// k_len, d], v: [problems, k_len, dv], out: [problems, q_len, dv].
template <class Map, class T>
struct attention_problem {
    spectral_view<Map, T> spec;
    const T* q = nullptr;
    const T* k = nullptr;
    const T* v = nullptr;
    index_t problems = 1, heads = 1, q_len = 0, k_len = 0, dv = 0;
    const index_t* key_lengths = nullptr;  ///< per batch entry, or nullptr
    bool causal = false;
    T input_scale = 1;  ///< q and k are multiplied by this before the map
    double eps = 1e-6;  ///< denominator guard
    /// Memory a backend may keep between backward passes instead of recomputing (simd:
    /// the causal tiles' features and scores); results must not depend on it.
    std::size_t backward_cache_bytes = 0;
    /// Packed documents (only for a backend whose execution_backend_traits::packs_sequences
    /// is true; nullptr otherwise): `documents` + 1 offsets {0, …, q_len}, strictly
    /// increasing; q_len == k_len, no key_lengths. Document i is rows [cu_i, cu_{i+1}) of
    /// every head, and attention never crosses a document boundary.
    const index_t* cu_seqlens = nullptr;
    index_t documents = 0;

    KATTN_HD index_t valid_keys(index_t p) const { return key_lengths ? key_lengths[p / heads] : k_len; }
};

/// The bf16 tensors of a forward call whose problem (attention_problem<Map, float>, with
/// q, k, v nullptr) gives the shapes: q, k, v and out in the problem's layouts.
struct bf16_forward_io {
    const bf16* q = nullptr;
    const bf16* k = nullptr;
    const bf16* v = nullptr;
    bf16* out = nullptr;
};

/// Outputs of a backward pass; d_omega (d × P) and d_bias (m) are overwritten with the
/// sum over all heads (either may be nullptr: not wanted); dq, dk, dv have the shapes of
/// q, k, v.
template <class T>
struct attention_gradients {
    const T* dout = nullptr;
    T* dq = nullptr;
    T* dk = nullptr;
    T* dv = nullptr;
    T* d_omega = nullptr;
    T* d_bias = nullptr;
};

/// Recurrent decoding state of `problems` heads, kept in double: S (F × dv) and z (F)
/// at the common key reference shift C (favor's running maximum), plus the step count.
struct recurrent_state_view {
    double* S = nullptr;
    double* z = nullptr;
    double* C = nullptr;
    index_t* steps = nullptr;
};

/// One decoding token for every head: q, k: [problems, d]; v, out: [problems, dv]. The
/// backend adds (k, v) to `state`, then writes the attention of q over every token so far.
template <class Map, class T>
struct step_problem {
    spectral_view<Map, T> spec;
    recurrent_state_view state;
    const T* q = nullptr;
    const T* k = nullptr;
    const T* v = nullptr;
    T* out = nullptr;
    index_t problems = 1, dv = 0;
    T input_scale = 1;
    double eps = 1e-6;
};

}  // namespace kattn::backends

namespace kattn::detail {

// The contract's types, visible unqualified to the backends' internals (kattn::detail::…).
using backends::attention_gradients;
using backends::attention_problem;
using backends::bf16_forward_io;
using backends::feature_problem;
using backends::recurrent_state_view;
using backends::spectral_view;
using backends::step_problem;

/// Denominator guard: positive maps max(den, eps); signed maps sign(den)·max(|den|, eps).
/// Returns the guarded value; `clamped` tells whether the guard replaced den.
template <bool Positive, class A>
KATTN_HD inline A guard_denominator(A den, A eps, bool& clamped) {
    if constexpr (Positive) {
        clamped = !(den >= eps);
        return clamped ? eps : den;
    } else {
        const A a = den < 0 ? -den : den;
        clamped = !(a >= eps);
        if (!clamped) return den;
        return den < 0 ? -eps : eps;
    }
}

}  // namespace kattn::detail
