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
#include "../samplers/gaussian.hpp"
#include "feature_params.hpp"

// GCC 12 reports false -W(maybe-)uninitialized warnings inside its AVX-512 intrinsics when
// the element functions here are inlined on xsimd batches (GCC PR 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace kattn::features {

struct cos2 {
    static constexpr const char* name = "cos2";
    static constexpr bool is_positive = true;
    static constexpr bool uses_pairs = false;
    static constexpr bool uses_bias = true;
    static constexpr bool has_stabiliser = false;
    static constexpr bool softmax_scaling = false;
    using default_sampler = samplers::gaussian;

    KATTN_HD static constexpr index_t feature_dim(index_t m) { return m; }
    KATTN_HD static constexpr index_t projection_dim(index_t m) { return m; }
    KATTN_HD static constexpr index_t workspace(index_t m) { return m; }
    static void validate(const feature_params& p, index_t, index_t) { detail::validate(p); }

    /// b_l = 2π · uniform(l) of stream `bias`.
    template <class T>
    static void init_bias(index_t m, std::uint64_t seed, T* b) {
        const random_stream rs(seed, streams::bias);
        for (index_t l = 0; l < m; ++l) b[l] = T(2 * std::numbers::pi * rs.uniform(static_cast<std::uint64_t>(l)));
    }

    template <class Ops, class T>
    KATTN_HD static void activate(const feature_params& p, index_t, index_t m, const T*, const T* u, const T* b, T, T* phi) {
        const T fl = T(p.floor);
        Ops::transform(
            m, phi,
            [fl](auto ui, auto bi) {
                using V = decltype(ui);
                const V c = math::cos(ui + bi);
                return c * c + V(fl);
            },
            u, b);
        if (p.renormalize) detail::renormalize<Ops>(m, phi);
    }

    /// d cos²(a)/da = −sin(2a);  du = db = dv · (−sin 2a).
    template <class Ops, class T>
    KATTN_HD static void activate_vjp(const feature_params& p, index_t, index_t m, const T*, const T* u, const T* b, T,
                             const T* phi, const T* dphi, T* du, T*, T* db, T* work) {
        const T fl = T(p.floor);
        const T* dv = dphi;
        if (p.renormalize) {
            Ops::transform(
                m, work,
                [fl](auto ui, auto bi) {
                    using V = decltype(ui);
                    const V c = math::cos(ui + bi);
                    return c * c + V(fl);
                },
                u, b);
            detail::renormalize_vjp<Ops>(m, Ops::sum(m, work), phi, dphi, work);
            dv = work;
        }
        Ops::transform(
            m, du, [](auto ui, auto bi, auto g) { using V = decltype(ui); return -g * math::sin(V(2) * (ui + bi)); }, u,
            b, dv);
        if (db != nullptr)
            for (index_t l = 0; l < m; ++l) db[l] += du[l];
    }
};

}  // namespace kattn::features

#pragma GCC diagnostic pop
