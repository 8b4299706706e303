// Tests for kattn/nn/attention/{softmax_mha,kernel_mha}.hpp and the attention entropy of
// every layer: forward against naive O(L²) implementations (padding, causal), backward
// against finite differences, entropy against weights read off the operators (V = I) and
// the uniform closed form log(valid length).
#include <doctest/doctest.h>

#include <cmath>

#include <kattn/features/elu.hpp>
#include <kattn/features/favor.hpp>
#include <kattn/features/softplus.hpp>
#include <kattn/nn/attention/coulomb.hpp>
#include <kattn/nn/attention/fska.hpp>
#include <kattn/nn/attention/kernel_mha.hpp>
#include <kattn/nn/attention/softmax_mha.hpp>

#include "gradcheck.hpp"

using namespace kattn;
using kt::dtensor;

namespace {

nn::context padded_ctx(bool training = false, std::uint64_t step = 0) {
    nn::context c;
    c.batch = 2;
    c.length = 5;
    c.lengths = {5, 3};
    c.training = training;
    c.step = step;
    return c;
}

/// Naive multi-head attention: weights(b, h, i, j) unnormalised, rows normalised over valid j.
template <class W>
dtensor naive_heads(const dtensor& v, const nn::context& ctx, index_t H, index_t dh, bool causal, W&& weight) {
    dtensor o = nn::zeros<double>(ctx.rows(), H * dh);
    for (index_t b = 0; b < ctx.batch; ++b)
        for (index_t h = 0; h < H; ++h)
            for (index_t i = 0; i < ctx.length; ++i) {
                const index_t n = causal ? std::min(i + 1, ctx.valid(b)) : ctx.valid(b);
                double s = 0;
                std::vector<double> w(static_cast<std::size_t>(n));
                for (index_t j = 0; j < n; ++j) s += (w[j] = weight(b, h, i, j));
                for (index_t j = 0; j < n; ++j)
                    for (index_t c = 0; c < dh; ++c)
                        o(b * ctx.length + i, h * dh + c) += w[j] / s * v(b * ctx.length + j, h * dh + c);
            }
    return o;
}

double dot_head(const dtensor& a, const dtensor& b, index_t ra, index_t rb, index_t c0, index_t dh) {
    double s = 0;
    for (index_t c = 0; c < dh; ++c) s += a(ra, c0 + c) * b(rb, c0 + c);
    return s;
}

double max_abs_diff(const dtensor& a, const dtensor& b) {
    REQUIRE(a.shape() == b.shape());
    double m = 0;
    for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a.data()[i] - b.data()[i]));
    return m;
}

/// Entropy from explicit weight rows a(b, h, i, ·) (normalised), mean over valid queries.
template <class A>
double entropy_of(const nn::context& ctx, index_t H, A&& a) {
    double t = 0;
    int n = 0;
    for (index_t b = 0; b < ctx.batch; ++b)
        for (index_t h = 0; h < H; ++h)
            for (index_t i = 0; i < ctx.valid(b); ++i, ++n)
                for (index_t j = 0; j < ctx.valid(b); ++j) {
                    const double p = a(b, h, i, j);
                    if (p > 0) t -= p * std::log(p);
                }
    return t / n;
}

}  // namespace

TEST_CASE("nn::softmax_mha: forward equals naive masked softmax attention (qkv, no qkv, causal)") {
    const auto ctx = padded_ctx();
    const auto x = kt::randn2(10, 8, 1);
    for (bool qkv : {true, false})
        for (bool causal : {false, true}) {
            nn::softmax_mha<double> layer({.dim = 8, .heads = 2, .qkv = qkv, .causal = causal, .seed = 4});
            CHECK(layer.name() == (qkv ? "softmax" : "softmax-noqkv"));
            const dtensor y = layer.forward(x, ctx);
            nn::parameter_list ps;
            layer.collect(ps, "attn");
            CHECK(ps.size() == (qkv ? 8u : 2u));
            dtensor q = x, k = x, v = x;
            if (qkv) {
                nn::linear<double> lq({.in = 8, .out = 8}), lk({.in = 8, .out = 8}), lv({.in = 8, .out = 8});
                lq.weight().value.assign(ps[0].value64.begin(), ps[0].value64.end());
                lq.bias().value.assign(ps[1].value64.begin(), ps[1].value64.end());
                lk.weight().value.assign(ps[2].value64.begin(), ps[2].value64.end());
                lk.bias().value.assign(ps[3].value64.begin(), ps[3].value64.end());
                lv.weight().value.assign(ps[4].value64.begin(), ps[4].value64.end());
                lv.bias().value.assign(ps[5].value64.begin(), ps[5].value64.end());
                q = lq.apply(x);
                k = lk.apply(x);
                v = lv.apply(x);
            }
            const dtensor o = naive_heads(v, ctx, 2, 4, causal, [&](index_t b, index_t h, index_t i, index_t j) {
                return std::exp(dot_head(q, k, b * 5 + i, b * 5 + j, h * 4, 4) / 2.0);
            });
            CHECK(max_abs_diff(layer.output().apply(o), y) < 1e-12);
        }
}

