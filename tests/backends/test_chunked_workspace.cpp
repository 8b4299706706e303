// chunked backend: scratch memory from the caller (workspace_allocator) and the workspace
// query (device_workspace_bytes).
//
// For forward, backward and step, non-causal, causal, padded and packed: with a counting
// allocator set, the call gives the same bits as with the system's own allocation, every
// scratch byte comes from the hook and goes back to it, and the peak of the live
// (256-rounded) bytes equals device_workspace_bytes exactly. An allocator that fails
// mid-call, returns misaligned memory or is half set gets a kattn::error naming
// 'allocator', and nothing it handed out leaks.
//
// Built by g++ (host_system) and, through tests/backends/test_cuda.cu, by nvcc
// (cuda_system: the hook hands out cudaMalloc memory).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "../error_text.hpp"
#include "../tensors.hpp"
#include "backend_cases.hpp"

#include <kattn/attention/linear_attention.hpp>
#include <kattn/backends/reference.hpp>
#include <kattn/backends/workspace.hpp>
#include <kattn/features/elu.hpp>
#include <kattn/features/favor.hpp>

#if defined(__CUDACC__)
#include <kattn/backends/cuda.cuh>
#else
#include <kattn/backends/chunked.hpp>
#endif

namespace kt_chunked_ws {

using namespace kattn;
#if defined(__CUDACC__)
using backend = backends::cuda;
using system_t = backends::cuda_system;
inline void* raw_allocate(std::size_t n) {
    void* p = nullptr;
    return cudaMalloc(&p, n) == cudaSuccess ? p : nullptr;
}
inline void raw_free(void* p) { cudaFree(p); }
inline system_t plain_system() { return system_t{nullptr, backends::float_gemm::fp32}; }
#else
using backend = backends::chunked<backends::host_system>;
using system_t = backends::host_system;
inline void* raw_allocate(std::size_t n) { return ::operator new(n, std::align_val_t(backends::workspace_alignment)); }
inline void raw_free(void* p) { ::operator delete(p, std::align_val_t(backends::workspace_alignment)); }
inline system_t plain_system() { return system_t{}; }
#endif

/// An allocator that counts: live and peak bytes (each request rounded to the workspace
/// alignment, as device_workspace_bytes counts), requests, and mismatched returns. It can
/// fail the request numbered fail_at, or hand out memory `skew` bytes past an aligned block.
struct counting_pool {
    std::size_t live = 0, peak = 0, requests = 0, bad_returns = 0;
    std::size_t fail_at = std::numeric_limits<std::size_t>::max(), skew = 0;
    std::map<void*, std::pair<void*, std::size_t>> blocks;  // handed out → (block, bytes)

