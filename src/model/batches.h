// batches.h — feeds mini-batches to a model on its own device.
//
// On the CPU it gathers samples from the host dataset. On the GPU the
// dataset is uploaded once, as it is held (uint8, a quarter of float32's
// size, or the float32 of an npy dataset), the
// epoch's order is uploaded once per epoch, and each batch is gathered on the
// device: a training step then makes no host<->device copy at all.
#pragma once

#include <vector>

#include "core/tensor.h"
#include "data/dataset.h"

namespace hpmc {

class BatchFeeder {
 public:
  // `sample` is the model's per-sample input shape; batches hold up to max_batch.
  BatchFeeder(const Dataset& data, Device device, int max_batch, const Shape& sample);

  // The order in which load() reads samples (indices into the dataset).
  void set_order(const std::vector<int32_t>& order);
  // Fill x() and labels() with order[begin .. begin + n).
  void load(int begin, int n);

  Tensor& x() { return x_; }
  Tensor& labels() { return labels_; }
  int size() const { return data_.size(); }
  int max_batch() const { return max_batch_; }
  const Dataset& data() const { return data_; }

  // On the GPU: the dataset as uploaded (uint8 images only, int32 labels) and the
  // device copy of the order, for kernels that gather a batch themselves.
  const uint8_t* device_images() const;
  const int32_t* device_labels() const;
  const int32_t* device_order() const;
  // Counts set_order() calls: what the order holds changes with it.
  uint64_t order_version() const { return order_version_; }

 private:
  const Dataset& data_;
  Device device_;
  int max_batch_;
  std::vector<int32_t> order_;
  uint64_t order_version_ = 0;
  Tensor images_dev_, labels_dev_, order_dev_;  // GPU only
  Tensor x_, labels_;
};

}  // namespace hpmc
