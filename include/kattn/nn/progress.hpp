// kattn/nn/progress.hpp — progress display and training events for training loops.
//
//   progress_bar bar(total, "epoch 3");   // writes to std::cerr
//   for (...) bar.update(step, {.loss = l, .accuracy = a, .tokens = tokens_so_far});
//   bar.finish();
// draws "epoch 3 [####......] 45% 450/1000 loss 0.4123 acc 0.873 12.3k tok/s ETA 00:01:23",
// ETA = t·(total − done)/done (or progress_fields::eta). On a terminal one line is redrawn
// in place (about 10 Hz); on other streams a plain line every plain_percent % (progress_config).
// Not thread-safe.
// nn::trainer reports through a training_callback (trainer_config::on_event): run_begin,
// epoch_begin, step (every optimiser step), epoch_end (with the epoch_record), run_end, and
// run_aborted when fit() leaves with an exception. progress_printer is the default callback:
// a bar per epoch on a terminal, replaced by one summary line per epoch; one line per epoch
// on any other stream. Modes, formats and errors: docs/encoder.md §2 (Progress and events).
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <iostream>
#include <memory>
#include <limits>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <sys/ioctl.h>
#include <unistd.h>

#include "../core/config.hpp"
#include "detail/namespace.hpp"

namespace kattn::nn {

/// What a status line shows next to the bar; NaN fields are left out.
struct progress_fields {
    double loss = std::numeric_limits<double>::quiet_NaN();
    double accuracy = std::numeric_limits<double>::quiet_NaN();
    double tokens = std::numeric_limits<double>::quiet_NaN();  ///< processed since the start → tok/s
    std::vector<std::pair<std::string, double>> extra{};       ///< shown as "name value", in order
    double eta = std::numeric_limits<double>::quiet_NaN();     ///< seconds left: the ETA shown, if finite
};

enum class progress_mode { automatic, plain, interactive };

struct progress_config {
    index_t total = 0;    ///< steps of the loop
    std::string label{};  ///< line prefix ("epoch 3", "eval")
    progress_mode mode = progress_mode::automatic;
    int plain_percent = 10;        ///< plain mode: a line every this many percent
    double redraw_interval = 0.1;  ///< interactive mode: seconds between redraws
    int bar_width = 20;
    int columns = -1;  ///< interactive line width limit: −1 the terminal's, 0 none
};

namespace detail {

/// Seconds as HH:MM:SS (rounded to whole seconds; hours may exceed 99); "--:--:--" if
/// negative or not finite.
inline std::string format_hms(double seconds) {
    if (!std::isfinite(seconds) || seconds < 0) return "--:--:--";
    const long long s = std::llround(seconds);
    char buf[48];
    std::snprintf(buf, sizeof buf, "%02lld:%02lld:%02lld", s / 3600, (s / 60) % 60, s % 60);
    return buf;
}

/// A rate with one decimal and a k/M/G/T suffix: 999.4 → "999.4", 12345 → "12.3k",
/// 2.5e6 → "2.5M" (the suffix is chosen after rounding: 999.96 → "1.0k").
inline std::string format_si(double v) {
    if (!std::isfinite(v)) return "-";
    static const char* suffix[] = {"", "k", "M", "G", "T"};
    int k = 0;
    while (k < 4 && std::abs(v) >= 999.95) v /= 1000.0, ++k;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.1f%s", v, suffix[k]);
    return buf;
}

inline std::string format_fixed(double v, int digits) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", digits, v);
    return buf;
}

/// The terminal file descriptor behind a standard stream, or −1.
inline int terminal_fd(const std::ostream& os) {
    int fd = -1;
    if (&os == &std::cerr || &os == &std::clog)
        fd = fileno(stderr);
    else if (&os == &std::cout)
        fd = fileno(stdout);
    return fd >= 0 && isatty(fd) ? fd : -1;
}

/// Columns of the terminal at fd; 0 if unknown.
inline int terminal_columns(int fd) {
    winsize ws{};
    return fd >= 0 && ioctl(fd, TIOCGWINSZ, &ws) == 0 ? int(ws.ws_col) : 0;
}

}  // namespace detail

