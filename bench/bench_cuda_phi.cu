// bench/bench_cuda_phi.cu — φ's kernel (backends/projected_rows.cuh) in several tile
// geometries on one GPU, in one process (built with -Dcuda=enabled; scripts/gpu-check runs it).
//
//   bench_cuda_phi [--L 65536] [--heads 8] [--d 64] [--m 256] [--repeats 20] [--json PATH]
//
// The keys' side of a forward call: φ and the key shifts of B 1 × H heads × L rows, built as
// the chunked forward builds them (gather_rows, then activate_rows at each row's own
// stabiliser shift), for favor and for elu, both with orthogonal frequencies (m features):
// the maps' row functions differ in cost, the gather and the product with Ω do not. Each
// geometry (rows per tile × threads per block, some with a register cap: blocks per
// multiprocessor in __launch_bounds__) runs twice: with a block per tile ("tiles",
// what cuda_system launches) and with only as many blocks as are resident on the device at
// once, each walking the tiles grid-stride ("resident").
//
// Reported per run: seconds (CUDA events, median of --repeats after a warm-up); GB/s of
// the bytes the kernel must move (x read, φ and the shifts written) beside the same run's
// device-to-device copy bandwidth; registers per thread, local memory per thread (spills),
// shared memory and resident blocks per multiprocessor. Every geometry's φ and shifts must
// equal the default geometry's bit for bit (the kernel's contract: a row's arithmetic does
// not depend on the tiling); a difference fails the run (exit status 1). A benchmark that
// checks one invariant, not a test.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include <cuda_runtime.h>

#include <kattn/fwd.hpp>
#include <kattn/attention/linear_attention.hpp>
#include <kattn/backends/cuda.cuh>
#include <kattn/features/elu.hpp>
#include <kattn/features/favor.hpp>
#include <kattn/samplers/orthogonal_gaussian.hpp>

#include "cli_args.hpp"
#include "cuda_timing.cuh"

