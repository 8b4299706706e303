// kattn/nn/layer.hpp — the one call interface of every kattn::nn layer, as concepts.
//
// Every layer L of kattn::nn, mapping In (usually tensor<T> [rows, width]) to Out, offers
//   l.forward(x, ctx)      → Out; caches what backward needs (one forward, then at most one
//                             backward, per instance)
//   l.backward(dy, ctx)    → dx of In's type, accumulating the parameter gradients; void when
//                             the input is not differentiable (embedding's ids, patch pixels)
//   l.collect(ps, prefix)  appends the parameter views "<prefix>.…" (nothing without any)
// with one nn::context for the pass, the same at forward and backward; layers that do not
// need it (linear, layer_norm, activations, …) ignore it. So a model of your own composes
// layers without knowing which needs what. Concepts stating it:
//   layer<L, In, Out>                 the three calls
//   differentiable_layer<L, In, Out>  and backward returns the input gradient (→ In)
//   sequence_layer<L, T>              differentiable tensor<T> → tensor<T> (linear, norms,
//                                     ffn, pooling, heads, encoder layers, attention)
//   attention_layer<A, T>             a sequence_layer with name(): an encoder's policy
//   input_policy<I, T>                sequence_classifier's Input: embed(batch, context&)
//                                     fills ctx and returns the tokens, backward(dx, ctx), collect
// Which layer models which: docs/encoder.md §2. The older calls (forward(x) and backward(dy)
// where a layer needs no context) remain and give bitwise the same results.
#pragma once

#include <concepts>
#include <string>
#include <string_view>
#include <utility>

#include "data/dataset.hpp"
#include "parameter.hpp"
#include "tensor.hpp"

namespace kattn::nn {

/// forward(x, ctx) → Out, backward(dy, ctx), collect(ps, prefix).
template <class L, class In, class Out = In>
concept layer = requires(L& l, const In& x, const Out& dy, const context& ctx, parameter_list& ps,
                         const std::string& prefix) {
    { l.forward(x, ctx) } -> std::convertible_to<Out>;
    l.backward(dy, ctx);
    l.collect(ps, prefix);
};

/// A layer whose backward(dy, ctx) returns the gradient of its input.
template <class L, class In, class Out = In>
concept differentiable_layer = layer<L, In, Out> && requires(L& l, const Out& dy, const context& ctx) {
    { l.backward(dy, ctx) } -> std::convertible_to<In>;
};

/// A differentiable layer on activations tensor<T> (any row count: tokens or pooled rows).
template <class L, class T = float>
concept sequence_layer = differentiable_layer<L, tensor<T>, tensor<T>>;

/// What nn::encoder accepts as its Attention: a sequence layer with a name().
template <class A, class T = float>
concept attention_layer = sequence_layer<A, T> && requires(const A& a) {
    { a.name() } -> std::convertible_to<std::string_view>;
};

/// sequence_classifier's Input: embed(batch, ctx) sets ctx.batch/length/lengths and returns
/// [B·L, D]; backward(dx, ctx) accumulates; collect(ps, prefix).
template <class I, class T = float>
concept input_policy = requires(I& in, const batch& b, context& ctx, const tensor<T>& dx, parameter_list& ps,
                                const std::string& prefix) {
    { in.embed(b, ctx) } -> std::convertible_to<tensor<T>>;
    in.backward(dx, std::as_const(ctx));
    in.collect(ps, prefix);
};

}  // namespace kattn::nn
