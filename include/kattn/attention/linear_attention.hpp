// kattn/attention/linear_attention.hpp — kernelized (linear) attention, forward and backward.
//
//   out_i = Σ_j φ(q_i)ᵀφ(k_j) v_j / Σ_j φ(q_i)ᵀφ(k_j)          (j ≤ i when causal)
//         = φ(q_i)ᵀ S / φ(q_i)ᵀ z,   S = Σ_j φ(k_j) v_jᵀ,  z = Σ_j φ(k_j)
//
// O(L·F·(d + d_v)) time per head instead of O(L²·d). Composed from three policies:
//   Map      a kattn::feature_map (features::favor, trig, nonstationary, positive<…>, …)
//   Sampler  a kattn::spectral_sampler drawing Ω (default: the map's own default)
//   Backend  a kattn::execution_backend (backends::simd by default, backends::reference)
//   T        float (default) or double
// Inputs are [batch, heads, length, dim] (or [length, dim]); Ω is shared by all heads.
// Options: kattn::causal, per-batch key lengths (padding, excluded from numerator and
// denominator), packed documents (kattn::packed_sequences: cu_seqlens), recurrent decoding with initial_state()/step(), and backward() giving
// ∂q, ∂k, ∂v and the gradient of the spectral parameters (Ω, b). A training step passes a
// saved_state to the forward and then to backward(), which skips its own pass over the
// keys (saved_state.hpp).
// Every buffer size is an overflow-checked product of the extents (detail/extents.hpp:
// kattn::error before any allocation), and step() validates each field of the decoding
// state (batch, heads, S, z, C, steps) against the operator and the tokens.
#pragma once

#include <algorithm>
#include <array>
#include <concepts>
#include <utility>
#include <cmath>
#include <span>
#include <string>
#include <vector>

#include <xtensor/xtensor.hpp>

#include "../fwd.hpp"
#include "../backends/simd.hpp"  // the default backend
#include "../concepts.hpp"
#include "../core/bf16_tensor.hpp"
#include "../core/error.hpp"
#include "../core/fingerprint.hpp"
#include "../core/shape.hpp"
#include "../backends/problem.hpp"
#include "../features/omega_layout.hpp"
#include "../samplers/gaussian.hpp"  // default samplers of the built-in maps
#include "../samplers/orthogonal_gaussian.hpp"
#include "attention_config.hpp"
#include "detail/call_options.hpp"
#include "detail/decoding_state.hpp"
#include "detail/extents.hpp"
#include "detail/output.hpp"
#include "detail/packed.hpp"
#include "options.hpp"
#include "saved_state.hpp"

namespace kattn {

template <class Map, class Sampler = typename Map::default_sampler, class Backend = backends::simd, class T = float>
class linear_attention {
    using map_traits = feature_map_traits<Map>;
    using sampler_traits = spectral_sampler_traits<Sampler>;
    static_assert(sizeof(execution_backend_traits<Backend>) > 0);  // readable errors for a non-backend
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                  "kattn::linear_attention: T must be float or double");
    static_assert(!map_traits::requires_orthogonal || sampler_traits::is_orthogonal || sampler_traits::orthogonal_init,
                  "kattn::linear_attention: this feature map (porf_softplus) is defined with orthogonal "
                  "frequencies; use samplers::orthogonal_gaussian (or samplers::langevin, whose particles "
                  "then start orthogonal)");

public:
    using map_type = Map;
    using sampler_type = Sampler;
    using backend_type = Backend;
    using value_type = T;
    /// The configuration: sizes, seed, options, and the map's and sampler's parameters.
    using config_type = attention_config<Map, Sampler>;

    /// Gradients of a backward pass: inputs' shapes, plus Ω (d × num_features) and b (m; empty
    /// when the map has no bias).
    template <std::size_t R>
    struct gradients {
        xt::xtensor<T, R> dq, dk, dv;
        xt::xtensor<T, 2> d_omega;
        xt::xtensor<T, 1> d_bias;
    };

    /// What a forward call keeps for the backward of the same inputs (saved_state.hpp).
    using saved_state = kattn::saved_state<T>;

