// Tests for kattn/attention/softmax_attention.hpp against an independent naive O(L²)
// softmax in double, central finite differences, thread counts, large logits and bad input.
#include <doctest/doctest.h>

#include <kattn/attention/softmax_attention.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace {

using kattn::index_t;

// ---------------------------------------------------------------- naive reference (double)

struct dims {
    index_t batch = 1, heads = 1, lq = 1, lk = 1, d = 1, dv = 1;
};

struct ref_grads {
    std::vector<double> dq, dk, dv;
};

/// Allowed keys of row i in batch b.
bool allowed(index_t i, index_t j, index_t b, bool causal, const std::vector<index_t>& lens) {
    if (causal && j > i) return false;
    if (!lens.empty() && j >= lens[static_cast<std::size_t>(b)]) return false;
    return true;
}

/// Probabilities P[i][j] (0 where masked) for one problem, max-subtracted.
std::vector<double> naive_probs(const double* q, const double* k, const dims& s, index_t b, double scale, bool causal,
                                const std::vector<index_t>& lens) {
    std::vector<double> P(static_cast<std::size_t>(s.lq * s.lk), 0.0);
    for (index_t i = 0; i < s.lq; ++i) {
        double mx = -std::numeric_limits<double>::infinity();
        for (index_t j = 0; j < s.lk; ++j) {
            if (!allowed(i, j, b, causal, lens)) continue;
            double dot = 0;
            for (index_t c = 0; c < s.d; ++c) dot += q[i * s.d + c] * k[j * s.d + c];
            P[i * s.lk + j] = scale * dot;
            mx = std::max(mx, scale * dot);
        }
        double den = 0;
        for (index_t j = 0; j < s.lk; ++j) {
            if (!allowed(i, j, b, causal, lens)) continue;
            P[i * s.lk + j] = std::exp(P[i * s.lk + j] - mx);
            den += P[i * s.lk + j];
        }
        for (index_t j = 0; j < s.lk; ++j) P[i * s.lk + j] /= den;
    }
    return P;
}

std::vector<double> naive_forward(const std::vector<double>& q, const std::vector<double>& k,
                                  const std::vector<double>& v, const dims& s, double scale, bool causal,
                                  const std::vector<index_t>& lens) {
    std::vector<double> out(static_cast<std::size_t>(s.batch * s.heads * s.lq * s.dv), 0.0);
    for (index_t p = 0; p < s.batch * s.heads; ++p) {
        const double* qp = q.data() + p * s.lq * s.d;
        const double* kp = k.data() + p * s.lk * s.d;
        const double* vp = v.data() + p * s.lk * s.dv;
        double* op = out.data() + p * s.lq * s.dv;
        const auto P = naive_probs(qp, kp, s, p / s.heads, scale, causal, lens);
        for (index_t i = 0; i < s.lq; ++i)
            for (index_t j = 0; j < s.lk; ++j)
                for (index_t c = 0; c < s.dv; ++c) op[i * s.dv + c] += P[i * s.lk + j] * vp[j * s.dv + c];
    }
    return out;
}

