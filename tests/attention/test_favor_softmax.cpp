// favor attention approximates exact softmax attention, and its error shrinks as m grows.
#include "../support.hpp"

using namespace kattn;

namespace {
template <class Sampler>
double favor_error(const xt::xtensor<double, 4>& q, const xt::xtensor<double, 4>& k, const xt::xtensor<double, 4>& v,
                   const xt::xtensor<double, 4>& exact, index_t m, bool causal, std::uint64_t seed) {
    const linear_attention<features::favor, Sampler, backends::simd, double> attn(
        {.head_dim = 16, .value_dim = 8, .num_features = m, .seed = seed});
    const auto out = causal ? attn(q, k, v, kattn::causal) : attn(q, k, v);
    return std::sqrt(xt::sum(xt::square(out - exact))() / xt::sum(xt::square(exact))());
}
}  // namespace

TEST_CASE_TEMPLATE("favor attention converges to softmax attention as m grows" * doctest::test_suite("scale"), Sampler,
                   samplers::gaussian, samplers::orthogonal_gaussian) {
    const auto q = kt::randn<double, 4>({1, 2, 128, 16}, 21, 0.5);
    const auto k = kt::randn<double, 4>({1, 2, 128, 16}, 22, 0.5);
    const auto v = kt::randn<double, 4>({1, 2, 128, 8}, 23);
    for (bool causal : {false, true}) {
        const softmax_attention<double> sm;
        const auto exact = causal ? sm(q, k, v, kattn::causal) : sm(q, k, v);
        // mean relative error over seeds at m and 16 m: Monte-Carlo error ∝ m^{-1/2} → ratio ≈ 4
        double e_small = 0, e_large = 0;
        const int seeds = 6;
        for (int s = 0; s < seeds; ++s) {
            e_small += favor_error<Sampler>(q, k, v, exact, 64, causal, 100 + s) / seeds;
            e_large += favor_error<Sampler>(q, k, v, exact, 1024, causal, 200 + s) / seeds;
        }
        INFO("causal=", causal, " error(m=64)=", e_small, " error(m=1024)=", e_large);
        CHECK(e_large < 0.1);
        CHECK(e_small / e_large > 2.5);
        CHECK(e_small / e_large < 6.5);
    }
}
