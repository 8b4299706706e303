// Tests for kattn/nn/encoder.hpp, classifier.hpp, input.hpp and trainer.hpp: the whole
// model's gradient against finite differences (post- and pre-LN, softmax and FSKA with its
// KL term), learning a synthetic task, reproducibility across runs and thread counts, and
// checkpoint round trips through the trainer.
#include <doctest/doctest.h>

#include <omp.h>

#include <cstdio>
#include <filesystem>

#include <kattn/nn/attention/fska.hpp>
#include <kattn/nn/attention/kernel_mha.hpp>
#include <kattn/nn/attention/softmax_mha.hpp>
#include <kattn/nn/attention/uniform.hpp>
#include <kattn/nn/classifier.hpp>
#include <kattn/nn/trainer.hpp>

#include "gradcheck.hpp"

using namespace kattn;

namespace {

/// Token sequences over ids 2..11 (0 pad, 1 unk); label 1 iff token 5 occurs.
nn::dataset token_task(index_t n, std::uint64_t seed, index_t max_len = 8) {
    nn::dataset d;
    d.name = "synthetic";
    d.kind = nn::input_kind::tokens;
    d.num_classes = 2;
    d.max_length = max_len;
    const random_stream rs(seed, streams::user + 5);
    std::uint64_t k = 0;
    for (index_t i = 0; i < n; ++i) {
        const index_t len = 3 + index_t(rs.uniform(k++) * double(max_len - 2));
        std::vector<std::int32_t> t;
        int label = 0;
        for (index_t j = 0; j < std::min(len, max_len); ++j) {
            const auto id = std::int32_t(2 + index_t(rs.uniform(k++) * 10.0) % 10);
            t.push_back(id);
            label |= id == 5;
        }
        d.texts.push_back(t);
        d.labels.push_back(label);
    }
    return d;
}

template <class T>
using softmax_model = nn::sequence_classifier<nn::token_input<T>, nn::softmax_mha<T>, T>;

template <class T>
softmax_model<T> make_softmax(bool pre_ln, double dropout, std::uint64_t seed = 1) {
    const nn::classifier_config cfg{
        .encoder = {.dim = 8, .layers = 2, .ffn_hidden = 12, .dropout = dropout, .pre_ln = pre_ln, .seed = seed},
        .classes = 2,
        .head_hidden = 6,
        .seed = seed};
    return softmax_model<T>(
        cfg, nn::token_input<T>({.vocab = 12, .dim = 8, .max_length = 16, .seed = seed}),
        [&](index_t l) { return nn::softmax_mha<T>({.dim = 8, .heads = 2, .seed = seed * 10 + std::uint64_t(l)}); });
}

/// Central differences of L = CE(model(batch)) (+ regularization) over probes of every parameter.
template <class Model>
double model_gradcheck(Model& model, const nn::batch& b, bool with_reg, double h = 1e-6) {
    nn::parameter_list ps = model.parameters();
    auto loss = [&](bool grads) {
        nn::context ctx;
        ctx.training = true;
        ctx.step = 3;
        const auto logits = model.forward(b, ctx);
        const auto ce = nn::cross_entropy(logits, b.labels, 0.1);
        double L = ce.loss;
        if (grads) {
            nn::zero_grad(ps);
            model.backward(ce.dlogits, ctx);
        }
        if (with_reg) {
            if constexpr (requires { model.regularization(ctx); }) {
                if (grads)
                    L += model.regularization(ctx);
                else {
                    // value only: run it and discard the gradient it accumulates
                    std::vector<std::vector<double>> saved;
                    for (auto& p : ps) {
                        std::vector<double> g(std::size_t(p.size()));
                        for (index_t i = 0; i < p.size(); ++i) g[i] = p.grad_at(i);
                        saved.push_back(g);
                    }
                    L += model.regularization(ctx);
                    for (std::size_t k = 0; k < ps.size(); ++k)
                        for (index_t i = 0; i < ps[k].size(); ++i) {
                            if (ps[k].is_double())
                                ps[k].grad64[i] = saved[k][i];
                            else
                                ps[k].grad[i] = float(saved[k][i]);
                        }
                }
            }
        }
        return L;
    };
    loss(true);
    std::vector<std::vector<double>> analytic;
    for (auto& p : ps) {
        std::vector<double> g(std::size_t(p.size()));
        for (index_t i = 0; i < p.size(); ++i) g[i] = p.grad_at(i);
        analytic.push_back(g);
    }
    double worst = 0;
    int checked = 0;
    for (std::size_t k = 0; k < ps.size(); ++k) {
        const index_t step = std::max<index_t>(1, ps[k].size() / 7);
        for (index_t i = 0; i < ps[k].size(); i += step) {
            const double v0 = ps[k].value_at(i);
            ps[k].set_value(i, v0 + h);
            const double lp = loss(false);
            ps[k].set_value(i, v0 - h);
            const double lm = loss(false);
            ps[k].set_value(i, v0);
            const double num = (lp - lm) / (2 * h), a = analytic[k][i];
            const double err = std::abs(num - a) / std::max({1e-6, std::abs(num), std::abs(a)});
            if (err > 1e-4) INFO(ps[k].name << "[" << i << "]: analytic " << a << " numeric " << num);
            CHECK(err <= 1e-4);
            worst = std::max(worst, err);
            ++checked;
        }
    }
    CHECK(checked > 50);
    return worst;
}

}  // namespace

