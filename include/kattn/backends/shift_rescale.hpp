// kattn/backends/shift_rescale.hpp — the stabiliser-shift arithmetic of the chunked
// device backends (Thrust, chunked/CUDA): a missing key's shift is −∞, and moving a sum
// from reference shift a to reference shift b multiplies it by e^{a − b}.
#pragma once

#include <cmath>

#include "../core/config.hpp"
#include "../core/math.hpp"

namespace kattn::detail {

/// The shift of a key or chunk that does not exist.
template <class W>
KATTN_HD inline W neg_inf() {
    return -W(HUGE_VAL);
}

/// e^{a − b} with e^{−∞ − b} = 0 (a key or chunk that does not exist); 1 for maps without
/// a stabiliser (all shifts are 0).
template <class Map, class W>
KATTN_HD inline W rescale(W a, W b) {
    if constexpr (!Map::has_stabiliser) {
        return W(1);
    } else {
        return a == neg_inf<W>() ? W(0) : math::exp(a - b);
    }
}

}  // namespace kattn::detail