class progress_bar {
public:
    explicit progress_bar(progress_config cfg, std::ostream& os = std::cerr)
        : cfg_(std::move(cfg)), os_(os), start_(std::chrono::steady_clock::now()) {
        detail::require(cfg_.total >= 1, "total", ">= 1 step", cfg_.total);
        detail::require(cfg_.plain_percent >= 1 && cfg_.plain_percent <= 100, "plain_percent", "a value in [1, 100]",
                        cfg_.plain_percent);
        detail::require(std::isfinite(cfg_.redraw_interval) && cfg_.redraw_interval >= 0, "redraw_interval",
                        "a finite value >= 0", cfg_.redraw_interval);
        detail::require(cfg_.bar_width >= 0, "bar_width", ">= 0", cfg_.bar_width);
        const int fd = detail::terminal_fd(os_);
        interactive_ = cfg_.mode == progress_mode::interactive || (cfg_.mode == progress_mode::automatic && fd >= 0);
        columns_ = cfg_.columns >= 0 ? cfg_.columns : detail::terminal_columns(fd);
        bar_now_ = cfg_.bar_width;
    }
    progress_bar(index_t total, std::string label = {}, std::ostream& os = std::cerr, bool force_plain = false)
        : progress_bar(progress_config{.total = total,
                                       .label = std::move(label),
                                       .mode = force_plain ? progress_mode::plain : progress_mode::automatic},
                       os) {}
    progress_bar(const progress_bar&) = delete;
    progress_bar& operator=(const progress_bar&) = delete;
    /// Ends a drawn interactive line if finish() was not called (the next output starts clean).
    ~progress_bar() {
        if (interactive_ && drawn_ && !finished_) os_ << '\n' << std::flush;
    }

    bool interactive() const { return interactive_; }
    index_t total() const { return cfg_.total; }
    /// Seconds since construction (steady_clock).
    double elapsed() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }

    /// Reports `done` steps completed, timed by the clock.
    void update(index_t done, const progress_fields& fields = {}) { update(done, fields, elapsed()); }

    /// Reports `done` steps completed after `elapsed_seconds`.
    void update(index_t done, const progress_fields& fields, double elapsed_seconds) {
        check(done, elapsed_seconds);
        done_ = done;
        fields_ = fields;
        if (interactive_) {
            if (drawn_ && done != cfg_.total && elapsed_seconds - last_draw_ < cfg_.redraw_interval) return;
            last_draw_ = elapsed_seconds;
            draw(fitted(done, fields, elapsed_seconds, false), false);
        } else {
            const index_t mark = done * 100 / (cfg_.total * cfg_.plain_percent);  // multiples of plain_percent
            if (mark <= last_mark_) return;
            last_mark_ = mark;
            os_ << line(done, fields, elapsed_seconds) << '\n' << std::flush;
        }
    }

    /// Prints the final line (last done and fields, "elapsed HH:MM:SS") and ends it. Once.
    void finish() { finish(elapsed()); }
    void finish(double elapsed_seconds) {
        if (finished_) return;
        check(done_, elapsed_seconds);
        finished_ = true;
        if (interactive_)
            draw(fitted(done_, fields_, elapsed_seconds, true), true);
        else
            os_ << line(done_, fields_, elapsed_seconds, true) << '\n' << std::flush;
    }

    /// Erases a drawn interactive line (the cursor ends at its start) and ends the bar without
    /// a final line; plain mode prints nothing. Once, like finish().
    void clear() {
        if (finished_) return;
        finished_ = true;
        if (interactive_ && drawn_) os_ << '\r' << std::string(previous_width_, ' ') << '\r' << std::flush;
    }

    /// The status line for `done` steps after `elapsed_seconds` (no '\r' or '\n');
    /// final = true shows the elapsed time instead of the ETA.
    std::string line(index_t done, const progress_fields& f, double elapsed_seconds, bool final = false) const {
        return compose(done, f, elapsed_seconds, final, cfg_.bar_width);
    }

