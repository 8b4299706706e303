// bench/bench_cuda.cu — the CUDA backend against the GPU's own ceilings, in one process
// (built with -Dcuda=enabled; scripts/gpu-check runs it).
//
//   bench_cuda [--L 1024,4096,16384,65536,262144] [--heads 8] [--d 64] [--m 256]
//              [--repeats 5] [--budget 240] [--no-fla] [--no-favor] [--precision float|bf16|all]
//              [--mask full|causal|all] [--no-ceilings] [--three-pass] [--outputs tiled|products]
//              [--states fused|products] [--single-pass on|off]
//              [--pass forward|all] [--json PATH]
//
// The selection options serve profiling (one case under ncu; --pass forward leaves out the
// forward+backward call, so that with --repeats 1 a profile holds 4 forward calls: the
// warm-up and timed call, plain and from the graph); --no-ceilings skips the ceiling
// measurements and records them as 0 (the % column is then meaningless).
//
// Ceilings, measured first: cuBLAS GEMM TFLOP/s on 8192² (TF32, BF16 inputs with FP32
// accumulation, exact FP32) and device-to-device copy bandwidth (cudaMemcpyAsync of
// 1 GiB: read + write bytes / time). Then backends::cuda through its device-resident
// calls (nothing crosses the PCIe bus): favor (orthogonal frequencies) at B 1, H heads,
// d = dv, m features for each L, and FLA's published shapes (B1 T8192 H96 D128,
// B4 T4096 H64 D128, B8 T1024 H8 D64) with elu and the identity sampler (m = d, floor 0,
// no renormalisation: ELU + 1, the map closest to plain linear attention; like FLA's
// backward, these compute dq, dk and dv only: no dΩ, "parameter_gradients": false; favor's
// backward computes dΩ as well); non-causal and causal; float inputs and outputs with
// TF32 products (% of the TF32 ceiling), bf16 ones with BF16 products (FP32 accumulation,
// % of the BF16 ceiling). Times: CUDA events on a stream of the case's own, median of
// --repeats after one warm-up; beside them the same call captured once into a CUDA graph and
// replayed (graph_seconds: the device's time without the host's launch and cuBLAS set-up
// gaps between the call's kernels; 0 if the capture failed). TFLOP/s use the products the algorithm executes (flop_model below,
// the backward including its recomputed forward); GB/s the bytes of the inputs and
// outputs; peak memory the stream-ordered pool's high-water mark plus the caller's
// tensors, beside the scratch the call says it needs (device_workspace_bytes). φ is built
// by the one-kernel path (cuda_system::fused_features) unless --three-pass; the forward's
// output stage runs as cuda_system's default has it, or as --outputs says (tiled: one kernel
// per 64 query rows, chunk_outputs.cuh; products: cuBLAS products and row passes). The JSON
// says which ("fused_features", "fused_outputs", "fused_states"). The causal block states
// likewise (--states fused: scanned as they are made, chunk_states.cuh; products: the cuBLAS
// product, then the scan). --single-pass on asks for the causal forward in one kernel
// (cuda_system::single_pass, causal_single_pass.cuh) where it applies (elu with Ω = I,
// causal, enough heads) and its backward in three walks over the chunks
// (causal_single_pass_grads.cuh): the record's single_pass_columns is the forward's column
// width, single_pass_grads_features and single_pass_grads_columns the backward walks'
// widths (forward+backward records), 0 where the multi-pass path ran. A benchmark, not a test.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <kattn/fwd.hpp>
#include <kattn/attention/linear_attention.hpp>
#include <kattn/backends/cuda.cuh>
#include <kattn/features/elu.hpp>
#include <kattn/features/favor.hpp>
#include <kattn/samplers/identity.hpp>
#include <kattn/samplers/orthogonal_gaussian.hpp>

#include "comma_list.hpp"
#include "cli_args.hpp"
#include "cuda_timing.cuh"

