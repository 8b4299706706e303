// chunked backend: agreement with the reference oracle for every map × {non-causal,
// causal} × {all keys, padded} (L = 1, 7, 150: one token, one partial chunk, 64 + 64 + 22)
// and every map × packed documents (1 to 136 tokens each), packed documents across the
// causal scans' segments (66 chunks),
// features(), q_len ≠ k_len, the device-resident call on [B, H, L, d], [B, L, H, d] and
// interleaved views (same bits as the operator), a 1,000-token causal sequence,
// causal safety of the stabiliser, the output stage in tiles (launch_chunk_outputs)
// against its products and row passes, bitwise run-to-run (and on the host, thread-count)
// determinism, and the errors of the device-resident call.
//
// Built twice: by g++ with backends::chunked<host_system> (kattn_chunked_tests, run by CI),
// and by nvcc through tests/backends/test_cuda.cu (-Dcuda=enabled) with backends::cuda,
// where every primitive runs on the GPU (cuBLAS; float products in TF32 through the
// operator API, exact FP32 through the device-resident call's system object).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <new>
#include <tuple>
#include <vector>

#include <xtensor/xtensor.hpp>

#include "../tensors.hpp"
#include "backend_cases.hpp"

#include <kattn/fwd.hpp>
#include <kattn/attention/linear_attention.hpp>
#include <kattn/backends/reference.hpp>
#include <kattn/core/bfloat16.hpp>
#include <kattn/core/random.hpp>
#include <kattn/features/all.hpp>
#include <kattn/features/favor.hpp>
#include <kattn/features/trig.hpp>

#include "../error_text.hpp"

#if defined(__CUDACC__)
#include <kattn/backends/cuda.cuh>
#else
#include <omp.h>

#include <kattn/backends/chunked.hpp>
#define KATTN_TEST_HOST_ONLY 1
#endif

namespace {

using namespace kattn;
#if defined(__CUDACC__)
using chunked_backend = backends::cuda;
using system_t = backends::cuda_system;
constexpr double float_tol = 5e-3;  // out, dv: the operator API's float products are TF32
/// The gradients through the map (dq, dk, dΩ, db) under TF32 products: up to 1.1e-2 measured
/// on an H200 (positive<trig> and positive<nonstationary>, causal, L = 7; the host's TF32
/// emulation gives 6.6e-3 on a like problem); maps whose derivative jumps (relu) flip whole
/// terms (1.5e-2 on the host's emulation, test_chunked_precision.cpp).
template <class Map>
constexpr double float_grad_tol = kt::derivative_jumps<Map> ? 5e-2 : 2e-2;
/// The tolerances above were measured on whole tensors: on a GPU the float results are held
/// to that standard (kt::check_close's floor 1) until a GPU run measures them chunk by chunk
/// as the host does (the emulator, test_cuda_emulated.cpp, already passes chunk by chunk).
constexpr double float_floor = 1.0;
system_t exact_system() { return system_t{nullptr, backends::float_gemm::fp32}; }
/// TF32 products with the output stage in tiles of 64 query rows (one kernel, WMMA) or not.
system_t tiled_system(bool on) { return system_t{nullptr, backends::float_gemm::tf32, {}, true, on}; }
/// TF32 products with the causal block states and their scan in one kernel or not.
system_t states_system(bool on) { return system_t{nullptr, backends::float_gemm::tf32, {}, true, false, on}; }
constexpr bool tiles_bitwise = false;
#else
using chunked_backend = backends::chunked<backends::host_system>;
using system_t = backends::host_system;
constexpr double float_tol = 2e-5;
template <class Map>
constexpr double float_grad_tol = float_tol;
constexpr double float_floor = kt::chunk_floor;
system_t exact_system() { return system_t{}; }
/// The output stage in tiles of 64 query rows (launch_chunk_outputs) or as products and
/// row passes: the same sums in the same order on the host.
system_t tiled_system(bool on) { return system_t{backends::float_gemm::fp32, {}, on}; }
/// The causal block states and their scan per (problem, segment) or as the batched product
/// and the scan: the same sums in the same order on the host.
system_t states_system(bool on) { return system_t{backends::float_gemm::fp32, {}, true, on}; }
constexpr bool tiles_bitwise = true;
#endif

using kt::randn;
using kt::rel_err;

template <class A, class B>
bool bitwise_equal(const A& a, const B& b) {
    return a.size() == b.size() && std::equal(a.data(), a.data() + a.size(), b.data());
}

using kt::attn;
using kt::case_result;
using kt::check_close;
using kt::run_case;

bool bitwise_equal(const case_result& a, const case_result& b) {
    return bitwise_equal(a.out, b.out) && bitwise_equal(a.dq, b.dq) && bitwise_equal(a.dk, b.dk) &&
           bitwise_equal(a.dv, b.dv) && bitwise_equal(a.d_omega, b.d_omega) && bitwise_equal(a.d_bias, b.d_bias);
}

template <class Map>
void compare_all() {
    for (index_t L : {1, 7, 150})
        for (bool causal : {false, true})
            for (bool padded : {false, true}) {
                INFO(Map::name, " L=", L, " causal=", causal, " padded=", padded);
                const auto r = run_case<Map, double, backends::reference>(2, 3, L, causal, padded);
                check_close(run_case<Map, double, chunked_backend>(2, 3, L, causal, padded), r, L, 1e-10);
                const auto rf = run_case<Map, float, backends::reference>(2, 3, L, causal, padded);
                const auto cf = run_case<Map, float, chunked_backend>(2, 3, L, causal, padded);
                check_close(cf, rf, L, float_tol, float_grad_tol<Map>, float_floor);
                // Run to run: the same bits, forward and backward.
                CHECK(bitwise_equal(run_case<Map, float, chunked_backend>(2, 3, L, causal, padded), cf));
            }
}

/// A host tensor's copy in system memory, and back.
template <class T>
struct on_system {
    typename system_t::template buffer<T> buf;
    index_t n;
    on_system(const system_t& sys, const T* p, index_t count) : buf(sys.template make_buffer<T>(count)), n(count) {
        const auto m = sys.mirror(p, count);
        sys.launch(count, kattn::detail::copy_into<T>{m.get(), buf.data()});
    }
    on_system(const system_t& sys, index_t count) : buf(sys.template make_buffer<T>(count)), n(count) {}
    std::vector<T> host(const system_t& sys) const {
        std::vector<T> out(static_cast<std::size_t>(n));
        sys.to_host(out.data(), buf.data(), n);
        return out;
    }
};

}  // namespace

