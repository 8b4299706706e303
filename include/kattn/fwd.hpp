// kattn/fwd.hpp — forward declarations of every public kattn type. Includes nothing
// but <cstddef>/<cstdint>: use it in headers that only name kattn types.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kattn {

class error;
struct feature_params;
struct sampler_params;
struct attention_config;
struct softmax_config;
struct causal_t;

namespace features {
struct trig;
struct nonstationary;
template <class F> struct positive;
struct favor;
struct favor_hyperbolic;
struct elu;
struct softplus;
struct sigmoid2;
struct cos2;
struct softmax_features;
struct porf_softplus;
}  // namespace features

namespace samplers {
struct identity;
struct gaussian;
struct orthogonal_gaussian;
struct gmm;
class realnvp;
template <class Map, class Backend> class langevin;  // default Backend: backends::reference
}  // namespace samplers

namespace optim {
class adam;
}  // namespace optim

namespace backends {
struct reference;
struct simd;
template <class Policy, class Work> struct thrust;  // <kattn/backends/thrust.hpp>; defaults there
}  // namespace backends

template <class Map, class Sampler, class Backend, class T> class linear_attention;
template <class T> class softmax_attention;

}  // namespace kattn
