// bench/bench_thrust.cu — GPU throughput of the Thrust backend (built with -Dcuda=enabled).
//
//   bench_thrust [--L 1024,4096,16384,65536] [--heads 8] [--d 64] [--m 256] [--repeats 3]
//                [--work float,double] [--budget 150] [--json PATH]
//
// linear_attention<favor, orthogonal_gaussian, backends::thrust<thrust::device_t, Work>, float>
// with B = 1, H heads, head dim d = value dim, m features; passes forward and backward, non-
// causal and causal. Times are wall-clock medians of --repeats calls after one warm-up call,
// through the public operator API: they INCLUDE the host→device copies of the inputs and the
// device→host copies of the results (docs/thrust_backend.md, transfer model), and the
// allocation of the device buffers. The FLOP model is bench_attention's: forward per head
// 4·L·d·P (projections) + 4·L·F·dv (contraction and output); backward 2× forward (the
// recomputed forward inside backward() is not counted). A benchmark, not a test.
// When the elapsed time passes --budget seconds, the remaining cases are skipped (reported).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include <kattn/fwd.hpp>
#include <kattn/attention/linear_attention.hpp>
#include <kattn/backends/thrust.hpp>
#include <kattn/features/favor.hpp>
#include <kattn/samplers/orthogonal_gaussian.hpp>

#include "comma_list.hpp"

namespace {

using clock_type = std::chrono::steady_clock;
using tensor4 = xt::xtensor<float, 4>;

struct options {
    std::vector<long> L{1024, 4096, 16384, 65536};
    long heads = 8, d = 64, m = 256, repeats = 3;
    std::vector<std::string> work{"float", "double"};
    double budget = 150;
    std::string json;
};

using bench_cli::split;

options parse(int argc, char** argv) {
    options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "bench_thrust: %s needs a value\n", a.c_str());
                std::exit(2);
            }
            return argv[++i];
        };
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
        else if (a == "--work")
            o.work = split(next());
        else if (a == "--budget")
            o.budget = std::stod(next());
        else if (a == "--json")
            o.json = next();
        else {
            std::fprintf(stderr,
                         "usage: bench_thrust [--L list] [--heads H] [--d D] [--m M] [--repeats R] "
                         "[--work float,double] [--budget S] [--json PATH]\n");
            std::exit(a == "--help" || a == "-h" ? 0 : 2);
        }
    }
    return o;
}

/// Cheap deterministic inputs: a splitmix64 hash → sum of 4 uniforms − 2 (≈ N(0, 1/3)).
tensor4 inputs(std::size_t H, std::size_t L, std::size_t d, std::uint64_t seed, float sd) {
    tensor4 x = tensor4::from_shape({1, H, L, d});
    for (std::size_t i = 0; i < x.size(); ++i) {
        std::uint64_t z = seed * 0x9E3779B97F4A7C15ull + i;
        float s = 0;
        for (int r = 0; r < 4; ++r) {
            z += 0x9E3779B97F4A7C15ull;
            std::uint64_t y = z;
            y = (y ^ (y >> 30)) * 0xBF58476D1CE4E5B9ull;
            y = (y ^ (y >> 27)) * 0x94D049BB133111EBull;
            y ^= y >> 31;
            s += float(y >> 40) * (1.0f / 16777216.0f);
        }
        x.data()[i] = sd * 1.7320508f * (s - 2.0f);
    }
    return x;
}

struct result {
    std::string work, pass;
    bool causal;
    long L;
    double seconds = 0, gflops = 0, transfer_mb = 0;
    long repeats = 0;
    bool skipped = false;
};

template <class F>
double median_time(F&& f, long repeats, long& done) {
    f();  // warm-up (allocations, first-touch, module load)
    std::vector<double> t;
    for (long r = 0; r < repeats; ++r) {
        const auto t0 = clock_type::now();
        f();
        t.push_back(std::chrono::duration<double>(clock_type::now() - t0).count());
    }
    std::sort(t.begin(), t.end());
    done = repeats;
    return t[t.size() / 2];
}

