// kattn/dist/communicator.hpp — the communicator policy of kattn's distributed operators.
//
// kattn never moves bytes itself: a communicator wraps an existing transport (MPI for
// host buffers: mpi_communicator.hpp; NCCL for device buffers: nccl_communicator.hpp; a
// world of one process: self_communicator.hpp). Every member is a collective: all
// ranks of the group call it, in the same order, with the same counts.
//   rank(), size()                  this process's index and the group's size
//   all_gather(send, recv, n)       recv [size × n] ← every rank's n elements, in rank order
//   all_reduce_sum(data, n)         data ← Σ over ranks, the same result on every rank
//   broadcast(data, n, root)        data ← root's data
//   barrier()
//   stats()                         counters of what this rank handed to collectives
// Elements are float, double, std::int64_t or std::uint8_t. Reductions that must not
// depend on the transport's summation order are written as all_gather + an ordered sum
// by the caller (kattn::dist::sequence_parallel does).
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>

namespace kattn::dist {

/// What one rank handed to collectives since construction (or reset()).
struct comm_stats {
    std::uint64_t calls = 0;          ///< collective calls
    std::uint64_t payload_bytes = 0;  ///< bytes of this rank's send buffers
    /// Bytes this rank sends on a ring (the bandwidth-optimal schedule): all_gather of n
    /// bytes (size−1)·n, all_reduce 2·(size−1)/size·n, broadcast n from the root.
    std::uint64_t ring_bytes = 0;
    double seconds = 0;  ///< wall time spent inside collectives
};

/// A kattn communicator (see the header comment for the semantics of each member).
template <class C>
concept communicator = requires(C& c, const C& cc, const float* sf, float* rf, const double* sd, double* rd,
                                const std::int64_t* si, std::int64_t* ri, std::size_t n, int root) {
    { cc.rank() } -> std::convertible_to<int>;
    { cc.size() } -> std::convertible_to<int>;
    c.all_gather(sf, rf, n);
    c.all_gather(sd, rd, n);
    c.all_gather(si, ri, n);
    c.all_reduce_sum(rf, n);
    c.all_reduce_sum(rd, n);
    c.all_reduce_sum(ri, n);
    c.broadcast(rf, n, root);
    c.broadcast(rd, n, root);
    c.broadcast(ri, n, root);
    c.barrier();
    { cc.stats() } -> std::convertible_to<comm_stats>;
};

/// Capabilities of a communicator, with defaults: `device_memory` — its buffers live
/// on an accelerator (NCCL), not in host memory.
template <class C>
struct communicator_traits {
    static constexpr bool device_memory = false;
};

namespace detail {
/// Counts one collective of `bytes` from this rank into s (ring model: comm_stats).
inline void count_collective(comm_stats& s, int kind, std::uint64_t bytes, int size, bool root) {
    ++s.calls;
    s.payload_bytes += bytes;
    const auto n = static_cast<std::uint64_t>(size);
    if (kind == 0) s.ring_bytes += (n - 1) * bytes;                   // all_gather
    if (kind == 1 && n > 1) s.ring_bytes += 2 * (n - 1) * bytes / n;  // all_reduce
    if (kind == 2 && root && n > 1) s.ring_bytes += bytes;            // broadcast
}
inline constexpr int gather_kind = 0, reduce_kind = 1, broadcast_kind = 2;
}  // namespace detail

}  // namespace kattn::dist
