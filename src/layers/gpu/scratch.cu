// scratch.cu — DeviceScratch: grow-only cudaMalloc'ed workspace.
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "layers/gpu/scratch.h"

namespace hpmc::gpu {

DeviceScratch::~DeviceScratch() {
  // At process exit the CUDA runtime may already be torn down; nothing
  // useful can be done with an error here.
  if (ptr_) (void)cudaFree(ptr_);
}

float* DeviceScratch::floats(size_t count) {
  if (count == 0) return nullptr;
  const size_t need = count * sizeof(float);
  if (need > bytes_) {
    // Grow by at least half again, so a slowly rising size does not
    // reallocate on every call.
    size_t want = need;
    if (bytes_ + bytes_ / 2 > want) want = bytes_ + bytes_ / 2;
    if (ptr_) {
      HPMC_CUDA_CHECK(cudaDeviceSynchronize());  // queued kernels may still read it
      HPMC_CUDA_CHECK(cudaFree(ptr_));
      ptr_ = nullptr;
      bytes_ = 0;
    }
    HPMC_CUDA_CHECK(cudaMalloc(&ptr_, want));
    bytes_ = want;
  }
  return static_cast<float*>(ptr_);
}

}  // namespace hpmc::gpu