namespace {

using kattn::index_t;
namespace kb = kattn::backends;

struct options {
    std::vector<long> L{1024, 4096, 16384, 65536, 262144};
    long heads = 8, d = 64, m = 256, repeats = 5;
    double budget = 240;
    bool fla = true, favor = true, ceilings = true;
    bool float_rows = true, bf16_rows = true;              ///< --precision float|bf16|all
    bool full = true, causal = true;                       ///< --mask full|causal|all
    bool fused_features = true;                            ///< --three-pass: cuda_system::fused_features = false
    bool fused_outputs = kb::cuda_system{}.fused_outputs;  ///< --outputs tiled|products
    bool fused_states = kb::cuda_system{}.fused_states;    ///< --states fused|products
    bool single_pass = kb::cuda_system{}.single_pass;      ///< --single-pass on|off
    int passes = 2;                                        ///< --pass forward (1) | all (2: also forward+backward)
    std::string json;
};

using bench_cli::split;

options parse(int argc, char** argv) {
    options o;
    bench_cli::arguments args("bench_cuda", argc, argv);
    while (args.next()) {
        const std::string a = args.option();
        const auto next = [&] { return args.value(); };
        if (a == "--L") {
            o.L.clear();
            for (const auto& t : split(next())) o.L.push_back(std::stol(t));
        } else if (a == "--heads")
            o.heads = std::stol(next());
        else if (a == "--d")
            o.d = std::stol(next());
        else if (a == "--m")
            o.m = std::stol(next());
        else if (a == "--repeats")
            o.repeats = std::max(1L, std::stol(next()));
        else if (a == "--budget")
            o.budget = std::stod(next());
        else if (a == "--no-fla")
            o.fla = false;
        else if (a == "--no-favor")
            o.favor = false;
        else if (a == "--no-ceilings")
            o.ceilings = false;
        else if (a == "--three-pass")
            o.fused_features = false;
        else if (a == "--outputs") {
            const std::string v = next();
            if (v != "tiled" && v != "products") {
                std::fprintf(stderr, "bench_cuda: --outputs tiled|products, not %s\n", v.c_str());
                std::exit(2);
            }
            o.fused_outputs = v == "tiled";
        } else if (a == "--states") {
            const std::string v = next();
            if (v != "fused" && v != "products") {
                std::fprintf(stderr, "bench_cuda: --states fused|products, not %s\n", v.c_str());
                std::exit(2);
            }
            o.fused_states = v == "fused";
        } else if (a == "--single-pass") {
            const std::string v = next();
            if (v != "on" && v != "off") {
                std::fprintf(stderr, "bench_cuda: --single-pass on|off, not %s\n", v.c_str());
                std::exit(2);
            }
            o.single_pass = v == "on";
        } else if (a == "--pass") {
            const std::string v = next();
            if (v != "forward" && v != "all") {
                std::fprintf(stderr, "bench_cuda: --pass forward|all, not %s\n", v.c_str());
                std::exit(2);
            }
            o.passes = v == "forward" ? 1 : 2;
        } else if (a == "--precision") {
            const std::string v = next();
            o.float_rows = v == "float" || v == "all";
            o.bf16_rows = v == "bf16" || v == "all";
        } else if (a == "--mask") {
            const std::string v = next();
            o.full = v == "full" || v == "all";
            o.causal = v == "causal" || v == "all";
        } else if (a == "--json")
            o.json = next();
        else {
            std::fprintf(stderr,
                         "usage: bench_cuda [--L list] [--heads H] [--d D] [--m M] [--repeats R] "
                         "[--budget S] [--no-fla] [--no-favor] [--precision float|bf16|all] [--mask full|causal|all] "
                         "[--no-ceilings] [--three-pass] [--outputs tiled|products] [--states fused|products] "
                         "[--single-pass on|off] [--pass forward|all] "
                         "[--json PATH]\n");
            std::exit(a == "--help" || a == "-h" ? 0 : 2);
        }
    }
    return o;
}

using cuda_bench::check;
using cuda_bench::copy_bandwidth;
using cuda_bench::device_allocations;
using cuda_bench::hash_fill;
using cuda_bench::time_median;

/// cuBLAS TFLOP/s on n × n × n with the given data and compute types, on random operands.
double gemm_ceiling(cudaDataType_t type, std::size_t elem, cublasComputeType_t compute, long repeats) {
    const int n = 8192;
    void *A, *B, *C;
    const std::size_t bytes = std::size_t(n) * n * elem;
    check(cudaMalloc(&A, bytes), "cudaMalloc");
    check(cudaMalloc(&B, bytes), "cudaMalloc");
    check(cudaMalloc(&C, std::size_t(n) * n * 4), "cudaMalloc");
    // Random operands, not zeros: products of zeros run faster than real data.
    const kb::cuda_system sys{nullptr};
    const index_t count = index_t(n) * n;
    if (type == CUDA_R_16BF) {
        sys.launch(count, hash_fill<__nv_bfloat16>{static_cast<__nv_bfloat16*>(A), 11, 1.f});
        sys.launch(count, hash_fill<__nv_bfloat16>{static_cast<__nv_bfloat16*>(B), 12, 1.f});
    } else {
        sys.launch(count, hash_fill<float>{static_cast<float*>(A), 11, 1.f});
        sys.launch(count, hash_fill<float>{static_cast<float*>(B), 12, 1.f});
    }
    check(cudaDeviceSynchronize(), "operand fill");
    const cublasHandle_t h = kattn::detail::cublas_handle();
    cublasSetStream(h, nullptr);
    const float alpha = 1, beta = 0;
    const cudaDataType_t ctype = type == CUDA_R_16BF ? CUDA_R_32F : type;
    const double s = time_median(repeats, [&] {
        if (cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, A, type, n, B, type, n, &beta, C, ctype, n,
                         compute, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS)
            throw std::runtime_error("bench_cuda: cublasGemmEx (ceiling) failed");
    });
    cudaFree(A);
    cudaFree(B);
    cudaFree(C);
    return 2.0 * n * double(n) * n / s * 1e-12;
}

/// Median seconds of replays of f captured once into a CUDA graph on `stream`: the device's
/// time for the call without the host's launch and cuBLAS set-up between kernels.
template <class F>
double graph_median(long repeats, cudaStream_t stream, F&& f) {
    cudaGraph_t graph = nullptr;
    check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    try {
        f();
    } catch (...) {
        cudaStreamEndCapture(stream, &graph);
        if (graph) cudaGraphDestroy(graph);
        throw;
    }
    check(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
    cudaGraphExec_t exec = nullptr;
    const cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    check(inst, "cudaGraphInstantiate");
    double s = 0;
    try {
        s = time_median(
            repeats, [&] { check(cudaGraphLaunch(exec, stream), "cudaGraphLaunch"); }, stream);
    } catch (...) {
        cudaGraphExecDestroy(exec);
        throw;
    }
    cudaGraphExecDestroy(exec);
    return s;
}

/// Flops of the products the chunked algorithm executes (per call, all heads). With Ω = I
/// (identity) there is no projection, nor the input gradients' product with Ωᵀ; dΩ's
/// product remains where it is asked for (d_omega).
struct flop_model {
    double forward = 0, backward = 0;  ///< backward includes its recomputed forward
};
flop_model model(double BH, double L, double d, double P, double F, double dv, bool causal, bool identity,
                 bool d_omega) {
    const double dv1 = dv + 1, C = 64, project = identity ? 0 : 2 * 2 * L * d * P;
    double fw = project + 2 * 2 * L * F * dv1;
    double bw = 4 * 2 * L * F * dv1 + project + (d_omega ? 2 * 2 * L * d * P : 0);
    if (causal) {
        fw += 2 * L * C * F + 2 * L * C * dv1;
        bw += 2 * (2 * L * C * dv1) + 2 * (2 * L * C * F);
    }
    return {BH * fw, BH * (fw + bw)};
}

struct record {
    std::string op, map, precision;
    bool causal = false;
    long batch = 0, heads = 0, L = 0, d = 0, m = 0;
    double seconds = 0, tflops = 0, ceiling = 0, gbps = 0, copy_gbps = 0;
    double graph_seconds = 0;  ///< the call replayed from a CUDA graph; 0 if capture failed
    std::size_t peak_bytes = 0, workspace_bytes = 0;
    index_t single_pass_columns = 0;         ///< the forward's single-pass width; 0: the multi-pass path
    index_t single_pass_grads_features = 0;  ///< the dφ walks' width (forward+backward records); 0: multi-pass
    index_t single_pass_grads_columns = 0;   ///< dV's walk's width
    bool parameter_gradients = true;         ///< the backward computes dΩ (Ω = I: no)
};

template <class Map, class Sampler, class T>
void run_case(const options& o, const char* map, const char* precision, long B, long H, long L, long d, long m,
              bool causal, kb::float_gemm products, double ceiling, double copy_gbps, const cudaDeviceProp& prop,
              std::vector<record>& out) {
    using W = float;
    constexpr bool identity = std::is_same_v<Sampler, kattn::samplers::identity>;
    kattn::attention_config<Map, Sampler> cfg{.head_dim = d, .value_dim = d, .num_features = m, .seed = 1};
    if constexpr (identity && std::is_same_v<Map, kattn::features::elu>) {  // ELU + 1
        cfg.feature.floor = 0.0;
        cfg.feature.renormalize = false;
    }
    const kattn::linear_attention<Map, Sampler, kb::cuda, float> op(cfg);
    const cuda_bench::owned_stream stream;
    kb::cuda_system sys{stream.s, products};
    sys.fused_features = o.fused_features;
    sys.fused_outputs = o.fused_outputs;
    sys.fused_states = o.fused_states;
    sys.single_pass = o.single_pass;
    const kb::device_parameters<Map, W, kb::cuda_system> params(sys, op.spectral());
    const index_t n = B * H * L * d;
    cudaMemPool_t pool;
    check(cudaDeviceGetDefaultMemPool(&pool, 0), "cudaDeviceGetDefaultMemPool");
    device_allocations mem;  // freed on every exit, an exception's included
    std::vector<T*> bufs(7);
    for (auto& p : bufs) p = mem.get<T>(std::size_t(n), "cudaMalloc (inputs)");
    for (int i = 0; i < 4; ++i) sys.launch(n, hash_fill<T>{bufs[std::size_t(i)], std::uint64_t(i), i < 2 ? 0.5f : 1.f});
    T *q = bufs[0], *k = bufs[1], *v = bufs[2], *dout = bufs[3], *dq = bufs[4], *dk = bufs[5], *dv = bufs[6];
    T* outp = mem.get<T>(std::size_t(n), "cudaMalloc (out)");
    // dΩ: not with Ω = I (FLA's shapes: dq, dk and dv, as FLA's backward gives).
    W* dom = identity ? nullptr : mem.get<W>(std::size_t(d * op.omega().shape()[1]), "cudaMalloc (dΩ)");
    const kb::device_options opt{causal, nullptr, double(op.input_scale()), 1e-6};
    const auto cv = [&](const T* p) { return kb::head_major<const T>(p, B, H, L, d); };
    const auto mv = [&](T* p) { return kb::head_major<T>(p, B, H, L, d); };
    auto forward = [&] { kb::cuda::device_forward(sys, params, cv(q), cv(k), cv(v), mv(outp), opt); };
    auto step = [&] {
        forward();
        kb::cuda::device_backward(sys, params, cv(q), cv(k), cv(v), cv(dout), mv(dq), mv(dk), mv(dv), dom,
                                  static_cast<W*>(nullptr), opt);
    };
    const double P = double(Map::projection_dim(m)), F = double(Map::feature_dim(m));
    const flop_model fm =
        model(double(B * H), double(L), double(d), P, F, double(d), causal, params.identity(), dom != nullptr);
    const double io_bytes = double(n) * sizeof(T);
    for (int pass = 0; pass < o.passes; ++pass) {
        std::uint64_t zero = 0;
        check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero), "pool high-water reset");
        const double s = pass == 0 ? time_median(o.repeats, forward, stream.s) : time_median(o.repeats, step, stream.s);
        std::uint64_t high = 0;
        check(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &high), "pool high-water");
        record r;
        try {
            r.graph_seconds =
                pass == 0 ? graph_median(o.repeats, stream.s, forward) : graph_median(o.repeats, stream.s, step);
        } catch (const std::exception& e) {
            std::printf("(graph capture failed: %s)\n", e.what());
            check(cudaStreamSynchronize(stream.s), "after a failed capture");
        }
        r.op = pass == 0 ? "forward" : "forward+backward";
        r.map = map;
        r.precision = precision;
        r.causal = causal;
        r.batch = B, r.heads = H, r.L = L, r.d = d, r.m = m;
        r.seconds = s;
        r.tflops = (pass == 0 ? fm.forward : fm.forward + fm.backward) / s * 1e-12;
        r.ceiling = ceiling;
        r.gbps = (pass == 0 ? 4 : 2 * 4 + 3) * io_bytes / s * 1e-9;
        r.copy_gbps = copy_gbps;
        r.single_pass_columns = causal && params.identity() && !Map::has_stabiliser
                                    ? sys.single_pass_columns<W>(B * H, d, index_t(F), d)
                                    : 0;
        if (pass == 1 && r.single_pass_columns > 0) {
            const auto w = sys.single_pass_grads_widths<W>(B * H, d, index_t(F), d);
            r.single_pass_grads_features = w.features;
            r.single_pass_grads_columns = w.values;
        }
        r.parameter_gradients = dom != nullptr;
        r.peak_bytes = std::size_t(high) + std::size_t(8) * std::size_t(n) * sizeof(T);
        r.workspace_bytes = kb::cuda::device_workspace_bytes(
            sys, params, pass == 0 ? kb::device_pass::forward : kb::device_pass::backward, B, H, L, L, d, opt, false,
            dom != nullptr);
        out.push_back(r);
        std::printf(
            "%-6s %-10s %-17s %-6s B%-2ld H%-3ld L%-7ld d%-4ld m%-4ld %10.3f ms (graph %8.3f) %7.1f TFLOP/s %5.1f %% "
            "%7.0f GB/s %8.1f MiB (scratch %.1f MiB)%s\n",
            map, precision, r.op.c_str(), causal ? "causal" : "full", B, H, L, d, m, s * 1e3, r.graph_seconds * 1e3,
            r.tflops, ceiling > 0 ? 100 * r.tflops / ceiling : 0.0, r.gbps, double(r.peak_bytes) / (1 << 20),
            double(r.workspace_bytes) / (1 << 20),
            r.single_pass_columns == 0                     ? ""
            : pass == 0 || r.single_pass_grads_columns > 0 ? " single pass"
                                                           : " single-pass forward");
    }
    (void)prop;
}

