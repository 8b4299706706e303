// kattn/nn/text_classifier.hpp — a ready-to-use text classifier that saves to, and loads
// from, one self-describing file.
//
//   text_classifier clf(spec, vocab, {"negative", "positive"});   model built from spec's seeds
//   clf.fit(train, &dev, trainer_config)    kernel-<map>: Coulomb phase A on train first (once)
//   clf.predict_proba(texts) → [n, C]        clf.predict(texts) → labels, predict_names → names
//   clf.evaluate(dataset) → trainer's evaluation_result (same batches, same numbers)
//   clf.save(path);  auto back = load_model(path);   (format: nn/model_file.hpp)
//   clf.visit([](auto& model) { ... })       the concrete text_model<A> (model_factory.hpp)
// Texts are encoded with the vocabulary and truncated to spec.max_length tokens. load_model
// rebuilds the model from the file's spec (the same seeds give the same frozen parts), then
// checks every array (shape, finite, float range, no array missing or left over) before it
// writes any: on error nothing is returned. Predictions of a loaded model are bitwise those
// of the saved one (same batch size).
#pragma once

#include <chrono>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint.hpp"
#include "inference.hpp"
#include "metrics.hpp"
#include "model_factory.hpp"
#include "model_file.hpp"
#include "trainer.hpp"

namespace kattn::nn {

/// fit()'s outcome: the trainer's result and phase A's per-layer reports (kernel-<map>).
struct text_fit_result {
    fit_result training;
    std::vector<alignment_report> alignment;
};

namespace detail {

/// The type-erased model.
struct text_model_base {
    virtual ~text_model_base() = default;
    virtual parameter_list parameters() = 0;
    virtual tensor<float> probabilities(const dataset& d, index_t batch_size) = 0;
    virtual fit_result fit(const dataset& train, const dataset* dev, const trainer_config& cfg) = 0;
    virtual std::vector<alignment_report> align(const dataset& d, index_t samples, index_t steps) = 0;
    /// Non-parameter state (Coulomb Ω per layer and head), named as in model files.
    virtual std::vector<kattn::detail::npz_array> state() = 0;
    virtual void set_state(const std::vector<kattn::detail::npz_array>& s) = 0;
};

template <class Model>
struct text_model_holder final : text_model_base {
    template <class Make>
    text_model_holder(const model_spec& spec, index_t vocab, Make make)
        : model(classifier_config_of(spec), token_input<float>(token_input_config_of(spec, vocab)), make) {}

    Model model;

    parameter_list parameters() override { return model.parameters(); }

    tensor<float> probabilities(const dataset& d, index_t batch_size) override {
        if (d.size() == 0) return tensor<float>::from_shape({0, std::size_t(model.config().classes)});
        return predict_proba(model, d, batch_size);  // nn/inference.hpp: the batches of trainer::evaluate
    }

    fit_result fit(const dataset& train, const dataset* dev, const trainer_config& cfg) override {
        trainer<Model> tr(model, cfg);
        return tr.fit(train, dev);
    }

    std::vector<alignment_report> align(const dataset& d, index_t samples, index_t steps) override {
        if constexpr (requires { model.align(d, samples, steps); })
            return model.align(d, samples, steps);
        else
            return {};
    }

    template <class F>
    void each_head(F&& f) {
        using A = typename Model::attention_type;
        if constexpr (requires(A & a) { a.set_omega(index_t(0), a.omega(index_t(0))); }) {
            auto& enc = model.encoder_stack();
            for (index_t l = 0; l < enc.size(); ++l) {
                auto& a = enc.layer(l).attention();
                for (index_t h = 0; h < a.config().heads; ++h)
                    f(a, h, "state.encoder." + std::to_string(l) + ".attn.omega" + std::to_string(h));
            }
        }
    }

    std::vector<kattn::detail::npz_array> state() override {
        std::vector<kattn::detail::npz_array> out;
        each_head([&](auto& a, index_t h, std::string name) {
            const auto& om = a.omega(h);
            out.push_back({std::move(name), {om.shape()[0], om.shape()[1]}, std::vector<double>(om.begin(), om.end())});
        });
        return out;
    }

