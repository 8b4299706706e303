// linear_attention's trailing options (attention/detail/call_options.hpp) and the
// caller-owned results (forward_into, backward_into). The options are a pack: any order
// must give the bits of the canonical order, and an invalid pack must not name a call. The
// _into forms must give the bits of the returning forms, keep the caller's memory, and
// reject a result of the wrong shape or one that overlaps an input.
#include <concepts>
#include <vector>

#include "../error_text.hpp"
#include "../support.hpp"

namespace {

using namespace kattn;
using op_t = linear_attention<features::favor>;
using T4 = xt::xtensor<float, 4>;
using B4 = xt::xtensor<bf16, 4>;
using saved_t = op_t::saved_state;

op_t make_op() { return op_t(attention_config{.head_dim = 8, .value_dim = 5, .num_features = 16, .seed = 3}); }

template <class... Opts>
constexpr bool forward_takes = std::invocable<const op_t&, const T4&, const T4&, const T4&, Opts...>;
template <class... Opts>
constexpr bool backward_takes = requires(const op_t& a, const T4& x, Opts&&... o) {
    a.backward(x, x, x, x, std::forward<Opts>(o)...);
};
template <class... Opts>
constexpr bool bf16_forward_takes = std::invocable<const op_t&, const B4&, const B4&, const B4&, Opts...>;
template <class... Opts>
constexpr bool bf16_backward_takes = requires(const op_t& a, const B4& x, Opts&&... o) {
    a.backward(x, x, x, x, std::forward<Opts>(o)...);
};

// Every form the docs show, in the documented order and in others.
static_assert(forward_takes<> && forward_takes<causal_t> && forward_takes<key_lengths>);
static_assert(forward_takes<causal_t, key_lengths, saved_t&> && forward_takes<saved_t&, key_lengths, causal_t>);
static_assert(forward_takes<packed_sequences, causal_t, saved_t&> && forward_takes<const std::vector<index_t>&>);
static_assert(backward_takes<causal_t, key_lengths, const saved_t&> && backward_takes<saved_t&, causal_t>);
static_assert(backward_takes<saved_t>);  // a temporary binds to the const reference, as before
// Invalid packs name no call.
static_assert(!forward_takes<causal_t, causal_t>);
static_assert(!forward_takes<key_lengths, key_lengths>);
static_assert(!forward_takes<key_lengths, packed_sequences>);
static_assert(!forward_takes<saved_t&, saved_t&>);
static_assert(!forward_takes<const saved_t&>);  // a forward fills the state
static_assert(!forward_takes<saved_t>);         // … of the caller, not of a temporary
static_assert(!forward_takes<
              linear_attention<features::favor, samplers::orthogonal_gaussian, backends::simd, double>::saved_state&>);
static_assert(!forward_takes<int> && !forward_takes<float> && !forward_takes<const char*>);
static_assert(!backward_takes<causal_t, causal_t> && !backward_takes<packed_sequences, key_lengths>);
// bf16 tensors take what they took before: causal and key lengths forward, causal backward.
static_assert(bf16_forward_takes<causal_t, key_lengths> && bf16_forward_takes<key_lengths, causal_t>);
static_assert(!bf16_forward_takes<saved_t&> && !bf16_forward_takes<packed_sequences>);
static_assert(bf16_backward_takes<causal_t> && !bf16_backward_takes<key_lengths>);

using kt::check_same_gradients;

}  // namespace

