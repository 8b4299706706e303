// bench/bench_bf16.cpp — linear_attention's forward on bf16 tensors against the same forward on
// float tensors, with the ceilings of both measured in the same run.
//
// Ceilings (per thread count, register-only loops, no memory):
//   fma_peak     AVX-512 float FMA (bench/fma_peak.hpp), what the float forward is measured against
//   dpbf16_peak  VDPBF16PS (AVX512-BF16: 32 bf16 multiply-adds per instruction)
//   amx_peak     TDPBF16PS on AMX tiles (16·16·32 multiply-adds per instruction)
// Cases: B = 1, H = 8 heads, L tokens, non-causal forward, for each map × (d, m) × threads:
// the float forward on float tensors and the bf16 forward on the same values rounded to bf16
// (median of `repeats` after a warm-up), GFLOP/s counted as the float forward's products
// (4·L·d·P + 4·L·F·d_v per head), and the bf16 output's error: max |out − ref| / max |ref|
// against the double reference backend on the rounded inputs (and the float forward's, for
// scale).
//
//   bench_bf16 [--L 4096] [--d 64,128] [--m 256] [--dv 64] [--threads 1,2] [--repeats 9] [--json FILE]
//
// JSON: {cpu, date, amx, records: [{op: "fma_peak" | "dpbf16_peak" | "amx_peak", threads, gflops} |
//        {op: "forward", precision, map, L, d, m, dv, threads, seconds, gflops, peak_fraction,
//         speedup (bf16 only)} | {op: "error", map, d, m, bf16, float}]}.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

// GCC PR 105593 (false -Wuninitialized inside _mm512_reduce_add_ps): the push must precede
// the first inclusion of the intrinsic headers; popped at the end of the file.
#include <kattn/core/warnings_push.hpp>

#include <immintrin.h>
#include <omp.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <kattn/kattn.hpp>
#include <kattn/linalg/gemm_amx.hpp>

#include "fma_peak.hpp"
#include "procfs.hpp"
#include "timing.hpp"

namespace {

using namespace kattn;

struct options {
    index_t L = 4096;
    std::vector<index_t> d{64, 128}, m{256};
    index_t dv = 64;
    std::vector<int> threads{1, 2};
    int repeats = 9;
    std::string json;
};

constexpr int chains = 12;

[[gnu::target("avx512f,avx512bf16"), gnu::noinline]] float dpbf16_loop(long iters, float seed) {
    __m512 a[chains];
    for (int j = 0; j < chains; ++j) a[j] = _mm512_set1_ps(seed + 1e-3f * float(j));
    const __m512i b = _mm512_set1_epi16(0x3f7f), c = _mm512_set1_epi16(0x3400);  // ~0.996, ~1.2e-7
    for (long it = 0; it < iters; ++it) {
#pragma GCC unroll 12
        for (int j = 0; j < chains; ++j) a[j] = _mm512_dpbf16_ps(a[j], (__m512bh)b, (__m512bh)c);
    }
    __m512 s = a[0];
    for (int j = 1; j < chains; ++j) s = _mm512_add_ps(s, a[j]);
    return _mm512_reduce_add_ps(s);
}

[[gnu::target("amx-tile,amx-bf16"), gnu::noinline]] float amx_loop(long iters) {
    struct alignas(64) {
        std::uint8_t palette = 1, start = 0, reserved[14] = {};
        std::uint16_t colsb[16] = {64, 64, 64, 64, 64, 64};
        std::uint8_t rows[16] = {16, 16, 16, 16, 16, 16};
    } cfg;
    alignas(64) std::uint16_t ab[16 * 32];
    alignas(64) float out[16 * 16];
    std::fill(std::begin(ab), std::end(ab), std::uint16_t(0x3400));
    _tile_loadconfig(&cfg);
    _tile_loadd(4, ab, 64);
    _tile_loadd(5, ab, 64);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (long it = 0; it < iters; ++it) {
        _tile_dpbf16ps(0, 4, 5);
        _tile_dpbf16ps(1, 4, 5);
        _tile_dpbf16ps(2, 4, 5);
        _tile_dpbf16ps(3, 4, 5);
    }
    _tile_stored(0, out, 64);
    _tile_release();
    return out[0];
}

/// GFLOP/s of `threads` threads each running loop(iters), `flops_per_iter` each: best of 3.
template <class F>
double loop_peak(int threads, double flops_per_iter, F&& loop) {
    using clock = std::chrono::steady_clock;
    auto run = [&](long iters) {
        float total = 0;
        const auto t0 = clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : total)
        total += loop(iters);
        const double s = std::chrono::duration<double>(clock::now() - t0).count();
        if (total == 12345.678f) std::printf(" ");  // keeps the loops observable
        return s;
    };
    long iters = 1 << 12;
    while (run(iters) < 0.05 && iters < (1L << 36)) iters *= 4;
    double best = 0;
    for (int r = 0; r < 3; ++r) best = std::max(best, flops_per_iter * double(iters) * threads / run(iters) * 1e-9);
    return best;
}

