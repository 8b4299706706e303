// Packed documents (kattn::packed_sequences, cu_seqlens): the simd backend's packed passes
// against the reference backend (which runs one document per call through the operator),
// against the definition (each document as its own call), no attention across a
// boundary, thread-count determinism, saved states and bad offsets.
#include <omp.h>

#include <xtensor/xview.hpp>

#include "../error_text.hpp"
#include "../support.hpp"

namespace {

using namespace kattn;

template <class Map, class T, class Backend>
using attn = linear_attention<Map, typename Map::default_sampler, Backend, T>;

static_assert(execution_backend_traits<backends::simd>::packs_sequences);
static_assert(!execution_backend_traits<backends::reference>::packs_sequences);

template <class Map, class T, class Backend>
attn<Map, T, Backend> make_op() {
    attention_config cfg{
        .head_dim = 8, .value_dim = 5, .num_features = 16, .seed = 3, .sigma = Map::is_positive ? 1.0 : 3.0};
    return attn<Map, T, Backend>(cfg);
}

/// Documents of 1, 63, 1, 65 and 70 tokens (partial, exact-minus-one and multi-tile).
const std::vector<index_t> docs_mixed{0, 1, 64, 65, 130, 200};

struct packed_result {
    xt::xtensor<double, 4> out, dq, dk, dv;
    xt::xtensor<double, 2> d_omega;
    xt::xtensor<double, 1> d_bias;
};

template <class Map, class T, class Backend>
packed_result run_packed(const std::vector<index_t>& cu, index_t H, bool causal) {
    const auto a = make_op<Map, T, Backend>();
    const kt::small_problem<T> pr(1, H, cu.back(), false);
    const packed_sequences docs{cu};
    const auto out = causal ? a(pr.q, pr.k, pr.v, kattn::causal, docs) : a(pr.q, pr.k, pr.v, docs);
    const auto g =
        causal ? a.backward(pr.q, pr.k, pr.v, pr.G, kattn::causal, docs) : a.backward(pr.q, pr.k, pr.v, pr.G, docs);
    return {xt::cast<double>(out),  xt::cast<double>(g.dq),      xt::cast<double>(g.dk),
            xt::cast<double>(g.dv), xt::cast<double>(g.d_omega), xt::cast<double>(g.d_bias)};
}

}  // namespace

TEST_CASE_TEMPLATE_DEFINE("packed documents: simd equals the reference backend", Map, kt_packed_every_map) {
    for (bool causal : {false, true})
        for (const auto& cu : {docs_mixed, std::vector<index_t>{0, 150}}) {
            INFO(Map::name, " causal=", causal, " documents=", cu.size() - 1);
            const auto rd = run_packed<Map, double, backends::reference>(cu, 3, causal);
            const auto sd = run_packed<Map, double, backends::simd>(cu, 3, causal);
            const auto sf = run_packed<Map, float, backends::simd>(cu, 3, causal);
            const double tol_f = Map::is_positive ? 1e-4 : 5e-4;
            for (const auto& [s, tol] : {std::pair{&sd, 1e-10}, std::pair{&sf, tol_f}}) {
                CHECK(kt::rel_err(s->out, rd.out) < tol);
                CHECK(kt::rel_err(s->dq, rd.dq) < tol);
                CHECK(kt::rel_err(s->dk, rd.dk) < tol);
                CHECK(kt::rel_err(s->dv, rd.dv) < tol);
                CHECK(kt::rel_err(s->d_omega, rd.d_omega) < tol);
                if (rd.d_bias.size()) CHECK(kt::rel_err(s->d_bias, rd.d_bias) < tol);
            }
        }
}
TEST_CASE_TEMPLATE_APPLY(kt_packed_every_map, kattn::type_list_apply_t<std::tuple, kattn::features::all>);

