#pragma once

#include "core/config.hpp"
#include "core/error.hpp"
