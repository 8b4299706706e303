// Tests for the trainer's training events (nn/progress.hpp, trainer_config::on_event): the
// exact event sequence and its fields (epochs in order, the final step count = total steps,
// the run's ETA falling to 0, epoch records = fit_result::history), the default printer's
// one line per epoch (a configurable stream, and stderr itself), silence with progress =
// false, a throwing callback stopping training, and rank 0 alone calling the callback.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <kattn/nn/attention/softmax_mha.hpp>
#include <kattn/nn/classifier.hpp>
#include <kattn/nn/trainer.hpp>

#include "synthetic_text.hpp"
#include "thread_ranks.hpp"

using namespace kattn;
using kind = nn::training_event_kind;

namespace {

using model_t = nn::sequence_classifier<nn::token_input<float>, nn::softmax_mha<float>, float>;

model_t make_model() {
    const nn::classifier_config cfg{
        .encoder = {.dim = 8, .layers = 1, .ffn_hidden = 8, .dropout = 0.0, .seed = 3}, .classes = 2, .seed = 3};
    return model_t(cfg, nn::token_input<float>({.vocab = 20, .dim = 8, .max_length = 9, .seed = 3}), [](index_t l) {
        return nn::softmax_mha<float>({.dim = 8, .heads = 2, .seed = 7 + std::uint64_t(l)});
    });
}

/// A copy of an event, with the pointed-to record and result captured by value.
struct recorded {
    nn::training_event ev;
    nn::epoch_record record{};
    bool has_record = false, has_result = false;
    index_t best_epoch = -1;
    std::int64_t result_steps = -1;
};

nn::training_callback recorder(std::vector<recorded>& out) {
    return [&out](const nn::training_event& e) {
        recorded r{.ev = e};
        r.ev.record = nullptr;
        r.ev.result = nullptr;
        if (e.kind == kind::epoch_end && e.record) r.record = *e.record, r.has_record = true;
        if (e.kind == kind::run_end && e.result)
            r.has_result = true, r.best_epoch = e.result->best_epoch, r.result_steps = e.result->steps;
        out.push_back(r);
    };
}

bool same(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

bool same_record(const nn::epoch_record& a, const nn::epoch_record& b) {
    return a.epoch == b.epoch && same(a.train_loss, b.train_loss) && same(a.train_accuracy, b.train_accuracy) &&
           same(a.regularization, b.regularization) && same(a.dev_accuracy, b.dev_accuracy) &&
           same(a.dev_macro_f1, b.dev_macro_f1) && same(a.dev_log_loss, b.dev_log_loss) && same(a.seconds, b.seconds) &&
           same(a.tokens_per_second, b.tokens_per_second) && same(a.lr, b.lr);
}

std::vector<std::string> lines_of(const std::string& s) {
    std::vector<std::string> out;
    std::istringstream is(s);
    for (std::string l; std::getline(is, l);) out.push_back(l);
    return out;
}

/// Everything written to file descriptors 1 and 2 (and std::cout, std::cerr) while f runs.
template <class F>
std::string captured_output(F f) {
    std::fflush(stdout);
    std::fflush(stderr);
    std::FILE* tmp = std::tmpfile();
    REQUIRE(tmp != nullptr);
    const int saved_out = dup(1), saved_err = dup(2);
    dup2(fileno(tmp), 1);
    dup2(fileno(tmp), 2);
    auto restore = [&] {
        std::cout.flush();
        std::cerr.flush();
        std::fflush(stdout);
        std::fflush(stderr);
        dup2(saved_out, 1);
        dup2(saved_err, 2);
        close(saved_out);
        close(saved_err);
    };
    try {
        f();
    } catch (...) {
        restore();
        std::fclose(tmp);
        throw;
    }
    restore();
    std::string text;
    std::rewind(tmp);
    for (int c; (c = std::fgetc(tmp)) != EOF;) text += char(c);
    std::fclose(tmp);
    return text;
}

const nn::dataset train_set = kt::text_data(100, 1), dev_set = kt::text_data(40, 2);
constexpr index_t epochs = 3, per_epoch = 7;  // ⌈100 / 16⌉ = 7 steps per epoch
const nn::trainer_config base{.epochs = epochs, .batch_size = 16, .lr = 3e-3, .seed = 4, .label = "m "};

}  // namespace

TEST_CASE("nn::trainer events: the exact sequence, counts, steps, ETA and the epoch records") {
    std::vector<recorded> evs;
    auto model = make_model();
    nn::trainer_config cfg = base;
    cfg.on_event = recorder(evs);
    nn::trainer tr(model, cfg);
    const nn::fit_result fit = tr.fit(train_set, &dev_set);
    REQUIRE(fit.history.size() == std::size_t(epochs));
    REQUIRE(fit.steps == epochs * per_epoch);

    std::map<kind, int> count;
    for (const auto& r : evs) ++count[r.ev.kind];
    CHECK(count[kind::run_begin] == 1);
    CHECK(count[kind::epoch_begin] == epochs);
    CHECK(count[kind::step] == epochs * per_epoch);
    CHECK(count[kind::epoch_end] == epochs);
    CHECK(count[kind::run_end] == 1);
    CHECK(count[kind::run_aborted] == 0);
    REQUIRE(evs.size() == std::size_t(2 + epochs * (2 + per_epoch)));

    // run_begin, (epoch_begin, step × 7, epoch_end) × 3, run_end, in this order
    std::size_t i = 0;
    CHECK(evs[i].ev.kind == kind::run_begin);
    CHECK(evs[i].ev.epoch == 0);
    CHECK(evs[i].ev.run_step == 0);
    CHECK(std::isnan(evs[i].ev.eta));  // no step timed yet
    ++i;
    double last_elapsed = 0;
    std::int64_t run_step = 0;
    int last_improved = -1;
    for (index_t e = 1; e <= epochs; ++e) {
        CHECK(evs[i].ev.kind == kind::epoch_begin);
        CHECK(evs[i].ev.epoch == e);
        CHECK(evs[i].ev.run_step == (e - 1) * per_epoch);
        ++i;
        for (index_t s = 1; s <= per_epoch; ++s, ++i) {
            const auto& ev = evs[i].ev;
            REQUIRE(ev.kind == kind::step);
            CHECK(ev.epoch == e);
            CHECK(ev.step == s);
            CHECK(ev.run_step == ++run_step);
            CHECK(ev.epoch_steps == per_epoch);
            CHECK(ev.total_steps == epochs * per_epoch);
            CHECK(ev.epochs == epochs);
            CHECK(ev.label == "m ");
            CHECK(ev.elapsed >= last_elapsed);
            CHECK(ev.epoch_elapsed <= ev.elapsed);
            last_elapsed = ev.elapsed;
            // the whole run's ETA: elapsed · steps left / steps done, reaching 0 at the last step only
            CHECK(ev.eta == doctest::Approx(ev.elapsed * double(ev.total_steps - ev.run_step) / double(ev.run_step)));
            if (ev.run_step < ev.total_steps) CHECK(ev.eta >= 0);
            CHECK((ev.eta == 0) == (ev.run_step == ev.total_steps));
            CHECK(ev.lr > 0);
            CHECK(ev.tokens > 0);
            CHECK(ev.loss > 0);
            CHECK(ev.accuracy >= 0);
            CHECK(ev.accuracy <= 1);
        }
        const auto& last_step = evs[i - 1].ev;
        const auto& end = evs[i];
        REQUIRE(end.ev.kind == kind::epoch_end);
        CHECK(end.ev.epoch == e);
        REQUIRE(end.has_record);
        // the record the callback saw is the one fit() returns
        CHECK(same_record(end.record, fit.history[std::size_t(e - 1)]));
        CHECK(end.record.epoch == e);
        // the running means at the epoch's last step are the epoch's
        CHECK(last_step.loss == doctest::Approx(end.record.train_loss));
        CHECK(last_step.accuracy == doctest::Approx(end.record.train_accuracy));
        CHECK(last_step.lr == end.record.lr);
        CHECK(last_step.tokens == doctest::Approx(end.record.tokens_per_second * end.record.seconds));
        if (e < epochs) CHECK(end.ev.eta > 0);  // not the epoch's ETA, which would be 0 here
        if (end.ev.improved) last_improved = int(e);
        ++i;
    }
    REQUIRE(evs[i].ev.kind == kind::run_end);
    CHECK(evs[i].ev.eta == 0);
    CHECK(evs[i].ev.run_step == fit.steps);
    REQUIRE(evs[i].has_result);
    CHECK(evs[i].best_epoch == fit.best_epoch);
    CHECK(evs[i].result_steps == fit.steps);
    CHECK(last_improved == fit.best_epoch);
    CHECK(evs[1 + per_epoch + 1].ev.improved);  // the first epoch always improves
}

TEST_CASE("nn::progress_printer: one line per epoch on a stream that is not a terminal") {
    std::ostringstream os;
    auto model = make_model();
    nn::trainer_config cfg = base;
    cfg.on_event = nn::progress_printer(os);
    nn::trainer tr(model, cfg);
    const auto fit = tr.fit(train_set, &dev_set);
    const std::string out = os.str();
    CHECK(out.find('\r') == std::string::npos);
    const auto lines = lines_of(out);
    REQUIRE(lines.size() == std::size_t(epochs));
    for (index_t e = 1; e <= epochs; ++e) {
        const auto& l = lines[std::size_t(e - 1)];
        CHECK(l.rfind("m epoch " + std::to_string(e) + "/3: train loss ", 0) == 0);
        CHECK(l.find(" | dev acc ") != std::string::npos);
        CHECK(l.find(" tok/s") != std::string::npos);
        CHECK((l.find(" | ETA ") != std::string::npos) == (e < epochs));
        char want[64];
        std::snprintf(want, sizeof want, "train loss %.4f acc %.4f", fit.history[std::size_t(e - 1)].train_loss,
                      fit.history[std::size_t(e - 1)].train_accuracy);
        CHECK(l.find(want) != std::string::npos);
    }
    // the best epoch is starred, the others not
    for (index_t e = 1; e <= epochs; ++e) {
        const auto& l = lines[std::size_t(e - 1)];
        if (e == fit.best_epoch) CHECK(l.find(" *") != std::string::npos);
    }
}

TEST_CASE("nn::progress_printer: interactive mode redraws a bar and leaves one summary line per epoch") {
    std::ostringstream os;
    auto model = make_model();
    nn::trainer_config cfg = base;
    cfg.on_event = nn::progress_printer(os, nn::progress_mode::interactive);
    nn::trainer tr(model, cfg);
    tr.fit(train_set, &dev_set);
    const auto lines = lines_of(os.str());
    REQUIRE(lines.size() == std::size_t(epochs));
    for (index_t e = 1; e <= epochs; ++e) {
        const auto& l = lines[std::size_t(e - 1)];
        const std::string shown = l.substr(l.rfind('\r') + 1);  // what remains on the screen
        CHECK(shown.rfind("m epoch " + std::to_string(e) + "/3: train loss ", 0) == 0);
        CHECK(l.find("\rm epoch " + std::to_string(e) + "/3 [") != std::string::npos);  // the bar was drawn
        CHECK(l.find("elapsed") == std::string::npos);                                  // cleared, not finished
    }
}

TEST_CASE("nn::trainer: the default printer writes one line per epoch to stderr; progress = false nothing") {
    // stderr is a file here, not a terminal
    const std::string loud = captured_output([] {
        auto model = make_model();
        nn::trainer tr(model, base);  // progress = true, no on_event
        tr.fit(train_set, &dev_set);
        tr.evaluate(dev_set);
    });
    const auto lines = lines_of(loud);
    REQUIRE(lines.size() == std::size_t(epochs));
    for (index_t e = 1; e <= epochs; ++e)
        CHECK(lines[std::size_t(e - 1)].rfind("m epoch " + std::to_string(e) + "/3: train loss ", 0) == 0);

    const std::string quiet = captured_output([] {
        auto model = make_model();
        nn::trainer_config cfg = base;
        cfg.progress = false;
        nn::trainer tr(model, cfg);
        tr.fit(train_set, &dev_set);
        tr.evaluate(dev_set);
    });
    CHECK(quiet.empty());

    // a callback replaces the default printer
    int calls = 0;
    const std::string replaced = captured_output([&] {
        auto model = make_model();
        nn::trainer_config cfg = base;
        cfg.on_event = [&](const nn::training_event&) { ++calls; };
        nn::trainer tr(model, cfg);
        tr.fit(train_set, &dev_set);
    });
    CHECK(replaced.empty());
    CHECK(calls == 2 + epochs * (2 + per_epoch));
}

TEST_CASE("nn::trainer: a callback that throws stops training with its exception") {
    for (const kind where : {kind::run_begin, kind::step, kind::epoch_end}) {
        CAPTURE(int(where));
        std::vector<kind> seen;
        auto model = make_model();
        nn::trainer_config cfg = base;
        cfg.on_event = [&](const nn::training_event& e) {
            seen.push_back(e.kind);
            if (e.kind == where && (where != kind::step || e.run_step == 5)) throw std::runtime_error("stop here");
        };
        nn::trainer tr(model, cfg);
        CHECK_THROWS_WITH_AS(tr.fit(train_set, &dev_set), "stop here", std::runtime_error);
        // no optimiser step after the throw; then run_aborted, the last event
        CHECK(tr.steps() == (where == kind::run_begin ? 0 : where == kind::step ? 5 : per_epoch));
        REQUIRE(seen.size() >= 2);
        CHECK(seen.back() == kind::run_aborted);
        CHECK(std::count(seen.begin(), seen.end(), kind::run_aborted) == 1);
        CHECK(seen[seen.size() - 2] == where);
    }
    // a failing run (bad labels) also ends with run_aborted; a throwing run_aborted is ignored
    std::vector<kind> seen;
    auto model = make_model();
    nn::trainer_config cfg = base;
    cfg.on_event = [&](const nn::training_event& e) {
        seen.push_back(e.kind);
        if (e.kind == kind::run_aborted) throw std::runtime_error("ignored");
        if (e.kind == kind::epoch_end) throw kattn::error("kattn: argument 'x': expected y, got z");
    };
    nn::trainer tr(model, cfg);
    CHECK_THROWS_WITH_AS(tr.fit(train_set), "kattn: argument 'x': expected y, got z", kattn::error);
    CHECK(seen.back() == kind::run_aborted);
}

TEST_CASE("nn::trainer events on 2 simulated ranks: rank 0 alone calls the callback") {
    std::vector<recorded> evs[2];
    std::int64_t steps[2] = {0, 0};
    const auto errors = kt::run_ranks(2, [&](kt::thread_communicator& comm) {
        auto model = make_model();
        nn::trainer_config cfg = base;
        cfg.batch_size = 8;  // global 16: 7 steps per epoch, as in one process
        cfg.on_event = recorder(evs[comm.rank()]);
        nn::trainer tr(model, cfg, comm);
        steps[comm.rank()] = tr.fit(train_set, &dev_set).steps;
    });
    CHECK(kt::what(errors[0]).empty());
    CHECK(kt::what(errors[1]).empty());
    CHECK(evs[1].empty());
    REQUIRE(evs[0].size() == std::size_t(2 + epochs * (2 + per_epoch)));
    CHECK(evs[0].back().ev.kind == kind::run_end);
    CHECK(evs[0].back().ev.run_step == epochs * per_epoch);
    CHECK(steps[0] == epochs * per_epoch);
    CHECK(steps[1] == epochs * per_epoch);

    // rank 0's callback throws at step 4: every rank stops there (rank 1 with kattn::error)
    std::int64_t stopped[2] = {-1, -1};
    const auto failed = kt::run_ranks(2, [&](kt::thread_communicator& comm) {
        auto model = make_model();
        nn::trainer_config cfg = base;
        cfg.batch_size = 8;
        cfg.on_event = [](const nn::training_event& e) {
            if (e.kind == kind::step && e.run_step == 4) throw std::runtime_error("stop at 4");
        };
        nn::trainer tr(model, cfg, comm);
        try {
            tr.fit(train_set, &dev_set);
        } catch (...) {
            stopped[comm.rank()] = tr.steps();
            throw;
        }
    });
    CHECK(kt::what(failed[0]) == "stop at 4");
    CHECK(kt::what(failed[1]).find("rank 0 failed: stop at 4") != std::string::npos);
    CHECK(stopped[0] == 4);
    CHECK(stopped[1] == 4);
}
