// kattn/core/bfloat16.hpp — kattn::bf16, the brain floating-point storage type.
//
// bf16 is the upper half of an IEEE binary32: 1 sign bit, 8 exponent bits (float's range),
// 7 stored mantissa bits (relative spacing 2^-7, rounding error ≤ 2^-8). kattn uses it for
// inputs and outputs only; every sum is accumulated in float.
//
//   kattn::bf16 h(1.3f);      // rounds to nearest, ties to even; NaN stays NaN (quiet)
//   float f = h;              // exact widening
//   h.bits                    // the 16 stored bits
//
// The conversions are constexpr scalar code, the same on every CPU. The simd backend's
// vector kernels (vcvtneps2bf16) round the same way, except that they read a float
// subnormal (|x| < 2^-126) as zero.
#pragma once

#include <bit>
#include <cstdint>

namespace kattn {

struct bf16 {
    std::uint16_t bits = 0;

    constexpr bf16() = default;
    /// The nearest bf16 to f (ties to even); ±inf and overflow go to ±inf, NaN to a quiet NaN.
    constexpr explicit bf16(float f) : bits(round(std::bit_cast<std::uint32_t>(f))) {}
    /// The bf16 with these stored bits.
    static constexpr bf16 from_bits(std::uint16_t b) {
        bf16 h;
        h.bits = b;
        return h;
    }
    /// Exact widening.
    constexpr operator float() const { return std::bit_cast<float>(std::uint32_t(bits) << 16); }

    friend constexpr bool operator==(bf16 a, bf16 b) { return float(a) == float(b); }

private:
    static constexpr std::uint16_t round(std::uint32_t u) {
        if ((u & 0x7fffffffu) > 0x7f800000u) return std::uint16_t((u >> 16) | 0x40u);  // NaN: keep sign, quiet
        u += 0x7fffu + ((u >> 16) & 1u);  // ties to even; carries into the exponent (and to inf) as it should
        return std::uint16_t(u >> 16);
    }
};

static_assert(sizeof(bf16) == 2 && alignof(bf16) == 2);

}  // namespace kattn
