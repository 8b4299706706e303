// examples/long_context.cpp — causal favor attention, forward and backward, over one long
// sequence split across MPI ranks (kattn::dist::sequence_parallel; docs/distributed.md).
//
//   mpirun -np 4 build/examples/long_context --length 1000000 --json long_context.json
//
// Rank r generates only its own slice of q, k, v and ∂out (counter-based Philox streams
// indexed by the global token position, so the slices concatenate to the one sequence),
// runs the distributed forward and backward, and reports its wall time, the share of it
// spent in collectives, the bytes it handed to them and its peak resident memory. With
// --check (default when the whole sequence fits: --length ≤ 2^21), rank 0 also computes
// the single-process operator on the whole sequence, gathers every slice's results and
// reports the largest relative difference, and both results' error against the operator in
// double; the run fails (exit 3) unless the split output is as accurate as the single
// process's (within 4× its error + 1e-6). --json FILE: one record per rank.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <kattn/dist/mpi_communicator.hpp>
#include <kattn/dist/sequence_parallel.hpp>
#include <kattn/kattn.hpp>

using kattn::index_t;
using tensor = xt::xtensor<float, 4>;

namespace {

/// Tokens [off, off + n) of a [1, H, L, dim] tensor drawn from stream `stream`.
tensor slice_tensor(index_t H, index_t L, index_t off, index_t n, index_t dim, std::uint64_t stream, double sd) {
    tensor x = tensor::from_shape({1, std::size_t(H), std::size_t(n), std::size_t(dim)});
    const kattn::random_stream rs(2026, kattn::streams::user + stream);
#pragma omp parallel for schedule(static)
    for (index_t h = 0; h < H; ++h)
        for (index_t t = 0; t < n; ++t)
            for (index_t c = 0; c < dim; ++c)
                x.data()[(h * n + t) * dim + c] = float(sd * rs.normal(std::uint64_t((h * L + off + t) * dim + c)));
    return x;
}

std::uint64_t peak_rss_bytes() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    return std::uint64_t(ru.ru_maxrss) * 1024;
}

/// Rank 0 receives every rank's slice of x into the whole-sequence layout [1, H, L, dim].
tensor gather_slices(const tensor& part, index_t H, index_t L, index_t dim, const std::vector<index_t>& offs,
                     const std::vector<index_t>& lens, MPI_Comm comm, int me) {
    const int N = int(lens.size());
    tensor whole;
    if (me == 0) whole = tensor::from_shape({1, std::size_t(H), std::size_t(L), std::size_t(dim)});
    for (index_t h = 0; h < H; ++h) {
        std::vector<int> counts(static_cast<std::size_t>(N)), displs(static_cast<std::size_t>(N));
        for (int r = 0; r < N; ++r) {
            counts[std::size_t(r)] = int(lens[std::size_t(r)] * dim);
            displs[std::size_t(r)] = int(offs[std::size_t(r)] * dim);
        }
        MPI_Gatherv(part.data() + h * lens[std::size_t(me)] * dim, counts[std::size_t(me)], MPI_FLOAT,
                    me == 0 ? whole.data() + h * L * dim : nullptr, counts.data(), displs.data(), MPI_FLOAT, 0, comm);
    }
    return whole;
}

template <class A, class B>
double rel_diff(const A& a, const B& b) {
    if (a.size() == 0 && b.size() == 0) return 0.0;  // e.g. d_omega of a fixed Ω
    double num = 0, den = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        num = std::max(num, std::abs(double(a.data()[i]) - double(b.data()[i])));
        den = std::max(den, std::abs(double(b.data()[i])));
    }
    return num / den;
}

}  // namespace

