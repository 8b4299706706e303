// saved_state: a forward call's state carried to backward(). The gradients must be the
// bits backward() gives without it (every map, both precisions, masks, the segmented path,
// thread counts), and a state used with other inputs, options or parameters is an error.
#include <omp.h>

#include "../error_text.hpp"
#include "../support.hpp"

namespace {

using namespace kattn;

template <class Map, class T, class Backend = backends::simd>
using attn = linear_attention<Map, typename Map::default_sampler, Backend, T>;

static_assert(execution_backend_traits<backends::simd>::saves_forward_state);
static_assert(!execution_backend_traits<backends::reference>::saves_forward_state);

template <class Map, class T, class Backend = backends::simd>
attn<Map, T, Backend> make_op() {
    attention_config cfg{
        .head_dim = 8, .value_dim = 5, .num_features = 16, .seed = 3, .sigma = Map::is_positive ? 1.0 : 3.0};
    return attn<Map, T, Backend>(cfg);
}

/// Forward with a saved state, backward with and without it: same output, same gradients.
template <class Map, class T, class Backend = backends::simd>
void check_same_bits(index_t B, index_t H, index_t L, bool causal, bool padded) {
    INFO(Map::name, " B=", B, " H=", H, " L=", L, " causal=", causal, " padded=", padded,
         " T=", sizeof(T) == 4 ? "float" : "double", " backend=", Backend::name);
    const auto a = make_op<Map, T, Backend>();
    const kt::small_problem<T> pr(B, H, L, padded);
    const auto &q = pr.q, &k = pr.k, &v = pr.v, &G = pr.G;
    const key_lengths kl(pr.lens);
    typename attn<Map, T, Backend>::saved_state s;
    CHECK(s.empty());
    const auto out = causal ? (padded ? a(q, k, v, kattn::causal, kl, s) : a(q, k, v, kattn::causal, s))
                            : (padded ? a(q, k, v, kl, s) : a(q, k, v, s));
    CHECK_FALSE(s.empty());
    const auto plain = causal ? a(q, k, v, kattn::causal, kl) : a(q, k, v, kl);
    CHECK(out == plain);
    const auto g0 = causal ? a.backward(q, k, v, G, kattn::causal, kl) : a.backward(q, k, v, G, kl);
    for (int repeat = 0; repeat < 2; ++repeat) {  // the state is read, not consumed
        const auto g1 =
            causal ? (padded ? a.backward(q, k, v, G, kattn::causal, kl, s) : a.backward(q, k, v, G, kattn::causal, s))
                   : (padded ? a.backward(q, k, v, G, kl, s) : a.backward(q, k, v, G, s));
        kt::check_same_gradients(g1, g0);
    }
}

}  // namespace

TEST_CASE_TEMPLATE_DEFINE("saved state: backward gives the same bits as without it", Map, kt_saved_every_map) {
    // L = 2100 on one head takes the segmented path (2 segments: the causal starting
    // states are kept); 7 and 150 are partial tiles with several heads.
    for (auto [B, H, L] : {std::tuple<index_t, index_t, index_t>{2, 3, 150}, {1, 2, 7}, {1, 1, 2100}})
        for (bool causal : {false, true})
            for (bool padded : {false, true}) {
                check_same_bits<Map, float>(B, H, L, causal, padded);
                check_same_bits<Map, double>(B, H, L, causal, padded);
            }
}
TEST_CASE_TEMPLATE_APPLY(kt_saved_every_map, kattn::type_list_apply_t<std::tuple, kattn::features::all>);