    void set_state(const std::vector<kattn::detail::npz_array>& s) override {
        std::size_t k = 0;
        each_head([&](auto& a, index_t h, const std::string&) {
            xt::xtensor<float, 2> om = xt::xtensor<float, 2>::from_shape({s[k].shape[0], s[k].shape[1]});
            for (std::size_t i = 0; i < om.size(); ++i) om.data()[i] = float(s[k].data[i]);
            a.set_omega(h, om);
            ++k;
        });
    }
};

inline std::vector<std::vector<std::int32_t>> encode_all(std::span<const std::string> texts, const vocabulary& v) {
    std::vector<std::vector<std::int32_t>> out;
    out.reserve(texts.size());
    for (const auto& t : texts) out.push_back(v.encode(t));
    return out;
}

}  // namespace detail

class text_classifier {
public:
    /// The model of spec over vocab (ids < vocab.size()), one name per class.
    text_classifier(model_spec spec, vocabulary vocab, std::vector<std::string> label_names)
        : spec_(std::move(spec)), vocab_(std::move(vocab)), labels_(std::move(label_names)) {
        check_model_spec(spec_);
        detail::check_label_names(labels_, spec_.classes, " (classes = " + std::to_string(spec_.classes) + ")");
        detail::with_attention(spec_, [&](auto make) {
            using A = decltype(make(index_t(0)));
            impl_ = std::make_unique<detail::text_model_holder<text_model<A>>>(spec_, vocab_.size(),
                                                                               std::function<A(index_t)>(make));
        });
    }

    const model_spec& spec() const { return spec_; }
    const vocabulary& vocab() const { return vocab_; }
    const std::vector<std::string>& label_names() const { return labels_; }
    index_t classes() const { return spec_.classes; }
    /// True once Coulomb phase A has run (kernel-<map>; also after loading such a model).
    bool aligned() const { return aligned_; }
    parameter_list parameters() { return impl_->parameters(); }

    /// Calls f(model) with the concrete text_model<A> of spec().kind.
    template <class F>
    void visit(F&& f) {
        detail::with_attention(spec_, [&](auto make) {
            using M = text_model<decltype(make(index_t(0)))>;
            auto* h = dynamic_cast<detail::text_model_holder<M>*>(impl_.get());
            detail::require(h != nullptr, "model", "the type of kind '" + spec_.kind + "'", "another type");
            f(h->model);
        });
    }

    /// Trains on `train` (token ids of vocab(), labels in [0, classes)), selecting on `dev`
    /// when given; kernel-<map> runs phase A (align_samples, align_steps) first, once.
    text_fit_result fit(const dataset& train, const dataset* dev = nullptr, const trainer_config& cfg = {}) {
        check_data(train, "train");
        if (dev) check_data(*dev, "dev");
        text_fit_result r;
        if (needs_alignment(spec_) && !aligned_) {
            r.alignment = impl_->align(train, spec_.align_samples, spec_.align_steps);
            aligned_ = true;
        }
        r.training = impl_->fit(train, dev, cfg);
        return r;
    }

    /// Class probabilities [n, C] of each text (evaluation mode, batches of batch_size).
    tensor<float> predict_proba(std::span<const std::string> texts, index_t batch_size = 256) {
        detail::require(batch_size >= 1, "batch_size", ">= 1", batch_size);
        dataset d;
        d.kind = input_kind::tokens;
        d.num_classes = spec_.classes;
        d.max_length = spec_.max_length;
        d.texts = detail::encode_all(texts, vocab_);
        d.labels.assign(texts.size(), 0);
        return impl_->probabilities(d, batch_size);
    }

    /// The most probable class of each text (the first on ties).
    std::vector<int> predict(std::span<const std::string> texts, index_t batch_size = 256) {
        const tensor<float> p = predict_proba(texts, batch_size);
        return predictions(std::span<const float>(p.data(), p.size()), spec_.classes);
    }
    std::vector<std::string> predict_names(std::span<const std::string> texts, index_t batch_size = 256) {
        std::vector<std::string> out;
        for (const int c : predict(texts, batch_size)) out.push_back(labels_[std::size_t(c)]);
        return out;
    }

    /// Probabilities and metrics on a token dataset (the numbers of trainer::evaluate).
    evaluation_result evaluate(const dataset& data, index_t batch_size = 256) {
        check_data(data, "data");
        detail::require(data.size() >= 1, "data", "a non-empty data set", data.size());
        detail::require(batch_size >= 1, "batch_size", ">= 1", batch_size);
        const auto t0 = std::chrono::steady_clock::now();
        const tensor<float> p = impl_->probabilities(data, batch_size);
        evaluation_result res;
        res.probs.assign(p.begin(), p.end());
        res.metrics =
            evaluate_metrics(std::span<const float>(res.probs), spec_.classes, std::span<const int>(data.labels));
        res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        return res;
    }

