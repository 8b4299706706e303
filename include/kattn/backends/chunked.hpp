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
//       features, forward, backward and the decoding step all run here; bf16 tensors
//       run with BF16 products (forward_bf16).
//   chunked<S>::device_forward(sys, params, q, k, v, out, options),
//   chunked<S>::device_backward(sys, params, q, k, v, dout, dq, dk, dv, dΩ, db, options)
//   and chunked<S>::device_step, the device-resident calls:
//       strided views of system memory (backends/strided_view.hpp: [B, H, L, d] or
//       [B, L, H, d] through strides), the parameters already on the system
//       (device_parameters), nothing copied between host and device; scratch from the
//       system's allocator hook (backends/workspace.hpp), sized beforehand by
//       chunked<S>::device_workspace_bytes.
// Results are bitwise reproducible run to run and, on the host, for any thread count.
// Docs: docs/cuda_backend.md.
#pragma once

#include <cmath>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "../core/error.hpp"
#include "../features/omega_layout.hpp"
#include "chunked/backward.hpp"
#include "chunked/device_call.hpp"
#include "chunked/forward.hpp"
#include "chunked/step.hpp"
#include "chunked/system.hpp"
#include "execution_backend.hpp"
#include "problem.hpp"
#include "strided_view.hpp"
#include "workspace.hpp"

namespace kattn::backends {

/// Ω, b and the map's parameters of one operator, copied once to System's memory in the
/// working precision W (float for float and 16-bit inputs, double for double), and
/// whether Ω is the identity (then the calls make no product with it).
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
          bias_dev_(sys.mirror(bias_.data(), index_t(bias_.size()))),
          identity_(detail::omega_is_identity(d_, Map::projection_dim(m_), omega_.data())) {}

    device_parameters(const device_parameters&) = delete;
    device_parameters& operator=(const device_parameters&) = delete;
    device_parameters(device_parameters&&) noexcept = default;

    index_t head_dim() const { return d_; }
    index_t num_features() const { return m_; }
    /// Whether Ω is the identity, so that calls make no product with it.
    bool identity() const { return identity_; }
    detail::chunked_impl::spectral<Map, W> view() const {
        return {omega_dev_.get(), bias_.empty() ? nullptr : bias_dev_.get(), params_, identity_};
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
    bool identity_;  ///< Ω = I: the products with Ω are skipped (u = x)
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
        const auto g = detail::chunked_impl::check_call<Map>(sys, params.head_dim(), params.num_features(), q, k, v,
                                                             out, o, offsets);
        with_tables(sys, g, offsets, [&](const detail::chunked_impl::geometry& gt) {
            detail::chunked_impl::forward<Map, W>(sys, params.view(), gt, q, k, v, out, W(o.input_scale), W(o.eps));
        });
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
        const auto g = detail::chunked_impl::check_call<Map>(sys, params.head_dim(), params.num_features(), q, k, v,
                                                             dout, o, offsets, "dout", false);
        detail::chunked_impl::check_same_shape(dq, q, "dq");
        detail::chunked_impl::check_same_shape(dk, k, "dk");
        detail::chunked_impl::check_same_shape(dv, v, "dv");
        const char* names[] = {"q", "k", "v", "dout"};
        const strided_view<const T> in[] = {q, k, v, dout};
        const char* gnames[] = {"dq", "dk", "dv"};
        const strided_view<T> gs[] = {dq, dk, dv};
        for (int a = 0; a < 3; ++a) {
            for (int i = 0; i < 4; ++i)
                detail::chunked_impl::require_arg(!detail::views_may_overlap(gs[a], in[i]), gnames[a],
                                                  std::string("memory disjoint from ") + names[i],
                                                  "an overlapping view");
            for (int b = 0; b < a; ++b)
                detail::chunked_impl::require_arg(!detail::views_may_overlap(gs[a], gs[b]), gnames[a],
                                                  std::string("memory disjoint from ") + gnames[b],
                                                  "an overlapping view");
        }
        with_tables(sys, g, offsets, [&](const detail::chunked_impl::geometry& gt) {
            detail::chunked_impl::backward<Map, W>(
                sys, params.view(), gt, q, k, v, dout,
                detail::chunked_impl::gradient_views<T, W>{dq, dk, dv, d_omega, d_bias}, W(o.input_scale), W(o.eps));
        });
    }

