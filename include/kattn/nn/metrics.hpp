// kattn/nn/metrics.hpp — evaluation metrics of a classifier from its predicted probabilities.
//
// Input: probabilities P [n, C] (a tensor<T>, or a flat row-major span plus C), used as
// given, and labels in [0, C); ŷ_i = argmax_c P_ic (first maximum on ties); sums in double.
//   accuracy, macro_f1, log_loss, brier, ece (15 bins), confusion_matrix (rows: true class)
//   evaluate_metrics: accuracy, macro_f1, log_loss, brier and ece in one pass
// macro_f1 and log_loss follow scikit-learn. Definitions, ECE bins and errors:
// docs/encoder.md §2 (Metrics).
#pragma once

#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

#include <xtensor/xtensor.hpp>

#include "../core/config.hpp"
#include "detail/namespace.hpp"
#include "tensor.hpp"

namespace kattn::nn {

struct classification_metrics {
    double accuracy = 0, macro_f1 = 0, log_loss = 0, brier = 0, ece = 0;
};

inline constexpr int ece_bins = 15;
inline constexpr double log_loss_eps = 1e-15;

namespace detail {

/// Throws unless P (size n·C) and labels fit together and P is finite and ≥ 0.
template <class T>
void check_metric_inputs(std::span<const T> probs, index_t classes, std::span<const int> labels) {
    require(classes >= 1, "classes", ">= 1", classes);
    require(!labels.empty(), "labels", "at least one item", "0 items");
    const index_t n = index_t(labels.size());
    require(
        index_t(probs.size()) == n * classes, "probs",
        "n*C = " + std::to_string(n) + "*" + std::to_string(classes) + " = " + std::to_string(n * classes) + " values",
        std::to_string(probs.size()) + " values");
    for (index_t i = 0; i < n; ++i)
        require(labels[i] >= 0 && labels[i] < classes, "labels", "values in [0, " + std::to_string(classes) + ")",
                std::to_string(labels[i]) + " at item " + std::to_string(i));
    for (std::size_t i = 0; i < probs.size(); ++i) {
        const double p = double(probs[i]);
        if (!std::isfinite(p) || p < 0)
            fail("probs", "finite probabilities >= 0",
                 to_text(p) + " at item " + std::to_string(index_t(i) / classes) + ", class " +
                     std::to_string(index_t(i) % classes));
    }
}

/// argmax of row i (first maximum).
template <class T>
index_t row_argmax(std::span<const T> probs, index_t classes, index_t i) {
    const T* row = probs.data() + i * classes;
    return index_t(std::max_element(row, row + classes) - row);
}

/// Bin of confidence s: k with k/15 < s ≤ (k+1)/15 (bin 0 includes 0, s > 1 → last bin).
inline int ece_bin(double s) {
    int k = int(std::ceil(s * ece_bins)) - 1;
    k = std::clamp(k, 0, ece_bins - 1);
    while (k > 0 && s <= double(k) / ece_bins) --k;  // guard the rounding of s·15
    while (k < ece_bins - 1 && s > double(k + 1) / ece_bins) ++k;
    return k;
}

template <class T>
std::span<const T> flat(const tensor<T>& probs) {
    return std::span<const T>(probs.data(), probs.size());
}

}  // namespace detail

/// ŷ_i = argmax_c P_ic for every item (first maximum on ties).
template <class T>
std::vector<int> predictions(std::span<const T> probs, index_t classes) {
    detail::require(classes >= 1 && index_t(probs.size()) % classes == 0, "probs",
                    "a multiple of classes = " + std::to_string(classes) + " values",
                    std::to_string(probs.size()) + " values");
    std::vector<int> out(probs.size() / std::size_t(classes));
    for (index_t i = 0; i < index_t(out.size()); ++i) out[i] = int(detail::row_argmax(probs, classes, i));
    return out;
}

/// M [C, C]: M(y, ŷ) counts items of true class y predicted as ŷ.
template <class T>
xt::xtensor<index_t, 2> confusion_matrix(std::span<const T> probs, index_t classes, std::span<const int> labels) {
    detail::check_metric_inputs(probs, classes, labels);
    xt::xtensor<index_t, 2> m = xt::zeros<index_t>({std::size_t(classes), std::size_t(classes)});
    for (index_t i = 0; i < index_t(labels.size()); ++i)
        m(std::size_t(labels[i]), std::size_t(detail::row_argmax(probs, classes, i))) += 1;
    return m;
}

/// Macro F1 from a confusion matrix (classes absent from both y and ŷ left out).
inline double macro_f1(const xt::xtensor<index_t, 2>& m) {
    const std::size_t c = m.shape()[0];
    double sum = 0;
    index_t present = 0;
    for (std::size_t k = 0; k < c; ++k) {
        index_t tp = m(k, k), fp = 0, fn = 0;
        for (std::size_t j = 0; j < c; ++j)
            if (j != k) fp += m(j, k), fn += m(k, j);
        if (tp + fp + fn == 0) continue;
        sum += 2.0 * double(tp) / double(2 * tp + fp + fn);
        ++present;
    }
    return present ? sum / double(present) : 0.0;
}

/// All of accuracy, macro_f1, log_loss, brier and ece (see the header comment).
template <class T>
classification_metrics evaluate_metrics(std::span<const T> probs, index_t classes, std::span<const int> labels) {
    detail::check_metric_inputs(probs, classes, labels);
    const index_t n = index_t(labels.size());
    xt::xtensor<index_t, 2> m = xt::zeros<index_t>({std::size_t(classes), std::size_t(classes)});
    std::vector<double> bin_n(ece_bins, 0.0), bin_acc(ece_bins, 0.0), bin_conf(ece_bins, 0.0);
    double correct = 0, nll = 0, brier = 0;
    for (index_t i = 0; i < n; ++i) {
        const T* row = probs.data() + i * classes;
        const index_t pred = detail::row_argmax(probs, classes, i);
        const int y = labels[i];
        const bool hit = pred == y;
        m(std::size_t(y), std::size_t(pred)) += 1;
        correct += hit ? 1.0 : 0.0;
        nll -= std::log(std::clamp(double(row[y]), log_loss_eps, 1.0));
        for (index_t c = 0; c < classes; ++c) {
            const double d = double(row[c]) - (c == y ? 1.0 : 0.0);
            brier += d * d;
        }
        const double s = double(row[pred]);
        const int k = detail::ece_bin(s);
        bin_n[k] += 1;
        bin_acc[k] += hit ? 1.0 : 0.0;
        bin_conf[k] += s;
    }
    classification_metrics r;
    r.accuracy = correct / double(n);
    r.macro_f1 = macro_f1(m);
    r.log_loss = nll / double(n);
    r.brier = brier / double(n);
    for (int k = 0; k < ece_bins; ++k)
        if (bin_n[k] > 0) r.ece += (bin_n[k] / double(n)) * std::abs(bin_acc[k] / bin_n[k] - bin_conf[k] / bin_n[k]);
    return r;
}

template <class T>
double accuracy(std::span<const T> probs, index_t classes, std::span<const int> labels) {
    detail::check_metric_inputs(probs, classes, labels);
    index_t hits = 0;
    for (index_t i = 0; i < index_t(labels.size()); ++i) hits += detail::row_argmax(probs, classes, i) == labels[i];
    return double(hits) / double(labels.size());
}

template <class T>
double macro_f1(std::span<const T> probs, index_t classes, std::span<const int> labels) {
    return macro_f1(confusion_matrix(probs, classes, labels));
}

template <class T>
double log_loss(std::span<const T> probs, index_t classes, std::span<const int> labels) {
    return evaluate_metrics(probs, classes, labels).log_loss;
}

template <class T>
double brier(std::span<const T> probs, index_t classes, std::span<const int> labels) {
    return evaluate_metrics(probs, classes, labels).brier;
}

template <class T>
double ece(std::span<const T> probs, index_t classes, std::span<const int> labels) {
    return evaluate_metrics(probs, classes, labels).ece;
}

// ---- tensor<T> [n, C] overloads --------------------------------------------------------

template <class T>
std::vector<int> predictions(const tensor<T>& probs) {
    return predictions(detail::flat(probs), index_t(probs.shape()[1]));
}
template <class T>
xt::xtensor<index_t, 2> confusion_matrix(const tensor<T>& probs, std::span<const int> labels) {
    return confusion_matrix(detail::flat(probs), index_t(probs.shape()[1]), labels);
}
template <class T>
classification_metrics evaluate_metrics(const tensor<T>& probs, std::span<const int> labels) {
    return evaluate_metrics(detail::flat(probs), index_t(probs.shape()[1]), labels);
}
template <class T>
double accuracy(const tensor<T>& probs, std::span<const int> labels) {
    return accuracy(detail::flat(probs), index_t(probs.shape()[1]), labels);
}
template <class T>
double macro_f1(const tensor<T>& probs, std::span<const int> labels) {
    return macro_f1(detail::flat(probs), index_t(probs.shape()[1]), labels);
}
template <class T>
double log_loss(const tensor<T>& probs, std::span<const int> labels) {
    return log_loss(detail::flat(probs), index_t(probs.shape()[1]), labels);
}
template <class T>
double brier(const tensor<T>& probs, std::span<const int> labels) {
    return brier(detail::flat(probs), index_t(probs.shape()[1]), labels);
}
template <class T>
double ece(const tensor<T>& probs, std::span<const int> labels) {
    return ece(detail::flat(probs), index_t(probs.shape()[1]), labels);
}

}  // namespace kattn::nn
