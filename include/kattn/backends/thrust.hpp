// kattn/backends/thrust.hpp — the Thrust execution backend (CUDA GPUs, or any Thrust
// device system: THRUST_DEVICE_SYSTEM_OMP runs the very same code path on CPU threads).
//
//   kattn::backends::thrust<Policy = decltype(thrust::device), Work = double>
//
// Runs every feature map and operator mode with no per-map code (the maps' row functions
// with detail::scalar_ops inside KATTN_HD functors). Each call copies its host inputs to
// the device once and its results back once; intermediates are in Work and results are
// rounded to T once, with the reference backend's semantics. Bitwise identical for any
// thread count or launch configuration. Transfers, memory (the L × F features of every
// head are materialised), algorithms and limits: docs/thrust_backend.md.
#pragma once

#include <type_traits>
#include <vector>

#include "execution_backend.hpp"
#include "problem.hpp"
#include "thrust/backward.hpp"
#include "thrust/common.hpp"
#include "thrust/features.hpp"
#include "thrust/forward.hpp"
#include "thrust/step.hpp"

namespace kattn::backends {

/// Thrust backend; see the file comment. `Policy` is the type of a Thrust execution
/// policy object (default: that of `thrust::device`), `Work` the working precision.
template <class Policy = std::remove_cv_t<std::remove_reference_t<decltype(::thrust::device)>>, class Work = double>
struct thrust {
    static constexpr const char* name = "thrust";
    /// Host-side row work (samplers) runs the scalar row operations.
    using row_ops = detail::scalar_ops;
    using policy_type = Policy;
    using work_type = Work;

    /// φ(s·x) of n rows, without stabiliser.
    template <class Map, class T>
    static void features(const backends::feature_problem<Map, T>& pb) {
        namespace ti = detail::thrust_impl;
        using W = Work;
        const ti::device_spectral<Map, W> sp(pb.spec);
        const index_t d = sp.view.d, P = sp.view.P, F = sp.view.F;
        const auto x = ti::upload(pb.x, pb.n * d);
        ::thrust::device_vector<W> ws(static_cast<std::size_t>(pb.n * (d + P))),
            phi(static_cast<std::size_t>(pb.n * F));
        ti::launch<Policy>(
            pb.n, ti::feature_rows<Map, W, T>{sp.view, ti::raw(x), nullptr, pb.n, 1, nullptr, W(pb.input_scale), false,
                                              ti::raw(ws), ti::raw(phi), nullptr});
        ti::download<Policy>(ti::raw(phi), pb.n * F, pb.phi);
    }

    template <class Map, class T>
    static void forward(const backends::attention_problem<Map, T>& pb, T* out) {
        namespace ti = detail::thrust_impl;
        const ti::forward_state<Map, Work, T> fs(pb, Policy{});
        ti::download<Policy>(ti::raw(fs.out), pb.problems * pb.q_len * pb.dv, out);
    }

