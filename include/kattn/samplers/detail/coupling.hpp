// kattn/samplers/detail/coupling.hpp — RealNVP affine coupling layers, batched over rows.
//
// Layer with mask b (b_j = 1: passed through and conditioned on), s = ŝ or α·tanh(ŝ):
//   y = b⊙x + (1−b)⊙(x⊙exp(s(b⊙x)) + t(b⊙x)),   log|det ∂y/∂x| = Σ_{b_j=0} s_j,
// s and t Linear–ReLU–Linear nets. Parameters, flat per layer (coupling_layout): the s net,
// then the t net, each W1 [H, D], b1 [H], W2 [D, H], b2 [D] (PyTorch Linear layout).
// coupling_layer_run / coupling_layer_backward (one layer, forward or inverse) and
// coupling_stack_run / coupling_stack_backward (K layers) run over all n rows as gemm calls
// on compressed operands; forward in T, backward in double; fixed-order sums, so a row's
// result does not depend on the other rows. Details: docs/samplers.md §2 (realnvp).
#pragma once

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include <xsimd/xsimd.hpp>

#include "../../linalg/gemm.hpp"
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

/// The columns of a mask: pass[q] (b_j = 1, Dp of them) and free[q] (b_j = 0, Dm).
struct coupling_split {
    std::vector<index_t> pass, free;
    coupling_split(const unsigned char* b, index_t D) {
        for (index_t j = 0; j < D; ++j) (b[j] ? pass : free).push_back(j);
    }
    index_t dp() const { return index_t(pass.size()); }
    index_t dm() const { return index_t(free.size()); }
};

/// dst[k] += src[k], k < m.
inline void coupling_add(index_t m, const double* src, double* dst) {
    using V = xsimd::batch<double>;
    constexpr index_t W = V::size;
    index_t k = 0;
    for (; k + W <= m; k += W) (V::load_unaligned(dst + k) + V::load_unaligned(src + k)).store_unaligned(dst + k);
    for (; k < m; ++k) dst[k] += src[k];
}

/// g[k] = (r[k] > 0 ? g[k] : 0), then sum[k] += g[k], k < m (relu' mask and bias gradient).
inline void coupling_relu_mask_add(index_t m, const double* r, double* g, double* sum) {
    using V = xsimd::batch<double>;
    constexpr index_t W = V::size;
    index_t k = 0;
    for (; k + W <= m; k += W) {
        const V v = xsimd::select(V::load_unaligned(r + k) > V(0.0), V::load_unaligned(g + k), V(0.0));
        v.store_unaligned(g + k);
        (V::load_unaligned(sum + k) + v).store_unaligned(sum + k);
    }
    for (; k < m; ++k) {
        g[k] = r[k] > 0.0 ? g[k] : 0.0;
        sum[k] += g[k];
    }
}

