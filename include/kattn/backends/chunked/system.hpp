// kattn/backends/chunked/system.hpp — what a chunked backend runs on: the system concept,
// the host system, the precision of float products, and the sizing system.
//
// A system is the handful of primitives the chunked algorithm (chunked/forward.hpp) needs,
// as members of an object that may carry a stream:
//   buffer<W>(n)          owned scratch memory of n elements (contents unspecified)
//   launch(n, fn)         fn(i) for i in [0, n), in any order and concurrency; fn writes
//                         only its own outputs, so results never depend on the launch
//   gemm(ta, tb, M, N, K, A, lda, sA, B, ldb, sB, C, ldc, sC, batch, accumulate = false)
//                         C_i = op(A_i)·op(B_i) (+ C_i when accumulate) for i < batch,
//                         row-major; A_i = A + i·sA (likewise B, C); op transposes when ta / tb
//   mirror(host_ptr, n)   a read-only device copy of n host elements (.get())
//   to_host(dst, src, n)  n device elements back to host memory, after all prior work
// plus `static constexpr const char* name`, and optionally (a capability with a default)
//   row_ops, launch_rows(n, fn)   fn(r) for every row r < n with several threads per row,
//                         all calling fn(r) and splitting the row's elements through the
//                         row-ops policy `row_ops` (cuda_system: a warp per row, warp_ops);
//                         without them, rows go through launch with scalar_ops.
//   launch_projected_rows(n, d, P, omega, gather, act) -> bool
//                         φ's three passes (gather, U = X·Ω, activate) in one, X and U
//                         held on chip; false where it does not apply, and the three
//                         passes run instead (cuda_system: backends/projected_rows.cuh).
//   fuses_chunk_outputs<W>(F, dv1) -> bool, launch_chunk_outputs(tiles, mask, emit)
//                         a forward pass's output stage in one pass over tiles of 64 query
//                         rows (output_tiles, chunked/kernels.hpp): scores and numerators
//                         stay on chip (cuda_system: backends/chunk_outputs.cuh; host_system:
//                         the same sums in the same order as its products and row passes).
//   fuses_chunk_states<W>(F, dv1) -> bool, launch_chunk_states(job, steps)
//                         the causal block states (forward: A_b; backward: D_b) and the
//                         first step of their scan (prefix; suffix) in one pass per
//                         (problem, segment) (segment_states, chunked/scans.hpp): no block
//                         state goes to memory before its scan
//                         (cuda_system: backends/chunk_states.cuh; host_system: the same
//                         sums in the same order as the product and the scan).
//   single_pass_columns<W>(problems, d, F, dv) -> index_t, launch_causal_single_pass(job)
//                         the causal forward of a map without a stabiliser and Ω = I in
//                         one pass over each head's chunks, the state on chip
//                         (single_pass_job, chunked/single_pass.hpp), in groups of the
//                         width answered (0: not for this call) (cuda_system:
//                         backends/causal_single_pass.cuh; host_system: none).
//   single_pass_grads_widths<W>(problems, d, F, dv) -> detail::single_pass_grads_widths,
//   launch_single_pass_grads(job)
//                         the same calls' backward: dΦ_Q, dΦ_K and dV in three walks
//                         over each head's chunks (single_pass_grads_job,
//                         chunked/single_pass_grads.hpp) (cuda_system:
//                         backends/causal_single_pass_grads.cuh; host_system: none).
// host_system runs everything on the calling
// process's OpenMP threads: every output element is computed by one thread in a fixed
// order, so results are bitwise independent of the thread count. CUDA: backends/cuda.cuh.
//
// Both systems take their scratch from a caller's workspace_allocator when one is set
// (backends/workspace.hpp), and round the inputs of float products as float_gemm says:
// on a GPU the tensor cores do it; host_system emulates the rounding (each input rounded
// to nearest, products and sums in float), which is how the error of the 16-bit and TF32
// products is measured on any machine. sizing_system runs the algorithm without doing
// anything but count its scratch bytes (chunked<S>::device_workspace_bytes).
#pragma once

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#include "../../core/config.hpp"
#include "../../linalg/row_ops.hpp"
#include "../problem.hpp"
#include "../single_pass_plan.hpp"
#include "../workspace.hpp"

