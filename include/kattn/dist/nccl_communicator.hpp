// kattn/dist/nccl_communicator.hpp — kattn::dist::communicator over NCCL (device buffers).
//
//   kattn::dist::mpi_communicator world;                        // bootstraps the group
//   auto gpu = kattn::dist::nccl_communicator::from_mpi(world, stream);
//   gpu.all_reduce_sum(d_grads, n);                             // d_grads: device memory
//
// The same collectives as mpi_communicator, on device pointers, enqueued on one CUDA
// stream and completed before the call returns (the communicator concept is blocking).
// NCCL ships with the CUDA toolkit (nccl.h, libnccl); this header needs the CUDA runtime
// headers and links with -lnccl -lcudart. It never runs on the host backends' buffers:
// communicator_traits<nccl_communicator>::device_memory is true.
#pragma once

#include <cstdint>
#include <string>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "../core/error.hpp"
#include "communicator.hpp"
#include "mpi_communicator.hpp"

namespace kattn::dist {

namespace detail {
template <class T>
ncclDataType_t nccl_type();
template <>
inline ncclDataType_t nccl_type<float>() {
    return ncclFloat32;
}
template <>
inline ncclDataType_t nccl_type<double>() {
    return ncclFloat64;
}
template <>
inline ncclDataType_t nccl_type<std::int64_t>() {
    return ncclInt64;
}
template <>
inline ncclDataType_t nccl_type<std::uint8_t>() {
    return ncclUint8;
}

inline void nccl_check(ncclResult_t rc, const char* call) {
    if (rc != ncclSuccess)
        throw kattn::error(std::string("kattn::dist: ") + call + " failed: " + ncclGetErrorString(rc));
}
inline void cuda_check(cudaError_t rc, const char* call) {
    if (rc != cudaSuccess)
        throw kattn::error(std::string("kattn::dist: ") + call + " failed: " + cudaGetErrorString(rc));
}
}  // namespace detail

class nccl_communicator {
public:
    /// Wraps an existing NCCL communicator (not owned) and the stream to run on.
    nccl_communicator(ncclComm_t comm, cudaStream_t stream) : comm_(comm), stream_(stream) {
        detail::nccl_check(ncclCommUserRank(comm_, &rank_), "ncclCommUserRank");
        detail::nccl_check(ncclCommCount(comm_, &size_), "ncclCommCount");
    }
    /// Creates an NCCL communicator over the ranks of `mpi` (rank 0 draws the unique id and
    /// broadcasts it); owned, destroyed with this object. Each rank must have selected
    /// its device (cudaSetDevice) before.
    static nccl_communicator from_mpi(mpi_communicator& mpi, cudaStream_t stream = nullptr) {
        ncclUniqueId id{};
        if (mpi.rank() == 0) detail::nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
        mpi.broadcast(reinterpret_cast<std::uint8_t*>(&id), sizeof(id), 0);
        ncclComm_t comm = nullptr;
        detail::nccl_check(ncclCommInitRank(&comm, mpi.size(), id, mpi.rank()), "ncclCommInitRank");
        nccl_communicator c(comm, stream);
        c.owned_ = true;
        return c;
    }
    nccl_communicator(nccl_communicator&& o) noexcept
        : comm_(o.comm_),
          stream_(o.stream_),
          rank_(o.rank_),
          size_(o.size_),
          owned_(o.owned_),
          stats_(o.stats_),
          flag_(o.flag_) {
        o.owned_ = false;
        o.flag_ = nullptr;
    }
    nccl_communicator& operator=(nccl_communicator&&) = delete;
    nccl_communicator(const nccl_communicator&) = delete;
    ~nccl_communicator() {
        if (flag_) cudaFree(flag_);
        if (owned_) ncclCommDestroy(comm_);
    }

    int rank() const { return rank_; }
    int size() const { return size_; }
    ncclComm_t native() const { return comm_; }
    cudaStream_t stream() const { return stream_; }

    template <class T>
    void all_gather(const T* send, T* recv, std::size_t n) {
        detail::count_collective(stats_, detail::gather_kind, n * sizeof(T), size_, true);
        detail::collective_timer t(stats_);
        detail::nccl_check(ncclAllGather(send, recv, n, detail::nccl_type<T>(), comm_, stream_), "ncclAllGather");
        sync();
    }
    template <class T>
    void all_reduce_sum(T* data, std::size_t n) {
        detail::count_collective(stats_, detail::reduce_kind, n * sizeof(T), size_, true);
        detail::collective_timer t(stats_);
        detail::nccl_check(ncclAllReduce(data, data, n, detail::nccl_type<T>(), ncclSum, comm_, stream_),
                           "ncclAllReduce");
        sync();
    }
    template <class T>
    void broadcast(T* data, std::size_t n, int root) {
        kattn::detail::require(root >= 0 && root < size_, "root", "a rank in [0, size)", root);
        detail::count_collective(stats_, detail::broadcast_kind, n * sizeof(T), size_, rank_ == root);
        detail::collective_timer t(stats_);
        detail::nccl_check(ncclBroadcast(data, data, n, detail::nccl_type<T>(), root, comm_, stream_), "ncclBroadcast");
        sync();
    }
    /// Every rank has reached this call (a one-byte all-reduce, then the stream drained).
    void barrier() {
        detail::collective_timer t(stats_);
        if (!flag_) detail::cuda_check(cudaMalloc(&flag_, 1), "cudaMalloc");
        detail::nccl_check(ncclAllReduce(flag_, flag_, 1, ncclUint8, ncclMax, comm_, stream_), "ncclAllReduce");
        sync();
    }
    const comm_stats& stats() const { return stats_; }
    void reset_stats() { stats_ = {}; }

private:
    void sync() { detail::cuda_check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

    ncclComm_t comm_ = nullptr;
    cudaStream_t stream_ = nullptr;
    int rank_ = 0, size_ = 1;
    bool owned_ = false;
    comm_stats stats_;
    void* flag_ = nullptr;
};

template <>
struct communicator_traits<nccl_communicator> {
    static constexpr bool device_memory = true;
};

static_assert(communicator<nccl_communicator>);

}  // namespace kattn::dist
