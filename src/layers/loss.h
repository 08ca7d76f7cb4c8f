// loss.h — losses: a scalar of a prediction and a target, with its gradient.
//
// compute() works on a batch of N samples and:
//   * ADDS the SUM over the batch of per-sample losses to acc[0] and, for a
//     classifier, the number of correct argmax predictions to acc[1]
//     (acc is a float64 tensor of shape (2,1,1,1) on the loss's device, so a
//     GPU loss can accumulate an epoch without a host copy);
//   * if dpred is non-null, OVERWRITES it with d(mean loss over the batch)/d pred.
// Reductions match PyTorch's defaults: MSE is the mean over every element
// (the per-sample loss is the mean over that sample's elements), softmax
// cross-entropy the mean over the batch.
//
// A loss is defined once (loss_list.h): a device-neutral spec class derived
// from Loss (NameSpec: schema, with the rule for which models it fits) and,
// through LossCPU<NameSpec> / LossGPU<NameSpec>, a CPU and a GPU class that add
// only compute_impl. compute() is the checked front door: devices, dtypes and
// shapes of every tensor are verified before compute_impl runs.
#pragma once

#include <memory>
#include <string>

#include "core/shape.h"
#include "core/tensor.h"
#include "layers/schema.h"

namespace hpmc {

class Loss {
 public:
  virtual ~Loss() = default;
  virtual const LossSchema& schema() const = 0;
  const char* type() const { return schema().type.c_str(); }  // the YAML name, e.g. "mse"
  LossKind kind() const { return schema().kind; }
  virtual Device device() const = 0;
  bool is_classifier() const { return schema().classifier; }
  // The target for a prediction of shape (N, ...): a classifier wants int32
  // labels of shape (N,1,1,1), every other loss float32 of the prediction's
  // shape.
  DType target_dtype() const { return is_classifier() ? DType::kI32 : DType::kF32; }

  // Checks pred (float32; a classifier's (N, K, 1, 1)), target, dpred (the
  // prediction's shape) and acc (float64 (2,1,1,1)), all on device(), then
  // runs compute_impl.
  void compute(const Tensor& pred, const Tensor& target, Tensor* dpred, Tensor& acc);
  // Throw any input error the device found since the last check (a GPU loss
  // cannot throw from a kernel without a sync per step). The trainer calls it
  // where it reads the accumulator anyway; a CPU loss throws in compute().
  virtual void check_status() {}

 protected:
  virtual void compute_impl(const Tensor& pred, const Tensor& target, Tensor* dpred,
                            Tensor& acc) = 0;

 private:
  void check_tensor(const Tensor& t, DType dtype, const char* what) const;
};

using LossPtr = std::shared_ptr<Loss>;

// What pins a loss's spec to a device (as LayerCPU / LayerGPU for layers).
template <class Spec>
class LossCPU : public Spec {
 public:
  using Spec::Spec;
  Device device() const override { return Device::kCPU; }
};

template <class Spec>
class LossGPU : public Spec {
 public:
  using Spec::Spec;
  Device device() const override { return Device::kGPU; }
};

}  // namespace hpmc
