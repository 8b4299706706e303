// tests/backends/emulated_single_pass_cases.hpp — the causal single passes under the CUDA
// emulator (causal_single_pass.cuh forward, causal_single_pass_grads.cuh backward):
// against the reference backend and the multi-pass path, chunk by chunk, in one and
// several column groups, with tail chunks and padded keys; the VJP of element-wise maps
// finished in the dφ walks (no dΩ, no db); the width rules; the workspace.
// Included by test_cuda_emulated.cpp, whose systems (single_pass_system,
// emulated_gpu_system) and tolerances it uses.
#pragma once

namespace {

using namespace kattn;

TEST_CASE_TEMPLATE("CUDA kernels under emulation: the causal forward in one pass over the chunks", Map, features::elu,
                   features::softplus, features::sigmoid2, features::cos2) {
    // Maps without a stabiliser, Ω = I (d = F = 16). 150 tokens: two whole
    // chunks and a tail; padded keys (one head keeps 149, the other about a quarter); the
    // multi-pass path and the reference as the independent answers.
    using sp = backends::chunked<single_pass_system>;
    cuda_emulation::faults() = 0;
    int launches = emulated_gpu_system::single_pass_launches, grads = emulated_gpu_system::grads_launches;
    const auto s = kt::run_identity_case<Map, float, sp>(2, 1, 150, true, true, false, 16);
    // The forward, and the backward's: its recomputation and its two walks.
    CHECK(emulated_gpu_system::single_pass_launches == launches + 2);
    CHECK(emulated_gpu_system::grads_launches == grads + 1);
    CHECK(cuda_emulation::faults() == 0);
    const auto r = kt::run_identity_case<Map, float, backends::reference>(2, 1, 150, true, true, false, 16);
    kt::check_close(s, r, 150, tol, grad_tol<Map>);
    CHECK(kt::chunk_rel_err_4d(s.dq, r.dq) < grad_tol<Map>);
    CHECK(kt::chunk_rel_err_4d(s.dk, r.dk) < grad_tol<Map>);
    CHECK(kt::chunk_rel_err_4d(s.dv, r.dv) < tol);
    const auto m = kt::run_identity_case<Map, float, emulated_gpu>(2, 1, 150, true, true, false, 16);
    CHECK(kt::rel_err(s.out, m.out) < 1e-3);
    // Non-causal calls and Ω ≠ I take the multi-pass path.
    launches = emulated_gpu_system::single_pass_launches;
    (void)kt::run_identity_case<Map, float, sp>(2, 1, 150, false, true, false, 16);
    (void)kt::run_identity_case<Map, float, sp>(2, 1, 150, true, true, true, 16);
    CHECK(emulated_gpu_system::single_pass_launches == launches);
}

TEST_CASE_TEMPLATE(
    "CUDA kernels under emulation: with neither dΩ nor db, the dφ walks of element-wise maps write dq and dk", Map,
    features::elu, features::softplus, features::sigmoid2, features::cos2) {
    // Without renormalisation these maps are element-wise, so a device call given no d_omega
    // and no d_bias has the walks finish each feature's VJP (no dφ buffers, no row VJPs).
    // d = F = 48 (feature groups of 32 and 16), dv = 40, two sequences of 150 tokens (a
    // tail chunk), the second with 37 valid keys; an input scale other than 1.
    using sp = backends::chunked<single_pass_system>;
    const index_t B = 2, H = 1, L = 150, D = 48, dv = 40;
    attention_config<Map, samplers::identity> cfg{.head_dim = D, .value_dim = dv, .num_features = D, .seed = 3};
    cfg.feature.renormalize = false;
    cfg.input_scale = 0.8;  // u = 0.8·x, and dx = 0.8·du
    REQUIRE(detail::elementwise_features<Map>(cfg.feature));
    const linear_attention<Map, samplers::identity, backends::reference, float> ar(cfg);
    const linear_attention<Map, samplers::identity, sp, float> as(cfg);
    const auto sb = std::size_t(B), sl = std::size_t(L), sD = std::size_t(D), sv = std::size_t(dv);
    const auto q = kt::randn<float, 4>({sb, 1, sl, sD}, 1, 0.5), k = kt::randn<float, 4>({sb, 1, sl, sD}, 2, 0.5);
    const auto v = kt::randn<float, 4>({sb, 1, sl, sv}, 3), G = kt::randn<float, 4>({sb, 1, sl, sv}, 4);
    const std::vector<index_t> lens{L, L / 4};
    const auto gr = ar.backward(q, k, v, G, kattn::causal, key_lengths(lens));
    const single_pass_system on;
    const backends::device_parameters<Map, float, single_pass_system> params(on, as.spectral());
    const backends::device_options o{true, lens.data(), double(as.input_scale()), 1e-6};
    const auto in = [&](const xt::xtensor<float, 4>& x) {
        return backends::head_major<const float>(x.data(), B, H, L, index_t(x.shape()[3]));
    };
    const auto out = [&](xt::xtensor<float, 4>& x) {
        return backends::head_major<float>(x.data(), B, H, L, index_t(x.shape()[3]));
    };
    const auto call = [&](float* d_omega, float* d_bias) {
        std::array<xt::xtensor<float, 4>, 3> g{xt::xtensor<float, 4>(q.shape(), 7.f),
                                               xt::xtensor<float, 4>(k.shape(), 7.f),
                                               xt::xtensor<float, 4>(v.shape(), 7.f)};
        cuda_emulation::faults() = 0;
        const int grads = emulated_gpu_system::grads_launches;
        sp::device_backward(on, params, in(q), in(k), in(v), in(G), out(g[0]), out(g[1]), out(g[2]), d_omega, d_bias,
                            o);
        CHECK(emulated_gpu_system::grads_launches == grads + 1);
        CHECK(cuda_emulation::faults() == 0);
        return g;
    };
    const auto fused = call(nullptr, nullptr);
    CHECK(kt::chunk_rel_err_4d(fused[0], gr.dq) < grad_tol<Map>);
    CHECK(kt::chunk_rel_err_4d(fused[1], gr.dk) < grad_tol<Map>);
    CHECK(kt::chunk_rel_err_4d(fused[2], gr.dv) < tol);
    // The keys past the second sequence's 37 have no gradient (every entry written).
    for (std::size_t j = std::size_t(L / 4); j < sl; ++j)
        for (std::size_t c = 0; c < sD; ++c) CHECK(fused[1](1, 0, j, c) == 0.f);
    // With dΩ asked for, dφ goes through memory to the row VJPs: the same gradients up to
    // rounding, dv (the same walk) to the bit.
    std::vector<float> d_omega(std::size_t(D * D));
    const auto plain = call(d_omega.data(), nullptr);
    CHECK(kt::rel_err(fused[0], plain[0]) < 1e-5);
    CHECK(kt::rel_err(fused[1], plain[1]) < 1e-5);
    CHECK(fused[2] == plain[2]);
    // The fused call's scratch: the recomputed numerators and the cotangents, both there at
    // once (B·H·192 rows of dv + 1 = 41 columns padded to 44); the other needs dφ as well.
    const std::size_t rows = std::size_t(B * H) * 192, dv1 = 44;
    const auto bytes = [&](bool bias, bool omega) {
        return sp::device_workspace_bytes(on, params, backends::device_pass::backward, B, H, L, L, dv, o, bias, omega);
    };
    CHECK(bytes(false, false) == 2 * rows * dv1 * sizeof(float));
    CHECK(bytes(false, true) > bytes(false, false));
    if (Map::uses_bias) CHECK(bytes(true, false) > bytes(false, false));
}

TEST_CASE("CUDA kernels under emulation: the single pass's column groups, widths and tail chunks") {
    // dv = 40 over 2 heads: 48 columns halved to groups of 32 (the last one 8 wide) so that
    // the blocks fill the emulated device twice; dv = 16 over 4 heads: one group of 16.
    // Lengths 64 (one whole chunk), 65 (a chunk of one token), 300; with and without padded keys.
    using sp = backends::chunked<single_pass_system>;
    CHECK(detail::single_pass_width(2, 16, 16, 40, 2, 1 << 20) == 32);
    CHECK(detail::single_pass_width(4, 16, 16, 16, 2, 1 << 20) == 16);
    CHECK(detail::single_pass_width(1, 16, 16, 16, 2, 1 << 20) == 0);  // fewer blocks than multiprocessors
    CHECK(detail::single_pass_width(8, 16, 16, 200, 2, 1 << 20) == 128);
    CHECK(detail::single_pass_width(8, 16, 24, 64, 2, 1 << 20) == 0);  // F not a multiple of 16
    CHECK(detail::single_pass_width(8, 16, 16, 64, 2, detail::single_pass_shared_bytes(16, 16, 32)) == 32);
    // The backward's walks: groups of features for dΦ's (F split as evenly as 16-wide
    // tiles allow, more groups until the blocks fill the device twice) and groups of value
    // columns for dV's (the same rule over dv); none where either walk leaves fewer blocks
    // than multiprocessors. FLA's shape on 132 multiprocessors with 227 KiB per block:
    // 3 groups of 48 features (48 + 48 + 32) and 3 of 48 value columns.
    const auto plan = [](index_t problems, index_t d, index_t F, index_t dv, std::size_t limit) {
        const auto w = detail::single_pass_grads_plan(problems, d, F, dv, 2, limit);
        return std::pair<index_t, index_t>{w.features, w.values};
    };
    using wp = std::pair<index_t, index_t>;
    CHECK(plan(2, 16, 16, 40, 1 << 20) == wp{16, 32});
    CHECK(plan(2, 16, 16, 32, 1 << 20) == wp{16, 16});
    CHECK(plan(2, 48, 48, 40, 1 << 20) == wp{32, 32});  // features 32 + 16
    CHECK(plan(4, 16, 16, 16, 1 << 20) == wp{16, 16});
    CHECK(plan(1, 16, 16, 8, 1 << 20) == wp{0, 0});                       // one block
    CHECK(plan(8, 16, 24, 16, 1 << 20) == wp{0, 0});                      // F not a multiple of 16
    CHECK(!detail::single_pass_grads_plan(2, 16, 16, 1024, 2, 1 << 30));  // dv + 1 over 1,024
    const auto fla = detail::single_pass_grads_plan(96, 128, 128, 128, 132, 227 << 10);
    CHECK((fla.features == 48 && fla.values == 48));
    // Shared memory for 32 features but not 48: the feature groups narrow to 32.
    const auto capped = detail::single_pass_grads_plan(96, 128, 128, 128, 132,
                                                       detail::single_pass_dphi_shared_bytes(128, 128, 32, 128));
    CHECK((capped.features == 32 && capped.values == 48));
    // d = F = 48 with dv = 40: two feature groups (32 + 16) and two value groups (32 + 8).
    for (const index_t dv : {40, 16, 32}) {
        const index_t H = dv == 16 ? 4 : 2, D = dv == 40 ? 48 : 16;
        const std::size_t sD = std::size_t(D);
        const std::size_t sd = std::size_t(dv);
        for (const index_t L : {64, 65, 300}) {
            for (const bool padded : {false, true}) {
                INFO("dv=", dv, " L=", L, " padded=", padded);
                attention_config cfg{.head_dim = D, .value_dim = dv, .num_features = D, .seed = 3, .sigma = 1.0};
                const linear_attention<features::elu, samplers::identity, backends::reference, float> ar(cfg);
                const linear_attention<features::elu, samplers::identity, sp, float> as(cfg);
                const auto sl = std::size_t(L), sv = std::size_t(dv), sh = std::size_t(H);
                const auto q = kt::randn<float, 4>({1, sh, sl, sD}, 1, 0.5),
                           k = kt::randn<float, 4>({1, sh, sl, sD}, 2, 0.5);
                const auto v = kt::randn<float, 4>({1, sh, sl, sv}, 3);
                const std::vector<index_t> lens{padded ? L / 3 + 1 : L};
                const key_lengths kl(lens);
                cuda_emulation::faults() = 0;
                const int launches = emulated_gpu_system::single_pass_launches;
                const int grads = emulated_gpu_system::grads_launches;
                const auto o = as(q, k, v, kattn::causal, kl);
                CHECK(emulated_gpu_system::single_pass_launches == launches + 1);
                CHECK(kt::rel_err(o, ar(q, k, v, kattn::causal, kl)) < tol);
                // The backward's walks (for dv = 32, dΦ's walks hold 48 columns of ñ and
                // v', the last 16 of them v''s ones column and zeros).
                const auto G = kt::randn<float, 4>({1, sh, sl, sd}, 4);
                const auto gs = as.backward(q, k, v, G, kattn::causal, kl);
                const auto gr = ar.backward(q, k, v, G, kattn::causal, kl);
                CHECK(emulated_gpu_system::grads_launches == grads + 1);
                CHECK(kt::chunk_rel_err_4d(gs.dq, gr.dq) < tol);
                CHECK(kt::chunk_rel_err_4d(gs.dk, gr.dk) < tol);
                CHECK(kt::chunk_rel_err_4d(gs.dv, gr.dv) < tol);
                CHECK(cuda_emulation::faults() == 0);
            }
        }
        // The single pass allocates nothing: the workspace query says 0 bytes, where the
        // multi-pass forward needs its features, states and numerators.
        const attention_config cfg{.head_dim = D, .value_dim = dv, .num_features = D, .seed = 3, .sigma = 1.0};
        const linear_attention<features::elu, samplers::identity, sp, float> as(cfg);
        const single_pass_system on;
        const emulated_gpu_system off;
        const backends::device_parameters<features::elu, float, single_pass_system> pon(on, as.spectral());
        const backends::device_parameters<features::elu, float, emulated_gpu_system> poff(off, as.spectral());
        const backends::device_options o{true, nullptr, 1.0, 1e-6};
        CHECK(sp::device_workspace_bytes(on, pon, backends::device_pass::forward, 1, H, 300, 300, dv, o) == 0);
        CHECK(emulated_gpu::device_workspace_bytes(off, poff, backends::device_pass::forward, 1, H, 300, 300, dv, o) >
              0);
        // The backward's walks need the numerators, the cotangents, dΦ of both sides and a
        // row block's φ: less than the multi-pass backward's features, states and products.
        CHECK(sp::device_workspace_bytes(on, pon, backends::device_pass::backward, 1, H, 300, 300, dv, o) <
              emulated_gpu::device_workspace_bytes(off, poff, backends::device_pass::backward, 1, H, 300, 300, dv, o));
    }
}

}  // namespace