/// Textbook softmax backward: dS = P ⊙ (dP − rowsum(P ⊙ dP)), dP = G Vᵀ.
ref_grads naive_backward(const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v,
                         const std::vector<double>& g, const dims& s, double scale, bool causal,
                         const std::vector<index_t>& lens) {
    ref_grads r{std::vector<double>(q.size(), 0.0), std::vector<double>(k.size(), 0.0),
                std::vector<double>(v.size(), 0.0)};
    for (index_t p = 0; p < s.batch * s.heads; ++p) {
        const double* qp = q.data() + p * s.lq * s.d;
        const double* kp = k.data() + p * s.lk * s.d;
        const double* vp = v.data() + p * s.lk * s.dv;
        const double* gp = g.data() + p * s.lq * s.dv;
        double* dq = r.dq.data() + p * s.lq * s.d;
        double* dk = r.dk.data() + p * s.lk * s.d;
        double* dv = r.dv.data() + p * s.lk * s.dv;
        const auto P = naive_probs(qp, kp, s, p / s.heads, scale, causal, lens);
        for (index_t i = 0; i < s.lq; ++i) {
            std::vector<double> dP(static_cast<std::size_t>(s.lk), 0.0);
            double rs = 0;
            for (index_t j = 0; j < s.lk; ++j) {
                for (index_t c = 0; c < s.dv; ++c) dP[j] += gp[i * s.dv + c] * vp[j * s.dv + c];
                rs += P[i * s.lk + j] * dP[j];
            }
            for (index_t j = 0; j < s.lk; ++j) {
                const double pij = P[i * s.lk + j];
                const double ds = pij * (dP[j] - rs);
                for (index_t c = 0; c < s.dv; ++c) dv[j * s.dv + c] += pij * gp[i * s.dv + c];
                for (index_t c = 0; c < s.d; ++c) {
                    dq[i * s.d + c] += scale * ds * kp[j * s.d + c];
                    dk[j * s.d + c] += scale * ds * qp[i * s.d + c];
                }
            }
        }
    }
    return r;
}

// ---------------------------------------------------------------- helpers

template <class C>
std::vector<double> to_vec(const C& x) {
    return std::vector<double>(x.begin(), x.end());
}

template <class C>
void fill_normal(C& x, std::mt19937& rng, double sigma = 1.0) {
    std::normal_distribution<double> nd(0.0, sigma);
    for (auto& e : x) e = static_cast<typename C::value_type>(nd(rng));
}

/// max |a − b| / max |b|.
double rel_err(const std::vector<double>& a, const std::vector<double>& b) {
    REQUIRE(a.size() == b.size());
    double num = 0, den = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        num = std::max(num, std::abs(a[i] - b[i]));
        den = std::max(den, std::abs(b[i]));
    }
    return den > 0 ? num / den : num;
}

template <class T>
double tol() {
    return std::is_same_v<T, float> ? 1e-5 : 1e-12;
}

template <class T>
xt::xtensor<T, 4> rand4(index_t b, index_t h, index_t l, index_t d, std::mt19937& rng, double sigma = 1.0) {
    xt::xtensor<T, 4> x(std::array<std::size_t, 4>{std::size_t(b), std::size_t(h), std::size_t(l), std::size_t(d)});
    fill_normal(x, rng, sigma);
    return x;
}

template <class T>
xt::xtensor<T, 2> rand2(index_t l, index_t d, std::mt19937& rng, double sigma = 1.0) {
    xt::xtensor<T, 2> x(std::array<std::size_t, 2>{std::size_t(l), std::size_t(d)});
    fill_normal(x, rng, sigma);
    return x;
}

enum class mask { none, causal, padded, causal_padded };
constexpr mask all_masks[] = {mask::none, mask::causal, mask::padded, mask::causal_padded};

const char* name(mask m) {
    switch (m) {
        case mask::none:
            return "none";
        case mask::causal:
            return "causal";
        case mask::padded:
            return "padded";
        default:
            return "causal+padded";
    }
}
bool is_causal(mask m) { return m == mask::causal || m == mask::causal_padded; }
bool is_padded(mask m) { return m == mask::padded || m == mask::causal_padded; }

/// Key lengths for `batch` entries of a length-lk key sequence: varied, in [1, lk].
std::vector<index_t> make_lens(index_t batch, index_t lk) {
    std::vector<index_t> lens;
    for (index_t b = 0; b < batch; ++b) lens.push_back(std::max<index_t>(1, lk - 3 * b - (lk > 2 ? lk / 3 : 0)));
    return lens;
}

template <class T, class C>
C run_forward(const kattn::softmax_attention<T>& att, const C& q, const C& k, const C& v, mask m,
              const std::vector<index_t>& lens) {
    switch (m) {
        case mask::none:
            return att(q, k, v);
        case mask::causal:
            return att(q, k, v, kattn::causal);
        case mask::padded:
            return att(q, k, v, kattn::key_lengths(lens));
        default:
            return att(q, k, v, kattn::causal, kattn::key_lengths(lens));
    }
}

