// The CUDA backend's own kernels, run on the CPU by an emulator of CUDA's execution model
// (cuda_emulation/: block threads as fibers, barriers, warp shuffles, a WMMA stand-in that
// checks alignment). A system that is host_system in everything else takes from cuda_system
// the parts that only a GPU runs otherwise: a warp per row (warp_ops.cuh) for every row
// functor, φ in one kernel (projected_rows.cuh), the forward's output stage in tiles of 64
// query rows (chunk_outputs.cuh), the causal block states with their scan within
// segments (chunk_states.cuh) and, when asked (single_pass_system), the causal forward in
// one pass over the chunks (causal_single_pass.cuh), the kernels' code unchanged. Its
// products round to TF32, as the GPU's do. Checked, for every feature map: forward and backward against the
// reference backend, non-causal with whole tiles, causal with a tail chunk and padded keys,
// and packed documents; Ω = I, whose φ needs no projection kernel; favor with value widths
// whose numerators fill whole WMMA column tiles (with and without FP32 tail columns); the
// states kernel over several segments, state tiles and staged columns; bf16 tensors with
// BF16 products within the documented bounds (precision_cases.hpp); the single pass for
// maps without a stabiliser, in one and several column groups, with tails and padded keys,
// against the reference and the multi-pass path, and with the VJP of element-wise maps
// finished in the backward's walks; that the kernels ran;
// that no WMMA access broke the alignment rules and no barrier deadlocked; warp_ops' rows
// as float4 and element by element. And the emulator's own checks: a misaligned load and a
// barrier that some threads skip are caught.
//
// Built only without sanitizers (AddressSanitizer does not follow the fibers' stacks).
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <tuple>
#include <utility>
#include <vector>

#include "backend_cases.hpp"
#include "precision_cases.hpp"

#include <kattn/fwd.hpp>
#include <kattn/attention/linear_attention.hpp>
#include <kattn/backends/chunked.hpp>
#include <kattn/backends/reference.hpp>
#include <kattn/core/bfloat16.hpp>
#include <kattn/features/all.hpp>

// The kernels' headers last, compiled as for a device of compute capability 8.0 against the
// emulator's cuda_runtime.h and mma.h (this directory's cuda_emulation/ is on the include
// path first).
#define __CUDA_ARCH__ 800
#include <kattn/backends/causal_single_pass.cuh>
#include <kattn/backends/causal_single_pass_grads.cuh>
#include <kattn/backends/chunk_outputs.cuh>
#include <kattn/backends/chunk_states.cuh>
#include <kattn/backends/projected_rows.cuh>
#include <kattn/backends/warp_ops.cuh>
#undef __CUDA_ARCH__

namespace kattn::detail {
// The kernels' dynamic shared memory (one block runs at a time).
alignas(128) float output_smem[1 << 15];
alignas(128) float projected_smem[1 << 15];
alignas(128) float states_smem[states_shared_bytes / sizeof(float)];
alignas(128) float single_pass_smem[1 << 15];
alignas(128) float single_pass_grads_smem[1 << 15];
}  // namespace kattn::detail

namespace {

using namespace kattn;

/// host_system with cuda_system's warp-per-row functors and its two tensor-core kernels.
struct emulated_gpu_system : backends::host_system {
    static constexpr const char* name = "emulated_gpu";
    using row_ops = detail::warp_ops;
    bool fused_features = true;
    bool single_pass = false;  ///< as cuda_system's: off unless asked for
    static inline int output_launches = 0, projected_launches = 0, states_launches = 0, single_pass_launches = 0,
                      grads_launches = 0;
    /// The multiprocessors that cuda_system's choice of the single pass's width counts on.
    static constexpr index_t sms = 2;

    emulated_gpu_system() { float_math = backends::float_gemm::tf32; }

    /// A copy in the system's (256-byte aligned) memory, as cuda_system's mirror copies to
    /// the device: the kernels' alignment rules then hold as they do on a GPU.
    template <class T>
    struct copy {
        buffer<T> b;
        const T* get() const { return b.data(); }
    };
    template <class T>
    copy<T> mirror(const T* p, index_t n) const {
        copy<T> c{make_buffer<T>(n)};
        std::copy(p, p + n, c.b.data());
        return c;
    }

