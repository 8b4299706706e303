// kattn/backends/chunked/device_call.hpp — the options of a device-resident call of a
// chunked backend, and the checks every such call runs before any work.
//
//   kattn::backends::device_options{causal, key_lengths, input_scale, eps, cu_seqlens, documents}
//
// check_call (views) and check_extents (shapes alone, for device_workspace_bytes) throw a
// kattn::error naming the argument at fault; both return the call's geometry. Key lengths
// and packed offsets live in system memory and are copied back once to be checked (the one
// host synchronisation of a device-resident call). The calls: backends/chunked.hpp.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "../../core/error.hpp"
#include "../strided_view.hpp"
#include "kernels.hpp"

namespace kattn::backends {

/// Options of a device-resident call (the operator's options, as plain values).
struct device_options {
    bool causal = false;
    /// Valid keys per batch entry, in system memory (device memory on a GPU), or nullptr.
    const index_t* key_lengths = nullptr;
    /// q and k are multiplied by this before the map: pass the operator's input_scale().
    double input_scale = 1;
    double eps = 1e-6;  ///< denominator guard
    /// Packed documents (FlashAttention's cu_seqlens, in system memory): documents + 1
    /// offsets {0, …, L}, strictly increasing; batch 1, q and k of the same length, no key
    /// lengths. Attention never crosses a document boundary. nullptr: one sequence.
    const index_t* cu_seqlens = nullptr;
    index_t documents = 0;
};

}  // namespace kattn::backends

