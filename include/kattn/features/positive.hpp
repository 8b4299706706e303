// kattn/features/positive.hpp — FSKA's positive transform of any feature map.
//
//   φ⁺(x) = ELU(s · φ_F(x)) + 1,   dim φ⁺ = dim φ_F,   s = params::scale (default 1)
//
// Makes signed features (trig, nonstationary) strictly positive so attention weights
// are positive. The kernel is biased (it is no longer an estimate of F's kernel).
// With nonstationary features and s = 1 every coordinate lies in [−1/√m, 1/√m], so
// attention is almost uniform; larger s sharpens it (docs/feature_maps.md measures it).
// Spectral parameters, sampler and bias are F's. F's stabiliser (if any) is not used.
#pragma once

#include "../core/math.hpp"
#include "feature_params.hpp"
#include "feature_map.hpp"
#include "map_base.hpp"

#include "../core/warnings_push.hpp"

namespace kattn::features {

template <class F>
struct positive : map_base {
    using inner_map = F;
    static constexpr const char* name = "positive";
    static constexpr bool is_positive = true;
    static constexpr bool uses_pairs = F::uses_pairs;
    static constexpr bool uses_bias = F::uses_bias;
    using default_sampler = typename F::default_sampler;

    /// F's hyper-parameters and the scale s.
    struct params {
        map_params_t<F> inner{};  ///< F's parameters
        double scale = 1.0;       ///< s > 0
    };
    static void validate(const params& p, index_t d, index_t m) {
        detail::check_scale(p.scale);
        F::validate(p.inner, d, m);
    }

    KATTN_HD static constexpr index_t feature_dim(index_t m) { return F::feature_dim(m); }
    KATTN_HD static constexpr index_t projection_dim(index_t m) { return F::projection_dim(m); }
    KATTN_HD static constexpr index_t workspace(index_t m) { return 2 * F::feature_dim(m) + F::workspace(m); }

    template <class T>
    static void init_bias(index_t m, std::uint64_t seed, T* b) requires F::uses_bias {
        F::init_bias(m, seed, b);
    }

    template <class Ops, class T>
    KATTN_HD static void activate(const params& p, index_t d, index_t m, const T* x, const T* u, const T* b, T,
                                  T* phi) {
        F::template activate<Ops>(p.inner, d, m, x, u, b, T(0), phi);
        const T s = T(p.scale);
        Ops::transform(
            F::feature_dim(m), phi,
            [s](auto f) {
                using V = decltype(f);
                return math::elu(V(s) * f) + V(1);
            },
            phi);
    }

    /// dφ_F = dφ⁺ · s · ELU'(s φ_F), then F's VJP.
    template <class Ops, class T>
    KATTN_HD static void activate_vjp(const params& p, index_t d, index_t m, const T* x, const T* u, const T* b, T,
                                      const T*, const T* dphi, T* du, T* dx, T* db, T* work) {
        const index_t nf = F::feature_dim(m);
        T* inner_phi = work;
        T* inner_dphi = work + nf;
        F::template activate<Ops>(p.inner, d, m, x, u, b, T(0), inner_phi);
        const T s = T(p.scale);
        Ops::transform(
            nf, inner_dphi,
            [s](auto f, auto g) {
                using V = decltype(f);
                return g * V(s) * math::elu_grad(V(s) * f);
            },
            inner_phi, dphi);
        F::template activate_vjp<Ops>(p.inner, d, m, x, u, b, T(0), inner_phi, inner_dphi, du, dx, db, work + 2 * nf);
    }
};

}  // namespace kattn::features

#include "../core/warnings_pop.hpp"