    template <class Map, class T>
    static void backward(const backends::attention_problem<Map, T>& pb, const backends::attention_gradients<T>& grads) {
        namespace ti = detail::thrust_impl;
        using W = Work;
        ti::forward_state<Map, W, T> fs(pb, Policy{});
        const ti::geometry& g = fs.g;
        const auto& sv = fs.spec.view;
        const index_t F = sv.F, d = sv.d, P = sv.P, m = sv.m, H = g.H, qr = g.q_rows(), rows = g.rows();
        auto sz = [](index_t n) { return static_cast<std::size_t>(n); };
        const W* phq = ti::raw(fs.phi);
        const W* phk = phq + qr * F;

        const auto G = ti::upload(grads.dout, qr * g.dv);
        ::thrust::device_vector<W> nt(sz(qr * g.dv1));
        ti::launch<Policy>(qr, ti::output_cotangent<W, T>{g, ti::raw(G), ti::raw(fs.out), ti::raw(fs.den),
                                                          ti::raw(fs.clamped), ti::raw(nt)});
        ::thrust::device_vector<W> M;
        if (g.causal) {
            M.resize(sz(qr * ti::chunk));
            ti::launch<Policy>(qr * ti::chunk,
                               ti::intra_scores<Map, W, T>{g, F, phq, phk, ti::raw(fs.shift) + qr, ti::raw(fs.Cq),
                                                           ti::raw(fs.v), ti::raw(nt), ti::raw(fs.K), ti::raw(M)});
        }
        const W* Mp = g.causal ? ti::raw(M) : nullptr;
        const W* Kp = g.causal ? ti::raw(fs.K) : nullptr;

        ::thrust::device_vector<W> dphi(sz(rows * F));
        ti::launch<Policy>(qr * F, ti::query_feature_grad<Map, W>{g, F, ti::raw(fs.S), ti::raw(fs.E), ti::raw(fs.Cq),
                                                                  Mp, phk, ti::raw(nt), ti::raw(dphi)});
        ::thrust::device_vector<W> B(sz(H * g.nb * F * g.dv1));
        ti::launch<Policy>(H * g.nb * F * g.dv1, ti::query_block_state<Map, W>{g, F, phq, ti::raw(nt), ti::raw(fs.E),
                                                                               ti::raw(fs.Cq), ti::raw(B)});
        ::thrust::device_vector<W> Dsuf;
        const W* D = ti::raw(B);  // non-causal: D = Σ_i φ_q,i ñ_iᵀ
        if (g.causal) {
            Dsuf.resize(B.size());
            ti::launch<Policy>(H * F * g.dv1, ti::block_suffix<Map, W>{g, F, ti::raw(fs.E), ti::raw(B), ti::raw(Dsuf)});
            D = ti::raw(Dsuf);
        }
        ::thrust::device_vector<W> dvv(sz(H * g.Lk * g.dv));
        ti::launch<Policy>(H * g.Lk * (F + g.dv),
                           ti::key_grads<W, T>{g, F, D, ti::raw(fs.kw), phq, phk, Kp, Mp, ti::raw(nt), ti::raw(fs.v),
                                               ti::raw(dphi) + qr * F, ti::raw(dvv)});

        const index_t wsz = Map::workspace(m), stride = P + d + wsz + (Map::uses_bias ? m : 0);
        ::thrust::device_vector<W> buf(sz(rows * stride)), dx(sz(rows * d));
        ti::launch<Policy>(rows, ti::vjp_rows<Map, W>{sv, g, stride, wsz, fs.scale, ti::raw(fs.ws), ti::raw(fs.phi),
                                                      ti::raw(fs.shift), ti::raw(dphi), ti::raw(buf), ti::raw(dx)});
        const index_t nspec = d * P + (Map::uses_bias ? m : 0);
        ::thrust::device_vector<W> dsp(sz(nspec));
        ti::launch<Policy>(
            nspec, ti::spectral_grads<Map, W>{sv, g, stride, P + d + wsz, ti::raw(fs.ws), ti::raw(buf), ti::raw(dsp)});

        // Results back: one copy per output.
        ti::download<Policy>(ti::raw(dx), qr * d, grads.dq);
        ti::download<Policy>(ti::raw(dx) + qr * d, H * g.Lk * d, grads.dk);
        ti::download<Policy>(ti::raw(dvv), H * g.Lk * g.dv, grads.dv);
        if (grads.d_omega || grads.d_bias) {
            std::vector<W> hs(sz(nspec));
            ::thrust::copy(dsp.begin(), dsp.end(), hs.begin());
            if (grads.d_omega)
                for (index_t i = 0; i < d * P; ++i) grads.d_omega[i] = static_cast<T>(hs[sz(i)]);
            if (grads.d_bias && Map::uses_bias)
                for (index_t i = 0; i < m; ++i) grads.d_bias[i] = static_cast<T>(hs[sz(d * P + i)]);
        }
    }

    /// One decoding step for every head (see reference::step). The state lives on the
    /// host: it is copied in and out once per call.
    template <class Map, class T>
    static void step(const backends::step_problem<Map, T>& pb) {
        namespace ti = detail::thrust_impl;
        using W = Work;
        const auto& st = pb.state;
        const index_t problems = pb.problems, dv = pb.dv;
        const T input_scale = pb.input_scale;
        const double eps = pb.eps;
        const T *q = pb.q, *k = pb.k, *v = pb.v;
        T* out = pb.out;
        const ti::device_spectral<Map, W> sp(pb.spec);
        const index_t d = sp.view.d, P = sp.view.P, F = sp.view.F;
        auto S = ti::upload(st.S, problems * F * dv);
        auto z = ti::upload(st.z, problems * F);
        auto C = ti::upload(st.C, problems);
        auto steps = ti::upload(st.steps, problems);
        const auto dq = ti::upload(q, problems * d), dk = ti::upload(k, problems * d),
                   dvv = ti::upload(v, problems * dv);
        ::thrust::device_vector<W> ws(static_cast<std::size_t>(problems * (d + P + 2 * F)));
        ::thrust::device_vector<T> o(static_cast<std::size_t>(problems * dv));
        ti::launch<Policy>(problems, ti::step_heads<Map, W, T>{sp.view, dv, W(input_scale), eps, ti::raw(dq),
                                                               ti::raw(dk), ti::raw(dvv), ti::raw(S), ti::raw(z),
                                                               ti::raw(C), ti::raw(steps), ti::raw(ws), ti::raw(o)});
        ::thrust::copy(S.begin(), S.end(), st.S);
        ::thrust::copy(z.begin(), z.end(), st.z);
        ::thrust::copy(C.begin(), C.end(), st.C);
        ::thrust::copy(steps.begin(), steps.end(), st.steps);
        ::thrust::copy(o.begin(), o.end(), out);
    }
};

}  // namespace kattn::backends
