// communicator.cpp — the collective front doors, the single-process world,
// the launcher's environment, the world itself and the test fault
// (dist/communicator.h).
#include "dist/communicator.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "core/error.h"
#include "dist/backends.h"
#include "dist/watchdog.h"

namespace hpmc::dist {

namespace {

// A whole number in [lo, hi] from the environment, or `fallback` when unset.
// Anything else is a UsageError naming the variable.
long env_integer(const char* name, long lo, long hi, long fallback, const char* meaning) {
  const char* v = std::getenv(name);
  if (!v) return fallback;
  char* end = nullptr;
  errno = 0;
  const long x = std::strtol(v, &end, 10);
  if (*v == '\0' || *end != '\0' || errno != 0 || x < lo || x > hi)
    throw UsageError(
        str(name, "=", printable(v), ": expected ", meaning, " from ", lo, " to ", hi));
  return x;
}

class SingleCommunicator : public Communicator {
 public:
  SingleCommunicator() : Communicator(0, 1, 0, 1) {}
  std::string backend() const override { return "single"; }
  int use_gpu() override { return 0; }  // the process's current device, as without a launcher
  [[noreturn]] void abort(const std::string& message, int code) override {
    std::fflush(stdout);
    std::fprintf(stderr, "hpmc: error: %s\n", message.c_str());
    std::exit(code);
  }

 protected:
  void do_allreduce(float*, size_t, Device, const char*) override {}
  void do_allreduce(double*, size_t) override {}
  void do_broadcast(void*, size_t, int, Device, const char*) override {}
  void do_barrier() override {}
};

std::unique_ptr<Communicator>& world_ptr() {
  static std::unique_ptr<Communicator> w = make_single_communicator();
  return w;
}

bool g_mpi_started = false;

}  // namespace

void Communicator::enter(const char* what, bool gradient) {
  ++calls_;
  if (!gradient) return;
  ++gradient_calls_;
  static const Fault fault = fault_from_environment();
  if (fault.rank != rank_ || fault.call != gradient_calls_) return;
  if (fault.kind == "error")
    throw RuntimeError(str("HPMC_TEST_FAULT: an error injected at gradient all-reduce ",
                           gradient_calls_, " (", what, ")"));
  if (fault.kind == "exit") _exit(3);
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(60));  // hang
}

void Communicator::allreduce_sum(float* data, size_t n, Device device, const char* what) {
  if (size_ == 1 || n == 0) return;
  enter(what, true);
  if (device == Device::kGPU) {  // enqueued: the device backend's poller watches it
    do_allreduce(data, n, device, what);
    return;
  }
  WatchScope watch(what);
  do_allreduce(data, n, device, what);
}

void Communicator::allreduce_sum(double* data, size_t n, const char* what) {
  if (size_ == 1 || n == 0) return;
  enter(what, false);
  WatchScope watch(what);
  do_allreduce(data, n);
}

void Communicator::broadcast(void* data, size_t bytes, int root, Device device,
                             const char* what) {
  HPMC_CHECK(root >= 0 && root < size_, "broadcast from rank ", root, " of ", size_);
  if (size_ == 1 || bytes == 0) return;
  enter(what, false);
  if (device == Device::kGPU) {
    do_broadcast(data, bytes, root, device, what);
    return;
  }
  WatchScope watch(what);
  do_broadcast(data, bytes, root, device, what);
}

void Communicator::barrier(const char* what) {
  if (size_ == 1) return;
  enter(what, false);
  WatchScope watch(what);
  do_barrier();
}

std::unique_ptr<Communicator> make_single_communicator() {
  return std::make_unique<SingleCommunicator>();
}

Launch launch_from_environment() {
  Launch l;
  for (const auto& [size_var, rank_var] :
       {std::pair<const char*, const char*>{"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"},
        {"PMI_SIZE", "PMI_RANK"}}) {
    if (!std::getenv(size_var)) continue;
    l.size = int(env_integer(size_var, 1, INT_MAX, 1, "the number of ranks"));
    l.rank = int(env_integer(rank_var, 0, l.size - 1, 0, "this process's rank"));
    l.variable = size_var;
    break;
  }
  return l;
}

std::string launch_refusal(const Launch& l, bool with_mpi) {
  if (with_mpi || l.size <= 1) return "";
  return str("this process is rank ", l.rank, " of ", l.size, " (", l.variable,
             "), but this hpmc was built without MPI, so each rank would train alone; rebuild "
             "with Open MPI installed (apt-get install libopenmpi-dev openmpi-bin; cmake "
             "-DHPMC_MPI=ON), or run one process without mpirun");
}

void init_world() {
  const Launch l = launch_from_environment();
  if (l.variable.empty()) return;  // no launcher: one process, as always
  const std::string refusal = launch_refusal(l, built_with_mpi());
  if (!refusal.empty()) throw UsageError(refusal);
  if (!built_with_mpi()) return;  // mpirun -np 1 of a build without MPI: one process
  const int timeout = collective_timeout_from_environment();
  fault_from_environment();  // a bad value fails here, not at the first all-reduce
  world_ptr() = make_mpi_communicator();
  g_mpi_started = true;
  Communicator& w = *world_ptr();
  if (w.size() > 1) start_watchdog(timeout, str("rank ", w.rank(), " of ", w.size()));
}

Communicator& world() { return *world_ptr(); }

void finalize_world() {
  if (!g_mpi_started) return;
  stop_watchdog();
  finalize_mpi();
  g_mpi_started = false;
}

std::string mpi_description() {
  if (!built_with_mpi()) return "not built (HPMC_MPI=OFF, or no MPI found at configure time)";
  return mpi_library_version();
}

std::string nccl_description() {
  if (!built_with_nccl())
    return "not built (needs CUDA, MPI and nccl.h at configure time)";
  return nccl_version();
}

Fault fault_from_environment() {
  Fault f;
  const char* v = std::getenv("HPMC_TEST_FAULT");
  if (!v || !*v) return f;
  const std::string s = v;
  const size_t a = s.find(':'), b = a == s.npos ? a : s.find(':', a + 1);
  auto whole = [](const std::string& t, long long* out) {
    char* end = nullptr;
    *out = std::strtoll(t.c_str(), &end, 10);
    return !t.empty() && *end == '\0' && *out >= 0;
  };
  long long rank = 0, call = 0;
  if (b == s.npos || !whole(s.substr(0, a), &rank) || !whole(s.substr(a + 1, b - a - 1), &call) ||
      call < 1 || (s.substr(b + 1) != "error" && s.substr(b + 1) != "exit" &&
                   s.substr(b + 1) != "hang"))
    throw UsageError(str("HPMC_TEST_FAULT=", printable(s),
                         ": expected RANK:CALL:KIND, KIND error, exit or hang (a test hook)"));
  f.rank = int(rank);
  f.call = call;
  f.kind = s.substr(b + 1);
  return f;
}

int collective_timeout_from_environment() {
  return int(env_integer("HPMC_COLLECTIVE_TIMEOUT", 0, 86400 * 7, 600,
                         "the seconds a collective may wait for the other ranks (0: no limit)"));
}

}  // namespace hpmc::dist
