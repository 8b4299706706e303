// Tests for kattn/nn/layer.hpp, the uniform layer interface: every layer models its concept
// (static_asserts), the uniform forward(x, ctx) / backward(dy, ctx) equal the older calls bit
// for bit (outputs, input gradients, accumulated parameter gradients), and a model composed
// generically from a tuple of layers (embedding → positions → linear → gelu → layer norm →
// attention → dropout → FFN → pooling → head) has finite-difference-exact gradients and trains.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <kattn/features/elu.hpp>
#include <kattn/nn/activation.hpp>
#include <kattn/nn/attention/coulomb.hpp>
#include <kattn/nn/attention/fska.hpp>
#include <kattn/nn/attention/kernel_mha.hpp>
#include <kattn/nn/attention/softmax_mha.hpp>
#include <kattn/nn/attention/uniform.hpp>
#include <kattn/nn/dropout.hpp>
#include <kattn/nn/embedding.hpp>
#include <kattn/nn/encoder.hpp>
#include <kattn/nn/ffn.hpp>
#include <kattn/nn/head.hpp>
#include <kattn/nn/input.hpp>
#include <kattn/nn/layer.hpp>
#include <kattn/nn/layer_norm.hpp>
#include <kattn/nn/linear.hpp>
#include <kattn/nn/loss.hpp>
#include <kattn/nn/optimizer.hpp>
#include <kattn/nn/patch_embedding.hpp>
#include <kattn/nn/pooling.hpp>
#include <kattn/nn/positional.hpp>
#include <kattn/samplers/gaussian.hpp>

#include "gradcheck.hpp"

using namespace kattn;