    /// Recurrent decoding state of batch × heads sequences, in double: per head S (F × d_v),
    /// z (F), the stabiliser C and the step count (initial_state(); step() checks every field).
    struct state {
        index_t batch = 1, heads = 1;
        std::vector<double> S, z, C;
        std::vector<index_t> steps;
    };

    /// Builds the operator and draws Ω (and b) from a default-constructed sampler.
    explicit linear_attention(const config_type& cfg) requires std::default_initializable<Sampler>
        : linear_attention(cfg, Sampler{}) {}

    /// Builds the operator with a given sampler instance (learned samplers carry
    /// parameters: a fitted mixture, a trained flow, Langevin particles).
    linear_attention(const config_type& cfg, Sampler sampler) : cfg_(cfg), sampler_(std::move(sampler)) {
        cfg_.resolve();
        detail::require(cfg.head_dim >= 1, "head_dim", ">= 1", cfg.head_dim);
        detail::require(cfg.value_dim >= 1, "value_dim", ">= 1", cfg.value_dim);
        detail::require(cfg.num_features >= 1, "num_features", ">= 1", cfg.num_features);
        if constexpr (map_traits::uses_pairs)
            detail::require(cfg.num_features % 2 == 0, "num_features",
                            std::string("an even count for the paired map '") + Map::name + "' (pairs (w1, w2))",
                            cfg.num_features);
        detail::require(std::isfinite(cfg.eps) && cfg.eps > 0, "eps", "a finite value > 0", cfg.eps);
        if (cfg.input_scale)
            detail::require(std::isfinite(*cfg.input_scale) && *cfg.input_scale > 0, "input_scale",
                            "a finite value > 0", *cfg.input_scale);
        // Buffer sizes, overflow-checked before anything is allocated: Ω (d × num_features,
        // also the sampler's draw) and one head's state S (F × d_v, F ≤ 2·num_features).
        detail::checked_extent("num_features", "head_dim x num_features (the entries of omega)", cfg.head_dim,
                               cfg.num_features);
        m_ = map_traits::pairs_or_columns(cfg.num_features);
        detail::checked_extent("value_dim", "feature_dim x value_dim (the entries of one head's state S)",
                               Map::feature_dim(m_), cfg.value_dim);
        Map::validate(cfg_.feature, cfg.head_dim, m_);
        input_scale_ = static_cast<T>(cfg.input_scale               ? *cfg.input_scale
                                      : map_traits::softmax_scaling ? std::pow(double(cfg.head_dim), -0.25)
                                                                    : 1.0);
        resample(cfg.seed);
    }

    /// Redraws Ω (and a random bias) from `seed` with the configured sampler.
    void resample(std::uint64_t seed) {
        const index_t d = cfg_.head_dim, P = cfg_.num_features;
        const index_t dim = map_traits::frequency_dim(d), count = map_traits::uses_pairs ? m_ : P;
        std::vector<double> w(static_cast<std::size_t>(dim * count));
        sampler_.template sample<double>(cfg_.sampler, dim, count, seed, w.data());
        omega_ = xt::xtensor<T, 2>::from_shape({std::size_t(d), std::size_t(P)});
        detail::frequencies_to_omega<map_traits::uses_pairs>(d, count, w.data(), omega_.data());
        if constexpr (map_traits::uses_bias) {
            bias_ = xt::xtensor<T, 1>::from_shape({std::size_t(m_)});
            Map::init_bias(m_, seed, bias_.data());
        }
        cfg_.seed = seed;
    }

    /// The configuration, its shorthands resolved into `feature` and `sampler`.
    const config_type& config() const { return cfg_; }
    const Sampler& sampler() const { return sampler_; }
    index_t head_dim() const { return cfg_.head_dim; }
    index_t value_dim() const { return cfg_.value_dim; }
    index_t num_features() const { return cfg_.num_features; }
    /// Dimension F of φ(x).
    index_t feature_dim() const { return Map::feature_dim(m_); }
    T input_scale() const { return input_scale_; }

