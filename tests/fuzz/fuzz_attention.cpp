// libFuzzer target: the attention operators at the API level. The input decodes into an
// operator (kattn::linear_attention with map favor, elu or trig on backends reference or simd,
// in float or double; or kattn::softmax_attention in float or double), small shapes, options
// (causal, key lengths, packed documents with valid or wild offsets, check_finite, eps,
// input_scale, temperature, sigma, softmax scale, mismatched shapes) and values (small, ±1e5-scale, denormal, ±0, NaN, ±Inf). It runs forward
// and backward in the decoded mode and, for linear attention, recurrent step() over the tokens
// and the saved-state forms (forward keeping a saved_state, backward reading it).
// Asserts: every call throws kattn::error or returns; when the inputs were finite, what it
// returns is all finite; with check_finite on, non-finite inputs are rejected (kattn::error);
// the saved-state forms return the plain forms' bits (or throw where they throw).
// Any other exception or a crash is a finding.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#include <kattn/attention/linear_attention.hpp>
#include <kattn/attention/softmax_attention.hpp>
#include <kattn/backends/reference.hpp>
#include <kattn/backends/simd.hpp>
#include <kattn/features/elu.hpp>
#include <kattn/features/favor.hpp>
#include <kattn/features/trig.hpp>

#include "fuzz_common.hpp"

