// cuda_check.h — error checking for CUDA code (include from .cu files only).
//
// HPMC_CUDA_CHECK(stmt) turns a failed runtime call into a RuntimeError that
// names file:line, the statement and CUDA's error string.
// HPMC_CUDA_LAUNCH_CHECK("what") after a kernel launch catches launch errors;
// with sync-debug on (`--sync-debug`) it also synchronizes, so an
// asynchronous fault is blamed on the launch that caused it.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "core/error.h"

namespace hpmc::gpu {

[[noreturn]] void cuda_fail(cudaError_t e, const char* stmt, const char* file, int line);
void check_launch(const char* what, const char* file, int line);

// Threads per block for simple element-wise kernels, and the grid for n items.
constexpr int kBlock = 256;
inline unsigned grid_for(size_t n, int block = kBlock) {
  size_t g = (n + size_t(block) - 1) / size_t(block);
  return unsigned(g > 0x7fffffff ? 0x7fffffff : (g == 0 ? 1 : g));
}

}  // namespace hpmc::gpu

#define HPMC_CUDA_CHECK(stmt)                                                \
  do {                                                                       \
    cudaError_t hpmc_e_ = (stmt);                                            \
    if (hpmc_e_ != cudaSuccess)                                              \
      ::hpmc::gpu::cuda_fail(hpmc_e_, #stmt, __FILE__, __LINE__);            \
  } while (0)

#define HPMC_CUDA_LAUNCH_CHECK(what) ::hpmc::gpu::check_launch((what), __FILE__, __LINE__)
