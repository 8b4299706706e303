// kattn/samplers/density.hpp — the `kattn::spectral_density` concept: an explicit,
// differentiable density over R^D that a learned sampler can be regularised towards.
//
//   p.dim()                  D, the dimension of one frequency vector (2d for pairs)
//   p.log_prob(w)            log p(w) for the D values at w
//   p.log_prob_grad(w, g)    writes ∇_w log p(w) into the D values at g
//
// Models: samplers::gmm (incl. FSKA's bivariate NGSM prior), samplers::realnvp, and any
// user type with these three const members. realnvp::kl_to / kl_backward accept any
// model of it (the reverse KL KL(p_θ ‖ p): docs/samplers.md §2, realnvp).
#pragma once

#include <concepts>

#include "../core/config.hpp"

namespace kattn {

template <class P>
concept spectral_density = requires(const P& p, const double* w, double* g) {
    { p.dim() } -> std::convertible_to<index_t>;
    { p.log_prob(w) } -> std::convertible_to<double>;
    p.log_prob_grad(w, g);
};

}  // namespace kattn
