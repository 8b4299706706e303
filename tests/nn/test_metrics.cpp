// Tests for kattn/nn/metrics.hpp: hand-computed values of every metric, the perfect and
// uniform closed forms, scikit-learn's macro-F1 conventions, ECE binning against a naive
// implementation, and input errors.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <span>
#include <vector>

#include <kattn/core/random.hpp>
#include <kattn/nn/metrics.hpp>

using namespace kattn;

namespace {

std::span<const double> sp(const std::vector<double>& v) { return {v.data(), v.size()}; }

// 6 items, 3 classes. argmax: [0, 1, 1, 1, 2, 0] against labels [0, 0, 1, 1, 2, 2].
const std::vector<double> p6 = {0.7,  0.2, 0.1,  0.3, 0.6, 0.1, 0.1, 0.8, 0.1,
                                0.25, 0.5, 0.25, 0.2, 0.2, 0.6, 0.5, 0.1, 0.4};
const std::vector<int> y6 = {0, 0, 1, 1, 2, 2};

}  // namespace

TEST_CASE("nn::metrics: hand-computed 3-class case") {
    const auto m = nn::evaluate_metrics(sp(p6), 3, y6);
    // accuracy: items 0, 2, 3, 4 correct → 4/6
    CHECK(m.accuracy == doctest::Approx(4.0 / 6.0).epsilon(1e-15));
    // class 0: tp 1, fp 1 (item 5), fn 1 (item 1) → 2/4; class 1: tp 2, fp 1, fn 0 → 4/5;
    // class 2: tp 1, fp 0, fn 1 → 2/3; macro = (0.5 + 0.8 + 2/3)/3
    CHECK(m.macro_f1 == doctest::Approx((0.5 + 0.8 + 2.0 / 3.0) / 3.0).epsilon(1e-14));
    // log-loss: −(ln .7 + ln .3 + ln .8 + ln .5 + ln .6 + ln .4)/6
    const double ll =
        -(std::log(0.7) + std::log(0.3) + std::log(0.8) + std::log(0.5) + std::log(0.6) + std::log(0.4)) / 6.0;
    CHECK(m.log_loss == doctest::Approx(ll).epsilon(1e-14));
    // Brier per item: .14, .86, .06, .375, .24, .62 → 2.295/6
    CHECK(m.brier == doctest::Approx(2.295 / 6.0).epsilon(1e-14));
    // ECE: confidences .7 .6 .8 .5 .6 .5; bins (k/15, (k+1)/15]: .5 → 7 (acc .5, conf .5),
    // .6 → 8 (exact edge 9/15; acc .5, conf .6), .7 → 10 (acc 1), .8 → 11 (acc 1):
    // (2·0 + 2·0.1 + 0.3 + 0.2)/6 = 0.7/6
    CHECK(m.ece == doctest::Approx(0.7 / 6.0).epsilon(1e-13));

    // the single-metric functions agree with evaluate_metrics
    CHECK(nn::accuracy(sp(p6), 3, y6) == m.accuracy);
    CHECK(nn::macro_f1(sp(p6), 3, y6) == m.macro_f1);
    CHECK(nn::log_loss(sp(p6), 3, y6) == m.log_loss);
    CHECK(nn::brier(sp(p6), 3, y6) == m.brier);
    CHECK(nn::ece(sp(p6), 3, y6) == m.ece);

    // confusion matrix: rows true, columns predicted
    const auto cm = nn::confusion_matrix(sp(p6), 3, y6);
    const index_t want[3][3] = {{1, 1, 0}, {0, 2, 0}, {1, 0, 1}};
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) CHECK(cm(i, j) == want[i][j]);
    CHECK(nn::predictions(sp(p6), 3) == std::vector<int>{0, 1, 1, 1, 2, 0});
}

TEST_CASE("nn::metrics: tensor<float> overloads agree with the double span") {
    nn::tensor<float> t = nn::tensor<float>::from_shape({6, 3});
    for (std::size_t i = 0; i < p6.size(); ++i) t.data()[i] = float(p6[i]);
    const auto a = nn::evaluate_metrics(t, y6);
    const auto b = nn::evaluate_metrics(sp(p6), 3, y6);
    CHECK(a.accuracy == b.accuracy);
    CHECK(a.macro_f1 == b.macro_f1);
    CHECK(a.log_loss == doctest::Approx(b.log_loss).epsilon(1e-6));
    CHECK(a.brier == doctest::Approx(b.brier).epsilon(1e-6));
    CHECK(a.ece == doctest::Approx(b.ece).epsilon(1e-6));
    CHECK(nn::accuracy(t, y6) == a.accuracy);
    CHECK(nn::confusion_matrix(t, y6) == nn::confusion_matrix(sp(p6), 3, y6));
    CHECK(nn::predictions(t) == nn::predictions(sp(p6), 3));
}

TEST_CASE("nn::metrics: perfect confident predictions and uniform predictions") {
    const int n = 40, C = 5;
    std::vector<int> y(n);
    std::vector<double> onehot(n * C, 0.0), uniform(n * C, 1.0 / C);
    for (int i = 0; i < n; ++i) {
        y[i] = (i * 7) % C;
        onehot[i * C + y[i]] = 1.0;
    }
    const auto p = nn::evaluate_metrics(sp(onehot), C, y);
    CHECK(p.accuracy == 1.0);
    CHECK(p.macro_f1 == 1.0);
    CHECK(p.ece == 0.0);
    CHECK(p.brier == 0.0);
    CHECK(p.log_loss == 0.0);

    const auto u = nn::evaluate_metrics(sp(uniform), C, y);
    CHECK(u.log_loss == doctest::Approx(std::log(double(C))).epsilon(1e-14));
    CHECK(u.brier == doctest::Approx(1.0 - 1.0 / C).epsilon(1e-14));
    // ties → class 0 predicted everywhere; accuracy = share of class 0; ECE = |acc − 1/C|
    CHECK(u.accuracy == doctest::Approx(8.0 / 40.0));
    CHECK(u.ece == doctest::Approx(std::abs(0.2 - 0.2)).epsilon(1e-14));
}