    /// Ω ∈ R^{d × num_features} (pairs: ω₁ in columns [0, m), ω₂ in [m, 2m)).
    const xt::xtensor<T, 2>& omega() const { return omega_; }
    /// The bias b ∈ R^m (empty for maps without one).
    const xt::xtensor<T, 1>& bias() const { return bias_; }

    /// Ω, b, d, m and the map's parameters as the backends see them (host pointers into
    /// this operator; valid while it lives and its parameters are not replaced). The
    /// device-resident calls copy them once: backends::device_parameters(sys, spectral()).
    backends::spectral_view<Map, T> spectral() const { return spec(); }

    /// Replaces Ω (learned or externally sampled frequencies).
    void set_omega(const xt::xtensor<T, 2>& omega) {
        const std::array<std::size_t, 2> want{std::size_t(cfg_.head_dim), std::size_t(cfg_.num_features)};
        detail::require(omega.shape()[0] == want[0] && omega.shape()[1] == want[1], "omega",
                        "shape " + detail::shape_text(want), detail::shape_text(omega.shape()));
        detail::check_finite("omega", omega.data(), index_t(omega.size()));
        omega_ = omega;
    }
    void set_bias(const xt::xtensor<T, 1>& bias) {
        detail::require(map_traits::uses_bias, "bias", std::string("no bias: map '") + Map::name + "' has none",
                        "a bias of size " + std::to_string(bias.size()));
        detail::require(index_t(bias.size()) == m_, "bias", "size " + std::to_string(m_), bias.size());
        detail::check_finite("bias", bias.data(), index_t(bias.size()));
        bias_ = bias;
    }

    /// φ(s·x) for the rows of x [n, head_dim] → [n, feature_dim], the exact map (no
    /// stabiliser), s = input_scale(). Attention equals Σ_j φ(q_i)ᵀφ(k_j)v_j / Σ_j φ(q_i)ᵀφ(k_j).
    xt::xtensor<T, 2> features(const xt::xtensor<T, 2>& x) const {
        detail::require(index_t(x.shape()[1]) == cfg_.head_dim && x.shape()[0] > 0, "x",
                        "shape [n >= 1, head_dim = " + std::to_string(cfg_.head_dim) + "]",
                        detail::shape_text(x.shape()));
        detail::checked_extent("x", "rows x feature_dim (the features' entries)", index_t(x.shape()[0]), feature_dim());
        if (cfg_.check_finite) detail::check_finite("x", x.data(), index_t(x.size()));
        xt::xtensor<T, 2> phi = xt::xtensor<T, 2>::from_shape({x.shape()[0], std::size_t(feature_dim())});
        backends::feature_problem<Map, T> pb{spec(), x.data(), phi.data(), index_t(x.shape()[0]), input_scale_};
        Backend::template features<Map>(pb);
        return phi;
    }

    // ---- forward ----------------------------------------------------------------------------
    /// attn(q, k, v, opts...): opts is any subset of kattn::causal, kattn::key_lengths(...),
    /// kattn::packed_sequences{...} and a saved_state (filled for backward(), saved_state.hpp),
    /// in any order, each at most once; key lengths and packed documents exclude each other
    /// (detail/call_options.hpp). Packed documents: q, k, v are [1, heads, L, dim] or [L, dim]
    /// and hold the documents back to back; no token attends across a boundary.
    template <std::size_t R, class... Opts>
    requires detail::call_options_valid<saved_state&, detail::call_allows_all, Opts...> xt::xtensor<T, R>
    operator()(const xt::xtensor<T, R>& q, const xt::xtensor<T, R>& k, const xt::xtensor<T, R>& v,
               Opts&&... opts) const {
        xt::xtensor<T, R> out = xt::xtensor<T, R>::from_shape(output_shape(q, v));
        forward(q, k, v, out, detail::gather_call_options<saved_state, saved_state&>(std::forward<Opts>(opts)...));
        return out;
    }

