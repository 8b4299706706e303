// bench/bench_attention.cpp — throughput benchmark for kattn's attention operators.
//
// A benchmark, not a test: nothing here asserts on timing. For every combination of the
// --threads, --d, --m and --L lists (B = --batch, H = --heads, dv = d unless --dv is given),
// it times:
//
//   kattn            linear_attention<Map, Map::default_sampler, backends::simd, float>, non-causal and causal
//   kattn_reference  the same with backends::reference (scalar, double inside; L <= 4096 only)
//   softmax          kattn::softmax_attention<float> (exact, O(L²); skipped above a length / time budget)
//   fma_peak         the physical FMA ceiling of the thread count (bench/fma_peak.hpp: register-only
//                    fused multiply-adds on every thread), measured before and after each thread
//                    count's cases; the better of the two is the peak, and every timed record gets
//                    peak_fraction = its GFLOP/s / that peak. A build whose kernels are dispatched
//                    from the kernel library (bench_attention_portable) measures the peak at the
//                    library's instruction set
//   sgemm            OpenBLAS cblas_sgemm with the same thread count: a square M=N=K problem
//                    (measured before and after each thread count's cases; the better of the two is
//                    the SGEMM ceiling, sgemm_fraction) and, per (L, d, m), the projection-shaped
//                    problem (B·H·L) × m × d
//
// Passes: `forward` is one call of operator(). `forward_backward` is a training step: the
// forward (the output a loss needs), then backward() giving ∂q, ∂k, ∂v (and ∂Ω, ∂b for
// kattn); kattn's forward keeps a saved_state that its backward reuses, softmax's backward
// recomputes what it needs. `backward_saved` (kattn simd) is that backward call alone, the
// state made beforehand. Times include allocating the outputs / gradients.
//
// FLOP model (identical for every op of the same kind, so ratios compare like with like; per head):
//   linear forward   2·L·d·P (Q projection) + 2·L·d·P (K projection) + 2·L·F·dv (contraction ΦKᵀV)
//                    + 2·L·F·dv (output ΦQ·S), P = projection columns (= m; a paired map's m already
//                    counts both halves of each pair), F = feature_dim (favor m, trig 2m, …)
//   softmax forward  4·L²·d  (QKᵀ and PV; d = dv here), halved when causal
//   forward_backward 3 × forward FLOPs (forward + a backward of twice the forward's FLOPs;
//                    whatever a backward recomputes is not credited a second time)
//   backward_saved   2 × forward FLOPs
//   sgemm            2·M·N·K
// Activation (exp/sin/…) and normalisation costs are not counted. Causal linear attention is
// credited the same FLOPs as non-causal.
//
// The reported time is the median of --repeats runs after one warm-up run; when the warm-up
// shows a case would exceed --budget seconds, fewer repeats are taken (the count is reported).
// The slowest of those runs is kept too (seconds_max): a thread pool that wakes late shows there.
// --after-blas: before every run of a kattn or softmax case (untimed), one 256×256×256
// cblas_sgemm with the same thread count, so each timed call starts right after OpenBLAS's
// threads have worked (and, in OpenBLAS's pthreads build, while they still spin); bench/
// shared_machine uses it with a competing busy process to measure kattn on a shared machine.
//
// Memory: before each case the process's peak-RSS counter is reset (Linux: "5" written to
// /proc/self/clear_refs resets VmHWM), and after it VmHWM is read, so peak_rss_bytes is the
// peak of that case alone (it includes what was resident before it: the process, the inputs;
// rss_before_bytes says how much that was). Where the reset is refused the process
// high-water mark (getrusage) is reported instead and the record says so.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <sys/resource.h>

#include <omp.h>

#include <cblas.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <kattn/kattn.hpp>
#include <kattn/attention/softmax_attention.hpp>

#include "comma_list.hpp"
#include "fma_peak.hpp"
#include "procfs.hpp"

namespace {

using clock_type = std::chrono::steady_clock;
using kattn_bench::cpu_model;
using kattn_bench::proc_status_bytes;
using kattn_bench::reset_peak_rss;
using kattn_bench::utc_now;
using tensor4 = xt::xtensor<float, 4>;

// ------------------------------------------------------------------ options / records

struct options {
    std::vector<long> lengths{256, 1024, 4096, 16384, 65536};
    std::vector<long> ds{64}, ms{256};
    std::vector<int> thread_counts{0};                    // 0 = all
    long d = 64, dv = 64, m = 256, heads = 8, batch = 1;  // the current (d, m) of the sweep
    long dv_fixed = 0;                                    // --dv; 0: dv = d
    int threads = 0;                                      // the current thread count
    int repeats = 5;
    double budget = 120.0;      // seconds per (op, map, causal, pass, L) case, warm-up included
    double softmax_budget = 0;  // 0: same as budget
    long reference_max_L = 4096;
    long softmax_max_L = 16384;
    long sgemm_size = 2048;
    bool quick = false, no_reference = false, no_softmax = false, no_causal = false, after_blas = false;
    std::vector<std::string> maps{"favor"};
    std::string json_file;
    std::string commit;
    std::uint64_t seed = 42;
};

struct record {
    std::string op, map, pass, note;
    bool causal = false;
    long L = 0, d = 0, dv = 0, m = 0, heads = 0, batch = 0;
    int threads = 0, repeats = 0;
    double seconds = NAN, seconds_max = NAN, flops = NAN, gflops = NAN, sgemm_fraction = NAN, peak_fraction = NAN,
           tokens_per_s = NAN;
    long long peak_rss_bytes = 0, rss_before_bytes = 0;
    bool rss_is_case_peak = false;
    bool skipped = false;
    long sgemm_M = 0, sgemm_N = 0, sgemm_K = 0;
};

long process_peak_rss_bytes() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    return long(ru.ru_maxrss) * 1024;  // Linux reports KiB
}

