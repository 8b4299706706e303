// kattn/backends/chunked.hpp — the chunked GEMM backend over a system of primitives.
//
//   kattn::backends::chunked<System>
//
// Linear attention as batched matrix products (chunked/forward.hpp): the projections, the
// states Φ_Kᵀ[V, 1] and the outputs Φ_Q·S are GEMMs, and causal attention runs in chunks
// of 64 tokens (block states, their exclusive prefix in block order, a masked 64 × 64 intra
// part). System supplies the primitives (chunked/system.hpp): host_system runs them on
// OpenMP threads and is how the algorithm is tested on any machine; cuda_system
// (backends/cuda.cuh, `backends::cuda`) runs them on a GPU with cuBLAS.
//
// Two ways in:
//   linear_attention<Map, Sampler, chunked<S>, T>  the operator API (xtensor on the host):
//       features, forward, backward and the decoding step all run here.
//   chunked<S>::device_forward(sys, params, q, k, v, out, options) and
//   chunked<S>::device_backward(sys, params, q, k, v, dout, dq, dk, dv, dΩ, db, options),
//       the device-resident calls:
//       strided views of system memory (backends/strided_view.hpp: [B, H, L, d] or
//       [B, L, H, d] through strides), the parameters already on the system
//       (device_parameters), nothing copied between host and device.
// Results are bitwise reproducible run to run and, on the host, for any thread count.
// Docs: docs/cuda_backend.md.
#pragma once

#include <cmath>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "../core/error.hpp"
#include "chunked/backward.hpp"
#include "chunked/forward.hpp"
#include "chunked/step.hpp"
#include "chunked/system.hpp"
#include "execution_backend.hpp"
#include "problem.hpp"
#include "strided_view.hpp"

namespace kattn::backends {

/// Options of a device-resident call (the operator's options, as plain values).
struct device_options {
    bool causal = false;
    /// Valid keys per batch entry, in system memory (device memory on a GPU), or nullptr.
    const index_t* key_lengths = nullptr;
    /// q and k are multiplied by this before the map: pass the operator's input_scale().
    double input_scale = 1;
    double eps = 1e-6;  ///< denominator guard
    /// Packed documents (FlashAttention's cu_seqlens, in system memory): documents + 1
    /// offsets {0, …, L}, strictly increasing; batch 1, q and k of the same length, no key
    /// lengths. Attention never crosses a document boundary. nullptr: one sequence.
    const index_t* cu_seqlens = nullptr;
    index_t documents = 0;
};

/// Ω, b and the map's parameters of one operator, copied once to System's memory in the
/// working precision W (float for float and 16-bit inputs, double for double).
template <class Map, class W, class System>
class device_parameters {
public:
    template <class T>
    device_parameters(const System& sys, const spectral_view<Map, T>& host)
        : d_(host.d),
          m_(host.m),
          params_(host.params),
          omega_(widen(host.omega, host.d * Map::projection_dim(host.m))),
          bias_(host.bias ? widen(host.bias, host.m) : std::vector<W>{}),
          omega_dev_(sys.mirror(omega_.data(), index_t(omega_.size()))),
          bias_dev_(sys.mirror(bias_.data(), index_t(bias_.size()))) {}

    device_parameters(const device_parameters&) = delete;
    device_parameters& operator=(const device_parameters&) = delete;
    device_parameters(device_parameters&&) noexcept = default;

    index_t head_dim() const { return d_; }
    index_t num_features() const { return m_; }
    detail::chunked_impl::spectral<Map, W> view() const {
        return {omega_dev_.get(), bias_.empty() ? nullptr : bias_dev_.get(), params_};
    }

private:
    template <class T>
    static std::vector<W> widen(const T* p, index_t n) {
        std::vector<W> out(static_cast<std::size_t>(n));
        for (index_t i = 0; i < n; ++i) out[std::size_t(i)] = static_cast<W>(p[i]);
        return out;
    }
    index_t d_, m_;
    map_params_t<Map> params_;
    std::vector<W> omega_, bias_;
    decltype(std::declval<const System&>().mirror(std::declval<const W*>(), index_t(0))) omega_dev_, bias_dev_;
};

}  // namespace kattn::backends

