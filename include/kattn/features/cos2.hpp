// kattn/features/cos2.hpp — squared-cosine positive features (Coulomb particle model).
//
//   φ(x) = renorm(cos²(u + b) + floor),   u = Ωᵀx,   b ∈ R^m,   dim φ = m
//
// b is a learnable phase, initialised uniform on [0, 2π) from the seed (stream
// `streams::bias`). cos² = (1 + cos 2(u+b))/2, so φ is a shifted random Fourier
// feature. Default sampler: gaussian.
#pragma once

#include <cstdint>
#include <numbers>

#include "../core/math.hpp"
#include "../core/random.hpp"
#include "../fwd.hpp"
#include "../linalg/row_ops.hpp"
#include "feature_params.hpp"
#include "map_base.hpp"
#include "renormalize.hpp"

#include "../core/warnings_push.hpp"

namespace kattn::features {

struct cos2 : map_base {
    static constexpr const char* name = "cos2";
    static constexpr bool is_positive = true;
    static constexpr bool uses_bias = true;
    using default_sampler = samplers::gaussian;

    KATTN_HD static constexpr index_t workspace(index_t m) { return m; }
    /// Hyper-parameters (docs/feature_maps.md §3).
    struct params {
        double floor = 1e-6;      ///< ≥ 0: added before renormalisation
        bool renormalize = true;  ///< ℓ1 re-normalisation to √m
    };
    static void validate(const params& p, index_t, index_t) { detail::check_floor(p.floor); }

    /// b_l = 2π · uniform(l) of stream `bias`.
    template <class T>
    static void init_bias(index_t m, std::uint64_t seed, T* b) {
        const random_stream rs(seed, streams::bias);
        for (index_t l = 0; l < m; ++l) b[l] = T(2 * std::numbers::pi * rs.uniform(static_cast<std::uint64_t>(l)));
    }

    /// v = cos²(u + b) + floor, the features before renormalisation.
    template <class T>
    KATTN_HD static auto activation(const params& p) {
        const T fl = T(p.floor);
        return [fl](auto ui, auto bi) {
            using V = decltype(ui);
            const V c = math::cos(ui + bi);
            return c * c + V(fl);
        };
    }

    template <class Ops, class T>
    KATTN_HD static void activate(const params& p, index_t, index_t m, const T*, const T* u, const T* b, T, T* phi) {
        Ops::transform(m, phi, activation<T>(p), u, b);
        if (p.renormalize) detail::renormalize<Ops>(m, phi);
    }
    /// Feature by feature unless renormalised (detail::elementwise_features).
    KATTN_HD static constexpr bool elementwise(const params& p) { return !p.renormalize; }

    /// d cos²(a)/da = −sin(2a);  du = db = dv · (−sin 2a).
    template <class Ops, class T>
    KATTN_HD static void activate_vjp(const params& p, index_t, index_t m, const T*, const T* u, const T* b, T,
                                      const T* phi, const T* dphi, T* du, T*, T* db, T* work) {
        const T* dv = detail::unnormalised_upstream<Ops>(p.renormalize, m, phi, dphi, work, activation<T>(p), u, b);
        Ops::transform(
            m, du,
            [](auto ui, auto bi, auto g) {
                using V = decltype(ui);
                return -g * math::sin(V(2) * (ui + bi));
            },
            u, b, dv);
        if (db != nullptr) detail::axpy<Ops>(m, T(1), du, db);
    }
};

}  // namespace kattn::features

#include "../core/warnings_pop.hpp"