std::string cpu_flags_summary() {
    std::ifstream f("/proc/cpuinfo");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind("flags", 0) == 0) {
            std::string out;
            for (const char* fl : {"avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_bf16"})
                if (line.find(std::string(" ") + fl) != std::string::npos)
                    out += (out.empty() ? "" : " ") + std::string(fl);
            return out;
        }
    return "";
}

std::string compiler() {
#if defined(__clang__)
    return std::string("clang ") + __clang_version__;
#elif defined(__GNUC__)
    return std::string("gcc ") + __VERSION__;
#else
    return "unknown";
#endif
}

// ------------------------------------------------------------------ timing

struct timing {
    double median = 0, max = 0;
    int repeats = 0;
};

/// Runs fn once (warm-up) and then up to `repeats` times, fewer when the warm-up says
/// the case would exceed `budget` seconds; `before` (when given) runs untimed before each.
/// Returns the median and the slowest of the timed runs, and their number.
timing time_runs(const std::function<void()>& fn, int repeats, double budget,
                 const std::function<void()>& before = {}) {
    auto once = [&] {
        if (before) before();
        const auto t0 = clock_type::now();
        fn();
        return std::chrono::duration<double>(clock_type::now() - t0).count();
    };
    const double warm = once();
    int n = repeats;
    if (warm > 0 && warm * (1 + repeats) > budget) n = std::max(1, int((budget - warm) / warm));
    std::vector<double> ts;
    for (int r = 0; r < n; ++r) ts.push_back(once());
    std::sort(ts.begin(), ts.end());
    const double med = ts.size() % 2 ? ts[ts.size() / 2] : 0.5 * (ts[ts.size() / 2 - 1] + ts[ts.size() / 2]);
    return {med, ts.back(), n};
}

// ------------------------------------------------------------------ inputs

tensor4 random_tensor(long B, long H, long L, long D, std::uint64_t seed, std::uint64_t stream, float scale) {
    tensor4 x = tensor4::from_shape({std::size_t(B), std::size_t(H), std::size_t(L), std::size_t(D)});
    const kattn::random_stream rs(seed, kattn::streams::user + stream);
    float* p = x.data();
    const long n = long(x.size());
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; ++i) p[i] = scale * float(rs.normal(std::uint64_t(i)));
    return x;
}

struct inputs {
    tensor4 q, k, v, dout;
};

// ------------------------------------------------------------------ FLOP model

template <class Map>
double linear_forward_flops(const options& o, long L, bool identity = false) {
    const double P = double(Map::projection_dim(Map::uses_pairs ? o.m / 2 : o.m));
    const double F = double(Map::feature_dim(Map::uses_pairs ? o.m / 2 : o.m));
    // Ω = I (the identity sampler): no projection is made, none is counted.
    const double per_head = (identity ? 0.0 : 2.0 * 2.0 * L * o.d * P) + 2.0 * 2.0 * L * F * o.dv;
    return per_head * double(o.heads * o.batch);
}

double softmax_forward_flops(const options& o, long L, bool causal) {
    // 2·L²·d for QKᵀ + 2·L²·dv for PV; with d = dv this is the 4·L²·d of the model.
    const double f = 2.0 * double(L) * L * o.d + 2.0 * double(L) * L * o.dv;
    return (causal ? 0.5 : 1.0) * f * double(o.heads * o.batch);
}

// ------------------------------------------------------------------ the benchmark

class bench {
public:
    explicit bench(options o) : o_(std::move(o)) {}
    /// The current (threads, d, dv, m) of the sweep.
    void set_shape(int threads, long d, long dv, long m) {
        o_.threads = threads;
        o_.d = d;
        o_.dv = dv;
        o_.m = m;
    }
    static std::string fmt(double x, int prec) {
        std::ostringstream s;
        s.setf(std::ios::fixed);
        s.precision(prec);
        s << x;
        return s.str();
    }

    std::vector<record> records;
    double ceiling_gflops = NAN;
    double peak_gflops = NAN;  ///< the FMA peak of the current thread count