namespace kattn::detail {

/// The chunk tables of packed documents (chunked_impl::geometry), built on the host from
/// the offsets and copied to the system once.
template <class System>
class packed_chunk_tables {
public:
    packed_chunk_tables(const System& sys, const index_t* cu, index_t documents) {
        namespace ci = chunked_impl;
        for (index_t i = 0; i < documents; ++i) {
            const index_t first = index_t(token_.size()), len = cu[i + 1] - cu[i];
            const index_t n = (len + ci::chunk - 1) / ci::chunk;
            for (index_t c = 0; c < n; ++c) {
                token_.push_back(cu[i] + c * ci::chunk);
                len_.push_back(std::min(ci::chunk, len - c * ci::chunk));
                first_.push_back(first);
                last_.push_back(first + n - 1);
            }
        }
        const index_t nb = index_t(token_.size());
        mirrors_.reserve(4);
        for (const auto* v : {&token_, &len_, &first_, &last_}) mirrors_.push_back(sys.mirror(v->data(), nb));
    }
    /// Points g at the tables and sets its padded extents.
    void apply(chunked_impl::geometry& g) const {
        g.nb = g.nm = index_t(token_.size());
        g.Lqp = g.Lkp = g.nb * chunked_impl::chunk;
        g.chunk_token = mirrors_[0].get();
        g.chunk_len = mirrors_[1].get();
        g.doc_first = mirrors_[2].get();
        g.doc_last = mirrors_[3].get();
    }

private:
    std::vector<index_t> token_, len_, first_, last_;
    std::vector<decltype(std::declval<const System&>().mirror(std::declval<const index_t*>(), index_t(0)))> mirrors_;
};

}  // namespace kattn::detail

namespace kattn::backends {

template <class System>
struct chunked {
    static_assert(chunked_system<System>,
                  "kattn: backends::chunked<System>: System is not a chunked_system: it needs name, "
                  "buffer<W>, make_buffer, launch, gemm (float and double), mirror and to_host "
                  "(kattn/backends/chunked/system.hpp)");
    static constexpr const char* name = System::name;
    using system_type = System;
    using row_ops = detail::scalar_ops;
    /// Packed documents run natively (every document starts a new chunk of 64).
    static constexpr bool packs_sequences = true;

    /// Forward on strided views of system memory; see the file comment. q: [B, H, Lq, d],
    /// k: [B, H, Lk, d], v: [B, H, Lk, dv], out: [B, H, Lq, dv]; causal needs Lq = Lk.
    template <class Map, class W, class T>
    static void device_forward(const System& sys, const device_parameters<Map, W, System>& params,
                               strided_view<const T> q, strided_view<const T> k, strided_view<const T> v,
                               strided_view<T> out, const device_options& o = {}) {
        static_assert(std::is_same_v<W, work_t<T>>,
                      "kattn: device_forward: the parameters' precision W must be work_t<T> (double for double "
                      "inputs, float otherwise)");
        std::vector<index_t> offsets;
        auto g = check_device_call<Map>(sys, params, q, k, v, out, o, offsets);
        std::optional<detail::packed_chunk_tables<System>> tables;
        if (!offsets.empty()) {
            tables.emplace(sys, offsets.data(), o.documents);
            tables->apply(g);
        }
        detail::chunked_impl::forward<Map, W>(sys, params.view(), g, q, k, v, out, W(o.input_scale), W(o.eps));
    }

    /// Backward on strided views of system memory: dq, dk, dv have the shapes of q, k, v;
    /// d_omega (d × P) and d_bias (m) are system memory in W, overwritten with the sum over
    /// every head, or nullptr when not wanted. dout has out's shape.
    template <class Map, class W, class T>
    static void device_backward(const System& sys, const device_parameters<Map, W, System>& params,
                                strided_view<const T> q, strided_view<const T> k, strided_view<const T> v,
                                strided_view<const T> dout, strided_view<T> dq, strided_view<T> dk, strided_view<T> dv,
                                W* d_omega, W* d_bias, const device_options& o = {}) {
        static_assert(std::is_same_v<W, work_t<T>>,
                      "kattn: device_backward: the parameters' precision W must be work_t<T> (double for double "
                      "inputs, float otherwise)");
        std::vector<index_t> offsets;
        auto g = check_device_call<Map>(sys, params, q, k, v, dout, o, offsets, "dout", false);
        std::optional<detail::packed_chunk_tables<System>> tables;
        if (!offsets.empty()) {
            tables.emplace(sys, offsets.data(), o.documents);
            tables->apply(g);
        }
        check_same_shape(dq, q, "dq");
        check_same_shape(dk, k, "dk");
        check_same_shape(dv, v, "dv");
        const char* names[] = {"q", "k", "v", "dout"};
        const strided_view<const T> in[] = {q, k, v, dout};
        const char* gnames[] = {"dq", "dk", "dv"};
        const strided_view<T> gs[] = {dq, dk, dv};
        for (int a = 0; a < 3; ++a) {
            for (int i = 0; i < 4; ++i)
                if (detail::views_may_overlap(gs[a], in[i]))
                    throw kattn::error(std::string("kattn: argument '") + gnames[a] +
                                       "': expected memory disjoint from " + names[i] + ", got an overlapping view");
            for (int b = 0; b < a; ++b)
                if (detail::views_may_overlap(gs[a], gs[b]))
                    throw kattn::error(std::string("kattn: argument '") + gnames[a] +
                                       "': expected memory disjoint from " + gnames[b] + ", got an overlapping view");
        }
        detail::chunked_impl::backward<Map, W>(sys, params.view(), g, q, k, v, dout,
                                               detail::chunked_impl::gradient_views<T, W>{dq, dk, dv, d_omega, d_bias},
                                               W(o.input_scale), W(o.eps));
    }

