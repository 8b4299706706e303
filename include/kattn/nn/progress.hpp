// kattn/nn/progress.hpp — a progress display for training and evaluation loops.
//
//   progress_bar bar(total, "epoch 3");   // writes to std::cerr
//   for (...) bar.update(step, {.loss = l, .accuracy = a, .tokens = tokens_so_far});
//   bar.finish();
// draws "epoch 3 [####......] 45% 450/1000 loss 0.4123 acc 0.873 12.3k tok/s ETA 00:01:23",
// ETA = t·(total − done)/done. On a terminal one line is redrawn in place (about 10 Hz);
// on other streams a plain line every plain_percent % (progress_config). Not thread-safe.
// Modes, formats and errors: docs/encoder.md §2 (Progress bar).
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>
#include <ostream>
#include <string>
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

}  // namespace kattn::nn
