// kattn/nn/data/listops.hpp — ListOps, generated the way Long Range Arena builds it.
//
//   make_listops(listops_options) → listops_splits {train, dev, test, attempts}
//   listops_value(tokens)         → the value 0 … 9 of one expression (its class)
//   listops_text(tokens)          → "[MAX 2 9 [MIN 4 7 ] 0 ]"
//
// ListOps (Nangia & Bowman, 2018) is the Long Range Arena task (Tay et al., ICLR 2021) that
// needs hierarchical structure over long inputs: each item is a nested expression over the
// digits 0 … 9 with four list operators, and the label is its value:
//   [MIN a b … ]  the smallest argument        [MAX a b … ]  the largest
//   [MED a b … ]  the median, truncated to an integer (the mean of the two middle arguments
//                 when their number is even, rounded down)
//   [SM  a b … ]  the sum modulo 10
// Construction (LRA's generator, with its defaults in listops_options): a tree node at depth
// < max_depth (the root has depth 1) is, with probability 3/4, a digit drawn uniformly; else
// an operator drawn uniformly with a uniform number of arguments in [2, max_args], each a
// tree one level deeper; a node at depth max_depth is a digit. Its length is its token count
// (digits, operators and closing brackets; no parentheses: LRA's tokenizer drops them). Trees
// are drawn until there are num_train + num_dev + num_test distinct ones with min_length <
// length < max_length (both strict, as LRA); the first num_train accepted (in draw order) are
// the training set, the next num_dev the dev set, the rest the test set, so no expression is
// in two splits.
// Random numbers: attempt a draws its numbers from random_stream(seed, streams::data) at
// indices a·2^14 + 0, 1, 2, …; a tree is abandoned (rejected) as soon as it reaches
// max_length tokens, so an attempt needs fewer than 3·max_length numbers (max_length <=
// 5,000 is required). Settings under which fewer than one attempt in 1,000 is accepted
// (lengths that max_depth and max_args rarely reach) end in a kattn::error for min_length. Attempts run in parallel in blocks and are accepted in attempt order:
// the splits are the same for a given seed on every thread count.
// Tokens: id = digit + 1 for 0 … 9, then [MIN 11, [MAX 12, [MED 13, [SM 14, ] 15; 0 is the
// padding id of nn::dataset (listops_vocab_size = 16 ids in all). Classes: the value 0 … 9.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "../../core/config.hpp"
#include "../../core/error.hpp"
#include "../../core/random.hpp"
#include "../detail/namespace.hpp"
#include "dataset.hpp"

namespace kattn::nn {

inline constexpr index_t listops_vocab_size = 16;  ///< ids 0 (padding) … 15
inline constexpr index_t listops_classes = 10;     ///< values 0 … 9

/// LRA's settings by default.
struct listops_options {
    index_t num_train = 96000, num_dev = 2000, num_test = 2000;
    index_t min_length = 500;   ///< lengths must exceed this …
    index_t max_length = 2000;  ///< … and stay below this (both strict)
    int max_depth = 10;         ///< the root has depth 1; nodes at max_depth are digits
    int max_args = 10;          ///< operators take 2 … max_args arguments
    std::uint64_t seed = 0;
};

struct listops_splits {
    dataset train, dev, test;
    std::uint64_t attempts = 0;  ///< trees drawn (accepted, rejected and duplicates)
};

namespace detail {

inline constexpr std::int32_t listops_min = 11, listops_max = 12, listops_med = 13, listops_sm = 14, listops_end = 15;

/// The value of operator `op` (ids 11-14) on `args` (sorted in place; at least one).
inline int listops_apply(std::int32_t op, std::span<int> args) {
    std::sort(args.begin(), args.end());
    const std::size_t n = args.size();
    switch (op) {
        case listops_min:
            return args.front();
        case listops_max:
            return args.back();
        case listops_med:
            return n % 2 ? args[n / 2] : (args[n / 2 - 1] + args[n / 2]) / 2;
        default: {
            int s = 0;
            for (int a : args) s += a;
            return s % 10;
        }
    }
}

/// One attempt of the generator: its tokens and value, or an empty `tokens` when the tree
/// reached options.max_length tokens (abandoned) or came out too short.
struct listops_tree {
    std::vector<std::int32_t> tokens;
    int value = 0;
};

class listops_drawer {
public:
    listops_drawer(const listops_options& o, std::uint64_t attempt)
        : o_(o), rs_(o.seed, kattn::streams::data), next_(attempt << 14) {}

