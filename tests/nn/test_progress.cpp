// Tests for kattn/nn/progress.hpp: bounded output in plain mode, redraw throttling in
// interactive mode, ETA and rate formatting from injected times, the finish line, errors; a
// given ETA, clear(), and the trainer's per-epoch summary line (detail::epoch_summary).
#include <doctest/doctest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include <kattn/nn/progress.hpp>

using namespace kattn;

namespace {

std::vector<std::string> lines_of(const std::string& s) {
    std::vector<std::string> out;
    std::istringstream is(s);
    for (std::string l; std::getline(is, l);) out.push_back(l);
    return out;
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("nn::progress_bar: plain mode prints a bounded number of lines") {
    std::ostringstream os;
    {
        nn::progress_bar bar(1000, "train", os);  // not a terminal: plain automatically
        CHECK_FALSE(bar.interactive());
        for (int i = 1; i <= 1000; ++i)
            bar.update(i, {.loss = 1.0 / i, .accuracy = 0.5, .tokens = 100.0 * i}, 0.01 * i);
        bar.finish(10.0);
    }
    const std::string out = os.str();
    CHECK_FALSE(has(out, "\r"));
    const auto lines = lines_of(out);
    CHECK(lines.size() == 11u);  // 10 %, 20 %, …, 100 %, then finish
    CHECK(lines.size() <= 12u);
    for (int k = 1; k <= 10; ++k) {
        CHECK(lines[k - 1].rfind("train [", 0) == 0);
        const std::string want = std::string(" ")
                                     .append(std::to_string(10 * k))
                                     .append("% ")
                                     .append(std::to_string(100 * k))
                                     .append("/1000");
        CHECK(has(lines[k - 1], want));
    }
    // 10 %: ETA = 1 s · 900/100 = 9 s; 10k tokens per second
    CHECK(has(lines[0], "ETA 00:00:09"));
    CHECK(has(lines[0], "10.0k tok/s"));
    CHECK(has(lines[0], "[##..................]"));
    CHECK_FALSE(has(lines[9], "ETA"));
    // finish: the final line with the elapsed time
    CHECK(lines[10] ==
          "train [####################] 100% 1000/1000 loss 0.0010 acc 0.500 10.0k tok/s elapsed 00:00:10");
}

TEST_CASE("nn::progress_bar: plain mode with other totals and intervals") {
    std::ostringstream os;
    nn::progress_bar bar({.total = 7, .label = "", .mode = nn::progress_mode::plain, .plain_percent = 25}, os);
    for (int i = 0; i <= 7; ++i) bar.update(i, {}, double(i));
    // crossings of 25 %: 2/7 (28 %), 4/7 (57 %), 6/7 (85 %), 7/7
    const auto lines = lines_of(os.str());
    REQUIRE(lines.size() == 4u);
    CHECK(lines[0] == "[#####...............] 28% 2/7 ETA 00:00:05");
    CHECK(has(lines[3], "100% 7/7"));
    bar.finish(8.0);
    bar.finish(9.0);  // once only
    CHECK(lines_of(os.str()).size() == 5u);
}

TEST_CASE("nn::progress_bar: ETA and tokens/s from known elapsed times") {
    std::ostringstream os;
    nn::progress_bar bar(1000, "e", os, true);
    // 250 of 1000 in 30 s → 90 s left
    CHECK(has(bar.line(250, {}, 30.0), "ETA 00:01:30"));
    CHECK(has(bar.line(1, {}, 3.0), "ETA 00:49:57"));  // 3 s · 999
    CHECK(has(bar.line(1, {}, 3600.0), "ETA 999:00:00"));
    CHECK(has(bar.line(0, {}, 1.0), "ETA --:--:--"));
    CHECK(has(bar.line(450, {.loss = 0.41234, .accuracy = 0.8734, .tokens = 24690}, 2.0),
              "e [#########...........] 45% 450/1000 loss 0.4123 acc 0.873 12.3k tok/s ETA 00:00:02"));
    CHECK(has(bar.line(10, {.extra = {{"lr", 0.0003}}}, 1.0), " lr 0.0003 "));

    CHECK(nn::detail::format_hms(0) == "00:00:00");
    CHECK(nn::detail::format_hms(89.6) == "00:01:30");
    CHECK(nn::detail::format_hms(3600 * 26 + 61) == "26:01:01");
    CHECK(nn::detail::format_hms(-1) == "--:--:--");

    CHECK(nn::detail::format_si(0) == "0.0");
    CHECK(nn::detail::format_si(999.4) == "999.4");
    CHECK(nn::detail::format_si(999.96) == "1.0k");
    CHECK(nn::detail::format_si(12345) == "12.3k");
    CHECK(nn::detail::format_si(2.5e6) == "2.5M");
    CHECK(nn::detail::format_si(7.25e9) == "7.2G");
    CHECK(nn::detail::format_si(3e15) == "3000.0T");
}

TEST_CASE("nn::progress_bar: interactive mode redraws in place at most ~10 times per second") {
    std::ostringstream os;
    nn::progress_bar bar({.total = 1000, .label = "fit", .mode = nn::progress_mode::interactive}, os);
    CHECK(bar.interactive());
    for (int i = 1; i <= 1000; ++i) bar.update(i, {.loss = 0.5}, 0.002 * i);  // 2 s in all
    const std::string out = os.str();
    const auto redraws = std::count(out.begin(), out.end(), '\r');
    CHECK(redraws >= 20);  // every 0.1 s over 2 s, plus the first and the last step
    CHECK(redraws <= 22);
    CHECK(std::count(out.begin(), out.end(), '\n') == 0);
    bar.finish(2.5);
    const std::string all = os.str();
    CHECK(all.back() == '\n');
    const std::string last = all.substr(all.rfind('\r') + 1);
    CHECK(last == "fit [####################] 100% 1000/1000 loss 0.5000 elapsed 00:00:03\n");
}

TEST_CASE("nn::progress_bar: a shorter redraw blanks the rest of the previous line") {
    std::ostringstream os;
    nn::progress_bar bar({.total = 10, .mode = nn::progress_mode::interactive, .bar_width = 0}, os);
    bar.update(1, {.extra = {{"long_metric_name", 1.0}}}, 0.0);
    const std::size_t first = os.str().size() - 1;  // without the '\r'
    bar.update(2, {}, 1.0);
    const std::string second = os.str().substr(first + 1);
    CHECK(second.front() == '\r');
    CHECK(second.size() - 1 == first);  // padded to the old width
    CHECK(second.rfind("ETA 00:00:04") != std::string::npos);
}

TEST_CASE("nn::progress_bar: an interactive line narrows its bar, then is cut, to fit the width") {
    std::ostringstream os;
    nn::progress_bar bar({.total = 100, .label = "fit", .mode = nn::progress_mode::interactive, .columns = 50}, os);
    bar.update(50, {.loss = 0.25}, 10.0);
    // full: "fit [##########..........] 50% 50/100 loss 0.2500 ETA 00:00:10" (62 chars) > 49 → bar 7
    CHECK(os.str() == "\rfit [###....] 50% 50/100 loss 0.2500 ETA 00:00:10");
    bar.update(100, {.loss = 0.25, .extra = {{"a_very_long_metric_name", 1.0}}}, 20.0);
    const std::string out = os.str();
    const std::string last = out.substr(out.rfind('\r') + 1);
    CHECK(last.size() == 49u);
    CHECK(last.rfind("fit 100% 100/100 loss 0.2500 a_very_long_metric", 0) == 0);
}

TEST_CASE("nn::progress_bar: bad arguments throw kattn::error") {
    std::ostringstream os;
    CHECK_THROWS_AS(nn::progress_bar(0, "x", os), kattn::error);
    CHECK_THROWS_AS(nn::progress_bar({.total = 5, .plain_percent = 0}, os), kattn::error);
    nn::progress_bar bar(5, "x", os);
    CHECK_THROWS_WITH_AS(bar.update(6, {}, 1.0), doctest::Contains("'done'"), kattn::error);
    CHECK_THROWS_WITH_AS(bar.update(-1, {}, 1.0), doctest::Contains("'done'"), kattn::error);
    CHECK_THROWS_WITH_AS(bar.update(1, {}, -1.0), doctest::Contains("'elapsed_seconds'"), kattn::error);
    CHECK(os.str().empty());
    // the real clock: elapsed time is non-negative and the line ends up printed
    bar.update(5);
    CHECK(bar.elapsed() >= 0);
    CHECK(has(os.str(), "100% 5/5"));
}

TEST_CASE("nn::progress_bar: a given ETA replaces the bar's own; clear() erases the line") {
    std::ostringstream os;
    nn::progress_bar bar(1000, "e", os, true);
    CHECK(has(bar.line(250, {.eta = 5.0}, 30.0), "ETA 00:00:05"));   // not 30 s · 750/250 = 90 s
    CHECK(has(bar.line(1000, {.eta = 7.0}, 30.0), "ETA 00:00:07"));  // the run goes on after this bar
    CHECK(has(bar.line(1000, {.eta = 7.0}, 30.0, true), "elapsed 00:00:30"));
    CHECK_FALSE(has(bar.line(1000, {.eta = 7.0}, 30.0, true), "ETA"));

    std::ostringstream is;
    {
        nn::progress_bar live({.total = 10, .label = "x", .mode = nn::progress_mode::interactive}, is);
        live.update(3, {}, 1.0);
        const std::size_t width = is.str().size() - 1;
        live.clear();
        CHECK(is.str().substr(width + 1) == "\r" + std::string(width, ' ') + "\r");
        live.finish(2.0);  // after clear(): nothing
        CHECK(is.str().size() == 2 * width + 3);
    }
    CHECK(is.str().find('\n') == std::string::npos);  // nor from the destructor
    std::ostringstream ps;
    nn::progress_bar plain(10, "p", ps, true);
    plain.clear();
    CHECK(ps.str().empty());
}

TEST_CASE("nn::detail::epoch_summary: the per-epoch line") {
    nn::epoch_record r{.epoch = 2,
                       .train_loss = 0.41234,
                       .train_accuracy = 0.8734,
                       .seconds = 1.26,
                       .tokens_per_second = 3400.4,
                       .lr = 1e-3};
    nn::training_event ev{.kind = nn::training_event_kind::epoch_end, .label = "fska s1 ", .epochs = 5, .eta = 65};
    ev.record = &r;
    CHECK(nn::detail::epoch_summary(ev) ==
          "fska s1 epoch 2/5: train loss 0.4123 acc 0.8734 | 1.3 s, 3400 tok/s | ETA 00:01:05");
    r.dev_accuracy = 0.5, r.dev_macro_f1 = 0.25, r.dev_log_loss = 0.75;
    ev.improved = true;
    ev.eta = 0;
    CHECK(nn::detail::epoch_summary(ev) ==
          "fska s1 epoch 2/5: train loss 0.4123 acc 0.8734 | dev acc 0.5000 macro-F1 "
          "0.2500 log-loss 0.7500 * | 1.3 s, 3400 tok/s");
    ev.improved = false;
    CHECK_FALSE(has(nn::detail::epoch_summary(ev), "*"));
}
