// kattn/nn/trainer.hpp — mini-batch training with AdamW, warm-up + cosine schedule,
// gradient clipping, early stopping on a dev split and evaluation metrics.
//
// One optimiser step (step = 0, 1, …):
//   ctx = {training, step};  logits = model.forward(batch, ctx)
//   L = CE(logits, y; label smoothing) + model.regularization(ctx)   (FSKA's λ·KL, if any)
//   backward; g ← g·min(1, clip/‖g‖);  lr = warmup_cosine(step);  AdamW
// Epoch e visits the training set in the order of a Fisher–Yates shuffle driven by
// random_stream(seed, streams::data) (draw counter continued across epochs), so a run is a
// pure function of (model seed, trainer seed, data) on any thread count.
// Text batches are cut from windows of `bucket_window` batches sorted by length, and the
// batches then shuffled (seeded), which cuts padding about in half on sentence data.
// After each epoch the dev split is evaluated (selection metric: accuracy or macro-F1); the
// best parameters are kept in memory (and saved to `checkpoint` when given) and restored at the end;
// `patience` epochs without improvement stop training. `max_seconds` > 0 stops after the
// epoch in which the budget ran out. A progress bar shows loss, accuracy, tokens/s and ETA.
// Model: forward(batch, context&) → logits, backward(dlogits, ctx), collect(ps, prefix);
// optional regularization(ctx).
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "../core/random.hpp"
#include "checkpoint.hpp"
#include "data/dataset.hpp"
#include "loss.hpp"
#include "metrics.hpp"
#include "optimizer.hpp"
#include "progress.hpp"
#include "schedule.hpp"

namespace kattn::nn {

template <class M>
concept trainable_model = requires(M& m, const batch& b, context& ctx, parameter_list& ps) {
    m.forward(b, ctx);
    m.backward(m.forward(b, ctx), ctx);
    m.collect(ps, std::string());
};

enum class selection_metric { accuracy, macro_f1 };

struct trainer_config {
    index_t epochs = 10;
    index_t batch_size = 64;
    index_t eval_batch_size = 256;
    double lr = 1e-3;
    double weight_decay = 1e-4;
    double min_lr = 0.0;           ///< cosine floor
    double warmup_fraction = 0.0;  ///< warm-up steps as a fraction of all steps
    double clip = 1.0;             ///< gradient-norm clip (0: none)
    double label_smoothing = 0.0;
    index_t patience = 0;  ///< early stopping after this many epochs without a better dev score (0: off)
    selection_metric select = selection_metric::accuracy;
    std::uint64_t seed = 0;
    bool progress = true;      ///< progress bar on stderr (plain lines when not a terminal)
    std::string checkpoint{};  ///< save the best parameters here (.npz) when set
    double max_seconds = 0.0;  ///< training time budget (0: none)
    std::string label{};       ///< progress-bar label prefix
    /// Text: sort each window of 50 shuffled batches by length before cutting it into batches,
    /// then shuffle the batches (less padding, same data per epoch). 0: off.
    index_t bucket_window = 50;
};

struct epoch_record {
    index_t epoch = 0;
    double train_loss = 0, train_accuracy = 0, regularization = 0;
    double dev_accuracy = std::numeric_limits<double>::quiet_NaN();
    double dev_macro_f1 = std::numeric_limits<double>::quiet_NaN();
    double dev_log_loss = std::numeric_limits<double>::quiet_NaN();
    double seconds = 0, tokens_per_second = 0, lr = 0;
};

struct fit_result {
    std::vector<epoch_record> history;
    index_t best_epoch = -1;
    double best_dev = std::numeric_limits<double>::quiet_NaN();
    double seconds = 0;  ///< training time (excluding dev evaluation)
    std::int64_t steps = 0;
    bool stopped_early = false;
};

struct evaluation_result {
    classification_metrics metrics{};
    std::vector<float> probs;  ///< [n, C]
    double seconds = 0;
};

template <class Model>
class trainer {
public:
    trainer(Model& model, const trainer_config& cfg) : model_(model), cfg_(cfg) {
        detail::require(cfg.epochs >= 1, "epochs", ">= 1", cfg.epochs);
        detail::require(cfg.batch_size >= 1, "batch_size", ">= 1", cfg.batch_size);
        detail::require(cfg.eval_batch_size >= 1, "eval_batch_size", ">= 1", cfg.eval_batch_size);
        detail::require(cfg.warmup_fraction >= 0 && cfg.warmup_fraction <= 1, "warmup_fraction", "a value in [0, 1]",
                        cfg.warmup_fraction);
        detail::require(cfg.clip >= 0 && std::isfinite(cfg.clip), "clip", "a finite value >= 0", cfg.clip);
        detail::require(cfg.patience >= 0, "patience", ">= 0", cfg.patience);
        detail::require(cfg.bucket_window >= 0, "bucket_window", ">= 0", cfg.bucket_window);
        model_.collect(params_, "model");
    }

