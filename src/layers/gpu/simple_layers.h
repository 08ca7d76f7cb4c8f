// simple_layers.h — the parameter-free GPU layers: ReLU, MaxPool2D,
// UpSample2D and Flatten. No CUDA type appears here; the kernels
// live in simple_layers.cu, and a CUDA-less build never compiles or links
// these classes (the factory in factory.h is the only way in).
//
// Each one matches its CPU class (layers/cpu) bit for bit, because each
// output element is computed by the same float operations in the same order:
//   ReLU       y = x < 0 ? 0 : x (NaN passes); dx = x > 0 ? dy : 0.
//   MaxPool2D  the window's first maximum in row-major order (the first NaN
//              if any, so NaN propagates). Backward with overlapping windows
//              (stride < kernel) is a GATHER, one thread per dx element: it
//              visits, in row-major window order, every window that contains
//              the element and adds that window's dy when the window's
//              (recomputed) first maximum is this element — the additions the
//              CPU's scatter performs on that element, in the same order,
//              starting from 0. No atomics, so it is deterministic. Without
//              overlap (stride ≥ kernel) each element gets at most one term:
//              one thread per window writes 0 + dy at its first maximum and 0
//              on the rest of its cell.
//              With the mask of a ReLU before it (simple_kernels.h, run by a
//              fused layer), backward writes x > 0 ? v : 0 for each dx value
//              v, x its own input (the ReLU's output): the ReLU's backward,
//              whose mask reads the ReLU's input, gives the same, as
//              relu(u) > 0 ⇔ u > 0.
//   UpSample2D nearest: forward copies; backward sums each s×s block of dy
//              in row-major order from 0; with a ReLU's mask, x > 0 ? sum : 0
//              (as MaxPool2D). Bilinear: the kernels of resample_kernels.h (a
//              gather backward, bit-equal to the CPU's).
// The common shapes (ReLU always, MaxPool 2×2 stride 2, UpSample ×2) run
// float4 kernels with the same arithmetic; simple_layers.cu lists them. The
// kernels are also host functions (simple_kernels.h), which the layers call.
//   Flatten    a device-to-device copy (forward y ← x, backward dx ← dy).
// Schemas, shapes, config checks and describe() come from the spec classes
// (layers/pool_spec.h, layers/activation_spec.h), shared with the CPU
// classes. All kernels run on the default stream; dx is overwritten and a
// null dx skips the backward pass (layer.h).
#pragma once

#include <string>

#include "layers/activation_spec.h"
#include "layers/layer.h"
#include "layers/pool_spec.h"

namespace hpmc::gpu {

class ReLUGPU : public LayerGPU<ReLUSpec> {
 public:
  using LayerGPU::LayerGPU;

 protected:
  void forward_impl(const Tensor& x, Tensor& y) override;
  void backward_impl(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;
};

class MaxPool2dGPU : public LayerGPU<MaxPool2dSpec> {
 public:
  using LayerGPU::LayerGPU;

 protected:
  void forward_impl(const Tensor& x, Tensor& y) override;
  void backward_impl(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;
};

class UpSample2dGPU : public LayerGPU<UpSample2dSpec> {
 public:
  using LayerGPU::LayerGPU;

 protected:
  void forward_impl(const Tensor& x, Tensor& y) override;
  void backward_impl(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;
};

class FlattenGPU : public LayerGPU<FlattenSpec> {
 public:
  using LayerGPU::LayerGPU;

 protected:
  void forward_impl(const Tensor& x, Tensor& y) override;
  void backward_impl(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;
};

}  // namespace hpmc::gpu