    /// The same call writing into the caller's `out`, which must already have the output's
    /// shape (q's, with v's last extent) and must not share memory with q, k or v; nothing
    /// is allocated for the result. A call that throws leaves `out` unspecified.
    template <std::size_t R, class... Opts>
    requires detail::call_options_valid<saved_state&, detail::call_allows_all, Opts...>
    void forward_into(xt::xtensor<T, R>& out, const xt::xtensor<T, R>& q, const xt::xtensor<T, R>& k,
                      const xt::xtensor<T, R>& v, Opts&&... opts) const {
        const std::array<const T*, 3> inputs{q.data(), k.data(), v.data()};
        const std::array<std::size_t, 3> sizes{q.size(), k.size(), v.size()};
        detail::check_output("out", out, output_shape(q, v), inputs, sizes);
        forward(q, k, v, out, detail::gather_call_options<saved_state, saved_state&>(std::forward<Opts>(opts)...));
    }

    /// bf16 tensors (operators of T = float): q, k, v rounded to bf16 in, the output rounded
    /// to bf16 out, every sum in float (docs/operators.md, "bf16 tensors"). Options:
    /// kattn::causal and kattn::key_lengths.
    template <std::size_t R, class... Opts>
    requires std::same_as<T, float> &&
        detail::call_options_valid<saved_state&, detail::call_allows_causal_lengths, Opts...>
            xt::xtensor<bf16, R>
    operator()(const xt::xtensor<bf16, R>& q, const xt::xtensor<bf16, R>& k, const xt::xtensor<bf16, R>& v,
               Opts&&... opts) const {
        const auto o = detail::gather_call_options<saved_state, saved_state&>(std::forward<Opts>(opts)...);
        return forward_bf16(q, k, v, o.causal, o.lengths, o.has_lengths);
    }

    // ---- backward ---------------------------------------------------------------------------
    /// Gradients of ⟨dout, attn(q, k, v, opts...)⟩: ∂q, ∂k, ∂v, ∂Ω and ∂b. opts are the
    /// forward's options; a saved_state from the forward of these inputs (same options) lets
    /// the backend skip its own pass over the keys, with the same bits as without it.
    template <std::size_t R, class... Opts>
    requires detail::call_options_valid<const saved_state&, detail::call_allows_all, Opts...> gradients<R> backward(
        const xt::xtensor<T, R>& q, const xt::xtensor<T, R>& k, const xt::xtensor<T, R>& v,
        const xt::xtensor<T, R>& dout, Opts&&... opts)
    const {
        gradients<R> g;
        run_backward(q, k, v, dout, g,
                     detail::gather_call_options<const saved_state, const saved_state&>(std::forward<Opts>(opts)...));
        return g;
    }

    /// The same call into the caller's gradients `g`: each of its tensors keeps its memory
    /// when it already has the right shape and is resized otherwise, so a training loop that
    /// passes the same `g` every step allocates nothing after the first. g's tensors must not
    /// share memory with the inputs.
    template <std::size_t R, class... Opts>
    requires detail::call_options_valid<const saved_state&, detail::call_allows_all, Opts...>
    void backward_into(gradients<R>& g, const xt::xtensor<T, R>& q, const xt::xtensor<T, R>& k,
                       const xt::xtensor<T, R>& v, const xt::xtensor<T, R>& dout, Opts&&... opts) const {
        run_backward(q, k, v, dout, g,
                     detail::gather_call_options<const saved_state, const saved_state&>(std::forward<Opts>(opts)...));
    }

    /// bf16 tensors (T = float): the float backward of the widened tensors; gradients in
    /// float. Option: kattn::causal.
    template <std::size_t R, class... Opts>
    requires std::same_as<T, float> &&
        detail::call_options_valid<const saved_state&, detail::call_allows_causal, Opts...>
            gradients<R> backward(const xt::xtensor<bf16, R>& q, const xt::xtensor<bf16, R>& k,
                                  const xt::xtensor<bf16, R>& v, const xt::xtensor<bf16, R>& dout, Opts&&... opts)
    const { return backward(to_float(q), to_float(k), to_float(v), to_float(dout), std::forward<Opts>(opts)...); }

