// kattn/nn/optimizer.hpp — AdamW over a model's parameter_list.
//
// One kattn::optim::adam per parameter view (the update of optim/adam.hpp, PyTorch's
// torch.optim.AdamW):
//   p ← p·(1 − lr·wd_v),   m ← β₁m + (1−β₁)g,   v ← β₂v + (1−β₂)g²,
//   p ← p − lr·(m/(1−β₁ᵗ)) / (√(v/(1−β₂ᵗ)) + ε)
// with wd_v = weight_decay for views with decay = true and 0 otherwise (biases, norms).
// Float and double views are both updated (moments in double). The optimisers are created
// at the first step; every later step must see a list of the same length, with the same
// names and sizes in the same order (kattn::error otherwise). set_lr applies to all views
// (schedules call it before each step).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "../optim/adam.hpp"
#include "parameter.hpp"

namespace kattn::nn {

struct adamw_config {
    double lr = 1e-3;
    double beta1 = 0.9;
    double beta2 = 0.999;
    double eps = 1e-8;
    double weight_decay = 1e-2;  ///< PyTorch's AdamW default
};

class adamw {
public:
    explicit adamw(const adamw_config& cfg = {}) : cfg_(cfg) {
        // Validates every field once (the per-view optimisers repeat the checks).
        optim::adam(
            {.lr = cfg.lr, .beta1 = cfg.beta1, .beta2 = cfg.beta2, .eps = cfg.eps, .weight_decay = cfg.weight_decay});
    }

    /// One AdamW update of every view from its gradient.
    void step(parameter_list& ps) {
        if (opt_.empty() && steps_ == 0) {
            opt_.reserve(ps.size());
            for (const auto& p : ps) {
                opt_.emplace_back(optim::adam_config{.lr = cfg_.lr,
                                                     .beta1 = cfg_.beta1,
                                                     .beta2 = cfg_.beta2,
                                                     .eps = cfg_.eps,
                                                     .weight_decay = p.decay ? cfg_.weight_decay : 0.0});
                names_.push_back(p.name);
                sizes_.push_back(p.size());
            }
        }
        detail::require(ps.size() == opt_.size(), "params",
                        "the parameter list of the first step (" + std::to_string(opt_.size()) + " views)", ps.size());
        for (std::size_t k = 0; k < ps.size(); ++k)
            detail::require(ps[k].name == names_[k] && ps[k].size() == sizes_[k], "params",
                            "view " + std::to_string(k) + " = '" + names_[k] + "' of size " + std::to_string(sizes_[k]),
                            "'" + ps[k].name + "' of size " + std::to_string(ps[k].size()));
        for (std::size_t k = 0; k < ps.size(); ++k) {
            auto& p = ps[k];
            if (p.is_double())
                opt_[k].step(p.value64, p.grad64);
            else
                opt_[k].step(p.value, p.grad);
        }
        ++steps_;
    }

    void set_lr(double lr) {
        detail::require(std::isfinite(lr) && lr >= 0, "lr", "a finite value >= 0", lr);
        cfg_.lr = lr;
        for (auto& o : opt_) o.set_lr(lr);
    }
    double lr() const { return cfg_.lr; }
    const adamw_config& config() const { return cfg_; }
    /// Updates taken.
    std::int64_t steps() const { return steps_; }
    /// The per-view optimisers (moments), in list order; empty before the first step.
    const std::vector<optim::adam>& states() const { return opt_; }

private:
    adamw_config cfg_;
    std::vector<optim::adam> opt_;
    std::vector<std::string> names_;
    std::vector<index_t> sizes_;
    std::int64_t steps_ = 0;
};

}  // namespace kattn::nn
