// kattn/nn/loss.hpp — softmax cross-entropy with label smoothing (PyTorch's definition).
//
// For logits z ∈ R^{B × C}, labels y_b ∈ [0, C) and smoothing ε ∈ [0, 1]:
//   log p_{b,c} = z_{b,c} − max_c z_b − log Σ_c exp(z_{b,c} − max_c z_b)   (stable log-softmax)
//   q_{b,c}     = (1 − ε)·[c = y_b] + ε/C                                  (smoothed target)
//   loss        = (1/B) Σ_b Σ_c −q_{b,c} · log p_{b,c}
//   dloss/dz    = (p − q) / B
// (ε = 0: the usual mean negative log-likelihood.) Sums in double.
#pragma once

#include <algorithm>
#include <cmath>
#include <span>
#include <string>

#include "tensor.hpp"

namespace kattn::nn {

template <class T = float>
struct cross_entropy_result {
    double loss = 0;    ///< mean over the batch
    tensor<T> dlogits;  ///< gradient of the mean loss, [B, C]
    tensor<T> probs;    ///< softmax(logits), [B, C]
};

template <class T>
cross_entropy_result<T> cross_entropy(const tensor<T>& logits, std::span<const int> labels,
                                      double label_smoothing = 0.0) {
    detail::require(logits.dimension() == 2 && logits.shape()[0] >= 1 && logits.shape()[1] >= 1, "logits",
                    "shape [batch >= 1, classes >= 1]", detail::shape_text(logits.shape()));
    const index_t B = index_t(logits.shape()[0]), C = index_t(logits.shape()[1]);
    detail::require(index_t(labels.size()) == B, "labels", "one label per row of logits (" + std::to_string(B) + ")",
                    labels.size());
    for (std::size_t b = 0; b < labels.size(); ++b)
        if (labels[b] < 0 || labels[b] >= C)
            detail::fail("labels", "values in [0, classes = " + std::to_string(C) + ")",
                         std::to_string(labels[b]) + " at position " + std::to_string(b));
    detail::require(label_smoothing >= 0 && label_smoothing <= 1, "label_smoothing", "a value in [0, 1]",
                    label_smoothing);
    detail::check_finite("logits", logits.data(), index_t(logits.size()));

    cross_entropy_result<T> res;
    res.probs = tensor<T>::from_shape({std::size_t(B), std::size_t(C)});
    res.dlogits = tensor<T>::from_shape({std::size_t(B), std::size_t(C)});
    const double eps = label_smoothing, off = eps / double(C), invB = 1.0 / double(B);
    double total = 0;
    for (index_t b = 0; b < B; ++b) {
        double mx = double(logits(b, 0));
        for (index_t c = 1; c < C; ++c) mx = std::max(mx, double(logits(b, c)));
        double s = 0;
        for (index_t c = 0; c < C; ++c) s += std::exp(double(logits(b, c)) - mx);
        const double lse = std::log(s);
        double row = 0;
        for (index_t c = 0; c < C; ++c) {
            const double logp = double(logits(b, c)) - mx - lse;
            const double p = std::exp(logp);
            const double q = (c == labels[std::size_t(b)] ? 1.0 - eps : 0.0) + off;
            row -= q * logp;
            res.probs(b, c) = T(p);
            res.dlogits(b, c) = T((p - q) * invB);
        }
        total += row;
    }
    res.loss = total * invB;
    return res;
}

}  // namespace kattn::nn