    // ---- the execution-backend primitives (operators on host tensors) ----

    template <class Map, class T>
    static void features(const feature_problem<Map, T>& pb) {
        using W = work_t<T>;
        const System sys{};
        const device_parameters<Map, W, System> dp(sys, pb.spec);
        auto g = geometry_of<Map>(pb.spec.d, pb.spec.m, 1, 1, pb.n, pb.n, 0, false, nullptr);
        const auto x = sys.mirror(pb.x, pb.n * pb.spec.d);
        auto phi = sys.template make_buffer<W>(pb.n * g.F);
        detail::chunked_impl::features<Map, W>(sys, dp.view(), g, head_major(x.get(), 1, 1, pb.n, pb.spec.d),
                                               W(pb.input_scale), phi.data());
        download(sys, phi.data(), pb.n * g.F, pb.phi);
    }

    template <class Map, class T>
    static void forward(const attention_problem<Map, T>& pb, T* out) {
        using W = work_t<T>;
        const staged_problem<Map, T> st(pb);
        const System& sys = st.sys;
        auto o = sys.template make_buffer<T>(pb.problems * pb.q_len * pb.dv);
        detail::chunked_impl::forward<Map, W>(sys, st.dp.view(), st.g, st.q(), st.k(), st.v(),
                                              st.rows(o.data(), pb.q_len, pb.dv), W(pb.input_scale), W(pb.eps));
        sys.to_host(out, o.data(), pb.problems * pb.q_len * pb.dv);
    }

    template <class Map, class T>
    static void backward(const attention_problem<Map, T>& pb, const attention_gradients<T>& grads) {
        using W = work_t<T>;
        const staged_problem<Map, T> st(pb);
        const System& sys = st.sys;
        const index_t d = pb.spec.d, nq = pb.problems * pb.q_len * d, nk = pb.problems * pb.k_len * d,
                      nv = pb.problems * pb.k_len * pb.dv;
        const auto G = sys.mirror(grads.dout, pb.problems * pb.q_len * pb.dv);
        auto dq = sys.template make_buffer<T>(nq);
        auto dk = sys.template make_buffer<T>(nk);
        auto dv = sys.template make_buffer<T>(nv);
        const index_t nomega = d * Map::projection_dim(pb.spec.m), nbias = Map::uses_bias ? pb.spec.m : 0;
        auto dom = sys.template make_buffer<W>(grads.d_omega ? nomega : 0);
        auto db = sys.template make_buffer<W>(grads.d_bias ? nbias : 0);
        detail::chunked_impl::backward<Map, W>(
            sys, st.dp.view(), st.g, st.q(), st.k(), st.v(), st.rows(G.get(), pb.q_len, pb.dv),
            detail::chunked_impl::gradient_views<T, W>{
                st.rows(dq.data(), pb.q_len, d), st.rows(dk.data(), pb.k_len, d), st.rows(dv.data(), pb.k_len, pb.dv),
                grads.d_omega ? dom.data() : nullptr, grads.d_bias && nbias ? db.data() : nullptr},
            W(pb.input_scale), W(pb.eps));
        sys.to_host(grads.dq, dq.data(), nq);
        sys.to_host(grads.dk, dk.data(), nk);
        sys.to_host(grads.dv, dv.data(), nv);
        if (grads.d_omega) download(sys, dom.data(), nomega, grads.d_omega);
        if (grads.d_bias && nbias) download(sys, db.data(), nbias, grads.d_bias);
    }

