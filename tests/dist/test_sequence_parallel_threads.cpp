// kattn::dist::sequence_parallel over ranks simulated by threads (tests/nn/thread_ranks.hpp),
// in the unit suite: no MPI needed, and the sanitizer build of .ci/run checks the split
// operator too. Three ranks with unequal slices against the single-process operator in
// double — plain, causal, causal with global key lengths, and packed documents (causal and
// not) — for a stabilised map (favor), a signed one (trig) and elu; then a bad argument on
// one rank, which must raise a kattn::error on every rank instead of leaving them waiting.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include <kattn/dist/sequence_parallel.hpp>

#include "../nn/thread_ranks.hpp"
#include "../support.hpp"

namespace {

using kattn::index_t;
using tensor = xt::xtensor<double, 4>;

tensor rows(const tensor& x, index_t off, index_t len) {
    const std::size_t H = x.shape()[1], L = x.shape()[2], w = x.shape()[3];
    tensor r = tensor::from_shape({1, H, std::size_t(len), w});
    for (std::size_t h = 0; h < H; ++h)
        std::copy_n(x.data() + (h * L + std::size_t(off)) * w, std::size_t(len) * w,
                    r.data() + h * std::size_t(len) * w);
    return r;
}

double rel(const tensor& a, const tensor& b) {
    double num = 0, den = 0;
    for (std::size_t i = 0; i < b.size(); ++i) {
        num = std::max(num, std::abs(a.data()[i] - b.data()[i]));
        den = std::max(den, std::abs(b.data()[i]));
    }
    return a.size() == b.size() ? num / (den + 1e-300) : 1e300;
}

template <class Map, class Sampler>
void check_map() {
    kattn::attention_config<Map, Sampler> cfg;
    cfg.head_dim = 5;
    cfg.value_dim = 4;
    cfg.num_features = 10;
    cfg.seed = 3;
    using op_t = kattn::linear_attention<Map, Sampler, kattn::backends::simd, double>;
    const op_t op(cfg);
    const std::vector<index_t> lens{17, 4, 30};
    const index_t L = 51;
    const auto q = kt::randn<double, 4>({1, 2, std::size_t(L), 5}, 11, 0.7),
               k = kt::randn<double, 4>({1, 2, std::size_t(L), 5}, 12, 0.7),
               v = kt::randn<double, 4>({1, 2, std::size_t(L), 4}, 13),
               g = kt::randn<double, 4>({1, 2, std::size_t(L), 4}, 14);
    const std::vector<index_t> kl{40};                // global: the last slice's keys partly padding
    const std::vector<index_t> cu{0, 3, 19, 21, 51};  // a document across all three ranks' splits
    // Single-process results of every mode: [mode] → out, dq.
    std::vector<tensor> want_out, want_dq;
    const auto add = [&](const tensor& o, const tensor& dq) {
        want_out.push_back(o);
        want_dq.push_back(dq);
    };
    add(op(q, k, v), op.backward(q, k, v, g).dq);
    add(op(q, k, v, kattn::causal), op.backward(q, k, v, g, kattn::causal).dq);
    add(op(q, k, v, kattn::causal, kattn::key_lengths(kl)),
        op.backward(q, k, v, g, kattn::causal, kattn::key_lengths(kl)).dq);
    for (const bool causal : {false, true}) {  // packed: each document alone
        tensor o = tensor::from_shape({1, 2, std::size_t(L), 4}), dq = tensor::from_shape(q.shape());
        for (std::size_t i = 0; i + 1 < cu.size(); ++i) {
            const index_t b = cu[i], n = cu[i + 1] - b;
            const auto sq = rows(q, b, n), sk = rows(k, b, n), sv = rows(v, b, n), sg = rows(g, b, n);
            const tensor od = causal ? op(sq, sk, sv, kattn::causal) : op(sq, sk, sv);
            const tensor dqd = causal ? op.backward(sq, sk, sv, sg, kattn::causal).dq : op.backward(sq, sk, sv, sg).dq;
            for (std::size_t h = 0; h < 2; ++h) {
                std::copy_n(od.data() + h * std::size_t(n) * 4, std::size_t(n) * 4,
                            o.data() + (h * std::size_t(L) + std::size_t(b)) * 4);
                std::copy_n(dqd.data() + h * std::size_t(n) * 5, std::size_t(n) * 5,
                            dq.data() + (h * std::size_t(L) + std::size_t(b)) * 5);
            }
        }
        add(o, dq);
    }
    std::vector<std::vector<double>> worst(3);
    const auto errors = kt::run_ranks(3, [&](kt::thread_communicator& comm) {
        const int me = comm.rank();
        index_t off = 0;
        for (int r = 0; r < me; ++r) off += lens[std::size_t(r)];
        const index_t n = lens[std::size_t(me)];
        const auto sq = rows(q, off, n), sk = rows(k, off, n), sv = rows(v, off, n), sg = rows(g, off, n);
        kattn::dist::sequence_parallel sp(op, comm);
        const kattn::dist::packed_sequences docs{cu};
        std::vector<std::pair<tensor, tensor>> got;
        got.emplace_back(sp(sq, sk, sv), sp.backward(sq, sk, sv, sg).dq);
        got.emplace_back(sp(sq, sk, sv, kattn::causal), sp.backward(sq, sk, sv, sg, kattn::causal).dq);
        got.emplace_back(sp(sq, sk, sv, kattn::causal, kattn::key_lengths(kl)),
                         sp.backward(sq, sk, sv, sg, kattn::causal, kattn::key_lengths(kl)).dq);
        got.emplace_back(sp(sq, sk, sv, docs), sp.backward(sq, sk, sv, sg, docs).dq);
        got.emplace_back(sp(sq, sk, sv, kattn::causal, docs), sp.backward(sq, sk, sv, sg, kattn::causal, docs).dq);
        for (std::size_t m = 0; m < got.size(); ++m)
            worst[std::size_t(me)].push_back(
                std::max(rel(got[m].first, rows(want_out[m], off, n)), rel(got[m].second, rows(want_dq[m], off, n))));
    });
    for (int r = 0; r < 3; ++r) {
        CAPTURE(r);
        CHECK(kt::what(errors[std::size_t(r)]) == "");
        for (std::size_t m = 0; m < worst[std::size_t(r)].size(); ++m) {
            CAPTURE(m);
            CHECK(worst[std::size_t(r)][m] <= 1e-10);
        }
        CHECK(worst[std::size_t(r)].size() == 5);
    }
}

}  // namespace

