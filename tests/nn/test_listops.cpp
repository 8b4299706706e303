// Tests for kattn/nn/data/listops.hpp: listops_value on hand-computed expressions (MED of an
// even count, SM's modulo, nesting) and its errors; make_listops against an independent
// structural parser (lengths strictly inside the bounds, nesting depth and argument counts
// within the options, every label the value the evaluator computes), no expression twice
// across the splits, the same splits for a seed on 1 and 2 threads and other splits for
// another seed, and the generator's distributions (operators 1/4 each, arguments uniform in
// [2, max_args], digits uniform) on some 10^5 tokens.
#include <doctest/doctest.h>

#include "error_text.hpp"

#include <omp.h>

#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <kattn/nn/data/listops.hpp>

using namespace kattn;
using kt::contains;
using kt::error_text;

namespace {

/// Ids from text: "[MAX 2 9 ]" → {12, 3, 10, 15}.
std::vector<std::int32_t> ids(const std::string& text) {
    const std::map<std::string, std::int32_t> m = {{"[MIN", 11}, {"[MAX", 12}, {"[MED", 13}, {"[SM", 14}, {"]", 15}};
    std::vector<std::int32_t> out;
    std::size_t i = 0;
    while (i < text.size()) {
        const std::size_t j = std::min(text.find(' ', i), text.size());
        const std::string w = text.substr(i, j - i);
        out.push_back(m.count(w) ? m.at(w) : std::int32_t(std::stoi(w) + 1));
        i = j + 1;
    }
    return out;
}

/// Structure of one well-formed sequence, parsed without the library: the deepest nesting
/// (the root has depth 1), the argument count of every operator, the operators and digits.
struct shape_stats {
    int depth = 0;
    std::vector<int> arg_counts;
    std::map<std::int32_t, long> ops, digits;
};

shape_stats parse(const std::vector<std::int32_t>& t) {
    shape_stats s;
    std::vector<int> open;  // argument counts of the operators not yet closed
    for (std::int32_t x : t) {
        if (x == 15) {
            REQUIRE(!open.empty());
            s.arg_counts.push_back(open.back());
            open.pop_back();
            continue;
        }
        if (!open.empty()) ++open.back();
        s.depth = std::max(s.depth, int(open.size()) + 1);
        if (x >= 11) {
            ++s.ops[x];
            open.push_back(0);
        } else {
            ++s.digits[x - 1];
        }
    }
    REQUIRE(open.empty());
    return s;
}

}  // namespace

TEST_CASE("listops_value: hand-computed expressions and malformed input") {
    CHECK(nn::listops_value(ids("7")) == 7);
    CHECK(nn::listops_value(ids("[MIN 4 2 9 ]")) == 2);
    CHECK(nn::listops_value(ids("[MAX 4 2 9 ]")) == 9);
    CHECK(nn::listops_value(ids("[MED 4 2 9 ]")) == 4);
    CHECK(nn::listops_value(ids("[MED 1 2 3 4 ]")) == 2);  // (2 + 3) / 2 rounded down
    CHECK(nn::listops_value(ids("[MED 3 4 ]")) == 3);
    CHECK(nn::listops_value(ids("[MED 9 8 ]")) == 8);
    CHECK(nn::listops_value(ids("[SM 9 9 7 ]")) == 5);
    CHECK(nn::listops_value(ids("[MAX 2 9 [MIN 4 7 ] 0 ]")) == 9);
    CHECK(nn::listops_value(ids("[SM [MED 1 8 ] [MAX 2 [MIN 5 6 ] ] 3 ]")) == 2);  // 4 + 5 + 3 = 12
    CHECK(nn::listops_text(ids("[MAX 2 9 [MIN 4 7 ] 0 ]")) == "[MAX 2 9 [MIN 4 7 ] 0 ]");

    auto err = [](const std::vector<std::int32_t>& t) { return error_text([&] { nn::listops_value(t); }); };
    CHECK(contains(err(ids("[MAX 2 9")), "argument 'tokens'"));
    CHECK(contains(err(ids("[MAX 2 9 ] 3")), "after the first expression"));
    CHECK(contains(err(ids("[SM ]")), "at least one argument"));
    CHECK(contains(err({}), "ends early"));
    CHECK(contains(err({3, 0}), "after the first expression"));
    CHECK(contains(err({12, 16, 15}), "id 16"));
    CHECK(contains(err({15}), "no list open"));
    // Nesting of any depth (no recursion): [MAX [MAX … [MAX 7 ] … ] ], 100,000 deep.
    std::vector<std::int32_t> deep(100000, 12);
    deep.push_back(8);
    deep.insert(deep.end(), 100000, 15);
    CHECK(nn::listops_value(deep) == 7);
    CHECK(contains(err(std::vector<std::int32_t>(5000, 11)), "ends early"));
}

