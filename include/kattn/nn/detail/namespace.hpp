// kattn/nn/detail/namespace.hpp — makes kattn::detail's checks (require, fail,
// check_finite, shape_text) reachable as kattn::nn::detail::… inside kattn::nn.
#pragma once

#include "../../core/error.hpp"
#include "../../core/shape.hpp"

namespace kattn::nn::detail {
using namespace kattn::detail;
}  // namespace kattn::nn::detail
