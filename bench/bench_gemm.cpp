// bench/bench_gemm.cpp — kattn's register-blocked GEMM (linalg/gemm.hpp) at the shapes of one
// attention tile, against the FMA peak of the same instruction set, one thread.
//
// The simd backend does its arithmetic in tiles of 64 rows; per tile of a favor forward
// (d = d_v = 64, m = 256) it runs three products, and the backward adds the ∂Ω one:
//   projection   U = X·Ω          M = tile, N = m,  K = d    (gemm_packed_b: Ω packed once)
//   key_state    S += Φᵀ·V        M = m,    N = dv, K = tile (gemm_tn, accumulating)
//   output       O = Φ·S          M = tile, N = dv, K = m    (gemm_nn)
//   d_omega      ∂Ω += Xᵀ·∂U      M = d,    N = m,  K = tile (gemm_tn, accumulating)
// Each timing runs the product over L / tile consecutive tiles (A streams from memory, B
// stays in cache, as in the backend), best of `repeats` after a warm-up. For every
// instruction set the CPU runs (AVX-512, AVX2+FMA, SSE2) the FMA peak is measured in the same
// run with that set's registers (bench/fma_peak.hpp; SSE2 has no FMA: its "peak" is the
// same loop as a multiply and an add), and every GEMM is reported as a fraction of it.
// `--blocks` times other register-block shapes (rows × vectors) than the library's
// (gemm_block_shape: 8 × 2, 6 × 4 on AVX-512) too, to tune it on another CPU (with the 16
// registers of AVX2 and SSE2, 8 rows × 2 vectors spill three accumulators to the stack).
//
//   bench_gemm [--L 4096] [--tile 64] [--d 64] [--m 256] [--dv 64] [--repeats 15]
//              [--blocks 8x2,12x2,6x4] [--json FILE]
//
// Needs -march=native (the build's `native` option) to compile the AVX-512 and AVX2 paths.
// JSON: {cpu, date, records: [{op: "fma_peak" | "gemm", isa, shape, M, N, K, rows, vectors,
// library_block, gflops, peak_fraction}]}.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
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
    std::vector<std::string> blocks;
    std::string json;
};

struct shape {
    std::string name;
    index_t M, N, K;
    bool transposed_a;  // A stored K × M (Aᵀ·B)
    bool accumulate;
    bool packed_b = false;  // B packed into the block's column panels (pack_b_panels)
};

using gemm_fn = void (*)(index_t, index_t, index_t, const float*, index_t, index_t, const float*, index_t, float*,
                         index_t, bool);
using pack_fn = void (*)(index_t, index_t, const float*, index_t, float*);

/// gemm_packed_b behind gemm_fn's signature (B packed, its ldb unused).
template <class Arch, int MR, int NV>
void gemm_packed(index_t M, index_t N, index_t K, const float* A, index_t a_rs, index_t a_cs, const float* Bp, index_t,
                 float* C, index_t ldc, bool accumulate) {
    kattn::detail::gemm_packed_b<Arch, float, MR, NV>(M, N, K, A, a_rs, a_cs, Bp, C, ldc, accumulate);
}

/// The products of one register-block shape: plain, and with B packed (with its packer).
struct block_fns {
    gemm_fn plain = nullptr, packed = nullptr;
    pack_fn pack = nullptr;
};

/// A register-block shape, rows × vectors.
struct block {
    int rows, vectors;
    friend bool operator==(block, block) = default;
    std::string name() const { return std::to_string(rows) + "x" + std::to_string(vectors); }
};

/// The register-block shapes --blocks accepts.
constexpr block block_shapes[] = {{4, 2}, {6, 2}, {8, 2}, {10, 2}, {12, 2}, {14, 2}, {8, 3}, {4, 4}, {5, 4}, {6, 4}};