TEST_CASE("nn::softmax_mha: backward matches central differences") {
    const auto ctx = padded_ctx();
    for (bool qkv : {true, false})
        for (bool causal : {false, true}) {
            nn::softmax_mha<double> layer({.dim = 8, .heads = 2, .qkv = qkv, .causal = causal, .seed = 5});
            nn::parameter_list ps, all;
            layer.collect(all, "attn");
            // softmax is invariant to a common shift of the keys: ∂/∂b_K = 0 exactly (checked
            // below; finite differences of an exact zero are pure rounding noise)
            for (auto& p : all)
                if (p.name != "attn.k.bias") ps.push_back(p);
            // h = 1e-5: at the default 1e-6 the loss's rounding (≈ 1e-15 · |loss| / h) reaches
            // 1e-5 of the smallest probed gradients (1e-4) on some ISAs; the truncation error
            // at 1e-5 is ≈ 1e-10 relative.
            const auto r = kt::check_gradients([&](const dtensor& x) { return layer.forward(x, ctx); },
                                               [&](const dtensor& g) { return layer.backward(g, ctx); }, ps,
                                               kt::randn2(10, 8, 2), 1e-5, 40, 1e-5);
            CHECK(r.max_err_x < 1e-5);
            CHECK(r.max_err_p < 1e-5);
            if (qkv) {
                nn::zero_grad(all);
                layer.forward(kt::randn2(10, 8, 2), ctx);
                layer.backward(kt::randn2(10, 8, 3), ctx);
                for (const auto& p : all)
                    if (p.name == "attn.k.bias")
                        for (double g : p.grad64) CHECK(std::abs(g) < 1e-13);
            }
        }
}

TEST_CASE("nn::kernel_mha (performer, elu): forward equals the naive kernel ratio; backward matches FD") {
    const auto ctx = padded_ctx();
    const auto x = kt::randn2(10, 8, 3);
    nn::performer<double> perf({.dim = 8, .heads = 2, .num_features = 16, .seed = 6});
    nn::kernel_mha<features::elu, samplers::gaussian, double> elu(
        {.dim = 8, .heads = 2, .num_features = 12, .causal = true, .seed = 7});
    CHECK(perf.name() == "performer");
    CHECK(elu.name() == "kernel-elu");
    auto check_layer = [&](auto& layer, bool causal) {
        const dtensor y = layer.forward(x, ctx);
        nn::parameter_list ps;
        layer.collect(ps, "k");
        REQUIRE(ps.size() == 8u);
        auto lin = [&](int i) {
            nn::linear<double> l({.in = 8, .out = 8});
            l.weight().value.assign(ps[2 * i].value64.begin(), ps[2 * i].value64.end());
            l.bias().value.assign(ps[2 * i + 1].value64.begin(), ps[2 * i + 1].value64.end());
            return l.apply(x);
        };
        const dtensor q = lin(0), k = lin(1), v = lin(2);
        std::vector<xt::xtensor<double, 2>> pq, pk;
        for (index_t b = 0; b < 2; ++b)
            for (index_t h = 0; h < 2; ++h) {
                xt::xtensor<double, 2> qs = xt::zeros<double>({5, 4}), ks = qs;
                for (int t = 0; t < 5; ++t)
                    for (int c = 0; c < 4; ++c) {
                        qs(t, c) = q(b * 5 + t, h * 4 + c);
                        ks(t, c) = k(b * 5 + t, h * 4 + c);
                    }
                pq.push_back(layer.attention().features(qs));
                pk.push_back(layer.attention().features(ks));
            }
        const dtensor o = naive_heads(v, ctx, 2, 4, causal, [&](index_t b, index_t h, index_t i, index_t j) {
            const auto& a = pq[b * 2 + h];
            const auto& c = pk[b * 2 + h];
            double s = 0;
            for (std::size_t f = 0; f < a.shape()[1]; ++f) s += a(i, f) * c(j, f);
            return s;
        });
        CHECK(max_abs_diff(layer.output().apply(o), y) < 1e-10);
        const auto r = kt::check_gradients([&](const dtensor& xx) { return layer.forward(xx, ctx); },
                                           [&](const dtensor& g) { return layer.backward(g, ctx); }, ps, x, 1e-5);
        CHECK(r.max_err_x < 1e-5);
        CHECK(r.max_err_p < 1e-5);
    };
    check_layer(perf, false);
    check_layer(elu, true);
    // set_omega reaches the operator and changes the output
    const dtensor y0 = perf.forward(x, ctx);
    xt::xtensor<double, 2> om = perf.omega();
    om *= 0.5;
    perf.set_omega(om);
    CHECK(perf.omega()(0, 0) == doctest::Approx(om(0, 0)));
    CHECK(max_abs_diff(perf.forward(x, ctx), y0) > 1e-6);
    CHECK_THROWS_WITH_AS(perf.set_omega(xt::xtensor<double, 2>(xt::zeros<double>({3, 16}))),
                         doctest::Contains("'omega'"), kattn::error);
}