TEST_CASE("call options: any order gives the canonical order's bits") {
    const auto a = make_op();
    const kt::small_problem<float> pr(2, 3, 70, true);
    const key_lengths kl(pr.lens);
    saved_t s1, s2;
    const auto o1 = a(pr.q, pr.k, pr.v, kattn::causal, kl, s1);
    const auto o2 = a(pr.q, pr.k, pr.v, s2, kl, kattn::causal);
    CHECK(o1 == o2);
    CHECK(a(pr.q, pr.k, pr.v, pr.lens, kattn::causal) == o1);  // a vector converts to key_lengths
    const auto g1 = a.backward(pr.q, pr.k, pr.v, pr.G, kattn::causal, kl, s1);
    check_same_gradients(a.backward(pr.q, pr.k, pr.v, pr.G, s2, kattn::causal, kl), g1);
    check_same_gradients(a.backward(pr.q, pr.k, pr.v, pr.G, kl, kattn::causal), g1);
    // The options reach the backend: dropping one changes the result.
    CHECK_FALSE(a(pr.q, pr.k, pr.v, kl) == o1);
    CHECK_FALSE(a(pr.q, pr.k, pr.v, kattn::causal) == o1);
    // A state filled with other options is rejected, whatever the order.
    CHECK(kt::contains(kt::error_text([&] { a.backward(pr.q, pr.k, pr.v, pr.G, s1, kl); }), "'saved'"));
}

TEST_CASE("call options: packed documents in any order") {
    const auto a = make_op();
    const kt::small_problem<float> pr(1, 2, 90, false);
    const std::vector<index_t> cu{0, 17, 64, 90};
    const packed_sequences docs{cu};
    saved_t s;
    const auto o1 = a(pr.q, pr.k, pr.v, kattn::causal, docs, s);
    CHECK(a(pr.q, pr.k, pr.v, docs, kattn::causal) == o1);
    check_same_gradients(a.backward(pr.q, pr.k, pr.v, pr.G, s, docs, kattn::causal),
                         a.backward(pr.q, pr.k, pr.v, pr.G, kattn::causal, docs));
}

TEST_CASE("forward_into: the returning form's bits in the caller's tensor") {
    const auto a = make_op();
    for (bool causal : {false, true}) {
        INFO("causal=", causal);
        const kt::small_problem<float> pr(2, 2, 130, true);
        const key_lengths kl(pr.lens);
        T4 out = xt::xtensor<float, 4>::from_shape({2, 2, 130, 5});
        const float* mem = out.data();
        saved_t s;
        if (causal)
            a.forward_into(out, pr.q, pr.k, pr.v, kattn::causal, kl, s);
        else
            a.forward_into(out, pr.q, pr.k, pr.v, kl, s);
        CHECK(out.data() == mem);
        CHECK(out == (causal ? a(pr.q, pr.k, pr.v, kattn::causal, kl) : a(pr.q, pr.k, pr.v, kl)));
        // The state it filled serves the backward like a returning forward's.
        const auto g = causal ? a.backward(pr.q, pr.k, pr.v, pr.G, kattn::causal, kl, s)
                              : a.backward(pr.q, pr.k, pr.v, pr.G, kl, s);
        check_same_gradients(
            g, causal ? a.backward(pr.q, pr.k, pr.v, pr.G, kattn::causal, kl) : a.backward(pr.q, pr.k, pr.v, pr.G, kl));
    }
    // 2-D inputs, a reused tensor: every call overwrites all of it.
    const auto x = kt::randn<float, 2>({40, 8}, 5), y = kt::randn<float, 2>({40, 5}, 6);
    xt::xtensor<float, 2> out = xt::xtensor<float, 2>::from_shape({40, 5});
    out.fill(std::numeric_limits<float>::quiet_NaN());
    a.forward_into(out, x, x, y);
    CHECK(out == a(x, x, y));
}

TEST_CASE("forward_into: a result of the wrong shape or in an input's memory is an error") {
    const auto a = make_op();
    const kt::small_problem<float> pr(1, 2, 20, false);
    T4 wrong = xt::xtensor<float, 4>::from_shape({1, 2, 20, 8});
    const auto msg = kt::error_text([&] { a.forward_into(wrong, pr.q, pr.k, pr.v); });
    CHECK(kt::contains(msg, "'out'"));
    CHECK(kt::contains(msg, "[1, 2, 20, 5]"));
    // q, k, v of the same shape as the output (d = d_v): the output may not be one of them.
    const auto b = op_t(attention_config{.head_dim = 5, .value_dim = 5, .num_features = 16, .seed = 3});
    T4 q = kt::randn<float, 4>({1, 2, 20, 5}, 1), k = kt::randn<float, 4>({1, 2, 20, 5}, 2),
       v = kt::randn<float, 4>({1, 2, 20, 5}, 3);
    const T4 q0 = q;
    CHECK(kt::contains(kt::error_text([&] { b.forward_into(q, q, k, v); }), "overlaps input 1"));
    CHECK(kt::contains(kt::error_text([&] { b.forward_into(v, q, k, v, kattn::causal); }), "overlaps input 3"));
    CHECK(q == q0);  // rejected before anything is written
}