TEST_CASE("nn::metrics: macro-F1 follows scikit-learn (labels=None, zero_division=0)") {
    // 3 columns, only classes 0 and 1 occur, perfect predictions: class 2 is left out → 1
    const std::vector<double> p = {0.9, 0.1, 0.0, 0.2, 0.7, 0.1};
    CHECK(nn::macro_f1(sp(p), 3, std::vector<int>{0, 1}) == 1.0);
    // y = [0, 1], ŷ = [0, 2]: class 0 F1 1; class 1 (true, never predicted) 0; class 2
    // (predicted, never true) 0 → 1/3   (sklearn: f1_score([0,1],[0,2],average='macro'))
    const std::vector<double> q = {0.9, 0.1, 0.0, 0.2, 0.1, 0.7};
    CHECK(nn::macro_f1(sp(q), 3, std::vector<int>{0, 1}) == doctest::Approx(1.0 / 3.0).epsilon(1e-15));
}

TEST_CASE("nn::metrics: log-loss clips p to 1e-15") {
    const std::vector<double> p = {0.0, 1.0, 1.0, 0.0};
    CHECK(nn::log_loss(sp(p), 2, std::vector<int>{0, 0}) == doctest::Approx(-std::log(1e-15) / 2.0).epsilon(1e-14));
    // Brier of the confidently wrong item: (0−1)² + 1² = 2 → mean 1
    CHECK(nn::brier(sp(p), 2, std::vector<int>{0, 0}) == 1.0);
}

TEST_CASE("nn::metrics: ECE agrees with a naive binned implementation, including bin edges") {
    const int n = 3000, C = 4;
    const random_stream rs(11, streams::user + 5);
    std::vector<double> p(n * C);
    std::vector<int> y(n);
    for (int i = 0; i < n; ++i) {
        double s = 0;
        for (int c = 0; c < C; ++c) s += p[i * C + c] = std::exp(3.0 * rs.normal(i * C + c));
        for (int c = 0; c < C; ++c) p[i * C + c] /= s;
        y[i] = int(rs.uniform(n * C + i) * C);
        if (i % 10 == 0) {  // confidences exactly on bin edges k/15 (k ≥ 4 so that it is the max)
            const double e = double(4 + i % 11) / 15.0;
            p[i * C + 0] = e;
            for (int c = 1; c < C; ++c) p[i * C + c] = (1 - e) / (C - 1);
        }
    }
    double naive = 0;
    for (int k = 0; k < 15; ++k) {
        const double lo = k / 15.0, hi = (k + 1) / 15.0;
        double cnt = 0, acc = 0, conf = 0;
        for (int i = 0; i < n; ++i) {
            int arg = 0;
            for (int c = 1; c < C; ++c)
                if (p[i * C + c] > p[i * C + arg]) arg = c;
            const double s = p[i * C + arg];
            if ((s > lo || (k == 0 && s >= 0)) && s <= hi) cnt += 1, acc += (arg == y[i]), conf += s;
        }
        if (cnt > 0) naive += cnt / n * std::abs(acc / cnt - conf / cnt);
    }
    CHECK(nn::ece(sp(p), C, y) == doctest::Approx(naive).epsilon(1e-12));
    // bin assignment at the edges: k/15 belongs to bin k−1
    for (int k = 1; k <= 15; ++k) CHECK(nn::detail::ece_bin(double(k) / 15.0) == k - 1);
    CHECK(nn::detail::ece_bin(0.0) == 0);
    CHECK(nn::detail::ece_bin(std::nextafter(1.0 / 15.0, 1.0)) == 1);
    CHECK(nn::detail::ece_bin(1.0 + 1e-7) == 14);
}

TEST_CASE("nn::metrics: bad inputs throw kattn::error naming the argument") {
    const std::vector<int> y2 = {0, 1};
    CHECK_THROWS_WITH_AS(nn::accuracy(sp(std::vector<double>(5, 0.2)), 3, y2), doctest::Contains("'probs'"),
                         kattn::error);
    CHECK_THROWS_WITH_AS(nn::evaluate_metrics(sp(std::vector<double>(6, 0.2)), 3, std::vector<int>{0, 3}),
                         doctest::Contains("'labels'"), kattn::error);
    CHECK_THROWS_WITH_AS(nn::evaluate_metrics(sp(std::vector<double>(6, 0.2)), 3, std::vector<int>{-1, 0}),
                         doctest::Contains("'labels'"), kattn::error);
    CHECK_THROWS_AS(nn::accuracy(sp(std::vector<double>{}), 3, std::vector<int>{}), kattn::error);
    std::vector<double> bad(6, 0.2);
    bad[4] = std::numeric_limits<double>::quiet_NaN();
    CHECK_THROWS_WITH_AS(nn::log_loss(sp(bad), 3, y2), doctest::Contains("item 1, class 1"), kattn::error);
    bad[4] = -0.1;
    CHECK_THROWS_WITH_AS(nn::brier(sp(bad), 3, y2), doctest::Contains("'probs'"), kattn::error);
    bad[4] = std::numeric_limits<double>::infinity();
    CHECK_THROWS_AS(nn::confusion_matrix(sp(bad), 3, y2), kattn::error);
}
