// kattn/nn/model_factory.hpp — builds the sequence classifier a model_spec names.
//
//   with_model(spec, input, f)          f(model), model a sequence_classifier<Input, A, float>
//                                       with A the attention spec.kind names (model_spec.hpp)
//   with_text_model(spec, vocab, f)     the same with token_input<float>({vocab, dim,
//                                       max_length, seed + 7}): the text models of the examples
// Seeds (those of examples/common/experiment.hpp, so the same spec gives the same model):
// the encoder, the head and the classifier use spec.seed; attention layer l uses
// spec.seed·1000 + 17·l + 1. kernel-<map> and vanilla-<map> build the same model: the
// difference is phase A (needs_alignment(spec)), which the caller runs (text_classifier::fit).
// detail::with_attention(spec, g) calls g(make) with make(l) → the attention of layer l,
// for callers that construct the model themselves.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <utility>

#include "attention/coulomb.hpp"
#include "attention/fska.hpp"
#include "attention/kernel_mha.hpp"
#include "attention/softmax_mha.hpp"
#include "attention/uniform.hpp"
#include "classifier.hpp"
#include "input.hpp"
#include "model_spec.hpp"

namespace kattn::nn {

/// The text classifier type for attention A.
template <class A>
using text_model = sequence_classifier<token_input<float>, A, float>;

namespace detail {

inline std::uint64_t layer_seed(const model_spec& s, index_t l) { return s.seed * 1000 + 17 * std::uint64_t(l) + 1; }

inline classifier_config classifier_config_of(const model_spec& s) {
    return {.encoder = {.dim = s.dim,
                        .layers = s.layers,
                        .ffn_hidden = s.ffn_hidden,
                        .dropout = s.dropout,
                        .pre_ln = s.pre_ln,
                        .seed = s.seed},
            .classes = s.classes,
            .head_hidden = s.head_hidden,
            .seed = s.seed};
}

inline token_input_config token_input_config_of(const model_spec& s, index_t vocab) {
    return {.vocab = vocab, .dim = s.dim, .max_length = s.max_length, .seed = s.seed + 7};
}

/// Calls g(make) with make(l) → layer l's attention for spec (checked first).
template <class G>
void with_attention(const model_spec& spec, G&& g) {
    check_model_spec(spec);
    const resolved_kind r = resolve_kind(spec);
    const model_spec s = spec;
    switch (r.family) {
        case attention_family::softmax:
            g([s, qkv = r.qkv](index_t l) {
                return softmax_mha<float>({.dim = s.dim, .heads = s.heads, .qkv = qkv, .seed = layer_seed(s, l)});
            });
            return;
        case attention_family::uniform:
            g([s](index_t l) { return uniform_attention<float>({.dim = s.dim, .seed = layer_seed(s, l)}); });
            return;
        case attention_family::performer:
            if (r.map.empty()) {
                g([s](index_t l) {
                    return performer<float>(
                        {.dim = s.dim, .heads = s.heads, .num_features = s.num_features, .seed = layer_seed(s, l)});
                });
                return;
            }
            kattn::for_each_type<kattn::features::all>([&]<class Map>() {  // qk-<map>
                if constexpr (Map::is_positive && !requires { typename Map::inner_map; }) {
                    if (r.map != Map::name) return;
                    kattn::attention_config<> a{};
                    a.temperature = s.temperature;
                    if (s.input_scale > 0) a.input_scale = s.input_scale;
                    g([s, a](index_t l) {
                        return kernel_mha<Map, typename Map::default_sampler, float>({.dim = s.dim,
                                                                                      .heads = s.heads,
                                                                                      .num_features = s.num_features,
                                                                                      .seed = layer_seed(s, l),
                                                                                      .attention = a});
                    });
                }
            });
            return;
        case attention_family::fska:
            g([s, r](index_t l) {
                return fska_attention<float>({.dim = s.dim,
                                              .heads = s.heads,
                                              .num_pairs = s.fska_pairs,
                                              .kl_weight = s.fska_kl_weight,
                                              .positive = r.positive,
                                              .scale = r.scale,
                                              .learnable_v = r.learnable_v,
                                              .seed = layer_seed(s, l)});
            });
            return;
        case attention_family::coulomb:
            kattn::for_each_type<kattn::features::all>([&]<class Map>() {
                if constexpr (Map::is_positive && !requires { typename Map::inner_map; }) {
                    if (r.map != Map::name) return;
                    coulomb_config c{.dim = s.dim, .heads = s.heads, .num_features = s.num_features};
                    c.temperature = s.temperature;
                    if (s.input_scale > 0) c.input_scale = s.input_scale;
                    c.learn_input_scale = s.learn_input_scale;
                    if (r.shrunk) c.sigma = std::sqrt(double(s.dim / s.heads)) / c.langevin.radius;
                    g([s, c](index_t l) {
                        coulomb_config cl = c;
                        cl.seed = layer_seed(s, l);
                        return coulomb_attention<Map, float>(cl);
                    });
                }
            });
            return;
    }
}

}  // namespace detail

/// Builds the classifier of spec with input policy `input` and calls f(model).
template <class Input, class F>
void with_model(const model_spec& spec, Input input, F&& f) {
    detail::with_attention(spec, [&](auto make) {
        using A = decltype(make(index_t(0)));
        sequence_classifier<Input, A, float> model(detail::classifier_config_of(spec), std::move(input),
                                                   std::function<A(index_t)>(make));
        f(model);
    });
}

/// Builds the text classifier of spec over a vocabulary of vocab_size ids and calls f(model).
template <class F>
void with_text_model(const model_spec& spec, index_t vocab_size, F&& f) {
    check_model_spec(spec);
    detail::require(vocab_size >= 2, "vocab_size", ">= 2 (<pad>, <unk>)", vocab_size);
    with_model(spec, token_input<float>(detail::token_input_config_of(spec, vocab_size)), std::forward<F>(f));
}

}  // namespace kattn::nn
