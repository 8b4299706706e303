// kattn/nn/divergence.hpp — the error a diverging training run raises.
//
// When the learning rate is too high the parameters grow until the loss, the gradient or a
// value inside the model stops being finite. trainer::fit checks the reduced loss and the
// gradient norm of every step before the optimiser applies it (so the parameters it leaves
// behind are those of the last good step), and turns a non-finite-value error raised inside
// the model after the first step into the same report. It throws training_diverged, a
// kattn::error that says so, at which step, and what to try:
//     kattn: training diverged at step 412 (epoch 3, learning rate 0.03): the training loss
//     became non-finite. Try a lower learning rate (trainer_config::lr, e.g. 0.01), gradient
//     clipping (clip = 1), a warm-up (warmup_fraction = 0.1), or resume from a checkpoint
//     saved before step 412 with one of these.
// step(), epoch() and lr() let a caller retry, e.g. with lr / 3. Errors raised at the first
// step of a run are configuration or data errors and propagate unchanged.
#pragma once

#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>

#include "../core/error.hpp"
#include "parameter.hpp"

namespace kattn::nn {

class training_diverged : public kattn::error {
public:
    training_diverged(std::int64_t step, std::int64_t epoch, double lr, const std::string& symptom)
        : kattn::error(message(step, epoch, lr, symptom)), step_(step), epoch_(epoch), lr_(lr) {}

    std::int64_t step() const { return step_; }    ///< the optimiser step (0-based) that failed
    std::int64_t epoch() const { return epoch_; }  ///< its epoch (1-based)
    double lr() const { return lr_; }              ///< the learning rate scheduled for it

private:
    static std::string message(std::int64_t step, std::int64_t epoch, double lr, const std::string& symptom) {
        std::ostringstream os;
        os << "kattn: training diverged at step " << step << " (epoch " << epoch << ", learning rate " << lr
           << "): " << symptom << ". Try a lower learning rate (trainer_config::lr, e.g. " << lr / 3
           << "), gradient clipping (clip = 1), a warm-up (warmup_fraction = 0.1), or resume from a checkpoint "
           << "saved before step " << step << " with one of these.";
        return os.str();
    }
    std::int64_t step_, epoch_;
    double lr_;
};

namespace detail {

/// True when every parameter value is finite.
inline bool all_finite(const parameter_list& ps) {
    for (const auto& p : ps)
        for (index_t i = 0; i < p.size(); ++i)
            if (!std::isfinite(p.value_at(i))) return false;
    return true;
}

/// True for the error kattn::detail::check_finite raises ("expected finite values").
inline bool is_non_finite_error(const kattn::error& e) {
    return std::string(e.what()).find("expected finite values") != std::string::npos;
}

}  // namespace detail
}  // namespace kattn::nn
