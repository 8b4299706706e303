// tests/backends/emulated_single_pass_cases.hpp — the causal single passes under the CUDA
// emulator (causal_single_pass.cuh forward, causal_single_pass_grads.cuh backward):
// against the reference backend and the multi-pass path, chunk by chunk, in one and
// several column groups, with tail chunks and padded keys; the width rules; the workspace.
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
