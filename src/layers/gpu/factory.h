// factory.h — the GPU kernels the rest of hpmc calls without seeing any CUDA
// type (GPU layers and losses are created through the registry,
// model/registry.h, which gpu::register_layers() fills). Implemented in
// src/layers/gpu/*.cu; a build without CUDA links factory_nocuda.cpp instead,
// whose functions throw a UsageError that says the binary has no GPU support.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace hpmc::gpu {

// SGD over the whole device buffers (PyTorch semantics, see model/sgd.h).
void sgd_step(float* params, const float* grads, float* momentum, size_t n, float lr,
              float momentum_factor, float weight_decay);

// Gather samples idx[0..n) (a device array) of a uint8 NCHW dataset on the
// device into float32 x (scaled by 1/255) and, if non-null, int32 labels.
void gather_batch(const uint8_t* images, const int32_t* labels, size_t sample_elems,
                  const int32_t* idx, int n, float* x, int32_t* y);

}  // namespace hpmc::gpu
