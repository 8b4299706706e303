// kattn/fwd.hpp — forward declarations of every public kattn type. Includes nothing
// but <cstddef>/<cstdint>: use it in headers that only name kattn types.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kattn {

class error;
struct bf16;  // <kattn/core/bfloat16.hpp>
struct feature_params;
struct sampler_params;
template <class Map, class Sampler>
struct attention_config;  // <kattn/attention/attention_config.hpp>
struct softmax_config;
struct causal_t;

namespace features {
struct trig;
struct nonstationary;
template <class F>
struct positive;
struct favor;
struct favor_hyperbolic;
struct elu;
struct softplus;
struct sigmoid2;
struct cos2;
struct softmax_features;
struct porf_softplus;
struct relu;
struct map_base;
}  // namespace features

namespace samplers {
struct identity;
struct gaussian;
struct orthogonal_gaussian;
struct gmm;
class realnvp;
template <class Map, class Backend>
class langevin;  // default Backend: backends::reference
}  // namespace samplers

namespace optim {
class adam;
}  // namespace optim

namespace backends {
template <class Map, class T>
struct spectral_view;
template <class Map, class T>
struct feature_problem;
template <class Map, class T>
struct attention_problem;
struct bf16_forward_io;
template <class T>
struct attention_gradients;
template <class Map, class T>
struct step_problem;
struct recurrent_state_view;
template <class T>
struct forward_state;
struct reference;
struct simd;
template <class Policy, class Work>
struct thrust;  // <kattn/backends/thrust.hpp>; defaults there
template <class T>
struct strided_view;  // <kattn/backends/strided_view.hpp>
struct device_options;
struct host_system;  // <kattn/backends/chunked.hpp>
template <class System>
struct chunked;
struct cuda_system;  // <kattn/backends/cuda.cuh> (nvcc); backends::cuda = chunked<cuda_system>
}  // namespace backends

template <class Map, class Sampler, class Backend, class T>
class linear_attention;
template <class T>
class saved_state;  // <kattn/attention/saved_state.hpp>

namespace dist {
class self_communicator;
class mpi_communicator;  // <kattn/dist/mpi_communicator.hpp>, needs MPI
template <class Attention, class Comm>
class sequence_parallel;
}  // namespace dist
template <class T>
class softmax_attention;

}  // namespace kattn
