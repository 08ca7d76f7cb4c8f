// mpi_communicator.cpp — the MPI world of dist/communicator.h (a build with
// MPI): host buffers through MPI_Allreduce and MPI_Bcast, barriers through
// MPI_Ibarrier polled with short sleeps (a rank that waits for rank 0's
// checkpoint does not keep a core busy), device buffers through the NCCL
// collectives of dist/backends.h once use_gpu() has set them up.
//
// MPI is initialised with MPI_THREAD_FUNNELED: only the main thread calls
// MPI (OpenMP's workers never do; the watchdog ends the process with _exit,
// not MPI_Abort). Errors inside MPI keep MPI_ERRORS_ARE_FATAL: MPI itself
// ends the job with its own message.
#ifdef HPMC_WITH_MPI

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <thread>

#include "core/device.h"
#include "core/error.h"
#include "dist/backends.h"

namespace hpmc::dist {

namespace {

// MPI counts are ints: longer buffers go in pieces.
constexpr size_t kMaxCount = size_t(INT_MAX);

class MpiCommunicator : public Communicator {
 public:
  MpiCommunicator(int rank, int size, int local_rank, int local_size)
      : Communicator(rank, size, local_rank, local_size) {}

  std::string backend() const override { return gpu_ ? "mpi+nccl" : "mpi"; }

  int use_gpu() override {
    if (gpu_) return device_;
    const int count = gpu::device_count();
    if (count <= 0)
      throw UsageError("no CUDA device is visible to this rank; a GPU impl needs one GPU per "
                       "rank (use --impl cpu to train on the CPU)");
    // One visible device: the launcher (CUDA_VISIBLE_DEVICES per rank) chose it.
    if (count > 1 && local_size() > count)
      throw UsageError(str(local_size(), " ranks share this host but it has ", count,
                           " GPUs; start at most one rank per GPU (mpirun -np N with N <= ", count,
                           " per host, e.g. --map-by ppr:", count, ":node)"));
    device_ = count == 1 ? 0 : local_rank();
    gpu::set_device(device_);
    gpu_ = make_nccl_collectives(*this);
    return device_;
  }

  [[noreturn]] void abort(const std::string& message, int code) override {
    std::fflush(stdout);
    std::fprintf(stderr, "hpmc: error: rank %d of %d: %s\n", rank(), size(), message.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);  // MPI_Abort does not return; should it, the rank still ends
  }

 protected:
  void do_allreduce(float* data, size_t n, Device device, const char* what) override {
    if (device == Device::kGPU) {
      need_gpu("a device all-reduce");
      gpu_->allreduce_sum(data, n, what);
      return;
    }
    for (size_t at = 0; at < n; at += kMaxCount)
      MPI_Allreduce(MPI_IN_PLACE, data + at, int(std::min(kMaxCount, n - at)), MPI_FLOAT, MPI_SUM,
                    MPI_COMM_WORLD);
  }

  void do_allreduce(double* data, size_t n) override {
    for (size_t at = 0; at < n; at += kMaxCount)
      MPI_Allreduce(MPI_IN_PLACE, data + at, int(std::min(kMaxCount, n - at)), MPI_DOUBLE,
                    MPI_SUM, MPI_COMM_WORLD);
  }

  void do_broadcast(void* data, size_t bytes, int root, Device device,
                    const char* what) override {
    if (device == Device::kGPU) {
      need_gpu("a device broadcast");
      gpu_->broadcast(data, bytes, root, what);
      return;
    }
    char* p = static_cast<char*>(data);
    for (size_t at = 0; at < bytes; at += kMaxCount)
      MPI_Bcast(p + at, int(std::min(kMaxCount, bytes - at)), MPI_BYTE, root, MPI_COMM_WORLD);
  }

  void do_barrier() override {
    MPI_Request req;
    MPI_Ibarrier(MPI_COMM_WORLD, &req);
    int done = 0;
    // Spin briefly (the usual barrier is short), then sleep between polls.
    for (int i = 0; i < 1000 && !done; ++i) MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    while (!done) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    }
  }

 private:
  void need_gpu(const char* what) const {
    HPMC_CHECK(gpu_, what, " before use_gpu()");
  }
  std::unique_ptr<GpuCollectives> gpu_;
  int device_ = -1;
};

}  // namespace

bool built_with_mpi() { return true; }

std::unique_ptr<Communicator> make_mpi_communicator() {
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  int rank = 0, size = 1, local_rank = 0, local_size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
  MPI_Comm_rank(local, &local_rank);
  MPI_Comm_size(local, &local_size);
  MPI_Comm_free(&local);
  return std::make_unique<MpiCommunicator>(rank, size, local_rank, local_size);
}

void finalize_mpi() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

std::string mpi_library_version() {
  char buf[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(buf, &len);
  std::string s(buf, size_t(std::max(0, len)));
  const size_t eol = s.find_first_of("\r\n");
  if (eol != s.npos) s.resize(eol);
  while (!s.empty() && (s.back() == ' ' || s.back() == ',' || s.back() == '\0')) s.pop_back();
  return s;
}

}  // namespace hpmc::dist

#endif  // HPMC_WITH_MPI