TEST_CASE("packed documents: each document is its own sequence, nothing crosses a boundary") {
    const auto a = make_op<features::favor, double, backends::simd>();
    const index_t H = 2, L = docs_mixed.back();
    const kt::small_problem<double> pr(1, H, L, false);
    const packed_sequences docs{docs_mixed};
    for (bool causal : {false, true}) {
        INFO("causal=", causal);
        const auto out = causal ? a(pr.q, pr.k, pr.v, kattn::causal, docs) : a(pr.q, pr.k, pr.v, docs);
        const auto g =
            causal ? a.backward(pr.q, pr.k, pr.v, pr.G, kattn::causal, docs) : a.backward(pr.q, pr.k, pr.v, pr.G, docs);
        xt::xtensor<double, 2> d_omega = xt::zeros<double>(a.omega().shape());
        for (std::size_t i = 0; i + 1 < docs_mixed.size(); ++i) {
            const std::size_t b = std::size_t(docs_mixed[i]), e = std::size_t(docs_mixed[i + 1]);
            const auto rows = [&](const xt::xtensor<double, 4>& x) {
                xt::xtensor<double, 4> r = xt::view(x, xt::all(), xt::all(), xt::range(b, e), xt::all());
                return r;
            };
            const auto q = rows(pr.q), k = rows(pr.k), v = rows(pr.v), G = rows(pr.G);
            const auto o1 = causal ? a(q, k, v, kattn::causal) : a(q, k, v);
            const auto g1 = causal ? a.backward(q, k, v, G, kattn::causal) : a.backward(q, k, v, G);
            // The same kernels on the same rows: the forward is the same bits.
            CHECK(rows(out) == o1);
            CHECK(kt::rel_err(rows(g.dq), g1.dq) < 1e-12);
            CHECK(kt::rel_err(rows(g.dk), g1.dk) < 1e-12);
            CHECK(kt::rel_err(rows(g.dv), g1.dv) < 1e-12);
            d_omega += g1.d_omega;
        }
        CHECK(kt::rel_err(g.d_omega, d_omega) < 1e-12);
        // A key changed in document 3 changes nothing outside it.
        auto k2 = pr.k;
        k2(0, 1, 100, 2) += 1.0;
        const auto out2 = causal ? a(pr.q, k2, pr.v, kattn::causal, docs) : a(pr.q, k2, pr.v, docs);
        for (std::size_t t = 0; t < std::size_t(L); ++t)
            for (std::size_t c = 0; c < 5; ++c) {
                const bool inside = t >= 65 && t < 130 && (!causal || t >= 100);
                if (!inside) REQUIRE(out2(0, 1, t, c) == out(0, 1, t, c));
            }
        CHECK(out2(0, 1, 100, 0) != out(0, 1, 100, 0));
    }
}

TEST_CASE("packed documents: rank-2 inputs, one document, thread counts") {
    const auto a = make_op<features::trig, float, backends::simd>();
    const auto q = kt::randn<float, 2>({700, 8}, 1, 0.5), k = kt::randn<float, 2>({700, 8}, 2, 0.5);
    const auto v = kt::randn<float, 2>({700, 5}, 3), G = kt::randn<float, 2>({700, 5}, 4);
    const std::vector<index_t> one{0, 700}, many{0, 3, 90, 91, 300, 555, 700};
    // One document is the unpacked call.
    for (bool causal : {false, true}) {
        INFO("causal=", causal);
        const auto o = causal ? a(q, k, v, kattn::causal, packed_sequences{one}) : a(q, k, v, packed_sequences{one});
        CHECK(o == (causal ? a(q, k, v, kattn::causal) : a(q, k, v)));
        // The same bits on 1 and 2 threads (∂Ω summed in a fixed order).
        const int threads = omp_get_max_threads();
        const packed_sequences docs{many};
        omp_set_num_threads(1);
        const auto g1 = causal ? a.backward(q, k, v, G, kattn::causal, docs) : a.backward(q, k, v, G, docs);
        omp_set_num_threads(2);
        const auto g2 = causal ? a.backward(q, k, v, G, kattn::causal, docs) : a.backward(q, k, v, G, docs);
        omp_set_num_threads(threads);
        CHECK(g1.dq == g2.dq);
        CHECK(g1.dk == g2.dk);
        CHECK(g1.dv == g2.dv);
        CHECK(g1.d_omega == g2.d_omega);
        CHECK(g1.d_bias == g2.d_bias);
    }
}

