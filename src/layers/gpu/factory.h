// factory.h — how the rest of hpmc creates GPU layers, losses and kernels
// without seeing any CUDA type. Implemented in src/layers/gpu/*.cu; a build
// without CUDA links factory_nocuda.cpp instead, whose functions throw a
// RuntimeError that says the binary has no GPU support.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "layers/conv2d_spec.h"
#include "layers/cpu/maxpool2d.h"
#include "layers/layer.h"
#include "layers/linear_spec.h"
#include "layers/loss.h"
#include "model/impl.h"

namespace hpmc::gpu {

// impl is kNaive, kTiled or kIm2col: the Conv2D and GEMM kernels to use.
LayerPtr make_conv2d(const std::string& name, const Conv2dConfig& cfg, Impl impl);
LayerPtr make_linear(const std::string& name, const LinearConfig& cfg, Impl impl);
LayerPtr make_relu(const std::string& name);
LayerPtr make_maxpool2d(const std::string& name, const MaxPool2dConfig& cfg);
LayerPtr make_upsample2d(const std::string& name, int scale);
LayerPtr make_flatten(const std::string& name);
LossPtr make_mse_loss();
LossPtr make_softmax_ce_loss();

// SGD over the whole device buffers (PyTorch semantics, see model/sgd.h).
void sgd_step(float* params, const float* grads, float* momentum, size_t n, float lr,
              float momentum_factor, float weight_decay);

// Gather samples idx[0..n) (a device array) of a uint8 NCHW dataset on the
// device into float32 x (scaled by 1/255) and, if non-null, int32 labels.
void gather_batch(const uint8_t* images, const int32_t* labels, size_t sample_elems,
                  const int32_t* idx, int n, float* x, int32_t* y);

}  // namespace hpmc::gpu