    /// One decoding token for every head; the recurrent state is copied to the system
    /// and back once per call (device_step keeps it there).
    template <class Map, class T>
    static void step(const step_problem<Map, T>& pb) {
        using W = work_t<T>;
        const System sys{};
        const device_parameters<Map, W, System> dp(sys, pb.spec);
        const index_t n = pb.problems, d = pb.spec.d, dv = pb.dv, F = Map::feature_dim(pb.spec.m);
        const auto q = sys.mirror(pb.q, n * d);
        const auto k = sys.mirror(pb.k, n * d);
        const auto v = sys.mirror(pb.v, n * dv);
        auto S = copy_to_system(sys, pb.state.S, n * F * dv);
        auto z = copy_to_system(sys, pb.state.z, n * F);
        auto C = copy_to_system(sys, pb.state.C, n);
        auto steps = copy_to_system(sys, pb.state.steps, n);
        auto o = sys.template make_buffer<T>(n * dv);
        const auto g = geometry_of<Map>(pb.spec.d, pb.spec.m, n, 1, 1, 1, dv, false, nullptr);
        detail::chunked_impl::step<Map, W>(
            sys, dp.view(), g, recurrent_state_view{S.data(), z.data(), C.data(), steps.data()},
            head_major(q.get(), n, 1, 1, d), head_major(k.get(), n, 1, 1, d), head_major(v.get(), n, 1, 1, dv),
            head_major(o.data(), n, 1, 1, dv), W(pb.input_scale), pb.eps);
        sys.to_host(pb.state.S, S.data(), n * F * dv);
        sys.to_host(pb.state.z, z.data(), n * F);
        sys.to_host(pb.state.C, C.data(), n);
        sys.to_host(pb.state.steps, steps.data(), n);
        sys.to_host(pb.out, o.data(), n * dv);
    }

    /// One decoding token on views of system memory: q, k [B, H, 1, d], v, out [B, H, 1, dv];
    /// `state` points at system memory (S: B·H × F × dv, z: B·H × F, C and steps: B·H,
    /// zero-filled before the first token), updated in place.
    template <class Map, class W, class T>
    static void device_step(const System& sys, const device_parameters<Map, W, System>& params,
                            const recurrent_state_view& state, strided_view<const T> q, strided_view<const T> k,
                            strided_view<const T> v, strided_view<T> out, const device_options& o = {}) {
        static_assert(std::is_same_v<W, work_t<T>>,
                      "kattn: device_step: the parameters' precision W must be work_t<T> (double for double "
                      "inputs, float otherwise)");
        if (o.causal || o.key_lengths || o.cu_seqlens)
            throw kattn::error(
                "kattn: argument 'options': expected no causal flag, key lengths or documents for a "
                "decoding step (it is causal by construction), got one");
        std::vector<index_t> none;
        const auto g = check_device_call<Map>(sys, params, q, k, v, out, o, none);
        if (q.len != 1)
            throw kattn::error("kattn: argument 'q': expected one token per head (len 1), got " +
                               std::to_string(q.len));
        if (!state.S || !state.z || !state.C || !state.steps)
            throw kattn::error("kattn: argument 'state': expected S, z, C and steps in system memory, got nullptr");
        detail::chunked_impl::step<Map, W>(sys, params.view(), g, state, q, k, v, out, W(o.input_scale), o.eps);
    }

private:
    template <class X>
    using mirror_of = decltype(std::declval<const System&>().mirror(std::declval<const X*>(), index_t(0)));

    /// An operator's problem staged on the system once: default system, parameters, q, k,
    /// v and key lengths mirrored, the geometry, and (packed documents) the chunk tables.
    template <class Map, class T>
    struct staged_problem {
        const System sys{};
        const device_parameters<Map, work_t<T>, System> dp;
        const index_t B, H, d, Lq, Lk, dv;
        const mirror_of<T> qm, km, vm;
        const mirror_of<index_t> lens;
        std::optional<detail::packed_chunk_tables<System>> tables;
        detail::chunked_impl::geometry g;