    /// Measures the FMA peak of the current thread count and records it (op "fma_peak").
    double fma_peak(const std::string& label) {
        record r = base("fma_peak", label, false, "forward", 0);
        r.heads = r.batch = r.d = r.dv = r.m = 0;
        start_case(r);
        // A build without -march whose kernels run from the kernel library (bench_attention_portable)
        // is measured against the FMA peak of the library's instruction set, not its own SSE2.
        const auto p = kattn::backends::simd::dispatched()
                           ? kattn_bench::measure_fma_peak_isa(kattn::backends::simd::isa(), threads())
                           : kattn_bench::measure_fma_peak(threads());
        r.seconds = p.seconds;
        r.flops = p.flops;
        r.repeats = 3;
        r.note = "checksum " + fmt(double(p.checksum), 3) + (label == "peak_end" ? "; drift check" : "");
        r.peak_fraction = std::isnan(peak_gflops) ? 1.0 : p.gflops / peak_gflops;
        finish(r);
        return records.back().gflops;
    }

    record base(const std::string& op, const std::string& map, bool causal, const std::string& pass, long L) const {
        record r;
        r.op = op;
        r.map = map;
        r.causal = causal;
        r.pass = pass;
        r.L = L;
        r.d = o_.d;
        r.dv = o_.dv;
        r.m = o_.m;
        r.heads = o_.heads;
        r.batch = o_.batch;
        r.threads = threads();
        return r;
    }

    int threads() const { return o_.threads > 0 ? o_.threads : omp_get_max_threads(); }

    void finish(record& r) {
        if (!r.skipped) {
            r.gflops = r.flops / r.seconds * 1e-9;
            r.tokens_per_s = r.op == "sgemm" || r.op == "fma_peak" ? NAN : double(r.batch * r.L) / r.seconds;
        }
        if (r.rss_is_case_peak) {
            r.peak_rss_bytes = proc_status_bytes("VmHWM");
        } else {
            r.peak_rss_bytes = process_peak_rss_bytes();
            if (!r.skipped) r.note += std::string(r.note.empty() ? "" : "; ") + "peak RSS: process high-water mark";
        }
        records.push_back(r);
        print_row(records.back(), false);
    }

    /// Starts a case: resets the peak-RSS counter and notes the resident size before it.
    void start_case(record& r) {
        r.rss_before_bytes = proc_status_bytes("VmRSS");
        r.rss_is_case_peak = reset_peak_rss() && proc_status_bytes("VmHWM") > 0;
    }

    void skip(record r, const std::string& why) {
        r.skipped = true;
        r.note = why;
        finish(r);
    }