    /// The peak scratch bytes a device-resident call of `pass` holds at once on `sys`
    /// (each request rounded to workspace_alignment; backends/workspace.hpp): a pool of
    /// this size serves the call without growing. Shapes as the call's: batch × heads
    /// heads, q_len queries, k_len keys, value_dim value columns; o as the call's options
    /// (key lengths and packed offsets are read back and checked as the call would).
    /// with_bias_gradient, with_omega_gradient: the backward call will be given a d_bias,
    /// a d_omega pointer. The step's q_len and k_len are 1. Runs nothing on the system but
    /// those two reads.
    template <class Map, class W>
    static std::size_t device_workspace_bytes(const System& sys, const device_parameters<Map, W, System>& params,
                                              device_pass pass, index_t batch, index_t heads, index_t q_len,
                                              index_t k_len, index_t value_dim, const device_options& o = {},
                                              bool with_bias_gradient = true, bool with_omega_gradient = true) {
        namespace ci = detail::chunked_impl;
        ci::require_arg(batch >= 0 && heads >= 0, "batch, heads", "non-negative counts",
                        std::to_string(batch) + ", " + std::to_string(heads));
        ci::require_arg(q_len > 0 && k_len > 0 && value_dim > 0, "q_len, k_len, value_dim", "positive extents",
                        std::to_string(q_len) + ", " + std::to_string(k_len) + ", " + std::to_string(value_dim));
        if (pass == device_pass::step) {
            ci::require_arg(q_len == 1 && k_len == 1, "q_len, k_len", "1 for a decoding step",
                            std::to_string(q_len) + ", " + std::to_string(k_len));
            ci::check_step_options(o);
        }
        std::vector<index_t> offsets;
        const auto g = ci::check_extents<Map>(sys, params.head_dim(), params.num_features(), batch, heads, q_len, k_len,
                                              value_dim, o, offsets);
        detail::workspace_tally tally;
        detail::sizing_system sizing{&tally, detail::mirror_copies<System>()};
        const auto rows = [&](index_t len, index_t dim) {
            return strided_view<W>{nullptr, batch, heads, len, dim, 0, 0, 0};
        };
        const auto out = rows(q_len, value_dim);
        const strided_view<const W> q = rows(q_len, params.head_dim()), k = rows(k_len, params.head_dim()),
                                    v = rows(k_len, value_dim);
        const auto sp = params.view();
        if constexpr (requires { sys.projects_rows(g.d, g.P, sp.omega); })
            sizing.projected_rows = sys.projects_rows(g.d, g.P, sp.omega);
        if constexpr (requires { sys.template fuses_chunk_outputs<W>(g.F, g.dv1); })
            sizing.chunk_outputs = sys.template fuses_chunk_outputs<W>(g.F, g.dv1);
        if constexpr (requires { sys.template single_pass_columns<W>(g.problems, g.d, g.F, g.dv); })
            sizing.single_pass_cw = sys.template single_pass_columns<W>(g.problems, g.d, g.F, g.dv);
        if constexpr (requires { sys.template single_pass_grads_widths<W>(g.problems, g.d, g.F, g.dv); })
            sizing.single_pass_grads = sys.template single_pass_grads_widths<W>(g.problems, g.d, g.F, g.dv);
        const W scale = W(o.input_scale), eps = W(o.eps);
        if (pass == device_pass::forward) {
            with_tables(sizing, g, offsets,
                        [&](const ci::geometry& gt) { ci::forward<Map, W>(sizing, sp, gt, q, k, v, out, scale, eps); });
        } else if (pass == device_pass::backward) {
            // Non-null parameter-gradient pointers select the products that write them; the
            // sizing system never dereferences them.
            W slot{};
            const ci::gradient_views<W, W> grads{rows(q_len, params.head_dim()), rows(k_len, params.head_dim()),
                                                 rows(k_len, value_dim), with_omega_gradient ? &slot : nullptr,
                                                 with_bias_gradient ? &slot : nullptr};
            with_tables(sizing, g, offsets, [&](const ci::geometry& gt) {
                ci::backward<Map, W>(sizing, sp, gt, q, k, v, strided_view<const W>(out), grads, scale, eps);
            });
        } else {
            ci::step<Map, W>(sizing, sp, g, recurrent_state_view{}, q, k, v, out, scale, o.eps);
        }
        return tally.peak;
    }

    // ---- the execution-backend primitives (operators on host tensors) ----

