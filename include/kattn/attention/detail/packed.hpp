// kattn/attention/detail/packed.hpp — checks and row moves for packed documents (cu_seqlens).
//
// check_packed_offsets validates a packed_sequences' offsets against the packed length.
// document_rows gathers one document's rows of every head out of a [heads, L, width]
// buffer into a contiguous [heads, length, width] one, and scatters them back: what an
// operator does, per document, for a backend that does not take packed problems itself
// (execution_backend_traits<B>::packs_sequences false: per_document_forward/backward).
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "../../core/config.hpp"
#include "../../core/error.hpp"
#include "../../backends/problem.hpp"

namespace kattn::detail {

/// Throws kattn::error naming `packed_sequences.cu_seqlens` unless cu = {0, …, total} is
/// strictly increasing (every document holds at least one token).
inline void check_packed_offsets(std::span<const index_t> cu, index_t total) {
    constexpr const char* arg = "packed_sequences.cu_seqlens";
    require(cu.size() >= 2, arg, "at least two offsets {0, ..., " + std::to_string(total) + "}", cu.size());
    require(cu.front() == 0, arg, "a first offset of 0", cu.front());
    require(cu.back() == total, arg, "a last offset equal to the packed length " + std::to_string(total), cu.back());
    for (std::size_t i = 1; i < cu.size(); ++i)
        require(cu[i] > cu[i - 1], arg, "strictly increasing offsets",
                std::to_string(cu[i]) + " after " + std::to_string(cu[i - 1]) + " at index " + std::to_string(i));
}

/// Rows [begin, begin + length) of every head of a [heads, L, width] buffer.
struct document_rows {
    index_t heads = 1, L = 0, begin = 0, length = 0;

    template <class T>
    std::vector<T> gather(const T* x, index_t width) const {
        std::vector<T> r(static_cast<std::size_t>(heads * length * width));
        for (index_t h = 0; h < heads; ++h)
            std::copy_n(x + (h * L + begin) * width, length * width, r.data() + h * length * width);
        return r;
    }
    template <class T>
    void scatter(const std::vector<T>& r, T* x, index_t width) const {
        for (index_t h = 0; h < heads; ++h)
            std::copy_n(r.data() + h * length * width, length * width, x + (h * L + begin) * width);
    }
};

/// The problem of one document: base's heads over rows r, inputs gathered into q, k, v.
template <class Map, class T>
backends::attention_problem<Map, T> document_problem(const backends::attention_problem<Map, T>& base,
                                                     const document_rows& r, const std::vector<T>& q,
                                                     const std::vector<T>& k, const std::vector<T>& v) {
    auto pb = base;
    pb.q = q.data();
    pb.k = k.data();
    pb.v = v.data();
    pb.q_len = pb.k_len = r.length;
    pb.cu_seqlens = nullptr;
    pb.documents = 0;
    return pb;
}

/// Forward of a packed problem (batch 1, offsets checked) on a backend that takes one
/// sequence per call: each document gathered, run and scattered back, in order.
template <class Backend, class Map, class T>
void per_document_forward(const backends::attention_problem<Map, T>& pb, std::span<const index_t> cu, T* out) {
    const index_t d = pb.spec.d, dv = pb.dv;
    for (std::size_t i = 0; i + 1 < cu.size(); ++i) {
        const document_rows r{pb.problems, pb.q_len, cu[i], cu[i + 1] - cu[i]};
        const auto q = r.gather(pb.q, d), k = r.gather(pb.k, d), v = r.gather(pb.v, dv);
        std::vector<T> o(static_cast<std::size_t>(pb.problems * r.length * dv));
        Backend::template forward<Map>(document_problem(pb, r, q, k, v), o.data());
        r.scatter(o, out, dv);
    }
}

/// Backward likewise; ∂Ω and ∂b are the documents' sums, added in document order.
template <class Backend, class Map, class T>
void per_document_backward(const backends::attention_problem<Map, T>& pb, std::span<const index_t> cu,
                           const backends::attention_gradients<T>& g) {
    const index_t d = pb.spec.d, dv = pb.dv;
    const std::size_t no =
        static_cast<std::size_t>(pb.spec.d) * static_cast<std::size_t>(Map::projection_dim(pb.spec.m));
    const std::size_t nb = g.d_bias ? static_cast<std::size_t>(pb.spec.m) : 0;
    std::vector<T> dom(g.d_omega ? no : 0), db(nb);
    if (g.d_omega) std::fill_n(g.d_omega, no, T(0));
    if (g.d_bias) std::fill_n(g.d_bias, nb, T(0));
    for (std::size_t i = 0; i + 1 < cu.size(); ++i) {
        const document_rows r{pb.problems, pb.q_len, cu[i], cu[i + 1] - cu[i]};
        const auto q = r.gather(pb.q, d), k = r.gather(pb.k, d), v = r.gather(pb.v, dv), go = r.gather(g.dout, dv);
        std::vector<T> dq(q.size()), dk(k.size()), dvs(v.size());
        const backends::attention_gradients<T> gd{go.data(),
                                                  dq.data(),
                                                  dk.data(),
                                                  dvs.data(),
                                                  g.d_omega ? dom.data() : nullptr,
                                                  g.d_bias ? db.data() : nullptr};
        Backend::template backward<Map>(document_problem(pb, r, q, k, v), gd);
        r.scatter(dq, g.dq, d);
        r.scatter(dk, g.dk, d);
        r.scatter(dvs, g.dv, dv);
        for (std::size_t j = 0; j < dom.size(); ++j) g.d_omega[j] += dom[j];
        for (std::size_t j = 0; j < db.size(); ++j) g.d_bias[j] += db[j];
    }
}

}  // namespace kattn::detail