    static void* allocate(void* ctx, std::size_t bytes, void*) {
        auto& p = *static_cast<counting_pool*>(ctx);
        if (p.requests++ == p.fail_at) return nullptr;
        void* block = raw_allocate(bytes + p.skew);
        if (!block) return nullptr;
        void* out = static_cast<char*>(block) + p.skew;
        p.blocks[out] = {block, bytes};
        p.live += backends::workspace_round(bytes);
        p.peak = std::max(p.peak, p.live);
        return out;
    }
    static void deallocate(void* ctx, void* q, std::size_t bytes, void*) {
        auto& p = *static_cast<counting_pool*>(ctx);
        const auto it = p.blocks.find(q);
        if (it == p.blocks.end() || it->second.second != bytes) {
            ++p.bad_returns;
            return;
        }
        raw_free(it->second.first);
        p.live -= backends::workspace_round(bytes);
        p.blocks.erase(it);
    }
    backends::workspace_allocator hook() { return {this, &allocate, &deallocate}; }
};

/// n elements of T in system memory, from the plain system.
template <class T>
struct device_copy {
    typename system_t::template buffer<T> buf;
    index_t n;
    device_copy(const system_t& sys, const std::vector<T>& host)
        : buf(sys.template make_buffer<T>(index_t(host.size()))), n(index_t(host.size())) {
        const auto m = sys.mirror(host.data(), n);
        sys.launch(n, kattn::detail::copy_into<T>{m.get(), buf.data()});
    }
    device_copy(const system_t& sys, index_t count) : buf(sys.template make_buffer<T>(count)), n(count) {
        sys.launch(count, kattn::detail::chunked_impl::fill_value<T>{buf.data(), T(0)});
    }
    std::vector<T> host(const system_t& sys) const {
        std::vector<T> out(static_cast<std::size_t>(n));
        sys.to_host(out.data(), buf.data(), n);
        return out;
    }
};

template <class T>
std::vector<T> random_values(std::size_t n, std::uint64_t seed, double sd) {
    const auto x = kt::randn<T, 1>({n}, seed, sd);
    return std::vector<T>(x.begin(), x.end());
}

/// One configuration of a call: B × H heads of L tokens, and how they attend.
struct call_case {
    const char* name;
    bool causal;
    std::vector<index_t> lens;  // key lengths per batch entry, or empty
    std::vector<index_t> cu;    // packed offsets (B = 1), or empty
};

/// Every output of a forward and a backward call (forward: out only).
template <class T>
struct call_outputs {
    std::vector<T> out, dq, dk, dv, d_omega, d_bias;
    bool operator==(const call_outputs&) const = default;
};

/// The passes, each with exact float products and, on the GPU, with TF32 ones too: there
/// cuda_system builds φ in one kernel (launch_projected_rows), which allocates less, and
/// the query must follow it.
inline std::vector<std::pair<backends::device_pass, backends::float_gemm>> pass_products() {
    std::vector<std::pair<backends::device_pass, backends::float_gemm>> r;
    for (auto pass : {backends::device_pass::forward, backends::device_pass::backward}) {
        r.emplace_back(pass, backends::float_gemm::fp32);
#if defined(__CUDACC__)
        r.emplace_back(pass, backends::float_gemm::tf32);
#endif
    }
    return r;
}

template <class Map>
void check_every_pass() {
    using T = float;
    using W = float;
    const index_t B = 2, H = 3, L = 150, d = 8, dv = 5;
    const auto cfg = kt::case_config<Map>();
    const kt::attn<Map, T, backend> op(cfg);
    const system_t plain = plain_system();
    const backends::device_parameters<Map, W, system_t> params(plain, op.spectral());
    const index_t P = Map::projection_dim(op.num_features()), m = op.num_features();
    const std::vector<call_case> cases{{"non-causal", false, {}, {}},
                                       {"causal", true, {}, {}},
                                       {"padded", false, {150, 37}, {}},
                                       {"packed causal", true, {}, {0, 63, 64, 150}},
                                       {"packed non-causal", false, {}, {0, 1, 100, 150}}};
    for (const auto& c : cases) {
        const index_t Bc = c.cu.empty() ? B : 1;
        INFO(Map::name, " ", c.name);
        const std::size_t nq = std::size_t(Bc * H * L * d), nv = std::size_t(Bc * H * L * dv);
        const device_copy<T> q(plain, random_values<T>(nq, 1, 0.5)), k(plain, random_values<T>(nq, 2, 0.5)),
            v(plain, random_values<T>(nv, 3, 1.0)), G(plain, random_values<T>(nv, 4, 1.0));
        std::vector<index_t> lens_host = c.lens, cu_host = c.cu;
        if (lens_host.empty()) lens_host.push_back(0);
        if (cu_host.empty()) cu_host.push_back(0);
        const device_copy<index_t> lens(plain, lens_host), cu(plain, cu_host);
        backends::device_options o{c.causal, c.lens.empty() ? nullptr : lens.buf.data(), double(op.input_scale()),
                                   1e-6};
        if (!c.cu.empty()) {
            o.cu_seqlens = cu.buf.data();
            o.documents = index_t(c.cu.size()) - 1;
        }
        const auto in = [&](const device_copy<T>& x, index_t dim) {
            return backends::head_major<const T>(x.buf.data(), Bc, H, L, dim);
        };
        const auto run = [&](const system_t& sys, bool with_backward) {
            device_copy<T> out(plain, index_t(nv)), dq(plain, index_t(nq)), dk(plain, index_t(nq)),
                dvv(plain, index_t(nv));
            device_copy<W> dom(plain, d * P), db(plain, std::max<index_t>(m, 1));
            backend::device_forward(sys, params, in(q, d), in(k, d), in(v, dv),
                                    backends::head_major(out.buf.data(), Bc, H, L, dv), o);
            if (with_backward)
                backend::device_backward(sys, params, in(q, d), in(k, d), in(v, dv), in(G, dv),
                                         backends::head_major(dq.buf.data(), Bc, H, L, d),
                                         backends::head_major(dk.buf.data(), Bc, H, L, d),
                                         backends::head_major(dvv.buf.data(), Bc, H, L, dv), dom.buf.data(),
                                         Map::uses_bias ? db.buf.data() : nullptr, o);
            return call_outputs<T>{out.host(plain), dq.host(plain),  dk.host(plain),
                                   dvv.host(plain), dom.host(plain), db.host(plain)};
        };
        for (const auto& pm : pass_products()) {
            const backends::device_pass pass = pm.first;
            const backends::float_gemm math = pm.second;
            const bool bwd = pass == backends::device_pass::backward;
            INFO("pass=", bwd ? "backward" : "forward", " products=", int(math));
            system_t base = plain;
            base.float_math = math;
            const auto want = run(base, bwd);
            // The peak of a backward call alone: run the forward with the plain system.
            counting_pool pool;
            system_t hooked = base;
            hooked.allocator = pool.hook();
            call_outputs<T> got;
            if (!bwd) {
                got = run(hooked, false);
            } else {
                device_copy<T> dq(plain, index_t(nq)), dk(plain, index_t(nq)), dvv(plain, index_t(nv));
                device_copy<W> dom(plain, d * P), db(plain, std::max<index_t>(m, 1));
                backend::device_backward(hooked, params, in(q, d), in(k, d), in(v, dv), in(G, dv),
                                         backends::head_major(dq.buf.data(), Bc, H, L, d),
                                         backends::head_major(dk.buf.data(), Bc, H, L, d),
                                         backends::head_major(dvv.buf.data(), Bc, H, L, dv), dom.buf.data(),
                                         Map::uses_bias ? db.buf.data() : nullptr, o);
                got = want;
                got.dq = dq.host(plain);
                got.dk = dk.host(plain);
                got.dv = dvv.host(plain);
                got.d_omega = dom.host(plain);
                got.d_bias = db.host(plain);
            }
            CHECK(got == want);
            CHECK(pool.requests > 0);
            CHECK(pool.live == 0);
            CHECK(pool.blocks.empty());
            CHECK(pool.bad_returns == 0);
            CHECK(pool.peak == backend::device_workspace_bytes(base, params, pass, Bc, H, L, L, dv, o, Map::uses_bias));
        }
    }
}

/// favor's operator, its parameters on the plain system, and random q, k ([rows, d]) and
/// v ([rows, dv]) in system memory.
struct favor_fixture {
    using Map = features::favor;
    kt::attn<Map, float, backend> op{kt::case_config<Map>()};
    system_t plain = plain_system();
    backends::device_parameters<Map, float, system_t> params{plain, op.spectral()};
    device_copy<float> q, k, v;
    favor_fixture(index_t rows, index_t d, index_t dv)
        : q(plain, random_values<float>(std::size_t(rows * d), 1, 0.5)),
          k(plain, random_values<float>(std::size_t(rows * d), 2, 0.5)),
          v(plain, random_values<float>(std::size_t(rows * dv), 3, 1.0)) {}
};

}  // namespace kt_chunked_ws