    template <class Map, class T>
    static void features(const feature_problem<Map, T>& pb) {
        using W = work_t<T>;
        const System sys{};
        const device_parameters<Map, W, System> dp(sys, pb.spec);
        auto g = detail::chunked_impl::geometry_of<Map>(pb.spec.d, pb.spec.m, 1, 1, pb.n, pb.n, 0, false, nullptr);
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

    /// A forward on bf16 tensors (the operator's bf16 call): q, k, v read as bf16, every
    /// product with BF16 inputs and FP32 accumulation where the system has a float_math
    /// (tensor cores on a GPU), intermediates in float, the output rounded to bf16.
    template <class Map>
    static bool forward_bf16(const attention_problem<Map, float>& pb, const bf16_forward_io& io) {
        System sys{};
        if constexpr (requires { sys.float_math = float_gemm::bf16; }) sys.float_math = float_gemm::bf16;
        const staged_problem<Map, float, bf16> st(pb, sys, io.q, io.k, io.v);
        const index_t n = pb.problems * pb.q_len * pb.dv;
        auto o = st.sys.template make_buffer<bf16>(n);
        detail::chunked_impl::forward<Map, float>(st.sys, st.dp.view(), st.g, st.q(), st.k(), st.v(),
                                                  st.rows(o.data(), pb.q_len, pb.dv), float(pb.input_scale),
                                                  float(pb.eps));
        st.sys.to_host(io.out, o.data(), n);
        return true;
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
        const auto g = detail::chunked_impl::geometry_of<Map>(pb.spec.d, pb.spec.m, n, 1, 1, 1, dv, false, nullptr);
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
        detail::chunked_impl::check_step_options(o);
        std::vector<index_t> none;
        const auto g =
            detail::chunked_impl::check_call<Map>(sys, params.head_dim(), params.num_features(), q, k, v, out, o, none);
        if (q.len != 1)
            throw kattn::error("kattn: argument 'q': expected one token per head (len 1), got " +
                               std::to_string(q.len));
        if (!state.S || !state.z || !state.C || !state.steps)
            throw kattn::error("kattn: argument 'state': expected S, z, C and steps in system memory, got nullptr");
        detail::chunked_impl::step<Map, W>(sys, params.view(), g, state, q, k, v, out, W(o.input_scale), o.eps);
    }

private:
    /// fn(g) with g pointing at the chunk tables of packed documents when `offsets` (read
    /// back by the checks) has any, built on sys (any system, the sizing one included) for
    /// the length of the call.
    template <class Sys, class Fn>
    static void with_tables(const Sys& sys, detail::chunked_impl::geometry g, const std::vector<index_t>& offsets,
                            Fn&& fn) {
        std::optional<detail::packed_chunk_tables<Sys>> tables;
        if (!offsets.empty()) {
            tables.emplace(sys, offsets.data(), index_t(offsets.size()) - 1);
            tables->apply(g);
        }
        fn(g);
    }

    template <class X>
    using mirror_of = decltype(std::declval<const System&>().mirror(std::declval<const X*>(), index_t(0)));

    /// An operator's problem staged on a system once: the system, parameters, q, k, v (of In:
    /// T, or bf16 for the bf16-tensor forward) and key lengths mirrored, the geometry, and
    /// (packed documents) the chunk tables.
    template <class Map, class T, class In = T>
    struct staged_problem {
        const System sys;
        const device_parameters<Map, work_t<T>, System> dp;
        const index_t B, H, d, Lq, Lk, dv;
        const mirror_of<In> qm, km, vm;
        const mirror_of<index_t> lens;
        std::optional<detail::packed_chunk_tables<System>> tables;
        detail::chunked_impl::geometry g;

        explicit staged_problem(const attention_problem<Map, T>& pb) requires std::is_same_v<In, T>
            : staged_problem(pb, System{}, pb.q, pb.k, pb.v) {}

        staged_problem(const attention_problem<Map, T>& pb, const System& s, const In* q, const In* k, const In* v)
            : sys(s),
              dp(sys, pb.spec),
              B(pb.problems / pb.heads),
              H(pb.heads),
              d(pb.spec.d),
              Lq(pb.q_len),
              Lk(pb.k_len),
              dv(pb.dv),
              qm(sys.mirror(q, pb.problems * Lq * d)),
              km(sys.mirror(k, pb.problems * Lk * d)),
              vm(sys.mirror(v, pb.problems * Lk * dv)),
              lens(sys.mirror(pb.key_lengths, pb.key_lengths ? B : 0)),
              g(detail::chunked_impl::geometry_of<Map>(pb.spec.d, pb.spec.m, B, H, Lq, Lk, dv, pb.causal,
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
        strided_view<const In> q() const { return rows(qm.get(), Lq, d); }
        strided_view<const In> k() const { return rows(km.get(), Lk, d); }
        strided_view<const In> v() const { return rows(vm.get(), Lk, dv); }
    };

    /// A writable system copy of n host elements.
    template <class X>
    static auto copy_to_system(const System& sys, const X* host, index_t n) {
        auto buf = sys.template make_buffer<X>(n);
        const auto m = sys.mirror(host, n);
        sys.launch(n, detail::copy_into<X>{m.get(), buf.data()});
        return buf;
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
};

}  // namespace kattn::backends