/// gemm<Arch> (plain and with B packed) with register blocks of shape `b` (one of block_shapes).
template <class Arch, std::size_t... I>
block_fns gemm_for_block(block b, std::index_sequence<I...>) {
    block_fns f;
    ((f = b == block_shapes[I]
              ? block_fns{&kattn::detail::gemm<Arch, float, block_shapes[I].rows, block_shapes[I].vectors>,
                          &gemm_packed<Arch, block_shapes[I].rows, block_shapes[I].vectors>,
                          &kattn::detail::pack_b_panels<Arch, float, block_shapes[I].vectors>}
              : f),
     ...);
    return f;
}

/// The names ("4x2", …) of the shapes --blocks accepts.
std::vector<std::string> block_names() {
    std::vector<std::string> names;
    for (block b : block_shapes) names.push_back(b.name());
    return names;
}

/// "RxV" (one of block_names(), which the option checks) → block.
block parse_block(const std::string& text) {
    for (block b : block_shapes)
        if (b.name() == text) return b;
    throw CLI::ValidationError("--blocks", "'" + text + "' is not a block shape this bench was built with");
}

/// Best seconds of `repeats` runs of `shape` over L / tile tiles.
double time_shape(const block_fns& fns, const shape& s, const options& o, std::size_t seed) {
    const index_t tiles = std::max<index_t>(1, o.L / o.tile);
    std::vector<float> A(std::size_t(s.M * s.K * tiles)), B(std::size_t(s.K * s.N * (s.transposed_a ? tiles : 1))),
        C(std::size_t(s.M * s.N * (s.accumulate ? 1 : tiles)));
    std::mt19937 g{unsigned(seed)};
    std::normal_distribution<float> n(0.0f, 0.1f);
    for (auto* v : {&A, &B}) std::generate(v->begin(), v->end(), [&] { return n(g); });
    const gemm_fn f = s.packed_b ? fns.packed : fns.plain;
    if (s.packed_b) {  // as the backend does once per call: B (Ω) is the same for every tile
        std::vector<float> packed(B.size());
        fns.pack(s.K, s.N, B.data(), s.N, packed.data());
        B = std::move(packed);
    }
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
    const shape shapes[] = {{"projection", o.tile, o.m, o.d, false, false, true},
                            {"key_state", o.m, o.dv, o.tile, true, true},
                            {"output", o.tile, o.dv, o.m, false, false},
                            {"d_omega", o.d, o.m, o.tile, true, true}};
    using lib_shape = kattn::detail::gemm_block_shape<Arch>;
    constexpr block lib{lib_shape::rows, lib_shape::vectors};
    static_assert(std::ranges::find(block_shapes, lib) != std::end(block_shapes),
                  "bench_gemm: add the library's register-block shape to block_shapes");
    std::vector<block> blocks{lib};
    for (const auto& text : o.blocks)
        if (const block b = parse_block(text); std::find(blocks.begin(), blocks.end(), b) == blocks.end())
            blocks.push_back(b);
    for (const auto& s : shapes)
        for (block b : blocks) {
            const double sec =
                time_shape(gemm_for_block<Arch>(b, std::make_index_sequence<std::size(block_shapes)>{}), s, o, 7);
            const double gf = 2.0 * double(s.M) * double(s.N) * double(s.K) / sec * 1e-9;
            std::printf("%-7s %-10s M=%4ld N=%4ld K=%4ld  block %-4s%s  %7.1f GFLOP/s  %5.1f %% of peak\n", isa,
                        s.name.c_str(), long(s.M), long(s.N), long(s.K), b.name().c_str(),
                        b == lib ? " (library)" : "          ", gf, 100 * gf / peak.gflops);
            records.push_back({{"op", "gemm"},
                               {"isa", isa},
                               {"shape", s.name},
                               {"M", s.M},
                               {"N", s.N},
                               {"K", s.K},
                               {"rows", b.rows},
                               {"vectors", b.vectors},
                               {"library_block", lib.name()},
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
    app.add_option("--blocks", o.blocks, "other register-block shapes to time, rows x vectors")
        ->delimiter(',')
        ->check(CLI::IsMember(block_names()));
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