// Writes the JSON file; called after every case, so a run stopped by a time limit keeps
// what it measured ("complete": false until the last case is done).
void write_json(const options& o, const cudaDeviceProp& prop, double tf32, double bf16, double fp32, double copy,
                const std::vector<record>& res, bool complete) {
    if (o.json.empty()) return;
    std::ofstream js(o.json);
    js << "{\n  \"benchmark\": \"bench_cuda\",\n  \"device\": \"" << prop.name
       << "\",\n  \"gemm_tf32_tflops\": " << tf32 << ",\n  \"gemm_bf16_tflops\": " << bf16
       << ",\n  \"gemm_fp32_tflops\": " << fp32 << ",\n  \"copy_gbps\": " << copy
       << ",\n  \"fused_features\": " << (o.fused_features ? "true" : "false")
       << ",\n  \"fused_outputs\": " << (o.fused_outputs ? "true" : "false")
       << ",\n  \"fused_states\": " << (o.fused_states ? "true" : "false")
       << ",\n  \"single_pass\": " << (o.single_pass ? "true" : "false") << ",\n  \"results\": [\n";
    for (std::size_t i = 0; i < res.size(); ++i) {
        const auto& r = res[i];
        js << "    {\"op\": \"linear_attention\", \"pass\": \"" << r.op << "\", \"map\": \"" << r.map
           << "\", \"causal\": " << (r.causal ? "true" : "false") << ", \"precision\": \"" << r.precision
           << "\", \"batch\": " << r.batch << ", \"heads\": " << r.heads << ", \"L\": " << r.L << ", \"d\": " << r.d
           << ", \"m\": " << r.m << ", \"seconds\": " << r.seconds << ", \"tflops\": " << r.tflops
           << ", \"gemm_ceiling_tflops\": " << r.ceiling << ", \"gbps\": " << r.gbps
           << ", \"copy_gbps\": " << r.copy_gbps << ", \"peak_device_bytes\": " << r.peak_bytes
           << ", \"workspace_bytes\": " << r.workspace_bytes << ", \"graph_seconds\": " << r.graph_seconds
           << ", \"single_pass_columns\": " << r.single_pass_columns
           << ", \"single_pass_grads_features\": " << r.single_pass_grads_features
           << ", \"single_pass_grads_columns\": " << r.single_pass_grads_columns
           << ", \"parameter_gradients\": " << (r.parameter_gradients ? "true" : "false") << ", \"device\": \""
           << prop.name << "\"}" << (i + 1 < res.size() ? "," : "") << "\n";
    }
    js << "  ],\n  \"complete\": " << (complete ? "true" : "false") << "\n}\n";
}

}  // namespace