/// Applies one layer (parameters P, mask b) in place to the n rows of X [n, D]: forward
/// (X = x → y) or inverse (X = y → x). Adds Σ_{b_j=0} s_j of each row to logdet (if
/// given). If R / S are given, stores relu(Hpre) [n, 2H] (s net in columns [0, H), t net
/// in [H, 2H)) and s [n, D] (0 where b_j = 1) for coupling_layer_backward.
template <class T>
void coupling_layer_run(const coupling_layout& L, const T* P, const unsigned char* b, T alpha, bool inverse, T* X,
                        index_t n, T* logdet, T* R, T* S) {
    using arch = xsimd::default_arch;
    const index_t D = L.D, H = L.H, H2 = 2 * H;
    const coupling_split sp(b, D);
    const index_t Dp = sp.dp(), Dm = sp.dm();
    // Weights in the layouts the products want: W1t [Dp, 2H], W2t [2, H, Dm].
    std::vector<T> W1t(std::size_t(Dp * H2)), W2t(std::size_t(2 * H * Dm));
    for (int net = 0; net < 2; ++net) {
        const T* W1 = P + L.w1(net);
        const T* W2 = P + L.w2(net);
        constexpr index_t tile = 16;  // transposes in tiles: both sides stay in L1
        for (index_t k0 = 0; k0 < H; k0 += tile)
            for (index_t q = 0; q < Dp; ++q)
                for (index_t k = k0; k < std::min(k0 + tile, H); ++k)
                    W1t[q * H2 + net * H + k] = W1[k * D + sp.pass[q]];
        T* w2t = W2t.data() + net * H * Dm;
        for (index_t q0 = 0; q0 < Dm; q0 += tile)
            for (index_t k = 0; k < H; ++k)
                for (index_t q = q0; q < std::min(q0 + tile, Dm); ++q) w2t[k * Dm + q] = W2[sp.free[q] * H + k];
    }
    std::vector<T> Xc(std::size_t(n * Dp)), Rl(R ? 0 : std::size_t(n * H2)), O(std::size_t(2 * n * Dm));
    T* Rb = R ? R : Rl.data();
    for (index_t i = 0; i < n; ++i) {
        for (index_t q = 0; q < Dp; ++q) Xc[i * Dp + q] = X[i * D + sp.pass[q]];
        std::copy_n(P + L.b1(0), H, Rb + i * H2);
        std::copy_n(P + L.b1(1), H, Rb + i * H2 + H);
    }
    // Hpre = Xc·W1cᵀ + b1 (both nets), then R = relu(Hpre).
    gemm<arch>(n, H2, Dp, Xc.data(), Dp, index_t(1), W1t.data(), H2, Rb, H2, true);
    for (index_t e = 0; e < n * H2; ++e) Rb[e] = Rb[e] > T(0) ? Rb[e] : T(0);
    // O_net = R_net·W2cᵀ + b2c: ŝ in O[0], t in O[1].
    for (int net = 0; net < 2; ++net) {
        T* o = O.data() + net * n * Dm;
        const T* B2 = P + L.b2(net);
        for (index_t i = 0; i < n; ++i)
            for (index_t q = 0; q < Dm; ++q) o[i * Dm + q] = B2[sp.free[q]];
        gemm<arch>(n, Dm, H, Rb + net * H, H2, index_t(1), W2t.data() + net * H * Dm, Dm, o, Dm, true);
    }
    const T* raw = O.data();
    const T* t = O.data() + n * Dm;
    for (index_t i = 0; i < n; ++i) {
        T* x = X + i * D;
        T ld = 0;
        if (S) std::fill_n(S + i * D, D, T(0));
        for (index_t q = 0; q < Dm; ++q) {
            const index_t j = sp.free[q];
            const T r = raw[i * Dm + q];
            const T s = alpha > T(0) ? alpha * std::tanh(r) : r;
            if (S) S[i * D + j] = s;
            ld += s;
            const T tj = t[i * Dm + q];
            x[j] = inverse ? (x[j] - tj) * std::exp(-s) : x[j] * std::exp(s) + tj;
        }
        if (logdet) logdet[i] += ld;
    }
}