TEST_CASE_TEMPLATE("chunked backend: scratch from the caller's allocator, sized exactly by device_workspace_bytes", Map,
                   kattn::features::favor, kattn::features::elu) {
    kt_chunked_ws::check_every_pass<Map>();
}

TEST_CASE("chunked backend: the decoding step's scratch from the caller's allocator equals the query") {
    using namespace kt_chunked_ws;
    const index_t n = 6, d = 8, dv = 5;
    const favor_fixture fx(n, d, dv);
    const auto& op = fx.op;
    const auto& plain = fx.plain;
    const auto& params = fx.params;
    const auto &q = fx.q, &k = fx.k, &v = fx.v;
    const index_t F = favor_fixture::Map::feature_dim(op.num_features());
    const backends::device_options o{false, nullptr, double(op.input_scale()), 1e-6};
    const auto decode = [&](const system_t& sys) {
        device_copy<double> S(plain, n * F * dv), z(plain, n * F), C(plain, n);
        device_copy<index_t> steps(plain, n);
        device_copy<float> out(plain, n * dv);
        const backends::recurrent_state_view st{S.buf.data(), z.buf.data(), C.buf.data(), steps.buf.data()};
        for (int t = 0; t < 3; ++t)
            backend::device_step(sys, params, st, backends::head_major<const float>(q.buf.data(), 2, 3, 1, d),
                                 backends::head_major<const float>(k.buf.data(), 2, 3, 1, d),
                                 backends::head_major<const float>(v.buf.data(), 2, 3, 1, dv),
                                 backends::head_major(out.buf.data(), 2, 3, 1, dv), o);
        return out.host(plain);
    };
    counting_pool pool;
    system_t hooked = plain;
    hooked.allocator = pool.hook();
    CHECK(decode(hooked) == decode(plain));
    CHECK(pool.requests > 0);
    CHECK(pool.live == 0);
    CHECK(pool.bad_returns == 0);
    CHECK(pool.peak == backend::device_workspace_bytes(plain, params, backends::device_pass::step, 2, 3, 1, 1, dv, o));
}

