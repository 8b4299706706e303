// tests/dispatch/cases.hpp — every primitive of backends::simd on fixed inputs (unpacked,
// packed documents, with and without kept states and slice links; bf16 tensors), for every map of
// features::all in float and double, and the GEMM policy; each result is appended
// to a list (as doubles, exactly). The dispatch test runs these through the kernel library
// and compares them bit for bit with the same cases compiled with fixed -march flags
// (fixed.cpp), the way a program built for one instruction set would run them.
#pragma once

#include <kattn/kattn.hpp>

#include <cstdint>
#include <type_traits>
#include <vector>

namespace kt_dispatch {

using kattn::index_t;
using results = std::vector<std::vector<double>>;

template <class T>
std::vector<T> uniform(std::size_t n, std::uint64_t seed, double half_width) {
    std::vector<T> x(n);
    std::uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (auto& e : x) {
        s += 0x9E3779B97F4A7C15ull;
        std::uint64_t z = s;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        e = static_cast<T>(half_width * (2.0 * double(z >> 11) * 0x1.0p-53 - 1.0));
    }
    return x;
}

template <class T>
void keep(results& r, const std::vector<T>& x) {
    r.emplace_back(x.begin(), x.end());
}

/// A link whose "other slices" are a fixed function of the slice's own totals (half of
/// them, same shift): any states are valid inputs, and both exchanges are exercised.
template <class T>
kattn::backends::slice_link<T> halving_link(index_t problems, index_t F, index_t dv) {
    const auto half = [=](kattn::backends::slice_states<const T> own, kattn::backends::slice_states<T> others) {
        for (index_t i = 0; i < problems * F * dv; ++i) others.S[i] = own.S[i] / 2;
        for (index_t i = 0; i < problems * F; ++i) others.z[i] = own.z[i] / 2;
        for (index_t i = 0; i < problems; ++i) others.C[i] = own.C[i];
    };
    return {half, half};
}

template <class Map, class T>
void run_map(results& r) {
    using backend = kattn::backends::simd;
    using traits = kattn::feature_map_traits<Map>;
    const index_t d = 8, dv = 5, m = traits::pairs_or_columns(16), F = traits::feature_dim(m);
    // Parameters from the integer generator, not a sampler: they must be the same bits in
    // every translation unit, whatever its instruction set does to the sampler's loops.
    const auto omega = uniform<T>(std::size_t(d * traits::projection_dim(m)), 11, Map::is_positive ? 1.0 : 4.0);
    const auto bias = uniform<T>(traits::uses_bias ? std::size_t(m) : 0, 12, 3.0);
    const kattn::backends::spectral_view<Map, T> spec{omega.data(), traits::uses_bias ? bias.data() : nullptr, d, m,
                                                      kattn::map_params_t<Map>{}};
    const T input_scale = T(0.7);

    // φ of 150 rows (two tiles and a part)
    {
        const auto x = uniform<T>(150 * d, 1, 1.0);
        std::vector<T> phi(std::size_t(150 * F));
        backend::features(kattn::backends::feature_problem<Map, T>{spec, x.data(), phi.data(), 150, input_scale});
        keep(r, phi);
    }
    // two heads of 300 tokens, and one head of 2100 (the segmented path)
    for (auto [P, L] : {std::pair<index_t, index_t>{2, 300}, {1, 2100}})
        for (bool causal : {false, true})
            for (bool padded : {false, true}) {
                const auto q = uniform<T>(std::size_t(P * L * d), 2, 0.8),
                           k = uniform<T>(std::size_t(P * L * d), 3, 0.8);
                const auto v = uniform<T>(std::size_t(P * L * dv), 4, 1.0),
                           g = uniform<T>(std::size_t(P * L * dv), 5, 1.0);
                const std::vector<index_t> lens{L - 17, L - 89};
                kattn::backends::attention_problem<Map, T> pb;
                pb.spec = spec;
                pb.q = q.data();
                pb.k = k.data();
                pb.v = v.data();
                pb.problems = P;
                pb.heads = 1;
                pb.q_len = pb.k_len = L;
                pb.dv = dv;
                pb.key_lengths = padded ? lens.data() : nullptr;
                pb.causal = causal;
                pb.input_scale = input_scale;
                pb.backward_cache_bytes = std::size_t(64) << 20;
                std::vector<T> out(std::size_t(P * L * dv));
                const auto grads = [&](auto&& call) {
                    std::vector<T> dq(q.size()), dk(k.size()), dvv(v.size()), dom(omega.size()), db(bias.size());
                    call(kattn::backends::attention_gradients<T>{g.data(), dq.data(), dk.data(), dvv.data(), dom.data(),
                                                                 db.empty() ? nullptr : db.data()});
                    for (const auto* x : {&dq, &dk, &dvv, &dom, &db}) keep(r, *x);
                };
                backend::forward(pb, out.data());
                keep(r, out);
                if constexpr (std::is_same_v<T, float>) {  // bf16 tensors: the AMX kernels where the CPU has them
                    std::vector<kattn::bf16> qb(q.begin(), q.end()), kb(k.begin(), k.end()), vb(v.begin(), v.end()),
                        ob(out.size());
                    auto pb16 = pb;
                    pb16.q = pb16.k = pb16.v = nullptr;
                    const bool ran = backend::forward_bf16(pb16, {qb.data(), kb.data(), vb.data(), ob.data()});
                    r.push_back({double(ran)});
                    if (ran) keep(r, std::vector<float>(ob.begin(), ob.end()));
                }
                grads([&](const auto& gr) { backend::backward(pb, gr); });
                kattn::backends::forward_state<T> st;
                backend::forward(pb, out.data(), st);
                keep(r, out);
                grads([&](const auto& gr) { backend::backward(pb, gr, st); });
                const auto link = halving_link<T>(P, F, dv);
                backend::forward(pb, out.data(), link);
                keep(r, out);
                grads([&](const auto& gr) { backend::backward(pb, gr, link); });
                if (padded) continue;
                // Packed documents (one of them longer than a tile), with and without a kept state.
                const std::vector<index_t> cu{0, 1, 90, 157, L};
                pb.cu_seqlens = cu.data();
                pb.documents = 4;
                pb.heads = P;  // the contract: batch 1
                backend::forward(pb, out.data());
                keep(r, out);
                grads([&](const auto& gr) { backend::backward(pb, gr); });
                kattn::backends::forward_state<T> sp;
                backend::forward(pb, out.data(), sp);
                keep(r, out);
                grads([&](const auto& gr) { backend::backward(pb, gr, sp); });
            }
}

template <class T>
void run_gemm(results& r) {
    using gemm = kattn::execution_backend_traits<kattn::backends::simd>::gemm;
    // Called through an opaque pointer, as the dispatched entry is: a call with constant
    // arguments would let the compiler specialise the product for them (and, with FMA
    // contraction, round its scalar column tail differently).
    using fn = void (*)(index_t, index_t, index_t, const T*, index_t, index_t, const T*, index_t, T*, index_t, bool);
    fn volatile run = &gemm::template run<T>;
    const index_t M = 37, N = 45, K = 29;
    const auto A = uniform<T>(std::size_t(M * K), 8, 1.0), B = uniform<T>(std::size_t(K * N), 9, 1.0);
    std::vector<T> C(std::size_t(M * N), T(1));
    run(M, N, K, A.data(), K, 1, B.data(), N, C.data(), N, true);
    keep(r, C);
    std::vector<T> D(std::size_t(K * N));
    run(K, N, M, A.data(), 1, K, C.data(), N, D.data(), N, false);  // Aᵀ·C
    keep(r, D);
}

/// The cases of one precision, in a fixed order.
template <class T>
results run_all_of() {
    results r;
    kattn::for_each_type<kattn::features::all>([&]<class Map>() { run_map<Map, T>(r); });
    run_gemm<T>(r);
    return r;
}

/// All cases.
inline results run_all() {
    results r = run_all_of<float>(), d = run_all_of<double>();
    r.insert(r.end(), d.begin(), d.end());
    return r;
}

}  // namespace kt_dispatch