    template <class Fn>
    void launch_rows(index_t n, const Fn& fn) const {
        if (n <= 0) return;
        // Grid-stride over rows, a warp per row, as detail::for_each_row does.
        cuda_emulation::launch(2, 256, [&] {
            const index_t warp = index_t(threadIdx.x / 32), warps = index_t(blockDim.x / 32);
            for (index_t r = index_t(blockIdx.x) * warps + warp; r < n; r += index_t(gridDim.x) * warps) fn(r);
        });
    }

    bool projects_rows(index_t d, index_t P, const float* omega) const {
        return fused_features && float_math != backends::float_gemm::fp32 &&
               detail::projected_rows_shape(d, P, omega) &&
               detail::projected_shared_bytes(int(d), int(P)) <= sizeof detail::projected_smem;
    }
    template <class Gather, class Act>
    bool launch_projected_rows(index_t n, index_t d, index_t P, const float* omega, const Gather& gather,
                               const Act& act) const {
        if (!projects_rows(d, P, omega)) return false;
        if (n <= 0) return true;
        ++projected_launches;
        cuda_emulation::launch(3, detail::projected_threads,
                               [&] { detail::projected_rows_kernel(n, int(d), int(P), omega, gather, act); });
        return true;
    }

    template <class W>
    bool fuses_chunk_outputs(index_t F, index_t dv1) const {
        return std::is_same_v<W, float> && fused_outputs && float_math != backends::float_gemm::fp32 &&
               detail::chunk_outputs_shape(F, dv1) &&
               detail::output_shared_bytes(int(dv1), true) <= sizeof detail::output_smem;
    }
    template <class Tiles, class Mask, class Emit>
    void launch_chunk_outputs(const Tiles& t, const Mask& mask, const Emit& emit) const {
        ++output_launches;
        cuda_emulation::launch(2, detail::output_threads, [&] { detail::chunk_outputs_kernel(t, mask, emit); });
    }

    template <class W>
    bool fuses_chunk_states(index_t F, index_t dv1) const {
        return std::is_same_v<W, float> && fused_states && float_math != backends::float_gemm::fp32 &&
               detail::chunk_states_shape(F, dv1);
    }
    template <class Job, class Steps>
    void launch_chunk_states(const Job& job, const Steps& steps) const {
        ++states_launches;
        cuda_emulation::launch(2, detail::states_threads, [&] { detail::chunk_states_kernel(job, steps); });
    }