    parameter_list& parameters() { return params_; }

    /// Trains on `train`, selecting on `dev` when given (else the last epoch is kept).
    fit_result fit(const dataset& train, const dataset* dev = nullptr) {
        detail::require(train.size() >= 1, "train", "a non-empty data set", train.size());
        using clock = std::chrono::steady_clock;
        const index_t n = train.size(), per_epoch = (n + cfg_.batch_size - 1) / cfg_.batch_size;
        const std::int64_t total = std::int64_t(per_epoch) * cfg_.epochs;
        const warmup_cosine sched({.base_lr = cfg_.lr,
                                   .warmup_steps = std::int64_t(std::llround(cfg_.warmup_fraction * double(total))),
                                   .total_steps = total,
                                   .min_lr = std::min(cfg_.min_lr, cfg_.lr)});
        adamw opt({.lr = cfg_.lr, .weight_decay = cfg_.weight_decay});
        const random_stream rng(cfg_.seed, streams::data);
        std::vector<index_t> order(static_cast<std::size_t>(n));
        std::iota(order.begin(), order.end(), index_t(0));
        fit_result res;
        std::vector<std::vector<double>> best;
        index_t since_best = 0;
        for (index_t e = 0; e < cfg_.epochs; ++e) {
            shuffle(order, rng);
            if (train.kind == input_kind::tokens && cfg_.bucket_window > 0) bucket(order, train, rng);
            const auto t0 = clock::now();
            std::optional<progress_bar> bar;
            if (cfg_.progress)
                bar.emplace(per_epoch,
                            cfg_.label + "epoch " + std::to_string(e + 1) + "/" + std::to_string(cfg_.epochs));
            epoch_record rec;
            rec.epoch = e + 1;
            double loss_sum = 0, reg_sum = 0, tokens = 0;
            index_t correct = 0;
            for (index_t s = 0; s < per_epoch; ++s) {
                const index_t lo = s * cfg_.batch_size, nb = std::min(cfg_.batch_size, n - lo);
                const batch b = train.make_batch(std::span<const index_t>(order.data() + lo, std::size_t(nb)));
                context ctx;
                ctx.training = true;
                ctx.step = std::uint64_t(step_);
                const auto logits = model_.forward(b, ctx);
                const auto ce = cross_entropy(logits, b.labels, cfg_.label_smoothing);
                zero_grad(params_);
                model_.backward(ce.dlogits, ctx);
                double reg = 0;
                if constexpr (requires { model_.regularization(ctx); }) reg = model_.regularization(ctx);
                if (cfg_.clip > 0) clip_grad_norm(params_, cfg_.clip);
                rec.lr = sched.lr(step_);
                opt.set_lr(rec.lr);
                opt.step(params_);
                ++step_;
                loss_sum += ce.loss * double(nb);
                reg_sum += reg;
                const auto pred = predictions(ce.probs);
                for (index_t r = 0; r < nb; ++r) correct += pred[std::size_t(r)] == b.labels[std::size_t(r)];
                tokens += b.kind == input_kind::tokens
                              ? double(std::accumulate(b.lengths.begin(), b.lengths.end(), index_t(0)))
                              : double(ctx.rows());
                if (bar) {
                    const double seen = double(lo + nb);
                    bar->update(
                        s + 1,
                        progress_fields{.loss = loss_sum / seen, .accuracy = double(correct) / seen, .tokens = tokens});
                }
            }
            if (bar) bar->finish();
            rec.seconds = std::chrono::duration<double>(clock::now() - t0).count();
            res.seconds += rec.seconds;
            rec.train_loss = loss_sum / double(n);
            rec.train_accuracy = double(correct) / double(n);
            rec.regularization = reg_sum / double(per_epoch);
            rec.tokens_per_second = tokens / std::max(rec.seconds, 1e-9);
            if (!std::isfinite(rec.train_loss))
                detail::fail("lr", "a learning rate at which training stays finite",
                             "a non-finite training loss in epoch " + std::to_string(e + 1));
            bool improved = dev == nullptr;
            if (dev) {
                const auto ev = evaluate(*dev);
                rec.dev_accuracy = ev.metrics.accuracy;
                rec.dev_macro_f1 = ev.metrics.macro_f1;
                rec.dev_log_loss = ev.metrics.log_loss;
                const double score = cfg_.select == selection_metric::accuracy ? rec.dev_accuracy : rec.dev_macro_f1;
                improved = res.best_epoch < 0 || score > res.best_dev;
                if (improved) {
                    res.best_dev = score;
                    since_best = 0;
                } else {
                    ++since_best;
                }
            }
            if (improved) {
                res.best_epoch = e + 1;
                best = snapshot();
                if (!cfg_.checkpoint.empty())
                    save_checkpoint(cfg_.checkpoint, params_, {{"meta.epoch", {double(e + 1)}}});
            }
            res.history.push_back(rec);
            if (cfg_.progress) {
                std::fprintf(stderr, "%sepoch %ld/%ld: train loss %.4f acc %.4f", cfg_.label.c_str(), long(e + 1),
                             long(cfg_.epochs), rec.train_loss, rec.train_accuracy);
                if (dev)
                    std::fprintf(stderr, " | dev acc %.4f macro-F1 %.4f log-loss %.4f%s", rec.dev_accuracy,
                                 rec.dev_macro_f1, rec.dev_log_loss, improved ? " *" : "");
                std::fprintf(stderr, " | %.1f s, %.0f tok/s\n", rec.seconds, rec.tokens_per_second);
            }
            if (cfg_.patience > 0 && since_best >= cfg_.patience) {
                res.stopped_early = e + 1 < cfg_.epochs;
                break;
            }
            if (cfg_.max_seconds > 0 && res.seconds >= cfg_.max_seconds) {
                res.stopped_early = e + 1 < cfg_.epochs;
                break;
            }
        }
        if (!best.empty()) restore(best);
        res.steps = step_;
        return res;
    }

