// tests/backends/precision_cases.hpp — the error bounds of the chunked backend's float
// product formats (float_gemm), and the check of 16-bit inputs, outputs and gradients
// against them, for any chunked backend (test_chunked_precision.cpp: the host system and,
// through nvcc, the GPU; test_cuda_emulated.cpp: the CUDA kernels under emulation).
#pragma once

#include <algorithm>
#include <vector>

#include "backend_cases.hpp"

#include <kattn/attention/linear_attention.hpp>
#include <kattn/backends/chunked.hpp>
#include <kattn/backends/reference.hpp>
#include <kattn/features/elu.hpp>
#include <kattn/features/favor.hpp>
#include <kattn/features/trig.hpp>

namespace kt_chunked_precision {

/// Bounds on the relative error of every output, per format (docs/cuda_backend.md); maps
/// whose derivative jumps (kt::derivative_jumps) get their own bounds for the reduced
/// formats (measured on this test's problem, relu non-causal: 1.5e-2 with TF32 and FP16,
/// 5.9e-2 with BF16, 3.8e-7 with exact FP32).
inline double bound(kattn::backends::float_gemm p, bool jumps = false) {
    if (jumps && p != kattn::backends::float_gemm::fp32) return p == kattn::backends::float_gemm::bf16 ? 1.5e-1 : 5e-2;
    switch (p) {
        case kattn::backends::float_gemm::fp32:
            return 2e-5;
        case kattn::backends::float_gemm::tf32:
            return 5e-3;
        case kattn::backends::float_gemm::fp16:
            return 5e-3;
        case kattn::backends::float_gemm::bf16:
            return 3e-2;
    }
    return 0;
}

/// The largest relative error of out, dq, dk, dv from device-resident calls with T16
/// inputs, outputs and gradients and `products`, against the double reference on the same
/// (rounded) inputs; B1 H2 L150, d 8, m 16.
template <class Backend, class Map, class T16>
double sixteen_bit_error(kattn::backends::float_gemm products, bool causal) {
    using namespace kattn;
    using system_t = typename Backend::system_type;
    const index_t B = 1, H = 2, L = 150, d = 8, dv = 5;
    const auto cfg = kt::case_config<Map>();
    const kt::attn<Map, double, backends::reference> ref(cfg);
    const kt::attn<Map, float, Backend> op(cfg);
    auto q = kt::randn<double, 4>({1, 2, 150, 8}, 1, 0.5), k = kt::randn<double, 4>({1, 2, 150, 8}, 2, 0.5);
    auto v = kt::randn<double, 4>({1, 2, 150, 5}, 3), G = kt::randn<double, 4>({1, 2, 150, 5}, 4);
    const auto narrow = [](xt::xtensor<double, 4>& x) {  // x becomes the values T16 holds
        std::vector<T16> r(x.size());
        for (std::size_t i = 0; i < x.size(); ++i) {
            r[i] = static_cast<T16>(float(x.data()[i]));
            x.data()[i] = double(static_cast<float>(r[i]));
        }
        return r;
    };
    const auto qh = narrow(q), kh = narrow(k), vh = narrow(v), Gh = narrow(G);
    system_t sys{};
    sys.float_math = products;
    const backends::device_parameters<Map, float, system_t> params(sys, op.spectral());
    const auto qs = sys.mirror(qh.data(), index_t(qh.size())), ks = sys.mirror(kh.data(), index_t(kh.size())),
               vs = sys.mirror(vh.data(), index_t(vh.size())), Gs = sys.mirror(Gh.data(), index_t(Gh.size()));
    auto out = sys.template make_buffer<T16>(index_t(vh.size()));
    auto dq = sys.template make_buffer<T16>(index_t(qh.size()));
    auto dk = sys.template make_buffer<T16>(index_t(kh.size()));
    auto dvv = sys.template make_buffer<T16>(index_t(vh.size()));
    const auto in = [&](const T16* p, index_t dim) { return backends::head_major<const T16>(p, B, H, L, dim); };
    const backends::device_options o{causal, nullptr, double(op.input_scale()), 1e-6};
    Backend::device_forward(sys, params, in(qs.get(), d), in(ks.get(), d), in(vs.get(), dv),
                            backends::head_major(out.data(), B, H, L, dv), o);
    Backend::device_backward(sys, params, in(qs.get(), d), in(ks.get(), d), in(vs.get(), dv), in(Gs.get(), dv),
                             backends::head_major(dq.data(), B, H, L, d), backends::head_major(dk.data(), B, H, L, d),
                             backends::head_major(dvv.data(), B, H, L, dv), static_cast<float*>(nullptr),
                             static_cast<float*>(nullptr), o);
    const auto back = [&](const auto& buf, std::size_t n) {
        std::vector<T16> h(n);
        sys.to_host(h.data(), buf.data(), index_t(n));
        std::vector<double> w(n);
        for (std::size_t i = 0; i < n; ++i) w[i] = double(static_cast<float>(h[i]));
        return w;
    };
    const auto r = causal ? ref(q, k, v, kattn::causal) : ref(q, k, v);
    const auto g = causal ? ref.backward(q, k, v, G, kattn::causal) : ref.backward(q, k, v, G);
    return std::max({kt::rel_err(back(out, vh.size()), r), kt::rel_err(back(dq, qh.size()), g.dq),
                     kt::rel_err(back(dk, kh.size()), g.dk), kt::rel_err(back(dvv, vh.size()), g.dv)});
}

/// sixteen_bit_error within bound(products) plus the rounding of the results to T16
/// (2^-8 relative for bf16, 2^-11 for fp16), for favor, elu and trig, causal and not.
template <class Backend, class T16>
void check_sixteen_bit(kattn::backends::float_gemm products, double unit) {
    for (bool causal : {false, true}) {
        INFO("causal=", causal);
        const double limit = bound(products) + unit;
        CHECK(sixteen_bit_error<Backend, kattn::features::favor, T16>(products, causal) < limit);
        CHECK(sixteen_bit_error<Backend, kattn::features::elu, T16>(products, causal) < limit);
        CHECK(sixteen_bit_error<Backend, kattn::features::trig, T16>(products, causal) < limit);
    }
}
}  // namespace kt_chunked_precision