    template <class W>
    index_t single_pass_columns(index_t problems, index_t d, index_t F, index_t dv) const {
        if (!std::is_same_v<W, float> || !single_pass || float_math == backends::float_gemm::fp32) return 0;
        return detail::single_pass_width(problems, d, F, dv, sms, sizeof detail::single_pass_smem);
    }
    template <class Job>
    void launch_causal_single_pass(const Job& job) const {
        if constexpr (!std::is_same_v<typename Job::work, float>) {
            throw kattn::error("emulated_gpu_system: launch_causal_single_pass: float work only (single_pass_columns)");
        } else {
            ++single_pass_launches;
            cuda_emulation::launch(3, detail::single_pass_threads, [&] { detail::causal_single_pass_kernel(job); });
        }
    }
    template <class W>
    detail::single_pass_grads_widths single_pass_grads_widths(index_t problems, index_t d, index_t F,
                                                              index_t dv) const {
        if (!std::is_same_v<W, float> || !single_pass || float_math == backends::float_gemm::fp32) return {};
        return detail::single_pass_grads_plan(problems, d, F, dv, sms, sizeof detail::single_pass_grads_smem);
    }
    template <class Job>
    void launch_single_pass_grads(const Job& job) const {
        if constexpr (!std::is_same_v<typename Job::work, float>) {
            throw kattn::error("emulated_gpu_system: launch_single_pass_grads: float work only");
        } else {
            ++grads_launches;
            cuda_emulation::launch(3, detail::single_pass_threads,
                                   [&] { detail::single_pass_dphi_kernel<false>(job); });
            cuda_emulation::launch(3, detail::single_pass_threads, [&] { detail::single_pass_dphi_kernel<true>(job); });
            cuda_emulation::launch(3, detail::single_pass_threads, [&] { detail::single_pass_dv_kernel(job); });
        }
    }
};

/// emulated_gpu_system with the causal single pass asked for.
struct single_pass_system : emulated_gpu_system {
    single_pass_system() { single_pass = true; }
};

using emulated_gpu = backends::chunked<emulated_gpu_system>;

/// emulated_gpu_system whose φ kernel runs in tile geometry G (detail::projected_geometry).
template <class G>
struct geometry_system : emulated_gpu_system {
    static inline int launches = 0;
    template <class Gather, class Act>
    bool launch_projected_rows(index_t n, index_t d, index_t P, const float* omega, const Gather& gather,
                               const Act& act) const {
        if (!projects_rows(d, P, omega) ||
            detail::projected_shared_bytes(int(d), int(P), G::rows) > sizeof detail::projected_smem)
            return false;
        if (n <= 0) return true;
        ++launches;
        cuda_emulation::launch(3, G::threads, [&] {
            detail::projected_rows_kernel<Gather, Act, G>(n, int(d), int(P), omega, gather, act);
        });
        return true;
    }
};

/// TF32 products, as on a GPU: the CUDA test's bounds, except that a map whose derivative
/// jumps (relu) flips whole terms where TF32 rounding moves u across 0: on the packed,
/// non-causal case its dk is 8.6e-2 from the reference with the host's TF32 products alone,
/// no kernel emulated (exact FP32: 2.3e-6).
template <class Map>
constexpr double grad_tol = kt::derivative_jumps<Map> ? 0.15 : 2e-2;
constexpr double tol = 5e-3;

template <class Map>
void compare_emulated() {
    struct shape {
        index_t L;
        bool causal, padded;
    };
    for (const shape s : {shape{128, false, false}, shape{150, true, true}, shape{128, true, false}}) {
        INFO(std::string(Map::name), " L=", s.L, " causal=", s.causal, " padded=", s.padded);
        const int outputs = emulated_gpu_system::output_launches;
        const int projected = emulated_gpu_system::projected_launches;
        const int states = emulated_gpu_system::states_launches;
        cuda_emulation::faults() = 0;
        const auto e = kt::run_case<Map, float, emulated_gpu>(1, 2, s.L, s.causal, s.padded);
        const auto r = kt::run_case<Map, float, backends::reference>(1, 2, s.L, s.causal, s.padded);
        kt::check_close(e, r, s.L, tol, grad_tol<Map>);
        CHECK(cuda_emulation::faults() == 0);
        // F = 16 or 32 and dv + 1 = 6 → 8 columns: the output tiles apply to every map;
        // d = 8, P = 16 or 32: so does φ's kernel.
        CHECK(emulated_gpu_system::output_launches > outputs);
        CHECK(emulated_gpu_system::projected_launches > projected);
        // Causal: the block states' kernel too (F a multiple of 16, dv + 1 = 8 columns).
        CHECK((emulated_gpu_system::states_launches > states) == s.causal);
    }
    // Packed documents of 1, 63, 1, 85, 64 and 136 tokens, causal and not.
    const std::vector<index_t> cu{0, 1, 64, 65, 150, 214, 350};
    const packed_sequences docs{cu};
    const auto q = kt::randn<float, 4>({1, 2, 350, 8}, 1, 0.5), k = kt::randn<float, 4>({1, 2, 350, 8}, 2, 0.5);
    const auto v = kt::randn<float, 4>({1, 2, 350, 5}, 3), G = kt::randn<float, 4>({1, 2, 350, 5}, 4);
    const kt::attn<Map, float, backends::reference> ar(kt::case_config<Map>());
    const kt::attn<Map, float, emulated_gpu> ae(kt::case_config<Map>());
    for (bool causal : {false, true}) {
        INFO(std::string(Map::name), " packed, causal=", causal);
        cuda_emulation::faults() = 0;
        const auto oe = causal ? ae(q, k, v, kattn::causal, docs) : ae(q, k, v, docs);
        const auto orf = causal ? ar(q, k, v, kattn::causal, docs) : ar(q, k, v, docs);
        CHECK(kt::rel_err(oe, orf) < tol);
        const auto ge = causal ? ae.backward(q, k, v, G, kattn::causal, docs) : ae.backward(q, k, v, G, docs);
        const auto gr = causal ? ar.backward(q, k, v, G, kattn::causal, docs) : ar.backward(q, k, v, G, docs);
        CHECK(kt::rel_err(ge.dv, gr.dv) < tol);
        CHECK(kt::rel_err(ge.dq, gr.dq) < grad_tol<Map>);
        CHECK(kt::rel_err(ge.dk, gr.dk) < grad_tol<Map>);
        CHECK(cuda_emulation::faults() == 0);
    }
}

}  // namespace

TEST_CASE_TEMPLATE_DEFINE("CUDA kernels under emulation equal the reference backend (TF32 products)", Map,
                          kt_emulated_every_map) {
    compare_emulated<Map>();
}
TEST_CASE_TEMPLATE_APPLY(kt_emulated_every_map, kattn::type_list_apply_t<std::tuple, kattn::features::all>);

