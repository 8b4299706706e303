// kattn/samplers/detail/coupling.hpp — one RealNVP affine coupling layer, per sample.
//
// Layer with binary mask b ∈ {0,1}^D (b_j = 1: passed through and conditioned on):
//   x_m = b ⊙ x
//   s = σ(ŝ),  ŝ = W2ˢ relu(W1ˢ x_m + b1ˢ) + b2ˢ,   σ(a) = a, or α·tanh(a) when α > 0
//   t =        W2ᵗ relu(W1ᵗ x_m + b1ᵗ) + b2ᵗ
//   forward  y_j = x_j                    (b_j = 1)      log|det ∂y/∂x| = Σ_{b_j=0} s_j
//            y_j = x_j·exp(s_j) + t_j     (b_j = 0)
//   inverse  x_j = (y_j − t_j)·exp(−s_j)  (b_j = 0)      (b⊙y = b⊙x, so s, t are known)
//
// Parameters of a layer, flat and in this order (PyTorch Linear layout: weight [out, in]):
//   s: W1 [H, D], b1 [H], W2 [D, H], b2 [D];   then t: the same.
// Activations are computed in T (float or double); backward runs in double.
// coupling_stack_run / coupling_stack_backward chain K layers over a batch of rows.
#pragma once

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "../../core/config.hpp"

