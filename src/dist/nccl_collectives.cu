// nccl_collectives.cu — the device collectives of dist/backends.h over NCCL
// (a build with CUDA, MPI and NCCL).
//
// One NCCL communicator per process over the MPI world's ranks, on the
// rank's current device (Communicator::use_gpu set it): rank 0 draws the
// unique id (ncclGetUniqueId) and the host communicator broadcasts it. Each
// collective is enqueued on the default stream, where every hpmc kernel
// runs, so it starts after the backward pass that wrote the gradients and
// the optimizer's update waits for it, with no host synchronisation. The
// all-reduce is one call over the whole flat gradient buffer, after the
// backward pass (not bucketed per layer and overlapped with it).
//
// libnccl.so.2 is opened at run time (dlopen), when a rank first needs it:
// the build needs only nccl.h, and an hpmc that never trains on several GPUs
// runs where NCCL is not installed, as it always did.
//
// The watchdog (dist/watchdog.h) cannot see into the device, so each
// collective records an event after it; the watchdog thread polls the
// oldest unfinished one (cudaEventQuery) and NCCL's asynchronous error
// (ncclCommGetAsyncError), and ends the rank when the collective has waited
// HPMC_COLLECTIVE_TIMEOUT seconds or NCCL reports an error.
#ifdef HPMC_WITH_NCCL

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nccl.h>
#include <unistd.h>

#include <cstdio>
#include <deque>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "core/cuda_check.h"
#include "core/error.h"
#include "dist/backends.h"
#include "dist/watchdog.h"

namespace hpmc::dist {

namespace {

// The NCCL functions hpmc calls, from libnccl.so.2.
struct NcclApi {
  decltype(&ncclGetVersion) get_version = nullptr;
  decltype(&ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&ncclCommInitRank) comm_init_rank = nullptr;
  decltype(&ncclCommDestroy) comm_destroy = nullptr;
  decltype(&ncclCommAbort) comm_abort = nullptr;
  decltype(&ncclCommGetAsyncError) comm_get_async_error = nullptr;
  decltype(&ncclGetErrorString) get_error_string = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclBroadcast) broadcast = nullptr;
  std::string error;  // why the library could not be opened ("" when it was)
};

const NcclApi& nccl() {
  static const NcclApi api = [] {
    NcclApi a;
    void* lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* e = dlerror();
      a.error = e ? e : "dlopen failed";
      return a;
    }
    auto sym = [&](auto& f, const char* name) {
      f = reinterpret_cast<std::remove_reference_t<decltype(f)>>(dlsym(lib, name));
      if (!f && a.error.empty()) a.error = str("libnccl.so.2 has no ", name);
    };
    sym(a.get_version, "ncclGetVersion");
    sym(a.get_unique_id, "ncclGetUniqueId");
    sym(a.comm_init_rank, "ncclCommInitRank");
    sym(a.comm_destroy, "ncclCommDestroy");
    sym(a.comm_abort, "ncclCommAbort");
    sym(a.comm_get_async_error, "ncclCommGetAsyncError");
    sym(a.get_error_string, "ncclGetErrorString");
    sym(a.all_reduce, "ncclAllReduce");
    sym(a.broadcast, "ncclBroadcast");
    return a;
  }();
  return api;
}

#define HPMC_NCCL_CHECK(stmt)                                                                \
  do {                                                                                       \
    ncclResult_t hpmc_r_ = (stmt);                                                           \
    if (hpmc_r_ != ncclSuccess)                                                              \
      throw RuntimeError(str(__FILE__, ":", __LINE__, ": ", #stmt, " failed: ",               \
                             nccl().get_error_string(hpmc_r_)));                             \
  } while (0)