        explicit staged_problem(const attention_problem<Map, T>& pb)
            : dp(sys, pb.spec),
              B(pb.problems / pb.heads),
              H(pb.heads),
              d(pb.spec.d),
              Lq(pb.q_len),
              Lk(pb.k_len),
              dv(pb.dv),
              qm(sys.mirror(pb.q, pb.problems * Lq * d)),
              km(sys.mirror(pb.k, pb.problems * Lk * d)),
              vm(sys.mirror(pb.v, pb.problems * Lk * dv)),
              lens(sys.mirror(pb.key_lengths, pb.key_lengths ? B : 0)),
              g(geometry_of<Map>(pb.spec.d, pb.spec.m, B, H, Lq, Lk, dv, pb.causal,
                                 pb.key_lengths ? lens.get() : nullptr)) {
            if (pb.cu_seqlens) {
                tables.emplace(sys, pb.cu_seqlens, pb.documents);
                tables->apply(g);
            }
        }
        /// [B, H, len, width] rows at p (the operator's layout).
        template <class X>
        strided_view<X> rows(X* p, index_t len, index_t width) const {
            return head_major(p, B, H, len, width);
        }
        strided_view<const T> q() const { return rows(qm.get(), Lq, d); }
        strided_view<const T> k() const { return rows(km.get(), Lk, d); }
        strided_view<const T> v() const { return rows(vm.get(), Lk, dv); }
    };

    /// A writable system copy of n host elements.
    template <class X>
    static auto copy_to_system(const System& sys, const X* host, index_t n) {
        auto buf = sys.template make_buffer<X>(n);
        const auto m = sys.mirror(host, n);
        sys.launch(n, detail::copy_into<X>{m.get(), buf.data()});
        return buf;
    }

    template <class A, class B>
    static void check_same_shape(const strided_view<A>& x, const strided_view<B>& want, const char* name) {
        detail::check_view(x, name);
        if (x.batch != want.batch || x.heads != want.heads || x.len != want.len || x.dim != want.dim)
            throw kattn::error(std::string("kattn: argument '") + name + "': expected shape [" +
                               std::to_string(want.batch) + ", " + std::to_string(want.heads) + ", " +
                               std::to_string(want.len) + ", " + std::to_string(want.dim) + "], got [" +
                               std::to_string(x.batch) + ", " + std::to_string(x.heads) + ", " + std::to_string(x.len) +
                               ", " + std::to_string(x.dim) + "]");
    }

    template <class W, class T>
    static void download(const System& sys, const W* src, index_t n, T* dst) {
        if constexpr (std::is_same_v<W, T>) {
            sys.to_host(dst, src, n);
        } else {
            std::vector<W> tmp(static_cast<std::size_t>(n));
            sys.to_host(tmp.data(), src, n);
            for (index_t i = 0; i < n; ++i) dst[i] = static_cast<T>(tmp[std::size_t(i)]);
        }
    }

    /// Extents of a call with head dimension d and m features (packed tables: apply()).
    template <class Map>
    static detail::chunked_impl::geometry geometry_of(index_t d, index_t m, index_t B, index_t H, index_t Lq,
                                                      index_t Lk, index_t dv, bool causal, const index_t* key_lengths) {
        namespace ci = detail::chunked_impl;
        ci::geometry g;
        g.heads = H;
        g.problems = B * H;
        g.Lq = Lq;
        g.Lk = Lk;
        g.causal = causal;
        g.Lqp = causal ? (Lq + ci::chunk - 1) / ci::chunk * ci::chunk : Lq;
        g.Lkp = causal ? (Lk + ci::chunk - 1) / ci::chunk * ci::chunk : Lk;
        g.nb = causal ? g.Lkp / ci::chunk : 1;
        g.nm = (g.Lkp + ci::chunk - 1) / ci::chunk;
        g.d = d;
        g.m = m;
        g.P = Map::projection_dim(g.m);
        g.F = Map::feature_dim(g.m);
        g.dv = dv;
        g.dv1 = dv + 1;
        g.key_lengths = key_lengths;
        return g;
    }

