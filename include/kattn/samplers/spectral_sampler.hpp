// kattn/samplers/spectral_sampler.hpp — the spectral-sampler concept and its traits.
//
//   kattn::spectral_sampler<S>       draws `count` frequency vectors of dimension `dim`
//                                    from a seed (Philox: same seed, same Ω everywhere)
//   kattn::spectral_sampler_traits<S> capabilities with defaults; a readable static_assert
//                                    when S is not a sampler
// Writing a sampler: docs/samplers.md.
#pragma once

#include <concepts>
#include <cstdint>

#include "../core/config.hpp"
#include "../core/detected.hpp"
#include "sampler_params.hpp"

namespace kattn {

namespace detail {
template <class P>
using sampler_params_of = typename P::params;
}  // namespace detail

/// The parameters of sampler S: S::params, or sampler_params for a sampler that declares none.
template <class S>
using sampler_params_t = detail::detected_or_t<sampler_params, detail::sampler_params_of, S>;

/// A spectral sampler: writes `count` vectors of dimension `dim` from a seed. Stateless
/// samplers (gaussian, …) make `sample` static; learned ones (with parameters) make it a
/// const member — both are called as `s.template sample<T>(params, dim, count, seed, out)`.
template <class S>
concept spectral_sampler = requires(const S& s, const sampler_params_t<S>& p, index_t n, std::uint64_t seed,
                                    double* out) {
    { S::name } -> std::convertible_to<const char*>;
    { S::is_random } -> std::convertible_to<bool>;
    s.template sample<double>(p, n, n, seed, out);
};

namespace detail {
template <class S>
concept has_is_orthogonal = requires {
    { S::is_orthogonal } -> std::convertible_to<bool>;
};
template <class S>
concept has_orthogonal_init = requires {
    { S::orthogonal_init } -> std::convertible_to<bool>;
};
}  // namespace detail

template <class S>
struct spectral_sampler_traits {
    static_assert(spectral_sampler<S>,
                  "kattn: this type is not a kattn::spectral_sampler. A sampler provides static members "
                  "name, is_random and sample<T>(params, dim, count, seed, T* out) "
                  "(see docs/samplers.md).");
    static constexpr bool is_random = S::is_random;
    /// The sampler's parameters (attention_config<F, S>::sampler).
    using params = sampler_params_t<S>;
    static constexpr bool is_orthogonal = [] {
        if constexpr (detail::has_is_orthogonal<S>)
            return bool(S::is_orthogonal);
        else
            return false;
    }();
    /// A learned sampler whose frequencies start as orthogonal blocks and are then moved
    /// (samplers::langevin for a map that requires orthogonal frequencies). Default false.
    static constexpr bool orthogonal_init = [] {
        if constexpr (detail::has_orthogonal_init<S>)
            return bool(S::orthogonal_init);
        else
            return false;
    }();
};

}  // namespace kattn
