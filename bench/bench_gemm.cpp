// bench/bench_gemm.cpp — kattn's register-blocked GEMM (linalg/gemm.hpp) at the shapes of one
// attention tile, against the FMA peak of the same instruction set, one thread.
//
// The simd backend does its arithmetic in tiles of 64 rows; per tile of a favor forward
// (d = d_v = 64, m = 256) it runs three products, and the backward adds the ∂Ω one:
//   projection   U = X·Ω          M = tile, N = m,  K = d    (gemm_nn)
//   key_state    S += Φᵀ·V        M = m,    N = dv, K = tile (gemm_tn, accumulating)
//   output       O = Φ·S          M = tile, N = dv, K = m    (gemm_nn)
//   d_omega      ∂Ω += Xᵀ·∂U      M = d,    N = m,  K = tile (gemm_tn, accumulating)
// Each timing runs the product over L / tile consecutive tiles (A streams from memory, B
// stays in cache, as in the backend), best of `repeats` after a warm-up. For every
// instruction set the CPU runs (AVX-512, AVX2+FMA, SSE2) the FMA peak is measured in the same
// run with that set's registers (bench/fma_peak.hpp; SSE2 has no FMA: its "peak" is the
// same loop as a multiply and an add), and every GEMM is reported as a fraction of it.
// `--rows` times other register-block heights than the library's (gemm_block_rows, 8) too,
// to tune it on another CPU (with the 16 registers of AVX2 and SSE2, 8 rows × 2 vectors spill
// three accumulators to the stack).
//
//   bench_gemm [--L 4096] [--tile 64] [--d 64] [--m 256] [--dv 64] [--repeats 15]
//              [--rows 4,6,8,12] [--json FILE]
//
// Needs -march=native (the build's `native` option) to compile the AVX-512 and AVX2 paths.
// JSON: {cpu, date, records: [{op: "fma_peak" | "gemm", isa, shape, M, N, K, rows, library_rows,
// gflops, peak_fraction}]}.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <xsimd/xsimd.hpp>

#include <kattn/linalg/gemm.hpp>

#include "fma_peak.hpp"
#include "procfs.hpp"