namespace {

using namespace kattn_fuzz;
using kattn::index_t;

/// The fuzz input as a byte stream; past its end, bytes of a fixed sequence (small values).
struct input {
    const std::uint8_t* p;
    std::size_t n, i = 0;
    std::uint32_t lcg = 12345;
    bool done() const { return i >= n; }
    std::uint8_t u8() {
        if (i < n) return p[i++];
        lcg = lcg * 1664525u + 1013904223u;
        return std::uint8_t(lcg >> 24);
    }
};

/// One value: mostly small, sometimes huge (up to ~1e6 in magnitude), denormal, ±0, NaN or ±Inf.
template <class T>
T value(input& in, bool& finite) {
    const bool exhausted = in.done();
    const std::uint8_t c = in.u8(), m = in.u8();
    const T sign = (m & 1) ? T(-1) : T(1);
    const T small = T(static_cast<std::int8_t>(m)) / T(32);
    if (exhausted) return small;
    switch (c % 24) {
        case 16:
            return sign * T(std::pow(10.0, 1 + m % 6)) * (1 + T(m) / 256);
        case 17:
            return sign * std::numeric_limits<T>::denorm_min() * T(1 + m % 8);
        case 18:
            return sign * std::numeric_limits<T>::min();
        case 19:
            return sign * T(0);
        case 20:
            return sign * T(1e5);
        case 21:
            finite = false;
            return std::numeric_limits<T>::quiet_NaN();
        case 22:
            finite = false;
            return sign * std::numeric_limits<T>::infinity();
        case 23:
            return T(m) / T(8) - T(16);
        default:
            return small;
    }
}

template <class T, std::size_t R>
xt::xtensor<T, R> make(input& in, std::array<std::size_t, R> shape, bool& finite) {
    auto x = xt::xtensor<T, R>::from_shape(shape);
    for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = value<T>(in, finite);
    return x;
}

template <class C>
void require_finite(const C& x, const char* what) {
    for (std::size_t i = 0; i < x.size(); ++i)
        if (!std::isfinite(static_cast<double>(x.data()[i])))
            finding(std::string(what) + ": a non-finite output for finite inputs");
}

/// The decoded problem (everything but the values).
struct problem {
    std::size_t B, H, Lq, Lk, d, dv, m;
    bool causal, has_lengths, check_finite, step, packed;
    int mismatch;  // 0 none, 1 k's dim d + 1, 2 v one key longer, 3 dout one column wider
    std::uint64_t seed;
    int eps, input_scale, temperature, sigma, scale, head_dim;
    std::vector<index_t> lengths;
    std::vector<index_t> cu;  ///< packed documents' offsets (linear attention only)
};

problem decode(input& in) {
    problem p{};
    const std::uint8_t b1 = in.u8(), b2 = in.u8(), b3 = in.u8(), b4 = in.u8(), b5 = in.u8(), b6 = in.u8();
    p.B = 1 + b1 % 2;
    p.H = 1 + (b1 >> 1) % 2;
    p.causal = (b1 >> 2) & 1;
    p.has_lengths = (b1 >> 3) & 1;
    p.check_finite = !((b1 >> 4) & 1);
    p.mismatch = ((b1 >> 5) & 1) && ((b1 >> 6) & 1) ? 1 + b6 % 3 : 0;
    p.step = (b1 >> 7) & 1;
    p.Lq = 1 + b2 % 8;
    p.Lk = (p.causal || (b2 & 0x80)) ? p.Lq : 1 + (b2 >> 3) % 8;
    p.d = 1 + b3 % 8;
    p.dv = 1 + (b3 >> 3) % 4;
    p.head_dim = (b3 >> 5) % 4;  // softmax_config.head_dim: 0 = any, 1 = d, 2 = d + 1, 3 = 0
    p.m = 1 + b4 % 8;
    p.seed = b4 >> 3;
    p.eps = b5 % 8;
    p.input_scale = (b5 >> 3) % 4;
    p.scale = (b5 >> 5) % 8;
    p.temperature = (b6 >> 2) % 4;
    p.sigma = (b6 >> 4) % 4;
    for (std::size_t b = 0; b < p.B; ++b) p.lengths.push_back(index_t(in.u8() % (p.Lk + 2)));  // 0, Lk + 1: invalid
    // Packed documents (no key lengths): usually a valid cu_seqlens on [1, H, Lq, d] (cut
    // points sorted, made unique, Lq appended), sometimes raw offsets and shapes as decoded.
    p.packed = ((b6 >> 6) & 1) && !p.has_lengths;
    if (p.packed) {
        const std::uint8_t c = in.u8();
        const bool wild = (c >> 7) & 1;
        const std::size_t cuts = c % 4;
        p.cu.push_back(0);
        for (std::size_t i = 0; i < cuts; ++i) p.cu.push_back(index_t(in.u8() % (p.Lq + 2)));
        if (!wild) {
            p.B = 1;
            p.Lk = p.Lq;
            std::erase_if(p.cu, [&](index_t x) { return x >= index_t(p.Lq); });
            std::sort(p.cu.begin(), p.cu.end());
            p.cu.erase(std::unique(p.cu.begin(), p.cu.end()), p.cu.end());
        }
        if (!wild || (c >> 6) & 1) p.cu.push_back(index_t(p.Lq));
    }
    return p;
}

template <class T>
struct inputs {
    xt::xtensor<T, 4> q, k, v, dout;
    bool finite = true;       // q, k, v
    bool dout_finite = true;  // dout (backward only)
};

template <class T>
inputs<T> make_inputs(input& in, const problem& p) {
    inputs<T> x;
    const std::size_t kd = p.d + (p.mismatch == 1), Lv = p.Lk + (p.mismatch == 2), od = p.dv + (p.mismatch == 3);
    x.q = make<T, 4>(in, {p.B, p.H, p.Lq, p.d}, x.finite);
    x.k = make<T, 4>(in, {p.B, p.H, p.Lk, kd}, x.finite);
    x.v = make<T, 4>(in, {p.B, p.H, Lv, p.dv}, x.finite);
    x.dout = make<T, 4>(in, {p.B, p.H, p.Lq, od}, x.dout_finite);
    return x;
}

/// f(extra...) with the mode's trailing arguments: (), (causal), (key_lengths), (causal, key_lengths).
template <class F>
decltype(auto) in_mode(const problem& p, F&& f) {
    const kattn::key_lengths lengths(p.lengths);
    if (p.causal && p.has_lengths) return f(kattn::causal, lengths);
    if (p.causal) return f(kattn::causal);
    if (p.has_lengths) return f(lengths);
    return f();
}

/// in_mode for linear attention: also (packed_sequences) and (causal, packed_sequences).
template <class F>
decltype(auto) in_linear_mode(const problem& p, F&& f) {
    const kattn::packed_sequences docs{p.cu};
    if (p.packed && p.causal) return f(kattn::causal, docs);
    if (p.packed) return f(docs);
    return in_mode(p, f);
}

/// Whether two containers hold the same bits (NaN payloads included).
template <class A, class B>
bool same_bits(const A& a, const B& b) {
    return a.size() == b.size() &&
           (a.size() == 0 || std::memcmp(a.data(), b.data(), a.size() * sizeof(*a.data())) == 0);
}

/// Runs call(); when it returns, check(result) applies the finiteness rules.
template <class Call, class Check>
void checked_call(bool finite, bool check_finite, const char* what, Call&& call, Check&& check) {
    expect_kattn_error([&] {
        const auto r = call();
        if (finite)
            check(r);
        else if (check_finite)
            finding(std::string(what) + ": non-finite inputs accepted with check_finite on");
    });
}

template <class Map, class Backend, class T>
void run_linear(input& in, const problem& p) {
    using op_t = kattn::linear_attention<Map, typename Map::default_sampler, Backend, T>;
    typename op_t::config_type cfg;
    cfg.head_dim = index_t(p.d);
    cfg.value_dim = index_t(p.dv);
    cfg.num_features = index_t(p.m);
    cfg.seed = p.seed;
    cfg.check_finite = p.check_finite;
    constexpr double eps[8] = {1e-6, 1e-6, 1e-6, 1e-30, 1.0, 0.0, -1.0, std::numeric_limits<double>::quiet_NaN()};
    cfg.eps = eps[p.eps];
    if (p.input_scale == 1) cfg.input_scale = 0.5;
    if (p.input_scale == 2) cfg.input_scale = 1e3;
    if (p.input_scale == 3) cfg.input_scale = 0.0;
    if (p.temperature == 1) cfg.temperature = 0.01;
    if (p.temperature == 2) cfg.temperature = 100.0;
    if (p.sigma == 1) cfg.sigma = 0.1;
    if (p.sigma == 2) cfg.sigma = 10.0;
    std::optional<op_t> op;
    if (!expect_kattn_error([&] { op.emplace(cfg); })) return;  // an invalid configuration, rejected
    const inputs<T> x = make_inputs<T>(in, p);

    checked_call(
        x.finite, p.check_finite, "linear_attention forward",
        [&] { return in_linear_mode(p, [&](auto... extra) { return (*op)(x.q, x.k, x.v, extra...); }); },
        [](const auto& out) { require_finite(out, "linear_attention forward"); });
    checked_call(
        x.finite && x.dout_finite, p.check_finite, "linear_attention backward",
        [&] { return in_linear_mode(p, [&](auto... extra) { return op->backward(x.q, x.k, x.v, x.dout, extra...); }); },
        [](const auto& g) {
            require_finite(g.dq, "linear_attention backward dq");
            require_finite(g.dk, "linear_attention backward dk");
            require_finite(g.dv, "linear_attention backward dv");
            require_finite(g.d_omega, "linear_attention backward d_omega");
            require_finite(g.d_bias, "linear_attention backward d_bias");
        });
    // The saved-state forms: a kattn::error where the plain forms throw one, their bits otherwise.
    expect_kattn_error([&] {
        typename op_t::saved_state s;
        const auto out = in_linear_mode(p, [&](auto... extra) { return (*op)(x.q, x.k, x.v, extra..., s); });
        const auto g =
            in_linear_mode(p, [&](auto... extra) { return op->backward(x.q, x.k, x.v, x.dout, extra..., s); });
        const auto out0 = in_linear_mode(p, [&](auto... extra) { return (*op)(x.q, x.k, x.v, extra...); });
        const auto g0 = in_linear_mode(p, [&](auto... extra) { return op->backward(x.q, x.k, x.v, x.dout, extra...); });
        if (!same_bits(out, out0)) finding("saved state: the forward's output differs from the plain forward's");
        if (!same_bits(g.dq, g0.dq) || !same_bits(g.dk, g0.dk) || !same_bits(g.dv, g0.dv) ||
            !same_bits(g.d_omega, g0.d_omega) || !same_bits(g.d_bias, g0.d_bias))
            finding("saved state: the gradients differ from the plain backward's");
    });
    if (!p.step) return;
    // Recurrent decoding over the first min(Lq, Lk) tokens of q, k, v.
    expect_kattn_error([&] {
        auto st = op->initial_state(index_t(p.B), index_t(p.H));
        const std::size_t L = std::min({p.Lq, p.Lk, x.v.shape()[2]});
        for (std::size_t t = 0; t < L; ++t) {
            auto token = [&](const xt::xtensor<T, 4>& a) {
                auto r = xt::xtensor<T, 3>::from_shape({a.shape()[0], a.shape()[1], a.shape()[3]});
                for (std::size_t b = 0; b < a.shape()[0]; ++b)
                    for (std::size_t h = 0; h < a.shape()[1]; ++h)
                        for (std::size_t j = 0; j < a.shape()[3]; ++j) r(b, h, j) = a(b, h, t, j);
                return r;
            };
            bool finite = true;  // of this token
            const auto q = token(x.q), k = token(x.k), v = token(x.v);
            for (const auto* a : {&q, &k, &v})
                for (std::size_t i = 0; i < a->size(); ++i) finite = finite && std::isfinite(a->data()[i]);
            checked_call(
                finite, p.check_finite, "linear_attention step", [&] { return op->step(st, q, k, v); },
                [](const auto& out) { require_finite(out, "linear_attention step"); });
            if (!finite) break;  // the state may now hold non-finite values (check_finite off)
        }
    });
}

template <class T>
void run_softmax(input& in, const problem& p) {
    kattn::softmax_config cfg;
    cfg.head_dim = p.head_dim == 1 ? index_t(p.d) : p.head_dim == 2 ? index_t(p.d + 1) : 0;
    cfg.check_finite = p.check_finite;
    constexpr double scales[8] = {0, 0, 0, 1e5, 1e-5, 0.0, -2.0, std::numeric_limits<double>::quiet_NaN()};
    if (p.scale >= 3) cfg.scale = scales[p.scale];
    std::optional<kattn::softmax_attention<T>> op;
    if (!expect_kattn_error([&] { op.emplace(cfg); })) return;
    const inputs<T> x = make_inputs<T>(in, p);
    checked_call(
        x.finite, p.check_finite, "softmax_attention forward",
        [&] { return in_mode(p, [&](auto... extra) { return (*op)(x.q, x.k, x.v, extra...); }); },
        [](const auto& out) { require_finite(out, "softmax_attention forward"); });
    checked_call(
        x.finite && x.dout_finite, p.check_finite, "softmax_attention backward",
        [&] { return in_mode(p, [&](auto... extra) { return op->backward(x.q, x.k, x.v, x.dout, extra...); }); },
        [](const auto& g) {
            require_finite(g.dq, "softmax_attention backward dq");
            require_finite(g.dk, "softmax_attention backward dk");
            require_finite(g.dv, "softmax_attention backward dv");
        });
}

template <class Map, class T>
void run_map(input& in, const problem& p, bool simd) {
    if (simd)
        run_linear<Map, kattn::backends::simd, T>(in, p);
    else
        run_linear<Map, kattn::backends::reference, T>(in, p);
}

template <class T>
void run_any(input& in, const problem& p, unsigned op) {
    const bool simd = (op >> 5) & 1;
    switch (op % 4) {
        case 0:
            run_map<kattn::features::favor, T>(in, p, simd);
            break;
        case 1:
            run_map<kattn::features::elu, T>(in, p, simd);
            break;
        case 2:
            run_map<kattn::features::trig, T>(in, p, simd);
            break;
        default:
            run_softmax<T>(in, p);
            break;
    }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    ::setenv("OMP_NUM_THREADS", "1", 0);  // before the OpenMP runtime starts
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    input in{data, size};
    const std::uint8_t op = in.u8();
    const problem p = decode(in);
    if (op & 16)
        run_any<double>(in, p, op);
    else
        run_any<float>(in, p, op);
    return 0;
}
