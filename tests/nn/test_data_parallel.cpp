// Tests for kattn/nn/data_parallel.hpp and the data-parallel trainer, without MPI: shards
// and shard batches; the bucketed gradient all-reduce on one rank (identity, buckets that
// split views, scale, extras) and over simulated ranks (threads, tests/nn/thread_ranks.hpp)
// against the gradient of the whole batch; dropout masks of shards (context::batch_offset);
// AdamW restore; the trainer on 3 simulated ranks against one process with the global
// batch; resume after a crash; collective checkpoints written by rank 0 only.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include <kattn/dist/self_communicator.hpp>
#include <kattn/nn/attention/softmax_mha.hpp>
#include <kattn/nn/classifier.hpp>
#include <kattn/nn/data_parallel.hpp>
#include <kattn/nn/dropout.hpp>
#include <kattn/nn/linear.hpp>
#include <kattn/nn/trainer.hpp>

#include "gradcheck.hpp"
#include "synthetic_text.hpp"
#include "thread_ranks.hpp"

using namespace kattn;
using kt::rel_diff;
using kt::text_data;
using kt::values;

namespace {

using model_t = nn::sequence_classifier<nn::token_input<double>, nn::softmax_mha<double>, double>;

model_t make_model() {
    return model_t({.encoder = {.dim = 8, .layers = 1, .ffn_hidden = 16, .dropout = 0.1, .seed = 3},
                    .classes = 2,
                    .head_hidden = 8,
                    .seed = 4},
                   nn::token_input<double>({.vocab = 20, .dim = 8, .max_length = 9, .seed = 5}),
                   [](index_t) { return nn::softmax_mha<double>({.dim = 8, .heads = 2, .seed = 6}); });
}

/// The model plus a batch-independent term λ·Σθ² (as FSKA's KL): regularization() returns it
/// and adds its gradient, so each rank adds it once and the all-reduce must keep it once.
struct l2_model {
    model_t m = make_model();
    nn::parameter_list ps = m.parameters();
    nn::tensor<double> forward(const nn::batch& b, nn::context& ctx) { return m.forward(b, ctx); }
    void backward(const nn::tensor<double>& d, const nn::context& ctx) { m.backward(d, ctx); }
    void collect(nn::parameter_list& out, const std::string& prefix) { m.collect(out, prefix); }
    double regularization(const nn::context&) {
        double s = 0;
        for (auto& p : ps)
            for (index_t i = 0; i < p.size(); ++i) {
                s += 1e-2 * p.value64[i] * p.value64[i];
                p.grad64[i] += 2e-2 * p.value64[i];
            }
        return s;
    }
};

std::vector<double> grads(const nn::parameter_list& ps) {
    std::vector<double> v;
    for (const auto& p : ps)
        for (index_t i = 0; i < p.size(); ++i) v.push_back(p.grad_at(i));
    return v;
}
std::string temp_dir(const std::string& name) {
    const auto d = std::filesystem::temp_directory_path() / ("kattn_test_dp_" + name);
    std::filesystem::remove_all(d);
    std::filesystem::create_directories(d);
    return d.string();
}

/// A float and a double linear layer on the same inputs, each with its own mean CE.
struct two_heads {
    nn::linear<float> f{{.in = 6, .out = 3, .seed = 1}};
    nn::linear<double> d{{.in = 6, .out = 3, .seed = 2}};
    nn::parameter_list ps;
    two_heads() {
        f.collect(ps, "f");
        d.collect(ps, "d");
    }
    /// Gradients of the mean loss over rows [lo, hi) of x (zeros when empty).
    void gradients(const kt::dtensor& x, const std::vector<int>& y, index_t lo, index_t hi) {
        nn::zero_grad(ps);
        if (hi == lo) return;
        kt::dtensor xs = nn::zeros<double>(hi - lo, 6);
        nn::tensor<float> xf = nn::zeros<float>(hi - lo, 6);
        for (index_t r = lo; r < hi; ++r)
            for (index_t c = 0; c < 6; ++c) xf(r - lo, c) = float(xs(r - lo, c) = x(r, c));
        const std::span<const int> ys(y.data() + lo, std::size_t(hi - lo));
        d.backward(nn::cross_entropy(d.forward(xs), ys).dlogits);
        f.backward(nn::cross_entropy(f.forward(xf), ys).dlogits);
    }
};

}  // namespace