TEST_CASE("saved state: a backend that keeps nothing recomputes, with the same checks") {
    check_same_bits<features::favor, double, backends::reference>(2, 2, 70, false, true);
    check_same_bits<features::favor, double, backends::reference>(2, 2, 70, true, false);
    const auto a = make_op<features::favor, double, backends::reference>();
    const auto x = kt::randn<double, 4>({1, 2, 30, 8}, 5), v = kt::randn<double, 4>({1, 2, 30, 5}, 6);
    decltype(a)::saved_state s;
    CHECK(kt::contains(kt::error_text([&] { a.backward(x, x, v, v, s); }), "empty state"));
    (void)a(x, x, v, s);
    CHECK(kt::contains(kt::error_text([&] { a.backward(x, x, v, v, kattn::causal, s); }), "causal"));
}

TEST_CASE("saved state: forward and backward on different thread counts") {
    const int threads = omp_get_max_threads();
    const auto a = make_op<features::favor, float>();
    const auto q = kt::randn<float, 4>({1, 1, 3000, 8}, 1, 0.5), k = kt::randn<float, 4>({1, 1, 3000, 8}, 2, 0.5);
    const auto v = kt::randn<float, 4>({1, 1, 3000, 5}, 3), G = kt::randn<float, 4>({1, 1, 3000, 5}, 4);
    for (bool causal : {false, true}) {
        INFO("causal=", causal);
        decltype(a)::saved_state s;
        omp_set_num_threads(1);
        (void)(causal ? a(q, k, v, kattn::causal, s) : a(q, k, v, s));
        omp_set_num_threads(2);
        const auto g1 = causal ? a.backward(q, k, v, G, kattn::causal, s) : a.backward(q, k, v, G, s);
        omp_set_num_threads(1);
        const auto g0 = causal ? a.backward(q, k, v, G, kattn::causal) : a.backward(q, k, v, G);
        CHECK(g1.dq == g0.dq);
        CHECK(g1.dk == g0.dk);
        CHECK(g1.dv == g0.dv);
        CHECK(g1.d_omega == g0.d_omega);
    }
    omp_set_num_threads(threads);
}