template <class T, class C>
auto run_backward(const kattn::softmax_attention<T>& att, const C& q, const C& k, const C& v, const C& g, mask m,
                  const std::vector<index_t>& lens) {
    switch (m) {
        case mask::none:
            return att.backward(q, k, v, g);
        case mask::causal:
            return att.backward(q, k, v, g, kattn::causal);
        case mask::padded:
            return att.backward(q, k, v, g, kattn::key_lengths(lens));
        default:
            return att.backward(q, k, v, g, kattn::causal, kattn::key_lengths(lens));
    }
}

template <class F>
void expect_error(F&& f, const std::string& arg) {
    bool threw = false;
    try {
        f();
    } catch (const kattn::error& e) {
        threw = true;
        const std::string msg = e.what();
        INFO("message: " << msg);
        CHECK(msg.find("'" + arg + "'") != std::string::npos);
    }
    CHECK_MESSAGE(threw, "expected kattn::error naming '" << arg << "'");
}

}  // namespace

// ================================================================ forward vs naive

TEST_CASE_TEMPLATE("softmax_attention rank 4 matches naive softmax for every mask and length", T, float, double) {
    std::mt19937 rng(1234);
    const kattn::softmax_attention<T> att;
    for (index_t L : {1, 7, 64, 130}) {
        for (mask m : all_masks) {
            CAPTURE(L);
            CAPTURE(name(m));
            const dims s{2, 3, L, L, 16, 8};
            auto q = rand4<T>(s.batch, s.heads, L, s.d, rng);
            auto k = rand4<T>(s.batch, s.heads, L, s.d, rng);
            auto v = rand4<T>(s.batch, s.heads, L, s.dv, rng);
            const auto lens = is_padded(m) ? make_lens(s.batch, L) : std::vector<index_t>{};
            const auto out = run_forward(att, q, k, v, m, lens);
            REQUIRE(out.shape() == std::array<std::size_t, 4>{2, 3, std::size_t(L), 8});
            const auto ref =
                naive_forward(to_vec(q), to_vec(k), to_vec(v), s, 1.0 / std::sqrt(16.0), is_causal(m), lens);
            CHECK(rel_err(to_vec(out), ref) <= tol<T>());
        }
    }
}

TEST_CASE_TEMPLATE("softmax_attention rank 2 matches naive softmax", T, float, double) {
    std::mt19937 rng(99);
    const kattn::softmax_attention<T> att;
    for (index_t L : {1, 7, 130}) {
        for (mask m : all_masks) {
            CAPTURE(L);
            CAPTURE(name(m));
            const dims s{1, 1, L, L, 5, 3};
            auto q = rand2<T>(L, s.d, rng);
            auto k = rand2<T>(L, s.d, rng);
            auto v = rand2<T>(L, s.dv, rng);
            const auto lens =
                is_padded(m) ? std::vector<index_t>{std::max<index_t>(1, L - L / 3)} : std::vector<index_t>{};
            const auto out = run_forward(att, q, k, v, m, lens);
            REQUIRE(out.shape() == std::array<std::size_t, 2>{std::size_t(L), 3});
            const auto ref =
                naive_forward(to_vec(q), to_vec(k), to_vec(v), s, 1.0 / std::sqrt(5.0), is_causal(m), lens);
            CHECK(rel_err(to_vec(out), ref) <= tol<T>());
        }
    }
}

