// kattn/nn/schedule.hpp — linear warm-up followed by cosine decay of the learning rate.
//
// `step` counts the optimiser steps already taken (0 for the first update). With base
// rate η, minimum η_min, warm-up steps w ≥ 0 and total steps S ≥ w:
//   step < w:        lr = η · (step + 1) / w             (first update η/w, update w: η)
//   w ≤ step < S:    lr = η_min + (η − η_min) · ½(1 + cos(π · (step − w) / (S − w)))
//   step ≥ S:        lr = η_min
// So lr rises linearly to η at step w − 1, stays η at step w (cosine start), and falls to
// η_min, reached at step S and held. w = 0: pure cosine decay.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>
#include <string>

#include "../core/config.hpp"
#include "detail/namespace.hpp"

namespace kattn::nn {

struct warmup_cosine_config {
    double base_lr = 1e-3;
    std::int64_t warmup_steps = 0;
    std::int64_t total_steps = 1;
    double min_lr = 0.0;
};

class warmup_cosine {
public:
    explicit warmup_cosine(const warmup_cosine_config& cfg) : cfg_(cfg) {
        detail::require(std::isfinite(cfg.base_lr) && cfg.base_lr > 0, "base_lr", "a finite value > 0", cfg.base_lr);
        detail::require(cfg.warmup_steps >= 0, "warmup_steps", ">= 0", cfg.warmup_steps);
        detail::require(cfg.total_steps >= cfg.warmup_steps && cfg.total_steps >= 1, "total_steps",
                        ">= max(1, warmup_steps = " + std::to_string(cfg.warmup_steps) + ")", cfg.total_steps);
        detail::require(cfg.min_lr >= 0 && cfg.min_lr <= cfg.base_lr, "min_lr", "a value in [0, base_lr]", cfg.min_lr);
    }

    const warmup_cosine_config& config() const { return cfg_; }

    /// Learning rate of update number `step` (0-based).
    double lr(std::int64_t step) const {
        detail::require(step >= 0, "step", ">= 0", step);
        const auto& c = cfg_;
        if (step < c.warmup_steps) return c.base_lr * double(step + 1) / double(c.warmup_steps);
        if (step >= c.total_steps) return c.min_lr;
        const double progress = double(step - c.warmup_steps) / double(c.total_steps - c.warmup_steps);
        return c.min_lr + (c.base_lr - c.min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
    }
    double operator()(std::int64_t step) const { return lr(step); }

private:
    warmup_cosine_config cfg_;
};

}  // namespace kattn::nn