TEST_CASE_TEMPLATE_DEFINE("chunked backend equals the reference backend (double and float)", Map,
                          kt_chunked_every_map) {
    compare_all<Map>();
}
TEST_CASE_TEMPLATE_APPLY(kt_chunked_every_map, kattn::type_list_apply_t<std::tuple, kattn::features::all>);

TEST_CASE_TEMPLATE("chunked backend with Ω = I (no products with Ω) equals the reference", Map, features::elu,
                   features::favor, features::softmax_features) {
    for (index_t L : {7, 150})
        for (bool causal : {false, true})
            for (bool padded : {false, true}) {
                INFO(Map::name, " L=", L, " causal=", causal, " padded=", padded);
                check_close(kt::run_identity_case<Map, double, chunked_backend>(2, 3, L, causal, padded),
                            kt::run_identity_case<Map, double, backends::reference>(2, 3, L, causal, padded), L, 1e-10);
                const auto cf = kt::run_identity_case<Map, float, chunked_backend>(2, 3, L, causal, padded);
                check_close(cf, kt::run_identity_case<Map, float, backends::reference>(2, 3, L, causal, padded), L,
                            float_tol, float_grad_tol<Map>, float_floor);
                CHECK(bitwise_equal(kt::run_identity_case<Map, float, chunked_backend>(2, 3, L, causal, padded), cf));
            }
}

TEST_CASE("chunked backend: non-causal attention with q_len != k_len and key lengths; features()") {
    const attention_config cfg{.head_dim = 8, .value_dim = 5, .num_features = 16, .seed = 5};
    const auto q = randn<double, 4>({2, 2, 30, 8}, 1, 0.5), k = randn<double, 4>({2, 2, 90, 8}, 2, 0.5);
    const auto v = randn<double, 4>({2, 2, 90, 5}, 3);
    const std::vector<index_t> lens{90, 17};
    const attn<features::favor, double, backends::reference> ar(cfg);
    const attn<features::favor, double, chunked_backend> ac(cfg);
    CHECK(rel_err(ac(q, k, v, key_lengths(lens)), ar(q, k, v, key_lengths(lens))) < 1e-10);
    const auto G = randn<double, 4>({2, 2, 30, 5}, 4);
    const auto gc = ac.backward(q, k, v, G, key_lengths(lens));
    const auto gr = ar.backward(q, k, v, G, key_lengths(lens));
    CHECK(rel_err(gc.dq, gr.dq) < 1e-10);
    CHECK(rel_err(gc.dk, gr.dk) < 1e-10);
    CHECK(rel_err(gc.dv, gr.dv) < 1e-10);
    CHECK(rel_err(gc.d_omega, gr.d_omega) < 1e-10);

    const attention_config fc{.head_dim = 16, .value_dim = 4, .num_features = 64, .seed = 9};
    const auto xd = randn<double, 2>({150, 16}, 5, 0.5);
    const auto xf = randn<float, 2>({150, 16}, 5, 0.5);
    CHECK(rel_err(attn<features::favor, double, chunked_backend>(fc).features(xd),
                  attn<features::favor, double, backends::reference>(fc).features(xd)) < 1e-12);
    CHECK(rel_err(attn<features::trig, double, chunked_backend>(fc).features(xd),
                  attn<features::trig, double, backends::reference>(fc).features(xd)) < 1e-12);
    CHECK(rel_err(attn<features::favor, float, chunked_backend>(fc).features(xf),
                  attn<features::favor, float, backends::reference>(fc).features(xf)) < float_tol);
}

TEST_CASE_TEMPLATE_DEFINE(
    "chunked backend: packed documents run natively and equal the reference's, one document at a "
    "time",
    Map, kt_chunked_packed_every_map) {
    static_assert(execution_backend_traits<chunked_backend>::packs_sequences);
    // Documents of 1, 63, 1, 85 (a tail chunk of 21), 64 (exactly one chunk) and 136 tokens.
    const std::vector<index_t> cu{0, 1, 64, 65, 150, 214, 350};
    const packed_sequences docs{cu};
    const auto q = randn<double, 4>({1, 3, 350, 8}, 1, 0.5), k = randn<double, 4>({1, 3, 350, 8}, 2, 0.5);
    const auto v = randn<double, 4>({1, 3, 350, 5}, 3), G = randn<double, 4>({1, 3, 350, 5}, 4);
    const attn<Map, double, backends::reference> ar(kt::case_config<Map>());
    const attn<Map, double, chunked_backend> ac(kt::case_config<Map>());
    for (bool causal : {false, true}) {
        INFO(Map::name, " causal=", causal);
        const auto orf = causal ? ar(q, k, v, kattn::causal, docs) : ar(q, k, v, docs);
        const auto oc = causal ? ac(q, k, v, kattn::causal, docs) : ac(q, k, v, docs);
        CHECK(rel_err(oc, orf) < 1e-10);
        const auto gr = causal ? ar.backward(q, k, v, G, kattn::causal, docs) : ar.backward(q, k, v, G, docs);
        const auto gc = causal ? ac.backward(q, k, v, G, kattn::causal, docs) : ac.backward(q, k, v, G, docs);
        CHECK(rel_err(gc.dq, gr.dq) < 1e-10);
        CHECK(rel_err(gc.dk, gr.dk) < 1e-10);
        CHECK(rel_err(gc.dv, gr.dv) < 1e-10);
        CHECK(rel_err(gc.d_omega, gr.d_omega) < 1e-10);
        if (gr.d_bias.size()) CHECK(rel_err(gc.d_bias, gr.d_bias) < 1e-10);
        // Not the unpacked result: the documents do not see each other.
        const auto whole = causal ? ac(q, k, v, kattn::causal) : ac(q, k, v);
        CHECK(rel_err(oc, whole) > 1e-3);
        // A dominant key in document 1 (tokens 1-63) leaves every other document's rows
        // bitwise unchanged: each document has its own stabiliser references.
        // (favor: key 10 along the first frequency, so its shift ≈ |ω|²/2 tops the others').
        auto k2 = k;
        for (std::size_t h = 0; h < 3; ++h)
            for (std::size_t c = 0; c < 8; ++c) k2(0, h, 10, c) = ac.omega()(c, 0) / ac.input_scale();
        const auto o2 = causal ? ac(q, k2, v, kattn::causal, docs) : ac(q, k2, v, docs);
        bool others_same = true;
        for (std::size_t h = 0; h < 3; ++h)
            for (std::size_t t = 64; t < 350; ++t)
                for (std::size_t c = 0; c < 5; ++c) others_same = others_same && o2(0, h, t, c) == oc(0, h, t, c);
        CHECK(others_same);
    }
}
TEST_CASE_TEMPLATE_APPLY(kt_chunked_packed_every_map, kattn::type_list_apply_t<std::tuple, kattn::features::all>);

