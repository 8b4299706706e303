// The doctest main of kattn_dist_tests, run under mpirun (tests/meson.build): MPI is
// initialised once, every rank runs every test case, and the exit status is nonzero on
// a rank whose checks failed (mpirun then fails). Test cases reach the group through
// kattn_test::world(). Checks must never change a rank's control flow (no REQUIRE
// before a collective): a rank that skipped a collective would hang the others.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "support.hpp"

namespace kattn_test {
kattn::dist::mpi_communicator& world() {
    static kattn::dist::mpi_communicator comm;
    return comm;
}
}  // namespace kattn_test

int main(int argc, char** argv) {
    kattn::dist::mpi_environment env(argc, argv);
    doctest::Context ctx(argc, argv);
    // Only rank 0 prints the summary; failures are printed by the rank that saw them.
    if (kattn_test::world().rank() != 0) ctx.setOption("minimal", true);
    const int rc = ctx.run();
    int any = rc != 0 ? 1 : 0, worst = 0;
    MPI_Allreduce(&any, &worst, 1, MPI_INT, MPI_MAX, kattn_test::world().native());
    return worst;
}