TEST_CASE("nn::sequence_classifier: gradient of the whole model matches finite differences") {
    const auto data = token_task(6, 11, 7);
    std::vector<index_t> idx{0, 1, 2, 3, 4, 5};
    const auto b = data.make_batch(idx);
    REQUIRE(b.lengths.size() == 6);
    for (bool pre_ln : {false, true}) {
        CAPTURE(pre_ln);
        auto model = make_softmax<double>(pre_ln, 0.2);
        CHECK(model_gradcheck(model, b, false) < 1e-4);
    }
    SUBCASE("FSKA with the KL regulariser") {
        using fska_model = nn::sequence_classifier<nn::token_input<double>, nn::fska_attention<double>, double>;
        const nn::classifier_config cfg{
            .encoder = {.dim = 8, .layers = 1, .ffn_hidden = 8, .dropout = 0.1, .seed = 4}, .classes = 2, .seed = 4};
        fska_model model(cfg, nn::token_input<double>({.vocab = 12, .dim = 8, .max_length = 16, .seed = 4}),
                         [](index_t l) {
                             return nn::fska_attention<double>({.dim = 8,
                                                                .heads = 2,
                                                                .num_pairs = 4,
                                                                .ngsm_components = 2,
                                                                .kl_weight = 0.05,
                                                                .kl_samples = 8,
                                                                .scale = 2.0,
                                                                .seed = 40 + std::uint64_t(l)});
                         });
        CHECK(model_gradcheck(model, b, true, 1e-5) < 1e-4);
    }
}

TEST_CASE("nn::trainer: a softmax and a Performer encoder learn a synthetic task") {
    const auto train = token_task(600, 1), dev = token_task(200, 2);
    {
        auto model = make_softmax<float>(false, 0.0);
        nn::trainer tr(
            model, {.epochs = 8, .batch_size = 32, .lr = 3e-3, .warmup_fraction = 0.05, .seed = 3, .progress = false});
        const auto fit = tr.fit(train, &dev);
        REQUIRE(fit.history.size() == 8);
        CHECK(fit.history.back().train_loss < fit.history.front().train_loss);
        const auto ev = tr.evaluate(dev);
        CHECK(ev.metrics.accuracy > 0.9);
        CHECK(ev.metrics.accuracy == doctest::Approx(fit.best_dev));
    }
    {
        using perf = nn::sequence_classifier<nn::token_input<float>, nn::performer<float>, float>;
        perf model(
            {.encoder = {.dim = 16, .layers = 1, .ffn_hidden = 32, .dropout = 0.0, .seed = 2}, .classes = 2, .seed = 2},
            nn::token_input<float>({.vocab = 12, .dim = 16, .max_length = 16, .seed = 2}),
            [](index_t) { return nn::performer<float>({.dim = 16, .heads = 2, .num_features = 32, .seed = 5}); });
        nn::trainer tr(model, {.epochs = 8, .batch_size = 32, .lr = 3e-3, .seed = 3, .progress = false});
        tr.fit(train, &dev);
        CHECK(tr.evaluate(dev).metrics.accuracy > 0.85);
    }
}

