// factory.h — the GPU kernels the rest of hpmc calls without seeing any CUDA
// type (GPU layers and losses are created through the registry,
// model/registry.h, which gpu::register_layers() fills). Implemented in
// src/layers/gpu/*.cu; a build without CUDA links factory_nocuda.cpp instead,
// whose functions throw a UsageError that says the binary has no GPU support.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "layers/fused_spec.h"
#include "layers/schema.h"

namespace hpmc::gpu {

// A fused layer of these steps (layers/fused_spec.h; gpu::FusedChainGPU in
// fused_chain.cu), for the GPU rewrite (model/gpu_rewrite.h).
LayerPtr make_fused_layer(std::vector<ChainStep> steps);

// SGD over the whole device buffers (PyTorch semantics, see model/sgd.h).
void sgd_step(float* params, const float* grads, float* momentum, size_t n, float lr,
              float momentum_factor, float weight_decay);

// Gather samples idx[0..n) (a device array) of a uint8 NCHW dataset on the
// device into float32 x (scaled by 1/255) and, if non-null, int32 labels.
void gather_batch(const uint8_t* images, const int32_t* labels, size_t sample_elems,
                  const int32_t* idx, int n, float* x, int32_t* y);
// The same from a float32 dataset (npy): the values are copied as they are.
void gather_batch(const float* images, const int32_t* labels, size_t sample_elems,
                  const int32_t* idx, int n, float* x, int32_t* y);

// The training-time input transforms of data/augment_ops.h on device arrays
// (the checked front doors are in data/augment.h). augment_batch: y = the
// flip/crop of the n samples of c×h×w in x (x and y must not overlap), sample
// i drawn as batch position first + i.
void augment_batch(const float* x, float* y, int n, int c, int h, int w, bool hflip, int pad,
                   uint64_t key, uint64_t step, uint64_t first);
// y[t] = fma(std, z(base + t), x[t]) for t < count (x == y allowed).
void gaussian_noise(const float* x, float* y, size_t count, float std, uint64_t key,
                    uint64_t step, uint64_t base);
// y[t] = x[t], or 0 where draw base + t falls below `threshold` (x == y allowed).
void mask_noise(const float* x, float* y, size_t count, uint64_t threshold, uint64_t key,
                uint64_t step, uint64_t base);
// x[i] *= s for i < n (the trainer's loss-gradient weights, model/trainer.h).
void scale(float* x, size_t n, float s);

}  // namespace hpmc::gpu