TEST_CASE_TEMPLATE("chunked backend: packed documents across the chunk scans' segments (16 chunks each)", Map,
                   features::favor, features::elu) {
    // 66 chunks, so 5 segments of the causal scans (chunked/scans.hpp) and their carries:
    // 30 tokens (chunk 0), 1,100 (chunks 1-18: across the first segment edge), 1 (chunk 19),
    // 768 (chunks 20-31: ending at a segment's last chunk), 2,000 (chunks 32-63: two
    // whole segments from an edge) and 100 (chunks 64-65). favor rescales between blocks
    // (stabiliser references), elu does not.
    const std::vector<index_t> cu{0, 30, 1130, 1131, 1899, 3899, 3999};
    const packed_sequences docs{cu};
    const auto q = randn<double, 4>({1, 2, 3999, 8}, 5, 0.5), k = randn<double, 4>({1, 2, 3999, 8}, 6, 0.5);
    const auto v = randn<double, 4>({1, 2, 3999, 5}, 7), G = randn<double, 4>({1, 2, 3999, 5}, 8);
    const attn<Map, double, backends::reference> ar(kt::case_config<Map>());
    const attn<Map, double, chunked_backend> ac(kt::case_config<Map>());
    for (bool causal : {false, true}) {
        INFO(Map::name, " causal=", causal);
        const auto orf = causal ? ar(q, k, v, kattn::causal, docs) : ar(q, k, v, docs);
        CHECK(rel_err(causal ? ac(q, k, v, kattn::causal, docs) : ac(q, k, v, docs), orf) < 1e-10);
        const auto gr = causal ? ar.backward(q, k, v, G, kattn::causal, docs) : ar.backward(q, k, v, G, docs);
        const auto gc = causal ? ac.backward(q, k, v, G, kattn::causal, docs) : ac.backward(q, k, v, G, docs);
        CHECK(rel_err(gc.dq, gr.dq) < 1e-10);
        CHECK(rel_err(gc.dk, gr.dk) < 1e-10);
        CHECK(rel_err(gc.dv, gr.dv) < 1e-10);
        CHECK(rel_err(gc.d_omega, gr.d_omega) < 1e-10);
    }
}

TEST_CASE("chunked backend: packed documents through the device-resident call (cu_seqlens in system memory)") {
    const attention_config cfg{.head_dim = 8, .value_dim = 5, .num_features = 16, .seed = 21};
    const attn<features::favor, double, chunked_backend> a(cfg);
    const std::vector<index_t> cu{0, 70, 71, 200};
    const auto q = randn<double, 4>({1, 2, 200, 8}, 1, 0.5), k = randn<double, 4>({1, 2, 200, 8}, 2, 0.5);
    const auto v = randn<double, 4>({1, 2, 200, 5}, 3);
    const system_t sys = exact_system();
    const backends::device_parameters<features::favor, double, system_t> params(sys, a.spectral());
    const on_system<double> qs(sys, q.data(), index_t(q.size())), ks(sys, k.data(), index_t(k.size())),
        vs(sys, v.data(), index_t(v.size()));
    const on_system<index_t> cus(sys, cu.data(), 4);
    const auto in = [](const on_system<double>& x, index_t dim) {
        return backends::head_major<const double>(x.buf.data(), 1, 2, 200, dim);
    };
    for (bool causal : {false, true}) {
        on_system<double> out(sys, index_t(v.size()));
        backends::device_options o{causal, nullptr, double(a.input_scale()), 1e-6, cus.buf.data(), 3};
        chunked_backend::device_forward(sys, params, in(qs, 8), in(ks, 8), in(vs, 5),
                                        backends::head_major(out.buf.data(), 1, 2, 200, 5), o);
        const packed_sequences docs{cu};
        const auto want = causal ? a(q, k, v, kattn::causal, docs) : a(q, k, v, docs);
        CHECK(bitwise_equal(out.host(sys), want));
        // Offsets that do not end at the length, or do not increase, are refused by name.
        const std::vector<index_t> bad{0, 70, 70, 200}, short_end{0, 70, 71, 199};
        for (const auto* b : {&bad, &short_end}) {
            const on_system<index_t> bs(sys, b->data(), 4);
            o.cu_seqlens = bs.buf.data();
            CHECK(kt::error_text([&] {
                      chunked_backend::device_forward(sys, params, in(qs, 8), in(ks, 8), in(vs, 5),
                                                      backends::head_major(out.buf.data(), 1, 2, 200, 5), o);
                  }).find("'cu_seqlens'") != std::string::npos);
        }
    }
}

/// A workspace allocator that counts requests (device memory from cudaMalloc on a GPU).
struct request_counter {
    std::size_t requests = 0;
    static void* allocate(void* ctx, std::size_t bytes, void*) {
        ++static_cast<request_counter*>(ctx)->requests;
#if defined(__CUDACC__)
        void* p = nullptr;
        return cudaMalloc(&p, bytes) == cudaSuccess ? p : nullptr;
#else
        return ::operator new(bytes, std::align_val_t(backends::workspace_alignment));
#endif
    }
    static void deallocate(void*, void* p, std::size_t, void*) {
#if defined(__CUDACC__)
        cudaFree(p);
#else
        ::operator delete(p, std::align_val_t(backends::workspace_alignment));
#endif
    }
    backends::workspace_allocator hook() { return {this, &allocate, &deallocate}; }
};

