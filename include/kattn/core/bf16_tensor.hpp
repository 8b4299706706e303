// kattn/core/bf16_tensor.hpp — xtensor containers of kattn::bf16 to and from float.
//
//   auto qb = kattn::to_bf16(q);     // xt::xtensor<float, R> → xt::xtensor<bf16, R>, nearest, ties to even
//   auto o  = kattn::to_float(ob);   // exact
//
// The operators of T = float take and return such tensors (linear_attention.hpp).
#pragma once

#include <cstddef>

#include <xtensor/xtensor.hpp>

#include "bfloat16.hpp"

namespace kattn {

template <std::size_t R>
xt::xtensor<bf16, R> to_bf16(const xt::xtensor<float, R>& x) {
    auto out = xt::xtensor<bf16, R>::from_shape(x.shape());
    const float* in = x.data();
    bf16* o = out.data();
    for (std::size_t i = 0; i < x.size(); ++i) o[i] = bf16(in[i]);
    return out;
}

template <std::size_t R>
xt::xtensor<float, R> to_float(const xt::xtensor<bf16, R>& x) {
    auto out = xt::xtensor<float, R>::from_shape(x.shape());
    const bf16* in = x.data();
    float* o = out.data();
    for (std::size_t i = 0; i < x.size(); ++i) o[i] = float(in[i]);
    return out;
}

}  // namespace kattn
