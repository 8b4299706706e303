// kattn::dist::sequence_parallel under mpirun (1–4 ranks): every rank builds the whole
// sequence from the same seed, runs its slice through the distributed operator and checks
// it against the single-process operator on the concatenated sequence — outputs, ∂q, ∂k,
// ∂v (its slice) and ∂Ω, ∂b (summed over ranks) — for every registered feature map, both
// value types, both CPU backends, causal and not, with and without key padding. Slices have
// unequal lengths, and the padding leaves whole slices without a valid key.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include <kattn/dist/sequence_parallel.hpp>

#include "../map_cases.hpp"
#include "support.hpp"

namespace {

using kattn::index_t;

/// Largest |a − b| / max |b|.
template <class A, class B>
double rel(const A& a, const B& b) {
    double num = 0, den = 0;
    for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
        num = std::max(num, std::abs(double(a.data()[i]) - double(b.data()[i])));
        den = std::max(den, std::abs(double(b.data()[i])));
    }
    return a.size() == b.size() ? num / (den + 1e-300) : 1e300;
}

/// Tokens [off, off + len) of a [B, H, L, d] tensor.
template <class T>
xt::xtensor<T, 4> slice_of(const xt::xtensor<T, 4>& x, index_t off, index_t len) {
    const std::size_t B = x.shape()[0], H = x.shape()[1], L = x.shape()[2], d = x.shape()[3];
    xt::xtensor<T, 4> r = xt::xtensor<T, 4>::from_shape({B, H, std::size_t(len), d});
    for (std::size_t p = 0; p < B * H; ++p)
        std::copy_n(x.data() + (p * L + std::size_t(off)) * d, std::size_t(len) * d,
                    r.data() + p * std::size_t(len) * d);
    return r;
}

/// Slice lengths of the ranks: unequal on purpose.
std::vector<index_t> slice_lengths(int ranks, index_t base) {
    std::vector<index_t> l;
    for (int r = 0; r < ranks; ++r) l.push_back(base + 13 * ((r * 7) % 5));
    return l;
}

/// The configuration of the map case's tests: head_dim 6, value_dim 5.
template <class Case>
typename Case::config test_config(std::uint64_t seed) {
    typename Case::config cfg;
    cfg.head_dim = 6;
    cfg.value_dim = 5;
    cfg.num_features = Case::identity ? 6 : 12;
    cfg.seed = seed;
    Case::configure(cfg);
    return cfg;
}

/// Every rank's slice length, the whole length and this rank's offset.
struct geometry {
    std::vector<index_t> lens;
    index_t L = 0, off = 0;
};
geometry split_geometry(int N, int me) {
    geometry g{slice_lengths(N, 23)};
    for (int r = 0; r < N; ++r) {
        if (r < me) g.off += g.lens[std::size_t(r)];
        g.L += g.lens[std::size_t(r)];
    }
    return g;
}

struct mode {
    bool causal, padded;
};
constexpr mode modes[] = {{false, false}, {true, false}, {false, true}, {true, true}};

