// kattn/nn/inference.hpp — predictions and evaluation of a trained classifier, no trainer needed.
//
//   predict_proba(model, batch)                                     P [B, C] of one batch
//   predict_proba(model, data, batch_size = 256)                    P [n, C] of a dataset
//   predict_proba(model, texts, vocab, max_length, batch_size = 256)  P [n, C] of raw strings
//   predict(…)   the same arguments → the labels ŷ_i = argmax_c P_ic (first maximum on ties)
//   evaluate(model, data, batch_size = 256) → evaluation_report: accuracy, macro-F1, log-loss,
//       Brier, ECE (nn/metrics.hpp), the confusion matrix [C, C] (rows: true class), P, ŷ
// The model is anything with forward(batch, context&) → logits [B, C] (nn::sequence_classifier);
// it runs in evaluation mode (a default context: training = false, step 0 — no dropout,
// FSKA's fixed draw), so predictions are deterministic and, like training, bitwise the same
// on any OpenMP thread count. P_ic = exp(z_ic − max_c z_i − log Σ_c exp(z_ic − max_c z_i)) in
// double, stored as float: the probabilities of nn::cross_entropy and trainer::evaluate.
// A dataset is processed in consecutive batches of batch_size items in data order — the batches
// of trainer::evaluate with eval_batch_size = batch_size, so evaluate() gives its numbers
// exactly. Raw strings are encoded as make_text_dataset encodes (vocab.encode: nn::tokenize
// with the vocabulary's lowercase, unknown words → <unk>) and truncated to max_length tokens:
// predicting on the strings equals predicting on their encoded dataset. Use the vocabulary the
// model was trained with (vocabulary::save / load) and the training max_length.
// Checks (kattn::error): batch_size ≥ 1, max_length ≥ 1, a non-empty dataset (an empty list of
// strings gives P [0, C] when the model tells C by classes(), and is an error otherwise), finite
// logits, and the class count: a model's classes() must equal dataset::num_classes (when > 0),
// as in trainer::fit and trainer::evaluate.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include <xtensor/xtensor.hpp>

#include "data/dataset.hpp"
#include "data/text.hpp"
#include "detail/class_count.hpp"
#include "metrics.hpp"
#include "tensor.hpp"

