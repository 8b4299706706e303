// kattn/core/shape.hpp — validation of the attention tensor layout at the API boundary.
//
// Rank-4 tensors are [batch, heads, length, dim] (PyTorch SDPA order); rank-2 tensors
// are [length, dim], the single-sequence single-head case. `attention_shape` reads and
// checks q, k, v (and optionally key lengths) and throws kattn::error naming the
// offending argument.
#pragma once

#include <string>
#include <vector>

#include "config.hpp"
#include "error.hpp"

namespace kattn::detail {

template <class Shape>
std::string shape_text(const Shape& s) {
    std::string t = "[";
    bool first = true;
    for (auto e : s) {
        if (!first) t += ", ";
        t += std::to_string(static_cast<long long>(e));
        first = false;
    }
    return t + "]";
}

/// Extents of an attention problem. Rank-2 inputs map to batch = heads = 1.
struct attention_shape {
    index_t batch = 1, heads = 1, q_len = 0, k_len = 0, qk_dim = 0, v_dim = 0;
    std::size_t rank = 4;

    index_t problems() const { return batch * heads; }
};

/// Reads [.., length, dim] of one tensor's shape; rank must be 2 or 4.
template <class Shape>
void read_rank(std::string_view arg, const Shape& s, std::size_t rank) {
    require(s.size() == rank, arg, rank == 4 ? "rank 4 [batch, heads, length, dim]" : "rank 2 [length, dim]",
            "rank " + std::to_string(s.size()) + " with shape " + shape_text(s));
}

/// Checks q, k, v shapes against each other and the expected head/value dims
/// (pass 0 to accept any). Keys and values must share batch, heads and length;
/// queries must share batch and heads with keys.
template <class SQ, class SK, class SV>
attention_shape check_qkv(const SQ& q, const SK& k, const SV& v, index_t head_dim, index_t value_dim) {
    attention_shape a;
    a.rank = q.size();
    require(a.rank == 2 || a.rank == 4, "q", "rank 2 [length, dim] or rank 4 [batch, heads, length, dim]",
            "rank " + std::to_string(a.rank) + " with shape " + shape_text(q));
    read_rank("k", k, a.rank);
    read_rank("v", v, a.rank);
    const std::size_t o = a.rank - 2;
    if (a.rank == 4) {
        a.batch = static_cast<index_t>(q[0]);
        a.heads = static_cast<index_t>(q[1]);
        require(static_cast<index_t>(k[0]) == a.batch && static_cast<index_t>(k[1]) == a.heads, "k",
                "batch and heads equal to q's " + shape_text(std::vector<index_t>{a.batch, a.heads}), shape_text(k));
        require(static_cast<index_t>(v[0]) == a.batch && static_cast<index_t>(v[1]) == a.heads, "v",
                "batch and heads equal to q's " + shape_text(std::vector<index_t>{a.batch, a.heads}), shape_text(v));
        require(a.batch > 0, "q", "batch >= 1", a.batch);
        require(a.heads > 0, "q", "heads >= 1", a.heads);
    }
    a.q_len = static_cast<index_t>(q[o]);
    a.k_len = static_cast<index_t>(k[o]);
    a.qk_dim = static_cast<index_t>(q[o + 1]);
    a.v_dim = static_cast<index_t>(v[o + 1]);
    require(a.q_len > 0, "q", "length >= 1", std::string("length 0 in shape ") + shape_text(q));
    require(a.k_len > 0, "k", "length >= 1", std::string("length 0 in shape ") + shape_text(k));
    require(static_cast<index_t>(v[o]) == a.k_len, "v", "length equal to k's length " + std::to_string(a.k_len),
            shape_text(v));
    require(static_cast<index_t>(k[o + 1]) == a.qk_dim, "k", "dim equal to q's dim " + std::to_string(a.qk_dim),
            shape_text(k));
    if (head_dim > 0)
        require(a.qk_dim == head_dim, "q", "dim == head_dim = " + std::to_string(head_dim), shape_text(q));
    if (value_dim > 0)
        require(a.v_dim == value_dim, "v", "dim == value_dim = " + std::to_string(value_dim), shape_text(v));
    require(a.qk_dim > 0, "q", "dim >= 1", shape_text(q));
    require(a.v_dim > 0, "v", "dim >= 1", shape_text(v));
    return a;
}

/// Validates per-batch key lengths: one entry per batch, each in [1, k_len].
template <class Lengths>
void check_key_lengths(const Lengths& lengths, const attention_shape& a) {
    require(static_cast<index_t>(lengths.size()) == a.batch, "key_lengths",
            "one entry per batch (" + std::to_string(a.batch) + ")", lengths.size());
    for (std::size_t b = 0; b < lengths.size(); ++b) {
        const auto len = static_cast<index_t>(lengths[b]);
        require(len >= 1 && len <= a.k_len, "key_lengths", "values in [1, " + std::to_string(a.k_len) + "]",
                std::to_string(len) + " at batch " + std::to_string(b));
    }
}

}  // namespace kattn::detail
