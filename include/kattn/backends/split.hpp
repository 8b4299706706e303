// kattn/backends/split.hpp — the optional contract for a sequence split into slices.
//
// Linear attention of a sequence cut into consecutive slices (one per process, see
// kattn/dist/) is exact when each slice learns two small states from the others:
//   keys     (S, z) of the keys outside the slice that its queries see: the earlier
//            slices when causal, every other slice otherwise;
//   queries  (∂S, ∂z) = Σ_i φ(q_i) n_iᵀ, Σ_i φ(q_i) e_i of the queries outside the slice
//            that see its keys: the later slices when causal, every other one otherwise.
// Both are F × d_v + F numbers per head, whatever the length. A backend that supports
// splitting adds two overloads of its primitives taking a `slice_link`:
//   forward(const attention_problem<Map, T>&, T* out, const slice_link<T>&)
//   backward(const attention_problem<Map, T>&, const attention_gradients<T>&, const slice_link<T>&)
// It computes the slice's own totals, calls the link's exchange once with them, and
// continues with what the exchange returns. Without a link the slice is the sequence.
//
// Stabilised maps (favor): a key state holds Σ_j e^{c_j − C} φ̃_j v_jᵀ at log-scale C
// (the largest key shift in it); a query state holds Σ_i e^{C − C_i} φ(q_i) n_iᵀ at the
// smallest running shift C_i of its queries. C = −∞ marks an empty state (S, z zero).
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "../core/config.hpp"

namespace kattn::backends {

/// States of `problems` heads in contiguous arrays: S [problems, F, dv] (row-major),
/// z [problems, F], C [problems]. U is T or const T.
template <class U>
struct slice_states {
    U* S = nullptr;
    U* z = nullptr;
    U* C = nullptr;
};

/// How a slice reaches the rest of its sequence. Each exchange receives the slice's own
/// totals and writes the others' contribution (same layout; C = −∞ where there is none).
template <class T>
struct slice_link {
    using exchange = std::function<void(slice_states<const T> own, slice_states<T> others)>;
    exchange keys;     ///< called once by forward and by backward, before any output
    exchange queries;  ///< called once by backward, after the query side, before ∂K and ∂V
};

}  // namespace kattn::backends

namespace kattn::detail {

using backends::slice_link;
using backends::slice_states;

/// Empty-state marker of the split contract.
template <class T>
constexpr T empty_shift() {
    return -std::numeric_limits<T>::infinity();
}

/// a ← a ⊕ b for states of one head, rescaled to the common shift: the larger of the two
/// for key states (`Keys`), the smaller for query states.
template <bool Keys, class A, class B>
void merge_state(index_t F, index_t dv, A* S, A* z, A& C, const B* Sb, const B* zb, B Cb) {
    if (Cb == empty_shift<B>()) return;
    if (C == empty_shift<A>()) {
        std::copy(Sb, Sb + F * dv, S);
        std::copy(zb, zb + F, z);
        C = static_cast<A>(Cb);
        return;
    }
    const A Cn = Keys ? std::max(C, static_cast<A>(Cb)) : std::min(C, static_cast<A>(Cb));
    const A ra = Keys ? std::exp(C - Cn) : std::exp(Cn - C);
    const A rb = Keys ? std::exp(static_cast<A>(Cb) - Cn) : std::exp(Cn - static_cast<A>(Cb));
    for (index_t i = 0; i < F * dv; ++i) S[i] = ra * S[i] + rb * static_cast<A>(Sb[i]);
    for (index_t i = 0; i < F; ++i) z[i] = ra * z[i] + rb * static_cast<A>(zb[i]);
    C = Cn;
}

/// a ← a ⊕ b for key states of one head (C the larger shift; a first, then b).
template <class A, class B>
void merge_key_state(index_t F, index_t dv, A* S, A* z, A& C, const B* Sb, const B* zb, B Cb) {
    merge_state<true>(F, dv, S, z, C, Sb, zb, Cb);
}

/// a ← a ⊕ b for query states of one head (C the smaller reference shift).
template <class A, class B>
void merge_query_state(index_t F, index_t dv, A* S, A* z, A& C, const B* Sb, const B* zb, B Cb) {
    merge_state<false>(F, dv, S, z, C, Sb, zb, Cb);
}

}  // namespace kattn::detail