namespace kattn::detail::chunked_impl {

/// Extents of a call with head dimension d and m features (packed tables: apply()).
template <class Map>
geometry geometry_of(index_t d, index_t m, index_t B, index_t H, index_t Lq, index_t Lk, index_t dv, bool causal,
                     const index_t* key_lengths) {
    geometry g;
    g.heads = H;
    g.problems = B * H;
    g.Lq = Lq;
    g.Lk = Lk;
    g.causal = causal;
    g.Lqp = causal ? (Lq + chunk - 1) / chunk * chunk : Lq;
    g.Lkp = causal ? (Lk + chunk - 1) / chunk * chunk : Lk;
    g.nb = causal ? g.Lkp / chunk : 1;
    g.nm = (g.Lkp + chunk - 1) / chunk;
    g.d = d;
    g.m = m;
    g.P = Map::projection_dim(g.m);
    g.F = Map::feature_dim(g.m);
    g.dv = dv;
    g.dv1 = value_columns(dv);
    g.key_lengths = key_lengths;
    return g;
}

inline void require_arg(bool ok, const char* arg, const std::string& want, const std::string& got) {
    if (!ok) throw kattn::error(std::string("kattn: argument '") + arg + "': expected " + want + ", got " + got);
}

inline std::string shape_text(index_t a, index_t b, index_t c, index_t d) {
    return "[" + std::to_string(a) + ", " + std::to_string(b) + ", " + std::to_string(c) + ", " + std::to_string(d) +
           "]";
}

/// The options' checks for a call of B × H heads, Lq queries, Lk keys (all already
/// positive): causal lengths, scale, eps, key lengths and packed offsets (read back into
/// `offsets`). Returns the geometry (packed tables not yet applied).
template <class Map, class System>
geometry check_extents(const System& sys, index_t d, index_t m, index_t B, index_t H, index_t Lq, index_t Lk,
                       index_t dv, const backends::device_options& o, std::vector<index_t>& offsets) {
    require_arg(!o.causal || Lq == Lk, "k", "length equal to q's length " + std::to_string(Lq) + " (causal attention)",
                std::to_string(Lk));
    require_arg(o.input_scale > 0 && o.input_scale < HUGE_VAL, "input_scale", "a finite positive value",
                std::to_string(o.input_scale));
    require_arg(o.eps > 0 && o.eps < HUGE_VAL, "eps", "a finite positive value", std::to_string(o.eps));
    if (o.key_lengths && B > 0) {  // B values copied back once to be checked
        std::vector<index_t> lens(static_cast<std::size_t>(B));
        sys.to_host(lens.data(), o.key_lengths, B);
        for (index_t b = 0; b < B; ++b)
            require_arg(lens[std::size_t(b)] >= 1 && lens[std::size_t(b)] <= Lk, "key_lengths",
                        "values in [1, " + std::to_string(Lk) + "]",
                        std::to_string(lens[std::size_t(b)]) + " at batch entry " + std::to_string(b));
    }
    if (o.cu_seqlens) {  // documents + 1 offsets copied back once to be checked
        require_arg(B == 1, "q", "batch 1 with packed documents (cu_seqlens)", std::to_string(B));
        require_arg(Lq == Lk, "k", "q's length " + std::to_string(Lq) + " with packed documents", std::to_string(Lk));
        require_arg(!o.key_lengths, "key_lengths", "nullptr with packed documents (cu_seqlens)", "a pointer");
        require_arg(o.documents >= 1 && o.documents <= Lq, "documents", "a count in [1, " + std::to_string(Lq) + "]",
                    std::to_string(o.documents));
        offsets.resize(std::size_t(o.documents + 1));
        sys.to_host(offsets.data(), o.cu_seqlens, o.documents + 1);
        require_arg(offsets.front() == 0 && offsets.back() == Lq, "cu_seqlens",
                    "offsets from 0 to the packed length " + std::to_string(Lq),
                    std::to_string(offsets.front()) + " … " + std::to_string(offsets.back()));
        for (std::size_t i = 1; i < offsets.size(); ++i)
            require_arg(offsets[i] > offsets[i - 1], "cu_seqlens", "strictly increasing offsets",
                        std::to_string(offsets[i]) + " after " + std::to_string(offsets[i - 1]) + " at index " +
                            std::to_string(i));
    }
    return geometry_of<Map>(d, m, B, H, Lq, Lk, dv, o.causal, o.key_lengths);
}

/// A decoding step takes no causal flag, key lengths or documents (it is causal by
/// construction).
inline void check_step_options(const backends::device_options& o) {
    require_arg(!o.causal && !o.key_lengths && !o.cu_seqlens, "options",
                "no causal flag, key lengths or documents for a decoding step (it is causal by construction)", "one");
}

/// The checks of a call on views: well-formed views, shapes against the parameters' d and
/// each other, `out` (when `written`) disjoint from the inputs, then check_extents.
template <class Map, class System, class T, class U>
geometry check_call(const System& sys, index_t d, index_t m, const backends::strided_view<const T>& q,
                    const backends::strided_view<const T>& k, const backends::strided_view<const T>& v,
                    const backends::strided_view<U>& out, const backends::device_options& o,
                    std::vector<index_t>& offsets, const char* out_name = "out", bool written = true) {
    check_view(q, "q");
    check_view(k, "k");
    check_view(v, "v");
    check_view(out, out_name);
    require_arg(q.dim == d, "q", "head dimension " + std::to_string(d) + " (the parameters')", std::to_string(q.dim));
    require_arg(q.len > 0, "q", "at least one token", "0");
    require_arg(
        k.batch == q.batch && k.heads == q.heads && k.dim == d && k.len > 0, "k",
        "shape " + shape_text(q.batch, q.heads, k.len > 0 ? k.len : 1, d) + " (q's batch and heads, d, ≥ 1 token)",
        shape_text(k.batch, k.heads, k.len, k.dim));
    require_arg(
        v.batch == q.batch && v.heads == q.heads && v.len == k.len && v.dim > 0, "v",
        "shape " + shape_text(q.batch, q.heads, k.len, v.dim > 0 ? v.dim : 1) + " (k's batch, heads and length)",
        shape_text(v.batch, v.heads, v.len, v.dim));
    require_arg(out.batch == q.batch && out.heads == q.heads && out.len == q.len && out.dim == v.dim, out_name,
                "shape " + shape_text(q.batch, q.heads, q.len, v.dim),
                shape_text(out.batch, out.heads, out.len, out.dim));
    const char* names[] = {"q", "k", "v"};
    const backends::strided_view<const T> in[] = {q, k, v};
    for (int i = 0; i < 3 && written; ++i)
        require_arg(!views_may_overlap(out, in[i]), out_name, std::string("memory disjoint from ") + names[i],
                    "an overlapping view");
    return check_extents<Map>(sys, d, m, q.batch, q.heads, q.len, k.len, v.dim, o, offsets);
}

/// Throws a kattn::error naming `name` unless x is a well-formed view of want's shape.
template <class A, class B>
void check_same_shape(const backends::strided_view<A>& x, const backends::strided_view<B>& want, const char* name) {
    check_view(x, name);
    require_arg(x.batch == want.batch && x.heads == want.heads && x.len == want.len && x.dim == want.dim, name,
                "shape " + shape_text(want.batch, want.heads, want.len, want.dim),
                shape_text(x.batch, x.heads, x.len, x.dim));
}

}  // namespace kattn::detail::chunked_impl
