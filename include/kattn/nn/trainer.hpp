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
// epoch in which the budget ran out. Progress goes to trainer_config::on_event as
// training_events (nn/progress.hpp); by default (progress = true) a progress_printer on
// stderr draws a bar on a terminal and one line per epoch; the trainer prints nothing else.
// Model: forward(batch, context&) → logits, backward(dlogits, ctx), collect(ps, prefix);
// optional regularization(ctx).
//
// Data parallelism (nn/data_parallel.hpp, docs/data_parallel.md): given a communicator of N
// ranks, batch_size b is per rank and fit() equals a one-process fit() with batch N·b:
// every rank walks the same shuffled order in global batches of N·b (text bucketing
// included), takes its contiguous shard of each, and the gradients are all-reduced
// (weighted by shard size) before clipping and the AdamW step, which then agree on every
// rank. Losses and accuracies are summed over the ranks; evaluate() splits the data's
// evaluation batches over the ranks and gathers the probabilities (a collective: call it
// on every rank). Rank 0 alone calls the callback and writes checkpoints. Without a
// communicator the trainer is the one-process trainer it always was.
// Resume: with `state_checkpoint` set, the state after each epoch (parameters, AdamW
// moments and step, the data order and shuffle counter, history, best epoch, score and
// parameters) is saved there; resume(path) on a trainer built like the first one makes
// the next fit() continue after that epoch, with the same result as an uninterrupted fit.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <exception>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "../core/random.hpp"
#include "checkpoint.hpp"
#include "data/dataset.hpp"
#include "data_parallel.hpp"
#include "detail/class_count.hpp"
#include "divergence.hpp"
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
    bool progress = true;      ///< without on_event: progress_printer on stderr (false: silent)
    std::string checkpoint{};  ///< save the best parameters here (.npz) when set
    double max_seconds = 0.0;  ///< training time budget (0: none)
    std::string label{};       ///< progress-bar label prefix
    /// Text: sort each window of 50 shuffled batches by length before cutting it into batches,
    /// then shuffle the batches (less padding, same data per epoch). 0: off.
    index_t bucket_window = 50;
    /// Save the resumable training state here (.npz) after every epoch (trainer::resume).
    std::string state_checkpoint{};
    allreduce_config allreduce{};  ///< data parallelism: gradient buckets, reduction order
    /// Receives every training_event on rank 0 (set: replaces the default printer, whatever
    /// `progress` says); an exception it throws stops fit(), which rethrows it.
    training_callback on_event{};
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
    /// `comm` (optional; it must outlive the trainer): train data-parallel over its ranks.
    trainer(Model& model, const trainer_config& cfg, communicator_ref comm = {})
        : model_(model), cfg_(cfg), comm_(comm), reducer_(cfg.allreduce), callback_(cfg.on_event) {
        detail::require(cfg.epochs >= 1, "epochs", ">= 1", cfg.epochs);
        detail::require(cfg.batch_size >= 1, "batch_size", ">= 1", cfg.batch_size);
        detail::require(cfg.eval_batch_size >= 1, "eval_batch_size", ">= 1", cfg.eval_batch_size);
        detail::require(cfg.warmup_fraction >= 0 && cfg.warmup_fraction <= 1, "warmup_fraction", "a value in [0, 1]",
                        cfg.warmup_fraction);
        detail::require(cfg.clip >= 0 && std::isfinite(cfg.clip), "clip", "a finite value >= 0", cfg.clip);
        detail::require(cfg.patience >= 0, "patience", ">= 0", cfg.patience);
        detail::require(cfg.bucket_window >= 0, "bucket_window", ">= 0", cfg.bucket_window);
        model_.collect(params_, "model");
        if (!callback_ && cfg.progress) callback_ = progress_printer();
    }

    parameter_list& parameters() { return params_; }
    communicator_ref communicator() const { return comm_; }

    /// Loads a state saved by fit() (trainer_config::state_checkpoint; collective: rank 0
    /// reads `path` and broadcasts). The parameters are set now; the next fit() restores the
    /// optimiser, the data order, the step and shuffle counters, history and best-so-far, and
    /// continues after the saved epoch. It needs the same data, configuration, seeds and
    /// global batch (N·batch_size; N may differ). Throws if `path` holds no training state.
    void resume(const std::string& path) {
        checkpoint_metadata meta = load_checkpoint(comm_, path, params_);
        for (const char* key : {"trainer.epoch", "trainer.step", "trainer.draw", "trainer.global_batch",
                                "trainer.order", "trainer.history", "trainer.best", "adamw.steps"})
            if (!meta.count(key))
                detail::fail("path", "a training state saved by nn::trainer (trainer_config::state_checkpoint)",
                             "'" + path + "' without '" + key + "'");
        resume_ = std::move(meta);
    }

    /// Trains on `train`, selecting on `dev` when given (else the last epoch is kept).
    fit_result fit(const dataset& train, const dataset* dev = nullptr) {
        detail::require(train.size() >= 1, "train", "a non-empty data set", train.size());
        detail::check_classes("train", train, model_);  // dataset::num_classes vs classifier_config::classes
        if (dev) detail::check_classes("dev", *dev, model_);
        using clock = std::chrono::steady_clock;
        const int ranks = comm_.size(), rank = comm_.rank();
        const index_t G = cfg_.batch_size * ranks;  // the global batch
        const index_t n = train.size(), per_epoch = (n + G - 1) / G;
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
        index_t since_best = 0, first = 0;
        if (ranks > 1) broadcast_parameters(comm_, params_);  // the replicas start equal
        if (resume_) {
            first = restore_state(*resume_, G, order, res, best, since_best, opt);
            resume_.reset();
        }
        const std::int64_t first_step = step_;  // errors at a run's first step are not divergence
        const auto run0 = clock::now();
        auto epoch0 = run0;
        training_event ev{
            .label = cfg_.label, .epoch = first, .epochs = cfg_.epochs, .epoch_steps = per_epoch, .total_steps = total};
        auto emit = [&](training_event_kind kind) {
            const auto now = clock::now();
            ev.kind = kind;
            ev.run_step = step_;
            ev.elapsed = std::chrono::duration<double>(now - run0).count();
            ev.epoch_elapsed = std::chrono::duration<double>(now - epoch0).count();
            ev.eta = detail::run_eta(kind, ev.elapsed, total - step_, step_ - first_step);
            notify(ev);
        };
        const detail::abort_notifier aborted(rank == 0 ? &callback_ : nullptr, ev);  // run_aborted on a throw
        emit(training_event_kind::run_begin);
        for (index_t e = first; e < cfg_.epochs; ++e) {
            if (e == first && e > 0 && stop(res, since_best)) {  // the saved run had stopped
                res.stopped_early = true;
                break;
            }
            shuffle(order, rng);
            if (train.kind == input_kind::tokens && cfg_.bucket_window > 0) bucket(order, train, rng, G);
            const auto t0 = epoch0 = clock::now();
            ev.epoch = e + 1;
            emit(training_event_kind::epoch_begin);
            epoch_record rec;
            rec.epoch = e + 1;
            double loss_sum = 0, reg_sum = 0, tokens = 0;
            index_t correct = 0;
            for (index_t s = 0; s < per_epoch; ++s) {
                const index_t lo = s * G, nb = std::min(G, n - lo);
                const std::span<const index_t> global(order.data() + lo, std::size_t(nb));
                const shard mine = shard_range(nb, ranks, rank);
                double sums[4] = {0, 0, 0, 0};  // this shard's loss sum, correct, tokens; weighted reg
                if (mine.size() > 0) {
                    const batch b = shard_batch(train, global, mine);
                    context ctx;
                    ctx.training = true;
                    ctx.step = std::uint64_t(step_);
                    ctx.batch_offset = mine.begin;
                    try {
                        const auto logits = model_.forward(b, ctx);
                        const auto ce = cross_entropy(logits, b.labels, cfg_.label_smoothing);
                        zero_grad(params_);
                        model_.backward(ce.dlogits, ctx);
                        if constexpr (requires { model_.regularization(ctx); }) sums[3] = model_.regularization(ctx);
                        sums[0] = ce.loss * double(b.size);
                        const auto pred = predictions(ce.probs);
                        index_t hits = 0;
                        for (index_t r = 0; r < b.size; ++r) hits += pred[std::size_t(r)] == b.labels[std::size_t(r)];
                        sums[1] = double(hits);
                    } catch (const kattn::error& err) {
                        // After a good step, a non-finite value inside the model is divergence.
                        if (step_ > first_step && (detail::is_non_finite_error(err) || !detail::all_finite(params_)))
                            throw training_diverged(
                                step_, e + 1, sched.lr(step_),
                                std::string("a value inside the model became non-finite (") + err.what() + ")");
                        throw;
                    }
                    sums[2] = b.kind == input_kind::tokens
                                  ? double(std::accumulate(b.lengths.begin(), b.lengths.end(), index_t(0)))
                                  : double(ctx.rows());
                } else {
                    zero_grad(params_);  // a rank without examples adds zeros (weight 0)
                }
                if (ranks > 1) {
                    sums[3] *= double(mine.size()) / double(nb);  // Σ_r weight_r = 1
                    reducer_.reduce_mean(comm_, params_, mine.size(), nb, sums);
                }
                // Checked after the reduction, so every rank decides alike, and before the step.
                if (!std::isfinite(sums[0]) || !std::isfinite(sums[3]))
                    throw training_diverged(step_, e + 1, sched.lr(step_), "the training loss became non-finite");
                if (!std::isfinite(grad_norm(params_)))
                    throw training_diverged(step_, e + 1, sched.lr(step_), "the gradient became non-finite");
                if (cfg_.clip > 0) clip_grad_norm(params_, cfg_.clip);
                rec.lr = sched.lr(step_);
                opt.set_lr(rec.lr);
                opt.step(params_);
                ++step_;
                loss_sum += sums[0];
                reg_sum += sums[3];
                correct += index_t(sums[1]);
                tokens += sums[2];
                ev.step = s + 1;
                ev.loss = loss_sum / double(lo + nb);
                ev.accuracy = double(correct) / double(lo + nb);
                ev.tokens = tokens;
                ev.lr = rec.lr;
                emit(training_event_kind::step);
            }
            rec.seconds = std::chrono::duration<double>(clock::now() - t0).count();
            if (ranks > 1) comm_.broadcast(&rec.seconds, 1, 0);  // one clock decides (max_seconds)
            res.seconds += rec.seconds;
            rec.train_loss = loss_sum / double(n);
            rec.train_accuracy = double(correct) / double(n);
            rec.regularization = reg_sum / double(per_epoch);
            rec.tokens_per_second = tokens / std::max(rec.seconds, 1e-9);
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
                    save_checkpoint(comm_, cfg_.checkpoint, params_, {{"meta.epoch", {double(e + 1)}}});
            }
            res.history.push_back(rec);
            if (!cfg_.state_checkpoint.empty())
                save_checkpoint(comm_, cfg_.state_checkpoint, params_,
                                state_metadata(e + 1, G, order, res, best, since_best, opt));
            ev.record = &res.history.back();
            ev.improved = improved;
            emit(training_event_kind::epoch_end);
            if (stop(res, since_best)) {
                res.stopped_early = e + 1 < cfg_.epochs;
                break;
            }
        }
        if (!best.empty()) restore(best);
        res.steps = step_;
        ev.result = &res;
        emit(training_event_kind::run_end);
        return res;
    }

    /// Probabilities and metrics on `data` (evaluation mode). With N ranks (a collective),
    /// evaluation batch k runs on rank k mod N and every rank receives all probabilities:
    /// the same batches as in one process, so the same numbers.
    evaluation_result evaluate(const dataset& data) {
        detail::require(data.size() >= 1, "data", "a non-empty data set", data.size());
        detail::check_classes("data", data, model_);
        const auto t0 = std::chrono::steady_clock::now();
        evaluation_result res;
        const index_t n = data.size(), E = cfg_.eval_batch_size, K = (n + E - 1) / E;
        const int ranks = comm_.size(), rank = comm_.rank();
        index_t C = 0;
        for (index_t k = rank; k < K; k += ranks) {
            const index_t lo = k * E, nb = std::min(E, n - lo);
            std::vector<index_t> idx(static_cast<std::size_t>(nb));
            std::iota(idx.begin(), idx.end(), lo);
            const batch b = data.make_batch(idx);
            context ctx;
            const auto logits = model_.forward(b, ctx);
            const auto ce = cross_entropy(logits, b.labels, 0.0);
            C = index_t(ce.probs.shape()[1]);
            for (auto p : ce.probs) res.probs.push_back(float(p));
        }
        if (ranks > 1) {  // batch k sits at slot k / N of rank k mod N
            std::int64_t classes = C;
            comm_.broadcast(&classes, 1, 0);  // rank 0 always has batch 0
            C = index_t(classes);
            const index_t slots = (K + ranks - 1) / ranks, per = slots * E * C;
            res.probs.resize(std::size_t(per), 0.0f);
            std::vector<float> all(std::size_t(per * ranks));
            comm_.all_gather(res.probs.data(), all.data(), std::size_t(per));
            res.probs.assign(std::size_t(n * C), 0.0f);
            for (index_t k = 0; k < K; ++k) {
                const index_t nb = std::min(E, n - k * E);
                std::copy_n(all.data() + (k % ranks) * per + (k / ranks) * E * C, nb * C, res.probs.data() + k * E * C);
            }
        }
        res.metrics = evaluate_metrics(std::span<const float>(res.probs), C, std::span<const int>(data.labels));
        res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        return res;
    }

    std::int64_t steps() const { return step_; }