    // ---- recurrent decoding ---------------------------------------------------------------
    /// Empty state for `batch × heads` sequences.
    state initial_state(index_t batch = 1, index_t heads = 1) const {
        detail::require(batch >= 1, "batch", ">= 1", batch);
        detail::require(heads >= 1, "heads", ">= 1", heads);
        detail::checked_extent("heads", "batch x heads x feature_dim x value_dim (the state's S)", batch, heads,
                               feature_dim(), cfg_.value_dim);
        const auto n = std::size_t(batch * heads), F = std::size_t(feature_dim()), dv = std::size_t(cfg_.value_dim);
        return state{batch,
                     heads,
                     std::vector<double>(n * F * dv, 0.0),
                     std::vector<double>(n * F, 0.0),
                     std::vector<double>(n, 0.0),
                     std::vector<index_t>(n, 0)};
    }

    /// Appends token t (k_t, v_t) to the state and returns the attention of q_t over all tokens
    /// so far, equal to the causal forward at position t. Shapes [dim] (single sequence) or
    /// [batch, heads, dim].
    template <std::size_t R>
    xt::xtensor<T, R> step(state& st, const xt::xtensor<T, R>& q_t, const xt::xtensor<T, R>& k_t,
                           const xt::xtensor<T, R>& v_t) const {
        static_assert(R == 1 || R == 3, "kattn::linear_attention::step: tokens are [dim] or [batch, heads, dim]");
        const index_t n = check_state(st);
        const auto expect = [&](std::string_view arg, const auto& x, index_t dim) {
            std::array<std::size_t, R> want{};
            if constexpr (R == 3)
                want = {std::size_t(st.batch), std::size_t(st.heads), std::size_t(dim)};
            else
                want = {std::size_t(dim)};
            detail::require(n == 1 || R == 3, arg, "rank 3 [batch, heads, dim] for a batched state",
                            "rank " + std::to_string(R));
            bool ok = true;
            for (std::size_t i = 0; i < R; ++i) ok = ok && x.shape()[i] == want[i];
            detail::require(ok, arg, "shape " + detail::shape_text(want), detail::shape_text(x.shape()));
            if (cfg_.check_finite) detail::check_finite(arg, x.data(), index_t(x.size()));
        };
        expect("q_t", q_t, cfg_.head_dim);
        expect("k_t", k_t, cfg_.head_dim);
        expect("v_t", v_t, cfg_.value_dim);
        xt::xtensor<T, R> out = xt::xtensor<T, R>::from_shape(v_t.shape());
        backends::step_problem<Map, T> sp;
        sp.spec = spec();
        sp.state = backends::recurrent_state_view{st.S.data(), st.z.data(), st.C.data(), st.steps.data()};
        sp.q = q_t.data();
        sp.k = k_t.data();
        sp.v = v_t.data();
        sp.out = out.data();
        sp.problems = n;
        sp.dv = cfg_.value_dim;
        sp.input_scale = input_scale_;
        sp.eps = cfg_.eps;
        Backend::template step<Map>(sp);
        return out;
    }

private:
    /// Validates every field of a decoding state; returns its head count batch·heads.
    index_t check_state(const state& st) const {
        return detail::check_decoding_state(st, feature_dim(), cfg_.value_dim, cfg_.check_finite);
    }

    template <class Attention, class Comm>
    friend class dist::sequence_parallel;

    backends::spectral_view<Map, T> spec() const {
        return backends::spectral_view<Map, T>{omega_.data(), map_traits::uses_bias ? bias_.data() : nullptr,
                                               cfg_.head_dim, m_, cfg_.feature};
    }