TEST_CASE("backward_into: the returning form's bits, the caller's memory kept") {
    const auto a = make_op();
    const kt::small_problem<float> pr(2, 3, 75, true);
    const key_lengths kl(pr.lens);
    op_t::gradients<4> g;  // empty: the first call shapes it
    a.backward_into(g, pr.q, pr.k, pr.v, pr.G, kattn::causal, kl);
    check_same_gradients(g, a.backward(pr.q, pr.k, pr.v, pr.G, kattn::causal, kl));
    const float *dq = g.dq.data(), *dk = g.dk.data(), *dv = g.dv.data(), *dom = g.d_omega.data();
    saved_t s;
    a(pr.q, pr.k, pr.v, kl, s);
    a.backward_into(g, pr.q, pr.k, pr.v, pr.G, s, kl);  // a second step: same shapes, same memory
    CHECK(g.dq.data() == dq);
    CHECK(g.dk.data() == dk);
    CHECK(g.dv.data() == dv);
    CHECK(g.d_omega.data() == dom);
    check_same_gradients(g, a.backward(pr.q, pr.k, pr.v, pr.G, kl));
    // Other shapes: resized, then the same bits again.
    const kt::small_problem<float> other(1, 1, 33, false);
    a.backward_into(g, other.q, other.k, other.v, other.G);
    check_same_gradients(g, a.backward(other.q, other.k, other.v, other.G));
}

TEST_CASE("backward_into: gradients in an input's memory are an error") {
    const auto a = make_op();
    const kt::small_problem<float> pr(1, 2, 20, false);
    op_t::gradients<4> g;
    a.backward_into(g, pr.q, pr.k, pr.v, pr.G);
    const auto dq0 = g.dq;
    // g.dq passed as q: the backward would write ∂q over the queries it reads.
    const auto msg = kt::error_text([&] { a.backward_into(g, g.dq, pr.k, pr.v, pr.G); });
    CHECK(kt::contains(msg, "'g.dq'"));
    CHECK(kt::contains(msg, "overlaps input 1"));
    CHECK(g.dq == dq0);
}

TEST_CASE("call options: softmax_attention takes causal and key lengths in any order") {
    using sm_t = softmax_attention<float>;
    static_assert(std::invocable<const sm_t&, const T4&, const T4&, const T4&, key_lengths, causal_t>);
    static_assert(!std::invocable<const sm_t&, const T4&, const T4&, const T4&, causal_t, causal_t>);
    static_assert(!std::invocable<const sm_t&, const T4&, const T4&, const T4&, saved_t&>);
    static_assert(!std::invocable<const sm_t&, const T4&, const T4&, const T4&, packed_sequences>);
    const sm_t sm;
    const kt::small_problem<float> pr(2, 2, 40, true);
    const key_lengths kl(pr.lens);
    const auto o = sm(pr.q, pr.k, pr.v, kattn::causal, kl);
    CHECK(sm(pr.q, pr.k, pr.v, kl, kattn::causal) == o);
    CHECK_FALSE(sm(pr.q, pr.k, pr.v, kl) == o);
    const auto g1 = sm.backward(pr.q, pr.k, pr.v, pr.G, kattn::causal, kl);
    const auto g2 = sm.backward(pr.q, pr.k, pr.v, pr.G, kl, kattn::causal);
    CHECK(g1.dq == g2.dq);
    CHECK(g1.dk == g2.dk);
    CHECK(g1.dv == g2.dv);
}