    listops_tree draw() {
        listops_tree t;
        t.tokens.reserve(std::size_t(o_.max_length));
        int value = 0;
        if (!node(1, t.tokens, value) || index_t(t.tokens.size()) <= o_.min_length) t.tokens.clear();
        t.value = value;
        return t;
    }

private:
    double uniform() { return rs_.uniform(next_++); }
    int uniform_int(int lo, int hi) { return lo + std::min(hi - lo, int(uniform() * double(hi - lo + 1))); }

    bool node(int depth, std::vector<std::int32_t>& out, int& value) {
        if (index_t(out.size()) >= o_.max_length) return false;
        const double r = depth < o_.max_depth ? uniform() : 1.0;
        if (r > 0.25) {
            value = uniform_int(0, 9);
            out.push_back(std::int32_t(value + 1));
            return true;
        }
        const int n = uniform_int(2, o_.max_args);
        const std::size_t op_at = out.size();
        out.push_back(0);  // the operator, drawn after its arguments as in LRA's generator
        std::array<int, 64> args{};
        for (int k = 0; k < n; ++k)
            if (!node(depth + 1, out, args[std::size_t(k)])) return false;
        const int op = uniform_int(0, 3);
        out[op_at] = listops_min + op;
        if (index_t(out.size()) >= o_.max_length) return false;
        out.push_back(listops_end);
        value = listops_apply(listops_min + op, std::span<int>(args.data(), std::size_t(n)));
        return true;
    }