namespace kattn::detail {
struct system_probe_fn {
    KATTN_HD void operator()(index_t) const {}
};

/// dst[i] = src[i] (both in system memory): `sys.launch(n, copy_into<T>{src, dst})`.
template <class T>
struct copy_into {
    const T* src;
    T* dst;
    KATTN_HD void operator()(index_t i) const { dst[i] = src[i]; }
};

/// The row-ops policy a system's row functors are written with: its `row_ops` (with
/// launch_rows), or scalar_ops (one thread per row, through launch).
template <class S>
using system_row_ops = row_ops_of<S>;

/// fn(r) for every row r < n: sys.launch_rows when the system has it (fn must then be
/// written with system_row_ops<S>), otherwise sys.launch.
template <class S, class Fn>
void launch_rows(const S& sys, index_t n, const Fn& fn) {
    if constexpr (requires { sys.launch_rows(n, fn); }) {
        sys.launch_rows(n, fn);
    } else {
        static_assert(std::is_same_v<system_row_ops<S>, scalar_ops>,
                      "kattn: a chunked system with row_ops must also have launch_rows(n, fn)");
        sys.launch(n, fn);
    }
}
}  // namespace kattn::detail

namespace kattn::backends {

/// Precision of float matrix products (the inputs of every product are rounded to it;
/// accumulation is always FP32): exact FP32, TF32 (10-bit mantissa, FP32 range), BF16
/// (7-bit mantissa, FP32 range) or FP16 (10-bit mantissa, largest finite 65504: a φ or
/// value beyond it becomes infinite). Double products are always FP64.
enum class float_gemm { tf32, fp32, bf16, fp16 };

/// The primitives of a chunked backend's system (see the file comment).
template <class S>
concept chunked_system = requires(const S& s, const float* a, float* c, const double* ad, double* cd) {
    { S::name } -> std::convertible_to<const char*>;
    typename S::template buffer<float>;
    { s.template make_buffer<float>(index_t(1)).data() } -> std::same_as<float*>;
    s.launch(index_t(1), detail::system_probe_fn{});
    s.gemm(false, true, index_t(1), index_t(1), index_t(1), a, index_t(1), index_t(0), a, index_t(1), index_t(0), c,
           index_t(1), index_t(0), index_t(1));
    s.gemm(false, true, index_t(1), index_t(1), index_t(1), ad, index_t(1), index_t(0), ad, index_t(1), index_t(0), cd,
           index_t(1), index_t(0), index_t(1));
    { s.mirror(a, index_t(1)).get() } -> std::same_as<const float*>;
    s.to_host(c, c, index_t(1));
};

}  // namespace kattn::backends

namespace kattn::detail {

/// Host scratch memory, filled with NaN: an algorithm that reads an element it never
/// wrote shows it in every test instead of reading a convenient zero. From the caller's
/// allocator when one is set, else from the heap (aligned like a workspace request).
template <class W>
class host_buffer {
public:
    explicit host_buffer(index_t n, const backends::workspace_allocator& a = {})
        : n_(static_cast<std::size_t>(std::max<index_t>(n, 0))), alloc_(a) {
        if (n_ == 0) return;
        p_ = static_cast<W*>(alloc_ ? workspace_allocate(alloc_, bytes(), nullptr)
                                    : ::operator new(bytes(), std::align_val_t(backends::workspace_alignment)));
        std::uninitialized_fill(p_, p_ + n_, std::numeric_limits<W>::quiet_NaN());
    }
    host_buffer(host_buffer&& o) noexcept
        : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)), alloc_(o.alloc_) {}
    host_buffer& operator=(host_buffer&& o) noexcept {
        std::swap(p_, o.p_);
        std::swap(n_, o.n_);
        std::swap(alloc_, o.alloc_);
        return *this;
    }
    host_buffer(const host_buffer&) = delete;
    host_buffer& operator=(const host_buffer&) = delete;
    ~host_buffer() {
        if (!p_) return;
        if (alloc_)
            alloc_.deallocate(alloc_.context, p_, bytes(), nullptr);
        else
            ::operator delete(p_, std::align_val_t(backends::workspace_alignment));
    }
    W* data() const { return p_; }

private:
    std::size_t bytes() const { return n_ * sizeof(W); }
    W* p_ = nullptr;
    std::size_t n_ = 0;
    backends::workspace_allocator alloc_;
};