TEST_CASE("chunked backend: a failing, misaligned or half-set allocator is named and leaks nothing") {
    using namespace kt_chunked_ws;
    const index_t H = 2, L = 100, d = 8, dv = 5;
    const favor_fixture fx(H * L, d, dv);
    const auto& op = fx.op;
    const auto& plain = fx.plain;
    const auto& params = fx.params;
    const auto &q = fx.q, &k = fx.k, &v = fx.v;
    device_copy<float> out(plain, H * L * dv);
    const backends::device_options o{true, nullptr, double(op.input_scale()), 1e-6};
    const auto call = [&](const system_t& sys) {
        return kt::error_text([&] {
            backend::device_forward(sys, params, backends::head_major<const float>(q.buf.data(), 1, H, L, d),
                                    backends::head_major<const float>(k.buf.data(), 1, H, L, d),
                                    backends::head_major<const float>(v.buf.data(), 1, H, L, dv),
                                    backends::head_major(out.buf.data(), 1, H, L, dv), o);
        });
    };
    for (std::size_t fail_at : {std::size_t(0), std::size_t(3), std::size_t(7)}) {
        INFO("fail_at=", fail_at);
        counting_pool pool;
        pool.fail_at = fail_at;
        system_t sys = plain;
        sys.allocator = pool.hook();
        const auto msg = call(sys);
        CHECK(msg.find("'allocator'") != std::string::npos);
        CHECK(msg.find("got nullptr") != std::string::npos);
        CHECK(pool.live == 0);  // every buffer obtained before the failure went back
        CHECK(pool.bad_returns == 0);
    }
    counting_pool skewed;
    skewed.skew = 16;
    system_t sys = plain;
    sys.allocator = skewed.hook();
    const auto msg = call(sys);
    CHECK(msg.find("'allocator'") != std::string::npos);
    CHECK(msg.find("aligned to 256 bytes") != std::string::npos);
    CHECK(skewed.live == 0);
    CHECK(skewed.bad_returns == 0);
    counting_pool half;
    sys.allocator = {&half, &counting_pool::allocate, nullptr};
    CHECK(call(sys).find("no deallocate") != std::string::npos);
    CHECK(half.requests == 0);
    // The query refuses what the call would refuse, by name.
    CHECK(kt::error_text([&] {
              (void)backend::device_workspace_bytes(plain, params, backends::device_pass::forward, 1, H, L, L - 1, dv,
                                                    o);
          }).find("causal") != std::string::npos);
    CHECK(kt::error_text([&] {
              (void)backend::device_workspace_bytes(plain, params, backends::device_pass::backward, 1, H, 0, L, dv);
          }).find("'q_len, k_len, value_dim'") != std::string::npos);
    CHECK(kt::error_text([&] {
              (void)backend::device_workspace_bytes(plain, params, backends::device_pass::step, 1, H, 2, 1, dv);
          }).find("decoding step") != std::string::npos);
}

