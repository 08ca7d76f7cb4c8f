// threads.h — one place that decides how many CPU threads hpmc uses.
//
// hpmc parallelises with OpenMP itself (over the batch, over channels) and
// calls OpenBLAS from inside those loops, so OpenBLAS is pinned to one thread:
// two thread pools on two cores would oversubscribe the machine and thrash.
#pragma once

namespace hpmc {

// Set the OpenMP thread count (n <= 0: OMP_NUM_THREADS or all cores) and pin
// OpenBLAS to a single thread. Returns the thread count in use.
int configure_threads(int n = 0);
int num_threads();
// Index of the calling thread inside a parallel region (0 outside).
int thread_index();

}  // namespace hpmc