TEST_CASE_TEMPLATE("CUDA kernels under emulation: Ω = I builds φ in row passes, without the projection kernel", Map,
                   features::elu, features::favor) {
    for (bool causal : {false, true}) {
        INFO(std::string(Map::name), " causal=", causal);
        cuda_emulation::faults() = 0;
        const int projected = emulated_gpu_system::projected_launches;
        // d = P = 16: a shape the projection kernel takes.
        const auto e = kt::run_identity_case<Map, float, emulated_gpu>(1, 2, 150, causal, true, false, 16);
        kt::check_close(e, kt::run_identity_case<Map, float, backends::reference>(1, 2, 150, causal, true, false, 16),
                        150, tol, grad_tol<Map>);
        CHECK(cuda_emulation::faults() == 0);
        CHECK(emulated_gpu_system::projected_launches == projected);
        // Ω nudged off the identity: the kernel runs, for the same values up to TF32 rounding.
        const auto n = kt::run_identity_case<Map, float, emulated_gpu>(1, 2, 150, causal, true, true, 16);
        CHECK(emulated_gpu_system::projected_launches > projected);
        kt::check_close(e, n, 150, tol, grad_tol<Map>);
    }
}

TEST_CASE_TEMPLATE("CUDA kernels under emulation: φ's kernel gives the same bits in every tile geometry", G,
                   detail::projected_geometry<32, 256>, detail::projected_geometry<16, 128>,
                   detail::projected_geometry<64, 256, 2>, detail::projected_geometry<48, 96>) {
    // 150 tokens: the last tile ends inside the rows in every geometry; padded keys; favor
    // (stabilised rows, key shifts) and trig (two features per frequency). A row's arithmetic
    // does not depend on the tiling, so outputs and gradients are bitwise the default's.
    using geo = backends::chunked<geometry_system<G>>;
    for (bool causal : {false, true}) {
        INFO("rows=", G::rows, " threads=", G::threads, " causal=", causal);
        cuda_emulation::faults() = 0;
        const int launches = geometry_system<G>::launches;
        const auto f0 = kt::run_case<features::favor, float, emulated_gpu>(2, 1, 150, causal, true);
        const auto f1 = kt::run_case<features::favor, float, geo>(2, 1, 150, causal, true);
        const auto t0 = kt::run_case<features::trig, float, emulated_gpu>(2, 1, 150, causal, true);
        const auto t1 = kt::run_case<features::trig, float, geo>(2, 1, 150, causal, true);
        CHECK(geometry_system<G>::launches > launches);
        CHECK(cuda_emulation::faults() == 0);
        const auto same_bits = [](const kt::case_result& a, const kt::case_result& b) {
            CHECK(a.out == b.out);
            CHECK(a.dq == b.dq);
            CHECK(a.dk == b.dk);
            CHECK(a.dv == b.dv);
            CHECK(a.d_omega == b.d_omega);
        };
        same_bits(f0, f1);
        same_bits(t0, t1);
    }
}

TEST_CASE("CUDA kernels under emulation: value widths with whole WMMA column tiles (dv + 1 = 16, 24, 68)") {
    // dv = 5 above leaves the output tiles' numerators to the FP32 tail columns; these
    // widths put the values (and, for dv = 15, the ones column) through the tensor-core path.
    for (index_t dv : {15, 20, 67}) {
        for (bool causal : {false, true}) {
            INFO("dv=", dv, " causal=", causal);
            const index_t L = causal ? 150 : 128;
            const attention_config cfg{.head_dim = 8, .value_dim = dv, .num_features = 16, .seed = 3, .sigma = 1.0};
            const kt::attn<features::favor, float, backends::reference> ar(cfg);
            const kt::attn<features::favor, float, emulated_gpu> ae(cfg);
            const auto sl = std::size_t(L), sv = std::size_t(dv);
            const auto q = kt::randn<float, 4>({2, 2, sl, 8}, 1, 0.5), k = kt::randn<float, 4>({2, 2, sl, 8}, 2, 0.5);
            const auto v = kt::randn<float, 4>({2, 2, sl, sv}, 3), G = kt::randn<float, 4>({2, 2, sl, sv}, 4);
            const std::vector<index_t> lens{L - 1, L / 4};
            const key_lengths kl(lens);
            cuda_emulation::faults() = 0;
            const int outputs = emulated_gpu_system::output_launches;
            CHECK(kt::rel_err(causal ? ae(q, k, v, kattn::causal, kl) : ae(q, k, v, kl),
                              causal ? ar(q, k, v, kattn::causal, kl) : ar(q, k, v, kl)) < tol);
            CHECK(emulated_gpu_system::output_launches > outputs);
            const auto ge = causal ? ae.backward(q, k, v, G, kattn::causal, kl) : ae.backward(q, k, v, G, kl);
            const auto gr = causal ? ar.backward(q, k, v, G, kattn::causal, kl) : ar.backward(q, k, v, G, kl);
            CHECK(kt::rel_err(ge.dv, gr.dv) < tol);
            CHECK(kt::rel_err(ge.dq, gr.dq) < grad_tol<features::favor>);
            CHECK(cuda_emulation::faults() == 0);
        }
    }
}

