// kattn/backends/cuda.cuh — the CUDA backend: the chunked algorithm on a GPU (nvcc only).
//
//   kattn::backends::cuda          = chunked<cuda_system>
//   kattn::backends::cuda_system{stream, float_math, allocator}
//
// cuda_system supplies the chunked backend's primitives (chunked/system.hpp) on one CUDA
// stream: scratch from cudaMallocAsync / cudaFreeAsync (stream-ordered) or from the
// caller's workspace_allocator, one grid-stride kernel per functor,
// cublasGemmStridedBatchedEx for every product (float: TF32 tensor cores by default,
// float_gemm::bf16 / fp16 for the 16-bit tensor cores, float_gemm::fp32 for exact FP32,
// all with FP32 accumulation; double: FP64), cudaMemcpyAsync for the host API's copies;
// φ in one kernel (projected_rows.cuh) where it applies; on request, the forward's outputs
// in one kernel per tile of 64 query rows (fused_outputs, chunk_outputs.cuh) and the causal
// block states scanned as they are made (fused_states, chunk_states.cuh), and, for maps
// without a stabiliser and Ω = I, the causal forward as one pass over the chunks with the
// state on chip, and its backward as three walks over them (single_pass,
// causal_single_pass.cuh, causal_single_pass_grads.cuh). No atomics and no
// float scans: the same call on the same GPU gives the same bits (cuBLAS is deterministic for a fixed GPU, stream and toolkit).
// Operators (linear_attention<Map, S, backends::cuda, T>) run on the default stream with
// TF32; the device-resident call takes a cuda_system object with its own stream and
// precision. docs/cuda_backend.md.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "../core/error.hpp"
#include "causal_single_pass.cuh"
#include "causal_single_pass_grads.cuh"
#include "chunk_outputs.cuh"
#include "chunk_states.cuh"
#include "chunked.hpp"
#include "projected_rows.cuh"
#include "warp_ops.cuh"

