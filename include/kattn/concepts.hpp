// kattn/concepts.hpp — the three policy concepts and their traits in one include:
// feature_map (features/feature_map.hpp), spectral_sampler (samplers/spectral_sampler.hpp)
// and execution_backend (backends/execution_backend.hpp).
#pragma once

#include "backends/execution_backend.hpp"
#include "features/feature_map.hpp"
#include "samplers/spectral_sampler.hpp"