TEST_CASE("nn attention layers: bad configuration and inputs throw kattn::error naming the argument") {
    CHECK_THROWS_WITH_AS(nn::softmax_mha<float>({.dim = 10, .heads = 3}), doctest::Contains("'heads'"), kattn::error);
    nn::softmax_mha<float> s({.dim = 8, .heads = 2});
    const auto ctx = padded_ctx();
    CHECK_THROWS_WITH_AS(s.backward(nn::zeros<float>(10, 8), ctx), doctest::Contains("'dy'"), kattn::error);
    CHECK_THROWS_WITH_AS(s.forward(nn::zeros<float>(9, 8), ctx), doctest::Contains("'x'"), kattn::error);
    auto bad = ctx;
    bad.lengths = {6, 1};
    CHECK_THROWS_WITH_AS(s.forward(nn::zeros<float>(10, 8), bad), doctest::Contains("'context.lengths'"), kattn::error);
    CHECK_THROWS_WITH_AS(nn::fska_attention<float>({.dim = 8, .heads = 2, .num_pairs = 0}),
                         doctest::Contains("'num_pairs'"), kattn::error);
}

TEST_CASE("nn attention layers: attention_entropy is log(valid length) for uniform attention, within [0, log L]") {
    const auto ctx = padded_ctx();
    const dtensor x0 = nn::zeros<double>(10, 8), x = kt::randn2(10, 8, 9, 2.0);
    const double uniform = (5 * std::log(5.0) + 3 * std::log(3.0)) / 8.0;  // mean over valid queries
    nn::softmax_mha<double> sq({.dim = 8, .heads = 2, .seed = 1}), sn({.dim = 8, .heads = 2, .qkv = false});
    nn::performer<double> pf({.dim = 8, .heads = 2, .num_features = 16, .seed = 2});
    nn::fska_attention<double> fs({.dim = 8, .heads = 2, .num_pairs = 8, .flow_layers = 1, .scale = 3, .seed = 3});
    nn::coulomb_attention<features::elu, double> co({.dim = 8, .heads = 2, .num_features = 16, .seed = 4});
    auto check = [&](const auto& layer) {
        INFO(layer.name());
        CHECK(layer.attention_entropy(x0, ctx) == doctest::Approx(uniform).epsilon(1e-9));
        const double e = layer.attention_entropy(x, ctx);
        CHECK(e >= 0);
        CHECK(e <= std::log(5.0) + 1e-12);
        CHECK(e < uniform - 1e-4);  // random inputs: not uniform
    };
    check(sq);
    check(sn);
    check(pf);
    check(fs);
    check(co);
}

TEST_CASE("nn attention layers: attention_entropy equals the entropy of the operators' weights (V = I)") {
    // a_ij is read off the attention operators themselves: with v = identity rows, out_i = a_i·.
    nn::context ctx = padded_ctx();
    const dtensor x = kt::randn2(10, 8, 11, 1.5);
    xt::xtensor<double, 4> eye = xt::zeros<double>({2, 2, 5, 5});
    for (int b = 0; b < 2; ++b)
        for (int h = 0; h < 2; ++h)
            for (int t = 0; t < 5; ++t) eye(b, h, t, t) = 1;
    const std::vector<index_t> lens{5, 3};
    auto heads = [&](const dtensor& a) { return nn::detail::to_heads(a, ctx, 2, 4); };
    {
        nn::softmax_mha<double> sn({.dim = 8, .heads = 2, .qkv = false});
        const auto a = softmax_attention<double>{}(heads(x), heads(x), eye, key_lengths(lens));
        CHECK(sn.attention_entropy(x, ctx) ==
              doctest::Approx(entropy_of(ctx, 2, [&](index_t b, index_t h, index_t i, index_t j) {
                  return a(b, h, i, j);
              })).epsilon(1e-10));
    }
    {
        nn::coulomb_attention<features::softplus, double> co({.dim = 8, .heads = 2, .num_features = 16, .seed = 4});
        // a[h][j](b, 0, i, 0) = a_ij: values one-hot on key j in channel 0
        std::vector<std::vector<xt::xtensor<double, 4>>> a(2);
        for (index_t h = 0; h < 2; ++h) {
            const auto xh = nn::detail::head_slice(x, ctx, h, 4);
            for (int j = 0; j < 5; ++j) {
                xt::xtensor<double, 4> vj = xt::zeros<double>({2, 1, 5, 4});
                vj(0, 0, j, 0) = vj(1, 0, j, 0) = 1;
                a[h].push_back(co.attention(h)(xh, xh, vj, key_lengths(lens)));
            }
        }
        CHECK(co.attention_entropy(x, ctx) ==
              doctest::Approx(entropy_of(ctx, 2, [&](index_t b, index_t h, index_t i, index_t j) {
                  return a[h][j](b, 0, i, 0);
              })).epsilon(1e-9));
    }
}

