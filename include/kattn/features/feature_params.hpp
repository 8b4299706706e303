// kattn/features/feature_params.hpp — validation of the maps' hyper-parameters, and the
// pre-0.2 `feature_params` struct.
//
// Each map owns its parameters (`Map::params`: elu's temperature, floor and renormalize,
// positive<F>'s scale, …; docs/feature_maps.md §3). `feature_params` is kept for maps
// written before that: a map that declares no `params` type is handed a feature_params.
#pragma once

#include <cmath>

#include "../core/config.hpp"
#include "../core/error.hpp"

namespace kattn {

/// Parameters handed to a user-written map that declares no `params` type of its own.
struct feature_params {
    double temperature = 1.0;  ///< τ > 0
    double floor = 1e-6;       ///< ≥ 0
    double scale = 1.0;        ///< s > 0
    bool renormalize = true;   ///< ℓ1 re-normalisation to √m
};

namespace detail {

/// τ: finite and > 0.
inline void check_temperature(double t) { require(std::isfinite(t) && t > 0, "temperature", "a finite value > 0", t); }
/// floor: finite and ≥ 0.
inline void check_floor(double f) { require(std::isfinite(f) && f >= 0, "floor", "a finite value >= 0", f); }
/// s: finite and > 0.
inline void check_scale(double s) { require(std::isfinite(s) && s > 0, "scale", "a finite value > 0", s); }

}  // namespace detail

namespace features {
/// Parameters of the tempered positive maps elu, softplus and sigmoid2 (each map's
/// `params`): v = g(u/τ …), floored, then optionally ℓ1-renormalised.
struct tempered_params {
    double temperature = 1.0;  ///< τ > 0: u is divided by τ
    double floor = 1e-6;       ///< ≥ 0: elu's lower clamp; softplus, sigmoid2: added before renorm
    bool renormalize = true;   ///< ℓ1 re-normalisation to √m
};
}  // namespace features

namespace detail {

inline void validate(const features::tempered_params& p) {
    check_temperature(p.temperature);
    check_floor(p.floor);
}

inline void validate(const feature_params& p) {
    check_temperature(p.temperature);
    check_floor(p.floor);
    check_scale(p.scale);
}

}  // namespace detail
}  // namespace kattn