    // ---- SGEMM ------------------------------------------------------------------------
    double sgemm(long M, long N, long K, const std::string& label, long L) {
        std::vector<float> A(std::size_t(M * K)), Bm(std::size_t(K * N)), C(std::size_t(M * N));
        const kattn::random_stream rs(o_.seed, kattn::streams::user + 100);
        for (std::size_t i = 0; i < A.size(); ++i) A[i] = float(rs.normal(i));
        for (std::size_t i = 0; i < Bm.size(); ++i) Bm[i] = float(rs.normal(A.size() + i));
        record r = base("sgemm", label, false, "forward", L);
        r.sgemm_M = M;
        r.sgemm_N = N;
        r.sgemm_K = K;
        r.d = K;
        r.m = N;
        r.heads = 0;
        r.flops = 2.0 * double(M) * N * K;
        start_case(r);
        // Small problems: batch several calls per timed run so one run is >= ~20 ms.
        const int inner = std::max(1, int(0.02 / (r.flops / 50e9)));
        const auto [t, t_max, n] = time_runs(
            [&] {
                for (int i = 0; i < inner; ++i)
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(M), int(N), int(K), 1.0f, A.data(),
                                int(K), Bm.data(), int(N), 0.0f, C.data(), int(N));
            },
            std::max(o_.repeats, 5), o_.budget);
        r.seconds = t / inner;
        r.seconds_max = t_max / inner;
        r.repeats = n;
        if (inner > 1) r.note = "x" + std::to_string(inner) + " calls per run";
        if (label == "square_end") r.note += std::string(r.note.empty() ? "" : "; ") + "drift check";
        r.sgemm_fraction = std::isnan(ceiling_gflops) ? 1.0 : (r.flops / r.seconds * 1e-9) / ceiling_gflops;
        r.peak_fraction = (r.flops / r.seconds * 1e-9) / peak_gflops;
        finish(r);
        return records.back().gflops;
    }

    // ---- linear attention -------------------------------------------------------------
    /// With the identity sampler, num_features is head_dim whatever the sweep's m (the
    /// records say so) and the flops leave out the projection.
    template <class Map, class Backend, class Sampler = typename Map::default_sampler>
    void linear(const std::string& op, const std::string& name, const inputs& in, long L, bool causal) {
        using attn_t = kattn::linear_attention<Map, Sampler, Backend, float>;
        constexpr bool identity = std::is_same_v<Sampler, kattn::samplers::identity>;
        struct restore_m {
            long& m;
            long was;
            ~restore_m() { m = was; }
        } keep{o_.m, o_.m};
        if (identity) o_.m = o_.d;
        kattn::attention_config cfg{.head_dim = o_.d, .value_dim = o_.dv, .num_features = o_.m, .seed = o_.seed};
        cfg.check_finite = false;  // hot path: inputs are known finite
        const attn_t attn(cfg);
        const double fwd = linear_forward_flops<Map>(o_, L, identity);
        using state_t = typename attn_t::saved_state;
        const auto forward = [&](state_t& s) {
            return causal ? attn(in.q, in.k, in.v, kattn::causal, s) : attn(in.q, in.k, in.v, s);
        };
        const auto backward = [&](const state_t& s) {
            return causal ? attn.backward(in.q, in.k, in.v, in.dout, kattn::causal, s)
                          : attn.backward(in.q, in.k, in.v, in.dout, s);
        };
        // backward_saved: the backward call of a step alone (only where the backend keeps state).
        constexpr bool saves = kattn::execution_backend_traits<Backend>::saves_forward_state;
        for (const char* pass : {"forward", "forward_backward", "backward_saved"}) {
            const std::string ps = pass;
            if (ps == "backward_saved" && !saves) continue;
            record r = base(op, name, causal, pass, L);
            r.flops = ps == "forward_backward" ? 3.0 * fwd : ps == "backward_saved" ? 2.0 * fwd : fwd;
            state_t kept;
            if (ps == "backward_saved") (void)forward(kept);
            std::function<void()> fn;
            if (ps == "forward" && !causal) fn = [&] { auto out = attn(in.q, in.k, in.v); };
            if (ps == "forward" && causal) fn = [&] { auto out = attn(in.q, in.k, in.v, kattn::causal); };
            if (ps == "forward_backward")
                fn = [&] {
                    state_t s;
                    auto out = forward(s);
                    auto g = backward(s);
                };
            if (ps == "backward_saved") fn = [&] { auto g = backward(kept); };
            run_case(r, fn);
        }
    }

    // ---- softmax ----------------------------------------------------------------------
    void softmax(const inputs& in, long L, bool causal) {
        kattn::softmax_config scfg;
        scfg.check_finite = false;  // hot path: inputs are known finite
        const kattn::softmax_attention<float> attn(scfg);
        const double fwd = softmax_forward_flops(o_, L, causal);
        for (const char* pass : {"forward", "forward_backward"}) {
            record r = base("softmax", "exact", causal, pass, L);
            const bool bwd = std::string(pass) == "forward_backward";
            r.flops = bwd ? 3.0 * fwd : fwd;
            if (L > o_.softmax_max_L) {
                skip(r, "L > " + std::to_string(o_.softmax_max_L) + " (quadratic)");
                continue;
            }
            // Estimate one run from the last measured softmax rate of this (pass, causal).
            const auto key =
                std::string(pass) + (causal ? "c" : "n") + std::to_string(threads()) + "/" + std::to_string(o_.d);
            const double rate = softmax_rate_.count(key) ? softmax_rate_[key] : 5e9;
            const double est = r.flops / rate;
            const double budget = o_.softmax_budget > 0 ? o_.softmax_budget : o_.budget;
            if (est * 2 > budget) {
                std::ostringstream s;
                s.precision(3);
                s << "est. " << est << " s/run > budget/2";
                skip(r, s.str());
                continue;
            }
            std::function<void()> fn;
            if (!bwd && !causal) fn = [&] { auto out = attn(in.q, in.k, in.v); };
            if (!bwd && causal) fn = [&] { auto out = attn(in.q, in.k, in.v, kattn::causal); };
            // A training step: the output (for the loss), then the gradients.
            if (bwd && !causal)
                fn = [&] {
                    auto out = attn(in.q, in.k, in.v);
                    auto g = attn.backward(in.q, in.k, in.v, in.dout);
                };
            if (bwd && causal)
                fn = [&] {
                    auto out = attn(in.q, in.k, in.v, kattn::causal);
                    auto g = attn.backward(in.q, in.k, in.v, in.dout, kattn::causal);
                };
            run_case(r, fn, budget);
            if (!records.back().skipped) softmax_rate_[key] = r.flops / records.back().seconds;
        }
    }

    void run_case(record& r, const std::function<void()>& fn, double budget = 0) {
        start_case(r);
        try {
            std::function<void()> before;
            std::vector<float> a, c;
            if (o_.after_blas) {
                a.assign(256 * 256, 0.5f);
                c.assign(256 * 256, 0.0f);
                before = [&] {
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 256, 256, 256, 1.0f, a.data(), 256, a.data(),
                                256, 0.0f, c.data(), 256);
                };
                r.note += std::string(r.note.empty() ? "" : "; ") + "after a 256^3 sgemm";
            }
            const auto [t, t_max, n] = time_runs(fn, o_.repeats, budget > 0 ? budget : o_.budget, before);
            r.seconds = t;
            r.seconds_max = t_max;
            r.repeats = n;
            r.sgemm_fraction = (r.flops / t * 1e-9) / ceiling_gflops;
            r.peak_fraction = (r.flops / t * 1e-9) / peak_gflops;
        } catch (const std::exception& e) {
            r.skipped = true;
            r.note = std::string("error: ") + e.what();
        }
        finish(r);
    }

    // ---- output -------------------------------------------------------------------------
    static void print_header() {
        std::printf("%-15s %-23s %-6s %-16s %6s %4s %4s %5s %3s %3s %11s %9s %7s %7s %11s %9s  %s\n", "op", "map",
                    "causal", "pass", "L", "d", "m", "heads", "thr", "rep", "median_s", "GFLOP/s", "%peak", "%SGEMM",
                    "tokens/s", "peakRSS", "note");
    }
    static void print_row(const record& r, bool) {
        char sec[32], gf[32], fr[32], pk[32], tok[32];
        if (r.skipped) {
            std::snprintf(sec, sizeof sec, "%s", "skipped");
            std::snprintf(gf, sizeof gf, "-");
            std::snprintf(fr, sizeof fr, "-");
            std::snprintf(pk, sizeof pk, "-");
            std::snprintf(tok, sizeof tok, "-");
        } else {
            std::snprintf(sec, sizeof sec, "%.3e", r.seconds);
            std::snprintf(gf, sizeof gf, "%.1f", r.gflops);
            auto pct = [](char* buf, std::size_t n, double x) {
                if (std::isnan(x))
                    std::snprintf(buf, n, "-");
                else
                    std::snprintf(buf, n, "%.1f%%", 100.0 * x);
            };
            pct(fr, sizeof fr, r.op == "fma_peak" ? NAN : r.sgemm_fraction);
            pct(pk, sizeof pk, r.peak_fraction);
            if (std::isnan(r.tokens_per_s))
                std::snprintf(tok, sizeof tok, "-");
            else
                std::snprintf(tok, sizeof tok, "%.3e", r.tokens_per_s);
        }
        std::printf("%-15s %-23s %-6s %-16s %6ld %4ld %4ld %5ld %3d %3d %11s %9s %7s %7s %11s %7.0fMB  %s\n",
                    r.op.c_str(), r.map.c_str(), r.causal ? "yes" : "no", r.pass.c_str(), r.L, r.d, r.m, r.heads,
                    r.threads, r.repeats, sec, gf, pk, fr, tok, double(r.peak_rss_bytes) / (1 << 20), r.note.c_str());
        std::fflush(stdout);
    }

