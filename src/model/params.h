// params.h — every trainable parameter of a model in one contiguous buffer.
//
// The store asks each layer for its ParamSpecs, lays the tensors out one
// after another (each starting on a 64-float boundary so vector and GPU loads
// stay aligned; the gaps are zero and stay zero), allocates two parallel
// buffers of the same size — parameters and gradients — and binds every
// layer to its slots by offset. The optimizer (optim/optimizer.h) keeps its
// state in buffers of the same layout; a step is one pass over the buffers,
// a checkpoint one write.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "layers/layer.h"

namespace hpmc {

struct ParamEntry {
  std::string name;  // "<layer>.<param>", e.g. "conv1.weight" (Layer::param_prefix)
  std::vector<int> dims;
  size_t offset = 0;  // in floats from the start of the buffers
  size_t count = 0;
  int fan_in = 1;
  Init init = Init::kKaimingUniform;
  float value = 0;  // Init::kConstant
};

class ParamStore {
 public:
  static constexpr size_t kAlignFloats = 64;

  // Lay out, allocate (zeroed) on `device` and bind every layer. Each
  // tensor must hold at most kMaxTensorElements values (Model::build checks);
  // the buffers themselves may hold more (they are shaped (padded / 64, 64)).
  void build(const std::vector<LayerPtr>& layers, Device device);
  // The buffer length build() would lay out for `layers`, in floats.
  static size_t layout_floats(const std::vector<LayerPtr>& layers);
  // PyTorch-style initialisation (see Init), deterministic from `seed`;
  // computed on the host and copied to the device once.
  void init(uint64_t seed);

  const std::vector<ParamEntry>& entries() const { return entries_; }
  // The layers' buffers ("<layer>.<buffer>"), offsets into buffers().
  const std::vector<ParamEntry>& buffer_entries() const { return buffer_entries_; }
  size_t total() const { return total_; }      // trainable values
  size_t padded() const { return padded_; }    // buffer length with gaps
  Device device() const { return device_; }

  Tensor& params() { return params_; }
  Tensor& grads() { return grads_; }
  const Tensor& params() const { return params_; }
  const Tensor& grads() const { return grads_; }
  Tensor& buffers() { return buffers_; }
  const Tensor& buffers() const { return buffers_; }

  // The layers' buffers to their initial values (init() does this too).
  void reset_buffers();

  // Zero the gradient buffer: done once per step (gradients accumulate).
  void zero_grads() { grads_.fill_zero(); }

 private:
  std::vector<ParamEntry> entries_, buffer_entries_;
  size_t total_ = 0, padded_ = 0;
  Device device_ = Device::kCPU;
  Tensor params_, grads_, buffers_;
};

}  // namespace hpmc