template <class Work>
void run_work(const options& o, const char* wname, clock_type::time_point start, std::vector<result>& out) {
    using backend = kattn::backends::thrust<kattn::backends::thrust<>::policy_type, Work>;
    using attn_t =
        kattn::linear_attention<kattn::features::favor, kattn::samplers::orthogonal_gaussian, backend, float>;
    const attn_t attn(kattn::attention_config{.head_dim = o.d, .value_dim = o.d, .num_features = o.m, .seed = 1});
    const double P = double(o.m), F = double(attn.feature_dim()), d = double(o.d), dv = double(o.d);
    for (long L : o.L) {
        const std::size_t H = std::size_t(o.heads), sl = std::size_t(L), sd = std::size_t(o.d);
        const tensor4 q = inputs(H, sl, sd, 1, 0.5f), k = inputs(H, sl, sd, 2, 0.5f), v = inputs(H, sl, sd, 3, 1.0f),
                      G = inputs(H, sl, sd, 4, 1.0f);
        const double fwd_flops = double(o.heads) * (4.0 * L * d * P + 4.0 * L * F * dv);
        const double mb_in = 4.0 * 3 * q.size() / 1e6;
        for (const char* pass : {"forward", "backward"})
            for (bool causal : {false, true}) {
                result r{wname, pass, causal, L};
                const bool bwd = std::string(pass) == "backward";
                r.transfer_mb = bwd ? mb_in * 2 + 4.0 * q.size() / 1e6 : mb_in + 4.0 * q.size() / 1e6;
                if (std::chrono::duration<double>(clock_type::now() - start).count() > o.budget) {
                    r.skipped = true;
                    out.push_back(r);
                    std::printf("%-7s %-9s %-7s %8ld   skipped (budget)\n", wname, pass, causal ? "causal" : "full", L);
                    continue;
                }
                long done = 0;
                if (!bwd)
                    r.seconds = median_time(
                        [&] {
                            const auto y = causal ? attn(q, k, v, kattn::causal) : attn(q, k, v);
                            (void)y;
                        },
                        o.repeats, done);
                else
                    r.seconds = median_time(
                        [&] {
                            const auto g =
                                causal ? attn.backward(q, k, v, G, kattn::causal) : attn.backward(q, k, v, G);
                            (void)g;
                        },
                        o.repeats, done);
                r.repeats = done;
                r.gflops = (bwd ? 2 : 1) * fwd_flops / r.seconds / 1e9;
                out.push_back(r);
                std::printf("%-7s %-9s %-7s %8ld %12.3f %10.1f %10.1f\n", wname, pass, causal ? "causal" : "full", L,
                            r.seconds * 1e3, r.gflops, r.transfer_mb);
                std::fflush(stdout);
            }
    }
}

}  // namespace

int main(int argc, char** argv) {
    const options o = parse(argc, argv);
    int dev = 0;
    cudaDeviceProp prop{};
    if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
        std::fprintf(stderr, "bench_thrust: no CUDA device\n");
        return 1;
    }
    std::printf("kattn thrust backend on %s (sm_%d%d, %.1f GiB); favor, float data, B=1, H=%ld, d=dv=%ld, m=%ld\n",
                prop.name, prop.major, prop.minor, double(prop.totalGlobalMem) / (1 << 30), o.heads, o.d, o.m);
    std::printf("times: median of %ld after 1 warm-up, host<->device copies included\n\n", o.repeats);
    std::printf("%-7s %-9s %-7s %8s %12s %10s %10s\n", "work", "pass", "mask", "L", "time_ms", "GFLOP/s", "copy_MB");
    const auto start = clock_type::now();
    std::vector<result> res;
    for (const auto& w : o.work) {
        if (w == "float")
            run_work<float>(o, "float", start, res);
        else if (w == "double")
            run_work<double>(o, "double", start, res);
        else
            std::fprintf(stderr, "bench_thrust: unknown --work %s (float, double)\n", w.c_str());
    }
    if (!o.json.empty()) {
        std::ofstream js(o.json);
        js << "{\n  \"benchmark\": \"bench_thrust\",\n  \"device\": \"" << prop.name << "\",\n  \"sm\": " << prop.major
           << prop.minor << ",\n  \"map\": \"favor\",\n  \"heads\": " << o.heads << ",\n  \"d\": " << o.d
           << ",\n  \"m\": " << o.m << ",\n  \"includes_transfers\": true,\n  \"results\": [\n";
        for (std::size_t i = 0; i < res.size(); ++i) {
            const auto& r = res[i];
            js << "    {\"work\": \"" << r.work << "\", \"pass\": \"" << r.pass
               << "\", \"causal\": " << (r.causal ? "true" : "false") << ", \"L\": " << r.L
               << ", \"skipped\": " << (r.skipped ? "true" : "false") << ", \"seconds\": " << r.seconds
               << ", \"gflops\": " << r.gflops << ", \"repeats\": " << r.repeats
               << ", \"transfer_mb\": " << r.transfer_mb << "}" << (i + 1 < res.size() ? "," : "") << "\n";
        }
        js << "  ]\n}\n";
        std::printf("\nwrote %s\n", o.json.c_str());
    }
    return 0;
}