class NcclCollectives : public GpuCollectives {
 public:
  explicit NcclCollectives(Communicator& host) : rank_(host.rank()), size_(host.size()) {
    if (!nccl().error.empty())
      throw UsageError(str("training on GPUs over several ranks needs NCCL, and libnccl.so.2 "
                           "could not be loaded (", nccl().error, "); put the directory that "
                           "holds it (the CUDA toolkit's lib64, say) on LD_LIBRARY_PATH"));
    HPMC_CUDA_CHECK(cudaGetDevice(&device_));
    ncclUniqueId id{};
    if (host.rank() == 0) HPMC_NCCL_CHECK(nccl().get_unique_id(&id));
    host.broadcast(&id, sizeof id, 0, Device::kCPU, "the NCCL unique id");
    {
      WatchScope watch("NCCL's set-up (ncclCommInitRank)");
      HPMC_NCCL_CHECK(nccl().comm_init_rank(&comm_, size_, id, rank_));
    }
    set_pending_poller([this](const char** what, double* since) { return poll(what, since); });
  }

  ~NcclCollectives() override {
    set_pending_poller(nullptr);
    if (comm_) nccl().comm_destroy(comm_);
    for (auto& p : pending_) cudaEventDestroy(p.event);
    for (cudaEvent_t e : free_) cudaEventDestroy(e);
  }

  void allreduce_sum(float* data, size_t n, const char* what) override {
    HPMC_NCCL_CHECK(
        nccl().all_reduce(data, data, n, ncclFloat, ncclSum, comm_, cudaStream_t(0)));
    watch(what);
  }

  void broadcast(void* data, size_t bytes, int root, const char* what) override {
    HPMC_NCCL_CHECK(
        nccl().broadcast(data, data, bytes, ncclChar, root, comm_, cudaStream_t(0)));
    watch(what);
  }

 private:
  struct Pending {
    cudaEvent_t event;
    double since;
    const char* what;
  };

  // Record an event after the collective just enqueued, for the watchdog.
  void watch(const char* what) {
    std::lock_guard<std::mutex> lock(mu_);
    reap();  // also when no watchdog runs (HPMC_COLLECTIVE_TIMEOUT=0), so the list stays short
    cudaEvent_t e;
    if (free_.empty()) {
      HPMC_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    } else {
      e = free_.back();
      free_.pop_back();
    }
    HPMC_CUDA_CHECK(cudaEventRecord(e, cudaStream_t(0)));
    pending_.push_back({e, watchdog_now(), what});
  }

  // Move the finished collectives' events to the free list (under mu_).
  void reap() {
    while (!pending_.empty() && cudaEventQuery(pending_.front().event) == cudaSuccess) {
      free_.push_back(pending_.front().event);
      pending_.pop_front();
    }
  }

  // The watchdog thread's look: NCCL's asynchronous error ends the rank at
  // once; otherwise the oldest unfinished collective.
  bool poll(const char** what, double* since) {
    static thread_local int current = -1;
    if (current != device_) {
      cudaSetDevice(device_);
      current = device_;
    }
    ncclResult_t async = ncclSuccess;
    if (nccl().comm_get_async_error(comm_, &async) == ncclSuccess && async != ncclSuccess &&
        async != ncclInProgress) {
      std::fprintf(stderr, "hpmc: error: rank %d of %d: NCCL reports %s; ending this rank\n",
                   rank_, size_, nccl().get_error_string(async));
      std::fflush(stderr);
      nccl().comm_abort(comm_);
      _exit(1);
    }
    std::lock_guard<std::mutex> lock(mu_);
    reap();
    if (pending_.empty()) return false;
    *what = pending_.front().what;
    *since = pending_.front().since;
    return true;
  }

  int rank_, size_, device_ = 0;
  ncclComm_t comm_ = nullptr;
  std::mutex mu_;
  std::deque<Pending> pending_;
  std::vector<cudaEvent_t> free_;
};

}  // namespace

bool built_with_nccl() { return true; }

std::unique_ptr<GpuCollectives> make_nccl_collectives(Communicator& host) {
  return std::make_unique<NcclCollectives>(host);
}

std::string nccl_version() {
  if (!nccl().error.empty())
    return str("built in, but libnccl.so.2 cannot be loaded here (", nccl().error, ")");
  int v = 0;
  if (nccl().get_version(&v) != ncclSuccess) return "NCCL (version unknown)";
  // NCCL 2.9 and later: major·10000 + minor·100 + patch.
  return str("NCCL ", v / 10000, ".", (v / 100) % 100, ".", v % 100, " (libnccl.so.2)");
}

}  // namespace hpmc::dist

#endif  // HPMC_WITH_NCCL