TEST_CASE("nn::trainer: same seeds give bitwise identical parameters on 1 and 2 threads") {
    const auto train = token_task(160, 7), dev = token_task(40, 8);
    auto run = [&](int threads) {
        omp_set_num_threads(threads);
        auto model = make_softmax<float>(false, 0.1, 9);
        nn::trainer tr(model, {.epochs = 2, .batch_size = 16, .seed = 5, .progress = false});
        tr.fit(train, &dev);
        std::vector<double> all;
        for (auto& p : tr.parameters())
            for (index_t i = 0; i < p.size(); ++i) all.push_back(p.value_at(i));
        return all;
    };
    const int saved = omp_get_max_threads();
    const auto a = run(1), b = run(2), c = run(1);
    omp_set_num_threads(saved);
    CHECK(a == c);
    CHECK(a == b);
}

TEST_CASE("nn::trainer: the best checkpoint restores the evaluated model; early stopping fires") {
    const auto train = token_task(200, 3), dev = token_task(60, 4);
    const std::string path = (std::filesystem::temp_directory_path() / "kattn_trainer_ckpt.npz").string();
    auto model = make_softmax<float>(false, 0.1, 12);
    nn::trainer tr(
        model,
        {.epochs = 30, .batch_size = 16, .lr = 3e-2, .patience = 2, .seed = 1, .progress = false, .checkpoint = path});
    const auto fit = tr.fit(train, &dev);
    CHECK(fit.stopped_early);  // lr 3e-2 on a tiny set: dev accuracy plateaus long before 30 epochs
    CHECK(index_t(fit.history.size()) == fit.best_epoch + 2);
    const auto ev = tr.evaluate(dev);
    auto fresh = make_softmax<float>(false, 0.1, 99);
    nn::trainer tr2(fresh, {.progress = false});
    const auto meta = nn::load_checkpoint(path, tr2.parameters());
    CHECK(meta.at("meta.epoch").at(0) == double(fit.best_epoch));
    const auto ev2 = tr2.evaluate(dev);
    CHECK(ev2.probs == ev.probs);
    std::remove(path.c_str());
}

TEST_CASE("nn::trainer and encoder: bad configuration throws kattn::error") {
    auto model = make_softmax<float>(false, 0.1);
    CHECK_THROWS_WITH_AS(nn::trainer(model, {.epochs = 0}), doctest::Contains("'epochs'"), kattn::error);
    CHECK_THROWS_WITH_AS(nn::trainer(model, {.clip = -1}), doctest::Contains("'clip'"), kattn::error);
    CHECK_THROWS_WITH_AS(make_softmax<float>(false, 1.5), doctest::Contains("'dropout'"), kattn::error);
    nn::trainer tr(model, {.progress = false});
    nn::dataset empty;
    CHECK_THROWS_WITH_AS(tr.fit(empty), doctest::Contains("'train'"), kattn::error);
    nn::dataset images;
    images.kind = nn::input_kind::pixels;
    images.item_size = 4;
    images.pixels = {0, 0, 0, 0};
    images.labels = {0};
    images.num_classes = 2;
    CHECK_THROWS_WITH_AS(tr.evaluate(images), doctest::Contains("'batch'"), kattn::error);
}