    const listops_options& o_;
    kattn::random_stream rs_;
    std::uint64_t next_;
};

struct listops_sequence_hash {
    std::size_t operator()(const std::vector<std::int32_t>& v) const noexcept {
        std::uint64_t h = 1469598103934665603ull;  // FNV-1a over the ids
        for (std::int32_t x : v) h = (h ^ std::uint64_t(std::uint32_t(x))) * 1099511628211ull;
        return std::size_t(h);
    }
};

}  // namespace detail

/// The value (class) of one ListOps expression given as token ids (see the header comment);
/// a kattn::error for argument 'tokens' when it is not exactly one well-formed expression.
/// Iterative (an explicit stack), so any nesting depth is safe.
inline int listops_value(std::span<const std::int32_t> tokens) {
    struct open_list {
        std::int32_t op;
        std::vector<int> args;
    };
    std::vector<open_list> stack;
    int result = 0;
    bool done = false;
    for (std::size_t pos = 0; pos < tokens.size(); ++pos) {
        detail::require(!done, "tokens", "exactly one expression",
                        std::to_string(tokens.size() - pos) + " token(s) after the first expression");
        const std::int32_t tok = tokens[pos];
        int value = 0;
        if (tok >= 1 && tok <= 10) {
            value = tok - 1;
        } else if (tok >= detail::listops_min && tok <= detail::listops_sm) {
            stack.push_back({tok, {}});
            continue;
        } else if (tok == detail::listops_end) {
            detail::require(!stack.empty(), "tokens", "a ']' (id 15) only after an operator",
                            "a ']' at position " + std::to_string(pos) + " with no list open");
            open_list l = std::move(stack.back());
            stack.pop_back();
            detail::require(!l.args.empty(), "tokens", "operators with at least one argument",
                            "an empty list closed at position " + std::to_string(pos));
            value = detail::listops_apply(l.op, l.args);
        } else {
            detail::fail("tokens", "ids 1-15 (digits, operators, ']')",
                         "id " + std::to_string(tok) + " at position " + std::to_string(pos));
        }
        if (stack.empty())
            result = value, done = true;
        else
            stack.back().args.push_back(value);
    }
    detail::require(done, "tokens", "a complete ListOps expression (every operator closed by ']')",
                    "a sequence that ends early");
    return result;
}

/// The expression as text, tokens separated by spaces ("[MAX 2 9 [MIN 4 7 ] 0 ]").
inline std::string listops_text(std::span<const std::int32_t> tokens) {
    static constexpr std::array<std::string_view, 16> names = {"<pad>", "0", "1", "2",    "3",    "4",    "5",   "6",
                                                               "7",     "8", "9", "[MIN", "[MAX", "[MED", "[SM", "]"};
    std::string s;
    for (std::int32_t t : tokens) {
        detail::require(t >= 0 && t < 16, "tokens", "ids 0 … 15", t);
        if (!s.empty()) s += ' ';
        s += names[std::size_t(t)];
    }
    return s;
}

/// Generates the three splits (see the header comment).
inline listops_splits make_listops(const listops_options& o) {
    using detail::require;
    require(o.num_train >= 0 && o.num_dev >= 0 && o.num_test >= 0, "num_train", "non-negative split sizes",
            std::to_string(o.num_train) + "/" + std::to_string(o.num_dev) + "/" + std::to_string(o.num_test));
    require(o.max_depth >= 2 && o.max_depth <= 64, "max_depth", "2 … 64", o.max_depth);
    require(o.max_args >= 2 && o.max_args <= 64, "max_args", "2 … 64", o.max_args);
    require(o.max_length >= 3 && o.max_length <= 5000, "max_length", "3 … 5000", o.max_length);
    require(o.min_length >= 0 && o.min_length + 1 < o.max_length, "min_length",
            "0 <= min_length < max_length - 1 (lengths are strictly between)", o.min_length);
    const index_t total = o.num_train + o.num_dev + o.num_test;
    listops_splits s;
    dataset* parts[3] = {&s.train, &s.dev, &s.test};
    const char* names[3] = {"listops train", "listops dev", "listops test"};
    for (int k = 0; k < 3; ++k) {
        parts[k]->name = names[k];
        parts[k]->kind = input_kind::tokens;
        parts[k]->num_classes = listops_classes;
        parts[k]->max_length = o.max_length;
    }
    const index_t sizes[3] = {o.num_train, o.num_dev, o.num_test};
    std::unordered_set<std::vector<std::int32_t>, detail::listops_sequence_hash> seen;
    index_t accepted = 0;
    // Accepted lengths are rare events when min_length is large: a block of attempts is drawn
    // in parallel, then taken in order. The cap (1,000 attempts per tree, at least 2^20; LRA's
    // settings need about 12) turns a hopeless setting (lengths that max_depth and max_args
    // rarely or never reach) into an error instead of an endless loop.
    constexpr std::uint64_t block = 1 << 14;
    const std::uint64_t max_attempts = std::max<std::uint64_t>(std::uint64_t(1) << 20, 1000 * std::uint64_t(total));
    std::vector<detail::listops_tree> trees(block);
    std::uint64_t a0 = 0;
    while (accepted < total) {
        require(a0 < max_attempts, "min_length",
                "lengths the generator reaches (" + std::to_string(accepted) + " of " + std::to_string(total) +
                    " trees after " + std::to_string(a0) + " attempts)",
                o.min_length);
#pragma omp parallel for schedule(dynamic, 256)
        for (std::int64_t i = 0; i < std::int64_t(block); ++i)
            trees[std::size_t(i)] = detail::listops_drawer(o, a0 + std::uint64_t(i)).draw();
        for (std::uint64_t i = 0; i < block && accepted < total; ++i) {
            s.attempts = a0 + i + 1;
            auto& t = trees[std::size_t(i)];
            if (t.tokens.empty() || !seen.insert(t.tokens).second) continue;
            const int split = accepted < sizes[0] ? 0 : accepted < sizes[0] + sizes[1] ? 1 : 2;
            parts[split]->texts.push_back(std::move(t.tokens));
            parts[split]->labels.push_back(t.value);
            ++accepted;
        }
        a0 += block;
    }
    return s;
}

}  // namespace kattn::nn