namespace kattn::nn {

/// What evaluate(model, data) measures (probs and predictions in data order).
struct evaluation_report {
    classification_metrics metrics{};   ///< accuracy, macro_f1, log_loss, brier, ece
    xt::xtensor<index_t, 2> confusion;  ///< [C, C]: confusion(y, ŷ) counts items of class y predicted ŷ
    std::vector<float> probs;           ///< [n, C] row-major, as evaluation_result::probs
    std::vector<int> predictions;       ///< ŷ [n]
    index_t classes = 0;                ///< C
    double seconds = 0;
};

namespace detail {

/// softmax of each row of `logits` [B, C] (as nn::cross_entropy), appended to `out` as float.
template <class T>
void append_softmax(const tensor<T>& logits, std::vector<float>& out) {
    check_finite("logits", logits.data(), index_t(logits.size()));
    const index_t B = index_t(logits.shape()[0]), C = index_t(logits.shape()[1]);
    for (index_t b = 0; b < B; ++b) {
        double mx = double(logits(b, 0));
        for (index_t c = 1; c < C; ++c) mx = std::max(mx, double(logits(b, c)));
        double s = 0;
        for (index_t c = 0; c < C; ++c) s += std::exp(double(logits(b, c)) - mx);
        const double lse = std::log(s);
        for (index_t c = 0; c < C; ++c) out.push_back(float(T(std::exp(double(logits(b, c)) - mx - lse))));
    }
}

/// The logits of one batch in evaluation mode, checked: [b.size, C], C = classes() if known.
template <class Model>
auto eval_logits(Model& model, const batch& b) {
    context ctx;  // training = false, step 0
    auto logits = model.forward(b, ctx);
    const index_t c = model_classes(model);
    require(logits.dimension() == 2 && index_t(logits.shape()[0]) == b.size && logits.shape()[1] >= 1 &&
                (c == 0 || index_t(logits.shape()[1]) == c),
            "model", "logits of shape [" + std::to_string(b.size) + ", " + (c ? std::to_string(c) : "classes") + "]",
            shape_text(logits.shape()));
    return logits;
}

/// P of `data` in consecutive batches of batch_size; sets `classes`.
template <class Model>
std::vector<float> dataset_probs(Model& model, const dataset& data, index_t batch_size, index_t& classes) {
    require(batch_size >= 1, "batch_size", ">= 1", batch_size);
    require(data.size() >= 1, "data", "a non-empty data set", "data set '" + data.name + "' with 0 items");
    check_classes("data", data, model);
    std::vector<float> probs;
    classes = 0;
    const index_t n = data.size();
    for (index_t lo = 0; lo < n; lo += batch_size) {
        std::vector<index_t> idx(std::size_t(std::min(batch_size, n - lo)));
        std::iota(idx.begin(), idx.end(), lo);
        const auto logits = eval_logits(model, data.make_batch(idx));
        classes = index_t(logits.shape()[1]);
        append_softmax(logits, probs);
    }
    require(data.num_classes <= 0 || classes == data.num_classes, "data",
            "a data set of the model's " + std::to_string(classes) + " output classes",
            "data set '" + data.name + "' with num_classes = " + std::to_string(data.num_classes));
    return probs;
}

inline tensor<float> as_matrix(const std::vector<float>& flat, index_t rows, index_t cols) {
    tensor<float> p = tensor<float>::from_shape({std::size_t(rows), std::size_t(cols)});
    std::copy(flat.begin(), flat.end(), p.data());
    return p;
}

/// The unlabelled token dataset of `texts` (labels 0), encoded as make_text_dataset does.
inline dataset text_items(std::span<const std::string> texts, const vocabulary& vocab, index_t max_length) {
    require(max_length >= 1, "max_length", ">= 1", max_length);
    dataset d;
    d.name = "texts";
    d.kind = input_kind::tokens;
    d.max_length = max_length;
    d.labels.assign(texts.size(), 0);
    d.texts.reserve(texts.size());
    for (const std::string& s : texts) d.texts.push_back(vocab.encode(s));
    return d;
}

}  // namespace detail

/// P [B, C] of one batch, evaluation mode.
template <class Model>
tensor<float> predict_proba(Model& model, const batch& b) {
    const auto logits = detail::eval_logits(model, b);
    std::vector<float> probs;
    detail::append_softmax(logits, probs);
    return detail::as_matrix(probs, b.size, index_t(logits.shape()[1]));
}

/// P [n, C] of every item of `data`, in consecutive batches of batch_size.
template <class Model>
tensor<float> predict_proba(Model& model, const dataset& data, index_t batch_size = 256) {
    index_t classes = 0;
    const std::vector<float> probs = detail::dataset_probs(model, data, batch_size, classes);
    return detail::as_matrix(probs, data.size(), classes);
}

/// P [n, C] of raw strings: encoded with `vocab`, truncated to max_length, batched.
template <class Model>
tensor<float> predict_proba(Model& model, std::span<const std::string> texts, const vocabulary& vocab,
                            index_t max_length, index_t batch_size = 256) {
    const dataset d = detail::text_items(texts, vocab, max_length);
    detail::require(batch_size >= 1, "batch_size", ">= 1", batch_size);
    if (texts.empty()) {
        const index_t c = detail::model_classes(model);
        detail::require(c > 0, "texts", "at least one text (the model does not tell its class count)", "none");
        return tensor<float>::from_shape({0, std::size_t(c)});
    }
    return predict_proba(model, d, batch_size);
}

/// ŷ of one batch.
template <class Model>
std::vector<int> predict(Model& model, const batch& b) {
    return predictions(predict_proba(model, b));
}

/// ŷ of every item of `data`.
template <class Model>
std::vector<int> predict(Model& model, const dataset& data, index_t batch_size = 256) {
    return predictions(predict_proba(model, data, batch_size));
}

/// ŷ of raw strings.
template <class Model>
std::vector<int> predict(Model& model, std::span<const std::string> texts, const vocabulary& vocab, index_t max_length,
                         index_t batch_size = 256) {
    const tensor<float> p = predict_proba(model, texts, vocab, max_length, batch_size);
    if (p.shape()[0] == 0) return {};
    return predictions(p);
}

/// Metrics, confusion matrix, probabilities and predictions of `model` on `data` (labelled):
/// the numbers of trainer::evaluate with eval_batch_size = batch_size.
template <class Model>
evaluation_report evaluate(Model& model, const dataset& data, index_t batch_size = 256) {
    const auto t0 = std::chrono::steady_clock::now();
    evaluation_report r;
    r.probs = detail::dataset_probs(model, data, batch_size, r.classes);
    const std::span<const float> p(r.probs);
    const std::span<const int> y(data.labels);
    r.metrics = evaluate_metrics(p, r.classes, y);
    r.confusion = confusion_matrix(p, r.classes, y);
    r.predictions = predictions(p, r.classes);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
}

}  // namespace kattn::nn
