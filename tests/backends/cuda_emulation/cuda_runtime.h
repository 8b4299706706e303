// tests/backends/cuda_emulation/cuda_runtime.h — stands in for the CUDA runtime header when
// the CUDA backend's kernels are compiled by a host compiler for emulation (emulator.hpp).
#pragma once
#include "emulator.hpp"
