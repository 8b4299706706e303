// kattn/attention/softmax_attention.hpp — exact softmax attention, the O(L²) baseline.
//
//   out_i = Σ_{j ∈ A(i)} softmax_j(scale · q_i·k_j) v_j,   scale = cfg.scale or 1/√d,
// A(i) = the valid keys (j < key_lengths[b]), and j ≤ i under kattn::causal.
// softmax_attention<T>(softmax_config) takes linear_attention's options (kattn::causal,
// kattn::key_lengths, in any order): operator()(q, k, v, opts...) and
// backward(q, k, v, dout, opts...) → {dq, dk, dv}.
// Streaming (online) softmax over 32 × 64 tiles, no L × L buffer; flash-style backward.
// Accumulates in T; bitwise identical for any thread count. Memory, precision and
// validation: docs/operators.md (softmax_attention) and docs/errors.md.
#pragma once

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <exception>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <xtensor/xarray.hpp>
#include <xtensor/xtensor.hpp>

#include "../core/config.hpp"
#include "../core/error.hpp"
#include "../core/shape.hpp"
#include "detail/call_options.hpp"
#include "detail/softmax_kernels.hpp"
#include "options.hpp"

namespace kattn {

/// Options of softmax_attention.
struct softmax_config {
    index_t head_dim = 0;         ///< expected q/k dim; 0 = any
    index_t value_dim = 0;        ///< expected v dim; 0 = any
    std::optional<double> scale;  ///< score scale; default 1/sqrt(q/k dim of the input)
    bool check_finite = true;     ///< scan q, k, v (and dout) for NaN/Inf
};

namespace detail {

/// Containers accepted by softmax_attention<T>.
template <class C, class T>
concept softmax_container =
    std::same_as<C, xt::xtensor<T, 2>> || std::same_as<C, xt::xtensor<T, 4>> || std::same_as<C, xt::xarray<T>>;

}  // namespace detail

/// Exact softmax attention with forward and backward passes. T = float or double.
template <class T = float>
class softmax_attention {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                  "kattn::softmax_attention: T must be float or double");

public:
    /// Gradients of a scalar loss with respect to q, k, v; same container type as the inputs.
    template <class C>
    struct gradients {
        C dq, dk, dv;
    };

    explicit softmax_attention(softmax_config cfg = {}) : cfg_(cfg) {
        detail::require(cfg_.head_dim >= 0, "head_dim", ">= 0 (0 = any)", cfg_.head_dim);
        detail::require(cfg_.value_dim >= 0, "value_dim", ">= 0 (0 = any)", cfg_.value_dim);
        if (cfg_.scale) {
            detail::require(std::isfinite(*cfg_.scale) && *cfg_.scale > 0.0, "scale", "a finite value > 0",
                            *cfg_.scale);
        }
    }

    const softmax_config& config() const noexcept { return cfg_; }

    /// Scale used for inputs whose q/k dim is qk_dim.
    double scale_for(index_t qk_dim) const { return cfg_.scale ? *cfg_.scale : 1.0 / std::sqrt(double(qk_dim)); }

    // ---------------------------------------------------------------- forward

    /// attn(q, k, v, opts...): opts is any subset of kattn::causal and kattn::key_lengths(...),
    /// in any order, each at most once (attention/detail/call_options.hpp).
    template <detail::softmax_container<T> C, class... Opts>
    requires detail::call_options_valid<const detail::no_saved_state&, detail::call_allows_causal_lengths, Opts...> C
    operator()(const C& q, const C& k, const C& v, Opts&&... opts) const {
        const auto o = gather(std::forward<Opts>(opts)...);
        return forward(q, k, v, o.causal, o.has_lengths ? &o.lengths : nullptr);
    }

    // ---------------------------------------------------------------- backward

    /// Gradients of ⟨dout, attn(q, k, v, opts...)⟩ with the forward's options.
    template <detail::softmax_container<T> C, class... Opts>
    requires detail::call_options_valid<const detail::no_saved_state&, detail::call_allows_causal_lengths, Opts...>
        gradients<C> backward(const C& q, const C& k, const C& v, const C& dout, Opts&&... opts)
    const {
        const auto o = gather(std::forward<Opts>(opts)...);
        return backward_impl(q, k, v, dout, o.causal, o.has_lengths ? &o.lengths : nullptr);
    }

private:
    using problem = detail::softmax::problem<T>;

    template <class... Opts>
    static detail::call_options<const detail::no_saved_state> gather(Opts&&... opts) {
        return detail::gather_call_options<const detail::no_saved_state, const detail::no_saved_state&>(
            std::forward<Opts>(opts)...);
    }

    struct setup {
        detail::attention_shape a;
        T scale;
    };

    template <class C>
    setup validate(const C& q, const C& k, const C& v, bool causal, const key_lengths* lengths) const {
        static_assert(C::static_layout == xt::layout_type::row_major,
                      "kattn::softmax_attention: inputs must be row-major");
        setup s;
        s.a = detail::check_qkv(q.shape(), k.shape(), v.shape(), cfg_.head_dim, cfg_.value_dim);
        if (causal) {
            detail::require(s.a.k_len == s.a.q_len, "k",
                            "length equal to q's length " + std::to_string(s.a.q_len) + " under kattn::causal",
                            "length " + std::to_string(s.a.k_len) + " in shape " + detail::shape_text(k.shape()));
        }
        if (lengths) detail::check_key_lengths(*lengths, s.a);
        if (cfg_.check_finite) {
            detail::check_finite("q", q.data(), static_cast<index_t>(q.size()));
            detail::check_finite("k", k.data(), static_cast<index_t>(k.size()));
            detail::check_finite("v", v.data(), static_cast<index_t>(v.size()));
        }
        const double sc = scale_for(s.a.qk_dim);
        s.scale = static_cast<T>(sc);
        detail::require(std::isfinite(s.scale) && s.scale > T(0), "scale", "a finite value > 0 in T", sc);
        return s;
    }

