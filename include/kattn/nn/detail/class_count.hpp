// kattn/nn/detail/class_count.hpp — the check that a data set's class count matches a model's.
//
// A model that has `classes()` (nn::sequence_classifier: classifier_config::classes) states
// how many logits it produces; a dataset with num_classes > 0 states how many classes its
// labels come from. check_classes(argument, data, model) throws kattn::error naming the
// argument and the data set when both are known and differ; models without `classes()`
// (hand-written ones, wrappers) and data sets with num_classes = 0 are not checked.
#pragma once

#include <string>
#include <string_view>

#include "../data/dataset.hpp"
#include "namespace.hpp"

namespace kattn::nn::detail {

/// The model's output class count, or 0 when it does not tell.
template <class Model>
index_t model_classes(const Model& model) {
    if constexpr (requires { model.classes(); })
        return index_t(model.classes());
    else
        return 0;
}

/// Throws unless data.num_classes (when > 0) equals the model's class count (when known).
template <class Model>
void check_classes(std::string_view argument, const dataset& data, const Model& model) {
    const index_t c = model_classes(model);
    if (c > 0 && data.num_classes > 0 && data.num_classes != c)
        fail(argument,
             "a data set of the model's " + std::to_string(c) +
                 " classes (classifier_config::classes = " + std::to_string(c) + ")",
             "data set '" + data.name + "' with num_classes = " + std::to_string(data.num_classes) +
                 " (build the model with .classes = " + std::to_string(data.num_classes) + ")");
}

}  // namespace kattn::nn::detail