/// Forward and backward of the whole sequence (op) and of this rank's slice (sp).
template <class Op, class SP, class T>
void run_both(const Op& op, SP& sp, const mode& m, const std::vector<index_t>& lengths, const xt::xtensor<T, 4>& q,
              const xt::xtensor<T, 4>& k, const xt::xtensor<T, 4>& v, const xt::xtensor<T, 4>& dout, index_t off,
              index_t len, xt::xtensor<T, 4>& out_full, xt::xtensor<T, 4>& out_part,
              typename Op::template gradients<4>& g_full, typename Op::template gradients<4>& g_part) {
    const kattn::key_lengths kl(lengths);
    const auto sq = slice_of(q, off, len), sk = slice_of(k, off, len), sv = slice_of(v, off, len),
               sd = slice_of(dout, off, len);
    if (m.causal && m.padded) {
        out_full = op(q, k, v, kattn::causal, kl);
        g_full = op.backward(q, k, v, dout, kattn::causal, kl);
        out_part = sp(sq, sk, sv, kattn::causal, kl);
        g_part = sp.backward(sq, sk, sv, sd, kattn::causal, kl);
    } else if (m.causal) {
        out_full = op(q, k, v, kattn::causal);
        g_full = op.backward(q, k, v, dout, kattn::causal);
        out_part = sp(sq, sk, sv, kattn::causal);
        g_part = sp.backward(sq, sk, sv, sd, kattn::causal);
    } else if (m.padded) {
        out_full = op(q, k, v, kl);
        g_full = op.backward(q, k, v, dout, kl);
        out_part = sp(sq, sk, sv, kl);
        g_part = sp.backward(sq, sk, sv, sd, kl);
    } else {
        out_full = op(q, k, v);
        g_full = op.backward(q, k, v, dout);
        out_part = sp(sq, sk, sv);
        g_part = sp.backward(sq, sk, sv, sd);
    }
}

/// Worst relative difference, over this rank's slice, of a result (out_a, ga: whole
/// sequence when `a_whole`, else the slice) from a result over the whole sequence (out_b, gb).
template <class TA, class GA, class TB, class GB>
double worst(const xt::xtensor<TA, 4>& out_a, const GA& ga, bool a_whole, const xt::xtensor<TB, 4>& out_b, const GB& gb,
             index_t off, index_t len) {
    const auto part = [&](const xt::xtensor<TA, 4>& x) { return a_whole ? slice_of(x, off, len) : x; };
    double w = rel(part(out_a), slice_of(out_b, off, len));
    w = std::max(w, rel(part(ga.dq), slice_of(gb.dq, off, len)));
    w = std::max(w, rel(part(ga.dk), slice_of(gb.dk, off, len)));
    w = std::max(w, rel(part(ga.dv), slice_of(gb.dv, off, len)));
    w = std::max(w, rel(ga.d_omega, gb.d_omega));
    if (gb.d_bias.size() > 0) w = std::max(w, rel(ga.d_bias, gb.d_bias));
    return w;
}

/// float: splitting adds no more than float rounding — the split result's error against
/// the exact (double) values is within f× the single-process float result's, f = 4 for
/// positive maps and 10 for signed ones (trig cancels in the denominator: its float error
/// is amplified row by row, so two summation orders differ more; measured ≤ 7×). Returns f.
template <class Map>
double check_as_accurate(double e_split, double e_single) {
    const double f = kattn::feature_map_traits<Map>::is_positive ? 4 : 10;
    CAPTURE(e_single);
    CAPTURE(e_split);
    CHECK(e_split <= f * e_single + 1e-6);
    return f;
}

/// The exact result: the reference backend in double on the whole sequence.
template <class Op, class T>
void exact_result(const Op& ex, const mode& m, const std::vector<index_t>& lengths, const xt::xtensor<T, 4>& qf,
                  const xt::xtensor<T, 4>& kf, const xt::xtensor<T, 4>& vf, const xt::xtensor<T, 4>& df,
                  xt::xtensor<double, 4>& out, typename Op::template gradients<4>& g) {
    const auto d = [](const xt::xtensor<T, 4>& x) { return xt::xtensor<double, 4>(xt::cast<double>(x)); };
    const kattn::key_lengths kl(lengths);
    const auto q = d(qf), k = d(kf), v = d(vf), dout = d(df);
    if (m.causal) {
        out = m.padded ? ex(q, k, v, kattn::causal, kl) : ex(q, k, v, kattn::causal);
        g = m.padded ? ex.backward(q, k, v, dout, kattn::causal, kl) : ex.backward(q, k, v, dout, kattn::causal);
    } else {
        out = m.padded ? ex(q, k, v, kl) : ex(q, k, v);
        g = m.padded ? ex.backward(q, k, v, dout, kl) : ex.backward(q, k, v, dout);
    }
}