/// Backward of coupling_layer_run over n rows. in / out [n, D]: the layer's input and
/// output rows; R, S: as stored by the run. On entry g [n, D] = ∂L/∂out, on exit ∂L/∂in;
/// g_ld [n] = ∂L/∂(Σ_{b_j=0} s_j) per row (nullptr: 0). Accumulates ∂L/∂θ into G.
inline void coupling_layer_backward(const coupling_layout& L, const double* P, const unsigned char* b, double alpha,
                                    bool inverse, const double* in, const double* out, const double* R, const double* S,
                                    double* g, const double* g_ld, index_t n, double* G) {
    using arch = xsimd::default_arch;
    const index_t D = L.D, H = L.H, H2 = 2 * H;
    const coupling_split sp(b, D);
    const index_t Dp = sp.dp(), Dm = sp.dm();
    // gO [2, n, Dm]: ∂L/∂ŝ (net 0) and ∂L/∂t (net 1) on the b_j = 0 columns.
    std::vector<double> gO(std::size_t(2 * n * Dm));
    double* graw = gO.data();
    double* gt = gO.data() + n * Dm;
    for (index_t i = 0; i < n; ++i) {
        const double gl = g_ld ? g_ld[i] : 0.0;
        for (index_t q = 0; q < Dm; ++q) {
            const index_t j = sp.free[q], e = i * D + j;
            const double s = S[e], go = g[e];
            double gs;
            if (!inverse) {  // y = x e^s + t
                const double ex = std::exp(s);
                g[e] = go * ex;
                gs = go * in[e] * ex + gl;
                gt[i * Dm + q] = go;
            } else {  // x = (y − t) e^{−s}
                const double ex = std::exp(-s);
                g[e] = go * ex;
                gt[i * Dm + q] = -go * ex;
                gs = -go * out[e] + gl;
            }
            graw[i * Dm + q] = alpha > 0.0 ? gs * alpha * (1.0 - (s / alpha) * (s / alpha)) : gs;
        }
    }
    // Weights: W2c [2, Dm, H] (b_j = 0 rows of W2), W1c [2H, Dp] (b_j = 1 columns of W1).
    std::vector<double> W2c(std::size_t(2 * Dm * H)), W1c(std::size_t(H2 * Dp)), Xc(std::size_t(n * Dp));
    for (int net = 0; net < 2; ++net) {
        const double* W1 = P + L.w1(net);
        const double* W2 = P + L.w2(net);
        for (index_t q = 0; q < Dm; ++q) std::copy_n(W2 + sp.free[q] * H, H, W2c.data() + (net * Dm + q) * H);
        for (index_t k = 0; k < H; ++k)
            for (index_t q = 0; q < Dp; ++q) W1c[(net * H + k) * Dp + q] = W1[k * D + sp.pass[q]];
    }
    for (index_t i = 0; i < n; ++i)
        for (index_t q = 0; q < Dp; ++q) Xc[i * Dp + q] = in[i * D + sp.pass[q]];

    std::vector<double> gH(std::size_t(n * H2)), tmp(std::size_t(std::max({Dm * H, H2 * Dp, H2})));
    for (int net = 0; net < 2; ++net) {
        const double* go = gO.data() + net * n * Dm;
        // gb2 += Σ_rows gO;  gW2c += gOᵀ·R_net.
        double* gB2 = G + L.b2(net);
        std::fill_n(tmp.data(), Dm, 0.0);
        for (index_t i = 0; i < n; ++i) coupling_add(Dm, go + i * Dm, tmp.data());
        for (index_t q = 0; q < Dm; ++q) gB2[sp.free[q]] += tmp[q];
        gemm<arch>(Dm, H, n, go, index_t(1), Dm, R + net * H, H2, tmp.data(), H, false);
        double* gW2 = G + L.w2(net);
        for (index_t q = 0; q < Dm; ++q) coupling_add(H, tmp.data() + q * H, gW2 + sp.free[q] * H);
        // gR_net = gO·W2c.
        gemm<arch>(n, H, Dm, go, Dm, index_t(1), W2c.data() + net * Dm * H, H, gH.data() + net * H, H2, false);
    }
    // gHpre = gR ⊙ [Hpre > 0] (= [R > 0]);  gb1 += Σ_rows gHpre.
    std::fill_n(tmp.data(), H2, 0.0);
    for (index_t i = 0; i < n; ++i) coupling_relu_mask_add(H2, R + i * H2, gH.data() + i * H2, tmp.data());
    for (int net = 0; net < 2; ++net)
        for (index_t k = 0; k < H; ++k) G[L.b1(net) + k] += tmp[net * H + k];
    // gW1c += gHpreᵀ·Xc (both nets: [2H, Dp]).
    gemm<arch>(H2, Dp, n, gH.data(), index_t(1), H2, Xc.data(), Dp, tmp.data(), Dp, false);
    for (int net = 0; net < 2; ++net) {
        double* gW1 = G + L.w1(net);
        for (index_t k = 0; k < H; ++k)
            for (index_t q = 0; q < Dp; ++q) gW1[k * D + sp.pass[q]] += tmp[(net * H + k) * Dp + q];
    }
    // ∂L/∂Xc = gHpre·W1c, added to the b_j = 1 columns (which also pass g straight through).
    std::vector<double> gX(std::size_t(n * Dp));
    gemm<arch>(n, Dp, H2, gH.data(), H2, index_t(1), W1c.data(), Dp, gX.data(), Dp, false);
    for (index_t i = 0; i < n; ++i)
        for (index_t q = 0; q < Dp; ++q) g[i * D + sp.pass[q]] += gX[i * Dp + q];
}

