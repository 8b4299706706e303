// kattn/attention/options.hpp — tags and small value types shared by every attention operator.
//
//   kattn::causal          tag selecting causal (autoregressive) masking: query i sees keys j <= i
//   kattn::key_lengths     per-batch number of valid keys; keys at positions >= length[b] are
//                          excluded from numerator and denominator (padding mask)
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

}  // namespace kattn