TEST_CASE("nn::shard_range and shard_batch: contiguous shards, rows as in the whole batch") {
    for (index_t n = 0; n <= 13; ++n)
        for (int N = 1; N <= 5; ++N) {
            index_t at = 0, lo = n, hi = 0;
            for (int r = 0; r < N; ++r) {
                const nn::shard s = nn::shard_range(n, N, r);
                CHECK(s.begin == at);
                at = s.end;
                lo = std::min(lo, s.size());
                hi = std::max(hi, s.size());
            }
            CHECK(at == n);
            CHECK(hi - lo <= 1);
        }
    CHECK(nn::shard_range(12, 4, 3).begin == 9);  // N·b items: b each
    CHECK(nn::shard_range(2, 3, 0).size() == 0);  // fewer items than ranks: empty shards
    CHECK_THROWS_AS(nn::shard_range(4, 2, 2), kattn::error);

    const nn::dataset data = text_data(30, 1);
    const std::vector<index_t> idx{4, 17, 2, 29, 8, 11, 0};
    const nn::batch whole = data.make_batch(idx);
    for (int N : {2, 3}) {
        for (int r = 0; r < N; ++r) {
            const nn::shard s = nn::shard_range(index_t(idx.size()), N, r);
            const nn::batch b = nn::shard_batch(data, idx, s);
            CHECK(b.length == whole.length);  // padded like the whole batch
            CHECK(std::equal(b.tokens.begin(), b.tokens.end(), whole.tokens.begin() + s.begin * whole.length));
            CHECK(std::equal(b.lengths.begin(), b.lengths.end(), whole.lengths.begin() + s.begin));
            CHECK(std::equal(b.labels.begin(), b.labels.end(), whole.labels.begin() + s.begin));
        }
    }
    CHECK(nn::shard_batch(data, idx, {0, 7}).tokens == whole.tokens);
    CHECK_THROWS_AS(nn::shard_batch(data, idx, {3, 3}), kattn::error);
}

TEST_CASE("nn::gradient_allreducer on one rank: identity, buckets splitting views, scale, extras") {
    nn::parameter<float> a({10}), c({3});
    nn::parameter<double> b({7}), d({1});
    nn::parameter_list ps{nn::view("a", a), nn::view("b", b), nn::view("c", c), nn::view("d", d)};
    a.init_normal(1.0, 1);
    b.init_normal(1.0, 2);
    c.init_normal(1.0, 3);
    d.init_normal(1.0, 4);
    for (auto* p : {&a, &c}) p->grad = p->value;
    for (auto* p : {&b, &d}) p->grad = p->value;
    const std::vector<double> g0 = grads(ps);
    dist::self_communicator self;
    for (bool ordered : {false, true}) {
        self.reset_stats();
        nn::gradient_allreducer small({.bucket_bytes = 16, .ordered = ordered});  // 4 floats or 2 doubles
        std::vector<double> extra{2.5, -1.0};
        small.reduce_sum(self, ps, 1.0, extra);
        CHECK(grads(ps) == g0);  // bitwise: one rank, scale 1
        CHECK(extra == std::vector<double>{2.5, -1.0});
        // floats 13 → 4 buckets; doubles 8 + 2 extras → 5 buckets
        CHECK(small.last_buckets() == 9);
        CHECK(self.stats().calls == 9u);
        CHECK(self.stats().payload_bytes == 13 * 4 + 10 * 8);
    }
    nn::gradient_allreducer big;  // 4 MiB: one float and one double bucket
    big.reduce_sum(self, ps, 0.25);
    CHECK(big.last_buckets() == 2);
    const std::vector<double> g1 = grads(ps);
    for (std::size_t i = 0; i < g0.size(); ++i) CHECK(g1[i] == g0[i] * 0.25);
    big.reduce_mean(self, ps, 3, 3);  // the whole batch: unchanged
    CHECK(grads(ps) == g1);
    CHECK_THROWS_AS(nn::gradient_allreducer({.bucket_bytes = 4}), kattn::error);
    CHECK_THROWS_AS(big.reduce_mean(self, ps, 4, 3), kattn::error);
    CHECK_THROWS_AS(big.reduce_mean(self, ps, 0, 0), kattn::error);
    nn::communicator_ref none;
    CHECK((none.rank() == 0 && none.size() == 1 && !none.attached()));
    CHECK(nn::communicator_ref(self).attached());
}

