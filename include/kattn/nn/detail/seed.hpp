// kattn/nn/detail/seed.hpp — deriving the seeds of kattn::nn's random draws.
//
//   mix64(z)            SplitMix64's output function applied to z + 0x9E3779B97F4A7C15
//                       (a bijection of 64-bit words; mix64(0) ≠ 0)
//   step_seed(s, step)  s ^ mix64(step): the seed of a layer's draws at optimiser step
//                       `step` (dropout masks, fresh frequencies); each pass then draws
//                       random_stream(step_seed(s, step), stream).uniform(i) (dropout: a
//                       SplitMix64 hash keyed by it, nn/dropout.hpp), a pure function of
//                       (s, step, stream, i), so any thread count agrees
//   sub_seed(s, k)      mix64(s ^ mix64(k + 1)): the seed of sub-layer k of a composite
//                       layer with seed s (distinct, decorrelated seeds from one)
#pragma once

#include <cstdint>

namespace kattn::nn::detail {

constexpr std::uint64_t mix64(std::uint64_t z) noexcept {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

constexpr std::uint64_t step_seed(std::uint64_t seed, std::uint64_t step) noexcept { return seed ^ mix64(step); }

constexpr std::uint64_t sub_seed(std::uint64_t seed, std::uint64_t k) noexcept { return mix64(seed ^ mix64(k + 1)); }

}  // namespace kattn::nn::detail