namespace kattn::detail {

/// Offsets of one coupling layer's parameters (net 0 = s, net 1 = t).
struct coupling_layout {
    index_t D = 0, H = 0;
    constexpr index_t net_size() const { return 2 * H * D + H + D; }
    constexpr index_t size() const { return 2 * net_size(); }
    constexpr index_t w1(int net) const { return net * net_size(); }
    constexpr index_t b1(int net) const { return w1(net) + H * D; }
    constexpr index_t w2(int net) const { return b1(net) + H; }
    constexpr index_t b2(int net) const { return w2(net) + D * H; }
};

/// h = W1 x_m + b1 (pre-activation), o = W2 relu(h) + b2.
template <class T>
inline void coupling_net(const coupling_layout& L, const T* P, int net, const T* xm, T* h, T* o) {
    const index_t D = L.D, H = L.H;
    const T* W1 = P + L.w1(net);
    const T* B1 = P + L.b1(net);
    const T* W2 = P + L.w2(net);
    const T* B2 = P + L.b2(net);
    for (index_t k = 0; k < H; ++k) {
        T a = B1[k];
        for (index_t i = 0; i < D; ++i) a += W1[k * D + i] * xm[i];
        h[k] = a;
    }
    for (index_t j = 0; j < D; ++j) {
        T a = B2[j];
        for (index_t k = 0; k < H; ++k) a += W2[j * H + k] * (h[k] > T(0) ? h[k] : T(0));
        o[j] = a;
    }
}

/// Scratch and cached activations of one layer for one sample: hs, ht [H]; raw ŝ, s, t [D].
template <class T>
struct coupling_act {
    T* hs;
    T* ht;
    T* raw;
    T* s;
    T* t;
};

/// Applies layer (mask b) to one sample: forward (in = x, out = y) or inverse (in = y,
/// out = x). Fills the activations; returns Σ_{b_j=0} s_j (the forward log-determinant).
template <class T>
inline T coupling_apply(const coupling_layout& L, const T* P, const unsigned char* b, T alpha, bool inverse,
                        const T* in, T* out, T* xm, const coupling_act<T>& a) {
    const index_t D = L.D;
    for (index_t j = 0; j < D; ++j) xm[j] = b[j] ? in[j] : T(0);
    coupling_net(L, P, 0, xm, a.hs, a.raw);
    coupling_net(L, P, 1, xm, a.ht, a.t);
    T logdet = 0;
    for (index_t j = 0; j < D; ++j) {
        if (b[j]) {
            a.s[j] = T(0);
            out[j] = in[j];
            continue;
        }
        const T s = alpha > T(0) ? alpha * std::tanh(a.raw[j]) : a.raw[j];
        a.s[j] = s;
        logdet += s;
        out[j] = inverse ? (in[j] - a.t[j]) * std::exp(-s) : in[j] * std::exp(s) + a.t[j];
    }
    return logdet;
}

/// Backward of one net: given ∂L/∂o (D values), accumulates ∂L/∂(W1, b1, W2, b2) into G
/// and adds ∂L/∂x_m into gxm.
inline void coupling_net_backward(const coupling_layout& L, const double* P, int net, const double* xm,
                                  const double* h, const double* go, double* G, double* gxm, double* gh) {
    const index_t D = L.D, H = L.H;
    const double* W1 = P + L.w1(net);
    const double* W2 = P + L.w2(net);
    double* gW1 = G + L.w1(net);
    double* gB1 = G + L.b1(net);
    double* gW2 = G + L.w2(net);
    double* gB2 = G + L.b2(net);
    for (index_t k = 0; k < H; ++k) gh[k] = 0.0;
    for (index_t j = 0; j < D; ++j) {
        const double g = go[j];
        if (g == 0.0) continue;
        gB2[j] += g;
        for (index_t k = 0; k < H; ++k) {
            const double r = h[k] > 0.0 ? h[k] : 0.0;
            gW2[j * H + k] += g * r;
            gh[k] += W2[j * H + k] * g;
        }
    }
    for (index_t k = 0; k < H; ++k) {
        if (!(h[k] > 0.0)) continue;  // relu'(h) = 0
        const double g = gh[k];
        gB1[k] += g;
        for (index_t i = 0; i < D; ++i) {
            gW1[k * D + i] += g * xm[i];
            gxm[i] += W1[k * D + i] * g;
        }
    }
}

/// Backward of coupling_apply for one sample. g_out = ∂L/∂out; g_ld = ∂L/∂(Σ_{b_j=0} s_j).
/// Writes ∂L/∂in to g_in and accumulates the layer's parameter gradient into G.
/// `work` must hold 4·D + H doubles.
inline void coupling_backward(const coupling_layout& L, const double* P, const unsigned char* b, double alpha,
                              bool inverse, const double* in, const double* out, const coupling_act<const double>& a,
                              const double* g_out, double g_ld, double* g_in, double* G, double* work) {
    const index_t D = L.D;
    double* xm = work;
    double* graw = work + D;
    double* gt = work + 2 * D;
    double* gxm = work + 3 * D;
    double* gh = work + 4 * D;
    for (index_t j = 0; j < D; ++j) {
        xm[j] = b[j] ? in[j] : 0.0;
        gxm[j] = 0.0;
        if (b[j]) {
            g_in[j] = g_out[j];
            graw[j] = gt[j] = 0.0;
            continue;
        }
        const double s = a.s[j];
        double gs;
        if (!inverse) {  // y = x e^s + t
            const double e = std::exp(s);
            g_in[j] = g_out[j] * e;
            gs = g_out[j] * in[j] * e + g_ld;
            gt[j] = g_out[j];
        } else {  // x = (y − t) e^{−s}
            const double e = std::exp(-s);
            g_in[j] = g_out[j] * e;
            gt[j] = -g_out[j] * e;
            gs = -g_out[j] * out[j] + g_ld;
        }
        graw[j] = alpha > 0.0 ? gs * alpha * (1.0 - (s / alpha) * (s / alpha)) : gs;
    }
    coupling_net_backward(L, P, 0, xm, a.hs, graw, G, gxm, gh);
    coupling_net_backward(L, P, 1, xm, a.ht, gt, G, gxm, gh);
    for (index_t j = 0; j < D; ++j)
        if (b[j]) g_in[j] += gxm[j];
}

/// Activations of one pass of a K-layer stack over n samples, in application order
/// a = 0..K−1 (layer l = a forward, K−1−a inverse): x[a] is the input of step a, x[K] the
/// output; hs, ht [K, n, H]; raw, s, t [K, n, D].
struct coupling_cache {
    index_t n = 0;
    std::vector<double> x, hs, ht, raw, s, t;
};

/// Runs K layers (parameters P, layer l at P + l·L.size(), masks [K, D]) forward (z → ω)
/// or inverse (ω → z) over n rows. If logdet is given, writes Σ_l Σ_{b_j=0} s_j per row
/// (the forward log-determinant at the pass's points). If cache is given (T = double
/// only), stores the activations for coupling_stack_backward.
template <class T>
void coupling_stack_run(const coupling_layout& L, index_t K, const T* P, const unsigned char* masks, T alpha,
                        bool inverse, const T* in, T* out, index_t n, T* logdet, coupling_cache* cache) {
    const index_t D = L.D, H = L.H;
    std::vector<T> local(static_cast<std::size_t>(2 * H + 5 * D));
    T* xm = local.data() + 2 * H + 3 * D;
    T* buf = xm + D;
    if constexpr (std::is_same_v<T, double>) {
        if (cache) {
            cache->n = n;
            cache->x.assign(std::size_t((K + 1) * n * D), 0.0);
            cache->hs.assign(std::size_t(K * n * H), 0.0);
            cache->ht.assign(std::size_t(K * n * H), 0.0);
            cache->raw.assign(std::size_t(K * n * D), 0.0);
            cache->s.assign(std::size_t(K * n * D), 0.0);
            cache->t.assign(std::size_t(K * n * D), 0.0);
        }
    }
    for (index_t i = 0; i < n; ++i) {
        std::copy_n(in + i * D, D, out + i * D);
        T ld = 0;
        for (index_t a = 0; a < K; ++a) {
            const index_t l = inverse ? K - 1 - a : a;
            coupling_act<T> act{local.data(), local.data() + H, local.data() + 2 * H, local.data() + 2 * H + D,
                                local.data() + 2 * H + 2 * D};
            if constexpr (std::is_same_v<T, double>) {
                if (cache) {
                    const std::size_t r = std::size_t(a * n + i);
                    act = {cache->hs.data() + r * H, cache->ht.data() + r * H, cache->raw.data() + r * D,
                           cache->s.data() + r * D, cache->t.data() + r * D};
                    std::copy_n(out + i * D, D, cache->x.data() + r * D);
                }
            }
            std::copy_n(out + i * D, D, buf);
            ld += coupling_apply<T>(L, P + l * L.size(), masks + l * D, alpha, inverse, buf, out + i * D, xm, act);
        }
        if constexpr (std::is_same_v<T, double>)
            if (cache) std::copy_n(out + i * D, D, cache->x.data() + std::size_t((K * n + i) * D));
        if (logdet) logdet[i] = ld;
    }
}

/// Backward of a cached pass: g_out [n, D] = ∂L/∂(pass output), g_ld [n] = ∂L/∂(Σ s) per
/// row (nullptr: 0). Writes ∂L/∂(pass input) to g_in [n, D] and accumulates ∂L/∂θ into G.
inline void coupling_stack_backward(const coupling_layout& L, index_t K, const double* P, const unsigned char* masks,
                                    double alpha, bool inverse, const coupling_cache& c, const double* g_out,
                                    const double* g_ld, double* g_in, double* G) {
    const index_t D = L.D, H = L.H, n = c.n;
    std::vector<double> g(static_cast<std::size_t>(D)), gnext(static_cast<std::size_t>(D)),
        work(static_cast<std::size_t>(4 * D + H));
    for (index_t i = 0; i < n; ++i) {
        std::copy_n(g_out + i * D, D, g.data());
        const double gl = g_ld ? g_ld[i] : 0.0;
        for (index_t a = K - 1; a >= 0; --a) {
            const index_t l = inverse ? K - 1 - a : a;
            const std::size_t r = std::size_t(a * n + i), r1 = std::size_t((a + 1) * n + i);
            const coupling_act<const double> act{c.hs.data() + r * H, c.ht.data() + r * H, c.raw.data() + r * D,
                                                 c.s.data() + r * D, c.t.data() + r * D};
            coupling_backward(L, P + l * L.size(), masks + l * D, alpha, inverse, c.x.data() + r * D,
                              c.x.data() + r1 * D, act, g.data(), gl, gnext.data(), G + l * L.size(), work.data());
            std::swap(g, gnext);
        }
        std::copy_n(g.data(), D, g_in + i * D);
    }
}

}  // namespace kattn::detail
