// examples/common/map_options.hpp — the command-line options of the feature map that the
// examples with Coulomb and qk-<map> models share: --temperature, --input-scale and
// --learn-scale, written into experiment::model_options (nn::model_spec's fields of the
// same names; docs/encoder.md §3).
#pragma once

#include <CLI/CLI.hpp>

#include "experiment.hpp"

namespace experiment {

inline void add_map_options(CLI::App& app, model_options& mo) {
    app.add_option("--temperature", mo.temperature, "tau of the map (qk-<map> and Coulomb models whose map has one)")
        ->check(CLI::PositiveNumber);
    app.add_option("--input-scale", mo.input_scale,
                   "q and k multiplied by this before the map (qk-<map> and Coulomb models; 0: the map's default)")
        ->check(CLI::NonNegativeNumber);
    app.add_flag("--learn-scale", mo.learn_input_scale,
                 "Coulomb models: learn each head's input scale, starting from --input-scale or the map's default");
}

}  // namespace experiment