TEST_CASE("saved state: used with other inputs, options or parameters it is an error naming 'saved'") {
    auto a = make_op<features::favor, float>();
    using state_t = decltype(a)::saved_state;
    const auto q = kt::randn<float, 4>({2, 2, 100, 8}, 1, 0.5), k = kt::randn<float, 4>({2, 2, 100, 8}, 2, 0.5);
    const auto v = kt::randn<float, 4>({2, 2, 100, 5}, 3), G = kt::randn<float, 4>({2, 2, 100, 5}, 4);
    const std::vector<index_t> lens{100, 60}, other_lens{100, 61};
    const key_lengths kl(lens), kl2(other_lens);

    state_t empty;
    const auto e0 = kt::error_text([&] { a.backward(q, k, v, G, empty); });
    CHECK(kt::contains(e0, "'saved'"));
    CHECK(kt::contains(e0, "empty state"));

    for (bool causal : {false, true}) {
        INFO("causal=", causal);
        state_t s;
        (void)(causal ? a(q, k, v, kattn::causal, kl, s) : a(q, k, v, kl, s));
        auto bwd = [&](const auto& qq, const auto& kk, const auto& vv, const auto& GG) {
            return causal ? a.backward(qq, kk, vv, GG, kattn::causal, kl, s) : a.backward(qq, kk, vv, GG, kl, s);
        };
        // One key or one value changed since the forward: the fingerprint differs.
        auto k2 = k;
        k2(1, 1, 17, 3) = std::nextafter(k2(1, 1, 17, 3), 10.0f);
        CHECK(kt::contains(kt::error_text([&] { bwd(q, k2, v, G); }), "k or v changed"));
        auto v2 = v;
        v2(0, 0, 99, 4) += 1.0f;
        CHECK(kt::contains(kt::error_text([&] { bwd(q, k, v2, G); }), "k or v changed"));
        // Padded keys (batch entry 1 has 60 valid) take no part: changing them is no error,
        // and the gradients are those of the changed inputs.
        auto k3 = k;
        auto v3 = v;
        k3(1, 0, 80, 2) += 5.0f;
        v3(1, 1, 99, 0) -= 5.0f;
        const auto gs = bwd(q, k3, v3, G);
        const auto gp = causal ? a.backward(q, k3, v3, G, kattn::causal, kl) : a.backward(q, k3, v3, G, kl);
        CHECK(gs.dk == gp.dk);
        CHECK(gs.dq == gp.dq);
        // q is not part of the state: a changed q gives the changed q's gradients.
        auto q2 = q;
        q2(0, 1, 3, 3) += 1.0f;
        const auto gq = bwd(q2, k, v, G);
        const auto gqp = causal ? a.backward(q2, k, v, G, kattn::causal, kl) : a.backward(q2, k, v, G, kl);
        CHECK(gq.dq == gqp.dq);
        // Other shapes, mode or key lengths.
        const auto qs = kt::randn<float, 4>({2, 2, 101, 8}, 7), vs = kt::randn<float, 4>({2, 2, 101, 5}, 8);
        CHECK(kt::contains(kt::error_text([&] { bwd(qs, qs, vs, vs); }), "shaped like"));
        CHECK(kt::contains(kt::error_text([&] { a.backward(q, k, v, G, kl, causal ? s : state_t{}); }),
                           causal ? "non-causal with key lengths forward call" : "empty state"));
        CHECK(kt::contains(
            kt::error_text([&] { causal ? a.backward(q, k, v, G, kattn::causal, s) : a.backward(q, k, v, G, s); }),
            "with key lengths call"));
        CHECK(kt::contains(kt::error_text([&] {
                               causal ? a.backward(q, k, v, G, kattn::causal, kl2, s) : a.backward(q, k, v, G, kl2, s);
                           }),
                           "other key lengths"));
    }
    // Ω replaced after the forward: the state belongs to the old parameters.
    state_t s;
    (void)a(q, k, v, s);
    auto omega = a.omega();
    omega(0, 0) += 0.5f;
    a.set_omega(omega);
    CHECK(kt::contains(kt::error_text([&] { a.backward(q, k, v, G, s); }), "other parameters"));
    // A new forward refills the state; clear() empties it.
    (void)a(q, k, v, s);
    CHECK_NOTHROW(a.backward(q, k, v, G, s));
    CHECK(s.bytes() > 0);
    s.clear();
    CHECK(s.empty());
}

TEST_CASE("forward_state: a state of another problem is rejected by the backend itself") {
    // Backends check what they are handed, so a direct caller of the contract gets an
    // error, not a read past a buffer.
    const auto a = make_op<features::favor, double>();
    const auto q = kt::randn<double, 4>({1, 4, 20, 8}, 1, 0.5), v = kt::randn<double, 4>({1, 4, 20, 5}, 3);
    decltype(a)::saved_state s;
    (void)a(q, q, v, s);
    backends::attention_problem<features::favor, double> pb;
    pb.spec = {a.omega().data(), nullptr, 8, 16, {}};
    pb.q = pb.k = q.data();
    pb.v = v.data();
    pb.problems = 2;  // the state has 4
    pb.q_len = pb.k_len = 20;
    pb.dv = 5;
    std::vector<double> dq(q.size()), dk(q.size()), dv(v.size()), dout(v.size(), 1.0);
    backends::attention_gradients<double> g{dout.data(), dq.data(), dk.data(), dv.data(), nullptr, nullptr};
    backends::forward_state<double> fs;
    const auto e = kt::error_text([&] { backends::simd::backward<features::favor>(pb, g, fs); });
    CHECK(kt::contains(e, "'saved'"));
    CHECK(kt::contains(e, "an empty state"));
    double out_buf[1000];
    pb.problems = 4;
    backends::simd::forward<features::favor>(pb, out_buf, fs);
    CHECK(fs.kept);
    CHECK(fs.count == 4);
    pb.problems = 2;
    CHECK(kt::contains(kt::error_text([&] { backends::simd::backward<features::favor>(pb, g, fs); }), "4 key states"));
}