private:
    std::string compose(index_t done, const progress_fields& f, double elapsed_seconds, bool final, int bar) const {
        std::string s = cfg_.label.empty() ? std::string() : cfg_.label + " ";
        if (bar > 0) {
            const int filled = int(std::min<index_t>(bar, done * bar / cfg_.total));
            s += '[';
            s.append(std::size_t(filled), '#');
            s.append(std::size_t(bar - filled), '.');
            s += "] ";
        }
        s += std::to_string(done * 100 / cfg_.total);
        s += "% ";
        s += std::to_string(done);
        s += '/';
        s += std::to_string(cfg_.total);
        if (std::isfinite(f.loss)) s.append(" loss ").append(detail::format_fixed(f.loss, 4));
        if (std::isfinite(f.accuracy)) s.append(" acc ").append(detail::format_fixed(f.accuracy, 3));
        for (const auto& [name, value] : f.extra) s.append(" ").append(name).append(" ").append(detail::to_text(value));
        if (std::isfinite(f.tokens) && elapsed_seconds > 0)
            s.append(" ").append(detail::format_si(f.tokens / elapsed_seconds)).append(" tok/s");
        if (final)
            s.append(" elapsed ").append(detail::format_hms(elapsed_seconds));
        else if (std::isfinite(f.eta))
            s.append(" ETA ").append(detail::format_hms(f.eta));
        else if (done < cfg_.total)
            s.append(" ETA ").append(
                done > 0 ? detail::format_hms(elapsed_seconds * double(cfg_.total - done) / double(done))
                         : std::string("--:--:--"));
        return s;
    }

    /// The interactive line: the bar narrows (down to nothing, and never widens again, so it
    /// does not jitter) before the text is cut to fit the terminal.
    std::string fitted(index_t done, const progress_fields& f, double t, bool final) {
        std::string s = compose(done, f, t, final, bar_now_);
        const int over = columns_ > 1 ? int(s.size()) - (columns_ - 1) : 0;
        if (over > 0 && bar_now_ > 0) {
            bar_now_ = std::max(0, bar_now_ - over);
            s = compose(done, f, t, final, bar_now_);
        }
        return s;
    }

    void check(index_t done, double t) const {
        detail::require(done >= 0 && done <= cfg_.total, "done",
                        "a step count in [0, " + std::to_string(cfg_.total) + "]", done);
        detail::require(std::isfinite(t) && t >= 0, "elapsed_seconds", "a finite time >= 0", t);
    }

    /// Redraws the interactive line in place: '\r', the text cut to the terminal width, spaces
    /// over what remains of a longer previous line; a final line ends with '\n'.
    void draw(std::string text, bool final) {
        if (columns_ > 1 && int(text.size()) >= columns_) text.resize(std::size_t(columns_ - 1));
        const std::size_t width = text.size();
        if (width < previous_width_) text += std::string(previous_width_ - width, ' ');
        previous_width_ = width;
        os_ << '\r' << text;
        if (final) os_ << '\n';
        os_ << std::flush;
        drawn_ = true;
    }

    progress_config cfg_;
    std::ostream& os_;
    std::chrono::steady_clock::time_point start_;
    bool interactive_ = false, drawn_ = false, finished_ = false;
    int columns_ = 0, bar_now_ = 0;
    index_t done_ = 0, last_mark_ = 0;
    progress_fields fields_{};
    double last_draw_ = 0;
    std::size_t previous_width_ = 0;
};

/// One epoch of nn::trainer::fit() (fit_result::history; the epoch_end event's record).
struct epoch_record {
    index_t epoch = 0;
    double train_loss = 0, train_accuracy = 0, regularization = 0;
    double dev_accuracy = std::numeric_limits<double>::quiet_NaN();
    double dev_macro_f1 = std::numeric_limits<double>::quiet_NaN();
    double dev_log_loss = std::numeric_limits<double>::quiet_NaN();
    double seconds = 0, tokens_per_second = 0, lr = 0;
};

struct fit_result;  // nn/trainer.hpp

/// What happened: one fit() sends run_begin, then per epoch epoch_begin, a step per optimiser
/// step and epoch_end, then run_end; or, when fit() throws (the callback's own exception
/// included), run_aborted as it leaves.
enum class training_event_kind { run_begin, epoch_begin, step, epoch_end, run_end, run_aborted };

/// The argument of a training_callback. Fields a kind does not set keep their last value
/// (NaN or 0 before they are first set); the pointers are valid during the call only.
struct training_event {
    training_event_kind kind = training_event_kind::run_begin;
    std::string_view label{};      ///< trainer_config::label
    index_t epoch = 0;             ///< 1-based; run_begin: the epochs already done (a resumed run)
    index_t epochs = 0;            ///< trainer_config::epochs
    index_t step = 0;              ///< step: steps done in this epoch, 1 … epoch_steps
    index_t epoch_steps = 0;       ///< optimiser steps per epoch
    std::int64_t run_step = 0;     ///< optimiser steps done in the run (a resumed run's included)
    std::int64_t total_steps = 0;  ///< epoch_steps · epochs
    double loss = std::numeric_limits<double>::quiet_NaN();      ///< step: epoch's mean loss so far
    double accuracy = std::numeric_limits<double>::quiet_NaN();  ///< step: epoch's accuracy so far
    double tokens = 0;                                     ///< step: tokens (text; rows otherwise) this epoch so far
    double lr = std::numeric_limits<double>::quiet_NaN();  ///< step: the learning rate it used
    double elapsed = 0;                                    ///< seconds since fit() began (dev evaluation included)
    double epoch_elapsed = 0;                              ///< seconds since the epoch began
    /// Seconds left in the whole run, elapsed·(total_steps − run_step)/(steps done in this
    /// fit()); NaN before the first step, 0 at run_end. Early stopping can end a run sooner.
    double eta = std::numeric_limits<double>::quiet_NaN();
    bool improved = false;                 ///< epoch_end: a better dev score (always, without dev)
    const epoch_record* record = nullptr;  ///< epoch_end: the epoch (as in fit_result::history)
    const fit_result* result = nullptr;    ///< run_end: what fit() returns
};

/// Called on rank 0 only, synchronously, from fit(). An exception it throws stops training:
/// fit() rethrows it (after run_aborted; with N ranks the others throw kattn::error).
using training_callback = std::function<void(const training_event&)>;

