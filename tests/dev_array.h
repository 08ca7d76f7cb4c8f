// dev_array.h — for the tests that call the GPU kernel families directly
// (test_gpu_implicit.cpp, test_gpu_upconv.cpp; CUDA builds only): device arrays
// with guard zones around the payload, random inputs, and a checked sync.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "core/device.h"
#include "core/rng.h"
#include "core/tensor.h"

namespace hpmc::testing {

inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
inline constexpr float kGuard = 1234.5f;  // outputs' guard zones

inline bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

// A device array of n payload floats between guard zones of kHead and kTail
// floats; tests fill the guards and check that no kernel wrote them.
class DevArray {
 public:
  static constexpr size_t kHead = 4, kTail = 64;

  // n payload floats at offset kHead + misalign (misalign = 1 breaks 16-byte alignment).
  explicit DevArray(size_t n, size_t misalign = 0)
      : n_(n), off_(kHead + misalign), mem_(gpu::allocate_shared((off_ + n + kTail) * 4)) {}

  float* ptr() { return static_cast<float*>(mem_.get()) + off_; }
  size_t size() const { return n_; }

  void upload(const std::vector<float>& payload, float guard) {
    std::vector<float> all(off_ + n_ + kTail, guard);
    std::copy(payload.begin(), payload.end(), all.begin() + long(off_));
    gpu::copy(mem_.get(), Device::kGPU, all.data(), Device::kCPU, all.size() * 4);
  }
  std::vector<float> download_all() const {
    std::vector<float> all(off_ + n_ + kTail);
    gpu::copy(all.data(), Device::kCPU, mem_.get(), Device::kGPU, all.size() * 4);
    return all;
  }
  std::vector<float> payload() const {
    std::vector<float> all = download_all();
    return std::vector<float>(all.begin() + long(off_), all.begin() + long(off_ + n_));
  }
  // The guard zones still hold `guard`, bit for bit.
  ::testing::AssertionResult guards_intact(float guard) const {
    std::vector<float> all = download_all();
    for (size_t i = 0; i < all.size(); ++i) {
      if (i >= off_ && i < off_ + n_) continue;
      if (!same_bits(all[i], guard))
        return ::testing::AssertionFailure()
               << "guard element " << (long(i) - long(off_)) << " (relative to the payload of "
               << n_ << ") was overwritten with " << all[i];
    }
    return ::testing::AssertionSuccess();
  }

 private:
  size_t n_, off_;
  std::shared_ptr<void> mem_;
};

inline std::vector<float> random_floats(size_t n, Rng& rng) {
  std::vector<float> v(n);
  for (auto& x : v) x = rng.uniform(-1.f, 1.f);
  return v;
}

// An input array: payload uploaded, guards NaN.
inline std::unique_ptr<DevArray> input(const std::vector<float>& v, size_t misalign = 0) {
  auto d = std::make_unique<DevArray>(v.size(), misalign);
  d->upload(v, kNaN);
  return d;
}

// Any launch error of `what`, then wait for the device.
inline void finish(const char* what) {
  gpu::check_after(what);
  gpu::synchronize();
}

}  // namespace hpmc::testing