xt::xtensor<float, 4> randn(index_t L, index_t c, unsigned seed, float sd) {
    auto x = xt::xtensor<float, 4>::from_shape({1, 8, std::size_t(L), std::size_t(c)});
    std::mt19937 g(seed);
    std::normal_distribution<float> n(0.0f, sd);
    for (auto& e : x) e = n(g);
    return x;
}

double scaled_error(const xt::xtensor<float, 4>& a, const xt::xtensor<double, 4>& b) {
    double e = 0, s = 0;
    for (std::size_t i = 0; i < b.size(); ++i) {
        e = std::max(e, std::abs(double(a.data()[i]) - b.data()[i]));
        s = std::max(s, std::abs(b.data()[i]));
    }
    return e / s;
}

template <class Map>
void bench_map(const options& o, const std::vector<double>& peaks, nlohmann::json& records) {
    for (const index_t d : o.d)
        for (const index_t m : o.m) {
            const attention_config<Map, typename Map::default_sampler> cfg{
                .head_dim = d, .value_dim = o.dv, .num_features = m, .seed = 1, .sigma = Map::is_positive ? 1.0 : 3.0};
            const linear_attention<Map> op(cfg);
            const auto q = randn(o.L, d, 1, 0.3f), k = randn(o.L, d, 2, 0.3f), v = randn(o.L, o.dv, 3, 1.0f);
            const auto qb = to_bf16(q), kb = to_bf16(k), vb = to_bf16(v);
            const double P = double(op.omega().shape()[1]), F = double(op.feature_dim());
            const double flops = 8.0 * (4.0 * double(o.L) * double(d) * P + 4.0 * double(o.L) * F * double(o.dv));
            {  // error against the double reference on the rounded inputs
                const linear_attention<Map, typename Map::default_sampler, backends::reference, double> ref(cfg);
                const xt::xtensor<double, 4> qd = xt::cast<double>(to_float(qb)), kd = xt::cast<double>(to_float(kb)),
                                             vd = xt::cast<double>(to_float(vb));
                const auto want = ref(qd, kd, vd);
                const double eb = scaled_error(to_float(op(qb, kb, vb)), want);
                const double ef = scaled_error(op(to_float(qb), to_float(kb), to_float(vb)), want);
                std::printf("%-16s d=%4ld m=%4ld  error vs double reference: bf16 %.2e, float %.2e\n", Map::name,
                            long(d), long(m), eb, ef);
                records.push_back(
                    {{"op", "error"}, {"map", Map::name}, {"d", d}, {"m", m}, {"bf16", eb}, {"float", ef}});
            }
            for (std::size_t ti = 0; ti < o.threads.size(); ++ti) {
                omp_set_num_threads(o.threads[ti]);
                const double tf = kattn_bench::median_seconds([&] { (void)op(q, k, v); }, o.repeats);
                const double tb = kattn_bench::median_seconds([&] { (void)op(qb, kb, vb); }, o.repeats);
                const double peak = peaks[ti];
                std::printf(
                    "%-16s d=%4ld m=%4ld threads=%d  float %8.2f ms %6.1f GF/s (%4.1f %% of FMA peak)   bf16 "
                    "%8.2f ms %6.1f GF/s   bf16 speed-up %.2fx\n",
                    Map::name, long(d), long(m), o.threads[ti], tf * 1e3, flops / tf * 1e-9,
                    100 * flops / tf * 1e-9 / peak, tb * 1e3, flops / tb * 1e-9, tf / tb);
                for (const auto& [prec, t] : {std::pair{"float", tf}, std::pair{"bf16", tb}}) {
                    nlohmann::json r{{"op", "forward"},
                                     {"precision", prec},
                                     {"map", Map::name},
                                     {"L", o.L},
                                     {"d", d},
                                     {"m", m},
                                     {"dv", o.dv},
                                     {"threads", o.threads[ti]},
                                     {"seconds", t},
                                     {"gflops", flops / t * 1e-9},
                                     {"peak_fraction", flops / t * 1e-9 / peak}};
                    if (std::string(prec) == "bf16") r["speedup"] = tf / tb;
                    records.push_back(r);
                }
            }
        }
}

}  // namespace

