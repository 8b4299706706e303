// bench/bench_packed.cpp — packed documents (cu_seqlens) against the two ways around them.
//
// A batch of documents of different lengths, total L tokens per head, run three ways with
// the simd backend (favor, float, H heads, d = d_v, m features):
//   packed    one call on [1, H, L, d] with kattn::packed_sequences{cu}
//   padded    one call on [N, H, max_len, d] with kattn::key_lengths (what a batch layout
//             needs: the padded rows are computed too, as queries, and masked as keys)
//   per_doc   one call per document on [1, H, len_i, d]
// each as a forward and as a training step (forward with a saved_state, then backward),
// causal and not. Lengths are drawn log-uniformly in [min_len, max_len] from a fixed seed
// (the last document takes what is left). Reports the median seconds of `repeats` runs after
// one warm-up and tokens per second (real tokens, L·H per call).
//
//   bench_packed [--L 16384] [--heads 8] [--d 64] [--m 256] [--min-len 64] [--max-len 4096]
//                [--threads 1,2] [--repeats 5] [--json FILE]
//
// JSON: {impl, cpu, date, documents, lengths, records: [{layout, causal, pass, threads, L,
// heads, d, m, seconds, tokens_per_s, padded_tokens}]}.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <omp.h>
#include <xtensor/xtensor.hpp>

#include <kattn/kattn.hpp>

#include "procfs.hpp"
#include "timing.hpp"

namespace {

using kattn::index_t;
using attn_t = kattn::linear_attention<kattn::features::favor>;
using tensor4 = xt::xtensor<float, 4>;

tensor4 random_tensor(std::array<std::size_t, 4> shape, std::uint64_t seed, float sd) {
    tensor4 x = tensor4::from_shape(shape);
    std::mt19937_64 g(seed);
    std::normal_distribution<float> n(0.0f, sd);
    for (auto& e : x) e = n(g);
    return x;
}

/// Document lengths, log-uniform in [lo, hi], summing to L.
std::vector<index_t> draw_lengths(index_t L, index_t lo, index_t hi, std::uint64_t seed) {
    std::mt19937_64 g(seed);
    std::uniform_real_distribution<double> u(std::log(double(lo)), std::log(double(hi)));
    std::vector<index_t> len;
    for (index_t used = 0; used < L;) {
        const index_t n = std::min(L - used, index_t(std::exp(u(g))));
        len.push_back(n);
        used += n;
    }
    return len;
}

/// Rows [b, b + n) of every head of x [1, H, L, w], as a [1, H, n, w] tensor.
tensor4 rows(const tensor4& x, index_t b, index_t n) {
    const std::size_t H = x.shape()[1], L = x.shape()[2], w = x.shape()[3];
    tensor4 r = tensor4::from_shape({1, H, std::size_t(n), w});
    for (std::size_t h = 0; h < H; ++h)
        std::copy_n(x.data() + (h * L + std::size_t(b)) * w, std::size_t(n) * w, r.data() + h * std::size_t(n) * w);
    return r;
}

/// x [1, H, L, w] as [N, H, max_len, w], document i in batch entry i, zero-padded.
tensor4 padded(const tensor4& x, const std::vector<index_t>& cu, index_t max_len) {
    const std::size_t H = x.shape()[1], L = x.shape()[2], w = x.shape()[3], N = cu.size() - 1;
    tensor4 r = xt::zeros<float>({N, H, std::size_t(max_len), w});
    for (std::size_t i = 0; i < N; ++i)
        for (std::size_t h = 0; h < H; ++h)
            std::copy_n(x.data() + (h * L + std::size_t(cu[i])) * w, std::size_t(cu[i + 1] - cu[i]) * w,
                        r.data() + ((i * H + h) * std::size_t(max_len)) * w);
    return r;
}

}  // namespace

