// kattn::nn data-parallel training under MPI (tests/dist/main.cpp runs every rank count):
// 100 optimiser steps on N ranks with batch b per rank against a one-process fit with
// batch N·b computed on every rank (double and float models, dropout on, text bucketing,
// warm-up, clipping, an uneven last batch); a last batch smaller than N (empty shards)
// with the rank-ordered reduction; checkpoints written by rank 0 only; resume after a
// crash equal to the uninterrupted run. Checks never skip a collective (CHECK only).
#include <doctest/doctest.h>

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <kattn/nn/attention/softmax_mha.hpp>
#include <kattn/nn/classifier.hpp>
#include <kattn/nn/trainer.hpp>

#include "../nn/synthetic_text.hpp"
#include "support.hpp"

using namespace kattn;
using kt::rel_diff;
using kt::text_data;
using kt::values;

namespace {

template <class T>
using model_t = nn::sequence_classifier<nn::token_input<T>, nn::softmax_mha<T>, T>;

template <class T>
model_t<T> make_model() {
    return model_t<T>({.encoder = {.dim = 16, .layers = 1, .ffn_hidden = 32, .dropout = 0.1, .seed = 3},
                       .classes = 2,
                       .head_hidden = 8,
                       .seed = 4},
                      nn::token_input<T>({.vocab = 20, .dim = 16, .max_length = 9, .seed = 5}),
                      [](index_t) { return nn::softmax_mha<T>({.dim = 16, .heads = 2, .seed = 6}); });
}

/// Whether every rank holds exactly rank 0's values (a collective).
bool replicas_equal(const std::vector<double>& v) {
    auto& comm = kattn_test::world();
    std::vector<double> all(v.size() * std::size_t(comm.size()));
    comm.all_gather(v.data(), all.data(), v.size());
    for (std::size_t i = 0; i < all.size(); ++i)
        if (all[i] != v[i % v.size()]) return false;
    return true;
}

/// A fresh directory shared by the ranks (named by rank 0's pid; a collective).
std::string shared_dir(const std::string& name) {
    auto& comm = kattn_test::world();
    std::int64_t pid = std::int64_t(::getpid());
    comm.broadcast(&pid, 1, 0);
    const auto d = std::filesystem::temp_directory_path() / ("kattn_dist_dp_" + name + "_" + std::to_string(pid));
    if (comm.rank() == 0) {
        std::filesystem::remove_all(d);
        std::filesystem::create_directories(d);
    }
    comm.barrier();
    return d.string();
}

/// Every rank's own path in dir (rank 0's is the one used).
std::string own(const std::string& dir, const std::string& stem) {
    return dir + "/" + stem + "_" + std::to_string(kattn_test::world().rank()) + ".npz";
}

/// Whether only rank 0's file `stem` exists (after a barrier).
bool only_rank0_wrote(const std::string& dir, const std::string& stem) {
    auto& comm = kattn_test::world();
    comm.barrier();
    bool ok = true;
    for (int r = 0; r < comm.size(); ++r)
        ok = ok && std::filesystem::exists(dir + "/" + stem + "_" + std::to_string(r) + ".npz") == (r == 0);
    return ok;
}

/// Fits a fresh model of type T with per-rank batch b on all ranks and, in this process
/// alone, with batch N·b; returns the max relative difference of the final parameters.
template <class T>
double fit_vs_one_process(const nn::dataset& train, const nn::dataset& dev, nn::trainer_config cfg, std::int64_t steps,
                          const std::string& dir) {
    auto& comm = kattn_test::world();
    const int N = comm.size();
    nn::trainer_config one = cfg;
    one.batch_size = cfg.batch_size * N;
    model_t<T> ref_model = make_model<T>();
    nn::trainer ref(ref_model, one);
    const nn::fit_result want = ref.fit(train, &dev);
    CHECK(want.steps == steps);

    cfg.checkpoint = own(dir, "best");
    model_t<T> m = make_model<T>();
    nn::trainer tr(m, cfg, comm);
    const nn::fit_result got = tr.fit(train, &dev);
    const std::vector<double> p = values(tr.parameters());
    CHECK(replicas_equal(p));
    CHECK(only_rank0_wrote(dir, "best"));
    CHECK(got.steps == steps);
    CHECK(got.best_epoch == want.best_epoch);
    CHECK(got.history.size() == want.history.size());
    for (std::size_t e = 0; e < std::min(got.history.size(), want.history.size()); ++e) {
        const double tol = std::is_same_v<T, double> ? 1e-10 : 1e-4;
        CHECK(got.history[e].train_loss == doctest::Approx(want.history[e].train_loss).epsilon(tol));
        CHECK(got.history[e].dev_log_loss == doctest::Approx(want.history[e].dev_log_loss).epsilon(tol));
    }
    return rel_diff(p, values(ref.parameters()));
}

}  // namespace

