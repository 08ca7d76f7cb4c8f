// scratch.h — a grow-only device buffer for kernel workspaces (partial sums
// of the block-level reductions), so they are not cudaMalloc'ed per call.
//
// Use from the host thread that issues the work, on the default stream: a
// later kernel that reuses the buffer is ordered after the earlier kernels
// that read it. Growing synchronizes the device before freeing the old
// block, so no queued kernel can still be using it. Not thread-safe.
#pragma once

#include <cstddef>

namespace hpmc::gpu {

class DeviceScratch {
 public:
  DeviceScratch() = default;
  ~DeviceScratch();  // frees the block; errors at process exit are ignored
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;

  // A device pointer to at least `count` floats (contents undefined; nullptr
  // for count 0). Valid until the next call that has to grow the buffer.
  float* floats(size_t count);
  size_t capacity_bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace hpmc::gpu