private:
    /// Calls the callback on rank 0; with N ranks every rank learns whether it threw.
    void notify(const training_event& ev) {
        std::exception_ptr failure;
        if (callback_ && comm_.rank() == 0) try {
                callback_(ev);
            } catch (...) {
                failure = std::current_exception();
            }
        if (comm_.size() > 1)
            detail::propagate_root_error(comm_, 0, failure);
        else if (failure)
            std::rethrow_exception(failure);
    }

    void shuffle(std::vector<index_t>& v, const random_stream& rng) {
        for (index_t i = index_t(v.size()) - 1; i > 0; --i) {
            const auto j = std::min(i, index_t(rng.uniform(draw_++) * double(i + 1)));
            std::swap(v[std::size_t(i)], v[std::size_t(j)]);
        }
    }

    /// Sorts windows of the order by text length, then shuffles whole (global) batches of B.
    void bucket(std::vector<index_t>& order, const dataset& data, const random_stream& rng, index_t B) {
        const index_t n = index_t(order.size()), W = B * cfg_.bucket_window;
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

    bool stop(const fit_result& res, index_t since_best) const {
        return (cfg_.patience > 0 && since_best >= cfg_.patience) ||
               (cfg_.max_seconds > 0 && res.seconds >= cfg_.max_seconds);
    }

    /// The resumable state after `epochs` epochs (keys: resume() and restore_state()).
    checkpoint_metadata state_metadata(index_t epochs, index_t G, const std::vector<index_t>& order,
                                       const fit_result& res, const std::vector<std::vector<double>>& best,
                                       index_t since_best, const adamw& opt) const {
        checkpoint_metadata m;
        m["trainer.epoch"] = {double(epochs)};
        m["trainer.step"] = {double(step_)};
        m["trainer.draw"] = {double(draw_)};
        m["trainer.global_batch"] = {double(G)};
        m["trainer.order"].assign(order.begin(), order.end());
        m["trainer.best"] = {double(res.best_epoch), res.best_dev, double(since_best), res.seconds};
        auto& h = m["trainer.history"];
        for (const auto& r : res.history)
            h.insert(h.end(), {double(r.epoch), r.train_loss, r.train_accuracy, r.regularization, r.dev_accuracy,
                               r.dev_macro_f1, r.dev_log_loss, r.seconds, r.tokens_per_second, r.lr});
        m["adamw.steps"] = {double(opt.steps())};
        for (std::size_t k = 0; k < opt.states().size(); ++k) {
            m["adamw.m." + params_[k].name] = opt.states()[k].first_moment();
            m["adamw.v." + params_[k].name] = opt.states()[k].second_moment();
        }
        for (std::size_t k = 0; k < best.size(); ++k) m["best." + params_[k].name] = best[k];
        return m;
    }

    /// Applies a state of state_metadata(); returns the number of epochs it had done.
    index_t restore_state(const checkpoint_metadata& m, index_t G, std::vector<index_t>& order, fit_result& res,
                          std::vector<std::vector<double>>& best, index_t& since_best, adamw& opt) {
        auto get = [&](const std::string& key, std::size_t size) -> const std::vector<double>& {
            const auto it = m.find(key);
            if (it == m.end() || it->second.size() != size)
                detail::fail("resume", "a training state with '" + key + "' of " + std::to_string(size) + " values",
                             it == m.end() ? std::string("none") : std::to_string(it->second.size()));
            return it->second;
        };
        const index_t n = index_t(order.size()), epochs = index_t(get("trainer.epoch", 1)[0]);
        detail::require(index_t(get("trainer.global_batch", 1)[0]) == G, "resume",
                        "a state of the global batch N*batch_size = " + std::to_string(G),
                        get("trainer.global_batch", 1)[0]);
        detail::require(epochs >= 0 && epochs <= cfg_.epochs, "resume",
                        "a state of at most epochs = " + std::to_string(cfg_.epochs), epochs);
        const auto& saved = get("trainer.order", std::size_t(n));  // throws for another data set size
        std::vector<char> seen(std::size_t(n), 0);
        for (std::size_t i = 0; i < saved.size(); ++i) {
            const auto v = index_t(saved[i]);
            detail::require(v >= 0 && v < n && !seen[std::size_t(v)], "resume", "an order that permutes the data",
                            saved[i]);
            seen[std::size_t(v)] = 1;
            order[i] = v;
        }
        step_ = std::int64_t(get("trainer.step", 1)[0]);
        draw_ = std::uint64_t(get("trainer.draw", 1)[0]);
        const auto& b = get("trainer.best", 4);
        res.best_epoch = index_t(b[0]);
        res.best_dev = b[1];
        since_best = index_t(b[2]);
        res.seconds = b[3];
        const auto& h = get("trainer.history", std::size_t(10 * epochs));
        res.history.clear();
        for (index_t e = 0; e < epochs; ++e) {
            const double* r = h.data() + 10 * e;
            res.history.push_back({index_t(r[0]), r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9]});
        }
        const auto steps = std::int64_t(get("adamw.steps", 1)[0]);
        std::vector<std::vector<double>> mo, ve;
        for (std::size_t k = 0; steps > 0 && k < params_.size(); ++k) {
            mo.push_back(get("adamw.m." + params_[k].name, std::size_t(params_[k].size())));
            ve.push_back(get("adamw.v." + params_[k].name, std::size_t(params_[k].size())));
        }
        opt.restore(params_, steps, mo, ve);
        best.clear();
        if (res.best_epoch >= 1)
            for (const auto& p : params_) best.push_back(get("best." + p.name, std::size_t(p.size())));
        return epochs;
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
    communicator_ref comm_;
    gradient_allreducer reducer_;
    std::optional<checkpoint_metadata> resume_;
    training_callback callback_;
    parameter_list params_;
    std::int64_t step_ = 0;
    std::uint64_t draw_ = 0;
};

}  // namespace kattn::nn
