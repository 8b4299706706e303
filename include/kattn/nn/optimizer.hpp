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
// (schedules call it before each step). restore() reinstates the moments and step count
// of a saved run (resuming training from a checkpoint, nn/trainer.hpp).
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

    /// Restores the state of a run that took `steps` updates of the list ps (resume from a
    /// checkpoint): m[k], v[k] are view k's moments (states()[k].first_moment(), …), each
    /// of the view's size; steps = 0 with no moments is the fresh optimiser. The next step
    /// then updates exactly as the saved run's next step would.
    void restore(const parameter_list& ps, std::int64_t steps, const std::vector<std::vector<double>>& m,
                 const std::vector<std::vector<double>>& v) {
        detail::require(steps >= 0, "steps", ">= 0", steps);
        const std::size_t views = steps == 0 ? 0 : ps.size();
        detail::require(m.size() == views && v.size() == views, "m, v",
                        "one moment per view (" + std::to_string(views) + ")", std::to_string(m.size()));
        std::vector<optim::adam> opt;
        std::vector<std::string> names;
        std::vector<index_t> sizes;
        for (std::size_t k = 0; k < views; ++k) {
            detail::require(index_t(m[k].size()) == ps[k].size() && index_t(v[k].size()) == ps[k].size(), "m, v",
                            "moments of view '" + ps[k].name + "' of size " + std::to_string(ps[k].size()),
                            std::to_string(m[k].size()) + " values");
            opt.emplace_back(optim::adam_config{.lr = cfg_.lr,
                                                .beta1 = cfg_.beta1,
                                                .beta2 = cfg_.beta2,
                                                .eps = cfg_.eps,
                                                .weight_decay = ps[k].decay ? cfg_.weight_decay : 0.0});
            opt.back().set_state(steps, m[k], v[k]);
            names.push_back(ps[k].name);
            sizes.push_back(ps[k].size());
        }
        opt_ = std::move(opt);
        names_ = std::move(names);
        sizes_ = std::move(sizes);
        steps_ = steps;
    }

private:
    adamw_config cfg_;
    std::vector<optim::adam> opt_;
    std::vector<std::string> names_;
    std::vector<index_t> sizes_;
    std::int64_t steps_ = 0;
};

}  // namespace kattn::nn