    /// The problem of q, k, v (of T, or bf16: then its q, k, v stay nullptr).
    template <class E, std::size_t R>
    backends::attention_problem<Map, T> make_problem(const xt::xtensor<E, R>& q, const xt::xtensor<E, R>& k,
                                                     const xt::xtensor<E, R>& v, bool causal, key_lengths lengths,
                                                     bool has_lengths, const packed_sequences* packed) const {
        static_assert(R == 2 || R == 4,
                      "kattn::linear_attention: inputs are [length, dim] or "
                      "[batch, heads, length, dim]");
        const auto a = detail::check_qkv(q.shape(), k.shape(), v.shape(), cfg_.head_dim, cfg_.value_dim);
        if (causal)
            detail::require(a.q_len == a.k_len, "k",
                            "length equal to q's length " + std::to_string(a.q_len) + " (causal attention)", a.k_len);
        if (has_lengths) detail::check_key_lengths(lengths, a);
        if (packed) {
            detail::require(a.batch == 1 && a.q_len == a.k_len, "q",
                            "batch 1 and as many queries as keys (packed documents, [1, heads, L, dim])",
                            detail::shape_text(q.shape()) + " with k " + detail::shape_text(k.shape()));
            detail::check_packed_offsets(packed->cu_seqlens, a.q_len);
        }
        // The backends' buffers: one head's feature rows (L × F), the heads' states (F × d_v each).
        detail::checked_extent("q", "length x feature_dim (one head's feature rows)", a.q_len, feature_dim());
        detail::checked_extent("k", "length x feature_dim (one head's feature rows)", a.k_len, feature_dim());
        detail::checked_extent("q", "batch x heads x feature_dim x value_dim (the heads' states)", a.problems(),
                               feature_dim(), a.v_dim);
        if (cfg_.check_finite) {
            detail::check_finite("q", q.data(), index_t(q.size()));
            detail::check_finite("k", k.data(), index_t(k.size()));
            detail::check_finite("v", v.data(), index_t(v.size()));
        }
        backends::attention_problem<Map, T> pb;
        pb.spec = spec();
        if constexpr (std::is_same_v<E, T>) {
            pb.q = q.data();
            pb.k = k.data();
            pb.v = v.data();
        }
        pb.problems = a.problems();
        pb.heads = a.heads;
        pb.q_len = a.q_len;
        pb.k_len = a.k_len;
        pb.dv = a.v_dim;
        pb.key_lengths = has_lengths ? lengths.data() : nullptr;
        pb.causal = causal;
        pb.input_scale = input_scale_;
        pb.eps = cfg_.eps;
        pb.backward_cache_bytes = cfg_.backward_cache_bytes;
        if (packed && backend_packs) {
            pb.cu_seqlens = packed->cu_seqlens.data();
            pb.documents = index_t(packed->cu_seqlens.size()) - 1;
        }
        return pb;
    }

    static constexpr bool backend_saves = execution_backend_traits<Backend>::saves_forward_state;
    static constexpr bool backend_packs = execution_backend_traits<Backend>::packs_sequences;

    /// Fingerprint of Ω and b (a saved state is valid for these parameters only).
    std::uint64_t params_fingerprint() const {
        return detail::rows_fingerprint(omega_.data(), 1, index_t(omega_.size()), 0, 3) +
               detail::rows_fingerprint(bias_.data(), 1, index_t(bias_.size()), 0, 4);
    }

    /// The output's shape: q's, with v's last extent.
    template <std::size_t R, class E>
    static std::array<std::size_t, R> output_shape(const xt::xtensor<E, R>& q, const xt::xtensor<E, R>& v) {
        std::array<std::size_t, R> shape;
        std::copy(q.shape().begin(), q.shape().end(), shape.begin());
        shape[R - 1] = v.shape()[R - 1];
        return shape;
    }

    template <std::size_t R>
    void forward(const xt::xtensor<T, R>& q, const xt::xtensor<T, R>& k, const xt::xtensor<T, R>& v,
                 xt::xtensor<T, R>& out, const detail::call_options<saved_state>& o) const {
        const auto pb = make_problem(q, k, v, o.causal, o.lengths, o.has_lengths, o.packed);
        saved_state* keep = o.saved;
        if (keep) keep->clear();
        if (o.packed && !backend_packs) {  // one document at a time (detail/packed.hpp)
            detail::per_document_forward<Backend>(pb, o.packed->cu_seqlens, out.data());
        } else if (keep) {
            if constexpr (backend_saves)
                Backend::template forward<Map>(pb, out.data(), keep->backend_);
            else
                Backend::template forward<Map>(pb, out.data());
        } else {
            Backend::template forward<Map>(pb, out.data());
        }
        if (keep)
            keep->record(q.shape(), k.shape(), v.shape(), o.causal, o.lengths, o.has_lengths, o.packed,
                         params_fingerprint());
    }