TEST_CASE("nn::gradient_allreducer over simulated ranks equals the gradient of the whole batch") {
    const kt::dtensor x = kt::randn2(7, 6, 11);
    const std::vector<int> y{0, 2, 1, 1, 0, 2, 2};
    for (index_t n : {7, 2}) {  // 7 over 3 ranks: 2, 2, 3; 2 over 3 ranks: rank 0 empty
        two_heads ref;
        ref.gradients(x, y, 0, n);
        const std::vector<double> want = grads(ref.ps);
        for (std::size_t bytes : {std::size_t(20), std::size_t(4) << 20})
            for (bool ordered : {false, true}) {
                std::vector<std::vector<double>> got(3), extra(3);
                const auto errors = kt::run_ranks(3, [&](kt::thread_communicator& comm) {
                    two_heads m;
                    const nn::shard s = nn::shard_range(n, 3, comm.rank());
                    m.gradients(x, y, s.begin, s.end);
                    std::vector<double> e{double(s.size()), 1.0};
                    nn::gradient_allreducer red({.bucket_bytes = bytes, .ordered = ordered});
                    red.reduce_mean(comm, m.ps, s.size(), n, e);
                    got[std::size_t(comm.rank())] = grads(m.ps);
                    extra[std::size_t(comm.rank())] = e;
                });
                for (const auto& e : errors) CHECK(kt::what(e) == "");
                for (int r = 0; r < 3; ++r) {
                    CAPTURE(r);
                    CHECK(got[std::size_t(r)] == got[0]);  // every rank: the same bits
                    CHECK(extra[std::size_t(r)] == std::vector<double>{double(n), 3.0});
                }
                // doubles (the last 21 entries: d.weight, d.bias) to rounding, floats to float precision
                const std::size_t nf = 21;
                const std::vector<double> gf(got[0].begin(), got[0].begin() + nf), wf(want.begin(), want.begin() + nf);
                const std::vector<double> gd(got[0].begin() + nf, got[0].end()), wd(want.begin() + nf, want.end());
                CHECK(rel_diff(gd, wd) < 1e-14);
                CHECK(rel_diff(gf, wf) < 1e-6);
            }
    }
}

TEST_CASE("nn::dropout: a shard with context::batch_offset draws the whole batch's mask") {
    const index_t B = 5, L = 3, W = 5;  // odd width: shards start at odd flat indices
    nn::dropout<double> drop({.p = 0.4, .seed = 9});
    const kt::dtensor x = kt::randn2(B * L, W, 1), pooled = kt::randn2(B, W, 2);
    nn::context all{.batch = B, .length = L, .training = true, .step = 7};
    const kt::dtensor y = drop.forward(x, all), yp = drop.forward(pooled, all);
    for (index_t o : {1, 2, 3}) {
        nn::context part{.batch = B - o, .length = L, .training = true, .step = 7, .batch_offset = o};
        kt::dtensor xs = nn::zeros<double>((B - o) * L, W), ps = nn::zeros<double>(B - o, W);
        std::copy(x.data() + o * L * W, x.data() + x.size(), xs.data());
        std::copy(pooled.data() + o * W, pooled.data() + pooled.size(), ps.data());
        const kt::dtensor ys = drop.forward(xs, part);
        CHECK(std::equal(ys.begin(), ys.end(), y.data() + o * L * W));
        const kt::dtensor yps = drop.forward(ps, part);
        CHECK(std::equal(yps.begin(), yps.end(), yp.data() + o * W));
    }
    nn::context bad{.batch = 2, .length = L, .training = true, .batch_offset = 1};
    CHECK_THROWS_AS(drop.forward(kt::randn2(3, W, 3), bad), kattn::error);  // neither token nor pooled rows
}

