// kattn/features/omega_layout.hpp — the layout of Ω and how frequency vectors map into it.
//
// A sampler writes `count` frequency vectors w_k of dimension d (or 2d for a paired map's
// (ω₁, ω₂)), row k of a count × dim array. Ω is d × P row-major: column k is ω_k; for
// paired maps ω₁ₖ is column k and ω₂ₖ column count + k (P = 2·count). for_each_omega_entry
// is the only place that layout is written down; omega_is_identity recognises Ω = I.
#pragma once

#include "../core/config.hpp"

namespace kattn::detail {

/// Calls f(o, w) for every entry: o its flat index in Ω (d × P), w its flat index in the
/// count × dim array of frequency vectors.
template <bool Pairs, class F>
void for_each_omega_entry(index_t d, index_t count, F&& f) {
    const index_t dim = Pairs ? 2 * d : d, P = Pairs ? 2 * count : count;
    for (index_t k = 0; k < count; ++k)
        for (index_t i = 0; i < d; ++i) {
            f(i * P + k, k * dim + i);
            if constexpr (Pairs) f(i * P + count + k, k * dim + d + i);
        }
}

/// Ω (d × P) from count frequency vectors w (count × dim), converting From → To.
template <bool Pairs, class To, class From>
void frequencies_to_omega(index_t d, index_t count, const From* w, To* omega) {
    for_each_omega_entry<Pairs>(d, count, [&](index_t o, index_t f) { omega[o] = static_cast<To>(w[f]); });
}

/// The inverse: count frequency vectors (count × dim) from Ω (d × P) — also how a
/// gradient with respect to Ω becomes one with respect to the frequency vectors.
template <bool Pairs, class To, class From>
void omega_to_frequencies(index_t d, index_t count, const From* omega, To* w) {
    for_each_omega_entry<Pairs>(d, count, [&](index_t o, index_t f) { w[f] = static_cast<To>(omega[o]); });
}

/// Whether Ω (d × P, row-major) is the identity: P = d, ones on the diagonal, zeros
/// elsewhere (what samplers::identity writes, and what stays until Ω is changed). Then
/// u = x·Ω is x itself and backends may skip the product: in exact float products x·I and
/// dU·Iᵀ sum zeros and one exact term, so leaving them out changes no value (but the sign
/// of a zero); where products round their inputs (TF32, BF16), it keeps x unrounded.
template <class T>
bool omega_is_identity(index_t d, index_t P, const T* omega) {
    if (omega == nullptr || d != P) return false;
    for (index_t i = 0; i < d; ++i)
        for (index_t k = 0; k < P; ++k)
            if (omega[i * P + k] != (i == k ? T(1) : T(0))) return false;
    return true;
}

}  // namespace kattn::detail