int main(int argc, char** argv) {
    options o;
    CLI::App app{"linear_attention's bf16 forward against its float forward, with the same-run ceilings"};
    app.add_option("--L", o.L, "tokens per head")->check(CLI::Range(64, 1 << 20));
    app.add_option("--d", o.d, "head dimensions")->delimiter(',')->check(CLI::Range(1, 4096));
    app.add_option("--m", o.m, "numbers of features")->delimiter(',')->check(CLI::Range(2, 1 << 14));
    app.add_option("--dv", o.dv, "value dimension")->check(CLI::Range(1, 4096));
    app.add_option("--threads", o.threads, "thread counts")->delimiter(',')->check(CLI::Range(1, 1024));
    app.add_option("--repeats", o.repeats, "timed runs per case (the median is reported)")->check(CLI::Range(1, 1000));
    app.add_option("--json", o.json, "write the records here");
    CLI11_PARSE(app, argc, argv);

    const bool amx = kattn::detail::bf16_amx_supported();
    std::printf("bf16 forward: %s\n", amx ? "AMX tile products" : "no AMX-BF16 here: the float path, rounded");
    nlohmann::json records = nlohmann::json::array();
    std::vector<double> peaks;
    for (const int t : o.threads) {
        const double fma = kattn_bench::measure_fma_peak(t).gflops;
        peaks.push_back(fma);
        records.push_back({{"op", "fma_peak"}, {"threads", t}, {"gflops", fma}});
        std::printf("threads=%d  FMA peak %.1f GFLOP/s", t, fma);
        if (amx) {  // every AMX CPU has AVX512-BF16
            const double dp = loop_peak(t, 2.0 * 32 * chains, [](long n) { return dpbf16_loop(n, 1.0f); });
            const double tm = loop_peak(t, 4 * 2.0 * 16 * 16 * 32, [](long n) { return amx_loop(n); });
            records.push_back({{"op", "dpbf16_peak"}, {"threads", t}, {"gflops", dp}});
            records.push_back({{"op", "amx_peak"}, {"threads", t}, {"gflops", tm}});
            std::printf("   VDPBF16PS peak %.1f GFLOP/s   AMX TDPBF16PS peak %.1f GFLOP/s", dp, tm);
        }
        std::printf("\n");
    }
    bench_map<features::favor>(o, peaks, records);
    const options one{o.L, {64}, {256}, o.dv, o.threads, o.repeats, o.json};
    bench_map<features::elu>(one, peaks, records);
    bench_map<features::trig>(one, peaks, records);
    if (!o.json.empty()) {
        const nlohmann::json out{
            {"cpu", kattn_bench::cpu_model()}, {"date", kattn_bench::utc_now()}, {"amx", amx}, {"records", records}};
        std::ofstream(o.json) << out.dump(1) << '\n';
    }
    return 0;
}

#include <kattn/core/warnings_pop.hpp>