/// The forward's output stage in tiles (tiled_system(true)) against the products and row
/// passes (false) and the reference, for one map and type: non-causal (L = 128: whole tiles,
/// one state per head; L = 150: no tiles), causal (tail chunk), padded keys, and packed
/// documents (causal and not). Where the tiles apply, the call makes fewer scratch requests
/// (no O, nor K and Oa when causal), and the workspace query counts that.
template <class Map, class T>
void compare_tiled_outputs() {
    using W = backends::work_t<T>;
    const attn<Map, T, backends::reference> ar(kt::case_config<Map>());
    const attn<Map, T, chunked_backend> a(kt::case_config<Map>());
    request_counter n_on, n_off;
    system_t on = tiled_system(true), off = tiled_system(false);
    on.allocator = n_on.hook();
    off.allocator = n_off.hook();
    const backends::device_parameters<Map, W, system_t> params(on, a.spectral());
    const index_t B = 2, H = 2, d = 8, dv = 5;
    const double tol = std::is_same_v<T, double> ? 1e-10 : float_tol;
    const auto run = [&](const system_t& sys, const on_system<T>& q, const on_system<T>& k, const on_system<T>& v,
                         index_t Bn, index_t L, const backends::device_options& o) {
        on_system<T> out(sys, Bn * H * L * dv);
        chunked_backend::device_forward(sys, params, backends::head_major<const T>(q.buf.data(), Bn, H, L, d),
                                        backends::head_major<const T>(k.buf.data(), Bn, H, L, d),
                                        backends::head_major<const T>(v.buf.data(), Bn, H, L, dv),
                                        backends::head_major(out.buf.data(), Bn, H, L, dv), o);
        return out.host(sys);
    };
    const auto same = [&](const std::vector<T>& x, const std::vector<T>& y) {
        return tiles_bitwise ? bitwise_equal(x, y) : rel_err(x, y) < tol;
    };
    const auto workspace = [&](const system_t& sys, index_t Bn, index_t L, const backends::device_options& o) {
        return chunked_backend::device_workspace_bytes(sys, params, backends::device_pass::forward, Bn, H, L, L, dv, o);
    };
    // Where the system takes the tiles (host: always; CUDA: float, F a multiple of 8).
    const bool tiles_apply = on.template fuses_chunk_outputs<W>(Map::feature_dim(kt::case_config<Map>().num_features),
                                                                detail::chunked_impl::value_columns(dv));
    for (index_t L : {128, 150})
        for (bool causal : {false, true})
            for (bool padded : {false, true}) {
                INFO(Map::name, " L=", L, " causal=", causal, " padded=", padded);
                const auto q = randn<T, 4>({2, 2, std::size_t(L), 8}, 1, 0.5);
                const auto k = randn<T, 4>({2, 2, std::size_t(L), 8}, 2, 0.5);
                const auto v = randn<T, 4>({2, 2, std::size_t(L), 5}, 3);
                const auto lens_host = kt::case_lengths(B, L, padded);
                const on_system<index_t> lens(on, lens_host.data(), B);
                const on_system<T> qs(on, q.data(), index_t(q.size())), ks(on, k.data(), index_t(k.size())),
                    vs(on, v.data(), index_t(v.size()));
                const backends::device_options o{causal, lens.buf.data(), double(a.input_scale()), 1e-6};
                n_on.requests = n_off.requests = 0;
                const auto t = run(on, qs, ks, vs, B, L, o), u = run(off, qs, ks, vs, B, L, o);
                CHECK(same(t, u));
                CHECK((n_on.requests < n_off.requests) == ((causal || L % 64 == 0) && tiles_apply));
                const kattn::key_lengths kl(lens_host);
                CHECK(rel_err(t, causal ? ar(q, k, v, kattn::causal, kl) : ar(q, k, v, kl)) < tol);
                if (causal) CHECK((workspace(on, B, L, o) < workspace(off, B, L, o)) == tiles_apply);
            }
    // Packed documents of 1, 63, 1, 85, 64 and 136 tokens.
    const std::vector<index_t> cu{0, 1, 64, 65, 150, 214, 350};
    const index_t L = 350;
    const auto q = randn<T, 4>({1, 2, 350, 8}, 4, 0.5), k = randn<T, 4>({1, 2, 350, 8}, 5, 0.5);
    const auto v = randn<T, 4>({1, 2, 350, 5}, 6);
    const on_system<T> qs(on, q.data(), index_t(q.size())), ks(on, k.data(), index_t(k.size())),
        vs(on, v.data(), index_t(v.size()));
    const on_system<index_t> cus(on, cu.data(), index_t(cu.size()));
    for (bool causal : {false, true}) {
        INFO(Map::name, " packed, causal=", causal);
        const backends::device_options o{causal, nullptr, double(a.input_scale()), 1e-6, cus.buf.data(), 6};
        n_on.requests = n_off.requests = 0;
        const auto t = run(on, qs, ks, vs, 1, L, o), u = run(off, qs, ks, vs, 1, L, o);
        CHECK(same(t, u));
        CHECK((n_on.requests < n_off.requests) == tiles_apply);
        if (causal) CHECK((workspace(on, 1, L, o) < workspace(off, 1, L, o)) == tiles_apply);
        const packed_sequences docs{cu};
        CHECK(rel_err(t, causal ? ar(q, k, v, kattn::causal, docs) : ar(q, k, v, docs)) < tol);
    }
}

TEST_CASE_TEMPLATE_DEFINE("chunked backend: the output stage in tiles of 64 query rows equals its products and passes",
                          Map, kt_chunked_tiled_every_map) {
    compare_tiled_outputs<Map, double>();
    compare_tiled_outputs<Map, float>();
}
TEST_CASE_TEMPLATE_APPLY(kt_chunked_tiled_every_map, kattn::type_list_apply_t<std::tuple, kattn::features::all>);

