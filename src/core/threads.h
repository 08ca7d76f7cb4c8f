// threads.h — one place that decides how many CPU threads hpmc uses.
//
// hpmc parallelises with OpenMP itself (over the batch, over channels) and
// calls OpenBLAS from inside those loops, so OpenBLAS is pinned to one thread:
// two thread pools on two cores would oversubscribe the machine and thrash.
//
// OpenMP's threads wait for work between parallel regions. libgomp's default
// spins 300,000 turns before sleeping, and hpmc's steps are many short
// regions, so its threads spend their waits spinning: beside a busy process,
// that takes the CPU the working threads need (docs/PERFORMANCE.md). Passive
// waits (sleeping at once) give that CPU back, but cost a wake-up per region:
// the CPU MLP step ran 1.6-1.75x slower with them on a quiet machine. hpmc
// therefore spins briefly (GOMP_SPINCOUNT=1000, a few microseconds), which
// keeps a quiet machine's speed within 10% of libgomp's default and a busy
// neighbour's cost near its fair share, unless the user chose a policy.
#pragma once

#include <string>

namespace hpmc {

// The spin count hpmc's threads wait with (threads.h) unless the user set one.
constexpr const char* kDefaultSpinCount = "1000";

// Unless OMP_WAIT_POLICY or GOMP_SPINCOUNT is set, sets
// GOMP_SPINCOUNT=kDefaultSpinCount and re-executes the program (/proc/self/exe with
// `argv`): libgomp reads its environment once, when it is loaded, before
// main. Call it first thing in main. Returns only when nothing was to be done
// or the exec failed (then the runtime's own waits stay in effect).
void prefer_short_waits(char** argv);
// The waiting policy in effect, for `hpmc info`: "GOMP_SPINCOUNT=1000".
std::string wait_policy_description();

// Set the OpenMP thread count (n <= 0: OMP_NUM_THREADS, else the cores this
// process may run on, which taskset and cpusets limit, shared fairly among
// `local_ranks` data-parallel ranks on this host: at most the online CPUs
// divided by them, at least 1) and pin OpenBLAS to a single thread. Returns
// the thread count in use.
int configure_threads(int n = 0, int local_ranks = 1);
int num_threads();
// Index of the calling thread inside a parallel region (0 outside).
int thread_index();

}  // namespace hpmc
