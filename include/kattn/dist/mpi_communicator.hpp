// kattn/dist/mpi_communicator.hpp — kattn::dist::communicator over MPI (host buffers).
//
//   kattn::dist::mpi_environment env(argc, argv);   // MPI_Init_thread … MPI_Finalize (RAII)
//   kattn::dist::mpi_communicator comm;              // a duplicate of MPI_COMM_WORLD
//
// The communicator duplicates the group it is given (MPI_Comm_dup), so kattn's messages
// never mix with the program's own, and sets MPI_ERRORS_RETURN on the duplicate: a
// failing MPI call becomes a kattn::error naming the call, not an abort. Needs <mpi.h>
// and libmpi (Debian: libopenmpi-dev; Meson: dependency('mpi', language: 'cpp')).
#pragma once

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <string>

#include <mpi.h>

#include "../core/error.hpp"
#include "communicator.hpp"

namespace kattn::dist {

namespace detail {
template <class T>
MPI_Datatype mpi_type();
template <>
inline MPI_Datatype mpi_type<float>() {
    return MPI_FLOAT;
}
template <>
inline MPI_Datatype mpi_type<double>() {
    return MPI_DOUBLE;
}
template <>
inline MPI_Datatype mpi_type<std::int64_t>() {
    return MPI_INT64_T;
}
template <>
inline MPI_Datatype mpi_type<std::uint8_t>() {
    return MPI_UINT8_T;
}

inline void mpi_check(int rc, const char* call) {
    if (rc == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    throw kattn::error(std::string("kattn::dist: ") + call + " failed: " + std::string(text, std::size_t(len)));
}

/// Times one collective into the stats.
class collective_timer {
public:
    explicit collective_timer(comm_stats& s) : s_(s), t0_(std::chrono::steady_clock::now()) {}
    ~collective_timer() { s_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count(); }
    collective_timer(const collective_timer&) = delete;
    collective_timer& operator=(const collective_timer&) = delete;

private:
    comm_stats& s_;
    std::chrono::steady_clock::time_point t0_;
};
}  // namespace detail

/// Initialises MPI (thread level MPI_THREAD_FUNNELED: only the calling thread talks to
/// MPI; OpenMP threads compute) unless the program already did; finalises on destruction
/// if it initialised.
class mpi_environment {
public:
    mpi_environment(int& argc, char**& argv) {
        int done = 0;
        MPI_Initialized(&done);
        if (!done) {
            int provided = 0;
            detail::mpi_check(MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
            owner_ = true;
        }
    }
    ~mpi_environment() {
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (owner_ && !finalized) MPI_Finalize();
    }
    mpi_environment(const mpi_environment&) = delete;
    mpi_environment& operator=(const mpi_environment&) = delete;

private:
    bool owner_ = false;
};

class mpi_communicator {
public:
    /// Duplicates `comm` (default MPI_COMM_WORLD); MPI must be initialised.
    explicit mpi_communicator(MPI_Comm comm = MPI_COMM_WORLD) {
        int done = 0;
        MPI_Initialized(&done);
        kattn::detail::require(done != 0, "MPI", "MPI initialised (kattn::dist::mpi_environment or MPI_Init)",
                               "MPI not initialised");
        detail::mpi_check(MPI_Comm_dup(comm, &comm_), "MPI_Comm_dup");
        detail::mpi_check(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
        detail::mpi_check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
        detail::mpi_check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
    }
    ~mpi_communicator() {
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (comm_ != MPI_COMM_NULL && !finalized) MPI_Comm_free(&comm_);
    }
    mpi_communicator(const mpi_communicator&) = delete;
    mpi_communicator& operator=(const mpi_communicator&) = delete;

    int rank() const { return rank_; }
    int size() const { return size_; }
    /// The duplicated MPI communicator (for the program's own calls on kattn's group).
    MPI_Comm native() const { return comm_; }

    template <class T>
    void all_gather(const T* send, T* recv, std::size_t n) {
        kattn::detail::require(n <= std::size_t(INT_MAX), "n", "at most INT_MAX elements per rank", n);
        detail::count_collective(stats_, detail::gather_kind, n * sizeof(T), size_, true);
        detail::collective_timer t(stats_);
        detail::mpi_check(
            MPI_Allgather(send, int(n), detail::mpi_type<T>(), recv, int(n), detail::mpi_type<T>(), comm_),
            "MPI_Allgather");
    }
    template <class T>
    void all_reduce_sum(T* data, std::size_t n) {
        detail::count_collective(stats_, detail::reduce_kind, n * sizeof(T), size_, true);
        detail::collective_timer t(stats_);
        for (std::size_t i = 0; i < n; i += std::size_t(INT_MAX)) {
            const int c = int(std::min<std::size_t>(n - i, std::size_t(INT_MAX)));
            detail::mpi_check(MPI_Allreduce(MPI_IN_PLACE, data + i, c, detail::mpi_type<T>(), MPI_SUM, comm_),
                              "MPI_Allreduce");
        }
    }
    template <class T>
    void broadcast(T* data, std::size_t n, int root) {
        kattn::detail::require(root >= 0 && root < size_, "root", "a rank in [0, size)", root);
        detail::count_collective(stats_, detail::broadcast_kind, n * sizeof(T), size_, rank_ == root);
        detail::collective_timer t(stats_);
        for (std::size_t i = 0; i < n; i += std::size_t(INT_MAX)) {
            const int c = int(std::min<std::size_t>(n - i, std::size_t(INT_MAX)));
            detail::mpi_check(MPI_Bcast(data + i, c, detail::mpi_type<T>(), root, comm_), "MPI_Bcast");
        }
    }
    void barrier() {
        detail::collective_timer t(stats_);
        detail::mpi_check(MPI_Barrier(comm_), "MPI_Barrier");
    }
    const comm_stats& stats() const { return stats_; }
    void reset_stats() { stats_ = {}; }

private:
    MPI_Comm comm_ = MPI_COMM_NULL;
    int rank_ = 0, size_ = 1;
    comm_stats stats_;
};

static_assert(communicator<mpi_communicator>);

}  // namespace kattn::dist