/// The causal block states and their scan within segments in one pass (states_system(true))
/// against the batched product and the scan (false), forward and backward: bitwise on the
/// host, within the TF32 bounds on a GPU; and against the reference. Lengths from one block
/// to 19 blocks (two segments, a tail chunk), padded keys, and packed documents.
template <class Map, class T>
void compare_fused_states() {
    using W = backends::work_t<T>;
    const attn<Map, T, backends::reference> ar(kt::case_config<Map>());
    const attn<Map, T, chunked_backend> a(kt::case_config<Map>());
    const system_t on = states_system(true), off = states_system(false);
    const backends::device_parameters<Map, W, system_t> params(on, a.spectral());
    const index_t H = 2, d = 8, dv = 5, P = Map::projection_dim(a.spectral().m);
    const double tol = std::is_same_v<T, double> ? 1e-10 : float_tol;
    const auto same = [&](const std::vector<T>& x, const std::vector<T>& y) {
        return tiles_bitwise ? bitwise_equal(x, y) : rel_err(x, y) < tol;
    };
    // out, then dq, dk, dv of a fixed cotangent, for B batches of L tokens.
    const auto run = [&](const system_t& sys, index_t B, index_t L, const backends::device_options& o) {
        const auto q = randn<T, 4>({std::size_t(B), 2, std::size_t(L), 8}, 1, 0.5);
        const auto k = randn<T, 4>({std::size_t(B), 2, std::size_t(L), 8}, 2, 0.5);
        const auto v = randn<T, 4>({std::size_t(B), 2, std::size_t(L), 5}, 3);
        const auto g = randn<T, 4>({std::size_t(B), 2, std::size_t(L), 5}, 4);
        const on_system<T> qs(sys, q.data(), index_t(q.size())), ks(sys, k.data(), index_t(k.size())),
            vs(sys, v.data(), index_t(v.size())), gs(sys, g.data(), index_t(g.size()));
        on_system<T> out(sys, B * H * L * dv), dq(sys, B * H * L * d), dk(sys, B * H * L * d), dvv(sys, B * H * L * dv);
        on_system<W> dw(sys, d * P);
        const auto view = [&](const on_system<T>& x, index_t w) {
            return backends::head_major<const T>(x.buf.data(), B, H, L, w);
        };
        chunked_backend::device_forward(sys, params, view(qs, d), view(ks, d), view(vs, dv),
                                        backends::head_major(out.buf.data(), B, H, L, dv), o);
        chunked_backend::device_backward(
            sys, params, view(qs, d), view(ks, d), view(vs, dv), view(gs, dv),
            backends::head_major(dq.buf.data(), B, H, L, d), backends::head_major(dk.buf.data(), B, H, L, d),
            backends::head_major(dvv.buf.data(), B, H, L, dv), dw.buf.data(), static_cast<W*>(nullptr), o);
        return std::vector<std::vector<T>>{out.host(sys), dq.host(sys), dk.host(sys), dvv.host(sys)};
    };
    const auto check = [&](index_t B, index_t L, const backends::device_options& o, const auto& reference) {
        const auto x = run(on, B, L, o), y = run(off, B, L, o);
        for (std::size_t i = 0; i < x.size(); ++i) CHECK(same(x[i], y[i]));
        CHECK(rel_err(x[0], reference) < tol);
    };
    for (index_t L : {64, 150, 1200})
        for (bool padded : {false, true}) {
            INFO(Map::name, " L=", L, " padded=", padded);
            const index_t B = 2;
            const auto lens_host = kt::case_lengths(B, L, padded);
            const on_system<index_t> lens(on, lens_host.data(), B);
            const backends::device_options o{true, lens.buf.data(), double(a.input_scale()), 1e-6};
            const auto q = randn<T, 4>({2, 2, std::size_t(L), 8}, 1, 0.5);
            const auto k = randn<T, 4>({2, 2, std::size_t(L), 8}, 2, 0.5);
            const auto v = randn<T, 4>({2, 2, std::size_t(L), 5}, 3);
            check(B, L, o, ar(q, k, v, kattn::causal, kattn::key_lengths(lens_host)));
        }
    // Packed documents of 1, 63, 1, 85, 64, 136 and 850 tokens (a document across segments).
    const std::vector<index_t> cu{0, 1, 64, 65, 150, 214, 350, 1200};
    const on_system<index_t> cus(on, cu.data(), index_t(cu.size()));
    INFO(Map::name, " packed");
    const backends::device_options o{true, nullptr, double(a.input_scale()), 1e-6, cus.buf.data(), 7};
    const auto q = randn<T, 4>({1, 2, 1200, 8}, 1, 0.5), k = randn<T, 4>({1, 2, 1200, 8}, 2, 0.5);
    const auto v = randn<T, 4>({1, 2, 1200, 5}, 3);
    check(1, 1200, o, ar(q, k, v, kattn::causal, packed_sequences{cu}));
}

TEST_CASE_TEMPLATE("chunked backend: the causal block states and their scan in one pass equal the product and scan",
                   Map, features::favor, features::elu, features::trig, features::softmax_features) {
    compare_fused_states<Map, double>();
    compare_fused_states<Map, float>();
}

TEST_CASE_TEMPLATE(
    "chunked backend: step equals the causal forward and the reference step; device_step keeps the "
    "state in system memory",
    Map, features::favor, features::trig, features::elu) {
    const attention_config cfg = kt::case_config<Map>();
    const attn<Map, double, chunked_backend> a(cfg);
    const attn<Map, double, backends::reference> ar(cfg);
    const index_t B = 2, H = 2, L = 70, F = a.feature_dim();
    const auto q = randn<double, 4>({2, 2, 70, 8}, 11, 0.5), k = randn<double, 4>({2, 2, 70, 8}, 12, 0.5);
    const auto v = randn<double, 4>({2, 2, 70, 5}, 13);
    const auto full = a(q, k, v, kattn::causal);
    auto st = a.initial_state(B, H);
    auto sr = ar.initial_state(B, H);
    const system_t sys = exact_system();
    const backends::device_parameters<Map, double, system_t> params(sys, a.spectral());
    const std::vector<double> zeros(std::size_t(B * H * F * 5), 0.0);
    const std::vector<index_t> no_steps(std::size_t(B * H), 0);
    on_system<double> S(sys, zeros.data(), B * H * F * 5), z(sys, zeros.data(), B * H * F), C(sys, zeros.data(), B * H);
    on_system<index_t> steps(sys, no_steps.data(), B * H);
    const backends::recurrent_state_view dst{S.buf.data(), z.buf.data(), C.buf.data(), steps.buf.data()};
    double worst = 0, worst_ref = 0, worst_dev = 0;
    for (index_t t = 0; t < L; ++t) {
        const auto qt = ::kt::token_at(q, t), kt = ::kt::token_at(k, t), vt = ::kt::token_at(v, t);
        const auto o = a.step(st, qt, kt, vt);
        const auto orf = ar.step(sr, qt, kt, vt);
        const on_system<double> qd(sys, qt.data(), 32), kd(sys, kt.data(), 32), vd(sys, vt.data(), 20);
        on_system<double> od(sys, 20);
        chunked_backend::device_step(sys, params, dst, backends::head_major<const double>(qd.buf.data(), 2, 2, 1, 8),
                                     backends::head_major<const double>(kd.buf.data(), 2, 2, 1, 8),
                                     backends::head_major<const double>(vd.buf.data(), 2, 2, 1, 5),
                                     backends::head_major(od.buf.data(), 2, 2, 1, 5),
                                     {false, nullptr, double(a.input_scale()), 1e-6});
        const auto ov = od.host(sys);
        for (std::size_t b = 0; b < 2; ++b)
            for (std::size_t h = 0; h < 2; ++h)
                for (std::size_t c = 0; c < 5; ++c) {
                    worst = std::max(worst, std::abs(o(b, h, c) - full(b, h, std::size_t(t), c)));
                    worst_ref = std::max(worst_ref, std::abs(o(b, h, c) - orf(b, h, c)));
                    worst_dev = std::max(worst_dev, std::abs(ov[(b * 2 + h) * 5 + c] - o(b, h, c)));
                }
    }
    CHECK(worst < 1e-9);
    CHECK(worst_ref < 1e-12);
    CHECK(worst_dev == 0);  // the device-resident step gives the operator's bits
}