TEST_CASE("make_listops: bounds, structure, labels, no duplicates, reproducible") {
    nn::listops_options o;
    o.num_train = 60;
    o.num_dev = 20;
    o.num_test = 20;
    o.min_length = 100;
    o.max_length = 400;
    o.max_depth = 6;
    o.max_args = 5;
    o.seed = 11;
    const auto s = nn::make_listops(o);
    CHECK(s.train.size() == 60);
    CHECK(s.dev.size() == 20);
    CHECK(s.test.size() == 20);
    CHECK(s.attempts >= 100);
    std::set<std::vector<std::int32_t>> all;
    for (const nn::dataset* d : {&s.train, &s.dev, &s.test}) {
        CHECK(d->num_classes == 10);
        CHECK(d->max_length == 400);
        for (index_t i = 0; i < d->size(); ++i) {
            const auto& t = d->texts[std::size_t(i)];
            CHECK(index_t(t.size()) > 100);
            CHECK(index_t(t.size()) < 400);
            const shape_stats st = parse(t);
            CHECK(st.depth <= 6);
            for (int n : st.arg_counts) {
                CHECK(n >= 2);
                CHECK(n <= 5);
            }
            CHECK(d->labels[std::size_t(i)] == nn::listops_value(t));
            all.insert(t);
        }
    }
    CHECK(all.size() == 100);  // no expression twice, within or across splits

    // Same seed: the same splits on 1 and on 2 threads; another seed: others.
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    const auto one = nn::make_listops(o);
    omp_set_num_threads(2);
    const auto two = nn::make_listops(o);
    omp_set_num_threads(threads);
    CHECK(one.train.texts == s.train.texts);
    CHECK(two.train.texts == s.train.texts);
    CHECK(two.test.labels == s.test.labels);
    CHECK(two.attempts == s.attempts);
    o.seed = 12;
    CHECK(nn::make_listops(o).train.texts != s.train.texts);

    o.seed = 11;
    o.min_length = 399;  // no length strictly between 399 and 400
    CHECK(contains(error_text([&] { nn::make_listops(o); }), "argument 'min_length'"));
    o.min_length = 100;
    o.max_depth = 2;  // trees of depth 2 have at most 12 tokens: none reaches 100
    CHECK(contains(error_text([&] { nn::make_listops(o); }), "attempts"));
    o.max_depth = 1;
    CHECK(contains(error_text([&] { nn::make_listops(o); }), "argument 'max_depth'"));
    o.max_depth = 6;
    o.max_length = 6000;
    CHECK(contains(error_text([&] { nn::make_listops(o); }), "argument 'max_length'"));
}

TEST_CASE("make_listops: LRA's distributions (operators, argument counts, digits)") {
    nn::listops_options o;  // LRA's depth and argument bounds, shorter lengths
    o.num_train = 200;
    o.num_dev = o.num_test = 0;
    o.min_length = 300;
    o.max_length = 800;
    const auto s = nn::make_listops(o);
    shape_stats all;
    long args = 0, tokens = 0;
    std::map<int, long> arg_hist;
    for (const auto& t : s.train.texts) {
        const shape_stats st = parse(t);
        for (auto [k, v] : st.ops) all.ops[k] += v;
        for (auto [k, v] : st.digits) all.digits[k] += v;
        for (int n : st.arg_counts) ++arg_hist[n], args += n;
        all.arg_counts.insert(all.arg_counts.end(), st.arg_counts.begin(), st.arg_counts.end());
        tokens += long(t.size());
    }
    const double nops = double(all.arg_counts.size());
    REQUIRE(tokens > 100000);
    CAPTURE(nops);
    for (std::int32_t op = 11; op <= 14; ++op) CHECK(std::abs(double(all.ops[op]) / nops - 0.25) < 0.02);
    // Arguments uniform in [2, 10]: mean 6; each count about 1/9 (conditioning on the
    // accepted lengths shifts them a little).
    CHECK(std::abs(double(args) / nops - 6.0) < 0.3);
    for (int n = 2; n <= 10; ++n) CHECK(std::abs(double(arg_hist[n]) / nops - 1.0 / 9) < 0.02);
    CHECK(arg_hist.size() == 9);
    long digits = 0;
    for (auto [k, v] : all.digits) digits += v;
    for (int dgt = 0; dgt < 10; ++dgt) CHECK(std::abs(double(all.digits[dgt]) / double(digits) - 0.1) < 0.01);
}