TEST_CASE("sequence_parallel over 3 simulated ranks equals the single-process operator (favor, trig, elu)") {
    check_map<kattn::features::favor, kattn::samplers::orthogonal_gaussian>();
    check_map<kattn::features::trig, kattn::samplers::gaussian>();
    check_map<kattn::features::elu, kattn::samplers::gaussian>();
}

TEST_CASE("sequence_parallel over simulated ranks: a bad argument on one rank fails on every rank") {
    kattn::attention_config<kattn::features::favor, kattn::samplers::orthogonal_gaussian> cfg;
    cfg.head_dim = 4;
    cfg.value_dim = 3;
    cfg.num_features = 8;
    const kattn::linear_attention<kattn::features::favor> op(cfg);
    const auto q = kt::randn<float, 4>({1, 2, 6, 4}, 1), v = kt::randn<float, 4>({1, 2, 6, 3}, 2);
    auto vn = v;
    vn(0, 1, 2, 0) = std::nanf("");
    const auto errors = kt::run_ranks(3, [&](kt::thread_communicator& comm) {
        kattn::dist::sequence_parallel sp(op, comm);
        (void)sp(q, q, comm.rank() == 1 ? vn : v, kattn::causal);  // NaN on rank 1 only
    });
    for (int r = 0; r < 3; ++r) {
        CAPTURE(r);
        const std::string w = kt::what(errors[std::size_t(r)]);
        CHECK(w.find("rank 1") != std::string::npos);
        CHECK(w.find("thread_group") == std::string::npos);  // a kattn::error, not a broken group
    }
}