TEST_CASE("nn data parallel: 100 steps on N ranks × b equal one process × N·b") {
    auto& comm = kattn_test::world();
    const int N = comm.size();
    const index_t b = 3, G = b * N;
    // 25 global batches per epoch, the last one of 3N − 2 (shards 1; 2, 2; 2, 2, 3; 2, 2, 3, 3)
    const nn::dataset train = text_data(24 * G + G - 2, 11), dev = text_data(40, 12);
    const nn::trainer_config cfg{.epochs = 4,
                                 .batch_size = b,
                                 .eval_batch_size = 7,
                                 .lr = 3e-3,
                                 .warmup_fraction = 0.1,
                                 .clip = 0.5,
                                 .seed = 21,
                                 .progress = false,
                                 .bucket_window = 3,
                                 .allreduce = {.bucket_bytes = 4096}};  // several buckets per step
    const std::string dir = shared_dir("fit");
    const auto t0 = std::chrono::steady_clock::now();
    const double d64 = fit_vs_one_process<double>(train, dev, cfg, 100, dir);
    const auto t1 = std::chrono::steady_clock::now();
    const double d32 = fit_vs_one_process<float>(train, dev, cfg, 100, dir);
    const auto t2 = std::chrono::steady_clock::now();
    if (comm.rank() == 0)
        MESSAGE(N << " ranks x " << b << " vs 1 process x " << G << ", 100 steps: max rel. diff of the parameters "
                  << d64 << " (double, " << std::chrono::duration<double>(t1 - t0).count() << " s), " << d32
                  << " (float, " << std::chrono::duration<double>(t2 - t1).count() << " s)");
    CHECK(d64 <= 1e-6);
    CHECK(d32 <= 1e-3);  // float: equal to float rounding only (summation order of the gradients)
    comm.barrier();
    if (comm.rank() == 0) std::filesystem::remove_all(dir);
}

TEST_CASE("nn data parallel: a last batch smaller than N (empty shards), rank-ordered reduction") {
    auto& comm = kattn_test::world();
    const int N = comm.size();
    const index_t b = 2;
    const nn::dataset train = text_data(5 * b * N + 1, 13), dev = text_data(9, 14);  // last batch: 1 item
    const nn::trainer_config cfg{.epochs = 2,
                                 .batch_size = b,
                                 .eval_batch_size = 4,
                                 .lr = 3e-3,
                                 .seed = 5,
                                 .progress = false,
                                 .allreduce = {.ordered = true}};
    const std::string dir = shared_dir("empty");
    const double d = fit_vs_one_process<double>(train, dev, cfg, 12, dir);
    if (comm.rank() == 0) MESSAGE(N << " ranks, last batch of 1: max rel. diff " << d);
    CHECK(d <= 1e-6);
    comm.barrier();
    if (comm.rank() == 0) std::filesystem::remove_all(dir);
}

TEST_CASE("nn data parallel: resume after a crash equals the uninterrupted run; rank 0 writes the state") {
    auto& comm = kattn_test::world();
    const int N = comm.size();
    const index_t b = 3, G = b * N;
    const nn::dataset train = text_data(10 * G - 1, 15), dev = text_data(20, 16);  // 10 steps per epoch
    nn::trainer_config cfg{.epochs = 3, .batch_size = b, .lr = 3e-3, .clip = 1.0, .seed = 8, .progress = false};
    const std::string dir = shared_dir("resume");
    model_t<double> m0 = make_model<double>();
    nn::trainer full(m0, cfg, comm);
    const nn::fit_result want = full.fit(train, &dev);
    const std::vector<double> want_p = values(full.parameters());

    cfg.state_checkpoint = own(dir, "state");
    model_t<double> m1 = make_model<double>();
    kt::crashing<model_t<double>> crash{m1, 25};  // a full batch in epoch 3: every rank fails before the all-reduce
    nn::trainer first(crash, cfg, comm);
    bool crashed = false;
    try {
        first.fit(train, &dev);
    } catch (const std::runtime_error&) {
        crashed = true;
    }
    CHECK(crashed);
    CHECK(only_rank0_wrote(dir, "state"));
    model_t<double> m2 = make_model<double>();
    nn::trainer second(m2, cfg, comm);
    second.resume(dir + "/state_0.npz");  // rank 0 reads and broadcasts
    const nn::fit_result got = second.fit(train, &dev);
    const std::vector<double> p = values(second.parameters());
    const double d = rel_diff(p, want_p);
    if (comm.rank() == 0) MESSAGE(N << " ranks, resumed after epoch 2 of 3: max rel. diff " << d);
    CHECK(d == 0.0);  // the same ranks and reductions: bit for bit
    CHECK(replicas_equal(p));
    CHECK(got.steps == want.steps);
    CHECK(got.history.size() == want.history.size());
    for (std::size_t e = 0; e < std::min(got.history.size(), want.history.size()); ++e)
        CHECK(got.history[e].train_loss == want.history[e].train_loss);
    comm.barrier();
    if (comm.rank() == 0) std::filesystem::remove_all(dir);
}