namespace kattn::detail {

inline void cuda_check(cudaError_t e, const char* what) {
    if (e != cudaSuccess) throw kattn::error(std::string("kattn: CUDA: ") + what + ": " + cudaGetErrorString(e));
}

inline void cublas_check(cublasStatus_t s, const char* what) {
    if (s != CUBLAS_STATUS_SUCCESS)
        throw kattn::error(std::string("kattn: cuBLAS: ") + what + ": " + cublasGetStatusString(s));
}

/// Device scratch of n elements, allocated and freed in stream order: cudaMallocAsync, or
/// the caller's allocator when one is set.
template <class W>
class cuda_buffer {
public:
    cuda_buffer(index_t n, cudaStream_t s, const backends::workspace_allocator& a = {})
        : stream_(s), alloc_(a), bytes_(n > 0 ? static_cast<std::size_t>(n) * sizeof(W) : 0) {
        if (bytes_ == 0) return;
        if (alloc_)
            p_ = static_cast<W*>(workspace_allocate(alloc_, bytes_, static_cast<void*>(s)));
        else
            cuda_check(cudaMallocAsync(reinterpret_cast<void**>(&p_), bytes_, s), "cudaMallocAsync");
    }
    cuda_buffer(cuda_buffer&& o) noexcept
        : p_(std::exchange(o.p_, nullptr)), stream_(o.stream_), alloc_(o.alloc_), bytes_(o.bytes_) {}
    cuda_buffer& operator=(cuda_buffer&& o) noexcept {
        std::swap(p_, o.p_);
        std::swap(stream_, o.stream_);
        std::swap(alloc_, o.alloc_);
        std::swap(bytes_, o.bytes_);
        return *this;
    }
    cuda_buffer(const cuda_buffer&) = delete;
    cuda_buffer& operator=(const cuda_buffer&) = delete;
    ~cuda_buffer() {
        if (!p_) return;
        if (alloc_)
            alloc_.deallocate(alloc_.context, p_, bytes_, static_cast<void*>(stream_));
        else
            cudaFreeAsync(p_, stream_);
    }
    W* data() const { return p_; }

private:
    W* p_ = nullptr;
    cudaStream_t stream_ = nullptr;
    backends::workspace_allocator alloc_;
    std::size_t bytes_ = 0;
};

/// A device copy of n host elements.
template <class T>
class cuda_mirror {
public:
    cuda_mirror(const T* host, index_t n, cudaStream_t s, const backends::workspace_allocator& a) : buf_(n, s, a) {
        if (n > 0 && host)
            cuda_check(
                cudaMemcpyAsync(buf_.data(), host, static_cast<std::size_t>(n) * sizeof(T), cudaMemcpyHostToDevice, s),
                "cudaMemcpyAsync (host to device)");
    }
    const T* get() const { return buf_.data(); }

private:
    cuda_buffer<T> buf_;
};

template <class Fn>
__global__ void for_each_index(index_t n, Fn fn) {
    const index_t stride = index_t(gridDim.x) * blockDim.x;
    for (index_t i = index_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) fn(i);
}

/// One warp per index: every lane of warp w calls fn(w) (row functors with warp_ops).
template <class Fn>
__global__ void for_each_row(index_t n, Fn fn) {
    const index_t warps = index_t(gridDim.x) * (blockDim.x / 32);
    for (index_t r = (index_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32; r < n; r += warps) fn(r);
}

/// One cuBLAS handle per thread and device, created on first use.
inline cublasHandle_t cublas_handle() {
    struct handles {
        std::vector<cublasHandle_t> h;
        ~handles() {
            for (auto x : h)
                if (x) cublasDestroy(x);
        }
    };
    thread_local handles cache;
    int dev = 0;
    cuda_check(cudaGetDevice(&dev), "cudaGetDevice");
    if (cache.h.size() <= std::size_t(dev)) cache.h.resize(std::size_t(dev) + 1, nullptr);
    if (!cache.h[std::size_t(dev)]) cublas_check(cublasCreate(&cache.h[std::size_t(dev)]), "cublasCreate");
    return cache.h[std::size_t(dev)];
}

/// What the projected-rows kernel needs of the current device: its compute capability's
/// major version and the shared memory a block may opt into (cached per thread and device).
struct cuda_device_limits {
    int major = 0;
    int shared_optin = 0;
    int sms = 0;  ///< multiprocessors
};
inline cuda_device_limits device_limits() {
    thread_local std::vector<cuda_device_limits> cache;
    int dev = 0;
    cuda_check(cudaGetDevice(&dev), "cudaGetDevice");
    if (cache.size() <= std::size_t(dev)) cache.resize(std::size_t(dev) + 1);
    auto& l = cache[std::size_t(dev)];
    if (l.major == 0) {
        cuda_check(cudaDeviceGetAttribute(&l.major, cudaDevAttrComputeCapabilityMajor, dev), "cudaDeviceGetAttribute");
        cuda_check(cudaDeviceGetAttribute(&l.shared_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev),
                   "cudaDeviceGetAttribute");
        cuda_check(cudaDeviceGetAttribute(&l.sms, cudaDevAttrMultiProcessorCount, dev), "cudaDeviceGetAttribute");
    }
    return l;
}

inline int cublas_int(index_t v, const char* what) {
    if (v < 0 || v > INT_MAX)
        throw kattn::error(std::string("kattn: CUDA backend: ") + what + " = " + std::to_string(v) +
                           " exceeds cuBLAS's 32-bit extents");
    return int(v);
}

}  // namespace kattn::detail

namespace kattn::backends {

struct cuda_system {
    static constexpr const char* name = "cuda";
    template <class W>
    using buffer = detail::cuda_buffer<W>;

