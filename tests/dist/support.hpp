// Shared helpers of the kattn::dist tests (tests/dist/main.cpp runs them under mpirun).
#pragma once

#include <kattn/dist/mpi_communicator.hpp>

namespace kattn_test {
/// kattn's duplicate of MPI_COMM_WORLD, created once after MPI_Init.
kattn::dist::mpi_communicator& world();
}  // namespace kattn_test