TEST_CASE("nn::adamw::restore continues a run as if never interrupted") {
    nn::parameter<float> w({4, 3});
    nn::parameter<double> b({5});
    w.init_normal(1.0, 1);
    b.init_normal(1.0, 2);
    auto run = [&](nn::parameter<float>& pw, nn::parameter<double>& pb, nn::adamw& opt, int from, int to) {
        nn::parameter_list ps{nn::view("w", pw), nn::view("b", pb, false)};
        for (int s = from; s < to; ++s) {
            for (std::size_t i = 0; i < pw.grad.size(); ++i) pw.grad[i] = float(std::sin(0.3 * double(i + s)));
            for (std::size_t i = 0; i < pb.grad.size(); ++i) pb.grad[i] = std::cos(0.7 * double(i * s + 1));
            opt.step(ps);
        }
    };
    const nn::adamw_config cfg{.lr = 0.01, .weight_decay = 0.1};
    auto w1 = w, w2 = w;
    auto b1 = b, b2 = b;
    nn::adamw full(cfg), first(cfg), second(cfg);
    run(w1, b1, full, 0, 5);
    run(w2, b2, first, 0, 3);
    nn::parameter_list ps2{nn::view("w", w2), nn::view("b", b2, false)};
    std::vector<std::vector<double>> m, v;
    for (const auto& s : first.states()) {
        m.push_back(s.first_moment());
        v.push_back(s.second_moment());
    }
    second.restore(ps2, first.steps(), m, v);
    CHECK(second.steps() == 3);
    run(w2, b2, second, 3, 5);
    CHECK(w2.value == w1.value);  // bitwise
    CHECK(b2.value == b1.value);
    CHECK_THROWS_AS(second.restore(ps2, 2, {m[0]}, {v[0]}), kattn::error);              // one view missing
    CHECK_THROWS_AS(second.restore(ps2, 2, {m[1], m[0]}, {v[1], v[0]}), kattn::error);  // sizes swapped
    nn::adamw fresh(cfg);
    fresh.restore(ps2, 0, {}, {});  // the fresh state
    CHECK(fresh.steps() == 0);
}

