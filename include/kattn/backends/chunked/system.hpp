// kattn/backends/chunked/system.hpp — what a chunked backend runs on: the system concept
// and the host system.
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
// plus `static constexpr const char* name`. host_system runs everything on the calling
// process's OpenMP threads: every output element is computed by one thread in a fixed
// order, so results are bitwise independent of the thread count. CUDA: backends/cuda.cuh.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "../../core/config.hpp"
#include "../problem.hpp"

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
}  // namespace kattn::detail

namespace kattn::backends {

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
/// wrote shows it in every test instead of reading a convenient zero.
template <class W>
class host_buffer {
public:
    explicit host_buffer(index_t n)
        : v_(static_cast<std::size_t>(std::max<index_t>(n, 0)), std::numeric_limits<W>::quiet_NaN()) {}
    W* data() { return v_.data(); }
    const W* data() const { return v_.data(); }

private:
    std::vector<W> v_;
};

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
    template <class W>
    using buffer = detail::host_buffer<W>;

    template <class W>
    buffer<W> make_buffer(index_t n) const {
        return buffer<W>(n);
    }

    template <class Fn>
    void launch(index_t n, const Fn& fn) const {
#pragma omp parallel for schedule(static)
        for (index_t i = 0; i < n; ++i) fn(i);
    }

    /// Row-major batched product; each C entry is one dot product in k order.
    template <class W>
    void gemm(bool ta, bool tb, index_t M, index_t N, index_t K, const W* A, index_t lda, index_t sA, const W* B,
              index_t ldb, index_t sB, W* C, index_t ldc, index_t sC, index_t batch, bool accumulate = false) const {
#pragma omp parallel for schedule(static)
        for (index_t r = 0; r < batch * M; ++r) {
            const index_t i = r / M, m = r % M;
            const W* a = A + i * sA;
            const W* b = B + i * sB;
            W* c = C + i * sC + m * ldc;
            for (index_t n = 0; n < N; ++n) {
                W acc = W(0);
                for (index_t k = 0; k < K; ++k)
                    acc += (ta ? a[k * lda + m] : a[m * lda + k]) * (tb ? b[n * ldb + k] : b[k * ldb + n]);
                c[n] = accumulate ? c[n] + acc : acc;
            }
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