int main(int argc, char** argv) {
    kattn::dist::mpi_environment env(argc, argv);
    kattn::dist::mpi_communicator comm;
    const int N = comm.size(), me = comm.rank();

    CLI::App app{"kattn: causal favor attention over one long sequence split across MPI ranks"};
    index_t length = 1000000, heads = 2, dim = 64, features = 128;
    int check = -1;
    bool non_causal = false;
    std::string json;
    app.add_option("--length", length, "tokens of the whole sequence")->check(CLI::PositiveNumber);
    app.add_option("--heads", heads, "attention heads")->check(CLI::PositiveNumber);
    app.add_option("--dim", dim, "head and value dimension")->check(CLI::PositiveNumber);
    app.add_option("--features", features, "favor features m")->check(CLI::PositiveNumber);
    app.add_option("--check", check, "1: compare with the single-process operator on rank 0 (default: length <= 2^21)");
    app.add_flag("--non-causal", non_causal, "bidirectional attention instead of causal");
    app.add_option("--json", json, "write one record per rank here (rank 0 writes)");
    CLI11_PARSE(app, argc, argv);
    if (check < 0) check = length <= (index_t(1) << 21) ? 1 : 0;
    if (length < N) {
        if (me == 0) std::fprintf(stderr, "long_context: --length %ld is shorter than the %d ranks\n", long(length), N);
        return 1;
    }
    const bool causal = !non_causal;

    // Slices as equal as possible, in rank order.
    std::vector<index_t> offs(static_cast<std::size_t>(N)), lens(static_cast<std::size_t>(N));
    for (int r = 0; r < N; ++r) {
        offs[std::size_t(r)] = length * r / N;
        lens[std::size_t(r)] = length * (r + 1) / N - offs[std::size_t(r)];
    }
    const index_t off = offs[std::size_t(me)], n = lens[std::size_t(me)];

    kattn::attention_config<kattn::features::favor, kattn::samplers::orthogonal_gaussian> cfg;
    cfg.head_dim = dim;
    cfg.value_dim = dim;
    cfg.num_features = features;
    cfg.seed = 7;
    const kattn::linear_attention<kattn::features::favor> op(cfg);
    kattn::dist::sequence_parallel sp(op, comm);

    const tensor q = slice_tensor(heads, length, off, n, dim, 1, 1.0),
                 k = slice_tensor(heads, length, off, n, dim, 2, 1.0),
                 v = slice_tensor(heads, length, off, n, dim, 3, 1.0),
                 g = slice_tensor(heads, length, off, n, dim, 4, 1.0);

    comm.barrier();
    comm.reset_stats();
    const auto t0 = std::chrono::steady_clock::now();
    const tensor out = causal ? sp(q, k, v, kattn::causal) : sp(q, k, v);
    const auto t1 = std::chrono::steady_clock::now();
    const auto grads = causal ? sp.backward(q, k, v, g, kattn::causal) : sp.backward(q, k, v, g);
    const auto t2 = std::chrono::steady_clock::now();
    const double fwd = std::chrono::duration<double>(t1 - t0).count(),
                 total = std::chrono::duration<double>(t2 - t0).count();
    const auto stats = comm.stats();

    double max_rel = -1;
    double split_err = -1, single_err = -1;
    if (check) {
        const MPI_Comm c = comm.native();
        const tensor o_all = gather_slices(out, heads, length, dim, offs, lens, c, me);
        const tensor dq_all = gather_slices(grads.dq, heads, length, dim, offs, lens, c, me);
        const tensor dk_all = gather_slices(grads.dk, heads, length, dim, offs, lens, c, me);
        const tensor dv_all = gather_slices(grads.dv, heads, length, dim, offs, lens, c, me);
        if (me == 0) {
            const tensor Q = slice_tensor(heads, length, 0, length, dim, 1, 1.0),
                         K = slice_tensor(heads, length, 0, length, dim, 2, 1.0),
                         V = slice_tensor(heads, length, 0, length, dim, 3, 1.0),
                         G = slice_tensor(heads, length, 0, length, dim, 4, 1.0);
            const tensor o1 = causal ? op(Q, K, V, kattn::causal) : op(Q, K, V);
            const auto g1 = causal ? op.backward(Q, K, V, G, kattn::causal) : op.backward(Q, K, V, G);
            const double d[5] = {rel_diff(o_all, o1), rel_diff(dq_all, g1.dq), rel_diff(dk_all, g1.dk),
                                 rel_diff(dv_all, g1.dv), rel_diff(grads.d_omega, g1.d_omega)};
            std::printf(
                "relative difference from the single-process operator: out %.3g, dq %.3g, dk %.3g, "
                "dv %.3g, d_omega %.3g\n",
                d[0], d[1], d[2], d[3], d[4]);
            max_rel = *std::max_element(d, d + 5);
            // Both against the exact values (the same operator in double): splitting the
            // sequence costs no accuracy beyond the single process's own float rounding.
            using dtensor = xt::xtensor<double, 4>;
            const kattn::linear_attention<kattn::features::favor, kattn::samplers::orthogonal_gaussian,
                                          kattn::backends::simd, double>
                exact(cfg);
            const dtensor Qd = xt::cast<double>(Q), Kd = xt::cast<double>(K), Vd = xt::cast<double>(V);
            const dtensor oe = causal ? exact(Qd, Kd, Vd, kattn::causal) : exact(Qd, Kd, Vd);
            split_err = rel_diff(o_all, oe);
            single_err = rel_diff(o1, oe);
            std::printf("output error against the double operator: split %.3g, single process %.3g\n", split_err,
                        single_err);
        }
        comm.broadcast(&max_rel, 1, 0);
        double errs[2] = {split_err, single_err};
        comm.broadcast(errs, 2, 0);
        split_err = errs[0], single_err = errs[1];
    }

    // One record per rank, gathered on rank 0.
    const double mine[7] = {
        double(me), double(n), fwd, total, stats.seconds, double(stats.payload_bytes), double(peak_rss_bytes())};
    std::vector<double> all(7 * std::size_t(N));
    comm.all_gather(mine, all.data(), 7);
    if (me == 0) {
        nlohmann::json records = nlohmann::json::array();
        std::printf("long_context: %s favor, L = %ld over %d ranks, H = %ld, d = dv = %ld, m = %ld\n",
                    causal ? "causal" : "non-causal", long(length), N, long(heads), long(dim), long(features));
        std::printf("%5s %9s %10s %12s %9s %12s %10s\n", "rank", "tokens", "forward s", "fwd+bwd s", "comm %",
                    "bytes sent", "peak RSS");
        for (int r = 0; r < N; ++r) {
            const double* f = &all[7 * std::size_t(r)];
            std::printf("%5d %9ld %10.3f %12.3f %8.2f%% %12.0f %8.0f MB\n", r, long(f[1]), f[2], f[3],
                        100.0 * f[4] / f[3], f[5], f[6] / 1e6);
            nlohmann::json rec{{"ranks", N},
                               {"rank", r},
                               {"length", length},
                               {"slice", index_t(f[1])},
                               {"causal", causal},
                               {"heads", heads},
                               {"dim", dim},
                               {"features", features},
                               {"forward_seconds", f[2]},
                               {"seconds", f[3]},
                               {"comm_seconds", f[4]},
                               {"bytes_sent", std::uint64_t(f[5])},
                               {"peak_rss_bytes", std::uint64_t(f[6])}};
            rec["max_rel_diff_vs_single"] = max_rel >= 0 ? nlohmann::json(max_rel) : nlohmann::json(nullptr);
            rec["out_rel_err_split_vs_double"] = split_err >= 0 ? nlohmann::json(split_err) : nlohmann::json(nullptr);
            rec["out_rel_err_single_vs_double"] =
                single_err >= 0 ? nlohmann::json(single_err) : nlohmann::json(nullptr);
            records.push_back(rec);
        }
        if (max_rel >= 0) std::printf("largest relative difference from the single-process operator: %.3g\n", max_rel);
        if (!json.empty()) {
            std::ofstream os(json);
            os << records.dump(2) << "\n";
            if (!os) {
                std::fprintf(stderr, "long_context: cannot write %s\n", json.c_str());
                return 1;
            }
        }
    }
    // --check is a test too: the split result must be as accurate as the single process's.
    if (check && !(split_err <= 4 * single_err + 1e-6)) {
        if (me == 0)
            std::fprintf(stderr,
                         "long_context: FAILED: the split output's error %.3g exceeds 4x the single process's %.3g\n",
                         split_err, single_err);
        return 3;
    }
    return 0;
}