template <class Case, class Backend, class T>
void check_case(double tol_double) {
    auto& comm = kattn_test::world();
    const auto cfg = test_config<Case>(17);
    using op_t = kattn::linear_attention<typename Case::map, typename Case::sampler, Backend, T>;
    const op_t op(cfg);
    kattn::dist::sequence_parallel sp(op, comm);
    const auto [lens, L, off] = split_geometry(comm.size(), comm.rank());
    const int me = comm.rank(), N = comm.size();
    const std::size_t B = 2, H = 2, Ls = std::size_t(L);
    const auto q = kt::randn<T, 4>({B, H, Ls, 6}, 101, 0.8), k = kt::randn<T, 4>({B, H, Ls, 6}, 102, 0.8),
               v = kt::randn<T, 4>({B, H, Ls, 5}, 103), dout = kt::randn<T, 4>({B, H, Ls, 5}, 104);
    // Batch entry 0 ends inside rank 0's slice: later slices hold only padding there.
    const std::vector<index_t> lengths{std::min<index_t>(L, 9), L - 4};
    // The exact values: the reference backend in double on the whole sequence.
    using exact_t =
        kattn::linear_attention<typename Case::map, typename Case::sampler, kattn::backends::reference, double>;
    typename exact_t::config_type ecfg = cfg;
    const exact_t exact(ecfg);
    for (const auto& m : modes) {
        CAPTURE(m.causal);
        CAPTURE(m.padded);
        CAPTURE(N);
        xt::xtensor<T, 4> of, opart;
        typename op_t::template gradients<4> gf, gp;
        run_both(op, sp, m, lengths, q, k, v, dout, off, lens[std::size_t(me)], of, opart, gf, gp);
        CHECK(sp.slice().offset == off);
        CHECK(sp.slice().length == L);
        const index_t len = lens[std::size_t(me)];
        const double split = worst(opart, gp, false, of, gf, off, len);
        if (N == 1) {
            CHECK(split == 0.0);  // one rank: bitwise the single-process operator
        } else if constexpr (std::is_same_v<T, double>) {
            CHECK(split <= tol_double);
        } else {
            // float: as accurate as the single process (check_as_accurate)
            xt::xtensor<double, 4> oe;
            typename exact_t::template gradients<4> ge;
            exact_result(exact, m, lengths, q, k, v, dout, oe, ge);
            const double e_single = worst(of, gf, true, oe, ge, off, len);
            const double f = check_as_accurate<typename Case::map>(worst(opart, gp, false, oe, ge, off, len), e_single);
            CHECK(split <= 2 * f * e_single + 1e-6);
        }
    }
}

}  // namespace

TEST_CASE_TEMPLATE_DEFINE("sequence_parallel equals the single-process operator (simd, every map)", Case,
                          kt_dist_maps) {
    if constexpr (Case::operator_enabled) {
        check_case<Case, kattn::backends::simd, double>(1e-9);
        check_case<Case, kattn::backends::simd, float>(0);
    }
}
TEST_CASE_TEMPLATE_APPLY(kt_dist_maps, kt::cases::all_cases);

TEST_CASE("sequence_parallel equals the single-process operator (reference backend)") {
    check_case<kt::cases::favor, kattn::backends::reference, double>(1e-11);
    check_case<kt::cases::trig, kattn::backends::reference, double>(1e-9);
    check_case<kt::cases::favor, kattn::backends::reference, float>(0);
}

// ---- packed documents (dist::packed_sequences) -------------------------------------------