TEST_CASE_TEMPLATE("softmax_attention with q_len != k_len (non-causal, with and without padding)", T, float, double) {
    std::mt19937 rng(7);
    const kattn::softmax_attention<T> att;
    for (auto lens_pair : {std::pair<index_t, index_t>{7, 130}, {130, 7}, {1, 65}, {33, 1}}) {
        const index_t lq = lens_pair.first, lk = lens_pair.second;
        for (mask m : {mask::none, mask::padded}) {
            CAPTURE(lq);
            CAPTURE(lk);
            CAPTURE(name(m));
            const dims s{2, 2, lq, lk, 12, 20};
            auto q = rand4<T>(s.batch, s.heads, lq, s.d, rng);
            auto k = rand4<T>(s.batch, s.heads, lk, s.d, rng);
            auto v = rand4<T>(s.batch, s.heads, lk, s.dv, rng);
            const auto lens = is_padded(m) ? make_lens(s.batch, lk) : std::vector<index_t>{};
            const auto out = run_forward(att, q, k, v, m, lens);
            REQUIRE(out.shape() == std::array<std::size_t, 4>{2, 2, std::size_t(lq), 20});
            const auto ref = naive_forward(to_vec(q), to_vec(k), to_vec(v), s, 1.0 / std::sqrt(12.0), false, lens);
            CHECK(rel_err(to_vec(out), ref) <= tol<T>());
        }
    }
}

TEST_CASE("softmax_attention honours a custom scale, head_dim and value_dim") {
    std::mt19937 rng(5);
    kattn::softmax_config cfg;
    cfg.scale = 0.37;
    cfg.head_dim = 6;
    cfg.value_dim = 4;
    const kattn::softmax_attention<double> att(cfg);
    CHECK(att.scale_for(6) == 0.37);
    const dims s{1, 2, 9, 9, 6, 4};
    auto q = rand4<double>(1, 2, 9, 6, rng);
    auto k = rand4<double>(1, 2, 9, 6, rng);
    auto v = rand4<double>(1, 2, 9, 4, rng);
    const auto ref = naive_forward(to_vec(q), to_vec(k), to_vec(v), s, 0.37, true, {});
    CHECK(rel_err(to_vec(att(q, k, v, kattn::causal)), ref) <= 1e-12);
}