TEST_CASE("nn attention layers: float forward/backward agree with double (same seeds)") {
    const auto ctx = padded_ctx();
    const dtensor xd = kt::randn2(10, 8, 21), gd = kt::randn2(10, 8, 22);
    nn::tensor<float> xf = nn::zeros<float>(10, 8), gf = xf;
    for (std::size_t i = 0; i < xd.size(); ++i) {
        xf.data()[i] = float(xd.data()[i]);
        gf.data()[i] = float(gd.data()[i]);
    }
    auto compare = [&](auto& ld, auto& lf) {
        INFO(ld.name());
        const dtensor yd = ld.forward(xd, ctx), dxd = ld.backward(gd, ctx);
        const auto yf = lf.forward(xf, ctx);
        const auto dxf = lf.backward(gf, ctx);
        double ey = 0, ex = 0;
        for (std::size_t i = 0; i < yd.size(); ++i) {
            ey = std::max(ey, std::abs(yd.data()[i] - double(yf.data()[i])));
            ex = std::max(ex, std::abs(dxd.data()[i] - double(dxf.data()[i])));
        }
        CHECK(ey < 1e-4);
        CHECK(ex < 1e-4);
    };
    nn::softmax_mha<double> s1({.dim = 8, .heads = 2, .seed = 1});
    nn::softmax_mha<float> s2({.dim = 8, .heads = 2, .seed = 1});
    compare(s1, s2);
    nn::performer<double> p1({.dim = 8, .heads = 2, .num_features = 16, .seed = 2});
    nn::performer<float> p2({.dim = 8, .heads = 2, .num_features = 16, .seed = 2});
    compare(p1, p2);
    nn::fska_attention<double> f1({.dim = 8, .heads = 2, .num_pairs = 8, .seed = 3});
    nn::fska_attention<float> f2({.dim = 8, .heads = 2, .num_pairs = 8, .seed = 3});
    compare(f1, f2);
    nn::coulomb_attention<features::elu, double> c1({.dim = 8, .heads = 2, .num_features = 16, .seed = 4});
    nn::coulomb_attention<features::elu, float> c2({.dim = 8, .heads = 2, .num_features = 16, .seed = 4});
    compare(c1, c2);
}

TEST_CASE("nn attention layers run on any execution backend: reference equals simd (double)") {
    // The Backend parameter reaches the operator: the same layer on the scalar oracle and on
    // the simd backend gives the same outputs and input gradients (training-mode FSKA draws
    // the same Ω from the same step, so both see identical frequencies).
    const auto ctx = padded_ctx(true, 5);
    const dtensor x = kt::randn2(10, 8, 31), g = kt::randn2(10, 8, 32);
    auto compare = [&](auto& lr, auto& ls) {
        INFO(lr.name());
        const dtensor yr = lr.forward(x, ctx), dxr = lr.backward(g, ctx);
        const dtensor ys = ls.forward(x, ctx), dxs = ls.backward(g, ctx);
        CHECK(max_abs_diff(yr, ys) < 1e-10);
        CHECK(max_abs_diff(dxr, dxs) < 1e-10);
        CHECK(max_abs_diff(yr, nn::zeros<double>(10, 8)) > 1e-3);  // not trivially zero
    };
    nn::performer<double, backends::reference> p1({.dim = 8, .heads = 2, .num_features = 16, .seed = 2});
    nn::performer<double, backends::simd> p2({.dim = 8, .heads = 2, .num_features = 16, .seed = 2});
    compare(p1, p2);
    nn::fska_attention<double, backends::reference> f1({.dim = 8, .heads = 2, .num_pairs = 8, .seed = 3});
    nn::fska_attention<double, backends::simd> f2({.dim = 8, .heads = 2, .num_pairs = 8, .seed = 3});
    compare(f1, f2);
    nn::coulomb_attention<features::softplus, double, backends::reference> c1(
        {.dim = 8, .heads = 2, .num_features = 16, .seed = 4});
    nn::coulomb_attention<features::softplus, double, backends::simd> c2(
        {.dim = 8, .heads = 2, .num_features = 16, .seed = 4});
    compare(c1, c2);
    static_assert(std::is_same_v<typename decltype(p1)::operator_type::backend_type, backends::reference>);
}