namespace {

/// Document boundaries over a sequence of L tokens: short and long documents, one boundary
/// on the first split (23), one document crossing several splits, a one-token document.
std::vector<index_t> packed_boundaries(index_t L) {
    std::vector<index_t> inner{5, 9, 23, 30, L * 11 / 20, L * 11 / 20 + 1, L * 4 / 5}, cu{0};
    std::sort(inner.begin(), inner.end());
    for (const index_t c : inner)
        if (c > cu.back() && c < L) cu.push_back(c);
    cu.push_back(L);
    return cu;
}

/// The single-process operator on each document alone, written into whole-sequence tensors.
template <class Op, class T>
void per_document(const Op& op, bool causal, const std::vector<index_t>& cu, const xt::xtensor<T, 4>& q,
                  const xt::xtensor<T, 4>& k, const xt::xtensor<T, 4>& v, const xt::xtensor<T, 4>& dout,
                  xt::xtensor<T, 4>& out, typename Op::template gradients<4>& g) {
    const std::size_t H = q.shape()[1], L = q.shape()[2], d = q.shape()[3], dv = v.shape()[3];
    out = xt::xtensor<T, 4>::from_shape({1, H, L, dv});
    g.dq = xt::xtensor<T, 4>::from_shape(q.shape());
    g.dk = xt::xtensor<T, 4>::from_shape(k.shape());
    g.dv = xt::xtensor<T, 4>::from_shape(v.shape());
    for (std::size_t i = 0; i + 1 < cu.size(); ++i) {
        const index_t b = cu[i], n = cu[i + 1] - cu[i];
        const auto sq = slice_of(q, b, n), sk = slice_of(k, b, n), sv = slice_of(v, b, n), sd = slice_of(dout, b, n);
        const auto o = causal ? op(sq, sk, sv, kattn::causal) : op(sq, sk, sv);
        const auto gd = causal ? op.backward(sq, sk, sv, sd, kattn::causal) : op.backward(sq, sk, sv, sd);
        const auto put = [&](const xt::xtensor<T, 4>& part, xt::xtensor<T, 4>& whole, std::size_t w) {
            for (std::size_t h = 0; h < H; ++h)
                std::copy_n(part.data() + h * std::size_t(n) * w, std::size_t(n) * w,
                            whole.data() + (h * L + std::size_t(b)) * w);
        };
        put(o, out, dv);
        put(gd.dq, g.dq, d);
        put(gd.dk, g.dk, d);
        put(gd.dv, g.dv, dv);
        if (i == 0) {
            g.d_omega = gd.d_omega;
            g.d_bias = gd.d_bias;
        } else {
            g.d_omega += gd.d_omega;
            g.d_bias += gd.d_bias;
        }
    }
}

template <class Case, class Backend, class T>
void check_packed(double tol_double) {
    auto& comm = kattn_test::world();
    const auto cfg = test_config<Case>(23);
    using op_t = kattn::linear_attention<typename Case::map, typename Case::sampler, Backend, T>;
    const op_t op(cfg);
    kattn::dist::sequence_parallel sp(op, comm);
    const auto [lens, L, off] = split_geometry(comm.size(), comm.rank());
    const int me = comm.rank(), N = comm.size();
    const index_t len = lens[std::size_t(me)];
    const std::size_t H = 2, Ls = std::size_t(L);
    const auto q = kt::randn<T, 4>({1, H, Ls, 6}, 201, 0.8), k = kt::randn<T, 4>({1, H, Ls, 6}, 202, 0.8),
               v = kt::randn<T, 4>({1, H, Ls, 5}, 203), dout = kt::randn<T, 4>({1, H, Ls, 5}, 204);
    const auto cu = packed_boundaries(L);
    const kattn::dist::packed_sequences docs{cu};
    const auto sq = slice_of(q, off, len), sk = slice_of(k, off, len), sv = slice_of(v, off, len),
               sd = slice_of(dout, off, len);
    using exact_t =
        kattn::linear_attention<typename Case::map, typename Case::sampler, kattn::backends::reference, double>;
    typename exact_t::config_type ecfg = cfg;
    const exact_t exact(ecfg);
    for (const bool causal : {false, true}) {
        CAPTURE(causal);
        CAPTURE(N);
        xt::xtensor<T, 4> of;
        typename op_t::template gradients<4> gf;
        per_document(op, causal, cu, q, k, v, dout, of, gf);
        const auto opart = causal ? sp(sq, sk, sv, kattn::causal, docs) : sp(sq, sk, sv, docs);
        const auto gp = causal ? sp.backward(sq, sk, sv, sd, kattn::causal, docs) : sp.backward(sq, sk, sv, sd, docs);
        const double split = worst(opart, gp, false, of, gf, off, len);
        if constexpr (std::is_same_v<T, double>) {
            CHECK(split <= tol_double);
        } else {
            const auto dbl = [](const xt::xtensor<T, 4>& x) { return xt::xtensor<double, 4>(xt::cast<double>(x)); };
            xt::xtensor<double, 4> oe;
            typename exact_t::template gradients<4> ge;
            per_document(exact, causal, cu, dbl(q), dbl(k), dbl(v), dbl(dout), oe, ge);
            check_as_accurate<typename Case::map>(worst(opart, gp, false, oe, ge, off, len),
                                                  worst(of, gf, true, oe, ge, off, len));
        }
    }
}

}  // namespace

