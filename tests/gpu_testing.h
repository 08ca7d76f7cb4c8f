// gpu_testing.h — for tests of GPU code: skip with a visible reason where no
// GPU is usable, and move tensors between host and device.
#pragma once

#include <gtest/gtest.h>

#include "core/device.h"
#include "core/tensor.h"

// Skip the current test unless this binary has CUDA and a device is visible.
#define HPMC_REQUIRE_GPU()                                                                 \
  do {                                                                                     \
    if (!::hpmc::gpu::compiled_with_cuda())                                                \
      GTEST_SKIP() << "GPU test skipped: this build has no CUDA (configure with the CUDA " \
                      "toolkit installed)";                                                \
    if (::hpmc::gpu::device_count() == 0)                                                  \
      GTEST_SKIP() << "GPU test skipped: no CUDA device is visible ("                      \
                   << ::hpmc::gpu::describe_devices().front() << ")";                      \
  } while (0)

namespace hpmc::testing {

inline Tensor to_gpu(const Tensor& t) { return t.to_device(Device::kGPU); }
inline Tensor to_cpu(const Tensor& t) { return t.to_device(Device::kCPU); }

}  // namespace hpmc::testing
