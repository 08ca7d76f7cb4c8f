// nccl_none.cpp — the NCCL half of dist/backends.h in a build without it
// (no CUDA, no MPI, or no nccl.h and libnccl at configure time): GPU ranks
// are refused with the reason; CPU ranks do not need it.
#ifndef HPMC_WITH_NCCL

#include "core/error.h"
#include "dist/backends.h"

namespace hpmc::dist {

bool built_with_nccl() { return false; }

std::unique_ptr<GpuCollectives> make_nccl_collectives(Communicator&) {
  throw UsageError("training on GPUs over several ranks needs NCCL, and this hpmc was built "
                   "without it (it needs CUDA, MPI and the CUDA toolkit's nccl.h at configure "
                   "time); use --impl cpu, or rebuild where NCCL is installed");
}

std::string nccl_version() { return ""; }

}  // namespace hpmc::dist

#endif  // HPMC_WITH_NCCL