int main(int argc, char** argv) {
    const options o = parse(argc, argv);
    cudaDeviceProp prop{};
    if (!cuda_bench::current_device(prop)) {
        std::fprintf(stderr, "bench_cuda: no CUDA device\n");
        return 1;
    }
    const auto start = std::chrono::steady_clock::now();
    const double tf32 = o.ceilings ? gemm_ceiling(CUDA_R_32F, 4, CUBLAS_COMPUTE_32F_FAST_TF32, o.repeats) : 0;
    const double bf16 = o.ceilings ? gemm_ceiling(CUDA_R_16BF, 2, CUBLAS_COMPUTE_32F, o.repeats) : 0;
    const double fp32 = o.ceilings ? gemm_ceiling(CUDA_R_32F, 4, CUBLAS_COMPUTE_32F, o.repeats) : 0;
    const double copy = o.ceilings ? copy_bandwidth(o.repeats) : 0;
    std::printf("%s (sm_%d%d, %.1f GiB): cuBLAS 8192^3 TF32 %.1f, BF16 %.1f, FP32 %.1f TFLOP/s; D2D copy %.0f GB/s\n",
                prop.name, prop.major, prop.minor, double(prop.totalGlobalMem) / (1 << 30), tf32, bf16, fp32, copy);
    std::printf("%% column: float rows of the TF32 ceiling (TF32 products), bf16 rows of the BF16 ceiling\n\n");
    std::vector<record> res;
    std::vector<std::string> skipped;
    write_json(o, prop, tf32, bf16, fp32, copy, res, false);
    std::vector<std::string> failed;
    // A case that throws (a kattn::error, cuBLAS or allocation failure) is reported and the
    // benchmark goes on with the next one.
    const auto guarded = [&](const std::string& name, auto&& run) {
        try {
            run();
        } catch (const std::exception& e) {
            std::printf("FAILED %s: %s\n", name.c_str(), e.what());
            failed.push_back(name + ": " + e.what());
        }
    };
    const auto over = [&] {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > o.budget;
    };
    const auto selected = [&](bool causal, int prec) {
        return (causal ? o.causal : o.full) && (prec == 0 ? o.float_rows : o.bf16_rows);
    };
    for (long L : o.favor ? o.L : std::vector<long>{})
        for (bool causal : {false, true})
            for (int prec = 0; prec < 2; ++prec) {
                if (!selected(causal, prec)) continue;
                if (over()) {
                    skipped.push_back("favor L=" + std::to_string(L));
                    continue;
                }
                if (prec == 0)
                    guarded("favor L=" + std::to_string(L) + (causal ? " causal" : " full"), [&] {
                        run_case<kattn::features::favor, kattn::samplers::orthogonal_gaussian, float>(
                            o, "favor", "float/tf32", 1, o.heads, L, o.d, o.m, causal, kb::float_gemm::tf32, tf32, copy,
                            prop, res);
                    });
                else
                    guarded("favor L=" + std::to_string(L) + (causal ? " causal" : " full"), [&] {
                        run_case<kattn::features::favor, kattn::samplers::orthogonal_gaussian, __nv_bfloat16>(
                            o, "favor", "bf16/bf16", 1, o.heads, L, o.d, o.m, causal, kb::float_gemm::bf16, bf16, copy,
                            prop, res);
                    });
                write_json(o, prop, tf32, bf16, fp32, copy, res, false);
            }
    if (o.fla) {
        const long shapes[3][4] = {{1, 8192, 96, 128}, {4, 4096, 64, 128}, {8, 1024, 8, 64}};
        for (const auto& s : shapes)
            for (int prec = 0; prec < 2; ++prec) {
                if (!selected(true, prec)) continue;
                if (over()) {
                    skipped.push_back("elu B" + std::to_string(s[0]) + " T" + std::to_string(s[1]));
                    continue;
                }
                if (prec == 0)
                    guarded("elu B" + std::to_string(s[0]) + " T" + std::to_string(s[1]), [&] {
                        run_case<kattn::features::elu, kattn::samplers::identity, float>(
                            o, "elu", "float/tf32", s[0], s[2], s[1], s[3], s[3], true, kb::float_gemm::tf32, tf32,
                            copy, prop, res);
                    });
                else
                    guarded("elu B" + std::to_string(s[0]) + " T" + std::to_string(s[1]), [&] {
                        run_case<kattn::features::elu, kattn::samplers::identity, __nv_bfloat16>(
                            o, "elu", "bf16/bf16", s[0], s[2], s[1], s[3], s[3], true, kb::float_gemm::bf16, bf16, copy,
                            prop, res);
                    });
                write_json(o, prop, tf32, bf16, fp32, copy, res, false);
            }
    }
    for (const auto& s : skipped) std::printf("skipped (budget %.0f s): %s\n", o.budget, s.c_str());
    for (const auto& f : failed) std::printf("failed: %s\n", f.c_str());
    write_json(o, prop, tf32, bf16, fp32, copy, res, true);
    if (!o.json.empty()) std::printf("\nwrote %s\n", o.json.c_str());
    return failed.empty() ? 0 : 1;
}