/// x rounded to nearest (ties to even) at `bits` mantissa bits, as a float; fp16 also
/// overflows to ±∞ beyond 65504 and flushes below its subnormal range like the format.
inline float round_mantissa(float x, int bits) {
    std::uint32_t u;
    std::memcpy(&u, &x, sizeof u);
    if ((u & 0x7f800000u) == 0x7f800000u) return x;  // ±∞, NaN
    const int drop = 23 - bits;
    const std::uint32_t half = 1u << (drop - 1), lsb = (u >> drop) & 1u;
    u = (u + half - 1 + lsb) & ~((1u << drop) - 1u);
    float r;
    std::memcpy(&r, &u, sizeof r);
    return r;
}

inline float round_to(backends::float_gemm p, float x) {
    switch (p) {
        case backends::float_gemm::tf32:
            return round_mantissa(x, 10);
        case backends::float_gemm::bf16:
            return round_mantissa(x, 7);
        case backends::float_gemm::fp16: {
            const float a = std::fabs(x);
            if (!(a < 65520.f)) return a == a ? std::copysign(std::numeric_limits<float>::infinity(), x) : x;
            if (a < 6.103515625e-05f) {  // fp16 subnormals: a fixed step of 2^-24
                const float step = 5.9604644775390625e-08f;
                return std::nearbyint(x / step) * step;
            }
            return round_mantissa(x, 10);
        }
        case backends::float_gemm::fp32:
            break;
    }
    return x;
}

/// A host "mirror": the host pointer itself.
template <class T>
struct host_mirror {
    const T* p;
    const T* get() const { return p; }
};

}  // namespace kattn::detail

namespace kattn::backends {

/// The chunked algorithm on the host's OpenMP threads (see the file comment). Used to
/// test the CUDA system's algorithm on any machine; simd is the fast CPU backend.
struct host_system {
    static constexpr const char* name = "chunked-host";
    /// mirror() hands out the host pointer itself: it allocates nothing.
    static constexpr bool mirror_copies = false;
    template <class W>
    using buffer = detail::host_buffer<W>;

    /// The rounding of float products' inputs (exact by default; the others emulate a
    /// GPU's tensor-core formats).
    float_gemm float_math = float_gemm::fp32;
    /// Scratch memory from the caller (backends/workspace.hpp), or the heap when empty.
    workspace_allocator allocator{};
    /// Make a forward pass's outputs one tile of 64 query rows at a time
    /// (launch_chunk_outputs); false runs the products and row passes. Both give the same
    /// bits on the host, which the tests check.
    bool fused_outputs = true;
    /// Make the causal block states (and the backward's cotangent states) and scan them
    /// within segments one (problem, segment) at a time (launch_chunk_states); false runs
    /// the batched product and the scan. Both give the same bits on the host, which the
    /// tests check.
    bool fused_states = true;

    template <class W>
    buffer<W> make_buffer(index_t n) const {
        return buffer<W>(n, allocator);
    }

    template <class Fn>
    void launch(index_t n, const Fn& fn) const {
#pragma omp parallel for schedule(static)
        for (index_t i = 0; i < n; ++i) fn(i);
    }

    /// Row-major batched product; each C entry is one dot product in k order, its inputs
    /// rounded as float_math says (float only).
    template <class W>
    void gemm(bool ta, bool tb, index_t M, index_t N, index_t K, const W* A, index_t lda, index_t sA, const W* B,
              index_t ldb, index_t sB, W* C, index_t ldc, index_t sC, index_t batch, bool accumulate = false) const {
        const bool round = std::is_same_v<W, float> && float_math != float_gemm::fp32;
        const auto in = [&](W x) {
            if constexpr (std::is_same_v<W, float>)
                return round ? detail::round_to(float_math, x) : x;
            else
                return x;
        };
#pragma omp parallel for schedule(static)
        for (index_t r = 0; r < batch * M; ++r) {
            const index_t i = r / M, m = r % M;
            const W* a = A + i * sA;
            const W* b = B + i * sB;
            W* c = C + i * sC + m * ldc;
            for (index_t n = 0; n < N; ++n) {
                W acc = W(0);
                for (index_t k = 0; k < K; ++k)
                    acc += in(ta ? a[k * lda + m] : a[m * lda + k]) * in(tb ? b[n * ldb + k] : b[k * ldb + n]);
                c[n] = accumulate ? c[n] + acc : acc;
            }
        }
    }

    /// Whether launch_chunk_outputs runs (any working precision).
    template <class W>
    bool fuses_chunk_outputs(index_t, index_t) const {
        return fused_outputs;
    }