namespace {

using ids_t = std::vector<std::int32_t>;

// ---------------------------------------------------------------- concepts

template <class T>
constexpr bool all_layers_model_the_interface() {
    using t2 = nn::tensor<T>;
    static_assert(nn::sequence_layer<nn::linear<T>, T>);
    static_assert(nn::sequence_layer<nn::linear<T, kattn::detail::scalar_gemm>, T>);
    static_assert(nn::sequence_layer<nn::layer_norm<T>, T>);
    static_assert(nn::sequence_layer<nn::activation_layer<T>, T>);
    static_assert(nn::sequence_layer<nn::dropout<T>, T>);
    static_assert(nn::sequence_layer<nn::sinusoidal_positions<T>, T>);
    static_assert(nn::sequence_layer<nn::mean_pooling<T>, T>);
    static_assert(nn::sequence_layer<nn::ffn<T>, T>);
    static_assert(nn::sequence_layer<nn::classifier_head<T>, T>);
    // Non-differentiable inputs: ids and pixels. backward(dy, ctx) exists and returns void.
    static_assert(nn::layer<nn::embedding<T>, ids_t, t2>);
    static_assert(nn::layer<nn::embedding<T>, std::span<const std::int32_t>, t2>);
    static_assert(!nn::differentiable_layer<nn::embedding<T>, ids_t, t2>);
    static_assert(nn::layer<nn::patch_embedding<T>, t2>);
    static_assert(!nn::sequence_layer<nn::patch_embedding<T>, T>);
    // Attention policies.
    static_assert(nn::attention_layer<nn::softmax_mha<T>, T>);
    static_assert(nn::attention_layer<nn::performer<T>, T>);
    static_assert(nn::attention_layer<nn::kernel_mha<features::elu, samplers::gaussian, T>, T>);
    static_assert(nn::attention_layer<nn::uniform_attention<T>, T>);
    static_assert(nn::attention_layer<nn::fska_attention<T>, T>);
    static_assert(nn::attention_layer<nn::coulomb_attention<features::elu, T>, T>);
    // Composites.
    static_assert(nn::sequence_layer<nn::encoder_layer<nn::softmax_mha<T>, T>, T>);
    static_assert(nn::sequence_layer<nn::encoder<nn::performer<T>, T>, T>);
    static_assert(nn::input_policy<nn::token_input<T>, T>);
    static_assert(nn::input_policy<nn::patch_input<T>, T>);
    return true;
}
static_assert(all_layers_model_the_interface<float>());
static_assert(all_layers_model_the_interface<double>());

struct no_collect {
    nn::tensor<float> forward(const nn::tensor<float>& x, const nn::context&) { return x; }
    nn::tensor<float> backward(const nn::tensor<float>& d, const nn::context&) { return d; }
};
struct old_style {  // forward(x) without a context: not the uniform interface
    nn::tensor<float> forward(const nn::tensor<float>& x) { return x; }
    nn::tensor<float> backward(const nn::tensor<float>& d, const nn::context&) { return d; }
    void collect(nn::parameter_list&, const std::string&) {}
};
static_assert(!nn::layer<no_collect, nn::tensor<float>>);
static_assert(!nn::layer<old_style, nn::tensor<float>>);
static_assert(!nn::attention_layer<nn::layer_norm<float>, float>);  // no name()
static_assert(!nn::input_policy<nn::embedding<float>, float>);

// ---------------------------------------------------------------- helpers

nn::context make_ctx(index_t B, index_t L, std::vector<index_t> lengths = {}, bool training = false,
                     std::uint64_t step = 0) {
    nn::context c;
    c.batch = B;
    c.length = L;
    c.lengths = std::move(lengths);
    c.training = training;
    c.step = step;
    return c;
}

nn::tensor<float> randf(std::size_t r, std::size_t c, std::uint64_t seed) {
    nn::tensor<float> x = nn::tensor<float>::from_shape({r, c});
    const random_stream rs(seed, streams::user + 77);
    for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = float(rs.normal(i));
    return x;
}

template <class T>
bool same_bits(const nn::tensor<T>& a, const nn::tensor<T>& b) {
    return a.shape() == b.shape() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

/// The parameter lists of two copies of a layer: same names, bitwise equal values and grads.
template <class L>
void check_same_parameters(L& a, L& b) {
    nn::parameter_list pa, pb;
    a.collect(pa, "p");
    b.collect(pb, "p");
    REQUIRE(pa.size() == pb.size());
    for (std::size_t k = 0; k < pa.size(); ++k) {
        CHECK(pa[k].name == pb[k].name);
        REQUIRE(pa[k].size() == pb[k].size());
        for (index_t i = 0; i < pa[k].size(); ++i) {
            CHECK(pa[k].value_at(i) == pb[k].value_at(i));
            if (pa[k].grad_at(i) != pb[k].grad_at(i)) {
                INFO(pa[k].name << "[" << i << "]");
                CHECK(pa[k].grad_at(i) == pb[k].grad_at(i));
            }
        }
    }
}

/// A user-defined model: any layers, composed only through the uniform interface. forward
/// runs them in order, backward in reverse (a void backward, from a non-differentiable
/// input, may only be the first layer's), collect names layer i "<prefix>.<i>".
template <class... Ls>
class chain {
public:
    explicit chain(Ls... ls) : layers_(std::move(ls)...) {}

    template <class In>
    auto forward(const In& x, const nn::context& ctx) {
        return forward_from<0>(x, ctx);
    }
    template <class Dy>
    auto backward(const Dy& dy, const nn::context& ctx) {
        return backward_from<sizeof...(Ls)>(dy, ctx);
    }
    void collect(nn::parameter_list& ps, const std::string& prefix) {
        [&]<std::size_t... I>(std::index_sequence<I...>) {
            (std::get<I>(layers_).collect(ps, prefix + "." + std::to_string(I)), ...);
        }
        (std::index_sequence_for<Ls...>{});
    }

private:
    template <std::size_t I, class X>
    auto forward_from(const X& x, const nn::context& ctx) {
        if constexpr (I + 1 == sizeof...(Ls))
            return std::get<I>(layers_).forward(x, ctx);
        else
            return forward_from<I + 1>(std::get<I>(layers_).forward(x, ctx), ctx);
    }
    template <std::size_t I, class D>
    auto backward_from(const D& dy, const nn::context& ctx) {
        auto& l = std::get<I - 1>(layers_);
        if constexpr (std::is_void_v<decltype(l.backward(dy, ctx))>) {
            static_assert(I == 1, "only the first layer may have a non-differentiable input");
            l.backward(dy, ctx);
        } else if constexpr (I == 1) {
            return l.backward(dy, ctx);
        } else {
            return backward_from<I - 1>(l.backward(dy, ctx), ctx);
        }
    }

    std::tuple<Ls...> layers_;
};

constexpr index_t vocab = 12, D = 8, H = 2, C = 3;

/// ids → ... → logits [B, C] with the given attention layer.
template <class T, class A>
auto make_model(A attn, std::uint64_t seed) {
    return chain(nn::embedding<T>({.vocab = vocab, .dim = D, .padding_index = 0, .seed = seed}),
                 nn::sinusoidal_positions<T>({.dim = D, .max_length = 16}),
                 nn::linear<T>({.in = D, .out = D, .seed = seed + 1}),
                 nn::activation_layer<T>(nn::activation_kind::gelu), nn::layer_norm<T>({.dim = D}), std::move(attn),
                 nn::dropout<T>({.p = 0.25, .seed = seed + 2}),
                 nn::ffn<T>({.dim = D, .hidden = 12, .activation = nn::activation_kind::gelu, .seed = seed + 3}),
                 nn::mean_pooling<T>(),
                 nn::classifier_head<T>({.dim = D,
                                         .hidden = 6,
                                         .classes = C,
                                         .activation = nn::activation_kind::gelu,
                                         .dropout = 0.2,
                                         .seed = seed + 4}));
}

/// Token ids of B sequences of length L (padding 0 past ctx.valid(b)), ids in [1, vocab).
ids_t make_ids(const nn::context& ctx, std::uint64_t seed) {
    const random_stream rs(seed, streams::user + 5);
    ids_t ids(std::size_t(ctx.rows()), 0);
    for (index_t b = 0; b < ctx.batch; ++b)
        for (index_t t = 0; t < ctx.valid(b); ++t) {
            const auto r = std::size_t(b * ctx.length + t);
            ids[r] = std::int32_t(1 + index_t(rs.uniform(r) * double(vocab - 1)) % (vocab - 1));
        }
    return ids;
}

/// key_shift_invariant: softmax rows do not change when a constant is added to every key,
/// so the key bias's exact gradient is 0 (checked, not finite-differenced: FD gives noise).
template <class M>
void gradcheck_model(M model, const nn::context& ctx, bool key_shift_invariant = false) {
    nn::parameter_list all, ps, key_bias;
    model.collect(all, "model");
    for (auto& p : all) (key_shift_invariant && p.name == "model.5.k.bias" ? key_bias : ps).push_back(p);
    CHECK(key_bias.size() == (key_shift_invariant ? 1u : 0u));
    REQUIRE(!ps.empty());
    CHECK(ps.front().name == "model.0.weight");  // the embedding
    // Perturb every parameter off its initialisation (γ = 1, β = 0, …) so each gradient is generic.
    const random_stream rs(11, streams::user + 9);
    std::uint64_t k = 0;
    for (auto& p : ps)
        for (index_t i = 0; i < p.size(); ++i) p.set_value(i, p.value_at(i) + 0.05 * rs.normal(k++));
    const ids_t ids = make_ids(ctx, 3);
    const auto res = kt::check_gradients([&](const kt::dtensor&) { return model.forward(ids, ctx); },
                                         [&](const kt::dtensor& g) {
                                             model.backward(g, ctx);  // void: ids have no gradient
                                             return g;
                                         },
                                         ps, kt::randn2(1, 1, 0), 3e-5, 12, 1e-5, false);
    // h = 1e-5, 3e-5: ten layers deep, the smallest gradients (~1e-6) are rounding-limited
    // at h = 1e-6 with AVX2 FMA (1.1e-5 seen); a wrong gradient is off by O(1).
    CHECK(res.max_err_p < 3e-5);
    for (const auto& p : key_bias)
        for (index_t i = 0; i < p.size(); ++i) CHECK(std::abs(p.grad_at(i)) < 1e-12);
}

}  // namespace

// ---------------------------------------------------------------- bitwise equality

TEST_CASE("nn layer interface: uniform calls equal the older calls bit for bit") {
    const nn::context ctx = make_ctx(3, 4, {4, 2, 3}, true, 7);
    const nn::tensor<float> x = randf(12, 6, 1), dy = randf(12, 5, 2), dy6 = randf(12, 6, 3);

    SUBCASE("linear (both input forms, gradients accumulated over two passes)") {
        nn::linear<float> a({.in = 6, .out = 5, .seed = 4}), b({.in = 6, .out = 5, .seed = 4});
        for (int pass = 0; pass < 2; ++pass) {
            CHECK(same_bits(a.forward(x), b.forward(x, ctx)));
            CHECK(same_bits(a.backward(dy), b.backward(dy, ctx)));
            CHECK(same_bits(a.forward(nn::tensor<float>(x)), b.forward(nn::tensor<float>(x), ctx)));
            CHECK(same_bits(a.backward(dy), b.backward(dy, ctx)));
        }
        check_same_parameters(a, b);
        // The context is ignored: pooled rows (ctx.batch) pass as well as token rows.
        const nn::tensor<float> p = randf(3, 6, 5);
        CHECK(same_bits(a.forward(p), b.forward(p, ctx)));
    }
    SUBCASE("layer_norm") {
        nn::layer_norm<float> a({.dim = 6}), b({.dim = 6});
        a.weight().init_normal(1.0, 3);
        b.weight().init_normal(1.0, 3);
        for (int pass = 0; pass < 2; ++pass) {
            CHECK(same_bits(a.forward(x), b.forward(x, ctx)));
            CHECK(same_bits(a.backward(dy6), b.backward(dy6, ctx)));
        }
        check_same_parameters(a, b);
    }
    SUBCASE("activation_layer (relu, gelu; lvalue and temporary)") {
        for (auto kind : {nn::activation_kind::relu, nn::activation_kind::gelu}) {
            nn::activation_layer<float> a(kind), b(kind);
            CHECK(same_bits(a.forward(x), b.forward(x, ctx)));
            CHECK(same_bits(a.backward(dy6), b.backward(dy6, ctx)));
            CHECK(same_bits(a.backward(nn::tensor<float>(dy6)), b.backward(nn::tensor<float>(dy6), ctx)));
            CHECK(same_bits(a.forward(nn::tensor<float>(x)), b.forward(nn::tensor<float>(x), ctx)));
            CHECK(same_bits(a.backward(dy6), b.backward(dy6, ctx)));
            nn::parameter_list ps;
            b.collect(ps, "act");
            CHECK(ps.empty());
        }
    }
    SUBCASE("dropout (training mask, and the identity at evaluation)") {
        nn::dropout<float> a({.p = 0.4, .seed = 9}), b({.p = 0.4, .seed = 9});
        const nn::tensor<float> y = b.forward(x, ctx);
        CHECK(same_bits(a.forward(x, ctx), y));
        CHECK(!same_bits(y, x));  // the mask is active
        CHECK(same_bits(a.backward(dy6), b.backward(dy6, ctx)));
        CHECK(same_bits(a.backward(nn::tensor<float>(dy6)), b.backward(nn::tensor<float>(dy6), ctx)));
        // backward uses the last forward's mask, not the context it is given.
        CHECK(same_bits(a.backward(dy6), b.backward(dy6, make_ctx(12, 1))));
        const nn::context eval = make_ctx(3, 4);
        b.forward(x, eval);
        CHECK(same_bits(b.backward(dy6, eval), dy6));
        nn::parameter_list ps;
        b.collect(ps, "drop");
        CHECK(ps.empty());
    }
    SUBCASE("embedding (void backward)") {
        nn::embedding<float> a({.vocab = 9, .dim = 5, .padding_index = 0, .scale = 1.5, .seed = 2}),
            b({.vocab = 9, .dim = 5, .padding_index = 0, .scale = 1.5, .seed = 2});
        const ids_t ids{1, 2, 0, 0, 8, 8, 0, 0, 3, 4, 5, 0};
        for (int pass = 0; pass < 2; ++pass) {
            CHECK(same_bits(a.forward(ids), b.forward(ids, ctx)));
            a.backward(dy);
            b.backward(dy, ctx);
        }
        check_same_parameters(a, b);
        CHECK(std::abs(b.weight().grad[8 * 5]) > 0);  // id 8 received its two rows' gradient
    }
    SUBCASE("sinusoidal_positions") {
        nn::sinusoidal_positions<float> a({.dim = 6, .max_length = 4});
        CHECK(same_bits(a.backward(dy6), a.backward(dy6, ctx)));
        CHECK(same_bits(a.backward(dy6, ctx), dy6));
        nn::parameter_list ps;
        a.collect(ps, "pos");
        CHECK(ps.empty());
    }
    SUBCASE("patch_embedding (void backward)") {
        nn::patch_embedding<float> a(
            {.image_height = 4, .image_width = 6, .patch_height = 2, .patch_width = 3, .dim = 5, .seed = 8}),
            b({.image_height = 4, .image_width = 6, .patch_height = 2, .patch_width = 3, .dim = 5, .seed = 8});
        const nn::tensor<float> images = randf(3, 24, 6);  // 3 images × 4 patches = 12 tokens
        const nn::context pctx = make_ctx(3, 4);
        for (int pass = 0; pass < 2; ++pass) {
            CHECK(same_bits(a.forward(images), b.forward(images, pctx)));
            a.backward(dy);
            b.backward(dy, pctx);
        }
        check_same_parameters(a, b);
    }
    SUBCASE("mean_pooling") {
        nn::mean_pooling<float> a, b;
        const nn::tensor<float> y = b.forward(x, ctx);
        CHECK(same_bits(a.forward(x, ctx), y));
        const nn::tensor<float> dp = randf(3, 6, 7);
        const nn::tensor<float> dx = b.backward(dp, ctx);
        CHECK(same_bits(a.backward(dp), dx));
        // Padded rows of sequence 1 (valid 2 of 4) get no gradient.
        for (index_t c = 0; c < 6; ++c) CHECK(dx(4 + 3, c) == 0.0f);
        nn::parameter_list ps;
        b.collect(ps, "pool");
        CHECK(ps.empty());
    }
}

// ---------------------------------------------------------------- a composed model

TEST_CASE("nn layer interface: a generically composed model matches central differences") {
    // Padded batch, training mode (dropout masks and everything keyed by the fixed step).
    const nn::context ctx = make_ctx(2, 5, {5, 3}, true, 4);
    SUBCASE("softmax_mha") {
        gradcheck_model(make_model<double>(nn::softmax_mha<double>({.dim = D, .heads = H, .seed = 21}), 30), ctx, true);
    }
    SUBCASE("performer") {
        gradcheck_model(
            make_model<double>(nn::performer<double>({.dim = D, .heads = H, .num_features = 16, .seed = 22}), 31), ctx);
    }
    SUBCASE("uniform_attention") {
        gradcheck_model(make_model<double>(nn::uniform_attention<double>({.dim = D, .seed = 23}), 32), ctx);
    }
    SUBCASE("coulomb_attention<elu>") {
        gradcheck_model(make_model<double>(nn::coulomb_attention<features::elu, double>(
                                               {.dim = D, .heads = H, .num_features = 16, .seed = 24}),
                                           33),
                        ctx);
    }
    SUBCASE("evaluation mode (dropout off), causal softmax") {
        gradcheck_model(
            make_model<double>(nn::softmax_mha<double>({.dim = D, .heads = H, .causal = true, .seed = 25}), 34),
            make_ctx(2, 5, {4, 5}), true);
    }
}

TEST_CASE("nn layer interface: the composed model is itself a layer and trains") {
    using model_t = decltype(make_model<float>(nn::softmax_mha<float>({.dim = D, .heads = H}), 0));
    static_assert(nn::layer<model_t, ids_t, nn::tensor<float>>);
    static_assert(!nn::differentiable_layer<model_t, ids_t, nn::tensor<float>>);

    auto model = make_model<float>(nn::softmax_mha<float>({.dim = D, .heads = H, .seed = 41}), 40);
    nn::parameter_list ps;
    model.collect(ps, "m");
    // Names come from the chain's positions and each layer's own scheme.
    std::vector<std::string> names;
    for (const auto& p : ps) names.push_back(p.name);
    CHECK(names.front() == "m.0.weight");
    CHECK(std::find(names.begin(), names.end(), "m.5.q.weight") != names.end());
    CHECK(std::find(names.begin(), names.end(), "m.7.fc1.bias") != names.end());
    CHECK(names.back() == "m.9.fc2.bias");

    // Task: class = (number of distinct tokens from {1, 2} in the sequence), 0, 1 or 2.
    constexpr index_t B = 24, L = 6;
    nn::context ctx = make_ctx(B, L);
    std::vector<index_t> lens(B);
    for (index_t b = 0; b < B; ++b) lens[std::size_t(b)] = 3 + b % 4;
    ctx.lengths = lens;
    const ids_t ids = make_ids(ctx, 17);
    std::vector<int> labels(B);
    for (index_t b = 0; b < B; ++b) {
        bool one = false, two = false;
        for (index_t t = 0; t < ctx.valid(b); ++t) {
            one |= ids[std::size_t(b * L + t)] == 1;
            two |= ids[std::size_t(b * L + t)] == 2;
        }
        labels[std::size_t(b)] = int(one) + int(two);
    }
    nn::adamw opt({.lr = 1e-2, .weight_decay = 0});
    ctx.training = true;
    double first = 0, last = 0;
    for (std::uint64_t step = 0; step < 150; ++step) {
        ctx.step = step;
        const auto ce = nn::cross_entropy(model.forward(ids, ctx), labels);
        if (step == 0) first = ce.loss;
        last = ce.loss;
        nn::zero_grad(ps);
        model.backward(ce.dlogits, ctx);
        opt.step(ps);
    }
    ctx.training = false;
    const auto eval = nn::cross_entropy(model.forward(ids, ctx), labels);
    INFO("first loss " << first << ", last " << last << ", evaluation " << eval.loss);
    CHECK(std::isfinite(eval.loss));
    CHECK(eval.loss < 0.5 * first);
    index_t correct = 0;
    for (index_t b = 0; b < B; ++b) {
        index_t best = 0;
        for (index_t c = 1; c < C; ++c)
            if (eval.probs(b, c) > eval.probs(b, best)) best = c;
        correct += best == labels[std::size_t(b)];
    }
    CHECK(correct >= B * 3 / 4);
}