namespace {

using kattn::index_t;
namespace kb = kattn::backends;
namespace ci = kattn::detail::chunked_impl;
using cuda_bench::check;
using kattn::detail::projected_geometry;

struct options {
    long L = 65536, heads = 8, d = 64, m = 256, repeats = 20;
    std::string json;
};

options parse(int argc, char** argv) {
    options o;
    bench_cli::arguments args("bench_cuda_phi", argc, argv);
    while (args.next()) {
        const std::string a = args.option();
        const auto next = [&] { return args.value(); };
        if (a == "--L")
            o.L = std::stol(next());
        else if (a == "--heads")
            o.heads = std::stol(next());
        else if (a == "--d")
            o.d = std::stol(next());
        else if (a == "--m")
            o.m = std::stol(next());
        else if (a == "--repeats")
            o.repeats = std::max(1L, std::stol(next()));
        else if (a == "--json")
            o.json = next();
        else {
            std::fprintf(stderr,
                         "usage: bench_cuda_phi [--L L] [--heads H] [--d D] [--m M] [--repeats R] [--json PATH]\n");
            std::exit(a == "--help" || a == "-h" ? 0 : 2);
        }
    }
    if (o.L < 1 || o.heads < 1 || o.d < 8 || o.d % 8 != 0 || o.m < 16 || o.m % 16 != 0) {
        std::fprintf(stderr, "bench_cuda_phi: L, heads ≥ 1; d a multiple of 8; m a multiple of 16\n");
        std::exit(2);
    }
    return o;
}

/// The default geometry (32 rows, 256 threads, 64 registers) first: the others are
/// compared with it. <32, 256> is the default without its register cap.
using geometries =
    std::tuple<kattn::detail::default_projected_geometry, projected_geometry<32, 256>, projected_geometry<16, 128>,
               projected_geometry<16, 256>, projected_geometry<32, 128>, projected_geometry<64, 128>,
               projected_geometry<64, 256>, projected_geometry<64, 512>, projected_geometry<32, 256, 5>,
               projected_geometry<32, 128, 8>, projected_geometry<16, 256, 8>, projected_geometry<16, 128, 16>>;

/// count += the elements where a and b differ in their bits.
struct count_differences {
    const float* a;
    const float* b;
    unsigned long long* count;
    __device__ void operator()(index_t i) const {
        if (__float_as_uint(a[i]) != __float_as_uint(b[i])) atomicAdd(count, 1ull);
    }
};

struct record {
    std::string map, grid;
    int rows = 0, threads = 0, min_blocks = 0, registers = 0, blocks_per_sm = 0;
    std::size_t local_bytes = 0, shared_bytes = 0;
    long blocks = 0;
    double seconds = 0, gbps = 0;
    unsigned long long differences = 0;
};

/// One map: its inputs, the default geometry's φ as the reference, then every geometry.
template <class Map>
void run_map(const options& o, const char* name, const cudaDeviceProp& prop, std::vector<record>& out) {
    const kattn::attention_config cfg{.head_dim = o.d, .value_dim = o.d, .num_features = o.m, .seed = 1};
    const kattn::linear_attention<Map, kattn::samplers::orthogonal_gaussian, kb::cuda, float> op(cfg);
    const cuda_bench::owned_stream stream;
    const kb::cuda_system sys{stream.s, kb::float_gemm::tf32};
    const kb::device_parameters<Map, float, kb::cuda_system> params(sys, op.spectral());
    const auto g = ci::geometry_of<Map>(o.d, o.m, 1, o.heads, o.L, o.L, o.d, false, nullptr);
    const index_t rows = g.problems * o.L;
    cuda_bench::device_allocations mem;
    float* x = mem.get<float>(std::size_t(rows * o.d), "cudaMalloc (x)");
    float* phi_ref = mem.get<float>(std::size_t(rows * g.F), "cudaMalloc (φ)");
    float* phi = mem.get<float>(std::size_t(rows * g.F), "cudaMalloc (φ)");
    float* shift_ref = mem.get<float>(std::size_t(rows), "cudaMalloc (shifts)");
    float* shift = mem.get<float>(std::size_t(rows), "cudaMalloc (shifts)");
    auto* diff = mem.get<unsigned long long>(1, "cudaMalloc (count)");
    sys.launch(rows * o.d, cuda_bench::hash_fill<float>{x, 7, 0.5f});
    const auto sp = params.view();
    if (!sys.projects_rows(g.d, g.P, sp.omega))
        throw std::runtime_error("bench_cuda_phi: this device or shape does not take φ's kernel");
    using ops = kattn::detail::warp_ops;
    using Gather = ci::gather_rows<float, float, ops>;
    using Act = ci::activate_rows<Map, float, ops>;
    const Gather gather{g, kb::head_major<const float>(x, 1, o.heads, o.L, o.d), o.L, float(op.input_scale()), nullptr,
                        0};
    const Act act_ref{sp, g, o.L, o.L, true, true, nullptr, nullptr, phi_ref, shift_ref, 0};
    auto act = act_ref;
    act.phi = phi;
    act.shift = shift;
    const double bytes = double(rows) * double(g.d + g.F + 1) * sizeof(float);

    const auto run = [&]<class G>(G, bool resident, bool reference) {
        const auto kernel = kattn::detail::projected_rows_kernel<Gather, Act, G>;
        const std::size_t smem = kattn::detail::projected_shared_bytes(int(g.d), int(g.P), G::rows);
        record r;
        r.map = name;
        r.grid = resident ? "resident" : "tiles";
        r.rows = G::rows;
        r.threads = G::threads;
        r.min_blocks = G::min_blocks;
        r.shared_bytes = smem;
        if (smem > std::size_t(prop.sharedMemPerBlockOptin)) {
            std::printf("%-5s %2d rows %3d threads: %zu bytes of shared memory, more than a block may have\n", name,
                        G::rows, G::threads, smem);
            return;
        }
        check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)),
              "cudaFuncSetAttribute");
        cudaFuncAttributes fa{};
        check(cudaFuncGetAttributes(&fa, kernel), "cudaFuncGetAttributes");
        r.registers = fa.numRegs;
        r.local_bytes = fa.localSizeBytes;
        check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&r.blocks_per_sm, kernel, G::threads, smem),
              "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
        const index_t tiles = (rows + G::rows - 1) / G::rows;
        const index_t resident_blocks = std::max(1, r.blocks_per_sm) * index_t(prop.multiProcessorCount);
        r.blocks = long(std::min({tiles, resident ? resident_blocks : tiles, index_t(1) << 20}));
        const auto& a = reference ? act_ref : act;
        const auto launch = [&] {
            kernel<<<unsigned(r.blocks), G::threads, smem, stream.s>>>(rows, int(g.d), int(g.P), sp.omega, gather, a);
            check(cudaGetLastError(), "kernel launch");
        };
        r.seconds = cuda_bench::time_median(o.repeats, launch, stream.s);
        r.gbps = bytes / r.seconds * 1e-9;
        if (!reference) {
            check(cudaMemsetAsync(diff, 0, sizeof *diff, stream.s), "cudaMemsetAsync");
            sys.launch(rows * g.F, count_differences{phi_ref, phi, diff});
            sys.launch(rows, count_differences{shift_ref, shift, diff});
            check(cudaMemcpyAsync(&r.differences, diff, sizeof *diff, cudaMemcpyDeviceToHost, stream.s), "copy back");
            check(cudaStreamSynchronize(stream.s), "compare");
        }
        std::printf(
            "%-5s %2d rows %3d threads (min %2d) %-8s %7ld blocks %3d regs %4zu B local %6zu B shared %2d/SM "
            "%8.3f ms %6.0f GB/s%s\n",
            name, G::rows, G::threads, G::min_blocks, r.grid.c_str(), r.blocks, r.registers, r.local_bytes,
            r.shared_bytes, r.blocks_per_sm, r.seconds * 1e3, r.gbps,
            r.differences ? "  DIFFERENT BITS" : (reference ? "  (reference)" : ""));
        out.push_back(r);
    };
    // The reference: the default geometry, a block per tile (what cuda_system launches).
    run(kattn::detail::default_projected_geometry{}, false, true);
    std::apply([&](auto... geo) { (run(geo, false, false), ...); }, geometries{});
    std::apply([&](auto... geo) { (run(geo, true, false), ...); }, geometries{});
}