    /// The output stage per tile of 64 query rows (output_tiles, chunked/kernels.hpp): the
    /// tile's products are this system's gemm (run inside one thread) and mask and emit are
    /// the functors the row passes call, so the result has the same bits as the products and
    /// row passes it replaces.
    template <class Tiles, class Mask, class Emit>
    void launch_chunk_outputs(const Tiles& t, const Mask& mask, const Emit& emit) const {
        using W = std::remove_cv_t<std::remove_pointer_t<decltype(t.phq)>>;
        constexpr index_t C = Tiles::rows;
        const index_t F = t.F, dv1 = t.dv1;
#pragma omp parallel for schedule(static)
        for (index_t ti = 0; ti < t.count; ++ti) {
            std::vector<W> O(static_cast<std::size_t>(C * dv1)), S, Oa;
            const W* q = t.phq + ti * C * F;
            gemm(false, false, C, dv1, F, q, F, 0, t.state(ti), dv1, 0, O.data(), dv1, 0, 1);
            if (t.intra()) {
                S.resize(static_cast<std::size_t>(C * C));
                Oa.resize(static_cast<std::size_t>(C * dv1));
                gemm(false, true, C, C, F, q, F, 0, t.phk + ti * C * F, F, 0, S.data(), C, 0, 1);
                for (index_t e = 0; e < C * C; ++e)
                    S[static_cast<std::size_t>(e)] = mask.apply(ti * C * C + e, S[static_cast<std::size_t>(e)]);
                gemm(false, false, C, dv1, C, S.data(), C, 0, t.V1 + ti * C * dv1, dv1, 0, Oa.data(), dv1, 0, 1);
            }
            for (index_t i = 0; i < C; ++i)
                emit.apply(ti * C + i, O.data() + i * dv1, t.intra() ? Oa.data() + i * dv1 : nullptr);
        }
    }

    /// Whether launch_chunk_states runs (any working precision).
    template <class W>
    bool fuses_chunk_states(index_t, index_t) const {
        return fused_states;
    }

    /// Block states scanned within segments, per (problem, segment) (segment_states,
    /// chunked/scans.hpp; the prefix's or the suffix's steps): each block's product is this
    /// system's gemm and each step the scan's own, so the result has the same bits as the
    /// batched product and the scan it replaces.
    template <class Job, class Steps>
    void launch_chunk_states(const Job& job, const Steps& steps) const {
        using W = std::remove_cv_t<std::remove_pointer_t<decltype(job.A)>>;
        constexpr index_t C = Job::rows;
        const index_t F = job.F, dv1 = job.dv1, n = F * dv1;
#pragma omp parallel for schedule(static)
        for (index_t ps = 0; ps < job.jobs(); ++ps) {
            const index_t p = ps / job.sg.count, s = ps % job.sg.count;
            const index_t b0 = job.sg.first(s), b1 = job.sg.last(s, job.nb);
            std::vector<W> run(static_cast<std::size_t>(n), W(0)), cur(static_cast<std::size_t>(n));
            for (index_t i = 0; i <= b1 - b0; ++i) {
                const index_t b = Steps::reverse ? b1 - i : b0 + i, pb = p * job.nb + b;
                gemm(true, false, F, dv1, C, job.phi + pb * C * F, F, 0, job.Y + pb * C * dv1, dv1, 0, cur.data(), dv1,
                     0, 1);
                const auto st = steps.at(p, b, b - b0);
                W* a = job.A + pb * n;
                for (index_t e = 0; e < n; ++e) {
                    const auto x = static_cast<std::size_t>(e);
                    run[x] = st.begin(run[x]);
                    a[e] = st.stored(run[x]);
                    run[x] = st.next(run[x], cur[x]);
                }
            }
            std::copy(run.begin(), run.end(), job.T + ps * n);
        }
    }

    template <class T>
    detail::host_mirror<T> mirror(const T* p, index_t) const {
        return {p};
    }
    template <class T>
    void to_host(T* dst, const T* src, index_t n) const {
        if (n > 0 && dst != src) std::memmove(dst, src, static_cast<std::size_t>(n) * sizeof(T));
    }
};

}  // namespace kattn::backends

