// tests/support.hpp — helpers shared by the kattn unit tests: seeded random tensors,
// the explicit O(L²) kernel-weighted attention, finite differences and error checks.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include <xtensor/xtensor.hpp>

#include <kattn/kattn.hpp>

#include "tensors.hpp"

namespace kt {

using kattn::index_t;

/// Explicit attention from features: out_i = Σ_{j allowed} (φq_i·φk_j) v_j / guard(Σ φq_i·φk_j),
/// computed in double with the O(L²) kernel matrix. phq [Lq, F], phk [Lk, F], v [Lk, dv].
template <class T>
xt::xtensor<double, 2> explicit_attention(const xt::xtensor<T, 2>& phq, const xt::xtensor<T, 2>& phk,
                                          const xt::xtensor<T, 2>& v, bool causal, index_t len, bool positive,
                                          double eps = 1e-6) {
    const index_t Lq = phq.shape()[0], Lk = phk.shape()[0], F = phq.shape()[1], dv = v.shape()[1];
    xt::xtensor<double, 2> out = xt::zeros<double>({std::size_t(Lq), std::size_t(dv)});
    for (index_t i = 0; i < Lq; ++i) {
        double den = 0;
        std::vector<double> num(dv, 0.0);
        for (index_t j = 0; j < std::min(len, Lk); ++j) {
            if (causal && j > i) break;
            double kij = 0;
            for (index_t f = 0; f < F; ++f) kij += double(phq(i, f)) * double(phk(j, f));
            den += kij;
            for (index_t c = 0; c < dv; ++c) num[c] += kij * double(v(j, c));
        }
        if (positive)
            den = std::max(den, eps);
        else if (std::abs(den) < eps)
            den = den < 0 ? -eps : eps;
        for (index_t c = 0; c < dv; ++c) out(i, c) = num[c] / den;
    }
    return out;
}

/// Slice [b, h] of a rank-4 tensor as a rank-2 copy.
template <class T>
xt::xtensor<T, 2> slice(const xt::xtensor<T, 4>& x, std::size_t b, std::size_t h) {
    xt::xtensor<T, 2> r = xt::xtensor<T, 2>::from_shape({x.shape()[2], x.shape()[3]});
    const std::size_t n = r.size();
    std::copy_n(x.data() + (b * x.shape()[1] + h) * n, n, r.data());
    return r;
}

/// Checks that f() throws kattn::error whose message contains every fragment.
template <class F>
void check_error(F&& f, std::initializer_list<std::string> fragments) {
    bool thrown = false;
    try {
        f();
    } catch (const kattn::error& e) {
        thrown = true;
        const std::string msg = e.what();
        for (const auto& frag : fragments) {
            INFO("message: ", msg);
            CHECK(msg.find(frag) != std::string::npos);
        }
    }
    CHECK_MESSAGE(thrown, "expected kattn::error");
}

/// Every gradient of two linear_attention backward results is bitwise the same.
template <class G>
void check_same_gradients(const G& a, const G& b) {
    CHECK(a.dq == b.dq);
    CHECK(a.dk == b.dk);
    CHECK(a.dv == b.dv);
    CHECK(a.d_omega == b.d_omega);
    CHECK(a.d_bias == b.d_bias);
}

/// A backend test problem: q, k [B, H, L, 8] (sd 0.5), v and the upstream gradient G
/// [B, H, L, 5], and key lengths L − 3b − 1 (at least 1) per batch entry b when `padded`.
template <class T>
struct small_problem {
    xt::xtensor<T, 4> q, k, v, G;
    std::vector<index_t> lens;

    small_problem(index_t B, index_t H, index_t L, bool padded) {
        const auto sb = std::size_t(B), sh = std::size_t(H), sl = std::size_t(L);
        q = randn<T, 4>({sb, sh, sl, 8}, 1, 0.5);
        k = randn<T, 4>({sb, sh, sl, 8}, 2, 0.5);
        v = randn<T, 4>({sb, sh, sl, 5}, 3);
        G = randn<T, 4>({sb, sh, sl, 5}, 4);
        lens.resize(sb);
        for (index_t b = 0; b < B; ++b) lens[std::size_t(b)] = padded ? std::max<index_t>(1, L - 3 * b - 1) : L;
    }
};

}  // namespace kt