TEST_CASE("chunked backend: 1,000 causal tokens (16 chunks, a tail of 40) against the reference") {
    const attention_config cfg{.head_dim = 16, .value_dim = 8, .num_features = 32, .seed = 11};
    const auto q = randn<double, 4>({1, 2, 1000, 16}, 1, 0.5), k = randn<double, 4>({1, 2, 1000, 16}, 2, 0.5);
    const auto v = randn<double, 4>({1, 2, 1000, 8}, 3);
    const attn<features::favor, double, backends::reference> ar(cfg);
    const attn<features::favor, double, chunked_backend> ac(cfg);
    CHECK(rel_err(ac(q, k, v, kattn::causal), ar(q, k, v, kattn::causal)) < 1e-10);
    const attn<features::elu, double, backends::reference> er(cfg);
    const attn<features::elu, double, chunked_backend> ec(cfg);
    CHECK(rel_err(ec(q, k, v, kattn::causal), er(q, k, v, kattn::causal)) < 1e-10);
    const auto G = randn<double, 4>({1, 2, 1000, 8}, 4);
    const auto gc = ac.backward(q, k, v, G, kattn::causal);
    const auto gr = ar.backward(q, k, v, G, kattn::causal);
    CHECK(rel_err(gc.dq, gr.dq) < 1e-10);
    CHECK(rel_err(gc.dk, gr.dk) < 1e-10);
    CHECK(rel_err(gc.dv, gr.dv) < 1e-10);
    CHECK(rel_err(gc.d_omega, gr.d_omega) < 1e-10);
}

TEST_CASE("chunked backend: a large future key never changes earlier outputs (favor, causal)") {
    const attention_config cfg{.head_dim = 8, .value_dim = 5, .num_features = 16, .seed = 7};
    const attn<features::favor, double, chunked_backend> a(cfg);
    auto q = randn<double, 2>({200, 8}, 1, 0.5), k = randn<double, 2>({200, 8}, 2, 0.5);
    const auto v = randn<double, 2>({200, 5}, 3);
    const auto before = a(q, k, v, kattn::causal);
    for (std::size_t c = 0; c < 8; ++c) k(150, c) = 6.0;  // key 150 dominates every later maximum
    const auto after = a(q, k, v, kattn::causal);
    for (std::size_t i = 0; i < 150; ++i)
        for (std::size_t c = 0; c < 5; ++c) CHECK(after(i, c) == before(i, c));
    const attn<features::favor, double, backends::reference> ar(cfg);
    CHECK(rel_err(after, ar(q, k, v, kattn::causal)) < 1e-10);
}