void write_json(const options& o, const cudaDeviceProp& prop, double copy, const std::vector<record>& res) {
    if (o.json.empty()) return;
    std::ofstream js(o.json);
    js << "{\n  \"benchmark\": \"bench_cuda_phi\",\n  \"device\": \"" << prop.name << "\",\n  \"copy_gbps\": " << copy
       << ",\n  \"L\": " << o.L << ",\n  \"heads\": " << o.heads << ",\n  \"d\": " << o.d << ",\n  \"m\": " << o.m
       << ",\n  \"results\": [\n";
    for (std::size_t i = 0; i < res.size(); ++i) {
        const auto& r = res[i];
        js << "    {\"op\": \"phi_kernel\", \"map\": \"" << r.map << "\", \"rows\": " << r.rows
           << ", \"threads\": " << r.threads << ", \"min_blocks\": " << r.min_blocks << ", \"grid\": \"" << r.grid
           << "\", \"blocks\": " << r.blocks << ", \"registers\": " << r.registers
           << ", \"local_bytes\": " << r.local_bytes << ", \"shared_bytes\": " << r.shared_bytes
           << ", \"blocks_per_sm\": " << r.blocks_per_sm << ", \"seconds\": " << r.seconds << ", \"gbps\": " << r.gbps
           << ", \"copy_gbps\": " << copy << ", \"different_bits\": " << r.differences << ", \"device\": \""
           << prop.name << "\"}" << (i + 1 < res.size() ? "," : "") << "\n";
    }
    js << "  ]\n}\n";
}

}  // namespace

int main(int argc, char** argv) {
    const options o = parse(argc, argv);
    cudaDeviceProp prop{};
    if (!cuda_bench::current_device(prop)) {
        std::fprintf(stderr, "bench_cuda_phi: no CUDA device\n");
        return 1;
    }
    std::vector<record> res;
    try {
        const double copy = cuda_bench::copy_bandwidth(5);
        std::printf("%s (sm_%d%d, %d SMs): D2D copy %.0f GB/s; keys' φ of B1 H%ld L%ld d%ld m%ld\n", prop.name,
                    prop.major, prop.minor, prop.multiProcessorCount, copy, o.heads, o.L, o.d, o.m);
        run_map<kattn::features::favor>(o, "favor", prop, res);
        run_map<kattn::features::elu>(o, "elu", prop, res);
        write_json(o, prop, copy, res);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_cuda_phi: %s\n", e.what());
        return 1;
    }
    if (!o.json.empty()) std::printf("\nwrote %s\n", o.json.c_str());
    for (const auto& r : res)
        if (r.differences) return 1;
    return 0;
}