    cudaStream_t stream = nullptr;
    /// Tensor-core format of float products (float_gemm: tf32, bf16, fp16; fp32 exact).
    float_gemm float_math = float_gemm::tf32;
    /// Scratch memory from the caller (backends/workspace.hpp), or cudaMallocAsync.
    workspace_allocator allocator{};
    /// Build φ in one kernel where it applies (launch_projected_rows); false keeps the
    /// three passes of gather, cuBLAS projection and activation.
    bool fused_features = true;
    /// Make a forward pass's outputs in one kernel per tile of 64 query rows where it
    /// applies (launch_chunk_outputs); false keeps the cuBLAS products and row passes.
    /// Off by default until the kernel has been measured and checked on a GPU (the tests
    /// run both ways; docs/cuda_backend.md §5).
    bool fused_outputs = false;
    /// Make the causal block states and the first step of their scan in one kernel where
    /// it applies (launch_chunk_states); false keeps the cuBLAS product and the scan. Off
    /// by default until the kernel has been measured and checked on a GPU (the tests run
    /// both ways; docs/cuda_backend.md §5).
    bool fused_states = false;
    /// Run the causal forward of a map without a stabiliser and Ω = I (elu with the
    /// identity sampler: flash-linear-attention's plain linear attention) as one kernel that
    /// walks each head's chunks with the state on chip, where it applies
    /// (single_pass_columns), and its backward as three kernels that walk the chunks
    /// (single_pass_grads_widths). Off by default until the kernels have
    /// been measured on a GPU (docs/cuda_backend.md §5).
    bool single_pass = false;

    template <class W>
    buffer<W> make_buffer(index_t n) const {
        return buffer<W>(n, stream, allocator);
    }

    template <class Fn>
    void launch(index_t n, const Fn& fn) const {
        if (n <= 0) return;
        constexpr int threads = 256;
        const index_t blocks = std::min<index_t>((n + threads - 1) / threads, index_t(1) << 20);
        detail::for_each_index<<<unsigned(blocks), threads, 0, stream>>>(n, fn);
        detail::cuda_check(cudaGetLastError(), "kernel launch");
    }

    /// The row-ops policy of launch_rows: a warp per row (backends/warp_ops.cuh).
    using row_ops = detail::warp_ops;

    /// fn(r) for r in [0, n) with one warp per r, all of its lanes calling fn(r): for row
    /// functors written with row_ops (chunked/kernels.hpp), whose memory accesses then
    /// coalesce over a row's elements.
    template <class Fn>
    void launch_rows(index_t n, const Fn& fn) const {
        if (n <= 0) return;
        constexpr int threads = 256, rows_per_block = threads / 32;
        const index_t blocks = std::min<index_t>((n + rows_per_block - 1) / rows_per_block, index_t(1) << 20);
        detail::for_each_row<<<unsigned(blocks), threads, 0, stream>>>(n, fn);
        detail::cuda_check(cudaGetLastError(), "kernel launch");
    }

