// kattn/dist/self_communicator.hpp — the group of one process.
//
// Satisfies kattn::dist::communicator without any transport: all_gather copies, sums
// and broadcasts leave the data as it is. Code written against a communicator runs
// unchanged in a single process (tests, a laptop, a program built without MPI).
#pragma once

#include <algorithm>
#include <cstdint>

#include "communicator.hpp"

namespace kattn::dist {

class self_communicator {
public:
    int rank() const { return 0; }
    int size() const { return 1; }

    template <class T>
    void all_gather(const T* send, T* recv, std::size_t n) {
        detail::count_collective(stats_, detail::gather_kind, n * sizeof(T), 1, true);
        std::copy(send, send + n, recv);
    }
    template <class T>
    void all_reduce_sum(T*, std::size_t n) {
        detail::count_collective(stats_, detail::reduce_kind, n * sizeof(T), 1, true);
    }
    template <class T>
    void broadcast(T*, std::size_t n, int) {
        detail::count_collective(stats_, detail::broadcast_kind, n * sizeof(T), 1, true);
    }
    void barrier() {}
    const comm_stats& stats() const { return stats_; }
    void reset_stats() { stats_ = {}; }

private:
    comm_stats stats_;
};

static_assert(communicator<self_communicator>);

}  // namespace kattn::dist
