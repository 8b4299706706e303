// bench/chunked_scratch.cpp — the scratch memory of the chunked (CUDA) backend's calls,
// exactly, on any machine.
//
// For bench_cuda's shapes and calls (favor, B1 H8 d64 m256, L = 1k … 256k, with dΩ; FLA's
// shapes with ELU + 1 and m = d, dq, dk and dv only) prints the peak bytes a device-resident forward and backward hold at once
// (chunked<S>::device_workspace_bytes: the call's own sequence of allocations, counted,
// each rounded to 256 bytes), in MiB and as a multiple of one float input tensor
// (q: B·H·L·d floats). Nothing runs on a GPU: the figures are those of cuda_system (its
// per-call copies of packed tables are counted; none here), for float data. With
// --single-pass, the system answers as cuda_system with single_pass set would on a device
// of --sms multiprocessors and --shared-kib KiB of shared memory per block (default: an
// H200's 132 and 227): the causal calls of elu with Ω = I then take the single passes
// (docs/cuda_backend.md §2), whose widths these limits decide.
//
//   chunked_scratch [--single-pass] [--sms N] [--shared-kib K] [--json FILE]
//
// JSON: {records: [{map, causal, pass, batch, heads, L, d, m, workspace_bytes, input_bytes}]}.
#include <cstdio>
#include <fstream>
#include <string>
#include <type_traits>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <kattn/attention/linear_attention.hpp>
#include <kattn/backends/chunked.hpp>
#include <kattn/features/elu.hpp>
#include <kattn/features/favor.hpp>
#include <kattn/samplers/identity.hpp>
#include <kattn/samplers/orthogonal_gaussian.hpp>
#include <kattn/backends/single_pass_plan.hpp>

namespace {

namespace kb = kattn::backends;
using kattn::index_t;

/// host_system that allocates a copy for mirror(), as cuda_system does: the sizes below
/// are those of a GPU call.
struct gpu_like_system : kb::host_system {
    static constexpr bool mirror_copies = true;
    /// cuda_system's defaults: the two fused kernels off (host_system has them on).
    gpu_like_system() {
        fused_outputs = false;
        fused_states = false;
    }
    /// cuda_system::single_pass on a device with these limits (0 multiprocessors: off).
    index_t sms = 0;
    std::size_t shared_limit = 0;
    template <class W>
    index_t single_pass_columns(index_t problems, index_t d, index_t F, index_t dv) const {
        return sms > 0 ? kattn::detail::single_pass_width(problems, d, F, dv, sms, shared_limit) : 0;
    }
    template <class W>
    kattn::detail::single_pass_grads_widths single_pass_grads_widths(index_t problems, index_t d, index_t F,
                                                                     index_t dv) const {
        if (sms == 0) return {};
        return kattn::detail::single_pass_grads_plan(problems, d, F, dv, sms, shared_limit);
    }
    // Sizing only: the query never launches anything.
    template <class Job>
    void launch_causal_single_pass(const Job&) const {}
    template <class Job>
    void launch_single_pass_grads(const Job&) const {}
};

template <class Map, class Sampler>
void measure(const gpu_like_system& sys, const char* map, index_t B, index_t H, index_t L, index_t d, index_t m,
             nlohmann::json& out) {
    // As bench_cuda runs them: FLA's shapes as ELU + 1 (elu, Ω = I, floor 0, no
    // renormalisation) with dq, dk and dv only; favor with dΩ.
    constexpr bool identity = std::is_same_v<Sampler, kattn::samplers::identity>;
    kattn::attention_config<Map, Sampler> cfg{.head_dim = d, .value_dim = d, .num_features = m, .seed = 1};
    if constexpr (identity && std::is_same_v<Map, kattn::features::elu>) {
        cfg.feature.floor = 0.0;
        cfg.feature.renormalize = false;
    }
    const kattn::linear_attention<Map, Sampler, kb::chunked<kb::host_system>, float> op(cfg);
    const kb::device_parameters<Map, float, gpu_like_system> params(sys, op.spectral());
    const double input = double(B * H * L * d) * sizeof(float);
    for (bool causal : {false, true})
        for (auto pass : {kb::device_pass::forward, kb::device_pass::backward}) {
            const kb::device_options o{causal, nullptr, double(op.input_scale()), 1e-6};
            const std::size_t bytes = kb::chunked<gpu_like_system>::device_workspace_bytes(sys, params, pass, B, H, L,
                                                                                           L, d, o, false, !identity);
            const char* pname = pass == kb::device_pass::forward ? "forward" : "backward";
            std::printf("%-6s %-7s %-8s B%-2ld H%-3ld L%-7ld d%-4ld m%-4ld %10.1f MiB %6.1f x q\n", map,
                        causal ? "causal" : "full", pname, long(B), long(H), long(L), long(d), long(m),
                        double(bytes) / (1 << 20), double(bytes) / input);
            out.push_back({{"map", map},
                           {"causal", causal},
                           {"pass", pname},
                           {"batch", B},
                           {"heads", H},
                           {"L", L},
                           {"d", d},
                           {"m", m},
                           {"single_pass", sys.sms > 0},
                           {"parameter_gradients", !identity},
                           {"workspace_bytes", bytes},
                           {"input_bytes", input}});
        }
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"scratch memory of the chunked backend's device-resident calls"};
    std::string json;
    bool single_pass = false;
    long sms = 132, shared_kib = 227;
    app.add_option("--json", json, "write the records here");
    app.add_flag("--single-pass", single_pass, "size the causal single passes where they apply");
    app.add_option("--sms", sms, "multiprocessors of the device (--single-pass)")->check(CLI::Range(1, 100000));
    app.add_option("--shared-kib", shared_kib, "shared memory per block in KiB (--single-pass)")
        ->check(CLI::Range(1, 1 << 20));
    CLI11_PARSE(app, argc, argv);
    gpu_like_system sys{};
    if (single_pass) {
        sys.sms = index_t(sms);
        sys.shared_limit = std::size_t(shared_kib) << 10;
    }
    nlohmann::json records = nlohmann::json::array();
    for (index_t L : {1024, 4096, 16384, 65536, 262144})
        measure<kattn::features::favor, kattn::samplers::orthogonal_gaussian>(sys, "favor", 1, 8, L, 64, 256, records);
    const index_t fla[3][4] = {{1, 8192, 96, 128}, {4, 4096, 64, 128}, {8, 1024, 8, 64}};
    for (const auto& s : fla)
        measure<kattn::features::elu, kattn::samplers::identity>(sys, "elu", s[0], s[2], s[1], s[3], s[3], records);
    if (!json.empty()) {
        std::ofstream(json) << nlohmann::json{{"benchmark", "chunked_scratch"}, {"records", records}}.dump(1) << "\n";
        std::printf("wrote %s\n", json.c_str());
    }
    return 0;
}