TEST_CASE("nn::trainer on 3 simulated ranks equals one process with the global batch") {
    const nn::dataset train = text_data(61, 7), dev = text_data(23, 8);  // 61 = 5·12 + 1: last batch of 1
    nn::trainer_config cfg{.epochs = 2,
                           .batch_size = 12,
                           .eval_batch_size = 5,
                           .lr = 3e-3,
                           .warmup_fraction = 0.2,
                           .clip = 0.5,
                           .seed = 9,
                           .progress = false,
                           .bucket_window = 2};
    l2_model ref_model;
    nn::trainer ref(ref_model, cfg);
    const nn::fit_result want = ref.fit(train, &dev);
    const std::vector<double> want_p = values(ref.parameters());
    const nn::evaluation_result want_dev = ref.evaluate(dev);

    // With a self communicator: the one-process trainer, bit for bit.
    dist::self_communicator self;
    l2_model self_model;
    nn::trainer one(self_model, cfg, self);
    one.fit(train, &dev);
    CHECK(values(one.parameters()) == want_p);

    cfg.batch_size = 4;  // per rank: 3 × 4 = 12
    const std::string dir = temp_dir("trainer");
    std::vector<std::vector<double>> got(3);
    std::vector<nn::fit_result> res(3);
    std::vector<int> same_eval(3, 0);
    std::vector<double> dev_probs;
    const auto errors = kt::run_ranks(3, [&](kt::thread_communicator& comm) {
        l2_model m;
        nn::trainer_config c = cfg;
        c.checkpoint = dir + "/best_" + std::to_string(comm.rank()) + ".npz";
        nn::trainer tr(m, c, comm);
        res[std::size_t(comm.rank())] = tr.fit(train, &dev);
        got[std::size_t(comm.rank())] = values(tr.parameters());
        const auto ev = tr.evaluate(dev);  // sharded: the same bits as one process on these parameters
        nn::trainer solo(m, c);
        same_eval[std::size_t(comm.rank())] = ev.probs == solo.evaluate(dev).probs;
        if (comm.rank() == 0) dev_probs.assign(ev.probs.begin(), ev.probs.end());
    });
    for (const auto& e : errors) CHECK(kt::what(e) == "");
    const double diff = rel_diff(got[0], want_p);
    MESSAGE("3 simulated ranks × 4 vs one process × 12, 12 steps: max rel. diff " << diff);
    CHECK(diff < 1e-10);
    for (int r = 0; r < 3; ++r) {
        CAPTURE(r);
        CHECK(got[std::size_t(r)] == got[0]);
        CHECK(same_eval[std::size_t(r)] == 1);
        const auto& h = res[std::size_t(r)];
        CHECK(h.steps == want.steps);
        CHECK(h.best_epoch == want.best_epoch);
        REQUIRE(h.history.size() == want.history.size());
        for (std::size_t e = 0; e < h.history.size(); ++e) {
            CHECK(h.history[e].train_loss == doctest::Approx(want.history[e].train_loss).epsilon(1e-12));
            CHECK(h.history[e].train_accuracy == want.history[e].train_accuracy);
            CHECK(h.history[e].regularization > 0.0);
            CHECK(h.history[e].regularization == doctest::Approx(want.history[e].regularization).epsilon(1e-12));
            CHECK(h.history[e].dev_log_loss == doctest::Approx(want.history[e].dev_log_loss).epsilon(1e-9));
        }
        CHECK(std::filesystem::exists(dir + "/best_" + std::to_string(r) + ".npz") == (r == 0));
    }
    CHECK(rel_diff(dev_probs, std::vector<double>(want_dev.probs.begin(), want_dev.probs.end())) < 1e-6);
    std::filesystem::remove_all(dir);
}

