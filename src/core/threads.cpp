#include "core/threads.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "core/bf16gemm.h"
#include "core/sgemm.h"

#ifdef _OPENMP
#include <omp.h>
#endif

extern "C" void openblas_set_num_threads(int);

namespace hpmc {

void prefer_short_waits(char** argv) {
#ifdef _OPENMP
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT")) return;
  if (setenv("GOMP_SPINCOUNT", kDefaultSpinCount, 1) != 0) return;
  execv("/proc/self/exe", argv);
  // No /proc (or no exec): this process keeps the runtime's default waits.
  unsetenv("GOMP_SPINCOUNT");
#else
  (void)argv;  // no OpenMP threads to wait
#endif
}

std::string wait_policy_description() {
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  const char* spin = std::getenv("GOMP_SPINCOUNT");
  std::string s;
  if (policy) s += std::string("OMP_WAIT_POLICY=") + policy;
  if (spin) s += std::string(s.empty() ? "" : ", ") + "GOMP_SPINCOUNT=" + spin;
  if (s.empty()) return "the OpenMP runtime's default (spins before it sleeps)";
  return s;
}

int configure_threads(int n, int local_ranks) {
  openblas_set_num_threads(1);
  sgemm_path();     // resolve HPMC_GEMM now, outside any parallel region (sgemm.h)
  bf16gemm_path();  // and HPMC_BF16_GEMM (bf16gemm.h)
#ifdef _OPENMP
  if (n <= 0) {
    const char* env = std::getenv("OMP_NUM_THREADS");
    n = env ? std::atoi(env) : 0;
  }
  // The CPUs this process may run on (taskset, cpusets), not all the
  // machine's: more threads than those would take turns on them.
  if (n <= 0) {
    n = omp_get_num_procs();
    // mpirun binds each of a few ranks to its own core (then this is 1), but
    // leaves oversubscribed ranks unbound: each would take every core.
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    if (local_ranks > 1 && online > 0) n = std::min<long>(n, std::max<long>(1, online / local_ranks));
  }
  if (n <= 0) n = 1;
  omp_set_num_threads(n);
  return n;
#else
  (void)n;
  (void)local_ranks;
  return 1;
#endif
}

int num_threads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

int thread_index() {
#ifdef _OPENMP
  return omp_get_thread_num();
#else
  return 0;
#endif
}

}  // namespace hpmc