namespace kattn::detail {

/// Bytes a sizing_system's buffers hold now, and at most, each rounded to whole
/// workspace_alignment units.
struct workspace_tally {
    std::size_t live = 0, peak = 0;
};

/// A buffer that holds no memory, only its rounded byte count in the tally.
template <class W>
class sizing_buffer {
public:
    sizing_buffer(index_t n, workspace_tally* t)
        : t_(t), bytes_(n > 0 ? backends::workspace_round(static_cast<std::size_t>(n) * sizeof(W)) : 0) {
        t_->live += bytes_;
        t_->peak = std::max(t_->peak, t_->live);
    }
    sizing_buffer(sizing_buffer&& o) noexcept : t_(o.t_), bytes_(std::exchange(o.bytes_, 0)) {}
    sizing_buffer& operator=(sizing_buffer&& o) noexcept {
        std::swap(t_, o.t_);
        std::swap(bytes_, o.bytes_);
        return *this;
    }
    sizing_buffer(const sizing_buffer&) = delete;
    sizing_buffer& operator=(const sizing_buffer&) = delete;
    ~sizing_buffer() { t_->live -= bytes_; }
    W* data() const { return nullptr; }

private:
    workspace_tally* t_;
    std::size_t bytes_;
};

/// A mirror that counts the copy's bytes; get() is the host pointer (never dereferenced).
template <class T>
struct sizing_mirror {
    sizing_buffer<T> buf;
    const T* p;
    const T* get() const { return p; }
};

/// Whether S's mirror() allocates a copy (a capability with a default: true unless S
/// says `static constexpr bool mirror_copies = false`).
template <class S>
constexpr bool mirror_copies() {
    if constexpr (requires { S::mirror_copies; })
        return S::mirror_copies;
    else
        return true;
}

/// A system that runs nothing: it counts the scratch a chunked algorithm allocates, in the
/// order it allocates and frees it. Functors and products are never called, so no pointer
/// it hands out is dereferenced.
struct sizing_system {
    static constexpr const char* name = "sizing";
    template <class W>
    using buffer = sizing_buffer<W>;
    workspace_tally* tally;
    bool count_mirrors = true;                                ///< the sized system's mirror() allocates
    bool projected_rows = false;                              ///< the sized system builds φ in one pass (float)
    bool chunk_outputs = false;                               ///< the sized system makes the outputs in tiles
    index_t single_pass_cw = 0;                               ///< the sized system's single_pass_columns (0: none)
    detail::single_pass_grads_widths single_pass_grads = {};  ///< its single_pass_grads_widths (none: 0, 0)

    template <class W>
    buffer<W> make_buffer(index_t n) const {
        return buffer<W>(n, tally);
    }
    template <class Fn>
    void launch(index_t, const Fn&) const {}
    template <class W>
    void gemm(bool, bool, index_t, index_t, index_t, const W*, index_t, index_t, const W*, index_t, index_t, W*,
              index_t, index_t, index_t, bool = false) const {}
    /// Takes the one-pass path exactly where the sized system would (for float, whose Ω
    /// is a float pointer), so that the count leaves out the three passes' buffers.
    template <class Gather, class Act>
    bool launch_projected_rows(index_t, index_t, index_t, const float*, const Gather&, const Act&) const {
        return projected_rows;
    }
    /// As the sized system answers (the call's O, K and Oa buffers are then not made).
    template <class W>
    bool fuses_chunk_outputs(index_t, index_t) const {
        return chunk_outputs;
    }
    template <class Tiles, class Mask, class Emit>
    void launch_chunk_outputs(const Tiles&, const Mask&, const Emit&) const {}
    /// As the sized system answers (the single pass allocates nothing).
    template <class W>
    index_t single_pass_columns(index_t, index_t, index_t, index_t) const {
        return single_pass_cw;
    }
    template <class Job>
    void launch_causal_single_pass(const Job&) const {}
    /// As the sized system answers (the walks' buffers are then counted instead of the
    /// multi-pass backward's).
    template <class W>
    detail::single_pass_grads_widths single_pass_grads_widths(index_t, index_t, index_t, index_t) const {
        return single_pass_grads;
    }
    template <class Job>
    void launch_single_pass_grads(const Job&) const {}
    template <class T>
    sizing_mirror<T> mirror(const T* p, index_t n) const {
        return {sizing_buffer<T>(count_mirrors ? n : 0, tally), p};
    }
    template <class T>
    void to_host(T*, const T*, index_t) const {}
};

}  // namespace kattn::detail
