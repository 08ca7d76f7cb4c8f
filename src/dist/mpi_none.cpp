// mpi_none.cpp — the MPI half of dist/backends.h in a build without MPI: hpmc
// runs as one process, and init_world refuses to be one of several ranks.
#ifndef HPMC_WITH_MPI

#include "core/error.h"
#include "dist/backends.h"

namespace hpmc::dist {

bool built_with_mpi() { return false; }

std::unique_ptr<Communicator> make_mpi_communicator() {
  throw RuntimeError("this hpmc was built without MPI (cmake -DHPMC_MPI=ON with libopenmpi-dev)");
}

void finalize_mpi() {}

std::string mpi_library_version() { return ""; }

}  // namespace hpmc::dist

#endif  // HPMC_WITH_MPI