    /// For every row r < n: gather.load(r, x), u = x·Ω (Ω: d × P, row-major), then
    /// act.apply(r, x, u), in one kernel with x and u in shared memory
    /// (backends/projected_rows.cuh); both functors written for row_ops. The product
    /// rounds its inputs to TF32, so it runs only when float products are not exact
    /// (float_math ≠ fp32). Returns false, having done nothing, where the kernel does not
    /// apply (fused_features off, shape, alignment, device); the caller then runs the
    /// three passes.
    template <class Gather, class Act>
    bool launch_projected_rows(index_t n, index_t d, index_t P, const float* omega, const Gather& gather,
                               const Act& act) const {
        if (!projects_rows(d, P, omega)) return false;
        if (n <= 0) return true;
        const std::size_t bytes = detail::projected_shared_bytes(int(d), int(P));
        const auto kernel = detail::projected_rows_kernel<Gather, Act>;
        if (bytes > 48 * 1024)
            detail::cuda_check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)),
                               "cudaFuncSetAttribute");
        const index_t tiles = (n + detail::projected_tile_rows - 1) / detail::projected_tile_rows;
        const index_t blocks = std::min<index_t>(tiles, index_t(1) << 20);
        kernel<<<unsigned(blocks), detail::projected_threads, bytes, stream>>>(n, int(d), int(P), omega, gather, act);
        detail::cuda_check(cudaGetLastError(), "kernel launch");
        return true;
    }

    /// Whether launch_projected_rows runs for inputs of d columns and Ω (d × P) at omega:
    /// fused_features on, non-exact float products, d a multiple of 8 and P of 16 (at most
    /// 4,096 each), Ω 32-byte aligned, a device of compute capability 8.0 or newer with the
    /// shared memory for the tiles. The workspace query asks it too, to count what the call
    /// will allocate.
    bool projects_rows(index_t d, index_t P, const float* omega) const {
        if (!fused_features || float_math == float_gemm::fp32 || !detail::projected_rows_shape(d, P, omega))
            return false;
        const auto lim = detail::device_limits();
        return lim.major >= 8 && detail::projected_shared_bytes(int(d), int(P)) <= std::size_t(lim.shared_optin);
    }

    /// Whether launch_chunk_outputs runs for F features and dv1 value columns: float,
    /// fused_outputs on, non-exact float products (the kernel rounds to TF32), F a multiple
    /// of 8, a device of compute capability 8.0 or newer with the shared memory for the
    /// tiles. The chunked forward asks before it allocates, and so does the workspace query.
    template <class W>
    bool fuses_chunk_outputs(index_t F, index_t dv1) const {
        if constexpr (!std::is_same_v<W, float>) {
            return false;
        } else {
            if (!fused_outputs || float_math == float_gemm::fp32 || !detail::chunk_outputs_shape(F, dv1)) return false;
            const auto lim = detail::device_limits();
            return lim.major >= 8 && detail::output_shared_bytes(int(dv1), true) <= std::size_t(lim.shared_optin);
        }
    }

    /// The forward's output stage over tiles of 64 query rows (chunked_impl::output_tiles),
    /// in one kernel (backends/chunk_outputs.cuh) with mask and emit (mask_scores and
    /// emit_rows, the latter written for row_ops). Call only where fuses_chunk_outputs said
    /// yes.
    template <class Tiles, class Mask, class Emit>
    void launch_chunk_outputs(const Tiles& t, const Mask& mask, const Emit& emit) const {
        using W = std::remove_cv_t<std::remove_pointer_t<decltype(t.phq)>>;
        if constexpr (!std::is_same_v<W, float>) {
            throw kattn::error("kattn: CUDA backend: launch_chunk_outputs: float tiles only (fuses_chunk_outputs)");
        } else {
            if (t.count <= 0) return;
            const std::size_t bytes = detail::output_shared_bytes(int(t.dv1), t.intra());
            const auto kernel = detail::chunk_outputs_kernel<Tiles, Mask, Emit>;
            if (bytes > 48 * 1024)
                detail::cuda_check(
                    cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)),
                    "cudaFuncSetAttribute");
            const index_t blocks = std::min<index_t>(t.count, index_t(1) << 20);
            kernel<<<unsigned(blocks), detail::output_threads, bytes, stream>>>(t, mask, emit);
            detail::cuda_check(cudaGetLastError(), "kernel launch");
        }
    }

    /// Whether launch_chunk_states runs for F features and dv1 value columns: float,
    /// fused_states on, non-exact float products (the kernel rounds to TF32), F a multiple
    /// of 16 and dv1 of 4, a device of compute capability 8.0 or newer.
    template <class W>
    bool fuses_chunk_states(index_t F, index_t dv1) const {
        if constexpr (!std::is_same_v<W, float>) {
            return false;
        } else {
            if (!fused_states || float_math == float_gemm::fp32 || !detail::chunk_states_shape(F, dv1)) return false;
            return detail::device_limits().major >= 8;
        }
    }

    /// The causal block states and the first step of their scan (chunked_impl::
    /// segment_states, with the scan's steps) in one kernel (backends/chunk_states.cuh).
    /// Call only where fuses_chunk_states said yes.
    template <class Job, class Steps>
    void launch_chunk_states(const Job& job, const Steps& steps) const {
        using W = std::remove_cv_t<std::remove_pointer_t<decltype(job.A)>>;
        if constexpr (!std::is_same_v<W, float>) {
            throw kattn::error("kattn: CUDA backend: launch_chunk_states: float states only (fuses_chunk_states)");
        } else {
            const index_t blocks = std::min<index_t>(detail::chunk_states_blocks(job), index_t(1) << 20);
            if (blocks <= 0) return;
            detail::
                chunk_states_kernel<<<unsigned(blocks), detail::states_threads, detail::states_shared_bytes, stream>>>(
                    job, steps);
            detail::cuda_check(cudaGetLastError(), "kernel launch");
        }
    }

    /// The value columns per thread block of launch_causal_single_pass for this call, or 0
    /// where it does not run: single_pass off, double, exact float products, a device older
    /// than compute capability 8.0, or where detail::single_pass_width says no (a shape the
    /// kernel does not take, tiles beyond a block's shared memory, fewer blocks than
    /// multiprocessors).
    template <class W>
    index_t single_pass_columns(index_t problems, index_t d, index_t F, index_t dv) const {
        return single_pass_plan<W>([&](index_t sms, std::size_t shared) {
            return detail::single_pass_width(problems, d, F, dv, sms, shared);
        });
    }

    /// The causal forward in one kernel (chunked_impl::single_pass_job; backends/
    /// causal_single_pass.cuh). Call only with the width single_pass_columns gave.
    template <class Job>
    void launch_causal_single_pass(const Job& job) const {
        if constexpr (!std::is_same_v<typename Job::work, float>) {
            throw kattn::error("kattn: CUDA backend: launch_causal_single_pass: float work only (single_pass_columns)");
        } else {
            launch_single_pass_kernel(detail::causal_single_pass_kernel<Job>, job, job.jobs(),
                                      detail::single_pass_shared_bytes(job.g.d, job.g.F, job.cw));
        }
    }

    /// The widths of launch_single_pass_grads's walks for this backward call (features per
    /// block of the dφ walks, value columns per block of dV's walk), or none where they do
    /// not run: as single_pass_columns, with detail::single_pass_grads_plan.
    template <class W>
    detail::single_pass_grads_widths single_pass_grads_widths(index_t problems, index_t d, index_t F,
                                                              index_t dv) const {
        return single_pass_plan<W>([&](index_t sms, std::size_t shared) {
            return detail::single_pass_grads_plan(problems, d, F, dv, sms, shared);
        });
    }

    /// The causal backward's three walks over the chunks (chunked_impl::single_pass_grads_job;
    /// backends/causal_single_pass_grads.cuh), in stream order. Call only with the widths
    /// single_pass_grads_widths gave.
    template <class Job>
    void launch_single_pass_grads(const Job& job) const {
        if constexpr (!std::is_same_v<typename Job::work, float>) {
            throw kattn::error(
                "kattn: CUDA backend: launch_single_pass_grads: float work only "
                "(single_pass_grads_widths)");
        } else {
            const auto& g = job.g();
            const std::size_t dphi_bytes = detail::single_pass_dphi_shared_bytes(g.d, g.F, job.fw, g.dv);
            launch_single_pass_kernel(detail::single_pass_dphi_kernel<false, Job>, job, job.feature_jobs(), dphi_bytes);
            launch_single_pass_kernel(detail::single_pass_dphi_kernel<true, Job>, job, job.feature_jobs(), dphi_bytes);
            launch_single_pass_kernel(detail::single_pass_dv_kernel<Job>, job, job.value_jobs(),
                                      detail::single_pass_dv_shared_bytes(g.d, g.F, job.cw));
        }
    }

    /// Row-major C_i = op(A_i)·op(B_i) as the column-major product C_iᵀ = op(B_i)ᵀ·op(A_i)ᵀ.
    template <class W>
    void gemm(bool ta, bool tb, index_t M, index_t N, index_t K, const W* A, index_t lda, index_t sA, const W* B,
              index_t ldb, index_t sB, W* C, index_t ldc, index_t sC, index_t batch, bool accumulate = false) const {
        if (M <= 0 || N <= 0 || batch <= 0) return;
        static_assert(std::is_same_v<W, float> || std::is_same_v<W, double>,
                      "kattn: cuda_system::gemm: float or double");
        const cublasHandle_t h = detail::cublas_handle();
        detail::cublas_check(cublasSetStream(h, stream), "cublasSetStream");
        const W alpha = 1, beta = accumulate ? 1 : 0;
        const cudaDataType_t type = std::is_same_v<W, float> ? CUDA_R_32F : CUDA_R_64F;
        const cublasComputeType_t compute = std::is_same_v<W, double> ? CUBLAS_COMPUTE_64F : float_compute();
        detail::cublas_check(
            cublasGemmStridedBatchedEx(
                h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, detail::cublas_int(N, "N"),
                detail::cublas_int(M, "M"), detail::cublas_int(K, "K"), &alpha, B, type, detail::cublas_int(ldb, "ldb"),
                sB, A, type, detail::cublas_int(lda, "lda"), sA, &beta, C, type, detail::cublas_int(ldc, "ldc"), sC,
                detail::cublas_int(batch, "batch"), compute, CUBLAS_GEMM_DEFAULT),
            "cublasGemmStridedBatchedEx");
    }

    template <class T>
    detail::cuda_mirror<T> mirror(const T* host, index_t n) const {
        return detail::cuda_mirror<T>(host, n, stream, allocator);
    }

    /// The single passes' widths for work type W: width(multiprocessors, shared bytes a block
    /// may opt into) where they may run (single_pass on, float work, non-exact products, a
    /// device of compute capability 8.0 or newer), else none (a value-initialised answer).
    template <class W, class Width>
    auto single_pass_plan(Width&& width) const -> decltype(width(index_t{}, std::size_t{})) {
        if constexpr (!std::is_same_v<W, float>) {
            return {};
        } else {
            if (!single_pass || float_math == float_gemm::fp32) return {};
            const auto lim = detail::device_limits();
            if (lim.major < 8) return {};
            return width(index_t(lim.sms), std::size_t(lim.shared_optin));
        }
    }

    /// One of the single passes' kernels over `jobs` blocks' work (at most 2^20 blocks; each
    /// loops over its share), with `bytes` of dynamic shared memory (opted into above 48 KiB).
    template <class Kernel, class Job>
    void launch_single_pass_kernel(Kernel kernel, const Job& job, index_t jobs, std::size_t bytes) const {
        const index_t blocks = std::min<index_t>(jobs, index_t(1) << 20);
        if (blocks <= 0) return;
        if (bytes > 48 * 1024)
            detail::cuda_check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)),
                               "cudaFuncSetAttribute");
        kernel<<<unsigned(blocks), detail::single_pass_threads, bytes, stream>>>(job);
        detail::cuda_check(cudaGetLastError(), "kernel launch");
    }

    /// cuBLAS's compute type for float_math: FP32 accumulation with inputs converted to
    /// TF32, BF16 or FP16 inside the tensor-core kernel, or exact FP32.
    cublasComputeType_t float_compute() const {
        switch (float_math) {
            case float_gemm::tf32:
                return CUBLAS_COMPUTE_32F_FAST_TF32;
            case float_gemm::bf16:
                return CUBLAS_COMPUTE_32F_FAST_16BF;
            case float_gemm::fp16:
                return CUBLAS_COMPUTE_32F_FAST_16F;
            case float_gemm::fp32:
                break;
        }
        return CUBLAS_COMPUTE_32F;
    }

    /// Copies n device elements to the host once the stream's work is done.
    template <class T>
    void to_host(T* dst, const T* src, index_t n) const {
        if (n <= 0) return;
        detail::cuda_check(
            cudaMemcpyAsync(dst, src, static_cast<std::size_t>(n) * sizeof(T), cudaMemcpyDeviceToHost, stream),
            "cudaMemcpyAsync (device to host)");
        detail::cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    }
};

/// The CUDA backend: the chunked algorithm on cuda_system (see the file comment).
using cuda = chunked<cuda_system>;

}  // namespace kattn::backends