    template <class Map, class W, class T, class U>
    static detail::chunked_impl::geometry check_device_call(
        const System& sys, const device_parameters<Map, W, System>& params, const strided_view<const T>& q,
        const strided_view<const T>& k, const strided_view<const T>& v, const strided_view<U>& out,
        const device_options& o, std::vector<index_t>& offsets, const char* out_name = "out", bool written = true) {
        detail::check_view(q, "q");
        detail::check_view(k, "k");
        detail::check_view(v, "v");
        detail::check_view(out, out_name);
        const auto shape = [](index_t a, index_t b, index_t c, index_t d) {
            return "[" + std::to_string(a) + ", " + std::to_string(b) + ", " + std::to_string(c) + ", " +
                   std::to_string(d) + "]";
        };
        const auto require = [&](bool ok, const char* arg, const std::string& want, const std::string& got) {
            if (!ok)
                throw kattn::error(std::string("kattn: argument '") + arg + "': expected " + want + ", got " + got);
        };
        const index_t d = params.head_dim();
        require(q.dim == d, "q", "head dimension " + std::to_string(d) + " (the parameters')", std::to_string(q.dim));
        require(q.len > 0, "q", "at least one token", "0");
        require(k.batch == q.batch && k.heads == q.heads && k.dim == d && k.len > 0, "k",
                "shape " + shape(q.batch, q.heads, k.len > 0 ? k.len : 1, d) + " (q's batch and heads, d, ≥ 1 token)",
                shape(k.batch, k.heads, k.len, k.dim));
        require(v.batch == q.batch && v.heads == q.heads && v.len == k.len && v.dim > 0, "v",
                "shape " + shape(q.batch, q.heads, k.len, v.dim > 0 ? v.dim : 1) + " (k's batch, heads and length)",
                shape(v.batch, v.heads, v.len, v.dim));
        require(out.batch == q.batch && out.heads == q.heads && out.len == q.len && out.dim == v.dim, out_name,
                "shape " + shape(q.batch, q.heads, q.len, v.dim), shape(out.batch, out.heads, out.len, out.dim));
        require(!o.causal || q.len == k.len, "k",
                "length equal to q's length " + std::to_string(q.len) + " (causal attention)", std::to_string(k.len));
        require(o.input_scale > 0 && o.input_scale < HUGE_VAL, "input_scale", "a finite positive value",
                std::to_string(o.input_scale));
        require(o.eps > 0 && o.eps < HUGE_VAL, "eps", "a finite positive value", std::to_string(o.eps));
        const char* names[] = {"q", "k", "v"};
        const strided_view<const T> in[] = {q, k, v};
        for (int i = 0; i < 3 && written; ++i)
            require(!detail::views_may_overlap(out, in[i]), out_name, std::string("memory disjoint from ") + names[i],
                    "an overlapping view");
        if (o.key_lengths && q.batch > 0) {  // B values copied back once to be checked
            std::vector<index_t> lens(static_cast<std::size_t>(q.batch));
            sys.to_host(lens.data(), o.key_lengths, q.batch);
            for (index_t b = 0; b < q.batch; ++b)
                require(lens[std::size_t(b)] >= 1 && lens[std::size_t(b)] <= k.len, "key_lengths",
                        "values in [1, " + std::to_string(k.len) + "]",
                        std::to_string(lens[std::size_t(b)]) + " at batch entry " + std::to_string(b));
        }
        if (o.cu_seqlens) {  // documents + 1 offsets copied back once to be checked
            require(q.batch == 1, "q", "batch 1 with packed documents (cu_seqlens)", std::to_string(q.batch));
            require(q.len == k.len, "k", "q's length " + std::to_string(q.len) + " with packed documents",
                    std::to_string(k.len));
            require(!o.key_lengths, "key_lengths", "nullptr with packed documents (cu_seqlens)", "a pointer");
            require(o.documents >= 1 && o.documents <= q.len, "documents",
                    "a count in [1, " + std::to_string(q.len) + "]", std::to_string(o.documents));
            offsets.resize(std::size_t(o.documents + 1));
            sys.to_host(offsets.data(), o.cu_seqlens, o.documents + 1);
            require(offsets.front() == 0 && offsets.back() == q.len, "cu_seqlens",
                    "offsets from 0 to the packed length " + std::to_string(q.len),
                    std::to_string(offsets.front()) + " … " + std::to_string(offsets.back()));
            for (std::size_t i = 1; i < offsets.size(); ++i)
                require(offsets[i] > offsets[i - 1], "cu_seqlens", "strictly increasing offsets",
                        std::to_string(offsets[i]) + " after " + std::to_string(offsets[i - 1]) + " at index " +
                            std::to_string(i));
        }
        return geometry_of<Map>(params.head_dim(), params.num_features(), q.batch, q.heads, q.len, k.len, v.dim,
                                o.causal, o.key_lengths);
    }
};

}  // namespace kattn::backends