TEST_CASE_TEMPLATE("chunked backend: the device-resident call on head-major, token-major and interleaved views", T,
                   float, double) {
    using W = backends::work_t<T>;
    const attention_config cfg{.head_dim = 8, .value_dim = 5, .num_features = 16, .seed = 13};
    const attn<features::favor, T, chunked_backend> a(cfg);
    const index_t B = 2, H = 3, L = 100, d = 8, dv = 5;
    const auto q = randn<T, 4>({2, 3, 100, 8}, 1, 0.5), k = randn<T, 4>({2, 3, 100, 8}, 2, 0.5);
    const auto v = randn<T, 4>({2, 3, 100, 5}, 3);
    const system_t sys = exact_system();
    const backends::device_parameters<features::favor, W, system_t> params(sys, a.spectral());
    const std::vector<index_t> lens_host{100, 37};
    const on_system<index_t> lens(sys, lens_host.data(), B);

    // Token-major copies [B, L, H, d], and one interleaved buffer [B, L, 3, H, d] holding q, k, v (v zero-padded).
    std::vector<T> qt(q.size()), kt(k.size()), vt(v.size()), qkv(std::size_t(B * L * 3 * H * d), T(0));
    for (index_t b = 0; b < B; ++b)
        for (index_t h = 0; h < H; ++h)
            for (index_t l = 0; l < L; ++l) {
                for (index_t c = 0; c < d; ++c) {
                    const auto src = std::size_t(((b * H + h) * L + l) * d + c);
                    qt[std::size_t(((b * L + l) * H + h) * d + c)] = q.data()[src];
                    kt[std::size_t(((b * L + l) * H + h) * d + c)] = k.data()[src];
                    qkv[std::size_t((((b * L + l) * 3 + 0) * H + h) * d + c)] = q.data()[src];
                    qkv[std::size_t((((b * L + l) * 3 + 1) * H + h) * d + c)] = k.data()[src];
                }
                for (index_t c = 0; c < dv; ++c) {
                    const auto src = std::size_t(((b * H + h) * L + l) * dv + c);
                    vt[std::size_t(((b * L + l) * H + h) * dv + c)] = v.data()[src];
                    qkv[std::size_t((((b * L + l) * 3 + 2) * H + h) * d + c)] = v.data()[src];
                }
            }
    const index_t n_qk = B * H * L * d, n_v = B * H * L * dv;
    const on_system<T> qh(sys, q.data(), n_qk), kh(sys, k.data(), n_qk), vh(sys, v.data(), n_v);
    const on_system<T> qm(sys, qt.data(), n_qk), km(sys, kt.data(), n_qk), vm(sys, vt.data(), n_v);
    const on_system<T> packed(sys, qkv.data(), index_t(qkv.size()));
    for (bool causal : {false, true}) {
        INFO("causal=", causal);
        const backends::device_options o{causal, lens.buf.data(), double(a.input_scale()), 1e-6};
        on_system<T> oh(sys, n_v), om(sys, n_v), op(sys, n_v);
        chunked_backend::device_forward(sys, params, backends::head_major<const T>(qh.buf.data(), B, H, L, d),
                                        backends::head_major<const T>(kh.buf.data(), B, H, L, d),
                                        backends::head_major<const T>(vh.buf.data(), B, H, L, dv),
                                        backends::head_major(oh.buf.data(), B, H, L, dv), o);
        chunked_backend::device_forward(sys, params, backends::token_major<const T>(qm.buf.data(), B, L, H, d),
                                        backends::token_major<const T>(km.buf.data(), B, L, H, d),
                                        backends::token_major<const T>(vm.buf.data(), B, L, H, dv),
                                        backends::token_major(om.buf.data(), B, L, H, dv), o);
        const T* base = packed.buf.data();
        const auto slot = [&](index_t s, index_t dim) {
            return backends::strided_view<const T>{base + s * H * d, B, H, L, dim, L * 3 * H * d, d, 3 * H * d};
        };
        chunked_backend::device_forward(sys, params, slot(0, d), slot(1, d), slot(2, dv),
                                        backends::head_major(op.buf.data(), B, H, L, dv), o);
        const auto ho = oh.host(sys), mo = om.host(sys), po = op.host(sys);
        // The reference, and the token-major result read back in head-major order.
        const attn<features::favor, T, backends::reference> ar(cfg);
        const auto r =
            causal ? ar(q, k, v, kattn::causal, key_lengths(lens_host)) : ar(q, k, v, key_lengths(lens_host));
        std::vector<T> mo_h(mo.size());
        for (index_t b = 0; b < B; ++b)
            for (index_t h = 0; h < H; ++h)
                for (index_t l = 0; l < L; ++l)
                    for (index_t c = 0; c < dv; ++c)
                        mo_h[std::size_t(((b * H + h) * L + l) * dv + c)] =
                            mo[std::size_t(((b * L + l) * H + h) * dv + c)];
        CHECK(rel_err(ho, r) < (std::is_same_v<T, double> ? 1e-10 : 2e-5));
        CHECK(bitwise_equal(mo_h, ho));
        CHECK(bitwise_equal(po, ho));

        // Backward on both layouts: the same bits, and the reference's gradients.
        const auto G = randn<T, 4>({2, 3, 100, 5}, 4);
        std::vector<T> Gt(G.size());
        for (index_t b = 0; b < B; ++b)
            for (index_t h = 0; h < H; ++h)
                for (index_t l = 0; l < L; ++l)
                    for (index_t c = 0; c < dv; ++c)
                        Gt[std::size_t(((b * L + l) * H + h) * dv + c)] =
                            G.data()[std::size_t(((b * H + h) * L + l) * dv + c)];
        const on_system<T> Gh(sys, G.data(), n_v), Gm(sys, Gt.data(), n_v);
        on_system<T> dqh(sys, n_qk), dkh(sys, n_qk), dvh(sys, n_v), dqm(sys, n_qk), dkm(sys, n_qk), dvm(sys, n_v);
        on_system<W> dom(sys, 8 * 16), dom_m(sys, 8 * 16);
        chunked_backend::device_backward(
            sys, params, backends::head_major<const T>(qh.buf.data(), B, H, L, d),
            backends::head_major<const T>(kh.buf.data(), B, H, L, d),
            backends::head_major<const T>(vh.buf.data(), B, H, L, dv),
            backends::head_major<const T>(Gh.buf.data(), B, H, L, dv), backends::head_major(dqh.buf.data(), B, H, L, d),
            backends::head_major(dkh.buf.data(), B, H, L, d), backends::head_major(dvh.buf.data(), B, H, L, dv),
            dom.buf.data(), static_cast<W*>(nullptr), o);
        chunked_backend::device_backward(
            sys, params, backends::token_major<const T>(qm.buf.data(), B, L, H, d),
            backends::token_major<const T>(km.buf.data(), B, L, H, d),
            backends::token_major<const T>(vm.buf.data(), B, L, H, dv),
            backends::token_major<const T>(Gm.buf.data(), B, L, H, dv),
            backends::token_major(dqm.buf.data(), B, L, H, d), backends::token_major(dkm.buf.data(), B, L, H, d),
            backends::token_major(dvm.buf.data(), B, L, H, dv), dom_m.buf.data(), static_cast<W*>(nullptr), o);
        const auto gr = causal ? ar.backward(q, k, v, G, kattn::causal, key_lengths(lens_host))
                               : ar.backward(q, k, v, G, key_lengths(lens_host));
        const double tol = std::is_same_v<T, double> ? 1e-10 : 2e-5;
        CHECK(rel_err(dqh.host(sys), gr.dq) < tol);
        CHECK(rel_err(dkh.host(sys), gr.dk) < tol);
        CHECK(rel_err(dvh.host(sys), gr.dv) < tol);
        CHECK(rel_err(dom.host(sys), gr.d_omega) < tol);
        CHECK(bitwise_equal(dom_m.host(sys), dom.host(sys)));
        const auto dq_m = dqm.host(sys), dq_h = dqh.host(sys);
        bool same = true;
        for (index_t b = 0; b < B; ++b)
            for (index_t h = 0; h < H; ++h)
                for (index_t l = 0; l < L; ++l)
                    for (index_t c = 0; c < d; ++c)
                        same = same && dq_m[std::size_t(((b * L + l) * H + h) * d + c)] ==
                                           dq_h[std::size_t(((b * H + h) * L + l) * d + c)];
        CHECK(same);
        // A gradient that overlaps an input is refused before anything is written.
        CHECK(kt::error_text([&] {
                  chunked_backend::device_backward(sys, params,
                                                   backends::head_major<const T>(qh.buf.data(), B, H, L, d),
                                                   backends::head_major<const T>(kh.buf.data(), B, H, L, d),
                                                   backends::head_major<const T>(vh.buf.data(), B, H, L, dv),
                                                   backends::head_major<const T>(Gh.buf.data(), B, H, L, dv),
                                                   backends::head_major(const_cast<T*>(kh.buf.data()), B, H, L, d),
                                                   backends::head_major(dkh.buf.data(), B, H, L, d),
                                                   backends::head_major(dvh.buf.data(), B, H, L, dv),
                                                   static_cast<W*>(nullptr), static_cast<W*>(nullptr), o);
              }).find("'dq': expected memory disjoint from k") != std::string::npos);
    }
}

#ifdef KATTN_TEST_HOST_ONLY
TEST_CASE("chunked backend (host system): bf16 inputs and outputs, float intermediates") {
    // The 16-bit path of the device-resident calls: read and write in bf16, compute in
    // float. Against the float operator on the same (bf16-representable) inputs, the
    // results differ by the final rounding to bf16 (2^-8 relative) and little more.
    const attention_config cfg{.head_dim = 8, .value_dim = 5, .num_features = 16, .seed = 19};
    const attn<features::favor, float, backends::reference> ar(cfg);
    const index_t B = 1, H = 2, L = 90, d = 8, dv = 5;
    auto q = randn<float, 4>({1, 2, 90, 8}, 1, 0.5), k = randn<float, 4>({1, 2, 90, 8}, 2, 0.5);
    auto v = randn<float, 4>({1, 2, 90, 5}, 3), G = randn<float, 4>({1, 2, 90, 5}, 4);
    const auto to_bf16 = [](xt::xtensor<float, 4>& x) {
        std::vector<bf16> r(x.size());
        for (std::size_t i = 0; i < x.size(); ++i) {
            r[i] = bf16(x.data()[i]);
            x.data()[i] = float(r[i]);  // the float reference sees the same inputs
        }
        return r;
    };
    const auto qb = to_bf16(q), kb = to_bf16(k), vb = to_bf16(v), Gb = to_bf16(G);
    const system_t sys{};
    const backends::device_parameters<features::favor, float, system_t> params(sys, ar.spectral());
    for (bool causal : {false, true}) {
        INFO("causal=", causal);
        const backends::device_options o{causal, nullptr, double(ar.input_scale()), 1e-6};
        std::vector<bf16> out(std::size_t(B * H * L * dv)), dq(qb.size()), dk(kb.size()), dvv(vb.size());
        const auto hv = [&](const std::vector<bf16>& x, index_t dim) {
            return backends::head_major<const bf16>(x.data(), B, H, L, dim);
        };
        chunked_backend::device_forward(sys, params, hv(qb, d), hv(kb, d), hv(vb, dv),
                                        backends::head_major(out.data(), B, H, L, dv), o);
        chunked_backend::device_backward(
            sys, params, hv(qb, d), hv(kb, d), hv(vb, dv), hv(Gb, dv), backends::head_major(dq.data(), B, H, L, d),
            backends::head_major(dk.data(), B, H, L, d), backends::head_major(dvv.data(), B, H, L, dv),
            static_cast<float*>(nullptr), static_cast<float*>(nullptr), o);
        const auto r = causal ? ar(q, k, v, kattn::causal) : ar(q, k, v);
        const auto g = causal ? ar.backward(q, k, v, G, kattn::causal) : ar.backward(q, k, v, G);
        const auto widen = [](const std::vector<bf16>& x) {
            std::vector<float> w(x.size());
            for (std::size_t i = 0; i < x.size(); ++i) w[i] = float(x[i]);
            return w;
        };
        CHECK(rel_err(widen(out), r) < 8e-3);
        CHECK(rel_err(widen(dq), g.dq) < 8e-3);
        CHECK(rel_err(widen(dk), g.dk) < 8e-3);
        CHECK(rel_err(widen(dvv), g.dv) < 8e-3);
        CHECK(rel_err(widen(out), r) > 0);  // rounded to bf16, so not the float result
    }
}
#endif