TEST_CASE("CUDA kernels under emulation: the causal states kernel across segments, state tiles and documents") {
    // F = 80: a tile of four 16-row tiles and one of a single row tile; dv + 1 = 68: four
    // whole column tiles and 4 staged ones; 1,100 tokens: 18 blocks in two segments of 16.
    const attention_config cfg{.head_dim = 8, .value_dim = 67, .num_features = 80, .seed = 5, .sigma = 1.0};
    const kt::attn<features::favor, float, backends::reference> ar(cfg);
    const kt::attn<features::favor, float, emulated_gpu> ae(cfg);
    const auto q = kt::randn<float, 4>({2, 1, 1100, 8}, 1, 0.5), k = kt::randn<float, 4>({2, 1, 1100, 8}, 2, 0.5);
    const auto v = kt::randn<float, 4>({2, 1, 1100, 67}, 3), G = kt::randn<float, 4>({2, 1, 1100, 67}, 4);
    const auto check = [&](const auto&... mask) {
        cuda_emulation::faults() = 0;
        const int states = emulated_gpu_system::states_launches;
        CHECK(kt::rel_err(ae(q, k, v, kattn::causal, mask...), ar(q, k, v, kattn::causal, mask...)) < tol);
        const auto ge = ae.backward(q, k, v, G, kattn::causal, mask...);
        const auto gr = ar.backward(q, k, v, G, kattn::causal, mask...);
        CHECK(kt::rel_err(ge.dv, gr.dv) < tol);
        CHECK(kt::rel_err(ge.dk, gr.dk) < grad_tol<features::favor>);
        CHECK(emulated_gpu_system::states_launches > states);
        CHECK(cuda_emulation::faults() == 0);
    };
    SUBCASE("padded keys") { check(key_lengths(std::vector<index_t>{1100, 700})); }
    SUBCASE("packed documents, one of them across the segments' edge") {
        const auto q1 = kt::randn<float, 4>({1, 1, 1100, 8}, 1, 0.5);
        const std::vector<index_t> cu{0, 70, 900, 1100};
        const packed_sequences docs{cu};
        const auto k1 = kt::randn<float, 4>({1, 1, 1100, 8}, 2, 0.5), v1 = kt::randn<float, 4>({1, 1, 1100, 67}, 3);
        cuda_emulation::faults() = 0;
        const int states = emulated_gpu_system::states_launches;
        CHECK(kt::rel_err(ae(q1, k1, v1, kattn::causal, docs), ar(q1, k1, v1, kattn::causal, docs)) < tol);
        CHECK(emulated_gpu_system::states_launches > states);
        CHECK(cuda_emulation::faults() == 0);
    }
}

TEST_CASE("CUDA kernels under emulation: bf16 tensors with BF16 products stay within the documented bounds") {
    // As FLA's shapes run on the GPU: 16-bit inputs, outputs and gradients (the gather of φ's
    // kernel and the out rows of the tiles convert), favor, elu and trig, causal and not.
    const int outputs = emulated_gpu_system::output_launches;
    const int projected = emulated_gpu_system::projected_launches;
    cuda_emulation::faults() = 0;
    kt_chunked_precision::check_sixteen_bit<emulated_gpu, kattn::bf16>(backends::float_gemm::bf16, 0x1p-8);
    CHECK(emulated_gpu_system::output_launches > outputs);
    CHECK(emulated_gpu_system::projected_launches > projected);
    CHECK(cuda_emulation::faults() == 0);
}