TEST_CASE("nn::uniform_attention: equals the mean of the valid values; gradient by finite differences") {
    nn::uniform_attention<double> ua({.dim = 6, .seed = 3});
    nn::context ctx{.batch = 2, .length = 4, .lengths = {4, 2}};
    const auto x = kt::randn2(8, 6, 5);
    const auto y = ua.forward(x, ctx);
    // Independent check: changing a padded token changes nothing; all queries of a sequence agree.
    auto x2 = x;
    x2(1 * 4 + 3, 0) += 10.0;
    nn::uniform_attention<double> ua2({.dim = 6, .seed = 3});
    const auto y2 = ua2.forward(x2, ctx);
    double diff = 0;
    for (std::size_t i = 0; i < y.size(); ++i) diff = std::max(diff, std::abs(y2.data()[i] - y.data()[i]));
    CHECK(diff < 1e-14);
    for (int c = 0; c < 6; ++c) CHECK(y(4, c) == doctest::Approx(y(7, c)).epsilon(1e-14));
    CHECK(ua.attention_entropy(x, ctx) == doctest::Approx((4 * std::log(4.0) + 2 * std::log(2.0)) / 6));
    nn::parameter_list ps;
    ua.collect(ps, "u");
    const auto r = kt::check_gradients([&](const kt::dtensor& xx) { return ua.forward(xx, ctx); },
                                       [&](const kt::dtensor& g) { return ua.backward(g, ctx); }, ps, x);
    CHECK(r.max_err_x < 1e-6);
    CHECK(r.max_err_p < 1e-6);
}

TEST_CASE("nn::trainer: length bucketing visits every item once per epoch and cuts padding") {
    // A model stub that records the batches it sees (forward returns zero logits).
    struct recorder {
        std::vector<index_t> seen_lengths;
        std::vector<std::vector<index_t>> padded;
        long long pad_tokens = 0;
        nn::tensor<float> forward(const nn::batch& b, nn::context& ctx) {
            ctx.batch = b.size;
            ctx.length = b.length;
            for (auto l : b.lengths) pad_tokens += b.length - l, seen_lengths.push_back(l);
            return nn::zeros<float>(b.size, 2);
        }
        void backward(const nn::tensor<float>&, const nn::context&) {}
        void collect(nn::parameter_list&, const std::string&) {}
    };
    const auto train = token_task(1000, 21, 30);
    auto run = [&](index_t window) {
        recorder rec;
        nn::trainer tr(
            rec, {.epochs = 1, .batch_size = 32, .clip = 0, .seed = 4, .progress = false, .bucket_window = window});
        tr.fit(train);
        return rec;
    };
    const auto plain = run(0), bucketed = run(10);
    auto sorted = [](std::vector<index_t> v) {
        std::sort(v.begin(), v.end());
        return v;
    };
    std::vector<index_t> all;
    for (const auto& t : train.texts) all.push_back(index_t(t.size()));
    CHECK(sorted(bucketed.seen_lengths) == sorted(all));  // every item exactly once (by length multiset)
    CHECK(bucketed.pad_tokens * 3 < plain.pad_tokens);
}

TEST_CASE("nn::trainer: a diverging run says so, with the step and what to try (not a bad 'q' or 'lr')") {
    const auto train = token_task(256, 5);
    for (const double lr : {1e6, 1e12}) {
        CAPTURE(lr);
        using perf = nn::sequence_classifier<nn::token_input<float>, nn::performer<float>, float>;
        perf model(
            {.encoder = {.dim = 16, .layers = 1, .ffn_hidden = 32, .dropout = 0.0, .seed = 2}, .classes = 2, .seed = 2},
            nn::token_input<float>({.vocab = 12, .dim = 16, .max_length = 16, .seed = 2}),
            [](index_t) { return nn::performer<float>({.dim = 16, .heads = 2, .num_features = 32, .seed = 5}); });
        nn::trainer tr(model, {.epochs = 50, .batch_size = 16, .lr = lr, .seed = 3, .progress = false});
        std::string what;
        std::int64_t step = -1;
        try {
            tr.fit(train);
        } catch (const nn::training_diverged& e) {
            what = e.what();
            step = e.step();
            CHECK(e.lr() > 0);
            CHECK(e.epoch() >= 1);
        }
        INFO(what);
        CHECK(step >= 1);
        CHECK(what.find("training diverged at step " + std::to_string(step)) != std::string::npos);
        CHECK(what.find("lower learning rate") != std::string::npos);
        CHECK(what.find("argument 'lr'") == std::string::npos);
    }
}