namespace detail {

/// "label epoch 2/5: train loss 0.4123 acc 0.8730 | dev acc … macro-F1 … log-loss … * |
/// 1.2 s, 3400 tok/s | ETA 00:00:05" ('*': improved; ETA left out when not > 0).
inline std::string epoch_summary(const training_event& ev) {
    const epoch_record& r = *ev.record;
    char buf[320];
    std::string s(ev.label);
    std::snprintf(buf, sizeof buf, "epoch %ld/%ld: train loss %.4f acc %.4f", long(r.epoch), long(ev.epochs),
                  r.train_loss, r.train_accuracy);
    s += buf;
    if (std::isfinite(r.dev_accuracy)) {
        std::snprintf(buf, sizeof buf, " | dev acc %.4f macro-F1 %.4f log-loss %.4f%s", r.dev_accuracy, r.dev_macro_f1,
                      r.dev_log_loss, ev.improved ? " *" : "");
        s += buf;
    }
    std::snprintf(buf, sizeof buf, " | %.1f s, %.0f tok/s", r.seconds, r.tokens_per_second);
    s += buf;
    if (std::isfinite(ev.eta) && ev.eta > 0) s.append(" | ETA ").append(format_hms(ev.eta));
    return s;
}

/// The run's ETA: elapsed·left/done over the `done` steps of this fit(); NaN before its
/// first step, 0 at run_end.
inline double run_eta(training_event_kind kind, double elapsed, std::int64_t left, std::int64_t done) {
    if (kind == training_event_kind::run_end) return 0.0;
    return done > 0 ? elapsed * double(left) / double(done) : std::numeric_limits<double>::quiet_NaN();
}

/// Sends run_aborted (a copy of *last, ETA NaN) to *callback (if any; its exceptions are
/// swallowed) when the scope it guards is left by an exception.
class abort_notifier {
public:
    abort_notifier(const training_callback* callback, const training_event& last) : callback_(callback), last_(last) {}
    abort_notifier(const abort_notifier&) = delete;
    abort_notifier& operator=(const abort_notifier&) = delete;
    ~abort_notifier() {
        if (!callback_ || !*callback_ || std::uncaught_exceptions() <= count_) return;
        try {
            training_event ev = last_;
            ev.kind = training_event_kind::run_aborted;
            ev.eta = std::numeric_limits<double>::quiet_NaN();
            (*callback_)(ev);
        } catch (...) {}
    }

private:
    const training_callback* callback_;
    const training_event& last_;
    int count_ = std::uncaught_exceptions();
};

}  // namespace detail

/// The trainer's default callback (trainer_config::progress = true, no on_event): on a
/// terminal (or progress_mode::interactive) a progress_bar per epoch ("epoch 2/5", the
/// epoch's running loss, accuracy, tok/s and the run's ETA), replaced at the epoch's end by
/// its summary line (detail::epoch_summary); on any other stream (or progress_mode::plain)
/// the summary line alone: one line per epoch. Copies share one display.
class progress_printer {
public:
    explicit progress_printer(std::ostream& os = std::cerr, progress_mode mode = progress_mode::automatic)
        : state_(std::make_shared<state>(os, mode)) {}

    void operator()(const training_event& ev) const {
        state& st = *state_;
        using k = training_event_kind;
        if (!st.interactive) {
            if (ev.kind == k::epoch_end) st.os << detail::epoch_summary(ev) << '\n' << std::flush;
            return;
        }
        switch (ev.kind) {
            case k::epoch_begin:
                st.bar.reset();
                st.bar.emplace(progress_config{.total = std::max<index_t>(1, ev.epoch_steps),
                                               .label = std::string(ev.label) + "epoch " + std::to_string(ev.epoch) +
                                                        "/" + std::to_string(ev.epochs),
                                               .mode = progress_mode::interactive},
                               st.os);
                break;
            case k::step:
                if (st.bar)
                    st.bar->update(ev.step,
                                   {.loss = ev.loss, .accuracy = ev.accuracy, .tokens = ev.tokens, .eta = ev.eta},
                                   ev.epoch_elapsed);
                break;
            case k::epoch_end:
                if (st.bar) st.bar->clear();
                st.bar.reset();
                st.os << detail::epoch_summary(ev) << '\n' << std::flush;
                break;
            default:
                st.bar.reset();  // ends a drawn line (run_aborted)
        }
    }

private:
    struct state {
        state(std::ostream& o, progress_mode mode)
            : os(o),
              interactive(mode == progress_mode::interactive ||
                          (mode == progress_mode::automatic && detail::terminal_fd(o) >= 0)) {}
        std::ostream& os;
        bool interactive;
        std::optional<progress_bar> bar;
    };
    std::shared_ptr<state> state_;
};

}  // namespace kattn::nn
