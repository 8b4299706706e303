// kattn/features/all.hpp — every feature map, and the registry that lists them.
//
// features::all drives the tests (every map against the reference backend, finite
// differences, every backend) and the examples' model zoo. Adding a map: its header, one
// line here, its section in docs/feature_maps.md.
#pragma once

#include "../core/type_list.hpp"
#include "cos2.hpp"
#include "elu.hpp"
#include "favor.hpp"
#include "favor_hyperbolic.hpp"
#include "nonstationary.hpp"
#include "porf_softplus.hpp"
#include "positive.hpp"
#include "relu.hpp"
#include "sigmoid2.hpp"
#include "softmax_features.hpp"
#include "softplus.hpp"
#include "trig.hpp"

namespace kattn::features {

/// The registry of feature maps.
using all = type_list<trig, nonstationary, positive<trig>, positive<nonstationary>, favor, favor_hyperbolic, elu,
                      softplus, sigmoid2, cos2, softmax_features, porf_softplus, relu>;

}  // namespace kattn::features