    /// bf16 forward: the backend's own kernels where it has them for this problem,
    /// otherwise the float forward on the widened tensors, rounded back.
    template <std::size_t R>
    xt::xtensor<bf16, R> forward_bf16(const xt::xtensor<bf16, R>& q, const xt::xtensor<bf16, R>& k,
                                      const xt::xtensor<bf16, R>& v, bool causal, key_lengths lengths,
                                      bool has_lengths) const {
        const auto pb = make_problem(q, k, v, causal, lengths, has_lengths, nullptr);
        auto out = xt::xtensor<bf16, R>::from_shape(output_shape(q, v));
        if constexpr (detail::backend_forwards_bf16<Backend, Map>)
            if (Backend::template forward_bf16<Map>(pb, {q.data(), k.data(), v.data(), out.data()})) return out;
        detail::call_options<saved_state> o;
        o.causal = causal;
        o.lengths = lengths;
        o.has_lengths = has_lengths;
        const auto qf = to_float(q), kf = to_float(k), vf = to_float(v);
        xt::xtensor<float, R> wide = xt::xtensor<float, R>::from_shape(output_shape(q, v));
        forward(qf, kf, vf, wide, o);
        std::transform(wide.begin(), wide.end(), out.begin(), [](float x) { return bf16(x); });
        return out;
    }

    /// Shapes g's tensors (keeping memory of the right shape) and runs the backend's backward.
    template <std::size_t R>
    void run_backward(const xt::xtensor<T, R>& q, const xt::xtensor<T, R>& k, const xt::xtensor<T, R>& v,
                      const xt::xtensor<T, R>& dout, gradients<R>& g,
                      const detail::call_options<const saved_state>& o) const {
        const auto pb = make_problem(q, k, v, o.causal, o.lengths, o.has_lengths, o.packed);
        if (o.saved)
            o.saved->check(q.shape(), k.shape(), v.shape(), o.causal, o.lengths, o.has_lengths, o.packed,
                           params_fingerprint());
        const auto oshape = output_shape(q, v);
        detail::require(std::equal(oshape.begin(), oshape.end(), dout.shape().begin(), dout.shape().end()), "dout",
                        "the output's shape " + detail::shape_text(oshape), detail::shape_text(dout.shape()));
        if (cfg_.check_finite) detail::check_finite("dout", dout.data(), index_t(dout.size()));
        const std::array<const T*, 4> inputs{q.data(), k.data(), v.data(), dout.data()};
        const std::array<std::size_t, 4> sizes{q.size(), k.size(), v.size(), dout.size()};
        detail::shape_output("g.dq", g.dq, q.shape(), inputs, sizes);
        detail::shape_output("g.dk", g.dk, k.shape(), inputs, sizes);
        detail::shape_output("g.dv", g.dv, v.shape(), inputs, sizes);
        detail::shape_output("g.d_omega", g.d_omega, omega_.shape(), inputs, sizes);
        const std::array<std::size_t, 1> bshape{map_traits::uses_bias ? std::size_t(m_) : std::size_t(0)};
        detail::shape_output("g.d_bias", g.d_bias, bshape, inputs, sizes);
        backends::attention_gradients<T> gv{dout.data(),      g.dq.data(),
                                            g.dk.data(),      g.dv.data(),
                                            g.d_omega.data(), map_traits::uses_bias ? g.d_bias.data() : nullptr};
        if (o.packed && !backend_packs) {
            detail::per_document_backward<Backend>(pb, o.packed->cu_seqlens, gv);
            return;
        }
        if constexpr (backend_saves) {
            if (o.saved) {
                Backend::template backward<Map>(pb, gv, o.saved->backend_);
                return;
            }
        }
        Backend::template backward<Map>(pb, gv);
    }

    config_type cfg_;
    Sampler sampler_;
    index_t m_ = 0;
    T input_scale_ = 1;
    xt::xtensor<T, 2> omega_;
    xt::xtensor<T, 1> bias_;
};

}  // namespace kattn