/// Activations of one pass of a K-layer stack over n samples, in application order
/// a = 0..K−1 (layer l = a forward, K−1−a inverse): x[a] is the input of step a, x[K] the
/// output [K+1, n, D]; r = relu(Hpre) [K, n, 2H] (s net, then t net, per row); s [K, n, D]
/// (0 where b_j = 1).
struct coupling_cache {
    index_t n = 0;
    std::vector<double> x, r, s;
};

/// Runs K layers (parameters P, layer l at P + l·L.size(), masks [K, D]) forward (z → ω)
/// or inverse (ω → z) over n rows, each layer batched over the rows (coupling_layer_run).
/// If logdet is given, writes Σ_l Σ_{b_j=0} s_j per row (the forward log-determinant at
/// the pass's points). If cache is given (T = double only), stores the activations for
/// coupling_stack_backward.
template <class T>
void coupling_stack_run(const coupling_layout& L, index_t K, const T* P, const unsigned char* masks, T alpha,
                        bool inverse, const T* in, T* out, index_t n, T* logdet, coupling_cache* cache) {
    const index_t D = L.D, H = L.H;
    double* cx = nullptr;
    double* cr = nullptr;
    double* cs = nullptr;
    if constexpr (std::is_same_v<T, double>) {
        if (cache) {
            cache->n = n;
            cache->x.assign(std::size_t((K + 1) * n * D), 0.0);
            cache->r.assign(std::size_t(K * n * 2 * H), 0.0);
            cache->s.assign(std::size_t(K * n * D), 0.0);
            cx = cache->x.data();
            cr = cache->r.data();
            cs = cache->s.data();
        }
    }
    if (out != in) std::copy_n(in, n * D, out);
    if (logdet) std::fill_n(logdet, n, T(0));
    for (index_t a = 0; a < K; ++a) {
        const index_t l = inverse ? K - 1 - a : a;
        T* R = nullptr;
        T* S = nullptr;
        if constexpr (std::is_same_v<T, double>) {
            if (cx) {
                std::copy_n(out, n * D, cx + a * n * D);
                R = cr + a * n * 2 * H;
                S = cs + a * n * D;
            }
        }
        coupling_layer_run<T>(L, P + l * L.size(), masks + l * D, alpha, inverse, out, n, logdet, R, S);
    }
    if constexpr (std::is_same_v<T, double>)
        if (cx) std::copy_n(out, n * D, cx + K * n * D);
}

/// Backward of a cached pass: g_out [n, D] = ∂L/∂(pass output), g_ld [n] = ∂L/∂(Σ s) per
/// row (nullptr: 0). Writes ∂L/∂(pass input) to g_in [n, D] and accumulates ∂L/∂θ into G.
inline void coupling_stack_backward(const coupling_layout& L, index_t K, const double* P, const unsigned char* masks,
                                    double alpha, bool inverse, const coupling_cache& c, const double* g_out,
                                    const double* g_ld, double* g_in, double* G) {
    const index_t D = L.D, H = L.H, n = c.n;
    if (g_in != g_out) std::copy_n(g_out, n * D, g_in);
    for (index_t a = K - 1; a >= 0; --a) {
        const index_t l = inverse ? K - 1 - a : a;
        coupling_layer_backward(L, P + l * L.size(), masks + l * D, alpha, inverse, c.x.data() + a * n * D,
                                c.x.data() + (a + 1) * n * D, c.r.data() + a * n * 2 * H, c.s.data() + a * n * D, g_in,
                                g_ld, n, G + l * L.size());
    }
}

}  // namespace kattn::detail