TEST_CASE("softmax_attention accepts xt::xarray and agrees with xt::xtensor bitwise") {
    std::mt19937 rng(11);
    const kattn::softmax_attention<float> att;
    auto q = rand4<float>(2, 2, 70, 8, rng);
    auto k = rand4<float>(2, 2, 70, 8, rng);
    auto v = rand4<float>(2, 2, 70, 8, rng);
    const std::vector<index_t> lens{70, 40};
    const xt::xarray<float> qa = q, ka = k, va = v;
    const auto a = att(q, k, v, kattn::causal, kattn::key_lengths(lens));
    const xt::xarray<float> b = att(qa, ka, va, kattn::causal, kattn::key_lengths(lens));
    REQUIRE(a.size() == b.size());
    CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// ================================================================ mask properties

TEST_CASE("padded keys and values do not influence the output; future keys do not influence the past") {
    std::mt19937 rng(21);
    const kattn::softmax_attention<double> att;
    const index_t L = 100;
    auto q = rand4<double>(2, 1, L, 8, rng);
    auto k = rand4<double>(2, 1, L, 8, rng);
    auto v = rand4<double>(2, 1, L, 8, rng);
    const std::vector<index_t> lens{L, 60};
    const auto base = att(q, k, v, kattn::key_lengths(lens));
    auto k2 = k;
    auto v2 = v;
    for (index_t j = 60; j < L; ++j)
        for (index_t c = 0; c < 8; ++c) {
            k2(1, 0, j, c) = 50.0;
            v2(1, 0, j, c) = 1e6;
        }
    CHECK(to_vec(att(q, k2, v2, kattn::key_lengths(lens))) == to_vec(base));

    const auto cbase = att(q, k, v, kattn::causal);
    const index_t t = 70;
    auto k3 = k;
    auto v3 = v;
    for (index_t c = 0; c < 8; ++c) {
        k3(0, 0, t, c) += 3.0;
        v3(0, 0, t, c) -= 5.0;
    }
    const auto cpert = att(q, k3, v3, kattn::causal);
    bool past_same = true, at_t_changed = false;
    for (index_t i = 0; i < L; ++i)
        for (index_t c = 0; c < 8; ++c) {
            if (i < t && cpert(0, 0, i, c) != cbase(0, 0, i, c)) past_same = false;
            if (i == t && cpert(0, 0, i, c) != cbase(0, 0, i, c)) at_t_changed = true;
        }
    CHECK(past_same);
    CHECK(at_t_changed);
}

// ================================================================ backward

namespace {

/// Checks backward against central finite differences of L = Σ out ⊙ G (double, eps 1e-6).
template <class C>
void check_fd(const C& q0, const C& k0, const C& v0, mask m, const std::vector<index_t>& lens) {
    std::mt19937 rng(77);
    const kattn::softmax_attention<double> att;
    C g = run_forward(att, q0, k0, v0, m, lens);
    fill_normal(g, rng);
    const auto grads = run_backward(att, q0, k0, v0, g, m, lens);
    auto loss = [&](const C& q, const C& k, const C& v) {
        const auto out = run_forward(att, q, k, v, m, lens);
        double s = 0;
        for (std::size_t i = 0; i < out.size(); ++i) s += out.data()[i] * g.data()[i];
        return s;
    };
    const double eps = 1e-6;
    auto fd = [&](int which) {
        C q = q0, k = k0, v = v0;
        C& x = which == 0 ? q : which == 1 ? k : v;
        std::vector<double> r(x.size());
        for (std::size_t i = 0; i < x.size(); ++i) {
            const double x0 = x.data()[i];
            x.data()[i] = x0 + eps;
            const double lp = loss(q, k, v);
            x.data()[i] = x0 - eps;
            const double lm = loss(q, k, v);
            x.data()[i] = x0;
            r[i] = (lp - lm) / (2 * eps);
        }
        return r;
    };
    CHECK(rel_err(to_vec(grads.dq), fd(0)) <= 1e-6);
    CHECK(rel_err(to_vec(grads.dk), fd(1)) <= 1e-6);
    CHECK(rel_err(to_vec(grads.dv), fd(2)) <= 1e-6);
}

}  // namespace

TEST_CASE("softmax_attention backward matches central finite differences (double)") {
    std::mt19937 rng(31);
    for (mask m : all_masks) {
        CAPTURE(name(m));
        const index_t L = 6;
        const auto lens = is_padded(m) ? std::vector<index_t>{4, 6} : std::vector<index_t>{};
        check_fd(rand4<double>(2, 2, L, 3, rng), rand4<double>(2, 2, L, 3, rng), rand4<double>(2, 2, L, 4, rng), m,
                 lens);
        const auto lens2 = is_padded(m) ? std::vector<index_t>{3} : std::vector<index_t>{};
        check_fd(rand2<double>(5, 3, rng), rand2<double>(5, 3, rng), rand2<double>(5, 2, rng), m, lens2);
    }
    SUBCASE("q_len != k_len") {
        check_fd(rand4<double>(1, 2, 3, 4, rng), rand4<double>(1, 2, 7, 4, rng), rand4<double>(1, 2, 7, 2, rng),
                 mask::padded, {5});
        check_fd(rand4<double>(1, 1, 8, 2, rng), rand4<double>(1, 1, 3, 2, rng), rand4<double>(1, 1, 3, 3, rng),
                 mask::none, {});
    }
}

TEST_CASE_TEMPLATE("softmax_attention backward matches the naive gradient across block boundaries", T, float, double) {
    std::mt19937 rng(41);
    const kattn::softmax_attention<T> att;
    for (auto lens_pair : {std::pair<index_t, index_t>{130, 130}, {1, 1}, {70, 129}}) {
        const index_t lq = lens_pair.first, lk = lens_pair.second;
        for (mask m : all_masks) {
            if (is_causal(m) && lq != lk) continue;
            CAPTURE(lq);
            CAPTURE(lk);
            CAPTURE(name(m));
            const dims s{2, 2, lq, lk, 10, 7};
            auto q = rand4<T>(s.batch, s.heads, lq, s.d, rng);
            auto k = rand4<T>(s.batch, s.heads, lk, s.d, rng);
            auto v = rand4<T>(s.batch, s.heads, lk, s.dv, rng);
            auto g = rand4<T>(s.batch, s.heads, lq, s.dv, rng);
            const auto lens = is_padded(m) ? make_lens(s.batch, lk) : std::vector<index_t>{};
            const auto gr = run_backward(att, q, k, v, g, m, lens);
            const auto ref = naive_backward(to_vec(q), to_vec(k), to_vec(v), to_vec(g), s, 1.0 / std::sqrt(10.0),
                                            is_causal(m), lens);
            const double t = std::is_same_v<T, float> ? 2e-5 : 1e-11;
            CHECK(rel_err(to_vec(gr.dq), ref.dq) <= t);
            CHECK(rel_err(to_vec(gr.dk), ref.dk) <= t);
            CHECK(rel_err(to_vec(gr.dv), ref.dv) <= t);
        }
    }
}

// ================================================================ determinism

TEST_CASE_TEMPLATE("softmax_attention is bitwise identical for 1 and 2 threads", T, float, double) {
#ifdef _OPENMP
    std::mt19937 rng(51);
    const kattn::softmax_attention<T> att;
    auto q = rand4<T>(3, 3, 150, 16, rng);
    auto k = rand4<T>(3, 3, 150, 16, rng);
    auto v = rand4<T>(3, 3, 150, 16, rng);
    auto g = rand4<T>(3, 3, 150, 16, rng);
    const std::vector<index_t> lens{150, 90, 1};
    const int saved = omp_get_max_threads();
    auto run = [&](int threads) {
        omp_set_num_threads(threads);
        auto o = att(q, k, v, kattn::causal, kattn::key_lengths(lens));
        auto gr = att.backward(q, k, v, g, kattn::causal, kattn::key_lengths(lens));
        return std::vector<xt::xtensor<T, 4>>{o, gr.dq, gr.dk, gr.dv};
    };
    const auto one = run(1);
    const auto two = run(2);
    const auto three = run(3);
    omp_set_num_threads(saved);
    for (std::size_t i = 0; i < one.size(); ++i) {
        CHECK(std::memcmp(one[i].data(), two[i].data(), one[i].size() * sizeof(T)) == 0);
        CHECK(std::memcmp(one[i].data(), three[i].data(), one[i].size() * sizeof(T)) == 0);
    }
#else
    MESSAGE("built without OpenMP: thread determinism not exercised");
#endif
}

// ================================================================ large logits

TEST_CASE_TEMPLATE("softmax_attention does not overflow with logits around 1000", T, float, double) {
    std::mt19937 rng(61);
    const kattn::softmax_attention<T> att;
    const dims s{1, 2, 80, 80, 16, 8};
    // |scale q.k| ~ 1000: entries of q and k of size ~ sqrt(1000 * 4 / 16 * ...) chosen empirically
    auto q = rand4<T>(1, 2, 80, 16, rng, 16.0);
    auto k = rand4<T>(1, 2, 80, 16, rng, 16.0);
    auto v = rand4<T>(1, 2, 80, 8, rng);
    auto g = rand4<T>(1, 2, 80, 8, rng);
    double maxlogit = 0;
    for (index_t i = 0; i < 80; ++i)
        for (index_t j = 0; j < 80; ++j) {
            double dot = 0;
            for (index_t c = 0; c < 16; ++c) dot += double(q(0, 0, i, c)) * double(k(0, 0, j, c));
            maxlogit = std::max(maxlogit, std::abs(dot / 4.0));
        }
    CHECK(maxlogit > 500.0);
    const std::vector<index_t> lens{55};
    for (mask m : all_masks) {
        CAPTURE(name(m));
        const auto lv = is_padded(m) ? lens : std::vector<index_t>{};
        const auto out = run_forward(att, q, k, v, m, lv);
        CHECK(std::all_of(out.begin(), out.end(), [](T x) { return std::isfinite(x); }));
        const auto ref = naive_forward(to_vec(q), to_vec(k), to_vec(v), s, 0.25, is_causal(m), lv);
        // float scores near 1000 carry an absolute rounding error ~1e-4, hence the looser float bound.
        CHECK(rel_err(to_vec(out), ref) <= (std::is_same_v<T, float> ? 2e-3 : 1e-10));
        const auto gr = run_backward(att, q, k, v, g, m, lv);
        for (const auto* x : {&gr.dq, &gr.dk, &gr.dv})
            CHECK(std::all_of(x->begin(), x->end(), [](T e) { return std::isfinite(e); }));
    }
}

// ================================================================ bad input

TEST_CASE("softmax_attention rejects bad input with kattn::error naming the argument") {
    std::mt19937 rng(71);
    const kattn::softmax_attention<double> att;
    auto q = rand4<double>(2, 2, 5, 4, rng);
    auto k = rand4<double>(2, 2, 5, 4, rng);
    auto v = rand4<double>(2, 2, 5, 3, rng);
    auto g = rand4<double>(2, 2, 5, 3, rng);

    SUBCASE("wrong rank (xarray)") {
        const xt::xarray<double> q3 = xt::zeros<double>({2, 5, 4});
        const xt::xarray<double> qa = q, ka = k, va = v;
        const xt::xarray<double> k2 = xt::zeros<double>({5, 4});
        expect_error([&] { (void)att(q3, ka, va); }, "q");
        expect_error([&] { (void)att(qa, k2, va); }, "k");
        expect_error([&] { (void)att.backward(q3, ka, va, xt::xarray<double>(g)); }, "q");
    }
    SUBCASE("mismatched dims") {
        expect_error([&] { (void)att(q, rand4<double>(2, 2, 5, 3, rng), v); }, "k");  // k dim != q dim
        expect_error([&] { (void)att(q, k, rand4<double>(2, 2, 6, 3, rng)); }, "v");  // v len != k len
        expect_error([&] { (void)att(q, rand4<double>(1, 2, 5, 4, rng), v); }, "k");  // batch
        expect_error([&] { (void)att(q, k, rand4<double>(2, 3, 5, 3, rng)); }, "v");  // heads
        kattn::softmax_config cfg;
        cfg.head_dim = 8;
        expect_error([&] { (void)kattn::softmax_attention<double>(cfg)(q, k, v); }, "q");
        cfg = {};
        cfg.value_dim = 8;
        expect_error([&] { (void)kattn::softmax_attention<double>(cfg)(q, k, v); }, "v");
    }
    SUBCASE("zero length and zero dims") {
        expect_error([&] { (void)att(rand4<double>(2, 2, 0, 4, rng), k, v); }, "q");
        expect_error([&] { (void)att(q, rand4<double>(2, 2, 0, 4, rng), rand4<double>(2, 2, 0, 3, rng)); }, "k");
        expect_error([&] { (void)att(rand2<double>(0, 4, rng), rand2<double>(3, 4, rng), rand2<double>(3, 3, rng)); },
                     "q");
        expect_error(
            [&] {
                (void)att(rand4<double>(0, 2, 5, 4, rng), rand4<double>(0, 2, 5, 4, rng),
                          rand4<double>(0, 2, 5, 3, rng));
            },
            "q");
    }
    SUBCASE("non-finite values") {
        auto kn = k;
        kn(1, 0, 2, 3) = std::numeric_limits<double>::quiet_NaN();
        expect_error([&] { (void)att(q, kn, v); }, "k");
        auto qn = q;
        qn(0, 1, 0, 0) = std::numeric_limits<double>::infinity();
        expect_error([&] { (void)att(qn, k, v); }, "q");
        auto vn = v;
        vn(0, 0, 4, 2) = -std::numeric_limits<double>::infinity();
        expect_error([&] { (void)att(q, k, vn); }, "v");
        auto gn = g;
        gn(1, 1, 1, 1) = std::numeric_limits<double>::quiet_NaN();
        expect_error([&] { (void)att.backward(q, k, v, gn); }, "dout");
        expect_error([&] { (void)att.backward(q, kn, v, g); }, "k");

        kattn::softmax_config cfg;
        cfg.check_finite = false;
        const kattn::softmax_attention<double> lax(cfg);
        auto vnan = v;
        vnan(0, 0, 0, 0) = std::numeric_limits<double>::quiet_NaN();
        CHECK_NOTHROW((void)lax(q, k, vnan));
    }
    SUBCASE("scores overflowing the value type") {
        const kattn::softmax_attention<float> f;
        xt::xtensor<float, 2> big = xt::ones<float>({3, 4}) * 1e20f;
        expect_error([&] { (void)f(big, big, big); }, "q");
    }
    SUBCASE("bad key_lengths") {
        const std::vector<index_t> one{5};
        const std::vector<index_t> zero{5, 0};
        const std::vector<index_t> toolong{5, 6};
        const std::vector<index_t> negative{-1, 5};
        expect_error([&] { (void)att(q, k, v, kattn::key_lengths(one)); }, "key_lengths");
        expect_error([&] { (void)att(q, k, v, kattn::key_lengths(zero)); }, "key_lengths");
        expect_error([&] { (void)att(q, k, v, kattn::causal, kattn::key_lengths(toolong)); }, "key_lengths");
        expect_error([&] { (void)att.backward(q, k, v, g, kattn::key_lengths(negative)); }, "key_lengths");
        const std::vector<index_t> two2{2, 2};
        expect_error(
            [&] {
                (void)att(rand2<double>(3, 4, rng), rand2<double>(3, 4, rng), rand2<double>(3, 3, rng),
                          kattn::key_lengths(two2));
            },
            "key_lengths");
    }
    SUBCASE("causal with q_len != k_len") {
        auto k7 = rand4<double>(2, 2, 7, 4, rng);
        auto v7 = rand4<double>(2, 2, 7, 3, rng);
        expect_error([&] { (void)att(q, k7, v7, kattn::causal); }, "k");
        expect_error([&] { (void)att.backward(q, k7, v7, g, kattn::causal); }, "k");
        CHECK_NOTHROW((void)att(q, k7, v7));
    }
    SUBCASE("dout shape") {
        expect_error([&] { (void)att.backward(q, k, v, rand4<double>(2, 2, 5, 4, rng)); }, "dout");
        expect_error([&] { (void)att.backward(q, k, v, rand4<double>(2, 2, 4, 3, rng)); }, "dout");
        const xt::xarray<double> g3 = xt::zeros<double>({2, 5, 3});
        expect_error(
            [&] { (void)att.backward(xt::xarray<double>(q), xt::xarray<double>(k), xt::xarray<double>(v), g3); },
            "dout");
    }
    SUBCASE("bad scale and config") {
        for (double sc :
             {0.0, -1.0, std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
            kattn::softmax_config cfg;
            cfg.scale = sc;
            expect_error([&] { kattn::softmax_attention<double> a(cfg); }, "scale");
        }
        kattn::softmax_config cfg;
        cfg.scale = 1e300;  // finite in double, infinite in float
        const kattn::softmax_attention<double> d(cfg);
        CHECK_NOTHROW((void)d(q, k, v));
        const kattn::softmax_attention<float> f(cfg);
        auto qf = rand2<float>(3, 4, rng);
        expect_error([&] { (void)f(qf, qf, qf); }, "scale");
        cfg = {};
        cfg.head_dim = -1;
        expect_error([&] { kattn::softmax_attention<double> a(cfg); }, "head_dim");
    }
}