TEST_CASE_TEMPLATE_DEFINE("sequence_parallel: packed documents equal the operator on each document (every map)", Case,
                          kt_dist_packed_maps) {
    if constexpr (Case::operator_enabled) {
        check_packed<Case, kattn::backends::simd, double>(1e-9);
        check_packed<Case, kattn::backends::simd, float>(0);
    }
}
TEST_CASE_TEMPLATE_APPLY(kt_dist_packed_maps, kt::cases::all_cases);

TEST_CASE("sequence_parallel: packed documents on the reference backend; bad boundaries fail on every rank") {
    check_packed<kt::cases::favor, kattn::backends::reference, double>(1e-11);
    auto& comm = kattn_test::world();
    const int N = comm.size(), me = comm.rank();
    kattn::attention_config<kattn::features::favor, kattn::samplers::orthogonal_gaussian> cfg;
    cfg.head_dim = 4;
    cfg.value_dim = 3;
    cfg.num_features = 8;
    kattn::dist::sequence_parallel sp(kattn::linear_attention<kattn::features::favor>(cfg), comm);
    const std::size_t L = 10;
    const auto q = kt::randn<float, 4>({1, 2, L, 4}, 1), v = kt::randn<float, 4>({1, 2, L, 3}, 3);
    const index_t total = index_t(L) * N;
    const std::vector<index_t> good{0, 3, total}, short_end{0, 3, total - 1}, not_increasing{0, 3, 3, total};
    CHECK_NOTHROW((void)sp(q, q, v, kattn::causal, kattn::dist::packed_sequences{good}));
    CHECK_THROWS_WITH_AS((void)sp(q, q, v, kattn::dist::packed_sequences{short_end}),
                         doctest::Contains("the packed length"), kattn::error);
    CHECK_THROWS_WITH_AS((void)sp(q, q, v, kattn::dist::packed_sequences{not_increasing}),
                         doctest::Contains("strictly increasing"), kattn::error);
    // Another list on the last rank: every rank refuses (with N > 1).
    const std::vector<index_t> other{0, 4, total};
    bool thrown = false;
    try {
        (void)sp(q, q, v, kattn::dist::packed_sequences{me == N - 1 ? other : good});
    } catch (const kattn::error&) {
        thrown = true;
    }
    CHECK(thrown == (N > 1));
    // Packed documents need batch 1.
    const auto q2 = kt::randn<float, 4>({2, 2, L, 4}, 5), v2 = kt::randn<float, 4>({2, 2, L, 3}, 6);
    CHECK_THROWS_WITH_AS((void)sp(q2, q2, v2, kattn::dist::packed_sequences{good}), doctest::Contains("batch 1"),
                         kattn::error);
}
