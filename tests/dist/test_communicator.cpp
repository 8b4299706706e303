// kattn::dist communicators and the collective error handling of sequence_parallel, under
// mpirun: rank-ordered all_gather, sums, broadcast, the stats counters; bad input on one
// rank raises kattn::error on every rank; the bytes a forward pass communicates do not
// depend on the sequence length.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include <kattn/dist/self_communicator.hpp>
#include <kattn/dist/sequence_parallel.hpp>

#include "../support.hpp"
#include "support.hpp"

using kattn::index_t;

TEST_CASE("mpi_communicator: all_gather in rank order, sums, broadcast, stats") {
    auto& comm = kattn_test::world();
    const int N = comm.size(), me = comm.rank();
    comm.reset_stats();
    const double mine[3] = {double(me), 10.0 * me + 1, -0.5 * me};
    std::vector<double> all(3 * std::size_t(N));
    comm.all_gather(mine, all.data(), 3);
    for (int r = 0; r < N; ++r) {
        CHECK(all[3 * std::size_t(r)] == double(r));
        CHECK(all[3 * std::size_t(r) + 1] == 10.0 * r + 1);
    }
    std::int64_t s[2] = {me + 1, 1};
    comm.all_reduce_sum(s, 2);
    CHECK(s[0] == std::int64_t(N) * (N + 1) / 2);
    CHECK(s[1] == N);
    float b[4] = {0, 0, 0, 0};
    if (me == N - 1) b[0] = b[3] = 2.5f;
    comm.broadcast(b, 4, N - 1);
    CHECK(b[0] == 2.5f);
    CHECK(b[3] == 2.5f);
    const auto& st = comm.stats();
    CHECK(st.calls == 3);
    CHECK(st.payload_bytes == 3 * sizeof(double) + 2 * sizeof(std::int64_t) + 4 * sizeof(float));
    CHECK(st.ring_bytes == std::uint64_t(N - 1) * 3 * sizeof(double) +
                               (N > 1 ? 2 * std::uint64_t(N - 1) * 2 * sizeof(std::int64_t) / std::uint64_t(N) : 0) +
                               (me == N - 1 && N > 1 ? 4 * sizeof(float) : 0));
    CHECK_THROWS_AS(comm.broadcast(b, 4, N), kattn::error);  // checked before any MPI call
}

TEST_CASE("self_communicator is the group of one") {
    kattn::dist::self_communicator self;
    const float x[2] = {1.5f, -2};
    float y[2] = {0, 0};
    self.all_gather(x, y, 2);
    CHECK(y[0] == 1.5f);
    CHECK(y[1] == -2.0f);
    self.all_reduce_sum(y, 2);
    CHECK(y[1] == -2.0f);
    CHECK(self.stats().calls == 2);
    CHECK(self.stats().ring_bytes == 0);
}

namespace {
using favor_op = kattn::linear_attention<kattn::features::favor>;
favor_op make_op() {
    kattn::attention_config<kattn::features::favor, kattn::samplers::orthogonal_gaussian> cfg;
    cfg.head_dim = 4;
    cfg.value_dim = 3;
    cfg.num_features = 8;
    cfg.seed = 5;
    return favor_op(cfg);
}
}  // namespace

TEST_CASE("sequence_parallel: bad input on one rank is a kattn::error on every rank") {
    auto& comm = kattn_test::world();
    const int N = comm.size(), me = comm.rank();
    kattn::dist::sequence_parallel sp(make_op(), comm);
    const std::size_t L = 16;
    auto q = kt::randn<float, 4>({1, 2, L, 4}, 1), k = kt::randn<float, 4>({1, 2, L, 4}, 2);
    auto v = kt::randn<float, 4>({1, 2, L, 3}, 3);
    // The last rank passes a wrong head dimension: every rank names that rank.
    const auto bad_q = kt::randn<float, 4>({1, 2, L, 5}, 4);
    bool thrown = false;
    std::string what;
    try {
        (void)sp(me == N - 1 ? bad_q : q, k, v, kattn::causal);
    } catch (const kattn::error& e) {
        thrown = true;
        what = e.what();
    }
    CHECK(thrown);
    CHECK(what.find("rank " + std::to_string(N - 1)) != std::string::npos);  // the rank at fault
    if (me == N - 1) CHECK(what.find("dim equal to q's dim 5") != std::string::npos);
    // Another number of heads on rank 0 only (with N > 1): every rank refuses.
    const auto q3 = kt::randn<float, 4>({1, 3, L, 4}, 5), k3 = kt::randn<float, 4>({1, 3, L, 4}, 6),
               v3 = kt::randn<float, 4>({1, 3, L, 3}, 7);
    thrown = false;
    try {
        if (me == 0)
            (void)sp(q3, k3, v3);
        else
            (void)sp(q, k, v);
    } catch (const kattn::error&) {
        thrown = true;
    }
    CHECK(thrown == (N > 1));
    // Global key lengths beyond the whole sequence; NaN on one rank.
    const std::vector<index_t> too_long{index_t(L) * N + 1};
    CHECK_THROWS_AS((void)sp(q, k, v, kattn::key_lengths(too_long)), kattn::error);
    auto vn = v;
    if (me == 0) vn(0, 1, 3, 2) = std::nanf("");
    CHECK_THROWS_AS((void)sp(q, k, vn), kattn::error);
    // Still usable afterwards.
    CHECK_NOTHROW((void)sp(q, k, v, kattn::causal));
}

TEST_CASE("sequence_parallel: bytes communicated per pass do not depend on the length") {
    auto& comm = kattn_test::world();
    kattn::dist::sequence_parallel sp(make_op(), comm);
    std::vector<std::uint64_t> bytes;
    for (std::size_t L : {64, 4096}) {
        const auto q = kt::randn<float, 4>({1, 2, L, 4}, 1), k = kt::randn<float, 4>({1, 2, L, 4}, 2),
                   v = kt::randn<float, 4>({1, 2, L, 3}, 3), g = kt::randn<float, 4>({1, 2, L, 3}, 4);
        comm.reset_stats();
        (void)sp(q, k, v, kattn::causal);
        (void)sp.backward(q, k, v, g, kattn::causal);
        bytes.push_back(comm.stats().payload_bytes);
    }
    CHECK(bytes[0] == bytes[1]);
    // 2 heads · (F·dv + F + 1) floats per exchange (F = 8, dv = 3): one for the forward,
    // two for the backward; plus the extents (9 int64 per call) and ∂Ω (4 × 8 floats).
    const std::uint64_t state = 2 * (8 * 3 + 8 + 1) * sizeof(float);
    CHECK(bytes[0] == 3 * state + 2 * 9 * sizeof(std::int64_t) + 4 * 8 * sizeof(float));
}
