// communicator.h — the processes of a data-parallel run and the collectives
// between them.
//
// `mpirun -np N hpmc run CONFIG` starts N ranks. Each holds the whole model
// and dataset, trains on its shard of every batch, and adds its gradients to
// the others' through allreduce_sum before the update (model/trainer.h), so
// that the N ranks keep identical weights. A process started without mpirun
// is the single rank of a world of one, and every collective is a no-op.
//
// Implementations (one per world, chosen at start-up by init_world):
//   single  one process: nothing to exchange
//   mpi     MPI_Allreduce / MPI_Bcast / MPI_Ibarrier on host buffers
//           (dist/mpi_communicator.cpp, a build with MPI)
//   nccl    device buffers, once use_gpu() has picked the rank's GPU: NCCL
//           collectives on the default stream, its unique id broadcast over
//           MPI (dist/nccl_collectives.cu, a build with CUDA, MPI and NCCL);
//           host buffers still go over MPI
//
// The collective front doors are non-virtual: they count and time each call
// (the watchdog below), inject the test fault of HPMC_TEST_FAULT, then call
// the implementation.
//
// Failure. A rank that throws ends the job through abort(): one line
// "hpmc: error: rank R of N: ..." on stderr, then MPI_Abort, which ends every
// rank (mpirun's exit code is the error's). A rank that dies (a signal, an
// exit) is noticed by mpirun, which ends the others. A rank that hangs
// leaves the others waiting in a collective: a watchdog thread ends any rank
// whose collective has waited HPMC_COLLECTIVE_TIMEOUT seconds (default 600;
// 0 waits forever) with one line and exit code 1, which mpirun turns into
// the end of the job. For GPU collectives the wait counted is from the
// enqueue until the device has finished it (polled with cudaEventQuery).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/tensor.h"

namespace hpmc::dist {

class Communicator {
 public:
  virtual ~Communicator() = default;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // The rank among the ranks of this host, and how many there are: the GPU
  // a rank takes (use_gpu) and its default CPU thread count.
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  // "single", "mpi" or "mpi+nccl" (after use_gpu).
  virtual std::string backend() const = 0;

  // data[0, n) summed over every rank, in place, on every rank. Device
  // buffers need use_gpu() first. Every rank gets the same bits.
  void allreduce_sum(float* data, size_t n, Device device, const char* what);
  // Host doubles (loss sums, counts), in place.
  void allreduce_sum(double* data, size_t n, const char* what);
  // `bytes` bytes from `root`'s data into everyone's.
  void broadcast(void* data, size_t bytes, int root, Device device, const char* what);
  // Waits for every rank without spinning (a long wait is not a busy core).
  void barrier(const char* what);

  // Pick this rank's GPU from its local rank (the only visible GPU when
  // CUDA_VISIBLE_DEVICES leaves one) and set up the device collectives; a
  // collective call, before any other GPU work. Returns the device index.
  // A UsageError when the ranks of a host outnumber its GPUs, or when device
  // collectives are not built in (no NCCL).
  virtual int use_gpu() = 0;

  // Ends every rank of the job: prints "hpmc: error: rank R of N: message"
  // (just "hpmc: error: message" in a world of one) and exits with `code`.
  [[noreturn]] virtual void abort(const std::string& message, int code) = 0;

  // Collectives called so far (the test fault counts gradient all-reduces).
  int64_t calls() const { return calls_; }

 protected:
  Communicator(int rank, int size, int local_rank, int local_size)
      : rank_(rank), size_(size), local_rank_(local_rank), local_size_(local_size) {}
  // `what` names the collective (a string literal) where a wait is reported.
  virtual void do_allreduce(float* data, size_t n, Device device, const char* what) = 0;
  virtual void do_allreduce(double* data, size_t n) = 0;
  virtual void do_broadcast(void* data, size_t bytes, int root, Device device,
                            const char* what) = 0;
  virtual void do_barrier() = 0;

 private:
  void enter(const char* what, bool gradient);
  int rank_, size_, local_rank_, local_size_;
  int64_t calls_ = 0;
  int64_t gradient_calls_ = 0;
};

// The one-process world: every collective returns at once.
std::unique_ptr<Communicator> make_single_communicator();

// How this process was started, from the launcher's environment:
// OMPI_COMM_WORLD_SIZE / OMPI_COMM_WORLD_RANK (Open MPI's mpirun) or PMI_SIZE /
// PMI_RANK (MPICH's hydra, Slurm's PMI). `size` is 1 without a launcher.
struct Launch {
  int size = 1, rank = 0;
  std::string variable;  // the variable that gave the size ("" without one)
};
Launch launch_from_environment();
// Why a process the launcher started cannot take part: a build without MPI
// as one of several ranks (each would train alone); "" when it can.
std::string launch_refusal(const Launch& launch, bool with_mpi);

// Start the world: MPI when a launcher started this process (and hpmc was
// built with MPI), else the single process. Call once, early in main. A
// build without MPI started as one of several ranks throws a UsageError
// that says so (each rank would otherwise train alone).
void init_world();
// The world (the single process until init_world starts another).
Communicator& world();
// Leave MPI cleanly (MPI_Finalize) at a normal exit; a no-op otherwise.
void finalize_world();

// What this binary can do (hpmc info): MPI, and NCCL for GPU ranks.
bool built_with_mpi();
bool built_with_nccl();
// "Open MPI v4.1.4, ..." or "not built (...)"; "NCCL 2.x.y" or "not built (...)".
std::string mpi_description();
std::string nccl_description();

// The test hook HPMC_TEST_FAULT=RANK:CALL:KIND (tests only): on rank RANK, at
// its CALL-th gradient all-reduce (1-based), KIND happens: `error` throws a
// RuntimeError, `exit` ends the process at once (exit code 3, no message),
// `hang` sleeps forever (the others' watchdog must end the job).
struct Fault {
  int rank = -1;
  int64_t call = 0;
  std::string kind;
};
Fault fault_from_environment();

// HPMC_COLLECTIVE_TIMEOUT in seconds (default 600; 0: no timeout); a
// UsageError for anything but a whole number of seconds.
int collective_timeout_from_environment();

}  // namespace hpmc::dist
