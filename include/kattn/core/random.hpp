// kattn/core/random.hpp — counter-based, index-addressed random numbers (Philox4x32-10).
//
// `random_stream{seed, stream}` is stateless: every number (block, bits, bits64, uniform,
// normal) is a pure function of (seed, stream, index), so draws can be made in any order,
// on any thread or device, and give the same values. Purposes use different stream ids
// (`kattn::streams`: omega, bias, norms, …; streams::user + n for yours), so one user seed
// feeds independent draws. bits/uniform reproduce bit for bit everywhere; normal also
// depends on the libm (do not build with -ffast-math). The exact derivation, which a device
// implementation must follow, and the guarantees: docs/samplers.md §3–4.
#pragma once

#include <cmath>
#include <cstdint>

// Random123 includes the x86 intrinsic headers; GCC 12 reports PR 105593's false
// -W(maybe-)uninitialized at their lines with the diagnostic state of their first inclusion.
#include "warnings_push.hpp"
#include <Random123/philox.h>
#include "warnings_pop.hpp"

#include "config.hpp"

namespace kattn {

/// Fixed stream ids: one per purpose, so that one user seed feeds independent draws.
namespace streams {
inline constexpr std::uint64_t omega = 1;      ///< spectral frequencies Ω (and QR inputs)
inline constexpr std::uint64_t bias = 2;       ///< random phases b (trig features)
inline constexpr std::uint64_t norms = 3;      ///< chi-distributed row norms (orthogonal)
inline constexpr std::uint64_t component = 4;  ///< mixture-component choices (gmm)
inline constexpr std::uint64_t noise = 5;      ///< Langevin noise ξ
inline constexpr std::uint64_t init = 6;       ///< parameter initialisation (nn, flows)
inline constexpr std::uint64_t data = 7;       ///< synthetic data, shuffling
/// First id free for user-defined purposes; ids below it are reserved for kattn.
inline constexpr std::uint64_t user = std::uint64_t{1} << 32;
}  // namespace streams

namespace detail {

/// Maps 64 random bits to a double in (0, 1): top 53 bits k → k·2^-53, and k = 0 → 2^-54.
/// Exact (no rounding); range [2^-54, 1 - 2^-53].
KATTN_HD inline double to_unit_open(std::uint64_t w) {
    const std::uint64_t k = w >> 11;
    constexpr double two_m53 = 1.0 / 9007199254740992.0;   // 2^-53
    constexpr double two_m54 = 1.0 / 18014398509481984.0;  // 2^-54
    return k != 0 ? static_cast<double>(k) * two_m53 : two_m54;
}

}  // namespace detail

/// Stateless Philox4x32-10 stream keyed by (seed, stream id); see the header comment
/// for the exact derivation of each number.
class random_stream {
public:
    using philox_type = r123::Philox4x32;
    using ctr_type = philox_type::ctr_type;
    using key_type = philox_type::key_type;

    KATTN_HD constexpr random_stream(std::uint64_t seed, std::uint64_t stream) noexcept
        : seed_(seed), stream_(stream) {}

    KATTN_HD constexpr std::uint64_t seed() const noexcept { return seed_; }
    KATTN_HD constexpr std::uint64_t stream() const noexcept { return stream_; }

    /// The raw Philox block for counter index j: four 32-bit words.
    KATTN_HD ctr_type block(std::uint64_t j) const {
        ctr_type c = {{lo(j), hi(j), lo(stream_), hi(stream_)}};
        key_type k = {{lo(seed_), hi(seed_)}};
        return philox_type{}(c, k);
    }

    /// 32 uniformly random bits: word i%4 of block i/4.
    KATTN_HD std::uint32_t bits(std::uint64_t i) const {
        const ctr_type x = block(i / 4);
        return x.v[i % 4];
    }

    /// 64 uniformly random bits: bits(2i+1):bits(2i).
    KATTN_HD std::uint64_t bits64(std::uint64_t i) const {
        const ctr_type x = block(i / 2);
        const unsigned w = 2u * static_cast<unsigned>(i % 2);
        return join(x.v[w], x.v[w + 1]);
    }

    /// Uniform double in (0, 1), 53-bit resolution, never exactly 0 or 1.
    KATTN_HD double uniform(std::uint64_t i) const { return detail::to_unit_open(bits64(i)); }

    /// Standard normal by Box–Muller; normal(2j) and normal(2j+1) share one Philox call.
    KATTN_HD double normal(std::uint64_t i) const {
        const ctr_type x = block(i / 2);
        const double u1 = detail::to_unit_open(join(x.v[0], x.v[1]));
        const double u2 = detail::to_unit_open(join(x.v[2], x.v[3]));
        const double r = ::sqrt(-2.0 * ::log(u1));
        const double t = 6.283185307179586 * u2;
        return (i % 2 == 0) ? r * ::cos(t) : r * ::sin(t);
    }

private:
    KATTN_HD static constexpr std::uint32_t lo(std::uint64_t v) noexcept {
        return static_cast<std::uint32_t>(v & 0xffffffffu);
    }
    KATTN_HD static constexpr std::uint32_t hi(std::uint64_t v) noexcept { return static_cast<std::uint32_t>(v >> 32); }
    KATTN_HD static constexpr std::uint64_t join(std::uint32_t low, std::uint32_t high) noexcept {
        return (static_cast<std::uint64_t>(high) << 32) | low;
    }

    std::uint64_t seed_;
    std::uint64_t stream_;
};

}  // namespace kattn
