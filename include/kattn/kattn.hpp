// kattn/kattn.hpp — umbrella header: every feature map, sampler, backend and operator.
//
//   #include <kattn/kattn.hpp>
//   using attn_t = kattn::linear_attention<kattn::features::favor,
//                                          kattn::samplers::orthogonal_gaussian,
//                                          kattn::backends::simd>;
//
// Include individual headers (kattn/features/favor.hpp, …) to keep compile times down;
// kattn/fwd.hpp names every type without including anything.
#pragma once

#include "fwd.hpp"

#include "concepts.hpp"
#include "core/config.hpp"
#include "core/error.hpp"
#include "core/math.hpp"
#include "core/random.hpp"
#include "core/shape.hpp"
#include "core/type_list.hpp"

#include "io/npz.hpp"
#include "linalg/gemm.hpp"
#include "linalg/row_ops.hpp"

#include "samplers/gaussian.hpp"
#include "samplers/gmm.hpp"
#include "samplers/langevin.hpp"
#include "samplers/identity.hpp"
#include "samplers/orthogonal_gaussian.hpp"
#include "samplers/realnvp.hpp"
#include "samplers/sampler_params.hpp"
#include "samplers/density.hpp"

#include "features/all.hpp"
#include "features/feature_map.hpp"
#include "features/feature_params.hpp"
#include "features/map_base.hpp"
#include "features/omega_layout.hpp"

#include "backends/chunked.hpp"
#include "backends/reference.hpp"
#include "backends/simd.hpp"

#include "attention/attention_config.hpp"
#include "attention/linear_attention.hpp"
#include "attention/options.hpp"
#include "attention/softmax_attention.hpp"

#include "optim/adam.hpp"
