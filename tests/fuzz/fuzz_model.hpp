// tests/fuzz/fuzz_model.hpp — the small parameter_list of the checkpoint target and of its
// seed corpus (tests/fuzz/seeds.cpp): a float matrix, a float vector and a double 3-tensor.
#pragma once

#include <kattn/nn/checkpoint.hpp>

namespace kattn_fuzz {

struct model {
    kattn::nn::parameter<float> w{{3, 5}}, b{{5}};
    kattn::nn::parameter<double> flow{{2, 2, 4}};
    kattn::nn::parameter_list views() {
        return {kattn::nn::view("enc.w", w), kattn::nn::view("enc.b", b, false), kattn::nn::view("flow.s", flow)};
    }
};

}  // namespace kattn_fuzz
