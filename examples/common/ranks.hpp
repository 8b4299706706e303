// examples/common/ranks.hpp — data-parallel runs of the experiment examples over MPI.
//
// When the examples are built with MPI (Meson defines KATTN_EXAMPLES_MPI=1 where it finds
// MPI) and the program was started by an MPI launcher (`mpirun -np N build/examples/...`),
// experiment::ranks initialises MPI and every model trains data-parallel over the N ranks
// (nn::trainer with a communicator). --batch stays the global batch: each rank trains on
// --batch / N examples of it (per_rank_batch), so the optimiser sees the same batches, and
// the run the same numbers up to rounding, as one process. Rank 0 alone prints tables and
// writes files. Started directly, or built without MPI, the program runs as one process and
// never touches MPI.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

#include <kattn/nn/data_parallel.hpp>

#if KATTN_EXAMPLES_MPI
#include <kattn/dist/mpi_communicator.hpp>
#endif

namespace experiment {

class ranks {
public:
    ranks([[maybe_unused]] int& argc, [[maybe_unused]] char**& argv) {
#if KATTN_EXAMPLES_MPI
        if (launched_by_mpi()) {
            env_.emplace(argc, argv);
            comm_.emplace();
        }
#endif
    }
    ranks(const ranks&) = delete;
    ranks& operator=(const ranks&) = delete;

    /// The group the trainers use (empty: one process).
    kattn::nn::communicator_ref comm() {
#if KATTN_EXAMPLES_MPI
        if (comm_) return kattn::nn::communicator_ref(*comm_);
#endif
        return {};
    }
    int size() { return comm().size(); }
    /// The per-rank batch of a global batch (which the number of ranks must divide).
    kattn::index_t per_rank_batch(kattn::index_t global_batch) {
        const int n = size();
        if (global_batch % n != 0)
            throw kattn::error("kattn: argument '--batch': expected a multiple of the " + std::to_string(n) +
                               " MPI ranks, got " + std::to_string(global_batch));
        return global_batch / n;
    }
    /// Whether this process prints and writes (rank 0, or the only process).
    bool root() { return comm().rank() == 0; }

private:
#if KATTN_EXAMPLES_MPI
    /// Open MPI's, MPICH's (Hydra) and PMIx launchers export these to every rank.
    static bool launched_by_mpi() {
        return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE") || std::getenv("PMIX_RANK");
    }
    std::optional<kattn::dist::mpi_environment> env_;  // declared first: finalised last
    std::optional<kattn::dist::mpi_communicator> comm_;
#endif
};

}  // namespace experiment