TEST_CASE("packed documents: saved state, and bad offsets name cu_seqlens") {
    const auto a = make_op<features::favor, float, backends::simd>();
    using state_t = decltype(a)::saved_state;
    const kt::small_problem<float> pr(1, 2, 50, false);
    const auto &q = pr.q, &k = pr.k, &v = pr.v, &G = pr.G;
    const std::vector<index_t> cu{0, 20, 50}, other{0, 21, 50};
    const packed_sequences docs{cu};
    state_t s;
    const auto out = a(q, k, v, kattn::causal, docs, s);
    CHECK(out == a(q, k, v, kattn::causal, docs));
    const auto gs = a.backward(q, k, v, G, kattn::causal, docs, s);
    const auto g0 = a.backward(q, k, v, G, kattn::causal, docs);
    CHECK(gs.dq == g0.dq);
    CHECK(gs.d_omega == g0.d_omega);
    CHECK(kt::contains(kt::error_text([&] { a.backward(q, k, v, G, kattn::causal, packed_sequences{other}, s); }),
                       "other cu_seqlens"));
    CHECK(kt::contains(kt::error_text([&] { a.backward(q, k, v, G, kattn::causal, s); }),
                       "causal with packed documents call"));
    CHECK(kt::contains(kt::error_text([&] { a.backward(q, k, v, G, docs, s); }), "non-causal with packed documents"));
    // Non-causal: the forward keeps a key state per head and document; the backward's
    // gradients are the same bits, and a changed key is caught.
    state_t sn;
    CHECK(a(q, k, v, docs, sn) == a(q, k, v, docs));
    CHECK(sn.bytes() > 4 * (16 * 6) * sizeof(float));  // 2 heads x 2 documents
    const auto gn = a.backward(q, k, v, G, docs, sn), gp = a.backward(q, k, v, G, docs);
    CHECK(gn.dq == gp.dq);
    CHECK(gn.dk == gp.dk);
    CHECK(gn.dv == gp.dv);
    CHECK(gn.d_omega == gp.d_omega);
    auto k2 = k;
    k2(0, 1, 33, 2) += 0.25f;
    CHECK(kt::contains(kt::error_text([&] { a.backward(q, k2, v, G, docs, sn); }), "k or v changed"));
    // Over the cache budget the forward keeps nothing and the backward recomputes.
    auto cfg = a.config();
    cfg.backward_cache_bytes = 100;
    const attn<features::favor, float, backends::simd> small(cfg);
    state_t s0;
    (void)small(q, k, v, docs, s0);
    CHECK(s0.bytes() < 1000);
    CHECK(small.backward(q, k, v, G, docs, s0).dq == gp.dq);

    const auto bad = [&](std::vector<index_t> c, const char* what) {
        INFO("offsets: ", c.size());
        const auto e = kt::error_text([&] { (void)a(q, k, v, packed_sequences{c}); });
        CHECK(kt::contains(e, "packed_sequences.cu_seqlens"));
        CHECK(kt::contains(e, what));
    };
    bad({0, 20, 49}, "packed length 50");
    bad({1, 20, 50}, "first offset of 0");
    bad({0, 20, 20, 50}, "strictly increasing");
    bad({0}, "at least two offsets");
    bad({}, "at least two offsets");
    // Batch > 1, or q and k of different lengths: the packed layout is [1, heads, L, dim].
    const kt::small_problem<float> two(2, 2, 50, false);
    CHECK(kt::contains(kt::error_text([&] { (void)a(two.q, two.k, two.v, docs); }), "batch 1"));
    const auto k_short = kt::randn<float, 4>({1, 2, 40, 8}, 9), v_short = kt::randn<float, 4>({1, 2, 40, 5}, 9);
    CHECK(kt::contains(kt::error_text([&] { (void)a(q, k_short, v_short, docs); }), "as many queries as keys"));
}
