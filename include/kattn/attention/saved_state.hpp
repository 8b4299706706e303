// kattn/attention/saved_state.hpp — what a linear_attention forward keeps for its backward.
//
//   typename attn_t::saved_state saved;
//   auto out = attn(q, k, v, saved);                  // forward; fills `saved`
//   auto g = attn.backward(q, k, v, dout, saved);     // reads it: no second pass over the keys
//
// A training step needs the output (for the loss) and then the gradients; without a saved
// state, backward() rebuilds the key states S = Σ φ(k)vᵀ, z = Σ φ(k) with a full pass over
// the keys (projection, activation, a product per key). With one, backends that can
// (execution_backend_traits<B>::saves_forward_state; simd does) take them from the forward.
// The gradients are the same bits either way. The state is small: F × (d_v + 1) + 1 numbers
// (and their double totals for fp32) per head and segment (at most 8 segments per head),
// bounded independently of the sequence length.
//
// The state belongs to one forward call: backward() checks that q, k, v have the same
// shapes, that the options (causal, key lengths) and the operator's Ω and b are those of
// that call, and (simd) that k and v hold the same values — a fingerprint computed while
// the keys are in cache for the forward's and the backward's own work. Any mismatch is a
// kattn::error naming `saved`; so is a state no forward filled. A non-causal call with packed
// documents keeps one key state per head and document while they fit the operator's
// backward_cache_bytes, and none beyond (its backward then recomputes them).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "../backends/forward_state.hpp"
#include "../core/config.hpp"
#include "../core/error.hpp"
#include "../core/shape.hpp"
#include "options.hpp"

namespace kattn {

template <class T>
class saved_state {
public:
    /// True until a forward call fills the state (and after clear()).
    bool empty() const { return !filled_; }
    /// Bytes held (the backend's states and the recorded key lengths).
    std::size_t bytes() const { return backend_.bytes() + (lengths_.capacity() + cu_.capacity()) * sizeof(index_t); }
    /// Releases the state's memory; the next backward needs a new forward.
    void clear() { *this = saved_state{}; }

private:
    template <class, class, class, class>
    friend class linear_attention;

    /// What the forward call was made with (after the backend filled backend_).
    template <class Shape>
    void record(const Shape& q, const Shape& k, const Shape& v, bool causal, key_lengths lengths, bool has_lengths,
                const packed_sequences* packed, std::uint64_t params) {
        q_shape_.assign(q.begin(), q.end());
        k_shape_.assign(k.begin(), k.end());
        v_shape_.assign(v.begin(), v.end());
        lengths_.assign(lengths.begin(), lengths.end());
        packed_ = packed != nullptr;
        if (packed) cu_.assign(packed->cu_seqlens.begin(), packed->cu_seqlens.end());
        causal_ = causal;
        has_lengths_ = has_lengths;
        params_ = params;
        filled_ = true;
    }

    /// Throws unless this state came from a forward call with these arguments.
    template <class Shape>
    void check(const Shape& q, const Shape& k, const Shape& v, bool causal, key_lengths lengths, bool has_lengths,
               const packed_sequences* packed, std::uint64_t params) const {
        detail::require(filled_, "saved", "the state of a forward call (attn(q, k, v, ..., saved))",
                        std::string("an empty state"));
        const auto same = [](const std::vector<std::size_t>& a, const Shape& b) {
            return std::equal(a.begin(), a.end(), b.begin(), b.end());
        };
        detail::require(same(q_shape_, q) && same(k_shape_, k) && same(v_shape_, v), "saved",
                        "a state of inputs shaped like q " + detail::shape_text(q) + ", k " + detail::shape_text(k) +
                            ", v " + detail::shape_text(v),
                        "q " + detail::shape_text(q_shape_) + ", k " + detail::shape_text(k_shape_) + ", v " +
                            detail::shape_text(v_shape_));
        const auto mode = [](bool c, bool l, bool p) {
            return std::string(c ? "causal" : "non-causal") + (l ? " with key lengths" : "") +
                   (p ? " with packed documents" : "");
        };
        const bool is_packed = packed != nullptr;
        detail::require(causal_ == causal && has_lengths_ == has_lengths && packed_ == is_packed, "saved",
                        "a state of a " + mode(causal, has_lengths, is_packed) + " forward call",
                        "one of a " + mode(causal_, has_lengths_, packed_) + " call");
        detail::require(
            !packed || std::equal(cu_.begin(), cu_.end(), packed->cu_seqlens.begin(), packed->cu_seqlens.end()),
            "saved", "a state of a forward call with these packed documents", std::string("one with other cu_seqlens"));
        detail::require(!has_lengths || std::equal(lengths_.begin(), lengths_.end(), lengths.begin(), lengths.end()),
                        "saved", "a state of a forward call with these key lengths",
                        std::string("one with other key lengths"));
        detail::require(params_ == params, "saved", "a state made with the operator's current omega and bias",
                        std::string("one made with other parameters (set_omega, set_bias or resample since)"));
    }

    backends::forward_state<T> backend_;
    std::vector<std::size_t> q_shape_, k_shape_, v_shape_;
    std::vector<index_t> lengths_, cu_;  ///< key lengths; packed documents' offsets
    std::uint64_t params_ = 0;           ///< fingerprint of Ω and b at the forward call
    bool causal_ = false, has_lengths_ = false, packed_ = false, filled_ = false;
};

}  // namespace kattn
