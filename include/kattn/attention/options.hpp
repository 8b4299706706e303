// kattn/attention/options.hpp — tags and small value types shared by every attention operator.
//
//   kattn::causal          tag selecting causal (autoregressive) masking: query i sees keys j <= i
//   kattn::key_lengths     per-batch number of valid keys; keys at positions >= length[b] are
//                          excluded from numerator and denominator (padding mask)
//   kattn::packed_sequences  documents packed back to back along the length axis (FlashAttention's
//                          cu_seqlens): attention never crosses a document boundary
#pragma once

#include <span>
#include <vector>

#include "../core/config.hpp"

namespace kattn {

/// Tag type for causal masking; pass `kattn::causal`.
struct causal_t {
    explicit constexpr causal_t() = default;
};
inline constexpr causal_t causal{};

/// Non-owning list of valid key counts, one per batch entry (each in [1, length]).
using key_lengths = std::span<const index_t>;

/// Documents packed along the sequence: cu_seqlens = {0, c_1, …, L}, strictly increasing,
/// L the packed length; document i holds the tokens [cu_seqlens[i], cu_seqlens[i + 1]) of
/// every head. Non-owning: the offsets must outlive the call.
struct packed_sequences {
    std::span<const index_t> cu_seqlens;
};

}  // namespace kattn