    /// Writes the model file (nn/model_file.hpp) atomically and durably.
    void save(const std::string& path) {
        std::vector<kattn::detail::npz_array> arrays;
        parameter_list ps = impl_->parameters();
        detail::check_checkpoint_views(path, ps);
        for (const auto& p : ps) {
            kattn::detail::npz_array a{p.name, p.shape, std::vector<double>(std::size_t(p.size()))};
            for (index_t i = 0; i < p.size(); ++i) a.data[std::size_t(i)] = p.value_at(i);
            arrays.push_back(std::move(a));
        }
        for (auto& s : impl_->state()) arrays.push_back(std::move(s));
        detail::write_file_atomically(path, detail::model_file_image(path, spec_, vocab_, labels_, aligned_, arrays));
    }

    friend text_classifier load_model(const std::string& path, std::uint64_t max_bytes);

private:
    void check_data(const dataset& d, const char* arg) const {
        detail::require(d.kind == input_kind::tokens, arg, "a token (text) dataset", "images");
        detail::require(d.num_classes == spec_.classes, arg, std::to_string(spec_.classes) + " classes", d.num_classes);
        for (std::size_t i = 0; i < d.texts.size(); ++i)
            for (const auto id : d.texts[i])
                if (id < 0 || id >= vocab_.size())
                    detail::fail(arg, "token ids in [0, vocabulary size = " + std::to_string(vocab_.size()) + ")",
                                 std::to_string(id) + " in item " + std::to_string(i));
    }

    model_spec spec_;
    vocabulary vocab_;
    std::vector<std::string> labels_;
    bool aligned_ = false;
    std::unique_ptr<detail::text_model_base> impl_;
};

/// Reads a file written by text_classifier::save (at most max_bytes, 16 GiB by default).
inline text_classifier load_model(const std::string& path, std::uint64_t max_bytes = std::uint64_t(16) << 30) {
    model_file_contents f = detail::read_model_file(path, max_bytes);
    double stored = 0;
    for (const auto& [name, a] : f.arrays) stored += double(a.data.size());
    const double bound = detail::model_values_bound(f.spec, f.vocab.size());
    if (bound > double(1 << 27) + 8 * stored)
        detail::model_file_fail(
            path, "a specification whose model matches the arrays of the file",
            "the spec implies about " + detail::to_text(bound) + " values, the file holds " + detail::to_text(stored));
    text_classifier clf(f.spec, std::move(f.vocab), f.labels);
    auto take = [&](const std::string& name, const std::vector<std::size_t>& shape) -> std::vector<double>& {
        const auto it = f.arrays.find(name);
        if (it == f.arrays.end())
            detail::model_file_fail(
                path, "a model file holding array '" + name + "' of shape " + detail::shape_text(shape), "missing");
        if (it->second.shape != shape)
            detail::model_file_fail(path, "array '" + name + "' of shape " + detail::shape_text(shape),
                                    "shape " + detail::shape_text(it->second.shape));
        return it->second.data;
    };
    parameter_list ps = clf.impl_->parameters();
    std::vector<std::vector<double>*> values;
    for (const auto& p : ps) {
        values.push_back(&take(p.name, p.shape));
        detail::check_checkpoint_values(path, p, *values.back());
    }
    std::vector<kattn::detail::npz_array> state = clf.impl_->state();
    parameter_view as_float;  // state is float: the same range check as a float parameter
    for (auto& s : state) {
        s.data = take(s.name, s.shape);
        as_float.name = s.name;
        detail::check_checkpoint_values(path, as_float, s.data);
    }
    if (f.arrays.size() != ps.size() + state.size()) {
        std::set<std::string> known;
        for (const auto& p : ps) known.insert(p.name);
        for (const auto& s : state) known.insert(s.name);
        for (const auto& [name, a] : f.arrays)
            if (!known.count(name))
                detail::model_file_fail(path, "arrays of the model only", "unexpected array '" + name + "'");
    }
    for (std::size_t k = 0; k < ps.size(); ++k)
        for (index_t i = 0; i < ps[k].size(); ++i) ps[k].set_value(i, (*values[k])[std::size_t(i)]);
    clf.impl_->set_state(state);
    clf.aligned_ = f.aligned;
    return clf;
}

}  // namespace kattn::nn
