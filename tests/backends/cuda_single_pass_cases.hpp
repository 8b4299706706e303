// tests/backends/cuda_single_pass_cases.hpp — the CUDA backend's causal single pass
// (cuda_system::single_pass: causal_single_pass.cuh forward, causal_single_pass_grads.cuh
// backward) on a GPU: against the reference backend and the multi-pass path, bitwise from
// run to run, and with no scratch (forward) or less than the multi-pass path's (backward). Included by test_cuda.cu
// after test_chunked.cpp, whose helpers (on_system, randn, rel_err, bitwise_equal) it uses;
// the emulator runs the same kernel on the CPU (test_cuda_emulated.cpp).
#pragma once

namespace {

using namespace kattn;

TEST_CASE_TEMPLATE(
    "CUDA backend: the causal forward in one pass over the chunks equals the reference, the "
    "multi-pass path and itself",
    Map, features::elu, features::softplus) {
    // 2 × 128 heads: blocks for every multiprocessor of today's GPUs at any column width;
    // d = F = 32 (Ω = I); dv = 16 (one group) and 40 (groups of 16 or 32 and a narrower
    // last one); 150 tokens (a tail chunk) with padded keys.
    const index_t B = 2, H = 128, L = 150, d = 32;
    for (const index_t dv : {16, 40}) {
        INFO(Map::name, " dv=", dv);
        const attention_config cfg{.head_dim = d, .value_dim = dv, .num_features = d, .seed = 3, .sigma = 1.0};
        const linear_attention<Map, samplers::identity, backends::reference, float> ar(cfg);
        const linear_attention<Map, samplers::identity, backends::cuda, float> a(cfg);
        system_t on, off;
        on.single_pass = true;
        REQUIRE(on.single_pass_columns<float>(B * H, d, d, dv) > 0);
        CHECK(off.single_pass_columns<float>(B * H, d, d, dv) == 0);
        const backends::device_parameters<Map, float, system_t> params(on, a.spectral());
        const auto sb = std::size_t(B), sh = std::size_t(H), sl = std::size_t(L);
        const auto q = randn<float, 4>({sb, sh, sl, std::size_t(d)}, 1, 0.5);
        const auto k = randn<float, 4>({sb, sh, sl, std::size_t(d)}, 2, 0.5);
        const auto v = randn<float, 4>({sb, sh, sl, std::size_t(dv)}, 3);
        const std::vector<index_t> lens_host{L, L / 3};
        const on_system<index_t> lens(on, lens_host.data(), B);
        const backends::device_options o{true, lens.buf.data(), double(a.input_scale()), 1e-6};
        const on_system<float> qs(on, q.data(), index_t(q.size())), ks(on, k.data(), index_t(k.size())),
            vs(on, v.data(), index_t(v.size()));
        const auto run = [&](const system_t& sys) {
            on_system<float> out(sys, B * H * L * dv);
            const auto view = [&](const on_system<float>& x, index_t w) {
                return backends::head_major<const float>(x.buf.data(), B, H, L, w);
            };
            backends::cuda::device_forward(sys, params, view(qs, d), view(ks, d), view(vs, dv),
                                           backends::head_major(out.buf.data(), B, H, L, dv), o);
            return out.host(sys);
        };
        const auto x = run(on), y = run(on), m = run(off);
        const auto r = ar(q, k, v, kattn::causal, kattn::key_lengths(lens_host));
        CHECK(bitwise_equal(x, y));
        // Nothing allocated: the workspace query says 0 bytes for the single pass.
        CHECK(backends::cuda::device_workspace_bytes(on, params, backends::device_pass::forward, B, H, L, L, dv, o) ==
              0);
        CHECK(backends::cuda::device_workspace_bytes(off, params, backends::device_pass::forward, B, H, L, L, dv, o) >
              0);
        CHECK(rel_err(x, std::vector<float>(r.begin(), r.end())) < float_tol);
        CHECK(rel_err(x, m) < float_tol);
    }
}

TEST_CASE_TEMPLATE(
    "CUDA backend: the causal backward in three walks over the chunks equals the reference, the "
    "multi-pass path and itself",
    Map, features::elu, features::softplus) {
    // As above; dv = 16 and 40 (on 132 multiprocessors: dΦ's walks in two groups of 16
    // features; dV's walk in one group of 16 columns, or in groups of 32 and 8). Renormalised
    // features, and features without (element-wise: given neither dΩ nor db, as here, the
    // dΦ walks finish the VJP and write dq and dk themselves).
    const index_t B = 2, H = 128, L = 150, d = 32;
    for (const index_t dv : {16, 40})
        for (const bool renormalize : {true, false}) {
            INFO(Map::name, " dv=", dv, " renormalize=", renormalize);
            attention_config<Map, samplers::identity> cfg{.head_dim = d, .value_dim = dv, .num_features = d, .seed = 3};
            cfg.feature.renormalize = renormalize;
            CHECK(detail::elementwise_features<Map>(cfg.feature) == !renormalize);
            const linear_attention<Map, samplers::identity, backends::reference, float> ar(cfg);
            const linear_attention<Map, samplers::identity, backends::cuda, float> a(cfg);
            system_t on, off;
            on.single_pass = true;
            REQUIRE(bool(on.single_pass_grads_widths<float>(B * H, d, d, dv)));
            CHECK(!off.single_pass_grads_widths<float>(B * H, d, d, dv));
            const backends::device_parameters<Map, float, system_t> params(on, a.spectral());
            const auto sb = std::size_t(B), sh = std::size_t(H), sl = std::size_t(L), sd = std::size_t(d);
            const auto q = randn<float, 4>({sb, sh, sl, sd}, 1, 0.5), k = randn<float, 4>({sb, sh, sl, sd}, 2, 0.5);
            const auto v = randn<float, 4>({sb, sh, sl, std::size_t(dv)}, 3);
            const auto G = randn<float, 4>({sb, sh, sl, std::size_t(dv)}, 4);
            const std::vector<index_t> lens_host{L, L / 3};
            const on_system<index_t> lens(on, lens_host.data(), B);
            const backends::device_options o{true, lens.buf.data(), double(a.input_scale()), 1e-6};
            const on_system<float> qs(on, q.data(), index_t(q.size())), ks(on, k.data(), index_t(k.size())),
                vs(on, v.data(), index_t(v.size())), gs(on, G.data(), index_t(G.size()));
            struct grads {
                std::vector<float> dq, dk, dv;
            };
            const auto run = [&](const system_t& sys) {
                on_system<float> dq(sys, B * H * L * d), dk(sys, B * H * L * d), dvv(sys, B * H * L * dv);
                const auto view = [&](const on_system<float>& x, index_t w) {
                    return backends::head_major<const float>(x.buf.data(), B, H, L, w);
                };
                backends::cuda::device_backward(sys, params, view(qs, d), view(ks, d), view(vs, dv), view(gs, dv),
                                                backends::head_major(dq.buf.data(), B, H, L, d),
                                                backends::head_major(dk.buf.data(), B, H, L, d),
                                                backends::head_major(dvv.buf.data(), B, H, L, dv),
                                                static_cast<float*>(nullptr), static_cast<float*>(nullptr), o);
                return grads{dq.host(sys), dk.host(sys), dvv.host(sys)};
            };
            const auto x = run(on), y = run(on), m = run(off);
            const auto r = ar.backward(q, k, v, G, kattn::causal, kattn::key_lengths(lens_host));
            const auto host = [](const auto& t) { return std::vector<float>(t.begin(), t.end()); };
            CHECK(bitwise_equal(x.dq, y.dq));
            CHECK(bitwise_equal(x.dk, y.dk));
            CHECK(bitwise_equal(x.dv, y.dv));
            // Chunk by chunk (kt::chunk_rel_err): the terms that cross chunks are small beside
            // the first tokens' gradients.
            const auto close = [&](const std::vector<float>& got, const std::vector<float>& want, index_t w) {
                return kt::chunk_rel_err(got, want, std::size_t(L), std::size_t(w));
            };
            CHECK(close(x.dq, host(r.dq), d) < float_grad_tol<Map>);
            CHECK(close(x.dk, host(r.dk), d) < float_grad_tol<Map>);
            CHECK(close(x.dv, host(r.dv), dv) < float_tol);
            CHECK(close(x.dq, m.dq, d) < float_grad_tol<Map>);
            CHECK(close(x.dk, m.dk, d) < float_grad_tol<Map>);
            CHECK(close(x.dv, m.dv, dv) < float_tol);
            // Its scratch (numerators, cotangents, dΦ of both sides, a row block's φ)
            // is less than the multi-pass backward's; fused, without dΦ and the row block, less still.
            const auto bytes = [&](const system_t& sys, bool omega) {
                return backends::cuda::device_workspace_bytes(sys, params, backends::device_pass::backward, B, H, L, L,
                                                              dv, o, false, omega);
            };
            CHECK(bytes(on, true) < bytes(off, true));
            if (renormalize)
                CHECK(bytes(on, false) == bytes(on, true));
            else
                CHECK(bytes(on, false) < bytes(on, true));
        }
}

}  // namespace
