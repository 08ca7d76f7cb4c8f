// backends.h — the optional halves of dist/communicator.h, each with a stub
// for builds without it (the *_none.cpp files, like core/device_nocuda.cpp):
//   MPI   dist/mpi_communicator.cpp (HPMC_WITH_MPI) or dist/mpi_none.cpp
//   NCCL  dist/nccl_collectives.cu (HPMC_WITH_NCCL) or dist/nccl_none.cpp
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "dist/communicator.h"

namespace hpmc::dist {

// MPI_Init_thread and the world communicator (with the local ranks from
// MPI_COMM_TYPE_SHARED), or a RuntimeError without MPI.
std::unique_ptr<Communicator> make_mpi_communicator();
void finalize_mpi();
std::string mpi_library_version();  // MPI_Get_library_version's first line

// Collectives on device buffers, on the default stream (the stream every hpmc
// kernel runs on), so they follow the backward pass and precede the update
// without host synchronisation.
class GpuCollectives {
 public:
  virtual ~GpuCollectives() = default;
  virtual void allreduce_sum(float* data, size_t n, const char* what) = 0;
  virtual void broadcast(void* data, size_t bytes, int root, const char* what) = 0;
};

// NCCL over the ranks of `host`: rank 0's unique id goes to every rank through
// host.broadcast, then ncclCommInitRank on the current device. A UsageError in
// a build without NCCL.
std::unique_ptr<GpuCollectives> make_nccl_collectives(Communicator& host);
std::string nccl_version();  // "NCCL 2.27.3", or "" without NCCL

}  // namespace hpmc::dist