private:
    options o_;
    std::map<std::string, double> softmax_rate_;
};

// ------------------------------------------------------------------ map dispatch

using linear_fn = void (*)(bench&, const std::string&, const std::string&, const inputs&, long, bool, bool);

template <class Map, class Sampler = typename Map::default_sampler>
void run_map(bench& b, const std::string& op, const std::string& name, const inputs& in, long L, bool causal,
             bool reference) {
    if (reference)
        b.linear<Map, kattn::backends::reference, Sampler>(op, name, in, L, causal);
    else
        b.linear<Map, kattn::backends::simd, Sampler>(op, name, in, L, causal);
}

/// --maps name -> (name recorded in the results, runner).
const std::map<std::string, std::pair<std::string, linear_fn>>& map_table() {
    namespace f = kattn::features;
    static const std::map<std::string, std::pair<std::string, linear_fn>> t{
        {"favor", {"favor", &run_map<f::favor>}},
        {"favor_hyperbolic", {"favor_hyperbolic", &run_map<f::favor_hyperbolic>}},
        {"trig", {"trig", &run_map<f::trig>}},
        {"elu", {"elu", &run_map<f::elu>}},
        // The classic linear transformer, ELU(x) + 1: Ω = I, num_features = d.
        {"elu_identity", {"elu+identity", &run_map<f::elu, kattn::samplers::identity>}},
        {"nonstationary", {"nonstationary", &run_map<f::nonstationary>}},
        {"positive_nonstationary", {"positive<nonstationary>", &run_map<f::positive<f::nonstationary>>}},
        {"positive<nonstationary>", {"positive<nonstationary>", &run_map<f::positive<f::nonstationary>>}},
        {"softmax_features", {"softmax_features", &run_map<f::softmax_features>}},
    };
    return t;
}

nlohmann::json to_json(const record& r) {
    auto num = [](double x) -> nlohmann::json {
        return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr);
    };
    nlohmann::json j{
        {"op", r.op},
        {"map", r.map},
        {"causal", r.causal},
        {"pass", r.pass},
        {"L", r.L},
        {"d", r.d},
        {"dv", r.dv},
        {"m", r.m},
        {"heads", r.heads},
        {"batch", r.batch},
        {"threads", r.threads},
        {"repeats", r.repeats},
        {"seconds", num(r.seconds)},
        {"seconds_max", num(r.seconds_max)},
        {"flops", num(r.flops)},
        {"gflops", num(r.gflops)},
        {"sgemm_fraction", num(r.sgemm_fraction)},
        {"peak_fraction", num(r.peak_fraction)},
        {"tokens_per_s", num(r.tokens_per_s)},
        {"peak_rss_bytes", r.peak_rss_bytes},
        {"rss_before_bytes", r.rss_before_bytes},
        {"peak_rss_is_per_case", r.rss_is_case_peak},
        {"skipped", r.skipped},
        {"note", r.note},
    };
    if (r.op == "sgemm") j["sgemm_shape"] = {r.sgemm_M, r.sgemm_N, r.sgemm_K};
    return j;
}

