// kattn/features/map_base.hpp — the defaults every feature map may inherit.
//
// A map derives from map_base and states only what differs: its name, is_positive, its
// default_sampler, its `params` (if it has hyper-parameters) with validate(), and
// activate / activate_vjp. Defaults: one frequency per feature (feature_dim = projection_dim
// = m), no pairs, no bias, no stabiliser, input scale 1, no workspace, no parameters.
#pragma once

#include "../core/config.hpp"

namespace kattn::features {

struct map_base {
    static constexpr bool uses_pairs = false;           ///< Ω holds pairs (ω₁, ω₂)
    static constexpr bool uses_bias = false;            ///< a bias b ∈ R^m (init_bias required)
    static constexpr bool has_stabiliser = false;       ///< row_shift required (favor's exp)
    static constexpr bool softmax_scaling = false;      ///< default input scale d^{-1/4}
    static constexpr bool requires_orthogonal = false;  ///< Ω must come from orthogonal blocks

    /// The map's hyper-parameters (none).
    struct params {};
    /// Nothing to check (a map whose params need checks declares its own validate).
    template <class P>
    static void validate(const P&, index_t, index_t) {}

    KATTN_HD static constexpr index_t feature_dim(index_t m) { return m; }
    KATTN_HD static constexpr index_t projection_dim(index_t m) { return m; }
    KATTN_HD static constexpr index_t workspace(index_t) { return 0; }
};

}  // namespace kattn::features
