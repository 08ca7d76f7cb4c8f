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
#pragma once

#include <memory>
#include <string>

#include "core/shape.h"
#include "core/tensor.h"

namespace hpmc {

class Loss {
 public:
  virtual ~Loss() = default;
  virtual const char* type() const = 0;  // the YAML name, e.g. "mse"
  virtual Device device() const = 0;
  virtual bool is_classifier() const = 0;
  // Target tensor for a prediction of shape pred: MSE wants float32 of the
  // same shape; cross-entropy int32 labels of shape (N,1,1,1).
  virtual DType target_dtype() const = 0;
  virtual void compute(const Tensor& pred, const Tensor& target, Tensor* dpred, Tensor& acc) = 0;
  // Throw any input error the device found since the last check (a GPU loss
  // cannot throw from a kernel without a sync per step). The trainer calls it
  // where it reads the accumulator anyway; a CPU loss throws in compute().
  virtual void check_status() {}
};

using LossPtr = std::shared_ptr<Loss>;

}  // namespace hpmc