using bench_cli::split;

template <class T>
std::vector<T> parse_list(const std::string& s, const char* what) {
    std::vector<T> out;
    for (const auto& x : split(s)) {
        const long v = std::stol(x);
        if (v < 0) throw std::invalid_argument(std::string(what) + ": negative value " + x);
        out.push_back(T(v));
    }
    if (out.empty()) throw std::invalid_argument(std::string(what) + ": empty list");
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    options o;
    CLI::App app{"kattn attention benchmark: linear (simd, reference), exact softmax, and an SGEMM ceiling"};
    std::string lengths_arg, maps_arg, d_arg, m_arg, threads_arg;
    app.add_option("--L", lengths_arg, "comma-separated sequence lengths (default 256,1024,4096,16384,65536)");
    app.add_option("--d", d_arg, "query/key head dimension(s), comma-separated (default 64)");
    app.add_option("--dv", o.dv_fixed, "value dimension (default: = d)")->check(CLI::PositiveNumber);
    app.add_option("--m", m_arg, "num_features (columns of Omega; paired maps: both halves), comma-separated (256)");
    app.add_option("--heads", o.heads, "heads")->check(CLI::PositiveNumber);
    app.add_option("--batch", o.batch, "batch size")->check(CLI::PositiveNumber);
    app.add_option("--threads", threads_arg,
                   "thread count(s) for OpenMP and OpenBLAS, comma-separated; 0 = all (default: all)");
    app.add_option("--repeats", o.repeats, "timed runs per case after 1 warm-up; the median is reported")
        ->check(CLI::PositiveNumber);
    app.add_option("--budget", o.budget, "seconds per case (warm-up included): fewer repeats, or skip softmax");
    app.add_option("--softmax-budget", o.softmax_budget, "seconds per softmax case (default: --budget)");
    app.add_option("--maps", maps_arg,
                   "comma-separated maps: favor,favor_hyperbolic,trig,elu,elu_identity (m = d),nonstationary,"
                   "positive_nonstationary,softmax_features");
    app.add_option("--reference-max-L", o.reference_max_L, "largest L for the reference backend");
    app.add_option("--softmax-max-L", o.softmax_max_L, "largest L for exact softmax attention");
    app.add_option("--sgemm-size", o.sgemm_size, "M=N=K of the square SGEMM ceiling");
    app.add_option("--seed", o.seed, "seed for Omega and the inputs");
    app.add_option("--json", o.json_file, "write the records as JSON to this file");
    app.add_option("--commit", o.commit, "source revision to record in the JSON");
    app.add_flag("--quick", o.quick, "L <= 4096 and 3 repeats");
    app.add_flag("--no-reference", o.no_reference, "skip the reference backend");
    app.add_flag("--no-softmax", o.no_softmax, "skip exact softmax attention");
    app.add_flag("--no-causal", o.no_causal, "only non-causal attention");
    app.add_flag("--after-blas", o.after_blas, "run a 256^3 cblas_sgemm (untimed) before every kattn/softmax run");
    CLI11_PARSE(app, argc, argv);

    const int all_threads = omp_get_max_threads();
    try {
        if (!lengths_arg.empty()) o.lengths = parse_list<long>(lengths_arg, "--L");
        if (!d_arg.empty()) o.ds = parse_list<long>(d_arg, "--d");
        if (!m_arg.empty()) o.ms = parse_list<long>(m_arg, "--m");
        if (!threads_arg.empty()) o.thread_counts = parse_list<int>(threads_arg, "--threads");
    } catch (const std::exception& e) {
        std::cerr << e.what() << "\n";
        return 2;
    }
    for (auto& t : o.thread_counts)
        if (t == 0) t = all_threads;
    for (long x : o.ds)
        if (x < 1) return std::cerr << "--d must be >= 1\n", 2;
    for (long x : o.ms)
        if (x < 1) return std::cerr << "--m must be >= 1\n", 2;
    if (!maps_arg.empty()) o.maps = split(maps_arg);
    for (const auto& mp : o.maps)
        if (!map_table().count(mp)) {
            std::cerr << "unknown map '" << mp << "'\n";
            return 2;
        }
    if (o.quick) {
        std::erase_if(o.lengths, [](long L) { return L > 4096; });
        if (app.count("--repeats") == 0) o.repeats = 3;
    }

    const std::string cpu = cpu_model(), date = utc_now();
    std::printf(
        "# kattn bench_attention  %s\n# cpu: %s [%s], %d logical CPUs, simd kernels: %s (%s; compiled for %s)\n"
        "# compiler: %s\n# openblas: %s\n",
        date.c_str(), cpu.c_str(), cpu_flags_summary().c_str(), omp_get_num_procs(),
        std::string(kattn::backends::simd::isa()).c_str(),
        kattn::backends::simd::dispatched() ? "dispatched at run time" : "compiled in", xsimd::default_arch::name(),
        compiler().c_str(), openblas_get_config());
    std::printf("# B=%ld H=%ld float; median of %d after 1 warm-up; budget %.0f s/case\n", o.batch, o.heads, o.repeats,
                o.budget);
    std::printf(
        "# forward_backward = a training step: the forward (kattn: keeping a saved_state), then backward() "
        "(kattn: with it); FLOPs credited = 3x forward. backward_saved = that backward call alone (2x)\n\n");

    bench b(o);
    bench::print_header();
    nlohmann::json ceilings = nlohmann::json::object(), end_ceilings = nlohmann::json::object();
    nlohmann::json peaks = nlohmann::json::object(), peaks_start_end = nlohmann::json::object();
    for (int threads : o.thread_counts) {
        omp_set_num_threads(threads);
        openblas_set_num_threads(threads);
        b.set_shape(threads, o.ds.front(), o.dv_fixed ? o.dv_fixed : o.ds.front(), o.ms.front());
        b.peak_gflops = NAN;
        b.peak_gflops = b.fma_peak("peak");
        b.ceiling_gflops = NAN;
        b.ceiling_gflops = b.sgemm(o.sgemm_size, o.sgemm_size, o.sgemm_size, "square", 0);
        const std::size_t first_record = b.records.size() - 2;  // the two ceilings are rated too
        for (long d : o.ds)
            for (long m : o.ms) {
                const long dv = o.dv_fixed ? o.dv_fixed : d;
                b.set_shape(threads, d, dv, m);
                for (long L : o.lengths) {
                    const float s = 1.0f;  // N(0,1) entries: scale·q·k = q·k/√d has unit variance
                    inputs in{random_tensor(o.batch, o.heads, L, d, o.seed, 0, s),
                              random_tensor(o.batch, o.heads, L, d, o.seed, 1, s),
                              random_tensor(o.batch, o.heads, L, dv, o.seed, 2, 1.0f),
                              random_tensor(o.batch, o.heads, L, dv, o.seed, 3, 1.0f)};
                    // Projection-shaped SGEMM: all (B·H·L) rows of Q times Ω (d × m).
                    b.sgemm(o.batch * o.heads * L, m, d, "proj", L);
                    for (bool causal : {false, true}) {
                        if (causal && o.no_causal) continue;
                        for (const auto& mp : o.maps) {
                            const auto& [name, fn] = map_table().at(mp);
                            fn(b, "kattn", name, in, L, causal, false);
                        }
                        if (!o.no_reference)
                            for (const auto& mp : o.maps) {
                                const auto& [name, fn] = map_table().at(mp);
                                if (L > o.reference_max_L) {
                                    for (const char* pass : {"forward", "forward_backward"})
                                        b.skip(b.base("kattn_reference", name, causal, pass, L),
                                               "L > " + std::to_string(o.reference_max_L) + " (scalar oracle)");
                                    continue;
                                }
                                fn(b, "kattn_reference", name, in, L, causal, true);
                            }
                        if (!o.no_softmax) b.softmax(in, L, causal);
                    }
                }
            }
        // The square SGEMM again after this thread count's cases: on a shared machine either run
        // can be disturbed, so the ceiling is the better of the two, and the fractions of this
        // thread count's records are recomputed against it (never flattering kattn).
        const double start = b.ceiling_gflops;
        const double end = b.sgemm(o.sgemm_size, o.sgemm_size, o.sgemm_size, "square_end", 0);
        const double ceiling = std::max(start, end);
        const double peak_start = b.peak_gflops;
        const double peak_end = b.fma_peak("peak_end");
        const double peak = std::max(peak_start, peak_end);
        for (std::size_t i = first_record; i < b.records.size(); ++i) {
            auto& r = b.records[i];
            if (r.skipped) continue;
            r.sgemm_fraction = r.gflops / ceiling;
            r.peak_fraction = r.gflops / peak;
        }
        ceilings[std::to_string(threads)] = ceiling;
        end_ceilings[std::to_string(threads)] = {start, end};
        peaks[std::to_string(threads)] = peak;
        peaks_start_end[std::to_string(threads)] = {peak_start, peak_end};
        std::printf(
            "# FMA peak, %d threads: %.1f GFLOP/s (before the cases %.1f, after %.1f); SGEMM ceiling: %.1f "
            "GFLOP/s = %.0f%% of the peak (before %.1f, after %.1f); %%peak and %%SGEMM of the rows above are "
            "printed against the first measurements, stored against the better\n",
            threads, peak, peak_start, peak_end, ceiling, 100.0 * ceiling / peak, start, end);
    }

    // Crossover: smallest measured L at which kattn (simd, first map) is faster than softmax,
    // per (threads, d, m, causal, pass), with a log-log interpolation between the bracketing lengths.
    nlohmann::json crossovers = nlohmann::json::array();
    const std::string first_map = map_table().at(o.maps.front()).first;
    for (int threads : o.thread_counts)
        for (long d : o.ds)
            for (long m : o.ms)
                for (bool causal : {false, true})
                    for (const char* pass : {"forward", "forward_backward"}) {
                        if (causal && o.no_causal) continue;
                        std::vector<std::pair<long, double>> ratio;  // L, t_kattn / t_softmax
                        for (long L : o.lengths) {
                            const record *lin = nullptr, *sm = nullptr;
                            for (const auto& r : b.records)
                                if (r.L == L && r.causal == causal && r.pass == pass && !r.skipped &&
                                    r.threads == threads && r.d == d && r.m == m) {
                                    if (r.op == "kattn" && r.map == first_map) lin = &r;
                                    if (r.op == "softmax") sm = &r;
                                }
                            if (lin && sm) ratio.emplace_back(L, lin->seconds / sm->seconds);
                        }
                        if (ratio.empty()) continue;
                        nlohmann::json c{{"causal", causal},   {"pass", pass}, {"map", first_map},
                                         {"threads", threads}, {"d", d},       {"m", m}};
                        std::string text = "not reached in the measured lengths";
                        for (std::size_t i = 0; i < ratio.size(); ++i)
                            if (ratio[i].second < 1) {
                                c["first_faster_L"] = ratio[i].first;
                                text = "kattn faster from L = " + std::to_string(ratio[i].first);
                                if (i > 0) {
                                    const double x0 = std::log(double(ratio[i - 1].first));
                                    const double x1 = std::log(double(ratio[i].first));
                                    const double y0 = std::log(ratio[i - 1].second), y1 = std::log(ratio[i].second);
                                    const double Lx = std::exp(x0 + (0 - y0) * (x1 - x0) / (y1 - y0));
                                    c["interpolated_L"] = Lx;
                                    text += " (log-log interpolated crossover L ~ " +
                                            std::to_string(long(std::lround(Lx))) + ")";
                                } else {
                                    text += " (the shortest length measured)";
                                }
                                break;
                            }
                        c["ratios"] = ratio;
                        crossovers.push_back(c);
                        std::printf("# crossover %s vs softmax (%d threads, d=%ld, m=%ld, %s, %s): %s\n",
                                    first_map.c_str(), threads, d, m, causal ? "causal" : "non-causal", pass,
                                    text.c_str());
                    }

    if (!o.json_file.empty()) {
        nlohmann::json j;
        j["machine"] = {{"cpu", cpu},
                        {"cpu_flags", cpu_flags_summary()},
                        {"logical_cpus", omp_get_num_procs()},
                        {"simd_arch", std::string(kattn::backends::simd::isa())},
                        {"simd_dispatched", kattn::backends::simd::dispatched()},
                        {"compiled_arch", xsimd::default_arch::name()},
                        {"openblas", openblas_get_config()}};
        j["date"] = date;
        j["compiler"] = compiler();
        j["commit"] = o.commit;
        std::vector<std::string> map_names;
        for (const auto& mp : o.maps) map_names.push_back(map_table().at(mp).first);
        j["config"] = {{"lengths", o.lengths},
                       {"d", o.ds},
                       {"dv", o.dv_fixed ? nlohmann::json(o.dv_fixed) : nlohmann::json("d")},
                       {"m", o.ms},
                       {"heads", o.heads},
                       {"batch", o.batch},
                       {"threads", o.thread_counts},
                       {"repeats", o.repeats},
                       {"budget_s", o.budget},
                       {"maps", map_names},
                       {"quick", o.quick},
                       {"after_blas", o.after_blas},
                       {"seed", o.seed}};
        nlohmann::json env = nlohmann::json::object();  // the thread pools' settings this run had
        for (const char* k : {"OMP_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "OMP_PROC_BIND",
                              "OPENBLAS_NUM_THREADS", "OPENBLAS_THREAD_TIMEOUT"})
            if (const char* v = std::getenv(k)) env[k] = v;
        j["environment"] = env;
        j["fma_peak_gflops"] = peaks;
        j["fma_peak_start_end_gflops"] = peaks_start_end;
        j["sgemm_ceiling_gflops"] = ceilings;
        j["sgemm_ceiling_start_end_gflops"] = end_ceilings;
        j["crossovers"] = crossovers;
        j["notes"] = {
            "seconds: median of `repeats` timed runs after one warm-up; seconds_max: the slowest of them",
            "forward_backward: one backward() call, which recomputes the forward and runs the backward; credited 3x "
            "forward FLOPs",
            "flops (per head): linear 2*L*d*P for Q and for K, 2*L*F*dv contraction, 2*L*F*dv output; softmax "
            "4*L^2*d, halved when causal; sgemm 2*M*N*K",
            "sgemm_fraction: gflops / sgemm_ceiling_gflops[threads]: the better of the square SGEMM measured before "
            "and after that thread count's cases, same thread count, same run",
            "peak_rss_bytes: VmHWM of the case alone (reset through /proc/self/clear_refs before it), including what "
            "was resident before it (rss_before_bytes: the process and the inputs); peak_rss_is_per_case false: "
            "getrusage high-water mark of the process"};
        nlohmann::json recs = nlohmann::json::array();
        for (const auto& r : b.records) recs.push_back(to_json(r));
        j["records"] = recs;
        std::ofstream f(o.json_file);
        f << j.dump(2) << "\n";
        std::printf("# wrote %s\n", o.json_file.c_str());
    }
    return 0;
}