#ifdef KATTN_TEST_HOST_ONLY
/// host_system counting its products.
struct gemm_counting_system : backends::host_system {
    static constexpr const char* name = "gemm_counting";
    static inline int gemms = 0;
    template <class... A>
    void gemm(const A&... a) const {
        ++gemms;
        host_system::gemm(a...);
    }
};

TEST_CASE("chunked backend (host system): Ω = I makes no products with Ω") {
    using counted = backends::chunked<gemm_counting_system>;
    const auto count = [](bool nudge) {
        gemm_counting_system::gemms = 0;
        (void)kt::run_identity_case<features::elu, float, counted>(2, 3, 150, true, true, nudge);
        return gemm_counting_system::gemms;
    };
    // One row block per side (2·3·192 rows): the forward projects q and k; the backward
    // projects them again for its forward, and in its VJPs projects and multiplies dU by
    // Ωᵀ for each side: 8 products, none of them made when Ω = I.
    CHECK(count(false) + 8 == count(true));
}

TEST_CASE("chunked backend (host system): bitwise identical for 1, 2 and 3 threads") {
    const attention_config cfg{.head_dim = 8, .value_dim = 5, .num_features = 16, .seed = 17};
    const attn<features::favor, float, chunked_backend> a(cfg);
    const auto q = randn<float, 4>({2, 2, 150, 8}, 1, 0.5), k = randn<float, 4>({2, 2, 150, 8}, 2, 0.5);
    const auto v = randn<float, 4>({2, 2, 150, 5}, 3);
    const int before = omp_get_max_threads();
    std::vector<xt::xtensor<float, 4>> outs;
    for (int t : {1, 2, 3}) {
        omp_set_num_threads(t);
        outs.push_back(a(q, k, v, kattn::causal));
        outs.push_back(a(q, k, v));
    }
    omp_set_num_threads(before);
    for (std::size_t i = 2; i < outs.size(); ++i) CHECK(bitwise_equal(outs[i], outs[i % 2]));
}
#endif

TEST_CASE("chunked backend: the device-resident call rejects bad views by name") {
    using W = float;
    const attention_config cfg{.head_dim = 8, .value_dim = 5, .num_features = 16, .seed = 13};
    const attn<features::favor, float, chunked_backend> a(cfg);
    const system_t sys = exact_system();
    const backends::device_parameters<features::favor, W, system_t> params(sys, a.spectral());
    on_system<float> x(sys, 2 * 3 * 10 * 8), y(sys, 2 * 3 * 10 * 8), z(sys, 2 * 3 * 10 * 5), out(sys, 2 * 3 * 10 * 5);
    const auto q = backends::head_major<const float>(x.buf.data(), 2, 3, 10, 8);
    const auto k = backends::head_major<const float>(y.buf.data(), 2, 3, 10, 8);
    const auto v = backends::head_major<const float>(z.buf.data(), 2, 3, 10, 5);
    const auto o = backends::head_major(out.buf.data(), 2, 3, 10, 5);
    const auto fails = [&](auto qv, auto kv, auto vv, auto ov, const backends::device_options& opt) {
        return kt::error_text([&] { chunked_backend::device_forward(sys, params, qv, kv, vv, ov, opt); });
    };
    CHECK_MESSAGE(fails(backends::head_major<const float>(x.buf.data(), 2, 3, 10, 7), k, v, o, {}).find("'q'") !=
                      std::string::npos,
                  "wrong head dimension");
    CHECK(fails(q, backends::head_major<const float>(y.buf.data(), 2, 2, 10, 8), v, o, {}).find("'k'") !=
          std::string::npos);
    CHECK(fails(q, k, backends::head_major<const float>(z.buf.data(), 2, 3, 9, 5), o, {}).find("'v'") !=
          std::string::npos);
    CHECK(fails(q, k, v, backends::head_major(out.buf.data(), 2, 3, 10, 4), {}).find("'out'") != std::string::npos);
    CHECK(fails(backends::strided_view<const float>{nullptr, 2, 3, 10, 8, 240, 80, 8}, k, v, o, {}).find("nullptr") !=
          std::string::npos);
    CHECK(fails(q, k, v, backends::head_major(reinterpret_cast<float*>(y.buf.data()), 2, 3, 10, 5), {})
              .find("disjoint from k") != std::string::npos);
    CHECK(fails(q, backends::head_major<const float>(y.buf.data(), 2, 3, 9, 8),
                backends::head_major<const float>(z.buf.data(), 2, 3, 9, 5), o, {true})
              .find("causal") != std::string::npos);
    const std::vector<index_t> bad{10, 11};
    const on_system<index_t> lens(sys, bad.data(), 2);
    const auto msg = fails(q, k, v, o, {false, lens.buf.data()});
    CHECK(msg.find("'key_lengths'") != std::string::npos);
    CHECK(msg.find("11 at batch entry 1") != std::string::npos);
    CHECK(fails(q, k, v, o, {false, nullptr, -1.0}).find("'input_scale'") != std::string::npos);
}
