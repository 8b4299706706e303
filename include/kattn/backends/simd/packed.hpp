// kattn/backends/simd/packed.hpp — packed documents (attention_problem::cu_seqlens).
//
// A packed problem holds `documents` sequences back to back in every head: document i is
// rows [cu_i, cu_{i+1}). Attention never crosses a boundary, so every (head, document)
// pair is an independent item, run by one thread with the kernels of the unpacked passes:
// non-causal, the document's key state is built and its queries emitted; causal, its
// tiles start from an empty state. The backward runs an item's passes back to back (the
// causal tile cache applies as in the unpacked backward). No state outlives its item, so
// memory does not grow with the number of documents. Parallelism is over items (heads ×
// documents), not within a document. Parameter gradients are summed per fixed group of
// consecutive items, then over the groups in order: the same bits on any thread count.
// A non-causal forward asked to keep its state (forward_state) keeps every item's key state
// when they fit pb.backward_cache_bytes, and the backward then skips the items' key passes.
#pragma once

#include "../../core/warnings_push.hpp"  // GCC PR 105593: false -Wmaybe-uninitialized in AVX-512 intrinsics

#include <algorithm>
#include <optional>
#include <vector>

#include "linear_backward.hpp"

namespace kattn::detail::simd_impl {

/// Rows [a, b) of document `doc`.
struct document_range {
    index_t a = 0, b = 0;
};
template <class Map, class T>
document_range document_of(const attention_problem<Map, T>& pb, index_t doc) {
    return {pb.cu_seqlens[doc], pb.cu_seqlens[doc + 1]};
}

/// Forward of a packed problem (see the header comment).
/// Whether a forward with `keep` keeps the items' key states: non-causal (a causal document
/// starts from an empty state: nothing to keep) and within pb.backward_cache_bytes.
template <class Map, class T>
bool packed_keeps_states(const attention_problem<Map, T>& pb, index_t F) {
    return !pb.causal && state_bytes<T>(pb.problems * pb.documents, F, pb.dv) <= pb.backward_cache_bytes;
}

/// Forward of a packed problem (see the header comment). With `keep`, also keeps every
/// item's key state and the keys' fingerprint when packed_keeps_states (else keeps nothing).
template <class Map, class T, class Arch>
void packed_forward(const attention_problem<Map, T>& pb, T* out, forward_state<T>* keep = nullptr) {
    using K = forward_kernels<Map, T, Arch>;
    const auto sp = spectral<Map, T>::make(pb.spec, pb.input_scale, false);
    const index_t items = pb.problems * pb.documents;
    if (keep) keep->clear();
    if (keep && !packed_keeps_states(pb, sp.F)) keep = nullptr;
    if (keep) reserve_states(*keep, items, sp.F, pb.dv);
    std::vector<std::uint64_t> fps(keep ? sz(items) : 0, 0);
#pragma omp parallel
    {
        tile_worker<Map, T, Arch> wq(sp), wk(sp);
        key_state<T> st(sp.F, pb.dv);
        std::vector<T> num;
#pragma omp for schedule(dynamic, 1)
        for (index_t it = 0; it < items; ++it) {
            const index_t p = it / pb.documents;
            const auto r = document_of(pb, it % pb.documents);
            st.clear();
            if (pb.causal) {
                K::causal(wq, wk, pb, p, r.a, r.b, st, out);
            } else {
                K::accumulate_keys(wq, pb, p, r.a, r.b, st, nullptr, keep ? &fps[sz(it)] : nullptr);
                if (keep) store_state(*keep, sz(it), st);
                K::emit(wq, pb, p, r.a, r.b, st, out, num);
            }
        }
    }
    if (!keep) return;
    for (const auto h : fps) keep->inputs += h;
    keep->kept = true;
}

/// Number of parameter-gradient groups of a packed backward: a function of the problem
/// only (never of the thread count), at most 64 partial sums of ∂Ω and ∂b.
inline index_t packed_groups(index_t items) { return std::min<index_t>(items, 64); }

/// Backward of a packed problem (see the header comment).
/// With `saved` holding key states (a non-causal forward kept them), they replace the
/// items' key passes; the keys' fingerprint is checked as in the unpacked backward.
template <class Map, class T, class Arch>
void packed_backward(const attention_problem<Map, T>& pb, const attention_gradients<T>& g,
                     const forward_state<T>* saved = nullptr) {
    using K = backward_kernels<Map, T, Arch>;
    using fwd = forward_kernels<Map, T, Arch>;
    using pgrads = typename K::param_grads;
    const auto sp = spectral<Map, T>::make(pb.spec, pb.input_scale, true);
    const index_t items = pb.problems * pb.documents, groups = packed_groups(items), F = sp.F, dv = pb.dv;
    std::vector<pgrads> part(sz(groups), pgrads{sp});
    if (saved && !saved->kept) saved = nullptr;  // the forward kept nothing: recompute
    if (saved) check_saved_extents(*saved, pb.causal ? 0 : items, F, dv);
    std::vector<std::uint64_t> seen(saved ? sz(items) : 0, 0);
    std::vector<T> nb_all, e_all, C_all;
    std::optional<typename K::tile_cache> cache;
    if (pb.causal) {
        nb_all.resize(sz(pb.problems * pb.q_len * dv));
        e_all.resize(sz(pb.problems * pb.q_len));
        C_all.resize(sz(pb.problems * pb.q_len));
        if (K::tile_cache::bytes(pb, sp) <= pb.backward_cache_bytes) cache.emplace(pb, sp);
    }
    auto* cache_ptr = cache ? &*cache : nullptr;
#pragma omp parallel
    {
        tile_worker<Map, T, Arch> wq(sp), wk(sp);
        key_state<T> st(F, dv), dst(F, dv);
        std::vector<T> St(sz(F * dv)), dSt(sz(F * dv));
        std::optional<typename K::causal_bufs> b;
        if (pb.causal) b.emplace(F, dv);
#pragma omp for schedule(dynamic, 1)
        for (index_t grp = 0; grp < groups; ++grp) {
            auto& pg = part[sz(grp)];
            for (index_t it = grp * items / groups; it < (grp + 1) * items / groups; ++it) {
                const index_t p = it / pb.documents, off = p * pb.q_len;
                const auto r = document_of(pb, it % pb.documents);
                st.clear();
                dst.clear();
                if (pb.causal) {
                    K::causal_query_pass(wq, wk, *b, pb, g, p, r.a, r.b, st, nb_all.data() + off * dv,
                                         e_all.data() + off, C_all.data() + off, nullptr, pg, cache_ptr, nullptr);
                    K::causal_key_pass(wq, wk, *b, pb, g, p, r.a, r.b, dst, nb_all.data() + off * dv,
                                       e_all.data() + off, C_all.data() + off, pg, cache_ptr);
                    continue;
                }
                if (saved)
                    load_state(*saved, sz(it), st);
                else
                    fwd::accumulate_keys(wq, pb, p, r.a, r.b, st);
                transpose_simd<Arch>(F, dv, st.S.data(), dv, St.data(), F);
                K::query_pass(wq, pb, g, p, r.a, r.b, st, St, dst, pg);
                dst.C = st.C;  // every query saw the document's one key shift
                transpose_simd<Arch>(F, dv, dst.S.data(), dv, dSt.data(), F);
                K::key_pass(wq, pb, g, p, r.a, r.b, st.C, dst, dSt, pg, nullptr, saved ? &seen[sz(it)] : nullptr);
            }
        }
    }
    if (saved) check_saved_inputs(saved->inputs, seen);
    const index_t no = sp.d * sp.P;
    if (g.d_omega) std::fill_n(g.d_omega, no, T(0));
    if (g.d_bias) std::fill_n(g.d_bias, sp.m, T(0));
    for (const auto& pg : part) {
        if (g.d_omega)
            for (index_t i = 0; i < no; ++i) g.d_omega[i] += pg.d_omega[sz(i)];
        if (g.d_bias)
            for (index_t i = 0; i < sp.m; ++i) g.d_bias[i] += pg.d_bias[sz(i)];
    }
}

}  // namespace kattn::detail::simd_impl

#include "../../core/warnings_pop.hpp"
