// kattn/attention/detail/decoding_state.hpp — validation of a recurrent decoding state
// (linear_attention::state) before step() reads it: batch and heads, the sizes of S, z, C
// and the step counts against the operator's F and d_v, finite stabilisers and, when the
// operator checks inputs, finite S and z. Every failure is a kattn::error naming the field.
#pragma once

#include <cmath>
#include <string>

#include "../../core/config.hpp"
#include "../../core/error.hpp"
#include "extents.hpp"

namespace kattn::detail {

/// Checks st (any type with batch, heads, S, z, C, steps) for an operator of feature
/// dimension F and value dimension dv; returns its head count batch·heads.
template <class State>
index_t check_decoding_state(const State& st, index_t F, index_t dv, bool finite_inputs) {
    using std::to_string;
    require(st.batch >= 1, "state.batch", ">= 1 (a state from initial_state())", st.batch);
    require(st.heads >= 1, "state.heads", ">= 1 (a state from initial_state())", st.heads);
    const index_t n = checked_extent("state.heads", "state.batch x state.heads", st.batch, st.heads);
    // size == heads·per, tested without forming the product (per ≥ 1, F·d_v checked).
    const auto holds = [](const auto& v, index_t heads, index_t per) {
        return index_t(v.size()) % per == 0 && index_t(v.size()) / per == heads;
    };
    const index_t n0 = index_t(st.steps.size());
    if (n0 != n && holds(st.C, n0, 1) && holds(st.z, n0, F) && holds(st.S, n0, F * dv))
        fail("state.batch", "state.batch x state.heads = " + to_string(n0) + ", the heads its S, z, C and steps hold",
             "batch " + to_string(st.batch) + " x heads " + to_string(st.heads));
    const std::string heads = "batch x heads = " + to_string(n);
    const auto want = [&](const std::string& per) { return "one " + per + " per head (" + heads + ")"; };
    require(holds(st.steps, n, 1), "state.steps", want("count"), to_string(st.steps.size()) + " entries");
    require(holds(st.C, n, 1), "state.C", want("stabiliser"), to_string(st.C.size()) + " entries");
    require(holds(st.z, n, F), "state.z", want("z of feature_dim " + to_string(F)),
            to_string(st.z.size()) + " entries");
    require(holds(st.S, n, F * dv), "state.S",
            want("S of feature_dim x value_dim = " + to_string(F) + " x " + to_string(dv)),
            to_string(st.S.size()) + " entries");
    for (index_t p = 0; p < n; ++p) {
        const index_t t = st.steps[std::size_t(p)];
        require(t >= 0, "state.steps", "counts >= 0", to_string(t) + " at head " + to_string(p));
        const double c = st.C[std::size_t(p)];
        require(t == 0 || std::isfinite(c), "state.C", "finite values", to_text(c) + " at head " + to_string(p));
    }
    if (finite_inputs) {
        check_finite("state.S", st.S.data(), index_t(st.S.size()));
        check_finite("state.z", st.z.data(), index_t(st.z.size()));
    }
    return n;
}

}  // namespace kattn::detail