    /// Probabilities and metrics on `data` (evaluation mode).
    evaluation_result evaluate(const dataset& data) {
        detail::require(data.size() >= 1, "data", "a non-empty data set", data.size());
        const auto t0 = std::chrono::steady_clock::now();
        evaluation_result res;
        const index_t n = data.size();
        index_t C = 0;
        for (index_t lo = 0; lo < n; lo += cfg_.eval_batch_size) {
            const index_t nb = std::min(cfg_.eval_batch_size, n - lo);
            std::vector<index_t> idx(static_cast<std::size_t>(nb));
            std::iota(idx.begin(), idx.end(), lo);
            const batch b = data.make_batch(idx);
            context ctx;
            const auto logits = model_.forward(b, ctx);
            const auto ce = cross_entropy(logits, b.labels, 0.0);
            C = index_t(ce.probs.shape()[1]);
            for (auto p : ce.probs) res.probs.push_back(float(p));
        }
        res.metrics = evaluate_metrics(std::span<const float>(res.probs), C, std::span<const int>(data.labels));
        res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        return res;
    }

    std::int64_t steps() const { return step_; }

private:
    void shuffle(std::vector<index_t>& v, const random_stream& rng) {
        for (index_t i = index_t(v.size()) - 1; i > 0; --i) {
            const auto j = std::min(i, index_t(rng.uniform(draw_++) * double(i + 1)));
            std::swap(v[std::size_t(i)], v[std::size_t(j)]);
        }
    }

    /// Sorts windows of the order by text length, then shuffles whole batches.
    void bucket(std::vector<index_t>& order, const dataset& data, const random_stream& rng) {
        const index_t n = index_t(order.size()), B = cfg_.batch_size, W = B * cfg_.bucket_window;
        auto len = [&](index_t i) { return std::min(index_t(data.texts[std::size_t(i)].size()), data.max_length); };
        for (index_t lo = 0; lo < n; lo += W)
            std::stable_sort(order.begin() + lo, order.begin() + std::min(n, lo + W),
                             [&](index_t a, index_t b) { return len(a) < len(b); });
        std::vector<index_t> starts;  // full batches are shuffled; a partial one stays last
        for (index_t lo = 0; lo + B <= n; lo += B) starts.push_back(lo);
        shuffle(starts, rng);
        if (n % B != 0) starts.push_back(n - n % B);
        std::vector<index_t> out;
        out.reserve(order.size());
        for (index_t lo : starts) out.insert(out.end(), order.begin() + lo, order.begin() + std::min(n, lo + B));
        order.swap(out);
    }

    std::vector<std::vector<double>> snapshot() const {
        std::vector<std::vector<double>> s;
        for (const auto& p : params_) {
            std::vector<double> v(std::size_t(p.size()));
            for (index_t i = 0; i < p.size(); ++i) v[std::size_t(i)] = p.value_at(i);
            s.push_back(std::move(v));
        }
        return s;
    }
    void restore(const std::vector<std::vector<double>>& s) {
        for (std::size_t k = 0; k < params_.size(); ++k)
            for (index_t i = 0; i < params_[k].size(); ++i) params_[k].set_value(i, s[k][std::size_t(i)]);
    }

    Model& model_;
    trainer_config cfg_;
    parameter_list params_;
    std::int64_t step_ = 0;
    std::uint64_t draw_ = 0;
};

}  // namespace kattn::nn