namespace {

using kattn::index_t;

struct options {
    index_t L = 4096, tile = 64, d = 64, m = 256, dv = 64;
    int repeats = 15;
    std::vector<int> rows;
    std::string json;
};

struct shape {
    std::string name;
    index_t M, N, K;
    bool transposed_a;  // A stored K × M (Aᵀ·B)
    bool accumulate;
};

using gemm_fn = void (*)(index_t, index_t, index_t, const float*, index_t, index_t, const float*, index_t, float*,
                         index_t, bool);

/// The register-block heights --rows accepts.
using block_heights = std::integer_sequence<int, 4, 5, 6, 8, 10, 12, 14>;

/// gemm<Arch> with register blocks of `rows` rows (one of block_heights).
template <class Arch, int... R>
gemm_fn gemm_for_rows(int rows, std::integer_sequence<int, R...>) {
    gemm_fn f = nullptr;
    ((f = rows == R ? &kattn::detail::gemm<Arch, float, R> : f), ...);
    return f;
}

/// Best seconds of `repeats` runs of `shape` over L / tile tiles.
double time_shape(gemm_fn f, const shape& s, const options& o, std::size_t seed) {
    const index_t tiles = std::max<index_t>(1, o.L / o.tile);
    std::vector<float> A(std::size_t(s.M * s.K * tiles)), B(std::size_t(s.K * s.N * (s.transposed_a ? tiles : 1))),
        C(std::size_t(s.M * s.N * (s.accumulate ? 1 : tiles)));
    std::mt19937 g{unsigned(seed)};
    std::normal_distribution<float> n(0.0f, 0.1f);
    for (auto* v : {&A, &B}) std::generate(v->begin(), v->end(), [&] { return n(g); });
    auto run = [&] {
        for (index_t t = 0; t < tiles; ++t) {
            const float* a = A.data() + t * s.M * s.K;
            // Aᵀ·B over a tile: A (tile × M) and B (tile × N) both stream, K = tile.
            const float* b = B.data() + (s.transposed_a ? t * s.K * s.N : 0);
            float* c = C.data() + (s.accumulate ? 0 : t * s.M * s.N);
            if (s.transposed_a)
                f(s.M, s.N, s.K, a, 1, s.M, b, s.N, c, s.N, s.accumulate);
            else
                f(s.M, s.N, s.K, a, s.K, 1, b, s.N, c, s.N, s.accumulate);
        }
    };
    run();
    double best = 1e30;
    for (int r = 0; r < o.repeats; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        run();
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    volatile float sink = C[C.size() / 2];
    (void)sink;
    return best / double(tiles);
}

template <class Arch>
void bench_isa(const char* isa, const options& o, nlohmann::json& records) {
    const auto peak = kattn_bench::measure_fma_peak<Arch>(1);
    records.push_back({{"op", "fma_peak"}, {"isa", isa}, {"threads", 1}, {"gflops", peak.gflops}});
    std::printf("%-7s FMA peak (1 thread) %7.1f GFLOP/s\n", isa, peak.gflops);
    const shape shapes[] = {{"projection", o.tile, o.m, o.d, false, false},
                            {"key_state", o.m, o.dv, o.tile, true, true},
                            {"output", o.tile, o.dv, o.m, false, false},
                            {"d_omega", o.d, o.m, o.tile, true, true}};
    constexpr int lib_rows = int(kattn::detail::gemm_block_rows);
    std::vector<int> rows{lib_rows};
    for (int r : o.rows)
        if (r != lib_rows) rows.push_back(r);
    for (const auto& s : shapes)
        for (int r : rows) {
            const double sec = time_shape(gemm_for_rows<Arch>(r, block_heights{}), s, o, 7);
            const double gf = 2.0 * double(s.M) * double(s.N) * double(s.K) / sec * 1e-9;
            std::printf("%-7s %-10s M=%4ld N=%4ld K=%4ld  rows %2d%s  %7.1f GFLOP/s  %5.1f %% of peak\n", isa,
                        s.name.c_str(), long(s.M), long(s.N), long(s.K), r, r == lib_rows ? " (library)" : "          ",
                        gf, 100 * gf / peak.gflops);
            records.push_back({{"op", "gemm"},
                               {"isa", isa},
                               {"shape", s.name},
                               {"M", s.M},
                               {"N", s.N},
                               {"K", s.K},
                               {"rows", r},
                               {"library_rows", lib_rows},
                               {"gflops", gf},
                               {"peak_fraction", gf / peak.gflops}});
        }
}

}  // namespace

int main(int argc, char** argv) {
    options o;
    CLI::App app{"kattn's tile GEMM against the FMA peak of each instruction set (1 thread)"};
    app.add_option("--L", o.L, "rows streamed per timing (L / tile tiles)")->check(CLI::Range(1, 1 << 24));
    app.add_option("--tile", o.tile, "tile rows")->check(CLI::Range(1, 4096));
    app.add_option("--d", o.d, "head dimension")->check(CLI::Range(1, 4096));
    app.add_option("--m", o.m, "features")->check(CLI::Range(1, 1 << 16));
    app.add_option("--dv", o.dv, "value dimension")->check(CLI::Range(1, 4096));
    app.add_option("--repeats", o.repeats, "timed runs per case (best is reported)")->check(CLI::Range(1, 1000));
    app.add_option("--rows", o.rows, "other register-block heights to time (4, 5, 6, 8, 10, 12, 14)")
        ->delimiter(',')
        ->check(CLI::IsMember({4, 5, 6, 8, 10, 12, 14}));
    app.add_option("--json", o.json, "write the records here");
    CLI11_PARSE(app, argc, argv);

    nlohmann::json records = nlohmann::json::array();
    const auto cpu = xsimd::available_architectures();
#if XSIMD_WITH_AVX512BW
    if (cpu.avx512bw) bench_isa<xsimd::avx512bw>("avx512", o, records);
#endif
#if XSIMD_WITH_FMA3_AVX2
    if (cpu.fma3_avx2) bench_isa<xsimd::fma3<xsimd::avx2>>("avx2", o, records);
#endif
#if XSIMD_WITH_SSE2
    if (cpu.sse2) bench_isa<xsimd::sse2>("sse2", o, records);
#endif
    if (!o.json.empty()) {
        const nlohmann::json out{{"cpu", kattn_bench::cpu_model()},
                                 {"date", kattn_bench::utc_now()},
                                 {"L", o.L},
                                 {"tile", o.tile},
                                 {"d", o.d},
                                 {"m", o.m},
                                 {"dv", o.dv},
                                 {"records", records}};
        std::ofstream(o.json) << out.dump(1) << '\n';
    }
    return 0;
}