int main(int argc, char** argv) {
    index_t L = 16384, H = 8, d = 64, m = 256, min_len = 64, max_len = 4096;
    std::vector<int> threads{1, 2};
    int repeats = 5;
    std::string json_file;
    CLI::App app("kattn packed documents (cu_seqlens) against padding and per-document calls");
    app.add_option("--L", L, "tokens per head, all documents");
    app.add_option("--heads", H, "heads");
    app.add_option("--d", d, "head and value dimension");
    app.add_option("--m", m, "random features");
    app.add_option("--min-len", min_len, "shortest document");
    app.add_option("--max-len", max_len, "longest document");
    app.add_option("--threads", threads, "OpenMP thread counts")->delimiter(',');
    app.add_option("--repeats", repeats, "timed runs per case (median)");
    app.add_option("--json", json_file, "write the records as JSON to this file");
    CLI11_PARSE(app, argc, argv);

    const auto len = draw_lengths(L, min_len, max_len, 7);
    std::vector<index_t> cu{0};
    for (const index_t n : len) cu.push_back(cu.back() + n);
    const index_t longest = *std::max_element(len.begin(), len.end());
    const auto N = std::size_t(len.size()), sH = std::size_t(H), sL = std::size_t(L), sd = std::size_t(d);
    const tensor4 q = random_tensor({1, sH, sL, sd}, 1, 0.5f), k = random_tensor({1, sH, sL, sd}, 2, 0.5f);
    const tensor4 v = random_tensor({1, sH, sL, sd}, 3, 1.0f), G = random_tensor({1, sH, sL, sd}, 4, 1.0f);
    const tensor4 qp = padded(q, cu, longest), kp = padded(k, cu, longest), vp = padded(v, cu, longest),
                  Gp = padded(G, cu, longest);
    std::vector<tensor4> qd, kd, vd, Gd;
    for (std::size_t i = 0; i < N; ++i) {
        qd.push_back(rows(q, cu[i], len[i]));
        kd.push_back(rows(k, cu[i], len[i]));
        vd.push_back(rows(v, cu[i], len[i]));
        Gd.push_back(rows(G, cu[i], len[i]));
    }
    const attn_t a(kattn::attention_config<>{.head_dim = d, .value_dim = d, .num_features = m, .seed = 1});
    const kattn::packed_sequences docs{cu};
    const kattn::key_lengths kl(len);
    std::cout << "documents: " << N << " (lengths " << *std::min_element(len.begin(), len.end()) << ".." << longest
              << "), L = " << L << " per head, H = " << H << ", d = " << d << ", m = " << m << "; padded layout: " << N
              << " x " << longest << " = " << N * std::size_t(longest) << " rows\n";

    nlohmann::json records = nlohmann::json::array();
    for (const int th : threads) {
        omp_set_num_threads(th);
        for (const bool causal : {false, true})
            for (const bool step : {false, true}) {
                double base = 0;
                for (const std::string layout : {"packed", "padded", "per_doc"}) {
                    attn_t::saved_state s;
                    auto run = [&](const tensor4& qq, const tensor4& kk, const tensor4& vv, const tensor4& gg,
                                   auto... opt) {
                        if (!step) {
                            if (causal)
                                (void)a(qq, kk, vv, kattn::causal, opt...);
                            else
                                (void)a(qq, kk, vv, opt...);
                            return;
                        }
                        if (causal) {
                            (void)a(qq, kk, vv, kattn::causal, opt..., s);
                            (void)a.backward(qq, kk, vv, gg, kattn::causal, opt..., s);
                        } else {
                            (void)a(qq, kk, vv, opt..., s);
                            (void)a.backward(qq, kk, vv, gg, opt..., s);
                        }
                    };
                    const double sec = kattn_bench::median_seconds(
                        [&] {
                            if (layout == "packed") run(q, k, v, G, docs);
                            if (layout == "padded") run(qp, kp, vp, Gp, kl);
                            if (layout == "per_doc")
                                for (std::size_t i = 0; i < N; ++i) run(qd[i], kd[i], vd[i], Gd[i]);
                        },
                        repeats);
                    if (layout == "packed") base = sec;
                    const char* pass = step ? "step" : "forward";
                    std::cout << "threads " << th << (causal ? " causal    " : " non-causal") << " " << pass << "\t"
                              << layout << "\t" << sec * 1e3 << " ms\t" << double(L * H) / sec / 1e6 << " Mtok/s\t"
                              << sec / base << "x packed\n";
                    records.push_back({{"layout", layout},
                                       {"causal", causal},
                                       {"pass", pass},
                                       {"threads", th},
                                       {"L", L},
                                       {"heads", H},
                                       {"d", d},
                                       {"m", m},
                                       {"seconds", sec},
                                       {"tokens_per_s", double(L * H) / sec},
                                       {"padded_tokens", layout == "padded" ? index_t(N) * longest : L}});
                }
            }
    }
    if (!json_file.empty()) {
        std::ofstream f(json_file);
        if (!f) return std::cerr << "bench_packed: cannot write '" << json_file << "'\n", 2;
        const nlohmann::json doc{{"impl", "kattn"},
                                 {"cpu", kattn_bench::cpu_model()},
                                 {"date", kattn_bench::utc_now()},
                                 {"documents", N},
                                 {"lengths", len},
                                 {"records", records}};
        f << doc.dump(1) << "\n";
    }
}