    static problem make_problem(const setup& s, const T* q, const T* k, const T* v, index_t p, bool causal,
                                const key_lengths* lengths) {
        const auto& a = s.a;
        problem pr;
        pr.q = q + p * a.q_len * a.qk_dim;
        pr.k = k + p * a.k_len * a.qk_dim;
        pr.v = v + p * a.k_len * a.v_dim;
        pr.q_len = a.q_len;
        pr.k_len = a.k_len;
        pr.n_keys = lengths ? (*lengths)[static_cast<std::size_t>(p / a.heads)] : a.k_len;
        pr.d = a.qk_dim;
        pr.dv = a.v_dim;
        pr.causal = causal;
        pr.scale = s.scale;
        return pr;
    }

    template <class C>
    static C make_like(const C& q, index_t last) {
        typename C::shape_type shape = q.shape();
        shape.back() = static_cast<typename C::shape_type::value_type>(last);
        return C(shape);
    }

    /// Throws for the first (lowest-index) problem whose scores were not finite.
    static void report_overflow(const std::vector<char>& ok, const detail::attention_shape& a) {
        for (index_t p = 0; p < a.problems(); ++p) {
            if (!ok[static_cast<std::size_t>(p)]) {
                detail::fail("q", "finite scores scale*q.k in the value type",
                             "a non-finite score at batch " + std::to_string(p / a.heads) + ", head " +
                                 std::to_string(p % a.heads));
            }
        }
    }

    template <class C>
    C forward(const C& q, const C& k, const C& v, bool causal, const key_lengths* lengths) const {
        const setup s = validate(q, k, v, causal, lengths);
        const auto& a = s.a;
        C out = make_like(q, a.v_dim);
        const T* qp = q.data();
        const T* kp = k.data();
        const T* vp = v.data();
        T* op = out.data();
        const index_t np = a.problems();
        std::vector<char> ok(static_cast<std::size_t>(np), 1);
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
        for (index_t p = 0; p < np; ++p) {
            T srow[detail::softmax::block_k];
            const problem pr = make_problem(s, qp, kp, vp, p, causal, lengths);
            ok[static_cast<std::size_t>(p)] =
                detail::softmax::forward(pr, op + p * a.q_len * a.v_dim, static_cast<T*>(nullptr), srow) ? 1 : 0;
        }
        report_overflow(ok, a);
        return out;
    }

    template <class C>
    gradients<C> backward_impl(const C& q, const C& k, const C& v, const C& dout, bool causal,
                               const key_lengths* lengths) const {
        const setup s = validate(q, k, v, causal, lengths);
        const auto& a = s.a;
        {
            const auto expect = make_like(q, a.v_dim).shape();
            const auto& got = dout.shape();
            detail::require(got.size() == expect.size() && std::equal(got.begin(), got.end(), expect.begin()), "dout",
                            "shape " + detail::shape_text(expect) + " (the output's)", detail::shape_text(got));
        }
        if (cfg_.check_finite) detail::check_finite("dout", dout.data(), static_cast<index_t>(dout.size()));
        gradients<C> g{make_like(q, a.qk_dim), make_like(k, a.qk_dim), make_like(v, a.v_dim)};
        const T* qp = q.data();
        const T* kp = k.data();
        const T* vp = v.data();
        const T* gp = dout.data();
        T* dqp = g.dq.data();
        T* dkp = g.dk.data();
        T* dvp = g.dv.data();
        const index_t np = a.problems();
        std::vector<char> ok(static_cast<std::size_t>(np), 1);
        std::exception_ptr err = nullptr;
#ifdef _OPENMP
#pragma omp parallel
#endif
        {
            std::vector<T> ws;  // out [q_len, dv] | lse [q_len] | D [q_len], reused across problems
            T srow[detail::softmax::block_k];
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
            for (index_t p = 0; p < np; ++p) {
                try {
                    ws.resize(static_cast<std::size_t>(a.q_len * (a.v_dim + 2)));
                    T* out = ws.data();
                    T* lse = out + a.q_len * a.v_dim;
                    T* drow = lse + a.q_len;
                    const problem pr = make_problem(s, qp, kp, vp, p, causal, lengths);
                    ok[static_cast<std::size_t>(p)] = detail::softmax::forward(pr, out, lse, srow) ? 1 : 0;
                    detail::softmax::backward(pr, gp + p * a.q_len * a.v_dim, out, lse, drow, srow,
                                              dqp + p * a.q_len * a.qk_dim, dkp + p * a.k_len * a.qk_dim,
                                              dvp + p * a.k_len * a.v_dim);
                } catch (...) {
#ifdef _OPENMP
#pragma omp critical(kattn_softmax_backward_error)
#endif
                    if (!err) err = std::current_exception();
                }
            }
        }
        if (err) std::rethrow_exception(err);
        report_overflow(ok, a);
        return g;
    }

    softmax_config cfg_;
};

}  // namespace kattn