TEST_CASE("CUDA emulation: shuffles and barriers as on a GPU; broken rules are caught") {
    // A warp's butterfly sum gives every lane the same total.
    std::vector<float> got(64);
    cuda_emulation::faults() = 0;
    CHECK(cuda_emulation::launch(1, 64, [&] {
        got[threadIdx.x] = detail::warp_ops::reduce_sum(float(threadIdx.x % 32 + 1) + float(threadIdx.x / 32) * 100);
    }));
    CHECK(got[0] == 528.0f);
    CHECK(got[31] == 528.0f);
    CHECK(got[32] == 528.0f + 3200.0f);
    CHECK(cuda_emulation::faults() == 0);
    // A barrier that thread 0 skips never completes: reported, not hung.
    CHECK_FALSE(cuda_emulation::launch(1, 64, [&] {
        if (threadIdx.x != 0) __syncthreads();
    }));
    CHECK(cuda_emulation::faults() == 1);
    // A WMMA load from a pointer that is not 32-byte aligned.
    cuda_emulation::faults() = 0;
    alignas(32) float tile[16 * 12 + 8] = {};  // 16 rows of 8 from column 8, leading dimension 12
    cuda_emulation::launch(1, 32, [&] {
        detail::tf32_a a;
        detail::load_tf32(a, tile + 4, 12);
    });
    CHECK(cuda_emulation::faults() > 0);
    cuda_emulation::faults() = 0;
    cuda_emulation::launch(1, 32, [&] {
        detail::tf32_a a;
        detail::load_tf32(a, tile + 8, 12);
    });
    CHECK(cuda_emulation::faults() == 0);
}

TEST_CASE("CUDA emulation: warp_ops rows as float4 and element by element give the same values") {
    using ops = detail::warp_ops;
    // Small integers: every sum, dot and product below is exact, so each way of moving a
    // row must give the values of a plain loop, whatever its order of summation.
    alignas(16) float x[272], y[272], a[272], b[272];
    alignas(16) const double xd[8] = {};
    CHECK(ops::quads(index_t(256), x, y));
    CHECK_FALSE(ops::quads(index_t(256), x + 1, y));
    CHECK_FALSE(ops::quads(index_t(258), x, y));
    CHECK_FALSE(ops::quads(index_t(8), xd));
    for (const index_t n : {index_t(4), index_t(60), index_t(256), index_t(257), index_t(258)}) {
        for (const int off : {0, 1}) {
            CAPTURE(n);
            CAPTURE(off);
            for (int i = 0; i < 272; ++i) {
                x[i] = float((i * 7) % 13 - 6);
                y[i] = float((i * 5) % 11 - 5);
                a[i] = b[i] = -1000.0f;
            }
            x[off + int(n) / 2] = 9.0f;  // the maximum, once
            float* xo = x + off;
            float* yo = y + off;
            float* ao = a + off;
            float* bo = b + off;
            double sum = 0;
            for (index_t i = 0; i < n; ++i) sum += xo[i];
            std::vector<float> sums(32), maxs(32), dots(32);
            cuda_emulation::faults() = 0;
            CHECK(cuda_emulation::launch(1, 32, [&] {
                ops::transform(
                    n, ao, [](auto u, auto v) { return u - v; }, xo, yo);
                ops::transform2(
                    n, bo, yo, [](auto u, auto v) { return std::pair(u + v, u * v); }, xo, yo);
                ops::axpy(n, 2.0f, xo, ao);
                sums[threadIdx.x] = ops::sum(n, xo);
                maxs[threadIdx.x] = ops::max(n, xo);
                dots[threadIdx.x] = ops::dot(n, xo, xo);
            }));
            CHECK(cuda_emulation::faults() == 0);
            bool same = true;
            for (index_t i = 0; i < n; ++i) {
                const float u = x[off + i], v0 = float(((off + i) * 5) % 11 - 5);
                same = same && ao[i] == (u - v0) + 2.0f * u && bo[i] == u + v0 && yo[i] == u * v0;
            }
            CHECK(same);
            CHECK(a[off + n] == -1000.0f);  // nothing written past the row
            CHECK(b[off + n] == -1000.0f);
            double sq = 0;
            for (index_t i = 0; i < n; ++i) sq += double(xo[i]) * xo[i];
            for (int l = 0; l < 32; ++l) {
                CHECK(sums[l] == float(sum));
                CHECK(maxs[l] == 9.0f);
                CHECK(dots[l] == float(sq));
            }
        }
    }
}

// The causal single passes, forward and backward.
#include "emulated_single_pass_cases.hpp"