TEST_CASE_TEMPLATE("chunked backend: more rows than one row block (65,536) equal the reference, with exact scratch",
                   Map, kattn::features::favor, kattn::features::elu) {
    // B1 H2 L40,000: 80,000 query and key rows, so φ is built, and the VJPs run, in a
    // block of 65,536 rows and a tail of 14,464; dΩ and db accumulate over both.
    using namespace kt_chunked_ws;
    const index_t H = 2, L = 40000, d = 8, dv = 5;
    const auto cfg = kt::case_config<Map>();
    const kt::attn<Map, double, backends::reference> ref(cfg);
    const kt::attn<Map, double, backend> op(cfg);
    const auto q = kt::randn<double, 4>({1, 2, 40000, 8}, 1, 0.5), k = kt::randn<double, 4>({1, 2, 40000, 8}, 2, 0.5);
    const auto v = kt::randn<double, 4>({1, 2, 40000, 5}, 3), G = kt::randn<double, 4>({1, 2, 40000, 5}, 4);
    for (bool causal : {false, true}) {
        INFO("causal=", causal);
        const auto r = causal ? ref(q, k, v, kattn::causal) : ref(q, k, v);
        CHECK(kt::rel_err(causal ? op(q, k, v, kattn::causal) : op(q, k, v), r) < 1e-10);
        const auto gr = causal ? ref.backward(q, k, v, G, kattn::causal) : ref.backward(q, k, v, G);
        const auto gc = causal ? op.backward(q, k, v, G, kattn::causal) : op.backward(q, k, v, G);
        CHECK(kt::rel_err(gc.dq, gr.dq) < 1e-10);
        CHECK(kt::rel_err(gc.dk, gr.dk) < 1e-10);
        CHECK(kt::rel_err(gc.dv, gr.dv) < 1e-10);
        CHECK(kt::rel_err(gc.d_omega, gr.d_omega) < 1e-10);
        if (gr.d_bias.size()) CHECK(kt::rel_err(gc.d_bias, gr.d_bias) < 1e-10);
        // The device-resident backward's scratch, counted by the allocator, is the query's.
        const system_t plain = plain_system();
        const backends::device_parameters<Map, double, system_t> params(plain, op.spectral());
        const auto host = [](const xt::xtensor<double, 4>& x) { return std::vector<double>(x.begin(), x.end()); };
        const device_copy<double> qs(plain, host(q)), ks(plain, host(k)), vs(plain, host(v)), Gs(plain, host(G));
        device_copy<double> dq(plain, index_t(q.size())), dk(plain, index_t(k.size())), dvv(plain, index_t(v.size()));
        device_copy<double> dom(plain, index_t(gr.d_omega.size()));
        const auto in = [&](const device_copy<double>& x, index_t dim) {
            return backends::head_major<const double>(x.buf.data(), 1, H, L, dim);
        };
        const backends::device_options o{causal, nullptr, double(op.input_scale()), 1e-6};
        counting_pool pool;
        system_t hooked = plain;
        hooked.allocator = pool.hook();
        backend::device_backward(
            hooked, params, in(qs, d), in(ks, d), in(vs, dv), in(Gs, dv),
            backends::head_major(dq.buf.data(), 1, H, L, d), backends::head_major(dk.buf.data(), 1, H, L, d),
            backends::head_major(dvv.buf.data(), 1, H, L, dv), dom.buf.data(), static_cast<double*>(nullptr), o);
        CHECK(kt::rel_err(dom.host(plain), gr.d_omega) < 1e-10);
        CHECK(pool.live == 0);
        CHECK(pool.peak == backend::device_workspace_bytes(plain, params, backends::device_pass::backward, 1, H, L, L,
                                                           dv, o, false));
    }
}