TEST_CASE("nn::trainer::resume after a crash gives the uninterrupted result") {
    const nn::dataset train = text_data(40, 3), dev = text_data(15, 4);
    const std::string dir = temp_dir("resume");
    nn::trainer_config cfg{
        .epochs = 4, .batch_size = 6, .lr = 3e-3, .clip = 1.0, .patience = 3, .seed = 2, .progress = false};
    model_t full_model = make_model();
    nn::trainer full(full_model, cfg);
    const nn::fit_result want = full.fit(train, &dev);  // 7 steps per epoch
    CHECK(want.history.size() == 4);

    for (int ranks : {1, 2}) {  // one process; two simulated ranks of batch 3
        CAPTURE(ranks);
        std::vector<std::vector<double>> got(static_cast<std::size_t>(ranks));
        std::vector<nn::fit_result> res(static_cast<std::size_t>(ranks));
        const auto errors = kt::run_ranks(ranks, [&](kt::thread_communicator& comm) {
            nn::trainer_config c = cfg;
            c.batch_size = cfg.batch_size / ranks;
            c.state_checkpoint = dir + "/state_" + std::to_string(comm.rank()) + ".npz";
            model_t m = make_model();
            kt::crashing<model_t> crash{m, 17};  // in epoch 3: the state of epoch 2 is on disk
            nn::trainer first(crash, c, comm);
            bool crashed = false;
            try {
                first.fit(train, &dev);
            } catch (const std::runtime_error&) {
                crashed = true;
            }
            if (!crashed) throw std::runtime_error("no crash");
            model_t m2 = make_model();
            nn::trainer second(m2, c, comm);
            second.resume(dir + "/state_0.npz");  // read by rank 0 only
            res[std::size_t(comm.rank())] = second.fit(train, &dev);
            got[std::size_t(comm.rank())] = values(second.parameters());
        });
        for (const auto& e : errors) CHECK(kt::what(e) == "");
        for (int r = 0; r < ranks; ++r) {
            CHECK(std::filesystem::exists(dir + "/state_" + std::to_string(r) + ".npz") == (r == 0));
            const double diff = rel_diff(got[std::size_t(r)], values(full.parameters()));
            if (ranks == 1)
                CHECK(diff == 0.0);  // bit for bit
            else
                CHECK(diff < 1e-10);
            CHECK(res[std::size_t(r)].steps == want.steps);
            CHECK(res[std::size_t(r)].best_epoch == want.best_epoch);
            REQUIRE(res[std::size_t(r)].history.size() == want.history.size());
            for (std::size_t e = 0; e < want.history.size(); ++e) {  // epochs 3, 4 trained after the resume
                const auto &h = res[std::size_t(r)].history[e], &w = want.history[e];
                const double tol = ranks == 1 ? 0.0 : 1e-12;  // one process: bit for bit
                CHECK(std::abs(h.train_loss - w.train_loss) <= tol * w.train_loss);
                CHECK(std::abs(h.dev_log_loss - w.dev_log_loss) <= tol * w.dev_log_loss);
                CHECK(h.lr == w.lr);
            }
        }
        std::filesystem::remove(dir + "/state_0.npz");
    }
    // Not a training state, or another global batch: errors.
    model_t m = make_model();
    nn::trainer t(m, cfg);
    nn::save_checkpoint(dir + "/plain.npz", t.parameters());
    CHECK_THROWS_AS(t.resume(dir + "/plain.npz"), kattn::error);
    nn::trainer_config c = cfg;
    c.epochs = 1;
    c.state_checkpoint = dir + "/one.npz";
    nn::trainer(m, c).fit(train);
    c.batch_size = 5;
    nn::trainer other(m, c);
    other.resume(dir + "/one.npz");
    CHECK_THROWS_AS(other.fit(train), kattn::error);
    std::filesystem::remove_all(dir);
}

TEST_CASE("nn::save_checkpoint / load_checkpoint with a communicator: rank 0 writes, reads, broadcasts") {
    const std::string dir = temp_dir("collective");
    std::vector<std::string> load_error(3), read(3);
    const auto errors = kt::run_ranks(3, [&](kt::thread_communicator& comm) {
        const int r = comm.rank();
        nn::parameter<float> w({2, 3});
        nn::parameter<double> s({4});
        w.init_normal(1.0, 10 + std::uint64_t(r));  // every rank different
        s.init_normal(1.0, 20 + std::uint64_t(r));
        nn::parameter_list ps{nn::view("w", w), nn::view("s", s)};
        nn::save_checkpoint(comm, dir + "/ck_" + std::to_string(r) + ".npz", ps, {{"meta.rank", {double(r)}}});
        comm.barrier();
        w.init_normal(1.0, 99);
        const auto meta = nn::load_checkpoint(comm, dir + "/ck_" + std::to_string(r) + ".npz", ps);
        nn::parameter<float> w0({2, 3});
        w0.init_normal(1.0, 10);  // rank 0's values
        read[std::size_t(r)] = (w.value == w0.value && meta.at("meta.rank") == std::vector<double>{0.0}) ? "ok" : "bad";
        try {
            nn::load_checkpoint(comm, dir + "/missing_" + std::to_string(r) + ".npz", ps);
        } catch (const kattn::error& e) {
            load_error[std::size_t(r)] = e.what();
        }
    });
    for (const auto& e : errors) CHECK(kt::what(e) == "");
    for (int r = 0; r < 3; ++r) {
        CAPTURE(r);
        CHECK(std::filesystem::exists(dir + "/ck_" + std::to_string(r) + ".npz") == (r == 0));
        CHECK(read[std::size_t(r)] == "ok");
        CHECK(load_error[std::size_t(r)].find("missing_0.npz") != std::string::npos);  // every rank throws
    }
    std::filesystem::remove_all(dir);
}
